"""The line records of a render: one typed entry per line, appended (and synced) to the journal as each line
finishes, and folded into ``manifest.json`` when the run ends.

Bytes written grow linearly with the lines rendered: a line costs one journal record, and the manifest is
written whole only at the end of a run (and on Ctrl-C). A crash leaves the journal; the next run reads the
manifest, then the journal on top of it, and ignores a torn record.
"""

from __future__ import annotations

from pathlib import Path

from omnidub.files import STATE, AppendLog
from omnidub.records import LineEntry, entry_of, manifest_entries, read_json

JOURNAL = f"{STATE}/journal.jsonl"


class Journal:
    """The line records of the run in progress (``journal.jsonl`` in the folder's state)."""

    def __init__(self, path: Path):
        self.log = AppendLog(path)

    def append(self, entry: LineEntry) -> None:
        self.log.append(entry.to_json())

    def close(self) -> None:
        self.log.close(quietly=True)

    def pending(self) -> bool:
        """Whether it holds records the manifest does not hold yet (a run in progress, or one that stopped)."""
        try:
            return self.log.path.stat().st_size > 0
        except OSError:
            return False

    def entries(self) -> list[LineEntry]:
        return [e for e in map(entry_of, self.log.records()) if e is not None]

    def clear(self) -> None:
        self.log.clear()


def read_entries(out_dir: Path) -> list[LineEntry]:
    """Every line record of an output folder: its manifest's, then its journal's newer ones (a run in progress,
    or one that was killed)."""
    out_dir = Path(out_dir)
    return manifest_entries(read_json(out_dir)) + Journal(out_dir / JOURNAL).entries()
