"""Where omnidub keeps its caches, the one way it writes a file (atomically), and the output folder's lock."""

from __future__ import annotations

import contextlib
import errno
import os
import re
import socket
import sys
import tempfile
from pathlib import Path

from omnidub.errors import OmnidubError

# Errors a user fixes (free space, permissions): one clear line instead of a traceback.
_USER_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM}
# libsndfile reports a full disk only as "System error."; with less than this left we call it full.
_NEARLY_FULL_BYTES = 16 * 1024 * 1024
LOCK = ".omnidub.lock"
# How qa.json and qa.html say omnidub wrote them (a render removes only reports it can tell are its own).
QA_MARKS = ('"generator": "omnidub"', '<meta name="generator" content="omnidub">')


def cache_home() -> Path:
    """omnidub's cache folder: OMNIDUB_CACHE, else the user cache dir."""
    from platformdirs import user_cache_dir

    return Path(os.environ.get("OMNIDUB_CACHE") or user_cache_dir("omnidub"))


def _umask() -> int:
    # /proc says it without changing it (os.umask can only be read by setting it, which races with threads).
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def cannot_write(path: Path, exc: BaseException) -> OmnidubError | None:
    """The one-line error for a write that failed for a reason the user can fix, else None."""
    folder = Path(path).parent
    if isinstance(exc, OmnidubError) or not isinstance(exc, (OSError, RuntimeError)):
        return None
    if isinstance(exc, OSError) and exc.errno in _USER_ERRNOS:
        reason = exc.strerror or str(exc)
    elif _nearly_full(folder):  # libsndfile's "System error." on a full disk
        reason = "no space left on device"
    else:
        return None
    if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT) or reason == "no space left on device":
        return OmnidubError(f"cannot write {path}: {reason.lower()}; free some space and rerun (finished lines are kept)")
    return OmnidubError(f"cannot write {path}: {reason}")


def _nearly_full(folder: Path) -> bool:
    try:
        stat = os.statvfs(folder)
    except OSError:
        return False
    free = stat.f_bfree if hasattr(os, "geteuid") and os.geteuid() == 0 else stat.f_bavail
    return free * stat.f_frsize < _NEARLY_FULL_BYTES


@contextlib.contextmanager
def atomic_path(path: Path):
    """Yield a temporary path beside ``path``; on success it replaces ``path``, on failure it is removed.

    A crash never leaves a torn file under the real name, and concurrent writers never share a temporary. The
    temporary is fsync'd before the rename. The file gets the mode any new file gets (0644 under umask 022),
    not mkstemp's private 0600. A full disk or a read-only folder is an OmnidubError (one line), with the
    file's previous version untouched."""
    path = Path(path)
    temp = None
    try:
        # The writer's pid in the name tells a later start whether the temporary is debris (see remove_debris).
        fd, temp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.{os.getpid()}-", suffix=".tmp")
        try:
            os.fchmod(fd, 0o666 & ~_umask())
        finally:
            os.close(fd)
        yield Path(temp)
        _sync(temp)  # the bytes reach the disk before the name does: a power loss leaves the old file or the new
        os.replace(temp, path)
    except BaseException as exc:
        problem = cannot_write(path, exc)
        if temp is not None:
            Path(temp).unlink(missing_ok=True)
        if problem is not None:
            raise problem from exc
        raise


# atomic_path's temporaries: ".<name>.<pid>-<8 random>.tmp" (older versions wrote no pid).
_TEMP_RE = re.compile(r"\..+\.(?:(\d+)-)?[a-z0-9_]{8}\.tmp")


def is_temporary(name: str) -> bool:
    """Whether a file name is one of atomic_path's temporaries."""
    return bool(_TEMP_RE.fullmatch(name))


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


class FolderLock:
    """An advisory lock on a folder (``flock`` on a lock file in it) that names its holder: pid, host, command.

    The kernel drops it when the process ends, however it ends, so a crash never leaves the folder locked."""

    def __init__(self, folder: Path):
        self.path = Path(folder) / LOCK
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self) -> None:
        import fcntl

        if self._fd is not None:
            return
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o666)
        except OSError as exc:
            raise cannot_write(self.path, exc) or OmnidubError(f"cannot lock {self.path.parent}: {exc}") from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            holder = os.pread(fd, 4096, 0).decode("utf-8", "replace").strip() or "another process"
            os.close(fd)
            raise OmnidubError(
                f"{self.path.parent} is in use by another omnidub run ({holder}); wait for it or choose another --out"
            ) from exc
        command = " ".join(["omnidub", *sys.argv[1:]])[:300].replace("\n", " ")
        with contextlib.suppress(OSError):  # the lock holds even if its note cannot be written (a full disk)
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"pid {os.getpid()} on {socket.gethostname()}: {command}\n".encode(), 0)
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            # The file stays: removing it would let a third run lock a new file while a second holds the old one.
            os.close(self._fd)
            self._fd = None
