"""The original lines found in the source: each line's span of speech, its voice embedding, its speaker, and
each speaker's centroid. Everything clips are chosen from is computed here once."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from omnidub.asr import Word
from omnidub.errors import OmnidubError
from omnidub.script import DEFAULT_SPEAKER, Line, Script
from omnidub.source.audio import ANALYSIS_RATE, SourceAudio
from omnidub.source.overlap import overlapped
from omnidub.source.speakers import (
    CLUSTER_SPEECH,
    STRAY_ALIKE,
    STRAY_ALIKE_HEARD,
    STRAY_LEAST,
    STRAY_WIDEN,
    WINDOW,
    Grouping,
    VoiceCalibration,
    calibrate,
    centroid,
    group_lines,
    placed_by_cue,
    stray_lines,
    stray_voice,
    window_embeddings,
)
from omnidub.source.speech import (
    FAINT_SHARE,
    FIT_BALANCE,
    FIT_BETTER,
    FIT_CUES,
    FIT_OFFSET,
    FIT_SHARE,
    SpeechMap,
    check_some_speech,
    find_speech,
    subtitle_fit,
    with_faint_speech,
    without,
)

# A line's clip may grow this far past its cue into silence (cues often start late or end early), never into
# another cue; and keeps this much of the silence around its speech.
GROW = 0.3
PAD = 0.1
# A line whose voice is this far from its speaker's centroid is left out of the centroid (a mislabelled cue,
# or one holding two voices); CAM++ gives 0.67-0.88 for one voice and 0.2-0.48 across voices on the films.
CENTROID_OUTLIER = 0.5
# A window is judged only when voice activity calls at least this share of it speech (the rest of a window at a
# clip's edge, or across a pause, is the background, whose embedding says nothing of the voice).
WINDOW_SPEECH = 0.5
# A cue is condensed (it says fewer words than are spoken) when its speech lasts this many times longer than its
# words take at the pace of this source's cues (the median, by upstream's duration estimator, which knows each
# language's script): on the films half-length subtitles came out at 1.65-1.9 times the median, whole cues at
# 0.7-1.43. Judged on cues with at least CONDENSED_SPEECH of speech, in a source of at least CONDENSED_CUES cues.
CONDENSED_RATIO = 1.5
CONDENSED_SPEECH = 2.0
CONDENSED_CUES = 3
# A line heard (no subtitles) too short to embed is embedded from the speech no other line claims this near it.
UNCLAIMED_REACH = 0.6
# Two unlabelled cues sharing this much time are two voices (one person says one line at a time; one voice's cues
# touch, or overlap by a frame or two); one inside the other for APART_INSIDE of its time is spoken over it.
APART_OVERLAP = 0.25
APART_INSIDE = 0.8
# A line of two whose cues overlap is heard alone outside the other's cue when that leaves this much speech (s).
OUTSIDE_LEAST = 1.0
# The text of a line heard as speech that the ASR wrote no words for: grouped by voice, never a clip (no transcript).
NO_WORDS = "(no words heard)"
# A voice in a reverberant room (a stairwell): marked two voices over REVERB_MARKED of its speech or more (on the
# ten scenes of tests/scenes.py, by the generator's spans, the stairwell voice 25-70 %, the others up to 39 %, those
# being full-level overlaps; on the films of tests/films.py no voice over 14 %), its gaps filled REVERB_FILL dB or
# more beyond the other voices' (on the scenes the stairwell voice's are 4.3-5.2 dB beyond, every other voice's -3.0
# to +0.7, the whisperer's +3.4 to +7.7 at 8-9 dB under the others; on the films one voice of four or five was +4 dB
# or more on four of six), judged on REVERB_LINES lines or more of each, at a level no more than REVERB_LEVEL dB
# under theirs.
REVERB_MARKED = 0.2
# A reverberant voice's marks are kept this near either end of a run of its speech: the scenes' turns start 0.4-1.0 s
# under the end of the one before, and its references held 0.2-0.4 s of the next or last voice with every mark inside
# its own lines dropped.
REVERB_EDGE = 1.0
REVERB_FILL = 2.5
REVERB_LINES = 2
REVERB_LEVEL = 4.0
TWO_VOICES_LEAST = 0.1  # seconds: what is left of an overlap mark once a reverberant voice's own speech is taken off
SENTENCE_GAP = 0.3  # lines heard this close are most often one sentence the ASR cut (one voice, most often)
_SENTENCE_END = re.compile(r"[.!?…][\"'”’»)\]]*$")  # a sentence's end mark, a closing quote or bracket after it
_LETTER = re.compile(r"[^\W\d_]")


@dataclass(frozen=True, eq=False)
class Analysis:
    """The original script found in the source. `audio` is what clips are cut from (the isolated vocals when
    separated), `track` its 16 kHz copy for analysis."""

    original: Script
    audio: SourceAudio
    track: SourceAudio
    speech: SpeechMap
    voiced: dict[int, tuple[float, float] | None]  # line index -> where its speech is; None: the cue holds none
    spans: dict[int, tuple[float, float] | None]  # line index -> its clip: the speech grown into silence
    embeddings: dict[int, np.ndarray | None]
    speakers: dict[int, str]  # line index -> speaker (the label, or the group of an unlabelled original)
    centroids: dict[str, np.ndarray]
    typical: dict[str, float]  # speaker -> median similarity of its lines to its centroid
    grouping: Grouping | None  # None when the original is labelled
    language: str | None
    calibration: dict[str, VoiceCalibration] = field(default_factory=dict)
    condensed: dict[int, str] = field(default_factory=dict)  # line -> why its cue looks condensed (no ASR to hear it)
    words: tuple[Word, ...] | None = None  # what the ASR hears in the whole track; None without an ASR model
    heard_lines: bool = False  # the lines were cut from what the ASR heard: where one ends is a guess
    overlapped: tuple[tuple[float, float], ...] = ()  # where two voices speak at once (omnidub/source/overlap.py)
    # Window embeddings by span: a line's clip is checked as a speaker candidate and again as its own reference.
    _windows: dict = field(default_factory=dict, repr=False)

    def windows(self, encoder, start: float, end: float) -> list[tuple[float, np.ndarray]]:
        """Embeddings of 1.6 s windows across the span (see :func:`window_embeddings`), computed once."""
        if (start, end) not in self._windows:
            self._windows[(start, end)] = window_embeddings(encoder, self.track.cut(start, end))
        return self._windows[(start, end)]

    def windows_at(self, encoder, starts: list[float], seconds: float) -> list[np.ndarray | None]:
        """Embeddings of windows of ``seconds`` from each start (None where too short to embed), computed once."""
        key = (round(seconds, 3),)
        todo = [a for a in dict.fromkeys(round(float(a), 3) for a in starts) if key + (a,) not in self._windows]
        if todo:
            many = getattr(encoder, "embed_many", None)
            pieces = [self.track.cut(a, a + seconds) for a in todo]
            found = many(pieces, ANALYSIS_RATE) if many else [encoder.embed(p, ANALYSIS_RATE) for p in pieces]
            for a, e in zip(todo, found):
                self._windows[key + (a,)] = None if e is None else e[0]
        return [self._windows[key + (round(float(a), 3),)] for a in starts]

    def speech_windows(self, encoder, start: float, end: float) -> list[tuple[float, np.ndarray]]:
        """The windows of the span that are mostly speech (all of them when none is)."""
        found = self.windows(encoder, start, end)
        speechy = [
            (o, e)
            for o, e in found
            if self.speech.speech_fraction(start + o, min(start + o + WINDOW, end)) >= WINDOW_SPEECH
        ]
        return speechy or found

    def heard(self, start: float, end: float) -> tuple[Word, ...] | None:
        """The recognised words whose middle lies between `start` and `end`, timed from `start`."""
        if self.words is None:
            return None
        return tuple(
            Word(w.text, w.start - start, w.end - start) for w in self.words if start <= (w.start + w.end) / 2 <= end
        )

    @cached_property
    def lines(self) -> dict[int, Line]:
        """The original lines by index."""
        return {line.index: line for line in self.original.lines}

    @cached_property
    def reverberant(self) -> frozenset[str]:
        """The voices heard in a reverberant room (a stairwell): see :func:`reverberant_voices`."""
        return reverberant_voices(self.speech, self.voiced, self.speakers, self.overlapped)

    def two_voices(self, speaker: str) -> tuple[tuple[float, float], ...]:
        """Where two voices speak at once, as a line of ``speaker`` is judged: the overlap model hears a reverberant
        voice's own echo as a second voice over most of its lines (a stairwell's, 50-90 % of each), so for such a
        voice its marks count only where another line's speech is too, or within REVERB_EDGE of either end of a
        run of its speech (the next turn starting under its end, or it under the last one's: where a line heard
        ends is a guess)."""
        if speaker not in self.reverberant:
            return self.overlapped
        others = [v for i, v in self.voiced.items() if v is not None and self.speakers.get(i) != speaker]
        runs = self._runs(speaker)
        inner = [(a + REVERB_EDGE, b - REVERB_EDGE) for a, b in runs if b - a > 2 * REVERB_EDGE]
        alone = [p for a, b in inner for p in without(a, b, others, 0.0)]
        return tuple(p for a, b in self.overlapped for p in without(a, b, alone, TWO_VOICES_LEAST))

    def edge_echo(self, speaker: str) -> tuple[tuple[float, float], ...]:
        """Where two voices speak at once, with a reverberant voice's marks taken off the ends of its runs of speech
        where no other voice's speech lies within REVERB_EDGE (its echo, with no turn there to start under it or to
        end over it). Its marks further inside its runs are kept: a back-channel spoken over it is marked alike."""
        if speaker not in self.reverberant:
            return self.overlapped
        others = [v for i, v in self.voiced.items() if v is not None and self.speakers.get(i) != speaker]
        near = [(a - REVERB_EDGE, b + REVERB_EDGE) for a, b in others]
        edges = []
        for a, b in self._runs(speaker):
            if b - a > 2 * REVERB_EDGE:
                edges += [(a, a + REVERB_EDGE), (b - REVERB_EDGE, b)]
            else:
                edges.append((a, b))
        alone = [p for a, b in edges for p in without(a, b, [n for n in near if n[0] < b and n[1] > a], 0.0)]
        return tuple(p for a, b in self.overlapped for p in without(a, b, alone, TWO_VOICES_LEAST))

    def _runs(self, speaker: str) -> list[list[float]]:
        """The runs of a voice's speech: its lines' speech, joined across gaps of SENTENCE_GAP or less."""
        runs: list[list[float]] = []
        for a, b in sorted(v for i, v in self.voiced.items() if v is not None and self.speakers.get(i) == speaker):
            if runs and a - runs[-1][1] <= SENTENCE_GAP:
                runs[-1][1] = max(runs[-1][1], b)
            else:
                runs.append([a, b])
        return runs

    def wordless(self, index: int) -> bool:
        """Whether the line is speech heard with no words written for it (see NO_WORDS)."""
        return self.lines[index].text == NO_WORDS

    def speech_seconds(self, index: int) -> float:
        span = self.spans.get(index)
        return self.speech.speech_seconds(*span) if span else 0.0


def reverberant_voices(
    speech: SpeechMap,
    voiced: dict[int, tuple[float, float] | None],
    speakers: dict[int, str],
    both: tuple[tuple[float, float], ...],
) -> frozenset[str]:
    """The voices heard in a reverberant room: the overlap model hears two voices at once over REVERB_MARKED or more
    of their speech (``both``), and they fill the gaps between their syllables REVERB_FILL dB or more beyond the
    other voices (the medians over their lines of FILL_LEAST s or more, at least REVERB_LINES of each), at a level no
    more than REVERB_LEVEL dB under theirs. Either alone is no room: voices differ in how they pause (without a bed,
    one synthesizer's gaps sit 10-20 dB over another's), a quiet voice's gaps are filled by the bed under it (a
    whisper's, 3-8 dB beyond the others' on the scenes), and a voice others often speak over is marked often. Empty
    for a single voice."""
    judged: dict[str, list[tuple[float, float]]] = {}  # each line's (gap fill, level)
    marked: dict[str, list[tuple[float, float]]] = {}  # each line's (seconds marked two voices, seconds)
    for index, span in voiced.items():
        fill = speech.gap_fill(*span) if span is not None else None
        if fill is None or index not in speakers:
            continue
        judged.setdefault(speakers[index], []).append(fill)
        seconds = sum(max(0.0, min(b, span[1]) - max(a, span[0])) for a, b in both)
        marked.setdefault(speakers[index], []).append((seconds, span[1] - span[0]))
    found = set()
    for name, mine in judged.items():
        theirs = [f for other, fills in judged.items() if other != name for f in fills]
        if len(mine) < REVERB_LINES or len(theirs) < REVERB_LINES:
            continue
        fill = float(np.median([f for f, _ in mine])) - float(np.median([f for f, _ in theirs]))
        level = float(np.median([v for _, v in mine])) - float(np.median([v for _, v in theirs]))
        share = sum(m for m, _ in marked[name]) / sum(s for _, s in marked[name])
        if share >= REVERB_MARKED and fill >= REVERB_FILL and level >= -REVERB_LEVEL:
            found.add(name)
    return frozenset(found)


def labelled(script: Script) -> bool:
    """Whether the original names its speakers (any line carries a label)."""
    return any(line.speaker != DEFAULT_SPEAKER for line in script.lines)


def analyse(
    original: Script,
    audio: SourceAudio,
    encoder,
    *,
    speakers: int | None = None,
    language: str | None = None,
    separated: bool = False,
    speech: SpeechMap | None = None,
    heard: bool = False,
    heard_lines: bool = False,
    both: tuple[tuple[float, float], ...] | None = None,
) -> Analysis:
    """Find every original line in `audio`: speech spans, embeddings, speakers (grouped when unlabelled).
    ``speech``: the track's voice activity, when it was already found; ``heard``: the lines were cut from what an
    ASR model heard; ``heard_lines``: and their times are its words' (not a dub's cues: as
    :attr:`Analysis.heard_lines`); ``both``: where two voices speak at once, when already found."""
    track = audio.at_rate(ANALYSIS_RATE)
    speech = speech if speech is not None else find_speech(track)
    if speech.regions or not separated:  # isolated vocals without speech: each cue says so (a model's failure)
        check_fit(original, audio, speech)
    # A cue where voice activity hears little is heard again there more keenly (a whisper, a voice behind a door or
    # across a hall): the cue says someone speaks. Not lines placed by the ASR's words: there the speech a whisper's
    # word gained changed which voices the clip beside it was judged against, and five lines cloned from that clip
    # kept 0.25 s of the whisper (docs/source.md, "Quiet voices heard in their cues").
    if not heard_lines:
        thin = [
            (line.start, line.end)
            for line in original.lines
            if speech.speech_seconds(line.start, line.end) < FAINT_SHARE * (line.end - line.start)
        ]
        speech = with_faint_speech(speech, track, thin)
    original = dash_lines_at_pause(original, speech)
    order = [line.index for line in sorted(original.lines, key=lambda item: (item.start, item.index))]
    voiced, spans = line_spans(original.lines, speech)
    embeddings: dict[int, np.ndarray | None] = {}
    for index, span in spans.items():
        found = encoder.embed(track.cut(*span), ANALYSIS_RATE) if span else None
        if found is None and heard:
            # A reply heard too short to embed ("Fine." placed late by its word times): the unclaimed speech next
            # to it is its own, rather than its grouping falling to the line before.
            nearby = _unclaimed_speech(original.lines, index, voiced, speech)
            found = encoder.embed(track.cut(*nearby), ANALYSIS_RATE) if nearby else None
        embeddings[index] = None if found is None else found[0]
    seconds = {i: (speech.speech_seconds(*s) if s else 0.0) for i, s in spans.items()}
    grouping = None
    if labelled(original):
        who = {line.index: line.speaker for line in original.lines}
    else:
        apart = apart_lines(original)
        outside = _outside_embeddings(original, apart, voiced, speech, track, encoder)
        grouping = group_lines(order, embeddings, seconds, speakers, apart, outside)
        who = {entry.index: entry.speaker for entry in grouping.lines}
        if speakers is None:  # lines placed nowhere that are a voice of their own, heard over their cues' time
            cued = _cue_embeddings(original, stray_lines(grouping), track, encoder, heard=heard, widen=heard_lines)
            alike = STRAY_ALIKE_HEARD if heard else STRAY_ALIKE
            voices = speaker_centroids(who, embeddings, seconds)
            grouping = placed_by_cue(stray_voice(grouping, voices, cued, apart, alike), voices, cued, apart)
            for line in (g for g in grouping.lines if g.speaker in grouping.cued):
                embeddings[line.index] = cued[line.index]  # such a line is known by its cue's time
            who = {entry.index: entry.speaker for entry in grouping.lines}
    # A voice found by its cues' time has no centre: heard over whole cues, it holds the bed as much as the voice, and
    # every other voice's windows would be judged against it.
    centroids = speaker_centroids(who, embeddings, seconds, skip=grouping.cued if grouping else ())
    typical = {
        name: float(
            np.median([np.dot(embeddings[i], c) for i, s in who.items() if s == name and embeddings.get(i) is not None])
        )
        for name, c in centroids.items()
    }
    if language is None:
        language = next((line.language for line in original.lines if line.language), None)
    found = Analysis(
        original,
        audio,
        track,
        speech,
        voiced,
        spans,
        embeddings,
        who,
        centroids,
        typical,
        grouping,
        language,
        overlapped=both if both is not None else overlapped(track) if speech.regions else (),
    )
    found.calibration.update(calibrate(_own_windows(found, encoder, seconds), centroids))
    found.condensed.update(condensed_cues(original, voiced, speech))
    return found


def runs_on(first: Line, second: Line) -> bool:
    """Whether two lines heard, one after the other, are one sentence the ASR cut: under SENTENCE_GAP apart, the
    first ending on no end mark and the second starting in lower case, each with words."""
    if NO_WORDS in (first.text, second.text) or second.start - first.end > SENTENCE_GAP:
        return False
    letter = _LETTER.search(second.text)
    return not _SENTENCE_END.search(first.text.strip()) and letter is not None and letter.group().islower()


def _cue_embeddings(
    original: Script, indices: list[int], track: SourceAudio, encoder, *, heard: bool = False, widen: bool = False
) -> dict[int, np.ndarray]:
    """Each of these lines' cue, every other cue's time cut away, embedded whole (STRAY_LEAST s at least). ``heard``:
    the lines were cut from what an ASR model heard, and those of them next to one another in time that are one
    sentence (:func:`runs_on`) are heard together, each given their embedding: a whispered "Quiet," and "they can
    hear us." are each too short to say whose they are, and together like the whisperer's other line. ``widen``:
    their times are the ASR's words', which a whisper's are shorter than it is said ("What?" heard for 0.14 s of a
    1.5 s whisper), so each is heard with the time no other line holds up to STRAY_WIDEN s either side (a dub's cue
    is not: it holds its line's time already, and beyond it another voice's)."""
    from omnidub.source.clips import without  # clips builds on this module

    runs: list[list[Line]] = []
    previous = None  # where the last of these lines is in time order
    for at, line in enumerate(sorted(original.lines, key=lambda line: (line.start, line.index))):
        if line.index not in indices:
            continue
        if heard and previous == at - 1 and runs_on(runs[-1][-1], line):
            runs[-1].append(line)
        else:
            runs.append([line])
        previous = at
    found = {}
    for run in runs:
        within = {line.index for line in run}
        others = [(o.start, o.end) for o in original.lines if o.index not in within]
        if widen:
            parts = without(max(run[0].start - STRAY_WIDEN, 0.0), run[-1].end + STRAY_WIDEN, others, 0.0)
        else:
            parts = [part for line in run for part in without(line.start, line.end, others, 0.0)]
        if sum(b - a for a, b in parts) >= STRAY_LEAST:
            embedded = encoder.embed(np.concatenate([track.cut(a, b) for a, b in parts]), ANALYSIS_RATE)
            if embedded is not None:
                found.update({index: embedded[0] for index in within})
    return found


def _outside_embeddings(
    original: Script, apart: dict[tuple[int, int], str], voiced: dict, speech: SpeechMap, track, encoder
) -> dict[int, np.ndarray]:
    """For each line of a pair whose cues overlap (not one inside the other), the embedding of its speech outside
    every other line's cue and speech (the longest piece, OUTSIDE_LEAST s of speech or more): its voice alone."""
    from omnidub.source.clips import without  # clips builds on this module

    overlapping = {k for pair, why in apart.items() if why.startswith("overlaps") for k in pair}
    taken = {
        o.index: (min(o.start, voiced[o.index][0]), max(o.end, voiced[o.index][1]))
        if voiced.get(o.index)
        else (o.start, o.end)
        for o in original.lines
    }
    found = {}
    for index in sorted(overlapping):
        if voiced.get(index) is None:
            continue
        pieces = without(*voiced[index], [span for k, span in taken.items() if k != index], 0.01)
        best = max(pieces, key=lambda p: speech.speech_seconds(*p), default=None)
        if best is None or speech.speech_seconds(*best) < OUTSIDE_LEAST:
            continue
        embedded = encoder.embed(track.cut(*best), ANALYSIS_RATE)
        if embedded is not None:
            found[index] = embedded[0]
    return found


def apart_lines(original: Script) -> dict[tuple[int, int], str]:
    """Pairs of unlabelled lines that cannot be one voice, each with why (``{line}`` names the other line): their
    cues share APART_OVERLAP s or more (one inside the other: spoken over it), or one dialogue-dash cue holds both."""
    lines = sorted((o for o in original.lines if o.speaker == DEFAULT_SPEAKER), key=lambda o: (o.start, o.index))
    found = {}
    for k, a in enumerate(lines):
        for b in lines[k + 1 :]:
            # Before the times: a dash cue's lines meet end to start once parted at the pause between them.
            if a.where and a.where == b.where and a.where.startswith("cue"):
                found[(a.index, b.index)] = "shares a dialogue-dash cue with line {line}"
                continue
            if b.start >= a.end:
                break
            shared = min(a.end, b.end) - max(a.start, b.start)
            inside = shared >= APART_INSIDE * min(a.end - a.start, b.end - b.start)
            if shared >= APART_OVERLAP:
                found[(a.index, b.index)] = "spoken over line {line}" if inside else "overlaps line {line}"
    return found


def dash_lines_at_pause(original: Script, speech: SpeechMap) -> Script:
    """The original with the lines of each dialogue-dash cue meeting at the silence heard between them nearest where
    the cue's time was shared by length (no silence heard: as shared)."""
    from dataclasses import replace

    lines = list(original.lines)
    changed = False
    for k in range(len(lines) - 1):
        a, b = lines[k], lines[k + 1]
        if not (a.where and a.where == b.where and a.where.startswith("cue") and abs(a.end - b.start) < 1e-3):
            continue
        inside = [(x, y) for x, y in speech.regions if y > a.start and x < b.end]
        gaps = [(y, x2) for (_, y), (x2, _) in zip(inside, inside[1:]) if a.start < y and x2 < b.end]
        if not gaps:
            continue
        low, high = min(gaps, key=lambda g: abs((g[0] + g[1]) / 2 - a.end))
        middle = round((low + high) / 2, 3)
        lines[k], lines[k + 1] = replace(a, end=middle), replace(b, start=middle)
        changed = True
    return replace(original, lines=tuple(lines)) if changed else original


def condensed_cues(original: Script, voiced: dict, speech: SpeechMap) -> dict[int, str]:
    """The cues that say far fewer words than their speech holds, each with the reason (see CONDENSED_RATIO)."""
    from omnidub.duration import natural_seconds

    pace = {}  # line -> seconds of speech per second its words take
    for line in original.lines:
        span = voiced.get(line.index)
        if span is None or not line.text.strip():
            continue
        spoken, reads = speech.speech_seconds(*span), natural_seconds(line.text)
        if spoken >= CLUSTER_SPEECH and reads > 0:
            pace[line.index] = (spoken, reads)
    if len(pace) < CONDENSED_CUES:
        return {}
    # The whole source's pace: a speaker's own would be pulled up by its condensed cues (real subtitles condense
    # one character's long speeches more than another's), and voices differ in pace by far less than condensing does.
    usual = float(np.median([a / b for a, b in pace.values()]))
    result = {}
    for index, (spoken, reads) in pace.items():
        if spoken >= CONDENSED_SPEECH and spoken / reads > CONDENSED_RATIO * usual:
            words = len(original_line(original, index).text.split())
            expected = words * spoken / reads / usual
            plural = "s" if words != 1 else ""
            result[index] = (
                f"the subtitle looks condensed: {words} word{plural} for {spoken:.1f} s "
                f"of speech (about {expected:.0f} at the pace of this source's cues); without an ASR "
                "model to hear the words, its transcript would not match its audio"
            )
    return result


def original_line(original: Script, index: int) -> Line:
    return next(line for line in original.lines if line.index == index)


def _own_windows(analysis: Analysis, encoder, seconds: dict[int, float]) -> dict[str, list[np.ndarray]]:
    """The window embeddings of each speaker's solid lines (enough speech, no other speaker's cue over them, and
    close to the speaker's centroid as a whole): what the speaker sounds like in this source."""
    result: dict[str, list[np.ndarray]] = {}
    for line in analysis.original.lines:
        speaker, span = analysis.speakers[line.index], analysis.spans.get(line.index)
        embedding, own = analysis.embeddings.get(line.index), analysis.centroids.get(speaker)
        if span is None or embedding is None or own is None or seconds.get(line.index, 0.0) < CLUSTER_SPEECH:
            continue
        if float(np.dot(embedding, own)) < CENTROID_OUTLIER or any(
            analysis.speakers[o.index] != speaker and o.start < span[1] and o.end > span[0]
            for o in analysis.original.lines
        ):
            continue
        result.setdefault(speaker, []).extend(e for _, e in analysis.speech_windows(encoder, *span))
    return result


def check_fit(original: Script, audio: SourceAudio, speech: SpeechMap) -> None:
    """One line, before any clip is chosen, when the subtitles cannot be cut from this source: it holds no speech,
    or the cues lie where there is none (with how far off they look, when another timing fits)."""
    name = audio.path.name
    check_some_speech(speech, name)
    fit = subtitle_fit([(line.start, line.end) for line in original.lines], speech)
    offset = (
        len(original.lines) >= FIT_CUES
        and fit.balance < FIT_BALANCE
        and abs(fit.offset) >= FIT_OFFSET
        and fit.shifted >= fit.balance + FIT_BETTER
    )
    if offset:
        raise OmnidubError(
            f"the original subtitles do not fit {name}: they look {abs(fit.offset):.1f} s "
            f"{'early' if fit.offset > 0 else 'late'} (speech where their cues are and silence where "
            f"they are not scores {fit.balance:.2f} as timed, {fit.shifted:.2f} shifted by "
            f"{fit.offset:+.1f} s; 0.5 is chance); shift them by {fit.offset:+.1f} s, or give the "
            "subtitles of this source"
        )
    if fit.share < FIT_SHARE:
        raise OmnidubError(
            f"the original subtitles do not fit {name}: only {fit.share:.0%} of their cue time holds "
            "speech; are these the subtitles of this source?"
        )


def line_spans(lines: tuple[Line, ...], speech: SpeechMap) -> tuple[dict, dict]:
    """Each line's speech (`voiced`: the speech heard in its cue, let run on by up to GROW, never into a cue before
    or after it)
    and its clip span (`spans`: that speech padded with up to PAD of silence, and with at most half the silence
    to the next line's speech, so two lines' clips never meet); None for a cue that holds no speech."""
    voiced = {}
    for line in lines:
        before = max((o.end for o in lines if o.index != line.index and o.end <= line.start), default=0.0)
        after = min((o.start for o in lines if o.index != line.index and o.start >= line.end), default=math.inf)
        low, high = max(before, line.start - GROW), min(after, line.end + GROW)
        # Speech that starts inside the cue may run past it (a cue that ends early); speech that only begins
        # after the cue is the next line's.
        hull = speech.speech_hull(line.start, line.end, low, high)
        voiced[line.index] = None if hull is None else (low, high, hull)
    spans = {}
    for index, found in voiced.items():
        if found is None:
            spans[index] = None
            continue
        low, high, (a, b) = found
        previous = max((h[1] for i, (*_, h) in _known(voiced) if i != index and h[1] <= a), default=-math.inf)
        following = min((h[0] for i, (*_, h) in _known(voiced) if i != index and h[0] >= b), default=math.inf)
        spans[index] = (
            round(max(low, a - min(PAD, (a - previous) / 2)), 3),
            round(min(high, b + min(PAD, (following - b) / 2)), 3),
        )
    return {i: (v[2] if v else None) for i, v in voiced.items()}, spans


def _unclaimed_speech(
    lines: tuple[Line, ...], index: int, voiced: dict, speech: SpeechMap
) -> tuple[float, float] | None:
    """The speech within UNCLAIMED_REACH of a line that no other line's speech covers (the longest stretch); None
    when there is none."""
    line = next(o for o in lines if o.index == index)
    pieces = [
        (max(a, line.start - UNCLAIMED_REACH), min(b, line.end + UNCLAIMED_REACH))
        for a, b in speech.regions
        if b > line.start - UNCLAIMED_REACH and a < line.end + UNCLAIMED_REACH
    ]
    for other, span in voiced.items():
        if other == index or span is None:
            continue
        pieces = [p for x, y in pieces for p in ((x, min(y, span[0])), (max(x, span[1]), y)) if p[1] - p[0] > 0.01]
    return max(pieces, key=lambda p: p[1] - p[0]) if pieces else None


def _known(voiced: dict) -> list:
    return [(i, v) for i, v in voiced.items() if v is not None]


def speaker_centroids(
    who: dict[int, str], embeddings: dict[int, np.ndarray | None], seconds: dict[int, float], skip=()
) -> dict[str, np.ndarray]:
    """Each speaker's voice (but those in ``skip``): the speech-weighted mean of its lines' embeddings, outliers
    left out."""
    result = {}
    for speaker in (s for s in dict.fromkeys(who.values()) if s not in skip):
        mine = [i for i, s in who.items() if s == speaker and embeddings.get(i) is not None]
        solid = [i for i in mine if seconds.get(i, 0.0) >= CLUSTER_SPEECH] or mine
        if not solid:
            continue
        first = centroid([embeddings[i] for i in solid], [seconds[i] for i in solid])
        kept = [i for i in solid if float(np.dot(embeddings[i], first)) >= CENTROID_OUTLIER] or solid
        result[speaker] = centroid([embeddings[i] for i in kept], [seconds[i] for i in kept])
    return result
