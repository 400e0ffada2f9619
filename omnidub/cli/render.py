"""``omnidub render``: parse the flags, run the job, print what happened."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import List, Optional

import typer
from rich.markup import escape

from omnidub.cli.app import (
    ASR_DEFAULT,
    ASR_HELP,
    INTERRUPTED,
    MODEL_HELP,
    SPEAKER_MODEL_HELP,
    Cfg,
    Command,
    DebugOption,
    Dtype,
    Executor,
    Format,
    app,
    err,
    error_text,
    printable,
    stop_on_ctrl_c,
    user_errors,
    warn_synthetic,
)
from omnidub.cli.show import ProgressListener, plan_json, print_json, print_plan, print_summary, summary_json
from omnidub.errors import OmnidubError

# The render flags a dub takes too (omnidub dub): defined once, so both say and check them alike.
JUDGE_MODEL_OPTION = typer.Option(
    None,
    "--judge-model",
    metavar="NAME|PATH|none",
    show_default=False,
    help="The ASR that judges the dub in QA, when another than --asr-model (which cuts the references and hears the "
    "source); none: no judge, the lines' words go unchecked. [default: --asr-model when it hears the lines' "
    "language, else the default model when it is here, else --asr-model, whose unheard lines QA leaves unchecked]",
)
NO_INPUT_OPTION = typer.Option(
    False, "--no-input", help="Never ask a question (none is asked when stdin or stderr is not a terminal)."
)
VOICE_OPTION = typer.Option(
    [],
    "--voice",
    metavar="[SPEAKER=]REF",
    show_default=False,
    help="Reference audio for the default voice, or for one speaker.",
)
VOICE_TEXT_OPTION = typer.Option(
    [], "--voice-text", metavar="[SPEAKER=]TEXT", show_default=False, help="Exact transcript of a reference."
)
VOICE_MATCH_OPTION = typer.Option(
    None,
    "--voice-match",
    metavar="auto|line|speaker",
    show_default=False,
    help="line: each line cloned from the original line it translates; "
    "speaker: one clip per character; auto: line, and lines that "
    "sound like someone else again from their speaker's clip. "
    "[default: auto with --source]",
)
NAMES_OPTION = typer.Option(
    None,
    "--names",
    metavar="S1=NAME,...",
    show_default=False,
    help="Name the voices found in an unlabelled --source-subs (S1=NORA,S2=OWEN).",
)
SEPARATE_OPTION = typer.Option(
    None,
    "--separate",
    metavar="MODEL",
    show_default=False,
    help="Cut the clips from the vocals a Demucs model isolates (htdemucs, or "
    "a model file); the rest becomes the --bed unless one is given. "
    "Needs omnidub[separate].",
)
BACKEND_OPTION = typer.Option(
    "auto",
    "--backend",
    metavar="auto|torch|onnx",
    help="torch, or ONNX Runtime from an export built once in omnidub's cache (--backend onnx "
    "builds it). [default: auto: ONNX Runtime where it measured faster here in fp32, "
    "with the same tokens; else torch]",
)
SEED_OPTION = typer.Option(
    None,
    "--seed",
    min=0,
    metavar="N",
    show_default=False,
    help="Run seed; each line's seed derives from it. [default: 0]",
)
FORMAT_OPTION = typer.Option(
    Format.wav, "--format", metavar="wav|flac|mp3", help="Format of stems and mix (segments stay WAV)."
)
SAMPLE_RATE_OPTION = typer.Option(
    48000,
    "--sample-rate",
    min=8000,
    max=192000,
    metavar="HZ",
    help="Rate of stems and mixes (segments stay at the model's).",
)
LOUDNESS_OPTION = typer.Option(
    "-23", "--loudness", metavar="LUFS|off", help="Loudness target (EBU R128: -23; streaming: -16), or off."
)
TRUE_PEAK_OPTION = typer.Option(-1.0, "--true-peak", metavar="DBTP", help="Ceiling for the true peak.")
BED_OPTION = typer.Option(
    None,
    "--bed",
    metavar="FILE",
    show_default=False,
    help="Music-and-effects or original audio (any audio or video file) to mix under the dub.",
)
DUCK_OPTION = typer.Option(12.0, "--duck", min=0.0, metavar="DB", help="How far the bed drops while a line plays.")
VIDEO_OPTION = typer.Option(
    None,
    "--video",
    metavar="FILE",
    show_default=False,
    help="Video to put the dub into (picture copied, not re-encoded). [default: the --source, when it is a video]",
)
KEEP_ORIGINAL_OPTION = typer.Option(False, "--keep-original", help="Keep the video's own audio as a second track.")
FPS_OPTION = typer.Option(
    None,
    "--fps",
    metavar="FPS",
    show_default=False,
    help="Frame rate of timecodes, timelines and subtitles, e.g. 25 or 30000/1001. [default: the video's, else 25]",
)
TIMELINE_OPTION = typer.Option(
    "otio", "--timeline", metavar="LIST", help="Timelines to write: otio, edl, fcpxml (comma-separated), or none."
)
SUBTITLE_SPEAKERS_OPTION = typer.Option(
    False,
    "--subtitle-speakers",
    help="Start each cue of the dubbed .srt with 'NAME:' (the .vtt always names the speaker).",
)
FORCE_OPTION = typer.Option(False, "--force", help="Render every line (of --only) again, ignoring the cache.")
ALLOW_OTHER_FILES_OPTION = typer.Option(
    False,
    "--allow-other-files",
    help="Render into a folder that also holds files omnidub did not write (they are never touched).",
)
RETAKES_OPTION = typer.Option(
    0, "--retakes", min=0, metavar="N", help="Render lines that fail QA again, up to N times (implies --qa)."
)
SPEAKER_MODEL_OPTION = typer.Option("resemblyzer", "--speaker-model", metavar="NAME|PATH", help=SPEAKER_MODEL_HELP)


@app.command(cls=Command)
def render(
    inputs: List[Path] = typer.Argument(
        ...,
        metavar="INPUT",
        show_default=False,
        help="Subtitles (.srt, .vtt) or scripts (.txt: 'SPEAKER: text' per line), "
        "or folders of them; all render with one model.",
    ),
    voice: List[str] = VOICE_OPTION,
    voice_text: List[str] = VOICE_TEXT_OPTION,
    voices: Optional[Path] = typer.Option(
        None, "--voices", metavar="FILE", help="voices.toml mapping speakers to references."
    ),
    source: Optional[Path] = typer.Option(
        None,
        "--source",
        metavar="FILE",
        show_default=False,
        help="The original video or audio: each character's voice is cut from it "
        "(voices given by --voice or --voices win).",
    ),
    source_subs: Optional[Path] = typer.Option(
        None,
        "--source-subs",
        metavar="FILE",
        show_default=False,
        help="Subtitles in the language spoken in --source (.srt, .vtt or a "
        "timed script); their labels name the voices. [default: none: "
        "the source is transcribed with the ASR model, and the original "
        "as heard written as references/<stem>.original.srt]",
    ),
    voice_match: Optional[str] = VOICE_MATCH_OPTION,
    names: Optional[str] = NAMES_OPTION,
    separate: Optional[str] = SEPARATE_OPTION,
    language: Optional[str] = typer.Option(
        None,
        "--language",
        metavar="CODE",
        show_default=False,
        help="Language code of the lines, e.g. en, de, zh. [default: the voice's language]",
    ),
    preset: str = typer.Option("fast", "--preset", metavar="NAME|FILE", help="fast, quality, or a preset .toml file."),
    model: str = typer.Option("k2-fsa/OmniVoice", "--model", metavar="ID|PATH", help=MODEL_HELP),
    device: str = typer.Option("auto", "--device", metavar="auto|cpu|cuda|mps", help="Where the model runs."),
    steps: Optional[int] = typer.Option(
        None,
        "--steps",
        min=1,
        metavar="N",
        show_default=False,
        help="Diffusion steps. [default: 12 in fast, 32 in quality]",
    ),
    backend: str = BACKEND_OPTION,
    cfg: Optional[Cfg] = typer.Option(
        None,
        "--cfg",
        metavar="auto|padded|trimmed|packed|joined",
        show_default=False,
        help="Classifier-free guidance layout. "
        "[default: auto: what this machine measured faster (a short probe on first use)]",
    ),
    batch: Optional[int] = typer.Option(
        None,
        "--batch",
        min=1,
        metavar="N",
        show_default=False,
        help="Most lines per forward pass. [default: auto: 1 on CPU]",
    ),
    batch_tokens: Optional[int] = typer.Option(
        None,
        "--batch-tokens",
        min=1,
        metavar="N",
        show_default=False,
        help="Most tokens per forward pass. [default: auto]",
    ),
    dtype: Optional[Dtype] = typer.Option(
        None,
        "--dtype",
        metavar="auto|float32|bfloat16|float16|int8",
        show_default=False,
        help="Model precision; int8 is a lossy CPU opt-in. [default: auto: the fastest the device does well]",
    ),
    compile: Optional[bool] = typer.Option(
        None,
        "--compile/--no-compile",
        show_default=False,
        help="torch.compile the language model. [default: auto: when the job is long enough to pay for it]",
    ),
    prefix_refresh: Optional[int] = typer.Option(
        None,
        "--prefix-refresh",
        min=1,
        metavar="K",
        show_default=False,
        help="Prefix cache: compute the reference and text prefix every K steps and only the target rows in "
        "between; above 1 it is approximate (torch backend; price it with omnidub eval --b "
        "fast,prefix_refresh=K). [default: 1: exact]",
    ),
    out_dir: Optional[Path] = typer.Option(
        None,
        "--out",
        metavar="DIR",
        show_default=False,
        help="Output folder; with several inputs, the folder that holds one per input. [default: output/<input stem>]",
    ),
    cache: Optional[Path] = typer.Option(
        None,
        "--cache",
        metavar="DIR",
        show_default=False,
        help="Line cache shared by inputs and runs. [default: .omnidub/cache/ in each output folder]",
    ),
    executor: Executor = typer.Option(
        Executor.local, "--executor", metavar="local|ray", help="Render here, or on a pool of Ray workers."
    ),
    ray_address: Optional[str] = typer.Option(
        None,
        "--ray-address",
        metavar="auto|HOST:PORT",
        show_default=False,
        help="Ray cluster to join. [default: start a local one]",
    ),
    workers: Optional[int] = typer.Option(
        None,
        "--workers",
        min=1,
        metavar="N",
        show_default=False,
        help="Ray workers, each with one resident model. [default: as many as fit]",
    ),
    gpus_per_worker: Optional[float] = typer.Option(
        None,
        "--gpus-per-worker",
        min=0.0,
        metavar="F",
        show_default=False,
        help="GPUs per Ray worker. [default: 1 on CUDA, else 0]",
    ),
    cpus_per_worker: Optional[int] = typer.Option(
        None,
        "--cpus-per-worker",
        min=1,
        metavar="N",
        show_default=False,
        help="CPUs (and threads) per Ray worker. [default: 1]",
    ),
    seed: Optional[int] = SEED_OPTION,
    format: Format = FORMAT_OPTION,
    sample_rate: int = SAMPLE_RATE_OPTION,
    loudness: str = LOUDNESS_OPTION,
    true_peak: float = TRUE_PEAK_OPTION,
    bed: Optional[Path] = BED_OPTION,
    duck: float = DUCK_OPTION,
    video: Optional[Path] = VIDEO_OPTION,
    keep_original: bool = KEEP_ORIGINAL_OPTION,
    fps: Optional[str] = FPS_OPTION,
    timeline: str = TIMELINE_OPTION,
    subtitle_speakers: bool = SUBTITLE_SPEAKERS_OPTION,
    only: Optional[str] = typer.Option(
        None,
        "--only",
        metavar="LINES",
        show_default=False,
        help="Render just these lines, e.g. 3,8-10; the others keep their audio. [default: every line]",
    ),
    force: bool = FORCE_OPTION,
    allow_other_files: bool = ALLOW_OTHER_FILES_OPTION,
    dry_run: bool = typer.Option(
        False, "--dry-run", help="Plan only: timing, keys and what is cached; loads no model."
    ),
    qa: bool = typer.Option(False, "--qa", help="Run the QA checks after rendering."),
    retakes: int = RETAKES_OPTION,
    asr_model: Optional[str] = typer.Option(
        None, "--asr-model", metavar="NAME|PATH", show_default=False, help=f"{ASR_HELP} [default: {ASR_DEFAULT}]"
    ),
    judge_model: Optional[str] = JUDGE_MODEL_OPTION,
    speaker_model: str = SPEAKER_MODEL_OPTION,
    no_input: bool = NO_INPUT_OPTION,
    as_json: bool = typer.Option(False, "--json", help="Print the plan or the summary as JSON."),
    debug: bool = DebugOption,
) -> None:
    """Render each INPUT into timed stems per speaker plus a mix, with one model for all of them.

    Exit codes: 0 rendered (with --qa: and nothing failed); 1 lines to hear (a line failed to render, or QA found
    one); 2 bad input, said in one line before any work; 130 interrupted (what is done is kept: run it again).

    Licence: the default weights (k2-fsa/OmniVoice) are CC-BY-NC-4.0, for non-commercial use only; a paid dub needs
    other weights (--model). The README's Licence section says more.

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
        prefix_refresh=o["prefix_refresh"],
        seed=o["seed"],
    )
    ray_options = ("ray_address", "workers", "gpus_per_worker", "cpus_per_worker")
    if o["executor"] is Executor.local and any(o[name] is not None for name in ray_options):
        given = next(name for name in ray_options if o[name] is not None)
        raise OmnidubError(f"--{given.replace('_', '-')} is an option of the Ray executor: add --executor ray")
    executor = ExecutorOptions(
        o["executor"].value, o["ray_address"], o["workers"], o["gpus_per_worker"], o["cpus_per_worker"] or 1
    )
    session = Session(
        o["model"],
        o["device"],
        settings,
        o["asr_model"],
        executor=executor,
        backend=o["backend"],
        judge_model=o["judge_model"],
    )
    if not o["dry_run"] and not o["as_json"] and o["backend"] == "auto" and not o["no_input"] and interactive():
        _offer_export(session.engine, o["model"])
    listener = ProgressListener(err, reports=not o["as_json"])
    source, delivery = _source(o), _delivery(o)
    o["delivery_notes"] = []
    if source is not None:
        from omnidub.inputs import default_out_dir
        from omnidub.outputs.deliver import from_source

        one = len(o["inputs"]) == 1 and not Path(o["inputs"][0]).is_dir()
        out = (o["out_dir"] or default_out_dir(o["inputs"][0])) if one else None
        delivery, o["delivery_notes"] = from_source(delivery, source.source, out, separate=bool(o["separate"]))
    job = session.job(
        o["inputs"],
        voices=o["voices"],
        voice=o["voice"],
        voice_text=o["voice_text"],
        language=o["language"],
        out_dir=o["out_dir"],
        cache_dir=o["cache"],
        fmt=o["format"].value,
        force=o["force"],
        listener=listener,
        only=o["only"],
        delivery=delivery,
        allow_other_files=o["allow_other_files"],
        source=source,
        qa=o["qa"] and not o["dry_run"],
        retakes=0 if o["dry_run"] else o["retakes"],
        speaker_model=o["speaker_model"],
    )
    try:
        return _run(o, session.engine, settings, job, listener)
    finally:
        job.close()
        session.close()


def _run(o: dict, engine, settings, job, listener) -> int:
    many = job.many
    for message in job.notes:
        err.print(f"[yellow]note:[/] {escape(printable(message))}", soft_wrap=True)
    for project in job.projects:
        where = f"{project.input_path}: " if many else ""
        for message in (*project.script.warnings, *(f"skipped {s}" for s in project.script.skipped)):
            err.print(f"[yellow]note:[/] {escape(printable(where + message))}", soft_wrap=True)

    if o["dry_run"]:
        return _print_plans(job, o["as_json"])

    job.open()  # folders that cannot be used are said before the model banner, not after
    for run in job.failed:
        err.print(f"[bold red]error:[/] {escape(printable(error_text(run.error)))}", soft_wrap=True)
    if not job.projects:
        return 2
    engine.check_executor()
    warn_synthetic(o["model"])
    _header(o, engine, settings, job)
    engine.on_load = listener.loading
    engine.on_note = lambda text: err.print(f"[cyan]note:[/] {escape(text)}", soft_wrap=True)
    with stop_on_ctrl_c(job):
        runs = job.run()
    if not many and runs[0].error is not None:
        raise runs[0].error
    summaries = [run.summary for run in runs if run.summary is not None]
    if any(summary.interrupted for summary in summaries):
        done = sum(s.rendered + s.cached for s in summaries)
        err.print(f"interrupted: {done} of {sum(s.lines for s in summaries)} lines are done; rerun to finish.")
        return 130
    if job.unchecked:
        folders = " ".join(str(run.out_dir) for run in runs if run.summary is not None)
        err.print(f"interrupted while checking: the outputs are whole; QA did not finish: omnidub qa {folders}")
        return 130
    return _report(runs, many, o["as_json"])


def interactive() -> bool:
    """True when a person answers at a terminal: stdin and stderr both are one (a script, CI, or a closed stdin
    never gets a question)."""
    try:
        return sys.stdin is not None and not sys.stdin.closed and sys.stdin.isatty() and err.is_terminal
    except (ValueError, OSError):
        return False


def _offer_export(engine, model: str) -> None:
    """Where ONNX Runtime was never measured against torch on this CPU in fp32, ask once, before the projects are
    planned, whether to spend the minutes and gigabytes of an export now; a project already rendered keeps the
    backend it was rendered with either way."""
    from omnidub.backends.onnx import cache
    from omnidub.models import resolve_model

    try:
        resolve_model(model, download=False)  # only a model already on this machine: a question never downloads
    except OmnidubError:
        return
    if not engine.backend_choice.could_export or cache.declined_before(engine.source):
        return
    question = (
        f"fp32 on this CPU: ONNX Runtime may render faster than torch with the same tokens. Export "
        f"{model} for it now and measure both ({cache.EXPORT_COST}, once per model)?"
    )
    try:
        answer = typer.confirm(question, default=False, err=True)
    except typer.Abort:  # Ctrl-C or EOF at the question
        err.print()  # off the question's line
        err.print(
            "interrupted at the export question, before anything was rendered or written; run the same command "
            "again (--no-input never asks)"
        )
        raise typer.Exit(INTERRUPTED) from None
    if not answer:
        cache.decline(engine.source)
        err.print(
            "[cyan]note:[/] not asked again on this CPU; --backend onnx builds the export whenever you want it",
            soft_wrap=True,
        )
        return
    engine.on_note = lambda text: err.print(f"[cyan]note:[/] {escape(text)}", soft_wrap=True)
    engine.build_export()


def _header(o: dict, engine, settings, job) -> None:
    for line in header(o["model"], engine, settings, inputs=len(job.projects) if job.many else 1):
        err.print(line, soft_wrap=True)
    for note in o.get("delivery_notes", ()):
        err.print(f"[cyan]note:[/] {escape(printable(note))}", soft_wrap=True)


def header(model: str, engine, settings, *, inputs: int = 1) -> list[str]:
    """The lines that say what renders (rich markup): model, backend and why, preset, layout, compile, inputs,
    workers; then the backend's note and what is approximate."""
    from omnidub.config import approximations

    options = engine.preset.engine
    compiling = {True: ", compiled", False: "", "auto": ", compile auto"}[options.compile]
    refresh = options.decode.prefix_refresh
    cached = f", prefix cache every {refresh} steps (approximate)" if approximations(options) else ""
    layout = engine.layout_status()
    unmeasured = "" if layout.measured else " (not measured here yet: a short probe runs once the model loads)"
    lines = [
        f"omnidub: model [bold]{escape(printable(model))}[/], {escape(engine.backend_reason())}; "
        f"preset {settings.name}: {options.decode.steps} steps, "
        f"cfg {layout.layout}{unmeasured}"
        f"{compiling}"
        + cached
        + (f", {inputs} inputs" if inputs > 1 else "")
        + (", on Ray workers" if engine.executor_options.kind == "ray" else "")
    ]
    if engine.backend_choice.note:
        lines.append(f"[cyan]note:[/] {escape(engine.backend_choice.note)}")
    lines += [f"[yellow]approximate:[/] {escape(said)}" for said in approximations(options)]
    return lines


def _report(runs, many: bool, as_json: bool) -> int:
    """Each input's summary (and error), and the exit code: 1 when a line or input failed, or QA found lines to hear
    (a line failed, or its words could not be scored; a line no judge here hears is no failure)."""
    summaries = [run.summary for run in runs if run.summary is not None]
    qa_failed = {run.out_dir for run in runs if run.report is not None and run.report.exit_code}
    if not many:
        print_summary(summaries[0], as_json)
        return 1 if summaries[0].failed or qa_failed else 0
    if as_json:
        print_json(
            {
                "inputs": [
                    {
                        "input": str(run.input),
                        "error": None if run.error is None else error_text(run.error),
                        **(summary_json(run.summary) if run.summary is not None else {"out_dir": None}),
                    }
                    for run in runs
                ]
            }
        )
    else:
        for summary in summaries:
            print_summary(summary, False)
        for run in runs:
            if run.error is not None:
                err.print(f"[bold red]not rendered:[/] {escape(printable(error_text(run.error)))}", soft_wrap=True)
    bad = [run for run in runs if run.error is not None or run.summary.failed or run.summary.out_dir in qa_failed]
    return 1 if bad else 0


def _print_plans(job, as_json: bool) -> int:
    """The plan of every input of a job; exit 1 when some input cannot be planned, 2 when none can."""
    plans = []
    for project, entries in job.plans():
        if isinstance(entries, OmnidubError):
            if not job.many:
                raise entries
            err.print(f"[bold red]error:[/] {escape(printable(error_text(entries)))}", soft_wrap=True)
        else:
            plans.append((project, entries))
    for run in job.failed:
        err.print(f"[bold red]error:[/] {escape(printable(error_text(run.error)))}", soft_wrap=True)
    if not job.many:
        project, entries = plans[0]
        print_plan(entries, project.estimated, as_json, project.selected, project.pace)
        return 0
    if as_json:
        print_json(
            {
                "inputs": [
                    {
                        "input": str(p.input_path),
                        "out_dir": str(p.out_dir),
                        **plan_json(entries, p.estimated, p.selected, p.pace),
                    }
                    for p, entries in plans
                ]
            }
        )
    else:
        for project, entries in plans:
            sys.stdout.write(f"\n{printable(project.input_path)} -> {printable(project.out_dir)}\n")
            print_plan(entries, project.estimated, False, project.selected)
    if len(plans) == len(job.projects) and not job.failed:
        return 0
    return 1 if plans else 2


def _source(o: dict):
    """--source and its flags as options (one line for a flag given without --source, or half a pair)."""
    from omnidub.source.cast import SourceOptions

    if o["source"] is None:
        given = next(
            (flag for flag in ("source_subs", "voice_match", "separate", "names") if o[flag] is not None), None
        )
        if given:
            raise OmnidubError(
                f"--{given.replace('_', '-')} goes with --source: add --source FILE (the original video or audio)"
            )
        return None
    from omnidub.source.extract import parse_names

    source = SourceOptions(
        o["source"],
        o["source_subs"],
        o["voice_match"] or "auto",
        o["separate"],
        names=tuple(parse_names(o["names"]).items()),
    )
    source.check()
    return source


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
    return DeliveryOptions(
        sample_rate=o["sample_rate"],
        loudness=loudness,
        true_peak=o["true_peak"],
        bed=o["bed"],
        duck=o["duck"],
        video=o["video"],
        keep_original=o["keep_original"],
        fps=fps,
        timelines=timelines,
        language=o["language"],
        subtitle_speakers=o["subtitle_speakers"],
    )
