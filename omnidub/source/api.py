"""The library face of ``omnidub voices extract``: source + original subtitles in, a voices folder out."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from omnidub.asr import Asr, whisper_language
from omnidub.errors import OmnidubError
from omnidub.folder import OutputFolder
from omnidub.hardware import check_device
from omnidub.names import file_names
from omnidub.script import read_script
from omnidub.source.audio import CLIP_RATE, check_subtitles, read_source, wav_bytes
from omnidub.source.extract import Extraction, ExtractOptions, extract_voices
from omnidub.source.heard import hear_source, labelled_srt, original_name, transcriber
from omnidub.source.report import (
    ACCOMPANIMENT_NAME,
    REPORT_NAME,
    VOICES_NAME,
    report_json,
    voices_toml,
)


@dataclass(frozen=True, eq=False)
class Extracted:
    """What an extract wrote, and what it found."""

    folder: Path
    extraction: Extraction
    report: dict
    written: tuple[str, ...]  # file names in `folder`

    @property
    def voices(self) -> Path | None:
        return self.folder / VOICES_NAME if self.extraction.chosen else None


def open_asr(model: str | None, device: str, language: str | None) -> tuple[Asr | None, str | None]:
    """The ASR model to check and cut clips with, or None and a note saying why there is none. A model the user
    named must load (one line if not); the default is used only when it is already downloaded."""
    asr = Asr(model, device)
    if model is None and not asr.available():
        return None, (
            f"no ASR model: the default ({asr.name}) is not downloaded, so clips are not checked against "
            "their words and clips over the window are not cut; pass --asr-model NAME|PATH (omnidub models lists "
            "those here)"
        )
    # Asking loads the model: one the user named that cannot load is theirs to fix, said before any work.
    english_only = asr.english_only()
    if english_only and whisper_language(language) not in (None, "en"):
        return None, f"no ASR check: {asr.name} is English-only and the source speaks {language}"
    return asr, None


def extract_folder(
    source: Path,
    subs: Path | None,
    out: Path,
    *,
    options: ExtractOptions = ExtractOptions(),
    asr_model: str | None = None,
    separate: str | None = None,
    device: str = "cpu",
    encoder=None,
    status: Callable[[str], None] = lambda _: None,
    progress: Callable[[float, float], None] | None = None,
) -> Extracted:
    """Read the source and its original subtitles, choose a clip per speaker, and write the clips, voices.toml
    and extract.json (and the accompaniment when separating) into `out`.

    Without ``subs`` the source is transcribed (``progress`` hears the seconds done and in all) and cut into lines
    at its pauses, and the original as heard is written too, each line labelled with its voice
    (``<source stem>.original.srt``), for a person to check, correct and pass as ``subs`` next time.

    `out` is held like a render's folder: new or empty, or a previous extract of the same source (its ledger in
    `.omnidub/`); files omnidub did not write are never touched, one it wrote and someone changed is moved aside,
    and the folder of another source that still exists is refused."""
    source, subs = Path(source), Path(subs) if subs is not None else None
    check_device(device, ("cpu", "cuda"))  # before the folder: an unknown device would quietly run on the CPU
    folder = OutputFolder(Path(out), record=REPORT_NAME, others=None, input_key="source", made="the voices of")
    folder.claim(source)  # before any work: a folder that cannot be written, or another source's, is said at once
    try:
        return _extract(source, subs, folder, options, asr_model, separate, device, encoder, status, progress)
    finally:
        folder.release()


def _extract(
    source: Path,
    subs: Path | None,
    folder: OutputFolder,
    options: ExtractOptions,
    asr_model: str | None,
    separate: str | None,
    device: str,
    encoder,
    status: Callable[[str], None],
    progress,
) -> Extracted:
    original = read_script(subs, language=options.language) if subs is not None else None
    if original is None:
        asr, asr_note = transcriber(Asr(asr_model, device), options.language, "--subs"), None
    else:
        asr, asr_note = open_asr(asr_model, device, options.language)
    separator = None
    if separate:
        from omnidub.source.separate import load_separator
        from omnidub.source.separate import separate as split

        separator = load_separator(separate, device)  # a model that is not there is said before any work
    status(f"decoding {source.name}")
    audio = read_source(source, CLIP_RATE)
    if original is not None:
        check_subtitles(original, subs, audio)
    separation, files = None, {}
    if separator is not None:
        status(f"separating the vocals with {separate}")
        separation = split(separator, source, separate)
        files[ACCOMPANIMENT_NAME] = wav_bytes(separation.accompaniment, separation.sample_rate, format="FLAC")
    heard = None
    if original is None:
        heard = hear_source(
            separation.vocals if separation else audio,
            asr,
            source=source,
            language=options.language,
            separate=separate,
            progress=progress,
            status=status,
        )
        original = heard.original
    if encoder is None:
        from omnidub.embedding import source_encoder

        encoder = source_encoder(device)
    status("finding the speakers and their clips")
    extraction = extract_voices(
        audio, original, encoder=encoder, asr=asr, options=options, separation=separation, heard=heard
    )
    if asr_note:
        from dataclasses import replace

        extraction = replace(extraction, notes=extraction.notes + (asr_note,))
    clip_files = {speaker: f"{name}.wav" for speaker, name in file_names(extraction.chosen).items()}
    for speaker, chosen in extraction.chosen.items():
        files[clip_files[speaker]] = wav_bytes(extraction.clip(chosen.start, chosen.end, chosen.parts), CLIP_RATE)
    if extraction.chosen:
        files[VOICES_NAME] = voices_toml(extraction, clip_files, source=source.name).encode()
    heard_file = None
    if heard is not None:
        heard_file = original_name(source)
        files[heard_file] = labelled_srt(extraction.analysis.original, extraction.analysis.speakers).encode()
    report = report_json(
        extraction,
        source=str(source.resolve()),
        subs=str(subs) if subs else None,
        clip_files=clip_files,
        top=options.clips.top,
        asr=asr.name if asr else None,
        accompaniment=ACCOMPANIMENT_NAME if separation else None,
        heard_file=heard_file,
    )
    notes = []
    for name, data in files.items():
        notes += folder.write_bytes(name, data)
    # The extract's own files it no longer writes go; the subtitles it read stay (the original as heard, passed
    # back as --subs from this folder, is read, never removed).
    keep = set(files) | {name for name in [folder.relative(subs)] if name}
    notes += [
        f"{name} was changed after omnidub wrote it, so it was kept although this extract no longer writes it"
        for name in folder.remove_stale(keep)
    ]
    report = {**report, "notes": report["notes"] + notes}
    folder.write_text(REPORT_NAME, json.dumps(report, indent=2, ensure_ascii=False) + "\n")  # last: it vouches
    return Extracted(folder.path, extraction, report, tuple(sorted(files)) + (REPORT_NAME,))


def no_clip_error(extracted: Extracted) -> OmnidubError:
    """The one line for an extract where no speaker got a clip."""
    missing = extracted.extraction.missing
    first = next(iter(missing))
    more = f" (and {len(missing) - 1} more speaker{'s' if len(missing) > 2 else ''})" if len(missing) > 1 else ""
    return OmnidubError(
        f"no speaker has a usable clip: {first}: {missing[first]}{more}; see {extracted.folder / REPORT_NAME}"
    )
