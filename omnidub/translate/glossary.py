"""The glossary: names spoken as they are and fixed translations, read from TOML, and the check that a
translation kept them.

```toml
keep = ["Acme", "Nora"]        # said as written, in every language

[pt]                           # fixed translations into one language
"launch" = "lançamento"
```
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path

from omnidub.errors import OmnidubError


@dataclass(frozen=True)
class Glossary:
    """The terms for one target language: (source term, what the translation must say), names included."""

    terms: tuple[tuple[str, str], ...] = ()

    def digest(self) -> str:
        return hashlib.sha256(json.dumps(self.terms, ensure_ascii=False).encode()).hexdigest()[:16]

    def in_line(self, text: str) -> list[tuple[str, str]]:
        """The terms a line's source text holds (whole words, any case)."""
        return [(term, wanted) for term, wanted in self.terms if _word(term).search(text)]

    def dropped(self, source: str, translation: str) -> list[str]:
        """What the translation should say and does not, for the terms in ``source``."""
        return [wanted for _, wanted in self.in_line(source) if not _word(wanted).search(translation)]

    def placed(self, text: str) -> str:
        """The source with each of its terms written as the translation must say it (an engine copies a word it
        does not know through, so the term survives)."""
        for term, wanted in self.in_line(text):
            text = _word(term).sub(wanted, text)
        return text


def _word(term: str) -> re.Pattern:
    return re.compile(rf"(?<!\w){re.escape(term)}(?!\w)", re.IGNORECASE)


def load_glossary(path: Path | None, target: str) -> Glossary:
    """The glossary file's terms for ``target`` (an empty glossary without a file); one line for a bad file."""
    if path is None:
        return Glossary()
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib
    try:
        data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise OmnidubError(f"--glossary {path}: cannot read it ({exc.strerror or exc})") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise OmnidubError(f"--glossary {path}: not TOML ({exc})") from None
    keep = data.get("keep", [])
    if not isinstance(keep, list) or not all(isinstance(k, str) and k.strip() for k in keep):
        raise OmnidubError(f'--glossary {path}: keep must be a list of names, e.g. keep = ["Acme", "Nora"]')
    terms = [(k.strip(), k.strip()) for k in keep]
    for language, table in data.items():
        if language == "keep":
            continue
        if not isinstance(table, dict) or not all(isinstance(v, str) and v.strip() for v in table.values()):
            raise OmnidubError(
                f'--glossary {path}: [{language}] must map terms to their translations, e.g. "launch" = "lançamento"'
            )
        if language.split("-")[0].lower() == target:
            terms += [(k.strip(), v.strip()) for k, v in table.items() if k.strip()]
    # Longer terms first: "Acme Rocket" is placed before "Acme".
    return Glossary(tuple(sorted(dict(terms).items(), key=lambda t: -len(t[0]))))
