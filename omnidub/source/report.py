"""What an extraction found, as the JSON written beside voices.toml, and voices.toml itself."""

from __future__ import annotations

import json
import re

from omnidub.folder import EXTRACT_RECORD
from omnidub.source.clips import Candidate
from omnidub.source.extract import Extraction
from omnidub.voices.cast import EXTRACTED

REPORT_NAME = EXTRACT_RECORD
VOICES_NAME = "voices.toml"
ACCOMPANIMENT_NAME = "accompaniment.flac"
MARK = "omnidub voices extract"
_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")


def candidate_json(candidate: Candidate) -> dict:
    data = {
        "lines": list(candidate.lines),
        "start": candidate.start,
        "end": candidate.end,
        "seconds": candidate.seconds,
        "text": candidate.text,
    }
    if candidate.scores is not None:
        s = candidate.scores
        data["scores"] = {
            "total": s.total,
            "similarity": s.similarity,
            "speech": s.speech,
            "level_db": s.level_db,
            "asr": s.asr,
        }
    if candidate.problem:
        data["problem"] = candidate.problem
    if candidate.note:
        data["note"] = candidate.note
    if candidate.fallback:
        data["fallback"] = candidate.fallback
    if candidate.parts:  # a joined clip: its pieces of the source, in the order they are heard
        data["parts"] = [list(p) for p in candidate.parts]
    return data


def report_json(
    extraction: Extraction,
    *,
    source: str,
    subs: str | None,
    clip_files: dict[str, str],
    top: int,
    asr: str | None,
    accompaniment: str | None,
    heard_file: str | None = None,
) -> dict:
    """The extraction as a JSON object: per speaker the chosen clip, the top usable candidates and the refused
    ones, the grouping of an unlabelled original with per-line confidence, the original as heard (a source
    without subtitles), and notes."""
    analysis = extraction.analysis
    speakers = []
    for speaker, found in extraction.candidates.items():
        usable = [c for c in found if c.problem is None]
        chosen = extraction.chosen.get(speaker)
        entry = {"speaker": speaker, "clip": None, "why_none": extraction.missing.get(speaker)}
        if chosen is not None:
            entry["clip"] = {"file": clip_files[speaker], **candidate_json(chosen)}
        entry["candidates"] = [candidate_json(c) for c in usable[:top]]
        entry["refused"] = [candidate_json(c) for c in found if c.problem is not None]
        speakers.append(entry)
    grouping = None
    if analysis.grouping is not None:
        lines = []
        for g in analysis.grouping.lines:
            line = analysis.lines[g.index]
            lines.append(
                {
                    "line": g.index,
                    "start": line.start,
                    "end": line.end,
                    "text": line.text,
                    "speaker": g.speaker,
                    "confidence": g.confidence,
                    "similarity": g.similarity,
                    "nearest": g.nearest,
                    "nearest_similarity": g.nearest_similarity,
                    **({"note": g.note} if g.note else {}),
                }
            )
        grouping = {"how": analysis.grouping.how, "speakers": list(analysis.grouping.speakers), "lines": lines}
    separation = None
    if extraction.separation is not None:
        separation = {
            "model": extraction.separation.model,
            "accompaniment": accompaniment,
            "sample_rate": extraction.separation.sample_rate,
        }
    return {
        "omnidub": MARK,
        "source": source,
        "subs": subs,
        "heard": None
        if extraction.heard is None
        else {
            "file": heard_file,
            "lines": len(analysis.original.lines),
            "language": extraction.heard.transcript.language,
            "asr": asr,
        },
        "seconds": round(analysis.audio.seconds, 3),
        "language": analysis.language,
        "asr": asr,
        "separation": separation,
        "notes": list(extraction.notes),
        "speakers": speakers,
        "grouping": grouping,
    }


def voices_toml(extraction: Extraction, clip_files: dict[str, str], *, source: str) -> str:
    """A voices.toml that ``omnidub render --voices`` reads as it is: one table per speaker with a clip."""
    rows = [
        f"{EXTRACTED} from {source}; {REPORT_NAME} lists other candidates per speaker.",
        "# reference_language is what the clips speak; the dub's language is render's --language, never this.",
    ]
    for speaker, chosen in extraction.chosen.items():
        key = speaker if _BARE_KEY.fullmatch(speaker) else json.dumps(speaker, ensure_ascii=False)
        rows += [
            "",
            f"[{key}]",
            f"audio = {json.dumps(clip_files[speaker], ensure_ascii=False)}",
            f"text = {json.dumps(chosen.text, ensure_ascii=False)}",
        ]
        if chosen.fallback:
            rows.insert(-3, f"# {speaker}: not a clean clip: {chosen.fallback}".replace("\n", " "))
        if extraction.analysis.language:
            rows.append(f"reference_language = {json.dumps(extraction.analysis.language)}")
    for speaker, why in extraction.missing.items():
        rows += ["", f"# {speaker}: no clip: {why}".replace("\n", " ")]
    return "\n".join(rows) + "\n"
