"""The engine: a resident OmniVoice, omnidub's decoding loop and its CFG layouts.

Exports are imported lazily so that ``omnidub.engine.loading`` and ``.synthetic`` stay cheap to import.
"""

from __future__ import annotations

__all__ = ["Engine", "Request", "Result", "compare_logits", "generation_settings"]


def __getattr__(name: str):
    if name in __all__:
        from omnidub.engine import synthesis

        return getattr(synthesis, name)
    raise AttributeError(f"module 'omnidub.engine' has no attribute {name!r}")
