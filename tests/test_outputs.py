"""Deliverables: loudness, bed ducking, the muxed video, subtitles and timelines (synthetic audio, fast)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
from conftest import make_video

from omnidub.outputs.mix import Bed, Placement, assemble

RATE = 24000  # segments stay at the model's rate


def true_peak_db(audio: np.ndarray) -> float:
    """4x oversampled peak, measured independently of omnidub's meter."""
    from scipy.signal import resample_poly

    return float(20 * np.log10(np.abs(resample_poly(audio, 4, 1, axis=0)).max()))


def lufs(audio: np.ndarray, rate: int) -> float:
    import pyloudnorm

    return float(pyloudnorm.Meter(rate).integrated_loudness(audio))


def speech_like(seconds: float, seed: int, level: float = 0.1) -> np.ndarray:
    """Band-limited noise with a syllable-rate envelope: loud enough to gate in, quiet at the edges."""
    rng = np.random.default_rng(seed)
    n = int(seconds * RATE)
    t = np.arange(n) / RATE
    envelope = 0.6 + 0.4 * np.sin(2 * np.pi * 4 * t) ** 2
    fade = np.minimum(1.0, np.minimum(t, t[::-1]) / 0.02)
    return (level * rng.standard_normal(n) * envelope * fade).astype(np.float32)


def tone(seconds: float, freq: float, rate: int, level: float) -> np.ndarray:
    t = np.arange(int(seconds * rate)) / rate
    fade = np.minimum(1.0, np.minimum(t, t[::-1]) / 0.01)
    return (level * np.sin(2 * np.pi * freq * t) * fade).astype(np.float32)


def place(folder: Path, lines: list[tuple[str, float, np.ndarray]]) -> list[Placement]:
    (folder / "segments").mkdir(parents=True, exist_ok=True)
    placements = []
    for i, (speaker, start, audio) in enumerate(lines, 1):
        path = folder / "segments" / f"{i:04d}-{speaker}.wav"
        sf.write(path, audio, RATE)
        placements.append(Placement(path, start, speaker, len(audio) / RATE, f"line {i}", i))
    return placements


def test_mix_reaches_the_target_loudness_and_stems_still_sum_to_it(tmp_path):
    lines = [
        ("Alice", 0.5, speech_like(2.0, 1)),
        ("Bob", 3.0, speech_like(2.5, 2, 0.3)),
        ("Alice", 4.5, speech_like(1.5, 3)),
    ]
    placements = place(tmp_path, lines)
    stems = {s: tmp_path / f"{s}.wav" for s in ("Alice", "Bob")}
    result, none = assemble(
        placements, stems, tmp_path / "mix.wav", 7.0, sample_rate=48000, loudness=-23.0, true_peak=-1.0
    )
    assert none is None
    mix, rate = sf.read(tmp_path / "mix.wav")
    assert rate == 48000 and len(mix) == 7 * 48000
    assert abs(lufs(mix, rate) + 23.0) <= 0.5
    assert abs(result.level.integrated + 23.0) <= 0.5 and abs(result.level.integrated - lufs(mix, rate)) < 0.05
    assert true_peak_db(mix) < -1.0 and result.level.true_peak < -1.0 and result.level.range is not None
    summed = sum(sf.read(path)[0] for path in stems.values())
    assert np.max(np.abs(summed - mix)) < 1e-4
    # Lines sit at their start times at the new rate: Bob's stem is silent before 3.0 s and speaks right after.
    bob = sf.read(stems["Bob"])[0]
    assert np.abs(bob[: int(2.99 * 48000)]).max() == 0 and np.abs(bob[int(3.0 * 48000) : int(3.05 * 48000)]).max() > 0


def test_a_peaky_mix_is_limited_under_the_ceiling_and_still_on_target(tmp_path):
    burst = speech_like(3.0, 4)
    burst[RATE : RATE + 40] *= 8.0  # a few sharp peaks far above the rest
    placements = place(tmp_path, [("Alice", 0.2, burst), ("Alice", 3.5, speech_like(2.0, 5))])
    result, _ = assemble(
        placements, {"Alice": tmp_path / "Alice.wav"}, tmp_path / "mix.wav", 6.0, loudness=-14.0, true_peak=-1.0
    )
    mix, rate = sf.read(tmp_path / "mix.wav")
    assert result.limited
    assert true_peak_db(mix) < -1.0
    assert abs(lufs(mix, rate) + 14.0) <= 0.5
    assert np.max(np.abs(sf.read(tmp_path / "Alice.wav")[0] - mix)) < 1e-4


def test_loudness_off_keeps_the_level(tmp_path):
    placements = place(tmp_path, [("Alice", 0.0, speech_like(2.0, 6, 0.05))])
    result, _ = assemble(
        placements, {"Alice": tmp_path / "Alice.wav"}, tmp_path / "mix.wav", 2.0, sample_rate=24000, loudness=None
    )
    mix, rate = sf.read(tmp_path / "mix.wav")
    assert rate == 24000 and result.gain == 0.0
    np.testing.assert_allclose(mix, sf.read(placements[0].path)[0], atol=1e-4)


def _level_at(audio: np.ndarray, rate: int, freq: float, start: float, end: float) -> float:
    """Level (dB) of one frequency in a window: what a listener hears of the bed, without the dub."""
    window = audio[int(start * rate) : int(end * rate)]
    t = np.arange(len(window)) / rate
    i, q = (window * np.sin(2 * np.pi * freq * t)).mean(), (window * np.cos(2 * np.pi * freq * t)).mean()
    return float(20 * np.log10(max(2 * np.hypot(i, q), 1e-12)))


def test_the_bed_ducks_under_the_dub_and_keeps_its_rate_and_channels(tmp_path):
    bed_path = tmp_path / "bed.wav"
    sf.write(bed_path, tone(8.0, 150.0, 44100, 0.2), 44100)  # mono 44.1 kHz: mapped to stereo 48 kHz
    lines = [("Alice", 1.0, tone(1.5, 2000.0, RATE, 0.2)), ("Bob", 5.0, tone(1.5, 2000.0, RATE, 0.2))]
    placements = place(tmp_path, lines)
    dub, over_bed = assemble(
        placements,
        {"Alice": tmp_path / "Alice.wav", "Bob": tmp_path / "Bob.wav"},
        tmp_path / "mix.wav",
        8.0,
        bed=Bed(bed_path, duck=12.0),
        bed_mix=tmp_path / "mix.bed.wav",
    )
    audio, rate = sf.read(tmp_path / "mix.bed.wav")
    assert rate == 48000 and audio.shape == (8 * 48000, 2)
    assert abs(over_bed.level.integrated + 23.0) <= 0.5 and true_peak_db(audio) < -1.0
    left = audio[:, 0]
    during = [_level_at(left, rate, 150.0, 1.3, 2.2), _level_at(left, rate, 150.0, 5.3, 6.2)]
    between = [_level_at(left, rate, 150.0, 3.0, 4.6), _level_at(left, rate, 150.0, 7.0, 7.9)]
    for d in during:
        for b in between:
            assert abs((b - d) - 12.0) <= 1.0
    # Look-ahead: the dip has started before the first word and is complete when it starts.
    assert _level_at(left, rate, 150.0, 0.88, 0.94) == pytest.approx(between[0], abs=0.5)
    assert between[0] - 11.0 < _level_at(left, rate, 150.0, 0.96, 0.98) < between[0] - 1.0
    assert _level_at(left, rate, 150.0, 1.0, 1.04) == pytest.approx(during[0], abs=0.5)
    # The dub-only mix has no bed in it.
    mix, _ = sf.read(tmp_path / "mix.wav")
    assert _level_at(mix, 48000, 150.0, 3.0, 4.6) < -80


@pytest.fixture(scope="module")
def test_video(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("video") / "clip.mp4"
    make_video(path, seconds=4.0)
    return path


def test_the_dubbed_video_copies_the_picture_and_plays_the_dub_first(tmp_path, test_video):
    import av

    from omnidub.outputs.video import dubbed_path, mux, probe

    media = probe(test_video)
    assert media.fps == 25 and abs(media.seconds - 4.0) < 0.1 and media.audio_tracks == 1
    sf.write(tmp_path / "mix.wav", np.stack([tone(media.seconds, 2000.0, 48000, 0.2)] * 2, axis=1), 48000)
    out = dubbed_path(tmp_path, test_video)
    assert out.name == "clip.dub.mp4"
    mux(test_video, tmp_path / "mix.wav", out, language="de", keep_original=True)
    with av.open(str(test_video)) as source, av.open(str(out)) as dubbed:
        src_video, video = source.streams.video[0], dubbed.streams.video[0]
        assert video.codec_context.name == src_video.codec_context.name
        assert video.frames == src_video.frames == 100
        dub, original = dubbed.streams.audio
        assert dub.codec_context.name == "aac" and dub.metadata["language"] == "deu"
        assert (
            dub.disposition & av.stream.Disposition.default and not original.disposition & av.stream.Disposition.default
        )
        assert dub.rate == 48000 and original.rate == 44100
        # The copied packets are the source's, byte for byte.
        src_packets = [bytes(p) for p in source.demux(src_video) if p.size]
        packets = [bytes(p) for p in dubbed.demux(video) if p.size]
        assert packets == src_packets
    with av.open(str(out)) as dubbed:  # the default track decodes to the dub (2 kHz), not the source's tone
        decoded = np.concatenate([f.to_ndarray()[0] for f in dubbed.decode(audio=0)])
    assert _level_at(decoded, 48000, 2000.0, 1.0, 2.0) > _level_at(decoded, 48000, 150.0, 1.0, 2.0) + 30


def test_subtitles_carry_the_rendered_times_on_the_frame_grid(tmp_path):
    import srt

    from omnidub.outputs.timeline import write_subtitles

    lines = [
        ("Alice", 0.5, speech_like(1.2, 1)),
        ("Bob", 1.0, speech_like(2.0, 2)),
        ("Alice", 1.5, speech_like(1.0, 3)),
    ]
    placements = place(tmp_path, lines)
    write_subtitles(placements, tmp_path / "dub.srt", tmp_path / "dub.vtt", 25.0)
    cues = list(srt.parse((tmp_path / "dub.srt").read_text(encoding="utf-8")))
    # At 25 fps 0.5 s and 1.5 s fall between frames 12 and 13, 37 and 38: the cues start on the later frame, and
    # each ends where its clip does (whole frames of its audio) or where the next cue starts if that comes first.
    assert [(c.start.total_seconds(), c.end.total_seconds(), c.content) for c in cues] == [
        (0.52, 1.0, "line 1"),
        (1.0, 1.52, "line 2"),
        (1.52, 2.52, "line 3"),
    ]
    vtt = (tmp_path / "dub.vtt").read_text(encoding="utf-8")
    assert vtt.startswith("WEBVTT") and "00:00:01.000 --> 00:00:01.520\n<v Bob>line 2" in vtt


def test_assembly_pads_to_the_video_muxes_the_bed_mix_and_flags_lines_past_the_end(tmp_path, test_video):
    import av

    from omnidub.assembly import Assembly
    from omnidub.folder import OutputFolder
    from omnidub.outputs.deliver import DeliveryOptions, check

    lines = [("Alice", 0.5, speech_like(1.5, 1)), ("Bob", 3.5, speech_like(1.0, 2))]  # Bob ends at 4.5 s > 4.0 s
    placements = place(tmp_path, lines)
    options = DeliveryOptions(bed=test_video, video=test_video, language="fr", timelines=("otio",))
    assembly = Assembly(OutputFolder(tmp_path), options, check(options), name="clip")
    programme = assembly.programme(placements, {"Alice": "Alice", "Bob": "Bob"}, 2.0)
    done = assembly.write(programme, "key", lambda note: None)
    assert done.past_video == (2,) and programme.fps == 25.0 and programme.seconds == pytest.approx(4.5, abs=0.01)
    delivery = done.parts["delivery"]
    assert (delivery["bed_mix"], delivery["video"], delivery["subtitles"], delivery["timelines"]) == (
        "mix-bed.wav",
        "clip.dub.mp4",
        ["clip.dub.srt", "clip.dub.vtt"],
        ["clip.dub.otio"],
    )
    assert abs(done.parts["loudness"]["bed_mix"]["integrated"] + 23.0) <= 0.5
    assert set(done.files) == {
        "stems/Alice.wav",
        "stems/Bob.wav",
        "mix.wav",
        "mix-bed.wav",
        "clip.dub.mp4",
        "clip.dub.srt",
        "clip.dub.vtt",
        "clip.dub.otio",
    }  # each with its hash, for reuse
    mix, rate = sf.read(tmp_path / "mix.wav")
    assert rate == 48000 and len(mix) == pytest.approx(4.5 * 48000, abs=48)
    with av.open(str(tmp_path / "clip.dub.mp4")) as dubbed:
        assert dubbed.streams.video[0].frames == 100 and len(dubbed.streams.audio) == 1
        assert dubbed.streams.audio[0].channels == 2 and dubbed.streams.audio[0].metadata["language"] == "fra"


def test_the_streamed_meter_agrees_with_pyloudnorm_across_silences_and_block_sizes():
    import soxr

    from omnidub.outputs.loudness import Meter

    rate = 48000
    mono = np.concatenate(
        [np.zeros(RATE), speech_like(2.0, 8, 0.2), np.zeros(3 * RATE), speech_like(1.5, 9, 0.05), np.zeros(RATE // 3)]
    )
    mono = soxr.resample(mono, RATE, rate)
    sound = np.stack([mono, 0.5 * mono], axis=1).astype(np.float32)
    for size in (1000, 48000, 4096 * 7):
        meter = Meter(rate, 2)
        for start in range(0, len(sound), size):
            meter.feed(sound[start : start + size])
        level = meter.finish().level()
        assert level.integrated == pytest.approx(lufs(sound, rate), abs=0.01)
        assert level.true_peak == pytest.approx(true_peak_db(sound), abs=0.05)


@pytest.mark.parametrize(
    "args, expected",
    [
        (["--loudness", "loud"], "--loudness takes a target in LUFS"),
        (["--fps", "fast"], "--fps takes a frame rate"),
        (["--timeline", "otio,avid"], "unknown timeline format avid"),
        (["--true-peak", "1"], "above full scale"),
        (["--video", "README.md"], "cannot write a dubbed .md video"),
        (["--bed", "missing.wav"], "--bed missing.wav: no such file"),
    ],
)
def test_bad_delivery_flags_are_one_line_errors_before_any_model_loads(args, expected, monkeypatch):
    from conftest import EXAMPLES, ROOT
    from typer.testing import CliRunner

    from omnidub.cli import app

    monkeypatch.chdir(ROOT)  # README.md is a file that is not a video
    argv = ["render", str(EXAMPLES / "dialogue.srt"), "--voices", str(EXAMPLES / "voices.toml"), "--dry-run", *args]
    result = CliRunner().invoke(app, argv)
    assert result.exit_code == 2
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and expected in lines[0], result.stderr


def test_a_truncated_video_ends_where_its_picture_does_and_lines_past_it_are_flagged(tmp_path):
    from omnidub.outputs.deliver import DeliveryOptions, check
    from omnidub.outputs.video import probe

    whole = tmp_path / "whole.mkv"
    make_video(whole, 6.0)
    data = whole.read_bytes()
    cut = tmp_path / "cut.mkv"
    cut.write_bytes(data[: int(len(data) * 0.6)])  # Matroska keeps the header's duration: 6 s
    media = probe(cut)
    assert media.declared == pytest.approx(6.0, abs=0.05) and media.truncated
    assert 2.0 < media.seconds < 5.0  # the last packet, not the header
    assert not probe(whole).truncated and probe(whole).seconds == pytest.approx(6.0, abs=0.05)

    options = DeliveryOptions(video=cut, timelines=())
    probed = check(options)
    assert probed.video.seconds == media.seconds and probed.fps == 25.0
    assert any("header says 6.0" in n and "truncated" in n for n in probed.notes)
    lines = [("Alice", 0.5, speech_like(1.0, 1)), ("Bob", media.seconds - 0.5, speech_like(1.0, 2))]
    placements = place(tmp_path, lines)
    from omnidub.assembly import Assembly
    from omnidub.folder import OutputFolder

    assembly = Assembly(OutputFolder(tmp_path), options, probed, name="cut")
    programme = assembly.programme(placements, {"Alice": "Alice", "Bob": "Bob"}, 1.0)
    done = assembly.write(programme, "key", lambda note: None)
    assert done.past_video == (2,) and programme.video_seconds == media.seconds
    # Said before rendering, from the plan's ends alone.
    note = probed.late_lines([(1, 1.5), (2, media.seconds + 0.5)])
    assert "line(s) 2 would play over no picture" in note and probed.late_lines([(1, 1.5)]) is None


def test_a_mix_held_under_its_target_by_the_true_peak_ceiling_says_by_how_much_and_why(tmp_path):
    placements = place(tmp_path, [("Alice", 0.5, speech_like(3.0, 1))])
    stems = {"Alice": tmp_path / "Alice.wav"}
    held, _ = assemble(placements, stems, tmp_path / "mix.wav", 4.0, true_peak=-50.0)
    assert held.level.integrated < -40
    assert held.note.startswith(
        f"mix.wav measures {held.level.integrated:.1f} LUFS, "
        f"{-23 - held.level.integrated:.1f} LU under the -23 LUFS target"
    )
    assert "-50 dBTP true-peak ceiling" in held.note and held.as_dict()["note"] == held.note
    fine, _ = assemble(placements, stems, tmp_path / "mix.wav", 4.0)
    assert fine.note is None and "note" not in fine.as_dict()


def test_dubbed_subtitles_never_overlap_and_can_name_the_speakers(tmp_path):
    import srt

    from omnidub.outputs.timeline import write_subtitles

    # Line 1 runs past line 2's start; lines 3 and 4 start together.
    lines = [
        ("Alice", 0.0, speech_like(2.0, 1)),
        ("Bob", 1.5, speech_like(1.0, 2)),
        ("Alice", 3.0, speech_like(1.0, 3)),
        ("Bob", 3.0, speech_like(1.5, 4)),
    ]
    placements = place(tmp_path, lines)
    write_subtitles(placements, tmp_path / "dub.srt", tmp_path / "dub.vtt", 24.0, speakers=True)
    cues = list(srt.parse((tmp_path / "dub.srt").read_text(encoding="utf-8")))
    assert all(a.end <= b.start for a, b in zip(cues, cues[1:]))
    assert [(c.start.total_seconds(), c.end.total_seconds()) for c in cues] == [(0.0, 1.5), (1.5, 2.5), (3.0, 4.5)]
    assert [c.content for c in cues] == ["Alice: line 1", "Bob: line 2", "Alice: line 3\nBob: line 4"]
    vtt = (tmp_path / "dub.vtt").read_text(encoding="utf-8")
    assert "00:00:00.000 --> 00:00:01.500\n<v Alice>line 1" in vtt and "<v Alice>line 3\n<v Bob>line 4" in vtt
    write_subtitles(placements, tmp_path / "plain.srt", tmp_path / "plain.vtt", 24.0)
    assert "Alice:" not in (tmp_path / "plain.srt").read_text(encoding="utf-8")


def test_a_rate_smpte_does_not_define_still_gets_an_otio_timeline(tmp_path):
    from omnidub.outputs.timeline import smpte_rate, write_timelines

    assert not smpte_rate(10) and smpte_rate(25) and smpte_rate(30000 / 1001)
    placements = place(tmp_path, [("Alice", 1.0, speech_like(1.0, 1))])
    [written] = write_timelines(placements, tmp_path / "dub", 10.0, ("otio",), name="dub")  # OTIO JSON takes any rate
    assert written.name == "dub.otio"
