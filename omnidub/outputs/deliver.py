"""Everything a render hands over once its lines exist, in one call: stems and mixes, the bed mix, the dubbed
video, subtitles and timelines."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from omnidub.errors import OmnidubError
from omnidub.outputs.mix import FORMATS, Bed, Mastered, Placement, assemble
from omnidub.outputs.video import Media
from omnidub.script import line_ranges

DEFAULT_FPS = 25.0  # timecodes and timelines without a video or --fps


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
class Delivered:
    """What was written, and how it measures."""

    seconds: float
    fps: float
    mix: Mastered
    bed_mix: Mastered | None
    video: Path | None
    video_seconds: float | None
    subtitles: tuple[Path, ...]
    timelines: tuple[Path, ...]
    past_video: tuple[int, ...]  # indices of lines that end after the video
    notes: tuple[str, ...] = ()  # what the user should hear about: a mix held under its loudness target

    def files(self, out_dir: Path) -> dict:
        """Paths relative to ``out_dir`` for the manifest."""

        def rel(path: Path | None) -> str | None:
            return None if path is None else Path(path).relative_to(out_dir).as_posix()

        return {
            "bed_mix": rel(self.bed_mix.path if self.bed_mix else None),
            "video": rel(self.video),
            "subtitles": [rel(p) for p in self.subtitles],
            "timelines": [rel(p) for p in self.timelines],
        }

    def loudness(self) -> dict:
        return {"mix": self.mix.as_dict(), "bed_mix": self.bed_mix.as_dict() if self.bed_mix else None}


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
        return (f"the programme runs {last:.2f} s but the picture of {self.video.path} ends at {self.video.seconds:.2f} s: "
                f"line(s) {line_ranges(late)} would play over no picture (flagged past-video), and the dubbed video's "
                "sound runs on past its picture")


def check(options: DeliveryOptions) -> Probed:
    """Refuse bad delivery options and unusable inputs before any model loads; returns what the probes learnt.

    Every input is opened now (the bed must hold a readable audio track, the video a picture), the timeline
    adapters are loaded, and a frame rate the timeline formats cannot express is refused, so nothing fails after
    hours of rendering."""
    from omnidub.outputs.timeline import check_formats, check_timecode_rate
    from omnidub.outputs.video import dubbed_path

    if options.fmt not in FORMATS:
        raise OmnidubError(f"unknown format {options.fmt}; choose from {', '.join(FORMATS)}")
    if not 8000 <= options.sample_rate <= 192000:
        raise OmnidubError(f"--sample-rate {options.sample_rate} is outside 8000..192000")
    if options.loudness is not None and not -70 < options.loudness < 0:
        raise OmnidubError(f"--loudness {options.loudness} LUFS is not a usable target (e.g. -23, -16, or off)")
    if options.true_peak > 0:
        raise OmnidubError(f"--true-peak {options.true_peak} dBTP is above full scale; use 0 or less (e.g. -1)")
    if options.fps is not None and options.fps <= 0:
        raise OmnidubError("--fps must be positive")
    check_formats(options.timelines)
    for label, path in (("--bed", options.bed), ("--video", options.video)):
        if path is not None and not Path(path).is_file():
            raise OmnidubError(f"{label} {path}: {'a folder, not a file' if Path(path).is_dir() else 'no such file'}")
    if options.video is not None:
        try:
            dubbed_path(Path("."), options.video)  # an unsupported container is refused now, not after the render
        except OmnidubError as exc:
            raise OmnidubError(f"--video {options.video}: {exc}") from None
    bed = _probe_bed(options.bed) if options.bed is not None else None
    video, notes = _probe_video(options) if options.video is not None else (None, [])
    fps = options.fps or (float(video.fps) if video else DEFAULT_FPS)
    check_timecode_rate(options.timelines, fps, "--fps" if options.fps else f"the video {options.video}" if video else None)
    return Probed(video, bed, fps, tuple(notes))


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
        notes.append(f"{options.video}: the header says {media.declared:.2f} s but the picture ends at "
                     f"{media.seconds:.2f} s (a truncated file?); omnidub uses {media.seconds:.2f} s")
    return media, notes


def _opened(label: str, path: Path, probe) -> Media:
    try:
        return probe(path)
    except OmnidubError as exc:
        cause = str(exc).split(": ", 1)[-1]
        raise OmnidubError(f"{label} {path}: not an audio or video file omnidub can read ({cause})") from None


def deliver(
    placements: list[Placement], out_dir: Path, stems: dict[str, Path], mix: Path, seconds: float, options: DeliveryOptions,
    name: str, probed: Probed | None = None,
) -> Delivered:
    """Write stems, the mix (and the mix over the bed), the dubbed video, ``<name>.dub.srt/.vtt`` and timelines.

    The programme lasts ``seconds``, or longer to cover every line and the video (or without one, the bed).
    ``probed`` is what :func:`check` returned before the render (probed again when not given)."""
    from omnidub.outputs.timeline import write_subtitles, write_timelines
    from omnidub.outputs.video import dubbed_path, mux

    out_dir = Path(out_dir)
    probed = probed or check(options)
    video, bed = probed.video, probed.bed
    ends = [p.start + p.seconds for p in placements]
    length = max([seconds, video.seconds if video else bed.seconds if bed else 0.0, *ends])

    bed_mix = out_dir / f"mix-bed.{options.fmt}" if bed else None
    dub, over_bed = assemble(
        placements, stems, mix, length, sample_rate=options.sample_rate, fmt=options.fmt, loudness=options.loudness,
        true_peak=options.true_peak, bed=Bed(options.bed, duck=options.duck) if bed else None, bed_mix=bed_mix,
    )
    subtitles = (out_dir / f"{name}.dub.srt", out_dir / f"{name}.dub.vtt")
    write_subtitles(placements, *subtitles, speakers=options.subtitle_speakers)
    timelines = write_timelines(
        placements, out_dir / f"{name}.dub", probed.fps, options.timelines, name=name,
        video=options.video, video_seconds=video.seconds if video else None,
    )
    dubbed = None
    if video is not None:
        dubbed = dubbed_path(out_dir, options.video)
        # The video gets the mix over the bed when there is one: that is the programme's sound.
        mux(options.video, (over_bed or dub).path, dubbed, language=options.language, keep_original=options.keep_original)
    past = tuple(p.index for p in placements if video is not None and p.start + p.seconds > video.seconds + 1e-3)
    notes = tuple(m.note for m in (dub, over_bed) if m is not None and m.note)
    return Delivered(length, probed.fps, dub, over_bed, dubbed, video.seconds if video else None, subtitles,
                     tuple(timelines), past, notes)
