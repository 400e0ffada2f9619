"""Translation built in: engines behind one small protocol (offline Firefox Translations models, an
OpenAI-compatible LLM), candidates per line, the choice of the one that fits its slot, the glossary, and a
per-line cache."""

from omnidub.translate.api import ENGINES, Translated, open_engine, translate_folder
from omnidub.translate.base import Candidate, Engine, Pair, Request, language_tag
from omnidub.translate.fit import Choice, Pace
from omnidub.translate.glossary import Glossary, load_glossary
from omnidub.translate.llm import LlmOptions
from omnidub.translate.run import TranslateOptions, Translation, translate_script

__all__ = [
    "ENGINES",
    "Candidate",
    "Choice",
    "Engine",
    "Glossary",
    "LlmOptions",
    "Pace",
    "Pair",
    "Request",
    "TranslateOptions",
    "Translated",
    "Translation",
    "language_tag",
    "load_glossary",
    "open_engine",
    "translate_folder",
    "translate_script",
]
