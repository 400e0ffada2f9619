"""What the review page shows of a held project: each line's view (its record, verdict, takes, waveform, what QA
heard, its own original, its translation's checks), the files it may play, and the folder's view. Read by the
desk's worker after each action and published; no route reads the project."""

from __future__ import annotations

import math

from omnidub.folder import QA_FILES
from omnidub.records import LineEntry, QaRecord
from omnidub.remedies import Fitting
from omnidub.script import Line
from omnidub.takes import TIMING_FLAGS, current, takes_of
from omnidub.timing import Fit

WAVE_BINS = 96  # bars in a line's waveform on the page


class Views:
    """The page's view of one held project, with what it reads once (waveforms by audio, qa.json's transcripts,
    the source's original lines)."""

    def __init__(self, project, editor):
        self.project, self.editor = project, editor
        self._waves: dict[str, dict] = {}  # each segment's waveform, by the audio's hash
        self._heard: tuple[int, dict] | None = None  # qa.json's transcripts and word diffs by audio hash
        self._originals = None  # (the source's summary, its original lines by index)

    def folder(self) -> dict:
        """The folder's own view: title, input, programme, speakers, whether it has a source, the preset's speed
        cap, the frame rate, the mix's file (while it is the lines as they stand) and its gains, and the lines left
        unrendered for want of a voice."""
        project = self.project
        return {
            "title": project.out_dir.name,
            "input": project.input_path.name,
            "program_seconds": round(project.program or 0.0, 3),
            "speakers": sorted(project.speakers),
            "source": project.cast is not None,
            "max_speedup": project.preset.timing.max_speedup,
            "timed": project.script.timed,  # an untimed script's lines have no slot to move
            "fps": project.probed.fps,  # the frames a slot's edges snap to: the video's, --fps, else 25
            "mix_file": self.listed(self._mix_file()),
            "mix_gains": self._mix_gains(),
            # The lines the source could give no voice that is surely their own: not rendered, so in no row.
            "unvoiced": project.casting.left_json() if project.casting is not None else [],
        }

    def _mix_gains(self) -> tuple[float, float | None]:
        """The gains (dB) the last assembly gave the dub and the mix over the bed (None without one): what the
        programme heard before a delivery is given, so that it plays at the delivered mix's level."""
        generation = self.project.generation
        loudness = (generation.parts.get("loudness") or {}) if generation is not None else {}
        dub, bed = loudness.get("mix") or {}, loudness.get("bed_mix") or {}
        return float(dub.get("gain") or 0.0), float(bed["gain"]) if bed.get("gain") is not None else None

    def line(self, entry: LineEntry) -> tuple[dict, dict, tuple[float, float] | None]:
        """The line's view, the files it may play ("line", "original", "takes") and its own span of the source."""
        project = self.project
        takes = takes_of(entry)
        now = current(entry)
        verdict = (now.verdict if now else None) or "unchecked"
        reasons = list(now.reasons) if now else []
        if now is not None and not now.judged and not reasons:
            reasons = ["not checked yet: QA hears every take rendered here (omnidub qa checks them all)"]
        elif not entry.done:
            reasons = [f"without audio: {project.missing(entry)}"]
        edit = entry.edit or {}
        reference = entry.reference or {}
        heard = self._heard_in().get(entry.sha256 or "") if entry.done else None
        own = self._own_original(entry)
        view = {
            "index": entry.index,
            "speaker": entry.speaker,
            "input_speaker": project.input_speaker(entry.index),
            "text": entry.text,
            "input_text": edit.get("from", entry.text),
            "language": entry.language,
            "start": entry.start,
            "end": entry.end,
            "input_slot": list(edit.get("at") or (entry.start, entry.end)),  # before a move in review
            "slot": entry.slot,
            "target": entry.target,
            "duration": entry.duration,
            "status": entry.status,
            "flags": list(entry.flags),
            "approved": entry.approved,
            "verdict": verdict,
            "severity": now.severity if now else None,
            # The timing checks its take failed (a retake keeps its length: the page offers to fix its timing).
            "timing_failures": sorted(TIMING_FLAGS.intersection(now.flags)) if now and now.verdict == "failed" else [],
            "reasons": reasons,
            "error_rate": now.error_rate if now else None,
            "voice_similarity": now.voice_similarity if now else None,
            "key": entry.key if entry.done else None,  # what an approval names: the audio the editor heard
            "missing": project.missing(entry),
            "audio": f"/media/line/{entry.index}?v={entry.sha256[:16]}" if entry.done and entry.sha256 else None,
            "waveform": self._waveform(entry),
            "original": f"/media/original/{entry.index}" if reference.get("file") else None,
            "reference": {k: reference.get(k) for k in ("kind", "text", "fallback", "start", "end")}
            if reference
            else None,
            "max_speedup": edit.get("max_speedup"),
            "borrow": bool(edit.get("borrow")),
            "voice": edit.get("voice"),
            "takes": [
                {
                    "number": n,
                    "seed": t.seed,
                    "duration": t.duration,
                    "text": t.text,
                    "verdict": t.verdict or "unchecked",
                    "reasons": list(t.reasons),
                    "chosen": t.key == entry.key and entry.done,
                    "audio": f"/media/take/{entry.index}/{n}?v={(t.sha256 or '')[:16]}",
                }
                for n, t in enumerate(takes, 1)
            ],
            "note": entry.note,
            "look_again": entry.look_again,
            "heard": heard["transcript"] if heard else None,
            "diff": heard["diff"] if heard else None,
            "original_text": own[2] if own else None,
            "own_original": f"/own-original/{entry.index}" if own else None,
            "own_start": own[0] if own else None,  # where the own original starts in the programme (the picture)
            # Its original's words were heard only when their stretch of speech was heard again alone (a dub
            # translated them): worth hearing against what was translated.
            "original_heard_again": bool(own and own[3]),
            "voice_from": _voice_from(reference),
            **self._translation(entry),
        }
        return view, self._files(entry, takes), (own[0], own[1]) if own else None

    def fitting(self, entry: LineEntry) -> Fitting | None:
        """What the line's timing is predicted from (see :mod:`omnidub.remedies`), with the candidates omnidub
        translate offers for it; None in an untimed script (its lines are laid out at their natural length)."""
        project = self.project
        if not project.script.timed:
            return None
        found, _ = project.translated(entry)
        edit = entry.edit or {}
        return Fitting(
            Line(entry.index, entry.speaker, entry.text, entry.start, entry.end, entry.language),
            entry.limit_at,
            project.voice_of(entry).pace,
            project.preset.timing.max_speedup,
            Fit(edit.get("max_speedup"), bool(edit.get("borrow"))),
            tuple(project.translation.sayable(found)) if found is not None else (),
        )

    def _translation(self, entry: LineEntry) -> dict:
        """What omnidub translate recorded of the line (its original, the checks' flags on what it says now and
        their reasons, the back-translation) and whether another translation is offered, or why not."""
        record = self.project.translation
        if record is None:
            return {"translated_from": None, "translation": None, "translate_again": False, "translate_why": None}
        found, why = self.project.translated(entry)
        judged = record.judged(found, entry.text) if found is not None else None
        again = None
        if found is not None:
            again, why = record.again(found, entry.text)
        return {
            "translated_from": found["original"] if found is not None else None,
            "translation": judged,
            "translate_again": again is not None,
            "translate_why": why,
        }

    def _files(self, entry: LineEntry, takes) -> dict:
        """The files a line may play, found now: its segment, its original clip, each take (from the store)."""
        found = []
        for take in takes:
            stored, _ = self.project.store.find(take.key, take.duration or entry.target)
            found.append(stored.path if stored is not None else None)
        return {
            "line": self.listed(entry.file) if entry.done else None,
            "original": self.listed((entry.reference or {}).get("file")),
            "takes": found,
        }

    def listed(self, relative):
        """The path of a file of the folder the ledger lists as omnidub's, or None."""
        folder = self.project.folder
        if not isinstance(relative, str) or folder.status(relative) not in ("ours", "changed"):
            return None
        return folder.path / relative

    def _mix_file(self) -> str | None:
        try:
            generation = self.project.assembled()
        except OSError:  # a file the key reads (an edited segment, the bed) went away: not these lines' mix
            return None
        if generation is None:
            return None
        return generation.parts.get("delivery", {}).get("bed_mix") or generation.parts.get("mix")

    def _waveform(self, entry: LineEntry) -> dict | None:
        """The line's audio as the page draws it (see :func:`waveform`); None without audio. Read once per audio."""
        if not entry.done or not entry.sha256:
            return None
        if "edited" in entry.flags:  # a segment edited by hand is not the audio its hash names
            return waveform(self.listed(entry.file))
        if entry.sha256 not in self._waves:
            form = waveform(self.listed(entry.file))
            if form is None:  # unreadable now; read again next time
                return None
            self._waves[entry.sha256] = form
        return self._waves[entry.sha256]

    def _heard_in(self) -> dict:
        """qa.json's transcript and word diff of each audio it heard, by the audio's hash (read again when
        qa.json changes)."""
        project = self.project
        try:
            stamp = (project.out_dir / QA_FILES[0]).stat().st_mtime_ns
        except OSError:
            return {}
        if project.folder.status(QA_FILES[0]) != "ours":
            return {}
        if self._heard is None or self._heard[0] != stamp:
            found = {}
            record = QaRecord.read(project.out_dir)
            for line in record.lines.values() if record is not None else ():
                if isinstance(line.get("sha256"), str) and line.get("transcript") is not None:
                    diff = [list(p) for p in line.get("diff") or [] if isinstance(p, list) and len(p) == 3]
                    found[line["sha256"]] = {"transcript": str(line["transcript"]), "diff": diff}
            self._heard = (stamp, found)
        return self._heard[1]

    def _own_original(self, entry: LineEntry) -> tuple[float, float, str, bool] | None:
        """The span of the source the line translates (its own original lines, wherever its voice was cloned
        from), their text and whether any of their words were heard only when heard again alone; None without a
        source."""
        from omnidub.source.heard import was_heard_again

        cast = self.project.cast
        if cast is None:
            return None
        reference = cast.references.get(entry.index)
        if self._originals is None or self._originals[0] is not cast.summary:
            self._originals = (cast.summary, {line.index: line for line in cast.summary.original.lines})
        originals = self._originals[1]
        found = [originals[i] for i in (reference.original if reference else ()) if i in originals]
        if found:
            again = any(was_heard_again(o) for o in found)
            return min(o.start for o in found), max(o.end for o in found), " ".join(o.text for o in found), again
        return entry.start, entry.end, "", False


def counts(lines) -> dict:
    """The page's counts of line views: passed, failed, unchecked, approved, lines, without audio."""
    found = {
        outcome: sum(line["verdict"] == outcome for line in lines) for outcome in ("passed", "failed", "unchecked")
    }
    return {
        **found,
        "approved": sum(line["approved"] for line in lines),
        "lines": len(lines),
        "unrendered": sum(line["audio"] is None for line in lines),
    }


def waveform(path) -> dict | None:
    """A WAV file's peaks in WAVE_BINS stretches of equal length (0-1) and its peak level in dBFS (None where
    silent); None for a file that is missing or cannot be read."""
    import numpy as np
    import soundfile as sf

    if path is None:
        return None
    try:
        data, _ = sf.read(str(path), dtype="float32", always_2d=True)
    except (OSError, RuntimeError, sf.LibsndfileError):
        return None
    level = np.nan_to_num(np.abs(data).max(axis=1), nan=0.0, posinf=1.0)
    if level.size == 0:
        return {"peaks": [0.0] * WAVE_BINS, "peak_dbfs": None}
    edges = np.linspace(0, level.size, WAVE_BINS + 1).astype(int)
    peaks = [float(level[a:b].max()) if b > a else 0.0 for a, b in zip(edges[:-1], edges[1:], strict=True)]
    top = float(level.max())
    return {
        "peaks": [round(min(p, 1.0), 3) for p in peaks],
        "peak_dbfs": round(20 * math.log10(top), 1) if top > 0 else None,
    }


def _voice_from(reference: dict) -> str | None:
    """Which clip of the source the line's voice was cloned from, as the page says it."""
    if not reference:
        return None
    if reference.get("kind") == "line":
        return "its own original line"
    if reference.get("kind") == "given":
        return f"the voice given for {reference.get('speaker')}, the editor's choice"
    start, end, text = reference.get("start"), reference.get("end"), reference.get("text")
    if start is None or end is None:
        return "no clip of the source" + (f" ({reference['fallback']})" if reference.get("fallback") else "")
    said = f"its speaker's clip at {start:.2f} to {end:.2f} s" + (f": “{text}”" if text else "")
    return said + (f" ({reference['fallback']})" if reference.get("fallback") else "")
