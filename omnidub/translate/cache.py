"""Each line's candidates kept on disk, keyed by everything that could change them, so a rerun asks the engine
only for lines that changed."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict
from pathlib import Path

from omnidub.translate.base import Candidate, Pair, Request

VERSION = 1  # of the kept candidates: a new one asks every line again


class LineCache:
    """Candidates per line in ``root`` (omnidub's cache by default), one small JSON file a key."""

    def __init__(self, root: Path | None = None):
        if root is None:
            from omnidub.files import cache_home

            root = cache_home() / "translate" / "lines"
        self.root = Path(root)

    @staticmethod
    def key(engine, pair: Pair, request: Request, glossary: str, what: str = "translate") -> str:
        """The key of one line's candidates: engine, model, settings, languages, text, its scene when the engine
        reads it, its budget, the glossary and what was asked (``translate`` or ``shorten``)."""
        fields = {
            "version": VERSION,
            "engine": engine.name,
            "model": engine.model,
            "settings": engine.settings(),
            "pair": asdict(pair),
            "text": request.text,
            "speaker": request.speaker,
            "glossary": glossary,
            "what": what,
        }
        if engine.uses_context:
            fields.update(before=request.before, after=request.after, seconds=request.seconds)
            fields.update(characters=request.characters)
        return hashlib.sha256(json.dumps(fields, sort_keys=True, ensure_ascii=False).encode()).hexdigest()

    def get(self, key: str) -> list[Candidate] | None:
        try:
            data = json.loads((self.root / key[:2] / f"{key}.json").read_text(encoding="utf-8"))
            found = [Candidate(str(c["text"]), str(c["how"])) for c in data["candidates"]]
        except (OSError, ValueError, KeyError, TypeError):
            return None
        return found or None

    def put(self, key: str, candidates: list[Candidate]) -> None:
        from omnidub.files import write_text_atomic

        path = self.root / key[:2] / f"{key}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        data = {"candidates": [asdict(c) for c in candidates]}
        write_text_atomic(path, json.dumps(data, ensure_ascii=False))


class SentenceCache:
    """What a deterministic model said for each text, in one SQLite file in omnidub's cache
    (``translate/sentences.sqlite``), so a rerun's checks (the round trips, the rewordings) and candidates are read,
    not decoded again. ``model``: the model's identity (its weights' digest); a new model asks again."""

    def __init__(self, model: str, root: Path | None = None):
        if root is None:
            from omnidub.files import cache_home

            root = cache_home() / "translate"
        self.model = model
        self._path = Path(root) / "sentences.sqlite"
        self._db = None  # opened on first use; None after a failure: the cache is then skipped, never an error

    def _open(self):
        import sqlite3

        if self._db is None:
            self._path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(self._path, timeout=10, check_same_thread=False)
            self._db.execute("PRAGMA journal_mode=WAL")  # many small writes, readers never blocked
            self._db.execute("PRAGMA synchronous=NORMAL")  # a crash may lose the last few: they are decoded again
            self._db.execute(
                "CREATE TABLE IF NOT EXISTS said (model TEXT, how TEXT, text TEXT, said TEXT, "
                "PRIMARY KEY (model, how, text))"
            )
        return self._db

    def get(self, how: str, text: str) -> str | None:
        import sqlite3

        try:
            row = (
                self._open()
                .execute("SELECT said FROM said WHERE model = ? AND how = ? AND text = ?", (self.model, how, text))
                .fetchone()
            )
        except (OSError, sqlite3.Error):
            return None
        return row[0] if row else None

    def put(self, how: str, text: str, said: str) -> None:
        import sqlite3

        try:
            with self._open() as db:
                db.execute("INSERT OR REPLACE INTO said VALUES (?, ?, ?, ?)", (self.model, how, text, said))
        except (OSError, sqlite3.Error):
            pass  # not kept: the next run decodes it again
