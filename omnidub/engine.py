"""The resident model and everything derived from it: which backend renders and why, the identity and settings
lines are keyed with, the pinned layout, the executor, the ASR and speaker models, and the time budget.

An engine lives as long as its owner wants: one render, a review server that keeps the model for hours, a
notebook. Heavy things (torch, the TTS model, the ASR model, a pool of Ray workers) load on first use, so a plan
and a fully cached rerun never pay for them.
"""

from __future__ import annotations

import contextlib
import functools
from pathlib import Path

from omnidub.config import Preset, generation_settings, load_preset
from omnidub.errors import OmnidubError
from omnidub.hardware import check_device, device_kind, guess_device
from omnidub.models import DEFAULT_MODEL, ModelSource, licence_notice, model_licence, resolve_model
from omnidub.scheduler import EXECUTORS, Budget, ExecutorOptions, default_budget


def unheard(text: str) -> None:
    """The note hook nobody listens to (a library user reads the manifest instead)."""


class Engine:
    """One model, device and ASR for any number of projects; each loads on first use."""

    def __init__(
        self,
        model: str = DEFAULT_MODEL,
        device: str = "auto",
        preset: Preset | str = "fast",
        asr_model: str | None = None,
        *,
        source: ModelSource | None = None,
        executor: ExecutorOptions | None = None,
        backend: str = "auto",
        judge_model: str | None = None,
    ):
        self.executor_options = executor or ExecutorOptions()
        if self.executor_options.kind not in EXECUTORS:
            raise OmnidubError(f"unknown executor {self.executor_options.kind!r}: use {' or '.join(EXECUTORS)}")
        self.model_spec = model
        self.device_spec = check_device(device)  # --device tpu is said now: a plan or QA would not notice it
        self.backend_spec = backend
        self.preset = load_preset(preset) if isinstance(preset, str) else preset
        self.asr_model = asr_model
        # QA's ASR when it is another than the one the render decides with (a review hears its takes with the model
        # the folder's QA used, while the references stay as the render cut them; a dub's judge hears its language).
        # "none", or an asr.NoJudge saying why: no judge here, the lines' words are left unchecked.
        self.judge_model = judge_model if judge_model != asr_model else None
        self._judge = None
        self._judges: dict = {}  # language -> the judge chosen for it (no judge_model given)
        self._source = source
        self._pinned: dict = {}  # what the project was rendered with: {"cfg": layout, "backend": name}
        self._choice = None
        self._backend = None
        self._executor = None
        self._asr = None
        self._transcripts = None
        self._encoders: dict = {}
        self._source_encoder = None
        # A context manager around each model load: the CLI shows a spinner with what is loading.
        self.on_load = lambda what: contextlib.nullcontext()
        self.on_note = unheard  # what the backend decided on its own (--compile auto, the probe), the licence

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
            self._unresolved()
        except OmnidubError as exc:  # a plan needs no model: say why cache status is unknown, and go on
            note(f"{exc}; the plan cannot tell which lines are cached")
            self._unresolved()

    def _unresolved(self) -> None:
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

            refresh = self.preset.engine.decode.prefix_refresh
            self._choice = choose_backend(
                self.backend_spec,
                self.source,
                self.device_spec,
                self.preset.engine.dtype,
                self._pinned.get("backend"),
                needs_torch=f"prefix_refresh {refresh} runs on torch only" if refresh > 1 else "",
            )
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
        return layout_status(
            self.preset.engine.cfg,
            self.device,
            self.identity["dtype"],
            self._pinned.get("cfg"),
            backend=self.backend_name,
            shape=model_shape(self.backend_choice.source),
        )

    @property
    def identity(self) -> dict:
        """What identifies the model a line is rendered with (for line keys and the manifest)."""
        if self._backend is not None:
            return self._backend.identity
        from omnidub.backends.registry import identity, loaded_dtype

        dtype = loaded_dtype(self.backend_choice, self.device, self.preset.engine.dtype)
        return identity(self.backend_choice, self.device, dtype)

    @property
    def licence(self) -> str | None:
        """The weights' licence (see :func:`omnidub.models.model_licence`), once the model is resolved."""
        return model_licence(self._source) if self._source is not None else None

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
    def keyed_by(self) -> tuple[dict, dict]:
        """What lines are keyed with now: (identity, settings)."""
        return self.identity, self.settings

    @property
    def budget(self) -> Budget:
        return default_budget(self.preset.engine, self.device)

    def check_instruct(self, instruct: str) -> None:
        """A designed voice's instruction must be one OmniVoice knows: checked without loading the model."""
        from omnidub.backends.registry import spec

        spec(self.backend_name).check_instruct(instruct)

    # -- loaded on first use -----------------------------------------------------------------------------------
    @property
    def loaded(self) -> bool:
        return self._backend is not None

    def backend(self, adopt_probe: bool = True):
        """The resident backend, loaded on first call. What this machine never measured (the GEMM kernels, the
        layout) is measured then, in seconds, once, and recorded. The layout it finds is used at once (a job keys
        its lines again when ``settings`` moved); with ``adopt_probe=False`` this engine keeps rendering in the
        layout it reported before loading, and later projects get the measured one."""
        if self._backend is None:
            from omnidub.backends.registry import load, measure_export, prepare

            if measure_export(self.backend_choice, say=self.on_note):
                self._choice = None  # chosen again from what was just measured (lines are keyed again if it moved)
            planned = self.layout_status().layout
            self._choice = prepare(self.backend_choice, say=self.on_note)  # an export asked for is built first
            with self.on_load(f"the TTS model {self.model_spec}"):
                backend = load(
                    self.backend_choice, self.device_spec, self.preset.engine, pinned_layout=self._pinned.get("cfg")
                )
            backend.on_note = lambda text: self.on_note(text)
            if self.on_note is not unheard:  # said where the weights first load on this machine, once, to someone
                licence_notice(self.source, self.on_note)
            for result in backend.probe():
                self.on_note(f"measured on first use: {result.what} {result.choice} ({result.evidence})")
            if not adopt_probe and backend.layout != planned:
                self.on_note(
                    f"this run keeps cfg {planned}, as its lines were planned; later projects use {backend.layout}"
                )
                backend.use_layout(planned)
            self._backend = backend
        return self._backend

    def executor(self):
        """What renders lines: the resident backend here, or a pool of Ray workers (started on first call)."""
        if self._executor is None:
            if self.executor_options.kind == "ray":
                from omnidub.backends.registry import load, measure_export, prepare
                from omnidub.cluster import RayExecutor

                if measure_export(self.backend_choice, say=self.on_note):
                    self._choice = None
                # Workers load the folder this machine resolved (no hub access or download races in workers), with
                # the layout this machine keyed the lines with.
                self._choice = prepare(self.backend_choice, say=self.on_note)
                engine = self.preset.engine.replace(cfg=self.layout_status().layout)
                factory = functools.partial(load, self._choice, self.device_spec, engine)
                with self.on_load("a pool of Ray workers"):
                    self._executor = RayExecutor(
                        factory,
                        self.budget,
                        self.executor_options,
                        identity=self.identity,
                        settings=self.settings,
                        device=self.device,
                    )
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
        """Stop the executor's workers, if any (the resident backend and the ASR stay with the engine)."""
        if self._executor is not None:
            self._executor.close()
            self._executor = None

    def asr(self):
        """The ASR model a render decides with (reference trimming, hearing a source); also QA's unless
        ``judge_model`` names another. It loads on its first transcription."""
        from omnidub.asr import Asr

        if self._asr is None:
            self._asr = Asr(self.asr_model, device=self.tools_device)
        return self._asr

    def judge(self, language: str | None = None):
        """The ASR model QA hears lines with: ``judge_model`` when given (an ``asr.NoJudge`` for "none": the lines'
        words are left unchecked, and QA says why); else :meth:`asr`'s when it hears ``language`` (the lines'), else
        the default model when it is here and does; else :meth:`asr`'s still, whose lines QA then leaves unchecked
        for want of a judge of their language, or, with no ASR model here at all, an ``asr.NoJudge`` saying so."""
        from omnidub.asr import NO_JUDGE, Asr, NoJudge

        if self.judge_model is None:
            asr = self.asr()
            usable = asr.given or asr.available()  # a model named must load (a wrong one is one line, exit 2)
            if language is None or (usable and asr.hears(language)):
                return asr
            if language not in self._judges:
                default = Asr(None, device=self.tools_device)
                if default.name != asr.name and default.available() and default.hears(language):
                    self._judges[language] = default
                elif usable:
                    self._judges[language] = asr  # it says, line by line, that it cannot hear them
                else:
                    self._judges[language] = NoJudge(f"{asr.name}, the default, is not on this machine")
            return self._judges[language]
        if self._judge is None:
            if isinstance(self.judge_model, NoJudge):
                self._judge = self.judge_model
            elif self.judge_model == NO_JUDGE:
                self._judge = NoJudge()
            else:
                self._judge = Asr(self.judge_model, device=self.tools_device)
        return self._judge

    def transcripts(self):
        """What the ASR heard in line audio before, kept in omnidub's cache (``qa.kept``), made once."""
        from omnidub.qa.kept import kept_transcripts

        if self._transcripts is None:
            self._transcripts = kept_transcripts()
        return self._transcripts

    def speaker_encoder(self, name: str | None = None):
        """The voice check's speaker encoder by name (None: the default; "none": no voice check, None), made once."""
        from omnidub.qa import speaker_encoder

        key = name or ""
        if key not in self._encoders:
            self._encoders[key] = speaker_encoder(name, self.tools_device)
        return self._encoders[key]

    def source_encoder(self):
        """The speaker encoder that tells a source's voices apart (``embedding.source_encoder``), made once."""
        from omnidub.embedding import source_encoder

        if self._source_encoder is None:
            self._source_encoder = source_encoder(self.device)
        return self._source_encoder
