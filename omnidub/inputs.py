"""Input files: finding them (files, or folders of them), reading their cues from SRT, WebVTT or a plain
script, and the output folder each renders into. What the cues say (speakers, cleanup) is the script's business."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

from omnidub.errors import OmnidubError
from omnidub.files import did_you_mean

SUFFIXES = (".srt", ".vtt", ".txt")

# The fraction of a second as written, however many digits: ",5" is half a second, ",5000" too (SRT and WebVTT
# write three, but files with one, two or four are common enough).
_TIME = r"(?:(\d+):)?(\d{1,2}):(\d{1,2})(?:[.,](\d+))?"
_TIMING_RE = re.compile(rf"^\s*{_TIME}\s*-->\s*{_TIME}(?:\s+.*)?$")
_LOOSE_TIMING_RE = re.compile(r"^\s*\d+:\d+")  # a row that was meant as a timing, however malformed
_SCRIPT_TIMING_RE = re.compile(rf"^\s*\[\s*{_TIME}\s*-->\s*{_TIME}\s*\]\s*(.*)$")


@dataclass(frozen=True)
class Inputs:
    """The inputs of a job: the files found (in the order given, each once) and, per path that could not be
    used, the error that says why (reported beside the others, which still render)."""

    files: tuple[Path, ...]
    unusable: tuple[tuple[Path, OmnidubError], ...]


@dataclass(frozen=True)
class Cue:
    where: str  # "cue 3" or "line 12", for messages
    start: float | None
    end: float | None
    body: str  # raw payload, lines joined by "\n"
    line: int = 0  # line number of the payload's first row in the file (0: unknown)


def find_inputs(paths) -> Inputs:
    """Files as given; a folder stands for its .srt, .vtt and .txt files (sorted); the same file twice counts once.

    A path that does not exist (or a folder with no input in it) is an unusable input, reported while the others
    render; it is an error at once when nothing else is left to render, or when it is a word such as "true" (a
    value given to a flag that takes none: the user meant something else, so nothing should start)."""
    files: list[Path] = []
    unusable: list[tuple[Path, OmnidubError]] = []
    seen: set[Path] = set()
    for path in map(Path, paths):
        if not path.exists():
            if path.name.lower() in ("true", "false", "yes", "no"):
                raise OmnidubError(f"{path}: no such file or folder (flags such as --dry-run take no value)")
            unusable.append((path, OmnidubError(f"{path}: no such file or folder{did_you_mean(path)}")))
            continue
        found = [path]
        if path.is_dir():
            found = sorted(p for p in path.iterdir() if p.is_file() and p.suffix.lower() in SUFFIXES)
            if not found:
                unusable.append((path, OmnidubError(f"{path}: the folder holds no {', '.join(sorted(SUFFIXES))} file")))
        for file in found:
            if file.resolve() not in seen:
                seen.add(file.resolve())
                files.append(file)
    if not files and unusable:
        raise unusable[0][1]
    return Inputs(tuple(files), tuple(unusable))


def read_input_text(path: Path) -> str:
    """The text of an input file (any of SUFFIXES), line breaks normalised; OmnidubError when it cannot be read."""
    suffix = path.suffix.lower()
    if suffix not in SUFFIXES:
        raise OmnidubError(
            f"{path}: unknown input type {path.suffix or '(no extension)'!r}; use .srt, .vtt or a .txt script"
        )
    text = _read_text(path)
    if not text.strip():
        raise OmnidubError(f"{path}: the file is empty")
    return text


def parse_cues(path: Path, text: str, notes: list[str]) -> list[Cue]:
    """The cues of an input file's text, by its suffix; text outside any cue is added to ``notes``."""
    suffix = path.suffix.lower()
    if suffix == ".srt":
        return _parse_srt(path, text, notes)
    if suffix == ".vtt":
        return _parse_vtt(path, text, notes)
    return _parse_txt(path, text)


def _read_text(path: Path) -> str:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise OmnidubError(f"{path}: no such file") from None
    except OSError as exc:
        raise OmnidubError(f"{path}: cannot read ({exc.strerror})") from None
    if data.startswith(b"\xef\xbb\xbf"):
        encoding = "utf-8-sig"
    elif data.startswith((b"\xff\xfe", b"\xfe\xff")):
        encoding = "utf-16"
    elif b"\x00" in data:
        raise OmnidubError(f"{path}: {_nul_problem(data)}")
    else:
        encoding = "utf-8"
    try:
        text = data.decode(encoding)
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise OmnidubError(
            f"{path}: line {line}: not valid {encoding.upper().removesuffix('-SIG')} text "
            f"(byte 0x{data[exc.start]:02x}); "
            "save the file as UTF-8 or UTF-16 with a byte-order mark"
        ) from None
    return text.replace("\r\n", "\n").replace("\r", "\n")


def _nul_problem(data: bytes) -> str:
    """What a file with NUL bytes (and no byte-order mark) is: UTF-16 text (a zero beside nearly every letter),
    text with a stray NUL (a damaged file), or not text at all."""
    halves = (data[1::2], data[0::2]), (data[0::2], data[1::2])  # little-endian: the zero follows the letter
    for zeros, letters in halves:
        if zeros and zeros.count(0) >= 0.6 * len(zeros) and letters.count(0) <= 0.1 * len(letters):
            return "looks like UTF-16 without a byte-order mark; save it as UTF-8 (or UTF-16 with a BOM)"
    line = data[: data.index(0)].count(b"\n") + 1
    try:
        data.replace(b"\x00", b"").decode("utf-8")
    except UnicodeDecodeError:
        return "not a text file (it holds binary data, NUL bytes among them); give subtitles or a script as UTF-8 text"
    return f"line {line}: holds a NUL byte (a damaged file?); remove it, or save the file again as UTF-8"


def _parse_srt(path: Path, text: str, notes: list[str]) -> list[Cue]:
    import srt

    rows = text.split("\n")
    for number, row in enumerate(rows, 1):
        if "-->" in row:  # srt accepts 00:75:00; out-of-range fields are refused here as in WebVTT and scripts
            _check_range(path, f"line {number}", row)
            rows[number - 1] = _srt_timing(row)
    text = "\n".join(rows)
    cues: list[Cue] = []
    numbers: set[int] = set()
    cursor = 0
    try:
        for sub in srt.parse(text):
            at = text.find(sub.content, cursor) if sub.content else -1
            first = text.count("\n", 0, at) + 1 if at >= 0 else 0
            cursor = at + len(sub.content) if at >= 0 else cursor
            # A blank line ends a cue: whatever srt folded into it after one belongs to no cue.
            body, *rest = re.split(r"\n[ \t]*\n", sub.content, maxsplit=1)
            if rest and rest[0].strip():
                stray = at + len(sub.content) - len(rest[0]) + (len(rest[0]) - len(rest[0].lstrip()))
                where = f"line {text.count(chr(10), 0, stray) + 1}" if at >= 0 else f"after cue {sub.index}"
                notes.append(f"{where}: text outside any cue, not spoken: {preview(rest[0])}")
            # Files number cues by hand; one number used twice gets its line too, so every message names one cue.
            name = f"cue {sub.index}" if sub.index not in numbers else f"cue {sub.index} (line {first})"
            numbers.add(sub.index)
            cues.append(Cue(name, sub.start.total_seconds(), sub.end.total_seconds(), body, first))
    except srt.SRTParseError as exc:
        # The unmatched block starts at expected_start; actual_start is where parsing picked up again.
        offset = exc.expected_start + len(exc.unmatched_content) - len(exc.unmatched_content.lstrip())
        line = text.count("\n", 0, offset) + 1
        block = exc.unmatched_content.strip().split("\n")
        number = block[0].strip() if block and block[0].strip().isdigit() else None
        where = f"cue {number} (line {line})" if number else f"line {line}"
        after = f" after {cues[-1].where}" if cues and not number else ""
        raise OmnidubError(
            f"{path}: {where}: malformed subtitle block{after}: {preview(' / '.join(block[:2]))}"
        ) from None
    except ValueError as exc:  # srt raises plain ValueError for some impossible timestamps
        raise OmnidubError(f"{path}: malformed timestamp ({exc})") from None
    return cues


def _srt_timing(row: str) -> str:
    """A timing row as the srt library reads it right: srt takes the digits after the comma as a count of
    milliseconds (",5" as 5 ms, ",5000" as 5 s); they are a fraction of a second, written here with three digits."""
    match = _TIMING_RE.match(row)
    if not match:
        return row  # not a timing omnidub reads itself; the SRT parser judges it
    from datetime import timedelta

    import srt

    groups = match.groups()
    ends = [timedelta(milliseconds=round(_seconds(part) * 1000)) for part in (groups[0:4], groups[4:8])]
    rest = row[match.end(8) if match.group(8) is not None else match.end(7) :]
    return f"{srt.timedelta_to_srt_timestamp(ends[0])} --> {srt.timedelta_to_srt_timestamp(ends[1])}{rest}"


def _parse_vtt(path: Path, text: str, notes: list[str]) -> list[Cue]:
    # Parsed by hand: webvtt-py silently drops cues with malformed timings, and line numbers matter here.
    rows = text.split("\n")
    if not rows[0].lstrip("\ufeff").startswith("WEBVTT"):
        raise OmnidubError(f"{path}: line 1: a WebVTT file must start with 'WEBVTT'")
    cues: list[Cue] = []
    i = 1
    while i < len(rows):
        if not rows[i].strip():
            i += 1
            continue
        first = i
        block = []
        while i < len(rows) and rows[i].strip():
            block.append(rows[i])
            i += 1
        if block[0].startswith(("NOTE", "STYLE", "REGION")) and "-->" not in block[0]:
            continue
        timing_at = 0 if "-->" in block[0] else 1
        if timing_at >= len(block) or "-->" not in block[timing_at]:
            if not any(_LOOSE_TIMING_RE.match(row) for row in block):
                # No timing anywhere: text between cues, which WebVTT players ignore too.
                notes.append(f"line {first + 1}: text outside any cue, not spoken: {preview(' / '.join(block))}")
                continue
            raise OmnidubError(
                f"{path}: line {first + timing_at + 1}: expected a cue timing 'start --> end', got "
                f"{preview(block[min(timing_at, len(block) - 1)])}"
            )
        where = f"cue at line {first + timing_at + 1}"
        start, end, _ = _parse_timing(path, where, block[timing_at], _TIMING_RE)
        cues.append(Cue(where, start, end, "\n".join(block[timing_at + 1 :]), first + timing_at + 2))
    return cues


def _parse_txt(path: Path, text: str) -> list[Cue]:
    cues: list[Cue] = []
    for number, row in enumerate(text.split("\n"), 1):
        row = row.lstrip("\ufeff").strip()
        if not row or row.startswith("#"):
            continue
        where = f"line {number}"
        start = end = None
        if row.startswith("[") and "-->" in row.split("]", 1)[0]:
            start, end, row = _parse_timing(path, where, row, _SCRIPT_TIMING_RE)
        cues.append(Cue(where, start, end, row, number))
    timed = [c for c in cues if c.start is not None]
    if timed and len(timed) != len(cues):
        untimed = next(c for c in cues if c.start is None)
        raise OmnidubError(
            f"{path}: {untimed.where} has no timestamp but {timed[0].where} has one; time every line or none"
        )
    return cues


def _parse_timing(path: Path, where: str, row: str, pattern: re.Pattern) -> tuple[float, float, str]:
    """Start and end seconds of a timing row, and whatever follows the timing."""
    match = pattern.match(row)
    if not match:
        raise OmnidubError(
            f"{path}: {where}: malformed timestamp {preview(row)}; expected HH:MM:SS.mmm --> HH:MM:SS.mmm"
        )
    groups = match.groups()
    _check_range(path, where, row, groups)
    rest = groups[8] if len(groups) > 8 else ""
    return _seconds(groups[0:4]), _seconds(groups[4:8]), rest or ""


def _check_range(path: Path, where: str, row: str, groups=None) -> None:
    """Minutes and seconds run 00-59 in every format (``00:75:00`` is a typo, not 01:15:00)."""
    if groups is None:
        match = _TIMING_RE.match(row)
        if not match:
            return  # not a timing omnidub reads itself; the SRT parser judges it
        groups = match.groups()
    for _hours, minutes, seconds, _ in (groups[0:4], groups[4:8]):
        if int(minutes) > 59 or int(seconds) > 59:
            raise OmnidubError(
                f"{path}: {where}: timestamp out of range in {preview(row)}; minutes and seconds run from 00 to 59"
            )


def _seconds(groups) -> float:
    hours, minutes, seconds, fraction = groups
    return int(hours or 0) * 3600 + int(minutes) * 60 + int(seconds) + (float(f"0.{fraction}") if fraction else 0.0)


def clock(seconds: float) -> str:
    hours, rest = divmod(seconds, 3600)
    minutes, rest = divmod(rest, 60)
    return f"{int(hours):02d}:{int(minutes):02d}:{rest:06.3f}"


def preview(text: str, limit: int = 40) -> str:
    text = re.sub(r"\s+", " ", text).strip()
    return repr(text if len(text) <= limit else text[: limit - 3] + "...")


def shared_name_note(path: Path, name: str, paths: Sequence[Path], names: Sequence[str], parent: Path) -> str:
    """What to say of an input that renders into a folder other than its stem's: whose name it shares, and who keeps
    the plain folder (the input that rendered there before)."""
    others = [str(p) for p in paths if p != path and p.stem.lower() == path.stem.lower()]
    owner = next((p for p, n in zip(paths, names) if n == path.stem and p != path), None)
    kept = f", which keeps {parent / path.stem}" if owner is not None else " (each gets a folder of its own)"
    return f"{path} renders into {parent / name}: its name {path.stem!r} is shared with {', '.join(others)}{kept}"


def default_out_dir(input_path: Path) -> Path:
    """``output/<input stem>``, the folder an input renders into unless told otherwise."""
    return Path("output") / Path(input_path).stem


def unique_names(paths: Sequence[Path], keep: Callable[[Path], bool] = lambda path: False) -> list[str]:
    """A folder name per input: its stem, or, where stems collide, the stem with its folder or extension; one
    input of a colliding group for which ``keep`` is true (its stem's folder holds its render) keeps its stem."""
    names = [p.stem for p in paths]
    schemes: list[Callable[[Path], str]] = [
        lambda p: f"{p.resolve().parent.name or 'root'}-{p.stem}",
        lambda p: f"{p.stem}-{p.suffix.lstrip('.')}",
        lambda p: f"{p.resolve().parent.name or 'root'}-{p.stem}-{p.suffix.lstrip('.')}",
    ]
    groups: dict[str, list[int]] = {}
    for i, name in enumerate(names):
        groups.setdefault(name.lower(), []).append(i)
    for group in (g for g in groups.values() if len(g) > 1):
        for scheme in schemes:
            trial = [scheme(paths[i]) for i in group]
            if len({t.lower() for t in trial}) == len(trial):
                break
        else:
            trial = [names[group[0]]] + [f"{names[i]}-{n}" for n, i in enumerate(group[1:], 2)]
        owner = next((i for i in group if keep(paths[i])), None)
        for i, name in zip(group, trial):
            names[i] = names[i] if i == owner and names[i].lower() not in {t.lower() for t in trial} else name
    # A renamed input may now meet another input's plain stem: number what still collides.
    counts: Counter[str] = Counter()
    for i, name in enumerate(names):
        counts[name.lower()] += 1
        if counts[name.lower()] > 1:
            names[i] = f"{name}-{counts[name.lower()]}"
    return names
