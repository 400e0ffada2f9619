"""Calibrate the QA voice threshold on real synthetic voices (Debian's flite and espeak-ng must be installed).

Every voice says the same sentences and a longer reference of other words. Prints the similarity of each line
to its own voice's reference and to every other voice's, and for each threshold how many lines in their own
voice would fail and how many lines in a voice the cast lacks would pass.
Usage: python tools/calibrate_voice.py [--json FILE]
"""

from __future__ import annotations

import argparse
import itertools
import json
import subprocess
import tempfile
from pathlib import Path

import numpy as np

from omnidub.qa.voice import EMBEDDING_RATE, SpeakerEncoder
from omnidub.voices import load_audio

VOICES = [("flite", v) for v in ("slt", "rms", "awb", "kal")] + [
    ("espeak-ng", v) for v in ("en-us", "en-us+f3", "en-gb-scotland+m3", "en-us+f5")
]
REFERENCE = ("Good morning, everyone. Thanks for coming in early. I know the traffic was terrible today, "
             "and the trains were late again.")
LINES = [
    "Yes.", "No, thanks.", "Okay, let's go.",
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
SHORT_SECONDS = 1.0  # QaSettings.min_voice_seconds


def speak(engine: str, voice: str, text: str, path: Path) -> None:
    if engine == "flite":
        subprocess.run(["flite", "-voice", voice, "-t", text, "-o", str(path)], check=True)
    else:
        subprocess.run(["espeak-ng", "-v", voice, "-w", str(path), text], check=True)


def spread(values) -> str:
    a = np.asarray(values)
    return (f"n={len(a)} min {a.min():.3f} p5 {np.percentile(a, 5):.3f} median {np.median(a):.3f} "
            f"p95 {np.percentile(a, 95):.3f} max {a.max():.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    encoder = SpeakerEncoder()
    names = [f"{engine}:{voice}" for engine, voice in VOICES]
    references, lines = {}, []  # lines: (voice, text index, speech seconds, embedding)
    with tempfile.TemporaryDirectory() as tmp:
        for name, (engine, voice) in zip(names, VOICES):
            path = Path(tmp) / "ref.wav"
            speak(engine, voice, REFERENCE, path)
            references[name] = encoder.embed_file(path)
            for i, text in enumerate(LINES):
                speak(engine, voice, text, path)
                embedding, seconds = encoder.embed(load_audio(path, EMBEDDING_RATE), EMBEDDING_RATE)
                lines.append((name, i, seconds, embedding))
    same = [float(e @ references[v]) for v, _, _, e in lines]
    other = [float(e @ references[r]) for v, _, _, e in lines for r in names if r != v]
    margin = [float(e @ references[v]) - max(float(e @ references[r]) for r in names if r != v) for v, _, _, e in lines]
    print(f"same voice, other words : {spread(same)}")
    print(f"other voices            : {spread(other)}")
    print(f"margin to nearest other : {spread(margin)}")
    for name, long in (("under", False), ("from", True)):
        picked = [float(e @ references[v]) for v, _, s, e in lines if (s >= SHORT_SECONDS) == long]
        print(f"same voice, {name} {SHORT_SECONDS:g} s of speech: {spread(picked)}")
    # Two-voice casts {a, b}: a's own lines must pass; a line of a third voice c, cast as a, must fail.
    table = []
    for threshold in THRESHOLDS:
        false_fail = own = missed = intruders = 0
        for a, b in itertools.permutations(names, 2):
            for voice, _, seconds, e in lines:
                sa, sb = float(e @ references[a]), float(e @ references[b])
                bar = threshold if seconds >= SHORT_SECONDS else 0.0
                fails = sa < bar or sa < sb
                if voice == a:
                    own, false_fail = own + 1, false_fail + fails
                elif voice != b:
                    intruders, missed = intruders + 1, missed + (not fails)
        table.append({"threshold": threshold, "false_fail": false_fail / own, "intruder_missed": missed / intruders})
        print(f"threshold {threshold:.2f}: own-voice lines failed {false_fail / own:6.1%}, "
              f"lines of a voice outside the cast passed {missed / intruders:6.1%}")
    if args.json:
        args.json.write_text(json.dumps({"same": same, "other": other, "margin": margin, "table": table}, indent=1))


if __name__ == "__main__":
    main()
