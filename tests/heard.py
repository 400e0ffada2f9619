"""Comparing what an ASR model heard with what was said, with room for the CPU it runs on.

The same Whisper model hears the same clip a little differently on different CPUs ("jump" on an AMD EPYC,
"jumps" on an Intel Xeon): tests compare words with a tolerance, never a transcript exactly. The tolerance
still catches what the tests look for: a word missing or added at either end (a cut in the wrong place), and
another sentence altogether.
"""

from __future__ import annotations

import difflib
import re

import jiwer


def words(text: str) -> list[str]:
    """Lower-case words without punctuation ("quick-brown" is two words, as Whisper hears it)."""
    return re.findall(r"[\w']+", text.lower())


def alike(heard: str, said: str) -> bool:
    """The same word, or the same word heard in another form ("jump" for "jumps", "dog" for "dogs")."""
    return heard == said or difflib.SequenceMatcher(None, heard, said).ratio() >= 0.75


def assert_says(heard: str, said: str) -> None:
    """`heard` is `said` word for word: as many words, the first and the last alike, and at most one word in
    five (at least one) heard as another."""
    h, s = words(heard), words(said)
    assert h, f"nothing heard; said {said!r}"
    assert len(h) == len(s), f"{len(h)} words heard, {len(s)} said: {heard!r} against {said!r}"
    assert alike(h[0], s[0]) and alike(h[-1], s[-1]), f"it starts or ends on another word: {heard!r} against {said!r}"
    misheard = [(a, b) for a, b in zip(h, s) if a != b]
    assert len(misheard) <= max(1, len(s) // 5), f"words heard otherwise: {misheard}"


def word_error_rate(heard: str, said: str) -> float:
    """Word errors over the words said, after lower-casing and dropping punctuation."""
    return jiwer.wer(" ".join(words(said)), " ".join(words(heard)))
