"""``omnidub eval``: two configurations compared on the same sentences, seeds and voice, by one judge."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import List, Optional

import typer
from rich.markup import escape

from omnidub.cli.app import (
    ASR_DEFAULT,
    MODEL_HELP,
    Command,
    DebugOption,
    app,
    err,
    out,
    printable,
    stop_on_ctrl_c,
    user_errors,
    warn_synthetic,
)
from omnidub.errors import OmnidubError

CONFIG_HELP = (
    "A preset (fast, quality or a .toml file), then comma-separated overrides of its keys and of the "
    "model and backend: fast,steps=8 · fast,dtype=int8 · fast,reference_seconds=6 · backend=onnx · "
    "model=EXPORT_DIR."
)


@app.command("eval", cls=Command)
def eval_command(
    corpus: Optional[Path] = typer.Argument(
        None,
        metavar="CORPUS",
        show_default=False,
        help="Sentences, one a line (.txt), or a script or subtitles (.srt, "
        ".vtt): their lines' texts. [default: omnidub's 48 English "
        "sentences]",
    ),
    a: str = typer.Option(..., "--a", metavar="CONFIG", show_default=False, help=f"The baseline. {CONFIG_HELP}"),
    b: str = typer.Option(
        ...,
        "--b",
        metavar="CONFIG",
        show_default=False,
        help="The configuration measured against it (B − A), in the same form.",
    ),
    voice: List[str] = typer.Option(
        [],
        "--voice",
        metavar="[SPEAKER=]REF",
        show_default=False,
        help="Reference audio of the voice that speaks the sentences. [default: omnidub's bundled voice]",
    ),
    voice_text: List[str] = typer.Option(
        [], "--voice-text", metavar="[SPEAKER=]TEXT", show_default=False, help="Exact transcript of a reference."
    ),
    voices: Optional[Path] = typer.Option(
        None,
        "--voices",
        metavar="FILE",
        show_default=False,
        help="voices.toml mapping the corpus's speakers to references.",
    ),
    language: Optional[str] = typer.Option(
        None,
        "--language",
        metavar="CODE",
        show_default=False,
        help="Language of the sentences (decides WER or CER and the judge's "
        "language). [default: the voice's; en for the bundled corpus]",
    ),
    asr_model: Optional[str] = typer.Option(
        None,
        "--asr-model",
        metavar="NAME|PATH",
        show_default=False,
        help="The judge: a faster-whisper size name or a local CTranslate2 "
        "folder; tiny.en works offline but is a weak judge. "
        f"[default: {ASR_DEFAULT}]",
    ),
    model: str = typer.Option(
        "k2-fsa/OmniVoice", "--model", metavar="ID|PATH", help=f"{MODEL_HELP} A configuration's model= wins."
    ),
    device: str = typer.Option("auto", "--device", metavar="auto|cpu|cuda|mps", help="Where the models run."),
    seed: int = typer.Option(
        0,
        "--seed",
        min=0,
        metavar="N",
        help="Run seed: every sentence's seed derives from it, the same under A and B; it also seeds the resampling.",
    ),
    resamples: int = typer.Option(
        20000,
        "--resamples",
        min=1,
        metavar="N",
        help="Bootstrap resamples for the confidence interval (and random sign patterns "
        "for the p-value when there are too many to count).",
    ),
    out_dir: Optional[Path] = typer.Option(
        None,
        "--out",
        metavar="DIR",
        show_default=False,
        help="The eval's folder: one render folder per configuration inside it, "
        "reused by later evals. [default: output/eval-<corpus stem>, or "
        "output/eval-bundled]",
    ),
    json_file: Optional[Path] = typer.Option(
        None,
        "--json",
        metavar="FILE",
        show_default=False,
        help="Also write every figure and sentence to this JSON file.",
    ),
    debug: bool = DebugOption,
) -> None:
    """Compare two configurations on the same sentences, seeds and voice: the WER difference B − A with its 95 %
    confidence interval and p-value, the sentences that differ, worst first.

    \b
    Examples:
      omnidub eval --a fast --b fast,steps=8
      omnidub eval lines.txt --a fast --b fast,dtype=int8 --voice me.wav --voice-text "What I say in it."
      omnidub eval lines.txt --a model=export/ --b model=export-int8/ --asr-model large-v3 --json eval.json
    """
    with user_errors(debug):
        code = _eval(**locals())
    raise typer.Exit(code)


def _eval(**o) -> int:
    from omnidub.eval import EvalOptions, Evaluation, Interrupted, eval_json, print_eval
    from omnidub.files import write_text_atomic

    if o["json_file"] is not None and not o["json_file"].parent.is_dir():
        raise OmnidubError(f"--json {o['json_file']}: folder {o['json_file'].parent} does not exist")
    options = EvalOptions(
        a=o["a"],
        b=o["b"],
        corpus=o["corpus"],
        voices=o["voices"],
        voice=tuple(o["voice"]),
        voice_text=tuple(o["voice_text"]),
        language=o["language"],
        asr_model=o["asr_model"],
        model=o["model"],
        device=o["device"],
        seed=o["seed"],
        resamples=o["resamples"],
        out_dir=o["out_dir"],
    )
    evaluation = Evaluation(options, _Listener())
    evaluation.check()
    for config in (evaluation.a, evaluation.b):
        if config.synthetic:
            warn_synthetic(config.model)
            break
    err.print(
        f"omnidub eval: {len(evaluation.corpus.lines)} sentences of {escape(str(evaluation.corpus.path))}, "
        f"A {escape(evaluation.a.label)} against B {escape(evaluation.b.label)}, judged by "
        f"{escape(evaluation.asr.name)} ({evaluation.judge.strength} judge), into "
        f"{escape(str(evaluation.out_dir))}",
        soft_wrap=True,
    )
    try:
        with stop_on_ctrl_c(evaluation):
            report = evaluation.run()
    except Interrupted as exc:
        err.print(f"interrupted: {escape(str(exc))}; the same command continues where it stopped", soft_wrap=True)
        return 130
    print_eval(report, out)
    if o["json_file"] is not None:
        write_text_atomic(o["json_file"], json.dumps(eval_json(report), indent=2, ensure_ascii=False) + "\n")
        err.print(f"wrote {escape(str(o['json_file']))}")
    return 1 if report.failed else 0


class _Listener:
    """The eval's progress: which configuration renders (with the render's own progress), then the judging."""

    def __init__(self):
        self._judging = None
        self._stack = contextlib.ExitStack()

    def render_listener(self):
        from omnidub.cli.show import ProgressListener

        return ProgressListener(err, reports=False)

    def rendering(self, side, config, out_dir) -> None:
        err.print(
            f"[cyan]→[/] {side}: {escape(printable(config.label))} into {escape(printable(str(out_dir)))}",
            soft_wrap=True,
        )

    def loading(self, what: str):
        from omnidub.cli.show import ProgressListener

        return ProgressListener(err).loading(what)

    def note(self, text: str) -> None:
        err.print(f"[cyan]note:[/] {escape(printable(text))}", soft_wrap=True)

    def judging(self, done: int, total: int) -> None:
        from omnidub.cli.show import qa_progress

        if self._judging is None:
            self._judging = self._stack.enter_context(qa_progress(err))
        self._judging(done, total, 0)
        if done >= total:
            self._stack.close()
            self._judging = None
