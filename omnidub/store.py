"""Line audio by key: the cache (verified by every reader), restoring it from intact segments, and placing each
line's audio at its segment name without ever overwriting a segment someone edited.

A cache entry is named ``<key>.<sha256 of its bytes>.wav``, so it carries its own hash: any reader (another
input sharing ``--cache``, a rerun, another host) checks the bytes against the name before trusting them, and a
damaged entry is never used or recorded as correct. Entries are written under a temporary name and renamed,
so concurrent writers never tear one.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import soundfile as sf

from omnidub.errors import OmnidubError
from omnidub.files import atomic_path, cannot_write, check_folder_writable, write_bytes_atomic
from omnidub.folder import OutputFolder
from omnidub.keys import file_digest
from omnidub.outputs.mix import container
from omnidub.plan import SEGMENT_FORMAT

_ENTRY = re.compile(rf"([0-9a-f]{{64}})\.([0-9a-f]{{64}})\.{SEGMENT_FORMAT}")


@dataclass(frozen=True)
class Stored:
    """A line's audio in the cache: where, its hash, and its length."""

    path: Path
    sha256: str
    seconds: float


def audio_problem(path: Path, seconds: float, sha256: str | None = None) -> str | None:
    """Why the audio file at ``path`` cannot stand for a line of ``seconds`` (None: it can): its length must be
    the line's exact length, and its bytes the given hash (without one, every sample must be a number)."""
    try:
        info = sf.info(str(path))
    except (RuntimeError, OSError):
        return "not a readable audio file"
    expected = round(seconds * info.samplerate)
    if info.frames != expected:
        return f"{info.frames} samples where {expected} belong"
    if sha256 is not None:
        return None if file_digest(path).hexdigest() == sha256 else "its bytes differ from those written"
    try:
        audio, _ = sf.read(str(path), dtype="float32")
    except (RuntimeError, OSError):
        return "not a readable audio file"
    return None if len(audio) == expected and np.isfinite(audio).all() else "its samples do not decode"


def seconds_of(path: Path) -> float:
    """An audio file's length in seconds (to the millisecond, as the manifest keeps it)."""
    return round(sf.info(str(path)).duration, 3)


class LineStore:
    """The keyed line cache of one output folder (``.omnidub/cache``), or a cache shared by many (``--cache``),
    and the placing of cached audio at the folder's segment names."""

    def __init__(self, folder: OutputFolder, cache_dir: Path | None = None):
        self.folder = folder
        self.shared = cache_dir is not None
        self.dir = Path(cache_dir) if cache_dir is not None else folder.state / "cache"
        if self.shared and self.dir.exists() and not self.dir.is_dir():
            raise OmnidubError(f"--cache {self.dir} is a file, not a folder; give the folder of a line cache")
        self._index: dict[str, list[str]] | None = None
        self._verified: dict[str, tuple] = {}  # entries whose bytes this run checked: name -> (size, mtime, length)
        self.notes: list[str] = []

    # -- the cache ---------------------------------------------------------------------------------------
    def check_writable(self) -> None:
        """A shared cache (``--cache``) must take files (every render may write to it: new lines, restored ones):
        said before anything loads."""
        if self.shared:
            check_folder_writable(self.dir, "--cache")

    def _names(self, key: str) -> list[str]:
        if self._index is None:
            self._index = {}
            try:
                with os.scandir(self.dir) as found:
                    for item in found:
                        match = _ENTRY.fullmatch(item.name)
                        if match:
                            self._index.setdefault(match[1], []).append(item.name)
            except OSError:
                pass  # no cache yet
        return self._index.get(key, [])

    def find(self, key: str, seconds: float, *, repair: bool = False) -> tuple[Stored | None, str | None]:
        """The verified audio of ``key`` (and None), or None and why what was there cannot be used."""
        problem = None
        for name in list(self._names(key)):
            path = self.dir / name
            try:
                stat = path.stat()
                seen = (stat.st_size, stat.st_mtime_ns, seconds)
            except OSError:
                seen = None
            if seen is not None and self._verified.get(name) == seen:  # checked in this run and untouched since
                return Stored(path, name.split(".")[1], seconds_of(path)), None
            problem = audio_problem(path, seconds, name.split(".")[1])
            if problem is None:
                self._verified[name] = seen
                return Stored(path, name.split(".")[1], seconds_of(path)), None
            if repair:  # its bytes no longer match its own name: nothing can ever use it
                with contextlib.suppress(OSError):  # a read-only shared cache keeps it; nothing reads it as good
                    path.unlink(missing_ok=True)
                self._index[key].remove(name)
        return None, problem

    def put(self, key: str, audio: np.ndarray, sample_rate: int) -> Stored:
        """Store a line's audio under its key (its hash goes into its name)."""
        import io

        major, subtype = container(SEGMENT_FORMAT, len(audio))
        buffer = io.BytesIO()
        sf.write(buffer, np.asarray(audio, dtype=np.float32), sample_rate, format=major, subtype=subtype)
        return self._write(key, buffer.getvalue())

    def restore(self, key: str, segment: str, sha256: str, seconds: float, *, write: bool = True) -> Stored | None:
        """Put an intact segment back into the cache (only one holding the bytes omnidub recorded for the line);
        without ``write``, only say whether it could."""
        path = self.folder.path / segment
        if self.folder.status(segment) not in ("ours", "older") or audio_problem(path, seconds, sha256) is not None:
            return None
        return self._write(key, path.read_bytes()) if write else Stored(path, sha256, seconds_of(path))

    def _write(self, key: str, data: bytes) -> Stored:
        sha = hashlib.sha256(data).hexdigest()
        name = f"{key}.{sha}.{SEGMENT_FORMAT}"
        try:
            self.dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise cannot_write(self.dir / name, exc) or OmnidubError(
                f"cannot write the line cache {self.dir}: {exc.strerror or exc}"
            ) from exc
        write_bytes_atomic(self.dir / name, data)
        names = self._names(key)
        if name not in names:
            self._index.setdefault(key, names).append(name)
        return Stored(self.dir / name, sha, seconds_of(self.dir / name))

    def prune(self, keep: set[str]) -> None:
        """Remove entries of keys no line uses any more (a folder's own cache only: a shared one is never pruned)."""
        if self.shared:
            return
        self._names("")  # reads the index
        for key in [k for k in self._index if k not in keep]:
            for name in self._index.pop(key):
                (self.dir / name).unlink(missing_ok=True)

    # -- segments -----------------------------------------------------------------------------------------
    def place(self, stored: Stored, segment: str, *, replace_edit: bool = False) -> str | None:
        """Put a copy of ``stored`` at ``segment`` (a copy, so editing a segment never reaches the cache).

        A segment someone changed since omnidub wrote it is kept, and its name returned, unless
        ``replace_edit``: then the edit is moved aside (its new name is returned) and the line's audio placed."""
        status = self.folder.status(segment)
        dest = self.folder.path / segment
        if status == "ours" and self.folder.ledger.files[segment].sha256 == stored.sha256:
            return None
        if status == "changed":
            if not replace_edit:
                return segment
            moved = self.folder.set_aside(segment, "edited")
        else:
            self.folder.check_writable([segment])
            moved = None
        dest.parent.mkdir(parents=True, exist_ok=True)
        self.folder.intend([segment])
        with atomic_path(dest) as temp:
            shutil.copyfile(stored.path, temp)
        self.folder.record(segment, stored.sha256)
        return moved
