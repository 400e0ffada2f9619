import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import re
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
from heard import assert_says

from omnidub.asr import Asr
from omnidub.backends.base import Prompt
from omnidub.config import VoiceOptions
from omnidub.errors import OmnidubError
from omnidub.script import DEFAULT_SPEAKER
from omnidub.voices import (
    PromptCache,
    Voice,
    load_audio,
    load_voices,
    prepare_reference,
    voice_for,
    voice_prompt,
    voice_prompt_key,
)

DATA = Path(__file__).parent / "data"
TWO_SENTENCES = DATA / "two_sentences.wav"  # flite slt: a ~0.2 s pause after "dog", near 2.8 s
# What the 2.5-4 s window must be cut to: the first sentence, at the pause after "dog".
FIRST_SENTENCE = (DATA / "two_sentences.txt").read_text().split(".")[0] + "."
NO_PAUSE = DATA / "no_pause.wav"  # flite rms: 5.4 s of connected speech, no pause at all
RATE = 24000
FAST = VoiceOptions()


class NoAsr(Asr):
    """An ASR that fails the test if anything tries to load or use it."""

    def __init__(self):
        super().__init__("never-loaded", device="cpu")

    def _load(self):
        raise AssertionError("the ASR model was loaded")


@pytest.fixture(scope="module")
def asr(whisper_tiny_en):
    return Asr(str(whisper_tiny_en), device="cpu")


def frame_rms(audio, rate, seconds=0.020):
    n = int(seconds * rate)
    return float(np.sqrt(np.mean(audio[-n:].astype(np.float64) ** 2)))


def voice(speaker="ALICE", audio=TWO_SENTENCES, text=None, **kw):
    return Voice(speaker, audio, text, kw.get("language"), kw.get("speed"), kw.get("instruct"))


# --- voice sources ----------------------------------------------------------------------------------------


@pytest.fixture
def voices_toml(tmp_path):
    (tmp_path / "refs").mkdir()
    for name in ("alice.wav", "bob.wav", "narrator.wav"):
        (tmp_path / "refs" / name).write_bytes(TWO_SENTENCES.read_bytes())
    path = tmp_path / "voices.toml"
    path.write_text(
        """
[ALICE]
audio = "refs/alice.wav"
text = "Alice's transcript."
language = "en"
speed = 1.1

[BOB]
audio = "refs/bob.wav"

[ROBOT]
instruct = "male, low pitch, robotic"

[default]
audio = "refs/narrator.wav"
text = "Narrator."
""",
        encoding="utf-8",
    )
    return path


def test_voices_toml_resolves_paths_relative_to_itself(voices_toml, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path.parent)
    voices = load_voices(voices_toml, [], [])
    assert sorted(voices) == ["ALICE", "BOB", "ROBOT", DEFAULT_SPEAKER]
    alice = voices["ALICE"]
    assert alice.audio == voices_toml.parent / "refs" / "alice.wav" and alice.audio.is_file()
    assert (alice.text, alice.language, alice.speed) == ("Alice's transcript.", "en", 1.1)
    assert voices["BOB"].text is None
    assert voices["ROBOT"].audio is None and voices["ROBOT"].instruct == "male, low pitch, robotic"


def test_command_line_voices_override_the_toml(voices_toml, tmp_path):
    other = tmp_path / "other.wav"
    other.write_bytes(TWO_SENTENCES.read_bytes())
    voices = load_voices(
        voices_toml,
        [f"ALICE={other}", str(other)],
        ["ALICE=New words.", "BOB=Bob's words.", "Words for the default voice, E=mc2."],
    )
    alice = voices["ALICE"]
    # New audio, so the toml transcript is gone; the --voice-text one replaces it; language and speed stay.
    assert (alice.audio, alice.text, alice.language, alice.speed) == (other, "New words.", "en", 1.1)
    assert voices["BOB"].text == "Bob's words."
    assert voices[DEFAULT_SPEAKER].audio == other
    assert voices[DEFAULT_SPEAKER].text == "Words for the default voice, E=mc2."


def test_voice_file_whose_name_contains_an_equals_sign_is_the_default_voice(tmp_path):
    odd = tmp_path / "take=2.wav"
    odd.write_bytes(TWO_SENTENCES.read_bytes())
    voices = load_voices(None, [str(odd)], [])
    assert voices[DEFAULT_SPEAKER].audio == odd


def test_voice_argument_errors_name_the_missing_file(tmp_path):
    with pytest.raises(OmnidubError, match=r"--voice ALICE=\.\.\.: audio file not found: .*nope\.wav"):
        load_voices(None, [f"ALICE={tmp_path / 'nope.wav'}"], [])
    with pytest.raises(OmnidubError, match=r"--voice: audio file not found: .*missing\.wav \(use --voice FILE"):
        load_voices(None, [str(tmp_path / "missing.wav")], [])


def test_voice_text_for_an_unknown_speaker_is_an_error_listing_voices(tmp_path):
    with pytest.raises(OmnidubError, match=r"no voice named 'CAROL' \(known voices: ALICE\)"):
        load_voices(None, [f"ALICE={TWO_SENTENCES}"], ["CAROL=Hi."])
    with pytest.raises(OmnidubError, match=r"no reference audio to go with the transcript"):
        load_voices(None, [f"ALICE={TWO_SENTENCES}"], ["A default transcript without a default voice."])


@pytest.mark.parametrize(
    "body,message",
    [
        ('[ALICE]\naudio = "a.wav"\ntext = "x"\npitch = 3\n', r"\[ALICE\]: unknown key\(s\) pitch"),
        ('[ALICE]\ntext = "x"\n', r"\[ALICE\]: needs audio"),
        ('[ALICE]\naudio = "gone.wav"\n', r"\[ALICE\]: audio file not found: .*gone\.wav"),
        ('[ALICE]\naudio = "a.wav"\nspeed = -1\n', r"\[ALICE\]: speed must be a number from 0.25 to 4, got -1"),
        ('[ALICE]\naudio = "a.wav"\nspeed = 0.001\n', r"\[ALICE\]: speed must be a number from 0.25 to 4"),
        ('[ALICE]\naudio = "a.wav"\nspeed = nan\n', r"\[ALICE\]: speed must be a number from 0.25 to 4, got nan"),
        ('ALICE = "a.wav"\n', r"\[ALICE\]: expected a table"),
        ("[ALICE\n", r"voices\.toml: not valid TOML"),
    ],
)
def test_voices_toml_mistakes_are_clear_errors(tmp_path, body, message):
    (tmp_path / "a.wav").write_bytes(TWO_SENTENCES.read_bytes())
    path = tmp_path / "voices.toml"
    path.write_text(body, encoding="utf-8")
    with pytest.raises(OmnidubError, match=message):
        load_voices(path, [], [])


def test_voice_for_matches_exactly_then_ignoring_case_then_default():
    voices = {
        "ALICE": voice("ALICE"),
        DEFAULT_SPEAKER: voice(DEFAULT_SPEAKER),
    }
    assert voice_for("ALICE", voices).speaker == "ALICE"
    assert voice_for("Alice", voices).speaker == "ALICE"
    assert voice_for("BOB", voices).speaker == DEFAULT_SPEAKER


def test_voice_for_without_default_lists_the_known_voices():
    voices = {"ALICE": voice("ALICE"), "BOB": voice("BOB")}
    with pytest.raises(
        OmnidubError, match=r"no voice for speaker 'CAROL' and no default voice \(known voices: ALICE, BOB\)"
    ):
        voice_for("CAROL", voices)


# --- reference audio --------------------------------------------------------------------------------------


def write_with_av(path, audio, rate, codec):
    import av

    stereo = np.stack([audio, audio * 0.5]).astype(np.float32)
    with av.open(str(path), "w") as container:
        stream = container.add_stream(codec, rate=rate, layout="stereo")
        frame = av.AudioFrame.from_ndarray(stereo, format="fltp", layout="stereo")
        frame.rate = rate
        for packet in stream.encode(frame):
            container.mux(packet)
        for packet in stream.encode(None):
            container.mux(packet)


@pytest.mark.parametrize("suffix", [".flac", ".ogg", ".mp3", ".m4a"])
def test_references_in_common_formats_load_as_mono_at_the_model_rate(tmp_path, suffix):
    mono, rate = sf.read(TWO_SENTENCES, dtype="float32")
    path = tmp_path / f"ref{suffix}"
    if suffix in (".flac", ".ogg"):
        sf.write(path, np.stack([mono, mono * 0.5], axis=1), rate)
    else:
        write_with_av(path, mono, rate, "mp3" if suffix == ".mp3" else "aac")
    audio = load_audio(path, RATE)
    assert audio.ndim == 1 and audio.dtype == np.float32
    assert abs(audio.size / RATE - mono.size / rate) < 0.15  # codecs add a little padding
    assert 0.3 < np.sqrt(np.mean(audio**2)) / np.sqrt(np.mean((mono * 0.75) ** 2)) < 3


def test_short_reference_is_an_error(tmp_path):
    mono, rate = sf.read(TWO_SENTENCES, dtype="float32")
    short = tmp_path / "short.wav"
    sf.write(short, mono[int(0.2 * rate) : int(1.0 * rate)], rate)
    with pytest.raises(OmnidubError, match=r"short\.wav: reference for 'ALICE' is 0\.80 s"):
        prepare_reference(voice(audio=short, text="The quick"), sample_rate=RATE, options=FAST, asr=NoAsr())


def test_reference_inside_the_window_with_a_transcript_is_kept_without_asr(tmp_path):
    mono, rate = sf.read(TWO_SENTENCES, dtype="float32")
    clip = tmp_path / "clip.wav"
    sf.write(clip, mono[: int(2.9 * rate)], rate)
    ref = prepare_reference(
        voice(audio=clip, text="The quick brown fox jumps over the lazy dog."),
        sample_rate=RATE,
        options=FAST,
        asr=NoAsr(),
    )
    assert not ref.trimmed and ref.text == "The quick brown fox jumps over the lazy dog."
    assert ref.audio.size == pytest.approx(2.9 * RATE, abs=2) and ref.sample_rate == RATE


def test_long_reference_is_noted_and_never_kept_whole(tmp_path):
    mono, rate = sf.read(TWO_SENTENCES, dtype="float32")
    long = tmp_path / "long.wav"
    sf.write(long, np.tile(mono, 4), rate)
    said = "The quick brown fox jumps over the lazy dog. She sells sea shells by the sea shore every summer. "
    ref = prepare_reference(voice(audio=long, text=said * 4), sample_rate=RATE, options=FAST, asr=None)
    # Without word times it is cut by energy alone, at the pause after "dog", and says its transcript is a guess.
    assert "over 20 s" in ref.note and "kept whole" not in ref.note and ref.trimmed and ref.provisional
    assert 2.5 <= ref.audio.size / RATE <= 4.0 and "by estimate" in ref.note


def assert_good_cut(ref, asr, options=FAST):
    """The clip is inside the window, ends in silence, and says the first sentence whole: a word missing or
    added at the cut fails. Returns what the ASR model hears in it."""
    low, high = options.reference_window
    seconds = ref.audio.size / ref.sample_rate
    assert ref.trimmed and low <= seconds <= high
    assert frame_rms(ref.audio, ref.sample_rate) < 0.1 * np.sqrt(np.mean(ref.audio**2))
    heard = asr.transcribe(ref.audio, ref.sample_rate).text
    assert_says(heard, FIRST_SENTENCE)
    return heard


def test_trim_without_transcript_cuts_at_a_pause_and_transcribes(asr):
    ref = prepare_reference(voice(), sample_rate=RATE, options=FAST, asr=asr)
    heard = assert_good_cut(ref, asr)
    # The transcript kept (the words heard in the whole sample, up to the cut) is what the clip says.
    assert_says(ref.text, heard)
    assert "trimmed 5.7 s" in ref.note and "transcript by ASR" in ref.note
    assert ref.source_seconds == pytest.approx(5.71, abs=0.01)


def test_trim_cuts_the_users_transcript_at_the_matching_word(asr):
    given = "THE quick-brown fox jumps over the lazy dog! She sells sea shells by the sea shore every summer."
    ref = prepare_reference(voice(text=given), sample_rate=RATE, options=FAST, asr=asr)
    heard = assert_good_cut(ref, asr)
    # Their words, spelling and punctuation, up to the word the clip ends on.
    assert given.startswith(ref.text) and ref.text.endswith("dog!")
    assert_says(heard, ref.text)
    assert "transcript by ASR" not in ref.note


def test_no_pause_in_the_window_keeps_the_reference_whole(asr):
    text = (DATA / "no_pause.txt").read_text().strip()
    ref = prepare_reference(voice(audio=NO_PAUSE, text=text), sample_rate=RATE, options=FAST, asr=asr)
    assert not ref.trimmed and ref.text == text
    assert ref.audio.size == load_audio(NO_PAUSE, RATE).size
    assert "kept whole (5.4 s): no pause between words inside 2.5-4 s" in ref.note


def test_a_transcript_that_does_not_match_the_audio_is_never_cut(asr):
    wrong = "Completely different words that nobody in this clip ever says out loud at all."
    ref = prepare_reference(voice(text=wrong), sample_rate=RATE, options=FAST, asr=asr)
    assert not ref.trimmed and ref.text == wrong
    assert "does not match the recognised words" in ref.note


def test_unloadable_asr_keeps_the_reference_whole_with_the_reason():
    text = (DATA / "two_sentences.txt").read_text().strip()
    ref = prepare_reference(voice(text=text), sample_rate=RATE, options=FAST, asr=Asr("small", device="cpu"))
    assert not ref.trimmed and ref.text == text
    assert "kept whole" in ref.note and "asr_model=PATH" in ref.note


def test_no_transcript_and_no_asr_is_an_error():
    with pytest.raises(OmnidubError, match=r"cannot load ASR model 'small'.*asr_model=PATH"):
        prepare_reference(voice(), sample_rate=RATE, options=FAST, asr=Asr("small", device="cpu"))
    with pytest.raises(OmnidubError, match=r"voice 'ALICE' has no transcript .* --voice-text ALICE=TEXT"):
        prepare_reference(voice(), sample_rate=RATE, options=FAST, asr=None)


def test_quality_preset_keeps_references_up_to_ten_seconds_whole():
    quality = replace(FAST, reference_seconds=0)
    ref = prepare_reference(voice(text="The whole thing."), sample_rate=RATE, options=quality, asr=NoAsr())
    assert not ref.trimmed and ref.text == "The whole thing."


# --- prompt cache -----------------------------------------------------------------------------------------


def make_prompt(text="The quick brown fox."):
    codes = np.random.default_rng(0).integers(0, 1024, size=(8, 75))
    return Prompt(codes, text, 0.05, "en")


IDENTITY = {"id": "k2-fsa/OmniVoice", "revision": "abc", "synthetic": False}


def test_prompt_key_changes_with_everything_that_changes_the_prompt(tmp_path):
    base = voice(text="Words.")
    key = voice_prompt_key(base, FAST, IDENTITY)
    assert re.fullmatch(r"[0-9a-f]{64}", key) and voice_prompt_key(base, FAST, dict(IDENTITY)) == key
    other_audio = tmp_path / "other.wav"
    data = bytearray(TWO_SENTENCES.read_bytes())
    data[-1] ^= 1
    other_audio.write_bytes(bytes(data))
    changed = [
        voice_prompt_key(replace(base, text="Other words."), FAST, IDENTITY),
        voice_prompt_key(replace(base, audio=other_audio), FAST, IDENTITY),
        voice_prompt_key(replace(base, language="de"), FAST, IDENTITY),
        voice_prompt_key(base, replace(FAST, reference_seconds=3.5), IDENTITY),
        voice_prompt_key(base, replace(FAST, reference_window=(2.0, 4.0)), IDENTITY),
        voice_prompt_key(base, FAST, {**IDENTITY, "revision": "def"}),
        voice_prompt_key(base, FAST, {**IDENTITY, "asr": "tiny.en"}),
    ]
    assert key not in changed and len(set(changed)) == len(changed)


def test_prompt_cache_round_trip_and_corrupt_file_is_a_miss(tmp_path):
    cache = PromptCache(tmp_path / "prompts")
    assert cache.get("k") is None
    prompt = make_prompt()
    path = cache.put("k", prompt)
    assert path.is_file() and [p.name for p in path.parent.iterdir()] == ["k.npz"]
    loaded = cache.get("k")
    assert loaded.text == prompt.text and loaded.rms == pytest.approx(prompt.rms) and loaded.language == "en"
    assert np.array_equal(loaded.codes, prompt.codes) and loaded.digest() == prompt.digest()
    path.write_bytes(b"not a prompt")
    assert cache.get("k") is None
    path.write_bytes(prompt.to_bytes()[:100])  # torn by a crash
    assert cache.get("k") is None


def test_prompts_load_without_torch(tmp_path):
    path = PromptCache(tmp_path).put("k", make_prompt())
    code = (
        f"import sys; from omnidub.backends.base import Prompt; Prompt.load({str(path)!r}); "
        "print('torch' in sys.modules)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "False"


def test_cache_hit_loads_no_asr_model_and_encodes_nothing(tmp_path, asr):
    cache = PromptCache(tmp_path / "prompts")
    encoded = []
    base = voice(text="The quick brown fox jumps over the lazy dog.")
    key = voice_prompt_key(base, FAST, IDENTITY)

    def encode(reference):
        encoded.append(reference)
        return make_prompt(reference.text)

    first, reference = voice_prompt(base, cache=cache, options=FAST, key=key, sample_rate=RATE, asr=asr, encode=encode)
    assert len(encoded) == 1 and reference is not None and first.text == reference.text
    assert not reference.provisional and first.note == reference.note

    def no_encode(reference):
        raise AssertionError("encoded again")

    again, reference = voice_prompt(
        base, cache=cache, options=FAST, key=key, sample_rate=RATE, asr=NoAsr(), encode=no_encode
    )
    assert reference is None and again.text == first.text


def test_a_reference_kept_whole_for_want_of_asr_is_prepared_again_once_asr_is_there(tmp_path, asr):
    cache = PromptCache(tmp_path / "prompts")
    base = voice(text="The quick brown fox jumps over the lazy dog.")
    key = voice_prompt_key(base, FAST, IDENTITY)
    missing = Asr(str(tmp_path / "no-model"), device="cpu")
    prompt, reference = voice_prompt(
        base,
        cache=cache,
        options=FAST,
        key=key,
        sample_rate=RATE,
        asr=missing,
        encode=lambda ref: make_prompt(ref.text),
    )
    assert reference.provisional and not reference.trimmed and "no ASR model" in reference.note
    assert prompt.provisional
    # Cached, so a rerun without ASR loads nothing ...
    again, reference = voice_prompt(
        base,
        cache=cache,
        options=FAST,
        key=key,
        sample_rate=RATE,
        asr=missing,
        encode=lambda ref: pytest.fail("encoded again"),
    )
    assert reference is None and again.provisional
    # ... but a run that has an ASR model trims it.
    trimmed, reference = voice_prompt(
        base, cache=cache, options=FAST, key=key, sample_rate=RATE, asr=asr, encode=lambda ref: make_prompt(ref.text)
    )
    assert reference is not None and not trimmed.provisional and not cache.get(key).provisional


def test_a_transcript_far_from_its_audio_is_warned_about(tmp_path):
    mono, rate = sf.read(TWO_SENTENCES, dtype="float32")
    clip = tmp_path / "clip.wav"
    sf.write(clip, mono[: int(1.5 * rate)], rate)
    fitting = prepare_reference(
        voice(audio=clip, text="The quick brown fox."), sample_rate=RATE, options=FAST, asr=NoAsr()
    )
    assert "transcript looks" not in fitting.note
    paragraph = "The quick brown fox jumps over the lazy dog, and then it runs all the way home across the fields."
    long = prepare_reference(voice(audio=clip, text=paragraph), sample_rate=RATE, options=FAST, asr=NoAsr())
    assert "the transcript looks too long for 1.5 s of audio" in long.note
    short = prepare_reference(
        voice(audio=TWO_SENTENCES, text="Hi."), sample_rate=RATE, options=VoiceOptions(reference_seconds=0), asr=NoAsr()
    )
    assert "the transcript looks too short" in short.note


def test_a_reference_with_samples_that_are_not_numbers_is_an_error(tmp_path):
    mono, rate = sf.read(TWO_SENTENCES, dtype="float32")
    mono[1000:1010] = np.nan
    broken = tmp_path / "nan.wav"
    sf.write(broken, mono, rate, subtype="FLOAT")
    with pytest.raises(OmnidubError, match=r"nan\.wav: reference for 'ALICE' has samples that are not numbers"):
        prepare_reference(voice(audio=broken, text="The quick brown fox."), sample_rate=RATE, options=FAST, asr=NoAsr())


def test_voices_toml_languages_are_checked_with_close_matches(tmp_path):
    (tmp_path / "a.wav").write_bytes(TWO_SENTENCES.read_bytes())
    toml = tmp_path / "voices.toml"
    toml.write_text('[ALICE]\naudio = "a.wav"\ntext = "Hi."\nlanguage = "Frensh"\n')
    with pytest.raises(OmnidubError, match=r"\[ALICE\]: language: unknown language 'Frensh'; close matches: french"):
        load_voices(toml, [], [])
    toml.write_text('[ALICE]\naudio = "a.wav"\ntext = "Hi."\nlanguage = "fr"\n')
    assert load_voices(toml, [], [])["ALICE"].language == "fr"


def test_the_word_comparison_catches_a_wrong_cut():
    assert_says("the quick brown fox jump over the lazy dog", FIRST_SENTENCE)  # one word in another form
    for wrong in (
        "the quick brown fox jumps over the lazy",  # a word lost at the cut
        "the quick brown fox jumps over the lazy dog she",  # a word of the next sentence
        "quick brown fox jumps over the lazy dog",  # a word lost at the start
        "she sells sea shells by the sea shore every summer",
    ):  # another sentence
        with pytest.raises(AssertionError):
            assert_says(wrong, FIRST_SENTENCE)
