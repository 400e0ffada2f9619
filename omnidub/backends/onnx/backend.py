"""The ONNX Runtime backend: an omnidub export rendered with omnidub's own host loop, without torch.

Same requests, layouts, schedule, CFG, scoring, per-line noise and post-processing as the torch backend (the
decoding loop is shared: backends/loop.py); the three networks run in ONNX Runtime. At zero temperatures its
tokens equal the torch backend's.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from omnidub.backends.base import Prompt
from omnidub.backends.loop import DecodingLoop
from omnidub.backends.onnx import audio as upstream_audio
from omnidub.backends.onnx.host import decode
from omnidub.backends.onnx.prompt import PromptBuilder, resolve_instruct, resolve_language
from omnidub.backends.onnx.runtime import Runtime, verify_file
from omnidub.backends.postprocess import match_reference_volume
from omnidub.config import EngineOptions, layout_status
from omnidub.errors import OmnidubError
from omnidub.hardware import guess_device
from omnidub.lightweight import omnivoice_module
from omnidub.models import ModelSource, model_shape, resolve_model


class OnnxBackend(DecodingLoop):
    """An omnidub export folder in ONNX Runtime. ``model`` is the folder (or its resolved source)."""

    name = "onnxruntime"

    def __init__(
        self,
        model: str | Path | ModelSource,
        device: str = "cpu",
        options: EngineOptions | None = None,
        *,
        threads: int | None = None,
        quantized: bool | None = None,
        pinned_layout: str | None = None,
        _shared: "OnnxBackend | None" = None,
    ):
        self.options = options or EngineOptions()
        if self.options.decode.prefix_refresh > 1:
            raise OmnidubError(
                f"prefix_refresh {self.options.decode.prefix_refresh} (the prefix cache) runs on the torch backend "
                "only: add --backend torch, or set prefix_refresh 1"
            )
        if _shared is not None:
            self.source, self.runtime, self.prompts = _shared.source, _shared.runtime, _shared.prompts
        else:
            self.source = model if isinstance(model, ModelSource) else resolve_model(str(model))
            self.runtime = Runtime(
                self.source.path, guess_device(device, self.name), threads=threads, quantized=quantized
            )
            for name, described in (self.runtime.manifest.get("tokenizer") or {}).items():
                verify_file(self.source.path, name, described)
            self.prompts = PromptBuilder(
                self.source.path / "tokenizer.json", self.runtime.codebooks, self.runtime.mask_id
            )
        self.device = self.runtime.device
        self.dtype = "int8" if self.runtime.quantized else "float32"
        self.sample_rate = self.runtime.sample_rate
        self.frame_rate = self.runtime.frame_rate
        self.shape = model_shape(self.source)
        self.layout_choice = layout_status(
            self.options.cfg, self.device, self.dtype, pinned_layout, backend=self.name, shape=self.shape
        )
        self.layout = self.layout_choice.layout

    def with_options(self, options: EngineOptions) -> "OnnxBackend":
        """Other decoding settings over the same sessions."""
        return OnnxBackend(self.source, options=options, _shared=self)

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

    def check_instruct(self, instruct: str, text: str = "") -> None:
        resolve_instruct(instruct, text)

    def probe(self) -> list:
        """Measure the CFG layout on first use (when --cfg is auto and no project pinned one), record it, use it."""
        if self.options.cfg != "auto" or self.layout_choice.measured:
            return []
        from omnidub.backends.onnx.layout import Layout
        from omnidub.backends.probe import (
            PROBE_FRAMES,
            PROBE_REF_FRAMES,
            PROBE_REF_TEXT,
            PROBE_TEXT,
            decide,
            interleaved,
        )
        from omnidub.measured import record_layout

        codes = np.random.default_rng(0).integers(0, 1024, (self.runtime.codebooks, PROBE_REF_FRAMES))
        item = self._build_item(PROBE_TEXT, PROBE_FRAMES, PROBE_REF_TEXT, codes, "en", None)
        forward = self.runtime.forward_fn()
        rows = {kind: Layout([item], kind, self.runtime.mask_id) for kind in ("trimmed", "packed")}
        shape = f"{self.shape or 'unknown shape'}, {item.input_ids.shape[1]} + {item.target_len} tokens, {self.dtype}"
        began = time.perf_counter()
        result = decide(
            "layout",
            interleaved({k: (lambda r=r: r.logits(forward)) for k, r in rows.items()}),
            "trimmed",
            f"one decoding step of {shape} in ONNX Runtime",
            began=began,
        )
        record_layout(
            self.device,
            self.dtype,
            result.seconds,
            result.evidence,
            backend=self.name,
            shape=self.shape,
            choice=result.choice,
        )
        self.layout = result.choice
        self.layout_choice = layout_status("auto", self.device, self.dtype, backend=self.name, shape=self.shape)
        return [result]

    # -- the decoding loop's hooks -----------------------------------------------------------------------------

    def _language(self, language):
        return resolve_language(language)

    def _instruct(self, instruct, text):
        return resolve_instruct(instruct, text)

    def _chunk_text(self, text, chars):
        return omnivoice_module("text").chunk_text_punctuation(text=text, chunk_len=chars, min_chunk_len=3)

    def _build_item(self, text, frames, ref_text, ref_codes, language, instruct):
        return self.prompts.item(text, frames, ref_text, ref_codes, language, instruct)

    def _decode(self, items, seeds):
        return decode(
            self.runtime.forward_fn(), items, seeds, self.options.decode, self.layout, mask_id=self.runtime.mask_id
        )

    def _waveform(self, tokens) -> np.ndarray:
        return self.runtime.decode(tokens)

    def _join(self, waves):
        return upstream_audio.join_chunks(waves, self.sample_rate)

    def _natural(self, audio, ref_rms):
        audio = upstream_audio.remove_silence(audio, self.sample_rate, mid_ms=500, lead_ms=100, trail_ms=100)
        return upstream_audio.fade_and_pad(match_reference_volume(audio, ref_rms), self.sample_rate)
