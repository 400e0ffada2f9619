"""The torch backend: one resident OmniVoice and omnidub's decoding loop, turning requests into audio."""

from __future__ import annotations

import time
import warnings
import weakref
from dataclasses import dataclass
from typing import Iterator, Sequence

import numpy as np
import torch

from omnidub.backends.base import Prompt, Request, Result
from omnidub.backends.chunks import LinePlan, split_line
from omnidub.backends.postprocess import fit_exact, match_reference_volume
from omnidub.backends.torch import upstream
from omnidub.backends.torch.decode import decode
from omnidub.backends.torch.fused import fused_llm
from omnidub.backends.torch.layout import Item, Layout
from omnidub.config import EngineOptions, generation_settings, resolve_layout
from omnidub.duration import natural_frames, target_frames
from omnidub.errors import OmnidubError
from omnidub.hardware import device_kind
from omnidub.models import DEFAULT_MODEL, ModelSource, resolve_model

# --compile auto, until this machine has measured its own: what compiling costs (inductor, cold cache) and gives.
COMPILE_SECONDS = {"cpu": 120.0, "cuda": 180.0, "mps": 20.0}
COMPILE_SPEEDUP = 1.18



@dataclass(frozen=True)
class Tuning:
    """The backend's lossless speed levers, all on by default; turned off only to measure each one."""

    fused: bool = True  # Q, K, V as one GEMM and gate + up as one GEMM
    skip_mask: bool = True  # no attention mask where it would be all True (unpadded single-segment rows)


class TorchBackend:
    """A resident OmniVoice in PyTorch with omnidub's decoding loop.

    ``model`` is a ``--model`` spec or a :class:`ModelSource` the caller already resolved."""

    name = "torch"

    def __init__(self, model: str | ModelSource = DEFAULT_MODEL, device: str = "auto",
                 options: EngineOptions | None = None, *, tuning: Tuning | None = None,
                 _shared: "TorchBackend | None" = None):
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
        self.layout = resolve_layout(self.options.cfg, self.device, self.dtype)
        if self.dtype == "int8":
            self._eager = quantized_llm(self.model.llm)
        else:
            self._eager = fused_llm(self.model.llm) if self.tuning.fused else self.model.llm
        self._llm = self._eager
        self.compiled = False
        self.on_note = lambda text: None  # the CLI prints what --compile auto decided
        self._pending = 0  # tokens per step the job still has to decode (see expect)
        self._decided = self.options.compile != "auto"
        self._first_compiled = False
        self._rate: float | None = None
        if self.options.compile is True:
            same = _shared is not None and _shared.compiled and _shared._eager is self._eager
            self._llm = _shared._llm if same else compile_llm(self._eager)
            self.compiled = True
            self._first_compiled = not same

    def with_options(self, options: EngineOptions, tuning: Tuning | None = None) -> "TorchBackend":
        """A backend with other settings over the same resident model (reloads only if the dtype changes)."""
        tuning = tuning or self.tuning
        loaded = {"int8": "float32"}.get(self.dtype, self.dtype)
        wanted = _dtype_name(options, self.device)
        if {"int8": "float32"}.get(wanted, wanted) != loaded:
            return TorchBackend(self.source, self.device, options, tuning=tuning)
        return TorchBackend(options=options, tuning=tuning, _shared=self)

    @property
    def identity(self) -> dict:
        return {**self.source.identity, "backend": self.name, "device": device_kind(self.device), "dtype": self.dtype}

    @property
    def settings(self) -> dict:
        return generation_settings(self.options, self.device)

    @torch.inference_mode()
    def encode_prompt(self, audio: np.ndarray, sample_rate: int, text: str, language: str | None = None) -> Prompt:
        """Encode a reference (mono float waveform and its exact transcript) into omnidub's Prompt."""
        if not text or not text.strip():
            raise OmnidubError("a reference needs its transcript to clone the voice")
        codes, ref_text, rms = upstream.encode_reference(self.model, audio, sample_rate, text)
        return Prompt(codes.cpu().numpy().astype(np.int64), ref_text, rms, language)

    def cost(self, request: Request) -> int:
        """Tokens one step runs for this line: its conditional row (text + reference + target) and its target row."""
        frames = natural_frames(request.text, *_ref(request.prompt)) if request.duration is None else target_frames(request.duration)
        ref = request.prompt.frames if request.prompt is not None else 0
        text_tokens = len(request.text) // 3 + 24  # about 3 characters per token, plus the style tokens
        return text_tokens + ref + 2 * frames

    def expect(self, requests: Sequence[Request]) -> None:
        """Hear how much work the job holds (the scheduler says so before its first bucket): --compile auto
        weighs the model time left against the compile time."""
        self._pending = sum(self.cost(r) for r in requests)
        if self.options.compile == "auto" and not self.compiled:
            self._decided = False

    def synthesize(self, requests: Sequence[Request]) -> Iterator[Result]:
        """Decode one bucket of requests together, then yield each line as its audio is finished."""
        lines = [self._resolve(request) for request in requests]
        began = time.perf_counter()
        self._decode_lines(lines)
        self._after_bucket(time.perf_counter() - began, sum(self.cost(r) for r in requests))
        for line in lines:
            yield self._finish(line)

    def tokens(self, requests: Sequence[Request]) -> list[np.ndarray]:
        """The audio tokens [C, frames] that :meth:`synthesize` would decode (chunks joined in time)."""
        lines = [self._resolve(request) for request in requests]
        self._decode_lines(lines)
        return [torch.cat(line.tokens, dim=-1).cpu().numpy() for line in lines]

    def check_instruct(self, instruct: str, text: str = "") -> None:
        """Raise a one-line error when a voice-design instruction is not one OmniVoice knows."""
        upstream.resolve_instruct(instruct, text)

    @torch.inference_mode()
    def first_step_logits(self, requests: Sequence[Request]) -> list[torch.Tensor]:
        """First-step target logits per line (all requests in one batch), [2 (cond, uncond), C, frames, V] float32 on CPU."""
        lines = [self._resolve(request) for request in requests]
        items = [self._item(line, 0) for line in lines]
        rows = Layout(items, self.layout, self.model.config.audio_mask_id, self.model.device, self.tuning.skip_mask)
        c, u = rows.logits(self.model, self._llm)
        return [torch.stack((c[i, :, : it.target_len], u[i, :, : it.target_len])).cpu() for i, it in enumerate(items)]

    # -- internals ---------------------------------------------------------------------------------------------

    def _compile_key(self) -> str:
        return "|".join((self.source.identity.get("id", self.source.spec), self.source.identity.get("revision") or "",
                         device_kind(self.device), self.dtype, f"torch {torch.__version__}",
                         "fused" if self.tuning.fused else "unfused"))

    def _after_bucket(self, seconds: float, tokens: int) -> None:
        """--compile auto: after the first (eager) bucket, compile when the model time left pays for it."""
        from omnidub import measured

        self._pending = max(0, self._pending - tokens)
        if self._first_compiled:
            # The first compiled bucket paid the compile: what it took beyond the compiled work is the cost.
            self._first_compiled = False
            if self._rate is not None:
                spent = seconds - self._rate * tokens / COMPILE_SPEEDUP
                measured.record_compile(self._compile_key(), max(0.0, spent))
        if self._decided or tokens <= 0:
            return
        self._decided = True
        self._rate = seconds / tokens
        left = self._rate * self._pending
        record = measured.compile_record(self._compile_key())
        cost = record["seconds"] if record else COMPILE_SECONDS.get(device_kind(self.device), 120.0)
        speedup = (record or {}).get("speedup") or COMPILE_SPEEDUP
        cache = "warm" if record else "cold"
        if left * (1 - 1 / speedup) > cost:
            self._llm = compile_llm(self._eager)
            self.compiled = self._first_compiled = True
            self.on_note(f"compile auto: compiling now (~{left:.0f} s of model time left; compiling takes ~{cost:.0f} s, "
                         f"inductor cache {cache})")
        else:
            self.on_note(f"compile auto: not compiling (~{left:.0f} s of model time left would save less than the "
                         f"~{cost:.0f} s compile, inductor cache {cache})")

    def _resolve(self, request: Request) -> LinePlan:
        if not request.text or not request.text.strip():
            raise OmnidubError("cannot synthesize an empty line")
        language = upstream.resolve_language(request.language)
        instruct = upstream.resolve_instruct(request.instruct, request.text) if request.instruct else None
        natural = natural_frames(request.text, *_ref(request.prompt))
        frames = natural if request.duration is None else target_frames(request.duration, self.frame_rate)
        seed = request.seed & 0x7FFF_FFFF_FFFF_FFFF
        texts, budgets, seeds = split_line(request.text, frames, request.duration is not None, seed, self.frame_rate,
                                           lambda t: natural_frames(t, *_ref(request.prompt)), upstream.chunk_text)
        return LinePlan(request, texts, budgets, seeds, language, instruct, [None] * len(texts))

    def _item(self, line: LinePlan, chunk: int) -> Item:
        prompt = line.request.prompt
        if prompt is not None:
            ref_text, ref_tokens = prompt.text, torch.as_tensor(prompt.codes)
        elif chunk > 0:
            # Without a reference, upstream voices later chunks with the first chunk as reference.
            ref_text, ref_tokens = line.texts[0], line.tokens[0]
        else:
            ref_text, ref_tokens = None, None
        ids, mask = upstream.prepare_inputs(self.model, line.texts[chunk], line.frames[chunk], ref_text, ref_tokens,
                                            line.language, line.instruct)
        return Item(ids, mask, line.frames[chunk])

    def _decode_lines(self, lines: list[LinePlan]) -> None:
        # The scheduler made the bucket; chunks that need the first chunk as reference wait for a second pass.
        for second_pass in (False, True):
            work = [
                (line, j)
                for line in lines
                for j in range(len(line.texts))
                if line.tokens[j] is None and (second_pass or j == 0 or line.request.prompt is not None)
            ]
            if not work:
                continue
            began = time.perf_counter()
            items = [self._item(line, j) for line, j in work]
            tokens = decode(self.model, items, [line.seeds[j] for line, j in work], self.options.decode, self.layout,
                            llm=self._llm, skip_mask=self.tuning.skip_mask)
            share = (time.perf_counter() - began) / len(work)
            for (line, j), t in zip(work, tokens):
                line.tokens[j] = t
                line.seconds += share

    @torch.inference_mode()
    def _finish(self, line: LinePlan) -> Result:
        began = time.perf_counter()
        tokenizer = self.model.audio_tokenizer
        waves = [tokenizer.decode(t.to(tokenizer.device).unsqueeze(0)).audio_values[0].float().cpu().numpy()
                 for t in line.tokens]
        audio = upstream.cross_fade(waves, self.sample_rate)  # (1, samples)
        ref_rms = line.request.prompt.rms if line.request.prompt is not None else None
        if line.request.duration is None:
            audio = upstream.post_process(self.model, audio, ref_rms)
        else:
            samples = int(round(line.request.duration * self.sample_rate))
            audio = fit_exact(match_reference_volume(audio[0], ref_rms), samples, self.sample_rate)
        seconds = line.seconds + time.perf_counter() - began
        return Result(line.request.id, np.ascontiguousarray(audio, dtype=np.float32), self.sample_rate, seconds,
                      sum(line.frames))


def _ref(prompt: Prompt | None) -> tuple[str | None, int | None]:
    return (prompt.text, prompt.frames) if prompt is not None else (None, None)


def compare_logits(a: TorchBackend, b: TorchBackend, requests: list[Request]) -> tuple[float, float]:
    """Max |difference| and argmax agreement (0..1) of two backends' first-step logits on the same requests."""
    diff, agree, total = 0.0, 0, 0
    for x, y in zip(a.first_step_logits(requests), b.first_step_logits(requests)):
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
            _QUANTIZED[llm] = torch.ao.quantization.quantize_dynamic(llm, {torch.nn.Linear}, dtype=torch.qint8,
                                                                     inplace=False)
    return _QUANTIZED[llm]


def compile_llm(llm):
    """torch.compile the language model with dynamic shapes (the CLI points inductor's cache at omnidub's)."""
    return torch.compile(llm, dynamic=True)

