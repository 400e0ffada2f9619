"""A line's takes: which failing lines a new seed may fix, a take's record with QA's verdict on it, the takes a
line has, and which take is best. The job renders them (``job.py``); a project adopts one (``Project.adopt``)."""

from __future__ import annotations

from dataclasses import replace

from omnidub.qa import LineCheck, Report
from omnidub.qa.verdict import take_order
from omnidub.records import LineEntry, Take

# Only failures a new seed can fix are retaken: timing and level flags come from the plan or the reference.
RETAKE_FLAGS = {"wer", "cer", "voice", "silent", "nan", "clipping"}
# Failures of timing: a new seed gives the line the same length; a shorter text, a wider slot or a higher speed-up
# cap fixes them (omnidub.remedies).
TIMING_FLAGS = frozenset({"overflow", "overlap"})


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


def take_of(entry: LineEntry, check: LineCheck | None = None, unjudged: str | None = None) -> Take:
    """The audio ``entry`` names as a take, with QA's verdict on it (``check`` None: not judged, ``unjudged``
    says why)."""
    take = Take(
        seed=entry.seed,
        key=entry.key,
        base_key=entry.base_key,
        text=entry.text,
        edit=entry.edit,
        duration=entry.duration,
        sha256=entry.sha256,
    )
    if check is None:
        return replace(take, reasons=(unjudged,) if unjudged else ())
    return replace(
        take,
        error_rate=check.error_rate,
        voice_similarity=None if check.voice is None else round(check.voice.similarity, 4),
        flags=tuple(check.flags),
        verdict=check.verdict.outcome,
        severity=check.verdict.severity,
        passed=check.passed,
        reasons=tuple(finding.text for finding in check.verdict.reasons),
    )


def takes_of(entry: LineEntry) -> tuple[Take, ...]:
    """A line's takes, oldest first: its attempts, with the audio it has now among them (unjudged when QA never
    heard it)."""
    takes = tuple(entry.attempts)
    if entry.done and not any(t.key == entry.key for t in takes):
        takes += (take_of(entry),)
    return takes


def timing_only(flags) -> bool:
    """Whether the checks a line failed (``flags``) are all timing ones: a retake cannot fix them."""
    return bool(flags) and set(flags) <= TIMING_FLAGS


def failed_on_timing(take: Take | None) -> bool:
    """Whether a take failed QA on timing alone (every failed check a timing one)."""
    return take is not None and take.verdict == "failed" and timing_only(take.flags)


def on_timing(report: Report, selected=lambda index: True) -> list[int]:
    """The lines of a QA report that failed on timing alone (``selected``: --only): what a retake cannot fix."""
    return [c.index for c in report.lines if not c.passed and timing_only(c.flags) and selected(c.index)]


def current(entry: LineEntry) -> Take | None:
    """The take the line's audio is now (None without audio)."""
    return next((t for t in takes_of(entry) if t.key == entry.key), None) if entry.done else None


def judged_by_qa(take: Take, line: dict) -> Take:
    """``take`` with the verdict qa.json gave its audio (``line``: qa.json's record of the line), when it has none."""
    if take.judged or line.get("verdict") is None:
        return take
    voice = line.get("voice") if isinstance(line.get("voice"), dict) else {}
    return replace(
        take,
        verdict=line["verdict"],
        severity=line.get("severity"),
        passed=line.get("passed"),
        flags=tuple(str(f) for f in line.get("flags") or ()),
        error_rate=line.get("error_rate"),
        voice_similarity=voice.get("similarity"),
        reasons=tuple(r.get("text") for r in line.get("reasons") or () if isinstance(r, dict) and r.get("text")),
    )


def rank(check: LineCheck) -> tuple:
    """Smaller is better: by verdict (passed, then unchecked, then failed), then fewest retakable flags, lowest
    error rate, closest voice."""
    similarity = check.voice.similarity if check.voice is not None else 0.0
    error_rate = float("inf") if check.error_rate is None else check.error_rate
    return (take_order(check.verdict), len(RETAKE_FLAGS.intersection(check.flags)), error_rate, -similarity)
