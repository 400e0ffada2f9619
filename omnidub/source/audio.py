"""The source: any video or audio file PyAV reads, decoded once to mono float32, and checked against its subtitles."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from omnidub.errors import OmnidubError
from omnidub.media import load_audio
from omnidub.script import Script

# Clips are cut at OmniVoice's own rate, so a reference loses nothing the model could hear.
CLIP_RATE = 24000
# Analysis (voice activity, speaker embeddings, speech recognition) runs at 16 kHz, as all three models do.
ANALYSIS_RATE = 16000
# Subtitles may end a little after the audio (a last cue lingering on a fade to black); past this they are
# someone else's subtitles, or the source is cut short.
PAST_END_TOLERANCE = 1.0


@dataclass(frozen=True, eq=False)
class SourceAudio:
    """A decoded source: mono float32 samples at `sample_rate`."""

    path: Path
    samples: np.ndarray
    sample_rate: int

    @property
    def seconds(self) -> float:
        return self.samples.size / self.sample_rate

    def cut(self, start: float, end: float) -> np.ndarray:
        """The samples from `start` to `end` seconds (clamped to the source)."""
        a = max(0, int(round(start * self.sample_rate)))
        b = min(self.samples.size, int(round(end * self.sample_rate)))
        return self.samples[a : max(a, b)]

    def at_rate(self, sample_rate: int) -> SourceAudio:
        """The same audio at another rate."""
        if sample_rate == self.sample_rate:
            return self
        import soxr

        samples = soxr.resample(self.samples, self.sample_rate, sample_rate) if self.samples.size else self.samples
        return SourceAudio(self.path, np.ascontiguousarray(samples, dtype=np.float32), sample_rate)


def read_source(path: Path, sample_rate: int = CLIP_RATE) -> SourceAudio:
    """Decode the first audio stream of a video or audio file to mono float32 at `sample_rate`."""
    path = Path(path)
    if path.is_dir():
        raise OmnidubError(f"{path}: is a folder; give the video or audio file the subtitles belong to")
    samples = load_audio(path, sample_rate)  # one line for a missing file, no audio stream, or an unreadable one
    if samples.size == 0:
        raise OmnidubError(f"{path}: its audio stream holds no samples")
    if not np.isfinite(samples).all():
        raise OmnidubError(f"{path}: its audio has samples that are not numbers (NaN or infinity)")
    return SourceAudio(path, samples, sample_rate)


def check_subtitles(script: Script, subs: Path, source: SourceAudio) -> None:
    """One line when the subtitles cannot be this source's: untimed, or running past its end."""
    if not script.timed:
        raise OmnidubError(
            f"{subs}: the original's lines need times (SRT, WebVTT or a timed script) to be found in the source"
        )
    last = max(script.lines, key=lambda line: line.end)
    if last.end > source.seconds + PAST_END_TOLERANCE:
        raise OmnidubError(
            f"{subs}: line {last.index} ends at {last.end:.1f} s but {source.path.name} is only {source.seconds:.1f} s "
            "long; are these the subtitles of this source (or is the source cut short)?"
        )


def wav_bytes(samples: np.ndarray, sample_rate: int, subtype: str = "PCM_16", format: str = "WAV") -> bytes:
    """Samples ([samples] or [channels, samples]) as the bytes of an audio file (WAV, or another soundfile format):
    the same samples always give the same bytes (float samples are kept exactly, integer ones clipped to full
    scale)."""
    import io

    import soundfile as sf

    buffer = io.BytesIO()
    data = samples.T if samples.ndim == 2 else samples
    sf.write(
        buffer,
        data if subtype in ("FLOAT", "DOUBLE") else np.clip(data, -1.0, 1.0),
        sample_rate,
        subtype=subtype,
        format=format,
    )
    return _without_peak_chunk(buffer.getvalue()) if format == "WAV" else buffer.getvalue()


def _without_peak_chunk(data: bytes) -> bytes:
    """A WAV file without libsndfile's PEAK chunk, which it adds to float files with the time of writing in it."""
    import struct

    if data[:4] != b"RIFF" or data[8:12] != b"WAVE":
        return data
    chunks, at = [], 12
    while at + 8 <= len(data):
        name, size = data[at : at + 4], struct.unpack("<I", data[at + 4 : at + 8])[0]
        end = at + 8 + size + (size & 1)
        if name != b"PEAK":
            chunks.append(data[at:end])
        at = end
    body = b"WAVE" + b"".join(chunks)
    return b"RIFF" + struct.pack("<I", len(body)) + body
