"""``omnidub export``: ONNX graphs for the ONNX Runtime backend, checked against torch."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer
from rich.markup import escape

from omnidub.cli.app import (
    MODEL_HELP,
    Command,
    DebugOption,
    Quantize,
    app,
    err,
    out,
    print_json,
    user_errors,
    warn_synthetic,
)
from omnidub.errors import OmnidubError


@app.command(cls=Command)
def export(
    out_dir: Optional[Path] = typer.Argument(
        None,
        metavar="OUT_DIR",
        show_default=False,
        help="Folder to write the ONNX graphs, export.json and parity.json into (not with --cache).",
    ),
    model: str = typer.Option("k2-fsa/OmniVoice", "--model", metavar="ID|PATH", help=MODEL_HELP),
    opset: int = typer.Option(18, "--opset", min=14, max=21, metavar="N", help="ONNX opset of the graphs."),
    quantize: Optional[Quantize] = typer.Option(
        None,
        "--quantize",
        metavar="int8",
        help="Also write a dynamic int8 transformer and render with it (its parity is reported as a cost).",
    ),
    no_check: bool = typer.Option(False, "--no-check", help="Skip the parity check against torch."),
    check_only: bool = typer.Option(False, "--check-only", help="Only run the parity check of an existing export."),
    as_json: bool = typer.Option(False, "--json", help="Print the parity report as JSON."),
    in_cache: bool = typer.Option(
        False,
        "--cache",
        help="Build the fp32 export in omnidub's cache instead, once per model, and compare it with torch on this "
        "CPU: --backend auto then renders fp32 with ONNX Runtime wherever it was measured faster.",
    ),
    debug: bool = DebugOption,
) -> None:
    """Export the model as ONNX graphs for the ONNX Runtime backend (--model OUT_DIR), then check them against
    torch in fp32 on the CPU (exit 1 when a parity bound is missed). With --cache, build it where --backend auto
    finds it."""
    with user_errors(debug):
        from omnidub.backends.onnx.parity import check, print_parity

        if in_cache:
            if out_dir is not None or quantize is not None or no_check or check_only:
                raise OmnidubError("--cache builds the fp32 export in omnidub's cache: it takes --model only")
            from omnidub.backends.onnx import cache
            from omnidub.models import resolve_model

            warn_synthetic(model)
            status = cache.prepare(resolve_model(model), say=lambda text: err.print(f"→ {escape(text)}"))
            if as_json:
                print_json({**status.__dict__, "folder": str(status.folder), "used": status.used})
            else:
                out.print(escape(status.summary()), soft_wrap=True)
            raise typer.Exit(0)
        if out_dir is None:
            raise OmnidubError("give OUT_DIR, the folder to export into (or --cache for omnidub's cache)")
        if check_only and (no_check or quantize is not None):
            raise OmnidubError("--check-only checks an existing export: it takes neither --no-check nor --quantize")
        if not check_only:
            from omnidub.backends.onnx.export import export as export_graphs

            def started() -> None:  # once the folder is known to be usable: an error before it is one line alone
                warn_synthetic(model)
                err.print(f"exporting {escape(model)} to {escape(str(out_dir))} (opset {opset})")

            result = export_graphs(
                out_dir, model, opset=opset, quantize=quantize.value if quantize else None, on_start=started
            )
            err.print(f"exported in {result.seconds:.0f} s")
            if no_check:
                raise typer.Exit(0)
        report = check(out_dir, progress=lambda message: err.print(f"→ {message}"))
        if as_json:
            print_json(report)
        else:
            print_parity(report, out)
            err.print(f"parity report: {out_dir / 'parity.json'}")
    raise typer.Exit(0 if report["pass"] else 1)
