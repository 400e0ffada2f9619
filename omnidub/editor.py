"""The review's verbs: a job's folders held open for an editor, and what they decide, one line at a time.

An editor holds its job's folders as a render does (one lock, ledger, journal and store) and renders every take
through the job's executor, so a retake is rendered, stored and assembled exactly as a render's line is. Each
decision (an edit, an approval, a take chosen) is journaled by the project before it becomes the line's state.
"""

from __future__ import annotations

from omnidub.errors import OmnidubError
from omnidub.folder import QA_FILES
from omnidub.job import Job, speaker_references
from omnidub.project import Project
from omnidub.records import LineEntry
from omnidub.retakes import attempt_record


class Editor:
    """What an editor does to held projects: :meth:`hold`, then render, retake, edit, choose, approve and
    deliver lines; QA hears each take at once (:meth:`hear`)."""

    def __init__(self, job: Job):
        self.job = job

    def approve(self, project: Project, index: int, approved: bool = True, *, heard: str | None = None) -> LineEntry:
        """Record that the editor approved the line's audio (``heard``: the key of the audio they heard; other
        audio is refused), or took the approval back."""
        return project.approve(index, approved, heard=heard)

    def hold(self, doing: str = "omnidub review") -> None:
        """Claim every folder, pin, prepare the voices and place the stored lines, rendering nothing: a review holds
        its folder as a render does (one lock, ledger, journal and store) until :meth:`close`."""
        self.job.open(doing)
        for project in self.job.projects:
            project.prepare()
            project.keep_as_rendered()
            project.adopt_assembly()

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
                takes = [t for t in takes_of(entry) if t["key"] != entry.key]
                project.keep_attempts(entry, takes + [self._judged(project, entry)])
        return [project.line(i) for i in indices]

    def retake(self, project: Project, index: int) -> LineEntry:
        """Render the line again with a seed none of its takes used, QA it, and make it the line's audio; the
        earlier takes stay in its attempts, any of which :meth:`choose` makes the line's again."""
        entry = project.line(index)
        if not entry.done:
            return self.render_lines(project, [index])[0]
        takes = takes_of(entry)
        take = project.take(entry, project.next_seed(entry))
        if take.status == "pending":
            self.job.render_takes([(project, take)])
        if not take.done:
            raise OmnidubError(f"line {index}: the take could not be rendered ({take.error or 'no audio'})")
        project.adopt(entry, take)
        project.keep_attempts(entry, takes + [self._judged(project, entry)])
        return entry

    def edit(self, project: Project, index: int, **changes) -> LineEntry:
        """Change the line as an editor asks (see :meth:`Project.set_edit`), plan it again and render it; its
        earlier takes stay."""
        takes = takes_of(project.line(index))
        project.set_edit(index, **changes)
        project.replan()
        project.keep_attempts(project.line(index), takes)
        return self.render_lines(project, [index])[0]

    def choose(self, project: Project, index: int, number: int) -> LineEntry:
        """Make take ``number`` (1 is the oldest in its attempts) the line's audio again, with the text and changes
        it was made with."""
        entry = project.line(index)
        takes = takes_of(entry)
        if not 1 <= number <= len(takes):
            raise OmnidubError(f"line {index} has no take {number} (it has {len(takes)})")
        record = takes[number - 1]
        if record["key"] == entry.key:
            return entry
        wanted = record.get("edit") or {}
        if (entry.edit or {}) != wanted:
            if wanted and wanted.get("from") != project.input_text(index):
                raise OmnidubError(f"line {index}: take {number} was made over text the input no longer has")
            project.set_edit(
                index,
                text=wanted.get("text", project.input_text(index)),
                max_speedup=wanted.get("max_speedup"),
                borrow=wanted.get("borrow"),
                speaker=wanted.get("speaker", project.input_speaker(index)),
                **({"voice": wanted.get("voice")} if project.cast is not None else {}),
            )
            project.replan()
            entry = project.line(index)
        take = project.take(entry, record["seed"])
        if take.status == "pending":  # the store no longer has it: rendered again, the same seed, the same audio
            self.job.render_takes([(project, take)])
        if not take.done:
            raise OmnidubError(f"line {index}: take {number} could not be rendered again ({take.error or 'no audio'})")
        project.adopt(entry, take)
        project.keep_attempts(
            entry, takes if any(t["key"] == entry.key for t in takes) else takes + [self._judged(project, entry)]
        )
        return entry

    def deliver(self, project: Project, *, check: bool = False) -> None:
        """Assemble the project's outputs from the lines as they stand (the same assembly as a render's). With
        ``check``, QA's reports that the assembly removed (the audio changed) are written again, of the lines as
        they stand: what the ASR heard before is kept, so only audio no check has heard is transcribed."""
        project.reassemble()
        # Written again where the assembly removed them (the audio changed); one someone changed is moved aside.
        if not check or self.job.qa is None or project.folder.status(QA_FILES[0]) != "absent":
            return
        if self.unheard() is not None:
            self.job.listener.note(
                f"{' and '.join(QA_FILES)} were removed, since the audio changed; no ASR model "
                f"({self.job.engine.judge().name}) here to check it again (omnidub qa --asr-model NAME|PATH)"
            )
            return
        self.job.listener.step("checking the delivered lines (only audio not heard before is transcribed)")
        self.job.check([project])

    def hear(self, project: Project, entry: LineEntry):
        """QA of one line's audio as it is now (the engine's ASR and speaker encoder, loaded once); None when no
        ASR model is here to hear it (:meth:`unheard` says why)."""
        from omnidub.qa import check_lines

        if self.unheard() is not None:
            return None
        qa = project.preset.qa
        [check] = check_lines(
            project.out_dir,
            [entry.to_json()],
            self.job.engine.judge(),
            all_lines=[e.to_json() for e in project.entries],
            program_seconds=project.program,
            encoder=self.job.engine.speaker_encoder(self.job.qa.speaker_model if self.job.qa else None),
            references=speaker_references(project),
            max_wer=qa.max_wer,
            max_cer=qa.max_cer,
            min_voice_similarity=qa.min_voice_similarity,
            kept=self.job.engine.transcripts(),
        )
        return check

    def unheard(self) -> str | None:
        """Why QA cannot hear a take here (no ASR model), or None."""
        asr = self.job.engine.judge()
        return None if asr.available() else f"not checked: no ASR model ({asr.name}) here to hear it (omnidub models)"

    def _judged(self, project: Project, entry: LineEntry) -> dict:
        """The line's audio as a take, with QA's verdict on it (or why there is none)."""
        return attempt_record(entry, self.hear(project, entry), self.unheard())


def takes_of(entry: LineEntry) -> list[dict]:
    """A line's takes: its attempts, with the audio it has now among them (unjudged when QA never heard it)."""
    from omnidub.retakes import attempt_record

    takes = [dict(a) for a in entry.attempts if isinstance(a, dict) and isinstance(a.get("key"), str)]
    if entry.done and not any(t["key"] == entry.key for t in takes):
        takes.append(attempt_record(entry, None))
    return takes
