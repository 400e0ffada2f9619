"""Assembly: from the lines' segments to the delivered outputs, one whole generation at a time.

Every output is written by a writer (``outputs.writers``). Before a generation starts, the manifest's assembly
record is cleared; each file is announced to the folder's ledger before it is written and recorded (with its
hash) after; the record (a key over everything assembly read, and the hash of every file written) is committed
last. A rerun keeps the outputs only when the key is the same and every file still holds exactly the bytes of
that generation, so a truncated mix, an emptied stem or a half-written generation is always assembled again.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable

from omnidub import __version__
from omnidub.folder import OutputFolder
from omnidub.outputs.deliver import DeliveryOptions, Probed
from omnidub.outputs.mix import Placement, container
from omnidub.outputs.timeline import names_folder
from omnidub.outputs.writers import WRITERS, Output, Programme, Writer, with_language
from omnidub.records import LastRender, LineEntry


@dataclass
class Generation:
    """What one assembly wrote: the manifest's parts (stems, mix, loudness, delivery), the files with their
    hashes, the lines that end after the video, and notes (an auxiliary output that failed)."""

    key: str
    parts: dict
    files: dict[str, str] = field(default_factory=dict)
    past_video: tuple[int, ...] = ()
    notes: list[str] = field(default_factory=list)
    complete: bool = True
    reused: bool = False

    def record(self) -> dict | None:
        """The manifest's ``assembly``: committed only for a complete generation."""
        return {"key": self.key, "files": dict(sorted(self.files.items()))} if self.complete else None


class Assembly:
    """Writes a project's outputs into its folder through the writers, one generation at a time."""

    def __init__(
        self,
        folder: OutputFolder,
        options: DeliveryOptions,
        probed: Probed,
        *,
        name: str,
        writers: tuple[Writer, ...] = WRITERS,
    ):
        self.folder = folder
        self.options = options
        self.probed = probed  # the bed and video as opened before the render
        self.name = name  # the stem of the dub's own files
        self.writers = writers

    def placements(self, entries: list[LineEntry], *, planned: bool = False) -> list[Placement]:
        """Every line with audio at its start (``planned``: every line at its planned length, to know the
        paths before anything renders)."""
        return [
            Placement(
                self.folder.path / e.file,
                e.start,
                e.speaker,
                (e.target if planned else e.duration) or 0.0,
                e.text,
                e.index,
                e.language,
                tuple(e.flags),
                e.sha256,
            )
            for e in entries
            if planned or e.done
        ]

    def programme(self, placements: list[Placement], names: dict[str, str], seconds: float) -> Programme:
        """The programme to write: the lines where they sit, at least ``seconds`` long, padded to the video (or,
        without one, the bed)."""
        out = self.folder.path
        video, bed = self.probed.video, self.probed.bed
        length = max(
            [
                seconds,
                *(p.start + p.seconds for p in placements),
                video.seconds if video else bed.seconds if bed else 0.0,
            ]
        )
        options = with_language(self.options, {p.language for p in placements})
        return Programme(
            out, placements, names, length, self.probed.fps, options, self.name, video.seconds if video else None
        )

    def paths(self, programme: Programme) -> list[str]:
        return [p for writer in self.writers for p in writer.paths(programme)]

    def key(self, entries: list[LineEntry], names: dict[str, str], seconds: float) -> str:
        """A key over everything assembly reads: each line's audio (the segment as it is), place and file, the
        names, format, programme and delivery options (with the bed's and video's size and time)."""
        sources = {}
        for path in (self.options.bed, self.options.video):
            if path:
                stat = Path(path).stat()
                sources[str(Path(path).resolve())] = [stat.st_size, stat.st_mtime_ns]
        lines = [[e.index, e.file, self._segment_hash(e), e.start, e.duration, e.speaker] for e in entries if e.done]
        payload = {
            "omnidub": __version__,
            "lines": lines,
            "names": names,
            "program": seconds,
            "sources": sources,
            "delivery": repr(self._resolved()),
            "name": self.name,
            "folder": str(self.folder.path.resolve()) if names_folder(self.options.timelines) else None,
        }
        return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()

    def _resolved(self):
        """The delivery options with the bed and video as absolute paths (a render given ``bed.wav`` and a
        review reopening it from the manifest name the same file)."""
        bed, video = self.options.bed, self.options.video
        return replace(
            self.options,
            bed=Path(bed).resolve() if bed else bed,
            video=Path(video).resolve() if video else video,
        )

    def _segment_hash(self, entry: LineEntry) -> str | None:
        if "edited" not in entry.flags:
            return entry.sha256
        from omnidub.keys import file_digest

        return file_digest(self.folder.path / entry.file).hexdigest()

    def reuse(self, previous: LastRender, key: str, speakers) -> Generation | None:
        """The last generation, when it was made from exactly this and every file still holds what it wrote."""
        record = previous.assembly
        if record is None or record.key != key or set(previous.stems) != set(speakers):
            return None
        ledger = self.folder.ledger
        for relative, sha in record.files.items():
            if self.folder.status(relative) != "ours" or ledger.files[relative].sha256 != sha:
                return None
        parts = {name: previous.parts.get(name) for name in ("stems", "mix", "loudness", "delivery")}
        return Generation(key, parts, dict(record.files), previous.past_video, reused=True)

    def write(
        self, programme: Programme, key: str, note: Callable[[str], None], *, whole: str | None = None
    ) -> Generation:
        """Write every output (the caller has cleared the manifest's assembly record); the audio patches the last
        delivery where only lines changed, unless ``whole`` says why it may not."""
        programme = replace(programme, note=note, whole=whole)  # note: what a writer wants the user to know
        options = self.options
        parts: dict = {
            "delivery": {
                "sample_rate": options.sample_rate,
                "fps": round(programme.fps, 6),
                "bed": str(Path(options.bed).resolve()) if options.bed else None,
                "duck": options.duck,
                "source_video": str(Path(options.video).resolve()) if options.video else None,
                "video_seconds": None if programme.video_seconds is None else round(programme.video_seconds, 3),
            }
        }
        generation = Generation(key, parts)
        for writer in self.writers:
            self._run(writer, programme, parts, generation, note)
        channels = 2 if parts["delivery"].get("bed_mix") else 1
        if container(options.fmt, int(round(programme.seconds * options.sample_rate)), channels)[0] == "RF64":
            note("stems and mixes pass WAV's 4 GiB limit: they were written as RF64 (64-bit WAV)")
        generation.past_video = programme.past_video()
        return generation

    def rewrite(self, programme: Programme, generation: Generation, name: str, note: Callable[[str], None]) -> None:
        """Write the files of the writer called ``name`` again within ``generation`` (the timelines, once QA has
        judged the lines): its key stays, each file's new hash is recorded."""
        for writer in (w for w in self.writers if w.name == name):
            self._run(writer, replace(programme, note=note), generation.parts, generation, note)

    def _run(
        self, writer: Writer, programme: Programme, parts: dict, generation: Generation, note: Callable[[str], None]
    ) -> None:
        """One writer: its files made way for, written and recorded; its part merged into the manifest's."""
        paths = writer.paths(programme)
        before = {relative: self._as_written(relative) for relative in paths}
        try:
            for said in self.folder.make_way(paths):
                note(said)
            output = writer.write(programme, parts)
        except Exception as exc:
            if writer.required:
                raise
            why = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            generation.notes.append(f"the {writer.name} were not written: {why}")
            generation.complete = False
            note(generation.notes[-1])
            output = Output([], writer.empty)
        _merge(parts, output.record)
        for relative in dict.fromkeys([*paths, *output.files]):
            if (self.folder.path / relative).is_file():
                # A file the writer left as it was (a patched delivery keeps most) is not hashed again.
                stat = (self.folder.path / relative).stat()
                was = before.get(relative)
                self.folder.record(relative, was[0] if was and was[1:] == (stat.st_size, stat.st_mtime_ns) else None)
                generation.files[relative] = self.folder.ledger.files[relative].sha256

    def _as_written(self, relative: str) -> tuple[str, int, int] | None:
        """(hash, size, time) of a file as the ledger knows it while it still holds that; else None."""
        if self.folder.status(relative) != "ours":
            return None
        written = self.folder.ledger.files[relative]
        stat = (self.folder.path / relative).stat()
        return (written.sha256, stat.st_size, stat.st_mtime_ns)


def _merge(parts: dict, record: dict) -> None:
    """A writer's part of the manifest into the parts so far (a nested record adds to the one already there)."""
    for name, value in record.items():
        if isinstance(value, dict) and isinstance(parts.get(name), dict):
            parts[name].update(value)
        else:
            parts[name] = value
