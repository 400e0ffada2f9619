"""The inputs of a render job: files and folders of subtitles or scripts, and the output folder of each."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Callable, Sequence

from omnidub.errors import OmnidubError
from omnidub.script import SUFFIXES


def default_out_dir(input_path: Path) -> Path:
    """``output/<input stem>``, the folder an input renders into unless told otherwise."""
    return Path("output") / Path(input_path).stem


def expand_inputs(paths: Sequence[Path]) -> list[Path]:
    """Files as given; a folder stands for its .srt, .vtt and .txt files (sorted). The same file twice counts once;
    a path that does not exist is an error."""
    out: list[Path] = []
    seen: set[Path] = set()
    for path in map(Path, paths):
        if not path.exists():
            # A typo is said before anything starts; a word such as "true" is a value given to a flag.
            hint = " (flags such as --dry-run take no value)" if path.name.lower() in ("true", "false", "yes", "no") else ""
            raise OmnidubError(f"{path}: no such file or folder{hint}")
        if path.is_dir():
            found = sorted(p for p in path.iterdir() if p.is_file() and p.suffix.lower() in SUFFIXES)
            if not found:
                raise OmnidubError(f"{path}: the folder holds no {', '.join(sorted(SUFFIXES))} file")
        else:
            found = [path]
        for p in found:
            if p.resolve() not in seen:
                seen.add(p.resolve())
                out.append(p)
    return out


def unique_names(paths: Sequence[Path]) -> list[str]:
    """A folder name per input: its stem, or, where stems collide, the stem with its folder or extension."""
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
        for i, name in zip(group, trial):
            names[i] = name
    # A renamed input may now meet another input's plain stem: number what still collides.
    counts: Counter[str] = Counter()
    for i, name in enumerate(names):
        counts[name.lower()] += 1
        if counts[name.lower()] > 1:
            names[i] = f"{name}-{counts[name.lower()]}"
    return names
