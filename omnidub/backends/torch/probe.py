"""The torch backend's first-use probe: GEMM kernels (CPU) and CFG layout, at the model's real shapes."""

from __future__ import annotations

import time

import numpy as np
import torch

from omnidub import measured
from omnidub.backends.probe import (
    PROBE_FRAMES,
    PROBE_REF_FRAMES,
    PROBE_REF_TEXT,
    PROBE_TEXT,
    ProbeResult,
    decide,
    interleaved,
)
from omnidub.backends.torch.fused import fused_llm
from omnidub.backends.torch.gemm import linear
from omnidub.backends.torch.layout import Layout
from omnidub.config import default_layout
from omnidub.hardware import device_kind, gpu_name

# The layouts a CPU chooses from (padded only pads; joined segments attend one by one, which a GPU was never
# measured doing).
CPU_LAYOUTS = ("trimmed", "packed", "joined")
# The GEMM probe runs the linears of this many layers (every layer has the same shapes).
GEMM_LAYERS = 4


def probe_item(backend):
    """A typical line's conditional input at the model's real sizes: ~2.8 s of target against a 3 s reference."""
    codes = np.random.default_rng(0).integers(0, 1024, (backend.model.config.num_audio_codebook, PROBE_REF_FRAMES))
    return backend._build_item(PROBE_TEXT, PROBE_FRAMES, PROBE_REF_TEXT, codes, "en", None)


@torch.inference_mode()
def first_use(backend, *, layout: bool, gemm: bool) -> list[ProbeResult]:
    """Run the probes asked for, record each with its evidence and return them."""
    if not (layout or gemm):
        return []
    item = probe_item(backend)
    shape = f"{backend.shape or 'unknown shape'}, {item.input_ids.shape[1]} + {item.target_len} tokens, {backend.dtype}"
    results = []
    gpu = gpu_name(backend.device)
    if gemm:
        began = time.perf_counter()
        result = decide(
            "gemm", _gemm_seconds(backend, item), "aten", f"{GEMM_LAYERS} layers' linears, {shape}", began=began
        )
        measured.record(
            "gemm",
            measured.probe_key(backend.device, backend.dtype, "torch", backend.shape),
            {"choice": result.choice, "seconds": result.seconds, "evidence": result.evidence},
        )
        results.append(result)
        llm = fused_llm(backend.model.llm, result.choice) if backend.tuning.fused else backend.model.llm
    else:
        llm = backend._eager
    if layout:
        candidates = ("padded", "trimmed", "packed") if device_kind(backend.device) == "cuda" else CPU_LAYOUTS
        default = default_layout(backend.device)
        mask_id = backend.model.config.audio_mask_id
        rows = {
            kind: Layout([item], kind, mask_id, backend.model.device, backend.tuning.skip_mask) for kind in candidates
        }
        runs = {kind: (lambda r=r: _step(backend, r, llm)) for kind, r in rows.items()}
        began = time.perf_counter()
        result = decide("layout", interleaved(runs), default, f"one decoding step of {shape}", began=began)
        measured.record_layout(
            backend.device,
            backend.dtype,
            result.seconds,
            result.evidence,
            backend="torch",
            shape=backend.shape,
            gpu=gpu,
            choice=result.choice,
        )
        results.append(result)
    return results


def _step(backend, rows: Layout, llm) -> None:
    rows.logits(backend.model, llm)
    if device_kind(backend.device) == "cuda":
        torch.cuda.synchronize()


def _gemm_seconds(backend, item) -> dict[str, float]:
    """The four linears of the first layers at the line's two row lengths, torch's GEMM against oneDNN's (packed
    here for these layers only: the whole model is packed only if oneDNN wins)."""
    layers = fused_llm(backend.model.llm, "aten").layers[:GEMM_LAYERS]
    weights = [
        (m.weight, m.bias) for layer in layers for m in (layer.qkv, layer.o_proj, layer.gate_up, layer.down_proj)
    ]
    dtype = weights[0][0].dtype
    lengths = (item.input_ids.shape[1], item.target_len)
    inputs = {(n, k): torch.randn(1, n, k).to(dtype) for n in lengths for k in {w.shape[1] for w, _ in weights}}

    def run(gemm: str):
        linears = [linear(w, b, gemm) for w, b in weights]

        def go():
            for n in lengths:
                for module in linears:
                    module(inputs[(n, module.weight.shape[1])])

        return go

    return interleaved({"aten": run("aten"), "onednn": run("onednn")})
