"""One input rendered into one output folder: its cast, plan, stored lines, outputs and manifest.

A project holds the state of one input and is the only thing that writes it; helpers it calls take data and
return data. Each kind of state has its own owner underneath: the folder (``folder``: lock, ledger, what may be
touched), the line audio (``store``), the plan (``plan``: pure), the outputs (``assembly``), the line records
(``journal``) and the last render as recorded (``records``). The job (``job``) drives projects through a render.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from omnidub.assembly import Assembly, Generation
from omnidub.backends.base import Request
from omnidub.casting import (
    Casting,
    cast_from_source,
    left_without_voice,
    reference_clips,
    reference_files,
    reference_records,
    source_files,
    voice_refused,
)
from omnidub.errors import OmnidubError
from omnidub.folder import QA_FILES, OutputFolder
from omnidub.journal import JOURNAL, Journal
from omnidub.keys import line_seed
from omnidub.manifest import RenderRecord, compose
from omnidub.names import file_names
from omnidub.outputs.deliver import DeliveryOptions, check
from omnidub.outputs.mix import Placement
from omnidub.pace import unavailable as pace_unavailable
from omnidub.plan import KeyContext, Plan, Speaker, assign_languages, key_for, language_note, plan_lines, segment_name
from omnidub.progress import Listener, Summary
from omnidub.records import MANIFEST, LastRender, LineEntry, TranslationRecord, same_slot, verdicts
from omnidub.scheduler import Failure, Outcome
from omnidub.script import Script, line_ranges
from omnidub.source.cast import SourceOptions
from omnidub.speakers import prepare_speakers, prompt_cache_dir
from omnidub.store import LineStore, seconds_of
from omnidub.timing import Fit
from omnidub.voices import Voice, check_cast, check_reference, misspelt_speakers, voice_for

# How an editor voiced a line (an edit's "voice"): its own clip, its speaker's clip, or (a line the source left
# without a voice) the voice the user gave a speaker.
VOICE_CHOICES = ("line", "speaker", "given")
# What a line's journaled decisions change: its audio and take, approval, edit, note and flag.
DECIDED = ("key", "seed", "duration", "sha256", "approved", "flags", "attempts", "edit", "status", "note", "look_again")


def _choices(edits: dict[int, dict]) -> tuple[dict[int, str], dict[int, str]]:
    """The clip each edited line is voiced from (see VOICE_CHOICES), and the speaker each was moved to."""
    chosen = {i: edit["voice"] for i, edit in edits.items() if edit.get("voice") in VOICE_CHOICES}
    moved = {i: edit["speaker"] for i, edit in edits.items() if edit.get("speaker")}
    return chosen, moved


@dataclass(frozen=True)
class ProjectOptions:
    """How one input is rendered besides the engine's model and preset (the render flags of the same names)."""

    fmt: str = "wav"
    force: bool = False  # render every (selected) line again
    only: frozenset[int] | None = None  # --only: the lines this run may render
    delivery: DeliveryOptions = DeliveryOptions()
    cache_dir: Path | None = None  # a line cache shared with other inputs
    allow_other_files: bool = False  # the folder may hold files omnidub did not write
    source: SourceOptions | None = None  # voices cut from the original video or audio
    language: str | None = None  # --language: the language the input was read in


class Project:
    """One input and its output folder, from plan to manifest."""

    def __init__(
        self,
        engine,
        script: Script,
        voices: dict[str, Voice],
        out_dir: Path,
        *,
        input_path: Path,
        options: ProjectOptions = ProjectOptions(),
        listener: Listener | None = None,
        predicted=(),
    ):
        if options.source is not None:
            options.source.check()  # the cast is known once the source is analysed (see casting)
        else:
            check_cast(script.lines, voices, input_path)  # every speaker needs a voice before anything heavy starts
        self.engine = engine
        self.preset = engine.preset
        self.dub = script  # as read; the source may name its speakers
        self.given_voices = voices
        self.script = script if options.source is not None else assign_languages(script, voices)
        self.voices = voices
        self.casting: Casting | None = None
        self.voice_checks: dict[int, dict] = {}  # dubbed line -> the voice check's verdict (source, auto)
        self.line_speakers: dict[int, Speaker] = {}  # lines cloned from their own original line's clip
        self.input_path = Path(input_path)
        self.options = replace(options, delivery=replace(options.delivery, fmt=options.fmt))
        self.asked = self.options  # as the user asked (the source may add a bed), for the manifest's request
        self.probed = check(self.options.delivery)  # every delivery input opened before any model loads
        self.listener = listener or Listener()
        self.folder = OutputFolder(out_dir)
        self.store = LineStore(self.folder, options.cache_dir)
        self.journal = Journal(self.folder.path / JOURNAL)
        self._make_assembly()
        self._last: LastRender | None = None
        self._edits: dict[int, dict] | None = None  # line -> the editor's changes (read from the last render once)
        self._recorded: tuple[LineEntry, ...] | None = None  # the last render's records, numbered as lines are now
        self._gone: tuple[LineEntry, ...] = ()  # its records of lines the input no longer has (their old numbers)
        self._delivered: tuple[LineEntry, ...] = ()  # the manifest's own records, numbered as lines are now
        self._translation: TranslationRecord | None | bool = False  # translate.json beside the input (False: unread)
        self._approved_before: set[int] = set()
        self.stopping = False
        self.entries: list[LineEntry] = []
        self.targets = []
        self.speakers: dict[str, Speaker] = {}
        self.names: dict[str, str] = {}
        self.program: float | None = None
        self.pace = ""  # the model that predicted the lines' natural lengths (omnidub.pace.model)
        self.planned: tuple[dict, dict] | None = None  # what the keys say renders: checked once the model loads
        self.generation: Generation | None = None
        self._planned_length = 0.0  # the programme's length as planned (assembly may make it longer); keys use it
        self.notes: list[str] = []  # said once on the console, and kept in the manifest
        self.left_out: list[int] = []  # lines --only leaves without audio
        # A dub's translation: each line's predicted length and pace, by the line's words and slot.
        self.predicted = {p.identity: p for p in predicted}

    @property
    def out_dir(self) -> Path:
        return self.folder.path

    @property
    def cast(self):
        """The source's cast (``render --source``), once the source is analysed."""
        return self.casting.cast if self.casting is not None else None

    @property
    def last(self) -> LastRender:
        """What this folder's last render recorded, read once (again under the lock; then from what this project
        writes)."""
        if self._last is None:
            self._last = self.folder.last_render()
        return self._last

    @property
    def edits(self) -> dict[int, dict]:
        """Each line's changes made in review (its text, speed cap, gap, clip, voice), as the last render recorded
        them and as made since, by the line's number in the input now."""
        if self._edits is None:
            latest = {e.index: e for e in self.recorded}
            self._edits = {i: dict(e.edit) for i, e in latest.items() if isinstance(e.edit, dict) and e.edit}
            self._approved_before = {i for i, e in latest.items() if e.approved}
        return self._edits

    @property
    def recorded(self) -> tuple[LineEntry, ...]:
        """The last render's line records, each numbered as its line is in the input now: a line is known by its
        slot and its text together, so a cue inserted, deleted or moved elsewhere moves its number, and its edit,
        approval, note and takes follow it (see ``script.follow``). Records of lines the input no longer has are
        left out (their keyed audio still counts)."""
        if self._recorded is None:
            # The manifest's records and the journal's are numbered apart: a run that stopped may have journaled
            # under another numbering than the manifest's.
            kept, gone, shifted = [], [], set()
            for records in (self.last.entries, self.last.journal):
                moved = self._renumbering(records)
                shifted |= {new for old, new in moved.items() if old != new}
                kept.append(tuple(replace(e, index=moved[e.index]) for e in records if e.index in moved))
                gone += [e for e in records if e.index not in moved]
            self._delivered, self._recorded, self._gone = kept[0], kept[0] + kept[1], tuple(gone)
            if shifted:
                self.note(
                    f"cues were inserted, removed or moved since the last render: line(s) "
                    f"{line_ranges(sorted(shifted))} moved, and their edits, approvals, notes and takes moved with them"
                )
        return self._recorded

    def _renumbering(self, records) -> dict[int, int]:
        """Each recorded line's number now (see :attr:`recorded`)."""
        from omnidub.script import follow

        latest = {e.index: e for e in records}
        before = [(i, (e.edit or {}).get("from", e.text), *_input_slot(e)) for i, e in sorted(latest.items())]
        now = [(line.index, line.text, line.start, line.end) for line in self.dub.lines]
        return follow(before, now)

    def since_delivery(self) -> dict[str, tuple[int, ...]]:
        """The lines that changed since the manifest was last written (a delivery, a render), by what changed:
        ``audio``, ``edited`` (text, speaker, speed cap, gap, clip), ``approved`` (given or taken back),
        ``marked`` (a note or the look-again flag), ``unvoiced`` (a line with audio then, left without a voice now:
        an editor's voice for it taken back)."""
        _ = self.recorded
        was = {e.index: e for e in self._delivered}
        found: dict[str, list[int]] = {"audio": [], "edited": [], "approved": [], "marked": []}
        left = self.casting.unvoiced if self.casting is not None else {}
        found["unvoiced"] = [i for i, e in sorted(was.items()) if e.done and i in left]
        for entry in self.entries:
            old = was.get(entry.index)
            if old is None:
                if entry.done:
                    found["audio"].append(entry.index)
                continue
            for name, now, then in (
                ("audio", entry.sha256 if entry.done else None, old.sha256 if old.done else None),
                ("edited", entry.edit or {}, old.edit or {}),
                ("approved", entry.approved, old.approved),
                ("marked", (entry.note, entry.look_again), (old.note, old.look_again)),
            ):
                if now != then:
                    found[name].append(entry.index)
        return {name: tuple(lines) for name, lines in found.items()}

    def translated(self, entry: LineEntry) -> tuple[dict | None, str | None]:
        """omnidub translate's record of the line (found by its slot and the input's text for it, never by its
        number) and None; or None and why it has none."""
        record = self.translation
        if record is None:
            return None, "omnidub translate made no record of this input's translation"
        return record.find(entry.start, entry.end, self.input_text(entry.index), timed=self.script.timed)

    @property
    def translation(self) -> TranslationRecord | None:
        """omnidub translate's record of the translation this input is (translate.json beside it, as omnidub wrote
        it), read once; None when it is not one."""
        if self._translation is False:
            from omnidub.folder import read_translation

            self._translation = read_translation(self.input_path)
        return self._translation

    def _make_assembly(self) -> None:
        video = self.options.delivery.video
        self.assembly = Assembly(
            self.folder, self.options.delivery, self.probed, name=Path(video).stem if video else self.input_path.stem
        )

    @property
    def estimated(self) -> bool:
        """True when some speaker's pace is a guess from the whole reference (its prompt is not prepared yet)."""
        return any(s.estimated for s in self.speakers.values())

    def selected(self, index: int) -> bool:
        """Whether this run may render the line (``--only``)."""
        return self.options.only is None or index in self.options.only

    def request_stop(self) -> None:
        """Finish the lines in flight, then stop (the CLI calls this on Ctrl-C)."""
        self.stopping = True

    def note(self, text: str, *, say: bool = True) -> None:
        """Keep ``text`` for the manifest, and say it once (``say``: now, on the console)."""
        if text not in self.notes:
            self.notes.append(text)
            if say:
                self.listener.note(text)

    # -- the cast ------------------------------------------------------------------------------------------
    def _cast(self) -> None:
        """Take the voices (and per-line clips) from the source; the user's voices win (a source not analysed yet
        is analysed now, into omnidub's cache, which every later run reuses)."""
        if not self.voice_checks:
            self.voice_checks = verdicts(self.recorded)
        chosen, moved = _choices(self.edits)
        casting = cast_from_source(
            self.engine,
            self.options.source,
            self.dub,
            self.given_voices,
            self.voice_checks,
            input_path=self.input_path,
            has_bed=self.options.delivery.bed is not None,
            step=self.listener.step,
            chosen=chosen,
            moved=moved,
            progress=self.listener.transcribing,
        )
        for note in casting.notes:
            self.note(note)
        self.casting, self.voices, self.script = casting, casting.voices, casting.script
        if casting.bed is not None:  # the source's accompaniment, when the user gave no bed
            self.options = replace(self.options, delivery=replace(self.options.delivery, bed=casting.bed))
            self.probed = check(self.options.delivery)
            self._make_assembly()

    def _check_without_model(self) -> None:
        """What a render would refuse, found before any model (a plan checks what a render checks)."""
        for note in self.probed.notes:
            self.note(note)
        for note in misspelt_speakers(self.script.lines, self.voices):
            self.note(note)
        asr = self.engine.asr().available()
        for voice in dict.fromkeys(voice_for(line.speaker, self.voices) for line in self.script.lines):
            for note in check_reference(voice, options=self.preset.voice, asr_available=asr):
                self.note(f"{voice.speaker}: {note}")

    # -- planning ------------------------------------------------------------------------------------------
    def plan(self, *, prepare: bool = False) -> list[LineEntry]:
        """Every line's entry: timing, key and whether its audio is stored. With ``prepare``, voice prompts not
        cached yet are prepared (ASR, model) and damaged cache entries repaired; without it nothing in the output
        folder changes, and unprepared voices are paced from their whole reference (a dry run)."""
        if not prepare:
            if not self.folder.lock.held:  # a dry run: the folder the render would refuse is refused here too
                self.folder.check(self.input_path, allow_other_files=self.options.allow_other_files)
            if self.options.source is None:
                self._check_without_model()  # what a render would refuse is said first
            self.engine.plan_source(self.note)
            if self.options.source is not None and self.casting is None:
                self._cast()
                self._check_without_model()
        script, fits = self._edited()
        cast = prepare_speakers(
            self.engine,
            script,
            self.voices,
            self.cast.lines if self.cast else None,
            prepare=prepare,
            step=self.listener.step,
            said=tuple(self.notes),
        )
        for note in cast.notes:
            self.note(note, say=prepare)
        self.speakers, self.line_speakers = cast.speakers, cast.lines
        said = language_note(self.script, self.voices)  # the cast is known by now (with --source too)
        if said:
            self.note(said)
        self.names = file_names(self.speakers, self.last.file_names)
        self.planned = self.engine.keyed_by
        keys = KeyContext(*self.planned, self.preset.seed)
        made: Plan = plan_lines(
            script,
            self.speakers,
            self.names,
            timing=self.preset.timing,
            keys=keys,
            where=str(self.input_path),
            lines=self.line_speakers,
            fits=fits,
        )
        marks = self._marks()
        said = self._predicted()
        for entry in made.entries:
            entry.edit = self.edits.get(entry.index)
            entry.note, entry.look_again = marks.get(entry.index, (None, False))
            entry.predicted = said.get(entry.index)
        if self.cast is not None:
            self._record_references(made.entries)
        self.targets, self.program, self.pace = made.targets, made.program, made.pace
        fallback = pace_unavailable()
        if fallback:
            self.note(fallback)
        self._planned_length = made.program or 0.0
        # The lines' own records (numbered as the lines are now), then this run's; every record's audio counts by key.
        records = self.recorded + tuple(e for e in self.entries if e.done)
        anyone = self.last.records + records
        # The latest record of each line's own base key first (its take in use, its approval), else of the base key
        # alone (the same words elsewhere); of each key, its hash and segment.
        by_base = {e.base_key: e for e in anyone if e.done} | {(e.index, e.base_key): e for e in records if e.done}
        by_key = {e.key: e for e in anyone if e.done} | {(e.index, e.key): e for e in records if e.done}
        self.entries = [self._reuse(e, by_base, by_key, prepare) for e in made.entries]
        self._keep_unasked(records, by_base, by_key, prepare)
        unapproved = sorted(self._approved_before - {e.index for e in self.entries if e.approved})
        if unapproved:
            self.note(
                f"line(s) {line_ranges(unapproved)} had been approved, but render again now (their text, voice or "
                "settings changed, or they were asked for again): approve them again once heard"
            )
            self._approved_before -= set(unapproved)
        late = self.probed.late_lines([(e.index, e.start + e.target) for e in self.entries])
        if late:
            self.note(late)
        return self.entries

    def _predicted(self) -> dict[int, dict]:
        """Each input line's prediction from its translation (matched by its words and slot, as read from the
        input: an edit in review renders other words, whose length the translation never predicted)."""
        if not self.predicted:
            return {}
        from omnidub.translate.run import identity

        found = {}
        for line in self.script.lines:
            made = self.predicted.get(identity(line.text, line.start, line.end))
            if made is not None and line.index not in self.edits:
                found[line.index] = made.to_json()
        return found

    def _keep_unasked(self, records, by_base: dict, by_key: dict, repair: bool) -> None:
        """``--only``: a line it does not ask for keeps the audio it has, even when its text, timing or voice
        changed since: its last record stands, flagged ``stale``, until a run asks for it again. A line gone from
        the script (or whose speaker is) is said: its audio stays on disk (see _remove_stale), out of the mix."""
        if self.options.only is None:
            return
        at = {entry.index: k for k, entry in enumerate(self.entries)}
        stale, held = [], []
        gone = [(None, e) for e in {e.index: e for e in self._gone if e.done}.values()]  # by their old numbers
        for index, old in [*{e.index: e for e in records if e.done}.items(), *gone]:
            k = at.get(index) if index is not None else None
            if k is not None and (self.entries[k].done or self.selected(index)):
                continue
            kept = self._reuse(
                replace(
                    old, status="pending", flags=[f for f in old.flags if f != "edited"], render_seconds=0.0, error=None
                ),
                by_base,
                by_key,
                repair,
            )
            if not kept.done:
                continue  # its audio is gone: nothing to keep
            if k is None or old.speaker not in self.speakers:
                held.append(old.index)
                continue
            if "stale" not in kept.flags:
                kept.flags.append("stale")
            self.entries[k] = kept
            stale.append(index)
        if stale:
            self.note(
                f"--only: line(s) {line_ranges(stale)} changed since their audio was rendered; they keep that "
                f"audio (flagged stale) in the stems and mix: --only {line_ranges(stale).replace(' ', '')} "
                "or a run without --only renders them anew"
            )
        if held:
            self.note(
                f"--only: line(s) {line_ranges(sorted(set(held)))} are gone from the script, or their speaker is; "
                "their audio is kept on disk, out of the stems and mix, until a run without --only"
            )

    def _edited(self) -> tuple[Script, dict[int, Fit]]:
        """The script with the editor's changes applied, and the lines' own fitting rules. A change made over text
        the input no longer has is dropped: the input's newer text wins, and the note says so."""
        lines, fits = [], {}
        voices = {line.speaker for line in self.script.lines}  # a line is moved only to a voice the input has
        for line in self.script.lines:
            edit = self.edits.get(line.index)
            if edit is not None and edit.get("from") != line.text:
                self.note(
                    f"line {line.index} ({_quoted(line.text)}): its text in {self.input_path.name} changed since it "
                    "was edited in review; the input's text is used"
                )
                del self.edits[line.index]
                edit = None
            if edit is not None and edit.get("speaker") is not None and edit["speaker"] not in voices:
                self.note(
                    f"line {line.index} ({_quoted(line.text)}): it was moved to {edit['speaker']} in review, a voice "
                    f"this render no longer has; it stays {line.speaker}'s"
                )
                edit = {k: v for k, v in edit.items() if k != "speaker"}
                if set(edit) == {"from"}:
                    del self.edits[line.index]
                    edit = None
                else:
                    self.edits[line.index] = edit
            if edit is not None and "at" in edit and not same_slot(tuple(edit["at"]), (line.start, line.end)):
                self.note(
                    f"line {line.index} ({_quoted(line.text)}): its slot in {self.input_path.name} changed since it "
                    "was moved in review; the input's slot is used"
                )
                edit = {k: v for k, v in edit.items() if k not in ("start", "end", "at")}
                if set(edit) == {"from"}:
                    del self.edits[line.index]
                    edit = None
                else:
                    self.edits[line.index] = edit
            if edit is not None:
                line = replace(
                    line,
                    text=edit.get("text", line.text),
                    speaker=edit.get("speaker", line.speaker),
                    start=edit.get("start", line.start),
                    end=edit.get("end", line.end),
                )
                if edit.get("max_speedup") or edit.get("borrow"):
                    fits[line.index] = Fit(edit.get("max_speedup"), bool(edit.get("borrow")))
            lines.append(line)
        return replace(self.script, lines=tuple(lines)), fits

    def _reuse(self, entry: LineEntry, by_base: dict, by_key: dict, repair: bool) -> LineEntry:
        """Mark the entry cached when its keyed audio verifies, else when an intact segment can restore it; else
        it is left to render. A retake chosen by QA on an earlier run is kept while the line is unchanged."""
        if self.options.force and self.selected(entry.index):
            return entry
        old = by_base.get((entry.index, entry.key)) or by_base.get(entry.key)
        if old is not None:
            entry.key, entry.seed, entry.attempts = old.key, old.seed, tuple(old.attempts)
        record = by_key.get(entry.key)
        own = by_key.get((entry.index, entry.key))  # this line's own record of this audio
        stored, problem = self.store.find(entry.key, entry.target, repair=repair)
        if stored is None and record is not None and record.sha256:
            for segment in dict.fromkeys([entry.file, record.file]):
                stored = self.store.restore(entry.key, segment, record.sha256, entry.target, write=repair)
                if stored is not None:
                    if problem:
                        self.note(
                            f"line {entry.index}: its cached audio is damaged ({problem}); restored from {segment}"
                        )
                    break
        if stored is not None:
            entry.status, entry.duration, entry.sha256 = "cached", stored.seconds, stored.sha256
            # A person approved this line with exactly this audio (another line saying the same words is another).
            entry.approved = own is not None and own.approved
        elif problem:
            self.note(f"line {entry.index}: its cached audio is damaged ({problem}); rendering it again")
        return entry

    # -- the flow ------------------------------------------------------------------------------------------
    def open(self, doing: str | None = None) -> None:
        """Claim the output folder before anything slow starts (see :meth:`OutputFolder.claim`; ``doing``: what
        holds it, for others to hear); say what the render would refuse before any model loads."""
        if self.folder.lock.held:
            return
        self.folder.claim(self.input_path, allow_other_files=self.options.allow_other_files, doing=doing)
        self._last = self._recorded = None  # read again under the lock: a run that just finished may have written
        debris = self.folder.clean_debris(self.store.dir, prompt_cache_dir())
        if debris:
            self.note(f"removed {debris} temporary file(s) left by an interrupted run")
        try:
            _ = self.engine.source  # a model that cannot be found is said before anything else
            if self.options.source is not None:
                self._cast()
            self._check_without_model()
            self._check_known_paths()
            self.store.check_writable()  # a --cache that cannot take a file, before any model loads
        except OmnidubError:
            self.close()
            raise

    def _check_known_paths(self) -> None:
        """The files this render will write as far as they are known before the voices are prepared and the lines
        planned (every name; each line at its slot): one that is not omnidub's is refused before any model loads.
        The plan's own paths are checked again once it is made (:meth:`_check_paths`)."""
        names = file_names({line.speaker for line in self.script.lines}, self.last.file_names)
        files = [segment_name(line.index, names[line.speaker]) for line in self.script.lines]
        placements = [
            Placement(
                self.out_dir / file,
                line.start,
                line.speaker,
                max(0.0, line.end - line.start),
                line.text,
                line.index,
                line.language,
            )
            for line, file in zip(self.script.lines, files)
        ]
        self._check_writable(files, self.assembly.programme(placements, names, 0.0))

    def _check_paths(self) -> None:
        """Every file this render will write must be absent or omnidub's: refused before anything renders."""
        self._check_writable([e.file for e in self.entries], self._planned())

    def _check_writable(self, segments: list[str], programme) -> None:
        references = list(reference_clips(self.cast)) if self.cast is not None else []
        self.folder.check_writable(
            [f for f in segments if self.folder.status(f) != "changed"]
            + [MANIFEST]
            + references
            + self.assembly.paths(programme)
        )

    def prepare(self) -> list[LineEntry]:
        """Claim the folder, prepare the voices, plan, and place the stored lines; returns the lines to render."""
        self.open()
        self.plan(prepare=True)
        self._check_paths()
        self.place_references()
        return self._pending()

    def replan(self) -> list[LineEntry]:
        """Plan again with what the engine now keys lines with (the loaded model ran as another device, dtype or
        layout than guessed, or a line went back to its speaker's clip); returns the lines to render."""
        made = {(e.index, e.key): e for e in self.entries if e.status == "rendered"}
        self.plan(prepare=True)
        for entry in self.entries:  # audio this run rendered is still this run's, not a cache's
            earlier = made.get((entry.index, entry.key))
            if earlier is not None and entry.status == "cached":
                entry.status, entry.render_seconds = "rendered", earlier.render_seconds
        return self._pending()

    def _pending(self) -> list[LineEntry]:
        pending = [e for e in self.entries if not e.done and self.selected(e.index)]
        self.left_out = [e.index for e in self.entries if not e.done and not self.selected(e.index)]
        if self.left_out:
            self.note(
                f"--only: line(s) {line_ranges(self.left_out)} have no audio yet and are left out of the stems and "
                "mix; rerun without --only to render them"
            )
        for entry in self.entries:
            if entry.done:
                self._place(entry)
        for speaker in {e.speaker for e in pending}:
            if self.speakers[speaker].voice.instruct:
                self.engine.check_instruct(self.speakers[speaker].voice.instruct)
        return pending

    def place_references(self, lines: list[int] | None = None) -> None:
        """Copy each line's reference clip into the output folder (a person plays it beside the dubbed line); one
        already there as omnidub wrote it is left as it is. ``lines``: only theirs."""
        if self.cast is None:
            return
        clips = reference_clips(self.cast)
        if lines is not None:
            files = reference_files(self.cast)
            clips = {files[i]: clips[files[i]] for i in lines if i in files}
        for relative, clip in clips.items():
            data = clip.read_bytes()
            if self.folder.status(relative) == "ours" and (self.out_dir / relative).read_bytes() == data:
                continue
            (self.out_dir / relative).parent.mkdir(exist_ok=True)
            for said in self.folder.write_bytes(relative, data):
                self.note(said)

    def _planned(self):
        return self.assembly.programme(
            self.assembly.placements(self.entries, planned=True), self.names, self.program or 0.0
        )

    def _place(self, entry: LineEntry, *, asked: bool = False) -> None:
        """Put the line's stored audio at its segment name; a segment someone edited is kept (and used), unless
        the line was asked for (``asked``: a take adopted in review; ``--only``, ``--force``): then the edit is
        moved aside first, and said."""
        stored, problem = self.store.find(entry.key, entry.target)
        if stored is None:  # removed from under the run (a shared cache pruned by hand): rendered next time
            self.note(
                f"line {entry.index}: its audio is no longer in the cache ({problem or 'gone'}); a rerun renders it"
            )
            entry.status = "pending"
            return
        asked = asked or self.options.force or (self.options.only is not None and entry.index in self.options.only)
        kept = self.store.place(stored, entry.file, replace_edit=asked)
        if kept is None:
            return
        if asked:
            self.note(f"line {entry.index}: {entry.file} had been edited; the edit was moved to {kept}")
        elif "edited" not in entry.flags:
            entry.flags.append("edited")
            entry.duration = seconds_of(self.out_dir / entry.file)
            self.note(
                f"line {entry.index}: {entry.file} was edited after omnidub wrote it; kept, and used in "
                f"the outputs (--only {entry.index} renders it again)"
            )

    def request(self, entry: LineEntry, id: str, seed: int | None = None) -> Request:
        """What a backend needs to speak a line (``id`` comes back on its result; ``seed``: a take's)."""
        speaker = self.voice_of(entry)
        return Request(
            text=entry.text,
            prompt=speaker.prompt,
            language=entry.language,
            instruct=speaker.voice.instruct,
            duration=entry.target,
            seed=entry.seed if seed is None else seed,
            id=id,
        )

    def accept(self, entry: LineEntry, outcome: Outcome) -> None:
        """Store a line's audio (or its failure) and journal it."""
        if isinstance(outcome, Failure):
            message = str(outcome.error).strip().splitlines()[0] if str(outcome.error).strip() else ""
            # A user-fixable problem speaks for itself; anything else also names what went wrong.
            entry.status = "failed"
            entry.error = (
                message
                if isinstance(outcome.error, OmnidubError)
                else f"{type(outcome.error).__name__}: {message}".rstrip(": ")
            )
            self.journal.append(entry)
            self.listener.line_done(entry, 0.0, 0.0)
            return
        stored = self.store.put(entry.key, outcome.audio, outcome.sample_rate)
        entry.duration, entry.sha256 = stored.seconds, stored.sha256
        if "edited" in entry.flags:
            entry.flags.remove("edited")
        self._place(entry)
        entry.status, entry.render_seconds, entry.error = "rendered", round(outcome.seconds, 3), None
        self.journal.append(entry)
        self.listener.line_done(entry, entry.duration, outcome.seconds)

    def finish(self, synth_seconds: float = 0.0, audio_seconds: float = 0.0) -> Summary:
        """Close the journal, assemble (unless stopping) and sum up the run."""
        self.journal.close()
        if not self.stopping:
            self.reassemble()
        else:
            self.save_manifest()
        counts = {s: sum(e.status == s for e in self.entries) for s in ("rendered", "cached", "failed")}
        generation = self.generation
        unvoiced = len(self.casting.unvoiced) if self.casting is not None else 0  # the source gave them no voice
        return Summary(
            out_dir=self.out_dir,
            lines=len(self.entries) + unvoiced,
            rendered=counts["rendered"],
            cached=counts["cached"],
            failed=counts["failed"] + unvoiced,
            overflow=tuple(e.index for e in self.entries if "overflow" in e.flags),
            audio_seconds=audio_seconds,
            synth_seconds=synth_seconds,
            program_seconds=self.program or 0.0,
            interrupted=self.stopping,
            outputs=tuple(generation.files) if generation else (),
            pending=tuple(self.left_out),
            edited=tuple(e.index for e in self.entries if "edited" in e.flags),
            loudness={k: v for k, v in generation.parts["loudness"].items() if k in ("mix", "bed_mix")}
            if generation and generation.parts.get("loudness")
            else None,
        )

    def adopt_assembly(self) -> None:
        """Take the last render's outputs as this run's where they were assembled from exactly the lines as they
        stand and still hold what it wrote (a review plays the mix a render left before anything changes)."""
        key = self.assembly.key(self.entries, self.names, self._planned_length)
        self.generation = self.assembly.reuse(self.last, key, self.speakers)
        if self.generation is not None and self.last.program_seconds is not None:
            self.program = self.last.program_seconds  # as assembled (a bed or a video may have made it longer)

    def assembled(self) -> Generation | None:
        """This run's outputs, while they were assembled from the lines as they are now; else None."""
        if self.generation is None:
            return None
        key = self.assembly.key(self.entries, self.names, self._planned_length)
        return self.generation if self.generation.key == key else None

    def reassemble(self) -> None:
        """Write the outputs from the current segments (unless the last run assembled exactly these), drop
        stale files, and write the manifest."""
        key = self.assembly.key(self.entries, self.names, self._planned_length)
        rendered = any(e.status == "rendered" for e in self.entries)
        previous = self.last
        self.generation = None if rendered or self.options.force else self.assembly.reuse(previous, key, self.speakers)
        if self.generation is not None:
            self.listener.step("stems and mix are up to date")
            self.program = previous.program_seconds if previous.program_seconds is not None else self.program
        else:
            self.save_manifest()  # no assembly record while a generation is being written
            self.listener.step("assembling stems and mix")
            placements = self.assembly.placements(self.entries)
            programme = self.assembly.programme(placements, self.names, self._planned_length)
            whole = "asked for with --force" if self.options.force else None
            self.generation = self.assembly.write(programme, key, self.note, whole=whole)
            self.program = programme.seconds
        for entry in self.entries:
            if entry.index in self.generation.past_video and "past-video" not in entry.flags:
                entry.flags.append("past-video")
        if self.generation.past_video and not self.generation.reused:
            seconds = self.generation.parts["delivery"]["video_seconds"]
            self.note(f"line(s) {line_ranges(self.generation.past_video)} end after the video ({seconds:.2f} s)")
        before = previous.hashes()
        changed = any(before.get(e.index) != e.sha256 for e in self.entries if e.done)
        self._remove_stale(audio_changed=rendered or changed)
        self.save_manifest()

    def mark_checked(self) -> None:
        """After QA: the timelines again, with a marker on each line it failed (the other outputs stay)."""
        if self.generation is None or not self.options.delivery.timelines:
            return
        programme = self.assembly.programme(self.assembly.placements(self.entries), self.names, self.program or 0.0)
        self.assembly.rewrite(programme, self.generation, "timelines", self.note)
        self.save_manifest()

    def _remove_stale(self, audio_changed: bool) -> None:
        """Drop what omnidub wrote here that nothing of this render uses any more (old segments, stems of
        speakers who left or of another format, reports of audio that changed); edited files stay."""
        keep = {e.file for e in self.entries if e.done} | set(self.generation.files if self.generation else ())
        keep |= source_files(self.cast, self.options.source, self.folder) if self.cast is not None else set()
        if not audio_changed:
            keep |= set(QA_FILES)
        if self.options.only is not None:  # --only takes no other line's audio: a run without it tidies up
            keep |= self.folder.written(under="segments/")
        for relative in self.folder.remove_stale(keep):
            self.note(
                f"{relative} was changed after omnidub wrote it, so it was kept although this render no longer uses it"
            )
        keys = {e.key for e in self.entries} | {take.key for e in self.entries for take in e.attempts}
        if self.options.only is None:
            self.store.prune(keys)

    def voice_of(self, entry: LineEntry) -> Speaker:
        """The voice a line is spoken in: its own original line's clip, else its speaker's."""
        return self.line_speakers.get(entry.index) or self.speakers[entry.speaker]

    def voice_check(self) -> list[LineEntry]:
        """With ``--voice-match auto``: hear each line cloned from its own original clip against the speakers'
        voices in the source; lines that sound like someone else go back to their speaker's clip. Returns the
        lines sent back (those whose audio is stored already are done)."""
        from omnidub.casting import voice_check

        if self.cast is None or self.options.source.match != "auto" or self.stopping:
            return []
        verdicts = voice_check(
            self.cast, self.entries, self.out_dir, encoder=self.engine.source_encoder, judged=set(self.voice_checks)
        )
        self.voice_checks.update(verdicts)
        unjudged = sorted(i for i, v in verdicts.items() if v["passed"] is None)
        if unjudged:
            self.note(
                f"the voice check could not judge line(s) {line_ranges(unjudged)}: {verdicts[unjudged[0]]['why']}"
            )
        failed = sorted(i for i, v in verdicts.items() if v["passed"] is False)
        if not failed:
            self._record_references(self.entries)
            return []
        self._cast()
        # A line whose speaker's clip may not be its voice (unlabelled, its group a guess) stays on its own speech.
        kept = [i for i in failed if self.cast.references[i].kind == "line" and self.cast.references[i].own_only]
        chosen = [i for i in failed if i not in kept and self.cast.references[i].kind == "line"]  # by the editor
        failed = [i for i in failed if i not in kept and i not in chosen]
        if kept:
            self.note(
                f"line(s) {line_ranges(kept)} sounded like someone else with their own original clip, but their "
                "speaker's clip may not be their voice: they keep their own and are flagged for review"
            )
        if chosen:
            self.note(
                f"line(s) {line_ranges(chosen)} sounded like someone else with their own original clip, which the "
                "editor chose for them: they keep it"
            )
        if failed:
            self.note(
                f"line(s) {line_ranges(failed)} sounded like someone else with their own original clip: rendered "
                "again from their speaker's clip (the manifest says why, line by line)"
            )
        pending = {entry.index for entry in self.replan()}
        # Every line sent back, those whose speaker-clip audio is already stored too: the pass shows them all.
        return [entry for entry in self.entries if entry.index in pending or entry.index in failed]

    def _record_references(self, entries: list[LineEntry]) -> None:
        records = reference_records(self.cast, entries, self.voice_checks)
        for entry in entries:
            if entry.index in records:
                entry.reference = records[entry.index]

    # -- takes ---------------------------------------------------------------------------------------------
    def base_seed(self, entry: LineEntry) -> int:
        """The line's own seed, before any retake."""
        return line_seed(self.preset.seed, entry.speaker, entry.text, entry.language)

    def take(self, entry: LineEntry, seed: int | None = None) -> LineEntry:
        """The line at another seed (None: one none of its takes used), as a take: its key, and its audio when the
        store has it already (status "cached"; else "pending", to render). Not yet adopted."""
        seed = self.next_seed(entry) if seed is None else seed
        target = self.targets[self.entries.index(entry)]
        key = key_for(target, self.voice_of(entry), seed, KeyContext(*self.engine.keyed_by, self.preset.seed))
        take = replace(
            entry,
            key=key,
            seed=seed,
            status="pending",
            duration=None,
            sha256=None,
            attempts=(),
            flags=list(entry.flags),
        )
        stored, _ = self.store.find(key, entry.target)
        if stored is not None:
            take.file, take.duration, take.sha256, take.status = (
                stored.path.as_posix(),
                stored.seconds,
                stored.sha256,
                "cached",
            )
        return take

    def accept_take(self, take: LineEntry, outcome: Outcome) -> None:
        """Store a rendered take's audio (the line's own file is untouched until the take is adopted)."""
        if isinstance(outcome, Failure):
            take.status, take.error = "failed", str(outcome.error).strip().splitlines()[0] if str(outcome.error) else ""
            return
        stored = self.store.put(take.key, outcome.audio, outcome.sample_rate)
        take.file, take.duration, take.sha256 = stored.path.as_posix(), stored.seconds, stored.sha256
        take.status, take.render_seconds = "rendered", round(outcome.seconds, 3)

    def adopt(self, entry: LineEntry, take: LineEntry, takes) -> None:
        """Make a take the line's audio and ``takes`` (``records.Take``, oldest first) its attempts, in one journal
        record; the line's base key stays, so reruns keep the take. An approval was of the audio before it, and
        goes. A segment edited by hand is the editor's: it is moved aside (said) so that the take is what the
        segment, the mix and the manifest hold."""
        adopted = replace(
            entry,
            key=take.key,
            seed=take.seed,
            duration=take.duration,
            sha256=take.sha256,
            approved=False,
            flags=[f for f in entry.flags if f != "edited"],
            attempts=_chosen(takes, take.key),
        )
        self._place(adopted, asked=True)
        self._journaled(entry, adopted)

    def keep_attempts(self, entry: LineEntry, takes) -> None:
        """Record the takes a line had (``records.Take``, oldest first), the one it uses marked chosen."""
        self._journaled(entry, replace(entry, attempts=_chosen(takes, entry.key)))

    def note_verdicts(self, entry: LineEntry, takes) -> None:
        """Give the line's takes the verdicts qa.json records of their audio: kept in memory (qa.json holds them
        already) and written with the next manifest, so a verdict outlives the qa.json a new take removes."""
        entry.attempts = _chosen(takes, entry.key)

    def _journaled(self, entry: LineEntry, changed: LineEntry) -> None:
        """Make ``changed`` the line's state once the journal holds it: a write that fails changes nothing."""
        self.journal.append(changed)
        for name in DECIDED:
            setattr(entry, name, getattr(changed, name))

    # -- what an editor decides (omnidub review) -----------------------------------------------------------
    def keep_as_rendered(self) -> list[int]:
        """A review replays the render and never re-decides it: a line the plan would render again although its
        words, speaker and slot are as recorded (the models or files at hand key it otherwise now) keeps the
        audio its record names while that audio is intact (cache or segment). Returns those lines (said)."""
        latest = {e.index: e for e in self.recorded}
        kept = []
        for k, entry in enumerate(self.entries):
            old = latest.get(entry.index)
            if entry.done or old is None or not old.done or not _same_line(old, entry):
                continue
            stored, _ = self.store.find(old.key, old.target)
            if stored is None and old.sha256:
                stored = self.store.restore(old.key, old.file, old.sha256, old.target)
            if stored is None:
                continue
            self.entries[k] = replace(old, status="cached", render_seconds=0.0, error=None, flags=list(old.flags))
            self._place(self.entries[k])
            kept.append(entry.index)
        if kept:
            self.note(
                f"line(s) {line_ranges(kept)} are as rendered: what is at hand now would key them otherwise (another "
                "model, ASR or reference), so they keep the audio the render recorded; a retake renders with what is "
                "here now"
            )
        return kept

    def missing(self, entry: LineEntry) -> str | None:
        """Why a line has no audio, in words (None when it has): not rendered yet, its render failed, its text or
        voice changed since, or which file is gone."""
        if entry.done:
            return None
        if entry.status == "failed":
            return f"its render failed: {entry.error or 'no audio'}"
        old = next((e for e in reversed(self.recorded) if e.index == entry.index and e.done), None)
        if old is None:
            return "not rendered yet"
        if not _same_line(old, entry):
            return "its text, speaker or slot changed since it was rendered: render it"
        if self.folder.status(old.file) == "absent":
            return f"{old.file} is gone, and the line cache no longer holds its audio: render it"
        return f"{old.file} is not the audio the render recorded, and the line cache no longer holds it: render it"

    def line(self, index: int) -> LineEntry:
        """The entry of line ``index`` (OmnidubError when the project has none)."""
        for entry in self.entries:
            if entry.index == index:
                return entry
        raise OmnidubError(f"no line {index} in {self.input_path.name}")

    def input_text(self, index: int) -> str:
        """The line's text as the input has it (before any edit)."""
        return next(line.text for line in self.script.lines if line.index == index)

    def input_speaker(self, index: int) -> str:
        """The line's speaker as the input (or, with ``--source``, the casting) has it, before any edit."""
        return next(line.speaker for line in self.script.lines if line.index == index)

    def input_slot(self, index: int) -> tuple[float, float]:
        """The line's slot as the input has it (before any move in review)."""
        line = next(line for line in self.script.lines if line.index == index)
        return line.start, line.end

    def _slot_edge(self, index: int, name: str, value, where: str) -> float | None:
        """One edge of a line's slot as an editor moved it (seconds, to the millisecond); None where it is the
        input's own."""
        import math

        if not self.script.timed:
            raise OmnidubError(f"{where}: the script is untimed, so its lines have no slot to move")
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise OmnidubError(f"{where}: a slot's {name} is a number of seconds, not {value!r}")
        value = round(float(value), 3)
        own = self.input_slot(index)[0 if name == "start" else 1]
        return None if same_slot((value, value), (own, own)) else value

    def voice_for(self, index: int, speaker) -> str:
        """``speaker`` when line ``index`` may be moved to it (one of this render's voices, or the line's own)."""
        if speaker != self.input_speaker(index) and (not isinstance(speaker, str) or speaker not in self.speakers):
            known = ", ".join(sorted(self.speakers))
            raise OmnidubError(f"line {index}: no voice called {speaker!r} in this render (its voices: {known})")
        return speaker

    def set_edit(self, index: int, **changes) -> LineEntry:
        """Change a line as an editor asks: ``text`` (read as a cue's text is), ``max_speedup`` (its own speed-up
        cap, 1 to 4; None: the preset's), ``borrow`` (it may run into the silence before the next line), ``voice``
        ("line" or "speaker": the source clip it is cloned from; None: as the render decides), ``speaker`` (the
        voice that says it and the stem it is in: one of this render's voices), ``start`` and ``end`` (its slot in
        seconds of the programme; a timed script's lines only). The change is journaled at once; :meth:`replan` plans
        the line with it."""
        from omnidub.script import edited_text

        entry = self.line(index)
        edit = {**(self.edits.get(index) or {}), "from": self.input_text(index)}
        where = f"line {index}"
        for name, value in changes.items():
            if name == "text":
                value = edited_text(value, where)
                if value == edit["from"]:
                    value = None
            elif name == "max_speedup":  # None: the preset's cap
                if value is not None and (
                    isinstance(value, bool) or not isinstance(value, (int, float)) or not 1.0 <= value <= 4.0
                ):
                    raise OmnidubError(f"{where}: a speed cap is a number from 1 to 4, not {value!r}")
                value = None if value is None else float(value)
            elif name == "borrow":
                value = bool(value) or None
            elif name == "speaker":
                value = None if value == self.input_speaker(index) else self.voice_for(index, value)
            elif name in ("start", "end"):
                value = self._slot_edge(index, name, value, where)
            elif name == "voice":  # None: as the render decides
                if value is not None and self.cast is None:
                    raise OmnidubError(f"{where}: only a render with --source clones lines from clips of the original")
                given = value == "given" and self.edits.get(index, {}).get("voice") == "given"  # a take kept
                if value not in (None, "line", "speaker") and not given:
                    raise OmnidubError(f"{where}: a line's clip is its own (line) or its speaker's (speaker)")
            else:
                raise OmnidubError(f"{where}: nothing called {name!r} can be changed")
            if value is None:
                edit.pop(name, None)
            else:
                edit[name] = value
        edit.pop("at", None)
        if "start" in edit or "end" in edit:
            start, end = self.input_slot(index)
            if not 0 <= edit.get("start", start) < edit.get("end", end):
                raise OmnidubError(
                    f"{where}: a slot runs forward from 0 or later (not {edit.get('start', start):g} to "
                    f"{edit.get('end', end):g} s)"
                )
            edit["at"] = [start, end]  # the input's slot it was moved from: a retimed input wins (see _edited)
        edit = None if set(edit) == {"from"} else edit
        if "voice" in changes and self.options.source is not None:
            self._refuse_voiceless(index, edit)
        self._journaled(entry, replace(entry, edit=edit, approved=False))  # saved first: a failed write changes nothing
        self._put_edit(index, edit)
        if "voice" in changes and self.options.source is not None:
            self._cast()
        return entry

    def _put_edit(self, index: int, edit: dict | None) -> None:
        if edit is None:
            self.edits.pop(index, None)
        else:
            self.edits[index] = edit

    def _refuse_voiceless(self, index: int, edit: dict | None) -> None:
        """Refuse a clip an editor asks for that would leave line ``index`` without a voice (its own speech too
        short to clone, a voice the source has no clip of: a line the source left without one and the editor voiced
        in the review): the line keeps the voice it has. Judged on the source's analysis as the casting holds it."""
        if self.casting is None or index in self.casting.unvoiced:
            return
        edits = {**self.edits, index: edit} if edit is not None else {k: v for k, v in self.edits.items() if k != index}
        chosen, moved = _choices(edits)
        left = left_without_voice(
            self.casting, self.dub, self.options.source.match, self.given_voices, self.voice_checks, chosen, moved
        )
        why = left.get(index)
        if why is not None:
            asked = {"line": "its own clip", "speaker": "its speaker's clip"}.get((edit or {}).get("voice"), "its clip")
            raise OmnidubError(f"line {index} cannot be voiced from {asked}: {why}; it keeps the voice it has")

    def give_voice(self, index: int, voice: str, speaker: str | None = None) -> LineEntry:
        """Voice a line the source left without one (``casting.left``) from the clip an editor chose having heard
        it (one of ``casting.choices``): its own speech (``voice`` "line") however doubted, the clip of a voice of
        the source (``voice`` "speaker", ``speaker`` its name; the line becomes that voice's), or the voice the user
        gave a speaker (``voice`` "given", ``speaker`` its name; the line becomes that speaker's). The line joins the
        plan, to be rendered, and the choice is journaled at once as an edit of its clip and speaker;
        :meth:`take_voice_back` undoes it."""
        left = {line.index: line for line, _ in self.casting.left} if self.casting is not None else {}
        if index not in left:
            raise OmnidubError(f"line {index} is not among the lines the source left without a voice")
        wanted = {"voice": voice, **({"speaker": speaker} if voice in ("speaker", "given") else {})}
        refused = voice_refused(index, wanted, self.casting.choices(index), left[index].speaker)
        if refused:
            raise OmnidubError(refused)
        self.edits[index] = {"from": left[index].text, **wanted}
        self._cast()
        self.replan()
        entry = self.line(index)
        self.journal.append(entry)
        return entry

    def voiced_here(self) -> list[int]:
        """The lines an editor voiced (:meth:`give_voice`) that the source left without a voice."""
        return [index for index, edit in self.edits.items() if "voice" in edit]

    def take_voice_back(self, index: int) -> None:
        """Leave a line an editor voiced (:meth:`give_voice`) without a voice again, as the source left it."""
        entry = self.line(index)
        self._journaled(entry, replace(entry, edit=None, approved=False, note=None, look_again=False))
        self.edits.pop(index, None)
        self._cast()
        self.replan()

    def has_line(self, index: int) -> bool:
        """Whether line ``index`` is in the plan (not one the source left without a voice, nor out of the input)."""
        return any(entry.index == index for entry in self.entries)

    def approve(self, index: int, approved: bool = True, *, heard: str | None = None) -> LineEntry:
        """Record that a person approved the line's audio as it is now (or took the approval back). ``heard``: the
        key of the audio they heard; approving other audio (a take made since) is refused."""
        entry = self.line(index)
        if approved and not entry.done:
            raise OmnidubError(f"line {index} has no audio yet: render it before approving it")
        if approved and heard is not None and heard != entry.key:
            raise OmnidubError(f"line {index} changed since you heard it: listen to it again, then approve")
        self._journaled(entry, replace(entry, approved=bool(approved)))
        return entry

    def next_seed(self, entry: LineEntry) -> int:
        """A seed no take of the line has used: one past the highest of its own and its takes'."""
        seeds = [entry.seed, self.base_seed(entry)] + [take.seed for take in entry.attempts]
        return max(seeds) + 1

    def close(self) -> None:
        """Let go of the output folder; the process ending does the same."""
        self.journal.close()
        self.folder.release()

    # -- the manifest ---------------------------------------------------------------------------------------
    def _approximate(self) -> dict:
        from omnidub.config import approximations

        said = approximations(self.preset.engine)
        return {"approximate": said} if said else {}

    def record(self) -> RenderRecord:
        """The render as it stands now, as the manifest records it."""
        notes = tuple(self.script.warnings) + tuple(f"skipped: {s}" for s in self.script.skipped) + tuple(self.notes)
        return RenderRecord(
            input=self.input_path,
            model={**self.engine.identity, "licence": self.engine.licence},
            settings={**self.preset.to_json(), **self.engine.settings, **self._approximate()},
            program=self.program,
            fmt=self.options.fmt,
            fps=self.options.delivery.fps,
            generation=self.assembled(),  # outputs made from other lines than these are not recorded as theirs
            speakers=self.speakers,
            names=self.names,
            notes=notes,
            entries=tuple(self.entries),
            request=self.asked_json(),
            pace=self.pace or None,
            unvoiced=tuple(self.casting.left_json()) if self.casting is not None else (),
        )

    def asked_json(self) -> dict:
        """How this render was asked for (the model, preset, voices, source and delivery as given), so that
        ``omnidub review`` opens the folder exactly as it was rendered: see ``api.Session.reopen``."""
        engine, asked = self.engine, self.asked
        voices = {
            name: {
                "audio": str(v.audio.resolve()) if v.audio else None,
                "text": v.text,
                "language": v.language,
                "speed": v.speed,
                "instruct": v.instruct,
            }
            for name, v in sorted(self.given_voices.items())
        }
        return {
            "model": engine.model_spec,
            "device": engine.device_spec,
            "backend": engine.backend_spec,
            "asr_model": engine.asr_model,
            "preset": self.preset.to_json(),
            "language": asked.language,
            "voices": voices,
            "format": asked.fmt,
            "allow_other_files": asked.allow_other_files,
            "cache": str(asked.cache_dir.resolve()) if asked.cache_dir else None,
            "source": _plain(asdict(asked.source)) if asked.source else None,
            "delivery": _plain(asdict(asked.delivery)),
        }

    def save_manifest(self) -> None:
        """Write the manifest as the lines stand now; the journal's records are then part of it."""
        self.journal.close()
        text, said = compose(self.record())
        for note in said:
            self.note(note)
        for note in self.folder.write_text(MANIFEST, text):
            self.note(note)
        self.journal.clear()
        self._last = LastRender.parse(json.loads(text))
        self._recorded = None  # the manifest now numbers every line as the input does

    def mark(self, index: int, *, note: str | None = None, look_again: bool | None = None) -> LineEntry:
        """Keep the editor's note on a line (an empty one removes it) and whether to look at it again; journaled
        at once, like an approval, and kept whatever becomes of the line's audio."""
        entry = self.line(index)
        marked = replace(
            entry,
            note=entry.note if note is None else " ".join(note.split())[:2000] or None,
            look_again=entry.look_again if look_again is None else bool(look_again),
        )
        self._journaled(entry, marked)  # saved first: a failed write changes nothing
        return entry

    def _marks(self) -> dict[int, tuple[str | None, bool]]:
        """Each line's note and look-again flag as the last render left them, then as this run changed them."""
        return {e.index: (e.note, e.look_again) for e in [*self.recorded, *self.entries]}


def _chosen(takes, key: str) -> tuple:
    """The takes, the one whose audio is ``key`` marked chosen."""
    return tuple(replace(take, chosen=take.key == key) for take in takes)


def _input_slot(entry: LineEntry) -> tuple[float, float]:
    """A recorded line's slot as the input had it (a slot moved in review keeps the one it was moved from)."""
    at = (entry.edit or {}).get("at")
    return (at[0], at[1]) if isinstance(at, list) and len(at) == 2 else (entry.start, entry.end)


def _quoted(text: str, most: int = 40) -> str:
    """A line's words as a note names them (cut short)."""
    return f"'{text}'" if len(text) <= most else f"'{text[: most - 1]}…'"


def _same_line(old: LineEntry, new: LineEntry) -> bool:
    """Whether two records are of one line as said: its words, speaker and slot. A line of an untimed script has no
    slot of its own (its place follows the lengths predicted for the lines before it, which another pace model
    changes), so there its words and speaker say it."""
    if (old.text, old.speaker) != (new.text, new.speaker):
        return False
    if old.slot is None and new.slot is None:
        return True
    return same_slot((old.start, old.end), (new.start, new.end))


def _plain(value):
    """Options as JSON holds them: paths as absolute strings, tuples as lists."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, Path):
        return str(value.resolve())
    return value
