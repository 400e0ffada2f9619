"""Scoring what was heard against the user's text: WER or CER as OmniVoice's evaluation counts them, and the
difference shown in the user's own words."""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from typing import Callable

import jiwer

from omnidub.asr import whisper_language

# OmniVoice's evaluation scores these languages per character. Where spaces carry no meaning they are
# dropped; elsewhere they stay as a character of their own.
CER_LANGUAGES_WITHOUT_SPACES = frozenset({"zh", "yue", "ja"})
CER_LANGUAGES_WITH_SPACES = frozenset({"ko", "th", "ar", "vi", "hi", "el"})


def metric_for(language: str | None) -> str:
    """The metric a language is scored with: "cer" where OmniVoice scores per character, else "wer"."""
    code = whisper_language(language)
    return "cer" if code in CER_LANGUAGES_WITHOUT_SPACES | CER_LANGUAGES_WITH_SPACES else "wer"


_normalizers: dict[str, Callable[[str], str]] = {}


def _normalize(text: str, code: str | None) -> str:
    kind = "en" if code == "en" else "basic"
    if kind not in _normalizers:
        if kind == "en":
            from whisper_normalizer.english import EnglishTextNormalizer

            _normalizers[kind] = EnglishTextNormalizer()
        else:
            from whisper_normalizer.basic import BasicTextNormalizer

            _normalizers[kind] = BasicTextNormalizer()
    normalized = " ".join(_normalizers[kind](text).split())
    return normalized.replace(" ", "") if code in CER_LANGUAGES_WITHOUT_SPACES else normalized


@dataclass(frozen=True)
class Score:
    metric: str
    errors: int
    units: int


def score(text: str, transcript: str, language: str | None) -> Score:
    """Errors (substitutions, deletions, insertions) of the transcript against the text, after normalising."""
    code = whisper_language(language)
    metric = metric_for(code)
    reference, hypothesis = _normalize(text, code), _normalize(transcript, code)
    if not reference and not hypothesis:
        return Score(metric, 0, 0)
    if metric == "cer":
        out = jiwer.process_characters(reference, hypothesis)
    else:
        out = jiwer.process_words(reference, hypothesis)
    ref_units = out.references[0] if reference else []
    return Score(metric, out.substitutions + out.deletions + out.insertions, len(ref_units))


_WORD_CHARS = re.compile(r"\w+")


def display_diff(text: str, transcript: str, language: str | None) -> tuple[tuple[str, str, str], ...]:
    """The user's text against the words as heard, both as written; a difference the scorer's normaliser
    erases ("9" and "nine", "let's" and "let us") is shown as equal."""
    code = whisper_language(language)
    per_character = code in CER_LANGUAGES_WITHOUT_SPACES
    ours = [c for c in text if not c.isspace()] if per_character else text.split()
    heard = [c for c in transcript if not c.isspace()] if per_character else transcript.split()
    glue = "" if per_character else " "

    def key(token: str) -> str:
        return "".join(_WORD_CHARS.findall(token.casefold()))

    matcher = difflib.SequenceMatcher(None, [key(t) for t in ours], [key(t) for t in heard], autojunk=False)
    pieces: list[tuple[str, str, str]] = []
    for op, a0, a1, b0, b1 in matcher.get_opcodes():
        mine, theirs = glue.join(ours[a0:a1]), glue.join(heard[b0:b1])
        if op == "equal" or _normalize(mine, code) == _normalize(theirs, code):
            kind = "equal"
        else:
            kind = {"replace": "substitute", "delete": "delete", "insert": "insert"}[op]
        if pieces and pieces[-1][0] == kind:
            previous = pieces.pop()
            mine = glue.join(p for p in (previous[1], mine) if p)
            theirs = glue.join(p for p in (previous[2], theirs) if p)
        pieces.append((kind, mine, theirs))
    return tuple(pieces)
