"""omnidub render end to end on the bundled example with the tiny synthetic model."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
import soxr
from conftest import EXAMPLES
from typer.testing import CliRunner

from omnidub.cli import app
from omnidub.journal import read_entries
from omnidub.outputs.mix import Placement, assemble

runner = CliRunner()


def render(*args: str):
    return runner.invoke(app, ["render", *map(str, args)], catch_exceptions=False)


def manifest(out: Path) -> dict:
    return json.loads((out / "manifest.json").read_text())


def statuses(out: Path) -> list[str]:
    """Each line's status by index: the manifest, updated by the journal of a run in progress or killed."""
    latest = {entry.index: entry.status for entry in read_entries(out)}
    return [latest[i] for i in sorted(latest)]


def tree_bytes(out: Path) -> dict[str, bytes]:
    return {
        p.relative_to(out).as_posix(): p.read_bytes() for p in sorted(out.rglob("*.wav")) if ".omnidub" not in p.parts
    }


@pytest.fixture(scope="module")
def example_args(tiny_model_dir, whisper_tiny_en):
    return ["--voices", EXAMPLES / "voices.toml", "--model", "synthetic:tiny", "--asr-model", whisper_tiny_en]


@pytest.fixture(scope="module")
def rendered(tmp_path_factory, example_args) -> Path:
    out = tmp_path_factory.mktemp("render") / "dialogue"
    result = render(EXAMPLES / "dialogue.srt", *example_args, "--out", out)
    assert result.exit_code == 0, result.output
    return out


def test_outputs_have_program_length_and_each_line_sits_at_its_start(rendered):
    data = manifest(rendered)
    lines = data["lines"]
    assert len(lines) == 11 and set(statuses(rendered)) == {"rendered"}
    assert set(data["stems"]) == {"ALICE", "BOB"} and data["mix"] == "mix.wav"
    model_rate, rate = data["sample_rate"], data["delivery"]["sample_rate"]
    assert (model_rate, rate) == (24000, 48000)
    program = round(data["program_seconds"] * rate)
    assert data["program_seconds"] >= 41.1
    stems = {speaker: sf.read(rendered / path, dtype="float32")[0] for speaker, path in data["stems"].items()}
    mix = sf.read(rendered / "mix.wav", dtype="float32")[0]
    assert len(mix) == program and all(len(s) == program for s in stems.values())
    # Stems and mix share one gain (to -23 LUFS): the stems still sum to the mix.
    assert not data["loudness"]["mix"]["limited"] and abs(data["loudness"]["mix"]["integrated"] + 23.0) <= 0.5
    np.testing.assert_allclose(stems["ALICE"] + stems["BOB"], mix, atol=1e-4)
    gain = 10 ** (data["loudness"]["mix"]["gain"] / 20)
    for line in lines:
        segment = sf.read(rendered / line["file"], dtype="float32")[0]
        # The engine returns exactly the planned length; the planner never slows a line down.
        assert len(segment) == round(line["target"] * model_rate)
        assert line["duration"] == pytest.approx(line["target"], abs=1e-3)
        assert line["target"] <= line["natural"] + 1e-3 and line["speed"] <= 1.25 + 1e-3
        # Each line sits at its start, resampled once to the delivery rate.
        expected = soxr.resample(segment, model_rate, rate, quality="HQ") * gain
        first = round(line["start"] * rate)
        placed = stems[line["speaker"]][first : first + len(expected)]
        np.testing.assert_allclose(placed, expected, rtol=1e-3, atol=1e-5)  # the gain is recorded to 0.01 dB
    # Before the first line and in the 4 s gap the stems are silent.
    assert not np.any(stems["ALICE"][: round(0.29 * rate)])
    gap = slice(round(23.6 * rate), round(27.4 * rate))
    assert not np.any(stems["ALICE"][gap]) and not np.any(stems["BOB"][gap])


def test_the_tight_cue_is_sped_up_to_the_cap_and_marked_overflow(rendered):
    tight = manifest(rendered)["lines"][7]
    assert tight["text"].startswith("Okay, there's a small hotel")
    assert tight["speed"] == pytest.approx(1.25, abs=1e-3)
    assert "overflow" in tight["flags"]


def test_rerun_synthesizes_nothing_and_rewrites_identical_files(rendered, example_args, monkeypatch):
    before = tree_bytes(rendered)
    # A rerun with nothing changed must not even load the TTS model.
    from omnidub.backends.torch import TorchBackend

    monkeypatch.setattr(TorchBackend, "__init__", lambda *a, **k: pytest.fail("the model was loaded"))
    result = render(EXAMPLES / "dialogue.srt", *example_args, "--out", rendered)
    assert result.exit_code == 0, result.output
    assert set(statuses(rendered)) == {"cached"}
    assert tree_bytes(rendered) == before


def test_an_unchanged_rerun_keeps_its_assembly_and_a_changed_one_assembles_again(rendered, example_args, tmp_path):
    out = tmp_path / "again"
    shutil.copytree(rendered, out)
    mix = out / "mix.wav"
    stamp = mix.stat().st_mtime_ns
    result = render(EXAMPLES / "dialogue.srt", *example_args, "--out", out)
    assert result.exit_code == 0 and "up to date" in result.stderr, result.output
    assert mix.stat().st_mtime_ns == stamp and manifest(out)["loudness"] == manifest(rendered)["loudness"]
    assert manifest(out)["assembly"] == manifest(rendered)["assembly"]
    # Another loudness target is another assembly; so is a missing stem.
    result = render(EXAMPLES / "dialogue.srt", *example_args, "--out", out, "--loudness", "-16")
    assert result.exit_code == 0 and "up to date" not in result.stderr, result.output
    assert manifest(out)["loudness"]["mix"]["integrated"] == pytest.approx(-16.0, abs=0.5)
    (out / "stems" / "BOB.wav").unlink()
    result = render(EXAMPLES / "dialogue.srt", *example_args, "--out", out, "--loudness", "-16")
    assert result.exit_code == 0 and "up to date" not in result.stderr and (out / "stems" / "BOB.wav").is_file()


def test_a_moved_folder_gets_timelines_that_point_at_its_own_segments(rendered, example_args, tmp_path):
    import opentimelineio as otio
    from opentimelineio.url_utils import filepath_from_url

    def segments(otio_file: Path) -> set[Path]:
        timeline = otio.adapters.read_from_file(str(otio_file))
        return {
            (otio_file.parent / filepath_from_url(clip.media_reference.target_url)).resolve()
            for track in timeline.audio_tracks()
            for clip in track.find_clips()
        }

    first, moved = tmp_path / "out1", tmp_path / "out2"
    shutil.copytree(rendered, first)
    first.rename(moved)
    # OTIO names each segment relative to itself: the moved folder's timeline is still right, and kept.
    result = render(EXAMPLES / "dialogue.srt", *example_args, "--out", moved)
    assert result.exit_code == 0 and "up to date" in result.stderr, result.output
    assert segments(moved / "dialogue.dub.otio") == {(moved / e["file"]).resolve() for e in manifest(moved)["lines"]}
    # FCP 7 XML and EDLs must name them by absolute path: a move assembles them again, for the new folder.
    timelines = ["--timeline", "otio,edl,fcpxml", "--fps", "30000/1001"]
    result = render(EXAMPLES / "dialogue.srt", *example_args, "--out", moved, *timelines)
    assert result.exit_code == 0, result.output
    moved.rename(first)
    result = render(EXAMPLES / "dialogue.srt", *example_args, "--out", first, *timelines)
    assert result.exit_code == 0 and "up to date" not in result.stderr, result.output
    written = manifest(first)["delivery"]["timelines"]
    assert sorted(written) == [f"dialogue.dub.{n}" for n in ("ALICE.edl", "BOB.edl", "otio", "xml")]
    for name in written:
        text = (first / name).read_text(encoding="utf-8")
        assert str(moved) not in text and (name.endswith(".otio") or first.resolve().as_uri() + "/segments/" in text)
    assert segments(first / "dialogue.dub.otio") == {(first / e["file"]).resolve() for e in manifest(first)["lines"]}
    result = render(EXAMPLES / "dialogue.srt", *example_args, "--out", first, *timelines)
    assert result.exit_code == 0 and "up to date" in result.stderr, result.output


def rehome(out: Path, source: Path) -> None:
    """A copied output folder as if it had been rendered from ``source`` (its manifest and ledger agree)."""
    from omnidub.folder import Ledger

    data = manifest(out)
    data["input"] = str(source.resolve())
    (out / "manifest.json").write_text(json.dumps(data))
    Ledger(out / ".omnidub" / "ledger.jsonl").record("manifest.json", out / "manifest.json")


def test_editing_one_line_renders_exactly_that_line(rendered, example_args, tmp_path):
    out = tmp_path / "edited"
    shutil.copytree(rendered, out)
    srt = tmp_path / "dialogue.srt"
    rehome(out, srt)
    srt.write_text((EXAMPLES / "dialogue.srt").read_text().replace("What time should we leave?", "When do we leave?"))
    result = render(srt, *example_args, "--out", out)
    assert result.exit_code == 0, result.output
    states = statuses(out)
    assert states.count("rendered") == 1 and states[2] == "rendered" and states.count("cached") == 10


def test_force_renders_everything_again(rendered, example_args, tmp_path):
    out = tmp_path / "forced"
    shutil.copytree(rendered, out)
    result = render(EXAMPLES / "dialogue.srt", *example_args, "--out", out, "--force")
    assert result.exit_code == 0, result.output
    assert set(statuses(out)) == {"rendered"}
    # Same seeds, same settings: the audio is bit-identical to the first render.
    assert tree_bytes(out) == tree_bytes(rendered)


def test_changing_a_voice_rerenders_only_that_speakers_lines(rendered, tmp_path, whisper_tiny_en):
    out = tmp_path / "revoiced"
    shutil.copytree(rendered, out)
    toml = tmp_path / "voices.toml"
    text = (EXAMPLES / "voices.toml").read_text().replace('"voices/', f'"{EXAMPLES}/voices/')
    toml.write_text(
        text.replace(
            '[BOB]\naudio = "' + f"{EXAMPLES}/voices/bob.wav", '[BOB]\naudio = "' + f"{EXAMPLES}/voices/alice.wav"
        ).replace(
            "Well, I think we should leave on Friday. The weather looks better then, and the roads will be quiet.",
            "Good morning, everyone. Thanks for coming in early. I know the traffic was terrible today.",
        )
    )
    result = render(
        EXAMPLES / "dialogue.srt",
        "--voices",
        toml,
        "--model",
        "synthetic:tiny",
        "--asr-model",
        whisper_tiny_en,
        "--out",
        out,
    )
    assert result.exit_code == 0, result.output
    for line in manifest(out)["lines"]:
        assert line["status"] == ("rendered" if line["speaker"] == "BOB" else "cached")


def test_a_video_and_its_own_audio_as_bed_give_a_dubbed_video_subtitles_and_a_timeline(
    rendered, example_args, tmp_path
):
    import av
    import opentimelineio as otio
    import pyloudnorm
    import srt
    from conftest import make_video

    video = tmp_path / "clip.mp4"
    make_video(video, seconds=20.0)  # shorter than the dialogue: its last lines play past the picture
    out = tmp_path / "out"
    shutil.copytree(rendered, out)  # every line cached: this run only delivers
    result = render(EXAMPLES / "dialogue.srt", *example_args, "--out", out, "--video", video, "--bed", video, "--json")
    assert result.exit_code == 0, result.output
    data = manifest(out)
    lines = data["lines"]
    assert data["delivery"]["fps"] == 25 and data["delivery"]["video"] == "clip.dub.mp4"
    assert data["program_seconds"] == manifest(rendered)["program_seconds"]  # the lines outlast the video
    assert (
        [line["index"] for line in lines if "past-video" in line["flags"]]
        == [line["index"] for line in lines if line["start"] + line["duration"] > 20.0]
        != []
    )
    mixed, rate = sf.read(out / "mix-bed.wav")
    assert rate == 48000 and mixed.shape[1] == 2 and len(mixed) == round(data["program_seconds"] * rate)
    assert abs(pyloudnorm.Meter(rate).integrated_loudness(mixed) + 23.0) <= 0.5
    assert data["loudness"]["bed_mix"]["true_peak"] < -1.0
    with av.open(str(video)) as source, av.open(str(out / "clip.dub.mp4")) as dubbed:
        assert dubbed.streams.video[0].codec_context.name == source.streams.video[0].codec_context.name
        assert dubbed.streams.video[0].frames == source.streams.video[0].frames == 500
        assert len(dubbed.streams.audio) == 1 and dubbed.streams.audio[0].metadata["language"] == "eng"
    cues = list(srt.parse((out / "clip.dub.srt").read_text(encoding="utf-8")))

    # Each cue runs from its line's record-in frame to its record-out (whole frames of its audio), or to where the
    # next cue starts if that comes first: the frames the manifest's timecodes and the timeline name.
    def frame(timecode: str) -> int:
        hours, minutes, seconds, frames = map(int, timecode.split(":"))
        return ((hours * 60 + minutes) * 60 + seconds) * 25 + frames

    ends = [
        min([frame(line["rendered_end_tc"])] + [frame(later["start_tc"]) for later in lines[k + 1 :]])
        for k, line in enumerate(lines)
    ]
    assert [(c.start.total_seconds(), c.end.total_seconds(), c.content) for c in cues] == [
        (frame(line["start_tc"]) / 25, end / 25, line["text"]) for line, end in zip(lines, ends, strict=True)
    ]
    assert all(abs(frame(line["start_tc"]) / 25 - line["start"]) <= 0.5 / 25 + 1e-9 for line in lines)
    timeline = otio.adapters.read_from_file(str(out / "clip.dub.otio"))
    placed = {
        (track.name, clip.range_in_parent().start_time.value, clip.metadata["omnidub"]["index"])
        for track in timeline.audio_tracks()
        for clip in track.find_clips()
    }
    assert placed == {(line["speaker"], frame(line["start_tc"]), line["index"]) for line in lines}
    assert lines[0]["start_tc"] == "00:00:00:08" and all(line["end_tc"] for line in lines)  # 0.3 s at 25 fps
    summary = json.loads(result.stdout[result.stdout.index("{") :])
    assert "clip.dub.mp4" in summary["outputs"] and summary["loudness"]["bed_mix"]["integrated"] == pytest.approx(
        -23.0, abs=0.5
    )


def test_flac_and_mp3_outputs_need_no_ffmpeg(rendered, example_args, tmp_path, no_ffmpeg_path):
    for fmt in ("flac", "mp3"):
        out = tmp_path / fmt
        shutil.copytree(rendered, out)
        result = render(EXAMPLES / "dialogue.srt", *example_args, "--out", out, "--format", fmt)
        assert result.exit_code == 0, result.output
        info = sf.info(str(out / f"mix.{fmt}"))
        assert info.duration == pytest.approx(manifest(out)["program_seconds"], abs=0.1)
        assert (out / "stems" / f"ALICE.{fmt}").is_file()


def test_a_line_the_model_rejects_fails_alone(tmp_path, example_args, monkeypatch):
    from omnidub.backends.torch import TorchBackend

    synthesize = TorchBackend.synthesize

    def picky(self, requests):
        if any("unsayable" in r.text for r in requests):
            raise RuntimeError("the model rejected this text")
        return synthesize(self, requests)

    monkeypatch.setattr(TorchBackend, "synthesize", picky)
    script = tmp_path / "three.txt"
    script.write_text("ALICE: Hello there, how are you?\nBOB: This line is unsayable.\nALICE: Good to hear.\n")
    out = tmp_path / "out"
    result = render(script, *example_args, "--out", out, "--batch", "3")
    assert result.exit_code == 1
    lines = manifest(out)["lines"]
    assert [line["status"] for line in lines] == ["rendered", "failed", "rendered"]
    assert lines[1]["error"] == "RuntimeError: the model rejected this text"
    assert (out / "mix.wav").is_file() and not (out / lines[1]["file"]).exists()


def test_a_misspelt_designed_voice_is_one_line_before_any_model_loads(tmp_path, monkeypatch):
    from omnidub.backends.torch import upstream

    monkeypatch.setattr(upstream, "load_model", lambda *a, **k: pytest.fail("a TTS model was loaded"))
    toml = tmp_path / "voices.toml"
    toml.write_text('[BOB]\ninstruct = "purple dragon voice"\n')
    script = tmp_path / "one.txt"
    script.write_text("BOB: I am fine, thank you.\n")
    result = render(script, "--voices", toml, "--model", "synthetic:tiny", "--out", tmp_path / "out")
    assert result.exit_code == 2
    assert "purple dragon" in result.stderr and "Traceback" not in result.output


def test_stale_stems_and_other_formats_are_removed(rendered, example_args, tmp_path):
    out = tmp_path / "restyled"
    shutil.copytree(rendered, out)
    # CAROL's stem was written by an earlier render (its ledger says so); the user's own file was not.
    from omnidub.folder import Ledger

    (out / "stems" / "CAROL.wav").write_bytes(b"left from an older script")
    Ledger(out / ".omnidub" / "ledger.jsonl").record("stems/CAROL.wav", out / "stems" / "CAROL.wav")
    (out / "stems" / "music.wav").write_bytes(b"the user's")
    result = render(EXAMPLES / "dialogue.srt", *example_args, "--out", out, "--format", "flac")
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in (out / "stems").iterdir()) == ["ALICE.flac", "BOB.flac", "music.wav"]
    assert (out / "mix.flac").is_file() and not (out / "mix.wav").exists()


def test_speaker_names_cannot_escape_the_output_folder(tmp_path, tiny_model_dir):
    voice = EXAMPLES / "voices" / "alice.wav"
    text = "Good morning, everyone. Thanks for coming in early. I know the traffic was terrible today."
    script = tmp_path / "evil.vtt"
    script.write_text(
        "WEBVTT\n\n00:00:00.500 --> 00:00:02.000\n<v ../../escape>One line.\n\n"
        "00:00:02.500 --> 00:00:04.000\n<v /etc/passwd>Two lines.\n\n"
        "00:00:04.500 --> 00:00:06.000\n<v CON..\\..\\x>Three lines.\n"
    )
    box = tmp_path / "box"
    out = box / "out"
    before = set(tmp_path.rglob("*"))
    result = render(
        script,
        "--voice",
        voice,
        "--voice-text",
        text,
        "--model",
        "synthetic:tiny",
        "--out",
        out,
        "--preset",
        _whole_reference_preset(tmp_path),
    )
    assert result.exit_code == 0, result.output
    created = set(tmp_path.rglob("*")) - before
    assert created and all(out in p.parents or p in (box, out) for p in created if p.name != "preset.toml")
    assert len(list((out / "stems").iterdir())) == 3


def _whole_reference_preset(tmp_path: Path, steps: int = 4) -> Path:
    # Keeps the reference whole, so no ASR model is needed.
    path = tmp_path / "preset.toml"
    path.write_text(f"reference_seconds = 0\nsteps = {steps}\n")
    return path


def test_assembly_memory_does_not_grow_with_program_length(tmp_path):
    rate = 24000
    segment = tmp_path / "seg.wav"
    sf.write(segment, np.full(rate * 2, 0.1, dtype=np.float32), rate, subtype="PCM_24")
    peaks = {}
    for minutes in (2, 120):
        placements = [Placement(segment, 1.0, "A"), Placement(segment, minutes * 60 - 5.0, "A")]
        tracemalloc.start()
        assemble(placements, {}, tmp_path / f"{minutes}.flac", minutes * 60.0, sample_rate=rate, fmt="flac")
        peaks[minutes] = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert sf.info(str(tmp_path / f"{minutes}.flac")).frames == minutes * 60 * rate
    # A two-hour float buffer alone would be 690 MB. Block-wise assembly holds one block; what grows is the
    # loudness meter's one peak per millisecond and energy per 100 ms (about 15 MB an hour, held briefly twice).
    assert peaks[120] < peaks[2] + 40_000_000
    assert peaks[120] < 80_000_000


@pytest.mark.slow  # about 8 s or more: pytest -m slow runs it, as CI does
def test_sparse_two_hour_program_renders_at_full_length(tmp_path, tiny_model_dir):
    script = tmp_path / "sparse.txt"
    script.write_text(
        "[00:00:01.000 --> 00:00:03.000] A: Hello at the start.\n"
        "[01:59:55.000 --> 01:59:58.000] A: And goodbye at the end.\n"
    )
    out = tmp_path / "out"
    voice = EXAMPLES / "voices" / "alice.wav"
    text = "Good morning, everyone. Thanks for coming in early. I know the traffic was terrible today."
    # The length is the point here; at the model's rate there is half as much silence to encode.
    result = render(
        script,
        "--voice",
        voice,
        "--voice-text",
        text,
        "--model",
        "synthetic:tiny",
        "--out",
        out,
        "--format",
        "flac",
        "--sample-rate",
        "24000",
        "--preset",
        _whole_reference_preset(tmp_path),
    )
    assert result.exit_code == 0, result.output
    assert sf.info(str(out / "mix.flac")).duration == pytest.approx(7198.0, abs=0.01)


LONG = 20  # lines in the crash tests' scene: enough to stop mid-run and resume


def _long_script(path: Path, n: int = LONG) -> Path:
    path.write_text("".join(f"{'A' if i % 2 else 'B'}: This is line number {i} of a long scene.\n" for i in range(n)))
    return path


def _spawn(script: Path, out: Path, tmp_path: Path, steps: int = 4) -> subprocess.Popen:
    voice = EXAMPLES / "voices" / "alice.wav"
    text = "Good morning, everyone. Thanks for coming in early. I know the traffic was terrible today."
    command = [
        sys.executable,
        "-m",
        "omnidub",
        "render",
        str(script),
        "--voice",
        str(voice),
        "--voice-text",
        text,
        "--model",
        "synthetic:tiny",
        "--out",
        str(out),
        "--preset",
        str(_whole_reference_preset(tmp_path, steps)),
    ]
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=os.environ.copy())


def _wait_for_rendered(out: Path, count: int, process: subprocess.Popen, limit: float = 300.0) -> None:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        try:
            if statuses(out).count("rendered") >= count:
                return
        except (OSError, ValueError):
            pass
        if process.poll() is not None:
            pytest.fail(f"render ended early: {process.stderr.read().decode()}")
        time.sleep(0.05)
    pytest.fail("render made no progress")


@pytest.mark.slow  # a render killed and run again: about 11 s of CPU
def test_killed_mid_run_then_rerun_completes_and_renders_only_the_missing_lines(tmp_path, tiny_model_dir):
    script, out = _long_script(tmp_path / "long.txt"), tmp_path / "out"
    process = _spawn(script, out, tmp_path)
    _wait_for_rendered(out, 3, process)
    process.send_signal(signal.SIGKILL)
    process.wait()
    done = sum(s == "rendered" for s in statuses(out))
    assert 3 <= done < LONG
    result = render(
        script,
        "--voice",
        EXAMPLES / "voices" / "alice.wav",
        "--voice-text",
        "Good morning, everyone. Thanks for coming in early. I know the traffic was terrible today.",
        "--model",
        "synthetic:tiny",
        "--out",
        out,
        "--preset",
        tmp_path / "preset.toml",
    )
    assert result.exit_code == 0, result.output
    states = statuses(out)
    # Lines finished before the kill are reused (a line finished just before the manifest write counts too).
    assert states.count("cached") >= done and states.count("rendered") == LONG - states.count("cached")
    for line in manifest(out)["lines"]:
        assert sf.info(str(out / line["file"])).frames > 0
    assert not list(out.rglob(".*.tmp"))


@pytest.mark.slow  # a render in a fresh Python process, about 14 s: pytest -m slow runs it, as CI does
def test_ctrl_c_stops_after_the_line_in_flight_with_a_consistent_manifest(tmp_path, tiny_model_dir):
    script, out = _long_script(tmp_path / "long.txt"), tmp_path / "out"
    process = _spawn(script, out, tmp_path)
    _wait_for_rendered(out, 2, process)
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=300)
    assert process.returncode == 130, stderr.decode()
    assert "Traceback" not in stderr.decode()
    lines = manifest(out)["lines"]
    done = [line for line in lines if line["status"] == "rendered"]
    assert 2 <= len(done) < LONG
    assert all(line["status"] == "pending" for line in lines if line not in done)
    assert all((out / line["file"]).is_file() for line in done)


@pytest.mark.slow  # over 10 s of CPU: pytest -m slow runs it, as CI does
def test_a_second_ctrl_c_stops_at_once_with_exit_130(tmp_path, tiny_model_dir):
    import threading

    script, out = _long_script(tmp_path / "long.txt"), tmp_path / "out"
    # Many steps make each line slow enough that the second Ctrl-C lands while a line is in flight.
    process = _spawn(script, out, tmp_path, steps=120)
    heard, first_handled = [], threading.Event()

    def read_stderr():
        for raw in process.stderr:
            heard.append(raw.decode(errors="replace"))
            if "stopping after the line in flight" in heard[-1]:
                first_handled.set()

    reader = threading.Thread(target=read_stderr, daemon=True)
    reader.start()
    _wait_for_rendered(out, 1, process)
    process.send_signal(signal.SIGINT)
    assert first_handled.wait(120), "".join(heard)
    process.send_signal(signal.SIGINT)
    process.wait(timeout=300)
    reader.join(timeout=10)
    stderr = "".join(heard)
    assert process.returncode == 130, stderr
    assert "Traceback" not in stderr and "interrupted:" not in stderr  # stopped at once, not after the line
    # Stopped at once: no manifest snapshot, but the journal holds every finished line, and its audio is there.
    finished = [e for e in read_entries(out) if e.status == "rendered"]
    assert finished and all((out / e.file).is_file() for e in finished)


def test_damaged_cache_entries_are_rendered_again_and_the_outputs_match_an_undisturbed_run(
    rendered, example_args, tmp_path
):
    out = tmp_path / "damaged"
    shutil.copytree(rendered, out)
    before = tree_bytes(out)
    cache = out / ".omnidub" / "cache"
    cached = [next(cache.glob(f"{line['key']}.*.wav")) for line in manifest(out)["lines"]]
    whole = cached[0].read_bytes()
    cached[0].write_bytes(whole[: len(whole) // 2])  # truncated
    cached[1].write_bytes(cached[1].read_bytes()[:44])  # the header alone
    flipped = bytearray(cached[2].read_bytes())
    flipped[2000:5000] = bytes(b ^ 0xFF for b in flipped[2000:5000])  # same length, other samples
    cached[2].write_bytes(bytes(flipped))
    cached[3].write_bytes(b"")  # empty
    for line in manifest(out)["lines"][:4]:
        (out / line["file"]).unlink()  # nothing intact to restore them from
    cached[4].write_bytes(cached[4].read_bytes()[:-960])  # its segment is intact: restored, not rendered
    result = render(EXAMPLES / "dialogue.srt", *example_args, "--out", out)
    assert result.exit_code == 0, result.output
    assert statuses(out) == ["rendered"] * 4 + ["cached"] * 7
    assert "line 5: its cached audio is damaged" in result.stderr and "restored from segments/0005-" in result.stderr
    assert all(f"line {i}: its cached audio is damaged" in result.stderr for i in (1, 2, 3, 4))
    assert result.stderr.count("rendering it again") == 4
    assert tree_bytes(out) == before


def test_intact_segments_stand_in_for_a_lost_cache(rendered, example_args, tmp_path):
    out = tmp_path / "no-cache"
    shutil.copytree(rendered, out)
    before = tree_bytes(out)
    shutil.rmtree(out / ".omnidub" / "cache")
    result = render(EXAMPLES / "dialogue.srt", *example_args, "--out", out)
    assert result.exit_code == 0, result.output
    assert statuses(out) == ["cached"] * 11
    assert "restored from" not in result.stderr  # a lost cache is no damage
    assert tree_bytes(out) == before
    assert len(list((out / ".omnidub" / "cache").glob("*.wav"))) == 11


def test_a_hand_edited_segment_is_kept_and_used_until_only_renders_it_again(rendered, example_args, tmp_path):
    out = tmp_path / "hand-edited"
    shutil.copytree(rendered, out)
    before = tree_bytes(out)
    segment = out / manifest(out)["lines"][4]["file"]
    audio, rate = sf.read(segment, dtype="float32")
    sf.write(segment, np.clip(audio * 0.5, -1, 1), rate, subtype="PCM_24")  # the editor turned it down
    edited = segment.read_bytes()
    result = render(EXAMPLES / "dialogue.srt", *example_args, "--out", out)
    assert result.exit_code == 0, result.output
    assert set(statuses(out)) == {"cached"} and segment.read_bytes() == edited
    assert "line 5: segments/0005-ALICE.wav was edited after omnidub wrote it; kept" in result.stderr
    line = manifest(out)["lines"][4]
    assert "edited" in line["flags"] and tree_bytes(out)["mix.wav"] != before["mix.wav"]  # the mix uses the edit
    # Asked for by --only, the line gets its own audio back; the edit is moved aside, not lost.
    result = render(EXAMPLES / "dialogue.srt", *example_args, "--out", out, "--only", "5")
    assert result.exit_code == 0, result.output
    [aside] = (out / "segments").glob("0005-ALICE.edited-*.wav")
    assert aside.read_bytes() == edited and "the edit was moved to segments/0005-ALICE.edited-" in result.stderr
    assert {k: v for k, v in tree_bytes(out).items() if "edited-" not in k} == before
    assert "edited" not in manifest(out)["lines"][4]["flags"]


def test_a_speakers_file_name_depends_on_its_own_name_only():
    from omnidub.names import file_names

    first = file_names(["Zoe!", "BOB", "Dr. Who"])
    assert first["BOB"] == "BOB" and first["Zoe!"].startswith("Zoe-") and first["Dr. Who"].startswith("Dr_Who-")
    # Speakers who arrive later, even ones that sanitise to the same name, move no one else's file.
    later = file_names(["Zoe!", "BOB", "Dr. Who", "Zoe", "Zoe?", "Dr_Who"], previous=first)
    assert {s: later[s] for s in first} == first
    assert later["Zoe"] == "Zoe" and later["Dr_Who"] == "Dr_Who" and later["Zoe?"] not in first.values()
    # Names that differ only in case get their own suffixes; whoever held the plain name keeps it.
    assert file_names(["bob", "BOB"], previous=first) == {"BOB": "BOB", "bob": file_names(["bob", "BOB"])["bob"]}
    fresh = file_names(["bob", "BOB"])
    assert len({n.casefold() for n in fresh.values()}) == 2 and fresh == file_names(["BOB", "bob"])
    assert file_names(["BOB"], previous=fresh) == {"BOB": fresh["BOB"]}  # kept when the other leaves again


def test_temporaries_left_by_a_killed_run_are_removed_at_the_next_start(rendered, example_args, tmp_path):
    import subprocess

    out = tmp_path / "debris"
    shutil.copytree(rendered, out)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    from omnidub.files import _HOST

    debris = [
        out / "stems" / f".ALICE.wav.{_HOST}-{dead.pid}-k2x_9abc.tmp",
        out / ".omnidub" / "cache" / f".{'0' * 64}.wav.{_HOST}-{dead.pid}-q1w2e3r4.tmp",
        out / f".manifest.json.{_HOST}-{dead.pid}-zzzzzzzz.tmp",
    ]
    kept = [
        out / "stems" / f".BOB.wav.{_HOST}-{os.getpid()}-abcdefgh.tmp",  # a writer that still runs
        # another machine's writer (a folder shared over the network): its pid means nothing here
        out / "segments" / f".0002-BOB.wav.elsewhere-{dead.pid}-abcdefgh.tmp",
        # no host and pid: the user's, whatever its shape (older omnidubs wrote such names too)
        out / "segments" / f".0001-ALICE.wav.{dead.pid}-abcdefgh.tmp",
        out / "stems" / ".ALICE.wav.k2x_9abc.tmp",
        out / "stems" / ".notes.tmp",
        out / "stems" / "take.abcdefgh.tmp",
        out / "segments" / "mine.txt",
    ]
    for path in debris + kept:
        path.write_bytes(b"x" * 100)
    result = render(EXAMPLES / "dialogue.srt", *example_args, "--out", out)
    assert result.exit_code == 0, result.output
    assert "removed 3 temporary file(s)" in result.stderr
    assert not any(p.exists() for p in debris) and all(p.exists() for p in kept)


def test_stems_past_the_wav_limit_are_written_as_rf64(tmp_path, monkeypatch):
    import omnidub.outputs.mix as mix

    rate = 24000
    seventeen_hours = 17 * 3600 * rate  # 24-bit mono: 4.4 GB, past the 4 GiB a RIFF header can count
    assert mix.container("wav", 16 * 3600 * rate) == ("WAV", "PCM_24")
    assert mix.container("wav", seventeen_hours) == ("RF64", "PCM_24")
    assert mix.container("flac", seventeen_hours) == ("FLAC", "PCM_24")
    # The same choice on a small scale, through the real writer: the file reads back whole.
    segment = tmp_path / "seg.wav"
    sf.write(segment, np.full(rate, 0.1, dtype=np.float32), rate, subtype="PCM_24")
    monkeypatch.setattr(mix, "WAV_LIMIT_BYTES", 3 * 3 * rate)
    for seconds, kind in ((2.0, "WAV"), (4.0, "RF64")):
        out = tmp_path / f"{seconds}.wav"
        assemble([Placement(segment, 1.0, "A")], {}, out, seconds, sample_rate=rate, fmt="wav", loudness=None)
        info = sf.info(str(out))
        assert (info.format, info.frames) == (kind, seconds * rate)
        assert sf.read(str(out), dtype="float32")[0][rate + 10] == pytest.approx(0.1, abs=1e-4)
