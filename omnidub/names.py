"""Speaker names made safe for file names, stable from one run to the next."""

from __future__ import annotations

import hashlib
import re
from collections import Counter


def safe_name(name: str) -> str:
    """A speaker name that is safe as a file name: no separators, no dots in front, never empty."""
    cleaned = re.sub(r"[^\w-]+", "_", name, flags=re.UNICODE).strip("_")
    return cleaned[:64] or "speaker"


def file_names(speakers, previous: dict[str, str] | None = None) -> dict[str, str]:
    """Each speaker's file name, from its own name alone: the safe name, plus a short hash of the name when
    sanitising changed it or another speaker's name differs only in case. A speaker keeps the name it had in
    ``previous`` (the last render's mapping) while that is still one of its own, so adding a speaker moves
    no one else's files."""
    previous = previous or {}

    def own(speaker: str, digits: int = 6) -> str:
        return f"{safe_name(speaker)}-{hashlib.sha256(speaker.encode()).hexdigest()[:digits]}"

    plain = {s: safe_name(s) if safe_name(s) == s else own(s) for s in speakers}
    folds = Counter(name.casefold() for name in plain.values())
    names: dict[str, str] = {}
    taken: set[str] = set()
    for speaker in sorted(speakers):
        old = previous.get(speaker)
        if old in (plain[speaker], own(speaker)) and old.casefold() not in taken:
            names[speaker] = old
            taken.add(old.casefold())
    for speaker in sorted(set(speakers) - set(names)):
        name, digits = plain[speaker], 6
        if folds[name.casefold()] > 1 or name.casefold() in taken:
            name = own(speaker)
        while name.casefold() in taken:  # a hash prefix shared by chance: a longer one
            digits += 6
            name = own(speaker, digits)
        names[speaker] = name
        taken.add(name.casefold())
    return names
