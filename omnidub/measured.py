"""What omnidub measured on this kind of machine, kept in its cache: the faster CFG layout and compile costs.

Choices that only one CPU justified are never hard-coded: ``omnidub bench`` measures them and writes them
here, keyed by the CPU model (or GPU name) and dtype, and ``--cfg auto`` / ``--compile auto`` read them. The file
is small JSON (``measured.json`` in the omnidub cache) and is torch-free to read, so plans and keys use it.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from omnidub.files import cache_home, write_text_atomic
from omnidub.hardware import cpu_flags, cpu_name, device_kind

FILE = "measured.json"


def machine_key(device: str, dtype: str, gpu: str | None = None) -> str:
    """What a measurement is valid for: the processor that ran it (CPU model and matrix units, or GPU name) and
    the dtype. Virtual machines often name every Xeon alike, so the CPU's matrix features are part of the key."""
    kind = device_kind(device)
    if kind == "cpu":
        where = f"{cpu_name()}|{_matrix_units()}"
    else:
        where = gpu if kind == "cuda" and gpu else kind
    return f"{kind}|{where}|{dtype}"


def _matrix_units() -> str:
    flags = cpu_flags()
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


def _update(section: str, key: str, entry: dict) -> None:
    data = load()
    data.setdefault(section, {})[key] = {**entry, "measured_at": time.strftime("%Y-%m-%d %H:%M:%S")}
    try:
        _path().parent.mkdir(parents=True, exist_ok=True)
        write_text_atomic(_path(), json.dumps(data, indent=2, sort_keys=True))
    except OSError:
        pass  # a read-only cache only costs the next run a default


def layout_choice(device: str, dtype: str) -> str | None:
    """The CFG layout the bench measured faster for this processor and dtype, or None if never measured."""
    entry = load().get("layout", {}).get(machine_key(device, dtype))
    choice = entry.get("choice") if isinstance(entry, dict) else None
    return choice if choice in ("padded", "trimmed", "packed") else None


def record_layout(device: str, dtype: str, seconds: dict[str, float], evidence: str, gpu: str | None = None) -> str:
    """Store the measured seconds per layout (same lines, same run) and return the faster layout."""
    choice = min(seconds, key=seconds.get)
    _update("layout", machine_key(device, dtype, gpu), {"choice": choice, "seconds": seconds, "evidence": evidence})
    return choice


def compile_record(key: str) -> dict | None:
    """What compiling cost last time for this model, dtype and device ({seconds, speedup}), if known."""
    entry = load().get("compile", {}).get(key)
    return entry if isinstance(entry, dict) else None


def record_compile(key: str, seconds: float, speedup: float | None = None) -> None:
    """Remember how long compiling took (and, from the bench, what it gave) for the next ``--compile auto``."""
    previous = compile_record(key) or {}
    entry = {"seconds": round(seconds, 1), "speedup": speedup if speedup is not None else previous.get("speedup"),
             "cold_seconds": previous.get("cold_seconds", round(seconds, 1))}
    _update("compile", key, entry)
