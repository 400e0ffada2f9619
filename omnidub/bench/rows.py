"""The bench's rows: each lever declared once, with the row it changes, and how it runs over the resident models."""

from __future__ import annotations

import contextlib
import os
import statistics
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from omnidub.bench.peer import available as peer_available
from omnidub.errors import OmnidubError

ROOT = Path(__file__).resolve().parent.parent
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
    "onednn": "fused",
    "packed": "fused",
    "joined": "fused",
    "auto": "peer",  # what a machine never measured gets: the first-use probe's choices, against the peer
    "dtype": "fused",
    "packed-dtype": "dtype",
    "joined-dtype": "dtype",
    "auto-dtype": "peer-dtype",
    "peer-dtype": "peer",
    "batch": None,  # set at run time: the packed row in the preset's dtype
    "compile": None,  # set at run time: the auto row of the same dtype
    "int8": "fused",
    "onnx": "fused",  # the same fp32 work on ONNX Runtime instead of torch
    "onnx-int8": "onnx",
    # The prefix cache (approximate), each against the exact fast path of the same layout, dtype and GEMMs.
    "prefix2": "fused",
    "prefix4": "fused",
    "prefix8": "fused",
}
ROWS = tuple(AGAINST)
# The prefix cache's rows: how many steps each refresh serves.
PREFIX_ROWS = {"prefix2": 2, "prefix4": 4, "prefix8": 8}
UPSTREAM_ROWS = ("stock", "steps", "ref3s", "peer", "peer-dtype")
# Rows that need an ONNX export (bench --model EXPORT_DIR); the torch rows then run on the model it came from.
ONNX_ROWS = ("onnx", "onnx-int8")
# The rows that change the CFG layout: (layout, in the other dtype).
LAYOUT_ROWS = {
    "packed": ("packed", False),
    "joined": ("joined", False),
    "packed-dtype": ("packed", True),
    "joined-dtype": ("joined", True),
}
SHORT_DTYPES = {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16", "int8": "int8"}
# What the published measurements say the lossy levers cost in WER (omnivoice-fastpath's paired evaluation).
PUBLISHED_WER_COST = {
    "int8": "about +1 WER point (ONNX Runtime int8, omnivoice-fastpath's measurement)",
    "onnx-int8": "about +1 WER point (ONNX Runtime int8, omnivoice-fastpath's measurement)",
}


def eval_command(row: "Row") -> str | None:
    """How to measure what a row whose arithmetic differs from fp32 costs in WER on one's own sentences (the
    paired ``omnidub eval``; docs/eval.md), or None for a row that keeps fp32's arithmetic."""
    if row.name in PREFIX_ROWS:
        return f"omnidub eval CORPUS --a fast --b fast,prefix_refresh={PREFIX_ROWS[row.name]}"
    if row.name == "onnx-int8":
        return (
            "omnidub eval CORPUS --a model=EXPORT_DIR --b model=INT8_EXPORT_DIR (exports without and with "
            "--quantize int8)"
        )
    if row.name == "onnx":
        return "omnidub eval CORPUS --a fast,dtype=float32,backend=torch --b fast,backend=onnx"
    if row.name == "compile":
        return f"omnidub eval CORPUS --a fast,dtype={row.dtype} --b fast,dtype={row.dtype},compile=true"
    if row.dtype != "float32":
        return f"omnidub eval CORPUS --a fast,dtype=float32 --b fast,dtype={row.dtype}"
    return None


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
    seconds: float | None = None  # every line this long [default: each line's natural length at the reference's pace]
    record: bool = False  # write what this run measured (layouts, GEMM kernels) to measured.json


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
    lossless: bool = True  # in the ladder's precision or in float32: no lossy arithmetic
    gemm: str = "aten"
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


class Runner:
    """Runs one row over lines (texts and their fixed durations)."""

    def __init__(self, fn, engine=None):
        self.fn, self.engine = fn, engine

    def __call__(self, texts, durations):
        return self.fn(texts, durations)


@contextlib.contextmanager
def scratch_cache():
    """A throwaway omnidub cache: the bench's first-use probe must not write the user's measured.json."""
    previous = os.environ.get("OMNIDUB_CACHE")
    with tempfile.TemporaryDirectory(prefix="omnidub-bench-") as folder:
        os.environ["OMNIDUB_CACHE"] = folder
        try:
            yield Path(folder)
        finally:
            if previous is None:
                os.environ.pop("OMNIDUB_CACHE", None)
            else:
                os.environ["OMNIDUB_CACHE"] = previous


class Setup:
    """Builds each row's runner over the resident models (loading the other dtype only once)."""

    def __init__(
        self,
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
        export_dir=None,
    ):
        self.engine, self.refs, self.texts, self.durations = engine, refs, texts, durations
        self.stock_steps, self.fast_steps = stock_steps, fast_steps
        self.base, self.alt, self.preset_dtype = base, alt, preset_dtype
        self.options, self.device, self.say = options, device, say
        self.export_dir = export_dir
        self._alt_engine = None
        self.probes: dict[str, list] = {}  # dtype -> the first-use probe's results (auto rows)
        self.paths: dict[str, str] = {}  # dtype -> the header's clause for the auto row's backend

    def lossless(self, dtype: str) -> bool:
        """The ladder's own precision, or float32 (never less exact than the reference)."""
        return dtype in (self.base, "float32")

    def backend(self, dtype: str, cfg: str = "trimmed", tuning=None, **changes):
        from omnidub.backends.torch import Tuning

        tuning = tuning or Tuning(gemm="aten")
        options = self.engine.options.replace(**{"dtype": dtype, "cfg": cfg, "compile": False, "batch": 1, **changes})
        if dtype == self.alt and self.alt != self.base:
            if self._alt_engine is None:
                self.say(f"→ loading the model ({dtype})")
                self._alt_engine = self.engine.with_options(options, tuning=Tuning(gemm="aten"))
            return self._alt_engine.with_options(options, tuning=tuning)
        return self.engine.with_options(options, tuning=tuning)

    def auto(self, dtype: str):
        """omnidub as ``omnidub render`` gets it: ``Session(...).backend()`` with the fast preset in ``dtype``
        (compile off), on an empty cache, so the first-use probe runs as on a machine that never ran omnidub and
        picks the layout and GEMM kernels. It loads its own model, as a render does."""
        from omnidub import Session, measured
        from omnidub.backends.probe import ProbeResult
        from omnidub.config import load_preset

        preset = load_preset("fast").with_overrides(dtype=dtype, compile=False, steps=self.fast_steps)
        self.say(f"→ loading omnidub through Session ({dtype}); its first-use probe runs on an empty cache")
        with scratch_cache():  # as on a machine that never measured anything, whatever this one recorded
            session = Session(self.engine.source.spec, self.device, preset, source=self.engine.source)
            backend = session.backend()
            found = measured.load()
            # What the render's header says of this path: the backend on this CPU kind, its GEMMs, and why.
            self.paths[dtype] = session.engine.backend_reason()
        key = measured.probe_key(self.device, backend.dtype, "torch", backend.shape)
        self.probes[dtype] = [
            ProbeResult(what, entry["seconds"], entry["choice"], entry["evidence"])
            for what in ("gemm", "layout")
            if (entry := found.get(what, {}).get(key))
        ]
        return backend

    def peer(self, dtype: str) -> Runner:
        """The peer recipe on its own upstream model (bench/peer.py), cloning the same reference."""
        from omnidub.bench.peer import Peer

        self.say(f"→ loading the peer's own model ({dtype}) with upstream's loader")
        cut = self.refs["cut"]
        peer = Peer(self.engine.source.path, self.device, dtype)
        peer.clone(cut.audio, cut.rate, cut.text)

        def run(texts, durations):
            for i, (text, seconds) in enumerate(zip(texts, durations)):
                peer.speak(text, seconds, self.fast_steps, seed=i)

        return Runner(run)

    def upstream(self, steps: int, prompt, engine) -> Runner:
        import torch

        from omnidub.backends.torch.upstream import voice_clone_prompt

        def run(texts, durations):
            for i, (text, seconds) in enumerate(zip(texts, durations)):
                torch.manual_seed(i)
                engine.model.generate(
                    text=text,
                    language="en",
                    voice_clone_prompt=voice_clone_prompt(prompt.prompt),
                    num_step=steps,
                    duration=seconds,
                )

        return Runner(run, engine)

    def ours(self, engine, lines: int = 1) -> Runner:
        from omnidub.scheduler import Budget, stream

        def run(texts, durations):
            requests = [
                request(t, self.refs["cut"].prompt, d, i, str(i)) for i, (t, d) in enumerate(zip(texts, durations))
            ]
            for result in stream(engine, requests, Budget(lines=lines)):
                if not hasattr(result, "audio"):
                    raise result.error

        return Runner(run, engine)

    def make(self, name: str) -> tuple[Row, Runner | None]:
        """Row ``name`` and what runs it (None when it is skipped, with why)."""
        from omnidub.backends.torch import Tuning

        cut = self.refs["cut"]
        b, a = SHORT_DTYPES[self.base], SHORT_DTYPES[self.alt]
        fs = self.fast_steps

        def row(title, steps, cfg, dtype, ref, batch=1, **extra):
            extra.setdefault("lossless", self.lossless(dtype))
            return Row(name, title, steps, cfg, dtype, batch, ref.seconds, against=AGAINST[name], **extra)

        if name in UPSTREAM_ROWS:
            return self._upstream_row(name, row)
        levers = {
            "loop": (
                "omnidub's loop instead (same trimmed CFG; vectorised scoring, heads only on targets)",
                Tuning(fused=False, skip_mask=False, gemm="aten"),
            ),
            "nomask": ("+ no attention mask where none is needed", Tuning(fused=False, skip_mask=True, gemm="aten")),
            "fused": ("+ fused QKV and gate/up projections", Tuning(gemm="aten")),
            "onednn": (f"+ oneDNN GEMMs with weights packed once, {b}", Tuning(gemm="onednn")),
        }
        if name in levers:
            title, tuning = levers[name]
            return row(title, fs, "trimmed", self.base, cut, gemm=tuning.gemm), self.ours(
                self.backend(self.base, tuning=tuning)
            )
        if name == "dtype":
            return row(f"+ {a} instead of {b} (trimmed)", fs, "trimmed", self.alt, cut), self.ours(
                self.backend(self.alt, cfg="trimmed")
            )
        if name in LAYOUT_ROWS:
            cfg, alt = LAYOUT_ROWS[name]
            dtype = self.alt if alt else self.base
            return row(f"{cfg} CFG instead of trimmed, {SHORT_DTYPES[dtype]}", fs, cfg, dtype, cut), self.ours(
                self.backend(dtype, cfg=cfg)
            )
        if name in ("auto", "auto-dtype"):
            dtype = self.base if name == "auto" else self.alt
            engine = self.auto(dtype)
            title = (
                f"omnidub as render gets it (Session), {SHORT_DTYPES[dtype]}: its first-use probe chose "
                f"{engine.layout} and {engine.gemm} GEMMs"
            )
            return row(title, fs, engine.layout, dtype, cut, gemm=engine.gemm), self.ours(engine)
        if name == "batch":
            n, dtype = self.options.batch, self.preset_dtype
            return row(f"+ batch {n} (packed, {SHORT_DTYPES[dtype]})", fs, "packed", dtype, cut, batch=n), self.ours(
                self.backend(dtype, cfg="packed", batch=n), lines=n
            )
        if name == "compile":
            dtype = self.preset_dtype
            auto = self.auto(dtype) if dtype not in self.probes else None
            layout = auto.layout if auto is not None else self._probed(dtype, "layout", "trimmed")
            engine = self.backend(dtype, cfg=layout, compile=True)
            engine.records = False  # the bench writes omnidub's measurements only with --record
            return row(f"+ torch.compile ({layout}, {SHORT_DTYPES[dtype]})", fs, layout, dtype, cut), self.ours(engine)
        if name == "int8":
            r = row(
                "int8 weights and activations, dynamic (lossy opt-in; linears unfused)",
                fs,
                "trimmed",
                "int8",
                cut,
                lossless=False,
            )
            if self.device != "cpu":
                r.skipped = "skipped: int8 dynamic quantization runs on the CPU only"
                return r, None
            return r, self.ours(self.backend("int8"))
        if name in ONNX_ROWS:
            return self._onnx(name, row, cut)
        if name in PREFIX_ROWS:
            k = PREFIX_ROWS[name]
            title = f"prefix cache refreshed every {k} steps (APPROXIMATE; trimmed, {b})"
            return row(title, fs, "trimmed", self.base, cut, lossless=False), self.ours(
                self.backend(self.base, prefix_refresh=k)
            )
        raise OmnidubError(f"unknown bench row {name!r}")

    def _upstream_row(self, name: str, row) -> tuple[Row, Runner | None]:
        """The rows that call upstream's own generate: stock, fewer steps, a trimmed reference, the peer recipe."""
        full, cut, fs = self.refs["full"], self.refs["cut"], self.fast_steps
        if name in ("peer", "peer-dtype"):
            dtype = self.base if name == "peer" else self.alt
            title = (
                f"the peer recipe, {SHORT_DTYPES[dtype]}: its own upstream model + omnivoice-fastpath's "
                "trimmed CFG, as a user assembles it"
            )
            r = row(title, fs, "trimmed", dtype, cut)
            if not peer_available():
                r.skipped = "skipped: omnivoice-fastpath is not installed (pip install 'omnidub[bench]')"
                return r, None
            return r, self.peer(dtype)
        steps, ref = (self.stock_steps, full) if name == "stock" else (fs, full if name == "steps" else cut)
        title = {
            "stock": f"stock: upstream generate, {self.stock_steps} steps, whole reference, padded CFG, "
            f"{SHORT_DTYPES[self.base]}",
            "steps": f"+ {fs} steps",
            "ref3s": "+ reference trimmed to ~3 s at a word boundary by omnidub",
        }[name]
        r = row(title, steps, "padded", self.base, ref)
        if name == "ref3s" and not self.refs["trimmed"]:
            r.skipped = f"skipped: the trimmer did not cut the reference ({self.refs['why']})"
            r.note = "later rows use the bundled 3 s cut of the same recording" if cut is not full else ""
            return r, None
        return r, self.upstream(steps, ref, self.engine)

    def _probed(self, dtype: str, what: str, default: str) -> str:
        return next((r.choice for r in self.probes.get(dtype, []) if r.what == what), default)

    def _onnx(self, name, row, cut):
        import torch

        from omnidub.backends.onnx import OnnxBackend

        int8 = name == "onnx-int8"
        # The same thread count as torch, so the rows compare runtimes, not thread counts.
        options = self.engine.options.replace(cfg="trimmed", compile=False, batch=1)
        engine = OnnxBackend(
            self.export_dir,
            "cuda" if self.device.startswith("cuda") else "cpu",
            options,
            quantized=int8,
            threads=torch.get_num_threads(),
        )
        title = "ONNX Runtime, dynamic int8 transformer" if int8 else "ONNX Runtime, fp32, omnidub's numpy host loop"
        return row(
            title + " (trimmed)",
            self.fast_steps,
            "trimmed",
            "int8" if int8 else "float32",
            cut,
            lossless=not int8,
            gemm="onnxruntime",
        ), self.ours(engine)

    def drift(self, rows: list[Row], runners: dict) -> None:
        """Final-token agreement (and first-step logits where the backend is torch) of every row whose arithmetic is
        not the reference's: against float32 torch (fused, trimmed) for the lower precision, int8, ONNX Runtime and
        oneDNN rows; the compiled row against its own eager twin (same dtype and layout). Each costs a decode. The
        peer rows run on upstream's own model, outside omnidub's loop: their drift is the dtype row's."""
        chosen = [
            r
            for r in rows
            if r.name in runners
            and runners[r.name].engine is not None
            and (
                r.dtype != "float32"
                or r.name in ("compile", "onnx", "onednn", *PREFIX_ROWS)
                or (r.name.startswith("auto") and r.gemm != "aten")
            )
        ]
        if not chosen:
            return
        requests = [
            request(t, self.refs["cut"].prompt, d, i) for i, (t, d) in enumerate(zip(self.texts, self.durations))
        ]
        fp32 = self.backend("float32")
        references = {"fp32": (fp32, fp32.tokens(requests))}
        for row in chosen:
            if row.name in PREFIX_ROWS:
                row.drift = _prefix_drift(self.backend(row.dtype, cfg=row.cfg), runners[row.name].engine, requests)
                row.drift.update(measure_cost=eval_command(row))
                continue
            if row.name == "compile":
                eager = self.backend(row.dtype, cfg=row.cfg)
                reference, expected = eager, eager.tokens(requests)
                against = f"eager {SHORT_DTYPES[row.dtype]} ({row.cfg}, torch's GEMM)"
            else:
                (reference, expected), against = references["fp32"], "fp32 (fused, trimmed, torch's GEMM)"
            row.drift = _drift(reference, runners[row.name].engine, requests, expected)
            row.drift.update(
                against=against, published_wer_cost=PUBLISHED_WER_COST.get(row.name), measure_cost=eval_command(row)
            )


def _drift(reference, engine, requests, expected) -> dict:
    from omnidub.backends.torch import compare_logits

    got = engine.tokens(requests)
    out = {
        "final_token_agreement": sum(int((e == g).sum()) for e, g in zip(expected, got, strict=True))
        / sum(e.size for e in expected)
    }
    if hasattr(engine, "first_step_logits"):
        diff, agree = compare_logits(reference, engine, requests)
        out.update(logits_max_abs_diff=diff, argmax_agreement=agree)
    return out


def _prefix_drift(exact, cached, requests) -> dict:
    """The prefix cache against exact decoding in the same layout and dtype: its final tokens, and the logits of
    the last step its first cache serves (its first step is a full pass, so its first-step logits are exact)."""
    expected, got = exact.tokens(requests), cached.tokens(requests)
    diff, agree, step = cached.prefix_drift(requests, cached.options.decode.prefix_refresh)
    return {
        "against": f"exact decoding ({cached.layout}, {SHORT_DTYPES[cached.dtype]}, same GEMMs)",
        "final_token_agreement": sum(int((e == g).sum()) for e, g in zip(expected, got, strict=True))
        / sum(e.size for e in expected),
        "first_step_logits_max_abs_diff": 0.0,
        "cached_step": step,
        "cached_logits_max_abs_diff": diff,
        "cached_argmax_agreement": agree,
        "published_wer_cost": None,
    }


def request(text, prompt, duration, seed=0, id=""):
    from omnidub.backends import Request

    return Request(text=text, prompt=prompt, language="en", duration=duration, seed=seed, id=id)
