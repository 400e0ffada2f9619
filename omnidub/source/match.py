"""Which original line each dubbed line translates.

The two files have the same cues when they hold as many lines and each pair overlaps in time: then line k of
the dub is line k of the original. Otherwise each dubbed line goes to the original line it overlaps most, and
is reported when no original line overlaps it enough (none) or when two or more do (several).
"""

from __future__ import annotations

from dataclasses import dataclass

from omnidub.script import Line, Script

# An original line counts as matched when the overlap covers this share of the shorter of the two lines.
ENOUGH_OVERLAP = 0.3


@dataclass(frozen=True)
class LineMatch:
    """A dubbed line and the original line(s) it was matched to."""

    index: int  # the dubbed line
    how: str  # "index", "overlap", "none" or "several"
    original: tuple[int, ...]  # matched original lines, best first (empty for "none")
    overlap: float  # seconds shared with the best original line

    @property
    def best(self) -> int | None:
        """The original line this one takes its voice from; None unless matched to exactly one."""
        return self.original[0] if self.how in ("index", "overlap") else None


def same_cues(dub: Script, original: Script) -> bool:
    """Whether line k of the dub is line k of the original (as many lines, each pair overlapping in time)."""
    if len(dub.lines) != len(original.lines) or not (dub.timed and original.timed):
        return False
    return all(_shared(a, b) > 0 for a, b in zip(dub.lines, original.lines))


def match_lines(dub: Script, original: Script) -> tuple[LineMatch, ...]:
    """Each dubbed line's original line(s): by index when the files have the same cues, else by time overlap."""
    if same_cues(dub, original):
        return tuple(
            LineMatch(a.index, "index", (b.index,), round(_shared(a, b), 3)) for a, b in zip(dub.lines, original.lines)
        )
    return tuple(_by_overlap(line, original.lines) for line in dub.lines)


def _by_overlap(line: Line, originals: tuple[Line, ...]) -> LineMatch:
    shared = sorted(((_shared(line, o), o) for o in originals), key=lambda pair: -pair[0])
    enough = [(s, o) for s, o in shared if s > 0 and s >= ENOUGH_OVERLAP * min(_length(line), _length(o))]
    if not enough:
        return LineMatch(line.index, "none", (), round(shared[0][0], 3) if shared else 0.0)
    how = "overlap" if len(enough) == 1 else "several"
    return LineMatch(line.index, how, tuple(o.index for _, o in enough), round(enough[0][0], 3))


def _shared(a: Line, b: Line) -> float:
    return max(0.0, min(a.end, b.end) - max(a.start, b.start))


def _length(line: Line) -> float:
    return max(line.end - line.start, 1e-3)
