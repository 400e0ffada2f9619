"""What a new user and a fault hunt run into: help, usage errors, file modes, someone else's folder, a full or
read-only disk, two runs at once, debris of a killed run, --only, and a dry run that matches the render."""

from __future__ import annotations

import contextlib
import json
import os
import re
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import soundfile as sf
from conftest import EXAMPLES, ROOT
from typer.testing import CliRunner

from omnidub.cli import app
from omnidub.files import _HOST, FolderLock, write_text_atomic

runner = CliRunner()
ALICE_TEXT = "Good morning, everyone. Thanks for coming in early. I know the traffic was terrible today."


def run(*args, env=None):
    return runner.invoke(app, [str(a) for a in args], catch_exceptions=False, env=env)


def one_error_line(result) -> str:
    assert result.exit_code == 2, result.output
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:"), result.stderr
    return lines[0]


def last_error_line(result) -> str:
    """A failure after progress was shown: exit 2, and one error line at the end, no traceback."""
    assert result.exit_code == 2, result.output
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert lines[-1].startswith("error:") and sum(line.startswith("error:") for line in lines) == 1, result.stderr
    assert "Traceback" not in result.output
    return lines[-1]


def manifest(out: Path) -> dict:
    return json.loads((out / "manifest.json").read_text())


@pytest.fixture(scope="module")
def small(tmp_path_factory, tiny_model_dir):
    """A three-line script, one voice kept whole (no ASR needed), 2 steps: the cheapest real render."""
    folder = tmp_path_factory.mktemp("small")
    script = folder / "three.txt"
    script.write_text("ALICE: One.\nALICE: Two words.\nALICE: And three.\n")
    preset = folder / "preset.toml"
    preset.write_text("reference_seconds = 0\nsteps = 2\n")
    args = [
        "--voice",
        EXAMPLES / "voices" / "alice.wav",
        "--voice-text",
        ALICE_TEXT,
        "--model",
        "synthetic:tiny",
        "--preset",
        preset,
    ]
    return script, args


# -- the command line -------------------------------------------------------------------------------------------


def test_help_at_80_columns_shows_defaults_flags_and_examples_unbroken():
    result = run("render", "--help", env={"COLUMNS": "80"})
    assert result.exit_code == 0
    text = result.stdout
    assert all(len(line) <= 80 for line in text.splitlines()), text
    assert re.search(r"Usage: .* render \[OPTIONS\] INPUT\.\.\.\s*$", text.splitlines()[0]), text.splitlines()[0]
    assert "{input}" not in text and "<bool>" not in text
    assert re.search(r"^  --force\s{2,}Render every line", text, re.M)  # a flag takes no value
    flat = " ".join(text.split())
    for shown in (
        "[default: fast]",
        "[default: output/<input stem>]",
        "[default: 0]",
        "[default: auto",
        "[default: the voice's language]",
        "[default: small on CPU, large-v3 on CUDA]",
        "--cfg auto|padded|trimmed|packed",
        "--dtype auto|float32|bfloat16|float16",
        "--only LINES",
        "Examples:",
        "omnidub render episode.srt --voices voices.toml --only 3,8-10",
    ):
        assert shown in flat, shown
    qa_help = " ".join(run("qa", "--help", env={"COLUMNS": "80"}).stdout.split())
    assert "--max-wer X" in qa_help and "[default: the render's preset, else 0.2]" in qa_help


@pytest.mark.parametrize("command", ["render", "qa", "bench", "export"])
def test_every_command_help_fits_80_columns_without_typer_placeholders(command):
    result = run(command, "--help", env={"COLUMNS": "80"})
    assert result.exit_code == 0
    assert all(len(line) <= 80 for line in result.stdout.splitlines()), result.stdout
    assert "<bool>" not in result.stdout and "{" not in result.stdout.splitlines()[0]


@pytest.mark.parametrize(
    "args, expected",
    [
        (["--dry-run", "true"], "take no value"),
        (["--format", "ogg"], "'ogg' is not one of"),
        (["--steps", "0"], "--steps"),
        (["--no-such-option"], "No such option"),
    ],
)
def test_usage_errors_are_one_line_and_exit_2(args, expected):
    line = one_error_line(run("render", EXAMPLES / "dialogue.srt", *args))
    assert expected in line


def test_bundled_examples_have_their_own_default_folders(tmp_path, monkeypatch):
    from omnidub.inputs import default_out_dir

    monkeypatch.chdir(tmp_path)
    examples = sorted(p for p in EXAMPLES.iterdir() if p.suffix in (".srt", ".vtt", ".txt"))
    assert len(examples) >= 2
    assert len({default_out_dir(p) for p in examples}) == len(examples)


# -- files ----------------------------------------------------------------------------------------------------


@contextlib.contextmanager
def umask(mask: int):
    old = os.umask(mask)
    try:
        yield
    finally:
        os.umask(old)


def test_atomic_writes_respect_the_umask(tmp_path):
    for mask, mode in ((0o022, 0o644), (0o027, 0o640), (0o002, 0o664)):
        target = tmp_path / f"file-{mask:o}.json"
        with umask(mask):
            write_text_atomic(target, "{}")
        assert stat.S_IMODE(target.stat().st_mode) == mode


def test_every_output_of_a_render_is_readable_by_others_under_umask_022(tmp_path, small):
    script, args = small
    out = tmp_path / "out"
    with umask(0o022):
        result = run("render", script, *args, "--out", out)
    assert result.exit_code == 0, result.output
    files = [p for p in out.rglob("*") if p.is_file()]
    assert len(files) >= 7
    assert {p.relative_to(out).as_posix(): oct(stat.S_IMODE(p.stat().st_mode)) for p in files} == {
        p.relative_to(out).as_posix(): "0o644" for p in files
    }


# -- someone else's folder, debris, locks --------------------------------------------------------------------------


def _user_files(folder: Path) -> dict[str, bytes]:
    files = {
        "stems/interview.wav": b"RIFF a user's interview",
        "stems/music.flac": b"fLaC music",
        "mix.mp3": b"ID3 mix",
        "qa.html": b"<html>my notes</html>",
        "notes.txt": b"do not touch",
        "segments/0001-ALICE.txt": b"mine",
    }
    for name, data in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(data)
    return files


def test_a_folder_of_someone_elses_files_is_refused_and_with_allow_other_files_left_intact(tmp_path, small):
    script, args = small
    out = tmp_path / "theirs"
    files = _user_files(out)
    line = one_error_line(run("render", script, *args, "--out", out))
    assert "did not write" in line and "--allow-other-files" in line
    assert not (out / "manifest.json").exists() and not (out / ".omnidub").exists()

    assert run("render", script, *args, "--out", out, "--allow-other-files").exit_code == 0
    # A rerun in another format replaces omnidub's own stems and mix, and still touches nothing else.
    result = run("render", script, *args, "--out", out, "--format", "flac")
    assert result.exit_code == 0, result.output
    assert {name: (out / name).read_bytes() for name in files} == files
    assert not (out / "mix.wav").exists() and not (out / "stems" / "ALICE.wav").exists()
    assert (out / "mix.flac").is_file() and (out / "stems" / "ALICE.flac").is_file()
    # --force renders again; it never makes a user's file omnidub's to replace.
    (out / "mix.wav").write_bytes(b"RIFF the user's own mix")
    line = one_error_line(run("render", script, *args, "--out", out, "--force"))
    assert "mix.wav is in the way" in line and "did not write" in line
    assert (out / "mix.wav").read_bytes() == b"RIFF the user's own mix"


def test_a_web_apps_manifest_and_journal_are_never_taken_for_a_render(tmp_path, small):
    script, args = small
    out = tmp_path / "site"
    out.mkdir()
    (out / "manifest.json").write_text('{"name": "my app", "stems": {"A": "notes.txt"}, "mix": "notes.txt"}')
    (out / "journal.jsonl").write_text('{"event": "login"}\n')
    (out / "notes.txt").write_text("mine")
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    for extra in ([], ["--allow-other-files"], ["--force"]):
        line = one_error_line(run("render", script, *args, "--out", out, *extra))
        assert "manifest.json that omnidub did not write" in line
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before


def test_another_inputs_folder_is_refused_whichever_way_it_is_named(tmp_path, small, monkeypatch):
    script, args = small
    monkeypatch.chdir(tmp_path)
    assert run("render", script, *args).exit_code == 0  # output/three
    other = tmp_path / "other" / "three.txt"
    other.parent.mkdir()
    other.write_text("ALICE: Something else.\n")
    before = {p: p.read_bytes() for p in (tmp_path / "output" / "three").rglob("*") if p.is_file()}
    for extra in ([], ["--out", "output/three"]):
        line = one_error_line(run("render", other, *args, *extra))
        assert "holds a render of" in line and str(script) in line and "--out" in line
    assert {p: p.read_bytes() for p in (tmp_path / "output" / "three").rglob("*") if p.is_file()} == before
    # Once the first input is gone (renamed, moved), its folder is free again.
    moved = tmp_path / "moved.txt"
    script.rename(moved)
    try:
        assert run("render", other, *args).exit_code == 0
    finally:
        moved.rename(script)


def test_debris_of_a_killed_write_is_removed_at_the_next_start(tmp_path, small):
    script, args = small
    out = tmp_path / "out"
    assert run("render", script, *args, "--out", out).exit_code == 0
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    debris = [
        out / "stems" / f".ALICE.wav.{_HOST}-{dead.pid}-k1ll3d_x.tmp",
        out / f".manifest.json.{_HOST}-{dead.pid}-abcd1234.tmp",
        out / "segments" / f".0001-ALICE.wav.{_HOST}-{dead.pid}-zz99zz99.tmp",
    ]
    for path in debris:
        path.write_bytes(b"torn")
    # Names without a writer's host and pid are not omnidub's temporaries, however close their shape.
    keep = [
        out / "stems" / ".my-notes.tmp",
        out / ".session.autosave.tmp",
        out / ".backup.20241201.tmp",
        out / "stems" / ".ALICE.wav.mixdown1.tmp",
        out / "segments" / f".0002-BOB.wav.{dead.pid}-abcdefgh.tmp",
    ]
    for path in keep:
        path.write_bytes(b"mine")
    result = run("render", script, *args, "--out", out)  # without --allow-other-files: they are not strangers here
    assert result.exit_code == 0, result.output
    assert not any(p.exists() for p in debris) and all(p.read_bytes() == b"mine" for p in keep)
    assert "removed 3 temporary file(s)" in result.stderr


def test_a_second_run_on_a_locked_folder_names_the_holder_and_exits_2(tmp_path, small):
    script, args = small
    out = tmp_path / "out"
    out.mkdir()
    holder = FolderLock(out / ".omnidub" / "lock")
    (out / ".omnidub").mkdir()
    assert holder.acquire()
    try:
        line = one_error_line(run("render", script, *args, "--out", out))
        assert "in use by another omnidub run" in line and f"pid {os.getpid()}" in line
        assert run("render", script, *args, "--out", out, "--dry-run").exit_code == 0  # a plan only reads
    finally:
        holder.release()
    assert run("render", script, *args, "--out", out).exit_code == 0


@contextlib.contextmanager
def tmpfs(path: Path, options: str):
    path.mkdir(parents=True, exist_ok=True)
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(path)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode().strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="mounting a small disk needs root")
def test_a_full_disk_is_one_line_keeps_finished_lines_and_a_rerun_completes(tmp_path, small):
    script, args = small
    with tmpfs(tmp_path / "disk", "size=4m") as disk:
        filler = disk / "filler"
        # Leave room for about two lines, not for the stems and the mix.
        filler.write_bytes(b"\0" * (4096 - 420) * 1024)
        out = disk / "out"
        first = run("render", script, *args, "--out", out)
        line = last_error_line(first)
        assert "no space left" in line and "rerun" in line
        kept = {p.name: p.read_bytes() for p in (out / ".omnidub" / "cache").glob("*.wav")}
        assert kept  # lines finished before the disk filled are still there
        filler.unlink()
        second = run("render", script, *args, "--out", out)
        assert second.exit_code == 0, second.output
        data = manifest(out)
        assert [line["status"] for line in data["lines"]].count("cached") >= len(kept)
        assert all(p.read_bytes() == kept[p.name] for p in (out / ".omnidub" / "cache").glob("*.wav") if p.name in kept)
        assert sf.info(str(out / data["mix"])).duration == pytest.approx(data["program_seconds"], abs=1e-3)
        assert not list(out.rglob(".*.tmp"))


def test_a_read_only_output_folder_is_one_line(tmp_path, small):
    script, args = small
    out = tmp_path / "ro"
    if os.geteuid() == 0:
        context = tmpfs(out, "ro,size=64k")
    else:
        out.mkdir()
        out.chmod(0o555)
        context = contextlib.nullcontext(out)
    with context:
        line = one_error_line(run("render", script, *args, "--out", out))
        assert "cannot write" in line and str(out) in line


# -- what a run renders and plans -------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def example_args(tiny_model_dir, whisper_tiny_en):
    return [
        "--voices",
        EXAMPLES / "voices.toml",
        "--model",
        "synthetic:tiny",
        "--asr-model",
        whisper_tiny_en,
        "--steps",
        "2",
    ]


def test_only_renders_the_chosen_lines_and_leaves_the_rest_for_later(tmp_path, example_args):
    out = tmp_path / "only"
    result = run("render", EXAMPLES / "dialogue.srt", *example_args, "--out", out, "--only", "3,8-10", "--json")
    assert result.exit_code == 0, result.output
    status = {line["index"]: line["status"] for line in manifest(out)["lines"]}
    assert {i for i, s in status.items() if s == "rendered"} == {3, 8, 9, 10}
    assert {i for i, s in status.items() if s == "pending"} == {1, 2, 4, 5, 6, 7, 11}
    assert json.loads(result.stdout)["pending"] == [1, 2, 4, 5, 6, 7, 11]
    assert "left out of the stems" in result.stderr and "1-2, 4-7, 11" in result.stderr
    assert any("--only" in note for note in manifest(out)["notes"])
    assert sorted(p.name[:4] for p in (out / "segments").iterdir()) == ["0003", "0008", "0009", "0010"]

    plan = run("render", EXAMPLES / "dialogue.srt", *example_args, "--out", out, "--only", "1", "--dry-run", "--json")
    planned = {line["index"]: line["status"] for line in json.loads(plan.stdout)["lines"]}
    assert planned[1] == "render" and planned[3] == "cached" and planned[2] == "pending"

    again = run("render", EXAMPLES / "dialogue.srt", *example_args, "--out", out, "--only", "1", "--json")
    assert again.exit_code == 0, again.output
    status = {line["index"]: line["status"] for line in manifest(out)["lines"]}
    assert status[1] == "rendered" and all(status[i] == "cached" for i in (3, 8, 9, 10)) and status[2] == "pending"
    assert "no line 12" in one_error_line(
        run("render", EXAMPLES / "dialogue.srt", *example_args, "--only", "12", "--dry-run")
    )


def test_dry_run_of_an_untimed_script_plans_what_the_render_did(tmp_path, example_args):
    out = tmp_path / "script"
    assert run("render", EXAMPLES / "script.txt", *example_args, "--out", out).exit_code == 0
    plan = run("render", EXAMPLES / "script.txt", *example_args, "--out", out, "--dry-run", "--json")
    assert plan.exit_code == 0, plan.output
    planned = json.loads(plan.stdout)
    assert planned["estimated"] is False
    fields = ("index", "start", "end", "target", "natural", "speed", "limit_at", "flags", "key")
    rendered = [{k: line[k] for k in fields} for line in manifest(out)["lines"]]
    assert [{k: line[k] for k in fields} for line in planned["lines"]] == rendered
    assert all(line["status"] == "cached" for line in planned["lines"])


def test_without_an_asr_model_the_untrimmed_samples_are_said_once_and_recorded(tmp_path, tiny_model_dir):
    out = tmp_path / "no-asr"
    result = run(
        "render",
        EXAMPLES / "script.txt",
        "--voices",
        EXAMPLES / "voices.toml",
        "--model",
        "synthetic:tiny",
        "--steps",
        "2",
        "--asr-model",
        tmp_path / "no-whisper-here",
        "--out",
        out,
        "--only",
        "1-2",
    )
    assert result.exit_code == 0, result.output
    said = [line for line in result.stderr.splitlines() if "no ASR model" in line]
    assert len(said) == 1 and "ALICE, BOB" in said[0], result.stderr
    assert not [line for line in result.stderr.splitlines() if line.startswith(("note: ALICE", "note: BOB"))]
    notes = manifest(out)["notes"]
    assert any("no ASR model" in note and "ALICE, BOB" in note for note in notes)
    assert all("kept whole" in v["prepared"] for v in manifest(out)["voices"].values())


def test_version_runs_as_the_installed_command():
    result = subprocess.run([sys.executable, "-m", "omnidub", "--version"], capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 0 and result.stdout.startswith("omnidub ")
