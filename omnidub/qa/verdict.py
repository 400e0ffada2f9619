"""A line's QA verdict, kept in one place: passed, failed (every reason, and how grave) or unchecked (why its
words could not be scored), and the count of a folder's verdicts. qa.json, qa.html, the terminal, the exit code
and the retakes all read these; docs/qa.md states the rules."""

from __future__ import annotations

from dataclasses import dataclass

from omnidub.script import line_count

PASSED, FAILED, UNCHECKED = "passed", "failed", "unchecked"
# Best first: a retake keeps the better take in this order; the page plays them the other way round.
OUTCOMES = (PASSED, UNCHECKED, FAILED)

# The checks a line is measured by (a finding's `check` when a check could not measure the line).
WORDS, VOICE = "words", "voice"

CRITICAL, MAJOR, MINOR = "critical", "major", "minor"
SEVERITIES = (CRITICAL, MAJOR, MINOR)
# How grave each failing check is: nothing usable to hear; the wrong words, the wrong voice or two lines heard at
# once; off its time or its level.
SEVERITY = {
    "render-failed": CRITICAL,
    "missing-file": CRITICAL,
    "nan": CRITICAL,
    "silent": CRITICAL,
    "wer": MAJOR,
    "cer": MAJOR,
    "voice": MAJOR,
    "overlap": MAJOR,
    "overflow": MINOR,
    "clipping": MINOR,
    "lead-silence": MINOR,
    "trail-silence": MINOR,
}
SEVERITY_MEANING = {
    CRITICAL: "nothing usable to hear",
    MAJOR: "wrong words, wrong voice, or two lines heard at once",
    MINOR: "off its time or its level",
}


@dataclass(frozen=True)
class Finding:
    """One check's word on a line: `check` is the flag of a failed check (wer, voice, overflow, ...) or, for a
    check that could not measure the line, `words` or `voice`; `text` says what was found, with its figures."""

    check: str
    text: str
    # Words not scored because no judge here hears the line's language (an English-only model, none asked for, or a
    # language Whisper has no model of): counted as unchecked, but not as something to fix (the exit code).
    no_judge: bool = False


@dataclass(frozen=True)
class Verdict:
    """passed, failed or unchecked. `failures`: every check the line failed; `unmeasured`: the checks that could
    not measure it and why (on a passed line, only ones that are no failure by the rules); `severity`: the
    gravest failure's, on failed lines."""

    outcome: str
    failures: tuple[Finding, ...] = ()
    unmeasured: tuple[Finding, ...] = ()
    severity: str | None = None

    @property
    def reasons(self) -> tuple[Finding, ...]:
        """What decided it: a failed line's every failure, an unchecked line's reason its words were not scored."""
        if self.outcome == FAILED:
            return self.failures
        if self.outcome == UNCHECKED:
            return tuple(f for f in self.unmeasured if f.check == WORDS)
        return ()

    @property
    def unjudged(self) -> bool:
        """Unchecked only because no judge here hears its language (nothing found wrong, nothing left to fix)."""
        return self.outcome == UNCHECKED and all(f.no_judge for f in self.reasons)

    @property
    def label(self) -> str:
        """ "failed (major)", "unchecked" or "passed"."""
        return f"{FAILED} ({self.severity})" if self.outcome == FAILED else self.outcome


def judge(
    failures: list[Finding] | tuple[Finding, ...], unmeasured: list[Finding] | tuple[Finding, ...] = ()
) -> Verdict:
    """Failed when any check failed (its words scored or not); else unchecked when its words were not scored;
    else passed. A voice that could not be measured is stated in `unmeasured`, never a failure by itself."""
    failures, unmeasured = tuple(failures), tuple(unmeasured)
    if failures:
        severity = min((SEVERITY[f.check] for f in failures), key=SEVERITIES.index)
        return Verdict(FAILED, failures, unmeasured, severity)
    if any(f.check == WORDS for f in unmeasured):
        return Verdict(UNCHECKED, (), unmeasured)
    return Verdict(PASSED, (), unmeasured)


def hearing_order(check) -> tuple:
    """Sort key of what to hear first (a LineCheck): failed lines gravest first, then those with more failures,
    then in programme order; then unchecked lines, then passed ones, each in programme order."""
    verdict = check.verdict
    severity = SEVERITIES.index(verdict.severity) if verdict.severity else 0
    return (OUTCOMES[::-1].index(verdict.outcome), severity, -len(verdict.failures), check.start, check.index)


def take_order(verdict: Verdict) -> int:
    """A take's verdict as a rank, best first: passed, unchecked (nothing found wrong), failed."""
    return OUTCOMES.index(verdict.outcome)


@dataclass(frozen=True)
class Tally:
    """How many lines of a folder passed, failed and went unchecked."""

    passed: int
    failed: int
    unchecked: int
    unjudged: int = 0  # of the unchecked: those only for want of a judge of their language here

    @classmethod
    def of(cls, verdicts) -> "Tally":
        verdicts = list(verdicts)
        outcomes = [v.outcome for v in verdicts]
        unjudged = sum(v.unjudged for v in verdicts)
        return cls(outcomes.count(PASSED), outcomes.count(FAILED), outcomes.count(UNCHECKED), unjudged)

    @property
    def total(self) -> int:
        return self.passed + self.failed + self.unchecked

    @property
    def all_passed(self) -> bool:
        """Every line was checked and passed (true of a folder with no line to check)."""
        return self.failed == 0 and self.unchecked == 0

    @property
    def exit_code(self) -> int:
        """The exit code of qa, render and dub: 0 when no line failed and every line was checked (or left unchecked
        only for want of a judge of its language here, which the report says in one line), else 1."""
        return 0 if self.failed == 0 and self.unchecked == self.unjudged else 1

    def headline(self) -> str:
        """The folder's verdict in a phrase; it says "passed" only when every line was checked and passed."""
        if not self.total:
            return "no rendered line to check"
        if self.all_passed:
            return "all lines passed" if self.total > 1 else "the line passed"
        unscored = self.unchecked - self.unjudged
        unjudged = f"{self.unjudged} unchecked (no judge for their language here)"
        if not self.failed and not unscored:
            return f"nothing failed; {unjudged}"
        parts = [f"{self.failed} failed"] if self.failed else []
        if unscored:
            parts.append(f"{unscored} unchecked (words not scored)")
        if self.unjudged:
            parts.append(unjudged)
        return f"{self.failed + self.unchecked} of {line_count(self.total)} to hear: " + ", ".join(parts)

    def counts(self) -> dict[str, int]:
        """The three counted apart, in the order they are heard."""
        return {FAILED: self.failed, UNCHECKED: self.unchecked, PASSED: self.passed}
