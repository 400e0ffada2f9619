"""ONNX: export OmniVoice's three graphs, check them against torch, and render through ONNX Runtime without torch.

``export`` and ``parity`` need torch and the ``[onnx]`` extra; the backend and its host loop import no torch.
"""

from __future__ import annotations

__all__ = ["OnnxBackend"]


def __getattr__(name: str):
    if name == "OnnxBackend":
        from omnidub.backends.onnx.backend import OnnxBackend

        return OnnxBackend
    raise AttributeError(f"module 'omnidub.backends.onnx' has no attribute {name!r}")
