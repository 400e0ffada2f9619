"""QA judged by a real Whisper tiny.en on flite speech and on constructed audio."""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import html
import json
import shutil
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote

import numpy as np
import pytest
import soundfile as sf
from rich.console import Console

from omnidub.asr import Asr
from omnidub.errors import OmnidubError
from omnidub.qa import FAILED, UNCHECKED, check_lines, print_report, run_qa, write_reports

DATA = Path(__file__).parent / "data" / "qa"
RATE = 16000

FOX = (DATA / "fox.txt").read_text(encoding="utf-8").strip()
OTHER_TEXT = "The weather is lovely this morning in the valley."  # 9 words; stella.wav shares only "the"
GOODBYE = "Goodbye [/dim] <b>&amp;</b> [bold]."  # user text that looks like markup, shown verbatim
CHINESE_TEXT = "今天天气很好，我们去公园散步。"  # 13 characters once punctuation is gone


class CountingAsr:
    """Passes through to the real model and remembers how often it was asked."""

    def __init__(self, asr: Asr) -> None:
        self.asr, self.name, self.calls = asr, asr.name, 0

    def english_only(self) -> bool:
        return self.asr.english_only()

    def transcribe(self, audio, sample_rate, language=None, word_timestamps=False):
        self.calls += 1
        return self.asr.transcribe(audio, sample_rate, language=language, word_timestamps=word_timestamps)


@pytest.fixture(scope="module")
def whisper(whisper_tiny_en) -> Asr:
    """The real tiny.en judge (conftest pins its model.bin by sha256), loaded once for this module."""
    return Asr(str(whisper_tiny_en), device="cpu")


def _speech(name: str) -> np.ndarray:
    audio, rate = sf.read(DATA / f"{name}.wav", dtype="float32")
    assert rate == RATE
    return audio


def _make_output(folder: Path, lines: list[dict], settings: dict | None = None, **more) -> Path:
    """A render output folder: each line's `audio` (array at 16 kHz or a data WAV name) becomes its segment;
    ``more``: other fields of its manifest."""
    (folder / "segments").mkdir(parents=True)
    entries = []
    for line in lines:
        entry = {"speaker": "ALICE", "language": "en", "status": "rendered", "error": None, "flags": []} | line
        audio = entry.pop("audio", None)
        if audio is not None:
            entry["file"] = f"segments/{entry['index']:04d}-{entry['speaker']}.wav"
            if isinstance(audio, str):
                shutil.copy(DATA / f"{audio}.wav", folder / entry["file"])
                entry["duration"] = sf.info(folder / entry["file"]).duration
            else:
                sf.write(folder / entry["file"], audio, RATE, subtype="FLOAT")
                entry["duration"] = len(audio) / RATE
        entries.append(entry)
    manifest = {"omnidub": "0.1.0", "sample_rate": RATE, "settings": settings or {}, "lines": entries, **more}
    (folder / "manifest.json").write_text(json.dumps(manifest, ensure_ascii=False), encoding="utf-8")
    return folder


def _tone(seconds: float, amplitude: float) -> np.ndarray:
    t = np.arange(int(seconds * RATE)) / RATE
    return (amplitude * np.sin(2 * np.pi * 220 * t)).astype(np.float32)


@pytest.fixture(scope="module")
def output(tmp_path_factory) -> Path:
    fox = _speech("fox")
    with_nan = fox.copy()
    with_nan[1000] = np.nan
    late_start = np.concatenate([np.zeros(RATE, dtype=np.float32), fox])
    lines = [
        {"index": 1, "text": FOX, "start": 0.0, "end": 4.0, "audio": "fox"},
        {"index": 2, "speaker": "BOB", "text": OTHER_TEXT, "start": 0.0, "end": 5.0, "audio": "stella"},
        {
            "index": 3,
            "speaker": "CAROL",
            "text": CHINESE_TEXT,
            "language": "zh",
            "start": 5.0,
            "end": 9.0,
            "audio": "fox",
        },
        {
            "index": 4,
            "speaker": "BOB",
            "text": "Hmm.",
            "start": 10.0,
            "end": 12.0,
            "audio": np.clip(_tone(1.0, 1.5), -1, 1),
        },
        {"index": 5, "speaker": "CAROL", "text": "Hello?", "start": 12.0, "end": 14.0, "audio": _tone(1.5, 1e-4)},
        # 2.97 s of speech in a 2 s slot, and ALICE speaks again at 22.5 s
        {"index": 6, "text": FOX, "start": 20.0, "end": 22.0, "audio": "fox"},
        {
            "index": 7,
            "text": GOODBYE,
            "start": 22.5,
            "end": 25.0,
            "status": "failed",
            "error": "engine: out of memory",
            "file": None,
            "duration": None,
        },
        {"index": 8, "speaker": "BOB", "text": FOX, "start": 30.0, "end": 34.0, "audio": with_nan},
        {"index": 9, "speaker": "CAROL", "text": FOX, "start": 40.0, "end": 45.0, "audio": late_start},
    ]
    return _make_output(tmp_path_factory.mktemp("out"), lines, settings={"max_wer": 0.25, "max_cer": 0.1})


@pytest.fixture(scope="module")
def counted(whisper, output):
    asr = CountingAsr(whisper)
    seen = []
    report = run_qa(output, asr=asr, progress=lambda done, total, index: seen.append((done, total, index)))
    return report, asr, seen


@pytest.fixture(scope="module")
def report(counted):
    return counted[0]


def _line(report, index):
    return next(c for c in report.lines if c.index == index)


def test_line_that_says_its_text_passes(report):
    line = _line(report, 1)
    assert line.passed and line.flags == ()
    assert line.metric == "wer" and line.reference_units == 9
    assert line.error_rate <= 0.12
    assert "fox" in line.transcript.lower()


def test_line_that_says_something_else_fails_on_wer(report):
    line = _line(report, 2)
    assert not line.passed
    assert "wer" in line.flags
    assert line.reference_units == 9
    assert line.error_rate >= 0.6
    # The alignment keeps every word of the text as the user wrote it, in order, and the words as heard.
    assert " ".join(text for _, text, _ in line.diff if text) == OTHER_TEXT
    assert " ".join(heard for _, _, heard in line.diff if heard) == " ".join(line.transcript.split())
    assert {kind for kind, _, _ in line.diff} & {"substitute", "delete"}


def test_the_difference_is_shown_in_the_users_words_and_as_heard(tmp_path):
    text = "Around 9, after the morning traffic. Let's go!"
    out = _make_output(tmp_path, [{"index": 1, "text": text, "start": 0, "end": 4, "audio": "fox"}])
    manifest = json.loads((out / "manifest.json").read_text())
    heard = "around nine after the morning traffic let us go to the beach"
    (line,) = check_lines(out, manifest["lines"], ScriptedAsr(heard, "en"), max_wer=0.5, max_cer=0.1)
    # "9" heard as "nine" and "Let's" as "let us" are what the scorer counts as equal: only "to the beach" differs.
    assert line.errors == 3 and line.reference_units == 9  # "let us" counts twice
    assert line.diff == (
        ("equal", "Around 9, after the morning traffic. Let's go!", "around nine after the morning traffic let us go"),
        ("insert", "", "to the beach"),
    )


def test_non_english_line_with_an_english_only_model_is_unscored_with_one_note(counted):
    report, asr, _ = counted
    line = _line(report, 3)
    # Nothing failed, nothing was scored: unchecked, which is not passed.
    assert "unscored" in line.marks and line.flags == () and not line.passed
    assert line.verdict.outcome == UNCHECKED and [r.check for r in line.verdict.reasons] == ["words"]
    assert "English-only" in line.verdict.reasons[0].text and "English-only" in line.note
    assert line.transcript is None and line.error_rate is None
    assert report.cer.lines == 0
    [note] = [n for n in report.notes if "English-only" in n]
    assert "1 line(s) in zh" in note and "no judge for zh here" in note and "multilingual Whisper" in note


class ScriptedAsr:
    """A multilingual ASR that hears a fixed text: scoring is tested apart from recognition."""

    name = "scripted"

    def __init__(self, heard: str, language: str) -> None:
        self.heard, self.language = heard, language

    def english_only(self) -> bool:
        return False

    def transcribe(self, audio, sample_rate, language=None, word_timestamps=False):
        from omnidub.asr import Transcript

        return Transcript(self.heard, language or self.language, ())


def test_chinese_line_is_scored_per_character(tmp_path):
    out = _make_output(
        tmp_path, [{"index": 1, "text": CHINESE_TEXT, "language": "zh", "start": 0, "end": 4, "audio": "fox"}]
    )
    manifest = json.loads((out / "manifest.json").read_text())
    heard = "今天天气很好我们去公园"  # the last two characters (散步) not heard
    (line,) = check_lines(out, manifest["lines"], ScriptedAsr(heard, "zh"), max_wer=0.2, max_cer=0.1)
    assert line.metric == "cer"
    assert line.reference_units == 13  # characters, punctuation and spaces dropped
    assert line.errors == 2 and line.error_rate == pytest.approx(2 / 13)
    assert "cer" in line.flags and not line.passed
    assert [piece for piece in line.diff if piece[0] != "equal"] == [("delete", "散步。", "")]


def test_level_flags_on_constructed_audio(report):
    assert "clipping" in _line(report, 4).flags
    assert _line(report, 4).peak == pytest.approx(1.0)
    assert "silent" in _line(report, 5).flags
    assert "nan" in _line(report, 8).flags
    late, clean = _line(report, 9), _line(report, 1)
    assert "lead-silence" in late.flags
    assert late.leading_silence == pytest.approx(clean.leading_silence + 1.0, abs=0.03)
    assert "trail-silence" not in late.flags
    assert not {"clipping", "silent", "nan", "lead-silence", "trail-silence"} & set(clean.flags)


def test_overflow_and_overlap_with_the_speakers_next_line(report):
    line = _line(report, 6)
    spoken = sf.info(DATA / "fox.wav").duration
    assert {"overflow", "overlap"} <= set(line.flags)
    assert line.overflow == pytest.approx(spoken - 2.0, abs=0.01)
    assert line.overlap == pytest.approx(20.0 + spoken - 22.5, abs=0.01) and line.overlap_line == 7
    assert "into line 7" in line.note
    assert "wer" not in line.flags  # the words are right; only the timing fails
    # BOB's line 2 ends long before BOB speaks again
    assert "overlap" not in _line(report, 2).flags and "overflow" not in _line(report, 1).flags


def test_render_failed_line_is_reported_without_transcription(counted):
    report, asr, seen = counted
    line = _line(report, 7)
    assert not line.passed and line.flags == ("render-failed",)
    assert line.transcript is None and line.error_rate is None
    assert "out of memory" in line.note
    # Nor the Chinese line an English-only model cannot score, nor line 5, where nothing rises above the silence level.
    assert asr.calls == len(report.lines) - 3
    assert _line(report, 5).transcript is None and "no speech heard" in _line(report, 5).note
    assert [s[0] for s in seen] == list(range(1, 10)) and {s[1] for s in seen} == {9}


def test_corpus_wer_is_total_errors_over_total_words(report):
    scored = [c for c in report.lines if c.metric == "wer" and c.transcript is not None]
    errors, words = sum(c.errors for c in scored), sum(c.reference_units for c in scored)
    assert report.wer.lines == len(scored) == 6
    assert report.wer.rate == pytest.approx(errors / words)
    assert report.wer.rate != pytest.approx(np.mean([c.error_rate for c in scored]))


def test_verdict_and_thresholds_come_from_the_manifest(report):
    assert not report.passed
    assert report.failed == sum(c.verdict.outcome == FAILED for c in report.lines) == 7
    assert report.unchecked == 1 and report.tally.passed == 1 == sum(c.passed for c in report.lines)
    assert report.settings.max_wer == 0.25 and report.settings.max_cer == 0.1


def test_threshold_given_by_the_caller_wins(whisper, output):
    manifest = json.loads((output / "manifest.json").read_text(encoding="utf-8"))
    (line,) = check_lines(output, [manifest["lines"][1]], whisper, max_wer=5.0, max_cer=0.1)
    assert line.index == 2 and line.passed and line.flags == ()


def test_qa_json_has_settings_model_lines_and_corpus(report, output):
    json_path, html_path = write_reports(report, output)
    data = json.loads(json_path.read_text(encoding="utf-8"))
    assert data["asr_model"] == report.asr_model
    assert data["settings"]["max_wer"] == 0.25
    assert data["passed"] is False and data["failed"] == 7 and data["unchecked"] == 1
    assert data["verdicts"] == {"failed": 7, "unchecked": 1, "passed": 1} and data["total"] == 9
    assert "passed" not in data["headline"] and "1 unchecked" in data["headline"]
    assert [line["index"] for line in data["lines"]] == list(range(1, 10))
    first = data["lines"][0]
    assert first["text"] == FOX and first["passed"] is True and first["metric"] == "wer"
    assert first["verdict"] == "passed" and first["reasons"] == [] and first["severity"] is None
    assert {"speaker", "transcript", "error_rate", "flags", "errors", "reference_units"} <= set(first)
    assert data["lines"][6]["transcript"] is None and data["lines"][6]["flags"] == ["render-failed"]
    assert data["corpus"]["wer"]["errors"] == report.wer.errors
    assert data["lines"][1]["diff"] == [list(piece) for piece in report.lines[1].diff]
    assert data["lines"][2]["marks"] == ["unscored"] and data["corpus"]["cer"]["units"] == 0
    assert data["lines"][2]["verdict"] == "unchecked" and data["lines"][2]["passed"] is False
    assert data["lines"][2]["reasons"][0]["check"] == "words"
    render_failed = data["lines"][6]
    assert render_failed["verdict"] == "failed" and render_failed["severity"] == "critical"
    assert render_failed["reasons"] == [{"check": "render-failed", "text": "engine: out of memory"}]
    assert data["notes"] == list(report.notes) and data["speaker_model"] is None
    assert not [p for p in output.iterdir() if p.name.endswith(".tmp")]


class _Page(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.text: list[str] = []
        self.audio: list[dict] = []
        self.external: list[str] = []
        self.rows: list[str] = []
        self.row_ids: list[str] = []
        self.bars: list[str] = []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "audio":
            self.audio.append(attrs)
        elif tag == "tr" and attrs.get("id", "").startswith("line-"):
            self.rows.append(attrs["class"])
            self.row_ids.append(attrs["id"])
        elif tag == "a" and "bar" in attrs.get("class", "").split():
            self.bars.append(attrs["href"])
        for name in ("src", "href"):
            if tag != "audio" and attrs.get(name) and not attrs[name].startswith("#"):
                self.external.append(attrs[name])

    def handle_data(self, data):
        self.text.append(data)


def read_page(path: Path) -> _Page:
    page = _Page()
    page.feed(path.read_text(encoding="utf-8"))
    page.close()
    return page


def test_qa_html_names_every_line_and_points_players_at_segments(report, output):
    _, html_path = write_reports(report, output)
    page = read_page(html_path)
    text = "".join(page.text)
    for line in report.lines:
        assert f"#{line.index}" in text and line.text in text
    assert "00:20.000" in text and "00:40.000" in text  # each row's start
    assert "<del>" in html_path.read_text(encoding="utf-8")  # words of the text not heard are struck out
    assert page.external == []  # one self-contained file
    assert len(page.audio) == 8  # every line with a segment, not the failed render
    for player in page.audio:
        assert player["preload"] == "metadata"
        assert not player["src"].startswith(("/", "http")) and (output / unquote(player["src"])).is_file()
    assert page.rows == ["fail"] * report.failed + ["unchecked"] + ["pass"]
    # Every line has a bar on the timeline, and every bar leads to its row.
    assert sorted(page.bars) == sorted(f"#{row_id}" for row_id in page.row_ids)


def test_terminal_report_lists_failing_lines_and_totals(report, output):
    console = Console(record=True, width=200)
    print_report(report, console, (output / "qa.json", output / "qa.html"))
    out = console.export_text()
    assert OTHER_TEXT in out and GOODBYE in out and "render-failed" in out
    assert "7 failed, 1 unchecked, 1 passed" in out and report.asr_model in out
    assert "unchecked: line(s) 3: words not scored" in out
    assert "00:20.000" in out  # the start of failing line 6
    assert "English-only" in out  # the note on the unscored line
    assert str(output / "qa.html") in out and str(output / "qa.json") in out


def test_missing_segment_file_is_flagged(tmp_path, whisper):
    entry = {
        "index": 1,
        "speaker": "ALICE",
        "text": "Hi.",
        "language": "en",
        "start": 0,
        "end": 1,
        "file": "segments/0001-ALICE.wav",
        "status": "rendered",
    }
    (line,) = check_lines(tmp_path, [entry], whisper, max_wer=0.2, max_cer=0.1)
    assert line.flags == ("missing-file",) and not line.passed and line.transcript is None


def test_bad_inputs_raise_one_clear_error(tmp_path, whisper):
    with pytest.raises(OmnidubError, match="no manifest.json"):
        run_qa(tmp_path, asr=whisper)
    (tmp_path / "manifest.json").write_text("{not json", encoding="utf-8")
    with pytest.raises(OmnidubError, match="manifest.json"):
        run_qa(tmp_path, asr=whisper)
    (tmp_path / "segments").mkdir()
    (tmp_path / "segments" / "0001-ALICE.wav").write_bytes(b"RIFF garbage, not audio")
    entry = {
        "index": 1,
        "speaker": "ALICE",
        "text": "Hi.",
        "language": "en",
        "start": 0,
        "end": 1,
        "file": "segments/0001-ALICE.wav",
        "status": "rendered",
    }
    with pytest.raises(OmnidubError, match=r"0001-ALICE\.wav \(line 1\)"):
        check_lines(tmp_path, [entry], whisper, max_wer=0.2, max_cer=0.1)


def test_a_line_may_run_into_the_silence_after_its_slot_up_to_its_limit(tmp_path, whisper):
    # The same 2.97 s of speech in the same 2 s slot: only the room the render gave the line decides.
    lines = [
        {"index": 1, "text": FOX, "start": 0.0, "end": 2.0, "audio": "fox"},
        {"index": 2, "text": FOX, "start": 10.0, "end": 12.0, "limit": 13.5, "audio": "fox"},
        {"index": 3, "text": FOX, "start": 20.0, "end": 22.0, "limit": 22.5, "audio": "fox"},
        {"index": 4, "text": FOX, "start": 30.0, "end": 32.0, "limit": None, "audio": "fox"},
    ]
    out = _make_output(tmp_path, lines)
    manifest = json.loads((out / "manifest.json").read_text())
    checks = {c.index: c for c in check_lines(out, manifest["lines"], whisper, max_wer=1.0, max_cer=1.0)}
    assert "overflow" in checks[1].flags  # no limit recorded: the slot's end is the limit
    assert "overflow" not in checks[2].flags
    assert "overflow" in checks[3].flags and checks[3].overflow == pytest.approx(0.47, abs=0.02)
    assert "overflow" not in checks[4].flags  # the last line of the program may run on


def test_the_terminal_labels_what_was_heard_and_why_a_line_failed(tmp_path):
    lines = [
        {"index": 1, "text": FOX, "start": 0.0, "end": 4.0, "audio": "fox"},
        {"index": 2, "text": "Hello there.", "start": 5.0, "end": 8.0, "audio": "fox"},
    ]
    out = _make_output(tmp_path, lines)
    console = Console(record=True, width=200)
    print_report(run_qa(out, asr=ScriptedAsr("", "en")), console)
    text = console.export_text()
    for column in ("line", "start / end", "speaker", "errors", "flags", "said / heard / why"):
        assert column in text
    # An empty transcript reads as nothing heard, and the flag's reason is labelled, not shown as a transcript.
    assert "heard: nothing" in text and "why: too many word errors" in text
    print_report(run_qa(out, asr=ScriptedAsr("Hello, where?", "en")), console := Console(record=True, width=200))
    assert "heard: \u201cHello, where?\u201d" in console.export_text()


def test_a_line_ends_where_its_audio_was_rendered_not_where_its_slot_ends(tmp_path):
    spoken = sf.info(DATA / "fox.wav").duration
    lines = [
        {"index": 1, "text": FOX, "start": 0.0, "end": 4.0, "rendered_end": 2.5, "audio": "fox"},
        {"index": 2, "text": FOX, "start": 10.0, "end": 14.0, "audio": "fox"},  # a manifest without rendered_end
    ]
    out = _make_output(tmp_path, lines)
    report = run_qa(out, asr=ScriptedAsr(FOX, "en"))
    assert report.lines[0].end == 2.5
    assert report.lines[1].end == pytest.approx(10.0 + spoken, abs=1e-6)
    _, html_path = write_reports(report, out)
    page = "".join(read_page(html_path).text)
    assert "to 00:02.500" in page and f"to 00:{10 + spoken:06.3f}" in page and "00:14.000" not in page
    data = json.loads((out / "qa.json").read_text())
    assert [line["end"] for line in data["lines"]] == [2.5, round(10.0 + spoken, 4)]


def test_qa_runs_offline_with_the_installed_tiny_en_and_errors_name_the_flag(tmp_path, whisper_tiny_en):
    from typer.testing import CliRunner

    from omnidub.cli import app

    out = _make_output(tmp_path / "out", [{"index": 1, "text": FOX, "start": 0.0, "end": 4.0, "audio": "fox"}])
    runner = CliRunner()
    result = runner.invoke(app, ["qa", str(out), "--asr-model", "tiny.en", "--speaker-model", "none"])
    assert result.exit_code == 0, result.output
    assert json.loads((out / "qa.json").read_text())["asr_model"] == "tiny.en"
    # A model that is not there: the command line names its flag, the library its argument.
    result = runner.invoke(app, ["qa", str(out), "--asr-model", "small", "--speaker-model", "none"])
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert "pass --asr-model PATH" in result.output and "--asr-model tiny.en" in result.output
    assert "asr_model=" not in result.output
    from omnidub.api import Session

    with pytest.raises(OmnidubError, match=r"pass asr_model=PATH .* asr_model=tiny\.en"):
        Session(device="cpu", asr_model="small").qa(out, speaker_model="none")


def test_a_line_left_without_a_voice_is_listed_by_qa_which_exits_1_while_it_is_left(tmp_path, whisper_tiny_en):
    # render --source leaves a line unrendered when no voice of the source is surely its own: it has no audio, so no
    # row, yet QA must not call the folder passed. Its words look like markup and are shown as they are.
    from typer.testing import CliRunner

    from omnidub.cli import app

    why = "no voice of the source is surely its own: 0.20 like S1's clip; give it one: --voice EVE=FILE"
    left = {"index": 2, "speaker": "EVE", "text": GOODBYE, "start": 65.5, "end": 66.5, "why": why}
    fox = {"index": 1, "text": FOX, "start": 0.0, "end": 4.0, "audio": "fox"}
    out = _make_output(tmp_path / "out", [fox], unvoiced=[left])
    result = CliRunner().invoke(app, ["qa", str(out), "--asr-model", "tiny.en", "--speaker-model", "none"])
    assert result.exit_code == 1, result.output
    said = " ".join(result.output.split())
    assert "not rendered: line 2 (EVE, 01:05.500): no voice of the source is surely its own" in said, said
    assert "1 line(s) not rendered" in said
    data = json.loads((out / "qa.json").read_text())
    assert data["unvoiced"] == [left] and data["passed"] is False and data["failed"] == 0
    assert [line["index"] for line in data["lines"]] == [1] and data["lines"][0]["passed"]
    page = (out / "qa.html").read_text()
    assert '<section id="unvoiced">' in page and html.escape(GOODBYE) in page and GOODBYE not in page
    assert html.escape(why) in page


def test_an_episode_s_hundreds_of_failed_and_unvoiced_lines_leave_the_terminal_readable(tmp_path, whisper_tiny_en):
    # An episode's QA can fail hundreds of lines and leave a quarter unrendered: the terminal shows the gravest
    # failed lines and the first unrendered ones, each with its why, and names the rest by number; the files keep
    # every one.
    from typer.testing import CliRunner

    from omnidub.cli import app
    from omnidub.qa.report import FAILED_SHOWN
    from omnidub.script import SAID_ONE_BY_ONE

    crashed = [
        {"index": k, "text": f"Crashed line {k}.", "start": 5.0 * k, "end": 5.0 * k + 4, "status": "failed"}
        | {"error": "engine: out of memory", "file": None, "duration": None}
        for k in range(1, FAILED_SHOWN + 6)
    ]
    misheard = [
        {"index": k, "text": f"Misheard line {k}.", "start": 5.0 * k, "end": 5.0 * k + 4, "audio": "fox"}
        for k in range(FAILED_SHOWN + 6, FAILED_SHOWN + 9)
    ]
    left = [
        {"index": k, "speaker": "EVE", "text": f"Unvoiced line {k}.", "start": 5.0 * k, "end": 5.0 * k + 1}
        | {"why": f"no voice of the source is surely its own (line {k}'s clip: 0.3 s)"}
        for k in range(FAILED_SHOWN + 9, FAILED_SHOWN + 9 + SAID_ONE_BY_ONE + 4)
    ]
    out = _make_output(tmp_path / "out", crashed + misheard, unvoiced=left)
    result = CliRunner().invoke(app, ["qa", str(out), "--asr-model", "tiny.en", "--speaker-model", "none"])
    assert result.exit_code == 1, result.output
    said = " ".join(result.output.split())
    failed = len(crashed) + len(misheard)
    assert f"{failed} failed line(s), gravest first; the {FAILED_SHOWN} gravest" in said, said
    # the gravest are the crashed lines (critical) in programme order; the rest named by number
    shown = [k for k in range(1, failed + 1) if f"Crashed line {k}." in said or f"Misheard line {k}." in said]
    assert shown == list(range(1, FAILED_SHOWN + 1))
    rest = f"{FAILED_SHOWN + 1}-{failed}"
    assert f"failed as well: {failed - FAILED_SHOWN} line(s) less grave, {rest} (each one in {out / 'qa.html'})" in said
    first, then = left[:SAID_ONE_BY_ONE], left[SAID_ONE_BY_ONE:]
    for line in first:
        assert f"not rendered: line {line['index']} (EVE, " in said and line["why"] in said
    for line in then:
        assert f"not rendered: line {line['index']} " not in said and line["why"] not in said
    assert f"not rendered either: line(s) {then[0]['index']}-{then[-1]['index']} (each one's why in" in said
    assert f"{len(left)} line(s) not rendered" in said
    data = json.loads((out / "qa.json").read_text())
    assert data["failed"] == failed and data["unvoiced"] == left
    page = (out / "qa.html").read_text()
    assert all(html.escape(line["why"]) in page for line in left)
    assert all(f"Crashed line {k}." in page for k in range(1, len(crashed) + 1))
