"""Speakers ready to plan: each voice's prompt, from the prompt cache or prepared now (ASR for the cut, then
the model's codec), or, for a plan that must not load anything, paced from its whole reference."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import soundfile as sf

from omnidub.files import cache_home
from omnidub.plan import Speaker
from omnidub.script import Script
from omnidub.voices import PromptCache, Voice, voice_for, voice_prompt, voice_prompt_key


def prompt_cache_dir():
    return cache_home() / "prompts"


@dataclass(frozen=True)
class Cast:
    """Every speaker of a script with its voice's prompt, the lines that have a voice of their own, and what
    preparing them found worth saying."""

    speakers: dict[str, Speaker]
    lines: dict[int, Speaker]
    notes: tuple[str, ...] = ()


def prepare_speakers(
    engine,
    script: Script,
    voices: dict[str, Voice],
    lines: dict[int, Voice] | None = None,
    *,
    prepare: bool,
    step: Callable[[str], None] = lambda text: None,
    said: tuple[str, ...] = (),
) -> Cast:
    """Every speaker of ``script`` with its voice's prompt (one prompt per voice), and every line with a voice of
    its own (``lines``: a clip of the original line it translates) with that one. With ``prepare``, prompts not
    cached yet are prepared (the engine's ASR and model); without it they are paced from the whole reference.
    ``said``: notes already given (a reference's warning is not repeated)."""
    cache = PromptCache(prompt_cache_dir())
    notes: list[str] = []
    by_voice: dict[Voice, Speaker] = {}
    speakers = {}
    for name in sorted({line.speaker for line in script.lines}):
        voice = voice_for(name, voices)
        if voice not in by_voice:
            by_voice[voice] = _speaker(engine, voice, cache, prepare, step, notes.append, said)
        speakers[name] = by_voice[voice]
    notes += _untrimmed(engine, speakers)
    fresh = [
        v
        for v in (lines or {}).values()
        if v not in by_voice and cache.get(voice_prompt_key(v, engine.preset.voice, engine.prompt_identity)) is None
    ]
    if fresh and prepare:
        step(f"preparing {len(fresh)} line voice(s) from the source")
    own = {}
    for index, voice in (lines or {}).items():
        if voice not in by_voice:  # a line's own clip: said in the manifest, not line by line on the console
            by_voice[voice] = _speaker(engine, voice, cache, prepare, lambda text: None, lambda text: None, ())
        own[index] = by_voice[voice]
    return Cast(speakers, own, tuple(notes))


def _speaker(
    engine,
    voice: Voice,
    cache: PromptCache,
    prepare: bool,
    step: Callable[[str], None],
    note: Callable[[str], None],
    said_before: tuple[str, ...],
) -> Speaker:
    key = voice_prompt_key(voice, engine.preset.voice, engine.prompt_identity)
    if voice.audio is None:  # voice design: no reference, upstream's default pace
        return Speaker(voice, key, None, None, None)
    prompt = cache.get(key)
    if key in cache.problems and prepare:
        note(f"{voice.speaker}: its cached prompt cannot be used ({cache.problems.pop(key)}); prepared again")
    if prompt is not None and prompt.provisional and prepare and engine.asr().available():
        prompt = None  # kept whole for want of an ASR model, which is here now: trim it
    if prompt is None and prepare:
        step(f"preparing the voice of {voice.speaker}")
        backend = engine.backend()  # the model's codec encodes the prompt
        prompt, reference = voice_prompt(
            voice,
            cache=cache,
            options=engine.preset.voice,
            key=key,
            sample_rate=backend.sample_rate,
            asr=engine.asr(),
            encode=lambda ref: backend.encode_prompt(ref.audio, ref.sample_rate, ref.text, voice.spoken),
        )
        parts = reference.note.split("; ") if reference is not None and reference.note else []
        if reference is not None and reference.provisional:
            # Kept whole for want of ASR: said once for all speakers (_untrimmed); keep any other warning.
            parts = [part for part in parts if not part.startswith("kept whole (")]
        text = "; ".join(parts)
        for prior in said_before:  # what the plan's check of the reference already said is not said again
            if prior.startswith(f"{voice.speaker}: "):
                text = text.replace(prior[len(voice.speaker) + 2 :], "")
        text = "; ".join(part for part in text.split("; ") if part.strip())
        if text:
            note(f"{voice.speaker}: {text}")
    if prompt is None:
        text, seconds = reference_pace(voice)
        return Speaker(voice, key, None, text, seconds, estimated=True)
    return Speaker(voice, key, prompt, prompt.text, prompt.seconds)


def reference_pace(voice: Voice) -> tuple[str | None, float | None]:
    """A voice's pace before its prompt is prepared: its whole reference's transcript and length (None, None for a
    designed voice; the length None when libsndfile cannot read it, mp3/m4a: upstream's default pace)."""
    if voice.audio is None:
        return None, None
    try:
        return voice.text, sf.info(str(voice.audio)).duration
    except (RuntimeError, OSError):
        return voice.text, None


def _untrimmed(engine, speakers: dict[str, Speaker]) -> list[str]:
    # Said once for all speakers: the fast preset's ~3 s cut needs word times, which need an ASR model.
    whole = sorted(
        {
            s.voice.speaker
            for s in speakers.values()
            if s.prompt is not None and s.prompt.provisional and "kept whole" in s.prompt.note
        }
    )
    if not whole:
        return []
    return [
        f"no ASR model ({engine.asr_name}) to find word boundaries, so the samples of {', '.join(whole)} are kept "
        "whole; pass --asr-model with a local faster-whisper folder to trim them (omnidub models lists those here)"
    ]
