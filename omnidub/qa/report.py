"""The terminal report: the failed lines gravest first, the unchecked ones, the verdicts counted apart, the
notes and where the reports were written."""

from __future__ import annotations

from pathlib import Path

from omnidub.qa.formats import (
    corpus_text,
    heard_text,
    line_end,
    rate_text,
    similarity_text,
    speaker_voice_text,
    timecode,
)
from omnidub.qa.manifest import number
from omnidub.qa.results import LineCheck, Report
from omnidub.qa.verdict import FAILED, UNCHECKED, hearing_order
from omnidub.script import RUNS_SHOWN, SAID_ONE_BY_ONE, line_ranges

# Failed lines the terminal's table shows, gravest first; the rest by their numbers (qa.html and qa.json hold all).
FAILED_SHOWN = 20


def print_report(report: Report, console, written: tuple[Path, Path] | None = None) -> None:
    """Print a table of the failed lines (gravest first), the unchecked lines by reason, the verdicts counted
    apart, then the totals, notes and where the reports were written."""
    from rich.markup import escape

    ordered = sorted(report.lines, key=hearing_order)
    failed = [c for c in ordered if c.verdict.outcome == FAILED]
    if failed:
        console.print(
            _failed_table(failed[:FAILED_SHOWN], voice_check=report.speaker_model is not None, of=len(failed))
        )
    if len(failed) > FAILED_SHOWN:
        console.print(
            f"[red]failed as well:[/red] {len(failed) - FAILED_SHOWN} line(s) less grave, "
            f"{line_ranges((c.index for c in failed[FAILED_SHOWN:]), RUNS_SHOWN)}"
            + (f" (each one in {escape(str(written[1]))})" if written else ""),
            soft_wrap=True,
        )
    unchecked: dict[str, list[int]] = {}
    for c in ordered:
        if c.verdict.outcome == UNCHECKED:
            for reason in c.verdict.reasons:
                unchecked.setdefault(reason.text, []).append(c.index)
    for reason, indices in unchecked.items():
        console.print(f"[yellow]unchecked:[/yellow] line(s) {line_ranges(indices)}: {escape(reason)}", soft_wrap=True)
    for line in report.unvoiced[:SAID_ONE_BY_ONE]:
        console.print(
            f"[red]not rendered:[/red] line {line['index']} ({escape(str(line.get('speaker')))}, "
            f"{timecode(number(line.get('start')))}): {escape(str(line.get('why') or 'no voice'))}",
            soft_wrap=True,
        )
    if len(report.unvoiced) > SAID_ONE_BY_ONE:
        console.print(
            f"[red]not rendered either:[/red] line(s) "
            f"{line_ranges((line['index'] for line in report.unvoiced[SAID_ONE_BY_ONE:]), RUNS_SHOWN)}"
            + (f" (each one's why in {escape(str(written[1]))})" if written else ""),
            soft_wrap=True,
        )
    tally = report.tally
    colour = "green" if report.passed else "red" if tally.failed or report.unvoiced else "yellow"
    console.print(f"[{colour}]{escape(report.headline())}[/{colour}]")
    scored = [corpus_text(f) for f in (report.wer, report.cer) if f.lines]
    counts = ", ".join(f"{n} {outcome}" for outcome, n in tally.counts().items())
    console.print(f"verdicts: {counts}; " + ("; ".join(scored) or "nothing transcribed"))
    if report.voices:
        console.print(f"voice similarity: {escape('; '.join(speaker_voice_text(v) for v in report.voices))}")
    edited = [c.index for c in report.lines if "edited" in c.marks]
    if edited:
        console.print(
            f"[yellow]edited since the render:[/yellow] line(s) {line_ranges(edited, RUNS_SHOWN)} (checked as they "
            "are now; stems and mix still hold the rendered takes)"
        )
    translated: dict[str, list[int]] = {}
    for c in report.lines:
        for flag in (c.translation or {}).get("flags", []):
            translated.setdefault(flag, []).append(c.index)
    for flag, indices in translated.items():
        console.print(
            f"[yellow]translation flagged {escape(flag)}:[/yellow] line(s) {line_ranges(indices, RUNS_SHOWN)}"
            + (f" (each one in {escape(str(written[1]))})" if written and len(indices) > RUNS_SHOWN else ""),
            soft_wrap=True,
        )
    for note in report.notes:
        console.print(f"[yellow]note:[/yellow] {escape(note)}")
    voice = (
        f"; speaker model {escape(report.speaker_model)}, "
        f"min voice similarity {report.settings.min_voice_similarity:.2f}"
        if report.speaker_model
        else "; no voice check"
    )
    console.print(
        f"ASR model: {escape(report.asr_model)}; max WER {report.settings.max_wer:.0%}, "
        f"max CER {report.settings.max_cer:.0%}{voice}"
    )
    if written:
        console.print(f"wrote {escape(str(written[1]))} and {escape(str(written[0]))}", soft_wrap=True)


def _failed_table(failed: list[LineCheck], voice_check: bool, of: int):
    from rich.markup import escape
    from rich.table import Table

    title = f"{of} failed line(s), gravest first" + (f"; the {len(failed)} gravest" if of > len(failed) else "")
    table = Table(title=title, show_lines=False)
    table.add_column("line", justify="right")
    table.add_column("start / end", justify="right")
    table.add_column("speaker")
    table.add_column("errors / voice" if voice_check else "errors", justify="right")
    table.add_column("severity / flags")
    table.add_column("said / heard / why", overflow="fold")
    for c in failed:
        when = f"{timecode(c.start)}\n{timecode(line_end(c))}" + (f"\n{c.start_tc}" if c.start_tc else "")
        figures = rate_text(c) + (f"\nvoice {c.voice.similarity:.2f}" if c.voice is not None else "")
        said = escape(c.text)  # lines and transcripts may hold brackets that rich would read as markup
        heard = heard_text(c)
        if heard is not None:
            said += f"\n[dim]heard: {escape(heard)}[/dim]"
        why = [c.note] if c.note else []
        if c.voice_skipped:
            why.append(f"voice {similarity_text(c)}")
        if why:
            said += f"\n[dim]why: {escape('; '.join(why))}[/dim]"
        grade = f"{c.verdict.severity}\n{', '.join(c.flags)}"
        table.add_row(str(c.index), when, escape(c.speaker), figures, grade, said)
    return table
