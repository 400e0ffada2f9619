"""The torch backend: one resident OmniVoice and omnidub's decoding loop, turning requests into audio."""

from __future__ import annotations

import dataclasses
import os
import warnings
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np
import torch

from omnidub.backends.base import Prompt, Request
from omnidub.backends.loop import DecodingLoop
from omnidub.backends.torch import upstream
from omnidub.backends.torch.decode import decode
from omnidub.backends.torch.fused import FusedLM, can_fuse, fused_llm
from omnidub.backends.torch.gemm import onednn_usable
from omnidub.backends.torch.layout import Item, Layout
from omnidub.config import EngineOptions, layout_status
from omnidub.errors import OmnidubError
from omnidub.hardware import device_kind
from omnidub.models import DEFAULT_MODEL, ModelSource, model_shape, resolve_model

# --compile auto, until this machine has measured its own: what compiling costs (inductor, cold cache) and gives.
COMPILE_SECONDS = {"cpu": 120.0, "cuda": 180.0, "mps": 20.0}
# With inductor's cache warm (the same model shape compiled here before), until a warm compile was timed here: the
# share of the cold compile it still costs. Tracing and freezing run again; only inductor's code generation is
# cached (synthetic:full in bf16 on a 2-core AMD EPYC: 257 s cold, 133 s and 168 s warm).
COMPILE_WARM_SHARE = 0.6
# A gain smaller than this is within a shared machine's noise: --compile auto does not compile for it.
COMPILE_MIN_GAIN = 1.03
COMPILE_SPEEDUP = 1.18  # over torch's own GEMMs (bf16, Xeon with AMX)
# Over oneDNN's packed GEMMs most of that gain is already had: one step compiled 303/265 ms (trimmed/packed)
# against 285/269 eager (bf16, synthetic:full, same Xeon, interleaved), so compiling rarely pays there.
COMPILE_SPEEDUP_OVER_ONEDNN = 1.02


@dataclass(frozen=True)
class Tuning:
    """The backend's lossless speed levers, all on by default; turned off only to measure each one.

    ``gemm``: "auto" runs the linears the way this CPU measured faster (torch's own until measured), or "aten" /
    "onednn" (see gemm.py)."""

    fused: bool = True  # Q, K, V as one GEMM and gate + up as one GEMM
    skip_mask: bool = True  # no attention mask where it would be all True (unpadded single-segment rows)
    gemm: str = "auto"


class TorchBackend(DecodingLoop):
    """A resident OmniVoice in PyTorch with omnidub's decoding loop.

    ``model`` is a ``--model`` spec or a :class:`ModelSource` the caller already resolved; ``pinned_layout`` is
    the CFG layout a project was rendered with (used when ``options.cfg`` is auto)."""

    name = "torch"
    # What compiling cost and gave is recorded for --compile auto; the bench turns this off (it records only when
    # asked to, with --record).
    records = True

    def __init__(
        self,
        model: str | ModelSource = DEFAULT_MODEL,
        device: str = "auto",
        options: EngineOptions | None = None,
        *,
        tuning: Tuning | None = None,
        pinned_layout: str | None = None,
        _shared: "TorchBackend | None" = None,
    ):
        self.options = options or EngineOptions()
        self.tuning = tuning or Tuning()
        if _shared is not None:
            self.device, self.model, self.source = _shared.device, _shared.model, _shared.source
            self.dtype = _dtype_name(self.options, self.device)
        else:
            self.device = upstream.resolve_device(device)
            self.dtype = _dtype_name(self.options, self.device)
            # int8 quantizes a float32 model's linears; every other dtype loads as itself.
            dtype = upstream.resolve_dtype("float32" if self.dtype == "int8" else self.options.dtype, self.device)
            self.source = model if isinstance(model, ModelSource) else resolve_model(model)
            self.model = upstream.load_model(self.source, self.device, dtype)
        self.sample_rate = int(self.model.sampling_rate)
        self.frame_rate = int(self.model.audio_tokenizer.config.frame_rate)
        self.shape = model_shape(self.source)
        self.layout_choice = layout_status(
            self.options.cfg, self.device, self.dtype, pinned_layout, backend=self.name, shape=self.shape
        )
        self.layout = self.layout_choice.layout
        self.gemm = self._gemm()
        self._eager = self._language_model(self.gemm)
        self._llm = self._eager
        self._check_prefix_cache()
        self.compiled = False
        self._pending = 0  # tokens per step the job still has to decode (see expect)
        self._decided = self.options.compile != "auto"
        self._compiling: dict | None = None  # while the buckets after compiling are timed (see _learn_compile)
        self._rate: float | None = None  # eager model seconds per token, from the first bucket
        if self.options.compile is True:
            same = _shared is not None and _shared.compiled and _shared._compiled_from is self._compilable()
            self._llm = _shared._llm if same else self._compile(warm=self._compile_cost()[1])
            self.compiled = True

    def _check_prefix_cache(self) -> None:
        """The prefix cache needs omnidub's fused model (it keeps each layer's keys and values) and runs eagerly."""
        refresh = self.options.decode.prefix_refresh
        if refresh == 1:
            return
        if not isinstance(self._eager, FusedLM):
            why = (
                "--dtype int8 quantizes it"
                if self.dtype == "int8"
                else "this backend runs upstream's own"
                if not self.tuning.fused
                else "this model's layers are not Qwen3's"
            )
            raise OmnidubError(f"prefix_refresh {refresh} needs omnidub's fused language model ({why}); use 1")
        if self.options.compile is True:
            raise OmnidubError(f"prefix_refresh {refresh} runs eagerly: drop --compile (or set prefix_refresh 1)")

    def with_options(self, options: EngineOptions, tuning: Tuning | None = None) -> "TorchBackend":
        """A backend with other settings over the same resident model (reloads only if the dtype changes)."""
        tuning = tuning or self.tuning
        loaded = {"int8": "float32"}.get(self.dtype, self.dtype)
        wanted = _dtype_name(options, self.device)
        if {"int8": "float32"}.get(wanted, wanted) != loaded:
            return TorchBackend(self.source, self.device, options, tuning=tuning)
        return TorchBackend(options=options, tuning=tuning, _shared=self)

    @torch.inference_mode()
    def encode_prompt(self, audio: np.ndarray, sample_rate: int, text: str, language: str | None = None) -> Prompt:
        """Encode a reference (mono float waveform and its exact transcript) into omnidub's Prompt."""
        if not text or not text.strip():
            raise OmnidubError("a reference needs its transcript to clone the voice")
        codes, ref_text, rms = upstream.encode_reference(self.model, audio, sample_rate, text)
        return Prompt(codes.cpu().numpy().astype(np.int64), ref_text, rms, language)

    def expect(self, tokens: int) -> None:
        """The job's work left for this backend, in tokens per step (the scheduler says so before its first bucket;
        a Ray worker hears its share): --compile auto weighs the model time left against the compile time."""
        self._pending = int(tokens)
        if self.options.compile == "auto" and not self.compiled:
            self._decided = False

    def check_instruct(self, instruct: str, text: str = "") -> None:
        """Raise a one-line error when a voice-design instruction is not one OmniVoice knows."""
        upstream.resolve_instruct(instruct, text)

    def probe(self) -> list:
        """Measure on first use what was never measured on this machine (the CFG layout when --cfg is auto and no
        project pinned one; the GEMM kernels on a CPU), record it, and switch to it. Returns the ProbeResults."""
        from omnidub.backends.torch.probe import first_use

        results = first_use(
            self,
            layout=self.options.cfg == "auto" and not self.layout_choice.measured,
            gemm=self.tuning.gemm == "auto" and self._gemm_unmeasured(),
        )
        for result in results:
            if result.what == "gemm" and result.choice != self.gemm:
                self.gemm = result.choice
                self._eager = self._language_model(self.gemm)
                if not self.compiled:
                    self._llm = self._eager
            if result.what == "layout":
                self.layout = result.choice
                self.layout_choice = layout_status("auto", self.device, self.dtype, backend=self.name, shape=self.shape)
        return results

    @torch.inference_mode()
    def first_step_logits(self, requests: Sequence[Request]) -> list[torch.Tensor]:
        """First-step target logits per line (all requests in one batch), [2 (cond, uncond), C, frames, V] float32
        on CPU."""
        lines = [self._resolve(request) for request in requests]
        items = [self._item(line, 0) for line in lines]
        rows = Layout(items, self.layout, self.model.config.audio_mask_id, self.model.device, self.tuning.skip_mask)
        c, u = rows.logits(self.model, self._llm)
        return [torch.stack((c[i, :, : it.target_len], u[i, :, : it.target_len])).cpu() for i, it in enumerate(items)]

    @torch.inference_mode()
    def prefix_drift(self, requests: Sequence[Request], refresh: int) -> tuple[float, float, int]:
        """How far the prefix cache refreshed every ``refresh`` steps strays in one step: the logits of the last
        step its first cache serves (step ``refresh - 1``, from the tokens exact decoding has there), cached against
        exact. Returns max |difference|, argmax agreement (0..1) and the step (all requests in one batch)."""
        lines = [self._resolve(request) for request in requests]
        items = [self._item(line, 0) for line in lines]
        states: list[torch.Tensor] = []
        exact = dataclasses.replace(self.options.decode, prefix_refresh=1)
        seeds = [line.seeds[0] for line in lines]
        decode(
            self.model,
            items,
            seeds,
            exact,
            self.layout,
            llm=self._eager,
            skip_mask=self.tuning.skip_mask,
            states=states,
        )
        step = min(refresh - 1, len(states) - 1)
        rows = Layout(items, self.layout, self.model.config.audio_mask_id, self.model.device, self.tuning.skip_mask)
        rows.write(states[0])
        rows.logits(self.model, self._eager, "fill")
        rows.write(states[step])
        want = rows.logits(self.model, self._eager)
        got = rows.logits(self.model, self._eager, "reuse")
        diff, agree, total = 0.0, 0, 0
        for i, item in enumerate(items):
            for w, g in zip(want, got, strict=True):
                w, g = w[i, :, : item.target_len], g[i, :, : item.target_len]
                diff = max(diff, float((w - g).abs().max()))
                agree += int((w.argmax(-1) == g.argmax(-1)).sum())
                total += w[..., 0].numel()
        return diff, agree / total, step

    # -- the decoding loop's hooks -----------------------------------------------------------------------------

    def _language(self, language):
        return upstream.resolve_language(language)

    def _instruct(self, instruct, text):
        return upstream.resolve_instruct(instruct, text)

    def _chunk_text(self, text, chars):
        return upstream.chunk_text(text, chars)

    def _build_item(self, text, frames, ref_text, ref_codes, language, instruct) -> Item:
        ref = torch.as_tensor(ref_codes) if ref_codes is not None else None
        ids, mask = upstream.prepare_inputs(self.model, text, frames, ref_text, ref, language, instruct)
        return Item(ids, mask, frames)

    def _decode(self, items, seeds):
        # The prefix cache calls the fused model with its keys and values store, which a compiled graph never saw.
        llm = self._eager if self.options.decode.prefix_refresh > 1 else self._llm
        return decode(
            self.model, items, seeds, self.options.decode, self.layout, llm=llm, skip_mask=self.tuning.skip_mask
        )

    @torch.inference_mode()
    def _waveform(self, tokens) -> np.ndarray:
        tokenizer = self.model.audio_tokenizer
        return tokenizer.decode(tokens.to(tokenizer.device).unsqueeze(0)).audio_values[0].float().cpu().numpy()

    def _join(self, waves):
        return upstream.cross_fade(waves, self.sample_rate)[0]

    def _natural(self, audio, ref_rms):
        return upstream.post_process(self.model, audio[None], ref_rms)

    def _decoded(self, seconds: float, tokens: int) -> None:
        """--compile auto: after the first (eager) bucket, compile when the model time left pays for it."""
        from omnidub import measured

        self._pending = max(0, self._pending - tokens)
        if self._compiling is not None:
            self._learn_compile(seconds, tokens)
        if self._decided or tokens <= 0:
            return
        self._decided = True
        self._rate = seconds / tokens
        left = self._rate * self._pending
        record = measured.compile_record(self._compile_key()) or {}
        cost, warm = self._compile_cost(record)
        speedup = record.get("speedup") or (COMPILE_SPEEDUP_OVER_ONEDNN if self.gemm == "onednn" else COMPILE_SPEEDUP)
        cache = "inductor cache warm" if warm else "inductor cache cold"
        if self.options.decode.prefix_refresh > 1:
            self.on_note("compile auto: not compiling (the prefix cache runs the model eagerly)")
        elif speedup < COMPILE_MIN_GAIN:
            self.on_note(f"compile auto: not compiling (it gives {speedup:.2f}x here: no gain beyond noise; {cache})")
        elif left * (1 - 1 / speedup) > cost:
            self._llm = self._compile(warm)
            self.compiled = True
            self.on_note(
                f"compile auto: compiling now (~{left:.0f} s of model time left at {speedup:.2f}x; compiling "
                f"takes ~{cost:.0f} s, {cache})"
            )
        else:
            self.on_note(
                f"compile auto: not compiling (~{left:.0f} s of model time left at {speedup:.2f}x would save "
                f"less than the ~{cost:.0f} s compile, {cache})"
            )

    def _compile(self, warm: bool):
        """The compiled language model; the buckets after it measure what compiling cost and gave here."""
        self._compiling = {"warm": warm}
        self.compiled_warm = warm
        return compile_llm(self._compilable())

    def _compile_cost(self, record: dict | None = None) -> tuple[float, bool]:
        """What compiling costs now, in seconds, and whether inductor's cache already holds this model shape (the
        compile record names the cache folder it filled; a cache removed or moved since is cold again)."""
        from omnidub import measured

        record = measured.compile_record(self._compile_key()) if record is None else record
        record = record or {}
        default = COMPILE_SECONDS.get(device_kind(self.device), 120.0)
        cold = record.get("cold_seconds") or record.get("seconds") or default
        folder = record.get("inductor_cache")
        warm = bool(folder) and folder == str(inductor_folder()) and (Path(folder) / "fxgraph").is_dir()
        return (record.get("warm_seconds") or cold * COMPILE_WARM_SHARE, True) if warm else (cold, False)

    def _learn_compile(self, seconds: float, tokens: int) -> None:
        """The first bucket after compiling paid for it: its time beyond the compiled work is the compile's cost.
        The next bucket runs at the compiled rate, which measures that cost and what compiling gives against the
        eager rate (one bucket each: a rough figure, replaced by every later render). Both are recorded for this
        model, dtype and device with the inductor cache they filled, for the next ``--compile auto``."""
        from omnidub import measured

        state = self._compiling
        if not self.records:
            self._compiling = None
            return
        if "paid" not in state:
            state.update(paid=seconds, tokens=tokens)
            if self._rate is not None:  # until a compiled bucket is timed: the cost at the speedup expected
                expected = COMPILE_SPEEDUP_OVER_ONEDNN if self.gemm == "onednn" else COMPILE_SPEEDUP
                measured.record_compile(
                    self._compile_key(),
                    max(0.0, seconds - self._rate * tokens / expected),
                    warm=state["warm"],
                    cache=str(inductor_folder()),
                )
            return
        self._compiling = None
        if tokens <= 0:
            return
        rate = seconds / tokens
        measured.record_compile(
            self._compile_key(),
            max(0.0, state["paid"] - rate * state["tokens"]),
            warm=state["warm"],
            cache=str(inductor_folder()),
            speedup=self._rate / rate if self._rate else None,
        )

    # -- internals ---------------------------------------------------------------------------------------------

    def _gemm(self) -> str:
        if self.tuning.gemm == "onednn" and not onednn_usable(self.device, self.model.llm.dtype):
            return "aten"  # what linear() runs where oneDNN cannot (bf16 on an AVX2-only CPU)
        if self.tuning.gemm != "auto":
            return self.tuning.gemm
        if not self._gemm_choosable():
            return "aten"
        from omnidub.measured import gemm_choice

        found = gemm_choice(self.device, self.dtype, self.shape)
        return found["choice"] if found else "aten"

    def _gemm_choosable(self) -> bool:
        return (
            self.dtype != "int8"
            and self.tuning.fused
            and can_fuse(self.model.llm)
            and onednn_usable(self.device, self.model.llm.dtype)
        )

    def _gemm_unmeasured(self) -> bool:
        from omnidub.measured import gemm_choice

        return self._gemm_choosable() and gemm_choice(self.device, self.dtype, self.shape) is None

    def _language_model(self, gemm: str):
        if self.dtype == "int8":
            return quantized_llm(self.model.llm)
        return fused_llm(self.model.llm, gemm) if self.tuning.fused else self.model.llm

    def _compilable(self):
        # Inductor packs the weights itself; it traces torch's own linears, not oneDNN's opaque packed tensors.
        self._compiled_from = self._language_model("aten") if self.dtype != "int8" else self._eager
        return self._compiled_from

    def _compile_key(self) -> str:
        return "|".join(
            (
                self.source.identity.get("id", self.source.spec),
                self.source.identity.get("revision") or "",
                device_kind(self.device),
                self.dtype,
                f"torch {torch.__version__}",
                "fused" if self.tuning.fused else "unfused",
                f"eager {self.gemm}",
            )
        )


def compare_logits(a: TorchBackend, b: TorchBackend, requests: list[Request]) -> tuple[float, float]:
    """Max |difference| and argmax agreement (0..1) of two backends' first-step logits on the same requests."""
    diff, agree, total = 0.0, 0, 0
    for x, y in zip(a.first_step_logits(requests), b.first_step_logits(requests), strict=True):
        diff = max(diff, float((x - y).abs().max()))
        agree += int((x.argmax(-1) == y.argmax(-1)).sum())
        total += x[..., 0].numel()
    return diff, agree / total


def _dtype_name(options: EngineOptions, device: str) -> str:
    if options.dtype == "int8":
        if device_kind(device) != "cpu":
            raise OmnidubError("--dtype int8 (dynamic quantization) runs on the CPU only")
        return "int8"
    return str(upstream.resolve_dtype(options.dtype, device)).removeprefix("torch.")


_QUANTIZED: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def quantized_llm(llm):
    """A copy of the language model whose linears run int8 dynamic quantization (int8 weights, activations
    quantized on the fly): lossy, CPU only, made once per model. The float32 model stays as it was."""
    if llm not in _QUANTIZED:
        with warnings.catch_warnings():
            # torch marks its quantized tensor types deprecated (to move to torchao); they still work in <=2.14.
            warnings.simplefilter("ignore")
            _QUANTIZED[llm] = torch.ao.quantization.quantize_dynamic(
                llm, {torch.nn.Linear}, dtype=torch.qint8, inplace=False
            )
    return _QUANTIZED[llm]


def inductor_folder() -> Path:
    """Where inductor keeps what it compiled: TORCHINDUCTOR_CACHE_DIR, else ``inductor`` in omnidub's cache."""
    from omnidub.files import cache_home

    return Path(os.environ.get("TORCHINDUCTOR_CACHE_DIR") or cache_home() / "inductor")


def compile_llm(llm):
    """torch.compile the language model with dynamic shapes, its kernels kept in :func:`inductor_folder`.

    Inductor reads its cache folder from the environment only, so this sets TORCHINDUCTOR_CACHE_DIR (when it is
    not set) before compiling: the one process-wide setting omnidub's library makes, because what compiling cost
    here is recorded beside omnidub's other measurements and is only true of that folder.

    On the CPU with frozen weights: inductor then treats the weights as constants and lays them out once for its
    GEMMs (oneDNN), which measured 1.26x over compiling without freezing in bf16 on a Xeon with AMX (one step of
    synthetic:full), at the price of a longer compile and a copy of the weights. Tests hold it to the eager fp32
    tokens."""
    os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", str(inductor_folder()))
    device = next((t.device.type for t in llm.buffers()), "cpu")
    return torch.compile(llm, dynamic=True, options={"freezing": True} if device == "cpu" else None)
