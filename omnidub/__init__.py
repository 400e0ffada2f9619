"""omnidub: batch dubbing with OmniVoice voice cloning.

    from omnidub import Session
    summary = Session(model="synthetic:tiny").render("dialogue.srt", voices="voices.toml")

The library's face is :class:`Session` (render, job, qa, review) over an :class:`Engine` (the resident model);
the option types say how a project is rendered and delivered. Names load on first use, so ``import omnidub`` is
instant.
"""

from __future__ import annotations

__version__ = "0.1.0"

# name -> the module that defines it
_EXPORTS = {
    "Session": "omnidub.api",
    "Engine": "omnidub.engine",
    "OmnidubError": "omnidub.errors",
    "Preset": "omnidub.config",
    "ProjectOptions": "omnidub.project",
    "DeliveryOptions": "omnidub.outputs.deliver",
    "SourceOptions": "omnidub.source.cast",
    "ExecutorOptions": "omnidub.scheduler",
    "QaOptions": "omnidub.job",
    "Summary": "omnidub.progress",
}
__all__ = ["__version__", *_EXPORTS]


def __getattr__(name: str):
    if name in _EXPORTS:
        import importlib

        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'omnidub' has no attribute {name!r}")
