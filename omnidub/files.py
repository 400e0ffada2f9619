"""Where omnidub keeps its caches, and the one way it writes a file: atomically."""

from __future__ import annotations

import contextlib
import os
import re
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
    # The writer's pid in the name tells a later start whether the temporary is debris (see remove_debris).
    fd, temp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.{os.getpid()}-", suffix=".tmp")
    os.close(fd)
    try:
        yield Path(temp)
        _sync(temp)  # the bytes reach the disk before the name does: a power loss leaves the old file or the new
        os.replace(temp, path)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise


# atomic_path's temporaries: ".<name>.<pid>-<8 random>.tmp" (older versions wrote no pid).
_TEMP_RE = re.compile(r"\..+\.(?:(\d+)-)?[a-z0-9_]{8}\.tmp")


def remove_debris(folder: Path) -> int:
    """Remove the temporaries a killed writer left in ``folder`` (only omnidub's own names, only when the
    process that wrote them is gone); returns how many went."""
    removed = 0
    try:
        candidates = list(Path(folder).iterdir())
    except OSError:
        return 0
    for path in candidates:
        match = _TEMP_RE.fullmatch(path.name)
        if match and path.is_file() and not path.is_symlink() and not writer_alive(match.group(1)):
            with contextlib.suppress(OSError):
                path.unlink()
                removed += 1
    return removed


def writer_alive(pid: str | None) -> bool:
    """Whether the process with this pid (from a temporary's name) still runs on this machine."""
    if not pid:
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, ValueError):
        return True  # another user's process, or a number no pid can be: leave the file alone
    return True


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
