"""The review desk: transport between the page and the editor. A rendered folder is held by an ``editor.Editor``
for as long as the server runs; the desk queues what the page asks for, runs it on one worker thread through the
editor (every verb is the editor's: ``editor.VERBS``), publishes each line's view after each action to the page's
event streams (``view.Views``), and hands the routes the files they may serve. It decides nothing about a line.
"""

from __future__ import annotations

import queue
import secrets
import threading
from dataclasses import dataclass, field
from typing import Callable

from omnidub import remedies
from omnidub.casting import voice_refused
from omnidub.editor import QUICK, VERBS, Delivery, Editor, Stale, describe, stale
from omnidub.errors import OmnidubError
from omnidub.job import Job, QaOptions
from omnidub.progress import Listener
from omnidub.records import LineEntry
from omnidub.remedies import Fitting
from omnidub.review.previews import NotReady, Previews, Span
from omnidub.review.view import Views, counts

__all__ = ["Action", "NotReady", "Review", "Span", "Stale"]


@dataclass(frozen=True)
class Action:
    """What an editor asked for: ``kind`` (a verb of ``editor.VERBS``), the line it is for, and its arguments."""

    kind: str
    index: int | None = None
    args: dict = field(default_factory=dict)

    def describe(self) -> str:
        return describe(self.kind, self.index)


class _Events(Listener):
    """What the job and the editor tell as they go, as page events (lines started, steps, notes, a delivery)."""

    def __init__(self, publish: Callable[[dict], None]):
        self.publish = publish
        self.deliveries: list[Delivery] = []  # every delivery of this review, oldest first

    def step(self, text: str) -> None:
        self.publish({"type": "progress", "text": text})

    def note(self, text: str) -> None:
        self.publish({"type": "note", "text": text})

    def line_started(self, entry: LineEntry) -> None:
        self.publish({"type": "rendering", "index": entry.index})

    def delivered(self, delivery: Delivery) -> None:
        self.deliveries.append(delivery)
        self.publish({"type": "delivered", "files": list(delivery.files), "said": delivery.said()})


class Review:
    """A rendered folder open for review: :meth:`open` holds it, :meth:`submit` queues an action, :meth:`state`
    is what the page shows, :meth:`close` stops and delivers what was done."""

    def __init__(self, session, project, *, speaker_model: str | None = None):
        self.session, self.project = session, project
        self.token = secrets.token_urlsafe(24)  # the per-run token every request carries
        self.job = Job(session.engine, [project], listener=_Events(self._publish), qa=QaOptions(speaker_model))
        project.listener = self.job.listener  # what the project notes (a hand edit moved aside) reaches the page
        self.editor = Editor(self.job, working=self._working)
        self.views = Views(project, self.editor)
        self.previews = Previews(project, on_ready=lambda what: self._publish({"type": "media", "ready": what}))
        self.closing = threading.Event()  # set when the server stops: live event streams end
        self._subscribers: list[Callable[[dict], None]] = []
        self._lock = threading.Lock()
        self._actions: queue.Queue = queue.Queue()
        self._worker: threading.Thread | None = None
        # What the routes read, published by the worker after each action: no request reads the project.
        self._lines: dict[int, dict] = {}  # the page's view of each line
        self._media: dict[int, dict] = {}  # line -> the files it may play: "line", "original", "takes"
        self._spans: dict[int, tuple[float, float] | None] = {}  # each line's own span of the source
        self._fittings: dict[int, Fitting | None] = {}  # what each line's timing is predicted from
        self._folder: dict = {}  # the folder's own view: title, speakers, programme, the mix's file
        self._status: dict = {"busy": None, "queued": 0}
        self._generation = 0  # counts the changes published to lines: a programme heard is of one generation
        self._heard: dict = {}  # the last few programmes assembled, by span and generation

    @property
    def deliveries(self) -> list[Delivery]:
        """Every delivery this review made, oldest first."""
        return self.job.listener.deliveries

    # -- the folder ----------------------------------------------------------------------------------------
    def open(self) -> None:
        """Hold the folder (voices prepared, stored lines placed; nothing renders), publish every line and start
        the worker. A delivery a killed review (or render) left half-done is finished first."""
        self.editor.hold()
        self.previews.start()  # the source and the bed decoded meanwhile (once: cached on disk)
        self._publish_folder()
        self._refresh([e.index for e in self.project.entries], quietly=True)
        self._worker = threading.Thread(target=self._work, name="omnidub review", daemon=True)
        self._worker.start()
        if self.editor.cut_short(self.project):
            self._publish({"type": "note", "text": "the last delivery was cut short: finishing it"})
            self._queue(Action("deliver"))

    def close(self, deliver: bool = True, *, wait: bool = True) -> Delivery | None:
        """Stop: a long action stops at its next line, actions queued behind it that would render are dropped
        (named), the action in flight is finished; then (``deliver``) the outputs are assembled from the lines as
        they stand when they are not those lines already (decided from the outputs, not from what happened here),
        and the folder and the workers are let go. Returns what it delivered, or None. Without ``wait`` (quitting at
        once) an action still in flight is left to the process's end, which lets go of the folder: nothing is
        delivered, and every decision is in the journal already."""
        self.closing.set()
        self.editor.cancel()
        dropped = self._drop(keep=QUICK)
        if dropped:
            said = ", ".join(a.describe() for a in dropped)
            self._publish({"type": "note", "text": f"not done, since the review stopped: {said}"})
        busy = self.status()["busy"]
        if busy:
            self._publish({"type": "progress", "text": f"finishing {busy} first"})
        if self._worker is not None:
            self._actions.put(None)
            self._worker.join(None if wait else 0.5)  # a Ctrl-C meanwhile leaves the folder held, as a crash would
            if self._worker.is_alive():
                return None
            self._worker = None
        try:
            if deliver and self.editor.outstanding(self.project) is not None:
                return self.editor.deliver(self.project)
            return None
        finally:
            self.job.close()
            self.session.close()

    # -- actions -------------------------------------------------------------------------------------------
    def submit(self, action: Action) -> None:
        """Queue an action for the worker (checked first against what the page was shown: a bad or stale one is
        an OmnidubError now, not later; :class:`Stale` when the line changed since the editor heard or read it)."""
        verb = VERBS.get(action.kind)
        if verb is None:
            raise OmnidubError(f"unknown action {action.kind!r}")
        if verb.line and action.index is None:
            raise OmnidubError(f"{action.kind} names a line: /api/lines/N/{action.kind}")
        if not verb.line and action.index is not None and action.kind != "undo":
            raise OmnidubError(f"{action.kind} is for the whole folder, not for one line")
        with self._lock:
            line = self._lines.get(action.index) if action.index is not None else None
            speakers = self._folder.get("speakers", [])
            left = {u["index"]: u for u in self._folder.get("unvoiced", [])}
        if action.kind == "voice":
            self._check_voice(action.index, action.args, left)
            self._queue(action)
            return
        if action.index is not None and line is None:
            raise OmnidubError(f"no line {action.index} in this folder")
        if line is not None:
            why = stale(action.kind, action.index, action.args, line["key"], line["text"], line["speaker"])
            if why:
                raise Stale(why)
        if action.kind == "edit" and "text" in action.args:
            from omnidub.script import edited_text

            edited_text(action.args["text"], f"line {action.index}")
        if action.kind == "edit" and action.args.get("speaker") not in (None, line["input_speaker"], *speakers):
            raise OmnidubError(
                f"line {action.index}: no voice called {action.args['speaker']!r} in this render "
                f"(its voices: {', '.join(speakers)})"
            )
        if action.kind == "edit" and ("start" in action.args or "end" in action.args):
            self._check_slot(action.index, action.args, line)
        self._queue(action)

    def _check_voice(self, index: int, args: dict, left: dict[int, dict]) -> None:
        """A line to voice: one the source left without a voice, from a clip the folder offers it."""
        if index not in left:
            raise OmnidubError(f"line {index} is not among the lines left without a voice")
        refused = voice_refused(index, args, left[index]["choices"], left[index]["speaker"])
        if refused:
            raise OmnidubError(refused)

    def _check_slot(self, index: int, args: dict, line: dict) -> None:
        """A slot an edit moves a line to: numbers of seconds, running forward, within the programme."""
        import math

        for name in ("start", "end"):
            if name in args and not math.isfinite(args[name]):
                raise OmnidubError(f"line {index}: a slot's {name} is a number of seconds, not {args[name]!r}")
        with self._lock:
            programme, timed = self._folder.get("program_seconds") or 0.0, self._folder.get("timed", True)
        if not timed:
            raise OmnidubError(f"line {index}: the script is untimed, so its lines have no slot to move")
        start, end = args.get("start", line["start"]), args.get("end", line["end"])
        if not 0 <= start < end:
            raise OmnidubError(f"line {index}: a slot runs forward from 0 or later (not {start:g} to {end:g} s)")
        if end > max(programme, line["end"]) + 1e-6:
            raise OmnidubError(f"line {index}: a slot ends within the programme ({programme:g} s), not at {end:g} s")

    def _queue(self, action: Action) -> None:
        with self._lock:
            self._status["queued"] += 1
        self._actions.put(action)
        self._publish({"type": "status", **self.status()})

    def cancel(self) -> None:
        """Stop the long action in flight at its next line and drop every action still queued (said on the page)."""
        self.editor.cancel()
        dropped = self._drop()
        if dropped:
            self._publish({"type": "note", "text": f"{len(dropped)} queued action(s) dropped"})
        self._publish({"type": "status", **self.status()})

    def _drop(self, keep=()) -> list[Action]:
        """Take the queued actions off the queue (those of ``keep``'s verbs stay, in order); returns the others."""
        taken, closing = [], False
        while True:
            try:
                action = self._actions.get_nowait()
            except queue.Empty:
                break
            if action is None:
                closing = True
            else:
                taken.append(action)
        kept = [a for a in taken if a.kind in keep]
        for action in kept:
            self._actions.put(action)
        if closing:
            self._actions.put(None)
        with self._lock:
            self._status["queued"] = len(kept)
        return [a for a in taken if a.kind not in keep]

    def _work(self) -> None:
        while True:
            action = self._actions.get()
            if action is None:
                return
            with self._lock:
                self._status = {"busy": action.describe(), "queued": max(0, self._status["queued"] - 1)}
            self._publish({"type": "status", **self.status()})
            try:
                touched = self.editor.run(self.project, action.kind, action.index, action.args)
            except OmnidubError as exc:
                self._publish({"type": "error", "index": action.index, "text": str(exc)})
                touched = [action.index] if action.index is not None else []
            except Exception as exc:  # noqa: BLE001 - the desk stays up; the editor hears what went wrong
                self._publish({"type": "error", "index": action.index, "text": f"{type(exc).__name__}: {exc}"})
                touched = [e.index for e in self.project.entries]
            self._publish_folder()
            self._refresh(touched)
            with self._lock:
                self._status = {"busy": None, "queued": self._status["queued"]}
            self._publish({"type": "status", **self.status()})

    def _working(self, text: str) -> None:
        """What a long action is on now (the editor tells it), as the page's status."""
        with self._lock:
            self._status = {"busy": text, "queued": self._status["queued"]}
        self._publish({"type": "status", **self.status()})

    # -- what the page shows -------------------------------------------------------------------------------
    def subscribe(self, send: Callable[[dict], None]) -> Callable[[], None]:
        """Hear every event (``send`` is called from the worker thread); returns the call that stops it."""
        self._subscribers.append(send)
        return lambda: self._subscribers.remove(send) if send in self._subscribers else None

    def _publish(self, event: dict) -> None:
        for send in list(self._subscribers):
            send(event)

    def _refresh(self, indices: list[int], quietly: bool = False) -> None:
        """Publish the lines among ``indices`` whose view changed (worker thread; ``quietly``: no events)."""
        regrouped = False  # a line voiced, or left without a voice again: the page reads every line again
        for index in dict.fromkeys(indices):
            try:
                entry = self.project.line(index)
            except OmnidubError:
                with self._lock:
                    regrouped |= self._lines.pop(index, None) is not None
                    for known in (self._media, self._spans, self._fittings):
                        known.pop(index, None)
                continue
            line, files, span = self.views.line(entry)
            fitting = self.views.fitting(entry)
            with self._lock:
                self._media[index], self._spans[index], self._fittings[index] = files, span, fitting
                regrouped |= index not in self._lines
                if self._lines.get(index) == line:
                    continue
                self._lines[index] = line
                self._generation += 1
            if not quietly:
                self._publish({"type": "line", "line": line})
        if regrouped:
            with self._lock:
                self._generation += 1
        if not quietly:
            self._publish({"type": "counts", "counts": self.counts()})
            self._publish({"type": "mix", "mix": self._mix_url()})
            if regrouped:
                self._publish({"type": "lines"})

    def _publish_folder(self) -> None:
        view = self.views.folder()
        with self._lock:
            self._folder = view

    def _mix_url(self) -> str | None:
        """Where the page plays the mix (over the bed when there is one), while it is the lines as they are."""
        with self._lock:
            return "/media/mix" if self._folder.get("mix_file") else None

    def status(self) -> dict:
        with self._lock:
            return dict(self._status)

    def counts(self) -> dict:
        with self._lock:
            lines = list(self._lines.values())
        return counts(lines)

    def state(self) -> dict:
        """The whole page's data: the folder, its speakers, the programme, and every line (as last published)."""
        with self._lock:
            lines = [self._lines[i] for i in sorted(self._lines)]
            view = {k: v for k, v in self._folder.items() if k not in ("mix_file", "mix_gains")}
        return {
            **view,
            "mix": self._mix_url(),
            "media_ready": self.previews.ready.is_set(),
            "lines": lines,
            "counts": self.counts(),
            "status": self.status(),
        }

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

    def own_original(self, index: int) -> bytes | None:
        """The line's own span of the source as WAV bytes (decoded from the source once), or None; NotReady while
        the source is being decoded."""
        with self._lock:
            span = self._spans.get(index)
        return self.previews.own_original(span)

    def voice_clip(self, index: int, choice: int) -> bytes | None:
        """The clip of the source a line left without a voice may be voiced from (its ``choice``-th, as the folder
        offers them), or the file of a voice the user gave, as WAV bytes: what the editor hears before choosing;
        None for a line or choice not offered, or a voice given with no sample."""
        with self._lock:
            left = {u["index"]: u for u in self._folder.get("unvoiced", [])}
        offered = left.get(index, {})
        choices, clips = offered.get("choices", []), offered.get("clips", [])
        casting = self.project.casting
        summary = casting.cast.summary if casting is not None else None
        if not 0 <= choice < len(clips) or summary is None or summary.folder is None:
            return None
        if choices[choice].get("voice") == "given":
            voice = casting.voices.get(choices[choice]["speaker"])
            return None if voice is None or voice.audio is None else self.previews.given_voice(voice.audio)
        return self.previews.voice_clip(summary.folder / "clips" / f"{clips[choice]}.wav")

    def context(self, index: int) -> bytes | None:
        """The line in context (see ``Previews.context``) as the lines were last published; None for an unknown
        line; NotReady while the bed is being decoded."""
        with self._lock:
            line = self._lines.get(index)
            placed = [(view, self._media.get(i, {}).get("line")) for i, view in self._lines.items()]
        return None if line is None else self.previews.context(line, placed)

    def programme(self, span: Span) -> bytes:
        """The programme over ``span`` as the lines were last published (see ``Previews.programme``), as WAV bytes:
        what the page plays while the delivered mix is not the lines as they stand. The last few are kept, so
        that a player reading one in pieces (byte ranges) has it assembled once."""
        with self._lock:
            key = (span, self._generation)
            if key in self._heard:
                return self._heard[key]
            placed = [(view, self._media.get(i, {}).get("line")) for i, view in self._lines.items()]
            gains = self._folder.get("mix_gains", (0.0, None))
        data = self.previews.programme(span, placed, gains)
        with self._lock:
            self._heard = {k: v for k, v in self._heard.items() if k[1] == self._generation and k != key}
            while len(self._heard) >= 3:
                self._heard.pop(next(iter(self._heard)))
            self._heard[key] = data
        return data

    def picture(self):
        return self.previews.picture()

    def remedies(self, index: int, text: str | None = None, slot: tuple[float, float] | None = None) -> dict | None:
        """What would make the line fit its slot, each predicted as the plan would render it (``text``: words the
        editor typed, predicted in the line's voice instead; ``slot``: the line as it says now, in another slot),
        from what the worker last published; None for a line this folder does not have. An untimed script's lines
        have no slot to fit: refused, saying so."""
        with self._lock:
            known, fitting, view = index in self._lines, self._fittings.get(index), self._lines.get(index)
            others = [(view["index"], view["start"], view["end"]) for view in self._lines.values()]
        if not known:
            return None
        if fitting is None:
            raise OmnidubError(f"line {index} has no slot to fit (the script is untimed)")
        if slot is not None:
            from omnidub.script import Line
            from omnidub.timing import limits

            self._check_slot(index, {"start": slot[0], "end": slot[1]}, view)
            placed = [Line(i, "", "", *(slot if i == index else (s, e)), None) for i, s, e in others]
            limit = dict(zip([line.index for line in placed], limits(placed), strict=True))[index]
            return remedies.moved(fitting, *slot, limit)
        if text is not None:
            from omnidub.script import edited_text

            return remedies.preview(fitting, edited_text(text, f"line {index}"))
        return remedies.offer(fitting)

    def delivered(self, name: str):
        """A file of the folder the page may link to: one the ledger lists as omnidub's, or None."""
        return self.views.listed(name)
