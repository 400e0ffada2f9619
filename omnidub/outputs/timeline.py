"""What an editor opens: subtitles and timelines, every line on the one frame grid (``outputs.frames``)."""

from __future__ import annotations

import html
from dataclasses import dataclass
from datetime import timedelta
from fractions import Fraction
from pathlib import Path

from omnidub.errors import OmnidubError
from omnidub.files import write_text_atomic
from omnidub.outputs.frames import FrameGrid
from omnidub.outputs.mix import Placement

TIMELINE_FORMATS = ("otio", "edl", "fcpxml")


# The timeline formats that carry SMPTE timecodes, and the OpenTimelineIO adapter (and PyPI package) of each.
TIMECODE_FORMATS = {"edl": ("cmx_3600", "otio-cmx3600-adapter"), "fcpxml": ("fcp_xml", "otio-fcp-adapter")}
# The formats that must name files by absolute path.
ABSOLUTE_FORMATS = ("edl", "fcpxml")


def smpte_rate(fps: float) -> bool:
    """Whether SMPTE timecode (and so an EDL or an FCP 7 XML) is written at this frame rate."""
    return FrameGrid.at(fps).smpte


def check_timecode_rate(formats: tuple[str, ...], fps: float, source: str | None) -> None:
    """Refuse, before rendering, timeline formats whose adapter is not installed or which cannot express ``fps``
    (``source`` says where the rate came from: "--fps", "the video x.mp4", None for the default)."""
    import opentimelineio as otio

    for fmt in (f for f in formats if f in TIMECODE_FORMATS):
        adapter, package = TIMECODE_FORMATS[fmt]
        try:
            otio.adapters.from_name(adapter).module()
        except Exception as exc:  # noqa: BLE001 - not registered, or its module fails to import
            raise OmnidubError(
                f"--timeline {fmt} needs the {package} package ({type(exc).__name__}); install it "
                "with pip install 'omnidub[timelines]', or leave it out of --timeline"
            ) from None
        if not smpte_rate(fps):
            raise OmnidubError(
                f"--timeline {fmt}: its timecodes need a standard frame rate (23.976, 24, 25, 29.97, 30, 48, "
                f"50, 59.94 or 60), and {source or 'the rate'} gives {fps:g} fps; pass --fps 25 (or the "
                "rate your editor's project uses), or leave it out of --timeline"
            )


def write_subtitles(
    placements: list[Placement], srt_path: Path, vtt_path: Path, fps: float, *, speakers: bool = False
) -> None:
    """Write the lines as SRT and WebVTT cues on the frame grid: each from its clip's first frame to its last (as
    the timelines place it) but never past the next cue's start (players would show both); lines whose clips start
    on the same frame share one cue. The VTT names each speaker with ``<v>``; the SRT does with ``NAME:`` when
    ``speakers``."""
    import srt

    grid = FrameGrid.at(fps)
    cues = [(grid.seconds(first), grid.seconds(last), group) for first, last, group in _cues(placements, grid)]
    subtitles = [
        srt.Subtitle(
            index=n,
            start=timedelta(milliseconds=round(start * 1000)),
            end=timedelta(milliseconds=round(end * 1000)),
            content="\n".join(f"{p.speaker}: {p.text}" if speakers else p.text for p in group),
        )
        for n, (start, end, group) in enumerate(cues, 1)
    ]
    write_text_atomic(srt_path, srt.compose(subtitles, reindex=False))
    blocks = ["WEBVTT", ""]
    for n, (start, end, group) in enumerate(cues, 1):
        blocks += [
            str(n),
            f"{_vtt_time(start)} --> {_vtt_time(end)}",
            *(f"<v {html.escape(p.speaker)}>{html.escape(p.text, quote=False)}" for p in group),
            "",
        ]
    write_text_atomic(vtt_path, "\n".join(blocks))


def _cues(placements: list[Placement], grid: FrameGrid) -> list[tuple[int, int, list[Placement]]]:
    """(first frame, end frame, lines) per cue: lines whose clips start on the same frame together, each cue
    ending where its clips end or the next cue starts, whichever comes first."""
    groups: dict[int, list[tuple[int, Placement]]] = {}
    for p in sorted(placements, key=lambda p: (p.start, p.index)):
        record_in, length = grid.clip(p.start, p.seconds)
        groups.setdefault(record_in, []).append((record_in + length, p))
    firsts = sorted(groups)
    cues = []
    for k, first in enumerate(firsts):
        last = max(end for end, _ in groups[first])
        if k + 1 < len(firsts):
            last = min(last, firsts[k + 1])
        cues.append((first, last, [p for _, p in groups[first]]))
    return cues


def _vtt_time(seconds: float) -> str:
    ms = int(round(seconds * 1000))
    return f"{ms // 3_600_000:02d}:{ms // 60_000 % 60:02d}:{ms // 1000 % 60:02d}.{ms % 1000:03d}"


def check_formats(formats: tuple[str, ...]) -> None:
    """Refuse timeline formats omnidub cannot write."""
    unknown = sorted(set(formats) - set(TIMELINE_FORMATS))
    if unknown:
        raise OmnidubError(f"unknown timeline format {', '.join(unknown)}; choose from {', '.join(TIMELINE_FORMATS)}")


def names_folder(formats: tuple[str, ...]) -> bool:
    """Whether these timelines name the segments by absolute path (FCP 7 XML's ``pathurl`` and the EDL's clip
    comments must; the OTIO file names them relative to itself), so that they go stale when the folder moves."""
    return any(f in ABSOLUTE_FORMATS for f in formats)


@dataclass(frozen=True)
class _Clip:
    """One line on the frame grid: its record-in frame, its length in frames, and why an editor should look."""

    line: Placement
    record_in: int
    length: int
    marks: tuple[str, ...] = ()


def write_timelines(
    placements: list[Placement],
    base: Path,
    fps: float,
    formats: tuple[str, ...] = ("otio",),
    *,
    name: str = "",
    video: Path | None = None,
    video_seconds: float | None = None,
    marks: dict[int, tuple[str, ...]] | None = None,
) -> list[Path]:
    """Write ``base``.otio / .xml (FCP 7) / .<speaker>.edl: one audio track per speaker lane, named for it, each
    line a clip of its whole segment from the frame nearest its start (:meth:`FrameGrid.clip`), the lines in
    ``marks`` (index -> reasons) with a marker; the source video on a video track when given. Returns the files
    written."""
    check_formats(formats)
    grid = FrameGrid.at(fps)
    marks = marks or {}
    lanes = [
        (label, [_Clip(p, *grid.clip(p.start, p.seconds), marks.get(p.index, ())) for p in lines])
        for label, lines in speaker_lanes(placements, fps)
    ]
    picture = (Path(video), grid.frame(video_seconds)) if video is not None and video_seconds else None
    written = []
    if "otio" in formats:
        path = base.with_name(base.name + ".otio")
        timeline = _timeline(name, grid, lanes, picture, lambda p: _relative_url(p, path.parent))
        written.append(_write(timeline, path, "otio_json"))
    if "fcpxml" in formats:
        timeline = _timeline(name, grid, lanes, picture, _absolute_url, fcp=True)
        written.append(_write(timeline, base.with_name(base.name + ".xml"), "fcp_xml"))
    if "edl" in formats:
        # A CMX 3600 list holds one track: one file per speaker lane, titled for it, at the timecode base (so its
        # timecodes are non-drop-frame at 30000/1001 too). The adapter insists on a video track beside the one
        # it writes.
        edl_grid = FrameGrid(Fraction(grid.base))
        for (label, clips), file in zip(lanes, edl_names(base.name, [label for label, _ in lanes])):
            timeline = _timeline(
                f"{name} {label}".strip(), edl_grid, [(label, clips)], picture, _absolute_url, edl=True
            )
            written.append(_write(timeline, base.with_name(file), "cmx_3600", rate=grid.base))
    return written


def _timeline(
    name: str,
    grid: FrameGrid,
    lanes: list[tuple[str, list[_Clip]]],
    picture: tuple[Path, int] | None,
    url,
    *,
    fcp: bool = False,
    edl: bool = False,
):
    """The OpenTimelineIO timeline of the lanes, every time a whole number of frames of ``grid``; ``url`` names a
    file. FCP 7 XML names its tracks with Premiere's ``MZ.TrackName`` attribute (and a ``name`` element, which
    OTIO readers take); an EDL's markers are at record time, as editors write LOC lines."""
    import opentimelineio as otio
    from opentimelineio.opentime import RationalTime, TimeRange

    rate = float(grid.rate)

    def span(first: int, frames: int):
        return TimeRange(RationalTime(first, rate), RationalTime(frames, rate))

    timeline = otio.schema.Timeline(name=name)
    timeline.global_start_time = RationalTime(0, rate)
    tracks = []
    for label, clips in lanes:
        track = otio.schema.Track(name=label, kind=otio.schema.TrackKind.Audio)
        if fcp:
            track.metadata["fcp_xml"] = {"@MZ.TrackName": label, "name": label}
        cursor = 0
        for c in clips:
            if c.record_in > cursor:
                track.append(otio.schema.Gap(source_range=span(0, c.record_in - cursor)))
            reference = otio.schema.ExternalReference(
                target_url=url(Path(c.line.path)), available_range=span(0, c.length)
            )
            clip = otio.schema.Clip(
                name=Path(c.line.path).stem, media_reference=reference, source_range=span(0, c.length)
            )
            clip.metadata["omnidub"] = {
                "index": c.line.index,
                "speaker": c.line.speaker,
                "text": c.line.text,
                "start": c.line.start,
                "marks": list(c.marks),
            }
            if c.marks:
                clip.markers.append(_marker(c, RationalTime(c.record_in if edl else 0, rate)))
            track.append(clip)
            cursor = c.record_in + c.length
        tracks.append(track)
    if picture is not None:
        video, frames = picture
        reference = otio.schema.ExternalReference(target_url=_absolute_url(video), available_range=span(0, frames))
        track = otio.schema.Track(name="picture", kind=otio.schema.TrackKind.Video)
        track.append(otio.schema.Clip(name=video.stem, media_reference=reference, source_range=span(0, frames)))
        tracks.insert(len(tracks) if edl else 0, track)  # the EDL writer writes the first track only
    elif edl:
        tracks.append(otio.schema.Track(name="picture", kind=otio.schema.TrackKind.Video))
    timeline.tracks.extend(tracks)
    return timeline


def _marker(clip: _Clip, at):
    """A marker at the clip's first frame naming why the line needs a look: red for QA, yellow otherwise."""
    import opentimelineio as otio
    from opentimelineio.opentime import RationalTime, TimeRange

    failed = any(m.startswith("QA") for m in clip.marks)
    color = otio.schema.MarkerColor.RED if failed else otio.schema.MarkerColor.YELLOW
    marker = otio.schema.Marker(
        name=", ".join(clip.marks), marked_range=TimeRange(at, RationalTime(0, at.rate)), color=color
    )
    marker.metadata["fcp_xml"] = {"comment": f"line {clip.line.index}: {clip.line.text}"}
    return marker


def _relative_url(path: Path, folder: Path) -> str:
    """The file as a URL relative to ``folder`` (where the timeline lies), so the folder can move."""
    import os

    from opentimelineio.url_utils import url_from_filepath

    return url_from_filepath(Path(os.path.relpath(Path(path).resolve(), Path(folder).resolve())).as_posix())


def _absolute_url(path: Path) -> str:
    return Path(path).resolve().as_uri()


def _write(timeline, path: Path, adapter: str, **options) -> Path:
    import opentimelineio as otio

    from omnidub.files import atomic_path

    text = otio.adapters.write_to_string(timeline, adapter_name=adapter, **options)
    if adapter == "cmx_3600":  # say what the timecodes count, after the title: the adapter leaves it out
        title, events = text.split("\n", 1) if text.startswith("TITLE:") else ("", text)
        text = "\n".join([*filter(None, [title]), "FCM: NON-DROP FRAME", events])
    with atomic_path(path) as temp:
        temp.write_text(text, encoding="utf-8")
    return path


def speaker_lanes(placements: list[Placement], fps: float) -> list[tuple[str, list[Placement]]]:
    """(label, lines) per track: one per speaker in order of first appearance, and a second lane (labelled
    "NAME (2)") for a speaker whose clips overlap on the frame grid."""
    grid = FrameGrid.at(fps)
    lanes: dict[str, list[list]] = {}
    for p in sorted(placements, key=lambda p: (p.start, p.index)):
        record_in, length = grid.clip(p.start, p.seconds)
        speaker_lanes = lanes.setdefault(p.speaker, [])
        lane = next((lane for lane in speaker_lanes if lane[0] <= record_in), None)
        if lane is None:
            label = p.speaker if not speaker_lanes else f"{p.speaker} ({len(speaker_lanes) + 1})"
            lane = [0, label, []]
            speaker_lanes.append(lane)
        lane[2].append(p)
        lane[0] = record_in + length
    return [(lane[1], lane[2]) for speaker_lanes in lanes.values() for lane in speaker_lanes]


def edl_names(base: str, labels: list[str]) -> list[str]:
    """The EDL file of each track label (``base.<label>.edl``): letters, digits, ``-`` and ``_`` only, and never
    two alike (labels that clean to the same name get a number)."""
    names, taken = [], set()
    for label in labels:
        clean = "".join(c if c.isalnum() or c in "-_" else "_" for c in label) or "track"
        name, n = clean, 2
        while name.casefold() in taken:
            name, n = f"{clean}-{n}", n + 1
        taken.add(name.casefold())
        names.append(f"{base}.{name}.edl")
    return names
