"""Content hashes of big files, computed once: a file's sha256 is remembered by its path, size and modification
time in omnidub's cache, so a 2.4 GB graph is hashed on its first load, not on every run. Torch-free."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from omnidub.files import cache_home, write_text_atomic

FILE = "digests.json"


def sha256(path: Path) -> str:
    """The file's sha256 (hex), from the cache when the file has not changed since it was last hashed."""
    path = Path(path).resolve()
    stat = path.stat()
    stamp = f"{stat.st_size}:{stat.st_mtime_ns}"
    known = _load()
    entry = known.get(str(path))
    if isinstance(entry, dict) and entry.get("stamp") == stamp and isinstance(entry.get("sha256"), str):
        return entry["sha256"]
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    known = _load()  # another process may have added entries meanwhile
    known[str(path)] = {"stamp": stamp, "sha256": digest.hexdigest()}
    try:
        (cache_home()).mkdir(parents=True, exist_ok=True)
        write_text_atomic(cache_home() / FILE, json.dumps(known, indent=1, sort_keys=True))
    except OSError:
        pass  # a read-only cache only costs the next run another hash
    return digest.hexdigest()


def _load() -> dict:
    try:
        data = json.loads((cache_home() / FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}
