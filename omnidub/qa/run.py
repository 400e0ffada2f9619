"""The run: every line of a rendered folder heard, measured and held to its thresholds, into one Report."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
import soundfile as sf

from omnidub.asr import NO_JUDGE, Asr, default_asr_model, whisper_language
from omnidub.config import QaOptions
from omnidub.errors import OmnidubError, first_line
from omnidub.qa.kept import KeptTranscripts
from omnidub.qa.levels import edits, level_failures, measure, read_segment
from omnidub.qa.manifest import (
    manifest_references,
    model_name,
    number,
    read_manifest,
    rendered_end,
    threshold,
    validate_entry,
)
from omnidub.qa.results import FLAG_LABELS, CorpusFigure, LineCheck, QaSettings, Report
from omnidub.qa.scoring import Score, display_diff, metric_for, score
from omnidub.qa.timing import check_timing
from omnidub.qa.verdict import WORDS, Finding, judge
from omnidub.qa.voice import (
    SpeakerEncoder,
    match_voice,
    reference_embeddings,
    speaker_voices,
    unmeasured_reason,
    voice_note,
    wrong_voice,
)

Progress = Callable[[int, int, int], None]
ASR_FAILED = "words not scored: the ASR could not run"  # on this clip: worth asking again later
# Reasons a line's voice was not measured while the voice check ran.
NO_AUDIO = "no audio"
NO_REFERENCE = "no usable reference for its speaker"


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
    kept: KeptTranscripts | None


def check_lines(
    out_dir: Path,
    manifest_lines: list[dict],
    asr: Asr,
    *,
    max_wer: float,
    max_cer: float,
    progress: Progress | None = None,
    all_lines: list[dict] | None = None,
    program_seconds: float | None = None,
    sample_rate: int | None = None,
    encoder: SpeakerEncoder | None = None,
    references: dict[str, Path] | None = None,
    min_voice_similarity: float = QaOptions().min_voice_similarity,
    kept: KeptTranscripts | None = None,
) -> list[LineCheck]:
    """Check the given manifest lines; `all_lines` (default: the same) supplies the lines that follow each one,
    `references` each speaker's reference recording for the voice check (needs `encoder`), `kept` what the ASR
    heard in audio before (none: every line is transcribed)."""
    settings = QaSettings(max_wer=max_wer, max_cer=max_cer, min_voice_similarity=min_voice_similarity)
    embeddings, _ = reference_embeddings(encoder, references or {})
    return _check(
        Path(out_dir),
        manifest_lines,
        asr,
        settings,
        progress,
        all_lines,
        program_seconds,
        sample_rate,
        encoder,
        embeddings,
        kept,
    )


def _check(
    out_dir,
    manifest_lines,
    asr,
    settings,
    progress,
    all_lines,
    program_seconds,
    sample_rate,
    encoder,
    embeddings,
    kept,
) -> list[LineCheck]:
    for position, entry in enumerate(manifest_lines, 1):
        validate_entry(entry, position)
    # Asked only when a non-English line comes up: it loads the model, which a folder of failed lines never needs.
    english_only = functools.cache(lambda: bool(getattr(asr, "english_only", lambda: False)()))
    context = _Context(
        out_dir,
        asr,
        settings,
        manifest_lines if all_lines is None else all_lines,
        program_seconds,
        sample_rate,
        english_only,
        encoder,
        embeddings,
        kept,
    )
    checks: list[LineCheck] = []
    for done, entry in enumerate(manifest_lines, 1):
        checks.append(_check_one(entry, context))
        if progress is not None:
            progress(done, len(manifest_lines), entry["index"])
    return checks


@dataclass(frozen=True)
class Heard:
    """What the ASR model heard in a clip and how it scores against the text (``unscored``: why it was not)."""

    language: str | None
    transcript: str | None
    score: Score
    diff: tuple[tuple[str, str, str], ...]
    unscored: str | None  # why the words were not scored
    no_judge: bool = False  # not scored because no judge here hears the line's language


def english_only_reason(asr_name: str, language: str | None) -> str:
    return f"words not scored: {asr_name} is an English-only model and the line is in {language}"


def no_judge_reason(language: str | None, why: str) -> str:
    return f"words not scored: no judge for {language or 'its language'} here ({why})"


def _labelled(language: str | None) -> bool:
    """Whether the line names a language (OmniVoice's "none" names none)."""
    return bool(language and language.strip() and language.strip().lower() != "none")


def hear(
    asr: Asr,
    text: str,
    language: str | None,
    mono: np.ndarray,
    rate: int,
    english_only: Callable[[], bool],
    *,
    silence: float | None = None,
    kept: KeptTranscripts | None = None,
) -> Heard:
    """Transcribe a clip of ``text`` and score it by the language's rule (QA's and the paired eval's one way), or
    say why its words could not be scored: no speech heard (``silence``: the dBFS level the clip never rose above,
    None when it did), no ASR model for the line's language, or an ASR that could not run on it (a model that
    cannot load is the user's to fix: it raises). ``english_only`` is asked only for a line in another language;
    ``kept`` (if given) answers for audio this model heard before, and keeps what it hears now."""
    code = whisper_language(language)

    def unscored(why: str, no_judge: bool = False) -> Heard:
        return Heard(language, None, Score(metric_for(code), 0, 0), (), why, no_judge)

    if silence is not None:
        return unscored(f"words not scored: no speech heard (nothing above {silence:g} dBFS)")
    if code is None and _labelled(language):
        return unscored(f"words not scored: no ASR model for its language ({language}: Whisper has none)", True)
    if asr.name == NO_JUDGE:
        return unscored(no_judge_reason(language, getattr(asr, "why", "--judge-model none")), True)
    if code not in (None, "en") and english_only():
        # An English-only model would hear English words in any speech and score them as errors.
        return unscored(english_only_reason(asr.name, language), True)
    try:
        heard = asr.transcribe(mono, rate, language=code) if kept is None else kept.transcribe(asr, mono, rate, code)
    except OmnidubError:
        raise
    except Exception as exc:  # noqa: BLE001 - whatever stops the ASR on this clip leaves its words unscored
        return unscored(f"{ASR_FAILED} ({first_line(exc)})")
    # An unlabelled line is scored in the language Whisper heard, and reported as such.
    language = language or heard.language or None
    return Heard(
        language, heard.text, score(text, heard.text, language), display_diff(text, heard.text, language), None
    )


def _check_one(entry: dict, context: _Context) -> LineCheck:
    settings = context.settings
    if entry.get("status") == "failed":
        return _untranscribed(entry, "render-failed", str(entry.get("error") or "render failed"), context)
    file = entry.get("file")
    path = context.out_dir / file if file else None
    if path is None or not path.is_file():
        return _untranscribed(entry, "missing-file", f"no segment file {file or '(none named)'}", context)

    data, rate = read_segment(path, entry["index"])
    level, mono = measure(data, rate, settings)
    marks, notes, unmeasured = [], [], []
    changed = edits(entry, path, data, rate, context.sample_rate, settings)
    if changed:
        marks.append("edited")
        notes.append("edited: " + ", ".join(changed))
    # No samples, or not one frame above the silence level: nothing to hear.
    silence = settings.silence_dbfs if level.silent_fraction >= 1.0 else None
    heard = hear(
        context.asr,
        entry["text"],
        entry.get("language"),
        mono,
        rate,
        context.english_only,
        silence=silence,
        kept=context.kept,
    )
    if heard.unscored:
        marks.append("unscored")
        unmeasured.append(Finding(WORDS, heard.unscored, heard.no_judge))
    if entry.get("look_again"):  # the editor's own flag and note (omnidub review), said beside QA's findings
        marks.append("look-again")
    if entry.get("note"):
        notes.append(f"editor's note: {entry['note']}")
    error_rate = heard.score.errors / max(heard.score.units, 1) if heard.transcript is not None else None
    timing = check_timing(entry, level.duration, context.neighbours, context.program_seconds, settings)

    speaker = str(entry.get("speaker", ""))
    voice, voice_skipped = _voice(speaker, mono, rate, level.finite, context)

    failures: list[Finding] = []
    metric = heard.score.metric
    limit = settings.max_cer if metric == "cer" else settings.max_wer
    if error_rate is not None and error_rate > limit:
        failures.append(Finding(metric, f"{FLAG_LABELS[metric]} ({metric.upper()} {error_rate:.0%}, over {limit:.0%})"))
    if voice is not None and wrong_voice(voice, settings):
        failures.append(Finding("voice", voice_note(voice, speaker, settings)))
    if voice_skipped:
        unmeasured.append(Finding("voice", f"voice not measured: {voice_skipped}"))
    failures += timing.failures
    failures += level_failures(level, settings)
    verdict = judge(failures, unmeasured)

    start = number(entry.get("start"))
    # An edited file is checked as it is now, so its end is where that audio ends, not the render's.
    end = start + level.duration if changed else rendered_end(entry, start, level.duration)
    return LineCheck(
        index=entry["index"],
        speaker=speaker,
        text=entry["text"],
        language=heard.language,
        file=file,
        status=str(entry.get("status", "")),
        transcript=heard.transcript,
        metric=metric,
        errors=heard.score.errors,
        reference_units=heard.score.units,
        error_rate=error_rate,
        verdict=verdict,
        note=_note(verdict, notes),
        start=start,
        slot=timing.slot,
        duration=level.duration,
        overflow=timing.overflow,
        overlap=timing.overlap,
        peak=level.peak,
        rms=level.rms,
        clipped_samples=level.clipped_samples,
        silent_fraction=level.silent_fraction,
        leading_silence=level.leading_silence,
        trailing_silence=level.trailing_silence,
        diff=heard.diff,
        marks=tuple(marks),
        overlap_line=timing.overlap_line,
        voice=voice,
        start_tc=entry.get("start_tc"),
        end=end,
        voice_skipped=voice_skipped,
        reference=_reference(entry),
        sha256=entry.get("sha256"),
    )


def _note(verdict, notes: list[str]) -> str:
    """Every failure, why the words were not scored, and the marks' notes, in a phrase (the voice figure says why
    a voice was not measured)."""
    words = [f.text for f in verdict.unmeasured if f.check == WORDS]
    return "; ".join([f.text for f in verdict.failures] + words + notes)


def _reference(entry: dict) -> dict | None:
    """The manifest's record of where the line's voice came from, when it came from the source."""
    reference = entry.get("reference")
    return reference if isinstance(reference, dict) else None


def _voice(speaker: str, mono: np.ndarray, rate: int, finite: bool, context: _Context):
    """The line's voice match, or why the voice check (when it runs) could not measure it."""
    if context.encoder is None:
        return None, None
    if speaker not in context.references:
        return None, NO_REFERENCE
    voice = match_voice(context.encoder, mono, rate, speaker, context.references) if finite else None
    return voice, None if voice is not None else unmeasured_reason(finite)


def _untranscribed(entry: dict, flag: str, note: str, context: _Context) -> LineCheck:
    start, end = number(entry.get("start")), number(entry.get("end"))
    verdict = judge([Finding(flag, note)])
    return LineCheck(
        index=int(entry["index"]),
        speaker=str(entry.get("speaker", "")),
        text=str(entry.get("text", "")),
        language=entry.get("language"),
        file=entry.get("file"),
        status=str(entry.get("status", "")),
        transcript=None,
        metric=metric_for(entry.get("language")),
        errors=0,
        reference_units=0,
        error_rate=None,
        verdict=verdict,
        note=_note(verdict, []),
        start=start,
        slot=max(0.0, end - start),
        duration=0.0,
        overflow=0.0,
        overlap=0.0,
        peak=0.0,
        rms=0.0,
        clipped_samples=0,
        silent_fraction=0.0,
        leading_silence=0.0,
        trailing_silence=0.0,
        start_tc=entry.get("start_tc"),
        end=start,
        voice_skipped=NO_AUDIO if context.encoder is not None else None,
        reference=_reference(entry),
        sha256=entry.get("sha256"),
    )


def _corpus(lines: tuple[LineCheck, ...], metric: str) -> CorpusFigure:
    scored = [c for c in lines if c.transcript is not None and c.metric == metric]
    return CorpusFigure(metric, sum(c.errors for c in scored), sum(c.reference_units for c in scored), len(scored))


def _settings(saved: dict, max_wer, max_cer, min_voice_similarity) -> QaSettings:
    """The thresholds given, else the manifest's (the render's preset), else QA's defaults."""
    default = QaSettings()

    def setting(given, name):
        return threshold(given if given is not None else saved.get(name, getattr(default, name)), name)

    return QaSettings(
        max_wer=setting(max_wer, "max_wer"),
        max_cer=setting(max_cer, "max_cer"),
        min_voice_similarity=setting(min_voice_similarity, "min_voice_similarity"),
    )


def _voice_references(
    encoder, manifest: dict, out_dir: Path, speakers: list[str], references: dict[str, Path] | None
) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    """The reference embedding of every speaker that has one, and why each other speaker has none."""
    if encoder is None:
        return {}, {}
    known = {**manifest_references(manifest, out_dir), **(references or {})}
    embeddings, reasons = reference_embeddings(encoder, {s: known[s] for s in speakers if s in known})
    for speaker in speakers:
        if speaker not in known:
            reasons[speaker] = "the manifest records no reference recording, as for a designed voice"
    return embeddings, reasons


def _unscored_note(checks: tuple[LineCheck, ...], asr) -> list[str]:
    """One line for the lines whose words no judge here could hear: why, and the model that would check them (each
    line's verdict says why it was not)."""
    unjudged = [c for c in checks if any(f.no_judge for f in c.verdict.unmeasured)]
    whisper = [c for c in unjudged if whisper_language(c.language) is not None]
    if not whisper:
        return []
    languages = ", ".join(sorted({c.language or "?" for c in whisper}))
    if asr.name == NO_JUDGE:
        why = getattr(asr, "why", "--judge-model none")
    else:
        why = f"{asr.name} is English-only: it hears English words in any speech"
    model = default_asr_model("cpu")
    return [
        f"{len(whisper)} line(s) in {languages} unchecked for their words: no judge for {languages} here ({why}); "
        f"a multilingual Whisper checks them: --judge-model {model} (if it is not on this machine: omnidub models "
        f"fetch --judge-model {model})"
    ]


def _translation_checks(checks: tuple[LineCheck, ...], input_path) -> tuple[tuple[LineCheck, ...], str | None]:
    """Each line's translation flags, when the render's input is omnidub translate's output (its translate.json
    beside it, as omnidub wrote it) and the line still says what the translation wrote; and a note counting them."""
    from dataclasses import replace

    from omnidub.folder import read_translation

    record = read_translation(input_path) if isinstance(input_path, str) else None
    if record is None:
        return checks, None
    out, flagged = [], 0
    for c in checks:
        line, _ = record.find(c.start, c.start + c.slot, c.text)
        if line is None:
            out.append(c)
            continue
        flags = [f for f in line.get("flags", []) if isinstance(f, str)]
        checks_ = line.get("checks") if isinstance(line.get("checks"), dict) else {}
        translation = {
            "original": line.get("original"),
            "flags": flags,
            "checks": {str(k): str(v) for k, v in checks_.items()},
            "back": line.get("back") if isinstance(line.get("back"), str) else None,
        }
        flagged += bool(flags)
        out.append(replace(c, translation=translation))
    matched = sum(c.translation is not None for c in out)
    return tuple(out), (
        f"{flagged} of {matched} translated line(s) carry translation flags (omnidub translate's checks, from "
        f"{Path(input_path).parent / 'translate.json'})"
    )


def _length(path: Path) -> float | None:
    try:
        return float(sf.info(str(path)).duration)
    except (RuntimeError, OSError):  # an unreadable mix is shown without its length
        return None


def run_qa(
    out_dir: Path,
    *,
    asr: Asr,
    max_wer: float | None = None,
    max_cer: float | None = None,
    progress: Progress | None = None,
    encoder: SpeakerEncoder | None = None,
    references: dict[str, Path] | None = None,
    min_voice_similarity: float | None = None,
    kept: KeptTranscripts | None = None,
) -> Report:
    """Check every line of an output folder's manifest; thresholds default to the manifest's settings.

    The voice check (with `encoder`) compares each line with its speaker's reference recording: `references`
    first, else the manifest's `voices`; speakers with neither are left out, the reason in their voice figures.
    With `kept`, audio the ASR heard before is not transcribed again (the report's notes say how much)."""
    out_dir = Path(out_dir)
    manifest = read_manifest(out_dir)
    saved = manifest.get("settings") if isinstance(manifest.get("settings"), dict) else {}
    settings = _settings(saved, max_wer, max_cer, min_voice_similarity)
    # Lines left out by --only have no audio yet: nothing to hear, nothing to fail.
    lines = [e for e in manifest["lines"] if not (isinstance(e, dict) and e.get("status") == "pending")]
    speakers = list(dict.fromkeys(str(e.get("speaker", "")) for e in lines if isinstance(e, dict)))
    # Why a speaker's voice was not checked goes with its voice figures (Report.voices), not into the notes.
    embeddings, reasons = _voice_references(encoder, manifest, out_dir, speakers, references)
    program = manifest.get("program_seconds")
    program = number(program) if isinstance(program, (int, float)) else None
    rate = manifest.get("sample_rate") if isinstance(manifest.get("sample_rate"), int) else None
    reused = kept.reused if kept is not None else 0
    checks = tuple(_check(out_dir, lines, asr, settings, progress, None, program, rate, encoder, embeddings, kept))
    checks, translated = _translation_checks(checks, manifest.get("input"))
    notes = _unscored_note(checks, asr)
    if translated:
        notes.append(translated)
    if kept is not None and kept.reused > reused:
        notes.append(
            f"{kept.reused - reused} of {len(checks)} line(s) were heard by {asr.name} before with the same audio: "
            "not transcribed again (their words are scored again)"
        )
    mix = manifest.get("mix")
    mix = mix if isinstance(mix, str) and (out_dir / mix).is_file() else None
    unvoiced = manifest.get("unvoiced") if isinstance(manifest.get("unvoiced"), list) else []
    return Report(
        out_dir=out_dir,
        asr_model=asr.name,
        lines=checks,
        wer=_corpus(checks, "wer"),
        cer=_corpus(checks, "cer"),
        settings=settings,
        speaker_model=None if encoder is None else encoder.name,
        voices=speaker_voices(checks, reasons) if encoder else (),
        notes=tuple(notes),
        render_model=model_name(manifest.get("model")),
        preset=saved.get("name") if isinstance(saved.get("name"), str) else None,
        mix=mix,
        program_seconds=program,
        mix_seconds=_length(out_dir / mix) if mix else None,
        unvoiced=tuple(e for e in unvoiced if isinstance(e, dict) and isinstance(e.get("index"), int)),
    )
