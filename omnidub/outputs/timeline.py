"""What an editor opens: subtitles at the times the lines were rendered, timelines, SMPTE timecodes."""

from __future__ import annotations

import html
from datetime import timedelta
from pathlib import Path

from omnidub.files import write_text_atomic
from omnidub.outputs.mix import Placement

TIMELINE_FORMATS = ("otio", "edl", "fcpxml")


def timecode(seconds: float, fps: float) -> str:
    """HH:MM:SS:FF at ``fps`` (drop-frame ``;`` at 29.97 and 59.94)."""
    from opentimelineio.opentime import RationalTime, to_timecode

    return to_timecode(RationalTime.from_seconds(max(0.0, seconds), fps).round(), fps)


def write_subtitles(placements: list[Placement], srt_path: Path, vtt_path: Path) -> None:
    """Write the lines as SRT and WebVTT cues, each from its start for as long as it was rendered."""
    import srt

    cues = sorted(placements, key=lambda p: (p.start, p.index))
    subtitles = [
        srt.Subtitle(index=n, start=timedelta(seconds=p.start), end=timedelta(seconds=p.start + p.seconds), content=p.text)
        for n, p in enumerate(cues, 1)
    ]
    write_text_atomic(srt_path, srt.compose(subtitles, reindex=False))
    blocks = ["WEBVTT", ""]
    for n, p in enumerate(cues, 1):
        blocks += [str(n), f"{_vtt_time(p.start)} --> {_vtt_time(p.start + p.seconds)}", f"<v {html.escape(p.speaker)}>{html.escape(p.text, quote=False)}", ""]
    write_text_atomic(vtt_path, "\n".join(blocks))


def _vtt_time(seconds: float) -> str:
    ms = int(round(seconds * 1000))
    return f"{ms // 3_600_000:02d}:{ms // 60_000 % 60:02d}:{ms // 1000 % 60:02d}.{ms % 1000:03d}"


def check_formats(formats: tuple[str, ...]) -> None:
    """Refuse timeline formats omnidub cannot write."""
    unknown = sorted(set(formats) - set(TIMELINE_FORMATS))
    if unknown:
        from omnidub.errors import OmnidubError

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
        for label, track in tracks:
            file_label = "".join(c if c.isalnum() or c in "-_" else "_" for c in label)
            video_track = _video_track(video, video_seconds, fps) or otio.schema.Track(name="picture", kind=otio.schema.TrackKind.Video)
            timeline = _timeline(f"{name} {label}".strip(), fps, [track.clone(), video_track])
            written.append(_write(timeline, base.with_name(f"{base.name}.{file_label}.edl"), "cmx_3600"))
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


def _speaker_tracks(placements: list[Placement], fps: float) -> list[tuple[str, object]]:
    """(label, track) per speaker, in order of first appearance; a speaker whose lines overlap gets a second lane."""
    import opentimelineio as otio
    from opentimelineio.opentime import RationalTime, TimeRange

    def span(seconds: float):
        return RationalTime(seconds * fps, fps)

    lanes: dict[str, list[list]] = {}
    for p in sorted(placements, key=lambda p: (p.start, p.index)):
        speaker_lanes = lanes.setdefault(p.speaker, [])
        lane = next((lane for lane in speaker_lanes if lane[0] <= p.start + 1e-9), None)
        if lane is None:
            track = otio.schema.Track(name=p.speaker if not speaker_lanes else f"{p.speaker} ({len(speaker_lanes) + 1})", kind=otio.schema.TrackKind.Audio)
            lane = [0.0, track]
            speaker_lanes.append(lane)
        cursor, track = lane
        if p.start > cursor:
            track.append(otio.schema.Gap(source_range=TimeRange(span(0), span(p.start - cursor))))
        reference = otio.schema.ExternalReference(target_url=Path(p.path).resolve().as_uri(), available_range=TimeRange(span(0), span(p.seconds)))
        clip = otio.schema.Clip(name=Path(p.path).stem, media_reference=reference, source_range=TimeRange(span(0), span(p.seconds)))
        clip.metadata["omnidub"] = {"index": p.index, "speaker": p.speaker, "text": p.text, "start": p.start}
        track.append(clip)
        lane[0] = max(cursor, p.start) + p.seconds
    return [(lane[1].name, lane[1]) for speaker_lanes in lanes.values() for lane in speaker_lanes]


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
