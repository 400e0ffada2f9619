"""Measure what the review offers each line `omnidub dub` leaves without a voice on the scenes of
tools/measure_scene.py (a telephone voice, a stairwell, a whisperer, back-channels, a jazz bed), judged against the
generator's truth: whether the line's true voice is among the voices offered (`source.cast.voice_choices`), at
which place (the voices most like the line's own speech first, or the voice it was grouped with first where it was
too short to embed), and, where its own speech is offered, whose speech that holds.

Usage: python tools/measure_choices.py --asr-model DIR [--seeds 5] [--languages en,es] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import warnings
from dataclasses import replace
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))
sys.path.insert(0, str(HERE))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--asr-model", required=True, help="a multilingual faster-whisper folder (tools/whisper_base.py)"
    )
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--languages", default="en,es")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    from measure_scene import group_names, parts_of, row_of, voices_in
    from scenes import make_scene

    from omnidub.asr import Asr
    from omnidub.embedding import source_encoder
    from omnidub.hardware import cpu_name
    from omnidub.source import ExtractOptions, extract_voices, read_source
    from omnidub.source.analysis import NO_WORDS
    from omnidub.source.cast import source_cast, voice_choices
    from omnidub.source.heard import hear_source
    from omnidub.source.summary import summarize

    encoder, asr, rows = source_encoder(), Asr(args.asr_model, "cpu"), []
    with tempfile.TemporaryDirectory() as tmp:
        for language in args.languages.split(","):
            for seed in range(args.seeds):
                film = make_scene(Path(tmp) / f"{language}-{seed}", seed=seed, language=language, bed_db=8.0)
                audio = read_source(film.audio)
                heard = hear_source(audio, asr, source=film.audio, language=language)
                extraction = extract_voices(
                    audio,
                    heard.original,
                    encoder=encoder,
                    asr=asr,
                    options=ExtractOptions(assess_lines=True),
                    heard=heard,
                )
                names = group_names(film, extraction.analysis)  # group -> the voice it mostly is
                spoken = extraction.analysis.original  # omnidub dub's lines: the lines heard with words
                spoken = replace(spoken, lines=tuple(line for line in spoken.lines if line.text != NO_WORDS))
                summary = summarize(extraction, Path(tmp) / f"kept-{language}-{seed}")
                for index, reference in sorted(source_cast(summary, spoken, "line", {}).references.items()):
                    if reference.kind != "none":
                        continue
                    line = next(item for item in spoken.lines if item.index == index)
                    true = row_of(film, line)["speaker"]
                    choices = voice_choices(reference, summary)
                    offered = [names.get(c["speaker"]) for c in choices if c["voice"] == "speaker"]
                    own = None
                    if any(c["voice"] == "line" for c in choices):
                        clip = summary.line_clips[reference.original[0]]
                        own = {voice: round(s, 2) for voice, s in voices_in(film, parts_of(clip)).items()}
                    row = {
                        "language": language,
                        "seed": seed,
                        "line": index,
                        "true": true,
                        "grouped": names.get(reference.speaker),
                        "offered": offered,
                        "place": offered.index(true) if true in offered else None,
                        "embedded": reference.original[0] in summary.likeness,
                        "own": own,
                    }
                    print(json.dumps(row), flush=True)
                    rows.append(row)
    placed = [r["place"] for r in rows]
    owned = [r for r in rows if r["own"] is not None]
    print(
        f"lines left without a voice {len(rows)}; true voice offered {sum(p is not None for p in placed)}, first "
        f"{sum(p == 0 for p in placed)}, in the first two {sum(p is not None and p < 2 for p in placed)}; own speech "
        f"offered {len(owned)}, of it holding only its voice (0.1 s of another at most) "
        f"{sum(all(s <= 0.1 for v, s in r['own'].items() if v != r['true']) for r in owned)}"
    )
    if args.json:
        args.json.write_text(
            json.dumps({"cpu": cpu_name(), "options": vars(args) | {"json": str(args.json)}, "lines": rows}, indent=1)
            + "\n",
            encoding="utf-8",
        )


if __name__ == "__main__":
    main()
