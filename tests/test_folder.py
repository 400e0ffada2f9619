"""The output folder's state: one owner per file, nothing replaced that omnidub did not write, outputs that are
always one whole generation, and runs (render, QA) that keep out of each other."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import EXAMPLES
from typer.testing import CliRunner

from omnidub.cli import app
from omnidub.files import FolderLock
from omnidub.journal import read_entries

runner = CliRunner()
ALICE_TEXT = "Good morning, everyone. Thanks for coming in early. I know the traffic was terrible today."


def run(*args, **kwargs):
    return runner.invoke(app, [*map(str, args)], **kwargs)


def statuses(out: Path) -> list[str]:
    latest = {e.index: e.status for e in read_entries(out)}
    return [latest[i] for i in sorted(latest)]


def outputs(out: Path) -> dict[str, bytes]:
    return {
        p.relative_to(out).as_posix(): p.read_bytes()
        for p in sorted(out.rglob("*"))
        if p.suffix == ".wav" and ".omnidub" not in p.parts
    }


@pytest.fixture(scope="module")
def small(tmp_path_factory, tiny_model_dir):
    """A two-speaker, three-line script, voices kept whole (no ASR needed), 2 steps: a cheap real render."""
    folder = tmp_path_factory.mktemp("small")
    script = folder / "three.txt"
    script.write_text("ALICE: One.\nBOB: Two words.\nALICE: And three.\n")
    preset = folder / "preset.toml"
    preset.write_text("reference_seconds = 0\nsteps = 2\n")
    args = [
        "--voice",
        f"ALICE={EXAMPLES / 'voices' / 'alice.wav'}",
        "--voice-text",
        f"ALICE={ALICE_TEXT}",
        "--voice",
        f"BOB={EXAMPLES / 'voices' / 'alice.wav'}",
        "--voice-text",
        f"BOB={ALICE_TEXT}",
        "--model",
        "synthetic:tiny",
        "--preset",
        preset,
    ]
    return script, args


@pytest.fixture(scope="module")
def first(small, tmp_path_factory) -> Path:
    script, args = small
    out = tmp_path_factory.mktemp("first") / "out"
    result = run("render", script, *args, "--out", out)
    assert result.exit_code == 0, result.output
    return out


def test_a_finished_render_leaves_no_lock_behind(first):
    assert not (first / ".omnidub" / "lock").exists() and not (first / ".omnidub.lock").exists()


def test_a_render_that_fails_before_writing_leaves_no_folder_behind(small, tmp_path):
    script, args = small
    silent = tmp_path / "silent.wav"
    import numpy as np
    import soundfile as sf

    sf.write(silent, np.zeros(48000, np.float32), 24000)
    out = tmp_path / "new" / "out"
    result = run("render", script, *args, "--voice", f"ALICE={silent}", "--out", out)
    assert result.exit_code == 2 and "silent" in result.stderr, result.output
    assert not (tmp_path / "new").exists()


def test_truncated_or_emptied_outputs_are_assembled_again(small, first, tmp_path):
    script, args = small
    out = tmp_path / "out"
    shutil.copytree(first, out)
    before = outputs(out)
    mix = out / "mix.wav"
    mix.write_bytes(mix.read_bytes()[: len(mix.read_bytes()) // 6])
    (out / "stems" / "BOB.wav").write_bytes(b"")
    result = run("render", script, *args, "--out", out)
    assert result.exit_code == 0 and "up to date" not in result.stderr, result.output
    assert set(statuses(out)) == {"cached"}
    # Nothing is lost: the damaged files were moved aside (they had changed since omnidub wrote them).
    aside = {p.name for p in out.rglob("*.changed-*")}
    assert {name.split(".changed-")[0] for name in aside} == {"mix", "BOB"}
    assert {k: v for k, v in outputs(out).items() if ".changed-" not in k} == before


class Killed(Exception):
    """The process ending mid-write, as far as what is on disk can tell."""


def test_a_crash_during_assembly_never_leaves_a_mixed_generation(small, first, tmp_path, monkeypatch):
    from omnidub.outputs import writers

    script, args = small
    out = tmp_path / "out"
    shutil.copytree(first, out)
    before = outputs(out)
    real = writers.AudioWriter.write

    def killed_after_writing(self, programme, done):
        real(self, programme, done)
        raise Killed  # killed once the stems and mix of the new generation are written

    monkeypatch.setattr(writers.AudioWriter, "write", killed_after_writing)
    with pytest.raises(Killed):
        run("render", script, *args, "--out", out, "--loudness", "-16", catch_exceptions=False)
    assert outputs(out)["mix.wav"] != before["mix.wav"]
    assert json.loads((out / "manifest.json").read_text())["assembly"] is None
    monkeypatch.setattr(writers.AudioWriter, "write", real)
    # Back to the old options: the files on disk are of the newer, unfinished generation, so they are redone.
    result = run("render", script, *args, "--out", out)
    assert result.exit_code == 0 and "up to date" not in result.stderr, result.output
    assert outputs(out) == before


def test_qa_waits_for_a_render_and_a_render_for_qa(small, first):
    script, args = small
    lock = FolderLock(first / ".omnidub" / "lock")
    assert lock.acquire()  # as a render holds it
    try:
        result = run("qa", first, "--asr-model", first / "no-such-model", "--speaker-model", "none")
        assert result.exit_code == 2 and "a render is running in" in result.stderr, result.output
    finally:
        lock.release()
    assert lock.acquire(shared=True)  # as QA holds it
    try:
        result = run("render", script, *args, "--out", first)
        assert result.exit_code == 2 and "in use by omnidub qa" in result.stderr, result.output
    finally:
        lock.release()


def test_a_new_layout_measurement_never_changes_a_rendered_project(small, first, tmp_path, monkeypatch):
    from omnidub import measured

    script, args = small
    out = tmp_path / "out"
    shutil.copytree(first, out)
    recorded = json.loads((out / "manifest.json").read_text())["settings"]["cfg"]
    other = next(layout for layout in ("packed", "trimmed") if layout != recorded)
    monkeypatch.setenv("OMNIDUB_CACHE", str(tmp_path / "cache"))
    found = {"choice": other, "seconds": {other: 1.0, recorded: 2.0}, "evidence": "a bench", "measured_at": "now"}
    monkeypatch.setattr(measured, "layout_choice", lambda *args, **kwargs: found)  # a bench found another faster
    result = run("render", script, *args, "--out", out)
    assert result.exit_code == 0, result.output
    assert set(statuses(out)) == {"cached"}
    assert json.loads((out / "manifest.json").read_text())["settings"]["cfg"] == recorded
    # Asked for by name, the other layout renders every line again.
    result = run("render", script, *args, "--out", out, "--cfg", other)
    assert result.exit_code == 0, result.output
    assert set(statuses(out)) == {"rendered"}


def test_a_damaged_entry_in_a_shared_cache_is_caught_by_another_input(tiny_model_dir, tmp_path):
    from test_job import SCENE_A, SCENE_B

    a, b = tmp_path / "scene_a.srt", tmp_path / "scene_b.vtt"
    a.write_text(SCENE_A)
    b.write_text(SCENE_B)
    args = ["--voices", EXAMPLES / "voices.toml", "--model", "synthetic:tiny", "--asr-model", tmp_path / "none"]
    cache = tmp_path / "cache"
    assert run("render", a, *args, "--out", tmp_path / "a", "--cache", cache).exit_code == 0
    shared = json.loads((tmp_path / "a" / "manifest.json").read_text())["lines"][1]["key"]  # BOB's line
    [entry] = cache.glob(f"{shared}.*.wav")
    flipped = bytearray(entry.read_bytes())
    flipped[2000:3000] = bytes(x ^ 0xFF for x in flipped[2000:3000])
    entry.write_bytes(bytes(flipped))
    result = run("render", b, *args, "--out", tmp_path / "b", "--cache", cache)
    assert result.exit_code == 0, result.output
    assert statuses(tmp_path / "b") == ["rendered", "rendered"] and "its cached audio is damaged" in result.stderr
    # What it made equals a render that never met the damaged entry.
    assert run("render", b, *args, "--out", tmp_path / "clean").exit_code == 0
    assert outputs(tmp_path / "b") == outputs(tmp_path / "clean")


def test_a_folder_rendered_before_the_ledger_is_taken_over_by_its_own_records(small, first, tmp_path):
    script, args = small
    out = tmp_path / "older"
    shutil.copytree(first, out)
    # As an omnidub without a ledger left it: no state folder, the lock beside the outputs, a user's file.
    shutil.rmtree(out / ".omnidub")
    (out / ".omnidub.lock").write_text("pid 1 on elsewhere: omnidub render three.txt\n")
    (out / "notes.txt").write_text("mine")
    result = run("render", script, *args, "--out", out)
    assert result.exit_code == 0, result.output
    assert set(statuses(out)) == {"cached"}  # its segments' recorded hashes vouch for them: nothing renders
    assert not (out / ".omnidub.lock").exists() and (out / "notes.txt").read_text() == "mine"
    # A manifest whose records match none of the files vouches for nothing: the folder is someone else's.
    other = tmp_path / "forged"
    shutil.copytree(first, other)
    shutil.rmtree(other / ".omnidub")
    for segment in (other / "segments").iterdir():
        segment.write_bytes(b"not what the manifest recorded")
    result = run("render", script, *args, "--out", other)
    assert result.exit_code == 2 and "manifest.json that omnidub did not write" in result.stderr


def test_a_kill_while_the_manifest_was_being_written_leaves_a_folder_the_next_run_takes(small, first, tmp_path):
    from omnidub.folder import Ledger

    script, args = small
    out = tmp_path / "out"
    shutil.copytree(first, out)
    Ledger(out / ".omnidub" / "ledger.jsonl").intend("manifest.json")  # announced, then killed before recording
    result = run("render", script, *args, "--out", out)
    assert result.exit_code == 0, result.output
    assert set(statuses(out)) == {"cached"}


def test_every_edl_a_timeline_writes_is_known_before_anything_renders(tmp_path):
    from omnidub.outputs.deliver import DeliveryOptions
    from omnidub.outputs.mix import Placement
    from omnidub.outputs.writers import Programme, TimelineWriter

    # ALICE speaks over herself (two lanes); "A B" and "A_B" clean to the same name.
    placements = [
        Placement(tmp_path / f"{i}.wav", start, who, 2.0, "text", i)
        for i, (start, who) in enumerate([(0.0, "ALICE"), (1.0, "ALICE"), (4.0, "A B"), (6.0, "A_B")], 1)
    ]
    for p in placements:
        import numpy as np
        import soundfile as sf

        sf.write(p.path, np.zeros(48000, np.float32), 24000)
    options = DeliveryOptions(timelines=("edl",))
    programme = Programme(tmp_path, placements, {}, 8.0, 25.0, options, "dub")
    announced = TimelineWriter().paths(programme)
    written = TimelineWriter().write(programme, {}).files
    assert sorted(written) == sorted(announced) and len(set(announced)) == 4
    assert sorted(p.name for p in tmp_path.glob("*.edl")) == sorted(announced)
