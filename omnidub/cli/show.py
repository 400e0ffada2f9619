"""What the command line prints: plans, summaries, render progress and QA progress."""

from __future__ import annotations

import contextlib
import sys

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from omnidub.cli.app import out, print_json, printable


def plan_json(entries, estimated: bool, selected=lambda index: True, pace: str = "") -> dict:
    rows = [
        {
            "index": e.index,
            "speaker": e.speaker,
            "text": e.text,
            "start": e.start,
            "end": e.end,
            "language": e.language,
            "natural": e.natural,
            "target": e.target,
            "speed": e.speed,
            "limit_at": e.limit_at,
            "flags": list(e.flags),
            "key": e.key,
            "status": "cached" if e.done else "render" if selected(e.index) else "pending",
        }
        for e in entries
    ]
    return {"estimated": estimated, "pace": pace or None, "lines": rows}


def print_plan(entries, estimated: bool, as_json: bool, selected=lambda index: True, pace: str = "") -> None:
    plan = plan_json(entries, estimated, selected, pace)
    if as_json:
        print_json(plan)
        return
    rows = plan["lines"]
    counts = {status: sum(r["status"] == status for r in rows) for status in ("cached", "render", "pending")}
    title = f"Plan: {counts['cached']} of {len(rows)} lines cached, {counts['render']} to render"
    if counts["pending"]:
        title += f", {counts['pending']} left for later (--only)"
    import shutil
    import textwrap

    width = shutil.get_terminal_size((100, 24)).columns
    lines = [title]
    if estimated:
        lines += textwrap.wrap(
            "Timings are estimates: some voices are not prepared yet, so their pace comes from the "
            "whole sample. The render prepares them first, which can change natural lengths and, "
            "in an untimed script, start times.",
            width,
        )
    lines.append(_columns(rows, width))
    lines += textwrap.wrap(
        "compressed: sped up to fit · extended: runs into the silence after its slot · overflow: longer than its room",
        width,
    )
    # Plain text, not a rich Table: a 2,400-cue plan must print in a moment (rich took seconds).
    sys.stdout.write("\n".join(lines) + "\n")
    sys.stdout.flush()


def _columns(rows: list[dict], width: int) -> str:
    """The plan as aligned columns; on a narrow terminal each line's flags and text go on a line of their own."""
    header = ["#", "speaker", "start", "end", "natural", "target", "speed", "status", "flags"]
    table = [
        [
            str(r["index"]),
            printable(r["speaker"]),
            f"{r['start']:.2f}",
            f"{r['end']:.2f}",
            f"{r['natural']:.2f}",
            f"{r['target']:.2f}",
            f"{r['speed']:.2f}x",
            r["status"],
            " ".join(r["flags"]),
        ]
        for r in rows
    ]
    widths = [max([len(h)] + [len(row[i]) for row in table]) for i, h in enumerate(header)]
    right = {0, 2, 3, 4, 5, 6}
    beside = width - (sum(widths) + len(widths)) >= 24
    if not beside:  # flags join the text below
        header, widths, table = header[:-1], widths[:-1], [row[:-1] for row in table]
    used = sum(widths) + len(widths)
    room = width - used if beside else width - 4

    def cut(text: str) -> str:
        return text if len(text) <= room else text[: room - 1] + "…"

    def line(cells, text, flags=""):
        fixed = " ".join(c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(cells, widths)))
        return (
            f"{fixed} {cut(text)}" if beside else f"{fixed.rstrip()}\n    {cut(f'[{flags}] {text}' if flags else text)}"
        )

    body = [line(header, "text" if beside else "flags, text"), "-" * min(width, used + room)]
    body += [line(cells, printable(r["text"]), " ".join(r["flags"])) for cells, r in zip(table, rows)]
    return "\n".join(body)


def summary_json(summary) -> dict:
    return {
        "out_dir": str(summary.out_dir),
        "lines": summary.lines,
        "rendered": summary.rendered,
        "cached": summary.cached,
        "failed": summary.failed,
        "overflow": list(summary.overflow),
        "pending": list(summary.pending),
        "program_seconds": round(summary.program_seconds, 3),
        "audio_seconds": round(summary.audio_seconds, 3),
        "synth_seconds": round(summary.synth_seconds, 3),
        "rtf": None if summary.rtf is None else round(summary.rtf, 3),
        "outputs": ["segments/", "manifest.json", *summary.outputs],
        "loudness": summary.loudness,
    }


def print_summary(summary, as_json: bool) -> None:
    data = summary_json(summary)
    if as_json:
        print_json(data)
        return
    table = Table(title=f"Rendered into {escape(printable(summary.out_dir))}", show_header=False)
    table.add_column(style="bold")
    table.add_column()
    pending = f", {len(summary.pending)} left for later (--only)" if summary.pending else ""
    table.add_row(
        "lines",
        f"{summary.lines}: {summary.rendered} rendered, {summary.cached} cached, {summary.failed} failed{pending}",
    )
    if summary.overflow:
        table.add_row("overflow", "line(s) " + ", ".join(map(str, summary.overflow)) + " run longer than their room")
    table.add_row("program", f"{summary.program_seconds:.1f} s")
    if summary.rtf is not None:
        table.add_row(
            "speed", f"{summary.synth_seconds:.1f} s for {summary.audio_seconds:.1f} s of audio (RTF {summary.rtf:.2f})"
        )
    for label, level in (summary.loudness or {}).items():
        if level:
            table.add_row("loudness" if label == "mix" else "over the bed", level_text(level))
            if level.get("note"):  # held under its target: by how much and why
                table.add_row("", escape(printable(level["note"])))
    table.add_row("outputs", escape(printable(", ".join(data["outputs"]))))
    out.print(table)


def level_text(level: dict) -> str:
    def number(value, unit):
        return "-" if value is None else f"{value:.1f} {unit}"

    text = (
        f"{number(level['integrated'], 'LUFS')}, range {number(level['range'], 'LU')}, "
        f"true peak {number(level['true_peak'], 'dBTP')} (gain {level['gain']:+.1f} dB"
    )
    return text + (", limited)" if level["limited"] else ")")


class ProgressListener:
    """Shows render progress with rich: lines done, cached vs rendered, the line, elapsed, ETA, running RTF."""

    def __init__(self, console: Console, reports: bool = True):
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            SpinnerColumn,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        self.console = console
        self.progress = Progress(
            SpinnerColumn(),
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[counts]}"),
            TimeElapsedColumn(),
            TextColumn("ETA"),
            TimeRemainingColumn(),
            TextColumn("{task.fields[rtf]}"),
            console=console,
            transient=False,
        )
        self.task = None
        self.reports = reports  # print each QA report when it is done
        self._stack = contextlib.ExitStack()
        self._checks = None
        self._heard = None
        self.current = ""  # the input the latest line belongs to, in jobs of several inputs
        self.said: set[str] = set()
        self.rendered = self.cached = self.failed = 0
        self.audio = self.wall = 0.0
        self.what = "rendering"

    def step(self, text: str) -> None:
        where = f"{self.current}: " if self.current else ""
        self.console.print(f"[cyan]→[/] {escape(printable(where + text))}")

    def input(self, name: str) -> None:
        self.current = printable(name)

    def note(self, text: str) -> None:
        if text in self.said:  # the inputs of one job share voices: a note about a voice is said once
            return
        self.said.add(text)
        self.console.print(f"[yellow]note:[/] {escape(printable(text))}", soft_wrap=True)

    @contextlib.contextmanager
    def loading(self, what: str):
        """A spinner with what is loading and for how long; one line stays when it is done."""
        import time

        started = time.monotonic()
        with self.console.status(f"loading {escape(printable(what))}…", spinner="dots"):
            yield
        self.console.print(f"[cyan]→[/] loaded {escape(printable(what))} in {time.monotonic() - started:.1f} s")

    def start(self, total: int, what: str = "rendering") -> None:
        # Each bar counts its own pass: the lines it was given, once each (the summary counts every line once,
        # by where its final audio came from).
        self.rendered = self.cached = self.failed = 0
        self.audio = self.wall = 0.0
        self.what = what
        if self.task is not None:  # the last pass's bar stays where it was printed, once
            self.progress.remove_task(self.task)
        self.progress.start()
        self.task = self.progress.add_task(what, total=total, counts="", rtf="")

    def line_started(self, entry) -> None:
        text = printable(entry.text)
        text = text if len(text) <= 40 else text[:39] + "…"
        where = f"{escape(self.current)} · " if self.current else ""
        self.progress.update(
            self.task, description=f"{where}line {entry.index} · {escape(printable(entry.speaker))} · {escape(text)}"
        )

    def line_done(self, entry, audio_seconds: float, wall_seconds: float) -> None:
        status = entry.status
        self.rendered += status == "rendered"
        self.cached += status == "cached"
        self.failed += status == "failed"
        self.audio += audio_seconds if status == "rendered" else 0.0
        self.wall += wall_seconds
        counts = f"{self.rendered} rendered · {self.cached} cached" + (
            f" · [red]{self.failed} failed[/]" if self.failed else ""
        )
        rtf = f"RTF {self.wall / self.audio:.2f}" if self.audio else ""
        self.progress.update(self.task, advance=1, counts=counts, rtf=rtf)
        if status == "failed":
            where = f"{escape(self.current)} " if self.current else ""
            self.console.print(
                f"[red]{where}line {entry.index} failed:[/] {escape(printable(entry.error or ''))}", soft_wrap=True
            )

    def finish(self) -> None:
        if self._heard is not None:
            self._heard.close()
        if self.task is not None:
            self.progress.update(self.task, description=f"{self.what}: done")
        self.progress.stop()

    def checking(self, done: int, total: int, index: int) -> None:
        """QA's progress through the lines it transcribes (a bar that goes away when QA is done)."""
        if self._checks is None:
            self._checks = self._stack.enter_context(qa_progress(self.console))
        self._checks(done, total, index)

    def transcribing(self, done: float, total: float) -> None:
        """The source's transcription (render --source without its subtitles), as a bar with an ETA."""
        if self._heard is None:
            self._heard = TranscribeBar(self.console)
        self._heard(done, total)

    def checked(self, report, written) -> None:
        """QA of one input is done: its report, unless the run prints JSON."""
        from omnidub.qa import print_report

        self._stack.close()
        self._checks = None
        if self.reports:
            print_report(report, self.console, written)


@contextlib.contextmanager
def qa_progress(console: Console):
    """A progress bar for transcribing lines; yields the callback qa.run_qa takes."""
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    with Progress(
        TextColumn("transcribing"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=console,
        transient=True,
    ) as progress:
        task = progress.add_task("qa", total=None)

        def advance(done: int, total: int, index: int) -> None:
            progress.update(task, completed=done, total=total)

        yield advance


class TranscribeBar:
    """Transcribing a source: seconds heard of its length, elapsed time and ETA (a 45-minute episode takes minutes
    with ``small`` on a CPU). Called with (seconds done, seconds in all); shown from the first call, gone once the
    whole source is heard (or on ``close``)."""

    def __init__(self, console: Console):
        self.console = console
        self._progress = None
        self._task = None

    def __call__(self, done: float, total: float) -> None:
        from rich.progress import (
            BarColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        if self._progress is None:
            self._progress = Progress(
                TextColumn("transcribing the source"),
                BarColumn(),
                TextColumn("{task.completed:.0f} of {task.total:.0f} s"),
                TimeElapsedColumn(),
                TextColumn("ETA"),
                TimeRemainingColumn(),
                console=self.console,
                transient=True,
            )
            self._progress.start()
            self._task = self._progress.add_task("heard", total=max(total, 1e-3))
        self._progress.update(self._task, completed=done, total=max(total, 1e-3))
        if done >= total:
            self.close()

    def close(self) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None
