"""``manifest.json``: what a render made, how, and from what (documented field by field in docs/manifest.md)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from omnidub import __version__
from omnidub.plan import Speaker
from omnidub.records import LineEntry

MODEL_SAMPLE_RATE = 24000  # OmniVoice's audio rate: segments are written at it


@dataclass(frozen=True)
class RenderRecord:
    """Everything the manifest says of a render, as the project holds it now."""

    input: Path
    model: dict  # the model's identity, and its weights' licence (``licence``; None when nothing says)
    settings: dict  # the preset's flat settings with the generation settings the lines were keyed with
    program: float | None
    fmt: str
    fps: float | None  # of the timecodes (the delivery's, once assembled)
    generation: object | None  # assembly.Generation: the outputs written, or None before any assembly
    speakers: dict[str, Speaker]
    names: dict[str, str]  # speaker -> file name
    notes: tuple[str, ...]
    entries: tuple[LineEntry, ...]
    request: dict | None = None  # how the render was asked for (model, preset, voices, source, delivery)
    pace: str | None = None  # the model that predicted each line's natural length (omnidub.pace.model)
    unvoiced: tuple[dict, ...] = ()  # the lines the source gave no voice surely their own: not rendered, and why


def compose(record: RenderRecord) -> tuple[str, list[str]]:
    """The manifest of a render as JSON text, and what composing it found worth saying."""
    generation = record.generation
    parts = generation.parts if generation is not None else {}
    fps = (parts.get("delivery") or {}).get("fps") or record.fps
    said: list[str] = []
    stamp = _Timecodes(fps, said.append)
    data = {
        "omnidub": __version__,
        "generator": "omnidub",
        "input": str(record.input.resolve()),
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "model": record.model,
        "settings": record.settings,
        "sample_rate": MODEL_SAMPLE_RATE,
        "program_seconds": None if record.program is None else round(record.program, 3),
        "pace": record.pace,
        "format": record.fmt,
        "stems": parts.get("stems") or {},
        "mix": parts.get("mix"),
        **({"loudness": parts["loudness"], "delivery": parts["delivery"]} if parts else {}),
        "assembly": generation.record() if generation is not None else None,
        "voices": _voices(record),
        "notes": list(record.notes),
        "unvoiced": list(record.unvoiced),
        "request": record.request,
        "lines": [stamp(e) for e in record.entries],
    }
    return json.dumps(data, indent=2, ensure_ascii=False, allow_nan=False), said  # NaN would not be JSON


def _voices(record: RenderRecord) -> dict:
    """Per speaker: which sample, how it was prepared, and the prompt it gave."""
    voices = {}
    for name, s in sorted(record.speakers.items()):
        voices[name] = {
            "audio": str(s.voice.audio.resolve()) if s.voice.audio else None,
            "instruct": s.voice.instruct,
            "text": s.prompt.text if s.prompt else s.voice.text,
            "seconds": round(s.prompt.seconds, 3) if s.prompt else None,
            "prepared": s.prompt.note if s.prompt else None,
            "prompt_key": s.key,
            "file_name": record.names.get(name),
        }
    return voices


class _Timecodes:
    """A line's record with SMPTE timecodes beside its start and ends, once the frame rate is known (a rate
    SMPTE timecode has no room for gets none, said once)."""

    def __init__(self, fps: float | None, note):
        self.fps, self.note = fps, note

    def __call__(self, entry: LineEntry) -> dict:
        record = entry.to_json()
        if not self.fps:
            return record
        from omnidub.outputs.frames import line_timecodes

        try:
            record.update(line_timecodes(entry.start, entry.end, entry.duration, self.fps))
        except ValueError as exc:
            self.note(f"no timecodes in the manifest at {self.fps:g} fps: {exc}")
            self.fps = None
        return record
