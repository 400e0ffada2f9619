"""``manifest.json``: what a render made, how, and from what (documented field by field in the README)."""

from __future__ import annotations

import json
from datetime import datetime, timezone

from omnidub import __version__
from omnidub.journal import LineEntry

MODEL_SAMPLE_RATE = 24000  # OmniVoice's audio rate: segments are written at it


def compose(project) -> str:
    """The manifest of a project as its lines stand now, as JSON text."""
    generation = project.generation
    parts = generation.parts if generation is not None else {}
    fps = (parts.get("delivery") or {}).get("fps") or project.options.delivery.fps
    stamp = _Timecodes(fps, project.note)
    data = {
        "omnidub": __version__,
        "generator": "omnidub",
        "input": str(project.input_path.resolve()),
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "model": project.session.identity,
        "settings": {**project.preset.to_json(), **project.session.settings},
        "sample_rate": MODEL_SAMPLE_RATE,
        "program_seconds": None if project.program is None else round(project.program, 3),
        "format": project.options.fmt,
        "stems": parts.get("stems") or {},
        "mix": parts.get("mix"),
        **({"loudness": parts["loudness"], "delivery": parts["delivery"]} if parts else {}),
        "assembly": generation.record() if generation is not None else None,
        "voices": _voices(project),
        "notes": list(project.script.warnings) + [f"skipped: {s}" for s in project.script.skipped] + project.notes,
        "lines": [stamp(e) for e in project.entries],
    }
    return json.dumps(data, indent=2, ensure_ascii=False, allow_nan=False)  # NaN would not be JSON


def _voices(project) -> dict:
    """Per speaker: which sample, how it was prepared, and the prompt it gave."""
    record = {}
    for name, s in sorted(project.speakers.items()):
        record[name] = {
            "audio": str(s.voice.audio.resolve()) if s.voice.audio else None,
            "instruct": s.voice.instruct,
            "text": s.prompt.text if s.prompt else s.voice.text,
            "seconds": round(s.prompt.seconds, 3) if s.prompt else None,
            "prepared": s.prompt.note if s.prompt else None,
            "prompt_key": s.key,
            "file_name": project.names.get(name),
        }
    return record


class _Timecodes:
    """A line's record with SMPTE timecodes beside its start and ends, once the frame rate is known (a rate
    SMPTE timecode has no room for gets none, said once)."""

    def __init__(self, fps: float | None, note):
        self.fps, self.note = fps, note

    def __call__(self, entry: LineEntry) -> dict:
        record = entry.to_json()
        if not self.fps:
            return record
        from omnidub.outputs.timeline import timecode

        try:
            record["start_tc"], record["end_tc"] = timecode(entry.start, self.fps), timecode(entry.end, self.fps)
            if entry.rendered_end is not None:
                record["rendered_end_tc"] = timecode(entry.rendered_end, self.fps)
        except ValueError as exc:
            self.note(f"no timecodes in the manifest at {self.fps:g} fps: {exc}")
            self.fps = None
        return record
