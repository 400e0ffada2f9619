"""The language model's linears: torch's own GEMM, or oneDNN with weights packed once.

torch runs a float32 linear on the CPU in MKL's SGEMM, and a bfloat16 one in oneDNN after reordering the weight
into oneDNN's blocked layout on every call. ``torch.ops.mkldnn._linear_pointwise`` with a weight reordered once
(``_reorder_linear_weight``) skips that reorder, and for float32 it swaps MKL for oneDNN's own kernels: MKL is
known to pick slow code paths on CPUs that are not Intel's, while oneDNN tunes itself to the ISA it finds
(AVX2, AVX-512, AMX). Both are exact float32 or bfloat16 arithmetic: float32 results differ from MKL's only in
summation order (checked against upstream's logits in the tests); bfloat16 ones are oneDNN's either way.
The packed weight is a copy held beside upstream's (upstream's own forward still reads its own weights).
"""

from __future__ import annotations

import torch
from torch import nn

GEMMS = ("aten", "onednn")
# A hint for oneDNN's weight layout only: any number of rows runs on the packed weight.
_TYPICAL_ROWS = 256


def onednn_usable(device: str, dtype: torch.dtype) -> bool:
    """oneDNN linears need a CPU build of torch with mkldnn, and float32, or bfloat16 where oneDNN has bfloat16
    kernels for this CPU."""
    if not (str(device).startswith("cpu") and torch.backends.mkldnn.is_available()):
        return False
    return dtype == torch.float32 or (dtype == torch.bfloat16 and onednn_bf16())


def onednn_bf16() -> bool:
    """True where oneDNN runs bfloat16 on this CPU: it needs AVX-512 or AVX-NE-CONVERT, which an AVX2-only CPU
    lacks (its packed bfloat16 weights then cannot even be made)."""
    return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())


def linear(weight: torch.Tensor, bias: torch.Tensor | None, gemm: str = "aten") -> nn.Module:
    """A linear layer over ``weight`` [out, in] that runs its GEMM the ``gemm`` way."""
    if gemm == "onednn" and onednn_usable(weight.device.type, weight.dtype):
        return _OnednnLinear(weight, bias)
    if gemm not in GEMMS:
        raise ValueError(f"unknown gemm {gemm!r}")
    return _AtenLinear(weight, bias)


class _AtenLinear(nn.Module):
    def __init__(self, weight: torch.Tensor, bias: torch.Tensor | None):
        super().__init__()
        # Buffers, not parameters: nothing trains them, and torch.compile treats them as the module's own.
        self.register_buffer("weight", weight, persistent=False)
        self.register_buffer("bias", bias, persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.linear(x, self.weight, self.bias)


class _OnednnLinear(nn.Module):
    def __init__(self, weight: torch.Tensor, bias: torch.Tensor | None):
        super().__init__()
        self.weight = weight  # upstream's memory, for anyone who reads .weight (the bench, the tests)
        self.bias = bias
        self.packed = torch.ops.mkldnn._reorder_linear_weight(weight, _TYPICAL_ROWS)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.ops.mkldnn._linear_pointwise(x, self.packed, self.bias, "none", [], "")
