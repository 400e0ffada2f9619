"""Many inputs in one render: one model, one folder per input, bad inputs reported, a shared line cache."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import EXAMPLES
from typer.testing import CliRunner

from omnidub.cli import app
from omnidub.inputs import unique_names
from omnidub.journal import read_entries

runner = CliRunner()

SCENE_A = """1
00:00:00,300 --> 00:00:02,600
ALICE: Did you bring the map this time?

2
00:00:03,000 --> 00:00:07,000
BOB: It is in the car, under the seat.
"""

SCENE_B = """WEBVTT

00:00:00.200 --> 00:00:04.200
<v BOB>It is in the car, under the seat.

00:00:04.500 --> 00:00:06.500
<v ALICE>Then we are not lost at all.
"""


def render(*args):
    return runner.invoke(app, ["render", *map(str, args)], catch_exceptions=False)


@pytest.fixture()
def scenes(tmp_path) -> tuple[Path, Path]:
    a, b = tmp_path / "in" / "scene_a.srt", tmp_path / "in" / "scene_b.vtt"
    a.parent.mkdir()
    a.write_text(SCENE_A)
    b.write_text(SCENE_B)
    return a, b


@pytest.fixture(scope="module")
def args(tiny_model_dir, whisper_tiny_en):
    return ["--voices", EXAMPLES / "voices.toml", "--model", "synthetic:tiny", "--asr-model", whisper_tiny_en]


def wavs(folder: Path) -> dict[str, bytes]:
    return {
        p.relative_to(folder).as_posix(): p.read_bytes()
        for p in sorted(folder.rglob("*.wav"))
        if ".omnidub" not in p.parts
    }


def statuses(folder: Path) -> list[str]:
    latest = {e.index: e.status for e in read_entries(folder)}
    return [latest[i] for i in sorted(latest)]


def test_inputs_share_one_model_keep_their_folders_and_a_bad_input_is_reported(scenes, args, tmp_path, monkeypatch):
    from omnidub.backends.torch import upstream

    a, b = scenes
    bad = tmp_path / "in" / "broken.srt"
    bad.write_text("1\n00:00:05,000 --> 00:00:01,000\nALICE: Backwards.\n")
    single = tmp_path / "single"
    assert render(a, *args, "--out", single).exit_code == 0

    loads = []
    load_model = upstream.load_model
    monkeypatch.setattr(upstream, "load_model", lambda *a, **k: loads.append(1) or load_model(*a, **k))
    out = tmp_path / "season"
    result = render(a, bad, b, *args, "--out", out)
    assert result.exit_code == 1, result.output
    assert len(loads) == 1  # one resident model for every input
    assert "broken.srt" in result.stderr and "before it starts" in result.stderr
    assert sorted(p.name for p in out.iterdir()) == ["scene_a", "scene_b"]
    for name in ("scene_a", "scene_b"):
        assert statuses(out / name) == ["rendered", "rendered"]
        assert (out / name / "mix.wav").is_file()
    # The same line key (BOB's line, same text and length in both scenes) renders once and serves both.
    a_lines = json.loads((out / "scene_a" / "manifest.json").read_text())["lines"]
    b_lines = json.loads((out / "scene_b" / "manifest.json").read_text())["lines"]
    assert a_lines[1]["key"] == b_lines[0]["key"]
    assert (out / "scene_a" / a_lines[1]["file"]).read_bytes() == (out / "scene_b" / b_lines[0]["file"]).read_bytes()
    # An input rendered with others comes out as it does alone.
    assert wavs(out / "scene_a") == wavs(single)


def test_nothing_that_can_start_is_exit_2(tmp_path, args):
    empty, other = tmp_path / "empty.srt", tmp_path / "notes.doc"
    empty.write_text("")
    other.write_text("ALICE: Hello.")
    result = render(empty, other, *args, "--out", tmp_path / "out")
    assert result.exit_code == 2
    assert "empty.srt" in result.stderr and "notes.doc" in result.stderr and "Traceback" not in result.output
    missing = render(empty, tmp_path / "missing.vtt", *args, "--out", tmp_path / "out")
    assert missing.exit_code == 2 and "missing.vtt: no such file" in missing.stderr


def test_a_folder_stands_for_its_inputs_and_colliding_names_are_made_unique(tmp_path, args):
    for episode in ("ep1", "ep2"):
        (tmp_path / episode).mkdir()
        (tmp_path / episode / "en.srt").write_text(SCENE_A)
        (tmp_path / episode / "notes.md").write_text("not an input")
    result = render(
        tmp_path / "ep1", tmp_path / "ep2" / "en.srt", *args, "--out", tmp_path / "out", "--dry-run", "--json"
    )
    assert result.exit_code == 0, result.output
    plans = json.loads(result.stdout)["inputs"]
    assert [Path(p["out_dir"]).name for p in plans] == ["ep1-en", "ep2-en"]
    assert all(len(p["lines"]) == 2 for p in plans)
    assert "ep1-en" in result.stderr and "'en' is shared with" in result.stderr
    assert unique_names([Path("a/x.srt"), Path("a/x.txt"), Path("b/y.srt")]) == ["x-srt", "x-txt", "y"]


def test_a_shared_cache_reuses_a_line_rendered_for_another_input(scenes, args, tmp_path):
    a, b = scenes
    cache = tmp_path / "cache"
    assert render(a, *args, "--out", tmp_path / "a", "--cache", cache).exit_code == 0
    kept = sorted(p.name for p in cache.iterdir())
    result = render(b, *args, "--out", tmp_path / "b", "--cache", cache)
    assert result.exit_code == 0, result.output
    # BOB's line was rendered for scene A; scene B finds it in the shared cache.
    assert statuses(tmp_path / "b") == ["cached", "rendered"]
    assert set(kept) <= {p.name for p in cache.iterdir()}  # a shared cache is never pruned of others' lines
    assert not (tmp_path / "b" / ".omnidub" / "cache").exists()  # the shared cache holds it, not the folder


def test_the_ray_executor_without_ray_is_one_line_before_any_model_loads(scenes, args, tmp_path, monkeypatch):
    import sys

    from omnidub.backends.torch import upstream

    monkeypatch.setitem(sys.modules, "ray", None)  # as if Ray were not installed
    monkeypatch.setattr(upstream, "load_model", lambda *a, **k: pytest.fail("a TTS model was loaded"))
    result = render(*scenes, *args, "--out", tmp_path / "out", "--executor", "ray")
    assert result.exit_code == 2
    assert "omnidub[ray]" in result.stderr and len(result.stderr.strip().splitlines()) == 1
