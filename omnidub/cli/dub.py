"""``omnidub dub``: one command from a source video to its dub, a thin shell over ``omnidub.api.dub``."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer
from rich.markup import escape

from omnidub.cli.app import (
    INTERRUPTED,
    MODEL_HELP,
    SPEAKER_MODEL_HELP,
    Command,
    DebugOption,
    Format,
    app,
    err,
    out,
    printable,
    stop_on_ctrl_c,
    user_errors,
    warn_synthetic,
)
from omnidub.cli.render import (
    ALLOW_OTHER_FILES_OPTION,
    BACKEND_OPTION,
    BED_OPTION,
    DUCK_OPTION,
    FORMAT_OPTION,
    FPS_OPTION,
    KEEP_ORIGINAL_OPTION,
    LOUDNESS_OPTION,
    NAMES_OPTION,
    NO_INPUT_OPTION,
    SAMPLE_RATE_OPTION,
    SEED_OPTION,
    SEPARATE_OPTION,
    SUBTITLE_SPEAKERS_OPTION,
    TIMELINE_OPTION,
    TRUE_PEAK_OPTION,
    VOICE_OPTION,
    VOICE_TEXT_OPTION,
    _delivery,
    header,
)
from omnidub.cli.show import ProgressListener, print_summary
from omnidub.cli.translate import ENGINE_HELP, LinesBar, engine_options

# Flags the notes of the layers below name by the render's word where the dub has its own.
_DUB_FLAGS = {"--language": "--from"}


@app.command(cls=Command)
def dub(
    source: Path = typer.Argument(
        ..., metavar="SOURCE", show_default=False, help="The original video or audio (any file PyAV reads)."
    ),
    to: str = typer.Option(..., "--to", metavar="LANG", show_default=False, help="The language of the dub."),
    source_subs: Optional[Path] = typer.Option(
        None,
        "--source-subs",
        metavar="ORIGINAL",
        show_default=False,
        help="Subtitles in the language spoken in SOURCE, speaker labels naming the voices. [default: SOURCE is "
        "heard and its voices grouped, into voices/<stem>.original.srt in the folder]",
    ),
    source_language: Optional[str] = typer.Option(
        None, "--from", metavar="LANG", show_default=False, help="The language spoken in SOURCE. [default: detected]"
    ),
    engine: str = typer.Option("firefox", "--engine", metavar="firefox|llm", help=ENGINE_HELP),
    mt_model: Optional[List[Path]] = typer.Option(
        None,
        "--mt-model",
        metavar="DIR",
        show_default=False,
        help="A local Firefox Translations model folder. [default: one on this machine (omnidub models lists them), "
        "else fetched once]",
    ),
    llm_url: Optional[str] = typer.Option(None, "--llm-url", metavar="URL", show_default=False, help="LLM endpoint."),
    llm_model: Optional[str] = typer.Option(
        None, "--llm-model", metavar="NAME", show_default=False, help="The model the endpoint serves."
    ),
    llm_timeout: float = typer.Option(60.0, "--llm-timeout", min=1, metavar="SECONDS", help="Wait for an answer."),
    glossary: Optional[Path] = typer.Option(
        None, "--glossary", metavar="FILE", show_default=False, help="TOML: keep = [names]; [LANG] term = translation."
    ),
    voice: List[str] = VOICE_OPTION,
    voice_text: List[str] = VOICE_TEXT_OPTION,
    voice_match: str = typer.Option(
        "auto",
        "--voice-match",
        metavar="auto|line|speaker",
        help="line: each line cloned from the original line it translates; speaker: one clip per character; auto: "
        "line, and lines that sound like someone else again from their speaker's clip.",
    ),
    names: Optional[str] = NAMES_OPTION,
    separate: Optional[str] = SEPARATE_OPTION,
    model: str = typer.Option("k2-fsa/OmniVoice", "--model", metavar="ID|PATH", help=MODEL_HELP),
    backend: str = BACKEND_OPTION,
    asr_model: Optional[str] = typer.Option(
        None,
        "--asr-model",
        metavar="NAME|PATH",
        show_default=False,
        help="Hears SOURCE (without --source-subs) and cuts its clips: faster-whisper size name or a local folder "
        "(tiny.en works offline, English only: a source in another language needs --source-subs, which are then "
        "taken as they are). [default: small on CPU, when it is here]",
    ),
    judge_model: Optional[str] = typer.Option(
        None,
        "--judge-model",
        metavar="NAME|PATH|none",
        show_default=False,
        help="Judges the dub in QA. [default: --asr-model when it hears --to, else the default model when it is "
        "here, else none: the dub's words go unchecked, said in one line]",
    ),
    speaker_model: str = typer.Option("resemblyzer", "--speaker-model", metavar="NAME|PATH", help=SPEAKER_MODEL_HELP),
    retakes: int = typer.Option(
        0, "--retakes", min=0, metavar="N", help="Render lines that fail QA again, up to N times each."
    ),
    preset: str = typer.Option("fast", "--preset", metavar="NAME|FILE", help="The render preset."),
    device: str = typer.Option("auto", "--device", metavar="auto|cpu|cuda|mps", help="Where the models run."),
    seed: Optional[int] = SEED_OPTION,
    format: Format = FORMAT_OPTION,
    sample_rate: int = SAMPLE_RATE_OPTION,
    loudness: str = LOUDNESS_OPTION,
    true_peak: float = TRUE_PEAK_OPTION,
    bed: Optional[Path] = BED_OPTION,
    duck: float = DUCK_OPTION,
    video: Optional[Path] = typer.Option(
        None,
        "--video",
        metavar="FILE",
        show_default=False,
        help="Video to put the dub into (picture copied, not re-encoded; a new file in render/). [default: SOURCE, "
        "when it has a picture]",
    ),
    keep_original: bool = KEEP_ORIGINAL_OPTION,
    fps: Optional[str] = FPS_OPTION,
    timeline: str = TIMELINE_OPTION,
    subtitle_speakers: bool = SUBTITLE_SPEAKERS_OPTION,
    force: bool = typer.Option(False, "--force", help="Render every line again, ignoring the line cache."),
    allow_other_files: bool = ALLOW_OTHER_FILES_OPTION,
    out_dir: Optional[Path] = typer.Option(
        None,
        "--out",
        metavar="DIR",
        show_default=False,
        help="Folder of the stages: voices/, translation/, render/. [default: dub/<source stem>]",
    ),
    no_input: bool = NO_INPUT_OPTION,
    debug: bool = DebugOption,
) -> None:
    """Dub SOURCE into --to: hear it (unless --source-subs), cast its voices, translate each line to fit its slot at
    the pace of the clip it is cloned from, render it in those voices, check it, and say where to review.

    Every stage leaves a file to edit and run again from: voices/<stem>.original.srt (the original as heard;
    corrected, it is read as it is), translation/<stem>.<LANG>.srt (edited by hand, it is kept and rendered as it
    is) and render/ (the dub, its manifest and QA). A rerun redoes only what changed. It never asks a question.

    Exit codes: 0 dubbed, and QA found nothing to hear (lines in a language no judge here hears are left unchecked
    and said in one line); 1 dubbed, with lines to hear; 2 bad input, said in one line before any work; 130
    interrupted (Ctrl-C): one line says which stage stopped and what is on disk; run it again to go on.

    Licence: the default weights (k2-fsa/OmniVoice) are CC-BY-NC-4.0, for non-commercial use only; a paid dub needs
    other weights (--model).

    \b
    Examples:
      omnidub dub episode.mkv --to es --asr-model small
      omnidub dub episode.mkv --to pt --asr-model tiny.en --bed music.wav
      omnidub dub film.mkv --from pt --to en --source-subs original.pt.srt --judge-model tiny.en
    """
    del no_input  # a dub never asks: the flag is taken so that scripts may pass it to every command
    from omnidub.api import Session
    from omnidub.config import load_preset
    from omnidub.source.extract import parse_names

    listener = _DubListener(err)
    dubbing = None
    with user_errors(debug):
        settings = load_preset(preset).with_overrides(seed=seed)
        delivery = _delivery(
            dict(
                sample_rate=sample_rate,
                loudness=loudness,
                true_peak=true_peak,
                bed=bed,
                duck=duck,
                video=video,
                keep_original=keep_original,
                fps=fps,
                timeline=timeline,
                language=None,
                subtitle_speakers=subtitle_speakers,
            )
        )
        session = Session(model, device, settings, asr_model, backend=backend, judge_model=judge_model)
        dubbing = session.dubbing(
            source,
            to,
            out_dir=out_dir,
            listener=listener,
            source_subs=source_subs,
            source_language=source_language,
            engine=engine,
            mt_models=tuple(mt_model or ()),
            llm=engine_options(engine, llm_url, llm_model, llm_timeout),
            glossary=glossary,
            voice_match=voice_match,
            separate=separate,
            names=tuple(parse_names(names).items()),
            voice=tuple(voice),
            voice_text=tuple(voice_text),
            delivery=delivery,
            fmt=format.value,
            speaker_model=speaker_model,
            retakes=retakes,
            force=force,
            allow_other_files=allow_other_files,
        )
        listener.session, listener.model = session, model
        session.engine.on_load = listener.loading
        session.engine.on_note = lambda text: listener.note(text)
        try:
            with stop_on_ctrl_c(dubbing):
                dubbed = dubbing.run()
        except KeyboardInterrupt:
            listener.close()
            _interrupted(dubbing)
            raise typer.Exit(INTERRUPTED) from None
        finally:
            listener.close()
            session.close()
    if dubbed.interrupted:
        _interrupted(dubbing, dubbed)
        raise typer.Exit(INTERRUPTED)
    _report(dubbed)
    raise typer.Exit(dubbed.exit_code)


def _interrupted(dubbing, dubbed=None) -> None:
    """The one line a stopped dub ends with: which stage stopped, and what is on disk."""
    from omnidub.dubbing import STAGES

    stage = dubbing.stage or "hear"
    done = ""
    if dubbed is not None and dubbed.summary is not None:
        summary = dubbed.summary
        done = f"{summary.rendered + summary.cached} of {summary.lines} lines are rendered; "
    err.print(
        f"interrupted while {STAGES[stage]}: {done}{escape(printable(dubbing.on_disk()))}; run the same command "
        "again to go on",
        soft_wrap=True,
    )


def _report(dubbed) -> None:
    """The render's summary (QA's report was printed as it finished), then where to review."""
    if dubbed.summary is not None:
        print_summary(dubbed.summary, False)
    if dubbed.predicted:
        held = dubbed.predicted - len(dubbed.misjudged)
        out.print(
            f"lengths: {held} of {dubbed.predicted} lines spoken as long as their translation predicted (within 15 %)"
            + (f"; longer: line(s) {_ranges(dubbed.misjudged)}" if dubbed.misjudged else ""),
            soft_wrap=True,
        )
    translation = dubbed.translated.folder / dubbed.translated.file
    out.print(
        f"review the dub: omnidub review {escape(str(dubbed.render_folder))}   (the translation: "
        f"{escape(str(translation))}; edit it and run this again)",
        soft_wrap=True,
    )


def _ranges(indices) -> str:
    from omnidub.script import line_ranges

    return line_ranges(list(indices))


def _flags(text: str) -> str:
    """A note from the layers below with the render's flag names the dub spells otherwise."""
    for render_flag, dub_flag in _DUB_FLAGS.items():
        text = text.replace(f"{render_flag} ", f"{dub_flag} ").replace(f"{render_flag})", f"{dub_flag})")
        if text.endswith(render_flag):
            text = text[: -len(render_flag)] + dub_flag
    return text


class _DubListener(ProgressListener):
    """The render's progress display, with the dub's stages, its translation bar and its flag names."""

    def __init__(self, console):
        super().__init__(console)
        self.session = None
        self.model = None
        self._lines = None

    def note(self, text: str) -> None:
        super().note(_flags(text))

    def stage(self, name: str, text: str) -> None:
        if name == "render" and self.session is not None:
            engine = self.session.engine
            warn_synthetic(self.model)
            for line in header(self.model, engine, engine.preset):
                self.console.print(line, soft_wrap=True)
        self.console.print(f"[bold cyan]{escape(text)}[/]")

    def translating(self, done: int, total: int) -> None:
        if self._lines is None:
            self._lines = LinesBar(self.console)
        self._lines(done, total)

    def close(self) -> None:
        if self._lines is not None:
            self._lines.close()
        if self._heard is not None:
            self._heard.close()
        self._stack.close()
        self.progress.stop()
