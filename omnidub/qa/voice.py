"""Whose voice a line is in: a speaker embedding of each line against every speaker's reference recording,
and the verdict drawn from it."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from omnidub.embedding import DEFAULT_SPEAKER_MODEL, MIN_SPEECH_SECONDS, SpeakerEncoder, cosine
from omnidub.errors import OmnidubError
from omnidub.qa.results import LineCheck, QaSettings, SpeakerVoice, VoiceMatch

NO_SPEAKER_MODEL = "none"


def match_voice(
    encoder: SpeakerEncoder, audio: np.ndarray, sample_rate: int, speaker: str, references: dict[str, np.ndarray]
) -> VoiceMatch | None:
    """Compare a line with its speaker's reference embedding and the nearest other speaker's."""
    found = encoder.embed(audio, sample_rate)
    if found is None:
        return None
    embedding, seconds = found
    mine = references[speaker]
    own = cosine(embedding, mine)
    # Speakers cast with the same recording (a shared default voice) are one voice, not a rival.
    others = {
        name: cosine(embedding, ref)
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


# --- the verdict -----------------------------------------------------------------------------------------


def reference_embeddings(
    encoder: SpeakerEncoder | None, references: dict[str, Path]
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
        return (
            f"sounds like {voice.nearest} ({voice.nearest_similarity:.2f}) more than {speaker} ({voice.similarity:.2f})"
        )
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
        out.append(
            SpeakerVoice(
                speaker,
                len(measured),
                float(np.mean(measured)) if measured else None,
                min(measured) if measured else None,
                failed,
                reason,
            )
        )
    return tuple(out)


def _lines_reason(lines: list[LineCheck]) -> str:
    """Why none of a speaker's lines was measured, counted by cause ("2 lines: no audio; 1 line: ...")."""
    causes: dict[str, int] = {}
    for c in lines:
        cause = c.voice_skipped or "not measured"
        causes[cause] = causes.get(cause, 0) + 1
    return "; ".join(f"{n} line{'s' if n > 1 else ''}: {cause}" for cause, n in causes.items())
