"""What a render tells as it goes (the listener's hooks, which the command line shows with rich) and what it
did (the summary)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from omnidub.journal import LineEntry


@dataclass(frozen=True)
class Summary:
    """What a render did, for the closing table and ``--json``."""

    out_dir: Path
    lines: int
    rendered: int
    cached: int
    failed: int
    overflow: tuple[int, ...]
    audio_seconds: float
    synth_seconds: float
    program_seconds: float
    interrupted: bool = False
    outputs: tuple[str, ...] = ()
    pending: tuple[int, ...] = ()  # lines left out by --only that have no audio yet
    loudness: dict | None = None  # per mix: gain, limited, integrated, range, true_peak
    edited: tuple[int, ...] = ()  # lines whose segment someone changed: kept, and used by the outputs

    @property
    def rtf(self) -> float | None:
        return self.synth_seconds / self.audio_seconds if self.audio_seconds else None


class Listener:
    """Progress hooks; the CLI shows them with rich. The default does nothing."""

    def step(self, text: str) -> None: ...

    def note(self, text: str) -> None: ...

    def start(self, total: int, what: str = "rendering") -> None:
        """A pass over ``total`` lines begins; ``what`` it does ("rendering", or rendering lines again)."""

    def line_started(self, entry: LineEntry) -> None: ...

    def line_done(self, entry: LineEntry, audio_seconds: float, wall_seconds: float) -> None: ...

    def input(self, name: str) -> None:
        """The input the next line events belong to (only in jobs of several inputs)."""

    def finish(self) -> None: ...

    def transcribing(self, done: float, total: float) -> None:
        """The source is transcribed up to ``done`` of its ``total`` seconds (``render --source`` without its
        subtitles)."""

    def checking(self, done: int, total: int, index: int) -> None:
        """QA has transcribed ``done`` of ``total`` lines (the latest: ``index``)."""

    def checked(self, report, written) -> None:
        """QA of the current input is done; ``written``: the paths of qa.json and qa.html."""

    def delivered(self, delivery) -> None:
        """A review delivered (``editor.Delivery``: the files it wrote and the lines that changed)."""

    def stage(self, name: str, text: str) -> None:
        """A dub's stage begins (``hear``, ``voices``, ``translate``, ``render``, ``check``); ``text`` says what it
        does."""

    def translating(self, done: int, total: int) -> None:
        """A dub has translated ``done`` of ``total`` lines (asked of the engine, or from the cache)."""
