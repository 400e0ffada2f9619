"""``omnidub qa``: check a rendered folder and report what to listen to."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer
from rich.markup import escape

from omnidub.cli.app import (
    ASR_DEFAULT,
    ASR_HELP,
    SPEAKER_MODEL_HELP,
    Command,
    DebugOption,
    app,
    err,
    out,
    print_json,
    printable,
    user_errors,
)
from omnidub.cli.show import qa_progress


@app.command(cls=Command)
def qa(
    out_dir: Path = typer.Argument(
        ..., metavar="OUT_DIR", show_default=False, help="A folder written by omnidub render."
    ),
    asr_model: Optional[str] = typer.Option(
        None,
        "--asr-model",
        "--judge-model",
        metavar="NAME|PATH",
        show_default=False,
        help=f"The judge that hears the lines (either name). {ASR_HELP} [default: {ASR_DEFAULT}]",
    ),
    max_wer: Optional[float] = typer.Option(
        None,
        "--max-wer",
        min=0.0,
        metavar="X",
        show_default=False,
        help="Highest WER (CER for zh/ja/...) a line may have. [default: the render's preset, else 0.2]",
    ),
    speaker_model: str = typer.Option("resemblyzer", "--speaker-model", metavar="NAME|PATH", help=SPEAKER_MODEL_HELP),
    device: str = typer.Option(
        "auto", "--device", metavar="auto|cpu|cuda", help="Device for the ASR and speaker models."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON."),
    debug: bool = DebugOption,
) -> None:
    """Transcribe every rendered line, compare its voice with its speaker's, and report what to listen to.

    Exit codes: 0 no line failed and every line was checked (a line in a language no judge here hears is left
    unchecked and said in one note, never called passed); 1 lines to hear (one failed, or its words could not be
    scored); 2 bad input; 130 interrupted.

    \b
    Examples:
      omnidub qa output/episode
      omnidub qa output/episode --asr-model ~/models/whisper-small --json
    """
    with user_errors(debug):
        from omnidub.api import Session
        from omnidub.qa import print_report, report_json

        session = Session(device=device, asr_model=asr_model)
        with qa_progress(err) as progress:
            report = session.qa(
                out_dir,
                max_wer=max_wer,
                progress=progress,
                speaker_model=speaker_model,
                note=lambda text: err.print(f"[yellow]note:[/] {escape(printable(text))}", soft_wrap=True),
            )
        if as_json:
            print_json(report_json(report))
            err.print(
                f"wrote {escape(str(out_dir / 'qa.json'))} and {escape(str(out_dir / 'qa.html'))}", soft_wrap=True
            )
        else:
            print_report(report, out, (out_dir / "qa.json", out_dir / "qa.html"))
    raise typer.Exit(report.exit_code)
