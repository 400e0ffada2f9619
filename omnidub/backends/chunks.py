"""Upstream's long-line rule, shared by every backend: when a line is cut into chunks, each chunk's frames and seed.

Text estimated over 30 s is split at punctuation into ~15 s pieces; an exact target is shared among the pieces in
proportion to their natural lengths, less the silences that join them; every chunk draws its own noise.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from omnidub.backends.base import Request


@dataclass
class LinePlan:
    """A request resolved: its chunks (one unless long), their frame budgets and seeds; each chunk's tokens fill
    in as it decodes, and ``seconds`` gathers the wall time the line cost."""

    request: Request
    texts: list[str]
    frames: list[int]
    seeds: list[int]
    language: str | None
    instruct: str | None
    tokens: list = field(default_factory=list)
    seconds: float = 0.0


CHUNK_THRESHOLD_SECONDS = 30.0
CHUNK_SECONDS = 15.0
# Upstream's cross-fade joins chunks with this much silence (counted in frames).
CHUNK_GAP_SECONDS = 0.1


def split_line(
    text: str,
    frames: int,
    exact: bool,
    seed: int,
    frame_rate: int,
    estimate: Callable[[str], int],
    chunk_text: Callable[[str, int], list[str]],
) -> tuple[list[str], list[int], list[int]]:
    """(texts, frames, seeds) of a line's chunks: one chunk unless the line is long. ``estimate`` gives a text's
    natural frames, ``chunk_text(text, chars)`` upstream's punctuation chunking."""
    if frames <= CHUNK_THRESHOLD_SECONDS * frame_rate:
        return [text], [frames], [seed]
    chunk_chars = int(CHUNK_SECONDS * frame_rate / (frames / len(text)))
    texts = chunk_text(text, chunk_chars)
    estimates = [estimate(t) for t in texts]
    if exact:
        gaps = int(round(CHUNK_GAP_SECONDS * frame_rate * (len(texts) - 1)))
        budgets = split_frames(max(len(texts), frames - gaps), estimates)
    else:
        budgets = estimates
    return texts, budgets, [seed] + [chunk_seed(seed, j) for j in range(1, len(texts))]


def split_frames(total: int, weights: list[int]) -> list[int]:
    """``total`` split in proportion to ``weights`` (largest remainders), every share at least 1."""
    raw = [total * w / sum(weights) for w in weights]
    shares = [max(1, int(r)) for r in raw]
    order = sorted(range(len(raw)), key=lambda i: raw[i] - int(raw[i]), reverse=True)
    for i in order[: max(0, total - sum(shares))]:
        shares[i] += 1
    return shares


def chunk_seed(seed: int, chunk: int) -> int:
    """Each chunk's own noise stream, so chunks can decode in any grouping."""
    return int(np.random.SeedSequence([seed, chunk]).generate_state(1, np.uint64)[0]) & 0x7FFF_FFFF_FFFF_FFFF
