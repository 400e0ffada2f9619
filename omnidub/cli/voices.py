"""``omnidub voices extract``: reference clips per speaker, cut from the source the subtitles belong to."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer
from rich.markup import escape

from omnidub.cli.app import (
    ASR_HELP,
    Command,
    DebugOption,
    app,
    err,
    out,
    print_json,
    printable,
    user_errors,
)

voices_app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    rich_markup_mode=None,
    help="Voices for a dub: reference clips cut from the source video or audio.",
)
app.add_typer(voices_app, name="voices")


@voices_app.command(cls=Command)
def extract(
    source: Path = typer.Argument(
        ..., metavar="SOURCE", show_default=False, help="The original video or audio (any file PyAV reads)."
    ),
    subs: Optional[Path] = typer.Option(
        None,
        "--subs",
        metavar="ORIGINAL",
        show_default=False,
        help="Subtitles in the language spoken in SOURCE (.srt, .vtt or a timed "
        "script); speaker labels (NAME:, [NAME], <v NAME>) name the voices. "
        "[default: none: SOURCE is transcribed (needs an ASR model) and the "
        "original as heard is written as <stem>.original.srt]",
    ),
    out_dir: Optional[Path] = typer.Option(
        None,
        "--out",
        metavar="DIR",
        show_default=False,
        help="Folder for the clips, voices.toml and extract.json. [default: voices/<source stem>]",
    ),
    speakers: Optional[int] = typer.Option(
        None,
        "--speakers",
        min=1,
        max=50,
        metavar="N",
        show_default=False,
        help="Voices in an unlabelled original. [default: chosen by the data]",
    ),
    names: Optional[str] = typer.Option(
        None,
        "--names",
        metavar="S1=NAME,...",
        show_default=False,
        help="Name the voices found in an unlabelled original (S1=NORA,S2=OWEN).",
    ),
    language: Optional[str] = typer.Option(
        None,
        "--language",
        metavar="CODE",
        show_default=False,
        help="Language spoken in SOURCE, e.g. en. [default: heard by the ASR]",
    ),
    asr_model: Optional[str] = typer.Option(
        None,
        "--asr-model",
        metavar="NAME|PATH",
        show_default=False,
        help=f"{ASR_HELP} Cuts long clips at a word and checks each clip says "
        "its cue. [default: small, when downloaded]",
    ),
    separate: Optional[str] = typer.Option(
        None,
        "--separate",
        metavar="MODEL",
        show_default=False,
        help="Isolate the vocals first with a Demucs model (htdemucs, or a "
        ".th/.safetensors/.yaml file) and write the rest as "
        "accompaniment.flac, a bed for render. Needs omnidub[separate].",
    ),
    preset: str = typer.Option(
        "fast", "--preset", metavar="NAME|FILE", help="The preset whose reference length the clips are cut to."
    ),
    device: str = typer.Option("cpu", "--device", metavar="cpu|cuda", help="Where the models run."),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON."),
    debug: bool = DebugOption,
) -> None:
    """Choose a reference clip per speaker from the source and write voices.toml for render --voices.

    Without --subs the source is transcribed with the ASR model, cut into lines at its pauses, and its speakers
    grouped by voice; the original as heard is written beside the clips, each line labelled with its voice, to
    check, correct and pass as --subs next time.

    Exit 0 when every speaker has a clip, 1 when some have none (the others are written; extract.json says
    why), 2 on bad input or when no speaker has a usable clip.

    \b
    Examples:
      omnidub voices extract episode.mkv --subs episode.en.srt --asr-model small
      omnidub voices extract episode.mkv --asr-model small          # no subtitles: voices/episode/episode.original.srt
      omnidub voices extract episode.mkv --subs episode.en.srt --speakers 3 --separate htdemucs
      omnidub voices extract episode.mkv --subs episode.en.srt --names S1=NORA,S2=OWEN
      omnidub render episode.es.srt --voices voices/episode/voices.toml --language es
    """
    with user_errors(debug):
        from omnidub.cli.show import TranscribeBar
        from omnidub.config import load_preset
        from omnidub.source import (
            ClipOptions,
            ExtractOptions,
            extract_folder,
            no_clip_error,
        )
        from omnidub.source.extract import parse_names

        options = ExtractOptions(
            clips=ClipOptions(voice=load_preset(preset).voice),
            speakers=speakers,
            language=language,
            names=parse_names(names),
        )
        folder = out_dir if out_dir is not None else Path("voices") / source.stem
        bar = TranscribeBar(err)
        try:
            with err.status("extracting voices") as status:
                extracted = extract_folder(
                    source,
                    subs,
                    folder,
                    options=options,
                    asr_model=asr_model,
                    separate=separate,
                    device=device,
                    status=lambda text: status.update(escape(text)),
                    progress=bar,
                )
        finally:
            bar.close()
        if not extracted.extraction.chosen:
            raise no_clip_error(extracted)  # one line; extract.json (and any accompaniment) is written all the same
        show(extracted, folder, as_json)
    raise typer.Exit(1 if extracted.extraction.missing else 0)


def show(extracted, folder: Path, as_json: bool) -> None:
    """Notes and warnings on stderr; the report on stdout, as JSON or as a summary."""
    for note in extracted.report["notes"]:
        err.print(f"note: {escape(printable(note))}", soft_wrap=True)
    if as_json:
        print_json(extracted.report)
    else:
        print_extract(extracted.report, folder)
    for speaker, chosen in extracted.extraction.chosen.items():
        if chosen.fallback:
            err.print(
                f"[bold yellow]warning:[/] {escape(printable(speaker))} has no clean clip; listen to it: "
                f"{escape(printable(chosen.fallback))}",
                soft_wrap=True,
            )
    for speaker, why in extracted.extraction.missing.items():
        err.print(
            f"[bold yellow]warning:[/] {escape(printable(speaker))} has no clip: {escape(printable(why))}",
            soft_wrap=True,
        )


def print_extract(report: dict, folder: Path) -> None:
    """The report as a short readable summary."""
    for entry in report["speakers"]:
        name, clip = escape(printable(entry["speaker"])), entry["clip"]
        if clip is None:
            out.print(f"[bold]{name}[/]: no clip ({escape(printable(entry['why_none']))})", soft_wrap=True)
            continue
        out.print(
            f"[bold]{name}[/]: {escape(clip['file'])}  {_span(clip)}  score {clip['scores']['total']:.2f}  "
            f"{escape(repr(printable(clip['text'])))}",
            soft_wrap=True,
        )
        if clip.get("note"):
            out.print(f"    ({escape(printable(clip['note']))})", soft_wrap=True)
        if clip.get("fallback"):
            out.print(f"    (not a clean clip: {escape(printable(clip['fallback']))})", soft_wrap=True)
        for other in entry["candidates"][1:]:
            note = f"  ({escape(printable(other['note']))})" if other.get("note") else ""
            out.print(
                f"    or {_span(other)}  score {other['scores']['total']:.2f}  "
                f"{escape(repr(printable(_short(other['text']))))}{note}",
                soft_wrap=True,
            )
        if entry["refused"]:
            out.print(
                f"    {len(entry['refused'])} refused, e.g. line {entry['refused'][0]['lines'][0]}: "
                f"{escape(printable(entry['refused'][0]['problem']))}",
                soft_wrap=True,
            )
    grouping = report.get("grouping")
    if grouping:
        out.print(f"speakers: {escape(grouping['how'])}", soft_wrap=True)
        unsure = [g for g in grouping["lines"] if g["confidence"] < 0.8]
        for g in unsure:
            out.print(
                f"    line {g['line']} -> {g['speaker']} (confidence {g['confidence']:.2f}"
                f"{', ' + escape(g['note']) if g.get('note') else ''})",
                soft_wrap=True,
            )
    wrote = "voices.toml, " if any(e["clip"] for e in report["speakers"]) else ""
    heard = report.get("heard")
    if heard:
        wrote += f"{heard['file']}, "
    out.print(
        f"wrote {escape(wrote)}extract.json{', accompaniment.flac' if report.get('separation') else ''} "
        f"in {escape(str(folder))}",
        soft_wrap=True,
    )
    if heard:
        out.print(
            f"{escape(heard['file'])} is the original as {escape(heard['asr'])} heard it, {heard['lines']} "
            "lines, each labelled with its voice: check it, correct its words and labels, and pass it as "
            f"--subs {escape(str(folder / heard['file']))} next time",
            soft_wrap=True,
        )


def _span(c: dict) -> str:
    return (
        f"{c['start']:.2f}-{c['end']:.2f} s ({c['seconds']:.1f} s, line{'s' if len(c['lines']) > 1 else ''} "
        f"{'+'.join(map(str, c['lines']))})"
    )


def _short(text: str, limit: int = 48) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."
