"""The paired evaluation: its statistics on known data, its judge on real speech with known differences, and
`omnidub eval` end to end on the synthetic model (mechanics only), resumed after kill -9."""

from __future__ import annotations

import io
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from conftest import ROOT
from rich.console import Console
from test_cli import one_error_line, run

from omnidub.errors import OmnidubError
from omnidub.eval import (
    EvalReport,
    Side,
    Spoken,
    bundled_corpus,
    describe,
    differing,
    eval_json,
    judge,
    pair_up,
    paired,
    parse_configuration,
    print_eval,
    read_corpus,
)
from omnidub.eval.corpus import place_script
from omnidub.journal import read_entries

SENTENCES = (
    "The museum opens late on Thursdays.",
    "Please bring the yellow umbrella tomorrow.",
    "The storm knocked out the power.",
    "My grandfather repaired the wooden boat.",
    "Turn left at the church and keep going.",
)


# -- the statistics on known data ------------------------------------------------------------------------------
def test_identical_samples_give_zero_difference_a_point_interval_and_p_one():
    a = np.random.default_rng(0).uniform(0, 30, 40)
    result = paired(a, a.copy(), resamples=500)
    assert (result.delta, result.ci, result.p, result.differing) == (0.0, (0.0, 0.0), 1.0, 0)
    assert result.detectable is None  # no sentence differs: the spread says nothing


def test_a_clear_shift_has_a_small_p_and_an_interval_around_it():
    rng = np.random.default_rng(1)
    a = rng.uniform(0, 20, 40)
    b = a + np.where(np.arange(40) % 4 == 0, 0.0, rng.normal(8.0, 3.0, 40))  # 30 of 40 sentences 8 points worse
    result = paired(a, b, resamples=2000)
    assert result.p < 0.001 and result.differing == 30
    assert 0 < result.ci[0] <= result.delta <= result.ci[1]


def test_the_permutation_p_is_exact_for_few_differing_sentences():
    # Differences 5, 3, -2, 10, 4 (sum 20 of 24 absolute): 4 of the 32 sign patterns reach |sum| >= 20.
    b = np.array([5.0, 3, -2, 10, 4] + [0] * 15)
    result = paired(np.zeros(20), b, resamples=1000)
    assert result.exact and result.p == pytest.approx(4 / 32)


def test_the_interval_covers_a_known_difference_at_about_its_rate():
    # Corpora of 100 sentences, 30 % of them differing (mostly ties, as real WER data): the true mean difference
    # is 1.8 points; the 95 % interval should hold it about 95 times in 100.
    rng = np.random.default_rng(7)
    held = 0
    draws = 300
    for draw in range(draws):
        d = np.where(rng.random(100) < 0.3, rng.normal(6.0, 8.0, 100), 0.0)
        low, high = paired(np.zeros(100), d, resamples=1000, seed=draw).ci
        held += low <= 1.8 <= high
    assert 0.91 <= held / draws <= 0.98, held / draws


def test_p_values_of_no_difference_are_small_about_five_times_in_a_hundred():
    rng = np.random.default_rng(3)
    small = sum(
        paired(np.zeros(30), np.where(rng.random(30) < 0.3, rng.normal(0.0, 8.0, 30), 0.0), resamples=1000, seed=k).p
        < 0.05
        for k in range(200)
    )
    assert 2 <= small <= 20, small


def test_the_smallest_detectable_difference_follows_the_spread_of_the_differences():
    d = np.array([4.0, -2.0, 6.0] + [0.0] * 17)
    result = paired(np.zeros(20), d, resamples=100)
    standard_error = d.std(ddof=1) / np.sqrt(20)
    assert result.detectable == pytest.approx(1.959964 * standard_error, rel=1e-4)
    assert result.detectable_80 == pytest.approx((1.959964 + 0.841621) * standard_error, rel=1e-4)


# -- configurations --------------------------------------------------------------------------------------------
def test_configurations_read_like_presets_with_overrides():
    fast = parse_configuration("fast", model="synthetic:tiny")
    eight = parse_configuration("fast,steps=8,dtype=bfloat16", model="synthetic:tiny")
    assert eight.preset.engine.decode.steps == 8 and eight.preset.engine.dtype == "bfloat16"
    assert eight.label == "fast,dtype=bfloat16,steps=8" and eight.folder != fast.folder
    # The same settings said another way share a folder (and so their audio).
    assert parse_configuration("fast,steps=12", model="synthetic:tiny").folder == fast.folder
    assert parse_configuration("fast", model="other").folder != fast.folder
    wide = parse_configuration("fast,reference_seconds=6,reference_window=[5, 7]", model="m")
    assert wide.preset.voice.reference_seconds == 6.0 and wide.preset.voice.reference_window == (5.0, 7.0)
    onnx = parse_configuration("backend=onnx,model=export", model="m")
    assert (onnx.backend, onnx.model, onnx.preset.name) == ("onnx", "export", "fast")
    assert fast.preset.engine.compile is False  # compile "auto" would let the sides differ without asking


@pytest.mark.parametrize(
    "config, says",
    [
        ("fast,steps=abc", "steps must be a whole number"),
        ("fsat", "unknown preset 'fsat'"),
        ("fast,colour=blue", "unknown setting(s) colour"),
        ("fast,seed=3", "seed is the eval's own"),
        ("fast,steps", "is not key=value"),
        ("fast,backend=tpu", "backend must be one of"),
        ("missing.toml", "preset file not found"),
    ],
)
def test_bad_configurations_are_one_line_and_exit_2(tmp_path, config, says):
    line = one_error_line(run("eval", "--a", "fast", "--b", config, "--out", tmp_path / "e", "--asr-model", "tiny.en"))
    assert f"--b {config}:" in line and says in line, line
    assert not (tmp_path / "e").exists()  # refused before anything was written


def test_an_english_only_judge_of_another_language_is_refused_before_rendering(tmp_path):
    corpus = tmp_path / "satze.txt"
    corpus.write_text("Guten Morgen, alle zusammen.\nDer Zug fährt um neun Uhr ab.\n", encoding="utf-8")
    line = one_error_line(
        run(
            "eval",
            corpus,
            "--a",
            "fast",
            "--b",
            "fast,steps=8",
            "--language",
            "de",
            "--asr-model",
            "tiny.en",
            "--out",
            tmp_path / "e",
        )
    )
    assert "English-only" in line and "--asr-model" in line
    assert not list((tmp_path / "e").glob("fast*"))


def test_the_eval_never_writes_over_a_file_it_did_not_write(tmp_path):
    out = tmp_path / "e"
    out.mkdir()
    (out / "sentences.txt").write_text("my own notes\n", encoding="utf-8")
    line = one_error_line(run("eval", "--a", "fast", "--b", "fast", "--out", out, "--asr-model", "tiny.en"))
    assert "not omnidub's" in line
    assert (out / "sentences.txt").read_text(encoding="utf-8") == "my own notes\n"
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "heard.json").write_text('{"what I heard": 1}\n', encoding="utf-8")
    assert "heard.json is not omnidub's" in one_error_line(
        run("eval", "--a", "fast", "--b", "fast", "--out", mine, "--asr-model", "tiny.en")
    )
    assert (mine / "heard.json").read_text(encoding="utf-8") == '{"what I heard": 1}\n'
    render = tmp_path / "render"
    (render / ".omnidub").mkdir(parents=True)
    assert "render's output folder" in one_error_line(run("eval", "--a", "fast", "--b", "fast", "--out", render))


def test_the_bundled_corpus_is_packaged_and_every_sentence_reads_back_as_written(tmp_path):
    corpus = read_corpus(None)
    assert corpus.bundled and len(corpus.lines) == 48 and {line.language for line in corpus.lines} == {"en"}
    assert bundled_corpus().is_file()
    script = place_script(corpus, tmp_path)  # checks that the script reads back sentence for sentence
    assert script.read_text(encoding="utf-8").count("\n") == 48 + 2
    with pytest.raises(OmnidubError, match="at least two sentences"):
        (tmp_path / "one.txt").write_text("Only one.\n", encoding="utf-8")
        read_corpus(tmp_path / "one.txt")


def test_the_judge_is_sized_from_its_name_or_its_weights(whisper_tiny_en):
    from omnidub.asr import Asr

    assert describe(Asr("tiny.en", device="cpu")).strength == "weak"
    assert "20-33 %" in describe(Asr("tiny.en", device="cpu")).note
    assert describe(Asr("small", device="cpu")).strength == "mid"
    assert describe(Asr("large-v3", device="cpu")).strength == "strong"
    assert describe(Asr(str(whisper_tiny_en), device="cpu")).strength == "weak"  # a 75 MB folder


@pytest.mark.slow  # about 8 s or more: pytest -m slow runs it, as CI does
# -- the judge on real speech ----------------------------------------------------------------------------------
@pytest.mark.skipif(shutil.which("flite") is None, reason="needs Debian's flite")
def test_on_flite_speech_exactly_the_sentences_with_a_word_dropped_differ(tmp_path, whisper_tiny_en):
    from omnidub.asr import Asr

    dropped = {2: "yellow", 4: "wooden"}
    a, b = [], []
    for index, text in enumerate(SENTENCES, 1):
        for side, said, found in (("a", text, a), ("b", text.replace(f"{dropped.get(index)} ", ""), b)):
            path = tmp_path / f"{side}{index}.wav"
            subprocess.run(["flite", "-voice", "slt", "-t", said, "-o", str(path)], check=True)
            found.append(Spoken(index, text, "en", path))
    asr = Asr(str(whisper_tiny_en), device="cpu")
    heard = judge(asr, a + b)
    speakers = {i: "default" for i in range(1, len(SENTENCES) + 1)}
    pairs, left_out = pair_up(speakers, {j.index: j for j in heard[: len(a)]}, {j.index: j for j in heard[len(a) :]})
    assert not left_out and len(pairs) == len(SENTENCES)
    worse = differing(pairs)
    assert {p.a.index for p in worse} == set(dropped), [(p.a.transcript, p.b.transcript) for p in pairs]
    for pair in worse:
        assert pair.delta > 0 and dropped[pair.a.index] not in pair.b.transcript.lower()
    result = paired([p.a.rate for p in pairs], [p.b.rate for p in pairs], resamples=200)
    assert result.differing == 2 and result.delta > 0 and result.ci[1] >= result.delta >= result.ci[0]

    # The report lists them worst first, each with both transcripts.
    side = Side(
        config=parse_configuration("fast", model="flite"),
        out_dir=tmp_path,
        model={},
        settings={},
        rendered=0,
        cached=0,
        seconds=None,
        audio_seconds=None,
        timed=0,
        wer=0.0,
        corpus_wer=0.0,
        perfect=0,
    )
    report = EvalReport(
        corpus=tmp_path / "flite.txt",
        total=len(SENTENCES),
        a=side,
        b=side,
        paired=result,
        pairs=tuple(pairs),
        judge=describe(asr),
        machine={"cpu": "cpu", "matrix_units": "avx2", "cores": 2, "gpu": None},
        metric="wer",
        seed=0,
        changes=(),
        notes=(),
        left_out=(),
    )
    assert eval_json(report)["differing_lines"] == [p.a.index for p in worse]
    shown = io.StringIO()
    print_eval(report, Console(file=shown, width=160))
    listing = shown.getvalue().split("Sentences that differ, worst first")[1]
    for pair in worse:
        assert pair.a.text in listing and pair.a.transcript in listing and pair.b.transcript in listing


class FlakyJudge:
    """A judge that cannot run on its first clip, then hears every clip as its text."""

    name, device, failures = "flaky", "cpu", 1

    def identity(self) -> str:
        return "flaky judge"

    def english_only(self) -> bool:
        return False

    def transcribe(self, audio, rate, language=None):
        from omnidub.asr import Transcript

        if self.failures:
            self.failures -= 1
            raise RuntimeError("out of memory")
        return Transcript(self.said, "en", ())


def test_what_the_judge_heard_is_kept_but_not_a_failure_to_hear(tmp_path):
    import soundfile as sf

    from omnidub.eval.judge import judged_from

    sf.write(tmp_path / "one.wav", np.random.default_rng(0).normal(0, 0.1, 24000).astype(np.float32), 24000)
    sentence = Spoken(1, "One two three.", "en", tmp_path / "one.wav")
    asr, known = FlakyJudge(), {}
    asr.said = "One two three."
    [first] = judge(asr, [sentence], known=known)
    assert first.unscored.startswith("words not scored: the ASR could not run (out of memory") and known == {}
    [second] = judge(asr, [sentence], known=known)  # asked again, and what it heard is kept
    assert second.scored and second.errors == 0 and len(known) == 1
    asr.said = "Something else entirely."
    [third] = judge(asr, [sentence], known=known)  # the same judge, the same audio: not heard again
    assert third == second
    [record] = known.values()
    assert judged_from(record) == replace(second, index=0)
    for broken in ({**record, "errors": None}, {**record, "units": "3"}, {**record, "extra": 1}, [record]):
        with pytest.raises(ValueError):
            judged_from(broken)


# -- end to end on the synthetic model -------------------------------------------------------------------------
def _corpus(tmp_path: Path, count: int) -> Path:
    """The first ``count`` sentences of the bundled corpus, as a corpus file of one's own."""
    corpus = tmp_path / "lines.txt"
    corpus.write_text("".join(f"{line.text}\n" for line in read_corpus(None).lines[:count]), encoding="utf-8")
    return corpus


def test_eval_end_to_end_on_the_synthetic_model(tmp_path, tiny_model_dir, monkeypatch):
    import importlib

    judging = importlib.import_module("omnidub.eval.judge")  # the module (the package exports its function)

    heard = []
    hear = judging.hear

    def counted(asr, text, *args, **kwargs):
        heard.append(text)
        return hear(asr, text, *args, **kwargs)

    monkeypatch.setattr(judging, "hear", counted)
    corpus, out = _corpus(tmp_path, 3), tmp_path / "eval"
    common = ["--model", "synthetic:tiny", "--asr-model", "tiny.en", "--out", out, "--resamples", "200"]
    same = run("eval", corpus, "--a", "fast", "--b", "fast", *common, "--json", tmp_path / "same.json")
    assert same.exit_code == 0, same.output
    data = json.loads((tmp_path / "same.json").read_text(encoding="utf-8"))
    assert (data["delta"], data["ci"], data["differing"], data["sentences"]) == (0.0, [0.0, 0.0], 0, 3)
    assert data["a"]["wer"] == data["b"]["wer"] and data["a"]["rendered"] == 3
    assert data["judge"]["strength"] == "weak" and data["synthetic"]
    assert any("noise" in note for note in data["notes"])
    assert len(heard) == 3  # one folder: A and B are the same configuration

    heard.clear()
    other = run("eval", corpus, "--a", "fast", "--b", "fast,steps=4", *common, "--json", tmp_path / "other.json")
    assert other.exit_code == 0, other.output
    data = json.loads((tmp_path / "other.json").read_text(encoding="utf-8"))
    assert data["ci"][0] <= data["delta"] <= data["ci"][1] and 0 <= data["p"] <= 1
    assert 0 <= data["differing"] <= data["sentences"] == 3
    assert data["a"]["rendered"] == 0 and data["a"]["cached"] == 3  # A's audio came from the first eval
    assert data["b"]["rendered"] == 3 and data["b"]["settings"]["steps"] == 4
    for side in ("a", "b"):
        assert data[side]["rtf"] > 0 and data[side]["timed"] == 3  # A's times kept from when it rendered
    assert {c["key"]: c["asked"] for c in data["changes"]} == {"steps": True}
    assert len(data["lines"]) == 3 and {"transcript", "errors", "wer"} <= set(data["lines"][0]["a"])
    assert "B − A" in other.stdout and "noise" in other.stdout
    # The judge heard only B's new audio: A's transcripts were kept from the first eval.
    assert len(heard) == 3 and any(
        "the judge had heard 3 of the 6 sentences' audio before (heard.json)" in n for n in data["notes"]
    )
    heard.clear()
    again = run("eval", corpus, "--a", "fast", "--b", "fast,steps=4", *common, "--json", tmp_path / "again.json")
    assert again.exit_code == 0 and heard == []
    kept = json.loads((tmp_path / "again.json").read_text(encoding="utf-8"))
    assert [line["a"]["transcript"] for line in kept["lines"]] == [line["a"]["transcript"] for line in data["lines"]]


@pytest.mark.slow  # over 10 s of CPU: pytest -m slow runs it, as CI does
def test_eval_resumes_after_kill_9_without_rendering_finished_sentences_again(tmp_path, tiny_model_dir):
    corpus, out = _corpus(tmp_path, 5), tmp_path / "eval"
    config = "fast,steps=32"  # slow enough per line that the kill lands mid-render
    args = [
        "eval",
        str(corpus),
        "--a",
        config,
        "--b",
        config,
        "--model",
        "synthetic:tiny",
        "--asr-model",
        "tiny.en",
        "--out",
        str(out),
        "--resamples",
        "100",
    ]
    folder = out / parse_configuration(config, model="synthetic:tiny").folder
    journal = folder / ".omnidub" / "journal.jsonl"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    said = tmp_path / "stderr.txt"
    with said.open("w") as stderr:
        process = subprocess.Popen(
            [sys.executable, "-m", "omnidub", *args], cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=stderr
        )
        deadline = time.monotonic() + 180
        while not (journal.is_file() and read_entries(folder)):  # a whole record of a finished sentence
            assert process.poll() is None, said.read_text()
            assert time.monotonic() < deadline, "no sentence finished in time"
            time.sleep(0.02)
        process.send_signal(signal.SIGKILL)
        process.wait()
    finished = {e.key for e in read_entries(folder) if e.status == "rendered"}
    assert 1 <= len(finished) < 5 and not (folder / "manifest.json").exists()

    again = run(*args)
    assert again.exit_code == 0, again.output
    lines = {e.key: e.status for e in read_entries(folder)}
    assert len(lines) == 5 and all(lines[key] == "cached" for key in finished)
    assert sum(status == "rendered" for status in lines.values()) == 5 - len(finished)


def test_the_bench_lossy_rows_name_eval_commands_whose_configurations_read(tmp_path):
    from omnidub.bench.report import notes
    from omnidub.bench.rows import Row, eval_command

    def row(name, dtype):
        return Row(name=name, title="", steps=12, cfg="trimmed", dtype=dtype, batch=1, reference_seconds=3.0)

    assert eval_command(row("onednn", "float32")) is None  # fp32's arithmetic: nothing to measure
    for name, dtype in (
        ("int8", "int8"),
        ("dtype", "bfloat16"),
        ("compile", "bfloat16"),
        ("onnx", "float32"),
        ("onnx-int8", "int8"),
        ("prefix2", "float32"),
        ("prefix8", "bfloat16"),
    ):
        words = eval_command(row(name, dtype)).split()
        assert words[:3] == ["omnidub", "eval", "CORPUS"]
        a, b = (parse_configuration(words[words.index(flag) + 1], model="m") for flag in ("--a", "--b"))
        assert a.folder != b.folder, (name, a.label, b.label)
        if name.startswith("prefix"):  # the two sides differ in the prefix cache alone
            assert b.label == f"fast,prefix_refresh={name[6:]}" and a.preset.engine.decode.prefix_refresh == 1
    drift = {"against": "fp32", "final_token_agreement": 0.5, "measure_cost": eval_command(row("int8", "int8"))}
    [said] = notes({"lines": ["a line"], "rows": [{"name": "int8", "dtype": "int8", "drift": drift}]})
    assert "omnidub eval CORPUS --a fast,dtype=float32 --b fast,dtype=int8" in said
