"""Calibrate the QA voice threshold on real synthetic voices (Debian's flite and espeak-ng must be installed).

Every voice says the same lines and a longer reference of other words; each line is compared with every
voice's reference. Writes every similarity, with the machine and the versions that made it, as JSON;
`scripts/readme-figures` turns that file into the README's calibration tables.

Usage: python tools/calibrate_voice.py --json docs/qa/voice-calibration.json
"""

from __future__ import annotations

import argparse
import datetime
import importlib.metadata
import json
import platform
import re
import subprocess
import tempfile
from pathlib import Path

from omnidub.config import QaOptions
from omnidub.hardware import cpu_flags, cpu_name
from omnidub.media import load_audio
from omnidub.qa.results import QaSettings
from omnidub.qa.voice import EMBEDDING_RATE, SpeakerEncoder

VOICES = [("flite", v) for v in ("slt", "rms", "awb", "kal")] + [
    ("espeak-ng", v) for v in ("en-us", "en-us+f3", "en-gb-scotland+m3", "en-us+f5")
]
REFERENCE = (
    "Good morning, everyone. Thanks for coming in early. I know the traffic was terrible today, "
    "and the trains were late again."
)
LINES = [
    "Yes.",
    "No, thanks.",
    "Okay, let's go.",
    "So, are we still driving to the coast next week?",
    "Yes, as long as the car is back from the garage.",
    "Great. What time should we leave?",
    "Around nine, after the morning traffic.",
    "I'll pack some sandwiches and a flask of coffee.",
    "Perfect. Did you remember to book the hotel?",
    "Not yet. I wanted to compare the prices first.",
    "Okay, there's a small hotel right by the beach, with free parking and breakfast included.",
    "That sounds lovely. Let's book it tonight.",
    "Done. Two rooms, Friday and Saturday night.",
    "Great. I'll bring the map and the umbrellas.",
    "The quick brown fox jumps over the lazy dog near the riverbank.",
    "Honestly, I never thought the old bridge would survive another winter storm.",
]
THRESHOLDS = (0.0, 0.6, 0.65, 0.7, 0.72, 0.75, 0.78, 0.8, 0.85)


def speak(engine: str, voice: str, text: str, path: Path) -> None:
    if engine == "flite":
        subprocess.run(["flite", "-voice", voice, "-t", text, "-o", str(path)], check=True)
    else:
        subprocess.run(["espeak-ng", "-v", voice, "-w", str(path), text], check=True)


def _version(command: list[str]) -> str:
    """The version a synthesiser reports (its first line that names one)."""
    out = subprocess.run(command, capture_output=True, text=True).stdout
    found = re.search(r"flite-([\w.-]+)|eSpeak NG text-to-speech: ([\d.]+)", out)
    return next(v for v in found.groups() if v) if found else "?"


def measure() -> dict:
    """Every line of every voice against every voice's reference: cosine similarities, speech seconds."""
    encoder = SpeakerEncoder()
    names = [f"{engine}:{voice}" for engine, voice in VOICES]
    references, lines = {}, []
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "clip.wav"
        reference_seconds = {}
        for name, (engine, voice) in zip(names, VOICES):
            speak(engine, voice, REFERENCE, path)
            audio = load_audio(path, EMBEDDING_RATE)
            references[name] = encoder.embed(audio, EMBEDDING_RATE)[0]
            reference_seconds[name] = round(audio.size / EMBEDDING_RATE, 3)
        for name, (engine, voice) in zip(names, VOICES):
            for i, text in enumerate(LINES):
                speak(engine, voice, text, path)
                audio = load_audio(path, EMBEDDING_RATE)
                embedding, seconds = encoder.embed(audio, EMBEDDING_RATE)
                lines.append(
                    {
                        "voice": name,
                        "line": i,
                        "seconds": round(audio.size / EMBEDDING_RATE, 3),
                        "speech_seconds": round(seconds, 3),
                        "similarity": {ref: round(float(embedding @ references[ref]), 4) for ref in names},
                    }
                )
    import torch

    return {
        "generator": "tools/calibrate_voice.py",
        "date": datetime.date.today().isoformat(),
        "machine": {
            "cpu": cpu_name(),
            "cpu_flags": sorted(f for f in cpu_flags() if f.startswith(("avx", "amx"))),
            "python": platform.python_version(),
            "torch": torch.__version__,
            "resemblyzer": importlib.metadata.version("resemblyzer"),
            "flite": "flite " + _version(["flite", "--version"]),
            "espeak-ng": "espeak-ng " + _version(["espeak-ng", "--version"]),
        },
        "voices": names,
        "reference": REFERENCE,
        "reference_seconds": reference_seconds,
        "lines": LINES,
        "short_seconds": QaSettings().min_voice_seconds,
        "threshold": QaOptions().min_voice_similarity,
        "thresholds": list(THRESHOLDS),
        "measured": lines,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, required=True, help="Where to write the measurements.")
    args = parser.parse_args()
    data = measure()
    args.json.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(
        f"wrote {args.json}: {len(data['measured'])} lines of {len(data['voices'])} voices; "
        f"scripts/readme-figures turns it into the README's tables"
    )


if __name__ == "__main__":
    main()
