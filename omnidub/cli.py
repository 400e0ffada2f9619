"""The omnidub command line: a thin shell over the library. Imported by nothing."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import sys
import warnings
from enum import Enum
from pathlib import Path
from typing import List, Optional

import typer
import typer.core
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from omnidub.errors import OmnidubError
from omnidub.files import cache_home

# pydub (pulled in by omnivoice) warns about a missing ffmpeg binary at import; omnidub never needs one.
warnings.filterwarnings("ignore", message="Couldn't find ffmpeg or avconv")

err = Console(stderr=True, highlight=False)
out = Console(highlight=False)

# Typer ships its own copy of click; its exception classes are reached through the one it exports.
_ClickException = next(c for c in typer.BadParameter.__mro__ if c.__name__ == "ClickException")


class _Group(typer.core.TyperGroup):
    """Usage errors (an unknown option, a bad value) are one line on stderr with exit 2, like every other error."""

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        try:
            code = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except _ClickException as exc:
            if type(exc).__name__ == "NoArgsIsHelpError":  # bare `omnidub`: the help, as asked
                exc.show()
                code = exc.exit_code
            else:
                where = f" (see '{exc.ctx.command_path} --help')" if getattr(exc, "ctx", None) is not None else ""
                err.print(f"[bold red]error:[/] {escape(exc.format_message())}{escape(where)}", soft_wrap=True)
                code = exc.exit_code
        except typer.Abort:
            err.print("aborted")
            code = 1
        if not standalone_mode:
            return code
        sys.exit(code if isinstance(code, int) else 0)


class _Command(typer.core.TyperCommand):
    """Arguments in the usage line as their metavars (INPUT), not Typer's {input}."""

    def collect_usage_pieces(self, ctx):
        return [re.sub(r"\{([^{}]*)\}", r"\1", piece) for piece in super().collect_usage_pieces(ctx)]


# Plain click-style help: Typer's rich help shows flags as taking a value (--force <bool>), eats text in square
# brackets, and breaks option values mid-word at 80 columns.
app = typer.Typer(
    cls=_Group,
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    help="Batch dubbing with OmniVoice voice cloning: subtitles or a script in, timed stems per speaker and a mix out.",
)


class Cfg(str, Enum):
    auto = "auto"
    padded = "padded"
    trimmed = "trimmed"
    packed = "packed"


class Dtype(str, Enum):
    auto = "auto"
    float32 = "float32"
    bfloat16 = "bfloat16"
    float16 = "float16"
    int8 = "int8"


class Quantize(str, Enum):
    int8 = "int8"


class Executor(str, Enum):
    local = "local"
    ray = "ray"


class Format(str, Enum):
    wav = "wav"
    flac = "flac"
    mp3 = "mp3"


def _version(value: bool) -> None:
    if value:
        from omnidub import __version__

        out.print(f"omnidub {__version__}")
        raise typer.Exit(0)


@app.callback()
def _main(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Show the version and exit."),
) -> None:
    """Batch dubbing with OmniVoice voice cloning: subtitles or a script in, timed stems per speaker and a mix out."""


MODEL_HELP = "Hub id, local checkpoint folder, or synthetic:tiny / synthetic:full (random weights, offline)."
ASR_HELP = "faster-whisper size name, or a local CTranslate2 model folder (works offline)."
ASR_DEFAULT = "small on CPU, large-v3 on CUDA"
DebugOption = typer.Option(False, "--debug", help="Show full tracebacks.", hidden=True)


@contextlib.contextmanager
def user_errors(debug: bool):
    """Turn a user's mistake into one line on stderr and exit code 2 (``--debug``: the whole chain of causes);
    anything else keeps its traceback."""
    try:
        yield
    except OmnidubError as exc:
        if debug:
            raise
        err.print(f"[bold red]error:[/] {escape(printable(str(exc)))}", soft_wrap=True)
        raise typer.Exit(2) from None


SPEAKER_MODEL_HELP = (
    "Speaker encoder for the QA voice check: resemblyzer (GE2E, bundled), or none to skip the check."
)


def warn_synthetic(model: str) -> None:
    if model.startswith("synthetic:"):
        err.print(
            f"[bold yellow]warning:[/] {model} is a random-weight model of the real architecture: "
            "its audio is noise. Use it to test and benchmark, not to dub.",
            soft_wrap=True,
        )


@app.command(cls=_Command)
def render(
    inputs: List[Path] = typer.Argument(..., metavar="INPUT", show_default=False,
                                        help="Subtitles (.srt, .vtt) or scripts (.txt: 'SPEAKER: text' per line), "
                                             "or folders of them; all render with one model."),
    voice: List[str] = typer.Option([], "--voice", metavar="[SPEAKER=]REF", show_default=False,
                                    help="Reference audio for the default voice, or for one speaker."),
    voice_text: List[str] = typer.Option([], "--voice-text", metavar="[SPEAKER=]TEXT", show_default=False,
                                         help="Exact transcript of a reference."),
    voices: Optional[Path] = typer.Option(None, "--voices", metavar="FILE", help="voices.toml mapping speakers to references."),
    language: Optional[str] = typer.Option(None, "--language", metavar="CODE", show_default=False,
                                           help="Language code of the lines, e.g. en, de, zh. [default: the voice's language]"),
    preset: str = typer.Option("fast", "--preset", metavar="NAME|FILE", help="fast, quality, or a preset .toml file."),
    model: str = typer.Option("k2-fsa/OmniVoice", "--model", metavar="ID|PATH", help=MODEL_HELP),
    device: str = typer.Option("auto", "--device", metavar="auto|cpu|cuda|mps", help="Where the model runs."),
    steps: Optional[int] = typer.Option(None, "--steps", min=1, metavar="N", show_default=False,
                                        help="Diffusion steps. [default: 12 in fast, 32 in quality]"),
    cfg: Optional[Cfg] = typer.Option(None, "--cfg", metavar="auto|padded|trimmed|packed", show_default=False,
                                      help="Classifier-free guidance layout. [default: auto: what bench measured fastest here; untested: padded on CUDA, trimmed elsewhere]"),
    batch: Optional[int] = typer.Option(None, "--batch", min=1, metavar="N", show_default=False,
                                        help="Most lines per forward pass. [default: auto: 1 on CPU]"),
    batch_tokens: Optional[int] = typer.Option(None, "--batch-tokens", min=1, metavar="N", show_default=False,
                                               help="Most tokens per forward pass. [default: auto]"),
    dtype: Optional[Dtype] = typer.Option(None, "--dtype", metavar="auto|float32|bfloat16|float16|int8", show_default=False,
                                          help="Model precision; int8 is a lossy CPU opt-in. [default: auto: the fastest the device does well]"),
    compile: Optional[bool] = typer.Option(None, "--compile/--no-compile", show_default=False,
                                           help="torch.compile the language model. [default: auto: when the job is long enough to pay for it]"),
    out_dir: Optional[Path] = typer.Option(None, "--out", metavar="DIR", show_default=False,
                                           help="Output folder; with several inputs, the folder that holds one per "
                                                "input. [default: output/<input stem>]"),
    cache: Optional[Path] = typer.Option(None, "--cache", metavar="DIR", show_default=False,
                                         help="Line cache shared by inputs and runs. [default: .cache/ in each output folder]"),
    executor: Executor = typer.Option(Executor.local, "--executor", metavar="local|ray",
                                      help="Render here, or on a pool of Ray workers."),
    ray_address: Optional[str] = typer.Option(None, "--ray-address", metavar="auto|HOST:PORT", show_default=False,
                                              help="Ray cluster to join. [default: start a local one]"),
    workers: Optional[int] = typer.Option(None, "--workers", min=1, metavar="N", show_default=False,
                                          help="Ray workers, each with one resident model. [default: as many as fit]"),
    gpus_per_worker: Optional[float] = typer.Option(None, "--gpus-per-worker", min=0.0, metavar="F", show_default=False,
                                                    help="GPUs per Ray worker. [default: 1 on CUDA, else 0]"),
    cpus_per_worker: Optional[int] = typer.Option(None, "--cpus-per-worker", min=1, metavar="N", show_default=False,
                                                  help="CPUs (and threads) per Ray worker. [default: 1]"),
    seed: Optional[int] = typer.Option(None, "--seed", min=0, metavar="N", show_default=False,
                                       help="Run seed; each line's seed derives from it. [default: 0]"),
    format: Format = typer.Option(Format.wav, "--format", metavar="wav|flac|mp3", help="Format of stems and mix (segments stay WAV)."),
    sample_rate: int = typer.Option(48000, "--sample-rate", min=8000, max=192000, metavar="HZ",
                                    help="Rate of stems and mixes (segments stay at the model's)."),
    loudness: str = typer.Option("-23", "--loudness", metavar="LUFS|off",
                                 help="Loudness target (EBU R128: -23; streaming: -16), or off."),
    true_peak: float = typer.Option(-1.0, "--true-peak", metavar="DBTP", help="Ceiling for the true peak."),
    bed: Optional[Path] = typer.Option(None, "--bed", metavar="FILE", show_default=False,
                                       help="Music-and-effects or original audio (any audio or video file) "
                                       "to mix under the dub."),
    duck: float = typer.Option(12.0, "--duck", min=0.0, metavar="DB", help="How far the bed drops while a line plays."),
    video: Optional[Path] = typer.Option(None, "--video", metavar="FILE", show_default=False,
                                         help="Video to put the dub into (picture copied, not re-encoded)."),
    keep_original: bool = typer.Option(False, "--keep-original", help="Keep the video's own audio as a second track."),
    fps: Optional[str] = typer.Option(None, "--fps", metavar="FPS", show_default=False,
                                      help="Frame rate of timecodes and timelines, e.g. 25 or 30000/1001. "
                                      "[default: the video's, else 25]"),
    timeline: str = typer.Option("otio", "--timeline", metavar="LIST",
                                 help="Timelines to write: otio, edl, fcpxml (comma-separated), or none."),
    only: Optional[str] = typer.Option(None, "--only", metavar="LINES", show_default=False,
                                       help="Render just these lines, e.g. 3,8-10; the others keep their audio. [default: every line]"),
    force: bool = typer.Option(False, "--force", help="Render again, ignoring the cache; also allows an output "
                               "folder that holds other files."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Plan only: timing, keys and what is cached; loads no model."),
    qa: bool = typer.Option(False, "--qa", help="Run the QA checks after rendering."),
    retakes: int = typer.Option(0, "--retakes", min=0, metavar="N", help="Render lines that fail QA again, up to N times (implies --qa)."),
    asr_model: Optional[str] = typer.Option(None, "--asr-model", metavar="NAME|PATH", show_default=False, help=f"{ASR_HELP} [default: {ASR_DEFAULT}]"),
    speaker_model: str = typer.Option("resemblyzer", "--speaker-model", metavar="NAME|PATH", help=SPEAKER_MODEL_HELP),
    as_json: bool = typer.Option(False, "--json", help="Print the plan or the summary as JSON."),
    debug: bool = DebugOption,
) -> None:
    """Render each INPUT into timed stems per speaker plus a mix, with one model for all of them.

    \b
    Examples:
      omnidub render episode.srt --voices voices.toml
      omnidub render episode.srt --voice ALICE=alice.wav --voice-text "ALICE=Hi."
      omnidub render script.txt --voices voices.toml --dry-run
      omnidub render episode.srt --voices voices.toml --only 3,8-10
      omnidub render episode.srt --voices voices.toml --model synthetic:tiny
      omnidub render season/ --voices voices.toml --executor ray --workers 4
    """
    with user_errors(debug):
        code = _render(**locals())
    raise typer.Exit(code)


def _render(**o) -> int:
    from omnidub.api import Session
    from omnidub.config import load_preset
    from omnidub.scheduler import ExecutorOptions

    if o["qa"] or o["retakes"]:
        from omnidub.qa import speaker_encoder

        speaker_encoder(o["speaker_model"])  # a wrong name is said before the render, not after it
    settings = load_preset(o["preset"]).with_overrides(
        steps=o["steps"],
        cfg=o["cfg"].value if o["cfg"] else None,
        batch=o["batch"],
        batch_tokens=o["batch_tokens"],
        dtype=o["dtype"].value if o["dtype"] else None,
        compile=o["compile"],
        seed=o["seed"],
    )
    ray_options = ("ray_address", "workers", "gpus_per_worker", "cpus_per_worker")
    if o["executor"] is Executor.local and any(o[name] is not None for name in ray_options):
        given = next(name for name in ray_options if o[name] is not None)
        raise OmnidubError(f"--{given.replace('_', '-')} is an option of the Ray executor: add --executor ray")
    executor = ExecutorOptions(o["executor"].value, o["ray_address"], o["workers"], o["gpus_per_worker"],
                               o["cpus_per_worker"] or 1)
    session = Session(o["model"], o["device"], settings, o["asr_model"], executor=executor)
    listener = _ProgressListener(err)
    job = session.job(o["inputs"], voices=o["voices"], voice=o["voice"], voice_text=o["voice_text"],
                      language=o["language"], out_dir=o["out_dir"], cache_dir=o["cache"], fmt=o["format"].value,
                      force=o["force"], listener=listener, only=o["only"], delivery=_delivery(o))
    try:
        return _run(o, session, settings, job, listener)
    finally:
        job.close()
        session.close()


def _run(o: dict, session, settings, job, listener) -> int:
    many = job.many
    for message in job.notes:
        err.print(f"[yellow]note:[/] {escape(printable(message))}", soft_wrap=True)
    for renderer in job.renderers:
        where = f"{renderer.input_path}: " if many else ""
        for message in (*renderer.script.warnings, *(f"skipped {s}" for s in renderer.script.skipped)):
            err.print(f"[yellow]note:[/] {escape(printable(where + message))}", soft_wrap=True)

    if o["dry_run"]:
        if not many:
            renderer = job.renderers[0]
            _print_plan(renderer.plan(), renderer.estimated, o["as_json"], renderer.selected)
            return 0
        return _print_plans(job, o["as_json"])

    job.open()  # folders that cannot be used are said before the model banner, not after
    for run in job.failed:
        err.print(f"[bold red]error:[/] {escape(printable(str(run.error)))}", soft_wrap=True)
    if not job.renderers:
        return 2
    session.check_executor()
    warn_synthetic(o["model"])
    if settings.engine.compile:  # True or "auto": inductor's kernels persist in omnidub's cache
        os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", str(cache_home() / "inductor"))
    engine = settings.engine
    compiling = {True: ", compiled", False: "", "auto": ", compile auto"}[engine.compile]
    err.print(
        f"omnidub: model [bold]{escape(printable(o['model']))}[/] ({session.backend_name}) on {session.device} "
        f"({session.identity['dtype']}), preset {settings.name}: {engine.decode.steps} steps, "
        f"cfg {session.settings['cfg']}{compiling}"
        + (f", {len(job.renderers)} inputs" if many else "")
        + (", on Ray workers" if session.executor_options.kind == "ray" else ""),
        soft_wrap=True,
    )
    session.on_load = listener.loading
    session.on_note = lambda text: err.print(f"[cyan]note:[/] {escape(text)}", soft_wrap=True)
    with _stop_on_ctrl_c(job):
        runs = job.run()
    if not many and runs[0].error is not None:
        raise runs[0].error
    summaries = [run.summary for run in runs if run.summary is not None]
    if any(summary.interrupted for summary in summaries):
        done = sum(s.rendered + s.cached for s in summaries)
        err.print(f"interrupted: {done} of {sum(s.lines for s in summaries)} lines are done; rerun to finish.")
        return 130
    session.close()  # Ray workers are not needed for QA (retakes render here)

    qa_failed = set()
    if o["qa"] or o["retakes"]:
        from omnidub.qa import print_report, speaker_encoder, write_reports
        from omnidub.retakes import qa_with_retakes

        encoder = speaker_encoder(o["speaker_model"], session.device)
        rendered = {run.input for run in runs if run.summary is not None}
        for renderer in (r for r in job.renderers if r.input_path in rendered):
            if many:
                listener.input(renderer.out_dir.name)
            with _qa_progress(err) as progress:
                report = qa_with_retakes(renderer, session.asr(), o["retakes"], listener, progress=progress,
                                         encoder=encoder)
            written = write_reports(report, renderer.out_dir)
            if not o["as_json"]:
                print_report(report, err, written)
            if not report.passed:
                qa_failed.add(renderer.out_dir)
    if not many:
        _print_summary(summaries[0], o["as_json"])
        return 1 if summaries[0].failed or qa_failed else 0
    if o["as_json"]:
        _print_json({"inputs": [
            {"input": str(run.input), "error": None if run.error is None else str(run.error),
             **(_summary_json(run.summary) if run.summary is not None else {"out_dir": None})}
            for run in runs]})
    else:
        for summary in summaries:
            _print_summary(summary, False)
        for run in runs:
            if run.error is not None:
                err.print(f"[bold red]not rendered:[/] {escape(printable(str(run.error)))}", soft_wrap=True)
    bad = [run for run in runs if run.error is not None or run.summary.failed or run.summary.out_dir in qa_failed]
    return 1 if bad else 0


def _print_plans(job, as_json: bool) -> int:
    """The plan of every input of a job; exit 1 when some input cannot be planned, 2 when none can."""
    plans = []
    for renderer in job.renderers:
        try:
            plans.append((renderer, renderer.plan()))
        except OmnidubError as exc:
            err.print(f"[bold red]error:[/] {escape(printable(str(exc)))}", soft_wrap=True)
    for run in job.failed:
        err.print(f"[bold red]error:[/] {escape(printable(str(run.error)))}", soft_wrap=True)
    if as_json:
        _print_json({"inputs": [{"input": str(r.input_path), "out_dir": str(r.out_dir),
                                 **_plan_json(entries, r.estimated, r.selected)} for r, entries in plans]})
    else:
        for renderer, entries in plans:
            sys.stdout.write(f"\n{printable(renderer.input_path)} -> {printable(renderer.out_dir)}\n")
            _print_plan(entries, renderer.estimated, False, renderer.selected)
    if len(plans) == len(job.renderers) and not job.failed:
        return 0
    return 1 if plans else 2


def _delivery(o: dict):
    """The delivery flags as options (bad values are one-line errors)."""
    from fractions import Fraction

    from omnidub.outputs.deliver import DeliveryOptions

    loudness = None
    if o["loudness"].strip().lower() != "off":
        try:
            loudness = float(o["loudness"])
        except ValueError as exc:
            raise OmnidubError(f"--loudness takes a target in LUFS (e.g. -23) or off, not {o['loudness']!r}") from exc
    fps = None
    if o["fps"]:
        try:
            fps = float(Fraction(o["fps"].strip()))
        except (ValueError, ZeroDivisionError) as exc:
            raise OmnidubError(f"--fps takes a frame rate such as 25, 29.97 or 30000/1001, not {o['fps']!r}") from exc
    timelines = tuple(t.strip().lower() for t in o["timeline"].split(",") if t.strip() and t.strip().lower() != "none")
    return DeliveryOptions(sample_rate=o["sample_rate"], loudness=loudness, true_peak=o["true_peak"], bed=o["bed"],
                           duck=o["duck"], video=o["video"], keep_original=o["keep_original"], fps=fps,
                           timelines=timelines, language=o["language"])


@contextlib.contextmanager
def _stop_on_ctrl_c(job):
    """First Ctrl-C: finish the lines in flight, then stop cleanly. A second one stops at once."""
    def handler(signum, frame):
        if job.stopping:
            # The journal already holds every finished line; only the lines in flight are dropped.
            raise KeyboardInterrupt
        job.request_stop()
        err.print("[yellow]note:[/] stopping after the line in flight (Ctrl-C again to stop now)")

    previous = signal.signal(signal.SIGINT, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def _plan_json(entries, estimated: bool, selected=lambda index: True) -> dict:
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
    return {"estimated": estimated, "lines": rows}


def _print_plan(entries, estimated: bool, as_json: bool, selected=lambda index: True) -> None:
    plan = _plan_json(entries, estimated, selected)
    if as_json:
        _print_json(plan)
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
        lines += textwrap.wrap("Timings are estimates: some voices are not prepared yet, so their pace comes from the "
                               "whole sample. The render prepares them first, which can change natural lengths and, "
                               "in an untimed script, start times.", width)
    lines.append(_columns(rows, width))
    lines += textwrap.wrap("compressed: sped up to fit · extended: runs into the silence after its slot · "
                           "overflow: longer than its room", width)
    # Plain text, not a rich Table: a 2,400-cue plan must print in a moment (rich took seconds).
    sys.stdout.write("\n".join(lines) + "\n")
    sys.stdout.flush()


def _columns(rows: list[dict], width: int) -> str:
    """The plan as aligned columns; on a narrow terminal each line's flags and text go on a line of their own."""
    header = ["#", "speaker", "start", "end", "natural", "target", "speed", "status", "flags"]
    table = [[str(r["index"]), printable(r["speaker"]), f"{r['start']:.2f}", f"{r['end']:.2f}", f"{r['natural']:.2f}",
              f"{r['target']:.2f}", f"{r['speed']:.2f}x", r["status"], " ".join(r["flags"])] for r in rows]
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
        return f"{fixed} {cut(text)}" if beside else f"{fixed.rstrip()}\n    {cut(f'[{flags}] {text}' if flags else text)}"

    body = [line(header, "text" if beside else "flags, text"), "-" * min(width, used + room)]
    body += [line(cells, printable(r["text"]), " ".join(r["flags"])) for cells, r in zip(table, rows)]
    return "\n".join(body)


def _summary_json(summary) -> dict:
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


def _print_summary(summary, as_json: bool) -> None:
    data = _summary_json(summary)
    if as_json:
        _print_json(data)
        return
    table = Table(title=f"Rendered into {escape(printable(summary.out_dir))}", show_header=False)
    table.add_column(style="bold")
    table.add_column()
    pending = f", {len(summary.pending)} left for later (--only)" if summary.pending else ""
    table.add_row("lines", f"{summary.lines}: {summary.rendered} rendered, {summary.cached} cached, "
                           f"{summary.failed} failed{pending}")
    if summary.overflow:
        table.add_row("overflow", "line(s) " + ", ".join(map(str, summary.overflow)) + " run longer than their room")
    table.add_row("program", f"{summary.program_seconds:.1f} s")
    if summary.rtf is not None:
        table.add_row("speed", f"{summary.synth_seconds:.1f} s for {summary.audio_seconds:.1f} s of audio (RTF {summary.rtf:.2f})")
    for label, level in (summary.loudness or {}).items():
        if level:
            table.add_row("loudness" if label == "mix" else "over the bed", _level_text(level))
    table.add_row("outputs", escape(printable(", ".join(data["outputs"]))))
    out.print(table)


def _level_text(level: dict) -> str:
    def number(value, unit):
        return "-" if value is None else f"{value:.1f} {unit}"

    text = (f"{number(level['integrated'], 'LUFS')}, range {number(level['range'], 'LU')}, "
            f"true peak {number(level['true_peak'], 'dBTP')} (gain {level['gain']:+.1f} dB")
    return text + (", limited)" if level["limited"] else ")")


class _ProgressListener:
    """Shows render progress with rich: lines done, cached vs rendered, the line, elapsed, ETA, running RTF."""

    def __init__(self, console: Console):
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
        self.current = ""  # the input the latest line belongs to, in jobs of several inputs
        self.said: set[str] = set()
        self.rendered = self.cached = self.failed = 0
        self.audio = self.wall = 0.0

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

    def start(self, total: int) -> None:
        self.progress.start()
        self.task = self.progress.add_task("rendering", total=total, counts="", rtf="")

    def line_started(self, entry) -> None:
        text = printable(entry.text)
        text = text if len(text) <= 40 else text[:39] + "…"
        where = f"{escape(self.current)} · " if self.current else ""
        self.progress.update(self.task, description=f"{where}line {entry.index} · {escape(printable(entry.speaker))} · {escape(text)}")

    def line_done(self, entry, audio_seconds: float, wall_seconds: float) -> None:
        status = entry.status
        self.rendered += status == "rendered"
        self.cached += status == "cached"
        self.failed += status == "failed"
        self.audio += audio_seconds if status == "rendered" else 0.0
        self.wall += wall_seconds
        counts = f"{self.rendered} rendered · {self.cached} cached" + (f" · [red]{self.failed} failed[/]" if self.failed else "")
        rtf = f"RTF {self.wall / self.audio:.2f}" if self.audio else ""
        self.progress.update(self.task, advance=1, counts=counts, rtf=rtf)
        if status == "failed":
            where = f"{escape(self.current)} " if self.current else ""
            self.console.print(f"[red]{where}line {entry.index} failed:[/] {escape(printable(entry.error or ''))}", soft_wrap=True)

    def finish(self) -> None:
        if self.task is not None:
            self.progress.update(self.task, description="done")
        self.progress.stop()


def _print_json(data) -> None:
    # Plain text, not rich's highlighted JSON: a 2,400-line plan took 11 s through rich and is read by programs.
    sys.stdout.write(json.dumps(data, indent=2, ensure_ascii=False) + "\n")
    sys.stdout.flush()


def printable(text: str) -> str:
    """Text with control characters (ANSI escapes included) removed, safe to show in a terminal."""
    return "".join(ch for ch in str(text) if ch.isprintable() or ch == " ")


@contextlib.contextmanager
def _qa_progress(console: Console):
    """A progress bar for transcribing lines; yields the callback qa.run_qa takes."""
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    with Progress(TextColumn("transcribing"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  TimeRemainingColumn(), console=console, transient=True) as progress:
        task = progress.add_task("qa", total=None)

        def advance(done: int, total: int, index: int) -> None:
            progress.update(task, completed=done, total=total)

        yield advance


@app.command(cls=_Command)
def qa(
    out_dir: Path = typer.Argument(..., metavar="OUT_DIR", show_default=False, help="A folder written by omnidub render."),
    asr_model: Optional[str] = typer.Option(None, "--asr-model", metavar="NAME|PATH", show_default=False, help=f"{ASR_HELP} [default: {ASR_DEFAULT}]"),
    max_wer: Optional[float] = typer.Option(None, "--max-wer", min=0.0, metavar="X", show_default=False,
                                            help="Highest WER (CER for zh/ja/...) a line may have. "
                                                 "[default: the render's preset, else 0.2]"),
    speaker_model: str = typer.Option("resemblyzer", "--speaker-model", metavar="NAME|PATH", help=SPEAKER_MODEL_HELP),
    device: str = typer.Option("auto", "--device", metavar="auto|cpu|cuda", help="Device for the ASR and speaker models."),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON."),
    debug: bool = DebugOption,
) -> None:
    """Transcribe every rendered line, compare its voice with its speaker's, and report what to listen to
    (exit 1 when a line fails).

    \b
    Examples:
      omnidub qa output/episode
      omnidub qa output/episode --asr-model ~/models/whisper-small --json
    """
    with user_errors(debug):
        from omnidub.api import Session
        from omnidub.qa import print_report, report_json

        session = Session(device=device, asr_model=asr_model)
        with _qa_progress(err) as progress:
            report = session.qa(out_dir, max_wer=max_wer, progress=progress, speaker_model=speaker_model)
        if as_json:
            _print_json(report_json(report))
            err.print(f"wrote {escape(str(out_dir / 'qa.json'))} and {escape(str(out_dir / 'qa.html'))}", soft_wrap=True)
        else:
            print_report(report, out, (out_dir / "qa.json", out_dir / "qa.html"))
    raise typer.Exit(0 if report.passed else 1)


@app.command(cls=_Command)
def bench(
    model: Optional[str] = typer.Option(None, "--model", metavar="ID|PATH", help=f"{MODEL_HELP} [default: k2-fsa/OmniVoice, else synthetic:full offline]",
                                        show_default=False),
    device: str = typer.Option("auto", "--device", metavar="auto|cpu|cuda|mps", help="Where the model runs."),
    lines: int = typer.Option(2, "--lines", min=1, metavar="N", help="How many dubbing lines to synthesize per row."),
    rows: Optional[str] = typer.Option(None, "--rows", metavar="ROWS", show_default=False,
                                       help="Comma-separated row numbers or names to run (see the table's names). [default: all but compile]"),
    repeat: Optional[int] = typer.Option(None, "--repeat", min=1, metavar="N", show_default=False,
                                         help="Timed repeats per row, interleaved; the median is shown. [default: 3]"),
    batch: int = typer.Option(2, "--batch", min=1, metavar="N", help="Batch size of the batching row."),
    compile: bool = typer.Option(False, "--compile", help="Add the torch.compile row (compile time reported apart)."),
    ref: Optional[Path] = typer.Option(None, "--ref", metavar="FILE",
                                       help="Reference clip (with --ref-text) instead of the bundled voice."),
    ref_text: Optional[str] = typer.Option(None, "--ref-text", metavar="TEXT", help="Exact transcript of --ref."),
    quick: bool = typer.Option(False, "--quick", help="Smoke test: synthetic:tiny, 2 lines, few steps."),
    ladder_dtype: Optional[Dtype] = typer.Option(None, "--dtype", metavar="float32|bfloat16|float16", show_default=False,
                                                 help="The ladder's precision; the 'dtype' rows use the other of float32 and bfloat16. [default: float32, float16 on CUDA]"),
    json_file: Optional[Path] = typer.Option(None, "--json", metavar="FILE", help="Also write every figure to this JSON file."),
    debug: bool = DebugOption,
) -> None:
    """Measure each speed lever against the row it changes, the peer recipe beside them, in one process."""
    with user_errors(debug):
        from omnidub.bench import BenchOptions, print_bench, run_bench
        from omnidub.files import write_text_atomic

        if json_file is not None and not json_file.parent.is_dir():
            raise OmnidubError(f"--json {json_file}: folder {json_file.parent} does not exist")

        options = BenchOptions(
            model=model, device=device, lines=lines, rows=rows, repeat=repeat, batch=batch, compile=compile,
            ref=ref, ref_text=ref_text, quick=quick, dtype=ladder_dtype.value if ladder_dtype else None,
        )
        result = run_bench(options, console=err, warn=warn_synthetic)
        print_bench(result, out)
        if json_file:
            write_text_atomic(json_file, json.dumps(result.to_json(), indent=2))
            err.print(f"wrote {json_file}")
    raise typer.Exit(0)


@app.command(cls=_Command)
def export(
    out_dir: Path = typer.Argument(..., metavar="OUT_DIR", show_default=False,
                                   help="Folder to write the ONNX graphs, export.json and parity.json into."),
    model: str = typer.Option("k2-fsa/OmniVoice", "--model", metavar="ID|PATH", help=MODEL_HELP),
    opset: int = typer.Option(18, "--opset", min=14, max=21, metavar="N", help="ONNX opset of the graphs."),
    quantize: Optional[Quantize] = typer.Option(None, "--quantize", metavar="int8", help="Also write a dynamic int8 transformer and render with it (its parity is reported as a cost)."),
    no_check: bool = typer.Option(False, "--no-check", help="Skip the parity check against torch."),
    check_only: bool = typer.Option(False, "--check-only", help="Only run the parity check of an existing export."),
    as_json: bool = typer.Option(False, "--json", help="Print the parity report as JSON."),
    debug: bool = DebugOption,
) -> None:
    """Export the model as ONNX graphs for the ONNX Runtime backend (--model OUT_DIR), then check them against
    torch in fp32 on the CPU (exit 1 when a parity bound is missed)."""
    with user_errors(debug):
        from omnidub.backends.onnx.parity import check, print_parity

        if check_only and (no_check or quantize is not None):
            raise OmnidubError("--check-only checks an existing export: it takes neither --no-check nor --quantize")
        if not check_only:
            from omnidub.backends.onnx.export import export as export_graphs

            warn_synthetic(model)
            err.print(f"exporting {escape(model)} to {escape(str(out_dir))} (opset {opset})")
            result = export_graphs(out_dir, model, opset=opset, quantize=quantize.value if quantize else None)
            err.print(f"exported in {result.seconds:.0f} s")
            if no_check:
                raise typer.Exit(0)
        report = check(out_dir, progress=lambda message: err.print(f"→ {message}"))
        if as_json:
            _print_json(report)
        else:
            print_parity(report, out)
            err.print(f"parity report: {out_dir / 'parity.json'}")
    raise typer.Exit(0 if report["pass"] else 1)


def set_threads() -> None:
    """Before torch loads: one intra-op thread per physical core, and on a busy machine (load above the cores)
    OpenMP threads that sleep rather than spin while waiting, since spinning threads starve each other there.
    Values the user set win. The library never touches process-wide settings; the command line does."""
    import psutil

    cores = psutil.cpu_count(logical=False) or os.cpu_count() or 1
    os.environ.setdefault("OMP_NUM_THREADS", str(cores))
    try:
        busy = os.getloadavg()[0] > cores
    except OSError:  # no load average on this platform
        busy = False
    if busy:
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


def main() -> None:
    """Console entry point."""
    set_threads()
    app()
