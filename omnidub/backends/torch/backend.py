"""The torch backend: one resident OmniVoice and omnidub's decoding loop, turning requests into audio."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Iterator, Sequence

import numpy as np
import torch

from omnidub.backends.base import Prompt, Request, Result
from omnidub.backends.chunks import split_line
from omnidub.backends.postprocess import fit_exact, match_reference_volume
from omnidub.backends.torch import upstream
from omnidub.backends.torch.decode import decode
from omnidub.backends.torch.layout import Item, Layout, resolve_layout
from omnidub.config import EngineOptions, generation_settings
from omnidub.duration import natural_frames, target_frames
from omnidub.errors import OmnidubError
from omnidub.hardware import device_kind
from omnidub.models import DEFAULT_MODEL, ModelSource, resolve_model



@dataclass
class _Line:
    """A request resolved: its chunks (one unless long), their frame budgets and seeds."""

    request: Request
    texts: list[str]
    frames: list[int]
    seeds: list[int]
    language: str | None
    instruct: str | None
    tokens: list[torch.Tensor | None]
    seconds: float = 0.0


class TorchBackend:
    """A resident OmniVoice in PyTorch with omnidub's decoding loop.

    ``model`` is a ``--model`` spec or a :class:`ModelSource` the caller already resolved."""

    name = "torch"

    def __init__(self, model: str | ModelSource = DEFAULT_MODEL, device: str = "auto",
                 options: EngineOptions | None = None, *, _shared: "TorchBackend | None" = None):
        self.options = options or EngineOptions()
        if _shared is not None:
            self.device, self.dtype, self.model = _shared.device, _shared.dtype, _shared.model
            self.source = _shared.source
        else:
            self.device = upstream.resolve_device(device)
            dtype = upstream.resolve_dtype(self.options.dtype, self.device)
            self.dtype = str(dtype).removeprefix("torch.")
            self.source = model if isinstance(model, ModelSource) else resolve_model(model)
            self.model = upstream.load_model(self.source, self.device, dtype)
        self.sample_rate = int(self.model.sampling_rate)
        self.frame_rate = int(self.model.audio_tokenizer.config.frame_rate)
        self.layout = resolve_layout(self.options.cfg, self.device)
        if self.options.compile:
            self._llm = _shared._llm if _shared is not None and _shared.options.compile else compile_llm(self.model.llm)
        else:
            self._llm = self.model.llm

    def with_options(self, options: EngineOptions) -> "TorchBackend":
        """A backend with other settings over the same resident model (reloads only if the dtype changes)."""
        if str(upstream.resolve_dtype(options.dtype, self.device)).removeprefix("torch.") != self.dtype:
            return TorchBackend(self.source, self.device, options)
        return TorchBackend(options=options, _shared=self)

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

    def synthesize(self, requests: Sequence[Request]) -> Iterator[Result]:
        """Decode one bucket of requests together, then yield each line as its audio is finished."""
        lines = [self._resolve(request) for request in requests]
        self._decode_lines(lines)
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
        c, u = Layout(items, self.layout, self.model.config.audio_mask_id, self.model.device).logits(self.model, self._llm)
        return [torch.stack((c[i, :, : it.target_len], u[i, :, : it.target_len])).cpu() for i, it in enumerate(items)]

    # -- internals ---------------------------------------------------------------------------------------------

    def _resolve(self, request: Request) -> _Line:
        if not request.text or not request.text.strip():
            raise OmnidubError("cannot synthesize an empty line")
        language = upstream.resolve_language(request.language)
        instruct = upstream.resolve_instruct(request.instruct, request.text) if request.instruct else None
        natural = natural_frames(request.text, *_ref(request.prompt))
        frames = natural if request.duration is None else target_frames(request.duration, self.frame_rate)
        seed = request.seed & 0x7FFF_FFFF_FFFF_FFFF
        texts, budgets, seeds = split_line(request.text, frames, request.duration is not None, seed, self.frame_rate,
                                           lambda t: natural_frames(t, *_ref(request.prompt)), upstream.chunk_text)
        return _Line(request, texts, budgets, seeds, language, instruct, [None] * len(texts))

    def _item(self, line: _Line, chunk: int) -> Item:
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

    def _decode_lines(self, lines: list[_Line]) -> None:
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
                            llm=self._llm)
            share = (time.perf_counter() - began) / len(work)
            for (line, j), t in zip(work, tokens):
                line.tokens[j] = t
                line.seconds += share

    @torch.inference_mode()
    def _finish(self, line: _Line) -> Result:
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


def compile_llm(llm):
    """torch.compile the language model with dynamic shapes (the CLI points inductor's cache at omnidub's)."""
    return torch.compile(llm, dynamic=True)

