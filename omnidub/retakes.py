"""Retakes: which failing lines a new seed may fix, and which take is best. The job renders them (job.py)."""

from __future__ import annotations

from omnidub.qa import LineCheck, Report
from omnidub.qa.verdict import take_order
from omnidub.records import LineEntry

# Only failures a new seed can fix are retaken: timing and level flags come from the plan or the reference.
RETAKE_FLAGS = {"wer", "cer", "voice", "silent", "nan", "clipping"}


def to_retake(report: Report, entries: dict[int, LineEntry], selected=lambda index: True) -> list[LineCheck]:
    """The checks of lines worth another take: failed for a reason a new seed can fix, rendered, and asked for
    (``selected``: --only; a line it did not ask for keeps the audio it has). An unchecked line is not retaken: a
    new seed does not make its words scorable."""
    return [
        check
        for check in report.lines
        if not check.passed
        and RETAKE_FLAGS.intersection(check.flags)
        and check.index in entries
        and entries[check.index].status != "failed"
        and selected(check.index)
    ]


def attempt_record(entry: LineEntry, check: LineCheck | None, unjudged: str | None = None) -> dict:
    """One take as the manifest's ``attempts`` records it: what it is (seed, key, text, the editor's changes, its
    audio's length and hash) and QA's verdict on it (``check`` None: not judged, ``unjudged`` says why)."""
    take = {
        "seed": entry.seed,
        "key": entry.key,
        "base_key": entry.base_key,
        "text": entry.text,
        "edit": entry.edit,
        "duration": entry.duration,
        "sha256": entry.sha256,
    }
    if check is None:
        return {
            **take,
            "error_rate": None,
            "voice_similarity": None,
            "flags": [],
            "verdict": None,
            "passed": None,
            "reasons": [unjudged] if unjudged else [],
        }
    similarity = None if check.voice is None else round(check.voice.similarity, 4)
    return {
        **take,
        "error_rate": check.error_rate,
        "voice_similarity": similarity,
        "flags": list(check.flags),
        "verdict": check.verdict.outcome,
        "severity": check.verdict.severity,
        "passed": check.passed,
        "reasons": [finding.text for finding in check.verdict.reasons],
    }


def rank(check: LineCheck) -> tuple:
    """Smaller is better: by verdict (passed, then unchecked, then failed), then fewest retakable flags, lowest
    error rate, closest voice."""
    similarity = check.voice.similarity if check.voice is not None else 0.0
    error_rate = float("inf") if check.error_rate is None else check.error_rate
    return (take_order(check.verdict), len(RETAKE_FLAGS.intersection(check.flags)), error_rate, -similarity)
