"""Keys over everything that changes audio, computable without loading any model.

A prompt key covers the reference file's bytes, its transcript, language and trim settings, the model and the
ASR model that finds the cut. A line key covers the prompt key, the line's text, language and exact length,
the seed, the model identity (backend, device kind, dtype) and the generation settings.
"""

from __future__ import annotations

import hashlib
import json

from omnidub.config import VoiceOptions
from omnidub.duration import FRAME_RATE


def line_seed(run_seed: int, speaker: str, text: str, language: str | None) -> int:
    """A per-line seed from the run seed and the line's content, so one line always renders the same."""
    digest = hashlib.sha256(f"{run_seed}\x00{speaker}\x00{text}\x00{language}".encode()).digest()
    return int.from_bytes(digest[:4], "big") & 0x7FFFFFFF


def file_digest(path, digest=None):
    """sha256 over a file's bytes (read in blocks)."""
    digest = digest or hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest


def prompt_key(
    audio, text: str | None, language: str | None, instruct: str | None, options: VoiceOptions, identity: dict
) -> str:
    """Hex sha256 of everything that changes a voice's encoded prompt (``audio`` is the reference's path)."""
    digest = hashlib.sha256(b"omnidub-prompt-v2\0")
    if audio is not None:
        file_digest(audio, digest)
    fields = {
        "text": text,
        "language": language,  # steers the recogniser that finds the cut and any missing transcript
        "instruct": instruct,
        "reference_seconds": options.reference_seconds,
        "reference_window": list(options.reference_window),
        "model": identity,
    }
    digest.update(json.dumps(fields, sort_keys=True, default=str).encode())
    return digest.hexdigest()


def line_key(
    *,
    prompt: str,
    instruct: str | None,
    text: str,
    language: str | None,
    seconds: float,
    seed: int,
    model: dict,
    settings: dict,
) -> str:
    """A key over everything that changes a line's audio."""
    payload = {
        "model": model,
        "settings": settings,
        "prompt": prompt,
        "instruct": instruct,
        "text": text,
        "language": language,
        "frames": round(seconds * FRAME_RATE * 1000),
        "seed": seed,
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()
