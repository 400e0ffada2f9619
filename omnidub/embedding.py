"""Speaker embeddings: resemblyzer's GE2E encoder, whose weights ship inside its wheel (it runs offline). QA
hears whose voice a line is in with it; the source's voices are grouped and chosen with it."""

from __future__ import annotations

import threading
import warnings
from pathlib import Path

import numpy as np

from omnidub.errors import ArgumentError, OmnidubError

DEFAULT_SPEAKER_MODEL = "resemblyzer"
# Less speech than this gives no embedding worth comparing.
MIN_SPEECH_SECONDS = 0.3
EMBEDDING_RATE = 16000


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
                    raise ArgumentError(
                        "speaker_model", f"the speaker encoder cannot be imported ({exc}); reinstall omnidub, "
                        "or pass {arg}none to skip the voice check"
                    ) from exc
                self._preprocess = preprocess_wav
                self._encoder = VoiceEncoder(self.device, verbose=False)
            return self._encoder

    def embed(self, audio: np.ndarray, sample_rate: int) -> tuple[np.ndarray, float] | None:
        """A unit-length embedding of a clip and the seconds of speech it rests on; None when there is too little."""
        from omnidub.asr import to_mono_16k

        encoder = self._load()
        samples = to_mono_16k(np.nan_to_num(audio), sample_rate)
        if not samples.any():  # digital silence: resemblyzer's level normalisation would divide by zero
            return None
        # Long pauses are cut and quiet speech raised to the level the encoder was trained on.
        speech = self._preprocess(samples)
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


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.dot(a, b) / max(float(np.linalg.norm(a) * np.linalg.norm(b)), 1e-12))
