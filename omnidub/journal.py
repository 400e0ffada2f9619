"""The line records of a render: one typed entry per line, appended (and synced) to the journal as each line
finishes, and folded into ``manifest.json`` when the run ends.

Bytes written grow linearly with the lines rendered: a line costs one journal record, and the manifest is
written whole only at the end of a run (and on Ctrl-C). A crash leaves the journal; the next run reads the
manifest, then the journal on top of it, and ignores a torn record.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

from omnidub.files import STATE, AppendLog

MANIFEST = "manifest.json"
JOURNAL = f"{STATE}/journal.jsonl"
DONE = ("rendered", "cached")


@dataclass
class LineEntry:
    """One line of a render as the manifest records it. ``start``/``end``/``limit_at``/``rendered_end`` are
    absolute times in the programme (``end`` is the slot's end); ``slot``, ``natural``, ``target`` and
    ``duration`` are lengths; ``render_seconds`` is the wall time its synthesis cost."""

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
    reference: dict | None = None  # where this line's voice came from, when it is not its speaker's voice

    @property
    def done(self) -> bool:
        return self.status in DONE

    @property
    def rendered_end(self) -> float | None:
        """Where the line's audio ends on the programme (None until it has audio)."""
        return None if self.duration is None else round(self.start + self.duration, 3)

    def to_json(self) -> dict:
        return {**asdict(self), "rendered_end": self.rendered_end}

    @classmethod
    def from_json(cls, data: dict) -> "LineEntry":
        """An entry from a manifest or journal record (unknown keys ignored; a missing field raises)."""
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


class Journal:
    """The line records of the run in progress (``journal.jsonl`` in the folder's state)."""

    def __init__(self, path: Path):
        self.log = AppendLog(path)

    def append(self, entry: LineEntry) -> None:
        self.log.append(entry.to_json())

    def close(self) -> None:
        self.log.close(quietly=True)

    def entries(self) -> list[LineEntry]:
        return [e for e in map(_entry, self.log.records()) if e is not None]

    def clear(self) -> None:
        self.log.clear()


def read_manifest(out_dir: Path, name: str = MANIFEST) -> dict | None:
    """The manifest (or another JSON record, ``name``) as written, or None when there is none (or it is not a
    JSON object)."""
    try:
        data = json.loads((Path(out_dir) / name).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def read_entries(out_dir: Path) -> list[LineEntry]:
    """Every line record of an output folder: its manifest's, then its journal's newer ones (a run in progress,
    or one that was killed)."""
    out_dir = Path(out_dir)
    return manifest_entries(read_manifest(out_dir)) + Journal(out_dir / JOURNAL).entries()


def manifest_entries(manifest: dict | None) -> list[LineEntry]:
    """The line entries a manifest holds (damaged records skipped)."""
    lines = (manifest or {}).get("lines")
    return [e for e in map(_entry, lines if isinstance(lines, list) else []) if e is not None]


def _entry(record) -> LineEntry | None:
    if not isinstance(record, dict):
        return None
    try:
        return LineEntry.from_json(record)
    except TypeError:
        return None  # a record of another version or a damaged one: the keyed audio still counts
