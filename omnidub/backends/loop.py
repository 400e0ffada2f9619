"""The decoding loop every backend shares: requests -> line plans -> decoded chunks -> finished audio.

A backend supplies only what differs between runtimes: how a chunk's conditional input is built, one decode of
a batch of items, how tokens become a waveform, how chunks join, and upstream's natural-length post-processing.
Everything else (long-line chunking, seeds, the two passes for chunks voiced by the first chunk, timing shares,
exact lengths and volume) lives here once, so the torch and ONNX Runtime backends cannot drift apart.
"""

from __future__ import annotations

import time
from typing import Iterator, Sequence

import numpy as np

from omnidub.backends.base import Prompt, Request, Result
from omnidub.backends.chunks import LinePlan, split_line
from omnidub.backends.postprocess import fit_exact, match_reference_volume
from omnidub.config import generation_settings, layout_status
from omnidub.duration import natural_frames, target_frames
from omnidub.errors import OmnidubError
from omnidub.hardware import device_kind


class DecodingLoop:
    """Base of the backends: subclasses set ``name``, ``source``, ``options``, ``device``, ``dtype``, ``shape``,
    ``sample_rate``, ``frame_rate``, ``layout_choice`` and ``layout``, and implement the hooks below."""

    name: str
    sample_rate: int
    frame_rate: int

    def on_note(self, text: str) -> None:
        """What the backend decides on its own while it renders; its owner replaces this to hear it."""

    # -- what every backend shares -------------------------------------------------------------------------------
    @property
    def identity(self) -> dict:
        """Model, backend, device and dtype: what changes the audio besides the request (for keys)."""
        return {**self.source.identity, "backend": self.name, "device": device_kind(self.device), "dtype": self.dtype}

    @property
    def settings(self) -> dict:
        """Generation settings that change the audio (steps, layout, ...), for keys and the manifest."""
        return generation_settings(self.options, self.device, self.layout)

    def use_layout(self, layout: str) -> None:
        """Render in ``layout`` from now on, as a project pinned it (the measurement stays recorded)."""
        self.layout_choice = layout_status("auto", self.device, self.dtype, layout, backend=self.name, shape=self.shape)
        self.layout = layout

    def probe(self) -> list:
        """Measure on first use what this machine never measured; the base measures nothing."""
        return []

    def expect(self, tokens: int) -> None:
        """Hear the job's work left (tokens per step) before its first bucket; the base plans nothing for it."""

    # -- hooks ---------------------------------------------------------------------------------------------------
    def _language(self, language: str | None) -> str | None:
        raise NotImplementedError

    def _instruct(self, instruct: str, text: str) -> str | None:
        raise NotImplementedError

    def _chunk_text(self, text: str, chars: int) -> list[str]:
        raise NotImplementedError

    def _build_item(self, text: str, frames: int, ref_text, ref_codes, language, instruct):
        """One chunk's conditional input (the runtime's own Item type)."""
        raise NotImplementedError

    def _decode(self, items: list, seeds: list[int]) -> list:
        """Tokens [C, frames] of each item, decoded together."""
        raise NotImplementedError

    def _waveform(self, tokens) -> np.ndarray:
        """Mono float32 waveform of one chunk's tokens."""
        raise NotImplementedError

    def _join(self, waves: list[np.ndarray]) -> np.ndarray:
        """Chunks of one line joined as upstream joins them (mono)."""
        raise NotImplementedError

    def _natural(self, audio: np.ndarray, ref_rms: float | None) -> np.ndarray:
        """Upstream's post-processing of a line of natural length (trim silences, volume, fade and pad)."""
        raise NotImplementedError

    def _decoded(self, seconds: float, tokens: int) -> None:
        """Heard after every bucket: its wall seconds and its tokens per step (``--compile auto`` listens)."""

    # -- the shared loop -----------------------------------------------------------------------------------------
    def cost(self, request: Request) -> int:
        """Tokens one step runs for this line: its conditional row (style + text + reference + target) and its
        target row; about 3 characters per text token, plus the style tokens."""
        frames = self._frames(request)
        ref = request.prompt.frames if request.prompt is not None else 0
        return len(request.text) // 3 + 24 + ref + 2 * frames

    def synthesize(self, requests: Sequence[Request]) -> Iterator[Result]:
        """Decode one bucket of requests together, then yield each line as its audio is finished."""
        lines = [self._resolve(request) for request in requests]
        began = time.perf_counter()
        self._decode_lines(lines)
        self._decoded(time.perf_counter() - began, sum(self.cost(r) for r in requests))
        for line in lines:
            yield self._finish(line)

    def tokens(self, requests: Sequence[Request]) -> list[np.ndarray]:
        """The audio tokens [codebooks, frames] that :meth:`synthesize` would decode (chunks joined in time)."""
        lines = [self._resolve(request) for request in requests]
        self._decode_lines(lines)
        return [np.concatenate([_numpy(t) for t in line.tokens], axis=-1) for line in lines]

    def _frames(self, request: Request) -> int:
        if request.duration is not None:
            return target_frames(request.duration, self.frame_rate)
        return natural_frames(request.text, *_ref(request.prompt))

    def _resolve(self, request: Request) -> LinePlan:
        if not request.text or not request.text.strip():
            raise OmnidubError("cannot synthesize an empty line")
        language = self._language(request.language)
        instruct = self._instruct(request.instruct, request.text) if request.instruct else None
        seed = request.seed & 0x7FFF_FFFF_FFFF_FFFF
        texts, budgets, seeds = split_line(
            request.text,
            self._frames(request),
            request.duration is not None,
            seed,
            self.frame_rate,
            lambda t: natural_frames(t, *_ref(request.prompt)),
            self._chunk_text,
        )
        return LinePlan(request, texts, budgets, seeds, language, instruct, [None] * len(texts))

    def _item(self, line: LinePlan, chunk: int):
        prompt = line.request.prompt
        if prompt is not None:
            ref_text, ref_codes = prompt.text, prompt.codes
        elif chunk > 0:
            # Without a reference, upstream voices later chunks with the first chunk as reference.
            ref_text, ref_codes = line.texts[0], line.tokens[0]
        else:
            ref_text, ref_codes = None, None
        return self._build_item(
            line.texts[chunk], line.frames[chunk], ref_text, ref_codes, line.language, line.instruct
        )

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
            tokens = self._decode(items, [line.seeds[j] for line, j in work])
            share = (time.perf_counter() - began) / len(work)
            for (line, j), t in zip(work, tokens, strict=True):
                line.tokens[j] = t
                line.seconds += share

    def _finish(self, line: LinePlan) -> Result:
        began = time.perf_counter()
        audio = self._join([self._waveform(t) for t in line.tokens])
        ref_rms = line.request.prompt.rms if line.request.prompt is not None else None
        if line.request.duration is None:
            audio = self._natural(audio, ref_rms)
        else:
            samples = int(round(line.request.duration * self.sample_rate))
            audio = fit_exact(match_reference_volume(audio, ref_rms), samples, self.sample_rate)
        seconds = line.seconds + time.perf_counter() - began
        return Result(
            line.request.id, np.ascontiguousarray(audio, dtype=np.float32), self.sample_rate, seconds, sum(line.frames)
        )


def _ref(prompt: Prompt | None) -> tuple[str | None, int | None]:
    return (prompt.text, prompt.frames) if prompt is not None else (None, None)


def _numpy(tokens) -> np.ndarray:
    return tokens.cpu().numpy() if hasattr(tokens, "cpu") else np.asarray(tokens)
