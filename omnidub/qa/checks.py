"""Checks of a rendered output folder: intelligibility, voice, timing and level of every line."""

from __future__ import annotations

import difflib
import functools
import json
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import jiwer
import numpy as np
import soundfile as sf

from omnidub.asr import Asr, whisper_language
from omnidub.errors import OmnidubError
from omnidub.keys import file_digest
from omnidub.config import QaOptions
from omnidub.qa.voice import SpeakerEncoder, VoiceMatch

# OmniVoice's evaluation scores these languages per character. Where spaces carry no meaning they are
# dropped; elsewhere they stay as a character of their own.
CER_LANGUAGES_WITHOUT_SPACES = frozenset({"zh", "yue", "ja"})
CER_LANGUAGES_WITH_SPACES = frozenset({"ko", "th", "ar", "vi", "hi", "el"})

# Flags fail a line.
FLAG_LABELS = {
    "wer": "too many word errors",
    "cer": "too many character errors",
    "voice": "does not sound like its speaker",
    "overflow": "runs past the last moment it may end",
    "overlap": "runs into a later line",
    "clipping": "clipped samples",
    "silent": "mostly silent",
    "lead-silence": "long silence before speech",
    "trail-silence": "long silence after speech",
    "nan": "NaN or infinite samples",
    "render-failed": "render failed",
    "missing-file": "segment file missing",
}
# Marks say something about a line without failing it.
MARK_LABELS = {
    "edited": "the file no longer matches the render",
    "unscored": "words not scored",
}


@dataclass(frozen=True)
class QaSettings:
    """Thresholds a line is held to."""

    # The thresholds a render's preset sets, unless the caller gives others.
    max_wer: float = QaOptions().max_wer
    max_cer: float = QaOptions().max_cer
    min_voice_similarity: float = QaOptions().min_voice_similarity
    # Under this much speech the embedding is too noisy for the similarity threshold (README, voice check):
    # such a line fails only when it sounds closer to another speaker than to its own.
    min_voice_seconds: float = 1.0
    clip_level: float = 0.999
    # A peak-normalised line touches full scale once or twice; clipping flattens runs of samples.
    clip_min_samples: int = 3
    silence_dbfs: float = -40.0
    frame_seconds: float = 0.02
    max_silent_fraction: float = 0.8
    max_edge_silence: float = 0.5
    # Half a 25 Hz codec frame: rounding, not a real overrun.
    timing_tolerance: float = 0.02
    # The manifest keeps lengths to the millisecond; more than this is a different file.
    edit_tolerance: float = 0.01


@dataclass(frozen=True)
class LineCheck:
    """What QA found for one line; `transcript` and `error_rate` are None when it was not transcribed.

    `diff` aligns the user's own text with the words as heard: (kind, text, heard) pieces, kind being equal,
    substitute, delete or insert. `flags` fail the line; `marks` (edited, unscored) only inform."""

    index: int
    speaker: str
    text: str
    language: str | None
    file: str | None
    status: str
    transcript: str | None
    metric: str
    errors: int
    reference_units: int
    error_rate: float | None
    flags: tuple[str, ...]
    passed: bool
    note: str
    start: float
    slot: float
    duration: float
    overflow: float
    overlap: float
    peak: float
    rms: float
    clipped_samples: int
    silent_fraction: float
    leading_silence: float
    trailing_silence: float
    diff: tuple[tuple[str, str, str], ...] = ()
    marks: tuple[str, ...] = ()
    overlap_line: int | None = None  # the later line it runs into
    voice: VoiceMatch | None = None
    start_tc: str | None = None  # SMPTE HH:MM:SS:FF at the render's frame rate, from the manifest


@dataclass(frozen=True)
class CorpusFigure:
    """Errors summed over every transcribed line scored with one metric, over their reference units."""

    metric: str
    errors: int
    units: int
    lines: int

    @property
    def rate(self) -> float | None:
        return self.errors / self.units if self.units else None


@dataclass(frozen=True)
class SpeakerVoice:
    """How close one speaker's lines are to their reference."""

    speaker: str
    lines: int  # lines whose voice was measured
    mean_similarity: float | None
    min_similarity: float | None
    failed: int  # lines flagged `voice`


@dataclass(frozen=True)
class Report:
    """QA of one output folder."""

    out_dir: Path
    asr_model: str
    lines: tuple[LineCheck, ...]
    wer: CorpusFigure
    cer: CorpusFigure
    passed: bool
    failed: int
    settings: QaSettings
    speaker_model: str | None = None
    voices: tuple[SpeakerVoice, ...] = ()
    notes: tuple[str, ...] = ()
    render_model: str | None = None
    preset: str | None = None
    mix: str | None = None  # the mix file, relative to out_dir, when it exists
    program_seconds: float | None = None


# --- scoring -------------------------------------------------------------------------------------


def metric_for(language: str | None) -> str:
    """The metric a language is scored with: "cer" where OmniVoice scores per character, else "wer"."""
    code = whisper_language(language)
    return "cer" if code in CER_LANGUAGES_WITHOUT_SPACES | CER_LANGUAGES_WITH_SPACES else "wer"


_normalizers: dict[str, Callable[[str], str]] = {}


def _normalize(text: str, code: str | None) -> str:
    kind = "en" if code == "en" else "basic"
    if kind not in _normalizers:
        if kind == "en":
            from whisper_normalizer.english import EnglishTextNormalizer

            _normalizers[kind] = EnglishTextNormalizer()
        else:
            from whisper_normalizer.basic import BasicTextNormalizer

            _normalizers[kind] = BasicTextNormalizer()
    normalized = " ".join(_normalizers[kind](text).split())
    return normalized.replace(" ", "") if code in CER_LANGUAGES_WITHOUT_SPACES else normalized


@dataclass(frozen=True)
class _Score:
    metric: str
    errors: int
    units: int


def _score(text: str, transcript: str, language: str | None) -> _Score:
    code = whisper_language(language)
    metric = metric_for(code)
    reference, hypothesis = _normalize(text, code), _normalize(transcript, code)
    if not reference and not hypothesis:
        return _Score(metric, 0, 0)
    if metric == "cer":
        out = jiwer.process_characters(reference, hypothesis)
    else:
        out = jiwer.process_words(reference, hypothesis)
    ref_units = out.references[0] if reference else []
    return _Score(metric, out.substitutions + out.deletions + out.insertions, len(ref_units))


_WORD_CHARS = re.compile(r"\w+")


def _display_diff(text: str, transcript: str, language: str | None) -> tuple[tuple[str, str, str], ...]:
    """The user's text against the words as heard, both as written; a difference the scorer's normaliser
    erases ("9" and "nine", "let's" and "let us") is shown as equal."""
    code = whisper_language(language)
    per_character = code in CER_LANGUAGES_WITHOUT_SPACES
    ours = [c for c in text if not c.isspace()] if per_character else text.split()
    heard = [c for c in transcript if not c.isspace()] if per_character else transcript.split()
    glue = "" if per_character else " "

    def key(token: str) -> str:
        return "".join(_WORD_CHARS.findall(token.casefold()))

    matcher = difflib.SequenceMatcher(None, [key(t) for t in ours], [key(t) for t in heard], autojunk=False)
    pieces: list[tuple[str, str, str]] = []
    for op, a0, a1, b0, b1 in matcher.get_opcodes():
        mine, theirs = glue.join(ours[a0:a1]), glue.join(heard[b0:b1])
        if op == "equal" or _normalize(mine, code) == _normalize(theirs, code):
            kind = "equal"
        else:
            kind = {"replace": "substitute", "delete": "delete", "insert": "insert"}[op]
        if pieces and pieces[-1][0] == kind:
            previous = pieces.pop()
            mine = glue.join(p for p in (previous[1], mine) if p)
            theirs = glue.join(p for p in (previous[2], theirs) if p)
        pieces.append((kind, mine, theirs))
    return tuple(pieces)


# --- audio ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Level:
    duration: float
    peak: float
    rms: float
    clipped_samples: int
    silent_fraction: float
    leading_silence: float
    trailing_silence: float
    finite: bool


def _read_segment(path: Path, index: int) -> tuple[np.ndarray, int]:
    try:
        data, rate = sf.read(str(path), dtype="float32", always_2d=True)
    except Exception as exc:  # libsndfile reports every decoding problem with its own exception types
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise OmnidubError(f"cannot read segment {path} (line {index}): {reason}") from exc
    return data, int(rate)


def _measure(data: np.ndarray, rate: int, settings: QaSettings) -> tuple[_Level, np.ndarray]:
    finite = bool(np.isfinite(data).all())
    if not finite:
        data = np.nan_to_num(data, nan=0.0, posinf=0.0, neginf=0.0)
    mono = data.mean(axis=1) if data.ndim == 2 else data
    duration = len(mono) / rate if rate else 0.0
    if len(mono) == 0:
        return _Level(0.0, 0.0, 0.0, 0, 1.0, 0.0, 0.0, finite), mono.astype(np.float32)
    magnitude = np.abs(data)
    peak = float(magnitude.max())
    clipped = int((magnitude >= settings.clip_level).sum())
    rms = float(np.sqrt(np.mean(np.square(mono, dtype=np.float64))))
    frame = max(1, int(round(settings.frame_seconds * rate)))
    count = math.ceil(len(mono) / frame)
    padded = np.zeros(count * frame, dtype=np.float64)
    padded[: len(mono)] = mono
    frame_rms = np.sqrt(np.mean(np.square(padded.reshape(count, frame)), axis=1))
    silent = frame_rms < 10 ** (settings.silence_dbfs / 20)
    loud = np.flatnonzero(~silent)
    if len(loud):
        leading = min(duration, float(loud[0]) * frame / rate)
        trailing = max(0.0, duration - float(loud[-1] + 1) * frame / rate)
    else:
        leading = trailing = duration
    level = _Level(duration, peak, rms, clipped, float(silent.mean()), leading, trailing, finite)
    return level, mono.astype(np.float32)


def _edits(entry: dict, path: Path, data: np.ndarray, rate: int, expected_rate: int | None,
           settings: QaSettings) -> list[str]:
    """How the file differs from what the render wrote (segments are mono, at the manifest's rate)."""
    found = []
    if expected_rate and rate != expected_rate:
        found.append(f"{rate} Hz, not {expected_rate} Hz")
    if data.shape[1] != 1:
        found.append(f"{data.shape[1]} channels, not 1")
    rendered = entry.get("duration")
    seconds = len(data) / rate if rate else 0.0
    if isinstance(rendered, (int, float)) and abs(seconds - rendered) > settings.edit_tolerance:
        found.append(f"{seconds:.2f} s long, not {rendered:.2f} s")
    recorded = entry.get("sha256")
    if not found and isinstance(recorded, str) and recorded and file_digest(path).hexdigest() != recorded:
        found.append("other audio of the same length")
    return found


# --- checking ------------------------------------------------------------------------------------


def _number(value, default: float = 0.0) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return default
    return number if math.isfinite(number) else default


def _overlap(entry: dict, spoken_end: float, slot_end: float, neighbours: list[dict]) -> tuple[float, int | None]:
    """How far the line runs into a later line, and which; another speaker's line counts only past the
    line's own slot, since overlapping slots are what the script asked for."""
    start, index, speaker = _number(entry.get("start")), entry.get("index"), entry.get("speaker")
    worst, which = 0.0, None
    for other in neighbours:
        other_start, other_index = _number(other.get("start")), other.get("index")
        if other_index == index:
            continue
        if other.get("speaker") == speaker:
            if (other_start, _number(other_index)) <= (start, _number(index)):
                continue
            bound = other_start
        else:
            if other_start <= start:
                continue
            bound = max(other_start, slot_end)
        if spoken_end - bound > worst:
            worst, which = spoken_end - bound, other_index
    return worst, which


def _room_end(entry: dict, end: float, program_seconds: float | None) -> tuple[float, str]:
    """The last moment the line may end, and what sets it."""
    # "limit" in manifests of omnidub 0.1; a null limit means nothing follows the line.
    key = "limit_at" if "limit_at" in entry else "limit"
    if key not in entry:
        return end, "its slot"
    if entry[key] is None:
        if program_seconds is None:
            return math.inf, ""
        return program_seconds, "the programme's end"
    return _number(entry[key], default=math.inf), "the silence after its slot"


def _untranscribed(entry: dict, flag: str, note: str) -> LineCheck:
    start, end = _number(entry.get("start")), _number(entry.get("end"))
    return LineCheck(
        index=int(entry["index"]), speaker=str(entry.get("speaker", "")), text=str(entry.get("text", "")),
        language=entry.get("language"), file=entry.get("file"), status=str(entry.get("status", "")),
        transcript=None, metric=metric_for(entry.get("language")), errors=0, reference_units=0, error_rate=None,
        flags=(flag,), passed=False, note=note, start=start, slot=max(0.0, end - start), duration=0.0,
        overflow=0.0, overlap=0.0, peak=0.0, rms=0.0, clipped_samples=0, silent_fraction=0.0,
        leading_silence=0.0, trailing_silence=0.0, start_tc=entry.get("start_tc"),
    )


def _validate_entry(entry, position: int) -> None:
    if not isinstance(entry, dict) or not isinstance(entry.get("index"), int) or not isinstance(entry.get("text"), str):
        raise OmnidubError(f"manifest line {position}: needs an integer 'index' and a 'text' string")


@dataclass(frozen=True)
class _Context:
    """What every line of one check shares."""

    out_dir: Path
    asr: Asr
    settings: QaSettings
    neighbours: list[dict]
    program_seconds: float | None
    sample_rate: int | None
    english_only: Callable[[], bool]
    encoder: SpeakerEncoder | None
    references: dict[str, np.ndarray]


def check_lines(
    out_dir: Path,
    manifest_lines: list[dict],
    asr: Asr,
    *,
    max_wer: float,
    max_cer: float,
    progress: Callable[[int, int, int], None] | None = None,
    all_lines: list[dict] | None = None,
    program_seconds: float | None = None,
    sample_rate: int | None = None,
    encoder: SpeakerEncoder | None = None,
    references: dict[str, Path] | None = None,
    min_voice_similarity: float = QaOptions().min_voice_similarity,
) -> list[LineCheck]:
    """Check the given manifest lines; `all_lines` (default: the same) supplies the lines that follow each one,
    `references` each speaker's reference recording for the voice check (needs `encoder`)."""
    settings = QaSettings(max_wer=max_wer, max_cer=max_cer, min_voice_similarity=min_voice_similarity)
    embeddings, _ = _reference_embeddings(encoder, references or {})
    return _check(Path(out_dir), manifest_lines, asr, settings, progress, all_lines, program_seconds, sample_rate,
                  encoder, embeddings)


def _reference_embeddings(encoder, references: dict[str, Path]) -> tuple[dict[str, np.ndarray], list[str]]:
    if encoder is None:
        return {}, []
    embeddings, notes = {}, []
    for speaker, path in references.items():
        try:
            embedding = encoder.embed_file(Path(path))
        except OmnidubError as exc:
            notes.append(f"voice of {speaker} not checked: {exc}")
            continue
        if embedding is None:
            notes.append(f"voice of {speaker} not checked: its reference {path} holds too little speech")
        else:
            embeddings[speaker] = embedding
    return embeddings, notes


def _check(out_dir, manifest_lines, asr, settings, progress, all_lines, program_seconds, sample_rate, encoder,
           embeddings) -> list[LineCheck]:
    for position, entry in enumerate(manifest_lines, 1):
        _validate_entry(entry, position)
    # Asked only when a non-English line comes up: it loads the model, which a folder of failed lines never needs.
    english_only = functools.cache(lambda: bool(getattr(asr, "english_only", lambda: False)()))
    context = _Context(out_dir, asr, settings, manifest_lines if all_lines is None else all_lines, program_seconds,
                       sample_rate, english_only, encoder, embeddings)
    checks: list[LineCheck] = []
    for done, entry in enumerate(manifest_lines, 1):
        checks.append(_check_one(entry, context))
        if progress is not None:
            progress(done, len(manifest_lines), entry["index"])
    return checks


def _check_one(entry: dict, context: _Context) -> LineCheck:
    settings = context.settings
    index = entry["index"]
    if entry.get("status") == "failed":
        return _untranscribed(entry, "render-failed", str(entry.get("error") or "render failed"))
    file = entry.get("file")
    path = context.out_dir / file if file else None
    if path is None or not path.is_file():
        return _untranscribed(entry, "missing-file", f"no segment file {file or '(none named)'}")

    data, rate = _read_segment(path, index)
    level, mono = _measure(data, rate, settings)
    marks: list[str] = []
    notes: list[str] = []
    edits = _edits(entry, path, data, rate, context.sample_rate, settings)
    if edits:
        marks.append("edited")
        notes.append("edited: " + ", ".join(edits))

    language = entry.get("language")
    code = whisper_language(language)
    transcript, score, diff = None, _Score(metric_for(code), 0, 0), ()
    if code not in (None, "en") and context.english_only():
        # An English-only model would hear English words in any speech and score them as errors.
        marks.append("unscored")
        notes.append(f"not scored: {context.asr.name} is an English-only model")
    else:
        try:
            heard = context.asr.transcribe(mono, rate, language=code)
        except ValueError:
            # A code this Whisper model lacks (yue before large-v3): let it detect one rather than refuse the line.
            heard = context.asr.transcribe(mono, rate, language=None)
        # An unlabelled line is scored in the language Whisper heard, and reported as such.
        language = language or heard.language or None
        transcript = heard.text
        score = _score(entry["text"], heard.text, language)
        diff = _display_diff(entry["text"], heard.text, language)
    error_rate = score.errors / max(score.units, 1) if transcript is not None else None

    start, end = _number(entry.get("start")), _number(entry.get("end"), default=math.inf)
    slot = end - start if math.isfinite(end) else level.duration
    spoken_end = start + level.duration
    # A render may run a line into the silence after its slot, up to its limit; only past that is it late.
    room_end, room = _room_end(entry, end, context.program_seconds)
    overflow = max(0.0, spoken_end - room_end) if math.isfinite(room_end) else 0.0
    overlap, overlap_line = _overlap(entry, spoken_end, start + slot, context.neighbours)

    voice = None
    speaker = str(entry.get("speaker", ""))
    if context.encoder is not None and speaker in context.references and level.finite:
        voice = context.encoder.match(mono, rate, speaker, context.references)

    flags: list[str] = []
    limit = settings.max_cer if score.metric == "cer" else settings.max_wer
    if error_rate is not None and error_rate > limit:
        flags.append(score.metric)
    if voice is not None and _wrong_voice(voice, settings):
        flags.append("voice")
        notes.append(_voice_note(voice, speaker, settings))
    if overflow > settings.timing_tolerance:
        flags.append("overflow")
        notes.append(f"runs {overflow:.2f} s past {room}")
    if overlap > settings.timing_tolerance:
        flags.append("overlap")
        notes.append(f"runs {overlap:.2f} s into line {overlap_line}")
    if not level.finite:
        flags.append("nan")
    if level.clipped_samples >= settings.clip_min_samples:
        flags.append("clipping")
    if level.silent_fraction >= settings.max_silent_fraction:
        flags.append("silent")
    else:
        if level.leading_silence > settings.max_edge_silence:
            flags.append("lead-silence")
        if level.trailing_silence > settings.max_edge_silence:
            flags.append("trail-silence")

    explained = {"voice", "overflow", "overlap"}
    note = "; ".join([FLAG_LABELS[f] for f in flags if f not in explained] + notes)
    return LineCheck(
        index=index, speaker=speaker, text=entry["text"], language=language, file=file,
        status=str(entry.get("status", "")), transcript=transcript, metric=score.metric, errors=score.errors,
        reference_units=score.units, error_rate=error_rate, flags=tuple(flags), passed=not flags,
        note=note, start=start, slot=slot, duration=level.duration,
        overflow=overflow, overlap=overlap, peak=level.peak, rms=level.rms, clipped_samples=level.clipped_samples,
        silent_fraction=level.silent_fraction, leading_silence=level.leading_silence,
        trailing_silence=level.trailing_silence, diff=diff, marks=tuple(marks), overlap_line=overlap_line, voice=voice,
        start_tc=entry.get("start_tc"),
    )


def _wrong_voice(voice: VoiceMatch, settings: QaSettings) -> bool:
    if voice.margin is not None and voice.margin < 0:
        return True
    return voice.speech_seconds >= settings.min_voice_seconds and voice.similarity < settings.min_voice_similarity


def _voice_note(voice: VoiceMatch, speaker: str, settings: QaSettings) -> str:
    if voice.margin is not None and voice.margin < 0:
        return f"sounds like {voice.nearest} ({voice.nearest_similarity:.2f}) more than {speaker} ({voice.similarity:.2f})"
    return f"voice similarity to {speaker} {voice.similarity:.2f}, below {settings.min_voice_similarity:.2f}"


def _corpus(lines: tuple[LineCheck, ...], metric: str) -> CorpusFigure:
    scored = [c for c in lines if c.transcript is not None and c.metric == metric]
    return CorpusFigure(metric, sum(c.errors for c in scored), sum(c.reference_units for c in scored), len(scored))


def _speaker_voices(lines: tuple[LineCheck, ...]) -> tuple[SpeakerVoice, ...]:
    out = []
    for speaker in dict.fromkeys(c.speaker for c in lines):
        measured = [c.voice.similarity for c in lines if c.speaker == speaker and c.voice is not None]
        failed = sum("voice" in c.flags for c in lines if c.speaker == speaker)
        out.append(SpeakerVoice(
            speaker, len(measured), float(np.mean(measured)) if measured else None,
            min(measured) if measured else None, failed,
        ))
    return tuple(out)


def read_manifest(out_dir: Path) -> dict:
    """The render manifest of an output folder, checked to hold a `lines` array."""
    path = Path(out_dir) / "manifest.json"
    if not path.is_file():
        raise OmnidubError(f"no manifest.json in {out_dir}; render into this folder first")
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise OmnidubError(f"cannot read {path}: {exc}") from exc
    if not isinstance(manifest, dict) or not isinstance(manifest.get("lines"), list):
        raise OmnidubError(f"{path} has no 'lines' array")
    return manifest


def manifest_references(manifest: dict, out_dir: Path) -> dict[str, Path]:
    """Each speaker's reference recording as the render recorded it (manifest `voices`: {speaker: {audio}})."""
    voices = manifest.get("voices")
    found = {}
    if isinstance(voices, dict):
        for speaker, voice in voices.items():
            audio = voice.get("audio") if isinstance(voice, dict) else None
            if isinstance(audio, str) and audio:
                found[str(speaker)] = Path(out_dir) / audio  # an absolute path stays as it is
    return found


def _threshold(value, name: str) -> float:
    number = _number(value, default=-1.0)
    if number < 0:
        raise OmnidubError(f"{name} must be a number >= 0, got {value!r}")
    return number


def _model_name(model) -> str | None:
    if isinstance(model, dict):
        name = model.get("id") or model.get("name")
        return str(name) if name else None
    return str(model) if model else None


def run_qa(
    out_dir: Path,
    *,
    asr: Asr,
    max_wer: float | None = None,
    max_cer: float | None = None,
    progress: Callable[[int, int, int], None] | None = None,
    encoder: SpeakerEncoder | None = None,
    references: dict[str, Path] | None = None,
    min_voice_similarity: float | None = None,
) -> Report:
    """Check every line of an output folder's manifest; thresholds default to the manifest's settings.

    The voice check (with `encoder`) compares each line with its speaker's reference recording: `references`
    first, else the manifest's `voices`; speakers with neither are left out with a note."""
    out_dir = Path(out_dir)
    manifest = read_manifest(out_dir)
    saved = manifest.get("settings") if isinstance(manifest.get("settings"), dict) else {}
    default = QaSettings()

    def setting(given, name):
        return _threshold(given if given is not None else saved.get(name, getattr(default, name)), name)

    settings = QaSettings(
        max_wer=setting(max_wer, "max_wer"), max_cer=setting(max_cer, "max_cer"),
        min_voice_similarity=setting(min_voice_similarity, "min_voice_similarity"),
    )
    # Lines left out by --only have no audio yet: nothing to hear, nothing to fail.
    lines = [e for e in manifest["lines"] if not (isinstance(e, dict) and e.get("status") == "pending")]
    speakers = list(dict.fromkeys(str(e.get("speaker", "")) for e in lines if isinstance(e, dict)))
    notes: list[str] = []
    embeddings: dict[str, np.ndarray] = {}
    if encoder is not None:
        known = {**manifest_references(manifest, out_dir), **(references or {})}
        embeddings, notes = _reference_embeddings(encoder, {s: known[s] for s in speakers if s in known})
        missing = [s for s in speakers if s not in known]
        if missing:
            notes.append(f"voice of {', '.join(missing)} not checked: the manifest records no reference recording")
    program = manifest.get("program_seconds")
    program = _number(program) if isinstance(program, (int, float)) else None
    rate = manifest.get("sample_rate") if isinstance(manifest.get("sample_rate"), int) else None
    checks = tuple(_check(out_dir, lines, asr, settings, progress, None, program, rate, encoder, embeddings))
    unscored = [c for c in checks if "unscored" in c.marks]
    if unscored:
        languages = ", ".join(sorted({c.language or "?" for c in unscored}))
        notes.append(
            f"{len(unscored)} line(s) in {languages} not scored: ASR model {asr.name} is English-only; "
            "pass --asr-model with a multilingual model (e.g. small)"
        )
    mix = manifest.get("mix")
    failed = sum(not c.passed for c in checks)
    return Report(
        out_dir=out_dir, asr_model=asr.name, lines=checks, wer=_corpus(checks, "wer"), cer=_corpus(checks, "cer"),
        passed=failed == 0, failed=failed, settings=settings,
        speaker_model=None if encoder is None else encoder.name, voices=_speaker_voices(checks) if encoder else (),
        notes=tuple(notes), render_model=_model_name(manifest.get("model")),
        preset=saved.get("name") if isinstance(saved.get("name"), str) else None,
        mix=mix if isinstance(mix, str) and (out_dir / mix).is_file() else None, program_seconds=program,
    )
