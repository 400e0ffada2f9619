"""omnidub: batch dubbing with OmniVoice voice cloning.

    import omnidub
    summary = omnidub.render("dialogue.srt", voices="voices.toml", model="synthetic:tiny")
    dubbed = omnidub.dub("episode.mkv", to="pt", asr_model="tiny.en")

The library's verbs are ``render``, ``qa``, ``translate`` and ``dub`` (``omnidub.api``; ``omnidub.render`` and
``omnidub.dub`` here too), each one call; a
:class:`Session` (render, job, qa, dub, review) keeps one :class:`Engine` (the resident model) for many. The option
types say how a project is rendered and delivered. Names load on first use, so ``import omnidub`` is instant.
"""

from __future__ import annotations

__version__ = "0.1.0"

# name -> the module that defines it
_EXPORTS = {
    # omnidub.api's verbs; its qa and translate share their names with the packages omnidub.qa and
    # omnidub.translate, so they are called as omnidub.api.qa and omnidub.api.translate.
    "render": "omnidub.api",
    "dub": "omnidub.api",
    "Session": "omnidub.api",
    "DubOptions": "omnidub.dubbing",
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
