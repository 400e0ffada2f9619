"""Probes for the bench: which GEMM kernel each of the model's matmul shapes runs, and where one step's time goes."""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time

import torch

from omnidub.backends.torch import upstream
from omnidub.backends.torch.decode import _guided_log_probs
from omnidub.backends.torch.layout import Layout


def gemm_shapes(model, tokens: int, targets: int) -> dict[str, tuple[int, int, int]]:
    """The language model's and audio heads' GEMMs as (rows, inner, outputs) for a row of ``tokens`` positions."""
    config = model.llm.config
    head_dim = getattr(config, "head_dim", config.hidden_size // config.num_attention_heads)
    hidden, q, kv = config.hidden_size, config.num_attention_heads * head_dim, config.num_key_value_heads * head_dim
    inner = config.intermediate_size
    return {
        "qkv (fused)": (tokens, hidden, q + 2 * kv),
        "q": (tokens, hidden, q),
        "o": (tokens, q, hidden),
        "gate+up (fused)": (tokens, hidden, 2 * inner),
        "down": (tokens, inner, hidden),
        "audio heads": (targets, hidden, model.audio_heads.out_features),
    }


def gemm_kernels(shapes: dict[str, tuple[int, int, int]], dtype: torch.dtype) -> dict[str, str]:
    """For each shape, the library that ran it on the CPU: oneDNN (with its implementation), MKL, or torch's
    own generic GEMM (what bf16 falls to on a CPU without AVX512-BF16 or AMX), read from their verbose logs."""
    out = {}
    for name, (m, k, n) in shapes.items():
        x, w = torch.randn(m, k).to(dtype), torch.randn(n, k).to(dtype)
        torch.nn.functional.linear(x, w)  # first call may print library banners; the second is the one read
        log = _captured(lambda: torch.nn.functional.linear(x, w))
        out[name] = _kernel_name(log)
    return out


def _kernel_name(log: str) -> str:
    for line in log.splitlines():
        if line.startswith("onednn_verbose") and ",exec," in line:
            fields = line.split(",")
            impl = next((f for f in fields if ":" in f and ("brg" in f or "gemm" in f or "jit" in f or "ref" in f)), "")
            return f"oneDNN {impl}".strip()
        routine = line.split()[1] if line.startswith("MKL_VERBOSE") and len(line.split()) > 1 else ""
        if "GEMM(" in routine:  # e.g. SGEMM(T,N,...); the first call's banner line names the library only
            return f"MKL {routine.split('(')[0]}"
    return "generic (torch's own GEMM)"


def _captured(fn) -> str:
    """What oneDNN and MKL print (from C, to file descriptor 1) while ``fn`` runs."""
    sys.stdout.flush()
    with tempfile.TemporaryFile() as sink:
        saved = os.dup(1)
        os.dup2(sink.fileno(), 1)
        try:
            with torch.backends.mkldnn.verbose(torch.backends.mkldnn.VERBOSE_ON), \
                    torch.backends.mkl.verbose(torch.backends.mkl.VERBOSE_ON):
                fn()
        finally:
            os.dup2(saved, 1)
            os.close(saved)
        sink.seek(0)
        return sink.read().decode("utf-8", errors="replace")


def step_profile(backend, requests, repeat: int = 3) -> dict[str, float]:
    """Milliseconds of one decoding step by part (median of ``repeat``): embedding prep, the language model and
    the audio heads (the loop's own calls), CFG scoring (its own function), picking tokens (the same ops: max,
    top-k, scatter, where) and writing them back into the rows."""
    model, device = backend.model, backend.model.device
    items = [backend._item(backend._resolve(r), 0) for r in requests]
    rows = Layout(items, backend.layout, model.config.audio_mask_id, device, backend.tuning.skip_mask)
    mask_id, codebooks = model.config.audio_mask_id, model.config.num_audio_codebook
    tokens = torch.full((len(items), codebooks, rows.max_target), mask_id, dtype=torch.long, device=device)
    names = ("embed", "model", "heads", "scoring", "pick", "write")
    parts: dict[str, list[float]] = {k: [] for k in names}
    current: dict[str, float] = {}

    def timed(name, fn):
        _sync(device)
        began = time.perf_counter()
        value = fn()
        _sync(device)
        current[name] = current.get(name, 0.0) + (time.perf_counter() - began) * 1000
        return value

    with torch.inference_mode():
        for round_ in range(repeat + 1):  # the first round warms up and is dropped
            current.clear()
            hidden = []
            for plan in rows.plans:
                embeds = timed("embed", lambda: upstream.embed(model, plan.input_ids, plan.audio_mask))
                out = timed("model", lambda: upstream.forward_llm(backend._llm, embeds, plan.attention_mask, plan.position_ids))
                hidden.append(out.reshape(-1, out.shape[-1]))

            def heads():
                flat = torch.cat(hidden) if len(hidden) > 1 else hidden[0]
                both = model.audio_heads(torch.stack((flat[rows.cond_index], flat[rows.uncond_index])))
                return both.view(2, len(items), rows.max_target, codebooks, -1).transpose(2, 3).float()

            logits = timed("heads", heads)

            def scoring():
                log_probs = _guided_log_probs(logits[0], logits[1], backend.options.decode.guidance_scale)
                log_probs[..., mask_id] = -float("inf")
                return log_probs

            log_probs = timed("scoring", scoring)

            def pick():
                confidence, predicted = log_probs.max(dim=-1)
                k = max(1, tokens[0].numel() // 12)
                _, best = confidence.view(len(items), -1).topk(k, dim=1)
                chosen = torch.zeros_like(confidence.view(len(items), -1), dtype=torch.bool).scatter_(1, best, True)
                return torch.where(chosen.view_as(tokens), predicted, tokens)

            picked = timed("pick", pick)
            timed("write", lambda: rows.write(picked))
            if round_:
                for name in names:
                    parts[name].append(current[name])
    return {name: statistics.median(values) for name, values in parts.items()}


def _sync(device) -> None:
    if str(device).startswith("cuda"):
        torch.cuda.synchronize()
