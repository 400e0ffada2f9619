"""Where speech is in the source, and how loud it is over what lies under it.

Voice activity comes from the Silero model faster-whisper ships (it runs offline, on onnxruntime). Levels are
20 ms frame RMS; the background is what the frames outside any speech hold near a clip.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from omnidub.errors import OmnidubError
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

    def with_regions(self, regions: tuple[tuple[float, float], ...]) -> SpeechMap:
        """The same track's levels with these speech regions."""
        return SpeechMap(regions, self.rms, _frames(regions, self.rms.size))

    def with_more(self, regions: tuple[tuple[float, float], ...]) -> SpeechMap:
        """The same track's levels with these speech regions as well (apart from its own)."""
        return self.with_regions(tuple(sorted(self.regions + tuple(regions))))

    def speech_seconds(self, start: float, end: float) -> float:
        """Seconds of speech between `start` and `end`."""
        return sum(max(0.0, min(b, end) - max(a, start)) for a, b in self.regions)

    def speech_fraction(self, start: float, end: float) -> float:
        return self.speech_seconds(start, end) / max(end - start, 1e-9)

    def speech_hull(
        self, start: float, end: float, low: float | None = None, high: float | None = None
    ) -> tuple[float, float] | None:
        """From the first to the last speech that overlaps `start`..`end`, let run on to `low`..`high` (default:
        not past `start`..`end`); None when there is none."""
        low, high = start if low is None else low, end if high is None else high
        # A region belongs to the span when a real part of it lies inside, not only its padded edge.
        inside = [
            (max(a, low), min(b, high))
            for a, b in self.regions
            if min(b, end) - max(a, start) >= min(OWN_PART, (b - a) / 2)
        ]
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

    def gap_fill(self, start: float, end: float) -> tuple[float, float] | None:
        """How far the quiet between a span's syllables stays under its loudest speech, and that speech's level: the
        10th and 90th percentiles of its frame levels, in dB, their difference and the second. A room's reverberation
        fills the gaps; None under FILL_LEAST s."""
        a, b = _frame(start, self.rms.size), _frame(end, self.rms.size)
        if (b - a) * HOP < FILL_LEAST:
            return None
        levels = 20 * np.log10(np.maximum(self.rms[a:b].astype(np.float64), SILENT))
        low, high = np.percentile(levels, [10, 90])
        return float(low - high), float(high)


FILL_LEAST = 0.8  # seconds of a span that gap_fill judges

# Subtitles fit their source when speech is where their cues are and silence where they are not: the mean of
# the share of cue time that holds speech and the share of the time between cues that holds none (0.5 is chance).
# On the films and the scene it is 0.84-0.94 as timed (cues lead and trail the speech by up to 0.25 s), 0.61-0.64
# with every cue 0.5 s late, 0.38-0.51 with every cue 3 s or 10 s off.
FIT_BALANCE = 0.6
FIT_SHARE = 0.3  # cues whose time holds less speech than this lie over silence, whatever offset fits
FIT_CUES = 5  # an offset is estimated from this many cues or more (a few cues fit anywhere in dense speech)
FIT_REACH = 60.0  # seconds: how far an offset is looked for either way
FIT_BETTER = 0.15  # a fit under FIT_BALANCE is refused when an offset of FIT_OFFSET or more fits this much better
FIT_OFFSET = 0.5


@dataclass(frozen=True)
class Fit:
    """How the cues lie over the speech (see FIT_BALANCE) as timed, and the offset (seconds to add to every cue)
    that fits best, with how well it fits."""

    balance: float
    share: float  # of cue time, as timed, that holds speech
    offset: float
    shifted: float


def subtitle_fit(cues: list[tuple[float, float]], speech: SpeechMap) -> Fit:
    """How well the cues fit the speech as timed and at the best offset within FIT_REACH (cross-correlations)."""
    count = speech.speech.size
    reach = int(FIT_REACH / HOP)
    size = 1 << int(np.ceil(np.log2(count + 2 * reach + 1)))
    cue, gap = np.zeros(size), np.zeros(size)
    for a, b in cues:  # laid out `reach` frames in, so a cue may move `reach` either way
        cue[reach + _frame(a, count) : reach + _frame(b, count)] = 1.0
    if not cue.any():
        return Fit(0.0, 0.0, 0.0, 0.0)
    inside = np.nonzero(cue)[0]
    gap[inside[0] : inside[-1]] = 1.0 - cue[inside[0] : inside[-1]]
    voiced = np.zeros(size)
    voiced[reach : reach + count] = speech.speech
    quiet = np.zeros(size)
    quiet[reach : reach + count] = ~speech.speech

    lags = np.arange(-reach, reach + 1)
    spoken = np.fft.irfft(np.fft.rfft(voiced) * np.conj(np.fft.rfft(cue)), size)[lags % size]
    silent = np.fft.irfft(np.fft.rfft(quiet) * np.conj(np.fft.rfft(gap)), size)[lags % size]
    balance = (spoken / cue.sum() + (silent / gap.sum() if gap.any() else 1.0)) / 2
    best = int(np.argmax(balance))
    return Fit(
        round(float(balance[reach]), 3),
        round(float(spoken[reach] / cue.sum()), 3),
        round(float(lags[best] * HOP), 2),
        round(float(balance[best]), 3),
    )


def check_some_speech(speech: SpeechMap, name: str) -> None:
    """One line when voice activity hears (almost) no speech in the source."""
    if sum(b - a for a, b in speech.regions) < 0.5:
        raise OmnidubError(
            f"{name}: no speech found in it (voice activity hears none); is it the right file, and "
            "does its first audio track hold the dialogue?"
        )


# Silero's speech probability over which a frame is speech: its usual 0.5. At 0.25 everywhere quiet voices are heard
# far more (a voice behind a door, a whisperer), but one voice of the tests' source, its lines alone, was then grouped
# as two (docs/source.md, "Quiet voices heard"). So the lower threshold is asked only inside a cue where the usual
# one hears under FAINT_SHARE of its time: the cue says someone speaks there (``analysis.analyse``; not for lines
# placed by the ASR's words). A cue heard in part only is most often a voice across a hall or behind a door heard in
# its loudest words, or the voice before it reaching into it: on the held-out cast of tests/scenes.py, unlabelled,
# asking again only where a cue held none left 8 of 23 lines a scene without a voice (docs/source.md, "A cue heard in
# part, heard more keenly").
VAD_THRESHOLD = 0.5
FAINT_THRESHOLD = 0.25
FAINT_SHARE = 0.35
FAINT_REACH = 0.25  # seconds either side of such a line where its faint speech may begin or end (cues lead and trail)
FAINT_GAP = 0.05  # seconds kept clear of speech the usual threshold hears


def find_speech(track: SourceAudio) -> SpeechMap:
    """Voice activity and frame levels of a track (resampled to 16 kHz when it is not)."""
    track = track.at_rate(ANALYSIS_RATE)
    regions = _voice_activity(track, VAD_THRESHOLD)
    rms = frame_rms(track.samples, ANALYSIS_RATE)
    return SpeechMap(regions, rms, _frames(regions, rms.size))


def with_faint_speech(speech: SpeechMap, track: SourceAudio, spans: list[tuple[float, float]]) -> SpeechMap:
    """``speech`` and, in each of ``spans`` (the times of lines that hold too little of it), what voice activity hears
    there at FAINT_THRESHOLD (clear of the speech heard already); ``speech`` itself when there is no span, or when the
    lower threshold hears nothing more."""
    if not spans:
        return speech
    faint = _voice_activity(track.at_rate(ANALYSIS_RATE), FAINT_THRESHOLD)
    heard = [(a - FAINT_GAP, b + FAINT_GAP) for a, b in speech.regions]  # stays its own, FAINT_GAP around it too
    added = []
    for start, end in spans:
        pieces = [
            piece
            for x, y in faint
            if min(y, end + FAINT_REACH) > max(x, start - FAINT_REACH)
            for piece in without(max(x, start - FAINT_REACH), min(y, end + FAINT_REACH), heard, 0.0)
        ]
        added += [(a, b) for a, b in pieces if min(b, end) - max(a, start) >= min(OWN_PART, (b - a) / 2)]
    if not added:
        return speech
    return speech.with_more(tuple(merged(added)))


# Without subtitles nothing says where a quiet voice speaks, and the whole source is transcribed behind Silero at 0.5,
# so a voice it does not hear has no line at all: on the held-out cast of tests/scenes.py the voice across a hall
# (4 dB under, a 1.6 s tail) and the one behind a door were not one word of the dub, and nothing said so. So stretches
# Silero hears at QUIET_THRESHOLD, QUIET_LEAST s long or more and QUIET_CLEAR s or more from any speech heard at 0.5,
# may be speech: each is heard again alone (heard.py), and is a line where the ASR hears words in it. Over the 13
# scenes of both casts (seeds 0-2 and 0-4) every such stretch was a voice's speech, while shorter ones (0.5 s), or
# nearer speech heard (0.05 s), were often the bed; but Silero hears a jazz bed alone so too, as it does a quiet
# voice (the same probabilities), so a stretch the ASR hears no words in is not speech (docs/source.md, "A voice
# heard nowhere").
QUIET_THRESHOLD = 0.15
QUIET_LEAST = 1.0
QUIET_CLEAR = 0.3


def with_quiet_stretches(speech: SpeechMap, track: SourceAudio) -> tuple[SpeechMap, tuple[tuple[float, float], ...]]:
    """``speech`` with the stretches Silero hears at QUIET_THRESHOLD clear of it (see above), and those stretches."""
    quiet = _voice_activity(track.at_rate(ANALYSIS_RATE), QUIET_THRESHOLD)
    heard = [(a - QUIET_CLEAR, b + QUIET_CLEAR) for a, b in speech.regions]
    added = tuple(piece for a, b in quiet for piece in without(a, b, heard, QUIET_LEAST))
    if not added:
        return speech, ()
    return speech.with_more(added), added


def merged(spans: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """The spans with those that overlap or touch joined, in order."""
    found: list[tuple[float, float]] = []
    for a, b in sorted(spans):
        if found and a <= found[-1][1]:
            found[-1] = (found[-1][0], max(found[-1][1], b))
        else:
            found.append((a, b))
    return found


def _voice_activity(track: SourceAudio, threshold: float) -> tuple[tuple[float, float], ...]:
    from faster_whisper.vad import VadOptions, get_speech_timestamps

    # Short silences split regions: in quick dialogue one voice follows another after 0.1-0.3 s, and only a gap
    # in the speech shows that the two lines' voices do not touch. A small pad keeps word edges.
    options = VadOptions(threshold=threshold, min_silence_duration_ms=60, speech_pad_ms=20, min_speech_duration_ms=100)
    found = get_speech_timestamps(track.samples, options, sampling_rate=ANALYSIS_RATE)
    return tuple((s["start"] / ANALYSIS_RATE, s["end"] / ANALYSIS_RATE) for s in found)


def _frames(regions: tuple[tuple[float, float], ...], count: int) -> np.ndarray:
    speech = np.zeros(count, bool)
    for a, b in regions:
        speech[_frame(a, count) : _frame(b, count)] = True
    return speech


def without(start: float, end: float, cut: list[tuple[float, float]], least: float) -> list[tuple[float, float]]:
    """The parts of start..end outside the ``cut`` spans, each at least ``least`` long, in order."""
    parts = [(start, end)]
    for a, b in cut:
        parts = [p for x, y in parts for p in ((x, min(y, a)), (max(x, b), y)) if p[1] - p[0] > 1e-3]
    return [(round(a, 3), round(b, 3)) for a, b in parts if b - a >= least]


def frame_rms(audio: np.ndarray, sample_rate: int) -> np.ndarray:
    """RMS of 20 ms frames every 10 ms (zero-padded at the end, so frame k starts at k * 10 ms)."""
    frame, hop = int(FRAME * sample_rate), int(HOP * sample_rate)
    count = int(np.ceil(audio.size / hop)) if audio.size else 0
    padded = np.concatenate([audio, np.zeros(count * hop + frame - audio.size, audio.dtype)])
    windows = np.lib.stride_tricks.sliding_window_view(padded, frame)[::hop][:count]
    return np.sqrt(np.mean(windows.astype(np.float64) ** 2, axis=1))


def _frame(seconds: float, count: int) -> int:
    return int(min(max(round(seconds / HOP), 0), count))
