"""Model loading: hub id, local folder or synthetic checkpoint, through the real OmniVoice.from_pretrained."""

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
_HUB_ID = re.compile(r"^[\w.-]+/[\w.-]+$")


@dataclass(frozen=True)
class ModelSource:
    """Where a model comes from: ``path`` is a local folder once resolved."""

    spec: str
    path: Path
    synthetic: str | None = None
    revision: str | None = None

    @property
    def identity(self) -> dict:
        """What identifies the weights, for cache keys and the manifest."""
        return {"id": self.spec, "revision": self.revision, "synthetic": self.synthetic}


def resolve_device(spec: str = "auto") -> str:
    """``auto`` picks cuda, then mps, then cpu; an explicit device must be available."""
    import torch

    if spec == "auto":
        if torch.cuda.is_available():
            return "cuda"
        if torch.backends.mps.is_available():
            return "mps"
        return "cpu"
    if spec not in ("cpu", "cuda", "mps") and not spec.startswith("cuda:"):
        raise OmnidubError(f"unknown device {spec!r}; use auto, cpu, cuda or mps")
    if spec.startswith("cuda") and not torch.cuda.is_available():
        raise OmnidubError(f"device {spec} requested but no CUDA GPU is available; use --device cpu")
    if spec == "mps" and not torch.backends.mps.is_available():
        raise OmnidubError("device mps requested but MPS is not available; use --device cpu")
    return spec


def cpu_has_native_bf16() -> bool:
    """True when the CPU multiplies bf16 in hardware (AMX or AVX512-BF16), where bf16 beats fp32 by ~3x."""
    import torch

    return bool(torch.cpu._is_amx_tile_supported() or torch.cpu._is_avx512_bf16_supported())


def resolve_dtype(spec: str, device: str):
    """``auto``: fp16 on GPUs, bf16 on CPUs with native bf16 matmul, else fp32."""
    import torch

    names = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
    if spec in names:
        if spec == "float16" and device == "cpu":
            raise OmnidubError("float16 is not supported on the CPU; use --dtype bfloat16 or float32")
        return names[spec]
    if spec != "auto":
        raise OmnidubError(f"unknown dtype {spec!r}; use auto, float32, bfloat16 or float16")
    if device.startswith("cuda") or device == "mps":
        return torch.float16
    return torch.bfloat16 if cpu_has_native_bf16() else torch.float32


def dtype_name(spec: str, device: str) -> str:
    """The dtype ``spec`` resolves to on ``device``, by name ("bfloat16", ...)."""
    return str(resolve_dtype(spec, device)).removeprefix("torch.")


def resolve_model(spec: str = DEFAULT_MODEL) -> ModelSource:
    """Turn ``--model`` into a local folder: build a synthetic checkpoint or find/download a hub snapshot."""
    if spec.startswith(SYNTHETIC_PREFIX):
        from omnidub.engine.synthetic import build_synthetic

        name = spec[len(SYNTHETIC_PREFIX):]
        with _quiet():
            path = build_synthetic(name)
        # The folder name carries the recipe version, so a new recipe invalidates what the old one rendered.
        return ModelSource(spec=spec, path=path, synthetic=name, revision=path.name)
    local = Path(spec).expanduser()
    if local.is_dir():
        if not (local / "config.json").is_file():
            raise OmnidubError(f"{spec} is not an OmniVoice checkpoint folder (no config.json)")
        return ModelSource(spec=str(local.resolve()), path=local.resolve(), revision=_fingerprint(local))
    if not _HUB_ID.match(spec):
        raise OmnidubError(f"model folder not found: {spec}")
    path = _download(spec)
    return ModelSource(spec=spec, path=path, revision=_snapshot_revision(path))


def _download(repo_id: str) -> Path:
    from huggingface_hub import snapshot_download

    try:
        with _quiet():
            return Path(snapshot_download(repo_id))
    except Exception as exc:  # the hub raises many types: offline, DNS, 401, 404, local cache misses
        raise OmnidubError(
            f"cannot load model {repo_id} from the model hub ({type(exc).__name__}): "
            f"download it elsewhere and pass --model PATH, or use --model synthetic:tiny to try omnidub offline"
        ) from None


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


def load_model(source: ModelSource, device: str, dtype):
    """Load OmniVoice from a resolved source onto ``device`` in ``dtype`` (the audio tokenizer stays fp32)."""
    from omnivoice.models.omnivoice import OmniVoice

    try:
        with _quiet():
            model = OmniVoice.from_pretrained(str(source.path), dtype=dtype, device_map=device)
    except OmnidubError:
        raise
    except Exception as exc:
        raise OmnidubError(f"cannot load model {source.spec}: {type(exc).__name__}: {exc}".splitlines()[0]) from None
    model.eval()
    return model


@contextlib.contextmanager
def _quiet():
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
