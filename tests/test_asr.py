import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from omnidub.asr import Asr, default_asr_model, whisper_language
from omnidub.errors import OmnidubError

DATA = Path(__file__).parent / "data"


def test_default_model_depends_on_the_device():
    assert default_asr_model("cuda") == "large-v3"
    assert default_asr_model("cuda:1") == "large-v3"
    assert default_asr_model("cpu") == "small"
    assert Asr(device="cpu").name == "small"


def test_languages_as_people_write_them_become_whisper_codes():
    assert [whisper_language(x) for x in ("en-US", " English ", "zh_CN", "cmn-Hans", "Cantonese", "JA", "fr")] == [
        "en", "en", "zh", "zh", "yue", "ja", "fr"]
    # Unknown or empty: None, so Whisper detects the language instead of refusing the clip.
    assert [whisper_language(x) for x in ("klingon", "xx-YY", "", None)] == [None, None, None, None]


def test_hub_model_offline_is_one_clear_error_only_when_used():
    asr = Asr("small", device="cpu")  # constructing loads nothing
    with pytest.raises(OmnidubError, match=r"^cannot load ASR model 'small': .*; pass --asr-model PATH") as info:
        asr.transcribe(np.zeros(16000, np.float32), 16000)
    assert "\n" not in str(info.value)


def test_missing_or_wrong_folder_is_a_clear_error(tmp_path):
    with pytest.raises(OmnidubError, match=r"ASR model folder not found: \./no/such/model"):
        Asr("./no/such/model", device="cpu").transcribe(np.zeros(16000, np.float32), 16000)
    with pytest.raises(OmnidubError, match=r"has no model\.bin"):
        Asr(str(tmp_path), device="cpu").transcribe(np.zeros(16000, np.float32), 16000)


def test_transcribes_stereo_audio_at_any_rate_with_word_times(whisper_tiny_en):
    import soxr

    mono, rate = sf.read(DATA / "two_sentences.wav", dtype="float32")
    stereo = np.stack([soxr.resample(mono, rate, 44100)] * 2, axis=1)
    transcript = Asr(str(whisper_tiny_en), device="cpu").transcribe(stereo, 44100, word_timestamps=True)
    assert transcript.language == "en"
    assert transcript.text.lower().startswith("the quick brown fox jumps over the lazy dog")
    assert [w.text.strip(".,").lower() for w in transcript.words[:4]] == ["the", "quick", "brown", "fox"]
    starts = [w.start for w in transcript.words]
    assert starts == sorted(starts) and transcript.words[-1].end <= mono.size / rate + 0.1


def test_availability_is_read_from_the_local_cache_without_the_hub(tmp_path, monkeypatch, whisper_tiny_en):
    import huggingface_hub.constants as constants

    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path))
    assert Asr(str(whisper_tiny_en)).available()
    assert not Asr(str(tmp_path / "missing")).available()
    assert not Asr("small").available()
    snapshot = tmp_path / "models--Systran--faster-whisper-small" / "snapshots" / "abc"
    snapshot.mkdir(parents=True)
    (snapshot / "model.bin").write_bytes(b"")
    assert Asr("small").available() and not Asr("small.en").available()
