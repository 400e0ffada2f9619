"""What this machine offers, found without importing torch: devices and native bf16 matrix units.

Plans and keys are made before any model loads (a dry run must start at once), so they rely on these
answers; the torch backend confirms the device with torch when it loads.
"""

from __future__ import annotations

import ctypes
import functools
import os
import platform
import sys

DEVICES = ("auto", "cpu", "cuda", "mps")


@functools.lru_cache(maxsize=1)
def cpu_flags() -> frozenset[str]:
    """The CPU's feature flags (Linux /proc/cpuinfo); empty where they cannot be read."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as handle:
            for line in handle:
                if line.startswith("flags"):
                    return frozenset(line.split(":", 1)[1].split())
    except OSError:
        pass
    return frozenset()


def cpu_name() -> str:
    """The CPU's model name, for benchmark tables."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as handle:
            for line in handle:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def native_bf16() -> bool:
    """True when the CPU multiplies bf16 in hardware (AMX or AVX512-BF16), where bf16 beats fp32 by 2-7x."""
    return bool({"amx_bf16", "avx512_bf16"} & cpu_flags())


@functools.lru_cache(maxsize=1)
def _cuda_devices() -> int:
    if "torch" in sys.modules:  # already paid for: ask torch itself
        torch = sys.modules["torch"]
        return torch.cuda.device_count() if torch.cuda.is_available() else 0
    if os.environ.get("CUDA_VISIBLE_DEVICES", None) == "":
        return 0
    try:
        cuda = ctypes.CDLL("libcuda.so.1" if sys.platform.startswith("linux") else "nvcuda.dll")
        count = ctypes.c_int(0)
        if cuda.cuInit(0) != 0 or cuda.cuDeviceGetCount(ctypes.byref(count)) != 0:
            return 0
        return count.value
    except (OSError, AttributeError):
        return 0


def guess_device(spec: str = "auto") -> str:
    """The device ``spec`` means here: ``auto`` picks cuda, then mps, then cpu (no torch import)."""
    if spec != "auto":
        return spec
    if _cuda_devices() > 0:
        return "cuda"
    if sys.platform == "darwin" and platform.machine() == "arm64":
        return "mps"
    return "cpu"


def dtype_for(spec: str, device: str) -> str:
    """The dtype name ``spec`` resolves to on ``device``: ``auto`` is float16 on GPUs, bfloat16 on CPUs with
    native bf16 matmul, else float32."""
    if spec != "auto":
        return spec
    if device.startswith("cuda") or device == "mps":
        return "float16"
    return "bfloat16" if native_bf16() else "float32"


def device_kind(device: str) -> str:
    """cpu, cuda or mps: what changes a line's audio (which GPU does not)."""
    return device.split(":", 1)[0]
