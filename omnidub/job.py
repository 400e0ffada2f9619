"""A render job: any number of inputs rendered by one session through one executor stream.

Every input keeps its own output folder, journal and manifest; their pending lines go to the executor as one
stream, so buckets are formed across inputs and one resident model (or one pool of workers) serves them all.
Lines with the same key (the same voice saying the same words at the same length) are rendered once.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

from omnidub.backends.base import Request
from omnidub.errors import OmnidubError
from omnidub.journal import LineEntry
from omnidub.render import Listener, Renderer, Summary, default_out_dir
from omnidub.scheduler import Failure
from omnidub.script import SUFFIXES


@dataclass(frozen=True, eq=False)
class InputRun:
    """What happened to one input: its summary, or the error that kept it from starting."""

    input: Path
    out_dir: Path | None
    summary: Summary | None = None
    error: BaseException | None = None

    def result(self) -> Summary:
        """The summary, or the input's error raised again."""
        if self.error is not None:
            raise self.error
        return self.summary


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


class Job:
    """Renders many inputs through the session's executor: plan each, stream all pending lines, assemble each."""

    def __init__(self, session, renderers: Sequence[Renderer], *, listener: Listener | None = None,
                 failed: Sequence[InputRun] = (), notes: Sequence[str] = (), order: Sequence[Path] = ()):
        self.session = session
        self.order = [Path(p) for p in order]  # the inputs as given, to report in that order
        self.renderers = list(renderers)
        self.failed = list(failed)  # inputs that could not even be read
        self.notes = list(notes)
        self.listener = listener or Listener()
        self.stopping = False
        self._shown: Renderer | None = None

    @property
    def many(self) -> bool:
        return len(self.renderers) + len(self.failed) > 1

    def open(self) -> None:
        """Claim every output folder now (before anything slow); a folder that cannot be used fails its input
        (alone, it raises)."""
        for renderer in list(self.renderers):
            try:
                renderer.open_folder()
            except OmnidubError as exc:
                if not self.many:
                    raise
                renderer.close()
                self.renderers.remove(renderer)
                self.failed.append(InputRun(renderer.input_path, renderer.out_dir, error=exc))

    def close(self) -> None:
        """Let go of every output folder (their locks)."""
        for renderer in self.renderers:
            renderer.close()

    def request_stop(self) -> None:
        """Finish the lines in flight, then stop (every input keeps what is done)."""
        self.stopping = True
        for renderer in self.renderers:
            renderer.request_stop()

    def run(self) -> list[InputRun]:
        """Render every input; returns one InputRun per input, in the order given."""
        runs: dict[int, InputRun] = {}
        pending: dict[int, list[LineEntry]] = {}
        for renderer in self.renderers:
            self._show(renderer)
            try:
                pending[id(renderer)] = renderer.prepare()
            except OmnidubError as exc:
                if self.many:
                    self.listener.note(f"{renderer.input_path}: {exc}; the other inputs go on")
                runs[id(renderer)] = InputRun(renderer.input_path, renderer.out_dir, error=exc)
        live = [r for r in self.renderers if id(r) in pending]
        work = [(r, e) for r in live for e in pending[id(r)]]
        # A model or pool that cannot start is the user's to fix (exit 2), not every line failing.
        executor = self.session.executor() if work else None

        self.listener.start(sum(len(r.entries) - len(r.left_out) for r in live))
        for renderer in live:
            self._show(renderer)
            for entry in renderer.entries:
                if entry.done:
                    self.listener.line_done(entry, entry.duration or 0.0, 0.0)

        # One request per distinct key: a line shared by two inputs (or said twice) is rendered once.
        owners: dict[str, list[tuple[Renderer, LineEntry]]] = {}
        for renderer, entry in work:
            owners.setdefault(entry.key, []).append((renderer, entry))
        by_id: dict[str, list[tuple[Renderer, LineEntry]]] = {}
        requests: list[Request] = []
        for n, group in enumerate(owners.values()):
            renderer, entry = group[0]
            requests.append(renderer.request(entry, str(n)))
            by_id[str(n)] = group

        def started(bucket: list[Request]) -> None:
            for request in bucket:
                renderer, entry = by_id[request.id][0]
                self._show(renderer)
                self.listener.line_started(entry)

        seconds = {id(r): [0.0, 0.0] for r in live}  # synthesis wall, audio produced
        try:
            if executor is not None:
                for outcome in executor.stream(requests, should_stop=lambda: self.stopping, on_bucket=started):
                    for k, (renderer, entry) in enumerate(by_id.pop(outcome.id, ())):
                        self._show(renderer)
                        renderer.accept(entry, outcome)
                        if not isinstance(outcome, Failure):
                            seconds[id(renderer)][0] += outcome.seconds if k == 0 else 0.0
                            seconds[id(renderer)][1] += entry.duration
        finally:
            self.listener.finish()
            for renderer in live:
                renderer.journal.close()

        for renderer in live:
            self._show(renderer)
            runs[id(renderer)] = InputRun(renderer.input_path, renderer.out_dir,
                                          summary=renderer.finish(*seconds[id(renderer)]))
        done = self.failed + [runs[id(r)] for r in self.renderers]
        place = {path: i for i, path in enumerate(self.order)}
        return sorted(done, key=lambda run: place.get(run.input, len(place)))

    def _show(self, renderer: Renderer) -> None:
        if self.many and renderer is not self._shown:
            self._shown = renderer
            self.listener.input(renderer.out_dir.name)


def build_job(session, inputs: Sequence[Path], *, out_dir: Path | None = None, listener: Listener | None = None,
              **options) -> Job:
    """A job over ``inputs`` (files or folders). One input goes to ``out_dir`` (default ``output/<stem>``); with
    several, each goes to ``<out_dir or output>/<name>``, names made unique where stems collide.

    An input that cannot be read or whose folder is taken is recorded as failed when there are several; alone,
    its error is raised."""
    paths = expand_inputs(inputs)
    if len(paths) == 1:
        return Job(session, [session.renderer(paths[0], out_dir=out_dir, listener=listener, **options)],
                   listener=listener)
    parent = Path(out_dir) if out_dir is not None else Path("output")
    names = unique_names(paths)
    notes = [f"{path} renders into {parent / name} (its name is shared with another input)"
             for path, name in zip(paths, names) if name != path.stem]
    renderers, failed = [], []
    for path, name in zip(paths, names):
        try:
            folder = default_out_dir(path, parent / name)
            renderers.append(session.renderer(path, out_dir=folder, listener=listener, **options))
        except OmnidubError as exc:
            failed.append(InputRun(path, None, error=exc))
    return Job(session, renderers, listener=listener, failed=failed, notes=notes, order=paths)
