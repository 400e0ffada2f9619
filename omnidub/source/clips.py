"""Choosing a speaker's reference clip from the source.

A candidate is one of the speaker's lines, or a run of up to three of its consecutive lines when the first is too
short alone. It is refused when another speaker's cue overlaps it or their speech comes within `margin` of its
speech; when a 1.6 s window inside it sounds like another voice; when the ASR hears other words than its cue's;
and when it cannot be brought into the preset's reference window (a longer one is cut at a word by the same
trimmer the fast preset uses). Clips that fit the window come first; after them, as a last resort, one kept whole
up to 10 s (no ASR model, or no pause to cut at; the render trims it if it can) or one of at least 2 s.
Within each tier candidates are ranked by a weighted score: similarity to the speaker's centroid (0.4), speech
fraction (0.2), level over the background (0.2, 30 dB = 1) and agreement of the recognised words with the cue
text (0.2, when an ASR model is available).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from omnidub.asr import Asr, whisper_language
from omnidub.config import VoiceOptions
from omnidub.source.analysis import Analysis
from omnidub.source.overlap import cut_spans
from omnidub.source.speakers import STRAY_WIDEN, WINDOW
from omnidub.source.speech import merged, without
from omnidub.voices.reference import WHOLE_REFERENCE_SECONDS, cut_at_word

# Words the ASR hears beyond a cue's that make the cue condensed rather than a slip of the ASR.
CONDENSED_WORDS = 3
# Below this agreement (1 - WER) the clip does not say its cue's words: a mis-timed cue, or other speech.
MIN_AGREEMENT = 0.5
RUN = 3
FADE = 0.008
WEIGHTS = {"similarity": 0.4, "speech": 0.2, "level": 0.2, "asr": 0.2}
LEVEL_FULL_DB = 30.0
# A speaker without a clean clip takes the longest stretch of its own speech with every other speaker's cue and
# speech (and FALLBACK_MARGIN around it) cut away, with up to FALLBACK_SILENCE of the silence either side: a clip
# of at least FALLBACK_FLOOR (OmniVoice distorts under that) holding FALLBACK_SPEECH of speech. The encoder places
# 1 s clips with their own voice 15 % of the time, so the lines voiced from one are flagged for review.
FALLBACK_MARGIN = 0.05
# A clip's edge within EDGE_REACH of another speaker's speech is moved EDGE_GUARD off it, and on while 0.8 s
# windows from the edge (every 0.1 s, up to 1.2 s in) are not EDGE_MARGIN more like its speaker than like the
# other: on the quick-dialogue films CAM++ gives 0.55-0.84 for a speaker's own 0.8 s windows, and a window
# holding half a second of a reply came out nearer the reply's voice; 0.4 s windows did not tell voices apart.
EDGE_REACH = 0.15
EDGE_GUARD = 0.15
# Lines heard (no subtitles): their word times are loose by up to 0.4 s, so another voice this near an edge is a
# neighbour, and the edge moves HEARD_GUARD in from where it was heard (on the films two turns overlap by 0.3-0.6
# s, voice activity heard a dip inside an overlap, and the change was heard up to 0.2 s early).
HEARD_REACH = 0.3
HEARD_GUARD = 0.6
EDGE_WINDOW = 0.8
# Lines heard: speech at a span's edge shorter than one window, apart from the rest by ISLAND_PAUSE or more of what
# voice activity calls silence, is taken off (a one-word reply, "Yes.", Whisper ran into the next line: too short
# for any window to hear whose voice it is; on the scenes such a 0.4 s "Yes." of another voice opened a speaker's
# clip). What it costs a line that does open with a word and a pause: that word, in the clip only. So it is taken
# off only where other speech lies within ISLAND_NEAR outside it (the "Yes." came 0.13 s after "Ready?"): after a
# silence the stretch opens the line's own turn (a clipped walkie-talkie voice, whose first word voice activity
# hears apart from the rest: two of its 3 s lines lost 0.7-0.8 s so, fell under 2 s and were joined with others).
ISLAND_PAUSE = 0.15
ISLAND_NEAR = 1.0
EDGE_STEP = 0.1
EDGE_DEPTH = 1.2
EDGE_MARGIN = 0.1
# Another voice spoken over a clip (a back-channel, "Mm-hm.", over a sentence: no cue need say so) is heard by
# EDGE_WINDOW windows every INSIDE_STEP across the clip: a window is that voice's when it is not INSIDE_MARGIN more
# like the clip's speaker than like any other voice, and lies INSIDE_DIP or more under the clip's own windows
# (their median). On the scenes (tests/scenes.py) a back-channel at full level over a sentence brought its windows
# (own less the nearest other) to 0.03-0.11, from 0.25-0.41 for the rest of the sentence. The margin alone flagged
# most clean lines; with the dip, 8 of 18 clean lines of the scenes and a dialogue film: laughs and coughs inside
# them, or a voice alike to another, whose cutting costs little: the clip keeps its parts either side, joined.
INSIDE_STEP = 0.2
INSIDE_MARGIN = 0.12
INSIDE_DIP = 0.15
INSIDE_WINDOWS = 4  # fewer windows: no median to dip from, a window must lean to another voice outright
# A voice like none of the cast's (a reverberant "Ya." over a telephone voice) lowers a window's likeness to every
# voice alike, so its margin barely dips; its likeness to the clip's own voice does, by OWN_DIP or more under the
# clip's own windows (their median), its margin left under OWN_DIP_MARGIN. A laugh inside a line lowers the
# likeness to its voice as much, but not its margin: the windows at its edges stay 0.24-0.42 more like the voice.
OWN_DIP = 0.2
OWN_DIP_MARGIN = 0.2
# A back-channel ("Right.", 0.3-0.5 s) over a sentence, or the last words of a turn the line starts under, fills too
# little of an EDGE_WINDOW window to move it; a window of SHORT_WINDOW every SHORT_STEP it fills does. Such a window
# is another voice's when its likeness to the clip's voice lies SHORT_DIP or more under the clip's own short windows
# (their median) and under SHORT_LIKE; it is cut out SHORT_GUARD wider each side (the voice may run past it). On the
# held-out cast (tests/scenes.py, cast="other", seeds 0-2, no subtitles) 8 of the 12 references of the dub's lines
# holding another voice had such a window (0.04-0.36 where the rest of the clip sat at 0.6-0.8), and 2 of 40 clean
# references; under a dip of 0.25, 14 clean ones and no more of the others.
SHORT_WINDOW = 0.5
SHORT_STEP = 0.05
SHORT_DIP = 0.3
SHORT_LIKE = 0.5
SHORT_GUARD = 0.1
SHORT_LONGEST = 1.2
FALLBACK_SILENCE = 0.3
FALLBACK_SPEECH = 0.75  # a one-word reply ("Great.", 0.5 s) is too little to clone from
FALLBACK_FLOOR = 1.0
# A joined clip (a voice's speech from several lines, each part clean) leaves this much silence between its parts.
JOIN_GAP = 0.2


@dataclass(frozen=True)
class ClipOptions:
    """How clips are chosen: the preset's window, the margin other speakers' cues must keep, how many to report."""

    voice: VoiceOptions = field(default_factory=VoiceOptions)
    margin: float = 0.1  # silence kept between a clip and another speaker's speech
    run_gap: float = 1.0  # consecutive lines of one speaker closer than this may form one clip
    top: int = 3
    # A speaker none of whose clips fits the window takes its best one down to this length (the per-line floor,
    # where GE2E still places every clip of the fixtures with its own voice) rather than none.
    shortest: float = 2.0

    @property
    def window(self) -> tuple[float, float]:
        if self.voice.reference_seconds > 0:
            return self.voice.reference_window
        return WHOLE_REFERENCE_SECONDS * 0.75, WHOLE_REFERENCE_SECONDS


@dataclass(frozen=True)
class Scores:
    similarity: float  # the clip's embedding against the speaker's centroid
    speech: float  # share of the clip voice activity calls speech
    level_db: float  # speech level over the background near the clip
    asr: float | None  # 1 - WER of the recognised words against the clip's text; None without an ASR model
    total: float


@dataclass(frozen=True)
class Candidate:
    speaker: str
    lines: tuple[int, ...]  # original lines the clip comes from
    start: float  # source seconds
    end: float
    text: str  # the words said in the clip, from the original cue(s)
    scores: Scores | None
    problem: str | None  # why it cannot be used; None when it can
    note: str = ""
    fallback: str = ""  # not a clean clip: what it is and why (its lines are flagged for review)
    parts: tuple[tuple[float, float], ...] = ()  # a joined clip: its pieces of the source, in order (else one span)

    @property
    def seconds(self) -> float:
        return round(joined_seconds(self.parts) if self.parts else self.end - self.start, 3)


def clip_key(start: float, end: float, parts=()) -> tuple:
    """What a clip's samples are known by: its span of the source, or its parts when joined."""
    return tuple((float(a), float(b)) for a, b in parts) if parts else (start, end)


def joined_seconds(parts) -> float:
    """How long a joined clip lasts: its parts and the silence between them."""
    return sum(b - a for a, b in parts) + JOIN_GAP * (len(parts) - 1)


def voice_problem(analysis: Analysis, encoder, speaker: str, start: float, end: float) -> str | None:
    """Why the source between `start` and `end` is not `speaker` alone: a window of its speech is not clearly
    closer to the speaker than to any other, or less like the speaker than the speaker's own lines in this source
    ever are (:class:`omnidub.source.speakers.VoiceCalibration`)."""
    own = analysis.centroids.get(speaker)
    if own is None:
        return f"no line of {speaker} has enough speech to know the voice"
    windows = analysis.speech_windows(encoder, start, end)
    if not windows:
        return "too little speech to check whose voice it is"
    calibration = analysis.calibration[speaker]
    for offset, embedding in windows:
        mine = float(np.dot(embedding, own))
        others = {name: float(np.dot(embedding, c)) for name, c in analysis.centroids.items() if name != speaker}
        problem = calibration.problem(mine, others, speaker)
        if problem:
            at = start + offset
            return f"another voice at {at:.1f}-{min(at + WINDOW, end):.1f} s: {problem}"
    return None


def isolation_problem(analysis: Analysis, speaker: str, start: float, end: float, margin: float) -> str | None:
    """Why the span is not clear of other speakers: their cue overlaps it, or less than `margin` of silence lies
    between its speech and theirs (speech, not cue times: subtitle cues often follow each other two frames apart
    while the voices do not)."""
    own = analysis.speech.speech_hull(start, end) or (start, end)
    for line in analysis.original.lines:
        if analysis.speakers[line.index] == speaker:
            continue
        if line.start < end and line.end > start:
            return f"overlaps line {line.index} of {analysis.speakers[line.index]}"
        a, b = analysis.voiced.get(line.index) or (line.start, line.end)
        if a < own[1] + margin and b > own[0] - margin:
            return f"within {margin:g} s of the speech of line {line.index} of {analysis.speakers[line.index]}"
    return None


def own_edges(analysis: Analysis, encoder, speaker: str, start: float, end: float) -> tuple[float, float, str]:
    """The span with its edges moved off the voices next to it: an edge within EDGE_REACH of another speaker's
    speech moves to EDGE_GUARD off it (a reply 0.05 s after a line, or a line's word times loose by as much, leaves
    a tenth of a second of the other voice inside that 1.6 s windows cannot hear; lines heard: HEARD_GUARD in),
    and further while short windows from that edge sound more like that speaker than like this one (a reply heard
    as part of the line); lines heard, then, lose a short stretch of speech left at an edge apart from the rest (see
    ISLAND_PAUSE). Returns the span and what was done ("" when nothing)."""
    done = []
    for side in ("start", "end"):
        edge = start if side == "start" else end
        near = _neighbour(analysis, speaker, edge, side)
        if near is None:
            if not analysis.heard_lines:
                continue
            # A one-word reply Whisper ran into this line is no line of its own, so no neighbour: the edge's short
            # windows are heard against every other voice.
            cut = _other_voice_depth(analysis, encoder, speaker, None, start, end, side)
            what = f"{side} moved {cut:.2f} s in: another voice heard at it"
        else:
            other, gap = near
            depth = _other_voice_depth(analysis, encoder, speaker, other, start, end, side)
            # Lines heard (no subtitles): where one voice ends and the next begins is a guess (word times, the
            # quietest moment), and they may overlap.
            cut = (HEARD_GUARD if analysis.heard_lines else max(EDGE_GUARD - gap, 0.0)) + depth
            what = f"{side} moved {cut:.2f} s off {other}'s speech" + (" (heard in it)" if depth else "")
        if cut <= 0:
            continue
        if side == "start":
            start = round(min(start + cut, end), 3)
        else:
            end = round(max(end - cut, start), 3)
        done.append(what)
    if analysis.heard_lines:  # after those moves: what they leave of another voice's word
        for side in ("start", "end"):
            cut = _edge_island(analysis, start, end, side)
            if cut > 0:
                start, end = (round(start + cut, 3), end) if side == "start" else (start, round(end - cut, 3))
                done.append(f"{side} moved {cut:.2f} s in: a short stretch of speech apart from the rest taken off")
    return start, end, "; ".join(done)


def _edge_island(analysis: Analysis, start: float, end: float, side: str) -> float:
    """How far in from the span's ``side`` a short stretch of speech at that edge ends, when it is apart from the
    rest by ISLAND_PAUSE or more (see there); 0 when there is none."""
    regions = [(max(a, start), min(b, end)) for a, b in analysis.speech.regions if a < end and b > start]
    if len(regions) < 2:
        return 0.0
    if side == "end":
        regions = [(end - b + start, end - a + start) for a, b in reversed(regions)]  # mirrored: the edge first
    (a, b), (c, _) = regions[0], regions[1]
    if b - a >= EDGE_WINDOW or c - b < ISLAND_PAUSE:
        return 0.0
    # A reply run into this line follows (or precedes) other speech closely, or runs on from it across the span's
    # edge (one stretch of speech to voice activity); after a silence it opens a turn.
    edge = a if side == "start" else end - (a - start)  # the island's outer edge, in the source's time
    if side == "start":
        near = [max(0.0, edge - y) for x, y in analysis.speech.regions if x < start - 1e-6]
    else:
        near = [max(0.0, x - edge) for x, y in analysis.speech.regions if y > end + 1e-6]
    if not near or min(near) >= ISLAND_NEAR:
        return 0.0
    return round(c - start, 3)


def _neighbour(analysis: Analysis, speaker: str, edge: float, side: str) -> tuple[str, float] | None:
    """The other speaker whose speech lies nearest the span's edge, within EDGE_REACH outside it (HEARD_REACH for
    lines heard), or across it, and the silence between; None when there is none."""
    best = None
    reach = HEARD_REACH if analysis.heard_lines else EDGE_REACH
    mine = [o for o in analysis.original.lines if analysis.speakers[o.index] == speaker]
    for line in analysis.original.lines:
        other = analysis.speakers[line.index]
        voiced = _other_speech(analysis, line, mine) if other != speaker else None
        if not voiced:
            continue
        gap = edge - voiced[1] if side == "start" else voiced[0] - edge
        inside = voiced[0] < edge < voiced[1]
        if (-reach < gap < reach or inside) and (best is None or gap < best[1]):
            best = (other, max(gap, 0.0))
    return best


def _other_voice_depth(
    analysis: Analysis, encoder, speaker: str, other: str | None, start: float, end: float, side: str
) -> float:
    """How far from the span's edge short windows sound like ``other`` (None: any other voice) rather than
    ``speaker``: 0 when the edge's window is clearly the speaker's; else the depth of the first window that is, plus
    a third of a window (what it may still hold of the other voice). The whole span when none is."""
    own = analysis.centroids.get(speaker)
    names = [other] if other is not None else [name for name in analysis.centroids if name != speaker]
    theirs = [analysis.centroids[name] for name in names if name in analysis.centroids]
    if own is None or not theirs or end - start < EDGE_WINDOW:
        return 0.0
    depth = 0.0
    while depth + EDGE_WINDOW <= min(EDGE_DEPTH, end - start) + 1e-6:
        a = start + depth if side == "start" else end - depth - EDGE_WINDOW
        found = encoder.embed(analysis.track.cut(a, a + EDGE_WINDOW), analysis.track.sample_rate)
        if (
            found is not None
            and float(np.dot(found[0], own)) - max(float(np.dot(found[0], c)) for c in theirs) >= EDGE_MARGIN
        ):
            return 0.0 if depth == 0 else round(depth + EDGE_WINDOW / 3, 3)
        depth += EDGE_STEP
    return round(depth + EDGE_WINDOW / 3, 3) if depth else 0.0


def voices_inside(
    analysis: Analysis, encoder, speaker: str, start: float, end: float, dips_only: bool = False
) -> list[tuple[float, float]]:
    """Where another voice is heard spoken over the span: the windows that hold it (see INSIDE_DIP and OWN_DIP), and
    where the overlap model hears two voices at once (a back-channel over a sentence, which no window hears), merged;
    empty when none is (or there is no other voice to hear). ``dips_only``: a span of too few windows to dip from the
    median is not judged by its windows (whether a short span is its voice at all is judged whole elsewhere)."""
    own = analysis.centroids.get(speaker)
    theirs = [c for name, c in analysis.centroids.items() if name != speaker]
    if own is None or not theirs:
        return []
    both = [(max(a, start), min(b, end)) for a, b in cut_spans(analysis) if a < end and b > start]
    return _merged(_windows_inside(analysis, encoder, own, theirs, start, end, dips_only) + both, end)


def _windows_inside(
    analysis: Analysis, encoder, own, theirs, start: float, end: float, dips_only: bool = False
) -> list[tuple[float, float]]:
    if end - start < EDGE_WINDOW + INSIDE_STEP:
        return []
    # On one grid for the whole source: a line's own clip and a speaker clip holding it hear the same windows.
    starts = _grid(start, end, EDGE_WINDOW, INSIDE_STEP)
    found = analysis.windows_at(encoder, starts, EDGE_WINDOW)
    stack = np.stack(theirs)
    heard = [(a, float(np.dot(e, own)), float(np.max(stack @ e))) for a, e in zip(starts, found) if e is not None]
    if not heard:
        return []
    if dips_only and len(heard) < INSIDE_WINDOWS:
        return []
    usual = float(np.median([mine - other for _, mine, other in heard]))
    alike = float(np.median([mine for _, mine, _ in heard]))
    return [
        (a, a + EDGE_WINDOW)
        for a, mine, other in heard
        if (mine - other < INSIDE_MARGIN and usual - (mine - other) >= INSIDE_DIP)
        or (len(heard) < INSIDE_WINDOWS and mine < other)
        or (len(heard) >= INSIDE_WINDOWS and alike - mine >= OWN_DIP and mine - other < OWN_DIP_MARGIN)
    ] + _short_dips(analysis, encoder, own, start, end)


def _short_dips(analysis: Analysis, encoder, own, start: float, end: float) -> list[tuple[float, float]]:
    """The SHORT_WINDOW windows of the span that dip from its own (see SHORT_DIP)."""
    if end - start < 3 * SHORT_WINDOW:  # too few windows to dip from
        return []
    starts = _grid(start, end, SHORT_WINDOW, SHORT_STEP)
    heard = [
        (a, float(np.dot(e, own)))
        for a, e in zip(starts, analysis.windows_at(encoder, starts, SHORT_WINDOW))
        if e is not None
    ]
    if not heard:
        return []
    usual = float(np.median([mine for _, mine in heard]))
    dips = merged([(a, a + SHORT_WINDOW) for a, mine in heard if usual - mine >= SHORT_DIP and mine < SHORT_LIKE])
    # A back-channel or a turn's last words are short; a longer dip is the voice itself changing (a laugh, a word
    # said otherwise), which windows of EDGE_WINDOW judge.
    return [(max(start, a - SHORT_GUARD), b + SHORT_GUARD) for a, b in dips if b - a <= SHORT_LONGEST]


def _grid(start: float, end: float, seconds: float, step: float) -> list[float]:
    """The starts of the windows of ``seconds`` inside start..end on one grid of ``step`` for the whole source (a
    line's own clip and a speaker clip holding it hear the same windows, computed once)."""
    first = np.ceil(start / step - 1e-6) * step
    return [round(float(a), 3) for a in np.arange(first, end - seconds + 1e-6, step)]


def _merged(spans: list[tuple[float, float]], end: float) -> list[tuple[float, float]]:
    return [(round(a, 3), round(min(b, end), 3)) for a, b in merged(spans)]


def leans_own(analysis: Analysis, encoder, speaker: str, start: float, end: float) -> bool:
    """Whether the span, heard whole, is INSIDE_MARGIN more like its speaker than like any other voice: what each
    part left once another voice is cut out of a clip must be (the windows place that voice only to within one)."""
    own = analysis.centroids.get(speaker)
    found = encoder.embed(analysis.track.cut(start, end), analysis.track.sample_rate)
    if own is None or found is None:
        return False
    others = [float(np.dot(found[0], c)) for name, c in analysis.centroids.items() if name != speaker]
    return float(np.dot(found[0], own)) - max(others, default=-1.0) >= INSIDE_MARGIN


def without_other_voices(
    analysis: Analysis, encoder, speaker: str, start: float, end: float, least: float, dips_only: bool = False
) -> list[tuple[float, float]]:
    """The parts of start..end left once another voice heard spoken over it is cut out (see :func:`voices_inside`),
    each at least ``least`` long; when anything was cut, only the parts that lean to ``speaker`` (the windows place
    the other voice only to within one)."""
    inside = voices_inside(analysis, encoder, speaker, start, end, dips_only)
    return [
        p
        for p in without(start, end, inside, least)
        if p[1] > p[0] and (not inside or leans_own(analysis, encoder, speaker, *p))
    ]


def own_stretches(
    analysis: Analysis, speaker: str, start: float, end: float, margin: float
) -> list[tuple[float, float]]:
    """The parts of ``start``..``end`` left once every other speaker's cue and speech (with ``margin`` around it)
    is cut away, longest first."""
    pieces = [(start, end)]
    mine = [o for o in analysis.original.lines if analysis.speakers[o.index] == speaker]
    for line in analysis.original.lines:
        if analysis.speakers[line.index] == speaker:
            continue
        taken = [(line.start, line.end)]
        voiced = _other_speech(analysis, line, mine)
        if voiced:
            taken.append((voiced[0] - margin, voiced[1] + margin))
        for a, b in taken:
            pieces = [p for x, y in pieces for p in ((x, min(y, a)), (max(x, b), y)) if p[1] - p[0] > 1e-3]
    return sorted(((round(a, 3), round(b, 3)) for a, b in pieces), key=lambda p: p[0] - p[1])


def _other_speech(analysis: Analysis, line, mine: list) -> tuple[float, float] | None:
    """Where another speaker's line speaks, as far as it can be told from ``mine`` (this speaker's lines): speech
    let run past its cue into one of this speaker's cues is this speaker's there (voice activity runs two voices
    that overlap into one region), so the cue bounds it. A line heard whose words voice activity heard no speech
    under (a whisper) speaks over its words' time widened as :func:`_words_time` says."""
    voiced = analysis.voiced.get(line.index)
    if not voiced and analysis.heard_lines:
        voiced = _words_time(analysis, line)
    if not voiced:
        return None
    low, high = voiced
    for own in mine:
        if high > line.end and own.start < high and own.end > line.end:
            high = max(line.end, own.start)
        if low < line.start and own.end > low and own.start < line.start:
            low = min(line.start, own.end)
    return low, high


def _words_time(analysis: Analysis, line) -> tuple[float, float]:
    """A line heard with no speech voice activity can hear (a whisper under a bed): its words' time and up to
    STRAY_WIDEN either side that no other line holds. Whisper times a whisper's words shorter than it is said: on
    the scenes a whisper heard at 61.74-62.00 s was said until 62.69 s, and the next line's clip, grown into what
    voice activity called silence, opened on its last 0.25 s."""
    others = [o for o in analysis.original.lines if o.index != line.index]
    before = max((o.end for o in others if o.end <= line.start), default=0.0)
    after = min((o.start for o in others if o.start >= line.end), default=analysis.track.seconds)
    return max(line.start - STRAY_WIDEN, before), min(line.end + STRAY_WIDEN, after)


def fallback_candidate(
    analysis: Analysis, speaker: str, encoder, why: str, floor: float = FALLBACK_FLOOR
) -> Candidate | None:
    """The best clip a speaker without a clean one has (``why``: what refused the clean ones): the longest
    stretch of one of its lines' speech with the other speakers' cues and speech cut away, at least ``floor`` s,
    one voice by the calibrated windows; None when the speaker has no such speech."""
    found = []
    for line in analysis.original.lines:
        voiced = analysis.voiced.get(line.index)
        if analysis.speakers[line.index] != speaker or not voiced or analysis.wordless(line.index):
            continue
        # Its speech with up to FALLBACK_SILENCE of the silence either side, as far as nobody else speaks there and
        # no other line's speech begins (a reply of its group may be a guess: "Sí." before a whisper).
        low, high = max(0.0, voiced[0] - FALLBACK_SILENCE), min(analysis.track.seconds, voiced[1] + FALLBACK_SILENCE)
        for other, theirs in analysis.voiced.items():
            if other == line.index or not theirs:
                continue
            if theirs[1] <= voiced[0] + FALLBACK_MARGIN:
                low = max(low, min(theirs[1], voiced[0]))
            elif theirs[0] >= voiced[1] - FALLBACK_MARGIN:
                high = min(high, max(theirs[0], voiced[1]))
        span = (low, high)
        for a, b in own_stretches(analysis, speaker, *span, FALLBACK_MARGIN):
            if b - a >= floor and analysis.speech.speech_seconds(a, b) >= FALLBACK_SPEECH:
                found.append((line.index, a, round(min(b, a + WHOLE_REFERENCE_SECONDS), 3)))
    for index, start, end in sorted(found, key=lambda f: f[1] - f[2]):
        start, end, _ = own_edges(analysis, encoder, speaker, start, end)
        if end - start < floor or voice_problem(analysis, encoder, speaker, start, end):
            continue
        if voices_inside(analysis, encoder, speaker, start, end):
            continue
        voiced = analysis.voiced[index]
        whole = start <= voiced[0] + 0.05 and end >= voiced[1] - 0.05
        text, how = stretch_words(analysis, index, start, end, whole)
        cut = "its whole speech" if whole else f"its speech at {start:.2f}-{end:.2f} s, other voices cut away"
        label = f"line {index}: {cut} ({end - start:.1f} s; {how}), for want of a clean clip: {why}"
        scores = _scores(analysis, encoder, speaker, start, end, None)
        return Candidate(speaker, (index,), start, end, text, scores, None, fallback=label)
    return None


def stretch_words(analysis: Analysis, index: int, start: float, end: float, whole: bool) -> tuple[str, str]:
    """The words said in part of a line's speech, and how they are known: heard by the ASR, the cue's (the
    whole speech), or the cue's words in proportion to the time kept (a guess, said so)."""
    cue = analysis.lines[index].text
    heard = analysis.heard(start, end)
    if heard:
        return spelled(cue, heard) if whole else " ".join(w.text for w in heard), "the words as heard"
    if whole:
        return cue, "the cue's words"
    a, b = analysis.voiced[index]
    start, end = max(start, a), min(end, b)
    words = cue.split()
    first = round(len(words) * (start - a) / (b - a))
    last = round(len(words) * (end - a) / (b - a))
    kept = words[first:last] or words
    return " ".join(kept), "the cue's words in proportion to the time kept, a guess"


def clip_samples(analysis: Analysis, start: float, end: float, parts=()) -> np.ndarray:
    """The clip's samples at the clip rate, with short fades so it starts and ends without a click; a joined clip's
    parts each faded, JOIN_GAP of silence between them."""
    if parts:
        gap = np.zeros(int(JOIN_GAP * analysis.audio.sample_rate), np.float32)
        pieces = [piece for a, b in parts for piece in (clip_samples(analysis, a, b), gap)]
        return np.concatenate(pieces[:-1])
    clip = analysis.audio.cut(start, end).copy()
    n = min(int(FADE * analysis.audio.sample_rate), clip.size // 2)
    if n:
        ramp = np.sin(np.linspace(0, np.pi / 2, n, dtype=np.float32))
        clip[:n] *= ramp
        clip[-n:] *= ramp[::-1]
    return clip


def speaker_candidates(
    analysis: Analysis, speaker: str, encoder, asr: Asr | None, options: ClipOptions
) -> list[Candidate]:
    """Every candidate clip of a speaker, usable ones first, best first."""
    found = [
        _evaluate(analysis, speaker, group, encoder, asr, options) for group in _groups(analysis, speaker, options)
    ]
    # Clips inside the window come before ones kept whole for want of an ASR model, then the best score.
    low, high = options.window
    return sorted(
        found,
        key=lambda c: (
            c.problem is not None,
            not low - 1e-6 <= c.seconds <= high + 1e-6,
            -(c.scores.total if c.scores else 0.0),
            c.start,
        ),
    )


def _groups(analysis: Analysis, speaker: str, options: ClipOptions) -> list[tuple[int, ...]]:
    mine = sorted(
        (line for line in analysis.original.lines if analysis.speakers[line.index] == speaker),
        key=lambda line: line.start,
    )
    mine = [line for line in mine if not analysis.wordless(line.index)]
    low = options.window[0]
    groups = []
    for k, line in enumerate(mine):
        groups.append((line.index,))
        if analysis.spans[line.index] and _span_seconds(analysis, (line.index,)) >= low:
            continue
        run = [line]
        for following in mine[k + 1 : k + RUN]:
            between = [
                o
                for o in analysis.original.lines
                if analysis.speakers[o.index] != speaker and o.end > run[-1].start and o.start < following.end
            ]
            if between or following.start - run[-1].end > options.run_gap or not analysis.spans[following.index]:
                break
            run.append(following)
            groups.append(tuple(o.index for o in run))
            if _span_seconds(analysis, groups[-1]) >= low:
                break
    return groups


def _span_seconds(analysis: Analysis, lines: tuple[int, ...]) -> float:
    spans = [analysis.spans[i] for i in lines]
    return spans[-1][1] - spans[0][0] if all(spans) else 0.0


def _evaluate(
    analysis: Analysis, speaker: str, lines: tuple[int, ...], encoder, asr: Asr | None, options: ClipOptions
) -> Candidate:
    text = " ".join(analysis.lines[i].text for i in lines)
    spans = [analysis.spans[i] for i in lines]
    if not all(spans):
        return Candidate(
            speaker,
            lines,
            analysis.lines[lines[0]].start,
            analysis.lines[lines[-1]].end,
            text,
            None,
            "no speech found in its cue",
        )
    start, end = spans[0][0], spans[-1][1]

    def refused(problem: str, note: str = "") -> Candidate:
        return Candidate(speaker, lines, start, end, text, None, problem, note)

    problem = isolation_problem(analysis, speaker, start, end, options.margin)
    if problem:
        return refused(problem)
    start, end, note = own_edges(analysis, encoder, speaker, start, end)
    moved = bool(note)
    low, high = options.window
    if end - start < low:
        if end - start < options.shortest:
            return refused(f"{end - start:.1f} s of speech; a clip needs {low:g}-{high:g} s")
        note = "; ".join(
            filter(None, (note, f"shorter than the preset's {low:g}-{high:g} s; used only when no clip fits it"))
        )
    if end - start > high:
        cut = None
        if asr is not None:
            cut = cut_at_word(
                analysis.audio.cut(start, end),
                analysis.audio.sample_rate,
                text,
                analysis.heard(start, end),
                language=analysis.language,
                options=options.voice,
                asr=asr,
            )
        if cut is not None:
            note = "; ".join(filter(None, (note, f"cut at {cut.seconds:.2f} s after {cut.text.split()[-1]!r}")))
            end, text = round(start + cut.seconds, 3), cut.text
        else:
            why = (
                "no ASR model to cut it at a word"
                if asr is None
                else f"no pause at a word of its cue inside {low:g}-{high:g} s"
            )
            if end - start > WHOLE_REFERENCE_SECONDS:
                return refused(f"{end - start:.1f} s, and {why}")
            note = "; ".join(
                filter(None, (note, f"kept whole ({end - start:.1f} s): {why}; used only when no clip fits the window"))
            )
    problem = voice_problem(analysis, encoder, speaker, start, end)
    if problem:
        return refused(problem, note)
    inside = voices_inside(analysis, encoder, speaker, start, end)
    if inside:
        return refused(inside_problem(inside), note)
    heard = analysis.heard(start, end)
    if heard is None:
        squeezed = next((analysis.condensed[i] for i in lines if i in analysis.condensed), None)
        if squeezed:
            return refused(squeezed, note)
    if heard and moved:
        text = said_part(text, heard)
    agreement = None if heard is None else word_agreement(text, " ".join(w.text for w in heard), analysis.language)
    if agreement is not None and agreement < MIN_AGREEMENT:
        return refused(f"the ASR hears other words than its cue's ({' '.join(w.text for w in heard)!r})", note)
    if heard:
        text = spelled(text, heard)
    return Candidate(
        speaker, lines, start, end, text, _scores(analysis, encoder, speaker, start, end, agreement), None, note
    )


INSIDE = "another voice heard spoken over it"


def inside_problem(inside: list[tuple[float, float]]) -> str:
    where = ", ".join(f"{a:.1f}-{b:.1f} s" for a, b in inside)
    return f"{INSIDE} at {where} (no cue says so)"


def _scores(analysis: Analysis, encoder, speaker: str, start: float, end: float, agreement: float | None) -> Scores:
    found = encoder.embed(analysis.track.cut(start, end), analysis.track.sample_rate)
    similarity = float(np.dot(found[0], analysis.centroids[speaker])) if found else 0.0
    speech = analysis.speech.speech_fraction(start, end)
    level = analysis.speech.level_over_background(start, end)
    parts = {
        "similarity": max(similarity, 0.0),
        "speech": speech,
        "level": min(max(level / LEVEL_FULL_DB, 0.0), 1.0),
        "asr": agreement,
    }
    used = {k: v for k, v in parts.items() if v is not None}
    total = sum(WEIGHTS[k] * v for k, v in used.items()) / sum(WEIGHTS[k] for k in used)
    return Scores(
        round(similarity, 3),
        round(speech, 3),
        round(level, 1),
        None if agreement is None else round(agreement, 3),
        round(total, 3),
    )


def word_agreement(text: str, heard: str, language: str | None) -> float:
    """1 - WER of what was heard against the text (normalised as Whisper's evaluation does), floored at 0."""
    import jiwer

    if whisper_language(language) in (None, "en"):
        from whisper_normalizer.english import EnglishTextNormalizer as Normalizer
    else:
        from whisper_normalizer.basic import BasicTextNormalizer as Normalizer
    normalise = Normalizer()
    reference, hypothesis = normalise(text).strip(), normalise(heard).strip()
    if not reference:
        return 1.0 if not hypothesis else 0.0
    return max(0.0, 1.0 - jiwer.process_words(reference, hypothesis).wer)


def said_part(cue: str, heard) -> str:
    """What a clip whose edges were moved inside its speech says of its cue: the cue's words from the first to the
    last the ASR heard in it (or misheard alike), so a clip that keeps the middle of a line is judged, and named,
    by the words it holds; the whole cue when it heard none of them."""
    said, got = cue.split(), [w.text for w in heard]
    kept = [
        (a, b)
        for tag, a, b, c, d in _aligned(said, got)
        if tag == "equal" or (tag == "replace" and _alike(said[a:b], got[c:d]))
    ]
    return " ".join(said[kept[0][0] : kept[-1][1]]) if kept else cue


def _aligned(said: list[str], got: list[str]) -> list[tuple[str, int, int, int, int]]:
    """The cue's words against the heard ones, up to case and punctuation (difflib's opcodes)."""
    import difflib
    import re

    def plain(word: str) -> str:
        return re.sub(r"[^\w']", "", word.lower())

    matcher = difflib.SequenceMatcher(a=[plain(w) for w in said], b=[plain(w) for w in got], autojunk=False)
    return matcher.get_opcodes()


def _alike(said: list[str], got: list[str]) -> bool:
    """A run the ASR misheard rather than other words: as many words, or similar sounds."""
    import difflib

    return (
        len(said) == len(got)
        or difflib.SequenceMatcher(a=" ".join(said).lower(), b=" ".join(got).lower()).ratio() >= 0.5
    )


def spelled(cue: str, heard) -> str:
    """The words of a clip: the cue's, spelled as it spells them, where the ASR agrees (same words up to case and
    punctuation, a same-length or similar-sounding run it misheard, "cannot" for "could not", cue words it
    missed: word times at a clip's edge are loose, or a word or two more: noise or a neighbour's word);
    where it hears a phrase the cue lacks (a condensed subtitle), the words as heard."""
    said = cue.split()
    got = [w.text for w in heard]
    out = []
    for tag, a, b, c, d in _aligned(said, got):
        alike = tag == "replace" and _alike(said[a:b], got[c:d])
        # A word or two the cue lacks is noise or a neighbour's word at the clip's edge misheard as speech (a
        # loud bed); a subtitle condenses whole phrases.
        slip = (d - c) - (b - a) < CONDENSED_WORDS
        if tag in ("equal", "delete") or alike or slip:
            out += said[a:b]
        elif tag in ("replace", "insert"):
            out += got[c:d]
    return " ".join(out) or cue
