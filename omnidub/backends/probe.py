"""The first-use probe: a few forward passes at the model's real shapes decide, once per machine, what a bench
would: which CFG layout is faster (and, for torch on a CPU, which GEMM kernels). Seconds, not minutes.

It runs only once a model is loaded for rendering, never in a plan or a dry run. What it finds is recorded in
measured.json with its evidence; a project then pins the layout it was rendered with.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable

# A typical dubbing line against a ~3 s reference: the shapes the probe runs (a line of ~2.8 s).
PROBE_TEXT = "Around nine, after the morning traffic has cleared."
PROBE_REF_TEXT = "I'll pack some sandwiches and a flask of coffee."
PROBE_REF_FRAMES = 75
PROBE_FRAMES = 70
PROBE_REPEATS = 3


@dataclass(frozen=True)
class ProbeResult:
    """Median seconds per candidate, the winner and a sentence of evidence."""

    what: str  # "layout" or "gemm"
    seconds: dict
    choice: str
    evidence: str


def interleaved(runs: dict[str, Callable[[], None]], repeats: int = PROBE_REPEATS) -> dict[str, float]:
    """The fastest wall seconds of each run: one warm-up each, then ``repeats`` rounds taking every run in turn.
    Other work on the machine only ever adds time, so the fastest round is the steadiest estimate of a
    candidate's own cost, and taking turns lets no candidate have the quiet moments to itself."""
    for run in runs.values():
        run()
    times: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(repeats):
        for name, run in runs.items():
            began = time.perf_counter()
            run()
            times[name].append(time.perf_counter() - began)
    return {name: min(values) for name, values in times.items()}


def kept(seconds: dict[str, float], default: str, margin: float = 0.03) -> str:
    """The fastest of ``seconds``, unless it beats ``default`` (when measured) by less than ``margin``."""
    best = min(seconds, key=seconds.get)
    if default in seconds and best != default and seconds[best] > seconds[default] * (1 - margin):
        return default
    return best


def decide(
    what: str, seconds: dict[str, float], default: str, what_ran: str, margin: float = 0.03, began: float | None = None
) -> ProbeResult:
    """The fastest candidate, unless it beats ``default`` by less than ``margin`` (noise keeps the default);
    ``began`` (perf_counter) adds how long the probe took to the evidence."""
    best = kept(seconds, default, margin)
    figures = ", ".join(f"{name} {value * 1000:.0f} ms" for name, value in seconds.items())
    took = f" (the probe took {time.perf_counter() - began:.1f} s)" if began is not None else ""
    evidence = (
        f"first-use probe {time.strftime('%Y-%m-%d')}: {what_ran}, fastest of {PROBE_REPEATS} interleaved: "
        f"{figures}{took}"
    )
    return ProbeResult(what, {k: round(v, 4) for k, v in seconds.items()}, best, evidence)
