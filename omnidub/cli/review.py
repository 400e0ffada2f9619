"""``omnidub review``: a local web app over a rendered folder, until Ctrl-C."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer
from rich.markup import escape

from omnidub.cli.app import ASR_HELP, MODEL_HELP, SPEAKER_MODEL_HELP, Command, DebugOption, app, err, user_errors


@app.command(cls=Command)
def review(
    out_dir: Path = typer.Argument(
        ..., metavar="OUT_DIR", show_default=False, help="A folder written by omnidub render."
    ),
    port: int = typer.Option(
        0, "--port", min=0, max=65535, metavar="N", help="Port to listen on. [default: a free one]", show_default=False
    ),
    host: str = typer.Option(
        "127.0.0.1",
        "--host",
        metavar="ADDR",
        help="Address to listen on (others on the network reach it only if you give one of this machine's addresses).",
    ),
    no_browser: bool = typer.Option(False, "--no-browser", help="Print the address; do not open a browser."),
    model: Optional[str] = typer.Option(
        None,
        "--model",
        metavar="ID|PATH",
        show_default=False,
        help=f"{MODEL_HELP} [default: the one the folder was rendered with]",
    ),
    device: Optional[str] = typer.Option(
        None,
        "--device",
        metavar="auto|cpu|cuda|mps",
        show_default=False,
        help="Where the model runs. [default: as the folder was rendered]",
    ),
    asr_model: Optional[str] = typer.Option(
        None,
        "--asr-model",
        metavar="NAME|PATH",
        show_default=False,
        help=f"{ASR_HELP} [default: as the folder was rendered]",
    ),
    speaker_model: str = typer.Option("resemblyzer", "--speaker-model", metavar="NAME|PATH", help=SPEAKER_MODEL_HELP),
    debug: bool = DebugOption,
) -> None:
    """Review a rendered folder in the browser: hear each line beside the original, retake, edit, approve and
    deliver. Every take renders through the same job, store and lock as omnidub render (a render beside it is
    told the folder is in use); every decision is saved when it is made. Ctrl-C stops it and assembles the
    outputs.

    \b
    Examples:
      omnidub review output/episode
      omnidub review output/episode --no-browser --port 8765
    """
    with user_errors(debug):
        from omnidub.qa import speaker_encoder
        from omnidub.review import open_folder, serve

        speaker_encoder(speaker_model)  # a wrong name is said now, not at the first take
        desk = open_folder(out_dir, model=model, device=device, asr_model=asr_model, speaker_model=speaker_model)
        session, project = desk.session, desk.project
        session.engine.on_note = lambda text: err.print(f"[cyan]note:[/] {escape(text)}", soft_wrap=True)
        desk.subscribe(_say)  # what the desk does, on the terminal too (opening, actions, delivery)
        err.print(f"omnidub review: opening {escape(str(out_dir))} ({len(project.script.lines)} lines)", soft_wrap=True)
        desk.open()
        if unheard := desk.editor.unheard(project):
            err.print(
                f"[yellow]note:[/] {escape(unheard)}: takes rendered here go unchecked; pass "
                "--asr-model (tiny.en, or a local faster-whisper folder) to hear them",
                soft_wrap=True,
            )
        forced = True
        try:

            def ready(url: str, stop) -> None:
                err.print(
                    f"omnidub review: [bold]{escape(url)}[/] (Ctrl-C stops it and delivers what changed; twice, "
                    "quits at once)",
                    soft_wrap=True,
                )
                if not no_browser:
                    import webbrowser

                    webbrowser.open(url)

            forced = serve(desk, host=host, port=port, on_ready=ready)
        finally:
            _stop(desk, deliver=not forced)
    raise typer.Exit(0)


def _say(event: dict) -> None:
    kind = event.get("type")
    if kind in ("progress", "note"):
        prefix = "[cyan]note:[/] " if kind == "note" else "  "
        err.print(f"{prefix}{escape(str(event.get('text')))}", soft_wrap=True)
    elif kind == "error":
        err.print(f"[yellow]refused:[/] {escape(str(event.get('text')))}", soft_wrap=True)
    elif kind == "delivered":
        err.print(f"delivered: {escape(', '.join(event.get('files') or []))}", soft_wrap=True)


def _stop(desk, *, deliver: bool) -> None:
    """Stop the desk: finish the action in flight (a long one stops at its next line), then deliver what the
    outputs do not hold yet and say what was delivered; a Ctrl-C meanwhile quits without delivering (every line and
    decision is saved already). Without ``deliver``, quit at once."""
    import signal

    from omnidub.errors import OmnidubError

    if not deliver:
        desk.close(deliver=False, wait=False)
        err.print("omnidub review: stopped without delivering (every take and decision is saved)", soft_wrap=True)
        return
    err.print("omnidub review: stopping (Ctrl-C again quits without delivering)", soft_wrap=True)

    def quit_now(signum, frame):
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGINT, quit_now)
    try:
        delivery = desk.close()
    except KeyboardInterrupt:
        err.print("omnidub review: stopped without delivering (every take and decision is saved)", soft_wrap=True)
        return
    except OmnidubError as exc:
        raise OmnidubError(f"not delivered: {exc} (every take and decision is saved)") from exc
    finally:
        signal.signal(signal.SIGINT, previous)
    if delivery is None and desk.deliveries:
        err.print(
            f"omnidub review: stopped; the outputs hold every line as it stands (delivered {len(desk.deliveries)} "
            "time(s) during the review)",
            soft_wrap=True,
        )
    elif delivery is None:
        err.print("omnidub review: stopped; nothing changed since the outputs were assembled", soft_wrap=True)
    else:
        err.print(f"omnidub review: delivered {escape(delivery.said())}", soft_wrap=True)
