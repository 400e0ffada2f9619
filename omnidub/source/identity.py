"""Whose voice a line is cloned from, checked against the line's own speech.

A line whose own clip cannot be used is voiced from its speaker's clip. That clip was chosen as its speaker's voice
alone, but the speaker is a guess where the original is unlabelled (a short reply, a line spoken over another, two
voices alike), and a clip of a different voice is the one failure a dub must never make silently. So before a line
is given its speaker's clip, the clip is heard against the line's own speech, both ways: the line's speech must be
nearer this clip than any other voice's clip, and as like it as the speaker's own lines in this source are (the
voice check's floor, :class:`omnidub.source.speakers.VoiceCalibration`). Where it is not, or where the grouping is
unsure of the line, the line is voiced from its own speech instead (cleared of every other voice's cue and
speech; padded with its speaker's nearest clean speech where the speaker is known, and labelled `joined`), flagged
for review with why; where it has none to give, it is voiced from nothing rather than from a voice that may be
another character's (unlabelled), or from its speaker's clip, flagged (labelled: the label says who speaks).

A voice with no clean clip at all is given its own speech joined across its lines (clean parts only, each line's one
voice with the rest, labelled `joined`), never no voice. Without subtitles, a line heard whose own clip cannot be
used (most often a piece of a sentence) is voiced from its own speech (its two longest pieces, where the longest is
short) joined with its speaker's nearest clean speech, where it has enough of its own. A line of LINE_FLOOR s or
more whose own clip cannot be used (another voice's cue over part of it) is voiced so too, where OWN_ALONE s of its
own speech is left: its own delivery, not a clip of its voice from elsewhere. An unsure line of a voice in a
reverberant room, left with none of its own speech once what the overlap model hears as two voices is cut (its
echo), is voiced from its own speech with that echo kept (:func:`in_its_room`), rather than from nothing; a sure line
heard of such a voice, left too little, with the echo at the ends of its voice's runs kept where no other voice
speaks near (:func:`_at_its_edges`), rather than from its voice's clip elsewhere.
"""

from __future__ import annotations

import re
from dataclasses import replace

import numpy as np

from omnidub.asr import whisper_language
from omnidub.source.analysis import SENTENCE_GAP, Analysis, runs_on
from omnidub.source.audio import ANALYSIS_RATE
from omnidub.source.clips import (
    FALLBACK_MARGIN,
    HEARD_REACH,
    INSIDE,
    JOIN_GAP,
    Candidate,
    joined_seconds,
    own_edges,
    own_stretches,
    stretch_words,
    voice_problem,
    voices_inside,
    without,
    without_other_voices,
)
from omnidub.source.lines import LINE_FLOOR, LineClip
from omnidub.source.overlap import cut_spans
from omnidub.source.speakers import PLACED

# A line of an unlabelled original grouped with less confidence than this (two groups close), or placed as a guess
# (spoken over another line, or apart from a line of its group), is unsure of its voice.
SURE = 0.9
# A short line (under BOTH_SHORT s of speech) that is two voices at once for this share of it or more (by the overlap
# model) is unsure of its voice: its embedding is of both ("don't worry about it. I", 0.9 s heard as the next voice
# starts, was grouped with that voice surely and cloned from its clip). A longer line's embedding is still mostly
# its own voice, and the overlap model marks most of a reverberant voice's long lines (a stairwell's, 80 %).
BOTH_MOST = 0.5
BOTH_SHORT = 2.0
# A line's own speech of at least this long (OmniVoice distorts under it) may voice it alone.
OWN_ALONE = 1.0
# Own speech of at least this much is worth padding with the speaker's nearest clean speech, up to LINE_FLOOR.
OWN_LEAST = 0.3
# A line heard's own speech reaches at most this far past its first and last words: speech beyond them is in no
# transcript (a whisper straight after the line, which no line heard holds), and its words' times are loose by
# about as much.
WORD_PAD = 0.1
PAD_MOST = 6.0  # seconds a padded clip holds at most
PAD_LINES = 8  # of its speaker's other lines heard, the nearest this many may pad a line heard
# A voice's joined clip: parts of at least JOIN_PART s each, up to JOIN_MOST s in all, at least FALLBACK_FLOOR.
JOIN_PART = 0.4
JOIN_MOST = 6.0
JOIN_LEAST = 1.0
# A part of a voice the whole track's transcript wrote no words for is heard again alone at this RMS (-20 dBFS).
ALONE_LEVEL = 0.1
# Two stretches of one voice are at least this alike where the source gives no calibrated floor.
ALIKE_FLOOR = 0.5
HEARD_ALONE = "its words heard in each part alone, raised to speech level (the whole track gave none), the ASR's guess"
_SPOKEN = re.compile(r"\w")


def embed_parts(analysis: Analysis, encoder, parts) -> np.ndarray | None:
    """The speaker embedding of a clip's parts heard together."""
    gap = np.zeros(int(JOIN_GAP * ANALYSIS_RATE), np.float32)
    pieces = [piece for a, b in parts for piece in (analysis.track.cut(a, b), gap)][:-1]
    found = encoder.embed(np.concatenate(pieces), ANALYSIS_RATE) if pieces else None
    return None if found is None else found[0]


def clip_doubt(
    analysis: Analysis, index: int, clips: dict[str, np.ndarray], clean: np.ndarray | None = None
) -> str | None:
    """Why the speaker's clip may not be line ``index``'s voice, heard against the line's own speech both ways
    (``clips``: each voice's clip embedding): its speech as grouped, and ``clean``, its own speech with every other
    voice's cue and speech cut away (what grouped it may hold a voice that shares its time); None when it is its
    voice, or the line has too little speech to tell."""
    speaker = analysis.speakers[index]
    if speaker not in clips:
        return None
    calibration = analysis.calibration.get(speaker)
    for own, which in ((analysis.embeddings.get(index), "its own speech"), (clean, "its own speech heard alone")):
        if own is None:
            continue
        here = float(np.dot(own, clips[speaker]))
        nearer = nearer_clip(own, clips, speaker)
        if nearer is not None:
            return f"{which} is nearer {nearer[0]}'s clip ({nearer[1]:.2f}) than {speaker}'s ({here:.2f})"
        if calibration is not None and here < calibration.floor:
            return (
                f"{which} is {here:.2f} like {speaker}'s clip, under {calibration.floor:.2f}, the least "
                f"{speaker}'s own lines in this source are like {speaker}"
            )
    return None


def nearer_clip(own: np.ndarray, clips: dict[str, np.ndarray], speaker: str) -> tuple[str, float] | None:
    """The voice whose clip ``own`` is nearest, with how like it, when that is nearer than ``speaker``'s clip."""
    here = float(np.dot(own, clips[speaker]))
    others = {name: float(np.dot(own, c)) for name, c in clips.items() if name != speaker}
    nearest = max(others, key=others.get) if others else None
    return (nearest, others[nearest]) if nearest is not None and others[nearest] > here else None


def _grouped(analysis: Analysis, index: int):
    """How an unlabelled line was grouped (its LineSpeaker), or None."""
    return next((g for g in analysis.grouping.lines if g.index == index), None)


def _lines_in_time(analysis: Analysis, index: int) -> tuple[list, int]:
    """The original's lines in time order, and where line ``index`` is among them."""
    order = sorted(analysis.original.lines, key=lambda line: line.start)
    return order, next(k for k, line in enumerate(order) if line.index == index)


def grouping_doubt(analysis: Analysis, index: int) -> str | None:
    """Why an unlabelled line's voice is unsure (None: it is not, or the original is labelled)."""
    if analysis.grouping is None:
        return None
    line = _grouped(analysis, index)
    if line is None:
        return None
    if "too little speech to embed" in line.note:
        return f"its voice is a guess: {line.note}"
    voiced = analysis.voiced.get(index)
    both = _two_voices_share(analysis, index)
    if both >= BOTH_MOST and voiced is not None and voiced[1] - voiced[0] < BOTH_SHORT:
        return f"its voice is unsure: {both:.0%} of its speech is two voices at once"
    calibration = analysis.calibration.get(line.speaker)
    if PLACED in line.note and line.similarity is None:
        return f"its voice is a guess: {line.note}, with no speech of its own to compare"
    if PLACED in line.note and calibration is not None and line.similarity < calibration.floor:
        # Placed apart from a line it cannot share a voice with, and unlike the voice it was given: the nearest voice
        # is only the least unlike one (a back-channel's own speech, the sentence under it taken away, is little).
        return (
            f"its voice is a guess: {line.note}; {line.similarity:.2f} like {line.speaker}, under "
            f"{calibration.floor:.2f}, the least {line.speaker}'s own lines in this source are like {line.speaker}"
        )
    if line.confidence < SURE and line.nearest is not None:
        return (
            f"its voice is unsure: {line.similarity:.2f} like {line.speaker}, {line.nearest_similarity:.2f} like "
            f"{line.nearest} ({line.confidence:.0%} sure)" + (f"; {line.note}" if "a guess" in line.note else "")
        )
    # Its group may be two voices alike: the group's clip may be the other one's, so only its own speech voices it.
    doubts = analysis.grouping.doubts
    return doubts.get(index) or next(
        (why for j, why in doubts.items() if analysis.speakers.get(j) == line.speaker), None
    )


def run_on(analysis: Analysis, index: int) -> str | None:
    """Without subtitles, why a line heard may be in another voice: its sentence runs on into the line heard next to
    it (or from the one before), grouped with the voice nearest the line after its own. The first ends on no end
    mark, the second starts in lower case, under SENTENCE_GAP apart; one sentence is most often one voice, so one of
    the two may be grouped wrong, and the words cannot tell which (Whisper base heard a Spanish turn's first words,
    "Yo quiero caminar que", spoken over the end of the line before, as a line of that voice). A line whose second
    guess is a third voice was grouped against the neighbour's firmly. None otherwise (docs/source.md has what the
    rule was measured on)."""
    if not analysis.heard_lines or analysis.grouping is None:
        return None
    grouped = _grouped(analysis, index)
    nearest = grouped.nearest if grouped is not None else None
    order, at = _lines_in_time(analysis, index)
    for first, second in zip(order[max(at - 1, 0) : at + 1], order[max(at - 1, 0) + 1 : at + 2]):
        if analysis.speakers[first.index] == analysis.speakers[second.index] or not runs_on(first, second):
            continue
        other, way = (second, "into") if first.index == index else (first, "from")
        if analysis.speakers[other.index] != nearest:
            continue
        return (
            f"its voice is unsure: its sentence runs on {way} line {other.index}, grouped with "
            f"{nearest}, the voice nearest it after its own (one of the two may be in the other's voice)"
        )
    return None


def _two_voices_share(analysis: Analysis, index: int) -> float:
    """The share of the line's speech where the overlap model hears two voices at once."""
    voiced = analysis.voiced.get(index)
    if voiced is None or voiced[1] <= voiced[0]:
        return 0.0
    a, b = voiced
    return sum(max(0.0, min(b, y) - max(a, x)) for x, y in analysis.overlapped) / (b - a)


def grouping_guess(analysis: Analysis, index: int) -> str:
    """How an unlabelled line was placed when its place is a guess, sure or not, or why its group may be two voices
    ("" when neither)."""
    if analysis.grouping is None:
        return ""
    line = _grouped(analysis, index)
    if line is not None and "a guess" in line.note:
        return f"its voice was placed by a rule: {line.note}"
    return analysis.grouping.doubts.get(index, "")


def spoken_over(analysis: Analysis, index: int) -> int | None:
    """The line of another speaker whose cue holds most of this line's (a back-channel spoken over a sentence):
    its own speech is the other voice's too. None when there is none."""
    line = analysis.lines[index]
    for other in analysis.original.lines:
        if other.index == index or analysis.speakers[other.index] == analysis.speakers[index]:
            continue
        shared = min(other.end, line.end) - max(other.start, line.start)
        if shared >= 0.8 * (line.end - line.start) and other.end - other.start > line.end - line.start:
            return other.index
    return None


def own_speech(
    analysis: Analysis, index: int, encoder, kept: dict | None = None
) -> tuple[tuple[float, float], str] | None:
    """The line's own speech with every other voice's cue and speech cut away (the longest piece), one voice by
    the calibrated windows, and its words; None when under OWN_LEAST s of speech is left. ``kept``: what it gave
    each line before (a line's neighbours ask for it again)."""
    if kept is None:
        return _own_speech(analysis, index, encoder)
    if index not in kept:
        kept[index] = _own_speech(analysis, index, encoder)
    return kept[index]


def _own_speech(analysis: Analysis, index: int, encoder) -> tuple[tuple[float, float], str] | None:
    found = _own_speech_pieces(analysis, index, encoder, 1)
    return found[0] if found else None


def _own_speech_pieces(analysis: Analysis, index: int, encoder, most: int) -> list:
    """The ``most`` longest pieces of the line's own speech (see :func:`own_speech`), longest first, with their
    words."""
    voiced = analysis.voiced.get(index)
    if voiced is None or analysis.wordless(index):
        return []
    speaker = analysis.speakers[index]
    found = []
    pieces = _clean_pieces(analysis, index)
    if analysis.heard_lines:
        # The line's own edges first: once a stretch of two voices is cut from its start, the voice before it is
        # too far from what is left to be seen as a neighbour, though the overlap model marks such a stretch short.
        first, last = _within_words(analysis, *own_edges(analysis, encoder, speaker, *voiced)[:2])
        pieces = sorted(
            ((max(a, first), min(b, last)) for a, b in pieces if min(b, last) > max(a, first)),
            key=lambda p: p[0] - p[1],
        )
    for a, b in pieces:
        if analysis.speech.speech_seconds(a, b) < OWN_LEAST:
            break
        if analysis.heard_lines:  # where a line heard ends and the next voice begins is a guess, and it may hold both
            a, b, _ = own_edges(analysis, encoder, speaker, a, b)
            found += without_other_voices(analysis, encoder, speaker, a, b, 0)  # as from every clip
        else:
            found.append((a, b))
    kept = []
    for a, b in sorted(found, key=lambda p: p[0] - p[1]):
        if len(kept) == most:
            break
        piece = _spoken_piece(analysis, index, encoder, a, b)
        if piece is not None:
            kept.append(piece)
    return kept


def _spoken_piece(analysis: Analysis, index: int, encoder, a: float, b: float) -> tuple | None:
    """A piece of the line's own speech and its words, when it holds OWN_LEAST s of speech and is one voice where the
    windows can judge it (1.6 s and more); else None."""
    if analysis.speech.speech_seconds(a, b) < OWN_LEAST:
        return None
    if b - a >= 1.6 and voice_problem(analysis, encoder, analysis.speakers[index], a, b):
        return None
    voiced = analysis.voiced[index]
    whole = a <= voiced[0] + 0.05 and b >= voiced[1] - 0.05
    return (a, b), stretch_words(analysis, index, a, b, whole)[0]


def _within_words(analysis: Analysis, start: float, end: float) -> tuple[float, float]:
    """The span kept to WORD_PAD around the words heard in it (the whole span when none is)."""
    words = analysis.heard(start, end)
    if not words:
        return start, end
    return max(start, start + words[0].start - WORD_PAD), min(end, start + words[-1].end + WORD_PAD)


def _clean_pieces(analysis: Analysis, index: int) -> list[tuple[float, float]]:
    """The line's speech with every other voice's cue and speech cut away, and the stretches two voices speak at
    once: the pieces left, longest first."""
    voiced = analysis.voiced.get(index)
    if voiced is None:
        return []
    speaker = analysis.speakers[index]
    both = cut_spans(analysis)  # two voices at once: its own speech there holds the other voice too
    pieces = [p for a, b in own_stretches(analysis, speaker, *voiced, FALLBACK_MARGIN) for p in without(a, b, both, 0)]
    return sorted(pieces, key=lambda p: p[0] - p[1])


def alone(analysis: Analysis, index: int, encoder) -> np.ndarray | None:
    """The embedding of the longest piece of the line's own speech heard alone (every other voice's cue and speech
    cut away, whatever voice the windows hear in it), or None under OWN_ALONE s."""
    pieces = _clean_pieces(analysis, index)
    if not pieces or pieces[0][1] - pieces[0][0] < OWN_ALONE:
        return None
    return embed_parts(analysis, encoder, [pieces[0]])


def padded(
    analysis: Analysis,
    index: int,
    encoder,
    usable: dict[int, LineClip],
    doubt: str | None,
    pad: bool,
    clips: dict[str, np.ndarray],
    kept: dict | None = None,
    alone_least: float = OWN_ALONE,
    own_parts: list | None = None,
    alike: bool = False,
) -> LineClip | None:
    """The line voiced from its own speech (see :func:`own_speech`; ``own_parts``: its pieces and their words, in
    time order, given instead), padded with its speaker's nearest clean speech (usable own clips of its other lines,
    nearest in time first, each nearer the line's own speech than any other voice's clip is) up to LINE_FLOOR when
    ``pad`` and the line's speech (as grouped, and its own) is nearer its speaker's clip than any other; alone it
    must last ``alone_least``; ``alike``: each padding also at least its speaker's floor like the line's own speech
    (:func:`alike_floor`; a line whose own speech is unlike its speaker's clip may not be its speaker's: the nearest
    voice to a whisper is only the least unlike one). Labelled `joined` when in parts, flagged for review with
    ``doubt`` (None: not flagged). ``kept``: see :func:`own_speech`."""
    found = own_parts if own_parts is not None else [own_speech(analysis, index, encoder, kept)]
    if not found or found[0] is None:
        return None
    speaker = analysis.speakers[index]
    parts, texts, used = [p for p, _ in found], [t for _, t in found], []
    seconds = sum(b - a for a, b in parts)
    middle = (parts[0][0] + parts[-1][1]) / 2
    own = embed_parts(analysis, encoder, parts)
    others = [c for name, c in clips.items() if name != speaker]
    if speaker in clips and any(
        heard is not None and nearer_clip(heard, clips, speaker) for heard in (own, analysis.embeddings.get(index))
    ):
        pad = False  # its speech is nearer another voice's clip: its speaker's other speech may not be its voice
    least = alike_floor(analysis, speaker) if alike else -1.0
    if pad and joined_seconds(parts) < LINE_FLOOR and own is not None:
        mine = sorted(_padding(analysis, index, encoder, usable, kept), key=lambda c: abs((c[1] + c[2]) / 2 - middle))
        for other, start, end, words in mine:
            if joined_seconds(parts) >= LINE_FLOOR:
                break
            if joined_seconds([*parts, (start, end)]) > PAD_MOST:
                continue
            theirs = analysis.embeddings.get(other)
            if theirs is None:
                continue
            near = float(np.dot(own, theirs))
            if near < least or any(float(np.dot(own, c)) >= near for c in others):
                continue  # not plainly the voice of the line's own speech
            parts.append((start, end))
            texts.append(words)
            used.append(other)
    if joined_seconds(parts) < (LINE_FLOOR if used else alone_least):
        return None
    parts, texts = _in_time_order(parts, texts)
    how = f"its own speech ({seconds:.1f} s" + (f" in {len(found)} parts)" if len(found) > 1 else ")")
    if used:
        how += f" joined with {speaker}'s nearest clean speech (line{'s' if len(used) > 1 else ''} "
        how += ", ".join(map(str, used)) + ")"
    return LineClip(
        index,
        speaker,
        parts[0][0],
        parts[-1][1],
        " ".join(texts),
        None,
        ("joined: " if len(parts) > 1 else "") + how,
        tuple(parts) if len(parts) > 1 else (),
        f"{doubt}; voiced from {how}" if doubt else None,
    )


def _heard_pieces(analysis: Analysis, index: int, encoder, kept: dict) -> list:
    """A line heard's own speech in its two longest pieces, in time order, where the longest is under LINE_FLOOR
    and the other lasts JOIN_PART or more (the line's speech either side of a stretch of two voices); otherwise its
    longest piece alone (:func:`own_speech`, kept in ``kept`` as it keeps it), or none."""
    pieces = _own_speech_pieces(analysis, index, encoder, 2)
    kept.setdefault(index, pieces[0] if pieces else None)
    if (
        len(pieces) < 2
        or pieces[0][0][1] - pieces[0][0][0] >= LINE_FLOOR
        or pieces[1][0][1] - pieces[1][0][0] < JOIN_PART
    ):
        return pieces[:1]
    return sorted(pieces)


def _own_pieces(analysis: Analysis, index: int, encoder) -> list:
    """A line's own speech with every other voice's cue and speech cut away, and another voice heard spoken over it,
    in up to two pieces (either side of a back-channel over its middle), each JOIN_PART s or more and one voice where
    the windows can judge it; with their words, in time order. Empty for a line of no known words."""
    voiced = analysis.voiced.get(index)
    if voiced is None or analysis.wordless(index) or _words_unknown(analysis, index):
        return []
    speaker = analysis.speakers[index]
    # Another voice the windows hear spoken over the line as a whole (in no cue) is cut out first: a piece too short
    # for a window of its own cannot show it.
    inside = voices_inside(analysis, encoder, speaker, *voiced)
    pieces = sorted(
        (p for a, b in _clean_pieces(analysis, index) for p in without(a, b, inside, JOIN_PART)),
        key=lambda p: p[0] - p[1],
    )
    found = []
    for a, b in pieces[:2]:
        if analysis.speech.speech_seconds(a, b) < OWN_LEAST or voices_inside(analysis, encoder, speaker, a, b):
            continue
        piece = _spoken_piece(analysis, index, encoder, a, b)
        if piece is not None:
            found.append(piece)
    return sorted(found)


def _words_unknown(analysis: Analysis, index: int) -> bool:
    """Whether no part of the line's speech has known words: a condensed cue (its text shorter than what is said),
    with no ASR model to hear them."""
    return analysis.words is None and index in analysis.condensed


def _long(analysis: Analysis, index: int) -> bool:
    """Whether the line's speech lasts LINE_FLOOR s or more: long enough to be cloned from its own delivery."""
    voiced = analysis.voiced.get(index)
    return voiced is not None and voiced[1] - voiced[0] >= LINE_FLOOR


def _in_time_order(parts: list, texts: list) -> tuple[list, list]:
    """A joined clip's parts and their words, in the order they are heard in the source."""
    order = sorted(range(len(parts)), key=lambda k: parts[k][0])
    return [parts[k] for k in order], [texts[k] for k in order]


def _surely_placed(analysis: Analysis, index: int) -> bool:
    """Whether the line's voice is sure: not spoken over another line, its group neither unsure nor a guess."""
    return (
        spoken_over(analysis, index) is None
        and not grouping_doubt(analysis, index)
        and not grouping_guess(analysis, index)
    )


def _padding(analysis: Analysis, index: int, encoder, usable: dict[int, LineClip], kept: dict | None) -> list[tuple]:
    """The (line, start, end, words) speech a line's own may be padded with: its speaker's usable own clips and,
    without subtitles, the own speech of its speaker's other lines heard whose group is sure (a sentence the ASR
    cut into pieces, each too short for a clip of its own, is padded with its other pieces)."""
    speaker = analysis.speakers[index]
    found = [
        (c.index, c.start, c.end, c.text)
        for c in usable.values()
        if c.speaker == speaker and c.index != index and not c.parts
    ]
    if analysis.heard_lines:
        taken = {c[0] for c in found}
        middle = (analysis.lines[index].start + analysis.lines[index].end) / 2
        theirs = [
            line
            for line in analysis.original.lines
            if line.index != index and line.index not in taken and analysis.speakers[line.index] == speaker
        ]
        # The nearest PAD_LINES only: an episode's far lines are not each cut and heard for one short line.
        for line in sorted(theirs, key=lambda line: abs((line.start + line.end) / 2 - middle))[:PAD_LINES]:
            j = line.index
            if not _surely_placed(analysis, j):
                continue
            piece = own_speech(analysis, j, encoder, kept)
            if piece is not None:
                found.append((j, *piece[0], piece[1]))
    return found


def sentence_rest(
    analysis: Analysis, index: int, encoder, clips: dict[str, np.ndarray], kept: dict | None = None
) -> LineClip | None:
    """A line heard with too little speech of its own left (its edge moved off the voice next to it), voiced from
    the own speech of the lines heard next to it in one run of its voice: each under SENTENCE_GAP from the next, of
    its group, placed surely. That is the rest of the sentence the ASR cut into pieces, nearest first, each not
    nearer another voice's clip than its speaker's. None without subtitles' lines heard, when the line's speech is
    nearer another voice's clip than its speaker's (its speaker's other speech may not be its voice), or under
    OWN_ALONE s."""
    if not analysis.heard_lines:
        return None
    speaker = analysis.speakers[index]
    mine = analysis.embeddings.get(index)
    if speaker in clips and mine is not None and nearer_clip(mine, clips, speaker):
        return None
    order, at = _lines_in_time(analysis, index)
    run = []
    for step in (-1, 1):
        k = at
        while 0 <= k + step < len(order):
            here, there = order[k], order[k + step]
            gap = there.start - here.end if step > 0 else here.start - there.end
            j = there.index
            if analysis.speakers[j] != speaker or gap > SENTENCE_GAP or not _surely_placed(analysis, j):
                break
            run.append((abs(k + step - at), j))
            k += step
    parts, texts, used = [], [], []
    for _, j in sorted(run):
        if joined_seconds(parts) >= LINE_FLOOR:
            break
        found = own_speech(analysis, j, encoder, kept)
        theirs = analysis.embeddings.get(j)
        if found is None or theirs is None or (speaker in clips and nearer_clip(theirs, clips, speaker)):
            continue
        if joined_seconds([*parts, found[0]]) > PAD_MOST:
            continue
        parts.append(found[0])
        texts.append(found[1])
        used.append(j)
    if not parts or joined_seconds(parts) < OWN_ALONE:
        return None
    parts, texts = _in_time_order(parts, texts)
    lines = ", ".join(map(str, sorted(used)))
    how = f"the rest of its sentence, the own speech of line{'s' if len(used) > 1 else ''} {lines} heard next to it"
    how = ("joined: " if len(parts) > 1 else "") + how + " (too little of its own is left off the voice beside it)"
    return LineClip(
        index, speaker, parts[0][0], parts[-1][1], " ".join(texts), None, how, tuple(parts) if len(parts) > 1 else ()
    )


def guarded(
    analysis: Analysis, encoder, line_clips: dict[int, LineClip], chosen: dict[str, Candidate]
) -> dict[int, LineClip]:
    """Each line's clip, where its own cannot be used and its speaker's clip may not be its voice (see the module's
    docstring) made its own speech, or refused with why (``refuse``): the line is then voiced from nothing."""
    clips = {}
    for name, candidate in chosen.items():
        parts = candidate.parts or ((candidate.start, candidate.end),)
        found = embed_parts(analysis, encoder, parts)
        if found is not None:
            clips[name] = found
    usable = {i: c for i, c in line_clips.items() if c.problem is None}
    result = dict(line_clips)
    kept: dict = {}  # each line's own speech, found once
    for index, clip in line_clips.items():
        if clip.problem is None:
            continue
        over = spoken_over(analysis, index)
        unsure = grouping_doubt(analysis, index)
        doubt = unsure or (
            None if over is not None else clip_doubt(analysis, index, clips, alone(analysis, index, encoder))
        )
        if doubt is None:
            guess = grouping_guess(analysis, index)
            if analysis.heard_lines and not guess and over is None:
                # A line heard (no subtitles) is most often a piece of a sentence: its own speech joined with its
                # speaker's nearest clean speech, the rest of that sentence first, voices it nearer than a clip of
                # the same voice from elsewhere.
                # A line whose sentence runs on into another voice's line may be that voice's: neither the rest
                # of a sentence in its own group nor its group's clip may stand in for speech of its own.
                runs = run_on(analysis, index)
                own = padded(
                    analysis,
                    index,
                    encoder,
                    usable,
                    None,
                    pad=True,
                    clips=clips,
                    kept=kept,
                    own_parts=_heard_pieces(analysis, index, encoder, kept),
                )
                if own is None and analysis.speakers[index] in analysis.reverberant:
                    own = _at_its_edges(analysis, index, encoder, usable, clips)
                if own is None and not runs and own_speech(analysis, index, encoder, kept) is None:
                    own = sentence_rest(analysis, index, encoder, clips, kept)
                if own is not None:
                    result[index] = own
                    continue
                if runs and not guess:
                    result[index] = replace(clip, voiceless=f"{runs}, and it has too little speech of its own")
                    continue
            elif not guess and over is None and _long(analysis, index):
                # A line with subtitles (or at a dub's cue) long enough to be cloned from its own delivery, its
                # own clip refused (another voice's cue over part of it): OWN_ALONE s of its own speech or more (the
                # parts either side of a back-channel joined), padded to LINE_FLOOR with its speaker's nearest clean
                # speech, rather than a clip from elsewhere.
                pieces = _own_pieces(analysis, index, encoder)
                own = sum(b - a for (a, b), _ in pieces) >= OWN_ALONE and padded(
                    analysis, index, encoder, usable, None, True, clips, kept, alone_least=LINE_FLOOR, own_parts=pieces
                )
                if own:
                    result[index] = own
                    continue
            if guess:  # placed by a rule, surely: its speaker's clip voices it, flagged
                result[index] = replace(clip, review=guess)
            continue
        own = None
        if over is None:
            # its own speech unlike its speaker's clip: only speech as like its own as one voice is may pad it
            own = padded(
                analysis, index, encoder, usable, doubt, pad=unsure is None, clips=clips, kept=kept, alike=True
            )
            if own is None and analysis.grouping is not None and INSIDE not in (clip.problem or ""):
                own = in_its_room(analysis, index, encoder, usable, doubt, unsure is None, clips)
        if own is not None:
            # unlabelled, its speaker's clip may not be its voice: nothing else may stand in for its own speech
            result[index] = replace(own, voiceless=doubt) if analysis.grouping is not None else own
        elif analysis.grouping is not None:
            # Unlabelled: no speech of its own to voice it, and its voice a guess: voiced from nothing, said.
            why = doubt + (f"; spoken over line {over}, so its own speech holds that voice too" if over else "")
            result[index] = replace(clip, voiceless=why)
        else:  # labelled: the label says who speaks; the speaker's clip voices it, flagged
            result[index] = replace(clip, review=doubt)
    return result


def _at_its_edges(analysis: Analysis, index: int, encoder, usable: dict[int, LineClip], clips) -> LineClip | None:
    """A sure line heard of a voice in a reverberant room, left too little of its own speech once the overlap
    model's marks are cut: voiced from its own speech with the marks at the ends of its voice's runs of speech that
    no other voice speaks near taken as its echo (:meth:`Analysis.edge_echo`), padded as any line heard; None when
    that leaves it too little either. A line heard from the stairwell 0.3 s after the voice before it had stopped was
    marked two voices over all but its last 0.2 s, and was cloned from its voice's clip elsewhere."""
    room = replace(analysis, overlapped=analysis.edge_echo(analysis.speakers[index]))
    kept: dict = {}
    pieces = _heard_pieces(room, index, encoder, kept)
    return padded(room, index, encoder, usable, None, pad=True, clips=clips, kept=kept, own_parts=pieces)


def in_its_room(
    analysis: Analysis,
    index: int,
    encoder,
    usable: dict[int, LineClip],
    doubt: str,
    pad: bool,
    clips: dict[str, np.ndarray],
) -> LineClip | None:
    """An unsure line of a voice in a reverberant room (:attr:`Analysis.reverberant`) left with no speech of its own
    once every stretch the overlap model hears as two voices is cut away: voiced from its own speech with the marks
    over its voice's speech taken as its room's echo (:meth:`Analysis.two_voices`), rather than from nothing; flagged
    with why. None for another voice's line, or when that leaves it too little either. Not asked of a line whose own
    clip another voice is heard over: the marks inside a reverberant voice's speech are its echo and the voices
    spoken over it alike (a back-channel over the stairwell voice's sentence, 0.3 s, was let into one)."""
    speaker = analysis.speakers[index]
    if speaker not in analysis.reverberant:
        return None
    room = replace(analysis, overlapped=analysis.two_voices(speaker))
    why = f"{doubt}; its own speech heard with the overlap model's marks over it taken as {speaker}'s room's echo"
    return padded(room, index, encoder, usable, why, pad=pad, clips=clips, kept={})


def cue_joined_candidate(analysis: Analysis, speaker: str, hear=None) -> Candidate | None:
    """A voice whose speech voice activity hears too little of (a whisper under a loud bed), labelled, or found by its
    cues' time (an unlabelled original, ``Grouping.cued``): its cues' time joined across its lines, every other
    voice's cue and speech cut away (no other voice is left in it), at least JOIN_LEAST s in all, its words the cues'
    in proportion to the time kept; ``hear(start, end)``: the words of a part of a cue the whole track gave none of
    (no subtitles), those lines only. None when too little is left, or when voice activity hears under OWN_LEAST s
    of speech in it. Labelled as what it is."""
    pieces = []
    for line in analysis.original.lines:
        if analysis.speakers[line.index] != speaker or not line.text.strip():
            continue
        if analysis.wordless(line.index) != (hear is not None):
            continue
        for a, b in own_stretches(analysis, speaker, *_words_of_its_own(analysis, line, hear is None), FALLBACK_MARGIN):
            if b - a < JOIN_PART:
                continue
            if hear is not None:
                words = hear(a, b)
            else:
                said = line.text.split()
                first = round(len(said) * (a - line.start) / (line.end - line.start))
                last = round(len(said) * (b - line.start) / (line.end - line.start))
                words = " ".join(said[first:last] or said)
            if words:
                pieces.append((line.index, a, b, words))
    if sum(_heard_seconds(analysis, a, b, hear is None) for _, a, b, _ in pieces) < OWN_LEAST:
        return None  # no speech heard in them at all: cues over silence, or vocals a separator lost
    how = HEARD_ALONE if hear else "its words are the cues' in proportion to the time kept, a guess"
    return _joined(
        speaker,
        pieces,
        lambda which, total, _: (
            f"joined: {speaker}'s cues' time from {which} ({total:.1f} s), other voices cut away: voice activity "
            f"hears too little of {speaker}'s speech for a clip (a whisper, or a voice under a loud bed); {how}"
        ),
    )


def _words_of_its_own(analysis: Analysis, line, words: bool) -> tuple[float, float]:
    """The line's time, less, for a line heard with ``words`` (no subtitles), its last word when another voice's line
    starts within HEARD_REACH after it: Whisper runs the next voice's first word into a whisper's line ("quickly
    bring", "Bring" the next line's first word), and voice activity, hearing none of the whisper, cannot say where
    one ends. The first word is kept: on the scenes a whisper's first word after another voice was its own."""
    start, end = line.start, line.end
    said = analysis.heard(start, end) if words and analysis.heard_lines else None
    if not said or len(said) < 2:
        return start, end
    others = [o for o in analysis.original.lines if analysis.speakers[o.index] != analysis.speakers[line.index]]
    if any(0.0 <= o.start - end < HEARD_REACH for o in others):
        end = start + said[-2].end
    return start, max(end, start)


def _heard_seconds(analysis: Analysis, start: float, end: float, words: bool) -> float:
    """The seconds of speech heard between ``start`` and ``end``: what voice activity hears, or, for a line heard
    with ``words`` (no subtitles), the time of the ASR's words there where that is more (a whisper 2 dB under the bed
    that Whisper writes words for and voice activity hears none of)."""
    found = analysis.speech.speech_seconds(start, end)
    if words and analysis.heard_lines:
        said = analysis.heard(start, end) or ()
        found = max(found, sum(min(w.end, end - start) - max(w.start, 0.0) for w in said))
    return found


def cued_voice(analysis: Analysis, speaker: str) -> bool:
    """Whether the speaker's cues say who speaks in them: labelled, or a voice found by its cues' time."""
    return analysis.grouping is None or speaker in analysis.grouping.cued


def joined_candidate(analysis: Analysis, speaker: str, encoder, why: str) -> Candidate | None:
    """A voice without one clean stretch long enough: its own speech joined across its lines (every other voice's cue
    and speech cut away, each part one voice where windows can judge it, its edges moved off the voice next to it),
    at least JOIN_LEAST s in all; where moving the edges leaves too little, the parts as cut (a voice of short lines
    each overlapped by another keeps a voice); None when it has too little speech of its own."""
    return _joined_own(analysis, speaker, encoder, why, True) or _joined_own(analysis, speaker, encoder, why, False)


def heard_alone_candidate(analysis: Analysis, speaker: str, encoder, asr, why: str) -> Candidate | None:
    """A voice the ASR wrote no words for in the whole track (a whisper, a quiet voice under a bed), so that no part
    of its speech has a transcript: its own speech joined across its lines as :func:`joined_candidate` joins it,
    each part transcribed again alone, raised to speech level (heard alone and loud, Whisper writes words it did not
    in the whole track: 2 of the 3 whispered lines of the scenes). The parts that give words are kept; the clip is
    labelled as heard so, since those words are the ASR's best guess at a voice it could barely follow. None when no
    part gives words."""

    heard: dict[tuple[float, float], str] = {}  # each part is heard once, whichever way its edges were tried

    def hear(a: float, b: float) -> str:
        if (a, b) not in heard:
            samples = analysis.audio.cut(a, b)
            level = float(np.sqrt(np.mean(np.square(samples, dtype=np.float64)))) if samples.size else 0.0
            text = ""
            if level > 0.0:
                loud = np.clip(samples * (ALONE_LEVEL / level), -1.0, 1.0).astype(np.float32)
                said = asr.transcribe(loud, analysis.audio.sample_rate, language=whisper_language(analysis.language))
                text = said.text.strip() if _SPOKEN.search(said.text) else ""
            heard[(a, b)] = text
        return heard[(a, b)]

    return (
        _joined_own(analysis, speaker, encoder, why, True, hear)
        or _joined_own(analysis, speaker, encoder, why, False, hear)
        or (cue_joined_candidate(analysis, speaker, hear) if cued_voice(analysis, speaker) else None)
    )


def _joined_own(analysis: Analysis, speaker: str, encoder, why: str, edges: bool, hear=None) -> Candidate | None:
    """Its own speech joined across its lines; ``hear(start, end)``: the words of a part of a line whose words the
    whole track gave none of (only those lines are joined then, and only their parts that give words)."""
    pieces = []
    for line in analysis.original.lines:
        voiced = analysis.voiced.get(line.index)
        if analysis.speakers[line.index] != speaker or not voiced or spoken_over(analysis, line.index):
            continue
        if analysis.wordless(line.index) != (hear is not None):
            continue
        for x, y in own_stretches(analysis, speaker, *voiced, FALLBACK_MARGIN):
            if edges:  # off a voice next to it, as every clip's edges
                x, y, _ = own_edges(analysis, encoder, speaker, x, y)
            if y - x < JOIN_PART:
                continue
            # Another voice heard spoken over it (a back-channel in no cue) is cut out, as from every clip; a part
            # too short for the windows to dip in is judged whole, with the line's other parts (one_voice).
            for a, b in without_other_voices(analysis, encoder, speaker, x, y, JOIN_PART, dips_only=True):
                if b - a >= 1.6 and voice_problem(analysis, encoder, speaker, a, b):
                    continue
                whole = a <= voiced[0] + 0.05 and b >= voiced[1] - 0.05
                words = hear(a, b) if hear else stretch_words(analysis, line.index, a, b, whole)[0]
                if words:
                    pieces.append((line.index, a, b, words))
    pieces = one_voice(analysis, speaker, encoder, pieces)
    how = HEARD_ALONE if hear else None
    return _joined(
        speaker,
        pieces,
        lambda which, total, count: (
            f"joined: {speaker}'s own speech from {which} ({total:.1f} s in {count} part{'s' if count > 1 else ''})"
            + (f", {how}" if how else "")
            + f", for want of one clean clip: {why}"
        ),
    )


def one_voice(analysis: Analysis, speaker: str, encoder, pieces: list) -> list:
    """The (line, start, end, words) pieces of the lines whose speech is one voice with the line most like the
    others: each line's pieces heard together must be as like that line's as the speaker's own windows are like the
    speaker (the voice check's floor). A line grouped with a voice for speech another voice shares with it (a
    telephone line that the next voice starts over) holds that voice in its own stretches; joined, it would make
    the clip two voices. A line too short to embed is kept (it cannot be told apart)."""
    by_line: dict[int, list] = {}
    for piece in pieces:
        by_line.setdefault(piece[0], []).append(piece)
    if len(by_line) < 2:
        return pieces
    heard = {i: embed_parts(analysis, encoder, [(a, b) for _, a, b, _ in mine]) for i, mine in by_line.items()}
    embedded = [i for i, e in heard.items() if e is not None]
    if len(embedded) < 2:
        return pieces
    # The line most like the others (then the one that gives the most): a stray line is unlike every other.
    seed = max(
        embedded,
        key=lambda i: (
            round(sum(float(np.dot(heard[i], heard[k])) for k in embedded if k != i), 3),
            sum(b - a for _, a, b, _ in by_line[i]),
        ),
    )
    floor = alike_floor(analysis, speaker)
    apart = {i for i in embedded if i != seed and float(np.dot(heard[i], heard[seed])) < floor}
    return [piece for piece in pieces if piece[0] not in apart]


def alike_floor(analysis: Analysis, speaker: str) -> float:
    """How alike two stretches of ``speaker``'s voice are at least: the least its own lines in this source are like
    its clip (its calibration's floor), else ALIKE_FLOOR."""
    calibration = analysis.calibration.get(speaker)
    return calibration.floor if calibration is not None else ALIKE_FLOOR


def _joined(speaker: str, pieces: list, describe) -> Candidate | None:
    """A clip of (line, start, end, words) pieces, the longest first up to JOIN_MOST s, heard in time order; None
    under JOIN_LEAST. ``describe(which lines, seconds, parts)`` labels it."""
    kept, total = [], 0.0
    for piece in sorted(pieces, key=lambda p: p[1] - p[2]):
        if total + piece[2] - piece[1] <= JOIN_MOST:
            kept.append(piece)
            total += piece[2] - piece[1]
    if not kept or joined_seconds([(a, b) for _, a, b, _ in kept]) < JOIN_LEAST:
        return None
    kept.sort(key=lambda p: p[1])
    parts = tuple((a, b) for _, a, b, _ in kept)
    lines = tuple(dict.fromkeys(i for i, *_ in kept))
    which = f"line{'s' if len(lines) > 1 else ''} {', '.join(map(str, lines))}"
    words = " ".join(t for *_, t in kept)
    label = describe(which, total, len(parts))
    return Candidate(speaker, lines, parts[0][0], parts[-1][1], words, None, None, fallback=label, parts=parts)
