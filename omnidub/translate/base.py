"""What every translation engine shares: the request for one line, its candidates, and the engine protocol."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Protocol

from omnidub.errors import OmnidubError


@dataclass(frozen=True)
class Candidate:
    """One translation of a line, and how it was made (``whole line``, ``sentence by sentence``, ``llm 2`` ...)."""

    text: str
    how: str


@dataclass(frozen=True)
class Request:
    """One line to translate: its text, speaker, the scene around it and its length budget (seconds, characters)."""

    index: int
    text: str
    speaker: str
    before: tuple[str, ...] = ()
    after: tuple[str, ...] = ()
    seconds: float | None = None  # the longest the line may be spoken in, sped up as allowed (None: untimed)
    characters: int | None = None  # about as many characters as fit in that time at the original's pace


@dataclass(frozen=True)
class Pair:
    """The languages of a translation, as short tags (``en``, ``pt``), and the target's variant when one was asked
    for (``pt-BR``, ``pt-PT``, ``es-ES``, ``es-419``; None: either)."""

    source: str
    target: str
    variant: str | None = None

    @property
    def target_name(self) -> str:
        """The target as asked for: its variant, else its tag."""
        return self.variant or self.target


Progress = Callable[[int, int], None]


class Unanswered(OmnidubError):
    """An engine gave nothing for some lines of a batch after its tries (refused answers, no answer in time): the
    other lines are translated and these written in the original, flagged. ``answered``: the batch's lines it did
    answer, with their candidates."""

    def __init__(self, text: str, answered: dict[int, list] | None = None) -> None:
        super().__init__(text)
        self.answered = dict(answered or {})


class Engine(Protocol):
    """A translation engine: its name and model (for the cache key) and its candidates per line, most faithful
    first. ``shorten`` asks again for lines whose every candidate was too long (None: the engine cannot)."""

    name: str
    model: str

    def settings(self) -> dict: ...

    def candidates(
        self, requests: list[Request], pair: Pair, glossary, progress: Progress | None = None
    ) -> dict[int, list[Candidate]]: ...

    def shorten(self, requests: list[Request], pair: Pair, glossary) -> dict[int, list[Candidate]] | None: ...


def language_tag(code: str, where: str) -> str:
    """A language as a short tag (``pt-BR`` -> ``pt``, ``Portuguese`` -> ``pt``); one line for one it does not know."""
    import langcodes

    from omnidub.lightweight import omnivoice_module

    text = (code or "").strip()
    names = omnivoice_module("lang_map").LANG_NAME_TO_ID
    named = names.get(text.lower())
    try:
        language = langcodes.Language.get(named or text)
        if language.language and language.is_valid():
            return language.language
    except (ValueError, LookupError):
        pass
    import difflib

    close = difflib.get_close_matches(text.lower(), list(names), n=1, cutoff=0.75) if len(text) > 3 else []
    if close:
        raise OmnidubError(f"{where}: unknown language {code!r}; did you mean {names[close[0]]} ({close[0]})?")
    raise OmnidubError(f"{where}: unknown language {code!r} (give a language tag such as en, pt or es)")


def language_variant(code: str) -> str | None:
    """The regional variant a language tag names (``pt-br`` -> ``pt-BR``, ``es-MX`` -> ``es-MX``), or None for a
    bare language; one line for a tag it cannot read."""
    import langcodes

    text = (code or "").strip()
    if "-" not in text and "_" not in text:
        return None
    try:
        language = langcodes.Language.get(text.replace("_", "-"))
    except (ValueError, LookupError):
        raise OmnidubError(
            f"--to: unknown language {code!r} (give a language tag such as pt, pt-BR or es-419)"
        ) from None
    if not language.language or not language.territory:
        return None
    return f"{language.language}-{language.territory}"
