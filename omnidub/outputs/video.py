"""The dubbed video: the source's video stream copied as it is, the dub as the default audio track (PyAV)."""

from __future__ import annotations

import heapq
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import numpy as np
import soundfile as sf

from omnidub.errors import OmnidubError
from omnidub.files import atomic_path

# Output container per source suffix, and the audio codec the dub is encoded with there.
CONTAINERS = {
    ".mp4": ("mp4", "aac"),
    ".m4v": ("mp4", "aac"),
    ".mov": ("mov", "aac"),
    ".mkv": ("matroska", "aac"),
    ".webm": ("webm", "libopus"),
}
AUDIO_BITRATE = 96_000  # per channel


@dataclass(frozen=True)
class Media:
    """What a source file holds: its length (s), the video's frame rate (None without video), audio tracks.

    ``seconds`` is where the picture really ends (the end of its last packet), else the sound: a truncated file
    keeps the duration its header promised, which is ``declared``."""

    path: Path
    seconds: float
    fps: Fraction | None
    audio_tracks: int
    declared: float | None = None

    @property
    def truncated(self) -> bool:
        """The header promises noticeably more than the file holds."""
        return self.declared is not None and self.declared - self.seconds > TRUNCATED_SECONDS


TRUNCATED_SECONDS = 0.5  # a header that promises this much more than the last packet holds
_SEEK_BACK = 30.0  # seconds before the header's end where the search for the last packet starts


def probe(path: Path, *, sound: bool = False) -> Media:
    """Open a media file and read its real length (the last packet of its picture, or with ``sound`` or without a
    picture, of its first audio track), frame rate and audio track count."""
    import av

    try:
        with av.open(str(path)) as container:
            video = container.streams.video[0] if container.streams.video else None
            audio = container.streams.audio[0] if container.streams.audio else None
            lengths = [
                float(s.duration * s.time_base) for s in container.streams if s.duration is not None and s.time_base
            ]
            if not lengths and container.duration is not None:
                lengths = [container.duration / 1_000_000]
            declared = max(lengths) if lengths else None
            main = audio if sound else video or audio
            end = _last_packet_end(container, main, declared) if main is not None else None
            fps = (video.average_rate or video.guessed_rate) if video is not None else None
            seconds = end if end is not None else (declared or 0.0)
            return Media(Path(path), seconds, Fraction(fps) if fps else None, len(container.streams.audio), declared)
    except (av.FFmpegError, OSError) as exc:
        raise OmnidubError(f"cannot read {path}: {exc.strerror or exc}") from exc


def _last_packet_end(container, stream, declared: float | None) -> float | None:
    """Where ``stream``'s last packet ends, in seconds (None: it has no packet). The search starts a little
    before the header's end (one seek, a few hundred packets), and from the start when nothing is found there."""
    import av

    starts = [max(0.0, declared - _SEEK_BACK)] if declared else []
    for start in starts + [0.0]:
        end = None
        try:
            container.seek(int(start / stream.time_base), stream=stream, backward=True)
            for packet in container.demux(stream):
                if packet.pts is not None:
                    here = float((packet.pts + (packet.duration or 0)) * packet.time_base)
                    end = here if end is None else max(end, here)
        except av.FFmpegError:
            pass  # a torn last packet: what was read so far is the end
        if end is not None:
            return end
    return None


def dubbed_path(out_dir: Path, video: Path) -> Path:
    """``<out>/<video stem>.dub.<video suffix>``."""
    suffix = video.suffix.lower()
    if suffix not in CONTAINERS:
        raise OmnidubError(
            f"cannot write a dubbed {video.suffix or 'file'} video; use one of {', '.join(sorted(CONTAINERS))}"
        )
    return Path(out_dir) / f"{video.stem}.dub{suffix}"


def mux(video: Path, audio: Path, out: Path, *, language: str | None = None, keep_original: bool = False) -> None:
    """Write ``out``: ``video``'s video stream copied without re-encoding, ``audio`` encoded as the default audio
    track (tagged ``language``), and with ``keep_original`` the source's first audio track copied after it."""
    import av

    container_format, codec = CONTAINERS[Path(out).suffix.lower()]
    try:
        source = av.open(str(video))
    except (av.FFmpegError, OSError) as exc:
        raise OmnidubError(f"cannot read {video}: {exc}") from exc
    with source, atomic_path(out) as temp, av.open(str(temp), "w", format=container_format) as target:
        if not source.streams.video:
            raise OmnidubError(f"{video} has no video stream")
        copied = [source.streams.video[0]]
        streams = {copied[0].index: target.add_stream_from_template(copied[0])}
        streams[copied[0].index].disposition = av.stream.Disposition.default
        info = sf.info(str(audio))
        layout = "stereo" if info.channels == 2 else "mono"
        dub = target.add_stream(codec, rate=info.samplerate, layout=layout)
        dub.bit_rate = AUDIO_BITRATE * info.channels
        dub.metadata["language"] = _language_tag(language, container_format)
        dub.disposition = av.stream.Disposition.default | av.stream.Disposition.dub
        if keep_original and source.streams.audio:
            original = source.streams.audio[0]
            copied.append(original)
            streams[original.index] = target.add_stream_from_template(original)
            streams[original.index].disposition = av.stream.Disposition.original
        for packet in heapq.merge(_copied(source, copied, streams), _encoded(audio, dub), key=lambda item: item[0]):
            target.mux(packet[1])


def _copied(source, copied, streams):
    """(seconds, packet) for every packet of the copied streams, retargeted to the output streams, each with a
    decoding time (:func:`_timed`)."""
    timed = {stream.index: _timed(stream) for stream in copied}
    for stream in timed.values():
        next(stream)
    for packet in source.demux(*copied):
        if packet.size == 0 and packet.pts is None and packet.dts is None:  # the end-of-stream marker, not data
            continue
        for ready in timed[packet.stream.index].send(packet):
            ready.stream = streams[ready.stream.index]
            yield float(ready.dts * ready.time_base), ready
    for stream in timed.values():
        for ready in stream.send(None):
            ready.stream = streams[ready.stream.index]
            yield float(ready.dts * ready.time_base), ready


def _timed(stream):
    """A coroutine that takes one stream's packets (None at the end) and gives back those it can, in order, each
    with a decoding time. Matroska stores presentation times only, so with B-frames the demuxer leaves the first
    packets (the opening keyframe among them) without one: they get the times a frame apart before the first
    packet that has one, as FFmpeg starts such a stream; one without a time later gets one evenly between its
    neighbours'. A packet is never decoded after it is shown."""
    step = _frame_ticks(stream)
    waiting: list = []
    last = None  # the decoding time of the last packet given back
    ready: list = []
    while True:
        packet = yield ready
        if packet is not None and packet.dts is None:
            waiting.append(packet)
            ready = []
            continue
        until = packet.dts if packet is not None else None
        for k, held in enumerate(waiting, 1):
            if last is None:
                dts = (until or 0) - (len(waiting) - k + 1) * step
            elif until is None:
                dts = last + k * step
            else:
                dts = last + (until - last) * k // (len(waiting) + 1)
            held.dts = dts if held.pts is None else min(dts, held.pts)
            held.pts = held.dts if held.pts is None else held.pts
        ready, waiting = waiting + ([packet] if packet is not None else []), []
        last = ready[-1].dts if ready else last


def _frame_ticks(stream) -> int:
    """One frame of a video stream in its time base (one tick for a stream without a frame rate)."""
    rate = getattr(stream, "average_rate", None) or getattr(stream, "guessed_rate", None)
    if rate and stream.time_base:
        return max(1, round(1 / (rate * stream.time_base)))
    return 1


def _encoded(audio: Path, stream):
    """(seconds, packet) for the audio file encoded block by block."""
    import av

    with sf.SoundFile(str(audio)) as source:
        position = 0
        layout = "stereo" if source.channels == 2 else "mono"
        for block in source.blocks(blocksize=source.samplerate, dtype="float32", always_2d=True):
            frame = av.AudioFrame.from_ndarray(np.ascontiguousarray(block.T), format="fltp", layout=layout)
            frame.sample_rate, frame.pts = source.samplerate, position
            position += len(block)
            for packet in stream.encode(frame):
                yield float(packet.pts * packet.time_base), packet
    for packet in stream.encode(None):
        yield float(packet.pts * packet.time_base), packet


def _language_tag(language: str | None, container_format: str) -> str:
    """The ISO 639-2 code the container expects ("und" when unknown): bibliographic for Matroska, else terminologic."""
    if not language:
        return "und"
    import langcodes

    try:
        return langcodes.Language.get(langcodes.standardize_tag(language)).to_alpha3(
            variant="B" if container_format in ("matroska", "webm") else "T"
        )
    except (LookupError, ValueError):
        return "und"
