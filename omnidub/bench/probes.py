"""What the bench measures besides the rows: the matmul ceiling, which GEMM kernel each shape runs, and where the
time of one decoding step goes (each GEMM shape against the ceiling, attention, norms, rotary, activations,
copies), measured in a clean state before any row runs."""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import threading
import time

import torch

from omnidub.backends.torch import upstream
from omnidub.backends.torch.decode import _guided_log_probs
from omnidub.backends.torch.gemm import linear, onednn_usable
from omnidub.backends.torch.layout import Layout


def sync(device) -> None:
    if str(device).startswith("cuda"):
        torch.cuda.synchronize()
    elif str(device) == "mps":
        torch.mps.synchronize()


def matmul_gflops(device: str, dtype_name: str, n: int = 2048) -> dict[str, float]:
    """The device's dense matmul ceiling in one dtype. On CUDA a loop of 8192 n^3 matmuls timed with CUDA events.
    On a CPU the fastest single product of n^3 and (n/2)^3 (the smaller one runs from cache, and the model's
    GEMMs are of that size), with torch's GEMM ("aten") and with oneDNN's packed weights ("onednn"), interleaved:
    the ceiling is the best of them all."""
    dtype = getattr(torch, dtype_name)
    if device.startswith("cuda"):
        return {"aten": _cuda_gflops(device, dtype, n)}
    runs, flops = {}, {}
    for size in (n, n // 2):
        a, b = torch.randn(size, size).to(dtype), torch.randn(size, size).to(dtype)
        runs[("aten", size)] = lambda a=a, b=b: a @ b
        if onednn_usable(device, dtype):
            packed = linear(b.T.contiguous(), None, "onednn")
            runs[("onednn", size)] = lambda a=a, packed=packed: packed(a)
        flops[size] = 2 * size**3
    times = {key: [] for key in runs}
    for _ in range(2):
        for run in runs.values():
            run()
    for _ in range(5):
        for key, run in runs.items():
            began = time.perf_counter()
            run()
            times[key].append(time.perf_counter() - began)
    out: dict[str, float] = {}
    for (kind, size), values in times.items():
        out[kind] = max(out.get(kind, 0.0), flops[size] / min(values) / 1e9)
    return out


def _cuda_gflops(device: str, dtype, n: int) -> float:
    a = torch.randn(n, n, device=device).to(dtype)
    b = torch.randn(n, n, device=device).to(dtype)
    out = torch.empty_like(a)
    loops = 8192
    for _ in range(50):
        torch.mm(a, b, out=out)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    start.record()
    for _ in range(loops):
        torch.mm(a, b, out=out)
    end.record()
    torch.cuda.synchronize()
    return 2 * n**3 * loops / (start.elapsed_time(end) / 1000) / 1e9


def gemm_shapes(model, tokens: int, targets: int) -> dict[str, tuple[int, int, int]]:
    """The language model's and audio heads' GEMMs as (rows, inner, outputs) for a row of ``tokens`` positions."""
    config = model.llm.config
    head_dim = getattr(config, "head_dim", config.hidden_size // config.num_attention_heads)
    hidden, q, kv = config.hidden_size, config.num_attention_heads * head_dim, config.num_key_value_heads * head_dim
    inner = config.intermediate_size
    return {
        "qkv (fused)": (tokens, hidden, q + 2 * kv),
        "o": (tokens, q, hidden),
        "gate+up (fused)": (tokens, hidden, 2 * inner),
        "down": (tokens, inner, hidden),
        "audio heads": (targets, hidden, model.audio_heads.out_features),
    }


def gemm_kernels(shapes: dict[str, tuple[int, int, int]], dtype: torch.dtype, gemm: str = "aten") -> dict[str, str]:
    """For each shape, the library that ran it on the CPU: oneDNN (with its implementation), MKL, or torch's
    own generic GEMM (what bf16 falls to on a CPU without AVX512-BF16 or AMX), read from their verbose logs."""
    out = {}
    for name, (m, k, n) in shapes.items():
        x = torch.randn(m, k).to(dtype)
        module = linear(torch.randn(n, k).to(dtype), None, gemm)
        module(x)  # the first call may print library banners; the second is the one read
        out[name] = _kernel_name(_captured(lambda module=module, x=x: module(x)))
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
            with (
                torch.backends.mkldnn.verbose(torch.backends.mkldnn.VERBOSE_ON),
                torch.backends.mkl.verbose(torch.backends.mkl.VERBOSE_ON),
            ):
                fn()
        finally:
            os.dup2(saved, 1)
            os.close(saved)
        sink.seek(0)
        return sink.read().decode("utf-8", errors="replace")


class _Clock:
    """Milliseconds per part, summed over a forward (CPU ops are synchronous; CUDA is synchronised per part)."""

    def __init__(self, device):
        self.device, self.ms = device, {}

    def __call__(self, part: str, fn):
        sync(self.device)
        began = time.perf_counter()
        value = fn()
        sync(self.device)
        self.ms[part] = self.ms.get(part, 0.0) + (time.perf_counter() - began) * 1000
        return value


def step_profile(backend, requests, peak_gflops: float | None, repeat: int = 3) -> dict:
    """Where one decoding step's time goes (median of ``repeat`` after a warm-up), part by part, with each GEMM
    shape's GFLOP/s and its fraction of ``peak_gflops``; beside it the same step uninstrumented, so the parts'
    sum can be checked against it. Needs the fused language model (the fast path's)."""
    model, device = backend.model, backend.model.device
    items = [backend._item(backend._resolve(r), 0) for r in requests]
    rows = Layout(items, backend.layout, model.config.audio_mask_id, device, backend.tuning.skip_mask)
    llm = backend._eager
    if not hasattr(llm, "layers") or not hasattr(llm.layers[0], "qkv"):
        return {}
    runs, plain = [], []
    with torch.inference_mode():
        for round_ in range(repeat + 1):  # the first round warms up and is dropped
            clock = _Clock(device)
            flops = _instrumented_step(backend, rows, llm, clock)
            sync(device)
            began = time.perf_counter()
            rows.logits(model, llm)
            sync(device)
            if round_:
                runs.append(clock.ms)
                plain.append((time.perf_counter() - began) * 1000)
    parts = {name: statistics.median(r[name] for r in runs) for name in runs[0]}
    gemms = {}
    for name, (shape, gflop) in flops.items():
        ms = parts[name]
        gemms[name] = {
            "shape": shape,
            "ms": round(ms, 2),
            "gflops": round(gflop / (ms / 1000), 1),
            "fraction_of_peak": round(gflop / (ms / 1000) / peak_gflops, 3) if peak_gflops else None,
        }
    total = sum(parts.values())
    return {
        "layout": backend.layout,
        "gemm": backend.gemm,
        "dtype": backend.dtype,
        "ms": {k: round(v, 2) for k, v in parts.items()},
        "share": {k: round(v / total, 4) for k, v in parts.items()},
        "gemms": gemms,
        "parts_ms": round(total, 1),
        "uninstrumented_ms": round(statistics.median(plain), 1),
    }


def _instrumented_step(backend, rows: Layout, llm, clock: _Clock) -> dict:
    """The fast path's forward, part by part (mirrors FusedLM and _FusedLayer), then the loop's scoring. Returns
    each GEMM part's (shape, GFLOP) for the step."""
    model = backend.model
    flops: dict[str, tuple[str, float]] = {}

    def gemm(name: str, module, x):
        m, k, n = x.shape[0] * x.shape[1], x.shape[-1], module.weight.shape[0]
        label = f"gemm {name} [{k}x{n}]"
        shape, gflop = flops.get(label, (f"{k}x{n}", 0.0))
        flops[label] = (shape, gflop + 2 * m * k * n / 1e9)
        return clock(label, lambda: module(x))

    hidden_states = []
    for plan in rows.plans:
        x = clock("embed", lambda plan=plan: upstream.embed(model, plan.input_ids, plan.audio_mask))
        position = clock("rotary", lambda x=x, plan=plan: llm.rotary_emb(x, plan.position_ids))
        for layer in llm.layers:
            x = _instrumented_layer(layer, x, plan.attention_mask, position, gemm, clock)
        hidden_states.append(clock("norms", lambda x=x: llm.norm(x)).reshape(-1, x.shape[-1]))
    flat = hidden_states[0] if len(hidden_states) == 1 else clock("copies", lambda: torch.cat(hidden_states))
    targets = clock("copies", lambda: torch.stack((flat[rows.cond_index], flat[rows.uncond_index])))
    logits = gemm("audio heads", model.audio_heads, targets.reshape(1, -1, targets.shape[-1]))
    logits = clock(
        "copies",
        lambda: (
            logits.view(2, rows.batch, rows.max_target, model.config.num_audio_codebook, -1).transpose(2, 3).float()
        ),
    )
    clock("scoring", lambda: _guided_log_probs(logits[0], logits[1], backend.options.decode.guidance_scale).max(-1))
    return flops


def _instrumented_layer(layer, hidden, mask, position, gemm, clock):
    residual = hidden
    x = clock("norms", lambda: layer.input_layernorm(hidden))
    shape = (*x.shape[:-1], -1, layer.head_dim)
    q, k, v = gemm("qkv", layer.qkv, x).split(layer.split_qkv, dim=-1)
    q = clock("norms", lambda: layer.q_norm(q.view(shape)).transpose(1, 2))
    k = clock("norms", lambda: layer.k_norm(k.view(shape)).transpose(1, 2))
    v = clock("copies", lambda: v.reshape(shape).transpose(1, 2))
    cos, sin = position
    q, k = clock("rotary", lambda: layer._rotary(q, k, cos, sin))
    out, _ = clock(
        "attention",
        lambda: layer._attention(layer.attn, q, k, v, mask, dropout=0.0, scaling=layer.scaling, is_causal=False),
    )
    out = clock("copies", lambda: out.reshape(*x.shape[:-1], -1).contiguous())
    projected = gemm("o", layer.o_proj, out)
    hidden = clock("residual adds", lambda: residual + projected)
    residual = hidden
    x = clock("norms", lambda: layer.post_attention_layernorm(hidden))
    gate, up = gemm("gate+up", layer.gate_up, x).split(layer.inner, dim=-1)
    act = clock("activations", lambda: layer.act_fn(gate) * up)
    down = gemm("down", layer.down_proj, act)
    return clock("residual adds", lambda: residual + down)


def forward_flops(engine, items, steps: int) -> float:
    """Matmul FLOPs of the language model and audio heads for every step of every item (no padding)."""
    llm = engine.model.llm
    cfg = llm.config
    linear_params = sum(m.weight.numel() for m in llm.modules() if isinstance(m, torch.nn.Linear))
    heads = engine.model.audio_heads.weight.numel()
    per_attention = 4 * cfg.num_attention_heads * getattr(cfg, "head_dim", cfg.hidden_size // cfg.num_attention_heads)
    total = 0.0
    for item in items:
        for length in (item.input_ids.shape[-1], item.target_len):  # conditional and unconditional rows
            total += 2 * linear_params * length + cfg.num_hidden_layers * per_attention * length * length
        total += 2 * heads * 2 * item.target_len
    return total * steps


class PeakMemory:
    """Peak memory the block added above what was resident when it began: RSS on a CPU, allocated on a GPU."""

    def __init__(self, device: str):
        self.device, self.mb, self._base = device, 0.0, 0.0

    def __enter__(self):
        if self.device.startswith("cuda"):
            torch.cuda.reset_peak_memory_stats()
            self._base = torch.cuda.memory_allocated() / 2**20
            return self
        import psutil

        process = psutil.Process()
        self._base = process.memory_info().rss / 2**20
        peak = [self._base]
        self._peak = peak
        self._stop = threading.Event()

        def sample():
            while not self._stop.is_set():
                peak[0] = max(peak[0], process.memory_info().rss / 2**20)
                self._stop.wait(0.02)

        self._thread = threading.Thread(target=sample, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc):
        if self.device.startswith("cuda"):
            self.mb = torch.cuda.max_memory_allocated() / 2**20 - self._base
        else:
            self._stop.set()
            self._thread.join()
            self.mb = self._peak[0] - self._base
        return False
