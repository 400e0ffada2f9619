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

DEVICES = ("auto", "cpu", "cuda", "mps")  # what --device takes (cuda:N too)


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


# Variables that hold torch's kernels, oneDNN or MKL to fewer instructions than the CPU has (MKL takes its
# AVX2 path on CPUs that are not Intel's; these reproduce that on one that is).
ISA_LIMITS = ("ATEN_CPU_CAPABILITY", "ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA", "MKL_ENABLE_INSTRUCTIONS")


def isa_limits() -> str:
    """The instruction-set limits set in the environment ("NAME=VALUE, ..."), or "" where none is."""
    return ", ".join(f"{name}={os.environ[name]}" for name in ISA_LIMITS if os.environ.get(name))


# What each limit's value leaves usable, as a rank: 0 no AVX2, 1 AVX2 (no AVX-512), 2 AVX-512 without bf16,
# 3 AVX512-BF16 without AMX, 4 everything. Values are the libraries' own (oneDNN's cpu_isa names, ATen's
# capabilities, MKL's instruction sets); one not listed limits nothing. Only oneDNN runs torch's bf16 GEMMs, so
# only its names below AVX512_CORE_BF16 take bf16 away; ATen's and MKL's "avx512" limit nothing that matters here.
_ISA_RANKS = {
    "default": 0, "sse41": 0, "sse4_2": 0, "avx": 0,
    "avx2": 1, "avx2_vnni": 1, "avx2_vnni_2": 1,
    "avx512_core": 2, "avx512_core_vnni": 2,
    "avx512_core_bf16": 3, "avx10_1_512": 3, "avx512_core_fp16": 3,
}  # fmt: skip
# The flags each rank no longer lets the libraries use.
_DROPPED = (
    ("avx2", "fma", "avx512", "amx", "avx10"),
    ("avx512", "amx", "avx10"),
    ("avx512_bf16", "amx"),
    ("amx",),
)


def usable_flags() -> frozenset[str]:
    """The CPU's flags less those its libraries are held from by an instruction-set limit in the environment
    (``ONEDNN_MAX_CPU_ISA=AVX2`` on a CPU with AVX512-BF16: its bf16 GEMMs fall to generic code, so bf16 is not
    this process's fast path). The lowest limit set wins."""
    ranks = [_ISA_RANKS.get(os.environ[name].strip().lower(), 4) for name in ISA_LIMITS if os.environ.get(name)]
    rank = min(ranks, default=4)
    if rank >= len(_DROPPED):
        return cpu_flags()
    return frozenset(f for f in cpu_flags() if not f.startswith(_DROPPED[rank]))


def cpu_kind() -> str:
    """The CPU as the speed choices see it, for headers and tables: its name and best matrix instructions its
    libraries may use ("AMD EPYC with AVX512-BF16"), and any limit that holds them lower."""
    flags = usable_flags()
    best = next(
        (label for flag, label in _KINDS if flag in flags),
        "no AVX2",
    )
    held = f" (held there: {isa_limits()})" if isa_limits() else ""
    return f"{cpu_name()} with {best}{held}"


_KINDS = (("amx_bf16", "AMX"), ("avx512_bf16", "AVX512-BF16"), ("avx512f", "AVX-512, no bf16"), ("avx2", "AVX2 only"))


def native_bf16() -> bool:
    """True when the CPU multiplies bf16 in hardware (AMX or AVX512-BF16), where bf16 beats fp32 by 2-7x, and no
    instruction-set limit holds its libraries from it."""
    return bool({"amx_bf16", "avx512_bf16"} & usable_flags())


@functools.lru_cache(maxsize=1)
def _cuda_devices() -> int:
    """GPUs the CUDA driver sees (0 without a driver, or with CUDA_VISIBLE_DEVICES empty)."""
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


@functools.lru_cache(maxsize=1)
def torch_build() -> dict:
    """What the installed torch was built for, read from its ``torch/version.py`` without importing torch:
    {"cuda": "13.0" or None, "hip": ...}; {} when torch is not installed."""
    import importlib.util
    import re
    from pathlib import Path

    if "torch" in sys.modules:
        version = sys.modules["torch"].version
        return {"cuda": getattr(version, "cuda", None), "hip": getattr(version, "hip", None)}
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        return {}
    try:
        text = (Path(list(spec.submodule_search_locations)[0]) / "version.py").read_text(encoding="utf-8")
    except OSError:
        return {}
    found = {}
    for name in ("cuda", "hip"):
        match = re.search(rf"^{name}\s*(?::[^=]*)?=\s*'([^']*)'", text, re.MULTILINE)
        found[name] = match.group(1) if match else None
    return found


def _torch_device() -> str:
    if "torch" in sys.modules:  # already paid for: ask torch itself
        torch = sys.modules["torch"]
        if torch.cuda.is_available():
            return "cuda"
        return "mps" if torch.backends.mps.is_available() else "cpu"
    # A CPU-only wheel never runs on CUDA, whatever driver the host has.
    if (torch_build().get("cuda") or torch_build().get("hip")) and _cuda_devices() > 0:
        return "cuda"
    if sys.platform == "darwin" and platform.machine() == "arm64":
        return "mps"
    return "cpu"


def _onnxruntime_device() -> str:
    # ONNX Runtime has no MPS provider: on Apple silicon it runs on the CPU.
    try:
        import onnxruntime
    except ImportError:
        return "cpu"
    return "cuda" if "CUDAExecutionProvider" in onnxruntime.get_available_providers() else "cpu"


def check_device(spec: str, allowed: tuple[str, ...] = DEVICES) -> str:
    """``spec`` when it names a device of ``allowed`` that this machine has (``cuda:N`` for a CUDA GPU by index);
    else an ArgumentError naming the flag, said before any work (an unknown name such as ``tpu`` would otherwise
    run on the CPU, or fail only once a model loads)."""
    from omnidub.errors import ArgumentError

    kind, _, index = str(spec).partition(":")
    if kind not in allowed or (index and (kind != "cuda" or not index.isdigit())):
        names = ", ".join(a + (" (or cuda:N)" if a == "cuda" else "") for a in allowed)
        raise ArgumentError("device", f"{{arg}}{spec}: no such device; use {names}")
    if kind == "cuda" and _cuda_devices() <= int(index or 0):
        seen = _cuda_devices()
        raise ArgumentError(
            "device",
            f"{{arg}}{spec}: "
            + (f"this machine's CUDA driver sees {seen} GPU(s)" if seen else "no CUDA GPU is visible here")
            + "; use --device cpu",
        )
    if kind == "mps" and not (sys.platform == "darwin" and platform.machine() == "arm64"):
        raise ArgumentError("device", f"{{arg}}{spec}: MPS is Apple silicon's GPU, which this machine is not; use cpu")
    return spec


def guess_device(spec: str = "auto", backend: str = "torch") -> str:
    """The device ``spec`` means here for ``backend`` ("torch" or "onnxruntime"), without importing torch.

    torch: cuda when its build has CUDA and the driver sees a GPU, then mps on Apple silicon, else cpu.
    onnxruntime: cuda when its CUDA provider is installed, else cpu."""
    if spec != "auto":
        return spec
    return _onnxruntime_device() if backend in ("onnx", "onnxruntime") else _torch_device()


def dtype_for(spec: str, device: str) -> str:
    """The dtype name ``spec`` resolves to on ``device``: ``auto`` is float16 on GPUs, bfloat16 on CPUs with
    native bf16 matmul, else float32."""
    if spec != "auto":
        return spec
    if device.startswith("cuda") or device == "mps":
        return "float16"
    return "bfloat16" if native_bf16() else "float32"


def gpu_name(device: str) -> str | None:
    """The name of the GPU a CUDA device is (asked of torch, which a CUDA run has loaded anyway), else None."""
    if device_kind(device) != "cuda":
        return None
    import torch

    return torch.cuda.get_device_name(torch.device(device).index or 0)


def device_kind(device: str) -> str:
    """cpu, cuda or mps: what changes a line's audio (which GPU does not)."""
    return device.split(":", 1)[0]
