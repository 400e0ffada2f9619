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
from omnidub.records import LineEntry, QaRecord, TranslationRecord
from omnidub.script import line_ranges

WAVE_BINS = 96  # bars in a line's waveform on the page

ACTIONS = ("render", "retake", "edit", "choose", "approve", "retake-failed", "approve-passed", "deliver")
ACTIONS += ("undo", "mark")  # the desk's own: take back the last decision; a note or flag on a line
ACTIONS += ("translate",)  # the line's next translation candidate (omnidub translate's report beside the input)
VIDEO_SUFFIXES = (".mp4", ".m4v", ".mov", ".mkv", ".webm")
CONTEXT_SECONDS = 2.0  # heard before and after a line played in context
UNDO_DEPTH = 100  # decisions the desk can take back, newest first
LINE_ACTIONS = ("render", "retake", "edit", "choose", "approve", "mark", "translate")


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
            "translate": "another translation of",
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
        self._decisions: list[list[dict]] = []  # what each decision changed, as it was before: for undo
        self._heard: tuple[float, dict] | None = None  # qa.json's transcripts and word diffs by audio hash
        self._source = None  # the source's audio, decoded once a line's own original is asked for
        self._bed_samples = None  # (rate, samples) of the bed, decoded once a line is played in context
        self._originals = None  # (the source's summary, its original lines by index)
        self._cancels = 0  # how often the editor cancelled: a long action stops at its next line once it grows
        self._spans: dict[int, tuple[float, float] | None] = {}  # each line's own span of the source, as published
        self._translation = translation_of(project.input_path)  # omnidub translate's report, when it made the input

    # -- the folder ----------------------------------------------------------------------------------------
    def open(self) -> None:
        """Hold the folder and plan it (voices prepared, stored lines placed; nothing renders), take over the
        verdicts qa.json gave the audio the lines still have, and start the worker."""
        self.editor.hold()
        # Decisions journaled since the last delivery (a review stopped without delivering, a killed one) are
        # changes the outputs do not hold yet.
        self.changed = bool(self.project.last.journal)
        # A folder QA had checked gets its reports written again at each delivery (of the lines as they stand).
        self._checked = self.project.folder.status(QA_FILES[0]) == "ours"
        self._adopt_qa_verdicts()
        self._publish_folder()
        lines = {e.index: self._line_json(e) for e in self.project.entries}
        media = {e.index: self._files(e) for e in self.project.entries}
        with self._lock:
            self._lines, self._media = lines, media
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
            entry = project.line(index)  # checked again: an action queued before it may have changed the line
            _check_heard(action, {"key": entry.key if entry.done else None, "text": entry.text})
        self._remember(action)
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
            asked = self._cancels
            for k, i in enumerate(failed, 1):
                if self._cancels != asked:
                    self._publish({"type": "note", "text": f"cancelled after {k - 1} of {len(failed)} retakes"})
                    return failed
                busy = f"a retake of line {i} ({k} of {len(failed)} failed lines)"
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
        elif action.kind == "translate":
            entry = project.line(index)
            other = self._translation.alternative(index, entry.text) if self._translation else None
            if other is None:
                raise OmnidubError(f"line {index}: omnidub translate gave no other translation of it")
            editor.edit(project, index, text=other)
            return [e.index for e in project.entries]
        elif action.kind in ("undo", "mark"):
            return self._run_desk(action)
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
        line = {
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
        return self._page_fields(entry, line)

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

    # -- an editor's day: undo, notes and flags, what QA heard, the line's own original ------------------------
    def _remember(self, action: Action) -> None:
        """Keep what a decision is about to change (approval, take in use, edit, speaker), for an undo."""
        if action.kind in ("approve", "choose", "retake", "edit", "translate") and action.index in self._lines:
            lines = [action.index]
        elif action.kind == "approve-passed":
            lines = [i for i, line in self._lines.items() if line["verdict"] == "passed" and not line["approved"]]
        else:
            return
        before = []
        for index in lines:
            entry = self.project.line(index)
            key = entry.key if entry.done else None
            before.append({"index": index, "key": key, "approved": entry.approved, "edit": dict(entry.edit or {})})
        self._decisions.append([{"what": action.describe()}, *before])
        del self._decisions[:-UNDO_DEPTH]

    def _run_desk(self, action: Action) -> list[int]:
        if action.kind == "mark":
            self.project.mark(action.index, **action.args)
            return [action.index]
        while self._decisions:
            said, *before = self._decisions.pop()
            if all(self._as_it_was(was) for was in before):
                continue  # a decision that changed nothing (refused, or made twice): the one before it is undone
            touched: list[int] = []
            for was in before:
                touched += self._restore(was)
            self._publish({"type": "note", "text": f"undone: {said['what']}"})
            return touched
        raise OmnidubError("nothing to undo")

    def _as_it_was(self, was: dict) -> bool:
        entry = self.project.line(was["index"])
        key = entry.key if entry.done else None
        return (entry.edit or {}) == was["edit"] and key == was["key"] and entry.approved == was["approved"]

    def _restore(self, was: dict) -> list[int]:
        """Put a line back as it was before a decision: its edit, then its take, then its approval."""
        editor, project, index = self.editor, self.project, was["index"]
        now, old = project.line(index).edit or {}, was["edit"]
        defaults = {"text": project.input_text(index), "speaker": project.input_speaker(index), "borrow": False}
        changes = {
            name: old.get(name, defaults.get(name))
            for name in ("text", "speaker", "max_speedup", "borrow", "voice")
            if old.get(name) != now.get(name)
        }
        touched = [index]
        if changes:
            editor.edit(project, index, **changes)
            touched = [e.index for e in project.entries]
        entry = project.line(index)
        if was["key"] is not None and entry.key != was["key"]:
            numbers = [n for n, take in enumerate(takes_of(entry), 1) if take["key"] == was["key"]]
            if numbers:
                editor.choose(project, index, numbers[0])
        entry = project.line(index)
        if entry.approved != was["approved"] and (entry.done or not was["approved"]):
            editor.approve(project, index, was["approved"])
        return touched

    def _page_fields(self, entry: LineEntry, line: dict) -> dict:
        """What the page shows beside the line's record: the editor's note and flag, what QA heard in this
        audio and the word diff, the line's own original text and span, and where its voice came from."""
        heard = self._heard_in().get(entry.sha256 or "") if entry.done else None
        own = self._own_original(entry.index)
        with self._lock:
            self._spans[entry.index] = own[:2] if own else None  # what /own-original reads
        reference = entry.reference or {}
        line.setdefault("key", entry.key if entry.done else None)
        line.update(
            note=entry.note,
            look_again=entry.look_again,
            heard=heard["transcript"] if heard else None,
            diff=heard["diff"] if heard else None,
            original_text=own[2] if own else None,
            own_original=f"/own-original/{entry.index}" if own else None,
            voice_from=_voice_from(reference, own),
            translated_from=self._translation.original(entry.index) if self._translation else None,
            translate_again=bool(self._translation and self._translation.alternative(entry.index, entry.text)),
        )
        return line

    def _heard_in(self) -> dict:
        """qa.json's transcript and word diff of each audio it heard, by the audio's hash (read again when
        qa.json changes)."""
        path = self.project.out_dir / QA_FILES[0]
        try:
            stamp = path.stat().st_mtime_ns if self.project.folder.status(QA_FILES[0]) == "ours" else None
        except OSError:
            stamp = None
        if stamp is None:
            return {}
        if self._heard is None or self._heard[0] != stamp:
            found = {}
            record = QaRecord.read(self.project.out_dir)
            for line in record.lines.values() if record is not None else ():
                if isinstance(line.get("sha256"), str) and line.get("transcript") is not None:
                    diff = [list(p) for p in line.get("diff") or [] if isinstance(p, list) and len(p) == 3]
                    found[line["sha256"]] = {"transcript": str(line["transcript"]), "diff": diff}
            self._heard = (stamp, found)
        return self._heard[1]

    def _own_original(self, index: int) -> tuple[float, float, str] | None:
        """The span of the source the line translates (its own original lines, wherever its voice was cloned
        from) and their text; None without a source."""
        cast = self.project.cast
        if cast is None:
            return None
        reference = cast.references.get(index)
        if self._originals is None or self._originals[0] is not cast.summary:
            self._originals = (cast.summary, {line.index: line for line in cast.summary.original.lines})
        originals = self._originals[1]
        found = [originals[i] for i in (reference.original if reference else ()) if i in originals]
        if found:
            return min(o.start for o in found), max(o.end for o in found), " ".join(o.text for o in found)
        entry = self.project.line(index)
        return entry.start, entry.end, ""

    def own_original(self, index: int) -> bytes | None:
        """The line's own span of the source as WAV bytes (decoded from the source once), or None."""
        from omnidub.source.audio import CLIP_RATE, read_source, wav_bytes

        with self._lock:
            span = self._spans.get(index)
        options = self.project.options.source
        if span is None or options is None:
            return None
        if self._source is None:
            try:
                self._source = read_source(options.source, CLIP_RATE)
            except OmnidubError:
                return None
        return wav_bytes(self._source.cut(span[0], span[1]), CLIP_RATE)

    def context(self, index: int) -> bytes | None:
        """The line with CONTEXT_SECONDS before and after, as the lines stand now: every segment at its place
        over the bed (ducked under the lines as the mix ducks it), as WAV bytes; None for an unknown line."""
        import numpy as np
        import soundfile as sf

        from omnidub.source.audio import wav_bytes

        with self._lock:
            line = self._lines.get(index)
            placed = [(view, self._media.get(i, {}).get("line")) for i, view in self._lines.items()]
        if line is None:
            return None
        project = self.project
        start, end = max(0.0, line["start"] - CONTEXT_SECONDS), line["end"] + CONTEXT_SECONDS
        parts = []
        for view, path in placed:
            ends = view["start"] + (view["duration"] or 0.0)
            if path is None or view["start"] > end or max(ends, view["end"]) < start:
                continue
            try:
                data, rate = sf.read(str(path), dtype="float32", always_2d=True)
            except (OSError, RuntimeError, sf.LibsndfileError):
                continue  # replaced under it: left out of this preview
            parts.append((view["start"], data.mean(axis=1), rate))
        rate = parts[0][2] if parts else project.options.delivery.sample_rate
        out = np.zeros(int(round((end - start) * rate)), dtype=np.float32)
        speech = np.zeros(out.size, dtype=bool)
        for at, samples, own_rate in parts:
            if own_rate != rate:
                from omnidub.media import resample

                samples = resample(samples, own_rate, rate)
            a = int(round((at - start) * rate))
            piece = samples[max(0, -a) : max(0, out.size - a)]
            out[max(a, 0) : max(a, 0) + piece.size] += piece
            speech[max(a, 0) : max(a, 0) + piece.size] = True
        bed = self._bed(start, out.size, rate)
        if bed is not None:
            out += np.where(speech, bed * 10 ** (-project.options.delivery.duck / 20), bed)
        return wav_bytes(np.clip(out, -1.0, 1.0), rate)

    def _bed(self, start: float, frames: int, rate: int):
        """The bed's samples from ``start`` (mono, at ``rate``), or None without a bed."""
        import numpy as np

        from omnidub.media import load_audio

        project = self.project
        path = project.options.delivery.bed or (project.casting.bed if project.casting is not None else None)
        if path is None or not path.is_file():
            return None
        if self._bed_samples is None or self._bed_samples[0] != rate:
            try:
                self._bed_samples = (rate, load_audio(path, rate))  # decoded once
            except OmnidubError:
                return None
        samples = self._bed_samples[1][int(round(start * rate)) :][:frames]
        return np.pad(samples, (0, frames - samples.size))

    def cancel(self) -> None:
        """Stop the long action in flight at its next line and drop every action still queued (said on the page)."""
        self._cancels += 1
        dropped = 0
        while True:
            try:
                action = self._actions.get_nowait()
            except queue.Empty:
                break
            if action is None:  # closing: keep it for the worker
                self._actions.put(None)
                break
            dropped += 1
        with self._lock:
            self._status["queued"] = max(0, self._status["queued"] - dropped)
        if dropped:
            self._publish({"type": "note", "text": f"{dropped} queued action(s) dropped"})
        self._publish({"type": "status", **self.status()})

    def delivered(self, name: str):
        """A file of the folder the page may link to: one the ledger lists as omnidub's, or None."""
        return self._listed(name)

    def picture(self):
        """The video the page shows beside the lines (the one the render delivers over, else a source that is a
        video), or None. The user's own file: only read."""
        video = self.project.options.delivery.video
        source = self.project.options.source
        if video is None and source is not None and source.source.suffix.lower() in VIDEO_SUFFIXES:
            video = source.source
        return video if video is not None and video.is_file() else None


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


def translation_of(input_path) -> "TranslationRecord | None":
    """omnidub translate's report on the translation a render was made from, or None."""
    from omnidub.folder import read_translation

    return read_translation(input_path)


def _voice_from(reference: dict, own) -> str | None:
    """Which clip of the source the line's voice was cloned from, as the page says it."""
    if not reference:
        return None
    if reference.get("kind") == "line":
        return "its own original line"
    start, end, text = reference.get("start"), reference.get("end"), reference.get("text")
    if start is None or end is None:
        return "no clip of the source" + (f" ({reference['fallback']})" if reference.get("fallback") else "")
    said = f"its speaker's clip at {start:.2f} to {end:.2f} s" + (f": “{text}”" if text else "")
    return said + (f" ({reference['fallback']})" if reference.get("fallback") else "")
