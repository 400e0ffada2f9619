"""Where a model comes from: a hub id, a local checkpoint folder, a synthetic checkpoint or an ONNX export.

Resolving a model never imports torch: a dry run and a fully cached rerun need its identity, not its weights.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import logging
import os
import re
import warnings
from dataclasses import dataclass
from pathlib import Path

from omnidub.errors import OmnidubError

DEFAULT_MODEL = "k2-fsa/OmniVoice"
SYNTHETIC_PREFIX = "synthetic:"
EXPORT_MANIFEST = "export.json"
_HUB_ID = re.compile(r"^[\w.-]+/[\w.-]+$")


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


def resolve_model(spec: str = DEFAULT_MODEL) -> ModelSource:
    """Turn ``--model`` into a local folder: find or build a synthetic checkpoint, or find/download a hub snapshot."""
    if spec.startswith(SYNTHETIC_PREFIX):
        from omnidub.synthetic import build_synthetic, synthetic_folder

        name = spec[len(SYNTHETIC_PREFIX):]
        path = synthetic_folder(name)
        if not (path / "config.json").is_file():
            with quiet():
                path = build_synthetic(name)
        # The folder name carries the recipe version, so a new recipe invalidates what the old one rendered.
        return ModelSource(spec=spec, path=path, synthetic=name, revision=path.name)
    local = Path(spec).expanduser()
    if local.is_dir():
        if (local / EXPORT_MANIFEST).is_file():
            return ModelSource(spec=str(local.resolve()), path=local.resolve(), revision=export_identity(local),
                               backend="onnx")
        if not (local / "config.json").is_file():
            raise OmnidubError(f"{spec} is not an OmniVoice checkpoint folder (no config.json) nor an omnidub export (no {EXPORT_MANIFEST})")
        return ModelSource(spec=str(local.resolve()), path=local.resolve(), revision=_fingerprint(local))
    if not _HUB_ID.match(spec):
        raise OmnidubError(f"model folder not found: {spec}")
    path = _download(spec)
    return ModelSource(spec=spec, path=path, revision=_snapshot_revision(path))


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

        manifest["tokenizer"] = {name: {"sha256": sha256(Path(folder) / name)}
                                 for name in ("tokenizer.json", "tokenizer_config.json") if (Path(folder) / name).is_file()}
    return "export-" + export_content_digest(manifest)[:16]


def model_shape(source: ModelSource) -> str:
    """The language model's shape, "h<hidden>x<layers>", read from the checkpoint's config.json or the export's
    export.json without loading anything ("" when unknown): measurements are only valid for one shape."""
    import json

    try:
        if source.backend == "onnx":
            return str(json.loads((source.path / EXPORT_MANIFEST).read_text(encoding="utf-8"))["config"].get("shape", ""))
        llm = json.loads((source.path / "config.json").read_text(encoding="utf-8"))["llm_config"]
        return f"h{int(llm['hidden_size'])}x{int(llm['num_hidden_layers'])}"
    except (OSError, ValueError, KeyError, TypeError):
        return ""


def _download(repo_id: str) -> Path:
    from huggingface_hub import snapshot_download

    try:
        with quiet():
            return Path(snapshot_download(repo_id))
    except Exception as exc:  # the hub raises many types: offline, DNS, 401, 404, local cache misses
        raise OmnidubError(
            f"cannot load model {repo_id} from the model hub ({type(exc).__name__}): "
            f"download it with `huggingface-cli download {repo_id} --local-dir DIR` and pass --model DIR, "
            f"or use --model synthetic:tiny to try omnidub offline"
        ) from exc


def _fingerprint(folder: Path) -> str:
    """Names, sizes and modification times of a local checkpoint's files: new weights, new renders."""
    digest = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        stat = path.stat()
        digest.update(f"{path.relative_to(folder).as_posix()}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode())
    return "local-" + digest.hexdigest()[:16]


def _snapshot_revision(path: Path) -> str | None:
    # Hub snapshots live in .../snapshots/<commit>/; the commit pins the weights for cache keys.
    return path.name if path.parent.name == "snapshots" else None


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
