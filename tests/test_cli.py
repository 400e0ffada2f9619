"""The command line as a user meets it: help, bad input, the dry-run plan, qa, retakes and the bench smoke run."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from conftest import EXAMPLES, ROOT
from typer.testing import CliRunner

from omnidub.cli import app
from omnidub.qa.verdict import OUTCOMES
from omnidub.takes import RETAKE_FLAGS

runner = CliRunner()
ALICE_TEXT = "Good morning, everyone. Thanks for coming in early. I know the traffic was terrible today."


def run(*args):
    return runner.invoke(app, [str(a) for a in args], catch_exceptions=False)


def one_error_line(result) -> str:
    assert result.exit_code == 2, result.output
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:"), result.stderr
    assert "Traceback" not in result.output
    return lines[0]


def test_help_lists_the_three_commands():
    result = subprocess.run([sys.executable, "-m", "omnidub", "--help"], capture_output=True, text=True, check=True)
    for command in ("render", "qa", "bench"):
        assert command in result.stdout


def test_the_default_model_offline_is_one_clear_line():
    # Run as a user would: a separate process, hub offline, the bundled example.
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "omnidub",
            "render",
            "examples/dialogue.srt",
            "--voices",
            "examples/voices.toml",
            "--out",
            os.devnull + "-never",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "k2-fsa/OmniVoice" in lines[0] and "--model" in lines[0], result.stderr
    assert "synthetic:tiny" in lines[0]


def test_version_and_help_start_without_torch():
    code = (
        "import sys\n"
        "from typer.testing import CliRunner\n"
        "from omnidub.cli import app\n"
        "r = CliRunner().invoke(app, ['--version'])\n"
        "h = CliRunner().invoke(app, ['render', '--help'])\n"
        "heavy = [m for m in ('torch', 'transformers', 'omnivoice') if m in sys.modules]\n"
        "print(r.exit_code, h.exit_code, r.stdout.strip(), heavy)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert result.stdout.strip() == "0 0 omnidub 0.1.0 []", result.stdout + result.stderr


def test_dry_run_json_lists_every_cue_with_its_speaker_and_loads_no_model(tiny_model_dir):
    # In its own process, so that nothing another test imported hides a heavy import. The synthetic model
    # is built first (building it needs torch; planning with it must not).
    code = (
        "import sys\n"
        "from typer.testing import CliRunner\n"
        "from omnidub.cli import app\n"
        "r = CliRunner().invoke(app, ['render', 'examples/dialogue.srt', '--voices', 'examples/voices.toml',"
        " '--model', 'synthetic:tiny', '--dry-run', '--json'])\n"
        "assert r.exit_code == 0, r.output\n"
        "assert not [m for m in ('torch', 'transformers', 'omnivoice') if m in sys.modules], sorted(sys.modules)\n"
        "print(r.stdout)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 0, result.stderr
    lines = json.loads(result.stdout)["lines"]
    assert [line["index"] for line in lines] == list(range(1, 12))
    assert [line["speaker"] for line in lines] == ["ALICE", "BOB"] * 3 + ["ALICE", "ALICE", "BOB", "ALICE", "BOB"]
    assert lines[1]["text"] == "Yes, as long as the car is back from the garage."
    assert all(line["language"] == "en" for line in lines)
    assert {"start", "end", "target", "speed", "flags"} <= set(lines[0])
    assert "overflow" in lines[7]["flags"]


def test_dry_run_of_the_script_lays_lines_back_to_back():
    result = run("render", EXAMPLES / "script.txt", "--voices", EXAMPLES / "voices.toml", "--dry-run", "--json")
    assert result.exit_code == 0, result.output
    lines = json.loads(result.stdout)["lines"]
    assert len(lines) == 11 and lines[0]["start"] == 0
    for before, after in zip(lines, lines[1:]):
        assert after["start"] == pytest.approx(before["start"] + before["target"] + 0.4, abs=2e-3)
        assert not after["flags"]


@pytest.mark.parametrize(
    "content, suffix, expected",
    [
        ("1\n00:00:01,000 --> 00:00:xx,000\nALICE: Hi.\n", ".srt", "cue 1"),
        ("1\n00:00:03,000 --> 00:00:01,000\nALICE: Hi.\n", ".srt", "before it starts"),
        ("", ".srt", "empty"),
        ("1\n00:00:01,000 --> 00:00:02,000\nCAROL: Hi.\n", ".srt", "CAROL"),
        ("ALICE: Hi.\n", ".docx", ".docx"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path, content, suffix, expected):
    path = tmp_path / f"input{suffix}"
    path.write_text(content)
    line = one_error_line(run("render", path, "--voices", EXAMPLES / "voices.toml", "--dry-run"))
    assert expected in line


def test_missing_input_and_bad_settings_are_one_line(tmp_path):
    assert "nope.srt" in one_error_line(run("render", tmp_path / "nope.srt", "--dry-run"))
    assert "unknown preset" in one_error_line(
        run("render", EXAMPLES / "dialogue.srt", "--preset", "turbo", "--dry-run")
    )
    missing = tmp_path / "voices.toml"
    missing.write_text('[ALICE]\naudio = "gone.wav"\ntext = "hi"\n')
    assert "gone.wav" in one_error_line(run("render", EXAMPLES / "dialogue.srt", "--voices", missing, "--dry-run"))
    assert "folder not found" in one_error_line(
        run("render", EXAMPLES / "dialogue.srt", "--voices", EXAMPLES / "voices.toml", "--model", tmp_path / "none")
    )


def test_qa_without_a_manifest_is_exit_2(tmp_path):
    assert "manifest" in one_error_line(run("qa", tmp_path))


def test_an_unknown_speaker_model_is_one_line(tmp_path):
    assert "resemblyzer" in one_error_line(run("qa", tmp_path, "--speaker-model", "ecapa"))
    assert "resemblyzer" in one_error_line(
        run(
            "render",
            EXAMPLES / "dialogue.srt",
            "--voices",
            EXAMPLES / "voices.toml",
            "--qa",
            "--speaker-model",
            "ecapa",
        )
    )


def render_two_lines(folder: Path, lines: str, *args):
    """Two of ALICE's lines rendered with synthetic:tiny at 4 steps (its audio is noise) into folder/out."""
    script = folder / "two.txt"
    script.write_text(lines)
    preset = folder / "preset.toml"
    preset.write_text("reference_seconds = 0\nsteps = 4\n")
    out = folder / "out"
    result = run(
        "render",
        script,
        "--voice",
        EXAMPLES / "voices" / "alice.wav",
        "--voice-text",
        ALICE_TEXT,
        "--model",
        "synthetic:tiny",
        "--preset",
        preset,
        "--out",
        out,
        *args,
    )
    return result, out


@pytest.fixture(scope="module")
def small_render(tmp_path_factory, tiny_model_dir, whisper_tiny_en):
    result, out = render_two_lines(
        tmp_path_factory.mktemp("small"),
        "ALICE: Thanks for coming in early.\nALICE: The traffic was terrible today.\n",
        "--retakes",
        "1",
        "--asr-model",
        whisper_tiny_en,
    )
    return result, out


def test_render_retakes_record_every_attempt(small_render):
    result, out = small_render
    # Random weights speak noise, so QA fails every take: exit 1, and each line got its retakes.
    assert result.exit_code == 1, result.output
    manifest = json.loads((out / "manifest.json").read_text())
    for line in manifest["lines"]:
        attempts = line["attempts"]
        assert len(attempts) == 2 and len({a["seed"] for a in attempts}) == 2
        assert sum(a["chosen"] for a in attempts) == 1
        chosen = next(a for a in attempts if a["chosen"])
        assert chosen["key"] == line["key"]
        # The best take: passed, unchecked, failed; then fewest retakable flags (words, voice, level), lowest
        # error rate.
        ranks = [
            (-OUTCOMES.index(a["verdict"]), -len(set(a["flags"]) & RETAKE_FLAGS), -a["error_rate"]) for a in attempts
        ]
        assert ranks[attempts.index(chosen)][:3] == max(ranks)
        assert all("voice_similarity" in a for a in attempts)
    assert (out / "qa.json").is_file() and (out / "qa.html").is_file()


def test_the_lines_qa_failed_are_marked_on_the_timeline(small_render):
    import hashlib

    import opentimelineio as otio

    _, out = small_render
    manifest = json.loads((out / "manifest.json").read_text())
    checked = {line["index"]: line for line in json.loads((out / "qa.json").read_text())["lines"]}
    # QA names the audio it judged, so a verdict is never pinned on a take it did not hear.
    judged = {i: line["sha256"] for i, line in checked.items()}
    assert judged == {line["index"]: line["sha256"] for line in manifest["lines"]}
    timeline = otio.adapters.read_from_file(str(out / "two.dub.otio"))
    marked = {
        clip.metadata["omnidub"]["index"]: [(m.name, m.color) for m in clip.markers]
        for track in timeline.audio_tracks()
        for clip in track.find_clips()
    }
    assert marked == {i: [(f"QA: {', '.join(line['flags'])}", "RED")] for i, line in checked.items()}
    # The timeline written after QA is the one the manifest's assembly record vouches for: a rerun keeps it.
    digest = hashlib.sha256((out / "two.dub.otio").read_bytes()).hexdigest()
    assert manifest["assembly"]["files"]["two.dub.otio"] == digest


def test_qa_command_reports_noise_as_failing(small_render, whisper_tiny_en):
    _, out = small_render
    result = run("qa", out, "--asr-model", whisper_tiny_en, "--json")
    assert result.exit_code == 1
    report = json.loads(result.stdout)
    assert len(report["lines"]) == 2 and not report["passed"]
    # English noise heard by an English model is scored, and fails on its words.
    assert report["verdicts"] == {"failed": 2, "unchecked": 0, "passed": 0}
    # The render's own QA (after its retakes) heard this audio: the words are scored again, not transcribed.
    assert any(note.startswith("2 of 2 line(s) were heard by") for note in report["notes"]), report["notes"]
    assert all(line["verdict"] == "failed" and "wer" in line["flags"] for line in report["lines"])
    first = json.loads((out / "qa.json").read_text())["lines"][0]
    assert (
        first["index"] == 1
        and first["start_tc"] == json.loads((out / "manifest.json").read_text())["lines"][0]["start_tc"]
    )
    assert first["start_tc"].count(":") == 3  # HH:MM:SS:FF beside the seconds


def test_a_qa_page_someone_changed_is_moved_aside_and_said_before_qa_writes_its_own(
    small_render, whisper_tiny_en, tmp_path
):
    out = tmp_path / "out"
    shutil.copytree(small_render[1], out, symlinks=True)
    assert run("qa", out, "--asr-model", whisper_tiny_en).exit_code == 1  # the noise fails: qa.html is omnidub's
    mine = (out / "qa.html").read_text(encoding="utf-8") + "<!-- my notes on line 2 -->\n"
    (out / "qa.html").write_text(mine, encoding="utf-8")
    result = run("qa", out, "--asr-model", whisper_tiny_en)
    assert result.exit_code == 1, result.output
    [aside] = out.glob("qa.changed-*.html")
    assert aside.read_text(encoding="utf-8") == mine
    assert f"qa.html was changed after omnidub wrote it; it was moved to {aside.name}" in " ".join(
        result.stderr.split()
    )
    assert "my notes" not in (out / "qa.html").read_text(encoding="utf-8")


def test_a_spanish_dub_checked_with_an_english_only_model_is_never_called_passed(
    tmp_path, tiny_model_dir, whisper_tiny_en
):
    rendered, out = render_two_lines(
        tmp_path, "ALICE: Gracias por venir temprano.\nALICE: El tráfico era terrible hoy.\n", "--language", "es"
    )
    assert rendered.exit_code == 0, rendered.output
    result = run("qa", out, "--asr-model", whisper_tiny_en)
    report = json.loads((out / "qa.json").read_text())
    # No judge of Spanish here: its lines are unchecked, never passed; the exit code is 1 only for a failed line.
    assert result.exit_code == (1 if report["failed"] else 0), result.output
    assert "words not scored" in result.output and "all lines passed" not in result.output
    assert report["passed"] is False and report["verdicts"]["passed"] == 0
    assert report["unjudged"] == report["unchecked"] > 0
    # Each line is unchecked, or failed on something other than its words (noise may be late or clipped).
    for line in report["lines"]:
        assert "words" in [f["check"] for f in line["unmeasured"]] and not {"wer", "cer"} & set(line["flags"])
        assert line["verdict"] == ("failed" if line["flags"] else "unchecked")
    assert report["unchecked"] == sum(not line["flags"] for line in report["lines"]) > 0
    page = (out / "qa.html").read_text(encoding="utf-8")
    assert "passed" not in page.split('<p class="headline">')[1].split("</p>")[0]


@pytest.mark.slow  # over 10 s of CPU: pytest -m slow runs it, as CI does
def test_bench_quick_reports_every_row(tmp_path, own_cache):
    target = tmp_path / "bench.json"
    result = run("bench", "--quick", "--repeat", "1", "--json", target)
    assert result.exit_code == 0, result.output
    data = json.loads(target.read_text())
    rows = {row["name"]: row for row in data["rows"]}
    assert list(rows) == [
        "stock",
        "steps",
        "ref3s",
        "peer",
        "loop",
        "nomask",
        "fused",
        "onednn",
        "packed",
        "joined",
        "auto",
        "dtype",
        "packed-dtype",
        "joined-dtype",
        "auto-dtype",
        "peer-dtype",
        "batch",
        "int8",
        "prefix2",
        "prefix4",
        "prefix8",
    ]
    for name, row in rows.items():
        if row["skipped"]:
            assert name == "ref3s" and "skipped" in row["skipped"]  # offline, the trimmer may find no ASR model
            continue
        assert row["seconds_per_line"] > 0 and row["min_seconds"] <= row["seconds"] <= row["max_seconds"]
        # Every row makes the same audio, so seconds per line compare directly.
        assert row["audio_seconds"] == pytest.approx(rows["stock"]["audio_seconds"])
    # Each row is measured against the row it changes by one lever.
    assert rows["steps"]["against"] == "stock" and rows["fused"]["against"] == "nomask"
    assert rows["peer"]["against"] == "ref3s" and rows["loop"]["against"] == "peer"
    assert rows["onednn"]["against"] == "fused" and rows["onednn"]["gemm"] == "onednn"
    assert rows["dtype"]["dtype"] == "bfloat16" and rows["peer-dtype"]["against"] == "peer"
    assert rows["joined"]["cfg"] == "joined" and rows["joined"]["against"] == "fused"
    assert rows["joined-dtype"]["dtype"] == "bfloat16" and rows["joined-dtype"]["against"] == "dtype"
    # The auto rows are what the first-use probe chose, and the comparison with the peer is taken on them.
    assert sorted(p["what"] for p in data["probes"]["float32"]) == ["gemm", "layout"]
    chosen = {p["what"]: p["choice"] for p in data["probes"]["float32"]}
    assert rows["auto"]["cfg"] == chosen["layout"] and rows["auto"]["gemm"] == chosen["gemm"]
    assert data["versus_peer"]["float32"]["ours"] == "auto" and data["versus_peer"]["bfloat16"]["ours"] == "auto-dtype"
    # Those are the user's two paths, and the JSON says which: the peer on its own upstream model (so it has no
    # drift of omnidub's loop to report) and omnidub through Session.
    assert "from_pretrained" in data["headline"]["peer"] and "Session" in data["headline"]["omnidub"]
    assert rows["peer"]["drift"] is None and rows["peer-dtype"]["drift"] is None and "Session" in rows["auto"]["title"]
    # Which path a render takes here and why, as its header says it: the CPU kind, the GEMM library the probe
    # chose, the backend's reason; and where the ONNX export stands for --backend auto.
    from omnidub.hardware import cpu_kind

    path = data["paths"]["render (float32)"]
    assert path.startswith(f"torch on cpu ({cpu_kind()}; float32; ") and "GEMMs" in path
    assert ("oneDNN GEMMs" in path) == (chosen["gemm"] == "onednn") and data["machine"]["kind"] == cpu_kind()
    assert "ONNX Runtime export of synthetic:tiny: not built" in data["paths"]["onnx export"]
    assert "path here, render (float32): torch on cpu" in " ".join(result.stdout.split())
    # Lossless means the ladder's precision or float32; the bf16 and int8 rows carry their drift against fp32.
    assert rows["fused"]["lossless"] and not rows["dtype"]["lossless"] and not rows["int8"]["lossless"]
    assert 0.5 < rows["int8"]["drift"]["argmax_agreement"] <= 1.0
    assert rows["dtype"]["drift"]["logits_max_abs_diff"] > 0
    assert rows["onednn"]["drift"]["logits_max_abs_diff"] < 1e-4  # float32 at float32's rounding
    # The prefix cache's rows are approximate, priced against exact decoding, each with the eval that measures it.
    for name, k in (("prefix2", 2), ("prefix4", 4), ("prefix8", 8)):
        row, drift = rows[name], rows[name]["drift"]
        assert not row["lossless"] and "APPROXIMATE" in row["title"] and row["against"] == "fused"
        assert drift["measure_cost"] == f"omnidub eval CORPUS --a fast --b fast,prefix_refresh={k}"
        assert drift["cached_step"] == min(k, 4) - 1 and drift["cached_logits_max_abs_diff"] > 0
        assert 0 < drift["final_token_agreement"] <= 1 and drift["first_step_logits_max_abs_diff"] == 0
        assert f"fast,prefix_refresh={k}" in result.stdout.replace("\n", "")
    # Nothing was recorded for --cfg auto (the probe ran in a scratch cache): only --record writes measured.json.
    assert data["recorded"] == {} and not (own_cache / "measured.json").exists()
    assert data["matmul_gflops"]["float32"]["aten"] > 0 and data["machine"]["torch"]
    assert len(data["machine"]["load_average"]["before"]) == 3
    # The table fits 80 columns (the runner's width) and shows each row's figures: seconds per line and ratio.
    fused = next(line for line in result.stdout.splitlines() if line.lstrip().startswith("7 fused"))
    assert len(fused) <= 80
    assert f"{rows['fused']['seconds_per_line']:.2f}" in fused and f"{rows['fused']['speedup']:.2f}x" in fused


def test_bench_length_renders_each_programme_within_its_budget_then_assembles_it(tmp_path, own_cache, monkeypatch):
    target = tmp_path / "length.json"
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    result = run("bench", "--length", "4,12", "--budget", "0.5", "--model", "synthetic:tiny", "--json", target)
    assert result.exit_code == 0, result.output
    assert not list(scratch.glob("omnidub-*"))  # the programmes were scratch, removed once measured
    data = json.loads(target.read_text())
    small, large = data["sizes"]
    assert (small["lines"], large["lines"]) == (4, 12) and data["budget_seconds"] == 0.5
    for size in (small, large):
        # The budget stops the render after the lines in flight: some, never all, of the longer programme.
        assert 1 <= size["rendered"] <= size["lines"] and len(size["wall_per_line"]) == size["rendered"]
        assert size["seconds_per_line"] >= size["model_seconds_per_line"] > 0
        assert size["peak_rss_mb"] > 0 and size["assembly_seconds"] > 0 and size["assembly_peak_rss_mb"] > 0
    assert large["rendered"] < large["lines"]
    assert large["programme_seconds"] > 2 * small["programme_seconds"]  # the whole programme was assembled
    assert "lines" in result.stdout and "mix MB" in result.stdout
    assert (
        one_error_line(run("bench", "--length", "ten")) == "error: --length takes line counts such as "
        "100,500,1000, got 'ten'"
    )


def test_bench_report_shows_what_a_skipped_row_needs_and_the_markdown_matches(tmp_path):
    from rich.console import Console

    from omnidub.bench.report import markdown, print_bench

    row = {
        "name": "peer",
        "title": "the peer recipe",
        "steps": 12,
        "cfg": "trimmed",
        "dtype": "float32",
        "reference_seconds": 3.0,
        "skipped": "skipped: omnivoice-fastpath is not installed (pip install 'omnidub[bench]')",
    }
    ours = {
        **row,
        "name": "fused",
        "title": "+ fused",
        "skipped": "",
        "seconds_per_line": 1.234,
        "min_seconds": 1.2,
        "max_seconds": 1.3,
        "rtf": 0.5,
        "speedup": 1.1,
        "against": "nomask",
        "speedup_vs_stock": None,
        "peak_mb": 3,
    }
    data = {
        "machine": {"cpu": "Some CPU", "cores": 2, "threads": 2, "torch": "2.x"},
        "model": "synthetic:tiny",
        "lines": ["a"],
        "repeat": 1,
        "rows": [row, ours],
    }
    console = Console(width=80, record=True, file=io.StringIO())
    print_bench(data, console)
    text = " ".join(console.export_text().split())
    assert "pip install 'omnidub[bench]'" in text and "1.23" in text and "1.10x" in text
    assert "| 2 | + fused | 12 | trimmed | fp32 | 3.0 | 1.23 (1.20-1.30) | 0.50 | 1.10x | nomask | 3 |" in markdown(
        data
    )


@pytest.mark.slow  # a bench, a sweep and ONNX rows in a fresh process: about 30 s
def test_gpu_check_runs_on_a_cpu_with_the_tiny_model(tmp_path, tiny_model_dir, export_dir):
    # The prepared GPU run must work before a GPU is lent: CI runs it on the CPU with the tiny model.
    target = tmp_path / "gpu-check.json"
    result = subprocess.run(
        [
            sys.executable,
            str(ROOT / "scripts" / "gpu-check"),
            "--model",
            "synthetic:tiny",
            "--device",
            "cpu",
            "--rows",
            "fused",
            "--out",
            str(target),
            "--onnx",
            str(export_dir),
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    data = json.loads(target.read_text())
    assert [row["name"] for row in data["bench"]["rows"]] == ["fused"] and data["machine"]["torch"]
    sweep = {(r["dtype"], r["cfg"], r["batch"]) for r in data["sweep"]["rows"]}
    assert sweep == {
        (d, c, b) for d in ("float32", "bfloat16") for c in ("padded", "trimmed", "packed") for b in (1, 4, 16)
    }
    assert all(r["lines"] == data["sweep"]["lines"] and r["seconds_per_line"] > 0 for r in data["sweep"]["rows"])
    # The ONNX Runtime section ran on the export it was given.
    assert data["onnx"]["seconds_per_line"] > 0 and data["onnx"]["identity"]["backend"] == "onnxruntime"


def test_terminal_escapes_in_subtitles_never_reach_the_terminal_and_stray_text_is_a_note(tmp_path):
    srt = tmp_path / "ansi.srt"
    srt.write_text(
        "1\n00:00:01,000 --> 00:00:03,000\n\x1b[2J\x1b[31mALICE: Red\x1b[0m alert.\n\n\x1b[5mStray\x07 words\n"
    )
    result = run("render", srt, "--voices", EXAMPLES / "voices.toml", "--dry-run")
    assert result.exit_code == 0, result.output
    assert "\x1b" not in result.output and "\x07" not in result.output
    assert "Red alert." in result.stdout and "Stray" not in result.stdout
    assert "line 5: text outside any cue, not spoken" in result.stderr


def test_an_unknown_language_is_one_line_offering_close_matches():
    line = one_error_line(
        run(
            "render",
            EXAMPLES / "dialogue.srt",
            "--voices",
            EXAMPLES / "voices.toml",
            "--language",
            "klingon",
            "--dry-run",
        )
    )
    assert "unknown language 'klingon'" in line
    line = one_error_line(
        run(
            "render",
            EXAMPLES / "dialogue.srt",
            "--voices",
            EXAMPLES / "voices.toml",
            "--language",
            "Germn",
            "--dry-run",
        )
    )
    assert "close matches: german" in line


def test_a_programme_past_the_limit_is_one_line(tmp_path):
    srt = tmp_path / "typo.srt"
    srt.write_text("1\n00:00:01,000 --> 00:00:02,000\nALICE: Hi.\n\n2\n99:00:01,000 --> 99:00:02,000\nBOB: Bye.\n")
    line = one_error_line(
        run("render", srt, "--voices", EXAMPLES / "voices.toml", "--model", "synthetic:tiny", "--dry-run")
    )
    assert "the programme would be 99.0 hours long" in line
    preset = tmp_path / "long.toml"
    preset.write_text("max_program_hours = 100\n")
    result = run(
        "render",
        srt,
        "--voices",
        EXAMPLES / "voices.toml",
        "--model",
        "synthetic:tiny",
        "--dry-run",
        "--json",
        "--preset",
        preset,
    )
    assert result.exit_code == 0, result.output


@pytest.mark.slow  # over 10 s of CPU: pytest -m slow runs it, as CI does
def test_bench_record_makes_the_measured_layout_and_gemm_this_machines_choice(tmp_path, tiny_model_dir, monkeypatch):
    monkeypatch.setenv("OMNIDUB_CACHE", str(tmp_path / "cache"))
    result = run(
        "bench",
        "--model",
        "synthetic:tiny",
        "--lines",
        "1",
        "--repeat",
        "1",
        "--dtype",
        "float32",
        "--rows",
        "fused,onednn,packed,joined",
        "--record",
        "--json",
        tmp_path / "bench.json",
    )
    assert result.exit_code == 0, result.output
    rows = {row["name"]: row for row in json.loads((tmp_path / "bench.json").read_text())["rows"]}
    data = json.loads((tmp_path / "cache" / "measured.json").read_text())
    [layout] = data["layout"].values()
    seconds = {
        "trimmed": rows["fused"]["seconds"],
        "packed": rows["packed"]["seconds"],
        "joined": rows["joined"]["seconds"],
    }
    # As the first-use probe decides: the CPU's default (joined) stays unless another layout is clearly faster.
    from omnidub.backends.probe import kept

    assert layout["seconds"] == pytest.approx(seconds, abs=1e-3)
    assert layout["choice"] == kept(layout["seconds"], "joined")
    [gemm] = data["gemm"].values()
    assert gemm["choice"] == ("onednn" if rows["onednn"]["seconds"] < rows["fused"]["seconds"] else "aten")
