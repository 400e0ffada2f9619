"""A line's natural spoken length from its phonemes in its language, at the pace of the clip it is cloned from.

Phonemes come from espeak-ng through the phonemizer package (espeak-ng's library from the espeakng-loader wheel
where it is installed, else the system's). Each language's weights (seconds per consonant, vowel, word, pause
and line; long vowels and stress were measured and weigh nothing) were fitted to real speech of several
synthesizers (``tools/calibrate_pace.py``; docs/translate.md, "Pace"). A line cloned from a clip is spoken at
that clip's pace: the clip's seconds over what its own transcript takes at its language's base rate, so a clip in
another language than the line (OmniVoice clones across languages) carries its pace over. Without espeak-ng, or
for a language it does not speak, lengths come from upstream OmniVoice's character-count estimator, and
:func:`model` says so.

The fit choice of a translation and the render's plan both ask :func:`natural_seconds`, so a line is predicted
one way wherever it is predicted. No torch, no model.
"""

from __future__ import annotations

import json
import re
import threading
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

from omnidub import duration

# The vowel letters of espeak-ng's IPA (a phone holding one is a vowel; two make a diphthong).
VOWELS = frozenset("aeiouyæɐɑɒɔəɘɚɛɜɝɞɤɨɪʉʊʌʏøœɶɯɵᵻ")
FEATURES = ("consonants", "vowels", "long vowels", "stressed vowels", "words", "short pauses", "full stops", "line")
# A short pause after a comma, semicolon, colon or a dash between words; a full stop inside the line after a
# sentence's end (the line's own last one is not heard: speech is measured between its first and last sound).
_SHORT_PAUSE = re.compile(r"[,;:]|\s[-–—]+\s")
_FULL_STOP = re.compile(r"[.!?…]+(?=[\s\"'”»)]|$)")
_LAST_STOP = re.compile(r"[.!?…]+[\"'”»)]*\s*$")
# Languages as espeak-ng names them where the plain tag would pick another variant than the one most dubbed.
_ESPEAK_NAMES = {"pt": "pt-br", "en": "en-us", "pt-pt": "pt", "es-mx": "es-419"}
CHARACTERS = "characters (upstream OmniVoice's rule-based estimator)"


@dataclass(frozen=True)
class Pace:
    """How fast a voice speaks: the clip it is cloned from (its transcript, its seconds of speech and the language
    they are in) and the voice's speed. No clip: its language's base rate."""

    text: str | None = None
    seconds: float | None = None
    language: str | None = None  # the clip's (None: the line's own)
    speed: float = 1.0


def natural_seconds(text: str, language: str | None = None, pace: Pace = Pace()) -> float:
    """Seconds ``text`` in ``language`` takes at ``pace``: whole audio frames, at least one. ``language`` None:
    the pace's, else the one the text reads as."""
    seconds = _phoneme_seconds(text, language, pace)
    if seconds is None:
        seconds = duration.natural_seconds(text, pace.text, pace.seconds, 1.0)
    if pace.speed > 0:
        seconds /= pace.speed
    return max(1, round(seconds * duration.FRAME_RATE)) / duration.FRAME_RATE


def model() -> str:
    """Which model predicts lengths here, in words (what the manifest and translate.json record)."""
    said = phonemizer()
    return f"phonemes ({said}; rates v{_rates()['version']})" if said else CHARACTERS


def phonemizer() -> str | None:
    """The phonemizer in use, in words (None: none can be loaded)."""
    espeak = _espeak()
    return f"espeak-ng {espeak.version} via phonemizer {espeak.phonemizer}" if espeak.backend is not None else None


def unavailable() -> str | None:
    """One line saying that lengths fall back to characters and why (None: phonemes are in use)."""
    espeak = _espeak()
    if espeak.backend is not None:
        return None
    return (
        f"{espeak.missing}: line lengths are predicted from characters (upstream OmniVoice's estimator), not "
        f"phonemes; {espeak.fix} to predict them from sounds"
    )


def features(text: str, language: str) -> tuple[float, ...] | None:
    """What a line's length is fitted on (:data:`FEATURES`), from its phonemes in ``language`` (None: espeak-ng
    cannot say it)."""
    phones = _phonemes(text, language)
    if phones is None:
        return None
    consonants = vowels = long = stressed = 0
    for phone in phones:
        letters = sum(ch in VOWELS for ch in phone)
        if not letters:
            consonants += 1
            continue
        vowels += 1
        long += letters > 1 or "ː" in phone
        stressed += "ˈ" in phone
    words = len(re.findall(r"\w+", text))
    stops = len(_FULL_STOP.findall(text)) - bool(_LAST_STOP.search(text))
    return (consonants, vowels, long, stressed, words, len(_SHORT_PAUSE.findall(text)), stops, 1)


def base_seconds(text: str, language: str) -> float | None:
    """Seconds ``text`` takes at ``language``'s base rate (the calibrated synthesizers' average; None: espeak-ng
    cannot say it)."""
    found = features(text, language)
    if found is None:
        return None
    rates = _rates()
    weights = rates["languages"].get(_primary(_tag(language)), rates["default"])
    return max(0.0, sum(w * x for w, x in zip(weights, found)))


def _phoneme_seconds(text: str, language: str | None, pace: Pace) -> float | None:
    if _espeak().backend is None:
        return None
    clip = pace.text if pace.seconds and pace.text and pace.text.strip() else None
    language = language or pace.language or _detected(f"{clip or ''} {text}")
    line = base_seconds(text, language)
    if line is None:
        return None
    if clip is None:
        return line
    clip_language = pace.language or language
    own = base_seconds(clip, clip_language)
    if own is None:
        return None  # a clip in a language espeak-ng does not speak: characters for both, as upstream paces them
    if not sum(features(clip, clip_language)[:2]):
        return line  # a transcript with no sounds in it ("...") says nothing of a pace
    return line * pace.seconds / own


def _primary(tag: str) -> str:
    return tag.split("-")[0]


@lru_cache(maxsize=64)
def _detected(text: str) -> str:
    # Lines and voices without a language: the one the words read as (clip and line together, so both are
    # phonemized alike).
    import py3langid

    return py3langid.classify(text)[0]


@lru_cache(maxsize=1)
def _rates() -> dict:
    return json.loads(resources.files("omnidub").joinpath("data/pace.json").read_text(encoding="utf-8"))


@dataclass(frozen=True)
class _Espeak:
    backend: object | None  # language -> phonemizer backend (None: no espeak-ng)
    version: str = ""
    phonemizer: str = ""
    missing: str = ""
    fix: str = ""


@lru_cache(maxsize=1)
def _espeak() -> _Espeak:
    try:
        import phonemizer
        from phonemizer.backend import EspeakBackend
        from phonemizer.backend.espeak.wrapper import EspeakWrapper
    except ImportError:
        return _Espeak(None, missing="the phonemizer package is not installed", fix="pip install phonemizer")
    try:
        import espeakng_loader
    except ImportError:
        pass  # the system's espeak-ng, where there is one
    else:
        # The wheel's own espeak-ng first: the same phonemes (so the same lengths and line keys) on every machine.
        EspeakWrapper.set_library(espeakng_loader.get_library_path())
        EspeakWrapper.set_data_path(espeakng_loader.get_data_path())
    try:
        version = ".".join(str(part) for part in EspeakBackend.version())
        known = EspeakBackend.supported_languages()
    except (RuntimeError, OSError) as exc:
        reason = (str(exc).splitlines() or [type(exc).__name__])[0][:120]
        return _Espeak(
            None,
            missing=f"espeak-ng cannot be loaded ({reason})",
            fix="pip install espeakng-loader (or apt install espeak-ng)",
        )
    import logging

    quiet = logging.getLogger("omnidub.pace.phonemizer")
    quiet.setLevel(logging.ERROR)

    @lru_cache(maxsize=None)
    def backend(tag: str):
        for name in (_ESPEAK_NAMES.get(tag), tag, _ESPEAK_NAMES.get(_primary(tag)), _primary(tag)):
            if name and name in known:
                return EspeakBackend(name, with_stress=True, language_switch="remove-flags", logger=quiet)
        return None

    return _Espeak(backend, version, phonemizer.__version__)


# espeak-ng's library holds one state for the whole process: one phonemization at a time (the review predicts an
# editor's words on a request's thread while its worker plans).
_SPEAKING = threading.Lock()


@lru_cache(maxsize=8192)
def _phonemes(text: str, language: str) -> tuple[str, ...] | None:
    # Cached: a line's candidates, retakes and replans ask for the same words again and again.
    espeak = _espeak()
    if espeak.backend is None:
        return None
    from phonemizer.separator import Separator

    with _SPEAKING:
        backend = espeak.backend(_tag(language))
        if backend is None:
            return None
        said = backend.phonemize([text], separator=Separator(phone=" ", word=" | ", syllable=None), strip=True)
    return tuple(p for p in said[0].split() if p != "|") if said else ()


@lru_cache(maxsize=256)
def _tag(language: str) -> str:
    """``language`` as a lower-case tag (``pt-br``): an OmniVoice language name (``Portuguese``) becomes its id."""
    if len(language) > 3 and "-" not in language and "_" not in language:
        from omnidub.lightweight import omnivoice_module

        language = omnivoice_module("lang_map").LANG_NAME_TO_ID.get(language.lower(), language)
    return language.lower().replace("_", "-")
