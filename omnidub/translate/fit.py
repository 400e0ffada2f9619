"""The fit choice: each candidate's spoken length predicted by omnidub's pace model (its phonemes in its language, at
the pace of the clip the line is cloned from: the render's own prediction), and the most faithful one that fits its
slot with the speed-up allowed (else the shortest, flagged)."""

from __future__ import annotations

from dataclasses import dataclass

from omnidub.pace import Pace, natural_seconds  # Pace: the render's, so translate.fit.Pace is the same one
from omnidub.script import Line
from omnidub.timing import fit_line
from omnidub.translate.base import Candidate
from omnidub.translate.glossary import Glossary


@dataclass(frozen=True)
class Sized:
    """A candidate with its predicted spoken length, the speed-up its slot asks, and what it leaves out."""

    candidate: Candidate
    natural: float
    speed: float
    overflow: float  # seconds past the last moment the line may end (0: it fits)
    dropped: tuple[str, ...]  # glossary terms it should say and does not

    @property
    def fits(self) -> bool:
        return self.overflow <= 0


@dataclass(frozen=True)
class Choice:
    """One line's candidates, sized, and the one chosen (index into ``sized``)."""

    line: Line
    sized: tuple[Sized, ...]
    chosen: int
    allowed: float | None  # the longest spoken length that fits, sped up as allowed (None: nothing follows)
    pace: Pace = Pace()  # the pace every candidate's length was predicted at

    @property
    def text(self) -> str:
        return self.sized[self.chosen].candidate.text

    @property
    def fits(self) -> bool:
        return self.sized[self.chosen].fits

    @property
    def first_fits(self) -> bool:
        """Whether the engine's first (most faithful) candidate would have fitted: the share without the choice."""
        return self.sized[0].fits


def size(
    candidates: list[Candidate],
    line: Line,
    limit: float | None,
    pace: Pace,
    max_speedup: float,
    glossary: Glossary,
    language: str | None = None,
) -> list[Sized]:
    """Each candidate's length in ``language`` (the translation's) at ``pace`` fitted to ``line``'s slot as a render
    would fit it."""
    sized = []
    for candidate in candidates:
        natural = natural_seconds(candidate.text, language, pace)
        target = fit_line(line, natural, limit, max_speedup)
        dropped = tuple(glossary.dropped(line.text, candidate.text))
        sized.append(Sized(candidate, round(natural, 3), round(target.speed, 3), round(target.overflow, 3), dropped))
    return sized


def choose(sized: list[Sized], *, fit: bool = True) -> int:
    """The most faithful candidate (first) that keeps the glossary and fits; when none fits, the shortest. Without
    ``fit``: the engine's first, as a translator without the choice would give."""
    keeping = [k for k, s in enumerate(sized) if not s.dropped] or list(range(len(sized)))
    if not fit:
        return keeping[0]
    for k in keeping:
        if sized[k].fits:
            return k
    return min(keeping, key=lambda k: (sized[k].natural, k))


def allowed_seconds(line: Line, limit: float | None, max_speedup: float) -> float | None:
    """The longest spoken length that ends by ``limit`` at the speed-up allowed."""
    return None if limit is None else round(max(limit - line.start, 0.0) * max_speedup, 3)
