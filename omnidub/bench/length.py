"""Feature length: does a line cost more, or the process hold more, as the programme grows?

For each size (100, 500 and 1,000 lines by default) it writes a programme of that many distinct lines for 8
speakers, renders it through ``Session`` with the model already resident, and stops the render once the time
budget is spent (the lines in flight finish, as Ctrl-C does). A second, cached run of the lines that were rendered
then assembles the whole programme (stems and mix at its full length, the lines not rendered left silent). It
reports per size: how long planning took, seconds per rendered line (wall, from one finished line to the next),
the model's own seconds per line and what omnidub spent around it, and peak memory (RSS) while rendering and while
assembling. With the full-size shapes (``synthetic:full``) a budget of minutes renders a few lines per size: enough
to see a per-line cost or memory that grows with the programme, without rendering hours of audio.
"""

from __future__ import annotations

import os
import statistics
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from omnidub.bench.rows import BUNDLED_REF_CUT, LINES
from omnidub.progress import Listener

SIZES = (100, 500, 1000)
SPEAKERS = 8


@dataclass
class LengthRun:
    """One programme size: what was rendered within the budget, and what it cost."""

    lines: int
    programme_seconds: float = 0.0
    rendered: int = 0
    plan_seconds: float = 0.0
    seconds_per_line: float | None = None  # median wall seconds between finished lines
    model_seconds_per_line: float | None = None  # median of the model's own seconds per line
    around_model_per_line: float | None = None  # the first minus the second: omnidub's own work per line
    wall_per_line: list[float] = field(default_factory=list)
    model_per_line: list[float] = field(default_factory=list)
    peak_rss_mb: float = 0.0
    assembly_seconds: float = 0.0
    assembly_peak_rss_mb: float = 0.0
    load_before: float = 0.0


def programme(n: int, path: Path) -> Path:
    """A script of ``n`` distinct untimed lines (no two share a cache key) spoken in turn by 8 speakers."""
    rows = [f"S{i % SPEAKERS + 1}: Scene {i + 1}. {LINES[i % len(LINES)]}" for i in range(n)]
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return path


class _Clock(Listener):
    """Timestamps of the render's events (the listener hooks), and the peak RSS sampled meanwhile."""

    def __init__(self, budget: float):
        self.budget = budget
        self.stop = lambda: None  # the job's request_stop, once there is a job
        self.started: float | None = None
        self.done: list[tuple[float, float]] = []  # (when, model seconds) per rendered line
        self._timer: threading.Timer | None = None

    def start(self, total: int, what: str = "rendering") -> None:
        self.started = time.perf_counter()
        self._timer = threading.Timer(self.budget, self.stop)
        self._timer.daemon = True
        self._timer.start()

    def line_done(self, entry, audio_seconds: float, wall_seconds: float) -> None:
        if entry.status == "rendered":
            self.done.append((time.perf_counter(), wall_seconds))

    def cancel(self) -> None:
        if self._timer is not None:
            self._timer.cancel()


class PeakRss:
    """The highest RSS (MB) of this process while the block runs, sampled every 20 ms."""

    def __enter__(self):
        import psutil

        process = psutil.Process()
        self.mb = process.memory_info().rss / 2**20
        self._stop = threading.Event()

        def sample():
            while not self._stop.is_set():
                self.mb = max(self.mb, process.memory_info().rss / 2**20)
                self._stop.wait(0.02)

        self._thread = threading.Thread(target=sample, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        return False


def run_length(
    session,
    folder: Path,
    sizes=SIZES,
    budget: float = 300.0,
    say=lambda text: None,
) -> list[LengthRun]:
    """Render a programme of each size in ``folder`` within ``budget`` seconds of rendering, then assemble it; the
    model loads (and is probed) before the first size, so no size pays for it."""
    from omnidub.script import line_ranges

    reference = BUNDLED_REF_CUT
    text = reference.with_suffix(".txt").read_text(encoding="utf-8").strip()
    voices = [f"S{i + 1}={reference}" for i in range(SPEAKERS)]
    voice_text = [f"S{i + 1}={text}" for i in range(SPEAKERS)]
    say("→ loading the model, and a warm-up programme (the voices' prompt, the kernels for these shapes)")
    session.backend()
    runs = []
    for n in (SPEAKERS, *sizes):
        script = programme(n, folder / f"programme-{n}.txt")
        out = folder / f"programme-{n}"
        run = LengthRun(lines=n, load_before=round(os.getloadavg()[0], 2))
        warm_up = not runs  # one line of a small programme, not reported
        say("→ warm-up: one line" if warm_up else f"→ {n} lines: rendering for {budget:.0f} s")
        clock = _Clock(0.0 if warm_up else budget)
        job = session.job([script], out_dir=out, voice=voices, voice_text=voice_text, listener=clock)
        clock.stop = job.request_stop
        began = time.perf_counter()
        try:
            with PeakRss() as peak:
                [result] = job.run()
        finally:
            clock.cancel()
            job.close()
        result.result()
        run.peak_rss_mb = round(peak.mb, 1)
        run.plan_seconds = round((clock.started or began) - began, 2)
        run.rendered = len(clock.done)
        times = [clock.started, *(when for when, _ in clock.done)]
        run.wall_per_line = [round(b - a, 3) for a, b in zip(times, times[1:], strict=False)]
        run.model_per_line = [round(model, 3) for _, model in clock.done]
        if run.wall_per_line:
            run.seconds_per_line = statistics.median(run.wall_per_line)
            run.model_seconds_per_line = statistics.median(run.model_per_line)
            run.around_model_per_line = statistics.median(
                w - m for w, m in zip(run.wall_per_line, run.model_per_line, strict=True)
            )
        rendered = sorted(entry for entry in _rendered(out))
        if rendered and not warm_up:
            say(f"→ {n} lines: assembling the whole programme ({len(rendered)} lines have audio)")
            began = time.perf_counter()
            with PeakRss() as peak:
                assembled = session.job(
                    [script], out_dir=out, voice=voices, voice_text=voice_text, only=line_ranges(rendered)
                )
                try:
                    [done] = assembled.run()
                finally:
                    assembled.close()
            run.assembly_seconds = round(time.perf_counter() - began, 2)
            run.assembly_peak_rss_mb = round(peak.mb, 1)
            run.programme_seconds = round(done.result().program_seconds, 1)
        runs.append(run)
    session.close()
    return runs[1:]


def _rendered(out: Path) -> list[int]:
    """The line numbers whose audio the stopped render left in the folder's manifest."""
    import json

    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    return [line["index"] for line in manifest["lines"] if line.get("status") in ("rendered", "cached")]


def to_json(runs: list[LengthRun], **about) -> dict:
    return {**about, "sizes": [asdict(run) for run in runs]}


def feature_length(
    sizes: str, budget: float, *, model: str | None = None, device: str = "auto", say=lambda text: None
) -> dict:
    """``bench --length``: parse the sizes, run them with the fast preset (synthetic:full unless ``model``) and
    return the JSON (machine, model, budget, load average, one entry per size)."""
    from omnidub import Session
    from omnidub.bench.run import machine
    from omnidub.errors import OmnidubError

    try:
        counts = tuple(int(part) for part in sizes.split(",") if part.strip())
    except ValueError:
        counts = ()
    if not counts or min(counts) < 1:
        raise OmnidubError(f"--length takes line counts such as 100,500,1000, got {sizes!r}")
    spec = model or "synthetic:full"
    load_before = os.getloadavg()
    session = Session(spec, device=device)
    # The programmes (scripts, segments, mixes: tens of MB a size) are scratch, removed once measured.
    with tempfile.TemporaryDirectory(prefix="omnidub-length-") as folder:
        runs = run_length(session, Path(folder), counts, budget, say=say)
    return to_json(
        runs,
        machine=machine(session.engine.device, load_before),
        model=spec,
        budget_seconds=budget,
        date=time.strftime("%Y-%m-%d"),
        dtype=session.engine.identity["dtype"],
        layout=session.backend().layout,
        speakers=SPEAKERS,
    )


def print_length(data: dict, console) -> None:
    """The sizes side by side: what grows with the programme and what does not."""
    from rich import box
    from rich.table import Table

    table = Table(
        title=f"omnidub bench --length · {data['model']} · {data['budget_seconds']:.0f} s of rendering per programme",
        box=box.SIMPLE_HEAD,
        pad_edge=False,
        padding=(0, 1),
        collapse_padding=True,
    )
    for column in ("lines", "minutes", "done", "plan s", "s/line", "model", "around", "MB", "mix s", "mix MB"):
        table.add_column(column, justify="right", no_wrap=True)

    def f(value, digits=2):
        return "" if value is None else f"{value:.{digits}f}"

    for run in data["sizes"]:
        table.add_row(
            str(run["lines"]),
            f"{run['programme_seconds'] / 60:.1f}",
            str(run["rendered"]),
            f(run["plan_seconds"]),
            f(run["seconds_per_line"]),
            f(run["model_seconds_per_line"]),
            f(run["around_model_per_line"], 3),
            f(run["peak_rss_mb"], 0),
            f(run["assembly_seconds"]),
            f(run["assembly_peak_rss_mb"], 0),
        )
    console.print(table)
    console.print(
        "minutes: the programme's length · done: lines rendered within the budget · s/line: median wall "
        "seconds from one rendered line to the next · model: the model's own seconds of it · around: the "
        "difference, omnidub's own work per line · MB: the process's peak RSS while rendering · mix s, "
        "mix MB: assembling the whole programme's stems and mix (a cached rerun of the lines done)",
        highlight=False,
    )
