"""The ONNX Runtime backend: an omnidub export rendered with omnidub's own host loop, without torch.

Same requests, layouts, schedule, CFG, scoring, per-line noise and post-processing as the torch backend; the
three networks run in ONNX Runtime. At zero temperatures its tokens equal the torch backend's.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Iterator, Sequence

import numpy as np

from omnidub.backends.base import Prompt, Request, Result
from omnidub.backends.chunks import LinePlan, split_line
from omnidub.backends.onnx import audio as upstream_audio
from omnidub.backends.onnx.host import decode
from omnidub.backends.onnx.prompt import PromptBuilder, resolve_instruct, resolve_language
from omnidub.backends.onnx.runtime import Runtime
from omnidub.backends.postprocess import fit_exact, match_reference_volume
from omnidub.config import EngineOptions, generation_settings, resolve_layout
from omnidub.duration import natural_frames, target_frames
from omnidub.errors import OmnidubError
from omnidub.hardware import device_kind
from omnidub.lightweight import omnivoice_module
from omnidub.models import ModelSource, resolve_model




class OnnxBackend:
    """An omnidub export folder in ONNX Runtime. ``model`` is the folder (or its resolved source)."""

    name = "onnxruntime"

    def __init__(self, model: str | Path | ModelSource, device: str = "cpu", options: EngineOptions | None = None,
                 *, threads: int | None = None, quantized: bool | None = None, _shared: "OnnxBackend | None" = None):
        self.options = options or EngineOptions()
        if _shared is not None:
            self.source, self.runtime, self.prompts = _shared.source, _shared.runtime, _shared.prompts
        else:
            self.source = model if isinstance(model, ModelSource) else resolve_model(str(model))
            device = auto_device() if device == "auto" else device
            self.runtime = Runtime(self.source.path, device, threads=threads, quantized=quantized)
            self.prompts = PromptBuilder(self.source.path / "tokenizer.json", self.runtime.codebooks, self.runtime.mask_id)
        self.device = self.runtime.device
        self.dtype = "int8" if self.runtime.quantized else "float32"
        self.sample_rate = self.runtime.sample_rate
        self.frame_rate = self.runtime.frame_rate
        self.layout = resolve_layout(self.options.cfg, self.device)

    def with_options(self, options: EngineOptions) -> "OnnxBackend":
        """Other decoding settings over the same sessions."""
        return OnnxBackend(self.source, options=options, _shared=self)

    @property
    def identity(self) -> dict:
        """As the session guesses it before loading (keys must not change when the backend loads)."""
        return {**self.source.identity, "backend": self.name, "device": device_kind(self.device), "dtype": self.dtype}

    @property
    def settings(self) -> dict:
        return generation_settings(self.options, self.device)

    def encode_prompt(self, audio: np.ndarray, sample_rate: int, text: str, language: str | None = None) -> Prompt:
        """Upstream's prompt recipe (level, silence trim, whole frames) with the encoder graph."""
        if not text or not text.strip():
            raise OmnidubError("a reference needs its transcript to clone the voice")
        wave = np.asarray(audio, dtype=np.float32)
        if wave.ndim > 1:
            wave = wave.mean(axis=0 if wave.shape[0] < wave.shape[-1] else -1)
        if int(sample_rate) != self.sample_rate:
            import soxr

            wave = soxr.resample(wave, int(sample_rate), self.sample_rate).astype(np.float32)
        rms = float(np.sqrt(np.mean(wave**2))) if wave.size else 0.0
        if 0 < rms < 0.1:
            wave = wave * (0.1 / rms)
        wave = upstream_audio.remove_silence(wave, self.sample_rate, mid_ms=200, lead_ms=100, trail_ms=200)
        wave = wave[: wave.shape[-1] - wave.shape[-1] % self.runtime.hop]
        if wave.shape[-1] == 0:
            raise OmnidubError("reference audio unusable: it is empty after silence removal")
        codes = self.runtime.encode(wave)
        return Prompt(codes, omnivoice_module("text").add_punctuation(text), rms, language)

    def cost(self, request: Request) -> int:
        """Tokens one step runs for this line: its conditional row and its target row."""
        frames = self._frames(request)
        ref = request.prompt.frames if request.prompt is not None else 0
        return len(request.text) // 3 + 24 + ref + 2 * frames

    def synthesize(self, requests: Sequence[Request]) -> Iterator[Result]:
        lines = [self._resolve(request) for request in requests]
        self._decode_lines(lines)
        for line in lines:
            yield self._finish(line)

    def tokens(self, requests: Sequence[Request]) -> list[np.ndarray]:
        lines = [self._resolve(request) for request in requests]
        self._decode_lines(lines)
        return [np.concatenate(line.tokens, axis=-1) for line in lines]

    def check_instruct(self, instruct: str, text: str = "") -> None:
        resolve_instruct(instruct, text)

    # -- internals ---------------------------------------------------------------------------------------------

    def _frames(self, request: Request) -> int:
        if request.duration is not None:
            return target_frames(request.duration, self.frame_rate)
        prompt = request.prompt
        return natural_frames(request.text, prompt.text if prompt else None, prompt.frames if prompt else None)

    def _resolve(self, request: Request) -> LinePlan:
        if not request.text or not request.text.strip():
            raise OmnidubError("cannot synthesize an empty line")
        language = resolve_language(request.language)
        instruct = resolve_instruct(request.instruct, request.text) if request.instruct else None
        frames = self._frames(request)
        seed = request.seed & 0x7FFF_FFFF_FFFF_FFFF
        prompt = request.prompt
        texts, budgets, seeds = split_line(
            request.text, frames, request.duration is not None, seed, self.frame_rate,
            lambda t: natural_frames(t, prompt.text if prompt else None, prompt.frames if prompt else None),
            lambda t, chars: omnivoice_module("text").chunk_text_punctuation(text=t, chunk_len=chars, min_chunk_len=3))
        return LinePlan(request, texts, budgets, seeds, language, instruct, [None] * len(texts))

    def _item(self, line: LinePlan, chunk: int):
        prompt = line.request.prompt
        if prompt is not None:
            ref_text, ref_codes = prompt.text, prompt.codes
        elif chunk > 0:
            ref_text, ref_codes = line.texts[0], line.tokens[0]  # upstream voices later chunks with the first
        else:
            ref_text, ref_codes = None, None
        return self.prompts.item(line.texts[chunk], line.frames[chunk], ref_text, ref_codes, line.language, line.instruct)

    def _decode_lines(self, lines: list[LinePlan]) -> None:
        for second_pass in (False, True):
            work = [(line, j) for line in lines for j in range(len(line.texts))
                    if line.tokens[j] is None and (second_pass or j == 0 or line.request.prompt is not None)]
            if not work:
                continue
            began = time.perf_counter()
            items = [self._item(line, j) for line, j in work]
            tokens = decode(self.runtime.forward_fn(), items, [line.seeds[j] for line, j in work], self.options.decode,
                            self.layout, mask_id=self.runtime.mask_id)
            share = (time.perf_counter() - began) / len(work)
            for (line, j), t in zip(work, tokens):
                line.tokens[j] = t
                line.seconds += share

    def _finish(self, line: LinePlan) -> Result:
        began = time.perf_counter()
        waves = [self.runtime.decode(t) for t in line.tokens]
        audio = upstream_audio.join_chunks(waves, self.sample_rate)
        ref_rms = line.request.prompt.rms if line.request.prompt is not None else None
        if line.request.duration is None:
            audio = upstream_audio.remove_silence(audio, self.sample_rate, mid_ms=500, lead_ms=100, trail_ms=100)
            audio = upstream_audio.fade_and_pad(match_reference_volume(audio, ref_rms), self.sample_rate)
        else:
            samples = int(round(line.request.duration * self.sample_rate))
            audio = fit_exact(match_reference_volume(audio, ref_rms), samples, self.sample_rate)
        seconds = line.seconds + time.perf_counter() - began
        return Result(line.request.id, np.ascontiguousarray(audio, dtype=np.float32), self.sample_rate, seconds,
                      sum(line.frames))


def auto_device() -> str:
    """CUDA when this onnxruntime has its CUDA provider, else the CPU."""
    import onnxruntime

    return "cuda" if "CUDAExecutionProvider" in onnxruntime.get_available_providers() else "cpu"

