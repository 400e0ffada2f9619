"""A newcomer's typos and first runs (round 5): a close name offered for a mistyped file, speaker or language, a dry
run that refuses the folder the render would, and progress bars that say what each one counts. Plans only: no
model loads here."""

from __future__ import annotations

import io
import shutil
from types import SimpleNamespace

import pytest
from conftest import EXAMPLES
from test_first_contact import one_error_line, run

PLAN = ["--model", "synthetic:tiny", "--dry-run"]


@pytest.fixture
def episode(tmp_path, monkeypatch):
    """The bundled scene as episode.es.srt, with its voices.toml and references, in the working folder."""
    shutil.copy(EXAMPLES / "dialogue.srt", tmp_path / "episode.es.srt")
    shutil.copy(EXAMPLES / "voices.toml", tmp_path / "voices.toml")
    shutil.copytree(EXAMPLES / "voices", tmp_path / "voices")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_a_mistyped_file_name_gets_the_close_name_beside_it(episode):
    line = one_error_line(run("render", "episode.es.str", "--voices", "voices.toml", *PLAN))
    assert line == "error: episode.es.str: no such file or folder; did you mean episode.es.srt?"
    line = one_error_line(run("render", "episode.es.srt", "--voices", "voice.toml", *PLAN))
    assert "voice.toml: no such voices file; did you mean voices.toml?" in line
    line = one_error_line(run("render", "episode.es.srt", "--voice", "voices/alise.wav", *PLAN))
    assert "did you mean voices/alice.wav?" in line
    line = one_error_line(run("render", "episode.es.srt", "--voices", "voices.toml", "--source", "episod.mkv", *PLAN))
    assert "--source episod.mkv: no such file" in line and "did you mean" not in line  # nothing close: no guess


def test_a_mistyped_speaker_is_offered_the_close_voice(episode):
    (episode / "owan.srt").write_text("1\n00:00:01,000 --> 00:00:03,000\nOWAN: Hello there.\n", encoding="utf-8")
    (episode / "owen.toml").write_text('[OWEN]\ninstruct = "male, low pitch"\n', encoding="utf-8")
    line = one_error_line(run("render", "owan.srt", "--voices", "owen.toml", *PLAN))
    assert "no voice for speaker 'OWAN'" in line and "did you mean OWEN?" in line
    line = one_error_line(run("render", "episode.es.srt", "--voices", "voices.toml", "--voice-text", "ALISE=Hi", *PLAN))
    assert "no voice named 'ALISE'" in line and "did you mean ALICE?" in line
    # With a default voice the line would silently take it: a note says which voice was likely meant.
    default = ["--voice", "voices/alice.wav", "--voice-text", "Good morning, everyone."]
    result = run("render", "owan.srt", "--voices", "owen.toml", *default, *PLAN)
    assert result.exit_code == 0, result.output
    said = " ".join(result.output.split())
    assert "OWAN has no voice of its own and speaks in the default voice, while the voice OWEN speaks no line" in said


def test_a_language_typed_as_the_start_of_its_name_gets_the_id(episode):
    line = one_error_line(run("render", "episode.es.srt", "--voices", "voices.toml", "--language", "sp", *PLAN))
    assert "unknown language 'sp'; close matches: spanish (es)" in line


def test_a_dry_run_refuses_the_folder_the_render_refuses(episode):
    (episode / "notes.txt").write_text("mine\n")
    planned = one_error_line(run("render", "episode.es.srt", "--voices", "voices.toml", "--out", ".", *PLAN))
    assert "holds files omnidub did not write (e.g. " in planned
    assert sorted(p.name for p in episode.iterdir()) == ["episode.es.srt", "notes.txt", "voices", "voices.toml"]
    allowed = run("render", "episode.es.srt", "--voices", "voices.toml", "--out", ".", "--allow-other-files", *PLAN)
    assert allowed.exit_code == 0, allowed.output


def test_each_progress_bar_counts_its_own_pass_once():
    from rich.console import Console

    from omnidub.cli.show import ProgressListener

    printed = io.StringIO()
    listener = ProgressListener(Console(file=printed, width=160))
    for what, statuses in ((None, ["rendered", "rendered", "cached"]), ("again from the speaker's clip", ["cached"])):
        listener.start(len(statuses), *([what] if what else []))
        for index, status in enumerate(statuses, 1):
            listener.line_done(SimpleNamespace(index=index, status=status, error=None), 1.0, 0.5)
        listener.finish()
    bars = [" ".join(row.split()) for row in printed.getvalue().splitlines()]
    assert len(bars) == 2, bars
    assert bars[0].startswith("rendering: done") and "3/3 2 rendered · 1 cached" in bars[0]
    assert bars[1].startswith("again from the speaker's clip: done") and "1/1 0 rendered · 1 cached" in bars[1]


def test_non_commercial_weights_are_said_once_where_they_load_and_recorded_in_the_manifest(
    tmp_path, tiny_model_dir, own_cache
):
    import json

    from test_first_contact import ALICE_TEXT

    from omnidub.models import licence_notice, resolve_model

    # A local checkpoint whose model card says what the released OmniVoice weights' card says.
    model = tmp_path / "model"
    shutil.copytree(tiny_model_dir, model)
    (model / "README.md").write_text("---\nlicense: cc-by-nc-4.0\nlanguage: [en]\n---\n# OmniVoice\n", encoding="utf-8")
    script = tmp_path / "two.txt"
    script.write_text("ALICE: One.\nALICE: Two words.\n", encoding="utf-8")
    (tmp_path / "preset.toml").write_text("reference_seconds = 0\nsteps = 2\n")
    voice = ["--voice", EXAMPLES / "voices" / "alice.wav", "--voice-text", ALICE_TEXT]
    out = tmp_path / "out"
    result = run("render", script, *voice, "--preset", tmp_path / "preset.toml", "--model", model, "--out", out)
    assert result.exit_code == 0, result.output
    said = " ".join(result.output.split())
    assert "weights are licensed CC-BY-NC-4.0: what they make may not be used commercially" in said
    assert json.loads((out / "manifest.json").read_text())["model"]["licence"] == "cc-by-nc-4.0"
    said_again = []
    licence_notice(resolve_model(str(model)), said_again.append)
    assert said_again == []  # said once on this machine


def test_the_released_model_is_known_to_be_non_commercial_and_a_synthetic_one_has_no_licence(tmp_path):
    from omnidub.models import DEFAULT_MODEL, ModelSource, model_licence

    assert model_licence(ModelSource(DEFAULT_MODEL, tmp_path)) == "cc-by-nc-4.0"
    assert model_licence(ModelSource(str(tmp_path), tmp_path)) is None  # a folder that does not say
    assert model_licence(ModelSource("synthetic:tiny", tmp_path, synthetic="tiny")) is None
