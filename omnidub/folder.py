"""The output folder's owner: its lock, the ledger of every file omnidub wrote in it, and the rules that keep
omnidub's hands off everything else.

omnidub keeps its own state in ``.omnidub/`` inside the folder: the lock, the ledger (``ledger.jsonl``: each
file it wrote, with the hash of what it wrote), the journal and, unless ``--cache`` points elsewhere, the line
cache. A file is omnidub's to replace or remove only while the ledger lists it and its content is still what
omnidub wrote; a file the ledger does not list, or one changed since, is the user's and is never touched.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from omnidub.errors import OmnidubError
from omnidub.files import (
    QA_MARKS,
    STATE,
    AppendLog,
    FolderLock,
    is_temporary,
    remove_debris,
    write_bytes_atomic,
    write_text_atomic,
)
from omnidub.journal import JOURNAL, Journal
from omnidub.keys import file_digest
from omnidub.models import EXPORT_MANIFEST
from omnidub.records import MANIFEST, LastRender, TranslationRecord, manifest_entries, read_json

LEDGER = "ledger.jsonl"
# The record of each kind of folder omnidub makes: one folder is one kind's, and no other kind writes there (a
# render's clean-up would delete an export's graphs or an extract's clips as files it no longer needs).
EXTRACT_RECORD = "extract.json"
TRANSLATE_RECORD = "translate.json"
HEARD_RECORD = "heard.json"  # a dub's voices/: the original as heard, for a person to correct
RECORDS = {
    MANIFEST: "a render",
    EXTRACT_RECORD: "a voices extract",
    EXPORT_MANIFEST: "an ONNX export",
    TRANSLATE_RECORD: "a translation",
    HEARD_RECORD: "a dub's original as heard",
}
LOCK = "lock"
QA_FILES = ("qa.json", "qa.html")
OLDER_LOCK = ".omnidub.lock"  # where omnidub kept its lock before it had a state folder


@dataclass(frozen=True)
class Written:
    """What the ledger knows of a file omnidub wrote: its hash (None while a write was under way), size and time."""

    sha256: str | None
    size: int | None = None
    mtime_ns: int | None = None


class Ledger:
    """Every file omnidub wrote in a folder (relative path -> what it wrote), kept as an append-only log."""

    def __init__(self, path: Path):
        self.log = AppendLog(path)
        self.files: dict[str, Written] = {}
        for record in self.log.records():
            path_ = record.get("path") if isinstance(record, dict) else None
            if not isinstance(path_, str) or not _inside(path_):
                continue
            if record.get("removed"):
                self.files.pop(path_, None)
            else:
                sha = record.get("sha256")
                self.files[path_] = Written(
                    sha if isinstance(sha, str) else None, record.get("size"), record.get("mtime_ns")
                )

    def intend(self, relative: str) -> None:
        """Say a write is about to start: a crash leaves the file recognisably omnidub's (content unknown)."""
        if self.files.get(relative) != Written(None):
            self.files[relative] = Written(None)
            self.log.append({"path": relative, "sha256": None})

    def record(self, relative: str, path: Path, sha256: str | None = None) -> None:
        """Record what a finished write left at ``path`` (hashed here unless the caller knows the hash)."""
        stat = path.stat()
        sha = sha256 or file_digest(path).hexdigest()
        written = Written(sha, stat.st_size, stat.st_mtime_ns)
        if self.files.get(relative) != written:
            self.files[relative] = written
            self.log.append({"path": relative, "sha256": sha, "size": stat.st_size, "mtime_ns": stat.st_mtime_ns})

    def forget(self, relative: str) -> None:
        if self.files.pop(relative, None) is not None:
            self.log.append({"path": relative, "removed": True})

    def compact(self) -> None:
        """Rewrite the log with one record per file (it only grows while a run appends)."""
        self.log.close(quietly=True)
        lines = [
            json.dumps({"path": p, "sha256": w.sha256, "size": w.size, "mtime_ns": w.mtime_ns})
            for p, w in sorted(self.files.items())
        ]
        write_text_atomic(self.log.path, "".join(line + "\n" for line in lines))

    def close(self) -> None:
        self.log.close(quietly=True)


class OutputFolder:
    """One output folder: who may write in it, what omnidub wrote there, and the lock that keeps runs apart.

    ``record`` is the file whose being omnidub's makes the folder omnidub's (a render's manifest, an extract's
    report, an export's export.json); its ``input`` field (``input_key``) names what the folder was made from.
    ``others`` is the flag that lets omnidub write beside other files (None: none does); ``flag`` how the user
    names another folder ("--out"; None where the command cannot, as qa); ``older`` finds the files an omnidub
    without a ledger wrote there (None: such folders are not taken over)."""

    def __init__(
        self,
        path: Path,
        *,
        record: str = MANIFEST,
        others: str | None = "--allow-other-files",
        flag: str | None = "--out",
        input_key: str = "input",
        made: str = "a render of",
        older: Callable[[Path], set[str]] | None = None,
    ):
        self.path = Path(path)
        self.mark = record
        self.others = others
        self.flag = flag
        self.input_key, self.made = input_key, made
        self.older = older if older is not None else (older_render if record == MANIFEST else None)
        self.state = self.path / STATE
        self.lock = FolderLock(self.state / LOCK)
        self.ledger: Ledger | None = None
        self._older: set[str] | None = None  # files an older omnidub's record vouches for
        self._created: list[Path] = []  # folders this run made, removed again if it leaves nothing in them

    # -- what is there ------------------------------------------------------------------------------------
    def status(self, relative: str) -> str:
        """``absent``; ``ours`` (omnidub wrote what is there); ``unfinished`` (omnidub was writing it when a run
        stopped); ``changed`` (omnidub wrote it, someone changed it since); ``older`` (an older omnidub without a
        ledger wrote it, as its manifest shows); ``foreign`` (omnidub never wrote it)."""
        path = self.path / relative
        if not path.exists() and not path.is_symlink():
            return "absent"
        written = self._ledger().files.get(relative)
        if path.is_symlink() or not path.is_file():
            return "foreign"
        if written is None:
            return "older" if relative in self._vouched() else "foreign"
        if written.sha256 is None:
            return "unfinished"
        stat = path.stat()
        if stat.st_size == written.size and stat.st_mtime_ns == written.mtime_ns:
            return "ours"
        return "ours" if file_digest(path).hexdigest() == written.sha256 else "changed"

    def owns(self, relative: str) -> bool:
        """Whether the file is omnidub's and holds exactly what omnidub wrote."""
        return self.status(relative) == "ours"

    def _ledger(self) -> Ledger:
        if self.ledger is None:
            self.ledger = Ledger(self.state / LEDGER)
        return self.ledger

    def manifest(self) -> dict | None:
        """The folder's manifest when omnidub wrote it (a manifest.json of anything else is not read)."""
        # "unfinished": a run stopped between announcing the write and recording it; the write itself is atomic,
        # so what is there is a whole file omnidub wrote.
        if self.status(self.mark) not in ("ours", "older", "changed", "unfinished"):
            return None
        return read_json(self.path, self.mark)

    def last_render(self) -> LastRender:
        """What the folder's last render recorded (its manifest, when omnidub wrote it, and its journal), typed."""
        return LastRender.parse(self.manifest(), Journal(self.path / JOURNAL).entries())

    # -- claiming ----------------------------------------------------------------------------------------
    def claim(self, input_path: Path | None, *, allow_other_files: bool = False, doing: str | None = None) -> None:
        """Make the folder this render's, before anything slow starts: refuse a folder of someone else's files
        (unless ``allow_other_files``) or another input's render, lock it, and clear what a killed write left.
        ``doing``: what others are told holds it (default: the command line)."""
        self._check_owner(input_path, allow_other_files)
        self._make_state()
        try:
            taken = self.lock.acquire(doing=doing)
        except OmnidubError:
            self.release()  # nothing of this run stays behind
            raise
        if not taken:
            holder = self.lock.holder()
            what = f"another omnidub run ({holder})" if holder else "omnidub qa"
            self.release()
            raise OmnidubError(f"{self.path} is in use by {what}; wait for it{self._or_another(' or choose another')}")
        self.ledger = None  # read again under the lock: a run that just finished may have written
        self._check_owner(input_path, allow_other_files)
        self._adopt_older_render()
        older = self.path / OLDER_LOCK
        if _older_lock(older):
            holder = FolderLock(older)
            if not holder.acquire():
                self.release()
                raise OmnidubError(f"{self.path} is in use by an older omnidub run ({holder.holder()}); wait for it")
            holder.release()  # and the file goes with it

    def check(self, input_path: Path | None, *, allow_other_files: bool = False) -> None:
        """What :meth:`claim` would refuse of the folder as it is now, said without locking or writing anything
        (a dry run refuses what the render would)."""
        self._check_owner(input_path, allow_other_files)

    def share(self, writes=()) -> None:
        """Hold the folder for reading and writing reports beside a render's outputs (QA): several readers may
        share it; a render in progress keeps them out, and they keep a render out. Each of ``writes`` (the
        reports it will write) must be absent or omnidub's: refused now, before any work."""
        if not self.path.is_dir():
            raise OmnidubError(f"{self.path}: no such folder")
        self._make_state()
        if not self.lock.acquire(shared=True):
            holder = self.lock.holder()
            self.release()
            raise OmnidubError(
                f"a render is running in {self.path}"
                + (f" ({holder})" if holder else "")
                + "; run qa when it has finished"
            )
        self.ledger = None
        try:
            self.check_writable(writes)
        except OmnidubError:
            self.release()
            raise

    def _make_state(self) -> None:
        try:
            self._make(self.path)
            self._make(self.state)
        except OSError as exc:
            raise OmnidubError(f"cannot write the output folder {self.path}: {exc.strerror or exc}") from exc

    def _check_owner(self, input_path: Path | None, allow_other_files: bool) -> None:
        if not self.path.exists():
            return
        if not self.path.is_dir():
            raise OmnidubError(f"{self.flag + ' ' if self.flag else ''}{self.path} is a file, not a folder")
        other = next((name for name in RECORDS if name != self.mark and name in self._ledger().files), None)
        if other is not None:
            raise OmnidubError(
                f"{self.path} holds {RECORDS[other]} ({other}), not {RECORDS.get(self.mark, 'this')}"
                f"{self._or_another('; choose another')}"
            )
        manifest = self.manifest()
        if manifest is None:
            stranger = _first_stranger(self.path, set(self._ledger().files))
            # A record omnidub wrote that no longer reads (cut short by a full disk, say) is still omnidub's: the
            # run writes it anew, and the damaged one is moved aside then.
            if (self.path / self.mark).exists() and self.mark not in self._ledger().files:
                article = "an" if self.mark[0] in "aeiou" else "a"
                raise OmnidubError(
                    f"{self.path} holds {article} {self.mark} that omnidub did not write"
                    f"{self._or_another('; choose another')} (omnidub never replaces a file it did "
                    "not write)"
                )
            if stranger is not None and not allow_other_files:
                beside = f", or pass {self.others} to write beside them (they are never touched)" if self.others else ""
                raise OmnidubError(
                    f"{self.path} holds files omnidub did not write (e.g. {stranger})"
                    f"{self._or_another('; choose an empty')}{beside}"
                )
            return
        other = manifest.get(self.input_key)
        if (
            input_path is not None
            and isinstance(other, str)
            and other
            and Path(other).exists()
            and Path(other).resolve() != Path(input_path).resolve()
        ):
            raise OmnidubError(
                f"{self.path} holds {self.made} {other}, not {input_path}{self._or_another('; choose another')}"
            )

    def _or_another(self, lead: str) -> str:
        """How a message offers another folder (``lead`` "; choose another" -> "; choose another folder with
        --out"), or "" where the command has no way to name one."""
        if not self.flag:
            return ""
        return f"{lead} folder with {self.flag}" if self.flag.startswith("-") else f"{lead} {self.flag}"

    def _vouched(self) -> set[str]:
        if self._older is None:
            # Only a folder whose record omnidub's ledger does not know can be an older omnidub's.
            known = self.older is None or self.mark in self._ledger().files
            self._older = set() if known else self.older(self.path)
        return self._older

    def _adopt_older_render(self) -> None:
        """A folder rendered by an omnidub without a ledger: take over the files its manifest vouches for."""
        if not self._vouched():
            return
        for relative in sorted(self._vouched()):
            self.ledger.record(relative, self.path / relative)

    def _make(self, folder: Path) -> None:
        missing = []
        probe = folder
        while not probe.exists():
            missing.append(probe)
            probe = probe.parent
        folder.mkdir(parents=True, exist_ok=True)
        self._created += [p for p in reversed(missing) if p not in self._created]

    def clean_debris(self, *folders: Path) -> int:
        """Remove temporaries of killed writes here and in ``folders``; returns how many went."""
        found = {self.path, self.state, *(self.path / name for name in ("segments", "stems")), *folders}
        return sum(remove_debris(folder) for folder in found)

    def relative(self, path: Path | None) -> str | None:
        """Where ``path`` lies in this folder (a relative path), or None when it lies elsewhere."""
        if path is None:
            return None
        try:
            return Path(path).resolve().relative_to(self.path.resolve()).as_posix()
        except ValueError:
            return None

    # -- writing -----------------------------------------------------------------------------------------
    def check_writable(self, relatives) -> None:
        """Refuse (one line) when a file omnidub means to write is someone else's."""
        trouble = [r for r in relatives if self.status(r) == "foreign"]
        if trouble:
            more = f" (and {len(trouble) - 1} more)" if len(trouble) > 1 else ""
            raise OmnidubError(
                f"{self.path / trouble[0]} is in the way{more}: omnidub did not write it; move it "
                f"elsewhere{self._or_another(', or choose another')}"
            )

    def make_way(self, relatives) -> list[str]:
        """Before writing these files: refuse if one is someone else's; move aside (renamed
        ``<name>.changed-<hash>``) each that omnidub wrote and someone changed since, so no edit is ever
        overwritten; then announce the writes to the ledger. Returns the notes to say."""
        self.check_writable(relatives)
        notes = []
        for relative in relatives:
            if self.status(relative) == "changed":
                aside = self.set_aside(relative, "changed")
                notes.append(f"{relative} was changed after omnidub wrote it; it was moved to {aside} and written anew")
            self._ledger().intend(relative)
        return notes

    def set_aside(self, relative: str, label: str) -> str:
        """Rename a file out of omnidub's way (``<stem>.<label>-<hash><suffix>``); it is no longer omnidub's."""
        path = self.path / relative
        aside = path.with_name(f"{path.stem}.{label}-{file_digest(path).hexdigest()[:8]}{path.suffix}")
        os.replace(path, aside)
        self._ledger().forget(relative)
        return aside.relative_to(self.path).as_posix()

    def written(self, under: str = "") -> set[str]:
        """The files the ledger says omnidub wrote here (those whose path starts with ``under``)."""
        return {relative for relative in self._ledger().files if relative.startswith(under)}

    def intend(self, relatives) -> None:
        """Record that these files are about to be written (after :meth:`check_writable`)."""
        for relative in relatives:
            self._ledger().intend(relative)

    def record(self, relative: str, sha256: str | None = None) -> None:
        """Record a file omnidub has just written."""
        self._ledger().record(relative, self.path / relative, sha256)

    def write_bytes(self, relative: str, data: bytes) -> list[str]:
        """Write a whole file of omnidub's (checked, an edit moved aside, recorded); returns notes."""
        notes = self.make_way([relative])
        write_bytes_atomic(self.path / relative, data)
        self.record(relative)
        return notes

    def write_text(self, relative: str, text: str) -> list[str]:
        """Write a whole text file of omnidub's (UTF-8; see :meth:`write_bytes`); returns notes."""
        return self.write_bytes(relative, text.encode("utf-8"))

    def remove_stale(self, keep: set[str]) -> list[str]:
        """Remove the files omnidub wrote here that ``keep`` no longer names; a file changed since omnidub wrote
        it is left where it is. Returns those left."""
        return self.discard(sorted(set(self._ledger().files) - set(keep) - {self.mark}))

    def discard(self, relatives) -> list[str]:
        """Remove these files where they are omnidub's and hold what it wrote (anything else is never touched);
        returns those left because someone changed them since omnidub wrote them."""
        left = []
        for relative in relatives:
            status = self.status(relative)
            if status in ("ours", "unfinished"):
                (self.path / relative).unlink(missing_ok=True)
            elif status == "changed":
                left.append(relative)
                continue
            elif status != "absent" and relative not in self._ledger().files:
                continue  # not omnidub's (an older omnidub's file it vouches for stays, as anything else)
            self._ledger().forget(relative)
        return left

    # -- letting go --------------------------------------------------------------------------------------
    def release(self) -> None:
        """Let go of the folder: compact the ledger, drop the lock, and remove folders this run made but left
        empty (a run that failed before writing anything leaves no skeleton behind)."""
        alone = self.lock.held and not self.lock.shared  # no other run can be appending to the ledger
        if self.ledger is not None:
            if alone and self.ledger.files:
                try:
                    self.ledger.compact()
                except OmnidubError:
                    pass  # a full disk: the log as appended still holds every record
            self.ledger.close()
        if alone and not self._ledger().files:
            (self.state / LEDGER).unlink(missing_ok=True)
        self.lock.release()
        for folder in reversed(self._created):
            try:
                folder.rmdir()
            except OSError:
                pass  # not empty: something was written there
        self._created = []


def render_input(folder: Path) -> Path | None:
    """The input whose render the folder holds (resolved), from omnidub's own manifest there; None when it holds
    none (reading changes nothing)."""
    manifest = OutputFolder(folder).manifest() if Path(folder).is_dir() else None
    recorded = manifest.get("input") if manifest else None
    return Path(recorded).resolve() if isinstance(recorded, str) and recorded else None


def _inside(relative: str) -> bool:
    # Paths come from files on disk: none may lead out of the output folder.
    path = Path(relative)
    return bool(relative) and not path.is_absolute() and ".." not in path.parts


def _older_lock(path: Path) -> bool:
    """Whether ``path`` is the lock file of an omnidub that kept it beside the outputs."""
    try:
        return path.is_file() and path.read_text(encoding="utf-8", errors="replace").startswith("pid ")
    except OSError:
        return False


def _first_stranger(folder: Path, written: set[str]) -> str | None:
    """A file in ``folder`` that omnidub's own state does not explain (None when there is none): not in its
    state folder, not one of its temporaries, not a file it wrote (a first run that was killed leaves those)."""
    for path in sorted(folder.rglob("*")):
        relative = path.relative_to(folder)
        if path.is_dir() or relative.parts[0] == STATE or is_temporary(path.name) or relative.as_posix() in written:
            continue
        if relative.as_posix() == OLDER_LOCK and _older_lock(path):
            continue
        return relative.as_posix()
    return None


def older_render(folder: Path) -> set[str]:
    """The files a render by an omnidub without a ledger wrote in ``folder``, as its manifest proves them."""
    manifest = _older_manifest(folder)
    return _older_files(folder, manifest) | {MANIFEST} if manifest is not None else set()


def _older_manifest(folder: Path) -> dict | None:
    """The manifest of a render by an omnidub that kept no ledger, when its own records prove it: it has an
    omnidub manifest's shape and at least one segment still holds the bytes it recorded."""
    manifest = read_json(folder)
    if not (manifest and isinstance(manifest.get("omnidub"), str) and isinstance(manifest.get("settings"), dict)):
        return None
    for entry in manifest_entries(manifest):
        path = folder / entry.file
        if entry.sha256 and _inside(entry.file) and path.is_file() and file_digest(path).hexdigest() == entry.sha256:
            return manifest
    return None


def _older_files(folder: Path, manifest: dict) -> set[str]:
    """The files an older render's manifest vouches for: segments and cached audio whose bytes match its
    records, the outputs it lists, and QA reports carrying omnidub's mark."""
    files = set()
    for entry in manifest_entries(manifest):
        for relative in (entry.file, f".cache/{entry.key}.wav", f".cache/{entry.base_key}.wav"):
            path = folder / relative
            if _inside(relative) and path.is_file() and entry.sha256 and file_digest(path).hexdigest() == entry.sha256:
                files.add(relative)
    stems = manifest.get("stems")
    listed = list(stems.values()) if isinstance(stems, dict) else []
    listed.append(manifest.get("mix"))
    delivery = manifest.get("delivery") if isinstance(manifest.get("delivery"), dict) else {}
    for key in ("bed_mix", "video", "subtitles", "timelines"):
        value = delivery.get(key)
        listed += value if isinstance(value, list) else [value]
    files.update(p for p in listed if isinstance(p, str) and _inside(p) and (folder / p).is_file())
    for name in QA_FILES:
        try:
            head = (folder / name).read_text(encoding="utf-8", errors="replace")[:4096]
        except OSError:
            continue
        if any(mark in head for mark in QA_MARKS):
            files.add(name)
    return files


def read_translation(input_path) -> "TranslationRecord | None":
    """omnidub translate's report on the translation a render was made from (translate.json beside the input, as
    omnidub wrote it: one someone changed is not believed), or None."""
    from omnidub.records import TranslationRecord

    if not input_path:
        return None
    folder = OutputFolder(Path(input_path).parent, record=TRANSLATE_RECORD)
    if folder.status(TRANSLATE_RECORD) != "ours":
        return None
    return TranslationRecord.parse(read_json(folder.path, TRANSLATE_RECORD))
