"""Running the bench: load once, measure the probes in a clean state, warm every row up, then the timed runs
interleaved (median of N), then drift, ceilings and the comparison with the peer. Nothing is written to omnidub's
measurements unless ``record`` asks for it."""

from __future__ import annotations

import gc
import os
import platform
import statistics
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from omnidub.bench import probes
from omnidub.bench.references import references
from omnidub.bench.rows import LINES, ONNX_ROWS, ROWS, SHORT_DTYPES, BenchOptions, Row, Setup, request
from omnidub.config import DecodeOptions, EngineOptions, default_layout, load_preset
from omnidub.duration import FRAME_RATE, natural_frames
from omnidub.errors import OmnidubError
from omnidub.hardware import gpu_name

# What the headline rows run (bench JSON "headline": a run before 2026-12-02 has none: its peer row ran upstream's
# generate on omnidub's own loaded model and its auto row probed inside the bench).
HEADLINE_PATHS = {
    "peer": "its own model from OmniVoice.from_pretrained, omnivoice-fastpath's apply_trimmed_cfg, "
    "upstream's create_voice_clone_prompt and generate",
    "omnidub": "Session(model, device, fast preset with the dtype, compile off).backend() on an empty "
    "cache (the first-use probe runs as on a new machine), omnidub's decoding loop",
}


@dataclass
class BenchResult:
    machine: dict
    model: str
    lines: list[str]
    repeat: int
    rows: list[Row]
    matmul_gflops: dict
    floor: dict
    versus_peer: dict = field(default_factory=dict)
    kernels: dict = field(default_factory=dict)
    step_profile: dict = field(default_factory=dict)
    recorded: dict = field(default_factory=dict)
    probes: dict = field(default_factory=dict)
    date: str = ""
    matmul_size: int = 2048
    options: dict = field(default_factory=dict)
    # What a render takes here and why (the header's clause per dtype), and where the ONNX export stands.
    paths: dict = field(default_factory=dict)

    def to_json(self) -> dict:
        rows = []
        for row in self.rows:
            data = asdict(row)
            low, high = row.spread
            data.update(
                seconds=row.seconds,
                rtf=row.rtf,
                seconds_per_line=row.seconds / len(self.lines),
                min_seconds=low,
                max_seconds=high,
            )
            rows.append(data)
        return {
            "machine": self.machine,
            "model": self.model,
            "date": self.date,
            "lines": self.lines,
            "repeat": self.repeat,
            "matmul_gflops": self.matmul_gflops,
            "floor": self.floor,
            "versus_peer": self.versus_peer,
            "kernels": self.kernels,
            "step_profile": self.step_profile,
            "recorded": self.recorded,
            "probes": self.probes,
            "matmul_size": self.matmul_size,
            "ceiling": "best",
            "headline": HEADLINE_PATHS,
            "options": self.options,
            "paths": self.paths,
            "rows": rows,
        }


def run_bench(options: BenchOptions, console=None, warn=None) -> BenchResult:
    """Run the rows and return every figure."""
    from omnidub.backends.torch import TorchBackend
    from omnidub.backends.torch.upstream import resolve_device
    from omnidub.hardware import dtype_for

    say = console.print if console is not None else (lambda *a, **k: None)
    load_before = os.getloadavg()
    device = resolve_device(options.device)
    source, model_spec, export_dir, selected = _model_and_rows(options, device, say)
    if warn is not None:
        warn(model_spec)
    repeat = options.repeat or 3
    texts = [LINES[i % len(LINES)] for i in range(2 if options.quick else options.lines)]
    fast = load_preset("fast")
    stock_steps, fast_steps = (8, 4) if options.quick else (32, fast.engine.decode.steps)
    # Stock is upstream's own recipe on the device: fp16 on CUDA (as its README loads it), fp32 elsewhere.
    base = options.dtype or ("float16" if device.startswith("cuda") else "float32")
    if base not in SHORT_DTYPES or base == "int8":
        raise OmnidubError(f"bench --dtype must be float32, bfloat16 or float16, got {base!r}")
    alt = "bfloat16" if base != "bfloat16" else "float32"
    preset_dtype = dtype_for(fast.engine.dtype, device)

    say(f"bench: {model_spec} on {device}, {len(texts)} line(s), rows {', '.join(selected)}, median of {repeat}")
    say(f"→ loading the model ({base})")
    engine = TorchBackend(
        source,
        device=device,
        options=EngineOptions(DecodeOptions(steps=fast_steps), cfg="trimmed", batch=1, dtype=base, compile=False),
    )
    refs = references(options, engine, say)
    # One fixed length per line (the estimate at the trimmed reference's pace, or --seconds): every row makes the
    # same audio.
    cut = refs["cut"]
    durations = [options.seconds or natural_frames(t, cut.text, cut.frames) / FRAME_RATE for t in texts]
    setup = Setup(
        engine,
        refs,
        texts,
        durations,
        stock_steps,
        fast_steps,
        base,
        alt,
        preset_dtype,
        options,
        device,
        say,
        export_dir,
    )
    made = [setup.make(name) for name in selected]
    rows, runners = [row for row, _ in made], {row.name: runner for row, runner in made if runner is not None}
    _resolve_against(rows, preset_dtype)
    live = [row for row in rows if row.name in runners]
    size = 512 if options.quick else 2048
    # Before any row runs (a compiled row leaves inductor's workers behind): the ceilings, kernels and step profile.
    matmul = {
        dt: probes.matmul_gflops(device, dt, size)
        for dt in sorted({r.dtype for r in live if r.dtype != "int8" and r.name not in ONNX_ROWS})
    }
    kernels, profile = ({}, {}) if options.quick else _profiles(setup, runners, live, matmul, say)
    _time_rows(live, runners, texts, durations, repeat, device, say, tiny=source.synthetic == "tiny")
    by_name = {row.name: row for row in rows}
    say("→ measuring drift against float32 (and the compiled row against its eager twin)")
    setup.drift(rows, runners)
    _ratios(setup, live, by_name, matmul)
    recorded = _record(setup, by_name, runners) if options.record and not options.quick else {}
    return BenchResult(
        machine(device, load_before),
        model_spec,
        texts,
        repeat,
        rows,
        matmul,
        _floor(rows, preset_dtype),
        _versus_peer(by_name),
        kernels,
        profile,
        recorded,
        {dt: [asdict(r) for r in results] for dt, results in setup.probes.items()},
        time.strftime("%Y-%m-%d"),
        size,
        {k: str(v) if isinstance(v, Path) else v for k, v in asdict(options).items()},
        _paths(setup, source, device),
    )


def _paths(setup: Setup, source, device: str) -> dict:
    """The header's clause for each auto row (backend, CPU kind, GEMM library, why) and, on a CPU, where the
    model's ONNX export stands for --backend auto (built or not, measured faster here or not)."""
    out = {f"render ({dtype})": said for dtype, said in setup.paths.items()}
    if device == "cpu" and source.backend != "onnx":
        from omnidub.backends.onnx import cache

        out["onnx export"] = cache.status(source).summary()
    return out


def _ratios(setup: Setup, live: list[Row], by_name: dict[str, Row], matmul: dict) -> None:
    """Each row against the row it changes and against stock, and its useful GFLOP/s against the ceiling."""
    engine, cut, full = setup.engine, setup.refs["cut"], setup.refs["full"]
    lines = list(zip(setup.texts, setup.durations))
    items = {
        name: [engine._item(engine._resolve(request(t, ref.prompt, d)), 0) for t, d in lines]
        for name, ref in (("cut", cut), ("full", full))
    }
    stock = by_name.get("stock")
    for row in live:
        other = by_name.get(row.against or "")
        row.speedup = other.seconds / row.seconds if other is not None and other.runs else None
        row.speedup_vs_stock = stock.seconds / row.seconds if stock is not None and stock.runs else None
        flops = probes.forward_flops(engine, items["full" if row.name in ("stock", "steps") else "cut"], row.steps)
        row.forward_gflop = flops / 1e9
        peak = max(matmul.get(row.dtype, {}).values(), default=None)
        row.fraction_of_peak = flops / row.seconds / 1e9 / peak if peak else None


def _model_and_rows(options: BenchOptions, device: str, say):
    """(source, model spec, export folder or None, selected rows). An export's torch rows run on its checkpoint."""
    from omnidub.models import DEFAULT_MODEL, resolve_model

    model_spec = "synthetic:tiny" if options.quick else options.model
    export_dir = manifest = None
    if model_spec is not None and resolve_model(model_spec).backend == "onnx":
        from omnidub.backends.onnx.runtime import read_manifest

        export_dir = resolve_model(model_spec).path
        manifest = read_manifest(export_dir)
        model_spec = manifest["model"]["id"]
        say(f"bench: ONNX rows from {export_dir}; torch rows on {model_spec}, the model it was exported from")
    selected = _select_rows(options.rows, options.compile, device, export_dir is not None)
    if manifest is not None and "transformer.int8.onnx" not in manifest["files"] and "onnx-int8" in selected:
        selected.remove("onnx-int8")
        say("[bold yellow]notice:[/] the export has no int8 transformer (export --quantize int8): no ORT int8 row")
    if model_spec is not None:
        return resolve_model(model_spec), model_spec, export_dir, selected
    try:
        return resolve_model(DEFAULT_MODEL), DEFAULT_MODEL, export_dir, selected
    except OmnidubError:
        say(
            f"[bold yellow]notice:[/] {DEFAULT_MODEL} is not reachable: benchmarking synthetic:full "
            "(random weights, real shapes, so the timings are real)."
        )
        return resolve_model("synthetic:full"), "synthetic:full", export_dir, selected


def _profiles(setup: Setup, runners: dict, live: list[Row], matmul: dict, say) -> tuple[dict, dict]:
    """Which GEMM kernel each shape runs, and one decoding step part by part, of the fast path in each dtype."""
    import torch

    say("→ checking which GEMM kernel each shape runs, and where one step's time goes")
    cut = setup.refs["cut"]
    first = request(setup.texts[0], cut.prompt, setup.durations[0])
    kernels, profile = {"note": "on CUDA every GEMM runs in cuBLAS"} if setup.device != "cpu" else {}, {}
    if setup.device == "cpu":
        item = setup.engine._item(setup.engine._resolve(first), 0)
        shapes = probes.gemm_shapes(setup.engine.model, item.input_ids.shape[1], 2 * item.target_len)
        kernels = {"tokens": item.input_ids.shape[1], "shapes": {k: list(v) for k, v in shapes.items()}}
        for dtype in sorted({setup.base, setup.alt}):
            for gemm in ("aten", "onednn"):
                kernels[f"{dtype} {gemm}"] = probes.gemm_kernels(shapes, getattr(torch, dtype), gemm)
    for row in live:
        fast_path = {"fused": "auto", "dtype": "auto-dtype"}.get(row.name)
        if row.name in ("auto", "auto-dtype") or (fast_path is not None and fast_path not in runners):
            peak = max(matmul.get(row.dtype, {}).values(), default=None)
            profile[row.dtype] = probes.step_profile(runners[row.name].engine, [first], peak)
    return kernels, profile


def _time_rows(live, runners, texts, durations, repeat, device, say, tiny: bool) -> None:
    """Warm every row up once on the first line as it will be timed (kernel caches, oneDNN's primitives for these
    shapes, the allocator; compiling happens here and is timed apart), then interleave the timed runs."""
    for row in live:
        say(f"→ warm-up: {row.title}")
        began = time.perf_counter()
        runners[row.name](texts[:1], durations[:1])
        if row.name == "compile":
            row.compile_seconds = time.perf_counter() - began
    for r in range(repeat):
        for row in live:
            say(f"→ run {r + 1}/{repeat}: {row.title}")
            # Garbage from the row before must not count in this row's peak; a collection takes seconds in a big
            # process, which only a tiny model's smoke run notices.
            if not tiny:
                gc.collect()
            with probes.PeakMemory(device) as peak:
                probes.sync(device)
                began = time.perf_counter()
                runners[row.name](texts, durations)
                probes.sync(device)
                row.runs.append(time.perf_counter() - began)
            row.audio_seconds = sum(durations)
            row.peak_mb = max(row.peak_mb, peak.mb)


def _select_rows(spec: str | None, with_compile: bool, device: str, with_onnx: bool = False) -> list[str]:
    if not spec:
        return [
            r
            for r in ROWS
            if (r != "compile" or with_compile)
            and (r != "int8" or device == "cpu")
            and (r not in ONNX_ROWS or with_onnx)
        ]
    chosen = []
    for part in (p.strip() for p in spec.split(",") if p.strip()):
        if part.isdigit() and 1 <= int(part) <= len(ROWS):
            part = ROWS[int(part) - 1]
        if part not in ROWS:
            raise OmnidubError(f"unknown bench row {part!r}; rows are 1-{len(ROWS)} or {', '.join(ROWS)}")
        if part in ONNX_ROWS and not with_onnx:
            raise OmnidubError(f"bench row {part} needs an ONNX export: pass --model EXPORT_DIR (see omnidub export)")
        chosen.append(part)
    return [r for r in ROWS if r in chosen]


def _resolve_against(rows: list[Row], preset_dtype: str) -> None:
    names = {row.name for row in rows}
    ladder = next((r.dtype for r in rows if r.name in ("fused", "packed", "auto")), None)
    for row in rows:
        same = row.dtype == (ladder or row.dtype)
        if row.name == "batch":
            row.against = "packed" if same else "packed-dtype"
        elif row.name == "compile":
            row.against = "auto" if same else "auto-dtype"
        if row.against not in names:
            row.against = None


def _versus_peer(by_name: dict[str, Row]) -> dict:
    """The headline: omnidub as render gets it (the auto rows, through Session) against the peer recipe on its own
    upstream model, in the same dtype; ratios repeat by repeat too (those runs ran back to back). No other row
    stands in for either side."""
    out = {}
    for peer, ours in (("peer", "auto"), ("peer-dtype", "auto-dtype")):
        p, o = by_name.get(peer), by_name.get(ours)
        if p is None or o is None or not p.runs or not o.runs or p.dtype != o.dtype:
            continue
        paired = [a / b for a, b in zip(p.runs, o.runs)]
        out[p.dtype] = {
            "ours": o.name,
            "ours_seconds": o.seconds,
            "peer_seconds": p.seconds,
            "speedup": p.seconds / o.seconds,
            "paired": paired,
            "paired_median": statistics.median(paired) if paired else None,
        }
    return out


def _floor(rows: list[Row], preset_dtype: str) -> dict:
    """How close the fast path's row in the preset's dtype gets to the matmul ceiling over its whole wall time."""
    names = ("auto", "auto-dtype", "fused", "packed", "joined", "dtype", "packed-dtype", "joined-dtype")
    candidates = [r for r in rows if r.runs and r.dtype == preset_dtype and r.name in names]
    if not candidates or all(r.fraction_of_peak is None for r in candidates):
        return {}
    best = next((r for r in candidates if r.name.startswith("auto")), min(candidates, key=lambda r: r.seconds))
    return {
        "row": best.name,
        "forward_gflop": best.forward_gflop,
        "achieved_gflops": best.forward_gflop / best.seconds,
        "fraction_of_peak": best.fraction_of_peak,
        "note": "FLOPs of the useful transformer work (no padding), over the row's whole wall time, against the "
        "better of torch's and oneDNN's dense matmul",
    }


def _record(setup: Setup, by_name: dict[str, Row], runners: dict) -> dict:
    """bench --record: what this run measured becomes this machine's choice (layout per dtype from the trimmed and
    packed rows, GEMM kernels from the fused and oneDNN rows, the compile cost)."""
    from omnidub import measured
    from omnidub.backends.probe import kept
    from omnidub.backends.torch.backend import inductor_folder

    out = {}
    shape = setup.engine.shape
    for names, dtype in (
        (("fused", "packed", "joined"), setup.base),
        (("dtype", "packed-dtype", "joined-dtype"), setup.alt),
    ):
        # The trimmed row and at least one other layout's, measured in the same run.
        ran = {
            layout: by_name[name]
            for layout, name in zip(("trimmed", "packed", "joined"), names)
            if name in by_name and by_name[name].runs
        }
        if "trimmed" not in ran or len(ran) < 2:
            continue
        seconds = {layout: round(r.seconds, 3) for layout, r in ran.items()}
        figures = ", ".join(f"{layout} {r.seconds:.2f} s" for layout, r in ran.items())
        evidence = (
            f"omnidub bench --record {time.strftime('%Y-%m-%d')}, {setup.engine.source.spec}, "
            f"{len(setup.texts)} lines, median of {len(ran['trimmed'].runs)}: {figures}"
        )
        gpu = gpu_name(setup.device)
        # As the first-use probe decides: the default layout stays unless another is clearly faster.
        chosen = kept(seconds, default_layout(setup.device))
        choice = measured.record_layout(setup.device, dtype, seconds, evidence, shape=shape, gpu=gpu, choice=chosen)
        out[f"layout {dtype}"] = {"choice": choice, "seconds": seconds}
    f, o = by_name.get("fused"), by_name.get("onednn")
    if f is not None and o is not None and f.runs and o.runs:
        choice = "onednn" if o.seconds < f.seconds else "aten"
        measured.record(
            "gemm",
            measured.probe_key(setup.device, setup.base, "torch", shape),
            {
                "choice": choice,
                "seconds": {"aten": f.seconds, "onednn": o.seconds},
                "evidence": f"omnidub bench --record {time.strftime('%Y-%m-%d')}: fused {f.seconds:.2f} s, "
                f"onednn {o.seconds:.2f} s",
            },
        )
        out[f"gemm {setup.base}"] = {"choice": choice}
    compiled = by_name.get("compile")
    if compiled is not None and compiled.speedup:
        engine = runners["compile"].engine
        measured.record_compile(
            engine._compile_key(),
            compiled.compile_seconds or 0.0,
            warm=engine.compiled_warm,
            cache=str(inductor_folder()),
            speedup=round(compiled.speedup, 3),
        )
        out["compile"] = {"seconds": compiled.compile_seconds, "speedup": compiled.speedup}
    return out


def machine(device: str, load_before) -> dict:
    """The machine a run measured on: CPU, flags, cores, threads, torch, load average before and after."""
    import torch

    from omnidub.hardware import cpu_flags, cpu_kind, cpu_name, isa_limits
    from omnidub.measured import matrix_units

    return {
        "cpu": cpu_name(),
        "kind": cpu_kind(),
        "matrix_units": matrix_units(),
        "cpu_flags": sorted(f for f in cpu_flags() if f.startswith(("avx", "amx", "fma", "sse4"))),
        "isa_limits": isa_limits(),
        "cores": os.cpu_count(),
        "torch": torch.__version__,
        "device": device,
        "gpu": gpu_name(device),
        "python": platform.python_version(),
        "threads": torch.get_num_threads(),
        "load_average": {"before": [round(x, 2) for x in load_before], "after": [round(x, 2) for x in os.getloadavg()]},
    }
