"""QA after rendering, with retakes: lines that fail intelligibility are rendered again with new seeds."""

from __future__ import annotations

from omnidub.qa import Report, check_lines, run_qa
from omnidub.render import Renderer

# Only failures a new seed can fix are retaken: timing and level flags come from the plan or the reference.
RETAKE_FLAGS = {"wer", "cer", "silent", "nan", "clipping"}


def qa_with_retakes(renderer: Renderer, asr, retakes: int, listener=None, progress=None) -> Report:
    """Run QA on a finished render; retake failing lines with seed+1..seed+N, keep the best take by error rate."""
    report = run_qa(renderer.out_dir, asr=asr, progress=progress)
    if retakes <= 0:
        return report
    thresholds = dict(max_wer=report.settings.max_wer, max_cer=report.settings.max_cer)
    changed = False
    for check in report.lines:
        if check.passed or not RETAKE_FLAGS.intersection(check.flags):
            continue
        entry = next(e for e in renderer.entries if e.index == check.index)
        if entry.status == "failed":
            continue
        best_rate = _rate(check.error_rate)
        attempts = [{"seed": entry.seed, "key": entry.key, "error_rate": check.error_rate, "passed": False}]
        everyone = [e.to_json() for e in renderer.entries]
        for attempt in range(1, retakes + 1):
            if listener is not None:
                listener.step(f"retake {attempt} of line {entry.index} ({check.metric} {best_rate:.2f})")
            take = renderer.render_take(entry, renderer.base_seed(entry) + attempt)
            [heard] = check_lines(renderer.out_dir, [take.to_json()], asr, all_lines=everyone, **thresholds)
            attempts.append({"seed": take.seed, "key": take.key, "error_rate": heard.error_rate, "passed": heard.passed})
            if _rate(heard.error_rate) < best_rate:
                best_rate = _rate(heard.error_rate)
                renderer.adopt(entry, take)
                changed = True
            if heard.passed:
                break
        for record in attempts:
            record["chosen"] = record["key"] == entry.key
        entry.attempts = attempts
    if not changed:
        renderer.save_manifest()  # the attempts are recorded; stems and mix are unchanged
        return report
    renderer.reassemble()
    return run_qa(renderer.out_dir, asr=asr, progress=progress)


def _rate(value: float | None) -> float:
    return float("inf") if value is None else value
