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
# This machine's name as temporaries carry it: letters, digits and dashes only.
_HOST = re.sub(r"[^A-Za-z0-9-]+", "-", socket.gethostname()).strip("-")[:32] or "host"
# libsndfile reports a full disk only as "System error."; with less than this left we call it full.
_NEARLY_FULL_BYTES = 16 * 1024 * 1024
# omnidub's own state inside an output folder: lock, ledger, journal and (by default) the line cache.
STATE = ".omnidub"
# How qa.json and qa.html say omnidub wrote them (how reports of older versions, with no ledger, are recognised).
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
        return OmnidubError(
            f"cannot write {path}: {reason.lower()}; free some space and rerun (finished lines are kept)"
        )
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
        # The writer's host and pid in the name tell a later start whether the temporary is debris (see
        # remove_debris): a pid means nothing on another machine sharing the folder (NFS).
        fd, temp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.{_HOST}-{os.getpid()}-", suffix=".tmp")
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


# atomic_path's temporaries: ".<name>.<host>-<pid>-<8 random>.tmp". Only names with the writer's host and pid
# are omnidub's: a user's ".backup.20241201.tmp" has the shape older versions wrote, so those are never taken.
_TEMP_RE = re.compile(r"\..+\.([A-Za-z0-9-]{1,32})-(\d+)-[a-z0-9_]{8}\.tmp")


def is_temporary(name: str) -> bool:
    """Whether a file name is one of atomic_path's temporaries (with a writer's host and pid)."""
    return bool(_TEMP_RE.fullmatch(name))


def remove_debris(folder: Path) -> int:
    """Remove the temporaries a killed writer left in ``folder`` (only omnidub's own names, carrying this host
    and the pid of a process that is gone: a temporary of another host is never touched); returns how many
    went."""
    removed = 0
    try:
        candidates = list(Path(folder).iterdir())
    except OSError:
        return 0
    for path in candidates:
        match = _TEMP_RE.fullmatch(path.name)
        if not match or not path.is_file() or path.is_symlink():
            continue
        host, pid = match.group(1), match.group(2)
        if host != _HOST:
            continue  # another machine's writer: its pid says nothing here
        if not writer_alive(pid):
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


def check_folder_writable(folder: Path, label: str) -> None:
    """Make ``folder`` if it is missing and create (then remove) a file in it: a folder that cannot take a file
    (read-only, no permission, a file in its place) is one line naming ``label`` (the flag that chose it)."""
    folder = Path(folder)
    made = not folder.exists()
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(dir=folder, prefix=f".write-check.{_HOST}-{os.getpid()}-", suffix=".tmp")
        os.close(fd)
        os.unlink(name)
    except OSError as exc:
        why = "a file, not a folder" if folder.exists() and not folder.is_dir() else (exc.strerror or str(exc)).lower()
        if made:
            with contextlib.suppress(OSError):
                folder.rmdir()  # made just now for nothing: it goes again
        raise OmnidubError(f"{label} {folder}: cannot write there ({why})") from exc


def write_bytes_atomic(path: Path, data: bytes) -> None:
    """Write a whole file atomically (synced to disk before it takes the real name, like every atomic write)."""
    with atomic_path(path) as temp:
        with open(temp, "wb") as handle:
            handle.write(data)


def write_text_atomic(path: Path, text: str) -> None:
    """Write a whole text file atomically (UTF-8)."""
    write_bytes_atomic(path, text.encode("utf-8"))


class FolderLock:
    """An advisory lock on a folder (``flock`` on a lock file in it): exclusive for a render, shared for QA.

    The holder of an exclusive lock writes its name into the file (pid, host, command) so others can say who
    holds it. The kernel drops the lock when the process ends, however it ends, so a crash never leaves the
    folder locked; a clean release also removes the file."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self._fd: int | None = None
        self._shared = False

    @property
    def held(self) -> bool:
        return self._fd is not None

    @property
    def shared(self) -> bool:
        return self._shared

    def holder(self) -> str:
        """Who holds the lock, as its holder wrote it ("" when it wrote nothing: a shared holder)."""
        try:
            return self.path.read_text(encoding="utf-8", errors="replace").strip()
        except OSError:
            return ""

    def acquire(self, *, shared: bool = False, doing: str | None = None) -> bool:
        """Take the lock without waiting; False when another process holds it in a conflicting mode. ``doing``:
        what the holder says it is doing (default: its command line)."""
        import fcntl

        if self._fd is not None:
            return True
        while True:
            try:
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o666)
            except OSError as exc:
                raise cannot_write(self.path, exc) or OmnidubError(f"cannot lock {self.path.parent}: {exc}") from exc
            try:
                fcntl.flock(fd, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
            except OSError:
                os.close(fd)
                return False
            # A holder that released in the meantime removed the file we opened: lock the new one instead.
            try:
                same = os.fstat(fd).st_ino == os.stat(self.path).st_ino
            except OSError:
                same = False
            if same:
                break
            os.close(fd)
        if shared:
            # No render holds it: a note left by one that was killed no longer says anything true.
            with contextlib.suppress(OSError):
                os.ftruncate(fd, 0)
        else:
            command = (doing or " ".join(["omnidub", *sys.argv[1:]]))[:300].replace("\n", " ")
            with contextlib.suppress(OSError):  # the lock holds even if its note cannot be written (a full disk)
                os.ftruncate(fd, 0)
                os.pwrite(fd, f"pid {os.getpid()} on {socket.gethostname()}: {command}\n".encode(), 0)
        self._fd, self._shared = fd, shared
        return True

    def release(self) -> None:
        """Let go; the file goes too when no one else holds it (a shared holder checks by taking it whole)."""
        import fcntl

        if self._fd is None:
            return
        fd, self._fd = self._fd, None
        try:
            alone = not self._shared
            if self._shared:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    alone = True
                except OSError:
                    alone = False
            if alone:
                with contextlib.suppress(OSError):
                    self.path.unlink()  # while still holding it: a newcomer re-checks the file it locked
        finally:
            os.close(fd)


class AppendLog:
    """An append-only file of JSON records, each synced to disk as it is written; a record torn by a crash is
    ignored on reading, and the next append starts on a fresh line rather than continuing the fragment."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self._handle = None

    def append(self, record: dict) -> None:
        import json

        try:
            if self._handle is None:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self._handle = open(self.path, "a+b")
                if self._handle.tell() > 0:
                    self._handle.seek(-1, os.SEEK_END)
                    if self._handle.read(1) != b"\n":  # a torn record: end it so this one stands alone
                        self._handle.write(b"\n")
            self._handle.write(json.dumps(record, ensure_ascii=False).encode("utf-8") + b"\n")
            self._handle.flush()
            os.fsync(self._handle.fileno())
        except OSError as exc:
            self.close(quietly=True)
            problem = cannot_write(self.path, exc)
            if problem is None:
                raise
            raise problem from exc

    def close(self, *, quietly: bool = False) -> None:
        handle, self._handle = self._handle, None
        if handle is not None:
            try:
                handle.close()
            except OSError:
                if not quietly:
                    raise

    def records(self) -> list:
        """Every whole record in order (torn or foreign lines skipped)."""
        import json

        try:
            text = self.path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return []
        found = []
        for raw in text.splitlines():
            try:
                found.append(json.loads(raw))
            except ValueError:
                continue  # a record torn by a crash
        return found

    def clear(self) -> None:
        """Drop every record (their content now lives in a snapshot)."""
        self.close()
        self.path.unlink(missing_ok=True)


def did_you_mean(path: Path) -> str:
    """For a path that does not exist: "; did you mean X?" naming the closest file or folder beside it (the name
    as the user would type it: episode.es.str -> episode.es.srt), else ""."""
    import difflib

    path = Path(path)
    try:
        names = [p.name for p in path.parent.iterdir()] if path.parent.is_dir() else []
    except OSError:
        return ""
    close = difflib.get_close_matches(path.name, names, n=1, cutoff=0.75)
    return f"; did you mean {path.with_name(close[0])}?" if close else ""
