"""One input rendered into one output folder: its cast, plan, stored lines, outputs and manifest.

A project holds the state of one input and answers for it; each kind of state has its own owner: the folder
(``folder``: lock, ledger, what may be touched), the line audio (``store``), the plan (``plan``: pure), the
outputs (``assembly``) and the line records (``journal``). The job (``job``) drives projects through a render.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from omnidub.assembly import Assembly, Generation
from omnidub.backends.base import Request
from omnidub.errors import OmnidubError
from omnidub.folder import MANIFEST, QA_FILES, OutputFolder
from omnidub.journal import JOURNAL, Journal, LineEntry, manifest_entries
from omnidub.outputs.deliver import DeliveryOptions, check
from omnidub.progress import Listener, Summary
from omnidub.keys import line_seed
from omnidub.names import file_names
from omnidub.plan import KeyContext, Plan, Speaker, assign_languages, key_for, language_note, plan_lines
from omnidub.scheduler import Failure, Outcome, stream
from omnidub.script import Script, line_ranges
from omnidub.speakers import prepare_speakers, prompt_cache_dir
from omnidub.store import LineStore, seconds_of
from omnidub.casting import (cast_from_source, earlier_verdicts, place_references, reference_files, reference_records,
                              voice_check)
from omnidub.source.cast import SourceCast, SourceOptions
from omnidub.voices import Voice, check_cast, check_reference, voice_for

@dataclass(frozen=True)
class ProjectOptions:
    """How one input is rendered besides the session's model and preset (the render flags of the same names)."""

    fmt: str = "wav"
    force: bool = False  # render every (selected) line again
    only: frozenset[int] | None = None  # --only: the lines this run may render
    delivery: DeliveryOptions = DeliveryOptions()
    cache_dir: Path | None = None  # a line cache shared with other inputs
    allow_other_files: bool = False  # the folder may hold files omnidub did not write
    source: SourceOptions | None = None  # voices cut from the original video or audio


class Project:
    """One input and its output folder, from plan to manifest."""

    def __init__(self, session, script: Script, voices: dict[str, Voice], out_dir: Path, *, input_path: Path,
                 options: ProjectOptions = ProjectOptions(), listener: Listener | None = None):
        if options.source is not None:
            options.source.check()  # the cast is known once the source is analysed (see casting)
        else:
            check_cast(script.lines, voices, input_path)  # every speaker needs a voice before anything heavy starts
        self.session = session
        self.preset = session.preset
        self.dub = script  # as read; the source may name its speakers
        self.given_voices = voices
        self.script = script if options.source is not None else assign_languages(script, voices)
        self.voices = voices
        self.cast: SourceCast | None = None
        self.voice_checks: dict[int, dict] = {}  # dubbed line -> the voice check's verdict (source, auto)
        self.line_speakers: dict[int, Speaker] = {}  # lines cloned from their own original line's clip
        self.input_path = Path(input_path)
        self.options = replace(options, delivery=replace(options.delivery, fmt=options.fmt))
        self.probed = check(self.options.delivery)  # every delivery input opened before any model loads
        self.listener = listener or Listener()
        self.folder = OutputFolder(out_dir)
        self.store = LineStore(self.folder, options.cache_dir)
        self.journal = Journal(self.folder.path / JOURNAL)
        self._make_assembly()
        self.stopping = False
        self.entries: list[LineEntry] = []
        self.targets = []
        self.speakers: dict[str, Speaker] = {}
        self.names: dict[str, str] = {}
        self.program: float | None = None
        self.generation: Generation | None = None
        self.notes: list[str] = []  # said once on the console, and kept in the manifest
        self.left_out: list[int] = []  # lines --only leaves without audio
        self.edits_aside: dict[int, str] = {}  # line -> where an edited segment was moved before re-placing it

    @property
    def out_dir(self) -> Path:
        return self.folder.path

    def _make_assembly(self) -> None:
        video = self.options.delivery.video
        self.assembly = Assembly(self.folder, self.options.delivery, self.probed,
                                 name=Path(video).stem if video else self.input_path.stem)

    def use_bed(self, bed: Path) -> None:
        """Mix the dub over ``bed`` (the source's accompaniment, when the user gave no bed)."""
        self.options = replace(self.options, delivery=replace(self.options.delivery, bed=bed))
        self.probed = check(self.options.delivery)
        self._make_assembly()

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

    def note(self, text: str) -> None:
        if text not in self.notes:
            self.notes.append(text)
            self.listener.note(text)

    # -- planning ------------------------------------------------------------------------------------------
    def plan(self, *, prepare: bool = False) -> list[LineEntry]:
        """Every line's entry: timing, key and whether its audio is stored. With ``prepare``, voice prompts not
        cached yet are prepared (ASR, model) and damaged cache entries repaired; without it nothing in the output
        folder changes, and unprepared voices are paced from their whole reference (a source not analysed yet is
        analysed now, into omnidub's cache, which the render then reuses)."""
        previous = self._previous_manifest()
        if not prepare and self.options.source is None:
            self._check_without_model()  # what a render would refuse is said first
        if not prepare:
            self.session.plan_source(self.note)
        if self.options.source is not None:
            if not self.voice_checks:
                self.voice_checks = earlier_verdicts(previous)
            self.cast = cast_from_source(self, prepare)
            if not prepare:
                self._check_without_model()
        self.speakers, self.line_speakers = prepare_speakers(self, prepare, self.cast.lines if self.cast else None)
        said = language_note(self.script, self.voices)  # the cast is known by now (with --source too)
        if said:
            self.note(said)
        old_names = {}
        if isinstance(previous.get("voices"), dict):
            old_names = {n: r.get("file_name") for n, r in previous["voices"].items() if isinstance(r, dict)}
        self.names = file_names(self.speakers, old_names)
        keys = KeyContext(self.session.identity, self.session.settings, self.preset.seed)
        made: Plan = plan_lines(self.script, self.speakers, self.names, timing=self.preset.timing, keys=keys,
                                where=str(self.input_path), lines=self.line_speakers)
        if self.cast is not None:
            reference_records(self, self.cast, made.entries)
        self.targets, self.program = made.targets, made.program
        self.planned = (keys.model, keys.settings)  # what the keys say renders: checked once the model loads
        records = manifest_entries(previous) + self.journal.entries()
        by_base = {e.base_key: e for e in records if e.done}
        by_key = {e.key: e for e in records if e.done}  # the latest record of each key: its hash and segment
        self.entries = [self._reuse(e, by_base, by_key, prepare) for e in made.entries]
        self._keep_unasked(records, by_base, by_key, prepare)
        late = self.probed.late_lines([(e.index, e.start + e.target) for e in self.entries])
        if late:
            self.note(late)
        return self.entries

    def _keep_unasked(self, records: list[LineEntry], by_base: dict, by_key: dict, repair: bool) -> None:
        """``--only``: a line it does not ask for keeps the audio it has, even when its text, timing or voice
        changed since: its last record stands, flagged ``stale``, until a run asks for it again. A line gone from
        the script (or whose speaker is) is said: its audio stays on disk (see _remove_stale), out of the mix."""
        if self.options.only is None:
            return
        at = {entry.index: k for k, entry in enumerate(self.entries)}
        stale, held = [], []
        for index, old in {e.index: e for e in records if e.done}.items():
            k = at.get(index)
            if k is not None and (self.entries[k].done or self.selected(index)):
                continue
            kept = self._reuse(replace(old, status="pending", flags=[f for f in old.flags if f != "edited"],
                                       render_seconds=0.0, error=None), by_base, by_key, repair)
            if not kept.done:
                continue  # its audio is gone: nothing to keep
            if k is None or old.speaker not in self.speakers:
                held.append(index)
                continue
            if "stale" not in kept.flags:
                kept.flags.append("stale")
            self.entries[k] = kept
            stale.append(index)
        if stale:
            self.note(f"--only: line(s) {line_ranges(stale)} changed since their audio was rendered; they keep that "
                      f"audio (flagged stale) in the stems and mix: --only {line_ranges(stale).replace(' ', '')} "
                      "or a run without --only renders them anew")
        if held:
            self.note(f"--only: line(s) {line_ranges(held)} are gone from the script, or their speaker is; their "
                      "audio is kept on disk, out of the stems and mix, until a run without --only")

    def _check_without_model(self) -> None:
        """What a render would refuse, found before any model (a plan checks what a render checks)."""
        for note in self.probed.notes:
            self.note(note)
        asr = self.session.asr().available()
        for voice in dict.fromkeys(voice_for(line.speaker, self.voices) for line in self.script.lines):
            for note in check_reference(voice, options=self.preset.voice, asr_available=asr):
                self.note(f"{voice.speaker}: {note}")

    def _previous_manifest(self) -> dict:
        return self.folder.manifest() or {}

    def _reuse(self, entry: LineEntry, by_base: dict, by_key: dict, repair: bool) -> LineEntry:
        """Mark the entry cached when its keyed audio verifies, else when an intact segment can restore it; else
        it is left to render. A retake chosen by QA on an earlier run is kept while the line is unchanged."""
        if self.options.force and self.selected(entry.index):
            return entry
        old = by_base.get(entry.key)
        if old is not None:
            entry.key, entry.seed, entry.attempts = old.key, old.seed, list(old.attempts)
        record = by_key.get(entry.key)
        stored, problem = self.store.find(entry.key, entry.target, repair=repair)
        if stored is None and record is not None and record.sha256:
            for segment in dict.fromkeys([entry.file, record.file]):
                stored = self.store.restore(entry.key, segment, record.sha256, entry.target, write=repair)
                if stored is not None:
                    if problem:
                        self.note(f"line {entry.index}: its cached audio is damaged ({problem}); restored from {segment}")
                    break
        if stored is not None:
            entry.status, entry.duration, entry.sha256 = "cached", stored.seconds, stored.sha256
        elif problem:
            self.note(f"line {entry.index}: its cached audio is damaged ({problem}); rendering it again")
        return entry

    # -- the flow ------------------------------------------------------------------------------------------
    def open(self) -> None:
        """Claim the output folder before anything slow starts (see :meth:`OutputFolder.claim`)."""
        if self.folder.lock.held:
            return
        self.folder.claim(self.input_path, allow_other_files=self.options.allow_other_files)
        debris = self.folder.clean_debris(self.store.dir, prompt_cache_dir())
        if debris:
            self.note(f"removed {debris} temporary file(s) left by an interrupted run")
        try:
            self.session.source  # a model that cannot be found is said before anything else
            self.plan()
            self._check_paths()
            if any(not e.done and self.selected(e.index) for e in self.entries):
                self.store.check_writable()  # a --cache lines cannot be written to, before any line renders
        except OmnidubError:
            self.close()
            raise

    def _check_paths(self) -> None:
        """Every file this render will write must be absent or omnidub's: refused before anything renders."""
        references = list(reference_files(self, self.cast).values()) if self.cast is not None else []
        self.folder.check_writable([e.file for e in self.entries if self.folder.status(e.file) != "changed"]
                                   + [MANIFEST] + references + self.assembly.paths(self._planned()))

    def prepare(self) -> list[LineEntry]:
        """Claim the folder, plan with prepared voices and place the stored lines; returns the lines to render."""
        self.open()
        self.plan(prepare=True)
        self._check_paths()
        if self.cast is not None:
            place_references(self, self.cast)
        pending = [e for e in self.entries if not e.done and self.selected(e.index)]
        self.left_out = [e.index for e in self.entries if not e.done and not self.selected(e.index)]
        if self.left_out:
            self.note(f"--only: line(s) {line_ranges(self.left_out)} have no audio yet and are left out of the stems and "
                      "mix; rerun without --only to render them")
        for entry in self.entries:
            if entry.done:
                self._place(entry)
        for speaker in {e.speaker for e in pending}:
            if self.speakers[speaker].voice.instruct:
                self.session.check_instruct(self.speakers[speaker].voice.instruct)
        return pending

    def _planned(self):
        return self.assembly.programme(self.assembly.placements(self.entries, planned=True), self.names,
                                       self.program or 0.0)

    def _place(self, entry: LineEntry) -> None:
        """Put the line's stored audio at its segment name; a segment someone edited is kept (and used), unless
        this run was asked for the line (``--only``, ``--force``): then the edit is moved aside first."""
        stored, problem = self.store.find(entry.key, entry.target)
        if stored is None:  # removed from under the run (a shared cache pruned by hand): rendered next time
            self.note(f"line {entry.index}: its audio is no longer in the cache ({problem or 'gone'}); a rerun renders it")
            entry.status = "pending"
            return
        asked = self.options.force or (self.options.only is not None and entry.index in self.options.only)
        kept = self.store.place(stored, entry.file, replace_edit=asked)
        if kept is None:
            return
        if asked:
            self.note(f"line {entry.index}: {entry.file} had been edited; the edit was moved to {kept}")
        else:
            entry.flags.append("edited")
            entry.duration = seconds_of(self.out_dir / entry.file)
            self.note(f"line {entry.index}: {entry.file} was edited after omnidub wrote it; kept, and used in "
                      f"the outputs (--only {entry.index} renders it again)")

    def request(self, entry: LineEntry, id: str, seed: int | None = None) -> Request:
        """What a backend needs to speak a line (``id`` comes back on its result)."""
        speaker = self.voice_of(entry)
        return Request(text=entry.text, prompt=speaker.prompt, language=entry.language, instruct=speaker.voice.instruct,
                       duration=entry.target, seed=entry.seed if seed is None else seed, id=id)

    def accept(self, entry: LineEntry, outcome: Outcome) -> None:
        """Store a line's audio (or its failure) and journal it."""
        if isinstance(outcome, Failure):
            message = str(outcome.error).strip().splitlines()[0] if str(outcome.error).strip() else ""
            # A user-fixable problem speaks for itself; anything else also names what went wrong.
            entry.status = "failed"
            entry.error = message if isinstance(outcome.error, OmnidubError) else \
                f"{type(outcome.error).__name__}: {message}".rstrip(": ")
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
        return Summary(
            out_dir=self.out_dir, lines=len(self.entries), rendered=counts["rendered"], cached=counts["cached"],
            failed=counts["failed"], overflow=tuple(e.index for e in self.entries if "overflow" in e.flags),
            audio_seconds=audio_seconds, synth_seconds=synth_seconds, program_seconds=self.program or 0.0,
            interrupted=self.stopping, outputs=tuple(generation.files) if generation else (),
            pending=tuple(self.left_out), edited=tuple(e.index for e in self.entries if "edited" in e.flags),
            loudness={k: v for k, v in generation.parts["loudness"].items() if k in ("mix", "bed_mix")}
            if generation and generation.parts.get("loudness") else None,
        )

    def reassemble(self) -> None:
        """Write the outputs from the current segments (unless the last run assembled exactly these), drop
        stale files, and write the manifest."""
        key = self.assembly.key(self.entries, self.names, self.program or 0.0)
        rendered = any(e.status == "rendered" for e in self.entries)
        previous = self._previous_manifest()
        self.generation = None if rendered or self.options.force else \
            self.assembly.reuse(previous, key, self.speakers)
        if self.generation is not None:
            self.listener.step("stems and mix are up to date")
            self.program = previous.get("program_seconds", self.program)
        else:
            self.save_manifest()  # no assembly record while a generation is being written
            self.listener.step("assembling stems and mix")
            programme = self.assembly.programme(self.assembly.placements(self.entries), self.names, self.program or 0.0)
            self.generation = self.assembly.write(programme, key, self.note)
            self.program = programme.seconds
        for entry in self.entries:
            if entry.index in self.generation.past_video and "past-video" not in entry.flags:
                entry.flags.append("past-video")
        if self.generation.past_video and not self.generation.reused:
            seconds = self.generation.parts["delivery"]["video_seconds"]
            self.note(f"line(s) {line_ranges(self.generation.past_video)} end after the video ({seconds:.2f} s)")
        before = {e.index: e.sha256 for e in manifest_entries(previous)}
        changed = any(before.get(e.index) != e.sha256 for e in self.entries if e.done)
        self._remove_stale(audio_changed=rendered or changed)
        self.save_manifest()

    def _remove_stale(self, audio_changed: bool) -> None:
        """Drop what omnidub wrote here that nothing of this render uses any more (old segments, stems of
        speakers who left or of another format, reports of audio that changed); edited files stay."""
        keep = {e.file for e in self.entries if e.done} | set(self.generation.files if self.generation else ())
        keep |= set(reference_files(self, self.cast).values()) if self.cast is not None else set()
        if not audio_changed:
            keep |= set(QA_FILES)
        if self.options.only is not None:  # --only takes no other line's audio: a run without it tidies up
            keep |= self.folder.written(under="segments/")
        for relative in self.folder.remove_stale(keep):
            self.note(f"{relative} was changed after omnidub wrote it, so it was kept although this render no "
                      "longer uses it")
        keys = {e.key for e in self.entries} | {a["key"] for e in self.entries for a in e.attempts
                                               if isinstance(a, dict) and isinstance(a.get("key"), str)}
        if self.options.only is None:
            self.store.prune(keys)

    def voice_of(self, entry: LineEntry) -> Speaker:
        """The voice a line is spoken in: its own original line's clip, else its speaker's."""
        return self.line_speakers.get(entry.index) or self.speakers[entry.speaker]

    def voice_check(self) -> list[LineEntry]:
        """With ``--voice-match auto``: hear each line cloned from its own original clip against the speakers'
        voices in the source; lines that sound like someone else go back to their speaker's clip. Returns the
        lines to render again."""
        if self.cast is None or self.options.source.match != "auto" or self.stopping:
            return []
        verdicts = voice_check(self, self.cast)
        self.voice_checks.update(verdicts)
        unjudged = sorted(i for i, v in verdicts.items() if v["passed"] is None)
        if unjudged:
            self.note(f"the voice check could not judge line(s) {line_ranges(unjudged)}: {verdicts[unjudged[0]]['why']}")
        failed = sorted(i for i, v in verdicts.items() if v["passed"] is False)
        if not failed:
            reference_records(self, self.cast, self.entries)
            return []
        self.note(f"line(s) {line_ranges(failed)} sounded like someone else with their own original clip: rendered "
                  "again from their speaker's clip (the manifest says why, line by line)")
        self.plan(prepare=True)
        for entry in self.entries:
            if entry.done:
                self._place(entry)
        return [e for e in self.entries if not e.done and self.selected(e.index)]

    # -- retakes ------------------------------------------------------------------------------------------
    def base_seed(self, entry: LineEntry) -> int:
        """The line's own seed, before any retake."""
        return line_seed(self.preset.seed, entry.speaker, entry.text, entry.language)

    def render_take(self, entry: LineEntry, seed: int) -> LineEntry:
        """Render a line again with another seed; returns an entry for the take (not yet adopted), whose audio
        is in the store."""
        target = self.targets[self.entries.index(entry)]
        keys = KeyContext(self.session.identity, self.session.settings, self.preset.seed)
        key = key_for(target, self.voice_of(entry), seed, keys)
        stored, _ = self.store.find(key, entry.target)
        if stored is None:
            [outcome] = list(stream(self.session.backend(), [self.request(entry, "0", seed)], self.session.budget))
            if isinstance(outcome, Failure):
                raise outcome.error
            stored = self.store.put(key, outcome.audio, outcome.sample_rate)
        return replace(entry, key=key, seed=seed, file=stored.path.as_posix(), duration=stored.seconds,
                       status="rendered", sha256=stored.sha256, attempts=[])

    def adopt(self, entry: LineEntry, take: LineEntry) -> None:
        """Make a take the line's audio; the line's base key stays, so reruns keep the take."""
        entry.key, entry.seed, entry.duration, entry.sha256 = take.key, take.seed, take.duration, take.sha256
        self._place(entry)
        self.journal.append(entry)

    def close(self) -> None:
        """Let go of the output folder; the process ending does the same."""
        self.journal.close()
        self.folder.release()

    # -- the manifest ---------------------------------------------------------------------------------------
    def save_manifest(self) -> None:
        """Write the manifest as the lines stand now; the journal's records are then part of it."""
        from omnidub.manifest import compose

        self.journal.close()
        for said in self.folder.write_text(MANIFEST, compose(self)):
            self.note(said)
        self.journal.clear()
