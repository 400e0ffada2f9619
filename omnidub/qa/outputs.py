"""What QA leaves in the output folder: qa.json (every figure) and qa.html (the page)."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

from omnidub.files import write_text_atomic
from omnidub.qa.page import render_html
from omnidub.qa.results import CorpusFigure, Report


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


def report_json(report: Report) -> dict:
    """The qa.json object: settings, models, corpus figures, per-speaker voice figures and a `lines` array."""
    return {
        "generator": "omnidub",
        "out_dir": str(report.out_dir),
        "asr_model": report.asr_model,
        "speaker_model": report.speaker_model,
        "render_model": report.render_model,
        "preset": report.preset,
        "passed": report.passed,
        "failed": report.failed,
        "total": len(report.lines),
        "settings": {k: _rounded(v) for k, v in dataclasses.asdict(report.settings).items()},
        "corpus": {"wer": _corpus_json(report.wer), "cer": _corpus_json(report.cer)},
        "voices": {
            v.speaker: {k: _rounded(x) for k, x in dataclasses.asdict(v).items() if k != "speaker"}
            for v in report.voices
        },
        "notes": list(report.notes),
        "lines": [{k: _rounded(v) for k, v in dataclasses.asdict(c).items()} for c in report.lines],
    }


def write_reports(report: Report, out_dir: Path) -> tuple[Path, Path]:
    """Write qa.json and qa.html into the output folder, each atomically."""
    out_dir = Path(out_dir)
    json_path, html_path = out_dir / "qa.json", out_dir / "qa.html"
    write_text_atomic(json_path, json.dumps(report_json(report), ensure_ascii=False, indent=2) + "\n")
    write_text_atomic(html_path, render_html(report))
    return json_path, html_path
