"""Each line's candidates kept on disk, keyed by everything that could change them, so a rerun asks the engine
only for lines that changed."""

from __future__ import annotations

import hashlib
import json
import threading
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
    not decoded again. ``model``: the model's identity (its weights' digest); a new model asks again. A cache that
    cannot be opened or written is left alone for the rest of the run: the texts are decoded, never an error."""

    def __init__(self, model: str, root: Path | None = None):
        if root is None:
            from omnidub.files import cache_home

            root = cache_home() / "translate"
        self.model = model
        self._path = Path(root) / "sentences.sqlite"
        self._db = None  # opened on first use
        self._off = False  # it failed once: not tried again this run
        self._lock = threading.Lock()  # one connection, shared by the threads that translate

    def _run(self, sql: str, values: tuple) -> list:
        """The rows of one statement (committed), or [] once the cache is off."""
        import sqlite3

        with self._lock:
            if self._off:
                return []
            try:
                if self._db is None:
                    self._path.parent.mkdir(parents=True, exist_ok=True)
                    self._db = sqlite3.connect(self._path, timeout=10, check_same_thread=False)
                    self._db.execute("PRAGMA journal_mode=WAL")  # many small writes, readers never blocked
                    self._db.execute("PRAGMA synchronous=NORMAL")  # a crash may lose the last few: decoded again
                    self._db.execute(
                        "CREATE TABLE IF NOT EXISTS said (model TEXT, how TEXT, text TEXT, said TEXT, "
                        "PRIMARY KEY (model, how, text))"
                    )
                with self._db as db:
                    return db.execute(sql, values).fetchall()
            except (OSError, sqlite3.Error):
                self._off = True
                return []

    def get(self, how: str, text: str) -> str | None:
        found = self._run("SELECT said FROM said WHERE model = ? AND how = ? AND text = ?", (self.model, how, text))
        return found[0][0] if found else None

    def put(self, how: str, text: str, said: str) -> None:
        self._run("INSERT OR REPLACE INTO said VALUES (?, ?, ?, ?)", (self.model, how, text, said))
