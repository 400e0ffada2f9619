"""What an eval found: each side as it ran, each sentence under both, and the whole comparison."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from omnidub.eval.configs import Configuration
from omnidub.eval.judge import Judge, Judged
from omnidub.eval.stats import Paired

RENDER_FAILED = "render failed"  # how a sentence left out for that reason is said


@dataclass(frozen=True)
class Side:
    """One configuration as it ran: its folder, the model and settings its manifest records, what rendered and
    what was cached this run, the synthesis time recorded for its sentences, and the figures over the paired
    sentences (error rates in percent)."""

    config: Configuration
    out_dir: Path
    model: dict
    settings: dict
    rendered: int
    cached: int
    seconds: float | None
    audio_seconds: float | None
    timed: int
    wer: float
    corpus_wer: float
    perfect: int

    @property
    def rtf(self) -> float | None:
        return self.seconds / self.audio_seconds if self.seconds is not None and self.audio_seconds else None


@dataclass(frozen=True)
class Pair:
    """One sentence under both configurations; ``delta`` is B's error rate minus A's, in percentage points."""

    a: Judged
    b: Judged
    speaker: str

    @property
    def delta(self) -> float:
        return self.b.rate - self.a.rate


@dataclass(frozen=True)
class EvalReport:
    """The whole comparison: both sides, the paired statistics, every pair, the judge and the machine."""

    corpus: Path
    total: int  # sentences in the corpus
    a: Side
    b: Side
    paired: Paired
    pairs: tuple[Pair, ...]
    judge: Judge
    machine: dict
    metric: str
    seed: int
    changes: tuple[dict, ...]  # what differs between the two as they ran: key, a, b, asked
    notes: tuple[str, ...]
    left_out: tuple[tuple[int, str], ...]  # sentences not compared, and why
    synthetic: bool = False

    @property
    def sentences(self) -> int:
        return len(self.pairs)

    @property
    def same(self) -> bool:
        return self.a.out_dir == self.b.out_dir

    @property
    def failed(self) -> bool:
        """Some sentence could not be rendered: it is left out of the comparison."""
        return any(why.startswith(RENDER_FAILED) for _, why in self.left_out)

    def differing(self) -> list[Pair]:
        """The sentences that differ, the largest difference first (B's losses before its gains)."""
        return differing(self.pairs)


def pair_up(
    speakers: dict[int, str], a: dict[int, Judged | str], b: dict[int, Judged | str]
) -> tuple[list[Pair], list[tuple[int, str]]]:
    """Each sentence (number -> speaker) as heard under A and under B (a Judged, or why there is none): the pairs
    both sides scored, and the sentences left out with the reason."""
    pairs, left_out = [], []
    for index in sorted(speakers):
        got_a, got_b = a.get(index), b.get(index)
        why = next((got for got in (got_a, got_b) if isinstance(got, str)), None)
        if why is None and (got_a is None or got_b is None):
            why = "not rendered"
        if why is None and not (got_a.scored and got_b.scored):
            why = got_a.unscored or got_b.unscored or "nothing to score once normalised"
        if why is None:
            pairs.append(Pair(got_a, got_b, speakers[index]))
        else:
            left_out.append((index, why))
    return pairs, left_out


def differing(pairs) -> list[Pair]:
    """The pairs whose error rates differ, the largest difference first (B's losses before its gains)."""
    return sorted((p for p in pairs if p.delta != 0), key=lambda p: (-abs(p.delta), -p.delta, p.a.index))
