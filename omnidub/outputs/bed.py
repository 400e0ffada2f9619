"""The bed under the dub: decoded from any audio or video file, and ducked while the dub speaks."""

from __future__ import annotations

import bisect
from pathlib import Path

import numpy as np
import soundfile as sf

from omnidub.errors import OmnidubError

SPEECH_FLOOR = 10 ** (-50 / 20)  # a segment "speaks" from its first to its last sample above -50 dBFS
HOLD = 0.5  # seconds: a pause shorter than attack + release + HOLD keeps the bed down (no bobbing between lines)


class BedReader:
    """Stream a file's first audio track as stereo float32 at ``sample_rate``; zeros once it ends. Samples that are
    not numbers (NaN, infinity) are read as silence and counted (``silenced``)."""

    def __init__(self, path: Path, sample_rate: int):
        import av
        import soxr

        try:
            self._container = av.open(str(path))
        except (av.FFmpegError, OSError) as exc:
            raise OmnidubError(f"cannot read the bed {path}: {exc}") from exc
        if not self._container.streams.audio:
            self._container.close()
            raise OmnidubError(f"the bed {path} has no audio track")
        stream = self._container.streams.audio[0]
        self.path = path
        self._frames = self._container.decode(stream)
        # PyAV maps the channel layout (mono, 5.1, ... -> stereo); soxr alone changes the rate, upward by default.
        self._layout = av.AudioResampler(format="flt", layout="stereo", rate=stream.rate)
        self._rate = (
            soxr.ResampleStream(stream.rate, sample_rate, 2, dtype="float32", quality="HQ")
            if stream.rate != sample_rate
            else None
        )
        self._pending: list[np.ndarray] = []
        self._buffered = 0
        self._done = False
        self.silenced = 0

    def __enter__(self) -> "BedReader":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self._done = True
        self._container.close()

    def read(self, frames: int) -> np.ndarray:
        """The next ``frames`` frames, [frames, 2]."""
        while self._buffered < frames and not self._done:
            self._decode_some()
        audio = np.concatenate(self._pending) if self._pending else np.zeros((0, 2), np.float32)
        out, rest = audio[:frames], audio[frames:]
        self._pending, self._buffered = ([rest] if len(rest) else []), len(rest)
        if len(out) < frames:
            out = np.concatenate([out, np.zeros((frames - len(out), 2), np.float32)])
        return out

    def _decode_some(self) -> None:
        import av

        try:
            frame = next(self._frames, None)
            converted = self._layout.resample(frame)
        except av.FFmpegError as exc:
            raise OmnidubError(f"cannot decode the bed {self.path}: {exc}") from exc
        chunks = [f.to_ndarray().reshape(-1, 2) for f in converted]
        audio = np.concatenate(chunks) if chunks else np.zeros((0, 2), np.float32)
        bad = ~np.isfinite(audio)
        if bad.any():  # before resampling, which would spread them over their neighbours
            self.silenced += int(bad.sum())
            audio = np.where(bad, np.float32(0.0), audio)
        if frame is None:
            self.close()
        if self._rate is not None:
            audio = self._rate.resample_chunk(audio, last=self._done)
        if len(audio):
            self._pending.append(np.asarray(audio, np.float32))
            self._buffered += len(audio)


def speech_spans(placements, attack: float = 0.05, release: float = 0.3) -> list[tuple[float, float]]:
    """When the dub speaks, in seconds: each segment from its first to its last audible sample, with pauses too
    short for the bed to come back up merged."""
    spans = []
    for placement in placements:
        audio, rate = sf.read(str(placement.path), dtype="float32", always_2d=True)
        if (found := audible(placement.start, audio, rate)) is not None:
            spans.append(found)
    return merged_spans(spans, attack, release)


def audible(start: float, audio: np.ndarray, rate: int) -> tuple[float, float] | None:
    """When a segment placed at ``start`` seconds is heard (``audio``: frames by channels): from its first to its
    last sample over SPEECH_FLOOR; None when it is silent."""
    loud = np.flatnonzero(np.abs(audio).max(axis=1) > SPEECH_FLOOR)
    return (start + loud[0] / rate, start + (loud[-1] + 1) / rate) if loud.size else None


def merged_spans(spans: list[tuple[float, float]], attack: float, release: float) -> list[tuple[float, float]]:
    """Spans of speech, in order, with pauses too short for the bed to come back up between them merged."""
    merged: list[tuple[float, float]] = []
    for start, end in sorted(spans):
        if merged and start - merged[-1][1] < attack + release + HOLD:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def duck_curve(
    spans: list[tuple[float, float]],
    start: int,
    frames: int,
    sample_rate: int,
    depth: float,
    attack: float,
    release: float,
) -> np.ndarray:
    """The bed's linear gain for ``frames`` samples from ``start``: ``depth`` dB down while the dub speaks, reached
    by the first word (the dip starts ``attack`` seconds before) and let go over ``release`` seconds after."""
    amount = np.zeros(frames)
    t0, t1 = start / sample_rate, (start + frames) / sample_rate
    # Spans are sorted and apart, so their ends are sorted too: skip those released before this block.
    first = bisect.bisect_right([end for _, end in spans], t0 - release)
    for span_start, span_end in spans[first:]:
        if span_start - attack > t1:
            break
        # Only the samples this span reaches: from its attack to the end of its release.
        lo = max(0, int(np.floor((span_start - attack) * sample_rate)) - start)
        hi = min(frames, int(np.ceil((span_end + release) * sample_rate)) - start + 1)
        if lo >= hi:
            continue
        t = (start + np.arange(lo, hi)) / sample_rate
        rise = (
            np.clip((t - (span_start - attack)) / attack, 0.0, 1.0) if attack > 0 else (t >= span_start).astype(float)
        )
        fall = np.clip(1.0 - (t - span_end) / release, 0.0, 1.0) if release > 0 else (t <= span_end).astype(float)
        np.maximum(amount[lo:hi], np.minimum(rise, fall), out=amount[lo:hi])
    # A raised-cosine ramp in dB: no corners for the ear to catch.
    shaped = 0.5 - 0.5 * np.cos(np.pi * amount)
    return (10 ** (-depth * shaped / 20)).astype(np.float32)
