"""A whole source dubbed in one call: heard (unless its original subtitles are given), its voices cast, each line
translated to fit its slot at the pace of the clip it will be cloned from, rendered in those voices, and checked.

Every stage leaves a file to edit and run again from, in one folder (``dub/<stem>`` by default)::

    voices/<stem>.original.srt     the original as heard (corrected by hand, it is read as it is)
    translation/<stem>.<to>.srt    the translation (edited by hand, it is kept and rendered as it is)
    render/                        the dub, its manifest and QA

The render gets the translation as data, never as a command line: beside each line the length the fit choice
predicted and the pace it was judged at (recorded in the manifest), the lines themselves as the translated file
reads (the render's input of record, which reruns, the review and hand edits read the same way).

Nothing here asks a question or installs a signal handler: a caller stops a dub with :meth:`Dubbing.request_stop`
(the render finishes its lines in flight), or by raising in it (KeyboardInterrupt): :meth:`Dubbing.on_disk` then
says what each finished stage left.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from omnidub.errors import OmnidubError
from omnidub.outputs.deliver import DeliveryOptions
from omnidub.progress import Listener

# A dub's stages, in order, and what each does (the progress and the line an interruption leaves say these).
STAGES = {
    "hear": "hearing the source",
    "voices": "casting the source's voices",
    "translate": "translating",
    "render": "rendering",
    "check": "checking the dub",
}
VOICES, TRANSLATION, RENDER = "voices", "translation", "render"
# A line spoken this much longer than its translation predicted (share, and seconds) was misjudged by the fit.
MISJUDGED_SHARE, MISJUDGED_SECONDS = 0.15, 0.25


@dataclass(frozen=True)
class DubOptions:
    """How a source is dubbed besides the engine's models and preset (the flags of ``omnidub dub``)."""

    to: str
    source_subs: Path | None = None  # the original subtitles (None: the source is heard)
    source_language: str | None = None  # spoken in the source (None: detected)
    engine: str = "firefox"
    mt_models: tuple[Path, ...] = ()
    llm: object | None = None  # translate.LlmOptions with engine "llm"
    glossary: Path | None = None
    fit: bool = True
    voice_match: str = "auto"
    separate: str | None = None
    names: tuple[tuple[str, str], ...] = ()
    voice: tuple[str, ...] = ()  # [SPEAKER=]REF: a voice of the user's wins over the source's
    voice_text: tuple[str, ...] = ()
    delivery: DeliveryOptions = field(default_factory=DeliveryOptions)
    fmt: str = "wav"
    speaker_model: str | None = None
    retakes: int = 0
    force: bool = False
    allow_other_files: bool = False


@dataclass(frozen=True, eq=False)
class Dubbed:
    """What a dub did: the original it translated, the translation, the render's summary and QA's report (None
    where the dub stopped before), the judge QA heard the dub with, and the stage an interruption stopped."""

    folder: Path
    original: Path
    heard: bool  # the original was heard from the source (no original subtitles given)
    translated: object | None = None  # translate.Translated
    summary: object | None = None  # progress.Summary
    report: object | None = None  # qa.Report
    judge: str | None = None
    interrupted: str | None = None  # the stage a stop ended (see STAGES)
    misjudged: tuple[int, ...] = ()  # lines spoken notably longer than their translation predicted
    predicted: int = 0  # lines whose rendered length can be set beside a prediction

    @property
    def render_folder(self) -> Path:
        return self.folder / RENDER

    @property
    def finished(self) -> bool:
        """The render finished (its outputs are whole; QA may still have been stopped)."""
        return self.summary is not None and not self.summary.interrupted

    @property
    def exit_code(self) -> int:
        """130 when stopped; 1 when a line failed to render or QA found lines to hear; else 0."""
        if self.interrupted:
            return 130
        if self.summary is not None and self.summary.failed:
            return 1
        return self.report.exit_code if self.report is not None else 0


class Dubbing:
    """One dub of one source, run stage by stage with a session's engine (see :meth:`api.Session.dubbing`)."""

    def __init__(self, session, source, options: DubOptions, *, out_dir=None, listener: Listener | None = None):
        self.session = session
        self.engine = session.engine
        self.source = Path(source)
        self.options = options
        self.folder = Path(out_dir) if out_dir is not None else Path("dub") / self.source.stem
        self.listener = listener or Listener()
        self.stage: str | None = None
        self.stopping = False
        self._job = None
        self._done: dict[str, str] = {}  # stage -> what it left on disk

    # -- stopping ----------------------------------------------------------------------------------------------
    def request_stop(self) -> bool:
        """Stop: in the render, after the lines in flight (True); any other stage cannot stop cleanly midway, and
        the caller interrupts it (False)."""
        self.stopping = True
        if self.stage == "render" and self._job is not None:
            self._job.request_stop()
            return True
        return False

    def on_disk(self) -> str:
        """What the stages that finished left on disk, and what the one in flight keeps, in a phrase."""
        kept = [said for stage, said in self._done.items() if not (stage == "render" and self.stage == "check")]
        if self.stage == "hear":
            kept.append("a finished transcription is kept in omnidub's cache")
        elif self.stage == "translate":
            kept.append("the lines translated so far are kept in omnidub's cache")
        elif self.stage == "render":
            kept.append(f"every line rendered so far is kept in {self.folder / RENDER}")
        elif self.stage == "check":
            kept.append(f"the dub is in {self.folder / RENDER}, unchecked: omnidub qa {self.folder / RENDER} checks it")
        return "; ".join(kept) or "nothing yet"

    def _enter(self, stage: str, text: str | None = None) -> None:
        self.stage = stage
        self.listener.stage(stage, text or STAGES[stage])

    # -- the run -----------------------------------------------------------------------------------------------
    def run(self) -> Dubbed:
        """Every stage in turn; a stop requested in the render ends the dub there (``Dubbed.interrupted``)."""
        from omnidub.translate import language_tag

        options = self.options
        target = language_tag(options.to, "--to")
        spoken = language_tag(options.source_language, "--from") if options.source_language else None
        self._check_inputs()
        from omnidub.outputs.deliver import from_source

        self.delivery, said = from_source(
            options.delivery, self.source, self.folder / RENDER, separate=bool(options.separate)
        )
        for note in said:
            self.listener.note(note)
        if options.source_subs is None:
            original, source_options = self._hear(spoken)
            heard = True
        else:
            original, heard = Path(options.source_subs), False
            source_options = self._source_options(original, spoken or _detected(original))
        if source_options.language == target:
            raise OmnidubError(f"the source speaks {target} already: nothing to dub into {target}")
        casting, given = self._cast(source_options, original)
        translated = self._translate(original, source_options.language, target, casting)
        summary, report, job = self._render(translated, source_options, given, target)
        if summary is not None and not summary.interrupted and not job.unchecked and not self.stopping:
            # Lines the voice check moved to another clip are judged again now, as a rerun would judge them, so
            # that the dub is what the next run leaves it: a rerun with nothing changed renders nothing.
            again = self._judged_again(source_options, original, target, casting)
            if again is not None:
                translated = again
                summary, report, job = self._render(translated, source_options, given, target)
        stopped = "render" if summary is not None and summary.interrupted else ("check" if job.unchecked else None)
        entries = job.projects[0].entries if job.projects else []
        misjudged = tuple(e.index for e in entries if _misjudged(e))
        return Dubbed(
            self.folder,
            original,
            heard,
            translated,
            summary,
            report,
            judge=self.engine.judge(target).name if report is not None else None,
            interrupted=stopped,
            misjudged=misjudged,
            predicted=sum(1 for e in entries if e.predicted and e.done),
        )

    def _check_inputs(self) -> None:
        """What would stop the dub later, said before any work: the files, the delivery's inputs, the options."""
        from omnidub.outputs.deliver import check
        from omnidub.source.cast import MATCHES

        if not self.source.is_file():
            raise OmnidubError(f"{self.source}: no such file")
        subs = self.options.source_subs
        if subs is not None and not Path(subs).is_file():
            raise OmnidubError(f"{subs}: no such file")
        if self.options.voice_match not in MATCHES:
            raise OmnidubError(f"--voice-match {self.options.voice_match}: use {', '.join(MATCHES)}")
        check(self.options.delivery)

    def _source_options(self, subs: Path | None, language: str | None):
        from omnidub.source.cast import SourceOptions

        heard_at = None if subs is not None else self.folder / VOICES / _heard_name(self.source)
        return SourceOptions(
            self.source,
            subs,
            self.options.voice_match,
            self.options.separate,
            language=language,
            names=self.options.names,
            heard_at=heard_at,
        )

    def _hear(self, spoken: str | None):
        """The original as heard, in voices/<stem>.original.srt: written from the source's analysis (kept in
        omnidub's cache), or read as it is when someone corrected it since. Returns it and the source's options
        (without subtitles while it is as heard: the render then reuses that very analysis)."""
        from omnidub.folder import EXTRACT_RECORD, HEARD_RECORD, OutputFolder
        from omnidub.source.analysis import NO_WORDS
        from omnidub.source.cast import source_summary
        from omnidub.source.heard import was_stock

        name = _heard_name(self.source)
        # A dub of an older omnidub heard the source with `voices extract` into this folder: it stays that kind.
        older = (self.folder / VOICES / EXTRACT_RECORD).is_file()
        folder = OutputFolder(
            self.folder / VOICES,
            record=EXTRACT_RECORD if older else HEARD_RECORD,
            others=None,
            input_key="source",
            made="the voices of" if older else "the original as heard of",
        )
        folder.claim(self.source)
        try:
            corrected = folder.path / name
            if folder.status(name) == "changed":
                self.listener.note(f"{corrected} was corrected by hand: read as it is")
                self._done["hear"] = f"the original as corrected: {corrected}"
                return corrected, self._source_options(corrected, spoken or _detected(corrected))
            self._enter("hear")
            options = self._source_options(None, spoken)
            summary = source_summary(
                options,
                self.engine.preset.voice,
                asr=self.engine.asr(),
                device=self.engine.tools_device,
                status=self.listener.step,
                progress=self.listener.transcribing,
            )
            for note in folder.write_text(name, summary.heard.read_text(encoding="utf-8")):
                self.listener.note(note)
            count, where = _wordless(summary.original)
            if count:
                self.listener.note(
                    f"{count} stretch{'es' if count > 1 else ''} of speech ({where}) heard with no words written "
                    f"for {'them' if count > 1 else 'it'} (a whisper, or a voice under the music): not in the dub; "
                    f"write the words in place of {NO_WORDS} in {folder.path / name} and run again to dub them"
                )
            count, where = _named([line for line in summary.original.lines if was_stock(line)])
            if count:
                self.listener.note(
                    f"{count} stretch{'es' if count > 1 else ''} of speech ({where}) where the ASR wrote only a "
                    'stock sentence it writes over speech it cannot follow ("Thank you for watching.", a '
                    f"subtitler's credit), heard alone too: not in the dub; write the words in place of {NO_WORDS} "
                    f"in {folder.path / name} and run again to dub them"
                )
            count, where = _heard_again(summary.original)
            if count:
                their = "their" if count > 1 else "its"
                self.listener.note(
                    f"{count} line{'s' if count > 1 else ''} ({where}) heard only when {their} stretch of speech "
                    f"was heard again alone: read {their} words in {folder.path / name}; correct them there and run "
                    "again if the ASR misheard"
                )
            record = {
                "source": str(self.source.resolve()),
                "asr_model": self.engine.asr().name,
                "language": summary.language,
                "lines": len(summary.original.lines),
            }
            if not older:
                folder.write_text(HEARD_RECORD, json.dumps(record, indent=2) + "\n")
        finally:
            folder.release()
        self._done["hear"] = f"the original as heard: {folder.path / name}"
        return folder.path / name, options

    def _cast(self, options, original: Path, again: bool = False):
        """The source's voices and, per line, the clip it will be cloned from (the source's analysis, cached);
        the voices the user gave win. Returns the casting and the user's voices. ``again``: after the render, as the
        next run will cast (said nothing: the stage and its notes were said)."""
        from omnidub.casting import cast_from_source
        from omnidub.folder import OutputFolder
        from omnidub.records import verdicts
        from omnidub.script import read_script
        from omnidub.voices import load_voices

        if not again:
            self._enter("voices")
        given = load_voices(None, list(self.options.voice), list(self.options.voice_text))
        # A rerun casts as the last render left it: lines the voice check sent back to their speaker's clip.
        render = self.folder / RENDER
        checks = verdicts(OutputFolder(render).last_render().records) if (render / "manifest.json").is_file() else {}
        casting = cast_from_source(
            self.engine,
            options,
            read_script(original),
            given,
            checks,
            input_path=original,
            has_bed=self.options.delivery.bed is not None,
            step=(lambda _text: None) if again else self.listener.step,
            progress=None if again else self.listener.transcribing,
        )
        for note in () if again else casting.notes:  # said here, once: the render casts again from the same analysis
            self.listener.note(note)
        return casting, given

    def _judged_again(self, options, original: Path, target: str, casting):
        """The translation judged again for the lines the render's voice check sent to another clip than the one
        they were judged at (their pace is that clip's now), or None when it moved none. The render then takes
        it: the lines whose chosen words changed are rendered again, the others keep their audio and get their
        new prediction."""
        recast, _ = self._cast(options, original, again=True)
        before, now = clip_paces(casting), clip_paces(recast)
        moved = sorted(index for index, pace in now.items() if before.get(index) != pace)
        if not moved:
            return None
        from omnidub.script import line_ranges

        self.listener.note(
            f"line(s) {line_ranges(moved)} moved by the voice check to their speaker's clip: their translation is "
            "judged again at its pace"
        )
        return self._translate(original, options.language, target, recast, notes=False)

    def _translate(self, original: Path, spoken: str | None, target: str, casting, notes: bool = True):
        """The translation, each line's candidates judged at the pace of the clip the render will clone it from."""
        from omnidub.translate import TranslateOptions, load_glossary, translate_folder

        self._enter("translate")
        options = TranslateOptions(
            fit=self.options.fit,
            max_speedup=self.engine.preset.timing.max_speedup,
            glossary=load_glossary(self.options.glossary, target),
        )
        translated = translate_folder(
            original,
            self.folder / TRANSLATION,
            target=target,
            source=spoken,
            engine=self.options.engine,
            options=options,
            glossary_file=self.options.glossary,
            mt_models=tuple(self.options.mt_models),
            llm=self.options.llm,
            status=self.listener.step,
            progress=self.listener.translating,
            input_path=self.source,
            paces=clip_paces(casting),
        )
        for note in translated.report["notes"] if notes else ():  # said once a dub, when first translated
            self.listener.note(note)
        self._done["translate"] = f"the translation: {translated.folder / translated.file}"
        return translated

    def _render(self, translated, source_options, given, target):
        """The render of the translation, its lines as the file reads (the render's input of record: a rerun, a
        review and a hand edit read it so), each with the length its translation predicted and the pace it was
        judged at (matched by words and slot; a line edited by hand is sized as it reads), then QA."""
        from omnidub.job import Job, QaOptions
        from omnidub.translate.run import predictions

        self._enter("render")
        project = self.session.project(
            translated.folder / translated.file,
            voice_map=given,
            language=target,
            out_dir=self.folder / RENDER,
            fmt=self.options.fmt,
            force=self.options.force,
            listener=self.listener,
            delivery=self.delivery,
            allow_other_files=self.options.allow_other_files,
            source=source_options,
            predicted=predictions(translated.translation),
        )
        checks = QaOptions(self.options.speaker_model, self.options.retakes)
        job = Job(self.engine, [project], listener=_Checking(self.listener, self._enter), qa=checks)
        self._job = job
        try:
            if self.stopping:  # asked to stop before the render began
                job.request_stop()
            [run] = job.run()
        finally:
            job.close()
            self.engine.close()
        summary = run.result()
        if not summary.interrupted:
            self._done["render"] = f"the dub: {self.folder / RENDER}"
        return summary, run.report, job


class _Checking(Listener):
    """The dub's listener as the render's job hears it, with the check stage entered when QA begins."""

    def __init__(self, listener: Listener, enter):
        self.listener, self.enter, self.begun = listener, enter, False

    def checking(self, done: int, total: int, index: int) -> None:
        if not self.begun:
            self.begun = True
            self.enter("check")
        self.listener.checking(done, total, index)

    def step(self, text: str) -> None:
        self.listener.step(text)

    def note(self, text: str) -> None:
        self.listener.note(text)

    def start(self, total: int, what: str = "rendering") -> None:
        self.listener.start(total, what)

    def line_started(self, entry) -> None:
        self.listener.line_started(entry)

    def line_done(self, entry, audio_seconds: float, wall_seconds: float) -> None:
        self.listener.line_done(entry, audio_seconds, wall_seconds)

    def input(self, name: str) -> None:
        self.listener.input(name)

    def finish(self) -> None:
        self.listener.finish()

    def transcribing(self, done: float, total: float) -> None:
        self.listener.transcribing(done, total)

    def checked(self, report, written) -> None:
        self.listener.checked(report, written)


def clip_paces(casting) -> dict[int, object]:
    """The pace each line is judged at: the whole clip it will be cloned from (its own original line's, or its
    speaker's), its transcript and length, as the render paces a voice whose prompt is not prepared yet. Stable
    across runs (a prepared prompt's ~3 s cut would move the choice once its prompt is cached)."""
    from omnidub.speakers import reference_pace
    from omnidub.translate import Pace
    from omnidub.voices import voice_for

    found = {}
    for line in casting.script.lines:
        voice = casting.cast.lines.get(line.index) or voice_for(line.speaker, casting.voices)
        text, seconds = reference_pace(voice)
        found[line.index] = Pace(text, seconds, voice.spoken, voice.speed or 1.0)
    return found


def _misjudged(entry) -> bool:
    """A line its voice speaks notably longer than its translation predicted (the fit judged it too short)."""
    if not entry.predicted or not entry.done:
        return False
    predicted = float(entry.predicted["natural"])
    return entry.natural > predicted * (1 + MISJUDGED_SHARE) and entry.natural - predicted > MISJUDGED_SECONDS


def _wordless(original) -> tuple[int, str]:
    """How many stretches of speech the ASR wrote no words for (not even a stock sentence), and where the first few
    are."""
    from omnidub.source.analysis import NO_WORDS
    from omnidub.source.heard import was_stock

    return _named([line for line in original.lines if line.text == NO_WORDS and not was_stock(line)])


def _heard_again(original) -> tuple[int, str]:
    """How many lines' words were heard only when their stretch of speech was heard again alone, and where."""
    from omnidub.source.heard import was_heard_again

    return _named([line for line in original.lines if was_heard_again(line)])


def _named(found: list) -> tuple[int, str]:
    """How many lines, and where the first few are."""
    from omnidub.inputs import clock

    where = ", ".join(f"line {line.index} at {clock(line.start)}" for line in found[:6])
    return len(found), where + (f" and {len(found) - 6} more" if len(found) > 6 else "")


def _heard_name(source: Path) -> str:
    from omnidub.source.heard import original_name

    return original_name(source)


def _detected(subs: Path) -> str:
    """The language subtitles read as (their words)."""
    from omnidub.script import read_script
    from omnidub.translate.language import detect

    return detect([line.text for line in read_script(subs).lines])
