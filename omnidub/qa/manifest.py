"""Reading what a render recorded (manifest.json), tolerant of the fields older versions wrote."""

from __future__ import annotations

import json
import math
from pathlib import Path

from omnidub.errors import OmnidubError


def read_manifest(out_dir: Path) -> dict:
    """The render manifest of an output folder, checked to hold a `lines` array."""
    path = Path(out_dir) / "manifest.json"
    if not path.is_file():
        raise OmnidubError(f"no manifest.json in {out_dir}; render into this folder first")
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise OmnidubError(f"cannot read {path}: {exc}") from exc
    if not isinstance(manifest, dict) or not isinstance(manifest.get("lines"), list):
        raise OmnidubError(f"{path} has no 'lines' array")
    return manifest


def manifest_references(manifest: dict, out_dir: Path) -> dict[str, Path]:
    """Each speaker's reference recording as the render recorded it (manifest `voices`: {speaker: {audio}})."""
    voices = manifest.get("voices")
    found = {}
    if isinstance(voices, dict):
        for speaker, voice in voices.items():
            audio = voice.get("audio") if isinstance(voice, dict) else None
            if isinstance(audio, str) and audio:
                found[str(speaker)] = Path(out_dir) / audio  # an absolute path stays as it is
    return found


def validate_entry(entry, position: int) -> None:
    if not isinstance(entry, dict) or not isinstance(entry.get("index"), int) or not isinstance(entry.get("text"), str):
        raise OmnidubError(f"manifest line {position}: needs an integer 'index' and a 'text' string")


def number(value, default: float = 0.0) -> float:
    """A finite number from a manifest field, else `default`."""
    try:
        found = float(value)
    except (TypeError, ValueError):
        return default
    return found if math.isfinite(found) else default


def threshold(value, name: str) -> float:
    found = number(value, default=-1.0)
    if found < 0:
        raise OmnidubError(f"{name} must be a number >= 0, got {value!r}")
    return found


def model_name(model) -> str | None:
    if isinstance(model, dict):
        name = model.get("id") or model.get("name")
        return str(name) if name else None
    return str(model) if model else None


def rendered_end(entry: dict, start: float, duration: float) -> float:
    """Where the rendered line ends on the programme: the manifest's `rendered_end`, else start + its length.
    (The manifest's `end` is its slot's end.)"""
    recorded = entry.get("rendered_end")
    if isinstance(recorded, (int, float)) and math.isfinite(recorded):
        return float(recorded)
    return start + duration
