"""Measure cloning from the source on quick dialogue (tests/films.py make_dialogue: five voices in two similar
pairs, gaps of 0.02-0.15 s, two overlaps, an interrupted line, one-word replies), judged against the generator's
truth, per bed and per kind of original subtitles (labelled, unlabelled, none: heard with --asr-model).

Usage: python tools/measure_dialogue.py [--seeds 2] [--beds 6,16] [--asr-model PATH] [--json FILE]
       [--cast dialogue|accents] [--lines 14] [--quick 0.15]

--cast accents builds the films differently: one espeak-ng variant in two accents, flite's and festival's builds
of one speaker, and a third espeak-ng voice (tests/films.py ACCENT_CAST); --cast twins has one pair the speaker
model cannot tell apart (TWIN_CAST). Give them --lines 19 --quick 0.3 for an 80-second film of 22 lines.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import warnings
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))
sys.path.insert(0, str(HERE))

OWN = 2.0  # seconds: a line this long spoken by one voice alone should be cloned from its own clip


def judge_labelled(film, encoder) -> dict:
    from omnidub.script import read_script
    from omnidub.source import ExtractOptions, extract_voices, read_source

    audio = read_source(film.audio)
    found = extract_voices(
        audio, read_script(film.subs), encoder=encoder, asr=None, options=ExtractOptions(assess_lines=True)
    )
    return {
        "voices": len(found.chosen),
        "fallbacks": sum(bool(getattr(c, "fallback", "")) for c in found.chosen.values()),
        "unvoiced": sorted(found.missing),
        "holding_another": _impure(film, found, {s: s for s in film.truth["cast"]}),
        **_own_share(film, found),
    }


def judge_unlabelled(film, encoder) -> dict:
    from omnidub.script import read_script
    from omnidub.source import ExtractOptions, extract_voices, read_source

    audio = read_source(film.audio)
    found = extract_voices(
        audio, read_script(film.unlabelled), encoder=encoder, asr=None, options=ExtractOptions(assess_lines=True)
    )
    truth = {row["line"]: row["speaker"] for row in film.lines}
    groups = {g.index: g.speaker for g in found.analysis.grouping.lines}
    names = {}
    for group in set(groups.values()):
        voices = [truth[i] for i, s in groups.items() if s == group]
        names[group] = max(set(voices), key=voices.count)
    return {
        "voices": len(set(names.values())),
        "lines": len(truth),
        "right": sum(names[groups[i]] == truth[i] for i in truth),
        "wrong": sorted(i for i in truth if names[groups[i]] != truth[i]),
        "fallbacks": sum(bool(getattr(c, "fallback", "")) for c in found.chosen.values()),
        "unvoiced": sorted(found.missing),
        "holding_another": _impure(film, found, names),
    }


def judge_none(film, encoder, asr) -> dict:
    from measure_source import judge_heard

    row = judge_heard(film, encoder, asr)
    return {
        "voices": row["voices_found"],
        "lines": row["lines"],
        "right": row["lines"] - len(row["wrong"]),
        "wrong": row["wrong"],
        "holding_another": [f"clip {c['speaker']}" for c in row["clips"] if not c["pure"]] + row["two_voice_passed"],
        "own": row["own_line"],
        "own_of": row["long_single_voice"],
        "own_2s": row["own_line_2s"],
        "own_of_2s": row["long_single_voice_2s"],
    }


def _impure(film, found, names: dict) -> list:
    """Usable clips (speaker clips, fallbacks included, and own-line clips) holding 50 ms or more of a voice
    other than their speaker's."""
    bad = [f"clip {s}" for s, c in found.chosen.items() if film.clip_voices(c) - {names.get(s)}]
    bad += [
        c.index for c in found.line_clips.values() if c.problem is None and film.clip_voices(c) - {names.get(c.speaker)}
    ]
    return bad


def _own_share(film, found) -> dict:
    single = [
        row["line"]
        for row in film.lines
        if row["speech"][1] - row["speech"][0] >= OWN and film.speakers_in(*row["speech"]) == {row["speaker"]}
    ]
    return {"own": sum(found.line_clips[i].problem is None for i in single), "own_of": len(single)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument("--beds", default="6,16")
    parser.add_argument("--asr-model", help="hear the films without subtitles too")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--cast", choices=("dialogue", "accents", "twins"), default="dialogue")
    parser.add_argument("--lines", type=int, default=14, help="sentences per film (three one-word replies join them)")
    parser.add_argument("--quick", type=float, default=0.15, help="the longest gap of a quick turn, seconds")
    parser.add_argument("--first-seed", type=int, default=0)
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    from films import ACCENT_CAST, DIALOGUE_CAST, TWIN_CAST, make_dialogue

    from omnidub.asr import Asr
    from omnidub.embedding import source_encoder
    from omnidub.hardware import cpu_name

    encoder = source_encoder()
    asr = Asr(args.asr_model, "cpu") if args.asr_model else None
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for bed in (float(b) for b in args.beds.split(",")):
            for seed in range(args.first_seed, args.first_seed + args.seeds):
                film = make_dialogue(
                    Path(tmp) / f"{bed:g}-{seed}",
                    seed=seed,
                    bed_db=bed,
                    lines=args.lines,
                    cast={"accents": ACCENT_CAST, "twins": TWIN_CAST}.get(args.cast, DIALOGUE_CAST),
                    quick=args.quick,
                )
                row = {"bed_db": bed, "seed": seed, "cues": len(film.lines)}
                row["labelled"] = judge_labelled(film, encoder)
                row["unlabelled"] = judge_unlabelled(film, encoder)
                if asr is not None:
                    row["none"] = judge_none(film, encoder, asr)
                print(json.dumps(row), flush=True)
                rows.append(row)
    if args.json:
        args.json.write_text(
            json.dumps({"cpu": cpu_name(), "options": vars(args) | {"json": str(args.json)}, "films": rows}, indent=1)
            + "\n",
            encoding="utf-8",
        )


if __name__ == "__main__":
    main()
