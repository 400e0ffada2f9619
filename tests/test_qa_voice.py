"""QA that hears who is speaking (real flite voices, judged by resemblyzer), and the report page around it."""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import dataclasses
import json
import shutil
from pathlib import Path
from urllib.parse import unquote

import numpy as np
import pytest
import soundfile as sf
from conftest import EXAMPLES
from rich.console import Console
from test_qa import FOX, ScriptedAsr, read_page

from omnidub.asr import Asr
from omnidub.config import QaOptions
from omnidub.errors import OmnidubError
from omnidub.qa import SpeakerEncoder, check_lines, print_report, run_qa, speaker_encoder, write_reports

MIN_VOICE_SIMILARITY = QaOptions().min_voice_similarity  # calibrated in the README

DATA = Path(__file__).parent / "data" / "qa"
RATE = 16000
# The example's references: flite slt for ALICE, flite rms for BOB (examples/make_voices.sh).
STELLA = (DATA / "stella.txt").read_text(encoding="utf-8").strip()
ALICE_REF = EXAMPLES / "voices" / "alice.wav"
BOB_REF = EXAMPLES / "voices" / "bob.wav"


@pytest.fixture(scope="module")
def encoder() -> SpeakerEncoder:
    return SpeakerEncoder("cpu")


@pytest.fixture(scope="module")
def whisper(whisper_tiny_en) -> Asr:
    return Asr(str(whisper_tiny_en), device="cpu")


def _output(folder: Path, lines: list[dict], **top) -> Path:
    """An output folder whose segments are the named flite WAVs (or arrays), with a mix of them all."""
    (folder / "segments").mkdir(parents=True)
    entries, program = [], top.get("program_seconds", 40.0)
    mix = np.zeros(int(program * RATE) + RATE, dtype=np.float32)
    for line in lines:
        entry = {"speaker": "ALICE", "language": "en", "status": "rendered", "error": None} | line
        audio = entry.pop("audio")
        entry["file"] = f"segments/{entry['index']:04d}-{entry['speaker']}.wav"
        data = sf.read(DATA / f"{audio}.wav", dtype="float32")[0] if isinstance(audio, str) else audio
        sf.write(folder / entry["file"], data, entry.pop("rate", RATE))
        entry.setdefault("duration", round(len(data) / RATE, 3))
        at = int(entry["start"] * RATE)
        mix[at : at + len(data)] += data[: len(mix) - at]
        entries.append(entry)
    sf.write(folder / "mix.wav", mix, RATE)
    manifest = {"sample_rate": RATE, "program_seconds": program, "mix": "mix.wav", "lines": entries} | top
    (folder / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    return folder


@pytest.fixture(scope="module")
def voiced(tmp_path_factory, whisper, encoder):
    fox = sf.read(DATA / "fox.wav", dtype="float32")[0]
    import soxr

    lines = [
        {"index": 1, "text": FOX, "start": 0.0, "end": 4.0, "audio": "fox"},
        {"index": 2, "speaker": "BOB", "text": STELLA, "start": 4.5, "end": 8.5, "audio": "stella"},
        # ALICE's line in BOB's flite voice, then BOB's line in a voice the cast lacks.
        {"index": 3, "text": FOX, "start": 9.0, "end": 13.0, "audio": "fox-rms"},
        {"index": 4, "speaker": "BOB", "text": FOX, "start": 14.0, "end": 18.0, "audio": "fox-awb"},
        {"index": 5, "speaker": "CAROL", "text": FOX, "start": 19.0, "end": 23.0, "audio": "fox"},
        # Replaced after the render by a 24 kHz file of another length.
        {
            "index": 6,
            "text": FOX,
            "start": 24.0,
            "end": 28.0,
            "audio": soxr.resample(fox, RATE, 24000),
            "rate": 24000,
            "duration": 2.5,
        },
        # The last line: nothing follows it, but the programme ends at 30 s.
        {"index": 7, "text": FOX, "start": 28.5, "end": 29.5, "limit_at": None, "audio": "fox"},
    ]
    out = _output(
        tmp_path_factory.mktemp("voiced"),
        lines,
        program_seconds=30.0,
        model={"id": "synthetic:tiny"},
        settings={"name": "fast", "max_wer": 0.25, "max_cer": 0.1},
        voices={"ALICE": {"audio": str(ALICE_REF)}, "BOB": {"audio": str(BOB_REF)}},
    )
    return out, run_qa(out, asr=whisper, encoder=encoder)


def _line(report, index):
    return next(c for c in report.lines if c.index == index)


def test_a_line_in_its_speakers_voice_passes(voiced):
    _, report = voiced
    for index, speaker, other in ((1, "ALICE", "BOB"), (2, "BOB", "ALICE")):
        line = _line(report, index)
        assert line.speaker == speaker and "voice" not in line.flags and line.passed
        assert line.voice.similarity >= MIN_VOICE_SIMILARITY
        assert line.voice.nearest == other and line.voice.margin > 0.1


def test_the_same_text_in_another_speakers_voice_fails(voiced):
    _, report = voiced
    line = _line(report, 3)
    assert line.flags == ("voice",)  # the words are right: only the voice is wrong
    assert line.voice.nearest == "BOB" and line.voice.margin < 0
    assert "sounds like BOB" in line.note


def test_a_voice_outside_the_cast_fails_on_the_threshold(voiced):
    _, report = voiced
    line = _line(report, 4)
    assert line.flags == ("voice",)
    # awb is nearer BOB's reference than ALICE's: only the similarity threshold catches it.
    assert line.voice.margin > 0 and line.voice.similarity < MIN_VOICE_SIMILARITY
    assert "below" in line.note


def test_the_calibrated_threshold_separates_own_voices_from_others(voiced):
    _, report = voiced
    own = [_line(report, i).voice.similarity for i in (1, 2, 6, 7)]
    wrong = [_line(report, i).voice.similarity for i in (3, 4)]
    assert min(own) > MIN_VOICE_SIMILARITY > max(wrong)


def test_a_speaker_without_a_reference_is_left_out_with_the_reason(voiced):
    out, report = voiced
    line = _line(report, 5)
    assert line.voice is None and line.passed
    assert line.voice_skipped == "no usable reference for its speaker"
    carol = next(v for v in report.voices if v.speaker == "CAROL")
    assert carol.lines == 0 and "records no reference recording" in carol.reason
    assert next(v for v in report.voices if v.speaker == "ALICE").reason is None
    # The reason is where the figures are: the terminal's voice line, the page's table, qa.json.
    console = Console(record=True, width=200)
    print_report(report, console)
    assert "CAROL not measured: the manifest records no reference recording" in console.export_text()
    json_path, html_path = write_reports(report, out)
    assert "records no reference recording" in json.loads(json_path.read_text())["voices"]["CAROL"]["reason"]
    assert "why not measured" in html_path.read_text() and "records no reference recording" in html_path.read_text()


def test_a_speaker_whose_lines_hold_no_speech_says_why_none_was_measured(tmp_path, encoder):
    lines = [
        {
            "index": 1,
            "speaker": "DAVE",
            "text": "Hello?",
            "start": 0.0,
            "end": 2.0,
            "audio": np.zeros(int(1.5 * RATE), np.float32),
        }
    ]
    out = _output(tmp_path, lines, program_seconds=3.0, voices={"DAVE": {"audio": str(ALICE_REF)}})
    report = run_qa(out, asr=ScriptedAsr("", "en"), encoder=encoder)
    assert report.lines[0].voice is None and report.lines[0].voice_skipped.startswith("under 0.3 s of speech")
    (dave,) = report.voices
    assert dave.lines == 0 and dave.reason == "1 line: under 0.3 s of speech once pauses are cut"


def test_references_given_by_the_caller_complete_the_manifest(voiced, encoder):
    out, _ = voiced
    report = run_qa(out, asr=ScriptedAsr(FOX, "en"), encoder=encoder, references={"CAROL": ALICE_REF})
    assert _line(report, 5).voice.similarity >= MIN_VOICE_SIMILARITY
    carol = next(v for v in report.voices if v.speaker == "CAROL")
    assert carol.lines == 1 and carol.reason is None


def test_an_edited_file_is_marked_and_still_checked(voiced):
    _, report = voiced
    line = _line(report, 6)
    assert line.marks == ("edited",) and line.passed
    assert "edited: 24000 Hz, not 16000 Hz, 2.96 s long, not 2.50 s" in line.note
    assert line.error_rate is not None and line.voice is not None
    assert all("edited" not in _line(report, i).marks for i in (1, 2, 3, 4, 5, 7))


def test_the_last_line_is_held_to_the_programme_end(voiced):
    _, report = voiced
    line = _line(report, 7)
    spoken = sf.info(DATA / "fox.wav").duration
    assert "overflow" in line.flags
    assert line.overflow == pytest.approx(28.5 + spoken - 30.0, abs=0.01)
    assert "programme's end" in line.note


def test_qa_json_carries_voice_figures_per_line_and_per_speaker(voiced):
    out, report = voiced
    json_path, _ = write_reports(report, out)
    data = json.loads(json_path.read_text(encoding="utf-8"))
    assert data["speaker_model"] == "resemblyzer" and data["render_model"] == "synthetic:tiny"
    assert data["settings"]["min_voice_similarity"] == MIN_VOICE_SIMILARITY
    third = data["lines"][2]
    assert third["flags"] == ["voice"] and third["voice"]["nearest"] == "BOB" and third["voice"]["margin"] < 0
    assert data["lines"][4]["voice"] is None
    alice = data["voices"]["ALICE"]
    similarities = [line["voice"]["similarity"] for line in data["lines"] if line["speaker"] == "ALICE"]
    assert alice["lines"] == 4 and alice["failed"] == 1
    assert alice["mean_similarity"] == pytest.approx(np.mean(similarities), abs=1e-3)
    assert alice["min_similarity"] == pytest.approx(min(similarities), abs=1e-4)
    assert data["voices"]["CAROL"]["lines"] == 0


def test_the_page_leads_from_the_timeline_to_rows_and_players(voiced):
    out, report = voiced
    _, html_path = write_reports(report, out)
    page = read_page(html_path)
    text = " ".join(page.text)
    assert "synthetic:tiny" in text and "fast" in text and "resemblyzer" in text  # the header
    assert page.external == []
    players = {p.get("id"): p for p in page.audio}
    assert players["mix"]["src"] == "mix.wav"  # one player for the whole programme, which the timeline seeks
    assert len(page.audio) == 1 + len(report.lines)
    for player in page.audio:
        assert player["preload"] == "metadata" and (out / unquote(player["src"])).is_file()
    assert sorted(page.bars) == sorted(f"#{row}" for row in page.row_ids) and len(page.bars) == len(report.lines)
    assert f"voice {_line(report, 3).voice.similarity:.2f} to ALICE" in text
    assert "00:28.500" in text  # each row shows when its line starts


def test_overlap_into_another_speakers_line_and_limit_at(tmp_path):
    lines = [
        # 2.96 s of speech in a 1 s slot: it may run to 2.45 s (limit_at wins over the 0.1 name "limit").
        {"index": 1, "text": FOX, "start": 0.0, "end": 1.0, "limit_at": 2.45, "limit": 100.0, "audio": "fox"},
        {"index": 2, "speaker": "BOB", "text": FOX, "start": 2.5, "end": 6.0, "audio": "fox-rms"},
        # BOB's slot overlaps CAROL's by the script's own design: not a fault.
        {"index": 3, "speaker": "CAROL", "text": FOX, "start": 4.0, "end": 8.0, "audio": "fox"},
    ]
    out = _output(tmp_path, lines, program_seconds=9.0)
    manifest = json.loads((out / "manifest.json").read_text())
    checks = {c.index: c for c in check_lines(out, manifest["lines"], ScriptedAsr(FOX, "en"), max_wer=0.2, max_cer=0.1)}
    spoken = sf.info(DATA / "fox.wav").duration
    assert {"overflow", "overlap"} <= set(checks[1].flags)
    assert checks[1].overflow == pytest.approx(spoken - 2.45, abs=0.01)
    assert checks[1].overlap == pytest.approx(spoken - 2.5, abs=0.01) and checks[1].overlap_line == 2
    assert "overlap" not in checks[2].flags and checks[3].passed


def test_speaker_model_choices():
    assert speaker_encoder("none") is None
    assert speaker_encoder("resemblyzer").name == "resemblyzer"
    with pytest.raises(OmnidubError, match="resemblyzer"):
        speaker_encoder("ecapa")


class TakesFromFlite:
    """A project and its engine as the job's retakes use them; each seed's take is a named flite WAV, rendered
    through a stand-in executor."""

    def __init__(self, out_dir: Path, takes: dict[int, str], whisper, encoder) -> None:
        from omnidub.config import Preset
        from omnidub.folder import OutputFolder
        from omnidub.records import LineEntry
        from omnidub.voices import Voice

        self.out_dir, self.takes, self.whisper, self.encoder = out_dir, takes, whisper, encoder
        self.folder = OutputFolder(out_dir)
        self.manifest = json.loads((out_dir / "manifest.json").read_text())
        self.entries = [LineEntry.from_json(line) for line in self.manifest["lines"]]
        self.voices = {
            "ALICE": Voice("ALICE", ALICE_REF, None, "en", None, None),
            "BOB": Voice("BOB", BOB_REF, None, "en", None, None),
        }
        self.rendered: list[list[int]] = []  # the seeds of each stream the executor was given
        self.preset = Preset()  # QA's thresholds: the preset's, as a project's
        self.program = self.manifest.get("program_seconds")
        from omnidub.project import ProjectOptions

        self.options = ProjectOptions(language="en")  # the lines' language, which QA's judge is chosen for

    # -- the engine ---------------------------------------------------------------------------------------
    def asr(self):
        return self.whisper

    def judge(self, language=None):  # QA's ASR: the render's here
        return self.whisper

    def speaker_encoder(self, name=None):
        return self.encoder

    def transcripts(self):
        return None  # nothing kept: every take is heard

    def executor(self):
        return self

    def stream(self, requests, should_stop=lambda: False, on_bucket=lambda bucket: None):
        from omnidub.backends.base import Result

        self.rendered.append([r.seed for r in requests])
        for request in requests:
            audio = sf.read(DATA / f"{self.takes[request.seed]}.wav", dtype="float32")[0]
            yield Result(request.id, audio, RATE, 0.0, 0)

    def close(self):
        pass

    # -- the project --------------------------------------------------------------------------------------
    def base_seed(self, entry):
        return 0

    def selected(self, index):  # no --only: every line may be retaken
        return True

    def take(self, entry, seed):
        return dataclasses.replace(entry, key=f"key-{seed}", seed=seed, status="pending", attempts=())

    def request(self, take, id):
        from omnidub.backends.base import Request

        return Request(take.text, seed=take.seed, id=id)

    def accept_take(self, take, outcome):
        take.file = f"segments/take-{take.index}-{take.seed}.wav"
        sf.write(self.out_dir / take.file, outcome.audio, outcome.sample_rate)
        take.duration, take.status = round(len(outcome.audio) / outcome.sample_rate, 3), "rendered"

    def adopt(self, entry, take, takes):
        shutil.copy(self.out_dir / take.file, self.out_dir / entry.file)
        entry.key, entry.seed, entry.duration = take.key, take.seed, take.duration
        self.keep_attempts(entry, takes)
        self.save_manifest()

    def keep_attempts(self, entry, takes):
        entry.attempts = tuple(dataclasses.replace(take, chosen=take.key == entry.key) for take in takes)

    def save_manifest(self):
        self.manifest["lines"] = [e.to_json() for e in self.entries]
        (self.out_dir / "manifest.json").write_text(json.dumps(self.manifest), encoding="utf-8")

    def reassemble(self):
        self.save_manifest()

    def mark_checked(self):
        """No timelines here to mark."""


def test_retakes_retry_a_line_in_the_wrong_voice_through_the_executor(tmp_path, whisper, encoder):
    from omnidub.job import Job, QaOptions

    planned = {"slot": 4.0, "natural": 3.0, "target": 3.0, "speed": 1.0, "limit_at": None, "seed": 0}
    lines = [
        {"index": 1, "text": FOX, "start": 0.0, "end": 4.0, "audio": "fox-rms", "key": "key-0", "base_key": "a"}
        | planned,
        {
            "index": 2,
            "speaker": "BOB",
            "text": STELLA,
            "start": 4.5,
            "end": 8.5,
            "audio": "stella",
            "key": "b",
            "base_key": "b",
        }
        | planned,
    ]
    flite = TakesFromFlite(_output(tmp_path, lines, program_seconds=9.0), {1: "fox-awb", 2: "fox"}, whisper, encoder)
    job = Job(flite, [], qa=QaOptions(retakes=3))
    [report] = job.check([flite]).values()
    assert report.passed  # the render's voices were used: the manifest records none
    attempts = flite.entries[0].attempts
    assert [a.seed for a in attempts] == [0, 1, 2]  # stopped at the first take that passed
    assert [a.flags for a in attempts] == [("voice",), ("voice",), ()]
    assert [a.chosen for a in attempts] == [False, False, True]
    assert attempts[2].voice_similarity >= MIN_VOICE_SIMILARITY
    assert flite.entries[1].attempts == ()
    assert flite.rendered == [[1], [2]]  # each retake went through the executor, once
    assert json.loads((tmp_path / "qa.json").read_text())["passed"] is True


def test_other_audio_of_the_same_length_is_marked_edited(tmp_path):
    from omnidub.keys import file_digest

    lines = [{"index": i, "text": FOX, "start": 5.0 * i, "end": 5.0 * i + 4, "audio": "fox"} for i in (1, 2)]
    out = _output(tmp_path, lines, program_seconds=20.0)
    manifest = json.loads((out / "manifest.json").read_text())
    manifest["lines"][0]["sha256"] = file_digest(out / manifest["lines"][0]["file"]).hexdigest()
    manifest["lines"][1]["sha256"] = file_digest(DATA / "fox-rms.wav").hexdigest()  # what the render wrote
    first, second = check_lines(out, manifest["lines"], ScriptedAsr(FOX, "en"), max_wer=0.2, max_cer=0.1)
    assert first.marks == () and second.marks == ("edited",)
    assert "other audio of the same length" in second.note
