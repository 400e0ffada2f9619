"""The review's verbs: a job's folders held open for an editor, and every decision made about their lines.

An editor holds its job's folders as a render does (one lock, ledger, journal and store) and renders every take
through the job's executor, so a retake is rendered, stored and assembled exactly as a render's line is. Each
decision (an edit, an approval, a take chosen, a note) is journaled by the project before it becomes the line's
state, and remembered here as the line was before it, so that :meth:`Editor.undo` can put it back. Every verb the
review page offers is a method here, listed in :data:`VERBS`; the web desk only queues them.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable

from omnidub.errors import OmnidubError
from omnidub.folder import QA_FILES
from omnidub.job import Job
from omnidub.project import Project
from omnidub.records import LineEntry, QaRecord
from omnidub.script import line_count, line_ranges
from omnidub.takes import current, failed_on_timing, judged_by_qa, take_of, takes_of

UNDO_DEPTH = 100  # decisions an editor can take back, newest first
# What an edit may change; each is put back by an undo.
EDITABLE = ("text", "speaker", "max_speedup", "borrow", "voice", "start", "end")


class Stale(OmnidubError):
    """The line changed since the editor heard or read it (another tab, or an action queued before)."""


@dataclass(frozen=True)
class Verb:
    """A verb the review offers: its method on :class:`Editor`, whether it is about one line, and how the page
    and the terminal name it while it runs ("a retake of line 3")."""

    method: str
    line: bool
    doing: str


VERBS = {
    "render": Verb("render", True, "rendering"),
    "retake": Verb("retake", True, "a retake of"),
    "edit": Verb("edit", True, "rendering the edit of"),
    "choose": Verb("choose", True, "another take of"),
    "approve": Verb("approve", True, "approving"),
    "mark": Verb("mark", True, "a note or flag on"),
    "translate": Verb("translate", True, "another translation of"),
    "voice": Verb("voice", True, "voicing"),  # a line the source left without a voice
    "undo": Verb("undo", False, "undoing the last decision"),  # also of one line: its last (see Editor.undo)
    "retake-failed": Verb("retake_failed", False, "retaking every failed line"),
    "approve-passed": Verb("approve_passed", False, "approving every passed line"),
    "deliver": Verb("deliver", False, "delivering"),
}
QUICK = ("approve", "mark", "approve-passed")  # verbs that render nothing: still run when a stop drops the queue


def describe(verb: str, index: int | None) -> str:
    """How a verb on a line is named while it runs ("a retake of line 3")."""
    doing = VERBS[verb].doing if verb in VERBS else verb.replace("-", " ")
    if verb == "undo":
        return f"undoing the last decision about line {index}" if index is not None else doing
    return f"{doing} line {index}" if index is not None else doing


def stale(verb: str, index: int, args: dict, key: str | None, text: str, speaker: str) -> str | None:
    """Why a decision about line ``index`` is about a line that changed since the editor heard or read it (an
    approval names the audio heard, ``key``; an edit the text it replaces, ``was``, and the speaker it moves the
    line from, ``was_speaker``), or None. A caller that names none acts on the line as it is."""
    if verb == "approve" and args.get("approved", True) and args.get("key", key) != key:
        return f"line {index} changed since you heard it: listen to it again, then approve"
    if verb == "edit" and "text" in args and args.get("was", text) != text:
        return f"line {index} changed since you read it: it now says {text!r}"
    if verb == "edit" and "speaker" in args and args.get("was_speaker", speaker) != speaker:
        return f"line {index} changed since you read it: it is {speaker}'s now"
    return None


@dataclass(frozen=True)
class Before:
    """A line as it was before a decision: what an undo puts back."""

    index: int
    key: str | None
    approved: bool
    edit: dict
    note: str | None
    look_again: bool
    voiced: bool = True  # False: the source had left it without a voice (an editor gave it one since)


@dataclass(frozen=True)
class Decision:
    """One decision an editor can take back: what it was, and each line it touched as it was before."""

    what: str
    lines: tuple[Before, ...]


@dataclass(frozen=True)
class Delivery:
    """What a delivery wrote: the files, and the lines it delivered that changed since the last one (new audio,
    an edit, an approval given or taken back, a note or flag)."""

    files: tuple[str, ...] = ()
    audio: tuple[int, ...] = ()
    edited: tuple[int, ...] = ()
    approved: tuple[int, ...] = ()
    marked: tuple[int, ...] = ()
    unvoiced: tuple[int, ...] = ()  # audio delivered before, left without a voice now (out of the mix)
    mixed: dict | None = None  # how the audio was made: patched where lines changed, or whole (and why)

    @property
    def lines(self) -> tuple[int, ...]:
        return tuple(sorted(set(self.audio + self.edited + self.approved + self.marked + self.unvoiced)))

    def said(self) -> str:
        """The delivery in one line, line counts first."""
        parts = [
            f"{label} on {len(lines)} ({line_ranges(list(lines))})"
            for label, lines in (
                ("new audio", self.audio),
                ("edits", self.edited),
                ("approvals", self.approved),
                ("notes or flags", self.marked),
                ("left without a voice", self.unvoiced),
            )
            if lines
        ]
        lines = (
            f"{len(self.lines)} line(s) changed since the last delivery: {'; '.join(parts)}"
            if parts
            else ("no line changed since the last delivery")
        )
        mixed = self.mixed or {}
        if mixed.get("how") == "patched":
            spans = len(mixed["spans"])
            lines += f"; the audio patched over {spans} span(s), {len(mixed['rewritten'])} file(s) rewritten"
        elif mixed.get("how") == "whole":
            lines += f"; the audio made whole ({mixed['why']})"
        return f"{lines}; {len(self.files)} file(s) written"


@dataclass
class _Held:
    """What an editor knows of a held project beyond the project itself."""

    checked: bool = False  # the folder held QA's reports when it was opened: a delivery writes them again


class Editor:
    """What an editor does to held projects: :meth:`hold`, then the verbs of :data:`VERBS` (each through
    :meth:`run`), :meth:`deliver`; QA hears each take at once (:meth:`hear`)."""

    def __init__(self, job: Job, *, working: Callable[[str], None] = lambda text: None):
        self.job = job
        self.working = working  # told what a long verb is on now ("a retake of line 3 (2 of 9 failed lines)")
        self.history: list[Decision] = []  # newest last
        self._held: dict[int, _Held] = {}
        self._cancels = 0  # how often a long verb was asked to stop: it stops at its next line once this grows

    # -- holding ---------------------------------------------------------------------------------------------
    def hold(self, doing: str = "omnidub review") -> None:
        """Claim every folder, pin, prepare the voices and place the stored lines, rendering nothing: a review holds
        its folder as a render does (one lock, ledger, journal and store) until the job is closed. Each line's take
        takes the verdict qa.json gave its audio."""
        self.job.open(doing)
        for project in self.job.projects:
            project.prepare()
            project.keep_as_rendered()
            project.adopt_assembly()
            checked = project.folder.status(QA_FILES[0]) == "ours"
            self._held[id(project)] = _Held(checked=checked)
            if checked:
                self._adopt_qa_verdicts(project)

    def _adopt_qa_verdicts(self, project: Project) -> None:
        """A line QA judged with the audio it still has keeps that verdict as its take's (qa.json is removed once
        the audio changes, so a verdict lives on in the line's takes)."""
        record = QaRecord.read(project.out_dir)
        judged = record.lines if record is not None else {}
        for entry in project.entries:
            line = judged.get(entry.index)
            if not entry.done or not entry.sha256 or line is None or line.get("sha256") != entry.sha256:
                continue
            takes = takes_of(entry)
            adopted = tuple(judged_by_qa(t, line) if t.key == entry.key else t for t in takes)
            if adopted != takes:
                project.note_verdicts(entry, adopted)

    def outstanding(self, project: Project) -> str | None:
        """What a stop must deliver, in words, or None when the folder's outputs and manifest are the lines as
        they stand: decided from the outputs themselves (the assembly against the lines' audio) and the journal."""
        if _assembled(project) is None:
            return "the outputs are not the lines as they stand"
        if project.journal.pending():
            return "decisions are saved in the journal, not yet in the manifest"
        return None

    def cut_short(self, project: Project) -> bool:
        """Whether a delivery (or a render's assembly) was cut short: the manifest records no assembly while every
        line has audio. Opening the folder finishes it."""
        return project.last.assembly is None and _assembled(project) is None and all(e.done for e in project.entries)

    # -- the verbs -------------------------------------------------------------------------------------------
    def run(self, project: Project, verb: str, index: int | None = None, args: dict | None = None) -> list[int]:
        """Run one verb of :data:`VERBS` (checked against the line as it is now: :class:`Stale` when it changed
        since the editor heard or read it); returns the lines it may have changed."""
        if verb not in VERBS:
            raise OmnidubError(f"unknown action {verb!r}")
        args = dict(args or {})
        if verb == "voice":  # a line with no entry yet: the source left it without a voice
            return self.voice(project, index, **args)
        if VERBS[verb].line:
            entry = project.line(index)
            why = stale(verb, index, args, entry.key if entry.done else None, entry.text, entry.speaker)
            if why:
                raise Stale(why)
            return getattr(self, VERBS[verb].method)(project, index, **args)
        if verb == "undo":
            return self.undo(project, index)
        if index is not None:
            raise OmnidubError(f"{verb} is for the whole folder, not for one line")
        if verb == "deliver":
            self.deliver(project, **args)
            return [e.index for e in project.entries]
        return getattr(self, VERBS[verb].method)(project, **args)

    def render(self, project: Project, index: int) -> list[int]:
        """Render a line that has no audio for what it says now."""
        self.render_lines(project, [index])
        return [e.index for e in project.entries]  # a replan may move any line (an untimed script's starts)

    def retake(self, project: Project, index: int) -> list[int]:
        """Render the line again with a seed none of its takes used, QA it, and make it the line's audio (the take
        and every take before it, journaled at once); any earlier take :meth:`choose` makes the line's again."""
        entry = project.line(index)
        if not entry.done:
            return self.render(project, index)
        self._remember(project, describe("retake", index), [index])
        take = project.take(entry)
        if take.status == "pending":
            self.job.render_takes([(project, take)])
        if not take.done:
            raise OmnidubError(f"line {index}: the take could not be rendered ({take.error or 'no audio'})")
        project.adopt(entry, take, takes_of(entry) + (self._judged(project, take),))
        return [index]

    def edit(self, project: Project, index: int, *, was=None, was_speaker=None, **changes) -> list[int]:
        """Change the line as an editor asks (see :meth:`Project.set_edit`; ``was``/``was_speaker``: the text and
        speaker the editor saw, checked by :meth:`run`), plan it again and render it; its earlier takes stay."""
        self._remember(project, describe("edit", index), [index])
        return self._edit(project, index, **changes)

    def _edit(self, project: Project, index: int, **changes) -> list[int]:
        takes = takes_of(project.line(index))
        project.set_edit(index, **changes)
        project.replan()
        if not project.has_line(index):  # its clip chosen no more: the source left it without a voice again
            return [e.index for e in project.entries] + [index]
        project.keep_attempts(project.line(index), takes)
        return self.render(project, index)

    def choose(self, project: Project, index: int, take: int) -> list[int]:
        """Make take ``take`` (1 is the oldest) the line's audio again, with the text and changes it was made with."""
        self._remember(project, describe("choose", index), [index])
        self._choose(project, index, take)
        return [e.index for e in project.entries]

    def _choose(self, project: Project, index: int, number: int) -> None:
        entry = project.line(index)
        takes = takes_of(entry)
        if isinstance(number, bool) or not isinstance(number, int) or not 1 <= number <= len(takes):
            raise OmnidubError(f"line {index} has no take {number} (it has {len(takes)})")
        chosen = takes[number - 1]
        if chosen.key == entry.key:
            return
        wanted = chosen.edit or {}
        if (entry.edit or {}) != wanted:
            if wanted and wanted.get("from") != project.input_text(index):
                raise OmnidubError(f"line {index}: take {number} was made over text the input no longer has")
            project.set_edit(
                index,
                text=wanted.get("text", project.input_text(index)),
                max_speedup=wanted.get("max_speedup"),
                borrow=wanted.get("borrow"),
                speaker=wanted.get("speaker", project.input_speaker(index)),
                **_slot_of(project, index, wanted),
                **({"voice": wanted.get("voice")} if project.cast is not None else {}),
            )
            project.replan()
            entry = project.line(index)
        take = project.take(entry, chosen.seed)
        if take.status == "pending":  # the store no longer has it: rendered again, the same seed, the same audio
            self.job.render_takes([(project, take)])
        if not take.done:
            raise OmnidubError(f"line {index}: take {number} could not be rendered again ({take.error or 'no audio'})")
        known = any(t.key == take.key for t in takes)
        project.adopt(entry, take, takes if known else takes + (self._judged(project, take),))

    def approve(self, project: Project, index: int, approved: bool = True, key: str | None = None) -> list[int]:
        """Record that the editor approved the line's audio (``key``: the audio they heard; other audio is
        refused), or took the approval back."""
        self._remember(project, describe("approve", index), [index])
        project.approve(index, approved, heard=key)
        return [index]

    def mark(self, project: Project, index: int, note: str | None = None, look_again: bool | None = None) -> list[int]:
        """Keep the editor's note on a line (empty: none) and whether to look at it again."""
        self._remember(project, describe("mark", index), [index])
        project.mark(index, note=note, look_again=look_again)
        return [index]

    def translate(self, project: Project, index: int) -> list[int]:
        """Make the line say omnidub translate's next candidate for it that passed its checks (an edit like any
        other); refused, saying why, when the line is not the one translate.json records at its time, or no other
        candidate passed."""
        entry = project.line(index)
        found, why = project.translated(entry)
        if found is None:
            raise OmnidubError(f"line {index}: {why}")
        other, why = project.translation.again(found, entry.text)
        if other is None:
            raise OmnidubError(f"line {index}: {why}")
        self._remember(project, describe("translate", index), [index])
        return self._edit(project, index, text=other)

    def voice(self, project: Project, index: int, voice: str, speaker: str | None = None) -> list[int]:
        """Voice a line the source left without one from the clip the editor chose having heard it ("line": its own
        speech; "speaker": the clip of the voice ``speaker``) and render it; an undo leaves it without a voice
        again."""
        self._remember(project, describe("voice", index), [index])
        project.give_voice(index, voice, speaker)
        self.render(project, index)
        return [e.index for e in project.entries]

    def retake_failed(self, project: Project) -> list[int]:
        """A retake of every line whose take in use failed QA, one line after another; :meth:`cancel` stops it
        at its next line. A line that failed on timing alone is skipped, and said so: a retake keeps its length."""
        takes = [(e.index, current(e) or take_of(e)) for e in project.entries]
        timing = [index for index, take in takes if failed_on_timing(take)]
        failed = [index for index, take in takes if take.verdict == "failed" and index not in timing]
        skipped = (
            f"skipped {line_count(len(timing))} that failed on timing ({line_ranges(timing)}): a retake keeps their "
            "length; fix their timing (Fix timing, on each line)"
            if timing
            else ""
        )
        if not failed:
            self.job.listener.note(skipped or "no line failed QA: nothing to retake")
            return []
        asked = self._cancels
        for k, index in enumerate(failed, 1):
            if self._cancels != asked:
                said = f"cancelled after {k - 1} of {len(failed)} retakes"
                self.job.listener.note(f"{said}; {skipped}" if skipped else said)
                return failed
            self.working(f"a retake of line {index} ({k} of {len(failed)} failed lines)")
            self.retake(project, index)
        if skipped:
            self.job.listener.note(f"retook {line_count(len(failed))}; {skipped}")
        return failed

    def approve_passed(self, project: Project) -> list[int]:
        """Approve every line whose take in use QA passed (an unchecked line is never among them)."""
        passed = [e.index for e in project.entries if not e.approved and (current(e) or take_of(e)).verdict == "passed"]
        if passed:
            self._remember(project, describe("approve-passed", None), passed)
        for index in passed:
            project.approve(index, True)
        return passed

    def cancel(self) -> None:
        """Stop a long verb (a retake of every failed line) at its next line."""
        self._cancels += 1

    # -- undo ------------------------------------------------------------------------------------------------
    def _remember(self, project: Project, what: str, indices) -> None:
        """Keep the lines a decision is about to change as they are, for an undo."""
        self.history.append(Decision(what, tuple(_before(project, index) for index in indices)))
        del self.history[:-UNDO_DEPTH]

    def undo(self, project: Project, index: int | None = None) -> list[int]:
        """Take back the last decision (``index``: the last decision about that line, and only for that line) that
        changed something; says which ("undone on line 3: approving line 3")."""
        for k in range(len(self.history) - 1, -1, -1):
            decision = self.history[k]
            lines = [b for b in decision.lines if index is None or b.index == index]
            if not lines:
                continue
            if all(self._as_it_was(project, before) for before in lines):
                del self.history[k]  # a decision that changed nothing (refused, or made twice): the one before it
                continue
            rest = tuple(b for b in decision.lines if b not in lines)
            if rest:
                self.history[k] = replace(decision, lines=rest)
            else:
                del self.history[k]
            touched: list[int] = []
            for before in lines:
                touched += self._restore(project, before)
            where = f" on line {index}" if index is not None else ""
            self.job.listener.note(f"undone{where}: {decision.what}")
            return touched
        raise OmnidubError(f"nothing to undo on line {index}" if index is not None else "nothing to undo")

    def _as_it_was(self, project: Project, before: Before) -> bool:
        return before == _before(project, before.index)

    def _restore(self, project: Project, before: Before) -> list[int]:
        """Put a line back as it was before a decision: its edit, then its take, then its approval, note and flag."""
        index = before.index
        if not before.voiced:
            project.take_voice_back(index)
            return [e.index for e in project.entries] + [index]
        now, old = project.line(index).edit or {}, before.edit
        defaults = {"text": project.input_text(index), "speaker": project.input_speaker(index), "borrow": False}
        if project.script.timed:
            defaults["start"], defaults["end"] = project.input_slot(index)
        changes = {name: old.get(name, defaults.get(name)) for name in EDITABLE if old.get(name) != now.get(name)}
        touched = [index]
        if changes:
            self._edit(project, index, **changes)
            touched = [e.index for e in project.entries] + [index]
        if not project.has_line(index):  # left without a voice again: the line has nothing more to put back
            return touched
        entry = project.line(index)
        if before.key is not None and entry.key != before.key:
            numbers = [n for n, take in enumerate(takes_of(entry), 1) if take.key == before.key]
            if numbers:
                self._choose(project, index, numbers[0])
        entry = project.line(index)
        if entry.approved != before.approved and (entry.done or not before.approved):
            project.approve(index, before.approved)
        if (entry.note, entry.look_again) != (before.note, before.look_again):
            project.mark(index, note=before.note or "", look_again=before.look_again)
        return touched

    # -- rendering and hearing -------------------------------------------------------------------------------
    def render_lines(self, project: Project, indices) -> list[LineEntry]:
        """Render the lines that have no audio for what they say now, through the executor, and QA each line at
        once; returns their entries."""
        entries = [project.line(i) for i in indices]
        pending = [e for e in entries if not e.done]
        if pending:
            self.job.render_pending([project], {id(project): pending})
        for index in indices:
            entry = project.line(index)
            if entry.done:
                takes = tuple(t for t in takes_of(entry) if t.key != entry.key)
                project.keep_attempts(entry, takes + (self._judged(project, entry),))
        return [project.line(i) for i in indices]

    def hear(self, project: Project, entry: LineEntry):
        """QA of one line's audio (or a take's) as it is now; None when no ASR model is here to hear it
        (:meth:`unheard` says why)."""
        if self.unheard(project) is not None:
            return None
        [check] = self.job.hear(project, [entry])
        return check

    def unheard(self, project: Project) -> str | None:
        """Why QA cannot hear a take here (no ASR model for the project's lines), or None."""
        asr = self.job.engine.judge(project.options.language)
        return None if asr.available() else f"not checked: no ASR model ({asr.name}) here to hear it (omnidub models)"

    def _judged(self, project: Project, entry: LineEntry):
        """The audio ``entry`` names (a line, or a take) as a take, with QA's verdict on it (or why there is none)."""
        return take_of(entry, self.hear(project, entry), self.unheard(project))

    # -- delivering ------------------------------------------------------------------------------------------
    def deliver(self, project: Project) -> Delivery:
        """Assemble the project's outputs from the lines as they stand (the same assembly as a render's);
        refused while a line that had audio at the last delivery has none now (it would leave the mix and the
        subtitles). In a folder QA had checked, QA's reports that the assembly removed (the audio changed) are
        written again, of the lines as they stand: what the ASR heard before is kept, so only audio no check has
        heard is transcribed. Returns what it delivered."""
        had = {e.index for e in project.recorded if e.done}
        lost = [e for e in project.entries if not e.done and e.index in had]
        if lost:
            raise OmnidubError(
                f"line(s) {line_ranges([e.index for e in lost])} have no audio now ({project.missing(lost[0])}); "
                "delivering would drop them from the mix and the subtitles: render them first"
            )
        changed = project.since_delivery()
        # A line voiced here has its clip beside it, as a render places every line's (only theirs: a render's are
        # there already, and each is read to compare).
        project.place_references(project.voiced_here())
        project.reassemble()
        if self._held.get(id(project), _Held()).checked:
            self._check_again(project)
        files = tuple(sorted(project.generation.files)) if project.generation else ()
        files += tuple(name for name in QA_FILES if project.folder.status(name) == "ours")
        generation = project.generation
        mixed = generation.parts["delivery"].get("audio") if generation and not generation.reused else None
        delivery = Delivery(files, **changed, mixed=mixed)
        self.job.listener.delivered(delivery)
        return delivery

    def _check_again(self, project: Project) -> None:
        # Written again where the assembly removed them (the audio changed); one someone changed is moved aside.
        if self.job.qa is None or project.folder.status(QA_FILES[0]) != "absent":
            return
        if self.unheard(project) is not None:
            self.job.listener.note(
                f"{' and '.join(QA_FILES)} were removed, since the audio changed; no ASR model "
                f"({self.job.engine.judge(project.options.language).name}) here to check it again (omnidub qa "
                "--asr-model NAME|PATH; omnidub models lists those here)"
            )
            return
        self.job.listener.step("checking the delivered lines (only audio not heard before is transcribed)")
        self.job.check([project])


def _before(project: Project, index: int) -> Before:
    """Line ``index`` as it is now, as an undo puts it back; a line the source left without a voice has no audio,
    approval, edit, note or flag."""
    if not project.has_line(index):
        return Before(index, None, False, {}, None, False, voiced=False)
    entry = project.line(index)
    return Before(
        index, entry.key if entry.done else None, entry.approved, dict(entry.edit or {}), entry.note, entry.look_again
    )


def _slot_of(project: Project, index: int, edit: dict) -> dict:
    """The slot an edit gives a line (the input's where it moved none), as set_edit takes it; none when untimed."""
    if not project.script.timed:
        return {}
    start, end = project.input_slot(index)
    return {"start": edit.get("start", start), "end": edit.get("end", end)}


def _assembled(project: Project):
    """The project's outputs while they are the lines as they stand, else None (also when a file the assembly's key
    reads went away: then they cannot be these lines')."""
    try:
        return project.assembled()
    except OSError:
        return None
