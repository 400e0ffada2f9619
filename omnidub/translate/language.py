"""Which language a text reads as: the source's, when no --from is given, and the check that a translation is in
the language asked for (py3langid: langid.py's model, 97 languages, in its wheel)."""

from __future__ import annotations

import re

# Language identification on a line of one or two words is a guess ("Genial." reads as Slovak): such lines are
# never refused for their language, only for being the source's own words.
CHECK_WORDS = 3
_WORD = re.compile(r"[^\W\d_]+")


def _langid():
    import py3langid

    return py3langid


def detect(texts: list[str]) -> str:
    """The language most of ``texts`` read as, as a tag."""
    return _langid().classify(" ".join(texts)[:20000])[0]


def wrong_language(text: str, source_text: str, pair) -> str | None:
    """Why ``text`` is not a translation of ``source_text`` into ``pair.target`` (None: nothing against it): the
    source's own words back, or (three words or more) a text whose three likeliest languages leave the target out."""
    words = _WORD.findall(text.casefold())
    if pair.source != pair.target and words and words == _WORD.findall(source_text.casefold()) and len(words) > 1:
        return "the source's own words, untranslated"
    if len(words) < CHECK_WORDS:
        return None
    likeliest = [code for code, _ in _langid().rank(text)[:3]]
    if pair.target not in likeliest:
        return f"reads as {likeliest[0]}, not {pair.target}"
    return None
