"""Voices: the cast (who speaks with which reference), reference preparation, and the prompt cache."""

from omnidub.media import load_audio
from omnidub.voices.cast import Voice, check_cast, load_voices, misspelt_speakers, voice_for
from omnidub.voices.prompts import PromptCache, voice_prompt, voice_prompt_key
from omnidub.voices.reference import Reference, check_reference, prepare_reference

__all__ = [
    "PromptCache",
    "Reference",
    "Voice",
    "check_cast",
    "check_reference",
    "load_audio",
    "load_voices",
    "misspelt_speakers",
    "prepare_reference",
    "voice_for",
    "voice_prompt",
    "voice_prompt_key",
]
