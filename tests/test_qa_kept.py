"""What the ASR heard is kept: the same audio heard by the same model is transcribed once, by any check."""

from __future__ import annotations

import json

import numpy as np
import pytest
from test_qa import FOX, OTHER_TEXT, _make_output

from omnidub.asr import Transcript
from omnidub.qa import run_qa
from omnidub.qa.kept import KeptTranscripts


class HeardAsr:
    """Hears every clip as ``said``, counting how often it is asked; ``failing`` clips raise."""

    name, device = "counted", "cpu"

    def __init__(self, said: str = FOX, weights: str = "v1") -> None:
        self.said, self.weights, self.calls, self.failing = said, weights, 0, 0

    def identity(self) -> str:
        return f"counted ({self.weights})"

    def english_only(self) -> bool:
        return False

    def transcribe(self, audio, sample_rate, language=None, word_timestamps=False):
        self.calls += 1
        if self.failing:
            self.failing -= 1
            raise RuntimeError("out of memory")
        return Transcript(self.said, language or "en", ())


def _clip(seed: int) -> np.ndarray:
    return np.random.default_rng(seed).uniform(-0.5, 0.5, 16000).astype(np.float32)


def test_the_same_samples_are_heard_once_and_anything_they_depend_on_hears_them_again(tmp_path):
    kept, asr = KeptTranscripts(tmp_path / "heard"), HeardAsr()
    first = kept.transcribe(asr, _clip(1), 16000, "en")
    again = kept.transcribe(asr, _clip(1).copy(), 16000, "en")
    assert (first.text, first.language) == (again.text, again.language) == (FOX, "en")
    assert (asr.calls, kept.heard, kept.reused) == (1, 1, 1)
    kept.transcribe(asr, _clip(2), 16000, "en")  # other samples
    kept.transcribe(asr, _clip(1), 22050, "en")  # the same samples at another rate
    kept.transcribe(asr, _clip(1), 16000, "es")  # another language asked for
    kept.transcribe(HeardAsr(weights="v2"), _clip(1), 16000, "en")  # other weights
    assert asr.calls == 4 and kept.reused == 1
    # Another object over the same folder (the next command) finds what this one kept.
    later, asked = KeptTranscripts(tmp_path / "heard"), HeardAsr(said="never asked")
    assert later.transcribe(asked, _clip(2), 16000, "en").text == FOX and asked.calls == 0


def test_a_kept_file_renamed_or_swapped_is_heard_again_not_trusted(tmp_path):
    kept = KeptTranscripts(tmp_path / "heard")
    kept.transcribe(HeardAsr(said="the first clip"), _clip(1), 16000, "en")
    kept.transcribe(HeardAsr(said="the second clip"), _clip(2), 16000, "en")
    first, second = sorted((tmp_path / "heard").iterdir())
    held = first.read_bytes()
    first.write_bytes(second.read_bytes())
    second.write_bytes(held)
    asr = HeardAsr(said="heard again")
    assert {kept.transcribe(asr, _clip(k), 16000, "en").text for k in (1, 2)} == {"heard again"}
    assert asr.calls == 2


def test_a_failed_hearing_is_not_kept_and_a_damaged_or_unwritable_file_costs_only_hearing_again(tmp_path):
    folder = tmp_path / "heard"
    kept, asr = KeptTranscripts(folder), HeardAsr()
    asr.failing = 1
    with pytest.raises(RuntimeError):
        kept.transcribe(asr, _clip(1), 16000, "en")
    assert not folder.exists() or not list(folder.iterdir())
    kept.transcribe(asr, _clip(1), 16000, "en")
    [path] = folder.iterdir()
    for damaged in ("{not json", json.dumps({"text": 3, "language": "en"}), json.dumps(["a list"])):
        path.write_text(damaged)
        assert kept.transcribe(asr, _clip(1), 16000, "en").text == FOX
    assert asr.calls == 5
    blocked = KeptTranscripts(tmp_path / "a-file")
    (tmp_path / "a-file").write_text("in the way")
    assert blocked.transcribe(asr, _clip(1), 16000, "en").text == FOX  # kept nowhere, and the check goes on


def test_a_second_qa_transcribes_only_audio_it_has_not_heard_and_judges_alike(tmp_path):
    lines = [
        {"index": 1, "text": FOX, "start": 0.0, "end": 4.0, "audio": "fox"},
        {"index": 2, "speaker": "BOB", "text": OTHER_TEXT, "start": 5.0, "end": 10.0, "audio": "stella"},
    ]
    out = _make_output(tmp_path / "out", lines)
    kept, asr = KeptTranscripts(tmp_path / "heard"), HeardAsr()
    first = run_qa(out, asr=asr, kept=kept)
    assert asr.calls == 2 and not any("heard by" in note for note in first.notes)
    second = run_qa(out, asr=asr, kept=KeptTranscripts(tmp_path / "heard"))
    assert asr.calls == 2
    assert [(c.verdict, c.transcript, c.error_rate) for c in second.lines] == [
        (c.verdict, c.transcript, c.error_rate) for c in first.lines
    ]
    assert [c.verdict.outcome for c in second.lines] == ["passed", "failed"]  # BOB's line is not what was heard
    assert any(note.startswith("2 of 2 line(s) were heard by counted before") for note in second.notes)
    # A line whose audio changed is heard again; the other is not.
    (out / "segments" / "0002-BOB.wav").write_bytes((out / "segments" / "0001-ALICE.wav").read_bytes())
    third = run_qa(out, asr=asr, kept=kept)
    assert asr.calls == 2  # line 2's audio is now line 1's: heard before
    assert [c.verdict.outcome for c in third.lines] == ["passed", "failed"]
    with (out / "manifest.json").open() as handle:
        manifest = json.load(handle)
    manifest["lines"][1]["language"] = "es"
    (out / "manifest.json").write_text(json.dumps(manifest))
    run_qa(out, asr=asr, kept=kept)
    assert asr.calls == 3  # asked in another language: heard again
