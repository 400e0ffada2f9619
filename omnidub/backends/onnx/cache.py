"""Exports kept in omnidub's cache for ``--backend onnx`` / ``auto``: one per model content, built only when asked.

Building one costs minutes and gigabytes (OmniVoice: a float32 transformer of 2.4 GB plus the codec's graphs), so
it is never built behind the user's back: ``--backend onnx`` (or ``omnidub export --cache``) asks for it. Right
after it is built, the export's transformer is compared with torch's on one decoding step at real shapes, in
float32 on this CPU: the logits must agree (identical argmax) and the faster of the two is recorded, which is
what ``--backend auto`` follows afterwards.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from omnidub.files import cache_home
from omnidub.models import EXPORT_MANIFEST, ModelSource, model_shape, resolve_model

# What a user is told before an export is built. Measured exporting synthetic:full (OmniVoice's real shapes) on a
# shared 2-core Intel Xeon with AMX: 93 s with the int8 graph too, 9 GB peak memory; fp32 graphs 3.2 GB on disk.
EXPORT_COST = "about 2 minutes on 2 CPU cores, 9 GB of memory while exporting and 3.2 GB of disk for OmniVoice"
# --backend auto takes ONNX Runtime only where one step's logits agree with torch's within float32 rounding: the
# bound every lossless lever of the torch backend meets against upstream (the export's own parity bound, 1e-3 over
# whole renders, is looser; --backend onnx stays available beyond this one).
AUTO_MAX_LOGIT_DIFF = 1e-5
# Audio-shaping files of a local checkpoint: their content names the export.
_CONTENT = ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json", "audio_tokenizer")


def folder(source: ModelSource) -> Path:
    """Where the export of ``source`` (a checkpoint) lives in omnidub's cache, named by the checkpoint's content."""
    return cache_home() / "exports" / content_key(source)


def content_key(source: ModelSource) -> str:
    """A name for a checkpoint's content: the hub commit, the synthetic recipe, or a local folder's file hashes."""
    if source.synthetic:
        return f"synthetic-{source.synthetic}-{source.revision}"
    if source.revision and not source.revision.startswith("local-"):
        return f"{_safe(source.spec)}-{source.revision[:16]}"
    from omnidub.digests import sha256

    digest = hashlib.sha256()
    for name in _CONTENT:
        path = source.path / name
        files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path] if path.is_file() else []
        for file in files:
            digest.update(f"{file.relative_to(source.path).as_posix()}\0{sha256(file)}\n".encode())
    return f"local-{digest.hexdigest()[:16]}"


def cached(source: ModelSource) -> ModelSource | None:
    """The cached export of ``source``, or None when none was built."""
    where = folder(source)
    return resolve_model(str(where)) if (where / EXPORT_MANIFEST).is_file() else None


def build(source: ModelSource, say=lambda text: None) -> ModelSource:
    """Export ``source`` into the cache (float32), compare it with torch here, record which is faster."""
    from omnidub.backends.onnx.export import export

    where = folder(source)
    staging = where.with_name(where.name + ".building")
    shutil.rmtree(staging, ignore_errors=True)
    say(f"exporting {source.spec} for ONNX Runtime into omnidub's cache ({EXPORT_COST}); once per model")
    began = time.perf_counter()
    try:
        export(staging, source.spec)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    shutil.rmtree(where, ignore_errors=True)
    staging.rename(where)
    size = sum(p.stat().st_size for p in where.rglob("*") if p.is_file())
    say(f"exported in {time.perf_counter() - began:.0f} s, {size / 1e9:.1f} GB in {where}")
    exported = resolve_model(str(where))
    compare(source, exported, say)
    return exported


def compare(checkpoint: ModelSource, exported: ModelSource, say=lambda text: None) -> dict:
    """One float32 decoding step at real shapes in torch and in ONNX Runtime on this CPU: their logits must agree
    (same argmax, max |difference| within the parity bound, in the same layout) and the faster one, each in the
    layout and (torch) GEMM kernels its own first-use probe picks here, is recorded for --backend auto."""
    import numpy as np
    import torch

    from omnidub import measured
    from omnidub.backends.onnx.backend import OnnxBackend
    from omnidub.backends.onnx.layout import Item as OnnxItem
    from omnidub.backends.onnx.layout import Layout as OnnxLayout
    from omnidub.backends.onnx.parity import BOUNDS
    from omnidub.backends.probe import decide, interleaved
    from omnidub.backends.torch import TorchBackend
    from omnidub.backends.torch.layout import Layout as TorchLayout
    from omnidub.backends.torch.probe import probe_item
    from omnidub.config import EngineOptions

    options = EngineOptions(dtype="float32", cfg="auto", compile=False)
    ours = TorchBackend(checkpoint, "cpu", options)
    ort = OnnxBackend(exported, "cpu", options, quantized=False, threads=torch.get_num_threads())
    ours.probe()  # each at its best here: what its first-use probe picks (measured now when it never was)
    ort.probe()
    item = probe_item(ours)
    onnx_item = OnnxItem(item.input_ids.numpy(), item.audio_mask.numpy(), item.target_len)
    mask_id = ours.model.config.audio_mask_id
    forward = ort.runtime.forward_fn()

    def torch_step(layout):
        rows = TorchLayout([item], layout, mask_id, "cpu", ours.tuning.skip_mask)
        return lambda: rows.logits(ours.model, ours._llm)

    def onnx_step(layout):
        rows = OnnxLayout([onnx_item], layout, ort.runtime.mask_id)
        return lambda: rows.logits(forward)

    with torch.inference_mode():
        expected = [x.float().numpy() for x in torch_step("trimmed")()]
        got = onnx_step("trimmed")()
        diff = max(float(np.abs(a - b).max()) for a, b in zip(expected, got, strict=True))
        agree = all(np.array_equal(a.argmax(-1), b.argmax(-1)) for a, b in zip(expected, got, strict=True))
        seconds = interleaved({"torch": torch_step(ours.layout), "onnxruntime": onnx_step(ort.layout)})
    shape = model_shape(checkpoint)
    result = decide(
        "backend",
        seconds,
        "torch",
        f"one float32 decoding step of {shape}, {item.input_ids.shape[1]} + "
        f"{item.target_len} tokens, {torch.get_num_threads()} threads, torch in {ours.layout} CFG with "
        f"{ours.gemm} GEMMs, ONNX Runtime in {ort.layout} CFG",
    )
    lossless = agree and diff <= min(AUTO_MAX_LOGIT_DIFF, BOUNDS["transformer_max_abs_logit_diff"])
    value = {
        "choice": result.choice if lossless else "torch",
        "seconds": result.seconds,
        "evidence": result.evidence,
        "max_abs_logit_diff": diff,
        "argmax_identical": agree,
    }
    measured.record("backend", measured.probe_key("cpu", "float32", "any", shape), value)
    ratio = seconds["torch"] / seconds["onnxruntime"]
    say(
        f"ONNX Runtime vs torch here in float32: {ratio:.2f}x per step ({ort.layout} against torch's {ours.layout} "
        f"CFG), logits within {diff:.1e}"
        + ("" if lossless else f" (not within {AUTO_MAX_LOGIT_DIFF:.0e} with the same argmax: torch stays the choice)")
    )
    return value


@dataclass(frozen=True)
class ExportStatus:
    """Where a model's export for ``--backend auto`` stands on this machine: whether it is built (``folder``),
    and what comparing it with torch in float32 found on this CPU kind (``measured``: choice, seconds, logits
    figures; None when never compared here)."""

    model: str
    folder: Path
    present: bool
    measured: dict | None
    can_build: bool

    @property
    def used(self) -> bool:
        """True when ``--backend auto`` renders float32 on this CPU with it: built, and measured faster here."""
        return self.present and (self.measured or {}).get("choice") == "onnxruntime"

    def summary(self) -> str:
        """One line for a person: built or not, and what auto does with it on this CPU."""
        if not self.present:
            how = "" if self.can_build else "pip install 'omnidub[onnx]', then "
            return (
                f"ONNX Runtime export of {self.model}: not built ({how}omnidub export --cache builds it: {EXPORT_COST})"
            )
        if self.measured is None:
            return (
                f"ONNX Runtime export of {self.model}: built ({self.folder}), not yet measured on this CPU "
                "(the next fp32 render measures it once)"
            )
        seconds = self.measured.get("seconds") or {}
        ratio = seconds.get("torch", 0) / seconds["onnxruntime"] if seconds.get("onnxruntime") else 0.0
        verdict = (
            f"--backend auto renders fp32 with it here ({ratio:.2f}x torch's step, same tokens)"
            if self.used
            else f"torch is faster here in fp32 ({1 / ratio if ratio else 0:.2f}x): --backend auto keeps torch"
        )
        return f"ONNX Runtime export of {self.model}: built ({self.folder}); {verdict}"


def status(source: ModelSource) -> ExportStatus:
    """Where ``source``'s export stands here (torch-free, builds nothing): for ``omnidub models`` and the like."""
    return ExportStatus(
        source.spec, folder(source), cached(source) is not None, backend_choice(model_shape(source)), can_export()
    )


def prepare(source: ModelSource, say=lambda text: None) -> ExportStatus:
    """Make ``source``'s export ready for ``--backend auto`` on this CPU: build it when it is not built (minutes
    and gigabytes: only on a user's explicit request), and compare it with torch here when this CPU kind never
    did. Returns the status after."""
    from omnidub.errors import OmnidubError

    exported = cached(source)
    if exported is None:
        if not can_export():
            raise OmnidubError("building an ONNX export needs the onnx package: pip install 'omnidub[onnx]'")
        build(source, say)
    elif backend_choice(model_shape(source)) is None:
        compare(source, exported, say)
    else:
        say(f"the export of {source.spec} is built and was measured on this CPU: nothing to do")
    return status(source)


def can_export() -> bool:
    """True when this environment can build an export (the onnx package, from omnidub[onnx])."""
    import importlib.util

    return importlib.util.find_spec("onnx") is not None


def declined_before(source: ModelSource) -> bool:
    """True once the user was asked whether to build this model shape's export on this CPU and said no."""
    from omnidub import measured

    return measured.entry("export-declined", _declined_key(source)) is not None


def decline(source: ModelSource) -> None:
    """Remember that the user said no, so the question is not asked again on this CPU for this model shape."""
    from omnidub import measured

    measured.record("export-declined", _declined_key(source), {"answer": "no"})


def _declined_key(source: ModelSource) -> str:
    from omnidub import measured

    return measured.probe_key("cpu", "float32", "onnxruntime", model_shape(source))


def backend_choice(shape: str) -> dict | None:
    """What the comparison recorded for this CPU in float32 ({choice, seconds, evidence, ...}), or None."""
    from omnidub import measured

    return measured.entry("backend", measured.probe_key("cpu", "float32", "any", shape))


def _safe(spec: str) -> str:
    return re.sub(r"[^\w.-]+", "_", spec).strip("_")
