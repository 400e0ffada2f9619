"""The outputs of a render behind one small interface: each writer says which files it will write (so they can
be checked before any line renders), writes them from the programme, and returns what it wrote and what the
manifest records of it.

A new output is one more writer in ``WRITERS``; assembly and the render loop do not change. A writer that is not
``required`` (subtitles, timelines) may fail without costing the audio: its failure becomes one note, and the
manifest records its ``empty`` part.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable, Protocol

from omnidub.outputs.deliver import DeliveryOptions
from omnidub.outputs.mix import Bed, Placement, deliver_audio
from omnidub.outputs.patch import MixState


@dataclass(frozen=True)
class Programme:
    """What every writer gets: the lines placed on the timeline, and how to deliver them."""

    out_dir: Path
    placements: list[Placement]
    speakers: dict[str, str]  # speaker -> file name
    seconds: float  # the programme's length, the video's (or the bed's) included
    fps: float
    options: DeliveryOptions
    name: str  # the stem of the dub's own files (the video's, else the input's)
    video_seconds: float | None = None
    note: Callable[[str], None] = print  # what a writer wants the user to know
    whole: str | None = None  # why the audio must be written whole (else the last delivery is patched where it can)

    def past_video(self) -> tuple[int, ...]:
        """The lines whose audio ends after the video's picture (none without a video)."""
        if self.video_seconds is None:
            return ()
        return tuple(p.index for p in self.placements if p.start + p.seconds > self.video_seconds + 1e-3)


@dataclass(frozen=True)
class Output:
    """What a writer wrote: the files (relative to the output folder) and its part of the manifest, merged into
    the parts of the writers before it (``{"delivery": {...}}`` adds to the delivery record)."""

    files: list[str]
    record: dict


class Writer(Protocol):
    name: str
    required: bool
    empty: dict  # its part of the manifest when it wrote nothing (it failed)

    def paths(self, programme: Programme) -> list[str]:
        """The files it will write, relative to the output folder (known before any line renders)."""

    def write(self, programme: Programme, done: dict) -> Output:
        """Write them. ``done`` holds the manifest's parts so far (the writers before it)."""


class AudioWriter:
    """Stems per speaker, the dub mix, and with a bed the mix over it, at the delivery rate and loudness."""

    name, required, empty = "stems and mix", True, {}

    def paths(self, programme: Programme) -> list[str]:
        fmt = programme.options.fmt
        found = [f"stems/{name}.{fmt}" for _, name in sorted(programme.speakers.items())] + [f"mix.{fmt}"]
        return found + ([f"mix-bed.{fmt}"] if programme.options.bed else [])

    def write(self, programme: Programme, done: dict) -> Output:
        options, out = programme.options, programme.out_dir
        stems = {speaker: out / "stems" / f"{name}.{options.fmt}" for speaker, name in programme.speakers.items()}
        bed_mix = out / f"mix-bed.{options.fmt}" if options.bed else None
        (out / "stems").mkdir(exist_ok=True)
        made = deliver_audio(
            programme.placements,
            stems,
            out / f"mix.{options.fmt}",
            programme.seconds,
            sample_rate=options.sample_rate,
            fmt=options.fmt,
            loudness=options.loudness,
            true_peak=options.true_peak,
            bed=Bed(options.bed, duck=options.duck) if options.bed else None,
            bed_mix=bed_mix,
            previous=None if programme.whole else MixState.load(out),
            frame=self.frame(programme),
            out_dir=out,
            whole=programme.whole,
        )
        dub, over_bed = made.dub, made.over_bed
        if made.state is not None:
            made.state.save(out)
        for mastered in (dub, over_bed):
            if mastered is not None and mastered.note:  # held under its loudness target: by how much and why
                programme.note(mastered.note)
        record = {
            "stems": {speaker: f"stems/{name}.{options.fmt}" for speaker, name in sorted(programme.speakers.items())},
            "mix": f"mix.{options.fmt}",
            "loudness": {
                "target": options.loudness,
                "true_peak_ceiling": options.true_peak,
                "mix": dub.as_dict(),
                "bed_mix": over_bed.as_dict() if over_bed else None,
            },
            "delivery": {"bed_mix": f"mix-bed.{options.fmt}" if over_bed else None, "audio": made.how},
        }
        files = [*record["stems"].values(), record["mix"]] + ([record["delivery"]["bed_mix"]] if over_bed else [])
        return Output(files, record)

    @staticmethod
    def frame(programme: Programme) -> str:
        """A key over what the audio depends on besides the lines: a delivery may patch one of the same key."""
        from omnidub import __version__

        payload = [__version__, repr(programme.options), sorted(programme.speakers.items()), programme.seconds]
        return hashlib.sha256(json.dumps(payload, default=str).encode()).hexdigest()


class VideoWriter:
    """The dubbed video: the picture copied, the dub (over the bed, when there is one) as its default track."""

    name, required, empty = "dubbed video", True, {"delivery": {"video": None}}

    def paths(self, programme: Programme) -> list[str]:
        from omnidub.outputs.video import dubbed_path

        video = programme.options.video
        return [dubbed_path(Path("."), video).as_posix()] if video else []

    def write(self, programme: Programme, done: dict) -> Output:
        from omnidub.outputs.video import mux

        options = programme.options
        if options.video is None:
            return Output([], self.empty)
        [relative] = self.paths(programme)
        # The programme's sound: the mix over the bed when there is one.
        sound = done["delivery"].get("bed_mix") or done["mix"]
        mux(
            options.video,
            programme.out_dir / sound,
            programme.out_dir / relative,
            language=options.language,
            keep_original=options.keep_original,
        )
        return Output([relative], {"delivery": {"video": relative}})


class SubtitleWriter:
    """``<name>.dub.srt`` and ``.vtt``: every line from its start for as long as it was rendered."""

    name, required, empty = "subtitles", False, {"delivery": {"subtitles": []}}

    def paths(self, programme: Programme) -> list[str]:
        return [f"{programme.name}.dub.srt", f"{programme.name}.dub.vtt"]

    def write(self, programme: Programme, done: dict) -> Output:
        from omnidub.outputs.timeline import write_subtitles

        srt, vtt = self.paths(programme)
        write_subtitles(
            programme.placements,
            programme.out_dir / srt,
            programme.out_dir / vtt,
            programme.fps,
            speakers=programme.options.subtitle_speakers,
        )
        return Output([srt, vtt], {"delivery": {"subtitles": [srt, vtt]}})


class TimelineWriter:
    """Editor timelines (OTIO, FCP 7 XML, an EDL per speaker track): each line a clip of its segment, a marker on
    each line that overflows, plays past the video or failed the folder's QA."""

    name, required, empty = "timelines", False, {"delivery": {"timelines": []}}

    def paths(self, programme: Programme) -> list[str]:
        formats, base = programme.options.timelines, f"{programme.name}.dub"
        found = [f"{base}.otio"] if "otio" in formats else []
        found += [f"{base}.xml"] if "fcpxml" in formats else []
        if "edl" in formats:  # one list per speaker track; a speaker whose lines overlap gets a second
            from omnidub.outputs.timeline import edl_names, speaker_lanes

            found += edl_names(base, [label for label, _ in speaker_lanes(programme.placements, programme.fps)])
        return found

    @staticmethod
    def marks(programme: Programme) -> dict[int, tuple[str, ...]]:
        """Why an editor should look at a line: ``overflow``, ``past-video``, and ``QA: <flags>`` for a line the
        folder's qa.json failed, when it judged the audio the line has now."""
        late = set(programme.past_video())
        from omnidub.records import QaRecord

        record = QaRecord.read(programme.out_dir)
        failed = record.failures() if record is not None else {}
        found = {}
        for p in programme.placements:
            marks = [m for m in ("overflow",) if m in p.flags] + (["past-video"] if p.index in late else [])
            sha, flags = failed.get(p.index, (None, ()))
            flags = [f for f in flags if f not in marks]
            if flags and p.sha256 is not None and sha == p.sha256:
                marks.append(f"QA: {', '.join(flags)}")
            if marks:
                found[p.index] = tuple(marks)
        return found

    def write(self, programme: Programme, done: dict) -> Output:
        from omnidub.outputs.timeline import write_timelines

        if not programme.options.timelines:
            return Output([], self.empty)
        written = write_timelines(
            programme.placements,
            programme.out_dir / f"{programme.name}.dub",
            programme.fps,
            programme.options.timelines,
            name=programme.name,
            video=programme.options.video,
            video_seconds=programme.video_seconds,
            marks=self.marks(programme),
        )
        files = [Path(p).relative_to(programme.out_dir).as_posix() for p in written]
        return Output(files, {"delivery": {"timelines": files}})


# In order: a writer may use what the ones before it wrote (the video carries the mix).
WRITERS: tuple[Writer, ...] = (AudioWriter(), VideoWriter(), SubtitleWriter(), TimelineWriter())


def with_language(options: DeliveryOptions, languages: set[str | None]) -> DeliveryOptions:
    """The dub's audio track speaks the lines' language, when they share one and none was given."""
    if options.language is None and len(languages) == 1:
        return replace(options, language=next(iter(languages)))
    return options
