"""What an editor opens: subtitles at the times the lines were rendered, timelines, SMPTE timecodes."""

from __future__ import annotations

import html
from datetime import timedelta
from pathlib import Path

from omnidub.errors import OmnidubError
from omnidub.files import write_text_atomic
from omnidub.outputs.mix import Placement

TIMELINE_FORMATS = ("otio", "edl", "fcpxml")


# The timeline formats that carry SMPTE timecodes, and the OpenTimelineIO adapter (and PyPI package) of each.
TIMECODE_FORMATS = {"edl": ("cmx_3600", "otio-cmx3600-adapter"), "fcpxml": ("fcp_xml", "otio-fcp-adapter")}


def timecode(seconds: float, fps: float) -> str:
    """HH:MM:SS:FF at ``fps`` (drop-frame ``;`` at 29.97 and 59.94). A rate SMPTE does not define (10, 12.5, 15,
    120 fps, a variable rate's average) counts its frames within each second of the clock."""
    from opentimelineio.opentime import RationalTime, to_timecode

    seconds = max(0.0, seconds)
    if smpte_rate(fps):
        return to_timecode(RationalTime.from_seconds(seconds, fps).round(), fps)
    whole = int(seconds)
    frame = min(int(round((seconds - whole) * fps)), max(0, int(-(-fps // 1)) - 1))
    return f"{whole // 3600:02d}:{whole // 60 % 60:02d}:{whole % 60:02d}:{frame:02d}"


def smpte_rate(fps: float) -> bool:
    """Whether SMPTE timecode (and so OpenTimelineIO's EDL and FCP XML writers) knows this frame rate."""
    from opentimelineio.opentime import RationalTime, to_timecode

    try:
        to_timecode(RationalTime(0, fps), fps)
    except ValueError:
        return False
    return True


def check_timecode_rate(formats: tuple[str, ...], fps: float, source: str | None) -> None:
    """Refuse, before rendering, timeline formats whose adapter is not installed or which cannot express ``fps``
    (``source`` says where the rate came from: "--fps", "the video x.mp4", None for the default)."""
    import opentimelineio as otio

    for fmt in (f for f in formats if f in TIMECODE_FORMATS):
        adapter, package = TIMECODE_FORMATS[fmt]
        try:
            otio.adapters.from_name(adapter).module()
        except Exception as exc:  # noqa: BLE001 - not registered, or its module fails to import
            raise OmnidubError(f"--timeline {fmt} needs the {package} package ({type(exc).__name__}); install it "
                               "with pip install 'omnidub[timelines]', or leave it out of --timeline") from None
        if not smpte_rate(fps):
            raise OmnidubError(f"--timeline {fmt}: its timecodes need a standard frame rate (23.976, 24, 25, 29.97, 30, 48, "
                               f"50, 59.94 or 60), and {source or 'the rate'} gives {fps:g} fps; pass --fps 25 (or the "
                               "rate your editor's project uses), or leave it out of --timeline")


def write_subtitles(placements: list[Placement], srt_path: Path, vtt_path: Path, *, speakers: bool = False) -> None:
    """Write the lines as SRT and WebVTT cues, each from its start for as long as it was rendered but never past
    the next cue's start (players would show both); lines that start together share one cue. The VTT names
    each speaker with ``<v>``; the SRT does with ``NAME:`` when ``speakers``."""
    import srt

    cues = _cues(placements)
    subtitles = [
        srt.Subtitle(index=n, start=timedelta(seconds=start), end=timedelta(seconds=end),
                     content="\n".join(f"{p.speaker}: {p.text}" if speakers else p.text for p in group))
        for n, (start, end, group) in enumerate(cues, 1)
    ]
    write_text_atomic(srt_path, srt.compose(subtitles, reindex=False))
    blocks = ["WEBVTT", ""]
    for n, (start, end, group) in enumerate(cues, 1):
        blocks += [str(n), f"{_vtt_time(start)} --> {_vtt_time(end)}",
                   *(f"<v {html.escape(p.speaker)}>{html.escape(p.text, quote=False)}" for p in group), ""]
    write_text_atomic(vtt_path, "\n".join(blocks))


def _cues(placements: list[Placement]) -> list[tuple[float, float, list[Placement]]]:
    """(start, end, lines) per cue: lines that start at the same moment together, each cue ending where the
    audio ends or the next cue starts, whichever comes first."""
    groups: list[list[Placement]] = []
    for p in sorted(placements, key=lambda p: (p.start, p.index)):
        if groups and abs(groups[-1][0].start - p.start) < 1e-3:
            groups[-1].append(p)
        else:
            groups.append([p])
    cues = []
    for k, group in enumerate(groups):
        start = group[0].start
        end = max(p.start + p.seconds for p in group)
        if k + 1 < len(groups):
            end = min(end, groups[k + 1][0].start)
        cues.append((start, end, group))
    return cues


def _vtt_time(seconds: float) -> str:
    ms = int(round(seconds * 1000))
    return f"{ms // 3_600_000:02d}:{ms // 60_000 % 60:02d}:{ms // 1000 % 60:02d}.{ms % 1000:03d}"


def check_formats(formats: tuple[str, ...]) -> None:
    """Refuse timeline formats omnidub cannot write."""
    unknown = sorted(set(formats) - set(TIMELINE_FORMATS))
    if unknown:
        raise OmnidubError(f"unknown timeline format {', '.join(unknown)}; choose from {', '.join(TIMELINE_FORMATS)}")


def write_timelines(
    placements: list[Placement], base: Path, fps: float, formats: tuple[str, ...] = ("otio",), *, name: str = "", video: Path | None = None, video_seconds: float | None = None
) -> list[Path]:
    """Write ``base``.otio / .xml (FCP 7) / .<speaker>.edl: one audio track per speaker, each line a clip of its
    segment file at its start; the source video on a video track when given. Returns the files written."""
    import opentimelineio as otio

    check_formats(formats)
    tracks = _speaker_tracks(placements, fps)
    picture = _video_track(video, video_seconds, fps)
    written = []
    if "otio" in formats or "fcpxml" in formats:
        timeline = _timeline(name, fps, ([picture] if picture else []) + [t for _, t in tracks])
        if "otio" in formats:
            written.append(_write(timeline, base.with_name(base.name + ".otio"), "otio_json"))
        if "fcpxml" in formats:
            written.append(_write(timeline, base.with_name(base.name + ".xml"), "fcp_xml"))
    if "edl" in formats:
        # A CMX 3600 list holds one track: one file per speaker track. The adapter insists on a video track
        # beside the one it writes.
        for (label, track), file in zip(tracks, edl_names(base.name, [label for label, _ in tracks])):
            video_track = _video_track(video, video_seconds, fps) or otio.schema.Track(name="picture", kind=otio.schema.TrackKind.Video)
            timeline = _timeline(f"{name} {label}".strip(), fps, [track.clone(), video_track])
            written.append(_write(timeline, base.with_name(file), "cmx_3600"))
    return written


def _timeline(name: str, fps: float, tracks: list):
    import opentimelineio as otio

    timeline = otio.schema.Timeline(name=name)
    timeline.global_start_time = otio.opentime.RationalTime(0, fps)
    for track in tracks:
        timeline.tracks.append(track.clone() if track.parent() is not None else track)
    return timeline


def _write(timeline, path: Path, adapter: str) -> Path:
    import opentimelineio as otio

    from omnidub.files import atomic_path

    with atomic_path(path) as temp:
        temp.write_text(otio.adapters.write_to_string(timeline, adapter_name=adapter), encoding="utf-8")
    return path


def speaker_lanes(placements: list[Placement]) -> list[tuple[str, list[Placement]]]:
    """(label, lines) per track: one per speaker in order of first appearance, and a second lane (labelled
    "NAME (2)") for a speaker whose lines overlap."""
    lanes: dict[str, list[list]] = {}
    for p in sorted(placements, key=lambda p: (p.start, p.index)):
        speaker_lanes = lanes.setdefault(p.speaker, [])
        lane = next((lane for lane in speaker_lanes if lane[0] <= p.start + 1e-9), None)
        if lane is None:
            label = p.speaker if not speaker_lanes else f"{p.speaker} ({len(speaker_lanes) + 1})"
            lane = [0.0, label, []]
            speaker_lanes.append(lane)
        lane[2].append(p)
        lane[0] = max(lane[0], p.start) + p.seconds
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


def _speaker_tracks(placements: list[Placement], fps: float) -> list[tuple[str, object]]:
    """(label, track) per lane of :func:`speaker_lanes`, each line a clip of its segment at its start."""
    import opentimelineio as otio
    from opentimelineio.opentime import RationalTime, TimeRange

    def span(seconds: float):
        return RationalTime(seconds * fps, fps)

    tracks = []
    for label, lines in speaker_lanes(placements):
        track, cursor = otio.schema.Track(name=label, kind=otio.schema.TrackKind.Audio), 0.0
        for p in lines:
            if p.start > cursor:
                track.append(otio.schema.Gap(source_range=TimeRange(span(0), span(p.start - cursor))))
            reference = otio.schema.ExternalReference(target_url=Path(p.path).resolve().as_uri(),
                                                      available_range=TimeRange(span(0), span(p.seconds)))
            clip = otio.schema.Clip(name=Path(p.path).stem, media_reference=reference,
                                    source_range=TimeRange(span(0), span(p.seconds)))
            clip.metadata["omnidub"] = {"index": p.index, "speaker": p.speaker, "text": p.text, "start": p.start}
            track.append(clip)
            cursor = max(cursor, p.start) + p.seconds
        tracks.append((label, track))
    return tracks


def _video_track(video: Path | None, seconds: float | None, fps: float):
    if video is None or not seconds:
        return None
    import opentimelineio as otio
    from opentimelineio.opentime import RationalTime, TimeRange

    length = TimeRange(RationalTime(0, fps), RationalTime(seconds * fps, fps))
    reference = otio.schema.ExternalReference(target_url=Path(video).resolve().as_uri(), available_range=length)
    track = otio.schema.Track(name="picture", kind=otio.schema.TrackKind.Video)
    track.append(otio.schema.Clip(name=Path(video).stem, media_reference=reference, source_range=length))
    return track
