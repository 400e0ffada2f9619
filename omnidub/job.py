"""A render job, the one orchestrator: any number of inputs rendered by one engine through one executor stream,
assembled, and (when asked) checked by QA with retakes.

Every input is a project with its own output folder, journal and manifest; their pending lines go to the
executor as one stream, so buckets are formed across inputs and one resident model (or one pool of workers)
serves them all. Lines with the same key (the same voice saying the same words at the same length) render once.
Retakes go through the same executor, every input's failing lines together.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from omnidub.backends.base import Request
from omnidub.backends.registry import SPECS
from omnidub.config import LAYOUTS
from omnidub.errors import OmnidubError
from omnidub.folder import QA_FILES
from omnidub.progress import Listener, Summary
from omnidub.project import Project
from omnidub.records import LineEntry
from omnidub.scheduler import Failure

# The second pass of --voice-match auto, as its progress bar names it.
AGAIN = "again from the speaker's clip"


@dataclass(frozen=True, eq=False)
class InputRun:
    """What happened to one input: its summary (and QA report), or the error that kept it from starting."""

    input: Path
    out_dir: Path | None
    summary: Summary | None = None
    error: BaseException | None = None
    report: object | None = None  # the QA report, when the job ran QA

    def result(self) -> Summary:
        """The summary, or the input's error raised again."""
        if self.error is not None:
            raise self.error
        return self.summary


@dataclass(frozen=True)
class QaOptions:
    """QA after rendering: the speaker encoder's name (None: the default; "none": no voice check) and how many
    retakes a failing line may get."""

    speaker_model: str | None = None
    retakes: int = 0


class Job:
    """Renders many inputs through the engine's executor: plan each, stream all pending lines, assemble each,
    then check each with QA (and retakes) when asked."""

    def __init__(
        self,
        engine,
        projects: Sequence[Project],
        *,
        listener: Listener | None = None,
        failed: Sequence[InputRun] = (),
        notes: Sequence[str] = (),
        order: Sequence[Path] = (),
        qa: QaOptions | None = None,
    ):
        self.engine = engine
        self.order = [Path(p) for p in order]  # the inputs as given, to report in that order
        self.projects = list(projects)
        self.failed = list(failed)  # inputs that could not even be read
        self.notes = list(notes)
        self.listener = listener or Listener()
        self.qa = qa
        self.stopping = False
        self.unchecked = False  # a stop came while QA was hearing the lines: the outputs are whole, QA is not
        self._shown: Project | None = None
        self._pinned = False

    @property
    def many(self) -> bool:
        return len(self.projects) + len(self.failed) > 1

    # -- before anything slow --------------------------------------------------------------------------------
    def pin(self) -> None:
        """Keep each project's audio as it was rendered: where ``--cfg`` / ``--backend`` are auto, the layout and
        backend a project's manifest records stay (a newer measurement or a faster path never changes a
        project's audio; naming one does)."""
        if self._pinned:
            return
        self._pinned = True
        recorded = {}
        for project in self.projects:
            last = project.last
            layout = last.layout if last.layout in LAYOUTS else None
            backend = last.backend if last.backend in SPECS else None
            if layout or backend:
                recorded[project] = (layout, backend)
        if not recorded:
            return
        layout, backend = next(iter(recorded.values()))
        self.engine.pin(cfg=layout, backend=backend)
        others = [p for p, value in recorded.items() if value != (layout, backend)]
        if others:
            self.listener.note(
                f"{', '.join(str(p.input_path) for p in others)} rendered with another CFG layout or "
                f"backend than this job uses ({layout}, {backend}): their lines render again (render "
                "them apart to keep them)"
            )

    def open(self, doing: str | None = None) -> None:
        """Claim every output folder now (before anything slow); a folder that cannot be used fails its input
        (alone, it raises). Then pin what the projects were rendered with. ``doing``: what holds the folders, for
        others to hear (default: the command line)."""
        for project in list(self.projects):
            try:
                project.open(doing)
                if self.qa is not None:  # a report of the user's in the way is said now, not after the render
                    project.folder.check_writable(QA_FILES)
            except OmnidubError as exc:
                if not self.many:
                    raise
                project.close()
                self.projects.remove(project)
                self.failed.append(InputRun(project.input_path, project.out_dir, error=exc))
        self.pin()

    def plans(self) -> list[tuple[Project, list[LineEntry] | OmnidubError]]:
        """Each input's plan, loading nothing and changing nothing on disk (a dry run)."""
        self.pin()
        found = []
        for project in self.projects:
            try:
                found.append((project, project.plan()))
            except OmnidubError as exc:
                found.append((project, exc))
        return found

    def close(self) -> None:
        """Let go of every output folder (their locks)."""
        for project in self.projects:
            project.close()

    def request_stop(self) -> None:
        """Finish the lines in flight, then stop (every input keeps what is done)."""
        self.stopping = True
        for project in self.projects:
            project.request_stop()

    # -- the render --------------------------------------------------------------------------------------------
    def run(self) -> list[InputRun]:
        """Render every input (then QA, when asked); returns one InputRun per input, in the order given."""
        self.open()
        runs: dict[int, InputRun] = {}
        pending: dict[int, list[LineEntry]] = {}
        for project in self.projects:
            self._show(project)
            try:
                pending[id(project)] = project.prepare()
            except OmnidubError as exc:
                if not self.many:
                    raise
                self.listener.note(f"{project.input_path}: {exc}; the other inputs go on")
                runs[id(project)] = InputRun(project.input_path, project.out_dir, error=exc)
        live = [p for p in self.projects if id(p) in pending]
        seconds = self.render_pending(live, pending)
        again = {id(p): p.voice_check() for p in live}  # --voice-match auto: lines back to their speaker's clip
        if any(again.values()):
            for key, (synth, audio) in self.render_pending(live, again, what=AGAIN).items():
                seconds[key] = [seconds[key][0] + synth, seconds[key][1] + audio]
        retaking = self.qa is not None and self.qa.retakes > 0 and not self.stopping
        if not retaking:
            self.engine.close()  # workers are stopped before assembly: a pool that dies now cannot take the outputs
        for project in live:
            self._show(project)
            try:
                runs[id(project)] = InputRun(
                    project.input_path, project.out_dir, summary=project.finish(*seconds[id(project)])
                )
            except Exception as exc:  # one input's outputs failing (a video that will not mux) costs only that input
                if not self.many:
                    raise
                runs[id(project)] = self._failed(project, exc)
        if self.qa is not None and not self.stopping:
            checked = [p for p in live if runs[id(p)].summary is not None]
            try:
                reports = self.check(checked)
            except _Stopped:
                self.unchecked, reports = True, {}
            for project, report in reports.items():
                run = runs[id(project)]
                runs[id(project)] = InputRun(run.input, run.out_dir, summary=run.summary, report=report)
        self.engine.close()
        done = self.failed + [runs[id(p)] for p in self.projects]
        place = {path: i for i, path in enumerate(self.order)}
        return sorted(done, key=lambda run: place.get(run.input, len(place)))

    def render_pending(
        self, live: list[Project], pending: dict[int, list[LineEntry]], what: str = "rendering"
    ) -> dict[int, list[float]]:
        """Stream every pending line of every project through the executor; returns per project the synthesis
        seconds and the audio seconds it got. The first pass's bar counts every line of the projects (stored ones
        as cached); a later pass's (``what``) only the lines it was given."""
        work = [(p, e) for p in live for e in pending[id(p)] if not e.done]
        # A model or pool that cannot start is the user's to fix (exit 2), not every line failing.
        executor = self.engine.executor() if work else None
        if work and self._replan(live, pending):
            work = [(p, e) for p in live for e in pending[id(p)] if not e.done]
        shown = {id(p): p.entries if what == "rendering" else pending[id(p)] for p in live}
        left_out = {id(p): len(p.left_out) if what == "rendering" else 0 for p in live}
        self.listener.start(sum(len(shown[id(p)]) - left_out[id(p)] for p in live), what)
        for project in live:
            self._show(project)
            for entry in shown[id(project)]:
                if entry.done:
                    self.listener.line_done(entry, entry.duration or 0.0, 0.0)
        # One request per distinct key: a line shared by two inputs (or said twice) is rendered once.
        owners: dict[str, list[tuple[Project, LineEntry]]] = {}
        for project, entry in work:
            owners.setdefault(entry.key, []).append((project, entry))
        by_id: dict[str, list[tuple[Project, LineEntry]]] = {}
        requests: list[Request] = []
        for n, group in enumerate(owners.values()):
            project, entry = group[0]
            requests.append(project.request(entry, str(n)))
            by_id[str(n)] = group

        def started(bucket: list[Request]) -> None:
            for request in bucket:
                project, entry = by_id[request.id][0]
                self._show(project)
                self.listener.line_started(entry)

        seconds = {id(p): [0.0, 0.0] for p in live}  # synthesis wall, audio produced
        try:
            if executor is not None and requests:
                for outcome in executor.stream(requests, should_stop=lambda: self.stopping, on_bucket=started):
                    for k, (project, entry) in enumerate(by_id.pop(outcome.id, ())):
                        self._show(project)
                        project.accept(entry, outcome)
                        if not isinstance(outcome, Failure):
                            seconds[id(project)][0] += outcome.seconds if k == 0 else 0.0
                            seconds[id(project)][1] += entry.duration
        finally:
            self.listener.finish()
            for project in live:
                project.journal.close()
        return seconds

    def _replan(self, live: list[Project], pending: dict[int, list[LineEntry]]) -> bool:
        """Keys are of what actually runs: when the loaded model runs on another device or dtype than the one
        guessed before it loaded, or with the layout its first-use probe chose, plan again with what runs (some
        lines may then be stored already)."""
        runs = self.engine.keyed_by
        changed = [p for p in live if p.planned != runs]
        for project in changed:
            if project.planned[0] != runs[0]:
                self.listener.note(
                    f"the model runs as {_identity_text(runs[0])}, not as guessed "
                    f"({_identity_text(project.planned[0])}): lines are keyed again"
                )
            try:
                pending[id(project)] = project.replan()
            except OmnidubError as exc:
                if not self.many:
                    raise
                self.failed.append(self._failed(project, exc))
                live.remove(project)
                self.projects.remove(project)
                project.close()
                pending.pop(id(project), None)
        return bool(changed)

    def _failed(self, project: Project, exc: BaseException) -> InputRun:
        """An input that failed while the others go on: said once, its journal kept for the next run."""
        why = str(exc) if isinstance(exc, OmnidubError) else f"{type(exc).__name__}: {exc}"
        self.listener.note(f"{project.input_path}: {why}; the other inputs go on")
        error = exc if isinstance(exc, OmnidubError) else OmnidubError(why)
        return InputRun(project.input_path, project.out_dir, error=error)

    # -- QA and retakes ----------------------------------------------------------------------------------------
    def check(self, projects: list[Project]) -> dict[Project, object]:
        """QA of each finished project; with retakes, lines that fail for what a new seed can fix are rendered
        again (seed + 1 .. seed + N, every project's through the executor together) and the best take kept."""
        from omnidub.qa import run_qa, write_reports

        encoder = self.engine.speaker_encoder(self.qa.speaker_model)

        def heard(done: int, total: int, index: int) -> None:
            if self.stopping:  # a stop while QA hears the lines: the outputs are whole, the check ends here
                raise _Stopped
            self.listener.checking(done, total, index)

        def check(project: Project):
            return run_qa(
                project.out_dir,
                asr=self.engine.judge(project.options.language),
                progress=heard,
                encoder=encoder,
                references=speaker_references(project),
                kept=self.engine.transcripts(),
            )

        reports = {}
        for project in projects:
            if self.many:
                self.listener.input(project.out_dir.name)
            reports[project] = check(project)
        if self.qa.retakes > 0:
            for project in self._retake(reports, encoder):
                project.reassemble()
                reports[project] = check(project)
        for project, report in reports.items():
            write_reports(report, project.folder, self.listener.note)
            project.mark_checked()  # the timelines mark the lines QA failed
            self.listener.checked(report, (project.out_dir / "qa.json", project.out_dir / "qa.html"))
        return reports

    def _retake(self, reports: dict, encoder) -> list[Project]:
        """Render the failing lines again until they pass or have had ``retakes`` takes; returns the projects
        whose audio changed (the others keep their outputs, their attempts recorded in the manifest)."""
        from omnidub.script import line_ranges
        from omnidub.takes import on_timing, rank, take_of, to_retake

        lines = {}  # (project, index) -> [entry, best check, the best take (None: the line's own), its takes]
        for project, report in reports.items():
            entries = {e.index: e for e in project.entries}
            timing = on_timing(report, project.selected)
            if timing:
                where = f"{project.input_path.name}: " if self.many else ""
                self.listener.note(
                    f"{where}not retaken, line(s) {line_ranges(timing)} that failed on timing: a retake keeps their "
                    "length; fix their timing (shorter words, a higher speed cap: omnidub review's Fix timing)"
                )
            for check in to_retake(report, entries, project.selected):
                entry = entries[check.index]
                lines[(project, check.index)] = [entry, check, None, [take_of(entry, check)]]
        for attempt in range(1, self.qa.retakes + 1):
            open_lines = [(key, state) for key, state in lines.items() if not state[1].passed]
            if not open_lines or self.stopping:
                break
            takes = []
            for (project, _), (entry, best, *_) in open_lines:
                self.listener.step(f"retake {attempt} of line {entry.index} ({', '.join(best.flags)})")
                takes.append((project, entry, project.take(entry, project.base_seed(entry) + attempt)))
            self.render_takes([(project, take) for project, _, take in takes if take.status == "pending"])
            for project, entry, take in takes:
                if not take.done:
                    continue
                [heard] = self.hear(project, [take], encoder=encoder)
                state = lines[(project, entry.index)]
                state[3].append(take_of(take, heard))
                if rank(heard) < rank(state[1]):
                    state[1], state[2] = heard, take
        changed: set = set()
        for (project, _), (entry, _, best, takes) in lines.items():
            if best is None:
                project.keep_attempts(entry, takes)
            else:
                project.adopt(entry, best, takes)  # the best take and every take, in one journal record
                changed.add(project)
        for project in {project for project, _ in lines} - changed:
            project.save_manifest()  # the attempts are recorded; stems and mix are unchanged
        return [p for p in reports if p in changed]

    def hear(self, project: Project, entries: list[LineEntry], *, encoder=None) -> list:
        """QA of lines' audio (takes or the lines themselves) as it is now, against the lines around them: the
        engine's ASR and speaker encoder, loaded once, and what it heard before (``engine.transcripts``)."""
        from omnidub.qa import check_lines

        qa = project.preset.qa
        if encoder is None:
            encoder = self.engine.speaker_encoder(self.qa.speaker_model if self.qa else None)
        return check_lines(
            project.out_dir,
            [e.to_json() for e in entries],
            self.engine.judge(project.options.language),
            all_lines=[e.to_json() for e in project.entries],
            program_seconds=project.program,
            encoder=encoder,
            references=speaker_references(project),
            max_wer=qa.max_wer,
            max_cer=qa.max_cer,
            min_voice_similarity=qa.min_voice_similarity,
            kept=self.engine.transcripts(),
        )

    def render_takes(self, takes: list[tuple[Project, LineEntry]]) -> None:
        """Render takes through the executor (one request per distinct key) and store their audio."""
        owners: dict[str, list[tuple[Project, LineEntry]]] = {}
        for project, take in takes:
            owners.setdefault(take.key, []).append((project, take))
        requests = []
        by_id = {}
        for n, group in enumerate(owners.values()):
            project, take = group[0]
            requests.append(project.request(take, str(n)))
            by_id[str(n)] = group
        if not requests:
            return

        def started(bucket: list[Request]) -> None:
            for request in bucket:
                self.listener.line_started(by_id[request.id][0][1])

        for outcome in self.engine.executor().stream(requests, should_stop=lambda: self.stopping, on_bucket=started):
            for project, take in by_id.pop(outcome.id, ()):
                project.accept_take(take, outcome)

    def _show(self, project: Project) -> None:
        if self.many and project is not self._shown:
            self._shown = project
            self.listener.input(project.out_dir.name)


def speaker_references(project: Project) -> dict[str, Path]:
    """Each speaker's reference recording, as cast for this render (designed voices have none): what the voice
    check compares a line with."""
    from omnidub.voices import voice_for

    found = {}
    for speaker in dict.fromkeys(e.speaker for e in project.entries):
        voice = voice_for(speaker, project.voices)
        if voice.audio is not None:
            found[speaker] = Path(voice.audio)
    return found


def _identity_text(identity: dict) -> str:
    return f"{identity.get('backend')} on {identity.get('device')} in {identity.get('dtype')}"


class _Stopped(Exception):
    """A stop requested while QA hears the lines (see Job.unchecked)."""
