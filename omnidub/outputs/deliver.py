"""How a render is delivered (rate, loudness, bed, video, timecodes, timelines), and the check of all of it that
runs before any model loads."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from omnidub.errors import OmnidubError
from omnidub.files import did_you_mean
from omnidub.outputs.mix import FORMATS
from omnidub.outputs.video import Media
from omnidub.script import line_ranges

DEFAULT_FPS = 25.0  # timecodes and timelines without a video or --fps
FPS_RANGE = (1.0, 1000.0)  # under a frame a second a timecode counts nothing; past 1000 no picture runs
TRUE_PEAK_FLOOR = -30.0  # dBTP: a ceiling under this holds any mix far under every loudness target
DUCK_MAX = 60.0  # dB: the bed is inaudible well before this
# The rates an MP3 (MPEG-1/2/2.5 layer III) can hold.
MP3_RATES = (8000, 11025, 12000, 16000, 22050, 24000, 32000, 44100, 48000)


@dataclass(frozen=True)
class DeliveryOptions:
    """How the programme is delivered (the render flags of the same names)."""

    sample_rate: int = 48000
    loudness: float | None = -23.0  # LUFS; None: keep the level
    true_peak: float = -1.0  # dBTP
    bed: Path | None = None
    duck: float = 12.0  # dB
    video: Path | None = None
    keep_original: bool = False
    fps: float | None = None
    timelines: tuple[str, ...] = ("otio",)
    language: str | None = None  # the dub's audio track tag
    fmt: str = "wav"
    subtitle_speakers: bool = False  # "NAME: text" in the dubbed .srt (the .vtt always names them with <v>)


@dataclass(frozen=True)
class Probed:
    """What the delivery's inputs hold, learnt before any line renders: the video and bed as probed, the frame
    rate timecodes and timelines use, and what is worth saying about them."""

    video: Media | None
    bed: Media | None
    fps: float
    notes: tuple[str, ...] = ()

    def late_lines(self, ends) -> str | None:
        """A note when lines would play past the picture, from the plan's ``(index, end seconds)`` pairs (None when
        none would, or without a video): said before rendering, so a too-short video is found at once."""
        if self.video is None:
            return None
        late = [index for index, end in ends if end > self.video.seconds + 1e-3]
        if not late:
            return None
        last = max(end for _, end in ends)
        return (
            f"the programme runs {last:.2f} s but the picture of {self.video.path} ends at {self.video.seconds:.2f} s: "
            f"line(s) {line_ranges(late)} would play over no picture (flagged past-video), and the dubbed video's "
            "sound runs on past its picture"
        )


def check(options: DeliveryOptions) -> Probed:
    """Refuse bad delivery options and unusable inputs before any model loads; returns what the probes learnt.

    Every input is opened now (the bed must hold a readable audio track, the video a picture), the timeline
    adapters are loaded, and a frame rate the timeline formats cannot express is refused, so nothing fails after
    hours of rendering."""
    from omnidub.outputs.timeline import check_formats, check_timecode_rate
    from omnidub.outputs.video import dubbed_path

    if options.fmt not in FORMATS:
        raise OmnidubError(f"unknown format {options.fmt}; choose from {', '.join(FORMATS)}")
    for label, value in (
        ("--loudness", options.loudness),
        ("--true-peak", options.true_peak),
        ("--duck", options.duck),
        ("--fps", options.fps),
    ):
        if value is not None and (
            isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value)
        ):
            raise OmnidubError(f"{label} {value} is not a finite number")
    if not 8000 <= options.sample_rate <= 192000:
        raise OmnidubError(f"--sample-rate {options.sample_rate} is outside 8000..192000")
    if options.fmt == "mp3" and options.sample_rate not in MP3_RATES:
        raise OmnidubError(
            f"--sample-rate {options.sample_rate} with --format mp3: MP3 holds only "
            f"{', '.join(map(str, MP3_RATES))} Hz; choose one of those, or --format wav or flac"
        )
    if options.loudness is not None and not -70 < options.loudness < 0:
        raise OmnidubError(f"--loudness {options.loudness} LUFS is not a usable target (e.g. -23, -16, or off)")
    if options.true_peak > 0:
        raise OmnidubError(f"--true-peak {options.true_peak} dBTP is above full scale; use 0 or less (e.g. -1)")
    if options.true_peak < TRUE_PEAK_FLOOR:
        raise OmnidubError(
            f"--true-peak {options.true_peak} dBTP would hold the mix near silence; a ceiling runs "
            f"from {TRUE_PEAK_FLOOR:g} to 0 dBTP (e.g. -1)"
        )
    if not 0 <= options.duck <= DUCK_MAX:
        raise OmnidubError(
            f"--duck {options.duck} dB: the bed drops by 0 to {DUCK_MAX:g} dB while a line plays (e.g. 12)"
        )
    if options.fps is not None:
        _check_fps(options.fps, "--fps")
    check_formats(options.timelines)
    for label, path in (("--bed", options.bed), ("--video", options.video)):
        if path is not None and not Path(path).is_file():
            missing = "no such file" + did_you_mean(path)
            raise OmnidubError(f"{label} {path}: {'a folder, not a file' if Path(path).is_dir() else missing}")
    if options.video is not None:
        try:
            dubbed_path(Path("."), options.video)  # an unsupported container is refused now, not after the render
        except OmnidubError as exc:
            raise OmnidubError(f"--video {options.video}: {exc}") from None
    bed = _probe_bed(options.bed) if options.bed is not None else None
    video, notes = _probe_video(options) if options.video is not None else (None, [])
    fps = options.fps or (float(video.fps) if video else DEFAULT_FPS)
    if options.fps is None and video is not None:
        _check_fps(fps, f"the video {options.video}", "; pass --fps with the rate of your editor's project")
    check_timecode_rate(
        options.timelines, fps, "--fps" if options.fps else f"the video {options.video}" if video else None
    )
    return Probed(video, bed, fps, tuple(notes))


def _check_fps(fps: float, source: str, fix: str = "") -> None:
    low, high = FPS_RANGE
    if not low <= fps <= high:
        given = f"{source} {fps:g}" if source.startswith("--") else f"{source} runs at {fps:g} fps"
        raise OmnidubError(
            f"{given}: timecodes and timelines take {low:g} to {high:g} frames a second (e.g. 25, "
            f"29.97 or 30000/1001){fix}"
        )


def _probe_bed(path: Path) -> Media:
    """The bed, with its first audio frame decoded: a file that opens but cannot be decoded is refused now."""
    from omnidub.outputs.bed import BedReader
    from omnidub.outputs.video import probe

    media = _opened("--bed", path, lambda p: probe(p, sound=True))
    if not media.audio_tracks:
        raise OmnidubError(f"--bed {path}: has no audio track")
    with BedReader(path, 8000) as reader:
        reader.read(1)
    return media


def _probe_video(options: DeliveryOptions) -> tuple[Media, list[str]]:
    from omnidub.outputs.video import probe

    media = _opened("--video", options.video, probe)
    if media.fps is None:
        raise OmnidubError(f"--video {options.video}: has no video stream (an audio file? give it as --bed)")
    if media.seconds <= 0:
        raise OmnidubError(f"--video {options.video}: its video stream holds no picture")
    if options.keep_original and not media.audio_tracks:
        raise OmnidubError(f"--keep-original: {options.video} has no audio track to keep; leave the flag out")
    notes = []
    if media.truncated:
        notes.append(
            f"{options.video}: the header says {media.declared:.2f} s but the picture ends at "
            f"{media.seconds:.2f} s (a truncated file?); omnidub uses {media.seconds:.2f} s"
        )
    return media, notes


def _opened(label: str, path: Path, probe) -> Media:
    try:
        return probe(path)
    except OmnidubError as exc:
        cause = str(exc).split(": ", 1)[-1]
        raise OmnidubError(f"{label} {path}: not an audio or video file omnidub can read ({cause})") from None


def from_source(
    options: DeliveryOptions, source: Path, out_dir: Path | None, *, separate: bool
) -> tuple[DeliveryOptions, list]:
    """The delivery of a render whose voices come from ``source``: with no video given and a picture in the source,
    the dubbed video is made from it (a new file in ``out_dir``; the source is only read). Returns the options and
    what to say about them."""
    from dataclasses import replace

    from omnidub.outputs.video import dubbed_path, probe

    notes = []
    if options.video is None:
        try:
            picture = probe(Path(source)).fps is not None
        except OmnidubError:  # an unreadable source is said by the source's own checks, later
            picture = False
        if picture:
            options = replace(options, video=Path(source))
            made = dubbed_path(out_dir, Path(source)) if out_dir is not None else dubbed_path(Path(), Path(source))
            notes.append(
                f"the dubbed video will be {made}: {Path(source).name}'s picture with the dub as its sound "
                f"({Path(source).name} itself is only read; --video FILE picks another picture)"
            )
    if options.video is not None and options.bed is None and not options.keep_original and not separate:
        notes.append(
            "the dubbed video carries the dialogue only: --bed FILE mixes music and effects under it, "
            "--separate MODEL takes them from the source, --keep-original adds the original audio as a second track"
        )
    return options, notes
