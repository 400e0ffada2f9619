"""Where a model comes from: a hub id, a local checkpoint folder, a synthetic checkpoint or an ONNX export.

Resolving a model never imports torch: a dry run and a fully cached rerun need its identity, not its weights.
A plan resolves with ``download=False``: from the local cache only, never the network, never transformers.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import logging
import os
import re
import sys
import warnings
from dataclasses import dataclass
from pathlib import Path

from omnidub.errors import OmnidubError

DEFAULT_MODEL = "k2-fsa/OmniVoice"
SYNTHETIC_PREFIX = "synthetic:"
EXPORT_MANIFEST = "export.json"
_HUB_ID = re.compile(r"^[\w.-]+/[\w.-]+$")


class NotDownloaded(OmnidubError):
    """The model is not on this machine yet (a hub model not downloaded, a synthetic one not built): a render
    would fetch or build it; a plan cannot say which lines are cached."""


@dataclass(frozen=True)
class ModelSource:
    """A resolved ``--model``: ``path`` is a local folder; ``backend`` is torch or onnx."""

    spec: str
    path: Path
    synthetic: str | None = None
    revision: str | None = None
    backend: str = "torch"

    @property
    def identity(self) -> dict:
        """What identifies the weights, for cache keys and the manifest."""
        return {"id": self.spec, "revision": self.revision, "synthetic": self.synthetic}


def resolve_model(spec: str = DEFAULT_MODEL, *, download: bool = True) -> ModelSource:
    """Turn ``--model`` into a local folder: find or build a synthetic checkpoint, or find/download a hub snapshot.

    With ``download=False`` (plans) nothing is fetched or built: a hub model comes from the local cache alone and
    NotDownloaded says when it is not there."""
    if spec.startswith(SYNTHETIC_PREFIX):
        from omnidub.synthetic import synthetic_folder

        name = spec[len(SYNTHETIC_PREFIX) :]
        path = synthetic_folder(name)
        if not (path / "config.json").is_file():
            if not download:
                raise NotDownloaded(f"{spec} is not built yet (the first render builds it)")
            from omnidub.synthetic import build_synthetic

            with quiet():
                path = build_synthetic(name)
        # The folder name carries the recipe version, so a new recipe invalidates what the old one rendered.
        return ModelSource(spec=spec, path=path, synthetic=name, revision=path.name)
    local = Path(spec).expanduser()
    if local.is_dir():
        if (local / EXPORT_MANIFEST).is_file():
            return ModelSource(
                spec=str(local.resolve()), path=local.resolve(), revision=export_identity(local), backend="onnx"
            )
        if not (local / "config.json").is_file():
            raise OmnidubError(
                f"{spec} is not an OmniVoice checkpoint folder (no config.json) nor an omnidub export "
                f"(no {EXPORT_MANIFEST})"
            )
        return ModelSource(spec=str(local.resolve()), path=local.resolve(), revision=_fingerprint(local))
    if not _HUB_ID.match(spec):
        raise OmnidubError(f"model folder not found: {spec}")
    from omnidub.inventory import imported, imported_revision

    copied = imported("tts", spec)  # brought from another machine by `omnidub models import`
    if copied is not None:
        return ModelSource(spec=spec, path=copied, revision=imported_revision(copied) or _fingerprint(copied, False))
    path = _download(spec) if download else _cached(spec)
    return ModelSource(spec=spec, path=path, revision=_snapshot_revision(path))


# Licences of weights whose model card a folder may lack. OmniVoice's code is Apache-2.0; its released weights are
# CC-BY-NC-4.0 (its model card; upstream issues #60, #235, #258): what they make is for non-commercial use only.
KNOWN_LICENCES = {DEFAULT_MODEL: "cc-by-nc-4.0"}
_CARD_LICENCE = re.compile(r"^license:\s*['\"]?([\w.+-]+)", re.MULTILINE)
LICENCE_NOTICE = (
    "{model}'s weights are licensed {licence}: what they make may not be used commercially (paid dubbing "
    "included) without the rights holders' permission; OmniVoice's code and omnidub are Apache-2.0. Said once on "
    "this machine; every manifest records it (model.licence). More: the README's Licence section"
)


def model_licence(source: ModelSource) -> str | None:
    """The weights' licence as their model card says (README.md's ``license:``), else as known for their hub id
    (an export: of the model it was made from); None for a synthetic model, or a folder that does not say."""
    if source.synthetic:
        return None
    spec = source.spec
    if source.backend == "onnx":
        import json

        try:
            made_from = json.loads((source.path / EXPORT_MANIFEST).read_text(encoding="utf-8"))["model"]
        except (OSError, ValueError, KeyError, TypeError):
            return None
        if not isinstance(made_from, dict) or made_from.get("synthetic") or not isinstance(made_from.get("id"), str):
            return None
        spec = made_from["id"]
        folder = Path(spec)
        card = _card_licence(folder) if folder.is_dir() else None
        return card or KNOWN_LICENCES.get(spec)
    return _card_licence(source.path) or KNOWN_LICENCES.get(spec)


def _card_licence(folder: Path) -> str | None:
    try:
        text = (folder / "README.md").read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    if not text.startswith("---"):
        return None
    front = text.split("---", 2)[1] if text.count("---") >= 2 else ""
    found = _CARD_LICENCE.search(front)
    return found.group(1).lower() if found else None


def licence_notice(source: ModelSource, say) -> None:
    """Tell this machine's user once, through ``say``, that the weights are for non-commercial use only (nothing
    when they are not, or it was said here before: a marker in omnidub's cache remembers it)."""
    from omnidub.files import cache_home, write_text_atomic

    licence = model_licence(source)
    if licence is None or "nc" not in licence.split("-"):
        return
    marker = cache_home() / "licences" / hashlib.sha256(f"{source.spec}\0{licence}".encode()).hexdigest()[:16]
    if marker.is_file():
        return
    say(LICENCE_NOTICE.format(model=source.spec, licence=licence.upper()))
    try:
        marker.parent.mkdir(parents=True, exist_ok=True)
        write_text_atomic(marker, f"{source.spec}: {licence}\n")
    except OSError:  # an unwritable cache says it again next time, which is no harm
        pass


# What in export.json shapes the audio: the graphs' and tokenizer's hashes, the config (rates, codebooks), which
# transformer renders. Reports (parity, timings) are left out, so checking an export again changes no key.
EXPORT_CONTENT = ("format", "config", "files", "transformer", "quantize", "tokenizer")


def export_content_digest(manifest: dict) -> str:
    """sha256 over what in an export's manifest shapes the audio."""
    import json

    content = {key: manifest.get(key) for key in EXPORT_CONTENT}
    return hashlib.sha256(json.dumps(content, sort_keys=True).encode()).hexdigest()


def export_identity(folder: Path) -> str:
    """An export's revision for keys: its content digest (graphs, weights, tokenizer, config), not its reports.

    Exports made before the tokenizer's hash was recorded have it hashed here (once: see digests.py)."""
    import json

    try:
        manifest = json.loads((Path(folder) / EXPORT_MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise OmnidubError(f"{folder}: cannot read {EXPORT_MANIFEST} ({exc})") from exc
    if not isinstance(manifest, dict):
        raise OmnidubError(f"{folder}/{EXPORT_MANIFEST} is not an omnidub export manifest")
    if manifest.get("tokenizer") is None:
        from omnidub.digests import sha256

        manifest["tokenizer"] = {
            name: {"sha256": sha256(Path(folder) / name)}
            for name in ("tokenizer.json", "tokenizer_config.json")
            if (Path(folder) / name).is_file()
        }
    return "export-" + export_content_digest(manifest)[:16]


def model_shape(source: ModelSource) -> str:
    """The language model's shape, "h<hidden>x<layers>", read from the checkpoint's config.json or the export's
    export.json without loading anything ("" when unknown): measurements are only valid for one shape."""
    import json

    try:
        if source.backend == "onnx":
            return str(
                json.loads((source.path / EXPORT_MANIFEST).read_text(encoding="utf-8"))["config"].get("shape", "")
            )
        llm = json.loads((source.path / "config.json").read_text(encoding="utf-8"))["llm_config"]
        return f"h{int(llm['hidden_size'])}x{int(llm['num_hidden_layers'])}"
    except (OSError, ValueError, KeyError, TypeError):
        return ""


def _cached(repo_id: str) -> Path:
    """The hub model's snapshot in the local cache, without touching the network (nor importing transformers)."""
    from huggingface_hub import snapshot_download

    try:
        with _hub_quiet():
            return Path(snapshot_download(repo_id, local_files_only=True))
    except Exception as exc:  # LocalEntryNotFoundError, or a cache the hub cannot read
        raise NotDownloaded(
            f"model {repo_id} is not downloaded (a render downloads it; omnidub models fetch gets it now)"
        ) from exc


def _download(repo_id: str) -> Path:
    """The hub model's snapshot, downloaded when needed with the hub's own progress (size, progress, rate) on
    stderr: several GB must not pass behind a spinner. A model already cached downloads nothing, silently."""
    from huggingface_hub import snapshot_download

    try:
        pending = _pending_download(repo_id)
        if pending:
            files, size = pending
            sys.stderr.write(f"downloading {repo_id} from the model hub: {_size(size)} in {files} file(s)\n")
            sys.stderr.flush()
            return Path(snapshot_download(repo_id))
        with _hub_quiet():
            return Path(snapshot_download(repo_id))
    except Exception as exc:  # the hub raises many types: offline, DNS, 401, 404, local cache misses
        from omnidub.inventory import fetch_hint

        raise OmnidubError(
            f"cannot load model {repo_id} from the model hub ({type(exc).__name__}): "
            f"{fetch_hint('tts', repo_id)}; or pass a local checkpoint with --model DIR, "
            f"or use --model synthetic:tiny to try omnidub offline"
        ) from exc


def _pending_download(repo_id: str) -> tuple[int, int] | None:
    """(files, bytes) a download of ``repo_id`` would fetch, when the hub can say (None: nothing, or unknown)."""
    from huggingface_hub import snapshot_download

    try:
        with _hub_quiet():
            plan = snapshot_download(repo_id, dry_run=True)
    except Exception:  # an older hub without dry runs, or offline: the download itself says what is wrong
        return None
    missing = [f for f in plan if getattr(f, "will_download", False)]
    if not missing:
        return None
    return len(missing), sum(getattr(f, "file_size", 0) or 0 for f in missing)


def _size(size: int) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if size >= scale:
            return f"{size / scale:.1f} {unit}"
    return f"{size} B"


def _fingerprint(folder: Path, times: bool = True) -> str:
    """Names, sizes and (``times``) modification times of a local checkpoint's files: new weights, new renders. An
    imported copy is named by names and sizes alone, since copying changes the times."""
    digest = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file() and p.name != "omnidub-model.json"):
        stat = path.stat()
        when = stat.st_mtime_ns if times else 0
        digest.update(f"{path.relative_to(folder).as_posix()}\0{stat.st_size}\0{when}\n".encode())
    return ("local-" if times else "imported-") + digest.hexdigest()[:16]


def _snapshot_revision(path: Path) -> str | None:
    # Hub snapshots live in .../snapshots/<commit>/; the commit pins the weights for cache keys.
    return path.name if path.parent.name == "snapshots" else None


@contextlib.contextmanager
def _hub_quiet():
    """The hub's warnings and logs silenced (its bars too), without importing transformers."""
    try:
        from huggingface_hub.utils import are_progress_bars_disabled, disable_progress_bars, enable_progress_bars
    except ImportError:  # pragma: no cover - every supported hub has them
        yield
        return
    was_disabled = are_progress_bars_disabled()
    disable_progress_bars()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            logging.disable(logging.WARNING)
            yield
    finally:
        logging.disable(logging.NOTSET)
        if not was_disabled:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # the hub warns when the user's own setting keeps bars off
                enable_progress_bars()


@contextlib.contextmanager
def quiet():
    """Silence the progress bars and info logs that loading prints; errors still raise."""
    previous = os.environ.get("HF_HUB_DISABLE_PROGRESS_BARS")
    os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] = "1"
    from transformers.utils import logging as hf_logging

    verbosity = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    try:
        with warnings.catch_warnings(), contextlib.redirect_stderr(io.StringIO()):
            warnings.simplefilter("ignore")
            logging.disable(logging.WARNING)
            yield
    finally:
        logging.disable(logging.NOTSET)
        hf_logging.set_verbosity(verbosity)
        if previous is None:
            os.environ.pop("HF_HUB_DISABLE_PROGRESS_BARS", None)
        else:
            os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] = previous
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the hub warns when the user's own setting keeps bars off
            hf_logging.enable_progress_bar()
