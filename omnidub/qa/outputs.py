"""What QA leaves in the output folder: qa.json (every figure) and qa.html (the page)."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path
from typing import Callable

from omnidub.qa.page import render_html
from omnidub.qa.results import CorpusFigure, LineCheck, Report


def _rounded(value):
    if isinstance(value, float):
        return round(value, 4) if math.isfinite(value) else None
    if isinstance(value, (list, tuple)):
        return [_rounded(v) for v in value]
    if isinstance(value, dict):
        return {k: _rounded(v) for k, v in value.items()}
    return value


def _corpus_json(figure: CorpusFigure) -> dict:
    return {"errors": figure.errors, "units": figure.units, "lines": figure.lines, "rate": _rounded(figure.rate)}


def _findings(findings) -> list[dict]:
    return [{"check": f.check, "text": f.text, **({"no_judge": True} if f.no_judge else {})} for f in findings]


def line_json(check: LineCheck) -> dict:
    """One line of qa.json: its figures, and its verdict (passed, failed or unchecked) with what decided it."""
    data = {k: _rounded(v) for k, v in dataclasses.asdict(check).items() if k != "verdict"}
    verdict = check.verdict
    return {
        **data,
        "verdict": verdict.outcome,
        "severity": verdict.severity,
        "passed": check.passed,
        "flags": list(check.flags),
        "reasons": _findings(verdict.reasons),
        "unmeasured": _findings(verdict.unmeasured),
    }


def report_json(report: Report) -> dict:
    """The qa.json object: the verdicts counted apart, settings, models, corpus figures, per-speaker voice
    figures and a `lines` array."""
    tally = report.tally
    return {
        "generator": "omnidub",
        "out_dir": str(report.out_dir),
        "asr_model": report.asr_model,
        "speaker_model": report.speaker_model,
        "render_model": report.render_model,
        "preset": report.preset,
        "headline": report.headline(),
        "passed": report.passed,  # every line rendered, checked and passed
        "failed": tally.failed,
        "unchecked": tally.unchecked,
        "unjudged": tally.unjudged,  # of the unchecked: no judge here hears their language (no failure)
        "total": tally.total,
        "verdicts": tally.counts(),
        "settings": {k: _rounded(v) for k, v in dataclasses.asdict(report.settings).items()},
        "corpus": {"wer": _corpus_json(report.wer), "cer": _corpus_json(report.cer)},
        "voices": {
            v.speaker: {k: _rounded(x) for k, x in dataclasses.asdict(v).items() if k != "speaker"}
            for v in report.voices
        },
        "notes": list(report.notes),
        "unvoiced": list(report.unvoiced),  # lines left without a voice: not rendered, with why
        "lines": [line_json(c) for c in report.lines],
    }


def write_reports(report: Report, folder, note: Callable[[str], None] | None = None) -> tuple[Path, Path]:
    """Write qa.json and qa.html into the output folder (a path, or the ``OutputFolder`` a run holds), each
    atomically, recorded in the folder's ledger, and never over a file omnidub did not write; a report someone
    changed since omnidub wrote it is moved aside first, and ``note`` hears where."""
    from omnidub.folder import OutputFolder

    if not isinstance(folder, OutputFolder):
        folder = OutputFolder(Path(folder), flag=None)
    said = folder.write_text("qa.json", json.dumps(report_json(report), ensure_ascii=False, indent=2) + "\n")
    said += folder.write_text("qa.html", render_html(report))
    for text in said if note is not None else ():
        note(text)
    return folder.path / "qa.json", folder.path / "qa.html"
