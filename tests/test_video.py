"""The dubbed video keeps every packet of every copied stream, B-frames and open GOPs included (PyAV, fast)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
from conftest import make_video

# H.264 with two B-frames and open GOPs (a keyframe every second whose leading B-frames reference the GOP before);
# WebM cannot hold H.264: VP9 with hidden alternate reference frames, its reordering.
X264 = {"bf": "2", "g": "25", "x264-params": "open-gop=1:keyint=25:min-keyint=25:scenecut=0"}
VP9 = {"g": "25", "auto-alt-ref": "1", "lag-in-frames": "16", "deadline": "realtime", "cpu-used": "8"}
SOURCES = {
    ".mkv": ("libx264", X264, "aac", 44100),
    ".mp4": ("libx264", X264, "aac", 44100),
    ".mov": ("libx264", X264, "aac", 44100),
    ".webm": ("libvpx-vp9", VP9, "libopus", 48000),
}


def _packets(path: Path, kind: str) -> list[tuple[bytes, float | None]]:
    """Every data packet of the file's first stream of ``kind``: its bytes and presentation time (s)."""
    import av

    with av.open(str(path)) as container:
        stream = getattr(container.streams, kind)[0]
        return [
            (bytes(p), None if p.pts is None else float(p.pts * p.time_base)) for p in container.demux(stream) if p.size
        ]


def _pictures(path: Path) -> list[float]:
    """The presentation time of every frame the file's picture decodes to."""
    import av

    with av.open(str(path)) as container:
        return [float(frame.pts * frame.time_base) for frame in container.decode(video=0)]


@pytest.mark.parametrize("suffix", sorted(SOURCES))
def test_every_packet_of_a_reordered_picture_is_copied_and_every_frame_decodes(tmp_path, suffix):
    import av

    from omnidub.outputs.video import dubbed_path, mux

    codec, options, audio, rate = SOURCES[suffix]
    source = tmp_path / f"film{suffix}"
    make_video(source, 5.0, rate=rate, codec=codec, options=options, audio=audio)
    if suffix == ".mkv":  # the case that lost frames: Matroska leaves the opening keyframe without a decoding time
        with av.open(str(source)) as container:
            untimed = [p for p in container.demux(container.streams.video[0]) if p.size and p.dts is None]
        assert untimed and untimed[0].is_keyframe
    sf.write(tmp_path / "mix.wav", np.zeros((5 * 48000, 2), np.float32), 48000)
    out = dubbed_path(tmp_path, source)
    mux(source, tmp_path / "mix.wav", out, keep_original=True)

    picture = _packets(source, "video")
    assert len(picture) == 125
    assert _packets(out, "video") == picture  # every packet, byte for byte, at its own time
    frames = _pictures(source)
    assert len(frames) == 125 and _pictures(out) == frames
    assert frames[0] == 0.0  # the picture starts at once
    with av.open(str(out)) as dubbed:  # the dub first, then the source's own track, copied whole
        assert len(dubbed.streams.audio) == 2
        assert dubbed.streams.audio[0].disposition & av.stream.Disposition.default
    original = _packets(source, "audio")
    with av.open(str(out)) as dubbed:
        copied = [(bytes(p), float(p.pts * p.time_base)) for p in dubbed.demux(dubbed.streams.audio[1]) if p.size]
    assert [data for data, _ in copied] == [data for data, _ in original]
    assert [t for _, t in copied] == pytest.approx([t for _, t in original], abs=1e-3)
