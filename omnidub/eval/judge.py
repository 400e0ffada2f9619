"""The judge: each sentence's audio transcribed by omnidub's ASR and scored by QA's rule (WER, or CER where the
language is scored per character, after QA's normalisation), and what is known about the judge's strength."""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable, Sequence

from omnidub.asr import Asr
from omnidub.qa.levels import measure, read_segment
from omnidub.qa.results import QaSettings
from omnidub.qa.run import ASR_FAILED, hear

# Seed 000's warning, in one place: a weak judge measures itself.
WEAK_JUDGE = (
    "a weak judge: in the fast-path study faster-whisper base put the same audio at 20-33 % WER, with "
    "a different ranking of the configurations, where large-v3 heard 2-3 %; a difference it reports may "
    "be its own mishearing (use large-v3, or at least small, for a decision)"
)
MID_JUDGE = (
    "a mid-size judge: stronger than tiny and base, weaker than large-v3, the study's judge; confirm a "
    "close result with large-v3"
)
STRONG_JUDGE = "a strong judge (the fast-path study judged with large-v3)"
UNKNOWN_JUDGE = "a judge omnidub cannot size; if it is worse than the system under test, the eval measures the judge"
_WEAK, _MID = ("tiny", "base"), ("small", "medium")
# A CTranslate2 Whisper folder by the size of its weights: tiny and base are under ~300 MB, small and medium
# (int8 or float16) under ~2 GB.
_WEAK_BYTES, _MID_BYTES = 300e6, 2e9


@dataclass(frozen=True)
class Judge:
    """The ASR model that judges, where it runs, and how strong it is known to be (``weak``, ``mid``, ``strong``
    or ``unknown``) with the sentence the report says about it."""

    model: str
    device: str
    strength: str
    note: str


def describe(asr: Asr) -> Judge:
    """What the report says about the judge: its strength from its size name, or from its weights' size for a
    folder."""
    folder = asr.installed or (Path(asr.name).expanduser() if Path(asr.name).expanduser().is_dir() else None)
    name = asr.name.lower().removeprefix("systran/faster-whisper-").removeprefix("distil-")
    strength = "unknown"
    if asr.installed is None and folder is not None:
        if (folder / "model.bin").is_file():
            size = (folder / "model.bin").stat().st_size
            strength = "weak" if size < _WEAK_BYTES else "mid" if size < _MID_BYTES else "strong"
    elif name.startswith(_WEAK):
        strength = "weak"
    elif name.startswith(_MID):
        strength = "mid"
    elif name.startswith("large"):
        strength = "strong"
    note = {"weak": WEAK_JUDGE, "mid": MID_JUDGE, "strong": STRONG_JUDGE, "unknown": UNKNOWN_JUDGE}[strength]
    return Judge(asr.name, asr.device, strength, note)


@dataclass(frozen=True)
class Spoken:
    """A sentence's audio to judge: its number, its text and language, and the file."""

    index: int
    text: str
    language: str | None
    file: Path


@dataclass(frozen=True)
class Judged:
    """What the judge heard in one sentence and how many errors that is (``units``: words or characters of
    the text after normalising); ``unscored`` says why it was not scored."""

    index: int
    text: str
    language: str | None
    transcript: str | None
    metric: str
    errors: int
    units: int
    unscored: str | None = None

    @property
    def scored(self) -> bool:
        return self.unscored is None and self.transcript is not None and self.units > 0

    @property
    def rate(self) -> float:
        """The sentence's error rate in percent."""
        return 100.0 * self.errors / self.units if self.units else 0.0


def judge(
    asr: Asr,
    sentences: Sequence[Spoken],
    progress: Callable[[int, int], None] | None = None,
    known: dict[str, dict] | None = None,
) -> list[Judged]:
    """Transcribe and score every sentence, as QA hears a line; the same audio of the same sentence (the same
    bytes, text and language) is heard once. ``known`` holds what this judge heard before (by :func:`heard_key`,
    as :func:`judged_record` writes it): found there, a sentence is not heard again, and what is heard now is
    added to it."""
    english_only = functools.cache(lambda: bool(asr.english_only()))
    settings = QaSettings()
    heard: dict[str, Judged] = {}
    found = []
    for done, sentence in enumerate(sentences, 1):
        key = heard_key(asr, sentence)
        if key not in heard and known is not None and key in known:
            heard[key] = replace(judged_from(known[key]), index=sentence.index)
        if key not in heard:
            data, rate = read_segment(sentence.file, sentence.index)
            _, mono = measure(data, rate, settings)  # non-finite samples zeroed, as QA hears them
            got = hear(asr, sentence.text, sentence.language, mono, rate, english_only)
            heard[key] = Judged(
                sentence.index,
                sentence.text,
                got.language,
                got.transcript,
                got.score.metric,
                got.score.errors,
                got.score.units,
                got.unscored,
            )
            if known is not None and not (got.unscored or "").startswith(ASR_FAILED):
                known[key] = judged_record(heard[key])  # an ASR that failed on the audio is asked again next time
        found.append(replace(heard[key], index=sentence.index))
        if progress is not None:
            progress(done, len(sentences))
    return found


def heard_key(asr: Asr, sentence: Spoken) -> str:
    """One sentence's audio as one judge hears it: the judge's weights and device, omnidub's version (its scoring
    rules), the audio's bytes, its text and language."""
    from omnidub import __version__
    from omnidub.keys import file_digest

    digest = file_digest(sentence.file).hexdigest()
    parts = [asr.identity(), asr.device, __version__, digest, sentence.text, sentence.language]
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest()[:32]


def judged_record(judged: Judged) -> dict:
    """What the judge heard, as the eval's folder keeps it (no sentence number: the same audio may be another's)."""
    return {k: v for k, v in dataclasses.asdict(judged).items() if k != "index"}


def judged_from(record: dict) -> Judged:
    """A kept record read back; a record that is not one raises ValueError."""
    names = {f.name for f in dataclasses.fields(Judged)} - {"index"}
    if not isinstance(record, dict) or set(record) != names:
        raise ValueError("not a judged sentence")
    text_or_none = ("transcript", "language", "unscored")
    if not (
        isinstance(record["text"], str)
        and isinstance(record["metric"], str)
        and all(isinstance(record[k], str) or record[k] is None for k in text_or_none)
        and all(
            isinstance(record[k], int) and not isinstance(record[k], bool) and record[k] >= 0
            for k in ("errors", "units")
        )
    ):
        raise ValueError("not a judged sentence")
    return Judged(index=0, **record)
