"""What omnidub measured on this kind of machine, kept in its cache: layouts, GEMM kernels, backends, compile costs.

Choices that only one CPU justified are never hard-coded: a short probe at the model's real shapes measures them
on first use (or ``omnidub bench --record`` does), and they are written here with their evidence, keyed by what
they are valid for: the CPU model and matrix units (or the GPU name), the dtype, the backend and the model's
shape. ``--cfg auto``, ``--backend auto`` and ``--compile auto`` read them. The file is small JSON
(``measured.json`` in the omnidub cache) and is torch-free to read, so plans and keys use it.

A project pins what it was rendered with (its manifest), so a new measurement here never changes the audio of
a project that was already rendered.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from omnidub.config import LAYOUTS
from omnidub.files import cache_home, write_text_atomic
from omnidub.hardware import cpu_name, device_kind, isa_limits, usable_flags

FILE = "measured.json"


def machine_key(device: str, dtype: str, gpu: str | None = None) -> str:
    """What a measurement is valid for: the processor that ran it (CPU model and matrix units, or GPU name) and
    the dtype. Virtual machines often name every Xeon alike, so the CPU's matrix features are part of the key,
    and so are limits set on the instructions its libraries may use (the same CPU runs other kernels then)."""
    kind = device_kind(device)
    if kind == "cpu":
        where = f"{cpu_name()}|{matrix_units()}" + (f"|{isa_limits()}" if isa_limits() else "")
    else:
        where = gpu if kind == "cuda" and gpu else kind
    return f"{kind}|{where}|{dtype}"


def probe_key(device: str, dtype: str, backend: str = "torch", shape: str = "", gpu: str | None = None) -> str:
    """A machine key narrowed to one backend and one model shape (a layout measured on a tiny test model says
    nothing about the full one)."""
    return f"{machine_key(device, dtype, gpu)}|{backend}|{shape}"


def matrix_units() -> str:
    """The CPU's best matrix feature its libraries may use: amx_bf16, avx512_bf16, avx512f, avx2 or no-avx2."""
    flags = usable_flags()
    for flag in ("amx_bf16", "avx512_bf16", "avx512f", "avx2"):
        if flag in flags:
            return flag
    return "no-avx2"


def _path() -> Path:
    return cache_home() / FILE


def load() -> dict:
    """Everything measured so far ({} when nothing was, or the file is unreadable)."""
    try:
        data = json.loads(_path().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def entry(section: str, key: str) -> dict | None:
    """One measurement, or None."""
    found = load().get(section, {}).get(key)
    return found if isinstance(found, dict) else None


def record(section: str, key: str, value: dict) -> None:
    """Store one measurement with the time it was made (a read-only cache only costs the next run a probe)."""
    data = load()
    data.setdefault(section, {})[key] = {**value, "measured_at": time.strftime("%Y-%m-%d %H:%M:%S")}
    try:
        _path().parent.mkdir(parents=True, exist_ok=True)
        write_text_atomic(_path(), json.dumps(data, indent=2, sort_keys=True))
    except OSError:
        pass


def layout_choice(device: str, dtype: str, backend: str = "torch", shape: str = "") -> dict | None:
    """The layout measured faster here ({choice, seconds, evidence, measured_at}), or None if never measured."""
    found = entry("layout", probe_key(device, dtype, backend, shape))
    return found if found is not None and found.get("choice") in LAYOUTS else None


def record_layout(
    device: str,
    dtype: str,
    seconds: dict[str, float],
    evidence: str,
    *,
    backend: str = "torch",
    shape: str = "",
    gpu: str | None = None,
    choice: str | None = None,
) -> str:
    """Store the measured seconds per layout (same rows, same run) and the layout chosen from them (``choice``, a
    probe's decision; else the faster), and return that choice."""
    choice = choice or min(seconds, key=seconds.get)
    record(
        "layout",
        probe_key(device, dtype, backend, shape, gpu),
        {"choice": choice, "seconds": seconds, "evidence": evidence},
    )
    return choice


def gemm_choice(device: str, dtype: str, shape: str = "") -> dict | None:
    """How the torch backend's linears run fastest here ("aten" or "onednn"), or None if never measured."""
    found = entry("gemm", probe_key(device, dtype, "torch", shape))
    return found if found is not None and found.get("choice") in ("aten", "onednn") else None


def compile_record(key: str) -> dict | None:
    """What compiling cost here for this model, dtype and device, and what it gave, if known: ``cold_seconds``
    and ``warm_seconds`` (with inductor's cache empty or holding this model shape), ``speedup``, and the
    ``inductor_cache`` folder it filled."""
    return entry("compile", key)


def record_compile(key: str, seconds: float, *, warm: bool, cache: str, speedup: float | None = None) -> None:
    """Remember how long compiling took with a cold or a warm inductor cache (the folder ``cache``), and, once
    measured, what it gave, for the next ``--compile auto``."""
    previous = compile_record(key) or {}
    if "seconds" in previous:  # an older record's one figure was its cold cost
        previous.setdefault("cold_seconds", previous.pop("seconds"))
    value = {**previous, "warm_seconds" if warm else "cold_seconds": round(seconds, 1), "inductor_cache": cache}
    if speedup is not None:
        value["speedup"] = round(speedup, 3)
    record("compile", key, value)
