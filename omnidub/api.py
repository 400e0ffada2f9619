"""The library face: a session renders, checks and reviews projects with one engine (the resident model).

    from omnidub import Session
    session = Session(model="synthetic:tiny")
    summary = session.render("dialogue.srt", voices="voices.toml")

Nothing here installs a signal handler or changes process-wide state; the command line does that itself. The
model, the ASR and the speaker encoder live in the session's :class:`~omnidub.engine.Engine` and load on first use,
so planning and fully cached reruns never pay for them.
"""

from __future__ import annotations

from pathlib import Path

from omnidub.config import Preset
from omnidub.engine import Engine
from omnidub.errors import OmnidubError
from omnidub.models import DEFAULT_MODEL, ModelSource
from omnidub.scheduler import ExecutorOptions


class Session:
    """Renders, checks and reviews projects with one engine: one model, device and ASR for any number of them.

    The arguments are the engine's (see :class:`~omnidub.engine.Engine`); ``engine`` shares one already made."""

    def __init__(self, model: str = DEFAULT_MODEL, device: str = "auto", preset: Preset | str = "fast",
                 asr_model: str | None = None, *, source: ModelSource | None = None,
                 executor: ExecutorOptions | None = None, backend: str = "auto", engine: Engine | None = None):
        self.engine = engine or Engine(model, device, preset, asr_model, source=source, executor=executor,
                                       backend=backend)

    @property
    def preset(self) -> Preset:
        return self.engine.preset

    def backend(self, adopt_probe: bool = True):
        """The resident backend, as a render gets it (loaded, and on a new machine probed, on first call)."""
        return self.engine.backend(adopt_probe)

    def close(self) -> None:
        """Stop the executor's workers, if any (the resident model stays with the engine)."""
        self.engine.close()

    # -- jobs ------------------------------------------------------------------------------------------------
    def project(self, input_path, *, voices=None, voice: list[str] = (), voice_text: list[str] = (),
                language: str | None = None, out_dir=None, fmt: str = "wav", force: bool = False, listener=None,
                only: str | None = None, delivery=None, cache_dir=None, allow_other_files: bool = False,
                source=None):
        """One input and its output folder (default ``output/<input stem>``): plan it, render it, or both.
        ``only`` ("3,8-10") limits what it renders; ``delivery`` (an ``outputs.deliver.DeliveryOptions``) sets
        the rate, loudness, bed, video and timelines; ``cache_dir`` is a line cache shared with other inputs;
        ``allow_other_files`` lets it render into a folder that holds files omnidub did not write; ``source`` (an
        ``omnidub.source.cast.SourceOptions``) takes the voices from the original video or audio."""
        from omnidub.inputs import default_out_dir
        from omnidub.outputs.deliver import DeliveryOptions
        from omnidub.plan import select_lines
        from omnidub.project import Project, ProjectOptions
        from omnidub.script import read_script
        from omnidub.voices import load_voices

        input_path = Path(input_path)
        voice_map = load_voices(Path(voices) if voices else None, list(voice), list(voice_text))
        script = read_script(input_path, language=language, gap=self.preset.timing.gap, speakers=frozenset(voice_map))
        options = ProjectOptions(fmt=fmt, force=force, only=select_lines(only, script),
                                 delivery=delivery or DeliveryOptions(), allow_other_files=allow_other_files,
                                 cache_dir=Path(cache_dir) if cache_dir else None, source=source)
        out = Path(out_dir) if out_dir else default_out_dir(input_path)
        return Project(self.engine, script, voice_map, out, input_path=input_path, options=options, listener=listener)

    def job(self, inputs, *, out_dir=None, listener=None, qa: bool = False, retakes: int = 0,
            speaker_model: str | None = None, **options):
        """A job over ``inputs`` (files or folders of .srt/.vtt/.txt) through one executor stream. One input goes
        to ``out_dir`` (default ``output/<stem>``); with several, each goes to ``<out_dir or output>/<name>``,
        names made unique where stems collide. ``qa`` (or ``retakes`` > 0) checks each input after rendering.
        Other options are those of :meth:`project`. An input that cannot be read is recorded as failed when
        there are several; alone, its error is raised."""
        from omnidub.folder import render_input
        from omnidub.inputs import find_inputs, shared_name_note, unique_names
        from omnidub.job import InputRun, Job, QaOptions

        checks = QaOptions(speaker_model, retakes) if qa or retakes else None
        found = find_inputs([Path(p) for p in inputs])
        paths = list(found.files)
        unusable = [InputRun(path, None, error=error) for path, error in found.unusable]
        if len(paths) == 1 and not unusable:
            return Job(self.engine, [self.project(paths[0], out_dir=out_dir, listener=listener, **options)],
                       listener=listener, qa=checks)
        parent = Path(out_dir) if out_dir is not None else Path("output")
        names = unique_names(paths, keep=lambda path: render_input(parent / path.stem) == path.resolve())
        notes = [shared_name_note(path, name, paths, names, parent) for path, name in zip(paths, names)
                 if name != path.stem]
        projects, failed = [], unusable
        for path, name in zip(paths, names):
            try:
                projects.append(self.project(path, out_dir=parent / name, listener=listener, **options))
            except OmnidubError as exc:
                failed.append(InputRun(path, None, error=exc))
        return Job(self.engine, projects, listener=listener, failed=failed, notes=notes, order=paths, qa=checks)

    def render(self, inputs, **options):
        """Render one input (a path) or many (a list) and return the Summary (one) or the InputRuns (many).
        Options are those of :meth:`job`."""
        job = self.job([inputs] if isinstance(inputs, (str, Path)) else inputs, **options)
        try:
            runs = job.run()
        finally:
            job.close()
            self.close()
        return runs[0].result() if isinstance(inputs, (str, Path)) else runs

    def qa(self, out_dir, *, max_wer: float | None = None, progress=None, speaker_model: str | None = None):
        """Check a rendered folder; returns the QA Report (written to qa.json and qa.html). ``speaker_model``
        names the voice check's encoder (default resemblyzer; "none" skips the check). A render running in the
        folder keeps QA out (and QA keeps a render out) until it has finished."""
        from omnidub.folder import QA_FILES, OutputFolder
        from omnidub.qa import run_qa, write_reports

        encoder = self.engine.speaker_encoder(speaker_model)
        folder = OutputFolder(Path(out_dir), flag=None)  # qa writes into the folder it checks: no other to choose
        folder.share(writes=QA_FILES)  # a report of the user's in the way is said before any line is heard
        try:
            report = run_qa(folder.path, asr=self.engine.asr(), max_wer=max_wer, progress=progress, encoder=encoder)
            write_reports(report, folder)
        finally:
            folder.release()
        return report

