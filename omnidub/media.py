"""Decoding audio: any common audio file, or the audio of a video, to mono float32 at a chosen rate."""

from __future__ import annotations

import contextlib
import warnings
from pathlib import Path

import numpy as np

from omnidub.errors import OmnidubError


@contextlib.contextmanager
def quiet_pydub():
    """Around the first import of pydub (omnivoice's model module pulls it in; the ONNX backend's audio rules use
    it): pydub warns then that it found no ffmpeg binary, which omnidub never asks it for. Only that warning is
    silenced, only here, so a library user's own filters stay as they are."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Couldn't find ffmpeg or avconv", category=RuntimeWarning)
        yield


def audio_problem(path: Path) -> str | None:
    """Why ``path`` cannot be an audio file, in words ("audio file not found: x", "x is a folder, not an audio file");
    None when it is a file."""
    path = Path(path)
    if path.is_dir():
        return f"{path} is a folder, not an audio file"
    if not path.is_file():
        from omnidub.files import did_you_mean

        return f"audio file not found: {path}{did_you_mean(path)}"
    return None


def load_audio(path: Path, sample_rate: int) -> np.ndarray:
    """Decode any common audio file to mono float32 at `sample_rate` (soundfile, else PyAV)."""
    return resample(*decode_audio(path), sample_rate)


def decode_audio(path: Path) -> tuple[np.ndarray, int]:
    """Decode any common audio file to mono float32 at its own rate (soundfile, else PyAV); returns it and the
    rate."""
    path = Path(path)
    problem = audio_problem(path)
    if problem:
        raise OmnidubError(problem)
    try:
        import soundfile

        data, rate = soundfile.read(str(path), dtype="float32", always_2d=True)
        audio = data.mean(axis=1)
    except Exception:  # formats libsndfile lacks (mp3 on old builds, m4a/aac): decode with PyAV
        audio, rate = _decode_with_av(path)
    return audio, int(rate)


def resample(audio: np.ndarray, rate: int, sample_rate: int) -> np.ndarray:
    """Mono float32 audio at ``rate`` brought to ``sample_rate``."""
    if rate != sample_rate and audio.size:
        import soxr

        audio = soxr.resample(audio, rate, sample_rate)
    return np.ascontiguousarray(audio, dtype=np.float32)


def clipped_share(audio: np.ndarray) -> float:
    """The share of samples in flat tops at the peak level (runs of 4 or more at the loudest sample's level, give
    or take a 16-bit step, as clipping at +32767 and -32768 leaves them): what clipping leaves, and what a clean
    recording, even one normalised to full scale, almost never has."""
    magnitude = np.abs(np.asarray(audio, dtype=np.float32))
    if magnitude.size < 4 or not magnitude.max(initial=0.0) > 0:
        return 0.0
    top = magnitude >= magnitude.max() - 1.5 * 2.0**-15
    edges = np.diff(np.concatenate(([0], top.astype(np.int8), [0])))
    runs = np.flatnonzero(edges == -1) - np.flatnonzero(edges == 1)
    return float(runs[runs >= 4].sum()) / magnitude.size


def _decode_with_av(path: Path) -> tuple[np.ndarray, int]:
    import av

    try:
        with av.open(str(path)) as container:
            if not container.streams.audio:
                raise OmnidubError(f"{path}: has no audio stream")
            stream = container.streams.audio[0]
            rate = stream.rate or stream.codec_context.sample_rate
            resampler = av.AudioResampler(format="flt", layout="mono", rate=rate)
            chunks = []
            for frame in container.decode(stream):
                chunks.extend(f.to_ndarray().reshape(-1) for f in resampler.resample(frame))
            chunks.extend(f.to_ndarray().reshape(-1) for f in resampler.resample(None))
    except OmnidubError:
        raise
    except Exception as exc:
        raise OmnidubError(
            f"{path}: cannot decode audio ({str(exc).splitlines()[0] if str(exc) else type(exc).__name__})"
        ) from None
    return (np.concatenate(chunks) if chunks else np.zeros(0, np.float32)), int(rate)
