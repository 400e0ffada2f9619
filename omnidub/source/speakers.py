"""Who speaks each original line: speaker embeddings of the lines (CAM++, see omnidub.embedding), speaker
centroids, grouping unlabelled lines, and each voice's calibration on the source itself.

Unlabelled lines are grouped by average-linkage clustering of their embeddings (cosine distance). With
`speakers` given, the tree is cut into that many groups. Otherwise the number is the one whose grouping has the
best silhouette (how much closer each line is to its own group than to the next), from 2 up to MAX_SPEAKERS,
and one speaker when even the best silhouette is under SILHOUETTE_FLOOR. Silhouette favours few groups when two
voices are alike (on a film with two male diphone voices of one synthesizer it kept them as one), so each group
is then split in two while its lines form two tight sub-groups: every line of each closer to its own sub-group
than the two sub-groups are to each other, by SPLIT_GAP; a few lines least like the rest of their group (a whisper
or a short reply joined to the nearest voice, which sits between two voices) are set aside while it is tried.
Groups are named S1, S2, ... in order of their first line.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from omnidub.source.audio import ANALYSIS_RATE

MAX_SPEAKERS = 10
SILHOUETTE_FLOOR = 0.15
# Two sub-groups of one group are two voices when the mean similarity between them is this far under the mean
# similarity inside each. On the films (docs/source.md) one voice's lines split at best 0.02-0.09 apart
# (CAM++), while two similar voices are 0.25 and more apart.
SPLIT_GAP = 0.15
SPLIT_LINES = 2  # each sub-group needs this many lines
# Of a group's lines, the share that may be set aside to find two voices in it (_halves), and at most STRAYS_MOST:
# each one set aside is one more search of the group's halves, whose cost grows as its lines cubed (a 300-line
# voice of an episode took 26 s with a quarter of its lines set aside one by one, 1.6 s with two; Intel Xeon).
STRAYS = 0.25
STRAYS_MOST = 2
# Or SPLIT_GAP_CLEAR apart, when each has CLEAR_LINES lines and every line of each is nearer the rest of its own
# than the other: one espeak-ng variant in two accents came 0.10-0.13 apart under a bed (0.096 with a line of both
# voices among them, heard without subtitles), one voice's lines at best 0.02-0.05 (tests/films.py, ACCENT_CAST). A
# margin for each line (0.02) kept flite's and festival's `slt` one group heard at 6 dB: 0.13 apart, one 3.4 s line
# 0.007 nearer its own.
SPLIT_GAP_CLEAR = 0.08
CLEAR_LINES = 3
# Sub-groups this far apart but not split are said to be perhaps two voices, their lines named: one voice's lines
# split at best 0.02-0.05 apart on the films, one voice in two accents 0.10-0.13.
UNTOLD_GAP = 0.06
# A group with less speech than this, all its lines together, is one short line's noisy embedding (a 1.1 s "Yes,
# of course." stood alone on a film), not a voice: found by the data, its lines join the nearest group. Unless its
# lines are unlike every other group (under SLIGHT_APART to the nearest centroid, each): a character who only
# whispers, or speaks in short replies, is a voice of its own. On the scenes (tests/scenes.py) a whisperer's lines
# came 0.29-0.33 to the nearest other voice, one voice's short lines 0.5 and more to their own.
GROUP_SPEECH = 2.5
SLIGHT_APART = 0.45
# Lines the grouping could place nowhere (each under SLIGHT_APART like its group, however much nearer it than any
# other, or with too little speech to embed) that are, heard over their cues' whole time (other cues cut away,
# STRAY_LEAST s at least), each under SLIGHT_APART like every voice found and STRAY_ALIKE or more like one another,
# are one voice of their own: a whisper, or a voice under the music, that voice activity hears 0-0.5 s of in each cue.
# On the scenes (tests/scenes.py) a whisperer's three cues came 0.68-0.79 like one another and 0.32-0.34 like every
# voice; the other lines placed nowhere (back-channels spoken over a sentence) came 0.12-0.24 like them.
# Another line placed nowhere joins that voice when its cue's time is on average STRAY_JOIN or more like the voice's
# lines and STRAY_MARGIN more like them than like any voice found (the Spanish scene's seed 4: a whispered line 0.55
# and 0.52 like the two others, 0.40 like the nearest voice).
STRAY_ALIKE = 0.6
# Lines heard without subtitles are cut to their words, shorter than cues, and agree less: with Whisper base on the
# scenes, a whisperer's lines placed nowhere came 0.37-1.0 like one another (0.54 for the two of Spanish seed 4),
# those of two voices 0.05-0.29 (docs/source.md, "A whisper without subtitles").
STRAY_ALIKE_HEARD = 0.5
STRAY_LEAST = 0.5
STRAY_WIDEN = 0.5  # s either side of a line heard, placed nowhere, that no other line holds (_cue_embeddings)
STRAY_MOST = 12  # lines weighed together at most
STRAY_JOIN = 0.5
STRAY_MARGIN = 0.1
# Of two overlapping lines heard alone, the one this much less like the group they share is moved out of it.
OUTSIDE_MARGIN = 0.1
# The note on a line placed apart from a line it cannot share a voice with.
PLACED = "placed with the nearest other voice (a guess)"
# Lines with less speech than this give embeddings too noisy to shape the groups; they join the nearest group.
CLUSTER_SPEECH = 1.0
# Confidence is a softmax over a line's similarity to each group's centroid, at this temperature: a line 0.1
# closer to its own group than to the next is 88 % sure, 0.25 closer 99 %.
CONFIDENCE_TEMPERATURE = 0.05
WINDOW = 1.6  # seconds: GE2E's own partial-utterance length, kept for CAM++
WINDOW_HOP = 0.4
# A voice's calibration: a window is judged against how its own speaker's windows in this source sound, so a
# source under loud music (every similarity lower) is judged by its own measure, not an absolute threshold. The
# margin is a share of the way from the speaker's typical window (its median gap to the nearest other speaker)
# to a window as close to another speaker as to its own; the floor is halfway between the speaker's own windows
# and the other speakers' windows (medians of their similarity to its centroid). On the films (docs/source.md):
# single-voice windows have gaps of -0.49 (median) to -0.13 (the worst of 881), a window holding 0.9 s of another
# voice 0.07 and more.
MARGIN_SHARE = 0.2
MARGIN_CAP = -0.05  # a window must always be at least this much closer to its own speaker than to any other
FLOOR_RANGE = (0.3, 0.8)
DEFAULT_FLOOR, DEFAULT_MARGIN = 0.5, -0.1  # a voice with too few windows to measure
CALIBRATION_WINDOWS = 4
# Against a voice so alike that the speaker's own windows come within the margin of it, a window fails only when it
# leans this much further towards that voice than the speaker's most leaning own window.
ALIKE_SLACK = 0.02
# A voice is that alike when the speaker's own windows lean towards it this much or more (median): one espeak-ng
# variant in two accents -0.06, two diphone voices of one synthesizer -0.3 and less, two distinct voices -0.49.
ALIKE_LEAN = -0.15


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
    doubts: dict[int, str] = field(default_factory=dict)  # line -> why its group may be two voices alike
    cued: tuple[str, ...] = ()  # voices found by their cues' time alone (see :func:`stray_voice`)


@dataclass(frozen=True)
class VoiceCalibration:
    """How this source's own windows of a speaker sound against the speakers' centroids: a window whose similarity
    to its speaker is under `floor`, or where another speaker comes within `margin` of it (other - own > margin),
    is not that speaker alone. `alike` holds a wider margin for each voice this speaker's own windows come close
    to (one synthesizer's voice in two accents): against such a voice a window fails only when it leans further
    towards it than any of the speaker's own windows do, as the windows cannot hear it more finely."""

    floor: float
    margin: float
    windows: int  # how many windows it was measured on (0: the defaults)
    alike: dict[str, float] = field(default_factory=dict)  # other speaker -> its own, wider margin

    def problem(self, own: float, others: dict[str, float], speaker: str) -> str | None:
        """Why a window with these similarities (to its speaker, and to each other speaker) is not `speaker` alone
        (None: it is)."""
        for name in sorted(others, key=others.get, reverse=True):
            other, margin = others[name], self.alike.get(name, self.margin)
            if other - own <= margin:
                continue
            relation = (
                f"closer to {name} ({other:.2f}) than to {speaker} ({own:.2f})"
                if other > own
                else f"nearly as close to {name} ({other:.2f}) as to {speaker} ({own:.2f})"
            )
            return f"{relation}; in this source {speaker}'s own lines are " + (
                f"more than {-margin:.2f} closer to {speaker}"
                if margin < 0
                else f"at most {margin:.2f} closer to {name}"
            )
        if own < self.floor:
            return (
                f"similarity {own:.2f} to {speaker}, under {self.floor:.2f}, halfway between {speaker}'s own "
                "lines and the other voices in this source"
            )
        return None


def calibrate(windows: dict[str, list[np.ndarray]], centroids: dict[str, np.ndarray]) -> dict[str, VoiceCalibration]:
    """Each speaker's calibration from the embeddings of windows of each speaker's own lines (see VoiceCalibration)."""
    result = {}
    for speaker, own_centroid in centroids.items():
        found = windows.get(speaker) or []
        if len(found) < CALIBRATION_WINDOWS:
            result[speaker] = VoiceCalibration(DEFAULT_FLOOR, DEFAULT_MARGIN, 0)
            continue
        stack = np.stack(found)
        own = stack @ own_centroid
        others = [stack @ c for name, c in centroids.items() if name != speaker]
        strangers = [e for name, found in windows.items() if name != speaker for e in found]
        floor, margin, alike = DEFAULT_FLOOR, MARGIN_CAP, {}
        if strangers:
            floor = (float(np.median(own)) + float(np.median(np.stack(strangers) @ own_centroid))) / 2
        if others:
            margin = min(MARGIN_SHARE * float(np.median(np.max(np.stack(others), axis=0) - own)), MARGIN_CAP)
            names = [name for name in centroids if name != speaker]
            for name, other in zip(names, others):
                lean = other - own
                worst = float(np.max(lean)) + ALIKE_SLACK  # the own window leaning most towards that voice
                if float(np.median(lean)) > ALIKE_LEAN and worst > margin:
                    alike[name] = round(worst, 3)
        result[speaker] = VoiceCalibration(
            round(float(np.clip(floor, *FLOOR_RANGE)), 3), round(margin, 3), len(found), alike
        )
    return result


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
    pieces = [clip[a : a + size] for a in starts]
    many = getattr(encoder, "embed_many", None)
    embedded = many(pieces, ANALYSIS_RATE) if many else [encoder.embed(p, ANALYSIS_RATE) for p in pieces]
    return [(a / ANALYSIS_RATE, e[0]) for a, e in zip(starts, embedded) if e is not None]


def group_lines(
    order: list[int],
    embeddings: dict[int, np.ndarray | None],
    speech: dict[int, float],
    speakers: int | None,
    apart: dict[tuple[int, int], str] | None = None,
    outside: dict[int, np.ndarray] | None = None,
) -> Grouping:
    """Group lines (indices in time order) by voice into `speakers` groups, or as many as the data shows. ``apart``:
    pairs of lines that cannot be one voice (their cues overlap, or one dialogue-dash cue holds both), each with why;
    a pair grouped together anyway is parted (see :func:`keep_apart`)."""
    core = [i for i in order if embeddings.get(i) is not None and speech.get(i, 0.0) >= CLUSTER_SPEECH]
    if not core:
        core = [i for i in order if embeddings.get(i) is not None]
    if not core:
        only = tuple(LineSpeaker(i, "S1", 0.0, None, None, None, "too little speech to embed") for i in order)
        return Grouping(("S1",), only, "one speaker: no line has enough speech to tell voices apart")
    vectors = np.stack([embeddings[i] for i in core])
    labels, how = _cluster(vectors, speakers)
    if speakers is None:
        # A group of a short line or two is no voice of its own: its lines join the nearest group.
        seconds = {int(k): sum(speech.get(core[j], 0.0) for j in np.nonzero(labels == k)[0]) for k in set(labels)}
        slight = {k for k, total in seconds.items() if total < GROUP_SPEECH}
        over = spoken_over(apart, speech)
        slight = {
            k
            for k in slight
            if not _unlike_the_rest(vectors, labels, k) or over.issuperset(core[j] for j in np.nonzero(labels == k)[0])
        }
        if slight and len(slight) < len(seconds):
            kept = [j for j in range(len(core)) if int(labels[j]) not in slight]
            core, vectors, labels = [core[j] for j in kept], vectors[kept], labels[kept]
            how += (
                f"; {len(slight)} group{'s' if len(slight) > 1 else ''} of under {GROUP_SPEECH:g} s of speech "
                "joined the nearest"
            )
    close = untold(vectors, labels) if speakers is None else []
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
            result.append(
                LineSpeaker(i, speaker, 0.0, None, None, None, "too little speech to embed; kept with the line before")
            )
        else:
            result.append(_assign(i, embedding, centroids, short=i not in core))
        previous = result[-1].speaker
    if apart:
        result = keep_apart(result, embeddings, centroids, apart, speech, outside)
    doubts = {}
    for a, b, gap in close:
        group = names.get(int(labels[a[0]]))
        if group is None:
            continue
        one, two = sorted((sorted(core[j] for j in a), sorted(core[j] for j in b)))
        why = (
            f"{group} may be two voices alike: its lines {', '.join(map(str, one))} and "
            f"{', '.join(map(str, two))} come {gap:.2f} apart, not enough to split them ({SPLIT_GAP:g}, or "
            f"{SPLIT_GAP_CLEAR:g} with {CLEAR_LINES} lines a side each nearer its own); listen to them, and label "
            "the original's cues if they are two"
        )
        doubts.update(dict.fromkeys(one + two, why))
    return Grouping(tuple(centroids), tuple(result), how, doubts)


def spoken_over(apart: dict[tuple[int, int], str] | None, speech: dict[int, float]) -> set[int]:
    """The lines spoken over another (of each such pair in ``apart``, the one with less speech, as in
    :func:`keep_apart`). Such a line is heard mostly as the other voice: its embedding holds two voices, unlike every
    voice found, so a group of such lines alone is no voice of its own (a back-channel "Mm-hm." over a sentence stood
    as a seventh voice on the scenes once its whisperer was heard more keenly: docs/source.md)."""
    return {
        j if speech.get(j, 0.0) <= speech.get(i, 0.0) else i
        for (i, j), why in (apart or {}).items()
        if why.startswith("spoken over")
    }


def _unlike_the_rest(vectors: np.ndarray, labels: np.ndarray, group: int) -> bool:
    """Whether every line of a group is under SLIGHT_APART to every other group's centroid."""
    mine = labels == group
    others = [centroid(list(vectors[labels == k])) for k in set(labels.tolist()) if k != group]
    return bool(others) and bool((vectors[mine] @ np.stack(others).T < SLIGHT_APART).all())


def keep_apart(
    lines: list[LineSpeaker],
    embeddings: dict[int, np.ndarray | None],
    centroids: dict[str, np.ndarray],
    apart: dict[tuple[int, int], str],
    speech: dict[int, float],
    outside: dict[int, np.ndarray] | None = None,
) -> list[LineSpeaker]:
    """The grouping with every pair of lines that cannot be one voice in two groups: the line with less speech (a
    back-channel spoken over a sentence, a one-word answer) goes to its nearest group that none of the lines it is
    apart from is in. A line spoken over another (its cue inside the other's) is heard mostly as that other voice,
    so it is placed by what its embedding holds beyond the other line's (its own less the other's direction). The
    line is noted as a guess."""
    by = {line.index: line for line in lines}
    outside = outside or {}
    for (i, j), why in sorted(apart.items()):
        if i not in by or j not in by or by[i].speaker != by[j].speaker:
            continue
        mover, stay = (j, i) if speech.get(j, 0.0) <= speech.get(i, 0.0) else (i, j)
        group = centroids.get(by[i].speaker)
        if i in outside and j in outside and group is not None:
            # Two turns that overlap, each heard alone outside the other: the one less like the group they share
            # is the other voice (the overlap can carry a line's whole embedding to its neighbour's voice).
            like = {k: float(np.dot(outside[k], group)) for k in (i, j)}
            if abs(like[i] - like[j]) >= OUTSIDE_MARGIN:
                mover, stay = (i, j) if like[i] < like[j] else (j, i)
        embedding, other = outside.get(mover, embeddings.get(mover)), embeddings.get(stay)
        barred = {by[k].speaker for pair in apart for k in pair if mover in pair and k != mover}
        choices = {name: c for name, c in centroids.items() if name not in barred}
        if not choices:
            continue
        if embedding is not None and other is not None and "spoken over" in why:
            embedding = unit(embedding - float(np.dot(embedding, other)) * other)
        if embedding is None:
            name = next(iter(choices))
            moved = LineSpeaker(mover, name, 0.0, None, None, None)
        else:
            moved = _assign(mover, embedding, choices, short=False)
        by[mover] = LineSpeaker(
            mover,
            moved.speaker,
            moved.confidence,
            moved.similarity,
            moved.nearest,
            moved.nearest_similarity,
            f"{why.format(line=stay)}, so not {by[stay].speaker}; {PLACED}",
        )
    return [by[line.index] for line in lines]


def _assign(index: int, embedding: np.ndarray, centroids: dict[str, np.ndarray], short: bool) -> LineSpeaker:
    sims = {name: float(np.dot(embedding, c)) for name, c in centroids.items()}
    ranked = sorted(sims, key=sims.get, reverse=True)
    values = np.array([sims[name] for name in ranked])
    weights = np.exp((values - values.max()) / CONFIDENCE_TEMPERATURE)
    confidence = float(weights[0] / weights.sum())
    nearest = ranked[1] if len(ranked) > 1 else None
    note = "too little speech to shape the groups; joined the nearest group" if short else ""
    return LineSpeaker(
        index,
        ranked[0],
        round(confidence, 3),
        round(sims[ranked[0]], 3),
        nearest,
        round(sims[nearest], 3) if nearest else None,
        note,
    )


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
        best_labels = np.ones(n, int)
        how = (
            f"one speaker: no split of the lines by voice reaches a silhouette of {SILHOUETTE_FLOOR} "
            f"(best {max(best, 0.0):.2f})"
        )
    else:
        how = f"{best_k} speakers: the grouping with the best silhouette ({best:.2f}) from 2 to {MAX_SPEAKERS}"
    labels, gaps = split_tight(vectors, best_labels)
    if gaps:
        count = len(set(labels))
        first = best_k if best >= SILHOUETTE_FLOOR else 1
        how = (
            f"{count} speakers: the grouping with the best silhouette ({max(best, 0.0):.2f}) gave {first}, "
            f"and {len(gaps)} group{'s' if len(gaps) > 1 else ''} whose lines form two tight sub-groups "
            f"{'were' if len(gaps) > 1 else 'was'} split (their sub-groups "
            + ", ".join(f"{g:.2f}" for g in gaps)
            + " apart)"
        )
    return labels, how


def split_tight(vectors: np.ndarray, labels: np.ndarray) -> tuple[np.ndarray, list[float]]:
    """Split every group whose lines form two tight sub-groups (see SPLIT_GAP), again while any does; returns the
    new labels and the gap of each split made (the margin the two voices were told apart by)."""
    labels, gaps = np.asarray(labels).copy(), []
    splits = 0
    similarity = vectors @ vectors.T
    queue = list(dict.fromkeys(int(k) for k in labels))
    while queue and splits < MAX_SPEAKERS:
        group = queue.pop(0)
        members = np.nonzero(labels == group)[0]
        if len(members) < 2 * SPLIT_LINES:
            continue
        found = _two_voices(similarity, members)
        if found is None:
            continue
        a, b, gap = found
        new = int(labels.max()) + 1
        labels[b] = new
        splits += 1
        gaps.append(round(gap, 3))
        queue += [group, new]
    return labels, gaps


def _two_voices(similarity: np.ndarray, members: np.ndarray) -> tuple[np.ndarray, np.ndarray, float] | None:
    """The group's lines as two voices (each side, and the gap they were told apart by), or None when they are one.
    The halves are tried on all the lines, then with the lines least like the rest set aside (see :func:`_halves`)."""
    for a, b, gap, aside, fewest in _halves(similarity, members):
        if aside and fewest < CLEAR_LINES:  # with lines set aside, two lines a side are too few to tell
            continue
        if gap >= SPLIT_GAP or (
            gap >= SPLIT_GAP_CLEAR and min(len(a), len(b)) >= CLEAR_LINES and _each_nearer_own(similarity, a, b)
        ):
            return a, b, gap
    return None


def _halves(similarity: np.ndarray, members: np.ndarray):
    """The group's best two halves (see :func:`_best_halves`) found on all its lines, then with its 1, 2, ... lines
    least like the rest set aside (up to STRAYS of them, STRAYS_MOST at most): a stray line (a whisper, a short
    reply joined to the nearest voice) sits between two voices and closes the gap they show alone. Each as (one
    side, the other, the gap, how many were set aside, the fewer lines of a side found without them); a line set
    aside is on the side it is more like."""
    order = members[np.argsort(_mean_to(similarity[np.ix_(members, members)], np.ones(len(members), bool)))]
    for aside in range(min(int(len(members) * STRAYS), STRAYS_MOST) + 1):
        core = np.sort(order[aside:])
        if len(core) < 2 * SPLIT_LINES:
            return
        found = _best_halves(similarity, core)
        if found is None:
            continue
        a, b, gap = found
        strays = order[:aside]
        nearer_a = similarity[np.ix_(strays, a)].mean(axis=1) >= similarity[np.ix_(strays, b)].mean(axis=1)
        yield (
            np.sort(np.concatenate([a, strays[nearer_a]])),
            np.sort(np.concatenate([b, strays[~nearer_a]])),
            gap,
            aside,
            min(len(a), len(b)),
        )


def untold(vectors: np.ndarray, labels: np.ndarray) -> list[tuple[np.ndarray, np.ndarray, float]]:
    """Groups whose lines come near splitting in two (their two sub-groups UNTOLD_GAP or more apart, but not as far
    as a split needs): each as (lines of one side, of the other, the gap); two voices alike may be there, or one
    voice heard in two ways, and the lines cannot say which. All the lines are weighed: with stray lines set aside,
    one voice's lines came 0.07 apart on a scene (English seed 0 heard by Whisper base), a doubt for nothing."""
    similarity, found = vectors @ vectors.T, []
    for group in dict.fromkeys(int(k) for k in labels):
        members = np.nonzero(labels == group)[0]
        if len(members) < 2 * SPLIT_LINES:
            continue
        best = _best_halves(similarity, members)
        if best is not None and best[2] >= UNTOLD_GAP:
            found.append(best)
    return found


def _best_halves(similarity: np.ndarray, members: np.ndarray) -> tuple[np.ndarray, np.ndarray, float] | None:
    """The two sub-groups of `members` (SPLIT_LINES each at least) furthest apart: the mean similarity inside the
    looser one less the mean similarity between them. Tried: the tree's first split, and two-means from each line
    with the line least like it (the tree's first split often takes one noisy line off alone)."""
    from scipy.cluster.hierarchy import fcluster, linkage

    block = similarity[np.ix_(members, members)]
    # Distances of lines alike to the last bit (cosine a hair over 1) are 0, never the small negative scipy refuses.
    distances = np.maximum(1.0 - block[np.triu_indices(len(members), 1)], 0.0)
    tries = [fcluster(linkage(distances, method="average"), 2, "maxclust") == 1]
    for seed in range(len(members)):
        side = block[seed] >= block[int(np.argmin(block[seed]))]
        for _ in range(10):
            if side.all() or not side.any():
                break
            nearer = _mean_to(block, side) >= _mean_to(block, ~side)
            if (nearer == side).all():
                break
            side = nearer
        tries.append(side)
    best = None
    for side in tries:
        a, b = members[side], members[~side]
        if min(len(a), len(b)) < SPLIT_LINES:
            continue
        inside = min(_mean_off_diagonal(similarity[np.ix_(a, a)]), _mean_off_diagonal(similarity[np.ix_(b, b)]))
        gap = inside - float(similarity[np.ix_(a, b)].mean())
        if best is None or gap > best[2]:
            best = (a, b, gap)
    return best


def _mean_to(block: np.ndarray, side: np.ndarray) -> np.ndarray:
    """Each line's mean similarity to the lines of ``side`` other than itself (its own 1.0 would hold a line on the
    side it started on)."""
    total = block[:, side].sum(axis=1) - np.where(side, np.diag(block), 0.0)
    count = np.maximum(side.sum() - side.astype(int), 1)
    return total / count


def _each_nearer_own(similarity: np.ndarray, a: np.ndarray, b: np.ndarray) -> bool:
    """Whether every line of each sub-group is nearer the rest of its own (its mean similarity to them, itself left
    out) than the other sub-group."""
    both = np.concatenate([a, b])
    block, in_a = similarity[np.ix_(both, both)], np.arange(len(both)) < len(a)
    to_a, to_b = _mean_to(block, in_a), _mean_to(block, ~in_a)
    return bool((to_a > to_b)[in_a].all() and (to_b > to_a)[~in_a].all())


def _mean_off_diagonal(block: np.ndarray) -> float:
    n = block.shape[0]
    return float((block.sum() - np.trace(block)) / (n * (n - 1)))


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


def placed_by_cue(
    grouping: Grouping,
    centroids: dict[str, np.ndarray],
    heard: dict[int, np.ndarray],
    apart: dict[tuple[int, int], str] | None = None,
) -> Grouping:
    """The grouping with each line too short to embed (kept with the line before) and in no voice found by its cues'
    time placed instead by ``heard`` (its cue's whole time embedded) where that is SLIGHT_APART or more like one voice
    and STRAY_MARGIN more than like any other, and no line it cannot share a voice with (``apart``) is that voice's: a
    whispered line voice activity hears nothing of, beside two it hears enough of to make the whisperer a voice (the
    scenes' seed 1: 0.70 like the whisperer, 0.34 at most like the rest). Its similarities are its cue's: it still
    has no speech of its own to embed."""
    who = {line.index: line.speaker for line in grouping.lines}
    lines = []
    for line in grouping.lines:
        cue = heard.get(line.index)
        if line.similarity is None and cue is not None and line.speaker not in grouping.cued and len(centroids) > 1:
            placed = _assign(line.index, cue, centroids, short=False)
            barred = {who.get(k) for pair in (apart or {}) if line.index in pair for k in pair if k != line.index}
            if (
                placed.similarity >= SLIGHT_APART
                and placed.similarity - placed.nearest_similarity >= STRAY_MARGIN
                and placed.speaker not in barred
            ):
                note = (
                    f"no speech of its own heard; placed by its cue's whole time (other cues cut away): "
                    f"{placed.similarity:.2f} like {placed.speaker}, {placed.nearest_similarity:.2f} like "
                    f"{placed.nearest}, the next (a guess)"
                )
                line = replace(placed, note=note)
        lines.append(line)
    return replace(grouping, lines=tuple(lines))


def stray_lines(grouping: Grouping) -> list[int]:
    """The lines the grouping could place nowhere (see STRAY_ALIKE), in order."""
    return [g.index for g in grouping.lines if g.similarity is None or g.similarity < SLIGHT_APART]


def stray_voice(
    grouping: Grouping,
    centroids: dict[str, np.ndarray],
    heard: dict[int, np.ndarray],
    apart: dict[tuple[int, int], str] | None = None,
    alike: float = STRAY_ALIKE,
) -> Grouping:
    """The grouping with the largest set of lines placed nowhere that are one voice of their own (see STRAY_ALIKE)
    made a voice, named after the others, each line placed by ``heard`` (its cues' time embedded) and noted as a
    guess; unchanged when there is none. ``heard``: the lines placed nowhere, those with enough time to embed;
    ``alike``: how alike each two of them must be (STRAY_ALIKE_HEARD for lines heard without subtitles)."""
    from itertools import combinations

    near = {i: e for i, e in heard.items() if all(float(np.dot(e, c)) < SLIGHT_APART for c in centroids.values())}
    order = sorted(near)[:STRAY_MOST]
    together = next(
        (
            group
            for size in range(len(order), 1, -1)
            for group in combinations(order, size)
            if all(float(np.dot(near[a], near[b])) >= alike for a, b in combinations(group, 2))
            and not any(pair in (apart or {}) for pair in combinations(group, 2))
        ),
        None,
    )
    if together is None:
        return grouping
    # Another line placed nowhere that is, by its cue's time, on average as like the voice's lines as STRAY_JOIN and
    # STRAY_MARGIN more like them than like any voice found, is that voice too (a whisper a line apart in level).
    joined = [
        i
        for i in order
        if i not in together
        and not any(tuple(sorted((i, j))) in (apart or {}) for j in together)
        and (alike := float(np.mean([np.dot(near[i], near[j]) for j in together]))) >= STRAY_JOIN
        and alike - max(float(np.dot(near[i], c)) for c in centroids.values()) >= STRAY_MARGIN
    ]
    together = tuple(sorted((*together, *joined)))
    name = next(f"S{k}" for k in range(1, len(grouping.speakers) + 2) if f"S{k}" not in grouping.speakers)
    voices = {**centroids, name: centroid([near[i] for i in together])}
    least = min(float(np.dot(near[a], near[b])) for a, b in combinations(together, 2))
    most = max(float(np.dot(near[i], c)) for i in together for c in centroids.values())
    note = (
        f"placed by its cue's whole time: like no voice found ({most:.2f} at most) but {least:.2f} or more like "
        f"lines {', '.join(map(str, together))}: a voice voice activity hears little of (a whisper, or a voice "
        "under the music), a guess"
    )
    lines = tuple(
        replace(_assign(g.index, near[g.index], voices, short=False), note=note) if g.index in together else g
        for g in grouping.lines
    )
    how = grouping.how + f"; lines {', '.join(map(str, together))}, placed nowhere, are one voice of their own ({name})"
    return replace(grouping, speakers=(*grouping.speakers, name), lines=lines, how=how, cued=(*grouping.cued, name))
