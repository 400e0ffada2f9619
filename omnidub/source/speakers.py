"""Who speaks each original line: GE2E embeddings of the lines, speaker centroids, and grouping unlabelled lines.

Unlabelled lines are grouped by average-linkage clustering of their embeddings (cosine distance). With
`speakers` given, the tree is cut into that many groups. Otherwise the number is the one whose grouping has the
best silhouette (how much closer each line is to its own group than to the next), from 2 up to MAX_SPEAKERS,
and one speaker when even the best silhouette is under SILHOUETTE_FLOOR: on the fixtures of tests/data/source
three voices reach 0.4 and more, while the lines of any one voice split at best to under 0.1.
Groups are named S1, S2, ... in order of their first line.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from omnidub.source.audio import ANALYSIS_RATE

MAX_SPEAKERS = 10
SILHOUETTE_FLOOR = 0.15
# Lines with less speech than this give embeddings too noisy to shape the groups; they join the nearest group.
CLUSTER_SPEECH = 1.0
# Confidence is a softmax over a line's similarity to each group's centroid, at this temperature: a line 0.1
# closer to its own group than to the next is 88 % sure, 0.25 closer 99 %.
CONFIDENCE_TEMPERATURE = 0.05
WINDOW = 1.6  # seconds: GE2E's own partial-utterance length
WINDOW_HOP = 0.4


@dataclass(frozen=True)
class LineSpeaker:
    """A line's speaker in an unlabelled original, with how sure the grouping is of it."""

    index: int
    speaker: str
    confidence: float  # 0..1; 0 when the line had too little speech to embed
    similarity: float | None  # to its group's centroid
    nearest: str | None  # the next closest group
    nearest_similarity: float | None
    note: str = ""


@dataclass(frozen=True)
class Grouping:
    """The speakers found in an unlabelled original, and how their number was chosen."""

    speakers: tuple[str, ...]
    lines: tuple[LineSpeaker, ...]
    how: str


def unit(vector: np.ndarray) -> np.ndarray:
    return vector / max(float(np.linalg.norm(vector)), 1e-12)


def centroid(embeddings: list[np.ndarray], weights: list[float] | None = None) -> np.ndarray:
    """The unit mean of unit embeddings."""
    stack = np.stack(embeddings)
    w = np.ones(len(embeddings)) if weights is None else np.asarray(weights, dtype=np.float64)
    return unit((stack * w[:, None]).sum(axis=0)).astype(np.float32)


def window_embeddings(encoder, clip: np.ndarray) -> list[tuple[float, np.ndarray]]:
    """(start seconds, embedding) of 1.6 s windows every 0.4 s across a 16 kHz clip (one window if shorter)."""
    size, hop = int(WINDOW * ANALYSIS_RATE), int(WINDOW_HOP * ANALYSIS_RATE)
    starts = list(range(0, max(clip.size - size, 0) + 1, hop))
    if clip.size > size and starts[-1] + size < clip.size:
        starts.append(clip.size - size)  # the clip's tail is always looked at
    found = []
    for a in starts:
        embedded = encoder.embed(clip[a:a + size], ANALYSIS_RATE)
        if embedded is not None:
            found.append((a / ANALYSIS_RATE, embedded[0]))
    return found


def group_lines(
    order: list[int], embeddings: dict[int, np.ndarray | None], speech: dict[int, float], speakers: int | None
) -> Grouping:
    """Group lines (indices in time order) by voice into `speakers` groups, or as many as the data shows."""
    core = [i for i in order if embeddings.get(i) is not None and speech.get(i, 0.0) >= CLUSTER_SPEECH]
    if not core:
        core = [i for i in order if embeddings.get(i) is not None]
    if not core:
        only = tuple(LineSpeaker(i, "S1", 0.0, None, None, None, "too little speech to embed") for i in order)
        return Grouping(("S1",), only, "one speaker: no line has enough speech to tell voices apart")
    vectors = np.stack([embeddings[i] for i in core])
    labels, how = _cluster(vectors, speakers)
    # Names in order of first appearance.
    names: dict[int, str] = {}
    for label in labels:
        names.setdefault(int(label), f"S{len(names) + 1}")
    centroids = {names[k]: centroid([vectors[j] for j in range(len(core)) if labels[j] == k]) for k in names}
    result, previous = [], None
    for i in order:
        embedding = embeddings.get(i)
        if embedding is None:
            speaker = previous or next(iter(centroids))
            result.append(LineSpeaker(i, speaker, 0.0, None, None, None, "too little speech to embed; kept with the line before"))
        else:
            result.append(_assign(i, embedding, centroids, short=i not in core))
        previous = result[-1].speaker
    return Grouping(tuple(centroids), tuple(result), how)


def _assign(index: int, embedding: np.ndarray, centroids: dict[str, np.ndarray], short: bool) -> LineSpeaker:
    sims = {name: float(np.dot(embedding, c)) for name, c in centroids.items()}
    ranked = sorted(sims, key=sims.get, reverse=True)
    values = np.array([sims[name] for name in ranked])
    weights = np.exp((values - values.max()) / CONFIDENCE_TEMPERATURE)
    confidence = float(weights[0] / weights.sum())
    nearest = ranked[1] if len(ranked) > 1 else None
    note = f"under {CLUSTER_SPEECH:g} s of speech; joined the nearest group" if short else ""
    return LineSpeaker(index, ranked[0], round(confidence, 3), round(sims[ranked[0]], 3), nearest,
                       round(sims[nearest], 3) if nearest else None, note)


def _cluster(vectors: np.ndarray, speakers: int | None) -> tuple[np.ndarray, str]:
    from scipy.cluster.hierarchy import fcluster, linkage

    n = len(vectors)
    if n == 1:
        return np.array([1]), "one speaker: only one line to group"
    tree = linkage(vectors, method="average", metric="cosine")
    if speakers is not None:
        k = min(speakers, n)
        how = f"{speakers} speakers, as asked" + (f" (only {n} lines to group)" if k < speakers else "")
        return fcluster(tree, k, criterion="maxclust"), how
    distance = np.clip(1.0 - vectors @ vectors.T, 0.0, 2.0)
    best_k, best, best_labels = 1, -1.0, np.ones(n, int)
    for k in range(2, min(MAX_SPEAKERS, n - 1) + 1):
        labels = fcluster(tree, k, criterion="maxclust")
        if len(set(labels)) < 2:
            continue
        score = silhouette(distance, labels)
        if score > best:
            best_k, best, best_labels = len(set(labels)), score, labels
    if best < SILHOUETTE_FLOOR:
        return np.ones(n, int), (f"one speaker: no split of the lines by voice reaches a silhouette of "
                                 f"{SILHOUETTE_FLOOR} (best {max(best, 0.0):.2f})")
    return best_labels, f"{best_k} speakers: the grouping with the best silhouette ({best:.2f}) from 2 to {MAX_SPEAKERS}"


def silhouette(distance: np.ndarray, labels: np.ndarray) -> float:
    """Mean silhouette of a grouping over a distance matrix (a line alone in its group scores 0)."""
    scores = []
    for i in range(len(labels)):
        own = labels == labels[i]
        if own.sum() == 1:
            scores.append(0.0)
            continue
        a = distance[i, own].sum() / (own.sum() - 1)
        b = min(distance[i, labels == other].mean() for other in set(labels) if other != labels[i])
        scores.append((b - a) / max(a, b, 1e-12))
    return float(np.mean(scores))
