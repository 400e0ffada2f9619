"""QA results as qa.json and as the terminal report."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

from omnidub.qa.checks import CorpusFigure, LineCheck, Report


def timecode(seconds: float) -> str:
    """00:03.800 under an hour, 1:02:03.800 from an hour on."""
    millis = int(round(max(seconds, 0.0) * 1000))
    hours, rest = divmod(millis, 3_600_000)
    minutes, rest = divmod(rest, 60_000)
    text = f"{minutes:02d}:{rest // 1000:02d}.{rest % 1000:03d}"
    return f"{hours}:{text}" if hours else text


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


def write_reports(report: Report, folder) -> tuple[Path, Path]:
    """Write qa.json and qa.html into the output folder (a path, or the ``OutputFolder`` a run holds), each
    atomically, recorded in the folder's ledger, and never over a file omnidub did not write."""
    from omnidub.folder import OutputFolder
    from omnidub.qa.page import render_html

    if not isinstance(folder, OutputFolder):
        folder = OutputFolder(Path(folder))

    folder.write_text("qa.json", json.dumps(report_json(report), ensure_ascii=False, indent=2) + "\n")
    folder.write_text("qa.html", render_html(report))
    return folder.path / "qa.json", folder.path / "qa.html"


def percent(rate: float | None) -> str:
    return "n/a" if rate is None else f"{rate:.1%}"


def corpus_text(figure: CorpusFigure) -> str:
    unit = "characters" if figure.metric == "cer" else "words"
    return f"{figure.metric.upper()} {percent(figure.rate)} ({figure.errors} errors / {figure.units} {unit}, {figure.lines} lines)"


def rate_text(check: LineCheck) -> str:
    return "-" if check.error_rate is None else f"{check.metric.upper()} {check.error_rate:.0%}"


def voice_text(report: Report) -> str:
    """Per-speaker voice similarity in one line."""
    parts = []
    for v in report.voices:
        if v.lines:
            failed = f", {v.failed} off" if v.failed else ""
            parts.append(f"{v.speaker} {v.mean_similarity:.2f} (lowest {v.min_similarity:.2f}, {v.lines} lines{failed})")
        else:
            parts.append(f"{v.speaker} not measured")
    return "; ".join(parts)


def print_report(report: Report, console, written: tuple[Path, Path] | None = None) -> None:
    """Print a table of the failing lines, then the totals, notes and where the reports were written."""
    from rich.markup import escape
    from rich.table import Table

    failing = [c for c in report.lines if not c.passed]
    if failing:
        table = Table(title=f"{len(failing)} failing line(s)", show_lines=False)
        table.add_column("#", justify="right")
        table.add_column("start", justify="right")
        table.add_column("speaker")
        table.add_column("error", justify="right")
        table.add_column("flags")
        table.add_column("text / heard", overflow="fold")
        for c in failing:
            details = [] if c.transcript is None else [f"heard: {c.transcript}"]
            if c.note:
                details.append(c.note)
            # Lines and transcripts may contain brackets that rich would read as markup.
            table.add_row(
                str(c.index), timecode(c.start) + (f"\n{c.start_tc}" if c.start_tc else ""), escape(c.speaker), _line_figure(c), ", ".join(c.flags),
                escape(c.text) + "".join(f"\n[dim]{escape(d)}[/dim]" for d in details),
            )
        console.print(table)
    scored = [corpus_text(f) for f in (report.wer, report.cer) if f.lines]
    verdict = "[green]all passed[/green]" if report.passed else f"[red]{report.failed} failing[/red]"
    console.print(f"{len(report.lines)} lines, {verdict}; " + ("; ".join(scored) or "nothing transcribed"))
    if report.voices:
        console.print(f"voice similarity: {escape(voice_text(report))}")
    edited = [str(c.index) for c in report.lines if "edited" in c.marks]
    if edited:
        console.print(
            f"[yellow]edited since the render:[/yellow] line(s) {', '.join(edited)} (checked as they are now; "
            "stems and mix still hold the rendered takes)"
        )
    for note in report.notes:
        console.print(f"[yellow]note:[/yellow] {escape(note)}")
    voice = (
        f"; speaker model {escape(report.speaker_model)}, min voice similarity {report.settings.min_voice_similarity:.2f}"
        if report.speaker_model else "; no voice check"
    )
    console.print(
        f"ASR model: {escape(report.asr_model)}; max WER {report.settings.max_wer:.0%}, "
        f"max CER {report.settings.max_cer:.0%}{voice}"
    )
    if written:
        console.print(f"wrote {escape(str(written[1]))} and {escape(str(written[0]))}", soft_wrap=True)


def _line_figure(c: LineCheck) -> str:
    text = rate_text(c)
    if c.voice is not None:
        text += f"\nvoice {c.voice.similarity:.2f}"
    return text
