"""Reference preparation: load a voice's sample, trim it to the preset's length at a word boundary, fix its
transcript.

A cut must land at a pause (a run of 20 ms frames 20 dB below the speech level, at least 60 ms long; 100 ms or
more preferred, then nearest the target) within 250 ms of a recognised word boundary and inside the preset's
window. The cut is the quietest frame of that pause within 250 ms of the boundary, faded out. The transcript is
cut at the matching word: the user's own words when they gave one (aligned to the recognised words), else the
recognised words. The trimmed clip is heard again to confirm its last word.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass

import numpy as np

from omnidub.asr import Asr, Word, whisper_language
from omnidub.config import VoiceOptions
from omnidub.duration import natural_seconds
from omnidub.errors import OmnidubError
from omnidub.media import clipped_share, decode_audio, resample
from omnidub.voices.cast import Voice

MIN_REFERENCE_SECONDS = 1.0
LONG_REFERENCE_SECONDS = 20.0
WHOLE_REFERENCE_SECONDS = 10.0  # reference_seconds = 0 keeps up to this much
CLIPPED_SHARE = 0.005  # share of samples in flat tops past which a reference is said to be clipped (speech 3.5 dB over)
# A transcript read at a usual pace should take roughly its audio's length; past this factor either way it
# probably does not belong to the audio, and every line paced by it comes out too long or too short.
PACE_MISMATCH = 2.5
_FRAME = 0.020
_HOP = 0.010
_SEARCH = 0.250
_QUIET_DB = 20.0
_MIN_PAUSE = 0.060
_GOOD_PAUSE = 0.100
_FADE = 0.008
_PUNCTUATION_PULL = 0.6  # seconds


@dataclass(frozen=True, eq=False)
class Reference:
    speaker: str
    audio: np.ndarray
    sample_rate: int
    text: str
    trimmed: bool
    source_seconds: float
    note: str
    # Kept whole only because no ASR model could be loaded: a later run with one should trim it, so it is
    # not worth caching.
    provisional: bool = False


def check_reference(
    voice: Voice, *, options: VoiceOptions, asr_available: bool, sample_rate: int = 24000
) -> tuple[str, ...]:
    """What preparing ``voice``'s reference would refuse, found without ASR or the model: OmnidubError for the
    same faults the render stops on; the notes it would print otherwise. A plan calls this for every voice."""
    if voice.audio is None:
        return ()
    audio, seconds, notes = _load_checked(voice, sample_rate)
    if asr_available:
        return tuple(notes)
    if not voice.text:
        raise OmnidubError(_no_transcript(voice))
    if seconds > LONG_REFERENCE_SECONDS:
        _target, (low, high) = _window(options)
        cut = _energy_cut(audio, sample_rate, options)
        if cut is None:
            raise OmnidubError(_no_energy_cut(voice, seconds, low, high))
        notes.append(
            f"without an ASR model the reference would be cut at {cut:.2f} s by energy alone, its "
            "transcript by estimate"
        )
    return tuple(notes)


def prepare_reference(voice: Voice, *, sample_rate: int, options: VoiceOptions, asr: Asr | None) -> Reference:
    """Load a voice's reference, trim it to the preset's length at a word boundary, and fix its transcript.

    A reference over LONG_REFERENCE_SECONDS is never kept whole: without word times it is cut at a pause by
    energy alone (its transcript cut by estimate, and said so), or refused."""
    if voice.audio is None:
        raise OmnidubError(f"voice {voice.speaker!r} has no reference audio (it is an instruct voice)")
    audio, seconds, notes = _load_checked(voice, sample_rate)
    target, (low, high) = _window(options)

    def result(clip: np.ndarray, text: str, trimmed: bool, provisional: bool = False) -> Reference:
        mismatch = _pace_mismatch(text, clip.size / sample_rate)
        if mismatch:
            notes.append(mismatch)
        return Reference(voice.speaker, clip, sample_rate, text, trimmed, seconds, "; ".join(notes), provisional)

    if seconds <= high:
        if voice.text:
            notes.append(f"kept whole ({seconds:.1f} s)")
            return result(audio, voice.text, False)
        text = _transcribe_whole(voice, audio, sample_rate, asr)
        notes.append(f"kept whole ({seconds:.1f} s); transcript by ASR ({asr.name}): {text!r}")
        return result(audio, text, False)

    def keep_whole(why: str, transcript: str | None = None, provisional: bool = False) -> Reference:
        if seconds > LONG_REFERENCE_SECONDS:  # minutes of reference would cost minutes per line
            if provisional:  # for want of ASR: cut by energy, the transcript by estimate
                return _cut_without_words(voice, audio, sample_rate, options, notes, result)
            raise OmnidubError(
                f"{voice.audio}: reference for {voice.speaker!r} is {seconds:.1f} s and {why}; cut "
                "3-10 s of clean speech from it (with its transcript) and use that"
            )
        text = voice.text or transcript or _transcribe_whole(voice, audio, sample_rate, asr)
        notes.append(f"kept whole ({seconds:.1f} s): {why}".replace("; ", ", "))  # notes are joined by "; "
        if not voice.text:
            notes.append(f"transcript by ASR ({asr.name}): {text!r}")
        return result(audio, text, False, provisional)

    if asr is None:
        if not voice.text:
            raise OmnidubError(_no_transcript(voice))
        return keep_whole("no ASR model to find word boundaries", provisional=True)
    try:
        heard = asr.transcribe(audio, sample_rate, language=whisper_language(voice.spoken), word_timestamps=True)
    except OmnidubError as exc:
        if not voice.text:
            raise
        return keep_whole(f"no ASR model to find word boundaries ({exc})", provisional=True)

    if not _pause_cuts(audio, sample_rate, heard.words, low, high, target):
        return keep_whole(f"no pause between words inside {low:g}-{high:g} s", heard.text)
    cut = cut_at_word(audio, sample_rate, voice.text, heard.words, language=voice.spoken, options=options, asr=asr)
    if cut is not None:
        notes.append(f"trimmed {seconds:.1f} s to {cut.seconds:.2f} s at a pause after {cut.after!r}")
        if not voice.text:
            notes.append(f"transcript by ASR ({asr.name}): {cut.text!r}")
        return result(cut.audio, cut.text, True)
    if voice.text:
        return keep_whole("the given transcript does not match the recognised words at any pause", heard.text)
    return keep_whole("no pause where the clip's last word could be confirmed", heard.text)


def _load_checked(voice: Voice, sample_rate: int) -> tuple[np.ndarray, float, list[str]]:
    """The reference decoded, its length, and what is worth saying about it (long, clipped); OmnidubError when it
    cannot be a reference at all."""
    native, rate = decode_audio(voice.audio)
    audio = resample(native, rate, sample_rate)
    if not np.isfinite(audio).all():
        raise OmnidubError(
            f"{voice.audio}: reference for {voice.speaker!r} has samples that are not numbers (NaN or infinity); "
            "export it again"
        )
    seconds = audio.size / sample_rate
    if seconds < MIN_REFERENCE_SECONDS:
        raise OmnidubError(
            f"{voice.audio}: reference for {voice.speaker!r} is {seconds:.2f} s; OmniVoice distorts under "
            f"{MIN_REFERENCE_SECONDS:.0f} s, use 3-10 s of clean speech"
        )
    if _frame_rms(audio, sample_rate).max(initial=0.0) < 1e-4:
        raise OmnidubError(f"{voice.audio}: reference for {voice.speaker!r} is silent")
    notes = [_long_note(seconds)] if seconds > LONG_REFERENCE_SECONDS else []
    clipped = clipped_share(native)  # at the file's own rate: resampling rounds off the flat tops clipping leaves
    if clipped >= CLIPPED_SHARE:
        notes.append(
            f"reference is clipped ({clipped:.1%} of its samples sit flat at its peak): the clone copies "
            "the distortion; a recording made at a lower level clones cleaner"
        )
    return audio, seconds, notes


def _long_note(seconds: float) -> str:
    return f"reference is {seconds:.1f} s; over {LONG_REFERENCE_SECONDS:.0f} s degrades cloning, 3-10 s works best"


def _window(options: VoiceOptions) -> tuple[float, tuple[float, float]]:
    """The preset's target length and the window a cut must land in."""
    if options.reference_seconds > 0:
        return options.reference_seconds, tuple(options.reference_window)
    return WHOLE_REFERENCE_SECONDS, (WHOLE_REFERENCE_SECONDS * 0.75, WHOLE_REFERENCE_SECONDS)


def _energy_cut(audio: np.ndarray, sample_rate: int, options: VoiceOptions) -> float | None:
    """Without word times: the quietest frame of the best pause (the longest-enough nearest the target) whose
    cut lands inside the preset's window; None when no pause does."""
    target, (low, high) = _window(options)
    rms = _frame_rms(audio, sample_rate)
    candidates = []
    for first, last, pause, centre in _pauses(rms):
        frames = np.arange(first, last + 1)
        inside = frames[(centre[frames] >= low) & (centre[frames] <= high)]
        if inside.size:
            cut = float(centre[int(inside[np.argmin(rms[inside])])])
            candidates.append((pause < _GOOD_PAUSE, abs(cut - target), cut))
    return min(candidates)[2] if candidates else None


def _cut_without_words(
    voice: Voice, audio: np.ndarray, sample_rate: int, options: VoiceOptions, notes: list[str], result
):
    """A long reference cut at a pause found by energy alone; the user's transcript is cut where its words would
    reach at the pace of the whole recording (a guess, said in the note; a run with ASR prepares it again)."""
    seconds = audio.size / sample_rate
    _target, (low, high) = _window(options)
    cut = _energy_cut(audio, sample_rate, options)
    if cut is None:
        raise OmnidubError(_no_energy_cut(voice, seconds, low, high))
    words = voice.text.split()
    pace = seconds / max(natural_seconds(voice.text), 1e-6)  # real seconds per estimated second
    best = (float("inf"), 0)
    # The word whose estimated end is nearest the cut; a pause usually follows punctuation, so a word that ends
    # a clause or sentence is worth _PUNCTUATION_PULL seconds of distance.
    for k in range(len(words)):
        reach = natural_seconds(" ".join(words[: k + 1])) * pace
        pull = _PUNCTUATION_PULL if words[k][-1] in ".,;:!?…。，" else 0.0
        best = min(best, (abs(reach - cut) - pull, k))
        if reach > cut + _PUNCTUATION_PULL:  # later words only reach further
            break
    text = " ".join(words[: best[1] + 1])
    clip = _fade_out(audio[: int(round(cut * sample_rate))].copy(), sample_rate)
    notes.append(
        f"trimmed {seconds:.1f} s to {cut:.2f} s at a pause found by energy alone (no ASR model for word "
        f"boundaries); the transcript was cut by estimate to {text!r}: check it is what the clip says, or "
        "give the clip's own transcript, or pass --asr-model"
    )
    return result(clip, text, True, True)


def _no_energy_cut(voice: Voice, seconds: float, low: float, high: float) -> str:
    return (
        f"{voice.audio}: reference for {voice.speaker!r} is {seconds:.1f} s, too long to use whole, and without "
        f"an ASR model it can only be cut at a pause, but there is none inside {low:g}-{high:g} s; cut 3-10 s of "
        "clean speech from it (with its transcript), or pass --asr-model with a local faster-whisper folder"
    )


@dataclass(frozen=True, eq=False)
class WordCut:
    """Where the trimmer cuts a clip: its first `seconds`, faded out, saying `text`."""

    audio: np.ndarray
    seconds: float
    text: str
    after: str = ""  # the recognised word the cut follows


def cut_at_word(
    audio: np.ndarray,
    sample_rate: int,
    text: str | None,
    words: tuple[Word, ...],
    *,
    language: str | None,
    options: VoiceOptions,
    asr: Asr,
) -> WordCut | None:
    """The trimmer's cut of a clip longer than the preset's window: at the best pause between two recognised
    words (``words``, timed) where the transcript ``text`` (None: the recognised words) can be cut at the same
    word, confirmed by hearing the cut clip again; None when no pause inside the window passes."""
    target, (low, high) = _window(options)
    voice = Voice("clip", None, text, language, None, None)
    for boundary, cut in _pause_cuts(audio, sample_rate, words, low, high, target):
        kept = _cut_transcript(text, words, boundary) if text else " ".join(w.text for w in words[: boundary + 1])
        if kept is None:
            continue
        clip = _fade_out(audio[: int(round(cut * sample_rate))].copy(), sample_rate)
        if _ends_with(asr, clip, sample_rate, voice, words[boundary]):
            return WordCut(clip, cut, kept, words[boundary].text)
    return None


def _pace_mismatch(text: str, seconds: float) -> str | None:
    """A warning when a transcript cannot plausibly be what its audio says (far too long or short for it)."""
    usual = natural_seconds(text)  # upstream's length for the text at its default pace, language-aware
    if usual <= 0 or 1 / PACE_MISMATCH <= seconds / usual <= PACE_MISMATCH:
        return None
    how = "too long" if seconds < usual else "too short"
    return (
        f"warning: the transcript looks {how} for {seconds:.1f} s of audio (it reads in about {usual:.1f} s); "
        "check that it is exactly what the reference says, or every line's length will be off"
    )


def _ends_with(asr: Asr, clip: np.ndarray, sample_rate: int, voice: Voice, word: Word) -> bool:
    # Word times can be off by a whole short word; hearing the clip again confirms where it really ends.
    heard = asr.transcribe(clip, sample_rate, language=whisper_language(voice.spoken)).text.split()
    return bool(heard) and _norm(heard[-1]) == _norm(word.text)


def _no_transcript(voice: Voice) -> str:
    return (
        f"voice {voice.speaker!r} has no transcript and no ASR model is available to make one; "
        f'add text = "..." in voices.toml or --voice-text {voice.speaker}=TEXT'
    )


def _transcribe_whole(voice: Voice, audio: np.ndarray, sample_rate: int, asr: Asr | None) -> str:
    if asr is None:
        raise OmnidubError(_no_transcript(voice))
    text = asr.transcribe(audio, sample_rate, language=whisper_language(voice.spoken)).text.strip()
    if not text:
        raise OmnidubError(
            f"{voice.audio}: no speech recognised in the reference for {voice.speaker!r}; give its transcript"
        )
    return text


def _frame_rms(audio: np.ndarray, sample_rate: int) -> np.ndarray:
    frame, hop = int(_FRAME * sample_rate), int(_HOP * sample_rate)
    if audio.size < frame:
        return np.zeros(0, np.float32)
    windows = np.lib.stride_tricks.sliding_window_view(audio, frame)[::hop]
    return np.sqrt(np.mean(windows.astype(np.float64) ** 2, axis=1))


def _pause_cuts(
    audio: np.ndarray, sample_rate: int, words: tuple[Word, ...], low: float, high: float, target: float
) -> list[tuple[int, float]]:
    """(index of the last word kept, cut seconds) for each qualifying pause, best first."""
    rms = _frame_rms(audio, sample_rate)
    if rms.size == 0 or len(words) < 2:
        return []
    predicted = np.array([(words[i].end + words[i + 1].start) / 2 for i in range(len(words) - 1)])
    best: dict[int, tuple[float, float]] = {}
    # Pauses come from the audio, not from word times (off by 50-150 ms): each pause is then given to the
    # nearest recognised boundary, so a pause is never claimed by the word before the one it follows.
    for first, last, pause, centre in _pauses(rms):
        start, end = centre[first], centre[last]
        distance = np.maximum(0.0, np.maximum(start - predicted, predicted - end))
        i = int(np.argmin(distance))
        if distance[i] > _SEARCH:
            continue
        frames = np.arange(first, last + 1)
        near = frames[np.abs(centre[frames] - predicted[i]) <= _SEARCH]
        frame = int(near[np.argmin(rms[near])]) if near.size else int(frames[np.argmin(rms[frames])])
        cut = float(centre[frame])
        if low <= cut <= high and (i not in best or pause > best[i][1]):
            best[i] = (cut, pause)
    ranked = sorted(best.items(), key=lambda item: (item[1][1] < _GOOD_PAUSE, abs(item[1][0] - target)))
    return [(i, cut) for i, (cut, _) in ranked]


def _pauses(rms: np.ndarray):
    """(first frame, last frame, seconds, frame centres) of each pause inside the speech: a run of frames
    _QUIET_DB under the speech level, at least _MIN_PAUSE long, neither leading nor trailing silence."""
    if rms.size == 0:
        return
    quiet = rms < np.percentile(rms, 90) * 10 ** (-_QUIET_DB / 20)
    centre = np.arange(rms.size) * _HOP + _FRAME / 2
    for first, last in _runs(quiet):
        if first == 0 or last == rms.size - 1:
            continue  # leading or trailing silence is not between two words
        pause = (last - first) * _HOP + _FRAME
        if pause >= _MIN_PAUSE:
            yield first, last, pause, centre


def _runs(mask: np.ndarray) -> list[tuple[int, int]]:
    """(first, last) indices of each run of True values."""
    edges = np.diff(np.concatenate(([0], mask.astype(np.int8), [0])))
    return list(zip(np.nonzero(edges == 1)[0], np.nonzero(edges == -1)[0] - 1))


def _norm(word: str) -> str:
    return "".join(ch for ch in word.casefold() if ch.isalnum())


def _cut_transcript(text: str, words: tuple[Word, ...], boundary: int) -> str | None:
    """The user's transcript up to the word matching recognised word `boundary`, if both sides agree."""
    tokens = text.split()
    mine = [(k, _norm(t)) for k, t in enumerate(tokens)]
    mine = [(k, n) for k, n in mine if n]
    heard = [_norm(w.text) for w in words]
    matcher = difflib.SequenceMatcher(None, heard, [n for _, n in mine], autojunk=False)
    for a, b, size in matcher.get_matching_blocks():
        # The recognised words on both sides of the cut must match the user's, or the cut may split a word.
        if a <= boundary and boundary + 1 < a + size:
            k = mine[b + boundary - a][0]
            return " ".join(tokens[: k + 1])
    return None


def _fade_out(clip: np.ndarray, sample_rate: int) -> np.ndarray:
    n = min(int(_FADE * sample_rate), clip.size)
    if n:
        clip[-n:] *= np.cos(np.linspace(0, np.pi / 2, n, dtype=np.float32))
    return clip
