"""The one frame grid: where each line sits in whole frames, for the manifest's timecodes, every timeline format
and the dubbed subtitles alike, so they never disagree by a frame."""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

# NTSC rates are their nominal rate times 1000/1001. A rate within this of one (29.97, 23.976, 59.94, or a video's
# 30000/1001 carried as a float) is taken as that rate exactly.
NTSC_NOMINAL = (24, 30, 48, 60, 120)
NTSC_TOLERANCE = 0.01
# The rates SMPTE timecode (and so an EDL or an FCP 7 XML) is written at.
SMPTE_RATES = frozenset(
    {
        Fraction(24000, 1001),
        Fraction(24),
        Fraction(25),
        Fraction(30000, 1001),
        Fraction(30),
        Fraction(48),
        Fraction(50),
        Fraction(60000, 1001),
        Fraction(60),
    }
)


@dataclass(frozen=True)
class FrameGrid:
    """Whole frames at one exact rate: a moment to its frame, a length to the frames it holds, a frame to its
    timecode."""

    rate: Fraction

    @classmethod
    def at(cls, fps: float | Fraction) -> FrameGrid:
        """The grid of a frame rate as given (``--fps``, a video's rate, the manifest's rounded ``fps``)."""
        fps = Fraction(fps)
        for nominal in NTSC_NOMINAL:
            ntsc = Fraction(nominal * 1000, 1001)
            if abs(fps - ntsc) < NTSC_TOLERANCE:
                return cls(ntsc)
        near = fps.limit_denominator(1001)
        return cls(near if near > 0 else fps)

    def frame(self, seconds: float) -> int:
        """The nearest whole frame of a moment. A moment exactly between two frames goes to the later one: a dub
        heard a little late is less noticeable than one heard early."""
        return max(0, math.floor(_exact(seconds) * self.rate + Fraction(1, 2)))

    def frames(self, seconds: float) -> int:
        """The whole frames that cover a length of audio (at least one): a clip or a cue holds every sample of its
        line at any rate (at 1 fps a 1.68 s line is 2 frames, not 1); its last frame may run past the file's end
        by less than a frame, which editors play as silence."""
        return max(1, math.ceil(_exact(seconds) * self.rate))

    def clip(self, start: float, seconds: float) -> tuple[int, int]:
        """Where a line's clip sits: its record-in frame (the nearest to its start) and its length in frames."""
        return self.frame(start), self.frames(seconds)

    def seconds(self, frame: int) -> float:
        return float(frame / self.rate)

    @property
    def smpte(self) -> bool:
        """Whether SMPTE defines timecode at this rate (an EDL and an FCP 7 XML need it)."""
        return self.rate in SMPTE_RATES

    @property
    def base(self) -> int:
        """The frames a second of timecode counts: the nominal rate (30 at 30000/1001)."""
        return math.ceil(self.rate)

    def timecode(self, frame: int) -> str:
        """HH:MM:SS:FF, non-drop-frame: at an integer or NTSC rate the frame count in seconds of ``base`` frames
        (at 30000/1001 an hour of clock is 00:59:56:12); at any other rate (12.5, a variable rate's average) the
        frames are counted within each second of the clock."""
        if self.rate.denominator in (1, 1001):
            whole, count = divmod(frame, self.base)
        else:
            whole = math.floor(frame / self.rate)
            count = frame - math.ceil(whole * self.rate)
        return f"{whole // 3600:02d}:{whole // 60 % 60:02d}:{whole % 60:02d}:{count:02d}"


def line_timecodes(start: float, end: float, duration: float | None, fps: float) -> dict[str, str]:
    """A manifest line's ``start_tc`` (its clip's record-in), ``end_tc`` (its slot's end) and, once rendered,
    ``rendered_end_tc`` (its clip's record-out, the frame the timelines end it on)."""
    grid = FrameGrid.at(fps)
    found = {"start_tc": grid.timecode(grid.frame(start)), "end_tc": grid.timecode(grid.frame(end))}
    if duration is not None:
        record_in, length = grid.clip(start, duration)
        found["rendered_end_tc"] = grid.timecode(record_in + length)
    return found


def _exact(seconds: float) -> Fraction:
    """Seconds as the fraction they stand for (milliseconds, or samples at any rate up to 192 kHz): 0.3 s is 3/10,
    not the float just under it, and 50000 samples at 24 kHz are 25/12 s, 50 frames at 24 fps exactly."""
    return Fraction(seconds).limit_denominator(192_000)
