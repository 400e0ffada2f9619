"""omnivoice's pure-Python helpers (duration rules, language list, text chunking), without its heavy import.

``import omnivoice.utils.duration`` would run the package's ``__init__``, which loads torch, transformers and
the model code (seconds). These modules use only the standard library, so they are loaded from their files.
"""

from __future__ import annotations

import functools
import importlib.util
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from omnidub.errors import OmnidubError


@functools.lru_cache(maxsize=None)
def omnivoice_module(name: str) -> ModuleType:
    """``omnivoice.utils.<name>`` loaded standalone (``duration``, ``lang_map``, ``text``)."""
    full = f"omnivoice.utils.{name}"
    if full in sys.modules:  # the real package is already loaded: use its module
        return sys.modules[full]
    spec = importlib.util.find_spec("omnivoice")  # finds the package without running its __init__
    if spec is None or not spec.submodule_search_locations:
        raise OmnidubError("the omnivoice package is not installed; pip install omnivoice")
    path = Path(next(iter(spec.submodule_search_locations))) / "utils" / f"{name}.py"
    module_spec = importlib.util.spec_from_file_location(f"omnidub._omnivoice_{name}", path)
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    return module


@dataclass(frozen=True)
class VoiceDesignRules:
    """Upstream's voice-design vocabulary: every valid item, the English<->Chinese maps, the categories of
    which an instruction may hold one item each, and its test for Chinese text."""

    valid: frozenset
    en_to_zh: dict
    zh_to_en: dict
    exclusive: tuple
    chinese: re.Pattern


@functools.lru_cache(maxsize=1)
def voice_design_rules() -> VoiceDesignRules:
    """omnivoice's voice-design tables (private names in omnivoice.utils.voice_design), read in this one place
    so that a torch-free backend checks instructions exactly as upstream does."""
    rules = omnivoice_module("voice_design")
    return VoiceDesignRules(
        valid=frozenset(rules._INSTRUCT_ALL_VALID),
        en_to_zh=dict(rules._INSTRUCT_EN_TO_ZH),
        zh_to_en=dict(rules._INSTRUCT_ZH_TO_EN),
        exclusive=tuple(rules._INSTRUCT_MUTUALLY_EXCLUSIVE),
        chinese=rules._ZH_RE,
    )
