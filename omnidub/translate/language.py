"""Which language a text reads as: the source's, when no --from is given, and the check that a translation is in
the language asked for (py3langid: langid.py's model, 97 languages, in its wheel)."""

from __future__ import annotations

import re
from functools import cache

# Language identification on a line of one or two words is a guess ("Genial." reads as Slovak): such lines are
# never refused for their language, only for being the source's own words.
CHECK_WORDS = 3
_WORD = re.compile(r"[^\W\d_]+")
# A word as a dictionary lists it: "ma'am" is one word, not "ma" and "am".
_LISTED = re.compile(r"[^\W_]+(?:['’][^\W_]+)*")


def _langid():
    import py3langid

    return py3langid


def detect(texts: list[str]) -> str:
    """The language most of ``texts`` read as, as a tag."""
    return _langid().classify(" ".join(texts)[:20000])[0]


def wrong_language(text: str, source_text: str, pair) -> str | None:
    """Why ``text`` is not a translation of ``source_text`` into ``pair.target`` (None: nothing against it): the
    source's own words back, or (three words or more) a text whose three likeliest languages leave the target out,
    unless its words are the target's: most of them in the target's dictionary, and more of them than in the
    dictionary of the language it reads as. Colloquial speech is where identification errs ("Tá bom, tá bom. Já
    vou." reads as Faroese); Spanish read as Spanish stays Spanish, though Portuguese knows most of its words."""
    words = _WORD.findall(text.casefold())
    if pair.source != pair.target and words and words == _WORD.findall(source_text.casefold()) and len(words) > 1:
        return "the source's own words, untranslated"
    if len(words) < CHECK_WORDS:
        return None
    likeliest = [code for code, _ in _langid().rank(text)[:3]]
    if pair.target in likeliest:
        return None
    listed = _LISTED.findall(text.casefold())
    mine, theirs = known_words(listed, pair.target), known_words(listed, likeliest[0])
    if mine is not None and mine * 2 > len(listed) and (theirs is None or mine > theirs):
        return None
    return f"reads as {likeliest[0]}, not {pair.target}"


def known_words(words: list[str], language: str) -> int | None:
    """How many of ``words`` (in lower case) ``language``'s dictionary knows; None where there is no dictionary."""
    known = dictionary(language)
    if known is None:
        return None
    return sum(known.word_usage_frequency(w) >= 1e-6 for w in words)


@cache
def dictionary(language: str):
    """Word frequencies of ``language`` (pyspellchecker's lists, in its wheel), or None for one it lacks."""
    try:
        from spellchecker import SpellChecker

        return SpellChecker(language=language, distance=1)
    except (ImportError, ValueError, OSError):
        return None
