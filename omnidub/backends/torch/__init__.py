"""The torch backend: OmniVoice in PyTorch with omnidub's decoding loop and CFG layouts.

Importing the package imports no torch (the registry reads ``spec`` without it); its names load on first use.
"""

from __future__ import annotations

__all__ = ["TorchBackend", "Tuning", "compare_logits", "generation_settings"]


def __getattr__(name: str):
    if name in __all__:
        from omnidub.backends.torch import backend

        return getattr(backend, name)
    raise AttributeError(f"module 'omnidub.backends.torch' has no attribute {name!r}")
