"""``omnidub translate``: subtitles, a script or a source video in, the translation fitted to each slot out."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer
from rich.markup import escape

from omnidub.cli.app import ASR_HELP, Command, DebugOption, app, err, out, print_json, printable, user_errors

# Flagged lines the terminal shows one by one, gravest first; the rest by their numbers (translate.json holds every
# one).
FLAGGED_SHOWN = 20

ENGINE_HELP = (
    "firefox: Mozilla's Firefox Translations models, offline (fetched once: omnidub models; or --mt-model DIR); "
    "llm: any OpenAI-compatible endpoint (--llm-url, --llm-model; key from OMNIDUB_LLM_KEY)."
)


class LinesBar:
    """Translating: lines done of all, elapsed time and ETA; gone once every line is done."""

    def __init__(self, console, what: str = "translating"):
        self.console, self.what = console, what
        self._progress = self._task = None

    def __call__(self, done: int, total: int) -> None:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

        if self._progress is None:
            self._progress = Progress(
                TextColumn(self.what),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("lines ETA"),
                TimeRemainingColumn(),
                console=self.console,
                transient=True,
            )
            self._progress.start()
            self._task = self._progress.add_task(self.what, total=max(total, 1))
        self._progress.update(self._task, completed=done, total=max(total, 1))
        if done >= total:
            self.close()

    def close(self) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None


def engine_options(engine, llm_url, llm_model, timeout):
    """--llm-* as LlmOptions (one line for an LLM flag without --engine llm)."""
    from omnidub.errors import OmnidubError
    from omnidub.translate import LlmOptions

    if engine != "llm":
        given = next((f for f, v in (("--llm-url", llm_url), ("--llm-model", llm_model)) if v is not None), None)
        if given:
            raise OmnidubError(f"{given} goes with --engine llm")
        return None
    return LlmOptions(url=llm_url or "", model=llm_model or "", timeout=timeout)


@app.command(cls=Command)
def translate(
    input_path: Path = typer.Argument(
        ...,
        metavar="INPUT",
        show_default=False,
        help="Subtitles (.srt, .vtt) or a script (.txt), or a source video/audio to transcribe first.",
    ),
    to: str = typer.Option(
        ...,
        "--to",
        metavar="LANG",
        show_default=False,
        help="The language to translate into (a variant too: pt-BR, pt-PT, es-ES, es-419).",
    ),
    source_language: Optional[str] = typer.Option(
        None, "--from", metavar="LANG", show_default=False, help="The original's language. [default: detected]"
    ),
    engine: str = typer.Option("firefox", "--engine", metavar="firefox|llm", help=ENGINE_HELP),
    mt_model: Optional[List[Path]] = typer.Option(
        None,
        "--mt-model",
        metavar="DIR",
        show_default=False,
        help="A local Firefox Translations model folder (model*.bin, vocab*.spm, lex*.bin); again to go through "
        "English, and the way back for the meaning check. [default: one on this machine (omnidub models lists "
        "them), else fetched on first use into omnidub's cache]",
    ),
    llm_url: Optional[str] = typer.Option(
        None, "--llm-url", metavar="URL", show_default=False, help="The endpoint, e.g. http://127.0.0.1:11434/v1."
    ),
    llm_model: Optional[str] = typer.Option(
        None, "--llm-model", metavar="NAME", show_default=False, help="The model the endpoint serves."
    ),
    llm_timeout: float = typer.Option(
        60.0, "--llm-timeout", min=1, metavar="SECONDS", help="The longest wait for one answer, its last byte included."
    ),
    glossary: Optional[Path] = typer.Option(
        None, "--glossary", metavar="FILE", show_default=False, help="TOML: keep = [names]; [LANG] term = translation."
    ),
    fit: bool = typer.Option(
        True, "--fit/--no-fit", help="Choose the most faithful candidate that fits its slot (off: the engine's first)."
    ),
    preset: str = typer.Option(
        "fast", "--preset", metavar="NAME|FILE", help="The preset whose speed-up cap sizes each slot."
    ),
    out_dir: Optional[Path] = typer.Option(
        None,
        "--out",
        metavar="DIR",
        show_default=False,
        help="Folder for the translation and translate.json. [default: translations/<input stem>]",
    ),
    asr_model: Optional[str] = typer.Option(
        None, "--asr-model", metavar="NAME|PATH", show_default=False, help=f"For a source video: {ASR_HELP}"
    ),
    device: str = typer.Option("cpu", "--device", metavar="cpu|cuda", help="Where the ASR runs (a source video)."),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON."),
    debug: bool = DebugOption,
) -> None:
    """Translate INPUT into --to, each line's translation chosen to fit its slot.

    The engine gives candidates per line; omnidub predicts how long each takes to say at the line's pace and
    chooses the most faithful one that fits its slot with the speed-up the preset allows (else the shortest,
    flagged). Writes <stem>.<LANG>.srt (original times and speaker labels) and translate.json (per line: the
    original, the candidates, their predicted length against the slot). A translation edited by hand is kept.

    \b
    Examples:
      omnidub translate episode.en.srt --to es
      omnidub translate episode.mkv --to pt --asr-model small        # transcribed first, as voices extract does
      omnidub translate episode.en.srt --to de --engine llm --llm-url http://127.0.0.1:11434/v1 --llm-model qwen3
    """
    with user_errors(debug):
        translated = run_translate(
            input_path,
            out_dir if out_dir is not None else Path("translations") / input_path.stem,
            to=to,
            source_language=source_language,
            engine=engine,
            mt_model=mt_model,
            llm=engine_options(engine, llm_url, llm_model, llm_timeout),
            glossary=glossary,
            fit=fit,
            preset=preset,
            voices=Path("voices") / input_path.stem,
            asr_model=asr_model,
            device=device,
        )
        show(translated, as_json)
    if translated.translation.unanswered:  # written, the rest translated; these lines still to ask for
        raise typer.Exit(1)


def run_translate(
    input_path,
    out,
    *,
    to,
    source_language,
    engine,
    mt_model,
    llm,
    glossary,
    fit,
    preset,
    voices,
    asr_model,
    device,
    original=None,
):
    """The translation of ``input_path`` into ``out``: a source video is heard into ``voices`` first, unless its
    ``original`` subtitles are given."""
    from omnidub.cli.show import TranscribeBar
    from omnidub.config import load_preset
    from omnidub.errors import OmnidubError
    from omnidub.inputs import SUFFIXES
    from omnidub.translate import TranslateOptions, language_tag, load_glossary, translate_folder
    from omnidub.translate.api import heard_original

    if not input_path.is_file():
        raise OmnidubError(f"{input_path}: no such file")
    target = language_tag(to, "--to")
    options = TranslateOptions(
        fit=fit, max_speedup=load_preset(preset).timing.max_speedup, glossary=load_glossary(glossary, target)
    )
    if original is not None:
        if not Path(original).is_file():
            raise OmnidubError(f"{original}: no such file")
    elif input_path.suffix.lower() in SUFFIXES:
        original = input_path
    else:
        bar = TranscribeBar(err)
        try:
            with err.status("hearing the source") as status:
                original = heard_original(
                    input_path,
                    voices,
                    asr_model=asr_model,
                    language=source_language,
                    device=device,
                    status=lambda text: status.update(escape(text)),
                    progress=bar,
                )
        finally:
            bar.close()
        err.print(f"note: the original as heard: {escape(str(original))} (correct it and run again)", soft_wrap=True)
    bar = LinesBar(err)
    try:
        with err.status("translating") as status:
            return translate_folder(
                original,
                out,
                target=to,  # with its variant (pt-BR), which the checks and an LLM are told
                source=source_language,
                engine=engine,
                options=options,
                glossary_file=glossary,
                mt_models=tuple(mt_model or ()),
                llm=llm,
                status=lambda text: status.update(escape(text)),
                progress=bar,
                input_path=input_path,
            )
    finally:
        bar.close()


def show(translated, as_json: bool) -> None:
    """Notes on stderr; the report on stdout, as JSON or as a summary of the lines that need a look."""
    from omnidub.script import RUNS_SHOWN, line_ranges

    report = translated.report
    for note in report["notes"]:
        err.print(f"note: {escape(printable(note))}", soft_wrap=True)
    if as_json:
        print_json(report)
        return
    flagged = sorted((line for line in report["lines"] if line["flags"]), key=gravity)
    if len(flagged) > FLAGGED_SHOWN:
        out.print(f"{len(flagged)} line(s) flagged, gravest first; the {FLAGGED_SHOWN} gravest:", soft_wrap=True)
    for line in flagged[:FLAGGED_SHOWN]:
        why = "; ".join(f"{flag}: {text}" for flag, text in line["checks"].items())
        out.print(
            f"line {line['index']}: {escape(printable(line['translation']))!r}  ({escape(printable(why))})",
            soft_wrap=True,
        )
    if len(flagged) > FLAGGED_SHOWN:
        out.print(
            f"[yellow]flagged as well:[/yellow] {len(flagged) - FLAGGED_SHOWN} line(s) less grave, "
            f"{line_ranges((line['index'] for line in flagged[FLAGGED_SHOWN:]), RUNS_SHOWN)} (each one in "
            f"{escape(str(translated.folder / 'translate.json'))})",
            soft_wrap=True,
        )
    for flag, indices in report["flagged"].items():
        out.print(
            f"[yellow]{len(indices)} line(s) flagged {flag}:[/yellow] {line_ranges(indices, RUNS_SHOWN)}",
            soft_wrap=True,
        )
    fit = report["fit"]
    out.print(
        f"{fit['lines']} lines into {report['to']} with {escape(report['engine'])}: "
        f"{fit['fit_with_choice']:.0%} fit their slot as chosen ({fit['fit_first_candidate']:.0%} with the engine's "
        f"first candidate); {report['asked']} asked, {fit['lines'] - report['asked']} from the cache",
        soft_wrap=True,
    )
    if translated.kept:  # the note above said it was kept: it was not written
        out.print(f"wrote translate.json ({escape(translated.file)} kept as edited)", soft_wrap=True)
    else:
        out.print(f"wrote {escape(str(translated.folder / translated.file))} and translate.json", soft_wrap=True)


def gravity(line: dict) -> tuple[int, int, int]:
    """A flagged line's place in the terminal's list: by its gravest flag, then the more flags first, then in order."""
    from omnidub.translate.checks import GRAVEST_FIRST

    return (min(GRAVEST_FIRST.index(flag) for flag in line["flags"]), -len(line["flags"]), line["index"])
