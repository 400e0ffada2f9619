"""Measure cloning from the source on scenes built differently from the tests' films (tests/scenes.py: a telephone
voice, one in a stairwell, a whisperer 10 dB under, back-channels over the other voice, full-level overlaps, a
dialogue-dash cue of two voices, laughter and a cough inside lines, a jazz bed), judged against the generator's
truth per dubbed line: the reference each line of the dub (the scene's own cues) is cloned from, with labelled
subtitles, unlabelled ones, and none (heard with --asr-model; the Spanish scenes only with a multilingual one).

Per condition: every character voiced (no line of it left without a reference), voices found, lines grouped right,
references holding more than 0.1 s of another voice (and the seconds), references that are another character
altogether (the voice most heard in them), the own-line share of lines of 2 s or more (the reference holds 1 s or
more of the line's own speech and nothing of another voice), lines flagged for review. Without subtitles a line
dubbed is a line heard, often a piece of the scene's line: the JSON also counts the lines dubbed that hold 2 s or more
of their scene line's speech themselves (`long_here`, `own_long_here`), and the scene's lines not dubbed (`missed`:
under half of their speech inside any line dubbed).

Usage: python tools/measure_scene.py [--seeds 2] [--languages en,es] [--asr-model PATH] [--cast other] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import warnings
from dataclasses import replace
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))
sys.path.insert(0, str(HERE))

OWN = 2.0  # seconds of speech: a line this long should be cloned from its own speech
OTHER = 0.1  # seconds of another voice that make a reference hold it
MISSED = 0.5  # a scene line with less of its speech than this inside the dub's lines is not dubbed
# Without subtitles: "none" groups the lines as heard and dubs the scene's cues, "cues" cuts the lines heard at those
# cues (render --source of a timed script without --source-subs), "dub" dubs the lines heard themselves, each judged
# by the scene's line it shares most time with (omnidub dub; needs "none").
CONDITIONS = ("labelled", "unlabelled", "none", "cues", "dub")


def parts_of(reference) -> tuple[tuple[float, float], ...]:
    parts = getattr(reference, "parts", None)
    return tuple(parts) if parts else ((reference.start, reference.end),)


def voices_in(film, parts) -> dict[str, float]:
    """Seconds of each true voice inside the parts."""
    found = {}
    for a, b in parts:
        for t in film.truth["speech"]:
            shared = min(t["end"], b) - max(t["start"], a)
            if shared > 0:
                found[t["speaker"]] = found.get(t["speaker"], 0.0) + shared
    return found


def row_of(film, line) -> dict:
    """The scene's line a dubbed line is (its words and its cue's time)."""

    def shared(row):
        return min(row["cue"][1], line.end) - max(row["cue"][0], line.start)

    same = [row for row in film.lines if row["said"].strip() == line.text.strip()]
    return max(same or film.lines, key=shared)


def judge(film, extraction, dub, names: dict[str, str] | None) -> dict:
    """Each dubbed line's reference against the truth; ``names``: group -> the voice it mostly is (None: labels)."""
    lines = []
    for reference in extraction.references(dub):
        line = next(item for item in dub.lines if item.index == reference.index)
        row = row_of(film, line)
        true = row["speaker"]
        given = reference.speaker if names is None else names.get(reference.speaker)
        entry = {
            "line": line.index,
            "speaker": true,
            "given": given,
            "kind": reference.kind,
            "review": bool(reference.review),
            "why": reference.fallback or "",
        }
        if reference.kind != "none":
            inside = voices_in(film, parts_of(reference))
            other = sum(s for v, s in inside.items() if v != true)
            own = sum(max(0.0, min(b, row["speech"][1]) - max(a, row["speech"][0])) for a, b in parts_of(reference))
            entry.update(
                other=round(other, 2),
                voice=max(inside, key=inside.get) if inside else None,
                own=round(own, 2),
                seconds=round(sum(b - a for a, b in parts_of(reference)), 2),
                parts=[[round(a, 3), round(b, 3)] for a, b in parts_of(reference)],
            )
        entry["long"] = row["speech"][1] - row["speech"][0] >= OWN
        # Without subtitles the line dubbed is a line heard, often a piece of the scene's line: its own length is the
        # scene line's speech inside it.
        entry["long_here"] = min(line.end, row["speech"][1]) - max(line.start, row["speech"][0]) >= OWN
        lines.append(entry)
    cast = film.truth["cast"]
    voiced = [c for c in cast if any(e["kind"] != "none" for e in lines if e["speaker"] == c)]
    long = [e for e in lines if e["long"]]
    return {
        "lines": len(lines),
        "voiced": len(voiced),
        "unvoiced": [c for c in cast if c not in voiced],
        "unrendered": [e["line"] for e in lines if e["kind"] == "none"],
        "right": sum(e["given"] == e["speaker"] for e in lines),
        "holding_other": [e["line"] for e in lines if e.get("other", 0) > OTHER],
        "other_seconds": round(sum(e.get("other", 0) for e in lines if e.get("other", 0) > OTHER), 2),
        "another_character": [e["line"] for e in lines if e.get("voice") not in (None, e["speaker"])],
        "long": len(long),
        "own_long": sum(_own(e) for e in long),
        "long_here": sum(e["long_here"] for e in lines),
        "own_long_here": sum(_own(e) for e in lines if e["long_here"]),
        "review": sum(e["review"] for e in lines),
        "per_line": lines,
    }


def missed(film, dub) -> list[int]:
    """The scene's lines not dubbed: under MISSED of their speech inside any line of the dub (a line heard with no
    words is not dubbed)."""

    def inside(row) -> float:
        a, b = row["speech"]
        return sum(max(0.0, min(b, line.end) - max(a, line.start)) for line in dub.lines) / (b - a)

    return [row["line"] for row in film.lines if inside(row) < MISSED]


def _own(entry: dict) -> bool:
    """Whether a line's reference holds 1 s or more of its own speech and nothing of another voice."""
    return entry.get("own", 0) >= 1.0 and entry.get("other", 0) <= OTHER


def group_names(film, analysis) -> dict[str, str]:
    """Each group found -> the voice most of its lines truly are: a cue's line is its speaker's (a back-channel's
    cue is the back-channel's voice, not the sentence's it is spoken over), a line heard the voice that speaks most
    in it; a tie goes to the voice with more speech in the group's lines."""
    said = {row["said"].strip(): row["speaker"] for row in film.lines}
    votes, seconds = {}, {}
    for line in analysis.original.lines:
        voice = said.get(line.text.strip()) or film.voice_in(line.start, line.end)
        if voice:
            group = analysis.speakers[line.index]
            votes.setdefault(group, {}).setdefault(voice, 0)
            votes[group][voice] += 1
            seconds[group, voice] = seconds.get((group, voice), 0.0) + line.end - line.start
    return {g: max(v, key=lambda voice, g=g, v=v: (v[voice], seconds[g, voice])) for g, v in votes.items()}


def measure(film, encoder, asr, conditions=CONDITIONS) -> dict:
    from omnidub.script import read_script
    from omnidub.source import ExtractOptions, extract_voices, read_source

    audio = read_source(film.audio)
    result = {}
    if "labelled" in conditions:
        result["labelled"] = _labelled(film, audio, encoder)
    if "unlabelled" in conditions:
        result["unlabelled"] = _unlabelled(film, audio, encoder)
    language = film.truth.get("language", "en")
    if asr is not None and asr.hears(language):
        from omnidub.source.heard import at_cues, hear_source, heard_in_cues

        heard = hear_source(audio, asr, source=film.audio, language=language)
        dub = read_script(film.unlabelled)
        cued = heard_in_cues(at_cues(heard, dub), dub, audio, asr, language) if "cues" in conditions else None
        for condition, lines in (("none", heard), ("cues", cued)):
            if condition not in conditions:
                continue
            none = extract_voices(
                audio, lines.original, encoder=encoder, asr=asr, options=ExtractOptions(assess_lines=True), heard=lines
            )
            names = group_names(film, none.analysis)
            result[condition] = judge(film, none, dub, names)
            result[condition]["voices_found"] = len(set(names.values()))
            heard_lines = [(line, none.analysis.speakers[line.index]) for line in none.analysis.original.lines]
            result[condition]["heard_lines"] = len(heard_lines)
            result[condition]["heard_right"] = sum(
                names.get(group) == film.voice_in(line.start, line.end) for line, group in heard_lines
            )
            if condition == "none" and "dub" in conditions:  # omnidub dub: the dub's lines are the lines heard
                # with words (a line no word of which was heard is not dubbed: the run names it)
                from omnidub.source.analysis import NO_WORDS

                spoken = none.analysis.original
                spoken = replace(spoken, lines=tuple(line for line in spoken.lines if line.text != NO_WORDS))
                result["dub"] = judge(film, none, spoken, names)
                result["dub"]["voices_found"] = result[condition]["voices_found"]
                result["dub"]["wordless"] = len(none.analysis.original.lines) - len(spoken.lines)
                result["dub"]["missed"] = missed(film, spoken)
    return result


def _labelled(film, audio, encoder) -> dict:
    from omnidub.script import read_script
    from omnidub.source import ExtractOptions, extract_voices

    labelled = extract_voices(
        audio, read_script(film.subs), encoder=encoder, asr=None, options=ExtractOptions(assess_lines=True)
    )
    return judge(film, labelled, read_script(film.subs), None)


def _unlabelled(film, audio, encoder) -> dict:
    from omnidub.script import read_script
    from omnidub.source import ExtractOptions, extract_voices

    unlabelled = extract_voices(
        audio, read_script(film.unlabelled), encoder=encoder, asr=None, options=ExtractOptions(assess_lines=True)
    )
    names = group_names(film, unlabelled.analysis)
    result = judge(film, unlabelled, read_script(film.unlabelled), names)
    result["voices_found"] = len(set(names.values()))
    result["grouping"] = unlabelled.analysis.grouping.how
    return result


def table(rows: list[dict], heard_by: str = "tiny.en") -> str:
    """The figures per language and kind of subtitles, summed over the scenes, as a Markdown table (``heard_by``:
    the ASR model's name, for the rows without subtitles)."""
    out = [
        "| scenes | subtitles | characters voiced | lines grouped right | references holding another voice (s) | "
        "references of another character | own speech, lines of 2 s+ | lines left unrendered | lines flagged |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for language in dict.fromkeys(row["language"] for row in rows):
        mine = [row for row in rows if row["language"] == language]
        for condition, name in (
            ("labelled", "labelled"),
            ("unlabelled", "unlabelled"),
            ("none", f"none ({heard_by}), lines as heard"),
            ("cues", f"none ({heard_by}), at the dub's cues"),
            ("dub", f"none ({heard_by}), the lines heard dubbed (omnidub dub)"),
        ):
            found = [row[condition] for row in mine if condition in row]
            if not found:
                continue
            cast = 6 * len(found)

            def total(key, found=found):
                return sum(len(f[key]) if isinstance(f[key], list) else f[key] for f in found)

            right = "by label" if condition == "labelled" else f"{total('right')}/{total('lines')}"
            own = f"{total('own_long')}/{total('long')}"
            if condition == "dub" and all("long_here" in f for f in found):
                own += f" ({total('own_long_here')}/{total('long_here')} by the line dubbed)"
            if condition == "dub" and all("missed" in f for f in found):
                right += f" ({total('missed')} of the scenes' lines not dubbed)"
            if condition in ("none", "cues"):
                right += f" ({sum(f['heard_right'] for f in found)}/{sum(f['heard_lines'] for f in found)} heard)"
            out.append(
                f"| {language} ×{len(found)} | {name} | {total('voiced')}/{cast} | {right} | "
                f"{total('holding_other')} ({total('other_seconds'):.1f} s) | {total('another_character')} | "
                f"{own} | {total('unrendered')} | {total('review')} |"
            )
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--languages", help="default: en,es (the held-out cast: en, its only language)")
    parser.add_argument("--bed", type=float, default=8.0)
    parser.add_argument(
        "--asr-model", help="hear the scenes without subtitles too (the Spanish ones only with a multilingual model)"
    )
    parser.add_argument("--conditions", default=",".join(CONDITIONS), help="of " + ", ".join(CONDITIONS))
    parser.add_argument(
        "--cast",
        default="scene",
        choices=("scene", "other"),
        help="other: the held-out cast (English only; SVOX Pico, mbrola, RHVoice: Debian non-free voices)",
    )
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    if args.cast == "other" and args.languages not in (None, "en"):
        parser.error("the held-out cast speaks English only (--languages en)")
    args.languages = args.languages or ("en" if args.cast == "other" else "en,es")
    warnings.simplefilter("ignore")
    from scenes import make_scene

    from omnidub.asr import Asr
    from omnidub.embedding import source_encoder
    from omnidub.hardware import cpu_name

    encoder = source_encoder()
    asr = Asr(args.asr_model, "cpu") if args.asr_model else None
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for language in args.languages.split(","):
            for seed in range(args.first_seed, args.first_seed + args.seeds):
                film = make_scene(
                    Path(tmp) / f"{language}-{seed}", seed=seed, language=language, bed_db=args.bed, cast=args.cast
                )
                found = measure(film, encoder, asr, args.conditions.split(","))
                name = language if args.cast == "scene" else f"{language}-{args.cast}"
                row = {"language": name, "seed": seed, "load": os.getloadavg()[0], **found}
                brief = {
                    k: {
                        m: v[m]
                        for m in (
                            "voiced",
                            "right",
                            "lines",
                            "holding_other",
                            "other_seconds",
                            "another_character",
                            "own_long",
                            "long",
                            "own_long_here",
                            "long_here",
                            "review",
                            "unrendered",
                        )
                    }
                    for k, v in row.items()
                    if isinstance(v, dict)
                }
                print(json.dumps({"language": name, "seed": seed, **brief}, default=float), flush=True)
                rows.append(row)
    print(table(rows, Path(asr.name).name if asr is not None else "tiny.en"))
    if args.json:
        args.json.write_text(
            json.dumps(
                {"cpu": cpu_name(), "options": vars(args) | {"json": str(args.json)}, "scenes": rows},
                indent=1,
                default=float,
            )
            + "\n",
            encoding="utf-8",
        )


if __name__ == "__main__":
    main()
