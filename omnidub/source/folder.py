"""The extract's output folder: only files omnidub wrote there are ever replaced.

`extract.json` lists every file the extract wrote with its content hash. A folder may be written when it is new
or empty, or when it holds only the files a previous extract listed, unchanged since; anything else (a file
omnidub did not write, or one a person edited) is refused with one line. While files are replaced the ledger
lists both the old and the new hash, so a crash at any point leaves a folder the next run still recognises.
"""

from __future__ import annotations

import hashlib
import io
import json
import re
from pathlib import Path

import numpy as np

from omnidub.errors import OmnidubError
from omnidub.files import is_temporary, write_bytes_atomic
from omnidub.source.report import MARK, REPORT_NAME


def file_name(speaker: str, taken: set[str]) -> str:
    """A clip's file name from its speaker's name: no separators or leading dots, unique among `taken`."""
    stem = re.sub(r"[^\w-]+", "_", speaker, flags=re.UNICODE).strip("_")[:64] or "speaker"
    name, k = f"{stem}.wav", 2
    while name.casefold() in {t.casefold() for t in taken}:
        name, k = f"{stem}-{k}.wav", k + 1
    taken.add(name)
    return name


def wav_bytes(samples: np.ndarray, sample_rate: int, subtype: str = "PCM_16", format: str = "WAV") -> bytes:
    import soundfile as sf

    buffer = io.BytesIO()
    data = np.clip(samples.T if samples.ndim == 2 else samples, -1.0, 1.0)
    sf.write(buffer, data, sample_rate, subtype=subtype, format=format)
    return buffer.getvalue()


def check_folder(folder: Path) -> dict[str, list[str]]:
    """The files a previous extract wrote in `folder` ({name: hashes}); OmnidubError when the folder holds
    anything else, or a file changed since."""
    folder = Path(folder)
    if folder.exists() and not folder.is_dir():
        raise OmnidubError(f"--out {folder}: is a file, not a folder")
    entries = [p for p in folder.iterdir() if not is_temporary(p.name)] if folder.is_dir() else []
    if not entries:
        return {}
    ledger = _read_ledger(folder / REPORT_NAME)
    if ledger is None:
        shown = ", ".join(sorted(p.name for p in entries)[:3]) + (", ..." if len(entries) > 3 else "")
        raise OmnidubError(f"--out {folder}: holds files omnidub did not write ({shown}); "
                           "give an empty or new folder, or one a previous extract wrote")
    for path in entries:
        if path.name == REPORT_NAME:
            continue
        if path.name not in ledger or not path.is_file() or path.is_symlink():
            raise OmnidubError(f"--out {folder}: {path.name} was not written by omnidub voices extract; "
                               "move it away or give another folder")
        if _sha256(path.read_bytes()) not in ledger[path.name]:
            raise OmnidubError(f"--out {folder}: {path.name} changed since omnidub wrote it; "
                               "move it away (it is kept) or give another folder")
    return ledger


def write_folder(folder: Path, files: dict[str, bytes], report: dict) -> None:
    """Write `files` and the report (with the ledger) into a folder `check_folder` accepted; remove the previous
    extract's files that this one did not write again."""
    folder = Path(folder)
    previous = check_folder(folder)
    folder.mkdir(parents=True, exist_ok=True)
    new = {name: _sha256(data) for name, data in files.items()}
    # First a ledger that covers the old and the new content of every file, then the files, then the final one.
    during = {name: sorted(set(previous.get(name, [])) | ({new[name]} if name in new else set()))
              for name in set(previous) | set(new)}
    write_bytes_atomic(folder / REPORT_NAME, _report_bytes(report, during))
    for name, data in files.items():
        write_bytes_atomic(folder / name, data)
    for name in set(previous) - set(new):
        (folder / name).unlink(missing_ok=True)
    write_bytes_atomic(folder / REPORT_NAME, _report_bytes(report, {name: [h] for name, h in new.items()}))


def _report_bytes(report: dict, ledger: dict[str, list[str]]) -> bytes:
    return (json.dumps({**report, "files": dict(sorted(ledger.items()))}, indent=2, ensure_ascii=False) + "\n").encode()


def _read_ledger(path: Path) -> dict[str, list[str]] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("omnidub") != MARK or not isinstance(data.get("files"), dict):
        return None
    ledger = {}
    for name, hashes in data["files"].items():
        hashes = [hashes] if isinstance(hashes, str) else hashes
        if Path(name).name != name or not isinstance(hashes, list):
            return None  # a ledger naming paths outside the folder is not one omnidub wrote
        ledger[name] = [str(h) for h in hashes]
    return ledger


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
