"""Benchmark: every speed lever side by side against the stock OmniVoice call, on one resident model.

The ladder is cumulative: stock upstream ``generate`` (32 steps, whole reference, padded CFG, float32), then
12 steps, a ~3 s reference cut at a word boundary, omnidub's loop with trimmed CFG, packed CFG, the preset's
dtype, batching, and torch.compile. Rows are interleaved and repeated and the median is reported, because
shared machines are noisy; warm-up runs are excluded.
"""

from __future__ import annotations

import gc
import platform
import statistics
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

from omnidub.duration import FRAME_RATE
from omnidub.errors import OmnidubError
from omnidub.config import DecodeOptions, EngineOptions, load_preset

ROOT = Path(__file__).resolve().parent
BUNDLED_REF_CUT = ROOT / "data" / "alice-3s.wav"
# Short dubbing lines of 2-4 s, like the seed's segments.
LINES = (
    "I'll pack some sandwiches and a flask of coffee.",
    "Did you remember to book the hotel by the beach?",
    "Around nine, after the morning traffic has cleared.",
    "That sounds lovely. Let's book it tonight.",
    "We should leave before the roads get busy.",
    "Two rooms, Friday and Saturday night, with breakfast.",
    "I wanted to compare the prices first.",
    "Great. I'll bring the map and the umbrellas.",
)
ROWS = ("stock", "steps", "ref3s", "trimmed", "packed", "dtype", "batch", "compile", "onnx", "onnx-int8")
# Rows that need an ONNX export (bench --model EXPORT_DIR); the torch rows then run on the model it came from.
ONNX_ROWS = ("onnx", "onnx-int8")
SHORT_DTYPES = {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16"}
LABELS = {"stock": "stock", "steps": "steps", "ref3s": "3 s ref", "trimmed": "trimmed", "packed": "packed",
          "dtype": "dtype", "batch": "batch", "compile": "compile", "onnx": "ORT", "onnx-int8": "ORT int8"}
TITLES = {
    "stock": "stock: upstream generate, upstream step count, whole reference, padded, fp32",
    "steps": "+ the fast preset's step count",
    "ref3s": "+ 3 s reference at a word boundary",
    "trimmed": "+ omnidub loop, trimmed CFG (the seed's recipe)",
    "packed": "packed CFG instead",
    "dtype": "+ preset dtype",
    "batch": "+ batch N (packed)",
    "compile": "+ torch.compile",
    "onnx": "ONNX Runtime, fp32, omnidub's numpy host loop",
    "onnx-int8": "ONNX Runtime, dynamic int8 transformer",
}


@dataclass(frozen=True)
class BenchOptions:
    model: str | None = None
    device: str = "auto"
    lines: int = 2
    rows: str | None = None
    repeat: int | None = None
    batch: int = 2
    compile: bool = False
    ref: Path | None = None
    ref_text: str | None = None
    quick: bool = False


@dataclass
class Row:
    name: str
    title: str
    steps: int
    cfg: str
    dtype: str
    batch: int
    reference_seconds: float
    runs: list[float] = field(default_factory=list)
    audio_seconds: float = 0.0
    peak_mb: float = 0.0
    compile_seconds: float | None = None
    speedup_vs_stock: float | None = None
    speedup_vs_previous: float | None = None
    logits_max_abs_diff: float | None = None
    argmax_agreement: float | None = None
    forward_tflop: float | None = None
    note: str = ""

    @property
    def seconds(self) -> float:
        return statistics.median(self.runs) if self.runs else float("nan")

    @property
    def rtf(self) -> float:
        return self.seconds / self.audio_seconds if self.audio_seconds else float("nan")


@dataclass
class BenchResult:
    machine: dict
    model: str
    lines: list[str]
    repeat: int
    rows: list[Row]
    matmul_gflops: dict
    floor: dict

    def to_json(self) -> dict:
        rows = []
        for row in self.rows:
            data = asdict(row)
            data.update(seconds=row.seconds, rtf=row.rtf, seconds_per_line=row.seconds / len(self.lines))
            rows.append(data)
        return {"machine": self.machine, "model": self.model, "lines": self.lines, "repeat": self.repeat,
                "matmul_gflops": self.matmul_gflops, "floor": self.floor, "rows": rows}


def run_bench(options: BenchOptions, console=None, warn=None) -> BenchResult:
    """Run the ladder and return every figure."""
    import torch

    from omnidub.backends import Request
    from omnidub.backends.torch import TorchBackend, compare_logits
    from omnidub.backends.torch.upstream import resolve_device
    from omnidub.hardware import dtype_for
    from omnidub.models import DEFAULT_MODEL, resolve_model
    from omnidub.voices import load_audio

    say = console.print if console is not None else (lambda *a, **k: None)
    device = resolve_device(options.device)
    full_path, full_text, cut_path, cut_text = _references(options)
    model_spec = "synthetic:tiny" if options.quick else options.model
    export_dir = None
    if model_spec is not None and resolve_model(model_spec).backend == "onnx":
        from omnidub.backends.onnx.runtime import read_manifest

        export_dir = resolve_model(model_spec).path
        manifest = read_manifest(export_dir)
        model_spec = manifest["model"]["id"]
        say(f"bench: ONNX rows from {export_dir}; torch rows on {model_spec}, the model it was exported from")
    selected = _select_rows(options.rows, options.compile, export_dir is not None)
    if export_dir is not None and "transformer.int8.onnx" not in manifest["files"] and "onnx-int8" in selected:
        selected.remove("onnx-int8")
        say("[bold yellow]notice:[/] the export has no int8 transformer (export --quantize int8): no ORT int8 row")
    if model_spec is None:
        try:
            source = resolve_model(DEFAULT_MODEL)
            model_spec = DEFAULT_MODEL
        except OmnidubError:
            model_spec = "synthetic:full"
            source = resolve_model(model_spec)
            say(f"[bold yellow]notice:[/] {DEFAULT_MODEL} is not reachable: benchmarking synthetic:full "
                "(random weights, real shapes, so the timings are real).")
    else:
        source = resolve_model(model_spec)
    if warn is not None:
        warn(model_spec)
    repeat = options.repeat or (3 if device.startswith("cuda") else 1)
    n_lines = 2 if options.quick else options.lines
    texts = [LINES[i % len(LINES)] for i in range(n_lines)]
    fast = load_preset("fast")
    stock_steps, fast_steps = (8, 4) if options.quick else (32, fast.engine.decode.steps)

    say(f"bench: {model_spec} on {device}, {n_lines} line(s), rows {', '.join(selected)}, repeat {repeat}")

    base = EngineOptions(DecodeOptions(steps=fast_steps), cfg="padded", batch=1, dtype="float32")
    say("→ loading the model (float32)")
    engine32 = TorchBackend(source, device=device, options=base)
    rate = engine32.sample_rate
    prompts = {
        "full": engine32.encode_prompt(load_audio(full_path, rate), rate, full_text),
        "cut": engine32.encode_prompt(load_audio(cut_path, rate), rate, cut_text),
    }
    preset_dtype = dtype_for(fast.engine.dtype, device)

    rows: list[Row] = []
    runners = {}
    for name in selected:
        row, runner = _make_row(name, engine32, prompts, texts, stock_steps, fast_steps, fast, preset_dtype, options, device, say,
                                export_dir)
        rows.append(row)
        runners[name] = runner

    # Warm up every row once (compile happens here and is timed apart), then interleave the timed runs.
    for row in rows:
        say(f"→ warm-up: {row.title}")
        began = time.perf_counter()
        runners[row.name](texts[:1])
        if row.name == "compile":
            row.compile_seconds = time.perf_counter() - began
    for r in range(repeat):
        for row in rows:
            say(f"→ run {r + 1}/{repeat}: {row.title}")
            gc.collect()
            with _PeakMemory(device) as peak:
                _sync(device)
                began = time.perf_counter()
                audio_seconds = runners[row.name](texts)
                _sync(device)
                row.runs.append(time.perf_counter() - began)
            row.audio_seconds = audio_seconds
            row.peak_mb = max(row.peak_mb, peak.mb)

    stock = next((r for r in rows if r.name == "stock"), None)
    for previous, row in zip([None] + rows[:-1], rows):
        if stock is not None:
            row.speedup_vs_stock = stock.rtf / row.rtf
        if previous is not None:
            row.speedup_vs_previous = previous.rtf / row.rtf

    if "dtype" in runners and preset_dtype != "float32":
        say("→ comparing first-step logits: preset dtype vs float32")
        requests = [Request(text=t, prompt=prompts["cut"], language="en", duration=2.0, seed=0) for t in texts]
        row = next(r for r in rows if r.name == "dtype")
        row.logits_max_abs_diff, row.argmax_agreement = compare_logits(engine32, runners["dtype"].engine, requests)

    matmul = {dt: _matmul_gflops(device, dt) for dt in sorted({r.dtype for r in rows if r.name not in ONNX_ROWS})}
    floor = _floor(rows, runners, matmul, texts, prompts["cut"])
    machine = {
        "cpu": _cpu_name(),
        "cores": __import__("os").cpu_count(),
        "torch": torch.__version__,
        "device": device,
        "gpu": torch.cuda.get_device_name(0) if device.startswith("cuda") else None,
        "python": platform.python_version(),
        "threads": torch.get_num_threads(),
    }
    return BenchResult(machine, model_spec, texts, repeat, rows, matmul, floor)


def _select_rows(spec: str | None, with_compile: bool, with_onnx: bool = False) -> list[str]:
    if not spec:
        return [r for r in ROWS if (r != "compile" or with_compile) and (r not in ONNX_ROWS or with_onnx)]
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


def _references(options: BenchOptions) -> tuple[Path, str, Path, str]:
    """The files of the whole reference and its ~3 s cut, with exact transcripts."""
    if options.ref is not None:
        if not options.ref_text:
            raise OmnidubError("--ref needs --ref-text (its exact transcript)")
        # A user reference has no bundled cut: both reference rows use it whole.
        return options.ref, options.ref_text, options.ref, options.ref_text
    examples = ROOT.parent / "examples" / "voices.toml"
    if examples.is_file():
        entry = tomllib.loads(examples.read_text(encoding="utf-8"))["ALICE"]
        full_path, full_text = examples.parent / entry["audio"], entry["text"]
    else:  # installed without the examples folder: the cut serves as both
        full_path, full_text = BUNDLED_REF_CUT, (BUNDLED_REF_CUT.with_suffix(".txt")).read_text().strip()
    cut_text = BUNDLED_REF_CUT.with_suffix(".txt").read_text(encoding="utf-8").strip()
    return full_path, full_text, BUNDLED_REF_CUT, cut_text


class _Runner:
    """Runs one row over a list of texts and returns the seconds of audio produced."""

    def __init__(self, fn, engine=None):
        self.fn, self.engine = fn, engine

    def __call__(self, texts):
        return self.fn(texts)


def _make_row(name, engine32, prompts, texts, stock_steps, fast_steps, fast, preset_dtype, options, device, say,
              export_dir=None):
    import torch

    from omnidub.backends import Request
    from omnidub.backends.torch.upstream import voice_clone_prompt
    from omnidub.config import resolve_layout
    from omnidub.scheduler import Budget, stream

    ref_full = prompts["full"].seconds
    ref_cut = prompts["cut"].seconds

    def upstream(steps, prompt):
        def run(batch_texts):
            produced = 0.0
            for i, text in enumerate(batch_texts):
                torch.manual_seed(i)
                audio = engine32.model.generate(text=text, language="en", voice_clone_prompt=voice_clone_prompt(prompt),
                                                num_step=steps)[0]
                produced += len(audio) / engine32.sample_rate
            return produced
        return _Runner(run, engine32)

    def ours(engine, lines=1):
        def run(batch_texts):
            requests = [Request(text=t, prompt=prompts["cut"], language="en", seed=i, id=str(i))
                        for i, t in enumerate(batch_texts)]
            return sum(len(r.audio) / r.sample_rate for r in stream(engine, requests, Budget(lines=lines)))
        return _Runner(run, engine)

    if name == "stock":
        return Row(name, TITLES[name], stock_steps, "padded", "float32", 1, ref_full), upstream(stock_steps, prompts["full"])
    if name == "steps":
        return Row(name, TITLES[name], fast_steps, "padded", "float32", 1, ref_full), upstream(fast_steps, prompts["full"])
    if name == "ref3s":
        return Row(name, TITLES[name], fast_steps, "padded", "float32", 1, ref_cut), upstream(fast_steps, prompts["cut"])
    base = fast.engine.replace(steps=fast_steps, batch=1, dtype="float32", compile=False)
    if name in ("trimmed", "packed"):
        engine = engine32.with_options(base.replace(cfg=name))
        return Row(name, TITLES[name], fast_steps, name, "float32", 1, ref_cut), ours(engine)
    cfg = resolve_layout(fast.engine.cfg, device)
    if name == "dtype":
        engine = engine32.with_options(base.replace(cfg=cfg, dtype=fast.engine.dtype))
        title = f"+ {preset_dtype} (preset dtype), {cfg} CFG"
        return Row(name, title, fast_steps, cfg, preset_dtype, 1, ref_cut), ours(engine)
    if name == "batch":
        say(f"→ preparing the batch row ({preset_dtype})")
        engine = engine32.with_options(base.replace(cfg="packed", dtype=fast.engine.dtype, batch=options.batch))
        title = f"+ batch {options.batch} (packed, {preset_dtype})"
        return Row(name, title, fast_steps, "packed", preset_dtype, options.batch, ref_cut), ours(engine, options.batch)
    if name == "compile":
        engine = engine32.with_options(base.replace(cfg=cfg, dtype=fast.engine.dtype, compile=True))
        return Row(name, TITLES[name] + f" ({cfg}, {preset_dtype})", fast_steps, cfg, preset_dtype, 1, ref_cut), ours(engine)
    if name in ONNX_ROWS:
        from omnidub.backends.onnx import OnnxBackend

        int8 = name == "onnx-int8"
        # The same thread count as torch, so the rows compare runtimes, not thread counts.
        engine = OnnxBackend(export_dir, "cuda" if device.startswith("cuda") else "cpu", base.replace(cfg=cfg), quantized=int8,
                             threads=torch.get_num_threads())
        row = Row(name, TITLES[name] + f" ({cfg})", fast_steps, cfg, "int8" if int8 else "float32", 1, ref_cut)
        return row, ours(engine)
    raise AssertionError(name)


def _matmul_gflops(device: str, dtype_name: str, n: int = 2048) -> float:
    """Dense n^3 matmul throughput in one dtype: the hardware's practical ceiling."""
    import torch

    dtype = getattr(torch, dtype_name)
    a = torch.randn(n, n, device=device).to(dtype)
    b = torch.randn(n, n, device=device).to(dtype)
    for _ in range(2):
        a @ b
    runs = []
    for _ in range(5):
        _sync(device)
        began = time.perf_counter()
        a @ b
        _sync(device)
        runs.append(time.perf_counter() - began)
    return 2 * n**3 / statistics.median(runs) / 1e9


def _floor(rows, runners, matmul, texts, prompt) -> dict:
    """For the fastest omnidub row: transformer FLOPs per second achieved, against the matmul ceiling."""
    ours = [r for r in rows if r.name not in ("stock", "steps", "ref3s") + ONNX_ROWS and r.runs]
    if not ours:
        return {}
    best = min(ours, key=lambda r: r.rtf)
    engine = runners[best.name].engine
    flops = _forward_flops(engine, texts, best.steps, prompt)
    achieved = flops / best.seconds / 1e9
    peak = matmul.get(best.dtype)
    best.forward_tflop = flops / 1e12
    return {
        "row": best.name,
        "forward_gflop": flops / 1e9,
        "achieved_gflops": achieved,
        "matmul_peak_gflops": peak,
        "fraction_of_peak": achieved / peak if peak else None,
        "note": "FLOPs of the useful transformer work (no padding), over the row's whole wall time",
    }


def _forward_flops(engine, texts, steps: int, prompt) -> float:
    """Matmul FLOPs of the language model and audio heads for every step of every line (no padding)."""
    import torch

    from omnidub.backends import Request

    llm = engine.model.llm
    cfg = llm.config
    linear = sum(m.weight.numel() for m in llm.modules() if isinstance(m, torch.nn.Linear))
    heads = engine.model.audio_heads.weight.numel()
    per_attention = 4 * cfg.num_attention_heads * getattr(cfg, "head_dim", cfg.hidden_size // cfg.num_attention_heads)
    total = 0.0
    for text in texts:
        line = engine._resolve(Request(text=text, prompt=prompt, language="en"))
        item = engine._item(line, 0)
        c_len, t_len = item.input_ids.shape[-1], item.target_len
        for length in (c_len, t_len):  # conditional and unconditional rows
            total += 2 * linear * length + cfg.num_hidden_layers * per_attention * length * length
        total += 2 * heads * 2 * t_len
    return total * steps


class _PeakMemory:
    """Peak resident memory (CPU) or peak allocated memory (GPU) while the block runs."""

    def __init__(self, device: str):
        self.device, self.mb = device, 0.0

    def __enter__(self):
        import torch

        if self.device.startswith("cuda"):
            torch.cuda.reset_peak_memory_stats()
            return self
        import psutil

        process = psutil.Process()
        self._stop = threading.Event()

        def sample():
            while not self._stop.is_set():
                self.mb = max(self.mb, process.memory_info().rss / 2**20)
                self._stop.wait(0.05)

        self._thread = threading.Thread(target=sample, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc):
        import torch

        if self.device.startswith("cuda"):
            self.mb = torch.cuda.max_memory_allocated() / 2**20
        else:
            self._stop.set()
            self._thread.join()
        return False


def _sync(device: str) -> None:
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize()
    elif device == "mps":
        torch.mps.synchronize()


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def print_bench(result: BenchResult, console) -> None:
    """The ladder as a rich table, then the machine and the hardware floor."""
    from rich import box
    from rich.table import Table

    table = Table(title=f"omnidub bench · {result.model} · {len(result.lines)} line(s) · median of {result.repeat}",
                  box=box.SIMPLE_HEAD, pad_edge=False, padding=(0, 1), collapse_padding=True)
    for column in ("row", "steps", "cfg", "dtype", "ref", "RTF", "s/line", "×stock", "×above", "MB"):
        table.add_column(column, justify="left" if column in ("row", "cfg", "dtype") else "right", no_wrap=True)
    for row in result.rows:
        label = f"{ROWS.index(row.name) + 1} {LABELS[row.name]}" + (f" {row.batch}" if row.name == "batch" else "")
        table.add_row(
            label, str(row.steps), row.cfg, SHORT_DTYPES.get(row.dtype, row.dtype), f"{row.reference_seconds:.1f}",
            f"{row.rtf:.2f}", f"{row.seconds / len(result.lines):.1f}", _x(row.speedup_vs_stock),
            _x(row.speedup_vs_previous), f"{row.peak_mb:.0f}",
        )
    console.print(table)
    m = result.machine
    console.print("ref: reference seconds · RTF: wall / audio seconds · MB: peak memory (RSS on CPU, allocated on GPU)")
    console.print(f"machine: {m['cpu']} · {m['cores']} cores · torch {m['torch']} · {m['device']}"
                  + (f" ({m['gpu']})" if m.get("gpu") else "") + f" · {m['threads']} threads")
    for row in result.rows:
        if row.compile_seconds is not None:
            console.print(f"compile: {row.compile_seconds:.1f} s for the first (warm-up) run, not counted in the row")
        if row.logits_max_abs_diff is not None:
            console.print(f"{row.dtype} vs float32 first-step logits: max |Δ| {row.logits_max_abs_diff:.4f}, "
                          f"argmax agreement {row.argmax_agreement:.2%}")
    for row in result.rows:
        console.print(f"  {ROWS.index(row.name) + 1}. {row.title}", highlight=False)
    matmul = ", ".join(f"{dt} {g:,.0f} GFLOP/s" for dt, g in result.matmul_gflops.items())
    console.print(f"dense 2048³ matmul: {matmul}")
    floor = result.floor
    if floor:
        fraction = f" = {floor['fraction_of_peak']:.0%} of the matmul peak" if floor.get("fraction_of_peak") else ""
        console.print(f"floor: row '{floor['row']}' does {floor['forward_gflop']:,.4g} GFLOP of transformer work at "
                      f"{floor['achieved_gflops']:,.4g} GFLOP/s over its wall time{fraction}")


def _x(value: float | None) -> str:
    return "" if value is None else f"{value:.2f}x"
