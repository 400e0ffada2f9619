"""Whose voice a line is in: a speaker embedding of each line against every speaker's reference recording,
and the verdict drawn from it."""

from __future__ import annotations

import threading
import warnings
from pathlib import Path

import numpy as np

from omnidub.errors import ArgumentError, OmnidubError
from omnidub.qa.results import LineCheck, QaSettings, SpeakerVoice, VoiceMatch

DEFAULT_SPEAKER_MODEL = "resemblyzer"
NO_SPEAKER_MODEL = "none"
SPEAKER_MODELS = (DEFAULT_SPEAKER_MODEL, NO_SPEAKER_MODEL)
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


# --- the verdict -----------------------------------------------------------------------------------------


def reference_embeddings(encoder: SpeakerEncoder | None, references: dict[str, Path]
                         ) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    """Each speaker's reference embedding, and for a speaker whose reference gives none, why."""
    if encoder is None:
        return {}, {}
    embeddings, reasons = {}, {}
    for speaker, path in references.items():
        try:
            embedding = encoder.embed_file(Path(path))
        except OmnidubError as exc:
            reasons[speaker] = str(exc)
            continue
        if embedding is None:
            reasons[speaker] = f"its reference {path} holds too little speech"
        else:
            embeddings[speaker] = embedding
    return embeddings, reasons


def unmeasured_reason(finite: bool) -> str:
    """Why a line with audio got no voice figure."""
    if not finite:
        return "samples that are not numbers"
    return f"under {MIN_SPEECH_SECONDS:g} s of speech once pauses are cut"


def wrong_voice(voice: VoiceMatch, settings: QaSettings) -> bool:
    """Closer to another speaker than to its own, or (with enough speech) under the similarity threshold."""
    if voice.margin is not None and voice.margin < 0:
        return True
    return voice.speech_seconds >= settings.min_voice_seconds and voice.similarity < settings.min_voice_similarity


def voice_note(voice: VoiceMatch, speaker: str, settings: QaSettings) -> str:
    if voice.margin is not None and voice.margin < 0:
        return f"sounds like {voice.nearest} ({voice.nearest_similarity:.2f}) more than {speaker} ({voice.similarity:.2f})"
    return f"voice similarity to {speaker} {voice.similarity:.2f}, below {settings.min_voice_similarity:.2f}"


def speaker_voices(lines: tuple[LineCheck, ...], reasons: dict[str, str]) -> tuple[SpeakerVoice, ...]:
    """Per speaker: the voice figures of the lines measured, or why none was (`reasons`: the speaker's own)."""
    out = []
    for speaker in dict.fromkeys(c.speaker for c in lines):
        own = [c for c in lines if c.speaker == speaker]
        measured = [c.voice.similarity for c in own if c.voice is not None]
        failed = sum("voice" in c.flags for c in own)
        reason = None
        if not measured:
            reason = reasons.get(speaker) or _lines_reason(own)
        out.append(SpeakerVoice(
            speaker, len(measured), float(np.mean(measured)) if measured else None,
            min(measured) if measured else None, failed, reason,
        ))
    return tuple(out)


def _lines_reason(lines: list[LineCheck]) -> str:
    """Why none of a speaker's lines was measured, counted by cause ("2 lines: no audio; 1 line: ...")."""
    causes: dict[str, int] = {}
    for c in lines:
        cause = c.voice_skipped or "not measured"
        causes[cause] = causes.get(cause, 0) + 1
    return "; ".join(f"{n} line{'s' if n > 1 else ''}: {cause}" for cause, n in causes.items())
