"""The library face: its verbs, each one call, and the session they share.

    from omnidub import api
    summary = api.render("dialogue.srt", voices="voices.toml", model="synthetic:tiny")
    report = api.qa("output/dialogue", judge_model="tiny.en")
    translated = api.translate("episode.en.srt", to="pt")
    dubbed = api.dub("episode.mkv", to="pt", asr_model="tiny.en")   # hear, cast, translate, render, check

A :class:`Session` holds one engine (the model, the ASR, the speaker encoders) for many calls: a notebook or a
server keeps one. Nothing here asks a question, installs a signal handler or changes process-wide state; the
command line does that itself. Models load on first use, so planning and fully cached reruns never pay for them.
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
        engine: Engine | None = None,
        judge_model: str | None = None,
    ):
        self.engine = engine or Engine(
            model, device, preset, asr_model, source=source, executor=executor, backend=backend, judge_model=judge_model
        )

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
    @classmethod
    def reopen(
        cls,
        out_dir,
        *,
        model: str | None = None,
        device: str | None = None,
        asr_model: str | None = None,
        listener=None,
    ):
        """The session and project of a rendered folder, exactly as its render asked for them (the manifest's
        ``request``: model, preset, voices, source, delivery, and the ASR model the render decided with);
        ``model`` and ``device`` override what was recorded. ``asr_model`` is the model QA hears takes with
        (default: the one the folder's QA used, else the render's); it never changes what the render decided.
        Returns (session, project); nothing is claimed or loaded yet."""
        from omnidub.config import preset_from_json
        from omnidub.outputs.deliver import DeliveryOptions
        from omnidub.records import QaRecord
        from omnidub.source.cast import SourceOptions
        from omnidub.voices import Voice

        out_dir = Path(out_dir)
        asked, last = _recorded_request(out_dir)
        input_path = Path(last.input)
        if not input_path.is_file():
            raise OmnidubError(f"{out_dir} is a render of {input_path}, which is no longer there")
        try:
            preset = preset_from_json(asked.preset)
            voices = {
                name: Voice(
                    name,
                    Path(v["audio"]) if v.get("audio") else None,
                    v.get("text"),
                    v.get("language"),
                    v.get("speed"),
                    v.get("instruct"),
                )
                for name, v in asked.voices.items()
            }
            delivery = _options(DeliveryOptions, asked.delivery)
            source = _options(SourceOptions, asked.source) if asked.source else None
        except (KeyError, TypeError, AttributeError, ValueError) as exc:
            raise OmnidubError(f"{out_dir}: its manifest's request cannot be read ({exc}); render it again") from exc
        checked = QaRecord.read(out_dir)
        session = cls(
            model or asked.model or DEFAULT_MODEL,
            device or asked.device or "auto",
            preset,
            asked.asr_model,  # what the render decided with: the references it cut, the source as it heard it
            backend=asked.backend or "auto",
            judge_model=asr_model or (checked.asr_model if checked else None) or asked.asr_model,
        )
        project = session.project(
            input_path,
            voice_map=voices,
            language=asked.language,
            out_dir=out_dir,
            fmt=asked.format,
            listener=listener,
            delivery=delivery,
            cache_dir=asked.cache,
            allow_other_files=asked.allow_other_files,
            source=source,
        )
        return session, project

    def project(
        self,
        input_path,
        *,
        voices=None,
        voice: list[str] = (),
        voice_text: list[str] = (),
        language: str | None = None,
        out_dir=None,
        fmt: str = "wav",
        force: bool = False,
        listener=None,
        only: str | None = None,
        delivery=None,
        cache_dir=None,
        allow_other_files: bool = False,
        source=None,
        voice_map=None,
        predicted=(),
    ):
        """One input and its output folder (default ``output/<input stem>``): plan it, render it, or both.
        ``only`` ("3,8-10") limits what it renders; ``delivery`` (an ``outputs.deliver.DeliveryOptions``) sets
        the rate, loudness, bed, video and timelines; ``cache_dir`` is a line cache shared with other inputs;
        ``allow_other_files`` lets it render into a folder that holds files omnidub did not write; ``source`` (an
        ``omnidub.source.cast.SourceOptions``) takes the voices from the original video or audio; ``voice_map``
        (speaker -> ``voices.Voice``) gives the voices as they are instead of ``voices``/``voice``;
        ``predicted`` (``translate.run.Predicted``) each translated line's length as its translation predicted it,
        matched to the lines by their words and slot and kept in the manifest beside what the render made of it."""
        from omnidub.inputs import default_out_dir
        from omnidub.outputs.deliver import DeliveryOptions
        from omnidub.plan import select_lines
        from omnidub.project import Project, ProjectOptions
        from omnidub.script import read_script
        from omnidub.voices import load_voices

        input_path = Path(input_path)
        if voice_map is None:
            voice_map = load_voices(Path(voices) if voices else None, list(voice), list(voice_text))
        script = read_script(input_path, language=language, gap=self.preset.timing.gap, speakers=frozenset(voice_map))
        options = ProjectOptions(
            fmt=fmt,
            force=force,
            only=select_lines(only, script),
            delivery=delivery or DeliveryOptions(),
            allow_other_files=allow_other_files,
            cache_dir=Path(cache_dir) if cache_dir else None,
            source=source,
            language=language,
        )
        out = Path(out_dir) if out_dir else default_out_dir(input_path)
        return Project(
            self.engine,
            script,
            voice_map,
            out,
            input_path=input_path,
            options=options,
            listener=listener,
            predicted=predicted,
        )

    def job(
        self,
        inputs,
        *,
        out_dir=None,
        listener=None,
        qa: bool = False,
        retakes: int = 0,
        speaker_model: str | None = None,
        **options,
    ):
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
            return Job(
                self.engine,
                [self.project(paths[0], out_dir=out_dir, listener=listener, **options)],
                listener=listener,
                qa=checks,
            )
        parent = Path(out_dir) if out_dir is not None else Path("output")
        names = unique_names(paths, keep=lambda path: render_input(parent / path.stem) == path.resolve())
        notes = [
            shared_name_note(path, name, paths, names, parent) for path, name in zip(paths, names) if name != path.stem
        ]
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

    def dubbing(self, source, to: str, *, out_dir=None, listener=None, **options):
        """A dub of ``source`` into ``to``, ready to run (``.run()``) and to stop (``.request_stop()``); options
        are those of :class:`omnidub.dubbing.DubOptions`; ``out_dir`` defaults to ``dub/<source stem>``."""
        from omnidub.dubbing import Dubbing, DubOptions

        return Dubbing(self, source, DubOptions(to=to, **options), out_dir=out_dir, listener=listener)

    def dub(self, source, to: str, **options):
        """Dub ``source`` into ``to`` (see :meth:`dubbing`); returns the ``dubbing.Dubbed``: what each stage did,
        QA's report, and its exit code."""
        return self.dubbing(source, to, **options).run()

    def qa(self, out_dir, *, max_wer: float | None = None, progress=None, speaker_model: str | None = None, note=None):
        """Check a rendered folder; returns the QA Report (written to qa.json and qa.html). ``speaker_model``
        names the voice check's encoder (default resemblyzer; "none" skips the check); ``note`` hears where a
        report someone had changed was moved aside. A render running in the folder keeps QA out (and QA keeps a
        render out) until it has finished."""
        from omnidub.folder import QA_FILES, OutputFolder
        from omnidub.qa import run_qa, write_reports

        encoder = self.engine.speaker_encoder(speaker_model)
        folder = OutputFolder(Path(out_dir), flag=None)  # qa writes into the folder it checks: no other to choose
        folder.share(writes=QA_FILES)  # a report of the user's in the way is said before any line is heard
        try:
            report = run_qa(
                folder.path,
                asr=self.engine.judge(),
                max_wer=max_wer,
                progress=progress,
                encoder=encoder,
                kept=self.engine.transcripts(),
            )
            write_reports(report, folder, note)
        finally:
            folder.release()
        return report


# -- the verbs, each one call ---------------------------------------------------------------------------------------


def render(inputs, *, model: str = DEFAULT_MODEL, device: str = "auto", preset="fast", asr_model=None, **options):
    """Render one input (returns its Summary) or many (a list: their InputRuns); options are
    :meth:`Session.job`'s."""
    return Session(model, device, preset, asr_model).render(inputs, **options)


def qa(out_dir, *, judge_model: str | None = None, device: str = "auto", **options):
    """Check a rendered folder with ``judge_model`` (default: small on CPU); returns the QA Report (qa.json and
    qa.html are written). Options are :meth:`Session.qa`'s."""
    return Session(device=device, asr_model=judge_model).qa(out_dir, **options)


def translate(
    input_path,
    to: str,
    *,
    out_dir=None,
    source_language: str | None = None,
    engine: str = "firefox",
    mt_models=(),
    llm=None,
    glossary=None,
    fit: bool = True,
    preset="fast",
    paces=None,
    status=lambda _: None,
    progress=None,
):
    """Translate subtitles or a script into ``to``, each line's translation chosen to fit its slot; writes
    ``<stem>.<to>.srt`` and translate.json into ``out_dir`` (default ``translations/<stem>``) and returns the
    ``translate.Translated``."""
    from omnidub.config import load_preset
    from omnidub.translate import TranslateOptions, language_tag, load_glossary, translate_folder

    input_path = Path(input_path)
    if not input_path.is_file():
        raise OmnidubError(f"{input_path}: no such file")
    target = language_tag(to, "--to")
    speedup = (load_preset(preset) if isinstance(preset, str) else preset).timing.max_speedup
    options = TranslateOptions(fit=fit, max_speedup=speedup, glossary=load_glossary(glossary, target))
    return translate_folder(
        input_path,
        Path(out_dir) if out_dir is not None else Path("translations") / input_path.stem,
        target=target,
        source=source_language,
        engine=engine,
        options=options,
        glossary_file=Path(glossary) if glossary else None,
        mt_models=tuple(Path(m) for m in mt_models),
        llm=llm,
        status=status,
        progress=progress,
        paces=paces,
    )


def dub(
    source,
    to: str,
    *,
    model: str = DEFAULT_MODEL,
    device: str = "auto",
    preset="fast",
    asr_model: str | None = None,
    judge_model: str | None = None,
    backend: str = "auto",
    **options,
):
    """Dub ``source`` into ``to`` in one call: hear it (unless ``source_subs`` gives its original subtitles), cast
    its voices, translate each line to fit its slot at the pace of the clip it is cloned from, render it in those
    voices, and check it. ``asr_model`` hears the source; ``judge_model`` judges the dub (default: the same when it
    hears ``to``, else the default model when it is here, else none: the lines' words go unchecked, said once).
    Returns the ``dubbing.Dubbed`` (``.exit_code`` as the command's). Options are :class:`dubbing.DubOptions`'s,
    and ``out_dir``, ``listener``."""
    session = Session(model, device, preset, asr_model, backend=backend, judge_model=judge_model)
    try:
        return session.dub(source, to, **options)
    finally:
        session.close()


def _recorded_request(out_dir: Path):
    """The folder's last render and the request it recorded; one line saying what is wrong (and how to repair it)
    when there is none to replay."""
    from omnidub.folder import OutputFolder
    from omnidub.records import MANIFEST

    if not out_dir.is_dir():
        raise OmnidubError(f"{out_dir}: no such folder")
    folder = OutputFolder(out_dir)
    last = folder.last_render()
    if folder.lock.path.exists() and not last.request:
        if not folder.lock.acquire(shared=True):  # its first render is still running
            holder = folder.lock.holder()
            raise OmnidubError(
                f"{out_dir} is in use by {holder or 'another omnidub run'}; open it when that has finished"
            )
        folder.lock.release()
    if folder.status(MANIFEST) in ("changed", "unfinished") and folder.manifest() is None:
        raise OmnidubError(
            f"{out_dir / MANIFEST} is damaged (cut short or changed), so how the folder was rendered is unknown: "
            f"run the render that made it again with the same flags and --out {out_dir} (its lines are cached; the "
            "edits and approvals its journal holds are kept), then open it"
        )
    if not last.exists and (out_dir / "render" / MANIFEST).is_file():  # omnidub dub's folder of stages
        raise OmnidubError(
            f"{out_dir} is omnidub dub's folder; its render is in {out_dir / 'render'}: "
            f"omnidub review {out_dir / 'render'}"
        )
    if not last.exists:
        render = out_dir / "render"
        if (render / MANIFEST).is_file():  # a dub's folder: its render is one floor down
            raise OmnidubError(f"{out_dir} is a dub's folder: its render is {render} (omnidub review {render})")
        raise OmnidubError(
            f"{out_dir} holds no render of omnidub's; render into it first (omnidub render ... --out {out_dir})"
        )
    if last.request is None or not last.input:
        raise OmnidubError(
            f"{out_dir} was rendered by an omnidub that did not record how it was asked for: render "
            "it again once with the same flags (its lines are cached), then open it"
        )
    return last.request, last


def _options(cls, data: dict):
    """Options of dataclass ``cls`` from their JSON form (Project.request): paths and tuples as they were."""
    import dataclasses

    values = {}
    for field in dataclasses.fields(cls):
        if field.name not in data:
            continue
        value = data[field.name]
        if "Path" in str(field.type) and value is not None:
            value = Path(value)
        elif "tuple" in str(field.type) and isinstance(value, list):
            value = tuple(tuple(v) if isinstance(v, list) else v for v in value)
        values[field.name] = value
    return cls(**values)
