"""Fitting each line to its slot: natural length, capped speed-up, extension into silence, overflow.

Audio is never time-stretched after synthesis: a faster line is asked of the model through its target
duration, and a line is never slowed down to fill a slot.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, replace

from omnidub.duration import FRAME_RATE
from omnidub.errors import OmnidubError
from omnidub.script import Line

# Room left before the next line when a long line extends past its slot.
NEXT_LINE_MARGIN = 0.05
# No line is planned longer than this. Text is capped when read, so only a voice paced absurdly (a transcript
# far shorter than its reference, a tiny speed) gets near it.
MAX_LINE_SECONDS = 600.0


@dataclass(frozen=True)
class Target:
    """The plan for one line: where it starts and how long it is rendered."""

    line: Line
    natural: float  # seconds the line would take at the speaker's own pace
    target: float  # seconds to render
    speed: float  # natural / target: 1.0 when the line fits, up to the preset's cap
    overflow: float  # seconds past the last moment the line may end; 0 when it fits
    limit: float | None  # the last moment the line may end (None: nothing follows)

    @property
    def start(self) -> float:
        return self.line.start

    @property
    def end(self) -> float:
        return self.start + self.target

    @property
    def flags(self) -> tuple[str, ...]:
        flags = []
        if self.speed > 1.0 + 1e-6:
            flags.append("compressed")
        if self.start + self.target > self.line.end + 1e-6:
            flags.append("extended")
        if self.overflow > 0:
            flags.append("overflow")
        return tuple(flags)


@dataclass(frozen=True)
class Fit:
    """One line's own fitting rules, as an editor set them: its speed-up cap (None: the preset's), and whether it
    may borrow the silence after its slot, up to the next line, before it is sped up."""

    max_speedup: float | None = None
    borrow: bool = False


def plan(
    lines: list[Line],
    naturals: list[float],
    *,
    max_speedup: float,
    timed: bool = True,
    gap: float = 0.4,
    fits: dict[int, Fit] | None = None,
) -> list[Target]:
    """Fit every line to its slot (``fits``: lines with rules of their own, by index); untimed scripts are laid
    out back to back at natural length."""
    fits = fits or {}
    if len(lines) != len(naturals):
        raise ValueError("one natural length per line")
    for line, natural in zip(lines, naturals):
        if natural > MAX_LINE_SECONDS:
            raise OmnidubError(
                f"line {line.index} ({line.speaker}) would take {natural / 60:.0f} minutes at its voice's pace; a line "
                f"may take at most {MAX_LINE_SECONDS / 60:.0f} (check the voice's transcript and speed, or split the "
                "line)"
            )
    if not timed:
        targets, cursor = [], 0.0
        for line, natural in zip(lines, naturals):
            # The line's slot becomes what it is given here, so nothing reads as extended or late.
            placed = replace(line, start=round(cursor, 3), end=round(cursor + natural, 3))
            targets.append(Target(placed, natural, natural, 1.0, 0.0, None))
            cursor += natural + gap
        return targets

    return [
        fit_line(line, natural, limit, max_speedup, fits.get(line.index, Fit()))
        for line, natural, limit in zip(lines, naturals, limits(lines))
    ]


def limits(lines: list[Line]) -> list[float | None]:
    """The last moment each timed line may end: just before the next line of any speaker starts (None: nothing
    follows)."""
    starts = sorted(line.start for line in lines)
    found = []
    for line in lines:
        following = bisect.bisect_right(starts, line.start + 1e-9)  # the next start of any speaker, in log time
        # Room runs to the next line of any speaker, which also keeps it off the same speaker's next line.
        found.append(max(line.end, starts[following] - NEXT_LINE_MARGIN) if following < len(starts) else None)
    return found


def fit_line(line: Line, natural: float, limit: float | None, max_speedup: float, fit: Fit = Fit()) -> Target:
    """One timed line fitted to its slot: natural length when it fits, sped up to the cap, then past its slot."""
    slot = max(line.end - line.start, 1.0 / FRAME_RATE)
    cap = fit.max_speedup or max_speedup
    if fit.borrow and limit is not None:
        slot = max(slot, limit - line.start)  # the silence up to the next line is the line's to use
    elif fit.borrow:
        slot = max(slot, natural)  # nothing follows: all the time it needs
    if natural <= slot:
        target, speed = natural, 1.0
    elif natural / cap <= slot:
        target, speed = slot, natural / slot
    else:
        target, speed = natural / cap, cap
    overflow = max(0.0, line.start + target - limit) if limit is not None else 0.0
    return Target(line, natural, target, speed, overflow, limit)
