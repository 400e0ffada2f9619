"""Everything a render hands over once its lines exist, in one call: stems and mixes, the bed mix, the dubbed
video, subtitles and timelines."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from omnidub.errors import OmnidubError
from omnidub.outputs.mix import FORMATS, Bed, Mastered, Placement, assemble

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


def check(options: DeliveryOptions) -> None:
    """Refuse bad delivery options before any model loads."""
    from omnidub.outputs.timeline import check_formats
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
            raise OmnidubError(f"{label} {path}: no such file")
    if options.video is not None:
        dubbed_path(Path("."), options.video)  # an unsupported container is refused now, not after the render


def deliver(
    placements: list[Placement], out_dir: Path, stems: dict[str, Path], mix: Path, seconds: float, options: DeliveryOptions, name: str
) -> Delivered:
    """Write stems, the mix (and the mix over the bed), the dubbed video, ``<name>.dub.srt/.vtt`` and timelines.

    The programme lasts ``seconds``, or longer to cover every line and the video (or without one, the bed)."""
    from omnidub.outputs.timeline import write_subtitles, write_timelines
    from omnidub.outputs.video import dubbed_path, mux, probe

    out_dir = Path(out_dir)
    video = probe(options.video) if options.video is not None else None
    bed = probe(options.bed) if options.bed is not None else None
    if bed is not None and not bed.audio_tracks:
        raise OmnidubError(f"the bed {options.bed} has no audio track")
    if video is not None and video.fps is None:
        raise OmnidubError(f"{options.video} has no video stream")
    ends = [p.start + p.seconds for p in placements]
    length = max([seconds, video.seconds if video else bed.seconds if bed else 0.0, *ends])
    fps = options.fps or (float(video.fps) if video else DEFAULT_FPS)

    bed_mix = out_dir / f"mix-bed.{options.fmt}" if bed else None
    dub, over_bed = assemble(
        placements, stems, mix, length, sample_rate=options.sample_rate, fmt=options.fmt, loudness=options.loudness,
        true_peak=options.true_peak, bed=Bed(options.bed, duck=options.duck) if bed else None, bed_mix=bed_mix,
    )
    subtitles = (out_dir / f"{name}.dub.srt", out_dir / f"{name}.dub.vtt")
    write_subtitles(placements, *subtitles)
    timelines = write_timelines(
        placements, out_dir / f"{name}.dub", fps, options.timelines, name=name,
        video=options.video, video_seconds=video.seconds if video else None,
    )
    dubbed = None
    if video is not None:
        dubbed = dubbed_path(out_dir, options.video)
        # The video gets the mix over the bed when there is one: that is the programme's sound.
        mux(options.video, (over_bed or dub).path, dubbed, language=options.language, keep_original=options.keep_original)
    past = tuple(p.index for p in placements if video is not None and p.start + p.seconds > video.seconds + 1e-3)
    return Delivered(length, fps, dub, over_bed, dubbed, video.seconds if video else None, subtitles, tuple(timelines), past)
