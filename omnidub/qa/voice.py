"""Whose voice a line is in: a speaker embedding of each line against every speaker's reference recording."""

from __future__ import annotations

import threading
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from omnidub.errors import OmnidubError

DEFAULT_SPEAKER_MODEL = "resemblyzer"
NO_SPEAKER_MODEL = "none"
SPEAKER_MODELS = (DEFAULT_SPEAKER_MODEL, NO_SPEAKER_MODEL)
# Less speech than this gives no embedding worth comparing.
MIN_SPEECH_SECONDS = 0.3
EMBEDDING_RATE = 16000


@dataclass(frozen=True)
class VoiceMatch:
    """A line's voice against the references: cosine similarity to its own speaker's, and to the nearest other's."""

    similarity: float
    nearest: str | None  # the other speaker whose reference is closest; None when the cast has one voice
    nearest_similarity: float | None
    margin: float | None  # similarity - nearest_similarity: negative when the line sounds like `nearest`
    speech_seconds: float  # what the encoder heard once long pauses were cut


class SpeakerEncoder:
    """Resemblyzer's GE2E speaker encoder (its weights ship inside the wheel), loaded on first use."""

    name = DEFAULT_SPEAKER_MODEL

    def __init__(self, device: str = "cpu") -> None:
        self.device = "cuda" if device.startswith("cuda") else "cpu"
        self._encoder = None
        self._files: dict[tuple, np.ndarray | None] = {}
        self._lock = threading.Lock()

    def _load(self):
        with self._lock:
            if self._encoder is None:
                try:
                    with warnings.catch_warnings():
                        # webrtcvad reaches for pkg_resources, resemblyzer for an old scipy namespace.
                        warnings.simplefilter("ignore", UserWarning)
                        warnings.simplefilter("ignore", DeprecationWarning)
                        from resemblyzer import VoiceEncoder, preprocess_wav
                except ImportError as exc:
                    raise OmnidubError(
                        f"the speaker encoder cannot be imported ({exc}); reinstall omnidub, "
                        "or pass --speaker-model none to skip the voice check"
                    ) from exc
                self._preprocess = preprocess_wav
                self._encoder = VoiceEncoder(self.device, verbose=False)
            return self._encoder

    def embed(self, audio: np.ndarray, sample_rate: int) -> tuple[np.ndarray, float] | None:
        """A unit-length embedding of a clip and the seconds of speech it rests on; None when there is too little."""
        from omnidub.asr import to_mono_16k

        encoder = self._load()
        # Long pauses are cut and quiet speech raised to the level the encoder was trained on.
        speech = self._preprocess(to_mono_16k(np.nan_to_num(audio), sample_rate))
        seconds = len(speech) / EMBEDDING_RATE
        if seconds < MIN_SPEECH_SECONDS:
            return None
        return np.asarray(encoder.embed_utterance(speech), dtype=np.float32), seconds

    def embed_file(self, path: Path) -> np.ndarray | None:
        """The embedding of a reference recording, remembered while the file is unchanged."""
        from omnidub.voices import load_audio

        path = Path(path)
        if not path.is_file():
            raise OmnidubError(f"reference recording not found: {path}")
        stat = path.stat()
        key = (str(path.resolve()), stat.st_size, stat.st_mtime_ns)
        if key not in self._files:
            found = self.embed(load_audio(path, EMBEDDING_RATE), EMBEDDING_RATE)
            self._files[key] = None if found is None else found[0]
        return self._files[key]

    def match(self, audio: np.ndarray, sample_rate: int, speaker: str, references: dict[str, np.ndarray]) -> VoiceMatch | None:
        """Compare a line with its speaker's reference embedding and the nearest other speaker's."""
        found = self.embed(audio, sample_rate)
        if found is None:
            return None
        embedding, seconds = found
        mine = references[speaker]
        own = _cosine(embedding, mine)
        # Speakers cast with the same recording (a shared default voice) are one voice, not a rival.
        others = {
            name: _cosine(embedding, ref)
            for name, ref in references.items()
            if name != speaker and not np.array_equal(ref, mine)
        }
        if not others:
            return VoiceMatch(own, None, None, None, seconds)
        nearest = max(others, key=others.get)
        return VoiceMatch(own, nearest, others[nearest], own - others[nearest], seconds)


def speaker_encoder(name: str | None, device: str = "cpu") -> SpeakerEncoder | None:
    """The encoder named by --speaker-model; None for "none" (no voice check)."""
    choice = (name or DEFAULT_SPEAKER_MODEL).strip().lower()
    if choice == NO_SPEAKER_MODEL:
        return None
    if choice != DEFAULT_SPEAKER_MODEL:
        raise OmnidubError(
            f"unknown speaker model {name!r}: omnidub offers {DEFAULT_SPEAKER_MODEL!r} (the default) "
            f"and {NO_SPEAKER_MODEL!r} (no voice check)"
        )
    return SpeakerEncoder(device)


def _cosine(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.dot(a, b) / max(float(np.linalg.norm(a) * np.linalg.norm(b)), 1e-12))
