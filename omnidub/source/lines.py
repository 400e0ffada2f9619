"""Per-line references: each dubbed line cloned from the original line it translates, or from its speaker's clip.

Everything that needs a model (voice activity, embeddings, ASR) is done once by the extraction, which assesses
every original line's own clip (:class:`LineClip`). Deciding each dubbed line's reference is then a pure function
of the dubbed script and that extraction (:func:`line_references`), cheap enough to run on every render.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np

from omnidub.script import DEFAULT_SPEAKER, Script
from omnidub.source.analysis import Analysis
from omnidub.source.clips import (
    FALLBACK_MARGIN,
    MIN_AGREEMENT,
    inside_problem,
    joined_seconds,
    leans_own,
    own_edges,
    own_stretches,
    said_part,
    spelled,
    stretch_words,
    voice_problem,
    voices_inside,
    without,
    word_agreement,
)
from omnidub.source.match import LineMatch, match_lines

# A line's own clip shorter than this is not used. Measured on the fixtures (tests/data/source/floor.py: clips
# cut from clean lines, GE2E against the other lines' centroids): clips of 1.0 s are placed with their own
# speaker 15 % of the time, 1.25 s 76 %, 1.5 s 98 %, 2.0 s and longer 100 % (median similarity 0.67, 0.76, 0.85,
# 0.88). A voice the encoder cannot place is one OmniVoice's prompt cannot be trusted to carry either, and
# OmniVoice distorts under ~1 s. This is a floor on identity, not on cloning quality, which needs the real
# model to measure; VoiceStudio uses 3 s.
LINE_FLOOR = 2.0
LINE_CEILING = 20.0  # over this, cloning degrades (FACTS: references of 3-10 s work best)
NO_SPEECH = "no speech found in its cue"  # a line clip's problem: nothing of it can voice a line
# A line spoken over in its middle keeps the parts before and after, each at least this long, joined.
MIN_PIECE = 0.8


@dataclass(frozen=True)
class LineClip:
    """An original line's own clip: its speech grown into silence, and why it cannot be used (None: it can)."""

    index: int
    speaker: str
    start: float
    end: float
    text: str
    problem: str | None
    note: str = ""  # what was done to it: another voice's speech cut away
    parts: tuple[tuple[float, float], ...] = ()  # joined: the line's own speech and its speaker's nearest clean speech
    review: str = ""  # why a person should listen to a line voiced from it (or from its speaker's clip)
    # why not even its speaker's clip may voice the line (its voice is a guess): none does when its own clip cannot;
    # on a usable own clip, why only that clip may voice it
    voiceless: str = ""

    @property
    def speech_seconds(self) -> float:
        """How long its span lasts, or its parts together when joined."""
        return sum(b - a for a, b in self.parts or ((self.start, self.end),))


@dataclass(frozen=True)
class LineReference:
    """The reference a dubbed line is cloned from."""

    index: int  # the dubbed line
    speaker: str | None  # whose identity it takes (the original's speaker); None when unknown
    original: tuple[int, ...]  # the original line(s) it matched
    match: str  # how: "index", "overlap", "none" or "several"
    kind: str  # "line" (its own original line's clip), "speaker" (the speaker's clip), "none" (no clip) or
    # "given" (an editor voiced it with the voice the user gave a speaker: no clip of the source)
    start: float | None  # the clip's span in the source, seconds
    end: float | None
    text: str | None  # what the clip says, from the original cue
    sha256: str | None  # content hash of the clip's samples (float32 at the clip rate): key lines by it
    fallback: str | None  # why it is not the line's own clip
    review: str | None = None  # why a person should listen to the line: its voice is a guess or a fallback
    note: str = ""  # what was done to its own clip (another voice's speech cut away)
    parts: tuple[tuple[float, float], ...] = ()  # a joined clip's pieces of the source (else start..end)
    own_only: str = ""  # why its speaker's clip may not be its voice: only its own clip voices it


def assess_line(analysis: Analysis, index: int, encoder, floor: float = LINE_FLOOR) -> LineClip:
    """Whether an original line's own clip can be a reference: long enough, one voice, no other speaker's cue,
    and (with an ASR model) saying its cue's words."""
    line, speaker = analysis.lines[index], analysis.speakers[index]
    span = analysis.spans.get(index)
    if span is None:
        return LineClip(index, speaker, line.start, line.end, line.text, NO_SPEECH)
    start, end = span
    moved = ""

    def clip(problem: str | None) -> LineClip:
        return LineClip(index, speaker, start, end, line.text, problem, moved)

    if analysis.wordless(index):
        return clip("speech the ASR wrote no words for: a clip needs its transcript")

    for other in analysis.original.lines:
        if analysis.speakers[other.index] != speaker and other.start < end and other.end > start:
            problem = f"overlaps line {other.index} of {analysis.speakers[other.index]}"
            return _cut_own(analysis, index, encoder, start, end, floor, problem) or clip(problem)
    start, end, moved = own_edges(analysis, encoder, speaker, start, end)
    if end - start < floor:
        return clip(f"{end - start:.1f} s, shorter than the {floor:g} s floor")
    if end - start > LINE_CEILING:
        return clip(f"{end - start:.1f} s, longer than {LINE_CEILING:g} s")
    inside = voices_inside(analysis, encoder, speaker, start, end)
    if inside:  # another voice spoken over it, no cue saying so: cut out, the parts either side joined
        parts = without(start, end, inside, MIN_PIECE)
        if analysis.words is None and index in analysis.condensed:
            return clip(analysis.condensed[index])
        if joined_seconds(parts) >= floor and all(
            leans_own(analysis, encoder, speaker, *p) and not voice_problem(analysis, encoder, speaker, *p)
            for p in parts
        ):
            cut = ", ".join(f"{a:.2f}-{b:.2f} s" for a, b in inside)
            found = _parts_clip(analysis, index, parts, f"another voice heard spoken over it at {cut}")
            if found is not None:
                return found
        return clip(inside_problem(inside))
    problem = voice_problem(analysis, encoder, speaker, start, end)
    heard = analysis.heard(start, end)
    if problem is None and heard is None:
        problem = analysis.condensed.get(index)
    if problem is None and heard is not None:
        said = " ".join(w.text for w in heard)
        # Edges moved off another voice keep part of the line: it is judged by the part of its words it holds.
        text = said_part(line.text, heard) if moved else line.text
        if word_agreement(text, said, analysis.language) < MIN_AGREEMENT:
            problem = f"the ASR hears other words than its cue's ({said!r})"
        elif heard:
            return LineClip(index, speaker, start, end, spelled(text, heard), None, moved)
    return clip(problem)


def _cut_own(
    analysis: Analysis, index: int, encoder, start: float, end: float, floor: float, why: str
) -> LineClip | None:
    """A line's clip with another voice's cue and speech cut away (its edges moved off that voice as any clip's
    are), still long enough and one voice; the part before and the part after a voice spoken over the middle of it
    joined when neither is long enough alone. Its words are the ASR's; without an ASR model, the cue's words in
    proportion to the time kept (a guess, said in its note; a condensed cue's are not known at all). None when
    nothing usable is left."""
    speaker = analysis.speakers[index]
    if analysis.words is None and index in analysis.condensed:
        return None
    pieces = []
    for a, b in sorted(own_stretches(analysis, speaker, start, end, FALLBACK_MARGIN)[:2]):
        a, b, _ = own_edges(analysis, encoder, speaker, a, b)
        if b - a >= MIN_PIECE:
            pieces.append((a, b))
    if not pieces:
        return None
    longest = max(pieces, key=lambda p: p[1] - p[0])
    parts = [longest] if longest[1] - longest[0] >= floor else pieces
    if joined_seconds(parts) < floor or any(
        voice_problem(analysis, encoder, speaker, a, b) or not leans_own(analysis, encoder, speaker, a, b)
        for a, b in parts
    ):
        return None
    return _parts_clip(analysis, index, parts, why)


def _parts_clip(analysis: Analysis, index: int, parts: list[tuple[float, float]], why: str) -> LineClip | None:
    """A line's clip made of parts of its speech (joined when more than one), its words the ASR's, else the cue's in
    proportion to the time kept; None when an ASR model heard nothing in them."""
    voiced = analysis.voiced[index]
    said, how = [], set()
    for a, b in parts:
        words, known = stretch_words(analysis, index, a, b, a <= voiced[0] + 0.05 and b >= voiced[1] - 0.05)
        said.append(words)
        how.add(known)
    if analysis.words is not None and not any(analysis.heard(a, b) for a, b in parts):
        return None
    cut = " and ".join(f"{a:.2f}-{b:.2f} s" for a, b in parts)
    note = f"{why}: cut to {cut}, {' and '.join(sorted(how))}"
    joined = tuple(parts) if len(parts) > 1 else ()
    speaker = analysis.speakers[index]
    return LineClip(index, speaker, parts[0][0], parts[-1][1], " ".join(said), None, note, joined)


def samples_hash(samples: np.ndarray, sample_rate: int) -> str:
    """The content hash of a clip's samples."""
    digest = hashlib.sha256(f"{sample_rate}:".encode())
    digest.update(np.ascontiguousarray(samples, dtype=np.float32).tobytes())
    return digest.hexdigest()


def line_references(dub: Script, summary) -> tuple[LineReference, ...]:
    """Each dubbed line's reference: its original line's own clip when usable, else its speaker's clip, with the
    reason. ``summary`` is the extraction's :class:`omnidub.source.summary.SourceSummary` (speakers without a
    chosen clip are not in its ``speaker_clips``)."""
    result = []
    for match in match_lines(dub, summary.original):
        speaker, fallback = _speaker_of(match, dub, summary)
        review = None
        if speaker is None:  # an unlabelled dubbed line over no line heard in the original
            speaker, review = _placed(dub, match.index, summary)
        if fallback is None:
            own = summary.line_clips[match.best]
            if own.problem is None:
                result.append(
                    LineReference(
                        match.index,
                        speaker,
                        match.original,
                        match.how,
                        "line",
                        own.start,
                        own.end,
                        own.text,
                        summary.clip_hash(own.start, own.end, own.parts),
                        None,
                        own.review or None,
                        note=own.note,
                        parts=own.parts,
                        own_only=own.voiceless,
                    )
                )
                continue
            fallback = f"line {own.index}'s clip: {own.problem}"
            if own.voiceless:
                why = f"{fallback}; and not {speaker}'s clip either: {own.voiceless}"
                result.append(
                    LineReference(
                        match.index, speaker, match.original, match.how, "none", None, None, None, None, why, why
                    )
                )
                continue
            review = "; ".join(filter(None, (review, own.review))) or None
        chosen = summary.speaker_clips.get(speaker) if speaker else None
        if chosen is None:
            why = f"{fallback}; {speaker} has no clip" if speaker else fallback
            result.append(
                LineReference(
                    match.index, speaker, match.original, match.how, "none", None, None, None, None, why, review
                )
            )
            continue
        if chosen.fallback:
            review = "; ".join(filter(None, (review, f"{speaker}'s clip is not a clean one: {chosen.fallback}")))
        result.append(
            LineReference(
                match.index,
                speaker,
                match.original,
                match.how,
                "speaker",
                chosen.start,
                chosen.end,
                chosen.text,
                chosen.sha256,
                fallback,
                review,
                parts=chosen.parts,
            )
        )
    return tuple(result)


def _placed(dub: Script, index: int, summary) -> tuple[str | None, str | None]:
    """The speaker of a dubbed line no original line was heard under: the speaker of the nearest original line in
    time whose voice has a clip (a guess, to be reviewed); None when there is none."""
    line = next(line for line in dub.lines if line.index == index)
    if line.speaker != DEFAULT_SPEAKER:
        return None, None
    # The nearest line of a voice the source gives a clip, so that the guess can be voiced.
    known = [o for o in summary.original.lines if summary.speakers.get(o.index) in summary.speaker_clips]
    if not known:
        return None, None
    nearest = min(known, key=lambda o: (max(o.start - line.end, line.start - o.end, 0.0), o.start))
    speaker = summary.speakers[nearest.index]
    return speaker, f"no original line was heard under it: placed with {speaker} of line {nearest.index}, its nearest"


def _speaker_of(match: LineMatch, dub: Script, analysis) -> tuple[str | None, str | None]:
    """The speaker a dubbed line takes its identity from, and why it cannot use its own line's clip (if so)."""
    if match.how == "none":
        label = _dub_label(dub, match.index, analysis)
        return label, "matches no original line" + ("" if label else ", and its label names no original speaker")
    if match.how == "several":
        names = {analysis.speakers[i] for i in match.original}
        listed = ", ".join(str(i) for i in match.original)
        speaker = analysis.speakers[match.original[0]] if len(names) == 1 else _dub_label(dub, match.index, analysis)
        return speaker or analysis.speakers[match.original[0]], f"matches several original lines ({listed})"
    return analysis.speakers[match.best], None


def _dub_label(dub: Script, index: int, analysis) -> str | None:
    label = next(line.speaker for line in dub.lines if line.index == index)
    return label if label in analysis.centroids else None
