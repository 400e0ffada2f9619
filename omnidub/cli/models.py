"""``omnidub models``: what a dub on this machine needs and what is here; fetch the missing ones; import a copy."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer
from rich.markup import escape

from omnidub.cli.app import Command, DebugOption, app, err, out, print_json, printable, user_errors

ACTIONS = ("list", "fetch", "import")


@app.command(cls=Command)
def models(
    action: str = typer.Argument(
        "list", metavar="list|fetch|import", show_default=False, help="What to do. [default: list]"
    ),
    folder: Optional[Path] = typer.Argument(
        None, metavar="DIR", show_default=False, help="import: the folder to import (made by fetch --into)."
    ),
    model: str = typer.Option(
        "k2-fsa/OmniVoice", "--model", metavar="ID|PATH", help="The TTS model a dub speaks with."
    ),
    asr_model: Optional[str] = typer.Option(
        None,
        "--asr-model",
        metavar="NAME|PATH",
        show_default=False,
        help="The ASR that hears the source (a faster-whisper size name or folder). [default: small on CPU]",
    ),
    judge_model: Optional[str] = typer.Option(
        None, "--judge-model", metavar="NAME|PATH", show_default=False, help="The ASR that judges the dub, if another."
    ),
    source_language: Optional[str] = typer.Option(
        None, "--from", metavar="LANG", show_default=False, help="The language the source speaks. [default: en]"
    ),
    to: Optional[str] = typer.Option(
        None, "--to", metavar="LANG", show_default=False, help="The dub's language: its translation model is needed."
    ),
    into: Optional[Path] = typer.Option(
        None,
        "--into",
        metavar="DIR",
        show_default=False,
        help="fetch: put every model a dub needs into DIR, to copy to a machine without a network (import DIR there).",
    ),
    device: str = typer.Option("cpu", "--device", metavar="cpu|cuda", help="Where the dub runs (its default ASR)."),
    as_json: bool = typer.Option(False, "--json", help="Print the models as JSON."),
    debug: bool = DebugOption,
) -> None:
    """List the models a dub on this machine needs and where each is (TTS weights, ASR, translation, speaker
    encoders), fetch the missing ones, or import them from a folder copied from a connected machine.

    Exit codes: 0 every model needed is here (fetched, imported); 2 one is missing, could not be fetched, or bad
    input. Fetching is off while HF_HUB_OFFLINE is set.

    \b
    Examples:
      omnidub models --asr-model tiny.en --to pt        # what a dub into Portuguese needs, and what is here
      omnidub models fetch --asr-model small --to es    # fetch what is missing, with sizes and progress
      omnidub models fetch --to pt --into usb/models    # on a connected machine: everything, into a folder
      omnidub models import usb/models                  # on the offline machine
    """
    from omnidub import inventory

    with user_errors(debug):
        if action not in ACTIONS:
            from omnidub.errors import OmnidubError

            raise OmnidubError(f"omnidub models {action}: choose list, fetch or import")
        if action == "import":
            if folder is None:
                from omnidub.errors import OmnidubError

                raise OmnidubError("omnidub models import DIR: give the folder to import")
            found, errors = inventory.import_folder(folder, say=_say)
            return _finish(found, errors, as_json)
        wanted = inventory.needs(
            model=model,
            asr_model=asr_model,
            judge_model=judge_model,
            source_language=_language(source_language, "--from"),
            target=_language(to, "--to"),
            device=device,
        )
        if action == "fetch":
            if into is not None:
                into.mkdir(parents=True, exist_ok=True)
            found, errors = inventory.fetch(wanted, into=into, say=_say)
            return _finish(found, errors, as_json)
        found = inventory.survey(wanted)
        extra = [f for f in inventory.also_here() if all((f.kind, f.name) != (g.kind, g.name) for g in found)]
        if as_json:
            print_json({"needed": [_json(f) for f in found], "also_here": [_json(f) for f in extra]})
        else:
            for item in found:
                out.print(_row(item), soft_wrap=True)
            for item in extra:
                out.print(_row(item, needed=False), soft_wrap=True)
        missing = [f for f in found if not f.here and not f.optional]
        if missing:
            fetchable = [f for f in missing if f.fetchable]
            if fetchable:
                err.print(
                    f"{len(missing)} model(s) a dub needs are not here: {inventory.COMMAND} fetch with the same flags "
                    f"gets them (offline: {inventory.COMMAND} fetch --into DIR on a connected machine, then "
                    f"{inventory.COMMAND} import DIR here)",
                    soft_wrap=True,
                )
            raise typer.Exit(2)


def _language(code: str | None, flag: str) -> str | None:
    from omnidub.translate import language_tag

    return language_tag(code, flag) if code else None


def _say(text: str) -> None:
    err.print(f"[cyan]→[/] {escape(printable(text))}", soft_wrap=True)


def _row(item, needed: bool = True) -> str:
    from omnidub.inventory import human

    state = "here" if item.here else "optional" if item.optional else "MISSING"
    where = f"{item.how}, {human(item.size)}: {item.path}" if item.here else item.how
    role = item.role if needed else "also here"
    said = f"{role}; {where}" if role else where
    return escape(printable(f"{item.kind:<8} {item.name:<22} {state:<8}  {said}"))


def _json(item) -> dict:
    return {
        "kind": item.kind,
        "name": item.name,
        "role": item.role,
        "here": item.here,
        "path": str(item.path) if item.path else None,
        "how": item.how,
        "bytes": item.size,
        "optional": item.optional,
    }


def _finish(found, errors, as_json: bool) -> None:
    if as_json:
        print_json({"models": [_json(f) for f in found], "errors": errors})
    else:
        for item in found:
            out.print(_row(item), soft_wrap=True)
    for line in errors:
        err.print(f"[bold red]error:[/] {escape(printable(line))}", soft_wrap=True)
    if errors:
        raise typer.Exit(2)
