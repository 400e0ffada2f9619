"""Everything is checked before the first line renders, and each error says exactly what is wrong: delivery
inputs, references, the cast, the model, and the command line's own frictions.

An error "before the model loads" is checked by order, not by time: a render (not a dry run) whose stderr is the
error line alone never printed the model banner, never resolved or loaded a model, and never made its folder.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
from conftest import EXAMPLES, ROOT, make_video
from typer.testing import CliRunner

from omnidub.cli import app
from omnidub.config import VoiceOptions
from omnidub.errors import OmnidubError

runner = CliRunner()


def run(*args, env=None):
    return runner.invoke(app, [str(a) for a in args], env=env)


def one_error_line(result) -> str:
    assert result.exit_code == 2, result.output
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:"), result.stderr
    return lines[0]


# -- media a user might pass by mistake ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def media(tmp_path_factory) -> dict[str, Path]:
    import av

    folder = tmp_path_factory.mktemp("media")
    (folder / "notes.txt").write_text("not a sound\n")
    (folder / "notes.mp4").write_text("not a video\n")
    with av.open(str(folder / "audio-only.mp4"), "w") as out:  # AAC alone, in a video container
        stream = out.add_stream("aac", rate=44100, layout="stereo")
        for start in range(0, 44100, 1024):
            frame = av.AudioFrame.from_ndarray(np.zeros((2, 1024), np.float32), format="fltp", layout="stereo")
            frame.sample_rate, frame.pts = 44100, start
            for packet in stream.encode(frame):
                out.mux(packet)
        for packet in stream.encode():
            out.mux(packet)
    with av.open(str(folder / "mute-10fps.mp4"), "w") as out:  # a picture at 10 fps and no sound
        stream = out.add_stream("mpeg4", rate=10)
        stream.width, stream.height, stream.pix_fmt = 64, 48, "yuv420p"
        for _ in range(20):
            for packet in stream.encode(av.VideoFrame.from_ndarray(np.zeros((48, 64, 3), np.uint8), format="rgb24")):
                out.mux(packet)
        for packet in stream.encode():
            out.mux(packet)
    make_video(folder / "five.mp4", 5.0)
    data = (folder / "five.mp4").read_bytes()
    (folder / "torn.mp4").write_bytes(data[: len(data) * 3 // 4])  # its index (moov) was at the end: unreadable
    make_video(folder / "long.mkv", 12.0)
    data = (folder / "long.mkv").read_bytes()
    (folder / "torn.mkv").write_bytes(data[: len(data) // 2])  # readable, but the header promises 12 s
    return {path.name: path for path in folder.iterdir()}


def render_args(out: Path) -> list:
    return [
        "render",
        EXAMPLES / "dialogue.srt",
        "--voices",
        EXAMPLES / "voices.toml",
        "--model",
        "synthetic:tiny",
        "--out",
        out,
    ]


@pytest.mark.parametrize(
    "flags, expected",
    [
        (["--bed", "notes.txt"], "--bed {notes.txt}: not an audio or video file omnidub can read"),
        (["--bed", "mute-10fps.mp4"], "--bed {mute-10fps.mp4}: has no audio track"),
        (["--video", "audio-only.mp4"], "--video {audio-only.mp4}: has no video stream"),
        (["--video", "notes.mp4"], "--video {notes.mp4}: not an audio or video file omnidub can read"),
        (["--video", "torn.mp4"], "--video {torn.mp4}: not an audio or video file omnidub can read"),
        (["--video", "notes.txt"], "--video {notes.txt}: cannot write a dubbed .txt video"),
        (
            ["--video", "mute-10fps.mp4", "--keep-original"],
            "--keep-original: {mute-10fps.mp4} has no audio track to keep",
        ),
        (["--video", "mute-10fps.mp4", "--timeline", "edl"], "the video {mute-10fps.mp4} gives 10 fps; pass --fps 25"),
        (["--fps", "15", "--timeline", "otio,fcpxml"], "--timeline fcpxml: its timecodes need a standard frame rate"),
    ],
)
def test_unusable_delivery_inputs_are_one_line_before_the_model_loads(tmp_path, media, flags, expected):
    flags = [media.get(flag, flag) for flag in flags]
    out = tmp_path / "out"
    line = one_error_line(run(*render_args(out), *flags))
    for name, path in media.items():
        expected = expected.replace("{" + name + "}", str(path))
    assert expected in line
    assert not out.exists()


def test_a_missing_timeline_adapter_is_one_line_before_the_model_loads(tmp_path, monkeypatch):
    import opentimelineio as otio

    real = otio.adapters.from_name

    def without_edl(name):
        if name == "cmx_3600":
            raise otio.exceptions.NotSupportedError("no adapter named cmx_3600")
        return real(name)

    monkeypatch.setattr(otio.adapters, "from_name", without_edl)
    line = one_error_line(run(*render_args(tmp_path / "out"), "--timeline", "otio,edl"))
    assert "--timeline edl needs the otio-cmx3600-adapter package" in line and "omnidub[timelines]" in line


def test_a_video_at_10_fps_gets_timecodes_and_an_otio_timeline(media):
    from omnidub.outputs.deliver import DeliveryOptions, check

    probed = check(DeliveryOptions(video=media["mute-10fps.mp4"]))  # the default timeline is OTIO JSON
    assert probed.fps == 10.0 and probed.video.seconds == pytest.approx(2.0, abs=0.11)


def test_a_truncated_video_is_said_and_its_real_end_used(media):
    from omnidub.outputs.deliver import DeliveryOptions, check

    probed = check(DeliveryOptions(video=media["torn.mkv"]))
    assert probed.video.seconds < 10.0 and probed.video.declared == pytest.approx(12.0, abs=0.05)
    [note] = probed.notes
    assert "the header says 12.0" in note and f"the picture ends at {probed.video.seconds:.2f} s" in note


# -- voices and references ----------------------------------------------------------------------------------------


def test_audio_that_is_a_folder_is_called_a_folder(tmp_path):
    (tmp_path / "refs").mkdir()
    toml = tmp_path / "voices.toml"
    toml.write_text('[ALICE]\naudio = "refs"\ntext = "Hi."\n')
    line = one_error_line(run("render", EXAMPLES / "dialogue.srt", "--voices", toml, "--dry-run"))
    assert "[ALICE]" in line and "refs is a folder, not an audio file" in line
    line = one_error_line(
        run("render", EXAMPLES / "dialogue.srt", "--voice", f"ALICE={tmp_path / 'refs'}", "--dry-run")
    )
    assert "is a folder, not an audio file" in line


def _voice(audio: Path, text: str | None = "Hello there."):
    from omnidub.voices import Voice

    return Voice("ALICE", audio, text, "en", None, None)


def test_a_plan_refuses_what_the_render_refuses_of_a_reference(tmp_path):
    from omnidub.voices import check_reference, prepare_reference

    mono, rate = sf.read(EXAMPLES / "voices" / "alice.wav", dtype="float32")
    short = tmp_path / "short.wav"
    sf.write(short, mono[: int(0.2 * rate)], rate)
    with pytest.raises(OmnidubError) as rendered:
        prepare_reference(_voice(short), sample_rate=24000, options=VoiceOptions(), asr=None)
    with pytest.raises(OmnidubError) as planned:
        check_reference(_voice(short), options=VoiceOptions(), asr_available=False)
    assert str(planned.value) == str(rendered.value) and "is 0.20 s" in str(planned.value)
    # No transcript and no ASR model: refused by both; with an ASR model the plan lets it through.
    with pytest.raises(OmnidubError, match="no transcript and no ASR model"):
        check_reference(_voice(EXAMPLES / "voices" / "alice.wav", None), options=VoiceOptions(), asr_available=False)
    assert (
        check_reference(_voice(EXAMPLES / "voices" / "alice.wav", None), options=VoiceOptions(), asr_available=True)
        == ()
    )
    assert check_reference(_voice(None), options=VoiceOptions(), asr_available=False) == ()  # a designed voice


def test_a_ten_minute_reference_without_asr_is_cut_at_a_pause_never_kept_whole(tmp_path):
    from omnidub.voices import check_reference, prepare_reference

    mono, rate = sf.read(ROOT / "tests" / "data" / "two_sentences.wav", dtype="float32")
    times = int(600 / (len(mono) / rate))
    long = tmp_path / "long.wav"
    sf.write(long, np.tile(mono, times), rate)
    said = "The quick brown fox jumps over the lazy dog. She sells sea shells by the sea shore every summer. " * times
    ref = prepare_reference(_voice(long, said), sample_rate=24000, options=VoiceOptions(), asr=None)
    low, high = VoiceOptions().reference_window
    assert ref.trimmed and ref.provisional and low <= ref.audio.size / 24000 <= high
    assert "energy alone" in ref.note and "by estimate" in ref.note and ref.text.endswith("dog.")
    assert any(
        "energy alone" in n for n in check_reference(_voice(long, said), options=VoiceOptions(), asr_available=False)
    )


def test_a_long_reference_with_no_pause_in_the_window_and_no_asr_is_refused_with_the_fix(tmp_path):
    from omnidub.voices import check_reference, prepare_reference

    mono, rate = sf.read(ROOT / "tests" / "data" / "no_pause.wav", dtype="float32")  # 5.4 s, no pause at all
    long = tmp_path / "long.wav"
    sf.write(long, np.tile(mono, 5), rate)
    for attempt in (
        lambda v: prepare_reference(v, sample_rate=24000, options=VoiceOptions(), asr=None),
        lambda v: check_reference(v, options=VoiceOptions(), asr_available=False),
    ):
        with pytest.raises(OmnidubError, match=r"too long to use whole.*no(ne)? .*inside 2\.5-4 s.*--asr-model"):
            attempt(_voice(long, "Words."))


@pytest.mark.slow  # about 10 s (a 26 s reference encoded): pytest -m slow runs it, as CI does
def test_the_model_librarys_long_reference_warning_never_doubles_omnidubs_note(tmp_path, tiny_model_dir):
    mono, rate = sf.read(EXAMPLES / "voices" / "alice.wav", dtype="float32")
    long = tmp_path / "long.wav"
    sf.write(long, np.tile(mono, 5), rate)  # 26 s, pauses between the copies
    script = tmp_path / "two.txt"
    script.write_text("ALICE: Hello there.\nALICE: How are you?\n")
    preset = tmp_path / "preset.toml"
    preset.write_text("steps = 2\n")
    text = "Good morning, everyone. Thanks for coming in early. I know the traffic was terrible today. " * 5
    result = run(
        "render",
        script,
        "--voice",
        f"ALICE={long}",
        "--voice-text",
        f"ALICE={text}",
        "--model",
        "synthetic:tiny",
        "--preset",
        preset,
        "--asr-model",
        tmp_path / "no-whisper",
        "--out",
        tmp_path / "out",
    )
    assert result.exit_code == 0, result.output
    assert "Reference audio is" not in result.stderr  # omnivoice's own warning: never reached
    assert sum("over 20 s" in line for line in result.stderr.splitlines()) == 1, result.stderr


def test_a_speaker_without_a_voice_is_named_with_the_input_and_cue(tmp_path):
    from omnidub.script import read_script
    from omnidub.voices import check_cast, load_voices, voice_for

    srt = tmp_path / "ep1.srt"
    srt.write_text(
        "1\n00:00:01,000 --> 00:00:02,000\nALICE: Hi.\n\n2\n00:00:03,000 --> 00:00:04,000\nCAROL: Hey.\n"
        "\n3\n00:00:05,000 --> 00:00:06,000\nNo label.\n"
    )
    voices = load_voices(EXAMPLES / "voices.toml", [], [])
    lines = read_script(srt).lines
    with pytest.raises(OmnidubError, match=rf"^{srt}: cue 2: no voice for speaker 'CAROL'"):
        check_cast([line for line in lines if line.speaker != "default"], voices, srt)
    with pytest.raises(OmnidubError, match=rf"^{srt}: cue 3: a line without a speaker label needs the default voice"):
        check_cast([line for line in lines if line.speaker != "CAROL"], voices, srt)
    assert voice_for("alice", voices).speaker == "ALICE"


# -- inputs -------------------------------------------------------------------------------------------------------


def test_a_missing_input_is_reported_beside_the_others(tmp_path):
    from omnidub.script import find_inputs

    found = find_inputs([EXAMPLES / "dialogue.srt", tmp_path / "missing.srt", EXAMPLES / "script.txt", tmp_path])
    assert found.files == (EXAMPLES / "dialogue.srt", EXAMPLES / "script.txt")
    assert [(path.name, str(error)) for path, error in found.unusable] == [
        ("missing.srt", f"{tmp_path / 'missing.srt'}: no such file or folder"),
        (tmp_path.name, f"{tmp_path}: the folder holds no .srt, .txt, .vtt file"),
    ]
    with pytest.raises(OmnidubError, match="missing.srt: no such file or folder"):
        find_inputs([tmp_path / "missing.srt"])  # nothing else to render
    with pytest.raises(OmnidubError, match="flags such as --dry-run take no value"):
        find_inputs([EXAMPLES / "dialogue.srt", "true"])  # a flag's value: the user meant something else


# -- the model ----------------------------------------------------------------------------------------------------


def test_a_plan_resolves_a_hub_model_from_the_cache_alone_without_transformers(tmp_path):
    code = (
        "import sys\n"
        "from omnidub.models import NotDownloaded, resolve_model\n"
        "try:\n"
        "    resolve_model('k2-fsa/OmniVoice', download=False)\n"
        "except NotDownloaded as exc:\n"
        "    print(exc)\n"
        "print(sorted(m for m in ('torch', 'transformers', 'omnivoice') if m in sys.modules))\n"
    )
    # Online, a plan must not start a download: the hub is unreachable here, so HF_HUB_OFFLINE is left unset and
    # the cache is empty; the answer must come at once from the cache, not from the network or transformers.
    env = {k: v for k, v in os.environ.items() if k != "HF_HUB_OFFLINE"}
    env.update(HF_HOME=str(tmp_path / "hf"), PYTHONPATH=str(ROOT))
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, env=env, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "model k2-fsa/OmniVoice is not downloaded (a render downloads it; omnidub models fetch gets it now)",
        "[]",
    ]


def test_a_plan_never_builds_a_synthetic_model(tmp_path, monkeypatch):
    from omnidub.models import NotDownloaded, resolve_model

    monkeypatch.setenv("OMNIDUB_CACHE", str(tmp_path))
    with pytest.raises(NotDownloaded, match="synthetic:tiny is not built yet"):
        resolve_model("synthetic:tiny", download=False)
    assert not any(tmp_path.iterdir())


class _FakeFile:
    def __init__(self, size: int, will_download: bool):
        self.file_size, self.will_download = size, will_download


def _fake_hub(tmp_path: Path, cached: bool, calls: list):
    snapshot = tmp_path / "models--k2-fsa--OmniVoice" / "snapshots" / ("a" * 40)
    snapshot.mkdir(parents=True, exist_ok=True)
    (snapshot / "config.json").write_text("{}")

    def snapshot_download(repo_id, **kwargs):
        from huggingface_hub.utils import are_progress_bars_disabled

        calls.append(kwargs)
        if kwargs.get("dry_run"):
            return [_FakeFile(2_400_000_000, not cached), _FakeFile(1_000, not cached)]
        # What the hub's own bar prints while it downloads, when bars are on.
        if not are_progress_bars_disabled():
            sys.stderr.write("Downloading bytes: 100%|##########| 2.40G/2.40G [01:00<00:00, 40.0MB/s]\n")
        return str(snapshot)

    return snapshot_download


def test_a_render_download_shows_its_size_progress_and_rate(tmp_path, monkeypatch, capsys):
    import huggingface_hub

    from omnidub.models import resolve_model

    calls: list = []
    monkeypatch.setattr(huggingface_hub, "snapshot_download", _fake_hub(tmp_path, False, calls))
    source = resolve_model("k2-fsa/OmniVoice")
    said = capsys.readouterr().err
    assert "downloading k2-fsa/OmniVoice from the model hub: 2.4 GB in 2 file(s)" in said
    assert "40.0MB/s" in said  # the hub's progress reached the terminal
    assert source.revision == "a" * 40 and calls[0] == {"dry_run": True}

    calls.clear()
    monkeypatch.setattr(huggingface_hub, "snapshot_download", _fake_hub(tmp_path, True, calls))
    resolve_model("k2-fsa/OmniVoice")
    assert capsys.readouterr().err == ""  # cached: nothing to show


# -- the command line ---------------------------------------------------------------------------------------------


def test_debug_works_before_the_command_and_is_in_the_help(tmp_path):
    plain = run("render", tmp_path / "missing.srt", "--dry-run")
    assert plain.exit_code == 2 and "Traceback" not in plain.output
    for args in (
        ["--debug", "render", tmp_path / "missing.srt", "--dry-run"],
        ["render", tmp_path / "missing.srt", "--dry-run", "--debug"],
    ):
        result = run(*args)
        assert isinstance(result.exception, OmnidubError), result.output  # raised, with its traceback
    assert "--debug" in run("--help", env={"COLUMNS": "80"}).stdout
    for command in ("render", "qa", "bench", "export"):
        assert "--debug" in run(command, "--help", env={"COLUMNS": "80"}).stdout, command


def test_help_shows_whole_summaries_and_no_type_placeholders():
    top = run("--help", env={"COLUMNS": "80"}).stdout
    commands = top.split("Commands:")[1]
    assert "..." not in commands and "\u2026" not in commands
    assert "with one" in commands and "model for all of them." in commands
    render = run("render", "--help", env={"COLUMNS": "80"}).stdout
    assert "<list[Path]>" not in render and "<Path>" not in run("qa", "--help", env={"COLUMNS": "80"}).stdout
    assert "--subtitle-speakers" in render


@pytest.mark.parametrize("typo, suggestion", [("--vocie", "--voice"), ("--json-out", "--json"), ("--xyz", None)])
def test_a_mistyped_option_gets_the_closest_name_only(typo, suggestion):
    line = one_error_line(run("render", EXAMPLES / "dialogue.srt", typo))
    assert f"No such option: {typo}" in line and "Possible options" not in line
    assert (f"did you mean {suggestion}?" in line) if suggestion else "did you mean" not in line


def test_the_summary_says_why_a_mix_is_under_its_target(capsys):
    from types import SimpleNamespace

    from omnidub.cli.show import print_summary

    note = (
        "mix.wav measures -64.3 LUFS, 41.3 LU under the -23 LUFS target: the -50 dBTP true-peak ceiling holds it down"
    )
    level = {"gain": 27.2, "limited": True, "integrated": -64.3, "range": 1.6, "true_peak": -50.1, "note": note}
    summary = SimpleNamespace(
        out_dir=Path("out"),
        lines=1,
        rendered=1,
        cached=0,
        failed=0,
        overflow=(),
        pending=(),
        program_seconds=4.0,
        audio_seconds=1.0,
        synth_seconds=1.0,
        rtf=1.0,
        outputs=(),
        loudness={"mix": level, "bed_mix": None},
    )
    print_summary(summary, False)
    assert "41.3 LU under the -23 LUFS" in " ".join(capsys.readouterr().out.split())


def test_pydubs_ffmpeg_warning_is_silenced_around_its_import_only(no_ffmpeg_path):
    code = (
        "import warnings\n"
        "warnings.simplefilter('default')\n"
        "from omnidub.media import quiet_pydub\n"
        "with quiet_pydub():\n"
        "    import pydub.audio_segment\n"
        "print(len(warnings.filters) > 0)\n"
    )
    quiet = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, env=no_ffmpeg_path)
    assert quiet.returncode == 0 and "ffmpeg" not in quiet.stderr, quiet.stderr
    loud = subprocess.run(
        [sys.executable, "-W", "default", "-c", "import pydub.audio_segment"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=no_ffmpeg_path,
    )
    assert "Couldn't find ffmpeg" in loud.stderr  # what is silenced is really there


# -- behaviour the render's orchestration has to call in ---------------------------------------------------------


def test_a_dry_run_refuses_a_reference_the_render_would_refuse(tmp_path):
    mono, rate = sf.read(EXAMPLES / "voices" / "alice.wav", dtype="float32")
    short = tmp_path / "short.wav"
    sf.write(short, mono[: int(0.2 * rate)], rate)
    line = one_error_line(
        run("render", EXAMPLES / "script.txt", "--voice", short, "--voice-text", "Good.", "--dry-run")
    )
    assert "short.wav" in line and "is 0.20 s" in line


def test_a_missing_input_among_others_is_reported_and_the_others_plan(tmp_path):
    result = run(
        "render",
        EXAMPLES / "dialogue.srt",
        tmp_path / "missing.srt",
        "--voices",
        EXAMPLES / "voices.toml",
        "--dry-run",
        "--json",
    )
    assert result.exit_code == 1, result.output
    assert [Path(i["input"]).name for i in json.loads(result.stdout)["inputs"]] == ["dialogue.srt"]
    assert "missing.srt: no such file or folder" in result.stderr


def test_no_voice_for_a_speaker_names_the_input(tmp_path):
    srt = tmp_path / "ep1.srt"
    srt.write_text("1\n00:00:01,000 --> 00:00:02,000\nCAROL: Hi.\n")
    line = one_error_line(run("render", srt, "--voices", EXAMPLES / "voices.toml", "--dry-run"))
    assert f"{srt}: cue 1: no voice for speaker 'CAROL'" in line


def test_a_bracketed_name_of_the_cast_is_its_speakers_label_in_a_plan(tmp_path):
    toml = tmp_path / "voices.toml"
    toml.write_text(f'[JEAN_LUC]\naudio = "{EXAMPLES / "voices" / "bob.wav"}"\ntext = "Well."\n')
    srt = tmp_path / "ep.srt"
    srt.write_text("1\n00:00:01,000 --> 00:00:02,000\n[JEAN_LUC] Make it so.\n")
    result = run("render", srt, "--voices", toml, "--dry-run", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["lines"][0]["speaker"] == "JEAN_LUC"


def test_a_dry_run_on_the_default_model_downloads_nothing_and_imports_no_torch(tmp_path):
    code = (
        "import sys\n"
        "from typer.testing import CliRunner\n"
        "from omnidub.cli import app\n"
        "r = CliRunner().invoke(app, ['render', 'examples/dialogue.srt', '--voices', 'examples/voices.toml',"
        " '--dry-run'])\n"
        "print(r.exit_code, sorted(m for m in ('torch', 'transformers', 'omnivoice') if m in sys.modules))\n"
        "print(r.stderr)\n"
    )
    env = {**os.environ, "HF_HOME": str(tmp_path / "hf"), "PYTHONPATH": str(ROOT)}  # offline: a download would fail
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, env=env, timeout=120
    )
    assert result.stdout.splitlines()[0] == "0 []", result.stdout + result.stderr
    assert "not downloaded" in result.stdout and "every line would render" in result.stdout


def test_a_programme_longer_than_the_video_is_said_before_rendering(media):
    result = run(
        "render",
        EXAMPLES / "dialogue.srt",
        "--voices",
        EXAMPLES / "voices.toml",
        "--video",
        media["five.mp4"],
        "--dry-run",
    )
    assert result.exit_code == 0, result.output
    assert "would play over no picture" in result.stderr and "line(s) 2-11" in result.stderr
    torn = run(
        "render",
        EXAMPLES / "dialogue.srt",
        "--voices",
        EXAMPLES / "voices.toml",
        "--video",
        media["torn.mkv"],
        "--dry-run",
    )
    assert "truncated" in torn.stderr


@pytest.mark.slow  # over 10 s of CPU: pytest -m slow runs it, as CI does
def test_a_library_render_prints_no_pydub_warning(tmp_path, tiny_model_dir, no_ffmpeg_path):
    preset = tmp_path / "preset.toml"
    preset.write_text("steps = 2\nreference_seconds = 0\n")
    code = (
        "import warnings\n"
        "warnings.simplefilter('default', RuntimeWarning)\n"
        "from omnidub.api import Session\n"
        f"s = Session(model='synthetic:tiny', preset={str(preset)!r})\n"
        f"s.render('examples/script.txt', voices='examples/voices.toml', out_dir={str(tmp_path / 'out')!r}, only='1')\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
        env=no_ffmpeg_path,
    )
    assert result.returncode == 0, result.stderr
    assert "ffmpeg" not in result.stderr, result.stderr
