"""Where speech is in the source, and how loud it is over what lies under it.

Voice activity comes from the Silero model faster-whisper ships (it runs offline, on onnxruntime). Levels are
20 ms frame RMS; the background is what the frames outside any speech hold near a clip.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from omnidub.source.audio import ANALYSIS_RATE, SourceAudio

FRAME = 0.020
HOP = 0.010
# Background is measured this far either side of a clip, where no speech is.
BACKGROUND_REACH = 5.0
SILENT = 1e-5  # a digitally silent background (isolated vocals): the level ratio is capped, not infinite
MAX_LEVEL_DB = 60.0
OWN_PART = 0.1  # seconds of a speech region that must lie inside a cue for the region to be that cue's


@dataclass(frozen=True, eq=False)
class SpeechMap:
    """Speech regions (seconds) and frame levels of one analysis track (16 kHz mono)."""

    regions: tuple[tuple[float, float], ...]
    rms: np.ndarray  # one value per HOP
    speech: np.ndarray  # bool per HOP: inside a speech region

    def speech_seconds(self, start: float, end: float) -> float:
        """Seconds of speech between `start` and `end`."""
        return sum(max(0.0, min(b, end) - max(a, start)) for a, b in self.regions)

    def speech_fraction(self, start: float, end: float) -> float:
        return self.speech_seconds(start, end) / max(end - start, 1e-9)

    def speech_hull(self, start: float, end: float, low: float | None = None,
                    high: float | None = None) -> tuple[float, float] | None:
        """From the first to the last speech that overlaps `start`..`end`, let run on to `low`..`high` (default:
        not past `start`..`end`); None when there is none."""
        low, high = start if low is None else low, end if high is None else high
        # A region belongs to the span when a real part of it lies inside, not only its padded edge.
        inside = [(max(a, low), min(b, high)) for a, b in self.regions
                  if min(b, end) - max(a, start) >= min(OWN_PART, (b - a) / 2)]
        return (inside[0][0], inside[-1][1]) if inside else None

    def level_over_background(self, start: float, end: float) -> float:
        """Speech level in the span over the background near it, in dB (capped at MAX_LEVEL_DB)."""
        a, b = _frame(start, self.rms.size), _frame(end, self.rms.size)
        speech = self.rms[a:b][self.speech[a:b]]
        if speech.size == 0:
            return 0.0
        lo, hi = _frame(start - BACKGROUND_REACH, self.rms.size), _frame(end + BACKGROUND_REACH, self.rms.size)
        quiet = self.rms[lo:hi][~self.speech[lo:hi]]
        if quiet.size == 0:
            quiet = self.rms[~self.speech]
        background = max(float(np.median(quiet)) if quiet.size else SILENT, SILENT)
        level = float(np.sqrt(np.mean(speech.astype(np.float64) ** 2)))
        return float(min(MAX_LEVEL_DB, 20 * np.log10(max(level, SILENT) / background)))


def find_speech(track: SourceAudio) -> SpeechMap:
    """Voice activity and frame levels of a track (resampled to 16 kHz when it is not)."""
    from faster_whisper.vad import VadOptions, get_speech_timestamps

    track = track.at_rate(ANALYSIS_RATE)
    # Short silences split regions: in quick dialogue one voice follows another after 0.1-0.3 s, and only a gap
    # in the speech shows that the two lines' voices do not touch. A small pad keeps word edges.
    options = VadOptions(min_silence_duration_ms=60, speech_pad_ms=20, min_speech_duration_ms=100)
    found = get_speech_timestamps(track.samples, options, sampling_rate=ANALYSIS_RATE)
    regions = tuple((s["start"] / ANALYSIS_RATE, s["end"] / ANALYSIS_RATE) for s in found)
    rms = frame_rms(track.samples, ANALYSIS_RATE)
    speech = np.zeros(rms.size, bool)
    for a, b in regions:
        speech[_frame(a, rms.size):_frame(b, rms.size)] = True
    return SpeechMap(regions, rms, speech)


def frame_rms(audio: np.ndarray, sample_rate: int) -> np.ndarray:
    """RMS of 20 ms frames every 10 ms (zero-padded at the end, so frame k starts at k * 10 ms)."""
    frame, hop = int(FRAME * sample_rate), int(HOP * sample_rate)
    count = int(np.ceil(audio.size / hop)) if audio.size else 0
    padded = np.concatenate([audio, np.zeros(count * hop + frame - audio.size, audio.dtype)])
    windows = np.lib.stride_tricks.sliding_window_view(padded, frame)[::hop][:count]
    return np.sqrt(np.mean(windows.astype(np.float64) ** 2, axis=1))


def _frame(seconds: float, count: int) -> int:
    return int(min(max(round(seconds / HOP), 0), count))
