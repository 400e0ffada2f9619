"""``omnidub dub``: one command from a source video to its dub, each stage a file to edit and rerun from."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer
from rich.markup import escape

from omnidub.cli.app import ASR_HELP, MODEL_HELP, Command, DebugOption, app, err, out, user_errors
from omnidub.cli.translate import ENGINE_HELP, engine_options, run_translate, show


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
        "transcribed and its voices grouped, into voices/<stem>.original.srt in the folder]",
    ),
    source_language: Optional[str] = typer.Option(
        None, "--from", metavar="LANG", show_default=False, help="The language spoken in SOURCE. [default: detected]"
    ),
    engine: str = typer.Option("firefox", "--engine", metavar="firefox|llm", help=ENGINE_HELP),
    mt_model: Optional[List[Path]] = typer.Option(
        None, "--mt-model", metavar="DIR", show_default=False, help="A local Firefox Translations model folder."
    ),
    llm_url: Optional[str] = typer.Option(None, "--llm-url", metavar="URL", show_default=False, help="LLM endpoint."),
    llm_model: Optional[str] = typer.Option(
        None, "--llm-model", metavar="NAME", show_default=False, help="The model the endpoint serves."
    ),
    llm_timeout: float = typer.Option(60.0, "--llm-timeout", min=1, metavar="SECONDS", help="Wait for an answer."),
    glossary: Optional[Path] = typer.Option(
        None, "--glossary", metavar="FILE", show_default=False, help="TOML: keep = [names]; [LANG] term = translation."
    ),
    model: str = typer.Option("k2-fsa/OmniVoice", "--model", metavar="ID|PATH", help=MODEL_HELP),
    asr_model: Optional[str] = typer.Option(
        None,
        "--asr-model",
        metavar="NAME|PATH",
        show_default=False,
        help=f"Hears SOURCE (without --source-subs), cuts its clips and checks the dub. {ASR_HELP}",
    ),
    preset: str = typer.Option("fast", "--preset", metavar="NAME|FILE", help="The render preset."),
    device: str = typer.Option("auto", "--device", metavar="auto|cpu|cuda|mps", help="Where the models run."),
    out_dir: Optional[Path] = typer.Option(
        None,
        "--out",
        metavar="DIR",
        show_default=False,
        help="Folder of the stages: voices/, translation/, render/. [default: dub/<source stem>]",
    ),
    debug: bool = DebugOption,
) -> None:
    """Dub SOURCE into --to: hear it (unless --source-subs), translate it fitted to each slot, render it in the
    voices of the source, check it, and say where to review.

    Every stage leaves a file to edit and run again from: voices/<stem>.original.srt (the original as heard),
    translation/<stem>.<LANG>.srt (edited by hand, it is kept and rendered as it is), and render/ (the dub, its
    manifest and QA). A rerun redoes only what changed. Exit 0 when QA passes, 1 when it found lines to check.

    \b
    Examples:
      omnidub dub episode.mkv --to es --asr-model small
      omnidub dub episode.mkv --to pt --source-subs episode.en.srt
    """
    with user_errors(debug):
        folder = out_dir if out_dir is not None else Path("dub") / source.stem
        translated = run_translate(
            source,
            folder / "translation",
            to=to,
            source_language=source_language,
            engine=engine,
            mt_model=mt_model,
            llm=engine_options(engine, llm_url, llm_model, llm_timeout),
            glossary=glossary,
            fit=True,
            preset=preset,
            voices=folder / "voices",
            asr_model=asr_model,
            device="cuda" if device == "cuda" else "cpu",
            original=source_subs,
        )
        show(translated, as_json=False)
    render = folder / "render"
    args = [
        "render",
        str(translated.folder / translated.file),
        "--source",
        str(source),
        "--source-subs",
        str(translated.original),
        "--language",
        translated.report["to"],
        "--model",
        model,
        "--preset",
        preset,
        "--device",
        device,
        "--out",
        str(render),
        "--qa",
    ]
    if asr_model:
        args += ["--asr-model", asr_model]
    if debug:
        args.append("--debug")
    err.print(f"rendering: omnidub {escape(' '.join(args))}", soft_wrap=True)
    code = app(args, standalone_mode=False)
    if code in (0, 1):
        out.print(
            f"review the dub: omnidub review {escape(str(render))}   (the translation: "
            f"{escape(str(translated.folder / translated.file))}, edit it and run this again)",
            soft_wrap=True,
        )
    raise typer.Exit(code if isinstance(code, int) else 0)
