"""Hard knocks, round 4 (issue 34): no file of the user's replaced or deleted, no wrong result reported as
success, no traceback, and each message naming the real cause. One test (or a few) per scenario of the issue;
scenario 5 and render --source's messages belong to the source-cloning tests."""

from __future__ import annotations

import errno
import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
from conftest import EXAMPLES
from typer.testing import CliRunner

from omnidub.cli import app
from omnidub.errors import OmnidubError

runner = CliRunner()
ALICE = EXAMPLES / "voices" / "alice.wav"
ALICE_TEXT = "Good morning, everyone. Thanks for coming in early. I know the traffic was terrible today."
SMALL_SRT = """1
00:00:00,300 --> 00:00:02,500
ALICE: So, are we still driving to the coast?

2
00:00:03,000 --> 00:00:05,000
[BOB] Yes, once the car is back.

3
00:00:05,500 --> 00:00:07,500
ALICE: Great. When do we leave?
"""


def run(*args, **kwargs):
    return runner.invoke(app, [str(a) for a in args], **kwargs)


def one_error_line(result) -> str:
    assert result.exit_code == 2, result.output
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:"), result.stderr
    return lines[0]


def files_of(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def small(tmp_path_factory, tiny_model_dir):
    """Three lines, two speakers, voices kept whole (no ASR needed), 2 steps: a cheap real render's inputs."""
    folder = tmp_path_factory.mktemp("small")
    script = folder / "small.srt"
    script.write_text(SMALL_SRT)
    preset = folder / "preset.toml"
    preset.write_text("reference_seconds = 0\nsteps = 2\n")
    args = [
        "--voice",
        f"ALICE={ALICE}",
        "--voice-text",
        f"ALICE={ALICE_TEXT}",
        "--voice",
        f"BOB={ALICE}",
        "--voice-text",
        f"BOB={ALICE_TEXT}",
        "--model",
        "synthetic:tiny",
        "--device",
        "cpu",
        "--preset",
        preset,
    ]
    return script, args


# -- 1. export holds its folder ------------------------------------------------------------------------------------


def test_export_refuses_a_folder_of_the_users_files_and_its_own_checkpoint(tmp_path, tiny_model_dir):
    mine = tmp_path / "mine"
    mine.mkdir()
    for name, text in (("export.json", '{"mine": 1}'), ("tokenizer.json", "tok"), ("transformer.onnx", "graph")):
        (mine / name).write_text(text)
    before = files_of(mine)
    line = one_error_line(run("export", mine, "--model", "synthetic:tiny", "--no-check"))
    assert "export.json that omnidub did not write" in line and "--out" not in line
    assert files_of(mine) == before
    checkpoint = tmp_path / "checkpoint"
    shutil.copytree(tiny_model_dir, checkpoint)
    before = files_of(checkpoint)
    line = one_error_line(run("export", checkpoint, "--model", checkpoint, "--no-check"))
    assert "is the checkpoint folder --model" in line
    assert files_of(checkpoint) == before  # no .onnx written into the checkpoint


def test_an_export_folder_is_claimed_by_its_ledger_and_an_older_one_by_its_own_records(tmp_path):
    from omnidub.backends.onnx.export import export_folder, older_export, write_manifest
    from omnidub.backends.onnx.runtime import EXPORT_FORMAT
    from omnidub.keys import file_digest
    from omnidub.models import export_content_digest

    older = tmp_path / "older"
    older.mkdir()
    (older / "transformer.onnx").write_bytes(b"graph")
    (older / "tokenizer.json").write_bytes(b"{}")
    manifest = {
        "format": EXPORT_FORMAT,
        "config": {"sample_rate": 24000, "hop_length": 960, "frame_rate": 25},
        "files": {"transformer.onnx": {"sha256": file_digest(older / "transformer.onnx").hexdigest()}},
        "tokenizer": {"tokenizer.json": {"sha256": file_digest(older / "tokenizer.json").hexdigest()}},
    }
    manifest["content_sha256"] = export_content_digest(manifest)
    (older / "export.json").write_text(json.dumps(manifest))
    assert older_export(older) == {"transformer.onnx", "tokenizer.json", "export.json"}
    (older / "transformer.onnx").write_bytes(b"changed by hand")  # its bytes no longer match: not vouched for
    assert older_export(older) == {"tokenizer.json", "export.json"}
    (older / "transformer.onnx").write_bytes(b"graph")
    folder = export_folder(older)
    folder.claim(None)
    try:
        assert folder.owns("export.json") and folder.owns("transformer.onnx")
        write_manifest(folder, manifest)
    finally:
        folder.release()
    assert (older / ".omnidub" / "ledger.jsonl").is_file()


def test_a_render_never_writes_into_an_export_or_an_extract_folder(tmp_path, small):
    from omnidub.folder import OutputFolder

    script, args = small
    for record in ("export.json", "extract.json"):
        out = tmp_path / record
        folder = OutputFolder(out, record=record, others=None)
        folder.claim(None)
        folder.write_text("graph.onnx", "omnidub wrote this")
        folder.write_text(record, "{}")
        folder.release()
        before = files_of(out)
        line = one_error_line(run("render", script, *args, "--out", out))
        assert f"({record}), not a render" in line
        assert files_of(out) == before  # a render's clean-up would have deleted them


# -- 2. temporaries -------------------------------------------------------------------------------------------------


def test_only_omnidubs_own_temporaries_of_a_dead_writer_on_this_host_are_debris(tmp_path):
    from omnidub.files import _HOST, is_temporary, remove_debris

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    debris = tmp_path / f".ALICE.wav.{_HOST}-{dead.pid}-abcd_123.tmp"
    users = [
        ".session.autosave.tmp",
        ".backup.20241201.tmp",
        ".ALICE.wav.mixdown1.tmp",
        ".notes.settings.tmp",
        f".take.wav.{dead.pid}-abcdefgh.tmp",
        f".take.wav.{_HOST}-{os.getpid()}-abcdefgh.tmp",
        f".take.wav.elsewhere-{dead.pid}-abcdefgh.tmp",
    ]
    for name in [debris.name, *users]:
        (tmp_path / name).write_bytes(b"x")
    assert remove_debris(tmp_path) == 1 and not debris.exists()
    assert all((tmp_path / name).exists() for name in users)
    assert not any(is_temporary(name) for name in users[:5])


# -- 3. voices extract refuses another source's folder --------------------------------------------------------------


def test_a_second_source_with_the_same_stem_is_refused_the_first_ones_voices(tmp_path):
    from omnidub.folder import OutputFolder

    for name in ("s1", "s2"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "ep.wav").write_bytes(b"not decoded: the folder is refused first")
    (tmp_path / "ep.srt").write_text(SMALL_SRT)
    voices = tmp_path / "voices" / "ep"
    folder = OutputFolder(voices, record="extract.json", others=None)
    folder.claim(None)
    folder.write_text("ALICE.wav", "clip")
    folder.write_text("extract.json", json.dumps({"source": str((tmp_path / "s1" / "ep.wav").resolve())}))
    folder.release()
    before = files_of(voices)
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        line = one_error_line(run("voices", "extract", Path("s2") / "ep.wav", "--subs", "ep.srt"))
    finally:
        os.chdir(cwd)
    assert "holds the voices of" in line and "s1/ep.wav" in line and "--out" in line
    assert files_of(voices) == before


# -- 4. --only never takes another line's audio ---------------------------------------------------------------------


def test_only_keeps_an_edited_lines_audio_and_a_gone_lines_files(tmp_path, small):
    script, args = small
    edited = tmp_path / "small.srt"
    edited.write_text(SMALL_SRT)
    out = tmp_path / "out"
    assert run("render", edited, *args, "--out", out).exit_code == 0
    segment, cache = out / "segments" / "0003-ALICE.wav", out / ".omnidub" / "cache"
    kept, cached = segment.read_bytes(), sorted(p.name for p in cache.iterdir())
    edited.write_text(SMALL_SRT.replace("When do we leave?", "When shall we leave?"))
    result = run("render", edited, *args, "--out", out, "--only", "2")
    assert result.exit_code == 0, result.output
    assert "line(s) 3 changed since their audio was rendered" in result.stderr
    line = json.loads((out / "manifest.json").read_text())["lines"][2]
    assert line["status"] == "cached" and "stale" in line["flags"] and line["text"] == "Great. When do we leave?"
    assert segment.read_bytes() == kept and sorted(p.name for p in cache.iterdir()) == cached
    mix, _ = sf.read(str(out / "mix.wav"))
    rate = sf.info(str(out / "mix.wav")).samplerate
    assert np.abs(mix[int(5.6 * rate) : int(7.0 * rate)]).max() > 0  # still in the mix

    edited.write_text(SMALL_SRT.rsplit("\n\n3\n", 1)[0] + "\n")  # line 3 gone from the script
    result = run("render", edited, *args, "--out", out, "--only", "1")
    assert result.exit_code == 0, result.output
    assert "line(s) 3 are gone from the script" in result.stderr and segment.read_bytes() == kept
    assert run("render", edited, *args, "--out", out).exit_code == 0  # without --only: tidied up
    assert not segment.exists()


# -- 6, 7, 11, 13. numbers ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "flags, expected",
    [
        (["--duck", "inf", "--bed", ALICE], "'--duck': inf is not a finite number"),
        (["--true-peak", "nan"], "'--true-peak': nan is not a finite number"),
        (["--true-peak=-inf"], "'--true-peak': -inf is not a finite number"),
        (["--true-peak", "-1000"], "--true-peak -1000.0 dBTP would hold the mix near silence"),
        (["--true-peak", "-60"], "a ceiling runs from -30 to 0 dBTP"),
        (["--duck", "200", "--bed", ALICE], "--duck 200.0 dB: the bed drops by 0 to 60 dB"),
        (["--fps", "1e-9"], "--fps 1e-09: timecodes and timelines take 1 to 1000"),
        (["--fps", "1e9"], "--fps 1e+09: timecodes and timelines take 1 to 1000"),
        (["--loudness", "nan"], "--loudness nan is not a finite number"),
        (["--gpus-per-worker", "inf", "--executor", "ray"], "'--gpus-per-worker': inf is not a finite number"),
        (["--sample-rate", "192000", "--format", "mp3"], "MP3 holds only 8000, 11025"),
    ],
)
def test_numbers_out_of_range_or_not_finite_are_one_line_before_anything(tmp_path, small, flags, expected):
    script, args = small
    out = tmp_path / "out"
    for dry in ([], ["--dry-run"]):
        assert expected in one_error_line(run("render", script, *args, "--out", out, *flags, *dry))
    assert not out.exists()


def test_any_float_option_refuses_nan_as_such(tmp_path):
    line = one_error_line(run("qa", tmp_path, "--max-wer", "nan"))
    assert "nan is not a finite number" in line  # not "should be >= 0"


def test_the_library_refuses_what_the_command_line_refuses():
    from omnidub.outputs.deliver import DeliveryOptions, check

    for options in (
        DeliveryOptions(duck=math.inf),
        DeliveryOptions(true_peak=math.nan),
        DeliveryOptions(fps=1e-9),
        DeliveryOptions(sample_rate=192000, fmt="mp3"),
    ):
        with pytest.raises(OmnidubError):
            check(options)


def test_a_mix_far_under_its_target_says_so_for_any_reason():
    from omnidub.outputs.loudness import Level
    from omnidub.outputs.mix import short_of_target

    silent = short_of_target(Path("mix.wav"), Level(None, None, None), -23.0, -1.0, limited=False)
    assert silent and "too quiet to measure" in silent and "-23" in silent
    assert short_of_target(Path("mix.wav"), Level(None, None, None), None, -1.0, limited=False) is None  # off
    held = short_of_target(Path("mix.wav"), Level(-40.0, 1.0, -30.0), -16.0, -30.0, limited=True)
    assert held and "24.0 LU under" in held and "true-peak ceiling" in held


def test_a_bed_with_samples_that_are_not_numbers_leaves_a_valid_manifest(tmp_path, small):
    script, args = small
    bed = tmp_path / "bed.wav"
    noise = np.random.default_rng(0).normal(0, 0.05, (48000 * 9, 2)).astype(np.float32)
    noise[1000:3000] = np.nan
    sf.write(str(bed), noise, 48000, subtype="FLOAT")
    out = tmp_path / "out"
    result = run("render", script, *args, "--out", out, "--bed", bed)
    assert result.exit_code == 0, result.output

    def refuse(constant):
        raise AssertionError(f"manifest.json holds {constant}, which is not JSON")

    manifest = json.loads((out / "manifest.json").read_text(), parse_constant=refuse)
    assert "not numbers" in manifest["loudness"]["bed_mix"]["note"]
    mixed, _ = sf.read(str(out / "mix-bed.wav"))
    assert np.isfinite(mixed).all() and np.abs(mixed).max() < 1.0


# -- 8. an extracted voice's language is not the dub's ---------------------------------------------------------------


def test_a_references_language_is_never_the_dubs(tmp_path):
    spanish = tmp_path / "es.srt"
    spanish.write_text("1\n00:00:00,500 --> 00:00:03,000\nALICE: Hola, ¿vamos a la costa?\n")
    extracted = tmp_path / "voices.toml"
    extracted.write_text(f'[ALICE]\naudio = "{ALICE}"\ntext = "{ALICE_TEXT}"\nreference_language = "en"\n')
    args = ["render", spanish, "--voices", extracted, "--model", "synthetic:tiny", "--dry-run", "--json"]
    result = run(*args)
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["lines"][0]["language"] is None  # spoken as its text reads, not as English
    assert "references speak en" in result.stderr and "--language" in result.stderr
    result = run(*args, "--language", "es")
    assert json.loads(result.stdout)["lines"][0]["language"] == "es" and "references speak" not in result.stderr
    own = tmp_path / "own.toml"  # a voices.toml's own language is the lines' language, as documented
    own.write_text(f'[ALICE]\naudio = "{ALICE}"\ntext = "{ALICE_TEXT}"\nlanguage = "en"\n')
    result = run("render", spanish, "--voices", own, "--model", "synthetic:tiny", "--dry-run", "--json")
    assert json.loads(result.stdout)["lines"][0]["language"] == "en"


def test_an_older_extracts_language_is_read_as_its_clips(tmp_path):
    from omnidub.voices import load_voices

    older = tmp_path / "voices.toml"  # as voices extract wrote it before reference_language
    older.write_text(
        "# Written by omnidub voices extract from ep.mkv; extract.json lists other candidates.\n"
        "# The language is the one spoken in the clips; give the dub's own with render --language.\n\n"
        f'[ALICE]\naudio = "{ALICE}"\ntext = "Hello."\nlanguage = "en"\n'
    )
    [voice] = load_voices(older, [], []).values()
    assert voice.language is None and voice.reference_language == "en" and voice.spoken == "en"


def test_voices_extract_writes_the_clips_language_as_reference_language():
    from types import SimpleNamespace

    from omnidub.source.report import voices_toml

    extraction = SimpleNamespace(
        chosen={"ALICE": SimpleNamespace(text="Hello there.", fallback=None)},
        missing={},
        analysis=SimpleNamespace(language="en"),
    )
    text = voices_toml(extraction, {"ALICE": "ALICE.wav"}, source="ep.mkv")
    assert 'reference_language = "en"' in text and "\nlanguage =" not in text


# -- 9. names that differ only in case -------------------------------------------------------------------------------


def test_labels_that_differ_only_in_case_are_one_speaker_said_once(tmp_path):
    from omnidub.script import read_script

    path = tmp_path / "case.srt"
    path.write_text(
        "1\n00:00:01,000 --> 00:00:02,000\nAnna: Hello.\n\n2\n00:00:03,000 --> 00:00:04,000\n"
        "ANNA: Hello again.\n\n3\n00:00:05,000 --> 00:00:06,000\n<v anna>And once more.\n"
    )
    script = read_script(path)
    assert {line.speaker for line in script.lines} == {"Anna"}
    said = [note for note in script.warnings if "differ only in case" in note]
    assert len(said) == 1 and "'ANNA' (cue 2)" in said[0] and "'anna' (cue 3)" in said[0]
    assert {line.speaker for line in read_script(path, speakers={"ANNA"}).lines} == {"ANNA"}  # the cast's spelling


def test_two_voices_that_differ_only_in_case_are_refused_and_a_flag_overrides_its_table(tmp_path):
    from omnidub.voices import load_voices

    toml = tmp_path / "voices.toml"
    toml.write_text(f'[Anna]\naudio = "{ALICE}"\ntext = "One."\n[ANNA]\naudio = "{ALICE}"\ntext = "Two."\n')
    script = tmp_path / "case.srt"
    script.write_text("1\n00:00:01,000 --> 00:00:02,000\nANNA: Hello.\n")
    line = one_error_line(run("render", script, "--voices", toml, "--model", "synthetic:tiny", "--dry-run"))
    assert "[Anna] and [ANNA] differ only in case" in line
    toml.write_text(f'[Anna]\naudio = "{ALICE}"\ntext = "One."\n')
    voices = load_voices(toml, [f"anna={EXAMPLES / 'voices' / 'bob.wav'}"], ["ANNA=Two."])
    assert list(voices) == ["Anna"] and voices["Anna"].audio.name == "bob.wav" and voices["Anna"].text == "Two."
    with pytest.raises(OmnidubError, match="name one speaker"):  # two flags, two spellings: one speaker, said
        load_voices(None, [f"Anna={ALICE}", f"ANNA={EXAMPLES / 'voices' / 'bob.wav'}"], [])


# -- 10. fractions of a second ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "written, seconds",
    [
        ("00:00:01,5", 1.5),
        ("00:00:01,5000", 1.5),
        ("00:00:01,50", 1.5),
        ("00:00:01.5", 1.5),
        ("00:00:01,250", 1.25),
        ("00:00:01", 1.0),
    ],
)
def test_srt_and_vtt_fractions_are_read_as_the_fraction_they_write(tmp_path, written, seconds):
    from omnidub.script import read_script

    srt_file = tmp_path / "in.srt"
    srt_file.write_text(f"1\n{written} --> 00:00:03,000\nALICE: Hello.\n")
    vtt_file = tmp_path / "in.vtt"
    vtt_file.write_text(f"WEBVTT\n\n{written.replace(',', '.')} --> 00:00:03.000\nALICE: Hello.\n")
    for path in (srt_file, vtt_file):
        assert read_script(path).lines[0].start == pytest.approx(seconds, abs=1e-6)


def test_a_fraction_at_the_next_second_names_the_true_cause(tmp_path):
    from omnidub.script import read_script

    path = tmp_path / "in.srt"
    path.write_text("1\n00:00:01,9999 --> 00:00:02,000\nALICE: Hello.\n\n2\n00:00:03,000 --> 00:00:04,000\nBOB: Hi.\n")
    script = read_script(path)  # 1.9999 s is 2.000 s to the millisecond: a cue of no length, not one "at 10.999"
    assert [line.speaker for line in script.lines] == ["BOB"] and "zero length" in script.skipped[0]


# -- 12. a prompt cache entry is what it was made for ----------------------------------------------------------------


def test_a_swapped_or_changed_prompt_entry_is_never_used(tmp_path):
    import io

    from omnidub.backends.base import PROMPT_FORMAT, Prompt
    from omnidub.voices import PromptCache

    cache = PromptCache(tmp_path)
    alice = Prompt(np.arange(16, dtype=np.int64).reshape(8, 2), "Alice's words.", 0.1, "en")
    bob = Prompt(np.arange(16, 32, dtype=np.int64).reshape(8, 2), "Bob's words.", 0.2, "en")
    cache.put("a" * 64, alice)
    cache.put("b" * 64, bob)
    assert cache.get("a" * 64).text == "Alice's words."
    a, b = cache.path("a" * 64), cache.path("b" * 64)
    swapped = a.read_bytes()
    a.write_bytes(b.read_bytes())
    b.write_bytes(swapped)
    assert cache.get("a" * 64) is None and "another voice" in cache.problems["a" * 64]
    forged = Prompt(bob.codes, "Alice's words.", 0.1, "en")  # another prompt's codes under Alice's own key
    buffer = io.BytesIO()
    meta = {
        "format": PROMPT_FORMAT,
        "text": forged.text,
        "rms": forged.rms,
        "language": "en",
        "made_for": "a" * 64,
        "sha256": alice.digest(),
    }
    np.savez(buffer, codes=forged.codes, meta=np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8))
    a.write_bytes(buffer.getvalue())
    assert cache.get("a" * 64) is None and "not what was stored" in cache.problems["a" * 64]


def test_a_render_after_prompts_were_swapped_keeps_each_speakers_voice(tmp_path, small, own_cache):
    script, args = small
    voices = [
        "--voice",
        f"ALICE={ALICE}",
        "--voice-text",
        f"ALICE={ALICE_TEXT}",
        "--voice",
        f"BOB={EXAMPLES / 'voices' / 'bob.wav'}",
        "--voice-text",
        "BOB=Well, I think we should leave on Friday. The weather looks better then, and the roads will be quiet.",
    ]
    args = voices + args[8:]
    out = tmp_path / "out"
    assert run("render", script, *args, "--out", out).exit_code == 0
    first = json.loads((out / "manifest.json").read_text())["voices"]
    prompts = own_cache / "prompts"
    a, b = (prompts / f"{first[name]['prompt_key']}.npz" for name in ("ALICE", "BOB"))
    swapped = a.read_bytes()
    a.write_bytes(b.read_bytes())
    b.write_bytes(swapped)
    result = run("render", script, *args, "--out", out, "--force")
    assert result.exit_code == 0, result.output
    assert "ALICE: its cached prompt cannot be used (it was made for another voice)" in result.stderr
    again = json.loads((out / "manifest.json").read_text())["voices"]
    assert again["ALICE"]["text"] == ALICE_TEXT and again["BOB"]["text"].startswith("Well, I think")


# -- 13. one line instead of a traceback -----------------------------------------------------------------------------


def test_paths_of_the_wrong_kind_are_one_line_before_the_model(tmp_path, small, monkeypatch):
    script, args = small
    out = tmp_path / "out"
    assert "--voices" in one_error_line(run("render", script, "--voices", tmp_path, "--model", "synthetic:tiny"))
    a_file = tmp_path / "cache-file"
    a_file.write_text("mine")
    for dry in ([], ["--dry-run"]):
        line = one_error_line(run("render", script, *args, "--out", out, "--cache", a_file, *dry))
        assert "--cache" in line and "is a file, not a folder" in line
    line = one_error_line(run("render", script, *args, "--out", out, "--cache", a_file / "below"))
    assert "--cache" in line and "cannot write there" in line
    import omnidub.files

    real = omnidub.files.tempfile.mkstemp
    read_only = tmp_path / "read-only"

    def refuse(*a, dir=None, **kw):
        if Path(dir) == read_only:
            raise OSError(errno.EROFS, "Read-only file system")
        return real(*a, dir=dir, **kw)

    monkeypatch.setattr(omnidub.files.tempfile, "mkstemp", refuse)
    line = one_error_line(run("render", script, *args, "--out", out, "--cache", read_only))
    assert "--cache" in line and "read-only file system" in line
    assert not out.exists() and not read_only.exists() and a_file.read_text() == "mine"
    folder = tmp_path / "bench.json"
    folder.mkdir()
    assert "is a folder" in one_error_line(run("bench", "--quick", "--rows", "1", "--json", folder))
    read_only.mkdir()
    line = one_error_line(run("bench", "--quick", "--rows", "1", "--json", read_only / "bench.json"))
    assert "cannot write there (read-only file system)" in line  # said before the bench, not after it


def test_only_never_builds_a_huge_range(tmp_path, small):
    from omnidub.plan import select_lines
    from omnidub.script import read_script

    script, args = small
    line = one_error_line(run("render", script, *args, "--only", "1-99999999999", "--dry-run"))
    assert "no line 4 in the script (its lines are 1-3)" in line
    lines = read_script(script)
    assert select_lines("2-3,1", lines) == {1, 2, 3}
    with pytest.raises(OmnidubError, match="no line"):
        select_lines("1-" + "9" * 5000, lines)  # past the 4,300 digits Python reads as a number


# -- 14. messages that name the real cause ---------------------------------------------------------------------------


def test_an_unknown_device_is_refused_everywhere_before_any_work(tmp_path, small):
    script, args = small
    args = [a if a != "cpu" else "tpu" for a in args]
    for dry in ([], ["--dry-run"]):
        assert "--device tpu: no such device" in one_error_line(
            run("render", script, *args, "--out", tmp_path / "o", *dry)
        )
    assert "--device tpu" in one_error_line(run("qa", tmp_path, "--device", "tpu"))
    source = tmp_path / "ep.wav"
    sf.write(str(source), np.zeros(16000, np.float32), 16000)
    line = one_error_line(
        run("voices", "extract", source, "--subs", script, "--device", "tpu", "--out", tmp_path / "v")
    )
    assert "--device tpu" in line and not (tmp_path / "v").exists()


@pytest.mark.parametrize(
    "data, expected",
    [
        (
            b"RIFF\x24\x00\x00\x00WAVEfmt \x10\x00\x00\x00\x01\x00\x01\x00\x80\xbb\x00\x00\xff\xfe\x80",
            "not a text file",
        ),
        (b"1\n00:00:01,000 --> 00:00:02,000\nHello\x00 there\n", "line 3: holds a NUL byte"),
        ("1\n00:00:01,000 --> 00:00:02,000\nHello there\n".encode("utf-16-le"), "UTF-16 without a byte-order mark"),
    ],
)
def test_a_nul_byte_is_said_for_what_it_is(tmp_path, data, expected):
    from omnidub.script import read_script

    path = tmp_path / "in.srt"
    path.write_bytes(data)
    with pytest.raises(OmnidubError, match=expected):
        read_script(path)


def test_a_voice_without_a_file_after_its_equals_sign_says_so(tmp_path, small):
    script, _ = small
    line = one_error_line(run("render", script, "--voice", "ALICE=", "--model", "synthetic:tiny", "--dry-run"))
    assert "no reference file after '='" in line and "is a folder" not in line


def test_qa_refusing_a_users_report_offers_no_flag_it_lacks(tmp_path, small):
    script, args = small
    out = tmp_path / "out"
    assert run("render", script, *args, "--out", out).exit_code == 0
    (out / "qa.json").write_text('{"mine": true}')
    line = one_error_line(run("qa", out, "--speaker-model", "none", "--asr-model", tmp_path / "no-asr-needed"))
    assert "qa.json is in the way" in line and "--out" not in line
    assert (out / "qa.json").read_text() == '{"mine": true}'


def test_render_qa_says_a_users_report_is_in_the_way_before_rendering(tmp_path, small):
    script, args = small
    out = tmp_path / "out"
    out.mkdir()
    (out / "qa.json").write_text('{"mine": true}')
    line = one_error_line(
        run("render", script, *args, "--out", out, "--allow-other-files", "--qa", "--speaker-model", "none")
    )
    assert "qa.json is in the way" in line
    assert sorted(p.name for p in out.iterdir()) == ["qa.json"]  # nothing rendered, nothing left behind


def test_a_preset_that_is_a_folder_is_called_a_folder(tmp_path, small):
    script, args = small
    line = one_error_line(run("render", script, *args[:-2], "--preset", tmp_path, "--dry-run"))
    assert f"--preset {tmp_path} is a folder" in line


def test_an_input_whose_stem_collides_keeps_the_folder_of_its_render(tmp_path, small):
    script, args = small
    (tmp_path / "a").mkdir()
    srt_file, vtt_file = tmp_path / "a" / "ep.srt", tmp_path / "a" / "ep.vtt"
    srt_file.write_text(SMALL_SRT)
    vtt_file.write_text("WEBVTT\n\n00:00:00.300 --> 00:00:02.500\nALICE: Hello there.\n")
    assert run("render", srt_file, *args, "--out", tmp_path / "out" / "ep").exit_code == 0
    result = run("render", srt_file, vtt_file, *args, "--out", tmp_path / "out", "--dry-run", "--json")
    assert result.exit_code == 0, result.output
    plans = {Path(p["input"]).name: p for p in json.loads(result.stdout)["inputs"]}
    assert Path(plans["ep.srt"]["out_dir"]).name == "ep" and Path(plans["ep.vtt"]["out_dir"]).name == "ep-vtt"
    assert all(line["status"] == "cached" for line in plans["ep.srt"]["lines"])  # nothing renders again
    assert f"which keeps {tmp_path / 'out' / 'ep'}" in result.stderr


def test_a_heavily_clipped_reference_gets_a_note(tmp_path):
    from omnidub.config import VoiceOptions
    from omnidub.voices import Voice, check_reference

    audio, rate = sf.read(str(ALICE), dtype="float32")
    clipped = tmp_path / "clipped.wav"
    sf.write(str(clipped), np.clip(audio / np.abs(audio).max() * 3, -1, 1), rate, subtype="PCM_16")
    loud = tmp_path / "loud.wav"  # normalised to full scale, but not clipped
    sf.write(str(loud), audio / np.abs(audio).max(), rate, subtype="PCM_16")
    notes = {
        path.name: check_reference(
            Voice("ALICE", path, ALICE_TEXT, "en", None, None), options=VoiceOptions(), asr_available=False
        )
        for path in (clipped, loud)
    }
    assert any("reference is clipped" in note for note in notes["clipped.wav"])
    assert not any("clipped" in note for note in notes["loud.wav"])


def test_clips_hold_no_write_time_so_the_same_samples_are_the_same_bytes():
    import io

    from omnidub.source.audio import wav_bytes

    samples = np.linspace(-1.5, 1.5, 4001, dtype=np.float32)  # float clips keep even samples past full scale
    data = wav_bytes(samples, 16000, subtype="FLOAT")
    assert b"PEAK" not in data and data == wav_bytes(samples, 16000, subtype="FLOAT")
    read, rate = sf.read(io.BytesIO(data), dtype="float32")
    assert rate == 16000 and np.array_equal(read, samples)
