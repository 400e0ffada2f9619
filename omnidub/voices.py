"""Voices: who speaks with which reference, reference preparation (trim at a word boundary) and the prompt cache.

Reference trimming: a cut must land at a pause (a run of 20 ms frames 20 dB below the speech level, at least
60 ms long; 100 ms or more preferred, then nearest the target) within 250 ms of a recognised word boundary and
inside the preset's window. The cut is the quietest frame of that pause within 250 ms of the boundary, faded
out. The transcript is cut at the matching word: the user's own words when they gave one (aligned to the
recognised words), else the recognised words. The trimmed clip is heard again to confirm its last word.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

import numpy as np

from omnidub.asr import Asr, Word, whisper_language
from omnidub.backends.base import Prompt
from omnidub.config import VoiceOptions
from omnidub.duration import natural_seconds
from omnidub.errors import OmnidubError
from omnidub.files import write_bytes_atomic
from omnidub.keys import prompt_key
from omnidub.script import DEFAULT_SPEAKER, check_language

VOICE_KEYS = ("audio", "text", "language", "speed", "instruct")
MIN_REFERENCE_SECONDS = 1.0
LONG_REFERENCE_SECONDS = 20.0
WHOLE_REFERENCE_SECONDS = 10.0  # reference_seconds = 0 keeps up to this much
# A transcript read at a usual pace should take roughly its audio's length; past this factor either way it
# probably does not belong to the audio, and every line paced by it comes out too long or too short.
PACE_MISMATCH = 2.5
MIN_SPEED, MAX_SPEED = 0.25, 4.0  # a voice's speaking-rate factor; past these, speech is no longer speech

_FRAME = 0.020
_HOP = 0.010
_SEARCH = 0.250
_QUIET_DB = 20.0
_MIN_PAUSE = 0.060
_GOOD_PAUSE = 0.100
_FADE = 0.008
_NAME_RE = re.compile(r"^[^\W\d][\w.'\- ]{0,31}$")


@dataclass(frozen=True)
class Voice:
    speaker: str
    audio: Path | None
    text: str | None
    language: str | None
    speed: float | None
    instruct: str | None


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


# ---------------------------------------------------------------------------------------------------------
# Voice sources


def load_voices(voices_toml: Path | None, voice_args: list[str], voice_text_args: list[str]) -> dict[str, Voice]:
    """Merge voices.toml, then --voice, then --voice-text (later sources override earlier ones)."""
    voices: dict[str, Voice] = {}
    if voices_toml is not None:
        voices.update(_read_voices_toml(Path(voices_toml)))
    for arg in voice_args:
        speaker, audio = _split_voice_arg(arg)
        old = voices.get(speaker)
        # New audio makes any earlier transcript wrong; language and speed still describe the speaker.
        voices[speaker] = Voice(
            speaker, audio, None, old.language if old else None, old.speed if old else None, None
        )
    for arg in voice_text_args:
        speaker, text = _split_voice_text_arg(arg, voices)
        old = voices.get(speaker)
        if old is None or old.audio is None:
            known = ", ".join(sorted(voices)) or "none"
            raise OmnidubError(
                f"--voice-text {_short(arg)}: voice {speaker!r} has no reference audio to go with the transcript "
                f"(voices with audio: {known}); add --voice {'' if speaker == DEFAULT_SPEAKER else speaker + '='}FILE"
            )
        voices[speaker] = Voice(speaker, old.audio, text, old.language, old.speed, old.instruct)
    return voices


def voice_for(speaker: str, voices: dict[str, Voice]) -> Voice:
    """The voice for a speaker: exact name, then case-insensitive, then the default voice."""
    if speaker in voices:
        return voices[speaker]
    folded = [v for name, v in voices.items() if name.casefold() == speaker.casefold()]
    if len(folded) == 1:
        return folded[0]
    if DEFAULT_SPEAKER in voices:
        return voices[DEFAULT_SPEAKER]
    known = ", ".join(sorted(voices)) if voices else "none"
    raise OmnidubError(
        f"no voice for speaker {speaker!r} and no default voice (known voices: {known}); "
        f"add --voice {speaker}=FILE, a default --voice FILE, or a [{speaker}] table in voices.toml"
    )


def _read_voices_toml(path: Path) -> dict[str, Voice]:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8-sig"))
    except FileNotFoundError:
        raise OmnidubError(f"{path}: no such voices file") from None
    except UnicodeDecodeError:
        raise OmnidubError(f"{path}: not UTF-8 text") from None
    except tomllib.TOMLDecodeError as exc:
        raise OmnidubError(f"{path}: not valid TOML: {exc}") from None
    voices = {}
    for speaker, table in data.items():
        where = f"{path}: [{speaker}]"
        if not isinstance(table, dict):
            raise OmnidubError(f"{where}: expected a table like [{speaker}] with audio = ... and text = ..., got a plain value")
        unknown = sorted(set(table) - set(VOICE_KEYS))
        if unknown:
            raise OmnidubError(f"{where}: unknown key(s) {', '.join(unknown)}; known keys: {', '.join(VOICE_KEYS)}")
        for key in ("audio", "text", "language", "instruct"):
            if key in table and not isinstance(table[key], str):
                raise OmnidubError(f"{where}: {key} must be a string")
        if table.get("language"):
            check_language(table["language"], f"{where}: language")
        if "audio" not in table and "instruct" not in table:
            raise OmnidubError(f"{where}: needs audio = \"file\" (with text = \"transcript\") or instruct = \"voice description\"")
        speed = table.get("speed")
        if speed is not None and (isinstance(speed, bool) or not isinstance(speed, (int, float))
                                  or not MIN_SPEED <= speed <= MAX_SPEED):
            raise OmnidubError(f"{where}: speed must be a number from {MIN_SPEED:g} to {MAX_SPEED:g}, got {speed!r}")
        audio = None
        if "audio" in table:
            audio = Path(table["audio"]).expanduser()
            if not audio.is_absolute():
                audio = path.parent / audio
            if not audio.is_file():
                raise OmnidubError(f"{where}: audio file not found: {audio}")
        text = table.get("text")
        if text is not None and not text.strip():
            text = None
        voices[speaker] = Voice(
            speaker, audio, text, table.get("language"), float(speed) if speed is not None else None, table.get("instruct")
        )
    return voices


def _split_voice_arg(arg: str) -> tuple[str, Path]:
    if Path(arg).expanduser().is_file():
        return DEFAULT_SPEAKER, Path(arg).expanduser()
    if "=" in arg:
        speaker, ref = arg.split("=", 1)
        speaker = speaker.strip()
        if speaker and "/" not in speaker and "\\" not in speaker and (Path(ref).expanduser().is_file() or _NAME_RE.match(speaker)):
            ref_path = Path(ref).expanduser()
            if not ref_path.is_file():
                raise OmnidubError(f"--voice {speaker}=...: audio file not found: {ref}")
            return speaker, ref_path
    raise OmnidubError(f"--voice: audio file not found: {arg} (use --voice FILE or --voice SPEAKER=FILE)")


def _split_voice_text_arg(arg: str, voices: dict[str, Voice]) -> tuple[str, str]:
    if "=" in arg:
        speaker, text = arg.split("=", 1)
        if speaker in voices:
            return speaker, text.strip()
        if re.fullmatch(r"[^\W\d][\w.'\-]{0,31}", speaker):
            known = ", ".join(sorted(voices)) or "none"
            raise OmnidubError(
                f"--voice-text {_short(arg)}: no voice named {speaker!r} (known voices: {known}); "
                f"to give the default voice a transcript containing '=', write --voice-text {DEFAULT_SPEAKER}=TEXT"
            )
    return DEFAULT_SPEAKER, arg.strip()


def _short(text: str, limit: int = 48) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


# ---------------------------------------------------------------------------------------------------------
# Reference preparation


def load_audio(path: Path, sample_rate: int) -> np.ndarray:
    """Decode any common audio file to mono float32 at `sample_rate` (soundfile, else PyAV)."""
    path = Path(path)
    if not path.is_file():
        raise OmnidubError(f"audio file not found: {path}")
    try:
        import soundfile

        data, rate = soundfile.read(str(path), dtype="float32", always_2d=True)
        audio = data.mean(axis=1)
    except Exception:  # formats libsndfile lacks (mp3 on old builds, m4a/aac): decode with PyAV
        audio, rate = _decode_with_av(path)
    if rate != sample_rate and audio.size:
        import soxr

        audio = soxr.resample(audio, rate, sample_rate)
    return np.ascontiguousarray(audio, dtype=np.float32)


def _decode_with_av(path: Path) -> tuple[np.ndarray, int]:
    import av

    try:
        with av.open(str(path)) as container:
            if not container.streams.audio:
                raise OmnidubError(f"{path}: has no audio stream")
            stream = container.streams.audio[0]
            rate = stream.rate or stream.codec_context.sample_rate
            resampler = av.AudioResampler(format="flt", layout="mono", rate=rate)
            chunks = []
            for frame in container.decode(stream):
                chunks.extend(f.to_ndarray().reshape(-1) for f in resampler.resample(frame))
            chunks.extend(f.to_ndarray().reshape(-1) for f in resampler.resample(None))
    except OmnidubError:
        raise
    except Exception as exc:
        raise OmnidubError(f"{path}: cannot decode audio ({str(exc).splitlines()[0] if str(exc) else type(exc).__name__})") from None
    return (np.concatenate(chunks) if chunks else np.zeros(0, np.float32)), int(rate)


def prepare_reference(voice: Voice, *, sample_rate: int, options: VoiceOptions, asr: Asr | None) -> Reference:
    """Load a voice's reference, trim it to the preset's length at a word boundary, and fix its transcript."""
    if voice.audio is None:
        raise OmnidubError(f"voice {voice.speaker!r} has no reference audio (it is an instruct voice)")
    audio = load_audio(voice.audio, sample_rate)
    if not np.isfinite(audio).all():
        raise OmnidubError(f"{voice.audio}: reference for {voice.speaker!r} has samples that are not numbers (NaN or infinity); export it again")
    seconds = audio.size / sample_rate
    if seconds < MIN_REFERENCE_SECONDS:
        raise OmnidubError(
            f"{voice.audio}: reference for {voice.speaker!r} is {seconds:.2f} s; OmniVoice distorts under "
            f"{MIN_REFERENCE_SECONDS:.0f} s, use 3-10 s of clean speech"
        )
    if _frame_rms(audio, sample_rate).max(initial=0.0) < 1e-4:
        raise OmnidubError(f"{voice.audio}: reference for {voice.speaker!r} is silent")
    notes = []
    if seconds > LONG_REFERENCE_SECONDS:
        notes.append(f"reference is {seconds:.1f} s; over {LONG_REFERENCE_SECONDS:.0f} s degrades cloning, 3-10 s works best")

    if options.reference_seconds > 0:
        target, (low, high) = options.reference_seconds, options.reference_window
    else:
        target, (low, high) = WHOLE_REFERENCE_SECONDS, (WHOLE_REFERENCE_SECONDS * 0.75, WHOLE_REFERENCE_SECONDS)

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
        text = voice.text or transcript or _transcribe_whole(voice, audio, sample_rate, asr)
        notes.append(f"kept whole ({seconds:.1f} s): {why}")
        if not voice.text:
            notes.append(f"transcript by ASR ({asr.name}): {text!r}")
        return result(audio, text, False, provisional)

    if asr is None:
        if not voice.text:
            raise OmnidubError(_no_transcript(voice))
        return keep_whole("no ASR model to find word boundaries", provisional=True)
    try:
        heard = asr.transcribe(audio, sample_rate, language=whisper_language(voice.language), word_timestamps=True)
    except OmnidubError as exc:
        if not voice.text:
            raise
        return keep_whole(f"no ASR model to find word boundaries ({exc})", provisional=True)

    cuts = _pause_cuts(audio, sample_rate, heard.words, low, high, target)
    if not cuts:
        return keep_whole(f"no pause between words inside {low:g}-{high:g} s", heard.text)
    for boundary, cut in cuts:
        if voice.text:
            text = _cut_transcript(voice.text, heard.words, boundary)
            if text is None:
                continue
        else:
            text = " ".join(w.text for w in heard.words[: boundary + 1])
        clip = _fade_out(audio[: int(round(cut * sample_rate))].copy(), sample_rate)
        if not _ends_with(asr, clip, sample_rate, voice, heard.words[boundary]):
            continue
        after = heard.words[boundary].text
        notes.append(f"trimmed {seconds:.1f} s to {cut:.2f} s at a pause after {after!r}")
        if not voice.text:
            notes.append(f"transcript by ASR ({asr.name}): {text!r}")
        return result(clip, text, True)
    if voice.text:
        return keep_whole("the given transcript does not match the recognised words at any pause", heard.text)
    return keep_whole("no pause where the clip's last word could be confirmed", heard.text)


def _pace_mismatch(text: str, seconds: float) -> str | None:
    """A warning when a transcript cannot plausibly be what its audio says (far too long or short for it)."""
    usual = natural_seconds(text)  # upstream's length for the text at its default pace, language-aware
    if usual <= 0 or 1 / PACE_MISMATCH <= seconds / usual <= PACE_MISMATCH:
        return None
    how = "too long" if seconds < usual else "too short"
    return (f"warning: the transcript looks {how} for {seconds:.1f} s of audio (it reads in about {usual:.1f} s); "
            "check that it is exactly what the reference says, or every line's length will be off")


def _ends_with(asr: Asr, clip: np.ndarray, sample_rate: int, voice: Voice, word: Word) -> bool:
    # Word times can be off by a whole short word; hearing the clip again confirms where it really ends.
    heard = asr.transcribe(clip, sample_rate, language=whisper_language(voice.language)).text.split()
    return bool(heard) and _norm(heard[-1]) == _norm(word.text)


def _no_transcript(voice: Voice) -> str:
    return (
        f"voice {voice.speaker!r} has no transcript and no ASR model is available to make one; "
        f"add text = \"...\" in voices.toml or --voice-text {voice.speaker}=TEXT"
    )


def _transcribe_whole(voice: Voice, audio: np.ndarray, sample_rate: int, asr: Asr | None) -> str:
    if asr is None:
        raise OmnidubError(_no_transcript(voice))
    text = asr.transcribe(audio, sample_rate, language=whisper_language(voice.language)).text.strip()
    if not text:
        raise OmnidubError(f"{voice.audio}: no speech recognised in the reference for {voice.speaker!r}; give its transcript")
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
    quiet = rms < np.percentile(rms, 90) * 10 ** (-_QUIET_DB / 20)
    centre = np.arange(rms.size) * _HOP + _FRAME / 2
    predicted = np.array([(words[i].end + words[i + 1].start) / 2 for i in range(len(words) - 1)])
    best: dict[int, tuple[float, float]] = {}
    # Pauses come from the audio, not from word times (off by 50-150 ms): each pause is then given to the
    # nearest recognised boundary, so a pause is never claimed by the word before the one it follows.
    for first, last in _runs(quiet):
        if first == 0 or last == rms.size - 1:
            continue  # leading or trailing silence is not between two words
        pause = (last - first) * _HOP + _FRAME
        if pause < _MIN_PAUSE:
            continue
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


# ---------------------------------------------------------------------------------------------------------
# Prompt cache


def voice_prompt_key(voice: Voice, options: VoiceOptions, identity: dict) -> str:
    """The prompt key of a voice (see :func:`omnidub.keys.prompt_key`)."""
    return prompt_key(voice.audio, voice.text, voice.language, voice.instruct, options, identity)


class PromptCache:
    """Encoded voice prompts on disk (``.npz``, no model classes), one file per key, written atomically."""

    def __init__(self, folder: Path) -> None:
        self.folder = Path(folder)

    def path(self, key: str) -> Path:
        return self.folder / f"{key}.npz"

    def get(self, key: str) -> Prompt | None:
        """The cached prompt for `key`, or None (also when the file is unreadable)."""
        path = self.path(key)
        if not path.is_file():
            return None
        try:
            return Prompt.load(path)
        except Exception:  # noqa: BLE001 - a truncated or foreign file is a miss; it gets rewritten
            return None

    def put(self, key: str, prompt: Prompt) -> Path:
        """Store a prompt; readers never see a half-written file."""
        path = self.path(key)
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            write_bytes_atomic(path, prompt.to_bytes())
        except OSError as exc:
            raise OmnidubError(f"cannot write the voice prompt cache in {self.folder}: {exc.strerror or exc}") from exc
        return path


def voice_prompt(
    voice: Voice,
    *,
    cache: PromptCache | None,
    options: VoiceOptions,
    key: str,
    sample_rate: int,
    asr: Asr | None,
    encode: Callable[[Reference], Prompt],
) -> tuple[Prompt, Reference | None]:
    """A voice's encoded prompt from the cache, else prepared, encoded with `encode` and stored.

    Returns (prompt, reference); reference is None on a cache hit, which touches neither ASR nor audio decoding.
    A prompt kept whole for want of an ASR model is prepared again once that model is available.
    """
    prompt = cache.get(key) if cache is not None else None
    if prompt is not None and not (prompt.provisional and asr is not None and asr.available()):
        return prompt, None
    reference = prepare_reference(voice, sample_rate=sample_rate, options=options, asr=asr)
    prompt = replace(encode(reference), note=reference.note, provisional=reference.provisional)
    if cache is not None:
        cache.put(key, prompt)
    return prompt, reference
