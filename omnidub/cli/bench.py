"""``omnidub bench``: every speed lever side by side."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from omnidub.cli.app import MODEL_HELP, Command, DebugOption, Dtype, app, err, out, user_errors, warn_synthetic
from omnidub.errors import OmnidubError


@app.command(cls=Command)
def bench(
    model: Optional[str] = typer.Option(
        None,
        "--model",
        metavar="ID|PATH",
        help=f"{MODEL_HELP} [default: k2-fsa/OmniVoice, else synthetic:full offline]",
        show_default=False,
    ),
    device: str = typer.Option("auto", "--device", metavar="auto|cpu|cuda|mps", help="Where the model runs."),
    lines: int = typer.Option(2, "--lines", min=1, metavar="N", help="How many dubbing lines to synthesize per row."),
    seconds: Optional[float] = typer.Option(
        None,
        "--seconds",
        min=0.5,
        max=30.0,
        metavar="S",
        show_default=False,
        help="Make every line this long. [default: each line's natural length]",
    ),
    rows: Optional[str] = typer.Option(
        None,
        "--rows",
        metavar="ROWS",
        show_default=False,
        help="Comma-separated row numbers or names to run (see the table's names). [default: all but compile]",
    ),
    repeat: Optional[int] = typer.Option(
        None,
        "--repeat",
        min=1,
        metavar="N",
        show_default=False,
        help="Timed repeats per row, interleaved; the median is shown. [default: 3]",
    ),
    batch: int = typer.Option(2, "--batch", min=1, metavar="N", help="Batch size of the batching row."),
    compile: bool = typer.Option(False, "--compile", help="Add the torch.compile row (compile time reported apart)."),
    ref: Optional[Path] = typer.Option(
        None, "--ref", metavar="FILE", help="Reference clip (with --ref-text) instead of the bundled voice."
    ),
    ref_text: Optional[str] = typer.Option(None, "--ref-text", metavar="TEXT", help="Exact transcript of --ref."),
    quick: bool = typer.Option(False, "--quick", help="Smoke test: synthetic:tiny, 2 lines, few steps."),
    ladder_dtype: Optional[Dtype] = typer.Option(
        None,
        "--dtype",
        metavar="float32|bfloat16|float16",
        show_default=False,
        help="The ladder's precision; the 'dtype' rows use the other of float32 and bfloat16. "
        "[default: float32, float16 on CUDA]",
    ),
    json_file: Optional[Path] = typer.Option(
        None, "--json", metavar="FILE", help="Also write every figure to this JSON file."
    ),
    length: Optional[str] = typer.Option(
        None,
        "--length",
        metavar="N,N,...",
        show_default=False,
        help="Feature length instead of rows: programmes of these many lines (e.g. "
        "100,500,1000), each rendered for --budget seconds, then assembled.",
    ),
    budget: float = typer.Option(
        300.0, "--budget", min=0.0, metavar="SECONDS", help="With --length: seconds of rendering per programme."
    ),
    record: bool = typer.Option(
        False,
        "--record",
        help="Make what this run measured (layouts, GEMM kernels, compile "
        "cost) this machine's choice for --cfg auto and --compile auto.",
    ),
    debug: bool = DebugOption,
) -> None:
    """Measure each speed lever against the row it changes, the peer recipe beside them, in one process."""
    with user_errors(debug):
        from omnidub.bench import BenchOptions, print_bench, run_bench
        from omnidub.files import write_text_atomic
        from omnidub.hardware import check_device

        check_device(device)
        if json_file is not None and not json_file.parent.is_dir():
            raise OmnidubError(f"--json {json_file}: folder {json_file.parent} does not exist")
        if json_file is not None and json_file.is_dir():
            raise OmnidubError(
                f"--json {json_file} is a folder; give the name of the JSON file to write, e.g. "
                f"{json_file / 'bench.json'}"
            )
        if json_file is not None:
            from omnidub.files import check_folder_writable

            check_folder_writable(json_file.parent, f"--json {json_file}: its folder")  # not after the bench

        if length is not None:
            from omnidub.bench.length import feature_length, print_length

            data = feature_length(length, budget, model=model, device=device, say=err.print)
            print_length(data, out)
            if json_file:
                write_text_atomic(json_file, json.dumps(data, indent=2))
                err.print(f"wrote {json_file}")
            raise typer.Exit(0)
        options = BenchOptions(
            model=model,
            device=device,
            lines=lines,
            seconds=seconds,
            rows=rows,
            repeat=repeat,
            batch=batch,
            compile=compile,
            ref=ref,
            ref_text=ref_text,
            quick=quick,
            dtype=ladder_dtype.value if ladder_dtype else None,
            record=record,
        )
        result = run_bench(options, console=err, warn=warn_synthetic)
        print_bench(result, out)
        if json_file:
            write_text_atomic(json_file, json.dumps(result.to_json(), indent=2))
            err.print(f"wrote {json_file}")
    raise typer.Exit(0)
