"""Voice prompts: the key of a voice's encoded prompt, the on-disk prompt cache, and prepare-or-reuse."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Callable

from omnidub.asr import Asr
from omnidub.backends.base import Prompt
from omnidub.config import VoiceOptions
from omnidub.errors import OmnidubError
from omnidub.files import write_bytes_atomic
from omnidub.keys import prompt_key
from omnidub.voices.cast import Voice
from omnidub.voices.reference import Reference, prepare_reference


def voice_prompt_key(voice: Voice, options: VoiceOptions, identity: dict) -> str:
    """The prompt key of a voice (see :func:`omnidub.keys.prompt_key`)."""
    return prompt_key(voice.audio, voice.text, voice.spoken, voice.instruct, options, identity)


class PromptCache:
    """Encoded voice prompts on disk (``.npz``, no model classes), one file per key, written atomically. Each
    entry records the key it was made for and its own hash, and every read checks both, as line entries are
    checked: a file swapped with another voice's, or changed, is never used."""

    def __init__(self, folder: Path) -> None:
        self.folder = Path(folder)
        self.problems: dict[str, str] = {}  # key -> why its entry could not be used (a damaged or swapped file)

    def path(self, key: str) -> Path:
        return self.folder / f"{key}.npz"

    def get(self, key: str) -> Prompt | None:
        """The cached prompt for `key`, or None: none stored, or one that cannot be used (``problems`` says why;
        it is prepared again and the entry rewritten)."""
        path = self.path(key)
        if not path.is_file():
            return None
        try:
            return Prompt.from_bytes(path.read_bytes(), made_for=key)
        except Exception as exc:  # noqa: BLE001 - a truncated, foreign or swapped file is a miss; it gets rewritten
            self.problems[key] = str(exc) or type(exc).__name__
            return None

    def put(self, key: str, prompt: Prompt) -> Path:
        """Store a prompt; readers never see a half-written file."""
        path = self.path(key)
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            write_bytes_atomic(path, prompt.to_bytes(made_for=key))
        except OSError as exc:
            raise OmnidubError(f"cannot write the voice prompt cache in {self.folder}: {exc.strerror or exc}") from exc
        return path


def voice_prompt(
    voice: Voice,
    *,
    cache: PromptCache | None,
    options: VoiceOptions,
    key: str,
    sample_rate: int,
    asr: Asr | None,
    encode: Callable[[Reference], Prompt],
) -> tuple[Prompt, Reference | None]:
    """A voice's encoded prompt from the cache, else prepared, encoded with `encode` and stored.

    Returns (prompt, reference); reference is None on a cache hit, which touches neither ASR nor audio decoding.
    A prompt kept whole for want of an ASR model is prepared again once that model is available.
    """
    prompt = cache.get(key) if cache is not None else None
    if prompt is not None and not (prompt.provisional and asr is not None and asr.available()):
        return prompt, None
    reference = prepare_reference(voice, sample_rate=sample_rate, options=options, asr=asr)
    prompt = replace(encode(reference), note=reference.note, provisional=reference.provisional)
    if cache is not None:
        cache.put(key, prompt)
    return prompt, reference
