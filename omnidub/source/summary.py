"""What a render needs of an extraction, independent of the dub: each original line's speaker and own clip,
each speaker's chosen clip and voice (centroid), and the clips' samples. Small, and cached by the content of
everything it was made from, so a rerun (or a dub edited line by line) never analyses the source again.
"""

from __future__ import annotations

import io
import json
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import soundfile as sf

from omnidub.files import write_bytes_atomic, write_text_atomic
from omnidub.script import Script
from omnidub.source.audio import CLIP_RATE, wav_bytes
from omnidub.source.clips import clip_key
from omnidub.source.lines import NO_SPEECH, LineClip, samples_hash
from omnidub.source.speakers import VoiceCalibration

FORMAT = 3
HEARD_NAME = "original.srt"  # a source without subtitles: the original as heard, each line labelled


@dataclass(frozen=True)
class SpeakerClip:
    """A speaker's chosen clip: its span in the source, what it says, and the hash of its samples."""

    start: float
    end: float
    text: str
    sha256: str
    fallback: str | None = None  # not a clean clip: what it is and why (the lines voiced from it are reviewed)
    parts: tuple[tuple[float, float], ...] = ()  # a joined clip's pieces of the source (else start..end)


@dataclass(frozen=True, eq=False)
class SourceSummary:
    """An extraction reduced to what per-line references and the voice check need."""

    original: Script
    speakers: dict[int, str]  # original line -> speaker (its label, or its group in an unlabelled original)
    centroids: dict[str, np.ndarray]  # speaker -> its voice (GE2E), the identity every line is held to
    line_clips: dict[int, LineClip]  # original line -> its own clip (and why it cannot be used)
    speaker_clips: dict[str, SpeakerClip]
    hashes: dict[tuple, str]  # clip key (its span, or its parts when joined) -> hash of its samples (every usable clip)
    folder: Path | None  # where the clips' samples are (``clip_path``); None: held in memory only
    language: str | None
    notes: tuple[str, ...]
    accompaniment: Path | None = None  # the source without its voices, when it was separated
    calibration: dict[str, VoiceCalibration] = field(default_factory=dict)  # speaker -> how its voice is judged
    missing: dict[str, str] = field(default_factory=dict)  # speaker -> why the source gives it no clip
    heard: Path | None = None  # a source without subtitles: the original as heard, each line labelled (SRT)
    # original line nothing else may voice -> how like each voice's centroid its own speech is (cosine)
    likeness: dict[int, dict[str, float]] = field(default_factory=dict)
    # original line nothing else may voice -> its own speech's embedding (a voice the user gives is judged by it)
    own: dict[int, np.ndarray] = field(default_factory=dict)

    def clip_hash(self, start: float, end: float, parts=()) -> str:
        return self.hashes[clip_key(start, end, parts)]

    def clip_path(self, start: float, end: float, parts=()) -> Path:
        """The clip's samples as a WAV file (float32 at the clip rate): what a voice prompt is made from."""
        return self.folder / "clips" / f"{self.clip_hash(start, end, parts)}.wav"


def summarize(extraction, folder: Path | None = None) -> SourceSummary:
    """Reduce an extraction to its summary, writing every usable clip's samples into ``folder`` (when given)."""
    analysis = extraction.analysis
    clips = [c for c in extraction.line_clips.values() if c.problem is None]
    clips += list(extraction.chosen.values())
    # A line no voice of the source may stand in for keeps its own speech (1 s or more), refused as it is: an editor
    # who heard it may voice it from that speech (``cast.voice_choices``).
    clips += [c for c in extraction.line_clips.values() if _voiceless(c, extraction.chosen)]
    likeness, owns = {}, {}  # for the editor choosing a voice for a line nothing else may voice: the most like first
    for c in extraction.line_clips.values():
        own = analysis.embeddings.get(c.index) if _unvoiced(c, extraction.chosen) else None
        if own is not None:
            likeness[c.index] = {name: round(_cosine(own, v), 3) for name, v in analysis.centroids.items()}
            owns[c.index] = np.asarray(own, dtype=np.float32)
    hashes = {}
    if folder is not None:
        (folder / "clips").mkdir(parents=True, exist_ok=True)
    for c in clips:
        span = clip_key(c.start, c.end, c.parts)
        if span in hashes:
            continue
        samples = extraction.clip(c.start, c.end, c.parts)
        hashes[span] = samples_hash(samples, CLIP_RATE)
        path = folder / "clips" / f"{hashes[span]}.wav" if folder is not None else None
        if path is not None and not path.is_file():  # no write time in it: the same clip is always the same bytes
            write_bytes_atomic(path, wav_bytes(samples, CLIP_RATE, subtype="FLOAT"))
    speaker_clips = {
        name: SpeakerClip(
            c.start, c.end, c.text, hashes[clip_key(c.start, c.end, c.parts)], c.fallback or None, c.parts
        )
        for name, c in extraction.chosen.items()
    }
    accompaniment = None
    if extraction.separation is not None and folder is not None:
        accompaniment = folder / "accompaniment.flac"
        if not accompaniment.is_file():
            separation = extraction.separation
            write_bytes_atomic(
                accompaniment, wav_bytes(separation.accompaniment, separation.sample_rate, format="FLAC")
            )
    heard = None
    if extraction.heard is not None and folder is not None:
        from omnidub.source.heard import labelled_srt

        heard = folder / HEARD_NAME
        write_text_atomic(heard, labelled_srt(analysis.original, analysis.speakers))
    return SourceSummary(
        analysis.original,
        dict(analysis.speakers),
        dict(analysis.centroids),
        dict(extraction.line_clips),
        speaker_clips,
        hashes,
        folder,
        analysis.language,
        tuple(extraction.notes),
        accompaniment,
        dict(analysis.calibration),
        dict(extraction.missing),
        heard,
        likeness,
        owns,
    )


def likeness_to(summary: SourceSummary, index: int, embedding: np.ndarray) -> float | None:
    """How like ``embedding`` (a voice the user gave) the own speech of original line ``index`` is (cosine), when
    it is a line nothing else may voice whose speech was long enough to embed; else None."""
    own = summary.own.get(index)
    return None if own is None else round(_cosine(own, embedding), 3)


def _cosine(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.dot(a, b) / max(float(np.linalg.norm(a) * np.linalg.norm(b)), 1e-12))


def _unvoiced(clip: LineClip, chosen: dict) -> bool:
    """Whether a refused line clip holds speech of a line nothing else may voice: its voice unsure, or its speaker
    given no clip."""
    return clip.problem not in (None, NO_SPEECH) and (bool(clip.voiceless) or clip.speaker not in chosen)


def _voiceless(clip: LineClip, chosen: dict) -> bool:
    """:func:`_unvoiced`, and its speech long enough to be a reference."""
    from omnidub.voices.reference import MIN_REFERENCE_SECONDS

    return _unvoiced(clip, chosen) and clip.speech_seconds >= MIN_REFERENCE_SECONDS


def save(summary: SourceSummary) -> None:
    """Keep the summary beside its clips (the clips are already there)."""
    data = {
        "format": FORMAT,
        "key": summary.folder.name,  # the analysis key it was made for: a folder renamed or swapped is not trusted
        "speakers": {str(k): v for k, v in summary.speakers.items()},
        "line_clips": [
            {
                "index": c.index,
                "speaker": c.speaker,
                "start": c.start,
                "end": c.end,
                "text": c.text,
                "problem": c.problem,
                "note": c.note,
                "parts": [list(p) for p in c.parts],
                "review": c.review,
                "voiceless": c.voiceless,
            }
            for c in summary.line_clips.values()
        ],
        "speaker_clips": {name: vars(c) for name, c in summary.speaker_clips.items()},
        # A clip's span [start, end, hash], or a joined clip's [[[start, end], ...], hash].
        "hashes": [[*key, sha] if not isinstance(key[0], tuple) else [key, sha] for key, sha in summary.hashes.items()],
        "language": summary.language,
        "notes": list(summary.notes),
        "accompaniment": summary.accompaniment.name if summary.accompaniment else None,
        "calibration": {name: vars(c) for name, c in summary.calibration.items()},
        "missing": summary.missing,
        "likeness": {str(k): v for k, v in summary.likeness.items()},
    }
    if summary.heard is not None:  # the lines were cut from what was heard: no subtitle file holds them
        data["original"] = [
            [line.index, line.text, line.start, line.end, line.language, line.where] for line in summary.original.lines
        ]
    owns = {str(k): v for k, v in summary.own.items()}
    for name, arrays in (("centroids.npz", summary.centroids), ("own.npz", owns)):
        if arrays:
            buffer = io.BytesIO()
            np.savez(buffer, **arrays)
            write_bytes_atomic(summary.folder / name, buffer.getvalue())
    write_text_atomic(summary.folder / "summary.json", json.dumps(data, indent=1, ensure_ascii=False))


def load(folder: Path, original: Script | None) -> SourceSummary | None:
    """The summary kept in ``folder`` (None when there is none, or any clip of it is missing or changed).
    ``original`` None: a source analysed without subtitles, whose lines (as heard) the summary keeps."""
    try:
        data = json.loads((folder / "summary.json").read_text(encoding="utf-8"))
        if data.get("format") != FORMAT or data.get("key") != folder.name:
            return None
        heard = None
        if original is None:
            heard = folder / HEARD_NAME
            if not heard.is_file():
                return None
            from omnidub.source.heard import heard_line

            original = Script(
                tuple(
                    heard_line(int(k), str(text), float(a), float(b), language, str(where))
                    for k, text, a, b, language, where in data["original"]
                ),
                (),
                (),
                True,
            )
        centroids = {}
        if (folder / "centroids.npz").is_file():
            with np.load(folder / "centroids.npz") as stored:
                centroids = {name: np.array(stored[name]) for name in stored.files}
        hashes = {
            clip_key(*row[:2]) if len(row) == 3 else clip_key(None, None, row[0]): row[-1] for row in data["hashes"]
        }
        for sha in set(hashes.values()):
            samples, _ = sf.read(str(folder / "clips" / f"{sha}.wav"), dtype="float32")
            if samples_hash(samples, CLIP_RATE) != sha:
                return None
        line_clips = {
            c["index"]: LineClip(
                c["index"],
                c["speaker"],
                c["start"],
                c["end"],
                c["text"],
                c["problem"],
                c.get("note", ""),
                tuple(tuple(p) for p in c.get("parts", ())),
                c.get("review", ""),
                c.get("voiceless", ""),
            )
            for c in data["line_clips"]
        }
        speaker_clips = {
            name: SpeakerClip(**{**c, "parts": tuple(tuple(p) for p in c.get("parts", ()))})
            for name, c in data["speaker_clips"].items()
        }
        calibration = {name: VoiceCalibration(**c) for name, c in data["calibration"].items()}
        missing = {str(k): str(v) for k, v in data["missing"].items()}
        likeness = {int(k): {str(name): float(x) for name, x in v.items()} for k, v in data.get("likeness", {}).items()}
        owns = {}
        if (folder / "own.npz").is_file():
            with np.load(folder / "own.npz") as stored:
                owns = {int(k): np.array(stored[k]) for k in stored.files}
    except (OSError, ValueError, KeyError, TypeError, RuntimeError, zipfile.BadZipFile):
        return None
    accompaniment = folder / data["accompaniment"] if data.get("accompaniment") else None
    if accompaniment is not None and not accompaniment.is_file():
        return None  # analysed again, and the accompaniment written again
    return SourceSummary(
        original,
        {int(k): v for k, v in data["speakers"].items()},
        centroids,
        line_clips,
        speaker_clips,
        hashes,
        folder,
        data.get("language"),
        tuple(data.get("notes", [])),
        accompaniment,
        calibration,
        missing,
        heard,
        likeness,
        owns,
    )
