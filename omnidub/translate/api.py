"""The library face of ``omnidub translate``: an input (subtitles, a script, or a source to transcribe) in, a
folder with the translation and its report out."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from omnidub.errors import OmnidubError
from omnidub.translate.base import Engine, Pair, Progress, language_tag, language_variant
from omnidub.translate.llm import LlmOptions
from omnidub.translate.run import TranslateOptions, Translation, report, subtitles, translate_script

ENGINES = ("firefox", "llm")  # the first is the default


@dataclass(frozen=True, eq=False)
class Translated:
    """What a translation wrote: its folder, the translated file's name, and the report."""

    folder: Path
    file: str
    translation: Translation
    report: dict
    kept: bool  # the translated file was edited by hand, so it was kept as it is
    original: Path  # the original that was translated (the input, or the source as heard)


def open_engine(
    name: str,
    pair: Pair,
    *,
    mt_models: tuple[Path, ...] = (),
    llm: LlmOptions | None = None,
    status: Callable[[str], None] = lambda _: None,
) -> Engine:
    """The engine ``name`` for ``pair`` (its model loaded or fetched now); one line for an unknown one."""
    if name == "firefox":
        from omnidub.translate.firefox import FirefoxEngine

        return FirefoxEngine(pair, mt_models, status)
    if name == "llm":
        from omnidub.translate.llm import LlmEngine

        if llm is None:
            raise OmnidubError("--engine llm needs --llm-url URL and --llm-model NAME")
        return LlmEngine(llm)
    raise OmnidubError(f"--engine {name}: no such engine (choose {' or '.join(ENGINES)})")


def translated_name(named: Path, original: Path, target: str) -> str:
    """``<stem of named>.<lang>.srt`` (``.txt`` for an untimed script); an original as heard drops its
    ``.original``."""
    stem = named.stem.removesuffix(".original")
    return f"{stem}.{target}{'.txt' if original.suffix.lower() == '.txt' else '.srt'}"


def translate_folder(
    original: Path,
    out: Path,
    *,
    target: str,
    source: str | None = None,
    engine: str = ENGINES[0],
    options: TranslateOptions = TranslateOptions(),
    glossary_file: Path | None = None,
    mt_models: tuple[Path, ...] = (),
    llm: LlmOptions | None = None,
    status: Callable[[str], None] = lambda _: None,
    progress: Progress | None = None,
    input_path: Path | None = None,
    paces: dict | None = None,
) -> Translated:
    """Translate the subtitles or script ``original`` into ``target`` (a tag, or a variant: ``pt-BR``) and write
    ``<stem>.<target>.srt`` and translate.json into ``out``; every line is checked (translate.checks), its meaning
    through the reverse model when there is one. A translated file someone edited since omnidub wrote it is kept
    as it is, and its lines are what is checked. ``input_path``: what the folder was made from when that is not
    ``original`` (a source that was transcribed); ``paces``: the pace each line is judged at (see
    :func:`~omnidub.translate.run.translate_script`)."""
    from omnidub.folder import TRANSLATE_RECORD, OutputFolder
    from omnidub.script import read_script
    from omnidub.translate.language import detect

    original = Path(original)
    variant = language_variant(target)
    target = language_tag(target, "--to")
    script = read_script(original)
    notes = []
    if source is None:
        source = detect([line.text for line in script.lines])
        notes.append(f"the original reads as {source}; --from sets it")
    else:
        source = language_tag(source, "--from")
    pair = Pair(source, target, variant)
    if pair.source == pair.target:
        raise OmnidubError(f"the original is in {source} already: nothing to translate into {target}")
    folder = OutputFolder(Path(out), record=TRANSLATE_RECORD, others=None, made="the translation of")
    folder.claim(input_path or original)
    try:
        name = translated_name(input_path or original, original, target)
        status(f"loading the {engine} engine for {source}->{pair.target_name}")
        chosen = open_engine(engine, pair, mt_models=mt_models, llm=llm, status=status)
        checker, why = checker_for(script, pair, options, mt_models, status, chosen)
        if why:
            notes.append(why)
        kept = folder.status(name) == "changed"
        edited = _edited(folder.path / name, script) if kept else {}
        status(f"translating {len(script.lines)} lines")
        translation = translate_script(
            script, chosen, pair, options=options, paces=paces, progress=progress, checker=checker, edited=edited
        )
        if kept:
            notes.append(
                f"{name} was edited after omnidub wrote it: kept as it is, and its lines are what is checked below "
                "(the engine's candidates beside them; delete the file to translate again)"
            )
        else:
            notes += folder.write_text(name, subtitles(translation))
        data = report(
            translation,
            input_path=str((input_path or original).resolve()),
            output=name,
            glossary=str(glossary_file) if glossary_file else None,
        )
        notes += [f"{n} was changed after omnidub wrote it, so it was kept" for n in folder.remove_stale({name})]
        data["notes"] = notes + data["notes"]
        data["kept"] = kept
        folder.write_text(TRANSLATE_RECORD, json.dumps(data, indent=2, ensure_ascii=False) + "\n")
        return Translated(folder.path, name, translation, data, kept, original)
    finally:
        folder.release()


def checker_for(
    script, pair: Pair, options: TranslateOptions, mt_models: tuple[Path, ...], status, engine=None
) -> tuple:
    """The checks of a translation of ``script`` and, when meaning cannot be checked, why: the reverse model
    (target->source) from the --mt-model folders given, else omnidub's cache (fetched on first use); with the
    offline ``engine``, how steady its translation of each line is too."""
    from omnidub.translate.checks import Checker, copied_by, script_names
    from omnidub.translate.firefox import FirefoxEngine

    why = None
    back = None
    try:
        status(f"loading the {pair.target}->{pair.source} model for the meaning check")
        reverse = FirefoxEngine(Pair(pair.target, pair.source), tuple(mt_models), status, beside=True)
        back = reverse.translate
    except OmnidubError as exc:
        how = (
            f"give a {pair.target}->{pair.source} model folder with --mt-model"
            if mt_models
            else "connect once to fetch it"
        )
        why = f"meaning not checked (no back-translation): {exc} ({how})"
    forward = engine.translate if getattr(engine, "name", None) == "firefox" else None
    opening = copied_by(forward or _offline(pair, mt_models, status))
    names = set(script_names([x.text for x in script.lines], [x.speaker for x in script.lines], pair.source, opening))
    names |= {wanted for term, wanted in options.glossary.terms if term == wanted}
    checker = Checker(
        pair,
        back=back,
        glossary=options.glossary,
        names=frozenset(names),
        variant=pair.variant,
        forward=forward,
        opening=opening,
    )
    return checker, why


def _offline(pair: Pair, mt_models: tuple[Path, ...], status):
    """The offline engine's translation where its model is on this machine (never fetched for this), loaded on first
    use: whether a rare word opening a line is a name when another engine translated it ("Brakes are..." is a word:
    the engine translates "brakes"). Without the model every such word is taken for a name, as before."""
    from omnidub.translate.firefox import FirefoxEngine, find_direction

    loaded: list = []

    def translate(texts: list[str]) -> list[str]:
        if not loaded:
            folders = tuple(mt_models) or tuple(f for f in [find_direction(pair.source, pair.target)[0]] if f)
            try:
                loaded.append(FirefoxEngine(pair, folders, status, beside=True).translate if folders else None)
            except OmnidubError:
                loaded.append(None)
        return loaded[0](texts) if loaded[0] is not None else list(texts)

    return translate


def _edited(path: Path, script) -> dict[int, str]:
    """The lines of a translated file someone edited, by the original's line numbers (matched in order; a file
    whose lines no longer line up with the original's is matched by start time)."""
    from omnidub.script import read_script

    try:
        kept = read_script(path).lines
    except OmnidubError:
        return {}
    lines = script.lines
    if len(kept) == len(lines):
        return {line.index: k.text for line, k in zip(lines, kept)}
    starts = {round(k.start, 2): k.text for k in kept}
    return {line.index: starts[round(line.start, 2)] for line in lines if round(line.start, 2) in starts}


def heard_original(
    source: Path,
    voices: Path,
    *,
    asr_model: str | None,
    language: str | None = None,
    device: str = "cpu",
    status: Callable[[str], None] = lambda _: None,
    progress: Callable[[float, float], None] | None = None,
) -> Path:
    """The original of a source without subtitles, as ``voices extract`` hears it: transcribed, cut into lines and
    each labelled with its voice, written with the voices into ``voices``; a copy there that someone corrected
    since is read as it is (passed back as the original subtitles)."""
    from omnidub.source import ExtractOptions, extract_folder
    from omnidub.source.heard import original_name

    heard = Path(voices) / original_name(source)
    subs = heard if heard.is_file() else None
    extract_folder(
        source,
        subs,
        voices,
        options=ExtractOptions(language=language),
        asr_model=asr_model,
        device=device,
        status=status,
        progress=progress,
    )
    if not heard.is_file():
        raise OmnidubError(f"{source}: no original was heard in it (see {Path(voices) / 'extract.json'})")
    return heard
