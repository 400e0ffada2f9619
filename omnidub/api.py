"""The library face: options in, a session that holds the model, device and ASR; plan, render and QA.

    from omnidub.api import Session
    session = Session(model="synthetic:tiny")
    summary = session.render("dialogue.srt", voices="voices.toml")

Nothing here installs a signal handler or changes process-wide state; the command line does that itself.
Heavy things (torch, the TTS model, the ASR model) load on first use, so planning and fully cached reruns
never pay for them.
"""

from __future__ import annotations

import contextlib
import functools
from pathlib import Path

from omnidub.config import Preset, generation_settings, load_preset
from omnidub.errors import OmnidubError
from omnidub.hardware import check_device, device_kind, guess_device
from omnidub.models import DEFAULT_MODEL, ModelSource, resolve_model
from omnidub.scheduler import EXECUTORS, Budget, ExecutorOptions, default_budget


class Session:
    """One model, device and ASR for any number of renders; each loads on first use."""

    def __init__(self, model: str = DEFAULT_MODEL, device: str = "auto", preset: Preset | str = "fast",
                 asr_model: str | None = None, *, source: ModelSource | None = None,
                 executor: ExecutorOptions | None = None, backend: str = "auto"):
        self.executor_options = executor or ExecutorOptions()
        if self.executor_options.kind not in EXECUTORS:
            raise OmnidubError(f"unknown executor {self.executor_options.kind!r}: use {' or '.join(EXECUTORS)}")
        self.model_spec = model
        self.device_spec = check_device(device)  # --device tpu is said now: a plan or QA would not notice it
        self.backend_spec = backend
        self._pinned: dict = {}  # what the project was rendered with: {"cfg": layout, "backend": name}
        self._choice = None
        self.preset = load_preset(preset) if isinstance(preset, str) else preset
        self.asr_model = asr_model
        self._source = source
        self._backend = None
        self._asr = None
        # A context manager around each model load: the CLI shows a spinner with what is loading.
        self.on_load = lambda what: contextlib.nullcontext()
        self._executor = None
        self.on_note = lambda text: None  # the CLI prints what the backend decided on its own (--compile auto)

    # -- what is known without loading anything ----------------------------------------------------------------
    @property
    def source(self) -> ModelSource:
        if self._source is None:
            self._source = resolve_model(self.model_spec)
        return self._source

    def plan_source(self, note) -> None:
        """Resolve the model for a plan: from what is on this machine only (a plan never downloads, and never
        builds a synthetic model); when it is not there, every line would render, and ``note`` says so."""
        from omnidub.models import NotDownloaded

        if self._source is not None:
            return
        try:
            self._source = resolve_model(self.model_spec, download=False)
        except NotDownloaded as exc:
            note(f"{exc}: every line would render")
            self.use_unresolved_model()
        except OmnidubError as exc:  # a plan needs no model: say why cache status is unknown, and go on
            note(f"{exc}; the plan cannot tell which lines are cached")
            self.use_unresolved_model()

    def use_unresolved_model(self) -> None:
        """Plan against the model's name alone (it cannot be found or downloaded now): no line will match a key."""
        self._source = ModelSource(spec=self.model_spec, path=Path(self.model_spec), revision="unresolved")
        self._choice = None

    def pin(self, *, cfg: str | None = None, backend: str | None = None) -> None:
        """Render as a project was rendered before: its CFG layout and backend (torch or onnxruntime), followed
        where --cfg / --backend are auto, so a new measurement or a faster path never changes its audio."""
        self._pinned = {"cfg": cfg, "backend": backend}
        self._choice = None

    @property
    def backend_choice(self):
        """Which backend renders and why (torch-free; nothing is built or loaded to decide)."""
        if self._choice is None:
            from omnidub.backends.registry import choose_backend

            self._choice = choose_backend(self.backend_spec, self.source, self.device_spec, self.preset.engine.dtype,
                                          self._pinned.get("backend"))
        return self._choice

    def build_export(self) -> None:
        """Build the model's ONNX export in omnidub's cache now and measure it against torch on this CPU (what
        ``backend="onnx"`` builds first); ``backend="auto"`` then follows what was measured."""
        from omnidub.backends.onnx import cache

        cache.build(self.source, say=self.on_note)
        self._choice = None

    @property
    def device(self) -> str:
        return self._backend.device if self._backend is not None else guess_device(self.device_spec, self.backend_name)

    @property
    def tools_device(self) -> str:
        """Where the ASR and speaker models run: the device asked for, found without resolving the TTS model (QA
        of a rendered folder never needs it)."""
        return guess_device(self.device_spec)

    @property
    def backend_name(self) -> str:
        return self.backend_choice.name

    def backend_reason(self) -> str:
        """One clause for the header line: which backend runs, on what, in which dtype, and why."""
        from omnidub.backends.registry import header

        return header(self.backend_choice, self.device, self.identity["dtype"])

    def layout_status(self):
        """The CFG layout a render will use and where it comes from (explicit, pinned, measured, or "default":
        not measured yet, the probe runs when the model loads to render)."""
        from omnidub.config import layout_status
        from omnidub.models import model_shape

        if self._backend is not None:
            return self._backend.layout_choice
        return layout_status(self.preset.engine.cfg, self.device, self.identity["dtype"], self._pinned.get("cfg"),
                             backend=self.backend_name, shape=model_shape(self.backend_choice.source))

    @property
    def identity(self) -> dict:
        """What identifies the model a line is rendered with (for line keys and the manifest)."""
        if self._backend is not None:
            return self._backend.identity
        from omnidub.backends.registry import identity, loaded_dtype

        dtype = loaded_dtype(self.backend_choice, self.device, self.preset.engine.dtype)
        return identity(self.backend_choice, self.device, dtype)

    @property
    def prompt_identity(self) -> dict:
        """What identifies an encoded prompt: the model and device kind (prompts are encoded in float32) and
        the ASR model that finds the cut."""
        return {**self.source.identity, "device": device_kind(self.device), "asr": self.asr_name}

    @property
    def asr_name(self) -> str:
        from omnidub.asr import default_asr_model

        return self.asr_model or default_asr_model(self.tools_device)

    @property
    def settings(self) -> dict:
        if self._backend is not None:
            return self._backend.settings
        return generation_settings(self.preset.engine, self.device, self.layout_status().layout)

    @property
    def budget(self) -> Budget:
        return default_budget(self.preset.engine, self.device)

    # -- loaded on first use -----------------------------------------------------------------------------------
    def backend(self, adopt_probe: bool = True):
        """The resident backend, loaded on first call. What this machine never measured (the GEMM kernels, the
        layout) is measured then, in seconds, once, and recorded. The layout it finds is used at once (the job
        keys its lines again when ``settings`` moved); with ``adopt_probe=False`` this session keeps rendering in
        the layout it reported before loading, and later projects get the measured one."""
        if self._backend is None:
            from omnidub.backends.registry import load, prepare

            planned = self.layout_status().layout
            self._choice = prepare(self.backend_choice, say=self.on_note)  # an export asked for is built first
            with self.on_load(f"the TTS model {self.model_spec}"):
                self._backend = load(self.backend_choice, self.device_spec, self.preset.engine,
                                     pinned_layout=self._pinned.get("cfg"), say=self.on_note)
            if hasattr(self._backend, "on_note"):
                self._backend.on_note = lambda text: self.on_note(text)
            for result in self._backend.probe():
                self.on_note(f"measured on first use: {result.what} {result.choice} ({result.evidence})")
            if not adopt_probe and self._backend.layout != planned:
                self.on_note(f"this run keeps cfg {planned}, as its lines were planned; later projects use "
                             f"{self._backend.layout}")
                self._backend.use_layout(planned)
        return self._backend

    def executor(self):
        """What renders lines: the resident backend here, or a pool of Ray workers (started on first call)."""
        if self._executor is None:
            if self.executor_options.kind == "ray":
                from omnidub.cluster import RayExecutor

                from omnidub.backends.registry import load, prepare

                # Workers load the folder this machine resolved (no hub access or download races in workers), with
                # the layout this machine keyed the lines with.
                self._choice = prepare(self.backend_choice, say=self.on_note)
                engine = self.preset.engine.replace(cfg=self.layout_status().layout)
                factory = functools.partial(load, self._choice, self.device_spec, engine)
                with self.on_load("a pool of Ray workers"):
                    self._executor = RayExecutor(factory, self.budget, self.executor_options, identity=self.identity,
                                                 settings=self.settings, device=self.device)
            else:
                from omnidub.scheduler import LocalExecutor

                self._executor = LocalExecutor(self.backend(), self.budget)
        return self._executor

    def check_executor(self) -> None:
        """Fail early (one line) when the executor cannot be used here, before any slow work starts."""
        if self.executor_options.kind == "ray":
            from omnidub.cluster import require_ray

            require_ray()

    def close(self) -> None:
        """Stop the executor's workers, if any (the resident backend stays with the session)."""
        if self._executor is not None:
            self._executor.close()
            self._executor = None

    def asr(self):
        """The ASR model for reference trimming and QA (it loads on its first transcription)."""
        from omnidub.asr import Asr

        if self._asr is None:
            self._asr = Asr(self.asr_model, device=self.tools_device)
        return self._asr

    def check_instruct(self, instruct: str) -> None:
        """A designed voice's instruction must be one OmniVoice knows: checked without loading the model."""
        if self.backend_name == "onnxruntime":  # its own torch-free rules, checked against upstream's in the tests
            from omnidub.backends.onnx.prompt import resolve_instruct
        else:
            from omnidub.backends.torch.upstream import resolve_instruct

        resolve_instruct(instruct)

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
        return Project(self, script, voice_map, out, input_path=input_path, options=options, listener=listener)

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
            return Job(self, [self.project(paths[0], out_dir=out_dir, listener=listener, **options)],
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
        return Job(self, projects, listener=listener, failed=failed, notes=notes, order=paths, qa=checks)

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
        from omnidub.qa import run_qa, speaker_encoder, write_reports

        encoder = speaker_encoder(speaker_model, self.tools_device)
        folder = OutputFolder(Path(out_dir), flag=None)  # qa writes into the folder it checks: no other to choose
        folder.share(writes=QA_FILES)  # a report of the user's in the way is said before any line is heard
        try:
            report = run_qa(folder.path, asr=self.asr(), max_wer=max_wer, progress=progress, encoder=encoder)
            write_reports(report, folder)
        finally:
            folder.release()
        return report


def load_backend(source: ModelSource, device: str, preset: Preset):
    """The backend a source calls for: ONNX Runtime for an export folder, else torch."""
    from omnidub.backends.registry import load_backend as load

    return load(source, device, preset.engine)
