"""QA verdicts: a line passes only when its words were scored and within bounds; a line whose words could not be
scored is unchecked, never passed, in qa.json, on the page, in the terminal and in the exit code."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
from rich.console import Console
from test_qa import FOX, RATE, ScriptedAsr, _make_output, _speech, _tone, read_page
from typer.testing import CliRunner

from omnidub.errors import OmnidubError
from omnidub.qa import FAILED, PASSED, UNCHECKED, print_report, run_qa, write_reports
from omnidub.qa.verdict import Tally

CHROMIUM = Path("/usr/bin/chromium")


class _BrokenAsr(ScriptedAsr):
    """An ASR that cannot run on any clip (as a model that crashes on the hardware would)."""

    def transcribe(self, audio, sample_rate, language=None, word_timestamps=False):
        raise RuntimeError("CUDA failed with error out of memory")


class _EnglishOnly(ScriptedAsr):
    name = "tiny.en"

    def english_only(self) -> bool:
        return True


class _Recording(ScriptedAsr):
    """Hears a fixed text and remembers the language it was asked for."""

    def __init__(self, heard: str, language: str) -> None:
        super().__init__(heard, language)
        self.asked: list[str | None] = []

    def transcribe(self, audio, sample_rate, language=None, word_timestamps=False):
        self.asked.append(language)
        return super().transcribe(audio, sample_rate, language, word_timestamps)


def _one(folder: Path, asr, **line):
    """The check of a one-line folder whose line (FOX, spoken) is changed by `line`."""
    out = _make_output(folder, [{"index": 1, "text": FOX, "start": 0.0, "end": 4.0, "audio": "fox"} | line])
    (check,) = run_qa(out, asr=asr).lines
    return check


def test_spanish_lines_with_an_english_only_model_are_unchecked_and_the_folder_not_passed(tmp_path):
    lines = [
        {
            "index": i,
            "text": "¿Vamos a la costa la semana que viene?",
            "language": "es",
            "start": 5.0 * i,
            "end": 5.0 * i + 4,
            "audio": "fox",
        }
        for i in (1, 2)
    ]
    report = run_qa(_make_output(tmp_path, lines), asr=_EnglishOnly(FOX, "en"))
    assert [c.verdict.outcome for c in report.lines] == [UNCHECKED, UNCHECKED]
    assert not any(c.passed for c in report.lines) and not report.passed
    # Unchecked for want of a judge of Spanish here: no failure (exit 0), never called passed, said in one note.
    assert report.tally == Tally(passed=0, failed=0, unchecked=2, unjudged=2) and report.tally.exit_code == 0
    assert "passed" not in report.tally.headline() and "2 unchecked (no judge" in report.tally.headline()
    assert "tiny.en is an English-only model" in report.lines[0].verdict.reasons[0].text
    [note] = report.notes
    assert "no judge for es here" in note and "--judge-model small" in note and "omnidub models fetch" in note


def test_a_line_no_speech_was_heard_in_is_still_a_line_to_hear_beside_unjudged_ones(tmp_path):
    lines = [
        {"index": 1, "text": "¿Vamos a la costa?", "language": "es", "start": 0.0, "end": 4.0, "audio": "fox"},
        {"index": 2, "text": FOX, "start": 5.0, "end": 9.0, "audio": "fox"},
    ]

    class BrokenEnglishOnly(_BrokenAsr, _EnglishOnly):
        pass

    report = run_qa(_make_output(tmp_path, lines), asr=BrokenEnglishOnly("", "en"))
    assert report.lines[0].verdict.unjudged and not report.lines[1].verdict.unjudged
    # Line 2's ASR could not run: its words are unchecked for a reason a person must look at (exit 1).
    assert report.tally == Tally(passed=0, failed=0, unchecked=2, unjudged=1) and report.tally.exit_code == 1


def test_an_asr_that_cannot_run_leaves_the_line_unchecked_with_its_error(tmp_path):
    check = _one(tmp_path, _BrokenAsr("", "en"))
    assert check.verdict.outcome == UNCHECKED and not check.passed and check.flags == ()
    [reason] = check.verdict.reasons
    assert reason.text == "words not scored: the ASR could not run (CUDA failed with error out of memory)"


def test_a_model_the_user_must_fix_still_stops_qa(tmp_path):
    class Missing(ScriptedAsr):
        def transcribe(self, audio, sample_rate, language=None, word_timestamps=False):
            raise OmnidubError("cannot load ASR model 'small'")

    with pytest.raises(OmnidubError, match="cannot load ASR model"):
        _one(tmp_path, Missing("", "en"))


def test_a_language_whisper_lacks_is_unchecked_and_omnivoice_names_are_understood(tmp_path):
    quechua = _one(tmp_path / "qu", ScriptedAsr(FOX, "en"), language="Ayacucho Quechua")
    assert quechua.verdict.outcome == UNCHECKED and "no ASR model for its language" in quechua.note
    asr = _Recording(FOX, "de")
    german = _one(tmp_path / "de", asr, language="German")  # an OmniVoice language name, not a code
    assert asr.asked == ["de"] and german.transcript == FOX


def test_a_line_with_nothing_to_hear_fails_as_silent_and_is_not_transcribed(tmp_path):
    asr = _Recording(FOX, "en")
    check = _one(tmp_path, asr, audio=np.zeros(RATE, dtype=np.float32))
    assert asr.asked == []  # Whisper would make words up from silence
    assert check.verdict.outcome == FAILED and check.verdict.severity == "critical" and check.flags == ("silent",)
    assert [f.check for f in check.verdict.unmeasured] == ["words"] and "no speech heard" in check.note


def test_a_passed_line_says_why_its_voice_was_not_measured(tmp_path):
    class QuietEncoder:
        """Hears too little speech in every line, as resemblyzer does in noise."""

        name = "quiet"

        def embed(self, audio, sample_rate):
            return None

        def embed_file(self, path):
            return np.ones(4, dtype=np.float32)

    out = _make_output(tmp_path, [{"index": 1, "text": FOX, "start": 0.0, "end": 4.0, "audio": "fox"}])
    report = run_qa(out, asr=ScriptedAsr(FOX, "en"), encoder=QuietEncoder(), references={"ALICE": out / "ref.wav"})
    (check,) = report.lines
    assert check.verdict.outcome == PASSED and report.passed and report.tally.exit_code == 0
    [voice] = check.verdict.unmeasured
    assert voice.check == "voice" and "under 0.3 s of speech" in voice.text
    line = json.loads(write_reports(report, out)[0].read_text())["lines"][0]
    assert line["verdict"] == "passed" and line["unmeasured"] == [{"check": "voice", "text": voice.text}]


@pytest.fixture
def graded(tmp_path):
    """Lines of every verdict and severity, in programme order, heard by an ASR that always hears FOX."""
    fox = _speech("fox")
    # Line 1 was cloned from its own original line (render --source): a clip cut at that span.
    original = {
        "kind": "line",
        "speaker": "ALICE",
        "start": 12.0,
        "end": 12.0 + len(fox) / RATE,
        "text": FOX,
        "file": "references/line-0001.wav",
    }
    late = np.concatenate([np.zeros(RATE, np.float32), fox])  # a second of silence before the speech
    lines = [
        {"index": 1, "text": FOX, "start": 0.0, "end": 4.0, "audio": "fox", "reference": original},  # passed
        {"index": 2, "text": "Something else entirely was said here.", "start": 5.0, "end": 9.0, "audio": "fox"},
        {"index": 3, "text": FOX, "start": 10.0, "end": 14.0, "audio": late},
        {"index": 4, "text": "Hello?", "start": 15.0, "end": 17.0, "audio": _tone(1.5, 1e-4)},  # silent
        {"index": 5, "text": FOX, "language": "qu", "start": 20.0, "end": 24.0, "audio": "fox"},  # unchecked
        # wrong words and late: two failures of which the gravest is major
        {"index": 6, "text": "Nothing like it at all.", "start": 25.0, "end": 26.0, "audio": "fox"},
        {
            "index": 7,
            "text": FOX,
            "start": 30.0,
            "end": 34.0,
            "status": "failed",
            "error": "engine: out of memory",
            "file": None,
            "duration": None,
        },
    ]
    out = _make_output(tmp_path / "out", lines)
    (out / "references").mkdir()
    sf.write(out / original["file"], fox, RATE)
    sf.write(out / "mix.wav", np.zeros(35 * RATE, dtype=np.float32), RATE)
    manifest = json.loads((out / "manifest.json").read_text())
    (out / "manifest.json").write_text(json.dumps(manifest | {"mix": "mix.wav", "program_seconds": 35.0}))
    report = run_qa(out, asr=ScriptedAsr(FOX, "en"))
    write_reports(report, out)
    return report, out


# What to hear first: critical (4 silent, 7 render failed, in programme order), major with more failures (6),
# major (2), minor (3: a second of silence before the speech), unchecked (5), passed (1).
HEARING_ORDER = [4, 7, 6, 2, 3, 5, 1]


def test_failed_lines_come_first_by_severity_then_unchecked_then_passed(graded):
    report, out = graded
    verdicts = {c.index: c.verdict for c in report.lines}
    assert [verdicts[i].label for i in HEARING_ORDER] == [
        "failed (critical)",
        "failed (critical)",
        "failed (major)",
        "failed (major)",
        "failed (minor)",
        "unchecked",
        "passed",
    ]
    assert set(verdicts[6].failures[i].check for i in range(2)) == {"wer", "overflow"}
    page = read_page(out / "qa.html")
    assert page.row_ids == [f"line-{i}" for i in HEARING_ORDER]
    assert page.rows == ["fail"] * 5 + ["unchecked", "pass"]
    console = Console(record=True, width=200)
    print_report(report, console)
    text = console.export_text()
    cells = [row.split("│")[1].strip() for row in text.splitlines() if row.startswith("│")]
    assert [int(cell) for cell in cells if cell.isdigit()] == HEARING_ORDER[:5]  # the table of failed lines
    assert "unchecked: line(s) 5: words not scored: no ASR model for its language" in text
    assert "6 of 7 lines to hear: 5 failed, 1 unchecked" in text and "5 failed, 1 unchecked, 1 passed" in text


def test_every_player_shows_its_length_before_it_is_clicked(graded):
    report, out = graded
    page = read_page(out / "qa.html")
    markup = (out / "qa.html").read_text(encoding="utf-8")
    assert len(page.audio) == 8  # the mix, every line with a segment (not the failed render), line 1's original
    for player in page.audio:
        assert player["preload"] == "metadata"
        seconds = sf.info(out / player["src"]).duration
        written = f"{seconds:.2f} s" if seconds < 60 else None
        assert written is None or written in player["aria-label"]
    for c in report.lines:
        if c.file:
            assert f'data-seconds="{c.duration:.3f}">{c.duration:.2f} s</span>' in markup
    assert '<audio id="mix" controls preload="metadata" src="mix.wav" aria-label="the mix, 35.00 s">' in markup


def test_the_page_headline_never_says_passed_while_a_line_is_unchecked(tmp_path):
    unchecked = [{"index": 1, "text": FOX, "language": "es", "start": 0.0, "end": 4.0, "audio": "fox"}]
    for name, lines, asr in (
        ("es", unchecked, _EnglishOnly(FOX, "en")),
        ("en", [unchecked[0] | {"language": "en"}], ScriptedAsr(FOX, "en")),
    ):
        out = _make_output(tmp_path / name, lines)
        write_reports(run_qa(out, asr=asr), out)
        markup = (out / "qa.html").read_text(encoding="utf-8")
        headline = markup.split('<p class="headline">')[1].split("</p>")[0]
        if name == "es":
            assert "passed" not in headline and "class=warn" in headline and "unchecked" in headline
        else:
            assert "the line passed" in headline and "class=ok" in headline


def test_omnidub_qa_exits_0_when_nothing_failed_and_never_calls_an_unjudged_line_passed(tmp_path, whisper_tiny_en):
    from omnidub.cli import app

    runner = CliRunner()
    english = _make_output(tmp_path / "en", [{"index": 1, "text": FOX, "start": 0.0, "end": 4.0, "audio": "fox"}])
    spanish = tmp_path / "es"
    shutil.copytree(english, spanish)
    manifest = json.loads((spanish / "manifest.json").read_text())
    manifest["lines"][0]["language"] = "es"
    (spanish / "manifest.json").write_text(json.dumps(manifest))
    args = ["--judge-model", str(whisper_tiny_en), "--speaker-model", "none"]  # --judge-model: qa's --asr-model
    result = runner.invoke(app, ["qa", str(spanish), *args])
    assert result.exit_code == 0, result.output  # no judge of Spanish here: unchecked, no failure
    assert "unchecked: line(s) 1" in result.output and "the line passed" not in result.output
    assert "no judge for es here" in " ".join(result.output.split())
    data = json.loads((spanish / "qa.json").read_text())
    assert data["passed"] is False and data["verdicts"] == {"failed": 0, "unchecked": 1, "passed": 0}
    assert data["unjudged"] == 1
    result = runner.invoke(app, ["qa", str(english), *args])
    assert result.exit_code == 0, result.output
    assert "the line passed" in result.output


def test_the_page_in_a_browser_plays_what_to_hear_first_and_shows_every_length(graded):
    sync_api = pytest.importorskip("playwright.sync_api")
    if not CHROMIUM.is_file():
        pytest.skip("Debian's chromium is not installed")
    report, out = graded
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])
        try:
            page = browser.new_page()
            page.goto((out / "qa.html").as_uri())
            rows = page.locator("tbody tr[id^=line-]")
            assert rows.first.get_attribute("id") == f"line-{HEARING_ORDER[0]}"
            assert "5 failed, 1 unchecked" in page.locator("p.headline").inner_text()
            # The browser reads each file's length without playing it, and it agrees with the one written.
            page.wait_for_function(
                "Array.from(document.querySelectorAll('audio')).every(a => a.readyState >= 1)", timeout=10_000
            )
            lengths = page.evaluate(
                "Array.from(document.querySelectorAll('audio')).map(a => [a.duration,"
                " +a.nextElementSibling.dataset.seconds])"
            )
            assert len(lengths) == 8 and all(abs(heard - written) < 0.01 for heard, written in lengths)
            page.get_by_label("only lines to hear").check()
            assert page.locator("tr.pass").first.is_hidden() and page.locator("tr.unchecked").is_visible()
        finally:
            browser.close()
