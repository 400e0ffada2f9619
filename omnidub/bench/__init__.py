"""Benchmark: one speed lever per row, each measured against the row it changes, on the same lines in one process.

Rows 1-4 call upstream's own ``generate`` (stock, fewer steps, a reference trimmed by omnidub, then the
``omnivoice-fastpath`` package's trimmed CFG: the recipe a user could assemble without omnidub). The rows after
that run omnidub's loop and add one lossless lever each; the ``auto`` rows are omnidub as a machine that never
ran a bench gets it (its first-use probe, run in a scratch cache, picks the layout and GEMM kernels); then the
other dtype, batching, torch.compile and the lossy int8 opt-in. Every row makes the same audio length per line,
so seconds per line compare directly. Rows are interleaved and repeated, the median is reported with its
min-max spread (shared machines are noisy), warm-up runs are excluded, and nothing is recorded for ``--cfg auto``
unless ``record`` asks.

rows.py declares the rows, run.py runs them, probes.py measures the ceiling, kernels and one step part by part,
report.py formats the JSON for the terminal and for the README (``scripts/bench-table``).
"""

from __future__ import annotations

# Lazy, so scripts/bench-table formats a JSON file without importing torch.
_EXPORTS = {
    "markdown": "report",
    "print_bench": "report",
    "BUNDLED_REF_CUT": "rows",
    "LINES": "rows",
    "ROWS": "rows",
    "BenchOptions": "rows",
    "Row": "rows",
    "BenchResult": "run",
    "run_bench": "run",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name in _EXPORTS:
        import importlib

        return getattr(importlib.import_module(f"omnidub.bench.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module 'omnidub.bench' has no attribute {name!r}")
