"""The line journal: one typed entry appended (and fsync'd) as each line finishes, and the manifest snapshot.

Bytes written grow linearly with the lines rendered: a line costs one journal record, and ``manifest.json``
is written whole only at the end of a run (and on Ctrl-C). A crash leaves the journal; the next run reads the
manifest, then the journal on top of it, and ignores a torn last record.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

from omnidub.files import cannot_write, write_text_atomic

MANIFEST = "manifest.json"
JOURNAL = "journal.jsonl"
DONE = ("rendered", "cached")


@dataclass
class LineEntry:
    """One line of a render as the manifest records it. ``start``/``end``/``limit_at`` are absolute times in
    the programme; ``slot``, ``natural``, ``target`` and ``duration`` are lengths; ``render_seconds`` is the
    wall time its synthesis cost."""

    index: int
    speaker: str
    text: str
    language: str | None
    start: float
    end: float
    slot: float | None
    natural: float
    target: float
    speed: float
    limit_at: float | None
    file: str
    base_key: str
    key: str
    seed: int
    flags: list[str] = field(default_factory=list)
    status: str = "pending"
    duration: float | None = None
    sha256: str | None = None
    error: str | None = None
    render_seconds: float = 0.0
    attempts: list[dict] = field(default_factory=list)

    @property
    def done(self) -> bool:
        return self.status in DONE

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict) -> "LineEntry":
        """An entry from a manifest or journal record (unknown keys ignored; a missing field raises)."""
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


class Journal:
    """Appends finished lines to ``journal.jsonl``; ``snapshot`` writes the manifest and starts afresh."""

    def __init__(self, out_dir: Path):
        self.path = Path(out_dir) / JOURNAL
        self._handle = None

    def append(self, entry: LineEntry) -> None:
        try:
            if self._handle is None:
                self._handle = open(self.path, "a", encoding="utf-8")
            self._handle.write(json.dumps(entry.to_json(), ensure_ascii=False) + "\n")
            self._handle.flush()
            os.fsync(self._handle.fileno())
        except OSError as exc:
            # A torn record is ignored on reading; the line's keyed audio still counts on the next run.
            self.close_quietly()
            problem = cannot_write(self.path, exc)
            if problem is None:
                raise
            raise problem from exc

    def close_quietly(self) -> None:
        handle, self._handle = self._handle, None
        if handle is not None:
            try:
                handle.close()
            except OSError:
                pass  # buffered bytes that cannot be written: the record is torn, and read as such

    def close(self) -> None:
        if self._handle is not None:
            self._handle.close()
            self._handle = None

    def snapshot(self, manifest: dict) -> None:
        """Write the manifest whole; the journal's records are then in it, so the journal starts empty."""
        self.close()
        write_text_atomic(self.path.parent / MANIFEST, json.dumps(manifest, indent=2, ensure_ascii=False))
        self.path.unlink(missing_ok=True)


def read_manifest(out_dir: Path) -> dict | None:
    """The manifest as written, or None when there is none (or it is not a manifest)."""
    try:
        data = json.loads((Path(out_dir) / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def read_entries(out_dir: Path) -> list[LineEntry]:
    """Every entry the manifest holds, updated by the journal's newer records (a torn last record is ignored)."""
    entries: list[LineEntry] = []
    manifest = read_manifest(out_dir)
    for record in (manifest or {}).get("lines", []) if isinstance((manifest or {}).get("lines"), list) else []:
        entry = _entry(record)
        if entry is not None:
            entries.append(entry)
    try:
        text = (Path(out_dir) / JOURNAL).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return entries
    for raw in text.splitlines():
        try:
            record = json.loads(raw)
        except ValueError:
            continue  # a record torn by a crash
        entry = _entry(record)
        if entry is not None:
            entries.append(entry)
    return entries


def _entry(record) -> LineEntry | None:
    if not isinstance(record, dict):
        return None
    try:
        return LineEntry.from_json(record)
    except TypeError:
        return None  # a record of another version or a damaged one: the keyed audio still counts
