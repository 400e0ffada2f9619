"""The level checks of a segment file (clipping, silence, NaN) and whether it is still the file the render wrote."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import soundfile as sf

from omnidub.errors import OmnidubError, first_line
from omnidub.keys import file_digest
from omnidub.qa.results import FLAG_LABELS, QaSettings
from omnidub.qa.verdict import Finding


@dataclass(frozen=True)
class Level:
    duration: float
    peak: float
    rms: float
    clipped_samples: int
    silent_fraction: float
    leading_silence: float
    trailing_silence: float
    finite: bool


def read_segment(path: Path, index: int) -> tuple[np.ndarray, int]:
    """A segment's samples (frames x channels, float32) and rate; an unreadable file is one clear error."""
    try:
        data, rate = sf.read(str(path), dtype="float32", always_2d=True)
    except Exception as exc:  # libsndfile reports every decoding problem with its own exception types
        reason = first_line(exc)
        raise OmnidubError(f"cannot read segment {path} (line {index}): {reason}") from exc
    return data, int(rate)


def measure(data: np.ndarray, rate: int, settings: QaSettings) -> tuple[Level, np.ndarray]:
    """The level figures of a clip, and its mono downmix with non-finite samples zeroed."""
    finite = bool(np.isfinite(data).all())
    if not finite:
        data = np.nan_to_num(data, nan=0.0, posinf=0.0, neginf=0.0)
    mono = data.mean(axis=1) if data.ndim == 2 else data
    duration = len(mono) / rate if rate else 0.0
    if len(mono) == 0:
        return Level(0.0, 0.0, 0.0, 0, 1.0, 0.0, 0.0, finite), mono.astype(np.float32)
    magnitude = np.abs(data)
    peak = float(magnitude.max())
    clipped = int((magnitude >= settings.clip_level).sum())
    rms = float(np.sqrt(np.mean(np.square(mono, dtype=np.float64))))
    frame = max(1, int(round(settings.frame_seconds * rate)))
    count = math.ceil(len(mono) / frame)
    padded = np.zeros(count * frame, dtype=np.float64)
    padded[: len(mono)] = mono
    frame_rms = np.sqrt(np.mean(np.square(padded.reshape(count, frame)), axis=1))
    silent = frame_rms < 10 ** (settings.silence_dbfs / 20)
    loud = np.flatnonzero(~silent)
    if len(loud):
        leading = min(duration, float(loud[0]) * frame / rate)
        trailing = max(0.0, duration - float(loud[-1] + 1) * frame / rate)
    else:
        leading = trailing = duration
    level = Level(duration, peak, rms, clipped, float(silent.mean()), leading, trailing, finite)
    return level, mono.astype(np.float32)


def level_failures(level: Level, settings: QaSettings) -> list[Finding]:
    """The level checks a clip fails: nan, clipping, silent, or long silence at either end, with their figures."""
    found = []
    if not level.finite:
        found.append(Finding("nan", FLAG_LABELS["nan"]))
    if level.clipped_samples >= settings.clip_min_samples:
        found.append(Finding("clipping", f"{level.clipped_samples} clipped samples"))
    if level.silent_fraction >= settings.max_silent_fraction:
        share = f"{level.silent_fraction:.0%} under {settings.silence_dbfs:g} dBFS"
        found.append(Finding("silent", f"mostly silent ({share})"))
    else:
        if level.leading_silence > settings.max_edge_silence:
            found.append(Finding("lead-silence", f"{level.leading_silence:.2f} s of silence before speech"))
        if level.trailing_silence > settings.max_edge_silence:
            found.append(Finding("trail-silence", f"{level.trailing_silence:.2f} s of silence after speech"))
    return found


def edits(
    entry: dict, path: Path, data: np.ndarray, rate: int, expected_rate: int | None, settings: QaSettings
) -> list[str]:
    """How the file differs from what the render wrote (segments are mono, at the manifest's rate)."""
    found = []
    if expected_rate and rate != expected_rate:
        found.append(f"{rate} Hz, not {expected_rate} Hz")
    if data.shape[1] != 1:
        found.append(f"{data.shape[1]} channels, not 1")
    rendered = entry.get("duration")
    seconds = len(data) / rate if rate else 0.0
    if isinstance(rendered, (int, float)) and abs(seconds - rendered) > settings.edit_tolerance:
        found.append(f"{seconds:.2f} s long, not {rendered:.2f} s")
    recorded = entry.get("sha256")
    if not found and isinstance(recorded, str) and recorded and file_digest(path).hexdigest() != recorded:
        found.append("other audio of the same length")
    return found
