"""Where omnidub keeps its caches, and the one way it writes a file: atomically."""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path


def cache_home() -> Path:
    """omnidub's cache folder: OMNIDUB_CACHE, else the user cache dir."""
    from platformdirs import user_cache_dir

    return Path(os.environ.get("OMNIDUB_CACHE") or user_cache_dir("omnidub"))


@contextlib.contextmanager
def atomic_path(path: Path):
    """Yield a temporary path beside ``path``; on success it replaces ``path``, on failure it is removed.

    A crash never leaves a torn file under the real name, and concurrent writers never share a temporary. The
    temporary is fsync'd before the rename."""
    path = Path(path)
    fd, temp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        yield Path(temp)
        _sync(temp)  # the bytes reach the disk before the name does: a power loss leaves the old file or the new
        os.replace(temp, path)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise


def _sync(path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_bytes_atomic(path: Path, data: bytes) -> None:
    """Write a whole file atomically (synced to disk before it takes the real name, like every atomic write)."""
    with atomic_path(path) as temp:
        with open(temp, "wb") as handle:
            handle.write(data)


def write_text_atomic(path: Path, text: str) -> None:
    """Write a whole text file atomically (UTF-8)."""
    write_bytes_atomic(path, text.encode("utf-8"))
