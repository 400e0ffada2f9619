"""What the ASR heard in each line's audio, kept in omnidub's cache: the same samples heard by the same model on
the same device are transcribed once, whichever check asks (``omnidub qa``, ``render --qa`` and its retakes, a
review's takes). Only the words are kept; the score is made again from them each time, by today's rules."""

from __future__ import annotations

import functools
import hashlib
import json
from importlib import metadata
from pathlib import Path

import numpy as np

from omnidub.asr import Asr, Transcript


class KeptTranscripts:
    """Transcripts of short clips in ``folder``, one small file each, named by what they depend on: the model's
    weights (``Asr.identity``), its device, the versions of omnidub and faster-whisper, the language asked for,
    the sample rate and the samples. A file that cannot be read is heard again; one that cannot be written is
    not kept (the check goes on). ``reused`` and ``heard`` count what this object has done."""

    def __init__(self, folder: Path) -> None:
        self.folder = Path(folder)
        self.reused = 0
        self.heard = 0

    def transcribe(self, asr: Asr, mono: np.ndarray, rate: int, language: str | None) -> Transcript:
        key = self._key(asr, mono, rate, language)
        path = self.folder / f"{key}.json"
        kept = _read(path, key)
        if kept is not None:
            self.reused += 1
            return kept
        found = asr.transcribe(mono, rate, language=language)  # an ASR that fails raises: nothing is kept
        self.heard += 1
        _write(path, key, found)
        return found

    @staticmethod
    def _key(asr: Asr, mono: np.ndarray, rate: int, language: str | None) -> str:
        from omnidub import __version__

        samples = hashlib.sha256(np.ascontiguousarray(mono, dtype=np.float32).tobytes()).hexdigest()
        parts = [asr.identity(), asr.device, __version__, _faster_whisper(), language, int(rate), samples]
        return hashlib.sha256(json.dumps(parts).encode()).hexdigest()[:32]


def kept_transcripts() -> KeptTranscripts:
    """The transcripts kept in omnidub's cache folder (``OMNIDUB_CACHE``, else the user cache dir)."""
    from omnidub.files import cache_home

    return KeptTranscripts(cache_home() / "qa" / "heard")


@functools.cache  # asked for every line: the installed version does not change while omnidub runs
def _faster_whisper() -> str | None:
    try:
        return metadata.version("faster-whisper")
    except metadata.PackageNotFoundError:
        return None


def _read(path: Path, key: str) -> Transcript | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    # The key it was made for is checked, not only its name: a renamed or swapped file is heard again.
    if not isinstance(data, dict) or data.get("key") != key or not isinstance(data.get("text"), str):
        return None
    language = data.get("language")
    if not (language is None or isinstance(language, str)):
        return None
    return Transcript(data["text"], language, ())


def _write(path: Path, key: str, found: Transcript) -> None:
    from omnidub.files import write_text_atomic

    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        kept = {"key": key, "text": found.text, "language": found.language}
        write_text_atomic(path, json.dumps(kept, ensure_ascii=False))
    except OSError:  # a full or read-only cache only costs hearing it again next time
        pass
