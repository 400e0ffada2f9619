"""The library face of ``omnidub voices extract``: source + original subtitles in, a voices folder out."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from omnidub.asr import Asr, whisper_language
from omnidub.errors import OmnidubError
from omnidub.script import read_script
from omnidub.source.audio import CLIP_RATE, check_subtitles, read_source
from omnidub.source.extract import Extraction, ExtractOptions, extract_voices
from omnidub.source.folder import check_folder, file_name, wav_bytes, write_folder
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
        return None, (f"no ASR model: the default ({asr.name}) is not downloaded, so clips are not checked against "
                      "their words and clips over the window are not cut; pass --asr-model NAME|PATH")
    # Asking loads the model: one the user named that cannot load is theirs to fix, said before any work.
    english_only = asr.english_only()
    if english_only and whisper_language(language) not in (None, "en"):
        return None, f"no ASR check: {asr.name} is English-only and the source speaks {language}"
    return asr, None


def extract_folder(source: Path, subs: Path, out: Path, *, options: ExtractOptions = ExtractOptions(),
                   asr_model: str | None = None, separate: str | None = None, device: str = "cpu",
                   encoder=None, status: Callable[[str], None] = lambda _: None) -> Extracted:
    """Read the source and its original subtitles, choose a clip per speaker, and write the clips, voices.toml
    and extract.json (and the accompaniment when separating) into `out`."""
    source, subs, out = Path(source), Path(subs), Path(out)
    check_folder(out)  # before any work: a folder that cannot be written is said at once
    original = read_script(subs, language=options.language)
    asr, asr_note = open_asr(asr_model, device, options.language)
    separator = None
    if separate:
        from omnidub.source.separate import load_separator
        from omnidub.source.separate import separate as split

        separator = load_separator(separate, device)  # a model that is not there is said before any work
    status(f"decoding {source.name}")
    audio = read_source(source, CLIP_RATE)
    check_subtitles(original, subs, audio)
    separation, files = None, {}
    if separator is not None:
        status(f"separating the vocals with {separate}")
        separation = split(separator, source, separate)
        files[ACCOMPANIMENT_NAME] = wav_bytes(separation.accompaniment, separation.sample_rate, format="FLAC")
    if encoder is None:
        from omnidub.qa.voice import SpeakerEncoder

        encoder = SpeakerEncoder(device)
    status("finding the speakers and their clips")
    extraction = extract_voices(audio, original, encoder=encoder, asr=asr, options=options, separation=separation)
    if asr_note:
        from dataclasses import replace

        extraction = replace(extraction, notes=extraction.notes + (asr_note,))
    taken = {VOICES_NAME, REPORT_NAME, ACCOMPANIMENT_NAME}
    clip_files = {speaker: file_name(speaker, taken) for speaker in extraction.chosen}
    for speaker, chosen in extraction.chosen.items():
        files[clip_files[speaker]] = wav_bytes(extraction.clip(chosen.start, chosen.end), CLIP_RATE)
    if extraction.chosen:
        files[VOICES_NAME] = voices_toml(extraction, clip_files, source=source.name).encode()
    report = report_json(extraction, source=str(source), subs=str(subs), clip_files=clip_files,
                         top=options.clips.top, asr=asr.name if asr else None,
                         accompaniment=ACCOMPANIMENT_NAME if separation else None)
    write_folder(out, files, report)
    return Extracted(out, extraction, report, tuple(sorted(files)) + (REPORT_NAME,))


def no_clip_error(extracted: Extracted) -> OmnidubError:
    """The one line for an extract where no speaker got a clip."""
    missing = extracted.extraction.missing
    first = next(iter(missing))
    more = f" (and {len(missing) - 1} more speaker{'s' if len(missing) > 2 else ''})" if len(missing) > 1 else ""
    return OmnidubError(f"no speaker has a usable clip: {first}: {missing[first]}{more}; "
                        f"see {extracted.folder / REPORT_NAME}")
