"""The review desk: a rendered folder held open for an editor, every action turned into a job request.

The desk holds the folder as a render does (the job's lock, ledger, journal and store) for as long as the server
runs, and runs every action on one worker thread through the job, one after another: a take, an edit, an approval
and a delivery all go through ``Job`` -> ``Project`` -> ``store`` -> ``assembly``, exactly as ``omnidub render``
does. It keeps nothing of its own but the per-run token: what the page shows is read from the project after each
action and published to the page's event streams.
"""

from __future__ import annotations

import math
import queue
import secrets
import threading
from dataclasses import dataclass, field
from typing import Callable

from omnidub.editor import Editor, takes_of
from omnidub.errors import OmnidubError
from omnidub.folder import QA_FILES
from omnidub.job import Job, QaOptions
from omnidub.progress import Listener
from omnidub.records import LineEntry, QaRecord
from omnidub.script import line_ranges

WAVE_BINS = 96  # bars in a line's waveform on the page

ACTIONS = ("render", "retake", "edit", "choose", "approve", "retake-failed", "approve-passed", "deliver")
LINE_ACTIONS = ("render", "retake", "edit", "choose", "approve")


class Stale(OmnidubError):
    """The line changed since the editor heard or read it (another tab, or an action queued before)."""


def _check_heard(action: "Action", line: dict | None) -> None:
    """An approval names the audio the editor heard, an edit of the text the text it replaces: refused when the
    line has changed since. (The page must name them; a caller of the library that names none acts on the line as
    it is.)"""
    if line is None:
        return
    if (
        action.kind == "approve"
        and action.args.get("approved", True)
        and action.args.get("key", line["key"]) != line["key"]
    ):
        raise Stale(f"line {action.index} changed since you heard it: listen to it again, then approve")
    if action.kind == "edit" and "text" in action.args and action.args.get("was", line["text"]) != line["text"]:
        raise Stale(f"line {action.index} changed since you read it: it now says {line['text']!r}")


@dataclass(frozen=True)
class Action:
    """What an editor asked for: ``kind`` (one of ACTIONS), the line it is for, and its arguments."""

    kind: str
    index: int | None = None
    args: dict = field(default_factory=dict)

    def describe(self) -> str:
        what = {
            "render": "rendering",
            "retake": "a retake of",
            "edit": "rendering the edit of",
            "choose": "another take of",
            "approve": "approving",
        }.get(self.kind, self.kind.replace("-", " "))
        return f"{what} line {self.index}" if self.index is not None else what


class _Events(Listener):
    """What the job tells as it goes, as page events (lines started and finished, steps, notes)."""

    def __init__(self, publish: Callable[[dict], None]):
        self.publish = publish

    def step(self, text: str) -> None:
        self.publish({"type": "progress", "text": text})

    def note(self, text: str) -> None:
        self.publish({"type": "note", "text": text})

    def line_started(self, entry: LineEntry) -> None:
        self.publish({"type": "rendering", "index": entry.index})


class Review:
    """A rendered folder open for review: :meth:`open` holds it, :meth:`submit` queues an action, :meth:`state`
    is what the page shows, :meth:`close` delivers and lets go."""

    def __init__(self, session, project, *, speaker_model: str | None = None):
        self.session, self.project = session, project
        self.token = secrets.token_urlsafe(24)  # the per-run token every request carries
        self.job = Job(session.engine, [project], listener=_Events(self._publish), qa=QaOptions(speaker_model))
        project.listener = self.job.listener  # what the project notes (a hand edit moved aside) reaches the page
        self.editor = Editor(self.job)
        self._subscribers: list[Callable[[dict], None]] = []
        self._lines: dict[int, dict] = {}  # the page's view of each line, published after every action
        self._status: dict = {"busy": None, "queued": 0}
        self._lock = threading.Lock()
        self._actions: queue.Queue = queue.Queue()
        self._worker: threading.Thread | None = None
        self._waves: dict[str, dict] = {}  # each segment's waveform, by the audio's hash
        self._checked = False  # whether the folder held QA's reports when it was opened
        # What the routes read, published by the worker after each action: no request reads the project.
        self._media: dict[int, dict] = {}  # line -> the files it may play: "line", "original", "takes"
        self._folder: dict = {}  # the folder's own view: title, speakers, programme, the mix's file
        self.changed = False  # whether anything changed since the folder was opened or last delivered
        self.closing = threading.Event()  # set when the server stops: live event streams end

    # -- the folder ----------------------------------------------------------------------------------------
    def open(self) -> None:
        """Hold the folder and plan it (voices prepared, stored lines placed; nothing renders), take over the
        verdicts qa.json gave the audio the lines still have, and start the worker."""
        self.editor.hold()
        # A folder QA had checked gets its reports written again at each delivery (of the lines as they stand).
        self._checked = self.project.folder.status(QA_FILES[0]) == "ours"
        self._adopt_qa_verdicts()
        self._publish_folder()
        with self._lock:
            self._lines = {e.index: self._line_json(e) for e in self.project.entries}
            self._media = {e.index: self._files(e) for e in self.project.entries}
        self._worker = threading.Thread(target=self._work, name="omnidub review", daemon=True)
        self._worker.start()

    def close(self, deliver: bool = True) -> bool:
        """Finish the action in flight, then (``deliver``) assemble the outputs from the lines as they stand when
        anything changed since they were last assembled, and let go of the folder and the workers. Returns
        whether it delivered."""
        self.closing.set()
        if self._worker is not None:
            self._actions.put(None)
            self._worker.join()
            self._worker = None
        try:
            if deliver and self.changed:
                self._deliver()
                return True
            return False
        finally:
            self.job.close()
            self.session.close()

    def _deliver(self) -> list[str]:
        """Assemble from the lines as they stand; refused while a line that had audio at the last delivery has
        none now (it would leave the mix and the subtitles). Returns the files written."""
        project = self.project
        had = {e.index for e in project.recorded if e.done}
        lost = [e for e in project.entries if not e.done and e.index in had]
        if lost:
            raise OmnidubError(
                f"line(s) {line_ranges([e.index for e in lost])} have no audio now ({project.missing(lost[0])}); "
                "delivering would drop them from the mix and the subtitles: render them first"
            )
        self.editor.deliver(project, check=self._checked)
        self.changed = False
        files = sorted(project.generation.files) if project.generation else []
        return files + [name for name in QA_FILES if project.folder.status(name) == "ours"]

    def _adopt_qa_verdicts(self) -> None:
        """A line QA judged with the audio it still has keeps that verdict as its take's (qa.json is removed once
        the audio changes, so a verdict lives on in the line's takes)."""
        if self.project.folder.status(QA_FILES[0]) != "ours":
            return
        record = QaRecord.read(self.project.out_dir)
        judged = record.lines if record is not None else {}
        for entry in self.project.entries:
            line = judged.get(entry.index)
            if not entry.done or line is None or line.get("sha256") != entry.sha256 or not entry.sha256:
                continue
            takes = takes_of(entry)
            current = next(t for t in takes if t["key"] == entry.key)
            if current.get("verdict") is None and line.get("verdict") is not None:
                voice = line.get("voice") or {}
                current.update(
                    verdict=line["verdict"],
                    severity=line.get("severity"),
                    passed=line.get("passed"),
                    flags=list(line.get("flags") or []),
                    error_rate=line.get("error_rate"),
                    voice_similarity=voice.get("similarity") if isinstance(voice, dict) else None,
                    reasons=[r.get("text") for r in line.get("reasons") or [] if isinstance(r, dict)],
                )
                self.project.keep_attempts(entry, takes)

    # -- actions -------------------------------------------------------------------------------------------
    def submit(self, action: Action) -> None:
        """Queue an action for the worker (checked first against what the page was shown: a bad or stale one is
        an OmnidubError now, not later; :class:`Stale` when the line changed since the editor heard or read it)."""
        if action.kind not in ACTIONS:
            raise OmnidubError(f"unknown action {action.kind!r}")
        if action.kind in LINE_ACTIONS and action.index is None:
            raise OmnidubError(f"{action.kind} names a line: /api/lines/N/{action.kind}")
        if action.kind not in LINE_ACTIONS and action.index is not None:
            raise OmnidubError(f"{action.kind} is for the whole folder, not for one line")
        with self._lock:
            line = self._lines.get(action.index) if action.index is not None else None
            speakers = self._folder.get("speakers", [])
        if action.index is not None and line is None:
            raise OmnidubError(f"no line {action.index} in this folder")
        _check_heard(action, line)
        if action.kind == "edit" and "text" in action.args:
            from omnidub.script import edited_text

            edited_text(action.args["text"], f"line {action.index}")
        if action.kind == "edit" and action.args.get("speaker") not in (None, line["input_speaker"], *speakers):
            raise OmnidubError(
                f"line {action.index}: no voice called {action.args['speaker']!r} in this render "
                f"(its voices: {', '.join(speakers)})"
            )
        with self._lock:
            self._status["queued"] += 1
        self._actions.put(action)
        self._publish({"type": "status", **self.status()})

    def _work(self) -> None:
        while True:
            action = self._actions.get()
            if action is None:
                return
            with self._lock:
                self._status = {"busy": action.describe(), "queued": self._status["queued"] - 1}
            self._publish({"type": "status", **self.status()})
            try:
                touched = self._run(action)
                self.changed = self.changed or action.kind != "deliver"
            except OmnidubError as exc:
                self._publish({"type": "error", "index": action.index, "text": str(exc)})
                touched = [action.index] if action.index is not None else []
            except Exception as exc:  # noqa: BLE001 - the desk stays up; the editor hears what went wrong
                self._publish({"type": "error", "index": action.index, "text": f"{type(exc).__name__}: {exc}"})
                touched = [e.index for e in self.project.entries]
                self.changed = True
            self._publish_folder()
            self._refresh(touched)
            with self._lock:
                self._status = {"busy": None, "queued": self._status["queued"]}
            self._publish({"type": "status", **self.status()})

    def _run(self, action: Action) -> list[int]:
        """Run one action through the job; returns the lines it may have changed."""
        editor, project, index = self.editor, self.project, action.index
        if index is not None:
            _check_heard(action, self._line_json(project.line(index)))  # again: an action queued before may have run
        if action.kind == "render":
            editor.render_lines(project, [index])
        elif action.kind == "retake":
            editor.retake(project, index)
        elif action.kind == "edit":
            editor.edit(project, index, **{k: v for k, v in action.args.items() if k != "was"})
        elif action.kind == "choose":
            editor.choose(project, index, int(action.args["take"]))
        elif action.kind == "approve":
            editor.approve(project, index, action.args.get("approved", True), heard=action.args.get("key"))
            return [index]
        elif action.kind == "approve-passed":
            passed = [i for i, line in self._lines.items() if line["verdict"] == "passed" and not line["approved"]]
            for i in passed:
                editor.approve(project, i)
            return passed
        elif action.kind == "retake-failed":
            failed = [i for i, line in self._lines.items() if line["verdict"] == "failed"]
            if not failed:
                self._publish({"type": "note", "text": "no line failed QA: nothing to retake"})
            for n, i in enumerate(failed, 1):
                busy = f"a retake of line {i} ({n} of {len(failed)})"
                with self._lock:
                    self._status = {"busy": busy, "queued": self._status["queued"]}
                self._publish({"type": "status", **self.status()})
                editor.retake(project, i)
                self._refresh([i])
            return failed
        elif action.kind == "deliver":
            files = self._deliver()
            self._publish({"type": "delivered", "files": files})
            return []
        if action.kind in ("edit", "render"):
            return [e.index for e in project.entries]  # a replan may move any line (an untimed script's starts)
        return [index]

    # -- what the page shows -------------------------------------------------------------------------------
    def subscribe(self, send: Callable[[dict], None]) -> Callable[[], None]:
        """Hear every event (``send`` is called from the worker thread); returns the call that stops it."""
        self._subscribers.append(send)
        return lambda: self._subscribers.remove(send) if send in self._subscribers else None

    def _publish(self, event: dict) -> None:
        for send in list(self._subscribers):
            send(event)

    def _refresh(self, indices: list[int]) -> None:
        """Publish the lines among ``indices`` whose view changed."""
        for index in dict.fromkeys(indices):
            try:
                entry = self.project.line(index)
            except OmnidubError:
                continue
            line, files = self._line_json(entry), self._files(entry)
            with self._lock:
                self._media[index] = files
                if self._lines.get(index) == line:
                    continue
                self._lines[index] = line
            self._publish({"type": "line", "line": line})
        self._publish({"type": "counts", "counts": self.counts()})
        self._publish({"type": "mix", "mix": self._mix_url()})

    def _publish_folder(self) -> None:
        """The folder's view as the routes read it (worker thread only)."""
        project = self.project
        view = {
            "title": project.out_dir.name,
            "input": project.input_path.name,
            "program_seconds": round(project.program or 0.0, 3),
            "speakers": sorted(project.speakers),
            "source": project.cast is not None,
            "max_speedup": project.preset.timing.max_speedup,
            "mix_file": self._listed(self._mix_file()),
        }
        with self._lock:
            self._folder = view

    def _mix_url(self) -> str | None:
        """Where the page plays the mix (over the bed when there is one), while it is the lines as they are."""
        with self._lock:
            return "/media/mix" if self._folder.get("mix_file") else None

    def _files(self, entry: LineEntry) -> dict:
        """The files a line may play, found now (worker thread): its segment, its original clip, each take."""
        takes = []
        for record in takes_of(entry):
            stored, _ = self.project.store.find(record["key"], record.get("duration") or entry.target)
            takes.append(stored.path if stored is not None else None)
        return {
            "line": self._listed(entry.file) if entry.done else None,
            "original": self._listed((entry.reference or {}).get("file")),
            "takes": takes,
        }

    def _mix_file(self) -> str | None:
        try:
            generation = self.project.assembled()
        except OSError:  # a file the key reads (an edited segment, the bed) went away: not these lines' mix
            return None
        if generation is None:
            return None
        return generation.parts.get("delivery", {}).get("bed_mix") or generation.parts.get("mix")

    def status(self) -> dict:
        with self._lock:
            return dict(self._status)

    def counts(self) -> dict:
        with self._lock:
            lines = list(self._lines.values())
        found = {
            outcome: sum(line["verdict"] == outcome for line in lines) for outcome in ("passed", "failed", "unchecked")
        }
        return {
            **found,
            "approved": sum(line["approved"] for line in lines),
            "lines": len(lines),
            "unrendered": sum(line["audio"] is None for line in lines),
        }

    def state(self) -> dict:
        """The whole page's data: the folder, its speakers, the programme, and every line (as last published)."""
        with self._lock:
            lines = [self._lines[i] for i in sorted(self._lines)]
            view = {k: v for k, v in self._folder.items() if k != "mix_file"}
        return {**view, "mix": self._mix_url(), "lines": lines, "counts": self.counts(), "status": self.status()}

    def _line_json(self, entry: LineEntry) -> dict:
        takes = takes_of(entry)
        current = next((t for t in takes if t["key"] == entry.key), None) if entry.done else None
        verdict = (current or {}).get("verdict") or "unchecked"
        reasons = list((current or {}).get("reasons") or [])
        if current is not None and current.get("verdict") is None and not reasons:
            reasons = ["not checked yet: QA hears every take rendered here (omnidub qa checks them all)"]
        elif not entry.done:
            reasons = [f"without audio: {self.project.missing(entry)}"]
        edit = entry.edit or {}
        reference = entry.reference or {}
        return {
            "index": entry.index,
            "speaker": entry.speaker,
            "input_speaker": self.project.input_speaker(entry.index),
            "text": entry.text,
            "input_text": edit.get("from", entry.text),
            "language": entry.language,
            "start": entry.start,
            "end": entry.end,
            "slot": entry.slot,
            "target": entry.target,
            "duration": entry.duration,
            "status": entry.status,
            "flags": list(entry.flags),
            "approved": entry.approved,
            "verdict": verdict,
            "severity": (current or {}).get("severity"),
            "reasons": reasons,
            "error_rate": (current or {}).get("error_rate"),
            "voice_similarity": (current or {}).get("voice_similarity"),
            "key": entry.key if entry.done else None,  # what an approval names: the audio the editor heard
            "missing": self.project.missing(entry),
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
                    "seed": t.get("seed"),
                    "duration": t.get("duration"),
                    "text": t.get("text"),
                    "verdict": t.get("verdict") or "unchecked",
                    "reasons": t.get("reasons") or [],
                    "chosen": t["key"] == entry.key and entry.done,
                    "audio": f"/media/take/{entry.index}/{n}?v={(t.get('sha256') or '')[:16]}",
                }
                for n, t in enumerate(takes, 1)
            ],
        }

    def _waveform(self, entry: LineEntry) -> dict | None:
        """The line's audio as the page draws it: the peak of each of WAVE_BINS stretches (0 to 1, full scale)
        and the peak level in dBFS (None: silent); None without audio. Read once per audio."""
        if not entry.done or not entry.sha256:
            return None
        if "edited" in entry.flags:  # a segment edited by hand is not the audio its hash names
            return waveform(self._listed(entry.file))
        if entry.sha256 not in self._waves:
            form = waveform(self._listed(entry.file))
            if form is None:  # unreadable now; read again next time
                return None
            self._waves[entry.sha256] = form
        return self._waves[entry.sha256]

    # -- files the page may play -----------------------------------------------------------------------------
    def media(self, what: str, index: int | None = None, take: int | None = None):
        """The file the page asks to play, or None: a line's segment, its original clip, one of its takes, or
        the mix (over the bed when there is one), as the worker last published them: only files the folder's
        ledger lists as omnidub's, and takes from the line store; nothing a request names becomes a path."""
        with self._lock:
            if what == "mix":
                return self._folder.get("mix_file")
            files = self._media.get(index)
        if files is None:
            return None
        if what == "take":
            takes = files["takes"]
            return takes[take - 1] if take is not None and 1 <= take <= len(takes) else None
        return files.get(what) if what in ("line", "original") else None

    def _listed(self, relative):
        folder = self.project.folder
        if not isinstance(relative, str) or folder.status(relative) not in ("ours", "changed"):
            return None
        return folder.path / relative


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
