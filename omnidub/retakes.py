"""QA after rendering, with retakes: lines that fail intelligibility or voice are rendered again with new seeds."""

from __future__ import annotations

from pathlib import Path

from omnidub.qa import LineCheck, Report, check_lines, run_qa, write_reports
from omnidub.voices import voice_for

# Only failures a new seed can fix are retaken: timing and level flags come from the plan or the reference.
RETAKE_FLAGS = {"wer", "cer", "voice", "silent", "nan", "clipping"}


def qa_with_retakes(project, asr, retakes: int, listener=None, progress=None, encoder=None) -> Report:
    """Run QA on a finished render; retake failing lines with seed+1..seed+N and keep the best take
    (passing, then fewest retakable flags, lowest error rate, closest voice)."""
    references = _references(project)
    report = run_qa(project.out_dir, asr=asr, progress=progress, encoder=encoder, references=references)
    if retakes <= 0:
        write_reports(report, project.folder)
        return report
    thresholds = dict(
        max_wer=report.settings.max_wer, max_cer=report.settings.max_cer,
        min_voice_similarity=report.settings.min_voice_similarity,
    )
    changed = False
    for check in report.lines:
        if check.passed or not RETAKE_FLAGS.intersection(check.flags):
            continue
        entry = next(e for e in project.entries if e.index == check.index)
        if entry.status == "failed" or not project.selected(entry.index):
            continue  # --only: a line it did not ask for keeps the audio it has
        best = check
        attempts = [_attempt(entry, check)]
        everyone = [e.to_json() for e in project.entries]
        for attempt in range(1, retakes + 1):
            if listener is not None:
                listener.step(f"retake {attempt} of line {entry.index} ({', '.join(best.flags)})")
            take = project.render_take(entry, project.base_seed(entry) + attempt)
            [heard] = check_lines(
                project.out_dir, [take.to_json()], asr, all_lines=everyone, program_seconds=report.program_seconds,
                encoder=encoder, references=references, **thresholds,
            )
            attempts.append(_attempt(take, heard))
            if _rank(heard) < _rank(best):
                best = heard
                project.adopt(entry, take)
                changed = True
            if heard.passed:
                break
        for record in attempts:
            record["chosen"] = record["key"] == entry.key
        entry.attempts = attempts
    if changed:
        project.reassemble()
        report = run_qa(project.out_dir, asr=asr, progress=progress, encoder=encoder, references=references)
    else:
        project.save_manifest()  # the attempts are recorded; stems and mix are unchanged
    write_reports(report, project.folder)
    return report


def _references(project) -> dict[str, Path]:
    """Each speaker's reference recording, as cast for this render (designed voices have none)."""
    found = {}
    for speaker in dict.fromkeys(e.speaker for e in project.entries):
        voice = voice_for(speaker, project.voices)
        if voice.audio is not None:
            found[speaker] = Path(voice.audio)
    return found


def _attempt(entry, check: LineCheck) -> dict:
    similarity = None if check.voice is None else round(check.voice.similarity, 4)
    return {"seed": entry.seed, "key": entry.key, "error_rate": check.error_rate, "voice_similarity": similarity,
            "flags": list(check.flags), "passed": check.passed}


def _rank(check: LineCheck) -> tuple:
    """Smaller is better."""
    similarity = check.voice.similarity if check.voice is not None else 0.0
    error_rate = float("inf") if check.error_rate is None else check.error_rate
    return (not check.passed, len(RETAKE_FLAGS.intersection(check.flags)), error_rate, -similarity)
