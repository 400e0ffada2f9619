"""A source without original subtitles: transcribed with the real tiny.en (faster-whisper's voice activity, word
times, language), cut into lines at its pauses, its speakers grouped by voice, and the original as heard written
beside the clips, each line labelled, for the user to correct and pass back as the subtitles.

Judged against the generated film's truth (tests/films.py: who speaks where, the words spoken), with tolerances:
tiny.en's words differ from one CPU to another, so no test asserts an exact transcript.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
from films import available, make_film
from test_cli import one_error_line, run

from omnidub.script import DEFAULT_SPEAKER, read_script

DATA = Path(__file__).parent / "data" / "source"
films = pytest.mark.skipif(not available(), reason="needs Debian's flite, festival and espeak-ng")


@pytest.fixture(scope="module")
def cache(tmp_path_factory, tiny_model_dir):
    """A cache of this module's own (the tiny model linked in): whether a transcription is kept is part of what is
    tested."""
    folder = tmp_path_factory.mktemp("cache")
    (folder / "synthetic").mkdir()
    (folder / "synthetic" / tiny_model_dir.name).symlink_to(tiny_model_dir, target_is_directory=True)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("OMNIDUB_CACHE", str(folder))
        yield folder


@pytest.fixture(scope="module")
def film(tmp_path_factory):
    if not available():
        pytest.skip("needs Debian's flite, festival and espeak-ng")
    return make_film(tmp_path_factory.mktemp("film"), seed=1, bed_db=6)


def group_voices(film, lines) -> dict[str, str]:
    """Each group of the written original -> the voice most of its lines are truly spoken in."""
    found = {}
    for line in lines:
        found.setdefault(line.speaker, []).append(film.voice_in(line.start, line.end))
    return {group: max(set(voices), key=voices.count) for group, voices in found.items()}


@films
def test_the_transcription_is_kept_and_its_progress_reaches_the_end(film, cache, whisper_tiny_en):
    from omnidub.asr import Asr
    from omnidub.source import read_source
    from omnidub.source.heard import hear_source

    audio, asr, said = read_source(film.audio), Asr(str(whisper_tiny_en), "cpu"), []
    heard = hear_source(audio, asr, source=film.audio, progress=lambda done, total: said.append((done, total)))
    assert said[-1][0] == said[-1][1] == pytest.approx(film.truth["seconds"], abs=0.05)
    assert all(a[0] <= b[0] for a, b in zip(said, said[1:])) and len(said) > 3  # segment by segment, in order
    assert list(cache.glob("source/heard/*.json"))
    again = hear_source(audio, asr, source=film.audio, progress=lambda *_: pytest.fail("transcribed again"))
    assert again.transcript == heard.transcript
    # Lines cut at the pauses hold one voice each, though the cues of this film lead and trail and one reply
    # follows its line after 0.3 s.
    lines = heard.original.lines
    assert len(film.lines) <= len(lines) <= len(film.lines) + 4
    assert sum(len(film.speakers_in(line.start, line.end)) != 1 for line in lines) <= 1
    assert {line.speaker for line in lines} == {DEFAULT_SPEAKER}


@pytest.mark.slow  # over 10 s of CPU: pytest -m slow runs it, as CI does
@films
def test_extract_without_subtitles_writes_clips_and_the_original_with_its_speakers(
    film, cache, whisper_tiny_en, tmp_path
):
    from omnidub.source.clips import word_agreement
    from omnidub.voices import load_voices

    out = tmp_path / "voices"
    result = run("voices", "extract", film.audio, "--asr-model", whisper_tiny_en, "--out", out)
    assert result.exit_code == 0, result.output
    assert "film.original.srt is the original as" in result.stdout and "--subs" in result.stdout
    written = read_script(out / "film.original.srt")
    names = group_voices(film, written.lines)
    # Every voice found, each its own group; at most one line in sixteen in another voice's group.
    assert sorted(names.values()) == sorted(film.truth["cast"]) and len(names) == len(film.truth["cast"])
    wrong = [line.index for line in written.lines if names[line.speaker] != film.voice_in(line.start, line.end)]
    assert len(wrong) <= max(1, len(written.lines) // 16), wrong
    # The words are the film's, give or take what tiny.en mishears.
    heard = {
        row["line"]: " ".join(
            line.text
            for line in written.lines
            if row["speech"][0] - 0.3 <= (line.start + line.end) / 2 <= row["speech"][1] + 0.3
        )
        for row in film.lines
    }
    agreement = [word_agreement(row["said"], heard[row["line"]], "en") for row in film.lines]
    assert np.median(agreement) >= 0.6 and sum(a >= 0.3 for a in agreement) >= len(agreement) - 2, agreement
    # A clip per voice, each holding that voice alone, and a voices.toml render takes.
    voices = load_voices(out / "voices.toml", [], [])
    assert set(voices) == set(names)
    report = json.loads((out / "extract.json").read_text())
    assert report["subs"] is None and report["heard"]["file"] == "film.original.srt"
    for entry in report["speakers"]:
        clip = entry["clip"]
        parts = clip.get("parts") or [[clip["start"], clip["end"]]]
        assert set().union(*(film.speakers_in(a, b) for a, b in parts)) == {names[entry["speaker"]]}
        assert voices[entry["speaker"]].audio.is_file()
    # Passed back as the subtitles, from the folder it was written in, its labels name the voices; it stays there.
    text = (out / "film.original.srt").read_text()
    result = run("voices", "extract", film.audio, "--subs", out / "film.original.srt", "--out", out)
    assert result.exit_code == 0, result.output
    assert set(load_voices(out / "voices.toml", [], [])) == set(names)
    assert (out / "film.original.srt").read_text() == text
    assert json.loads((out / "extract.json").read_text())["heard"] is None


@pytest.mark.slow  # over 10 s of CPU: pytest -m slow runs it, as CI does
def test_render_source_without_its_subtitles_clones_each_line_from_the_source(cache, whisper_tiny_en, tmp_path):
    from omnidub.folder import Ledger

    truth = {t["line"]: t for t in json.loads((DATA / "truth.json").read_text())["lines"]}
    dub = tmp_path / "dub.srt"  # the Spanish dub without its labels: each line takes its speaker from the source
    dub.write_text(
        "".join(
            row.split(": ", 1)[-1] if ": " in row else row
            for row in (DATA / "dub.srt").read_text().splitlines(keepends=True)
        )
    )
    preset = tmp_path / "preset.toml"
    preset.write_text("steps = 2\n")
    out = tmp_path / "out"
    result = run(
        "render",
        dub,
        "--source",
        DATA / "scene.opus",
        "--asr-model",
        whisper_tiny_en,
        "--model",
        "synthetic:tiny",
        "--preset",
        preset,
        "--voice-match",
        "line",
        "--timeline",
        "none",
        "--out",
        out,
    )
    assert result.exit_code == 0, result.output
    assert "references/scene.original.srt is the original as" in result.stderr and "--source-subs" in result.stderr
    written = read_script(out / "references" / "scene.original.srt")
    assert Ledger(out / ".omnidub" / "ledger.jsonl").files["references/scene.original.srt"].sha256  # omnidub's
    manifest = json.loads((out / "manifest.json").read_text())
    lines = {line["index"]: line for line in manifest["lines"]}
    assert set(lines) == set(truth) and all(line["status"] == "rendered" for line in lines.values())
    # Each dubbed line is matched by time to a line as heard, and takes that line's voice: one voice per character
    # (at most one line, of a dozen, in another's).
    groups = {}
    for index, line in lines.items():
        groups.setdefault(truth[index]["speaker"], []).append(line["speaker"])
        assert line["reference"]["match"] in ("overlap", "several", "index"), line["reference"]
    names = {speaker: max(set(found), key=found.count) for speaker, found in groups.items()}
    assert len(set(names.values())) == 3, groups
    assert sum(names[truth[index]["speaker"]] != line["speaker"] for index, line in lines.items()) <= 1, groups
    own = [line for line in lines.values() if line["reference"]["kind"] == "line"]
    assert len(own) >= 5, [line["reference"]["fallback"] for line in lines.values()]
    for line in own:  # a line's own clip is cut at its own time in the source, with the words heard there
        span = truth[line["index"]]["speech"]
        assert line["reference"]["start"] < span[1] and line["reference"]["end"] > span[0]
        assert (out / line["reference"]["file"]).is_file()
    assert {line.speaker for line in written.lines} == set(names.values())
    # Passed back as --source-subs from the render's own folder, it is read and kept.
    text = (out / "references" / "scene.original.srt").read_text()
    result = run(
        "render",
        dub,
        "--source",
        DATA / "scene.opus",
        "--source-subs",
        out / "references" / "scene.original.srt",
        "--model",
        "synthetic:tiny",
        "--preset",
        preset,
        "--voice-match",
        "speaker",
        "--timeline",
        "none",
        "--only",
        "1",
        "--out",
        out,
    )
    assert result.exit_code == 0, result.output
    assert "came without subtitles" not in result.stderr
    assert (out / "references" / "scene.original.srt").read_text() == text


def test_a_source_without_speech_is_one_line(cache, whisper_tiny_en, tmp_path):
    quiet = tmp_path / "quiet.wav"
    rng = np.random.default_rng(0)
    sf.write(quiet, (0.01 * rng.standard_normal(16000 * 20)).astype(np.float32), 16000)  # a hiss, no voice
    message = one_error_line(run("voices", "extract", quiet, "--asr-model", whisper_tiny_en, "--out", tmp_path / "v"))
    assert "quiet.wav: no speech found in it" in message
    assert not (tmp_path / "v").exists()


def test_without_an_asr_model_the_line_names_subs_and_asr_model(cache, whisper_tiny_en, tmp_path):
    message = one_error_line(run("voices", "extract", DATA / "scene.opus", "--out", tmp_path / "v"))
    assert "no original subtitles" in message and "--subs FILE" in message and "--asr-model" in message
    assert not (tmp_path / "v").exists()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        message = one_error_line(
            run(
                "voices",
                "extract",
                DATA / "scene.opus",
                "--asr-model",
                whisper_tiny_en,
                "--language",
                "de",
                "--out",
                tmp_path / "v",
            )
        )
    assert "is English-only while the source speaks de" in message
    assert "--subs FILE" in message and "multilingual" in message


def speech_map(regions, seconds: float, quiet=()):
    """Voice activity over `regions`, frame levels 0.1 in speech and 0.01 elsewhere, and 0.001 in `quiet` spans."""
    from omnidub.source.speech import HOP, SpeechMap

    frames = np.arange(int(seconds / HOP)) * HOP
    inside = np.zeros(frames.size, bool)
    for a, b in regions:
        inside |= (frames >= a) & (frames < b)
    rms = np.where(inside, 0.1, 0.01)
    for a, b in quiet:
        rms[(frames >= a) & (frames < b)] = 0.001
    return SpeechMap(tuple(regions), rms, inside)


def test_lines_are_cut_at_sentences_segments_pauses_and_length():
    from omnidub.asr import Transcript, Word
    from omnidub.source.heard import heard_lines

    said = [
        ("Good", 0.5, 0.8),
        ("morning.", 0.8, 1.3),
        ("Nice", 1.6, 1.8),
        ("to", 1.8, 1.9),
        ("see", 1.9, 2.2),
        ("you", 2.2, 2.5),
        ("again", 3.3, 3.7),
        ("today", 3.7, 4.1),
        ("my", 4.2, 4.4),
        ("friend", 4.4, 4.8),
        ("♪", 4.8, 4.9),
        ("Segment", 4.9, 5.3),
        ("starts", 5.3, 5.7),
    ]
    words = tuple(Word(*w) for w in said)
    regions = [(0.45, 1.35), (1.55, 2.55), (3.25, 5.75)]
    transcript = Transcript("", "en", words, (0, 10))  # the second segment begins with a word that says nothing
    lines = heard_lines(transcript, speech_map(regions, 8.0)).lines
    # A sentence's end; a pause of 0.8 s inside one; the segment's first spoken word, with no pause before it.
    assert [line.text for line in lines] == [
        "Good morning.",
        "Nice to see you",
        "again today my friend",
        "Segment starts",
    ]
    spans = [(line.start, line.end) for line in lines]
    assert spans[:2] == regions[:2] and spans[2][0] == 3.25 and spans[3][1] == 5.75  # the speech's edges
    assert spans[2][1] == spans[3][0]
    # A run of speech over 7 s is cut at its longest pause (a comma's counts a little more), each part 1 s or more.
    long = tuple(Word(f"w{k}{',' if k == 9 else ''}", 0.4 * k, 0.4 * k + 0.35) for k in range(24))
    parts = heard_lines(Transcript("", "en", long, (0,)), speech_map([(0.0, 9.6)], 10.0)).lines
    assert [line.text.split()[0] for line in parts] == ["w0", "w10"]
    assert all(line.end - line.start <= 7.0 for line in parts)


def test_words_voice_activity_does_not_hear_under_are_a_line_of_their_own():
    from omnidub.asr import Transcript, Word
    from omnidub.source.heard import heard_lines

    # A whisper under the bed, which voice activity does not hear, run by the ASR into the next voice's sentence
    # with no pause between; a word voice activity misses inside a sentence (0.3 s) stays in it.
    said = [
        ("Over", 1.0, 1.3),
        ("here,", 1.3, 1.9),
        ("quickly,", 2.0, 2.35),
        ("turn", 2.8, 2.8),
        ("left", 2.8, 3.05),
        ("at", 3.05, 3.3),
        ("the", 3.3, 3.6),
        ("mill", 3.6, 3.9),
        ("and", 4.1, 4.4),
        ("wait.", 4.4, 4.9),
    ]
    words = tuple(Word(*w) for w in said)
    lines = heard_lines(Transcript("", "en", words, (0,)), speech_map([(2.5, 3.9), (4.4, 5.0)], 6.0)).lines
    assert [line.text for line in lines] == ["Over here, quickly,", "turn left at the mill and wait."]
    assert lines[0].end <= lines[1].start == 2.5


def test_two_voices_under_one_region_of_speech_are_cut_at_the_quietest_moment():
    from omnidub.asr import Transcript, Word
    from omnidub.source.heard import heard_lines

    # Voice activity hears one region over both lines (a loud bed, a quick reply); Whisper puts the change at 3.2 s
    # and its next word starts late; the true pause, the quietest stretch, lies at 2.85-3.0 s.
    words = (Word("It", 1.0, 1.3), Word("rains.", 1.3, 3.2), Word("Yes", 3.2, 3.25), Word("indeed", 3.4, 4.0))
    lines = heard_lines(Transcript("", "en", words, (0,)), speech_map([(0.95, 4.1)], 5.0, quiet=[(2.85, 3.0)])).lines
    assert [line.text for line in lines] == ["It rains.", "Yes indeed"]
    assert 2.85 <= lines[0].end == lines[1].start <= 3.0
    assert lines[0].start == pytest.approx(0.95) and lines[1].end == pytest.approx(4.1)  # the speech's edges


def test_the_lines_heard_are_cut_at_the_dubs_cues_where_the_asr_ran_two_voices_into_one(tmp_path):
    from omnidub.asr import Transcript, Word
    from omnidub.source.analysis import NO_WORDS
    from omnidub.source.heard import Heard, at_cues, heard_lines

    # Whisper runs a reply into the line before it (no pause, no sentence's end: one line heard), writes nothing for
    # a voice under the bed (4.5-5.5 s), and hears a line the dub has no cue for (8-9 s).
    said = [("I", 0.5, 0.7), ("told", 0.7, 1.0), ("you", 1.0, 1.3), ("so", 1.4, 1.7), ("no", 1.8, 2.0)]
    said += [("you", 2.0, 2.2), ("didn't", 2.2, 2.6), ("Again", 8.0, 8.4), ("please", 8.4, 9.0)]
    transcript = Transcript("", "en", tuple(Word(*w) for w in said), (0,))
    speech = speech_map([(0.45, 2.65), (4.5, 5.5), (7.95, 9.05)], 10.0)
    heard = Heard(transcript, heard_lines(transcript, speech), speech)
    assert [line.text for line in heard.original.lines][0] == "I told you so no you didn't"
    dub = tmp_path / "dub.srt"
    dub.write_text(
        "1\n00:00:00,400 --> 00:00:01,750\nEu te disse.\n\n"
        "2\n00:00:01,750 --> 00:00:02,700\nNão disse, não.\n\n"
        "3\n00:00:04,400 --> 00:00:05,600\nOlá?\n\n",
        encoding="utf-8",
    )
    cut = at_cues(heard, read_script(dub))
    lines = cut.original.lines
    assert [(line.text, line.start, line.end) for line in lines] == [
        ("I told you so", 0.4, 1.75),
        ("no you didn't", 1.75, 2.7),
        (NO_WORDS, 4.4, 5.6),  # a cue over speech heard with no words: a line grouped by its voice, never a clip
        ("Again please", heard.original.lines[-1].start, heard.original.lines[-1].end),  # heard, in no cue: kept
    ]
    assert [line.index for line in lines] == [1, 2, 3, 4] and {line.speaker for line in lines} == {DEFAULT_SPEAKER}
    assert cut.transcript is transcript and cut.speech is speech
    assert cut.cued and not heard.cued  # each cue one turn: not cut again where a voice seems to change
    # An untimed script gives no cues to cut at: the lines stay as heard.
    plain = tmp_path / "dub.txt"
    plain.write_text("A: Eu te disse.\nB: Não disse.\n", encoding="utf-8")
    assert at_cues(heard, read_script(plain)) is heard


def cue_with_a_quiet_voice(tmp_path):
    """Whisper, decoding the whole source behind its own voice activity filter, wrote nothing for a quiet voice
    across a hall (3-6 s) that voice activity hears; a second cue (7-8.5 s) holds no speech at all. The lines heard
    at the dub's cues, the cues, and the (silent) audio."""
    from omnidub.asr import Transcript, Word
    from omnidub.source.analysis import NO_WORDS
    from omnidub.source.audio import SourceAudio
    from omnidub.source.heard import Heard, at_cues, heard_lines

    transcript = Transcript("", "en", (Word("Hello", 0.5, 0.9), Word("there.", 0.9, 1.4)), (0,))
    speech = speech_map([(0.45, 1.45), (3.1, 5.8)], 10.0)
    heard = Heard(transcript, heard_lines(transcript, speech), speech)
    dub = tmp_path / "dub.srt"
    dub.write_text(
        "1\n00:00:00,400 --> 00:00:01,600\nOlá.\n\n"
        "2\n00:00:03,000 --> 00:00:06,000\nO coro ensaia.\n\n"
        "3\n00:00:07,000 --> 00:00:08,500\nAbra.\n\n",
        encoding="utf-8",
    )
    cues = read_script(dub)
    cut = at_cues(heard, cues)
    assert [line.text for line in cut.original.lines] == ["Hello there.", NO_WORDS, NO_WORDS]
    return cut, cues, SourceAudio(tmp_path / "silent.wav", np.zeros(16000 * 10, np.float32), 16000)


def test_a_cue_with_speech_and_no_word_heard_in_it_is_heard_again_alone_and_a_silent_one_is_not(tmp_path):
    from omnidub.asr import Transcript, Word
    from omnidub.source.analysis import NO_WORDS
    from omnidub.source.heard import AGAIN, heard_in_cues

    class AloneAsr:
        """Writes words for a stretch heard alone (no voice activity filter), over its middle."""

        def __init__(self):
            self.asked = []

        def transcribe(self, samples, rate, vad=False, **_):
            seconds = len(samples) / rate
            self.asked.append(seconds)
            words = (Word("the", 0.4, 0.7), Word("choir", 0.8, 1.2), Word("practises", 1.3, seconds - 0.4))
            return Transcript("the choir practises", "en", words, (0,))

    cut, cues, audio = cue_with_a_quiet_voice(tmp_path)
    asr, said = AloneAsr(), []
    again = heard_in_cues(cut, cues, audio, asr, "en", said.append)
    assert len(asr.asked) == 1 and asr.asked[0] == pytest.approx(3.4)  # the cue, 0.2 s either side; not the silent one
    lines = again.original.lines
    assert [line.text for line in lines] == ["Hello there.", "the choir practises", NO_WORDS]
    assert lines[1].where.endswith(AGAIN) and said and said[0].startswith("hearing again")
    assert [w.text for w in again.transcript.words] == ["Hello", "there.", "the", "choir", "practises"]
    assert again.transcript.words[2].start == pytest.approx(3.2)  # its time in the source
    assert heard_in_cues(again, cues, audio, asr, "en") is again and len(asr.asked) == 1  # nothing left to hear


@pytest.mark.parametrize("faintly, taken", [("the choir practises", True), ("you", False), ("I'm sorry.", False)])
def test_a_cue_heard_alone_saying_nothing_is_heard_faintly(tmp_path, faintly, taken):
    # Heard alone, Whisper's no-speech rule drops a far voice whole; heard faintly it says what it hears, taken where
    # it says three words or more (a bed alone, heard so, says "you").
    from omnidub.asr import Transcript, Word
    from omnidub.source.analysis import NO_WORDS
    from omnidub.source.heard import AGAIN, heard_in_cues

    class FaintAsr:
        def __init__(self):
            self.asked = []

        def transcribe(self, samples, rate, vad=False, faint=False, **_):
            seconds = len(samples) / rate
            self.asked.append(faint)
            if not faint:
                return Transcript("", "en", (), ())
            said = faintly.split()
            step = (seconds - 0.8) / len(said)
            words = tuple(Word(w, 0.4 + k * step, 0.4 + (k + 1) * step) for k, w in enumerate(said))
            return Transcript(faintly, "en", words, (0,))

    cut, cues, audio = cue_with_a_quiet_voice(tmp_path)
    asr = FaintAsr()
    again = heard_in_cues(cut, cues, audio, asr, "en")
    assert asr.asked == [False, True]  # the cue with speech, heard alone, then faintly
    line = again.original.lines[1]
    assert (line.text, line.where.endswith(AGAIN)) == ((faintly, True) if taken else (NO_WORDS, False))


def test_a_dialogue_dash_cue_s_lines_at_the_dubs_cues_are_two_voices_parted_at_their_pause(tmp_path):
    from omnidub.asr import Transcript, Word
    from omnidub.source.analysis import apart_lines
    from omnidub.source.heard import Heard, at_cues, heard_lines

    # "- ¿Listo?\n- Sí." in one cue: the cue's time shared by length puts the line change well after the pause heard
    # between them (1.05-1.25 s), so "¿Listo?"'s line would hold the start of the other voice's "Sí.", and the two
    # lines would be grouped as one voice. Parted at the pause, each holds its own speech; the cue says they are two.
    said = [("¿Listo?", 0.5, 1.0), ("Sí.", 1.3, 2.3)]
    transcript = Transcript("", "es", tuple(Word(*w) for w in said), (0,))
    speech = speech_map([(0.45, 1.05), (1.25, 2.35)], 3.0)
    heard = Heard(transcript, heard_lines(transcript, speech, "es"), speech)
    dub = tmp_path / "dub.srt"
    dub.write_text("1\n00:00:00,400 --> 00:00:02,400\n- ¿Listo?\n- Sí.\n\n", encoding="utf-8")
    cues = read_script(dub)
    assert cues.lines[0].end > 1.4  # shared by length
    cut = at_cues(heard, cues).original
    assert [(line.text, line.start, line.end) for line in cut.lines] == [("¿Listo?", 0.4, 1.15), ("Sí.", 1.15, 2.4)]
    assert "dialogue-dash" in apart_lines(cut)[(1, 2)]


def test_lines_at_cues_hold_the_words_in_each_cue_and_keep_every_line_heard_outside_them():
    """At an episode's size, against the plain definition: each cue's words are those whose middle lies in it, and a
    line heard is kept when no cue shares any time with it (cues that overlap or touch, lines over several)."""
    import random

    from omnidub.asr import Transcript, Word
    from omnidub.script import Line, Script
    from omnidub.source.analysis import NO_WORDS
    from omnidub.source.heard import Heard, at_cues, heard_line

    rng = random.Random(7)
    words, t = [], 0.0
    for k in range(6000):
        t += rng.uniform(0.05, 0.6)
        words.append(Word(f"w{k}", round(t, 3), round(t + rng.uniform(0.0, 0.5), 3)))
    heard_at, t = [], 0.0
    while t < words[-1].end:
        t += rng.uniform(0.0, 3.0)
        heard_at.append(heard_line(len(heard_at) + 1, "heard", round(t, 3), round(t + rng.uniform(0.3, 4.0), 3), "en"))
        t = heard_at[-1].end
    cues, t = [], 0.0
    for k in range(1500):
        t += rng.uniform(-0.5, 2.5)  # some cues overlap the one before, some touch it
        end = round(t + rng.uniform(0.4, 4.0), 3)
        cues.append(Line(k + 1, "A", f"cue {k + 1}", round(t, 3), end, "pt", f"cue {k + 1}"))
        t = end
    heard = Heard(Transcript("", "en", tuple(words), (0,)), Script(tuple(heard_at), (), (), True), speech_map([], 1.0))
    got = at_cues(heard, Script(tuple(cues), (), (), True)).original.lines
    want = [
        (c.start, c.end, " ".join(w.text for w in words if c.start <= (w.start + w.end) / 2 < c.end) or NO_WORDS)
        for c in cues
    ]
    want += [(h.start, h.end, h.text) for h in heard_at if not any(h.start < c.end and h.end > c.start for c in cues)]
    assert [(line.start, line.end, line.text) for line in got] == sorted(want)


class ScriptedAsr:
    """An ASR that says what it was told, per source length, and counts its work (the cache is what is tested): a
    whole source (heard with voice activity), and a stretch of it heard again alone (no words)."""

    name = "scripted"

    def __init__(self):
        self.heard = 0
        self.again = 0

    def identity(self) -> dict:
        return {"model": "scripted"}

    def transcribe(self, samples, rate, vad=False, **_):
        from omnidub.asr import Transcript, Word

        if not vad:
            self.again += 1
            return Transcript("", "en", (), ())
        self.heard += 1
        seconds = len(samples) / rate
        said = "bob speaks here" if seconds > 6 else "alice speaks"
        words = [Word(w, seconds * k / 4, seconds * (k + 1) / 4) for k, w in enumerate(said.split())]
        return Transcript(said, "en", tuple(words), (0,))


def test_a_kept_transcription_is_used_only_for_what_it_was_made_from(own_cache, tmp_path):
    import shutil

    from omnidub.source import read_source
    from omnidub.source.heard import hear_source

    asr, said = ScriptedAsr(), []
    sources = {}
    for name in ("alice", "bob"):
        sources[name] = tmp_path / f"{name}.wav"
        shutil.copy(Path(__file__).parent.parent / "examples" / "voices" / f"{name}.wav", sources[name])
    texts = {name: hear_source(read_source(path), asr, source=path).transcript.text for name, path in sources.items()}
    assert asr.heard == 2 and texts == {"alice": "alice speaks", "bob": "bob speaks here"}
    again = asr.again  # the stretches of speech its words leave unheard, heard again alone once
    assert again >= 2
    hear_source(read_source(sources["alice"]), asr, source=sources["alice"])
    assert asr.heard == 2 and asr.again == again  # kept, with what was heard again
    # Swap the two kept entries: each is another source's words, and is heard again rather than trusted.
    first, second = sorted((own_cache / "source" / "heard").glob("*.json"))
    held = first.read_bytes()
    first.write_bytes(second.read_bytes())
    second.write_bytes(held)
    for name, path in sources.items():
        audio = read_source(path)
        heard = hear_source(audio, asr, source=path, status=said.append)
        assert heard.transcript.text == texts[name]
        assert all(line.end <= len(audio.samples) / audio.sample_rate + 0.05 for line in heard.original.lines)
    told = [s for s in said if s.startswith("transcribing")]
    assert asr.heard == 4 and len(told) == 2, said
    assert all("again: the kept one was made from another source" in s for s in told), said


def test_a_kept_source_analysis_is_used_only_under_the_key_it_was_made_for(tmp_path):
    import shutil

    from omnidub.source.summary import SourceSummary, load, save

    subs = tmp_path / "original.srt"
    subs.write_text("1\n00:00:01,000 --> 00:00:02,000\nANNA: Hello there.\n", encoding="utf-8")
    original = read_script(subs)
    made_for = tmp_path / "cache" / "key-of-source-a"
    (made_for / "clips").mkdir(parents=True)
    save(SourceSummary(original, {1: "ANNA"}, {}, {}, {}, {}, made_for, "en", ()))
    assert load(made_for, original).speakers == {1: "ANNA"}
    swapped = tmp_path / "cache" / "key-of-source-b"
    shutil.copytree(made_for, swapped)  # another source's analysis under this one's key
    assert load(swapped, original) is None


class VoiceShare:
    """A stub speaker encoder for two voices told apart by the sign of their samples: the share of each voice in a
    clip (None for a clip under 0.3 s or silent)."""

    def embed(self, audio, sample_rate):
        if audio.size < 0.3 * sample_rate or not np.abs(audio).max():
            return None
        voice = np.array([np.mean(audio > 0), np.mean(audio < 0)])
        return voice / np.linalg.norm(voice), audio.size / sample_rate


def two_voices(folder: Path, said: list, seconds: float):
    """A 16 kHz source in which voice A (positive samples) and voice B (negative) speak where `said` says."""
    from omnidub.source.audio import SourceAudio

    rate = 16000
    samples = np.zeros(int(seconds * rate), np.float32)
    for who, a, b in said:
        samples[int(a * rate) : int(b * rate)] = 0.3 if who == "A" else -0.3
    return SourceAudio(folder / "a.wav", samples, rate)


def test_a_reply_heard_too_short_to_embed_is_grouped_by_the_speech_next_to_it(tmp_path):
    # Two voices, told apart by a stub encoder (the sign of the samples); B's "Fine." is heard 0.25 s after B truly
    # said it and too short to embed where it was heard: it is grouped by the speech no other line claims next to
    # it (B's), not kept with the line before (A's).
    from omnidub.script import Script
    from omnidub.source.analysis import analyse
    from omnidub.source.heard import heard_line

    said = [("A", 0.5, 2.5), ("B", 2.6, 2.95), ("A", 4.0, 6.0), ("B", 7.0, 9.0), ("A", 10.0, 12.0), ("B", 13, 15)]
    audio = two_voices(tmp_path, said, 16.0)
    heard = [(a, b) for _, a, b in said]
    heard[1] = (3.2, 3.25)  # where the ASR's word times put "Fine."
    lines = tuple(heard_line(k, "Fine." if k == 2 else "A line.", a, b, "en") for k, (a, b) in enumerate(heard, 1))
    speech = speech_map([(a, b) for _, a, b in said], 16.0)
    found = analyse(Script(lines, (), (), True), audio, VoiceShare(), speech=speech, heard=True)
    assert found.speakers[2] == found.speakers[4] != found.speakers[1]


def test_a_reply_leaning_only_a_little_to_its_voice_is_cut_off_a_line_clearly_of_the_other(tmp_path):
    # A line heard as one: 2.5 s of A, then 1.5 s of a reply by B that A talked over, so that it leans to B by only
    # 0.04 (a voice alike to another does that too). After a side clearly A that is enough to cut; after a side only
    # loosely A (55 % of it), it is not.
    from omnidub.asr import Word
    from omnidub.source.audio import SourceAudio
    from omnidub.source.heard import _cut_at_change, heard_line

    rate = 16000

    def source(share_of_a: float) -> SourceAudio:
        def mixed(share: float, seconds: float) -> np.ndarray:  # A's (positive) samples make `share` of each 200
            return np.resize(np.where(np.arange(200) < round(200 * share), 0.3, -0.3), int(seconds * rate))

        return SourceAudio(tmp_path / "a.wav", np.concatenate([mixed(share_of_a, 2.5), mixed(0.485, 1.5)]), rate)

    words = [Word(f"w{k}", 0.5 * k + 0.05, 0.5 * k + 0.45) for k in range(8)]
    line = heard_line(1, " ".join(w.text for w in words), 0.0, 4.0, "en")
    voices = {"A": np.array([1.0, 0.0]), "B": np.array([0.0, 1.0])}
    speech = speech_map([(0.0, 4.0)], 4.0)
    cut = _cut_at_change(line, words, source(1.0), speech, VoiceShare(), voices)
    assert [(text, start, end) for text, start, end in cut] == [
        ("w0 w1 w2 w3 w4", 0.0, 2.5),
        ("w5 w6 w7", 2.5, 4.0),
    ]
    assert len(_cut_at_change(line, words, source(0.55), speech, VoiceShare(), voices)) == 1


def test_a_quick_reply_whisper_ran_into_the_line_before_is_cut_where_the_voice_changes(tmp_path):
    # A speaks 0.5-2.8 s and B answers 0.05 s later; the ASR made one line of both. Judged against a first grouping
    # of the lines heard (a stub encoder hears the share of each voice), the line is cut at the pause between the
    # two voices' words, and each part is grouped with its own voice. A's line of one voice is never cut.
    from dataclasses import replace

    from omnidub.asr import Transcript, Word
    from omnidub.script import Script
    from omnidub.source.analysis import analyse
    from omnidub.source.heard import AGAIN, Heard, heard_line, voice_changes

    said = [("A", 0.5, 2.8), ("B", 2.85, 5.0), ("A", 6, 8), ("B", 9, 11), ("A", 12, 14), ("B", 15, 17)]
    audio = two_voices(tmp_path, said, 18.0)
    words = []
    for who, a, b in said:
        step = (b - a) / 4
        words += [Word(f"{who.lower()}{k}", a + k * step, a + (k + 1) * step - 0.02) for k in range(4)]
    spans = [(0.5, 5.0)] + [(a, b) for _, a, b in said[2:]]
    text = [" ".join(w.text for w in words if a <= w.start < b) for a, b in spans]
    lines = tuple(heard_line(k, t, a, b, "en") for k, (t, (a, b)) in enumerate(zip(text, spans), 1))
    speech = speech_map([(0.5, 5.0)] + [(a, b) for _, a, b in said[2:]], 18.0)
    heard = Heard(Transcript(" ".join(text), "en", tuple(words)), Script(lines, (), (), True), speech)
    cut, found = voice_changes(
        heard, lambda lines: analyse(lines, audio, VoiceShare(), speech=speech, heard=True), VoiceShare()
    )
    first, second = cut.original.lines[:2]
    assert len(cut.original.lines) == len(lines) + 1
    assert first.text == "a0 a1 a2 a3" and second.text == "b0 b1 b2 b3"
    assert 2.78 <= first.end == second.start <= 2.87
    assert [line.text for line in cut.original.lines[2:]] == text[1:]  # one voice each: kept whole
    assert found.original == cut.original  # the analysis of the lines as cut, not analysed again
    assert found.speakers[1] == found.speakers[3] != found.speakers[2] == found.speakers[4]
    # The same two voices in a stretch heard again alone stay one line, marked so: a short decode's word times are
    # not where to cut it (cut, its pieces grouped a whisper with another voice on English seed 1's scene).
    again = Script((replace(lines[0], where=f"line 1 {AGAIN}"), *lines[1:]), (), (), True)
    kept, _ = voice_changes(
        replace(heard, original=again),
        lambda lines: analyse(lines, audio, VoiceShare(), speech=speech, heard=True),
        VoiceShare(),
    )
    assert [line.text for line in kept.original.lines] == text and kept.original.lines[0].where.endswith(AGAIN)


def test_a_heard_lines_own_clip_moved_off_the_next_voice_holds_none_of_it_and_names_only_its_own_words(tmp_path):
    # A speaks 0.5-3.5 s in six words, then B. Whether B answers 0.1 s after A (silence between) or truly starts
    # 0.35 s under A's end while the ASR heard the change at 3.5 s (voice activity hears one stretch of speech), A's
    # own clip ends 0.6 s in from where the change was heard: it holds none of B. Its words are the five it holds,
    # not the cue's six.
    from dataclasses import replace

    from omnidub.asr import Word
    from omnidub.script import Script
    from omnidub.source.analysis import analyse
    from omnidub.source.heard import heard_line
    from omnidub.source.lines import assess_line

    def a_clip(b_starts: float, regions: list) -> tuple:
        said = [("A", 0.5, 3.5), ("B", b_starts, 6.6), ("A", 7, 9), ("B", 10, 12), ("A", 13, 15), ("B", 16, 18)]
        (tmp_path / f"{b_starts}").mkdir()
        audio = two_voices(tmp_path / f"{b_starts}", said, 19.0)
        heard = [(0.5, 3.5), (max(b_starts, 3.5), 6.6)] + [(a, b) for _, a, b in said[2:]]
        words = []
        for k, (a, b) in enumerate(heard, 1):
            step = (b - a) / 6
            words += [Word(f"l{k}w{j}", a + (j + 0.1) * step, a + (j + 1) * step) for j in range(6)]
        lines = tuple(
            heard_line(k, " ".join(f"l{k}w{j}" for j in range(6)), a, b, "en") for k, (a, b) in enumerate(heard, 1)
        )
        speech = speech_map(regions + [(a, b) for _, a, b in said[2:]], 19.0)
        found = analyse(Script(lines, (), (), True), audio, VoiceShare(), speech=speech, heard=True)
        found = replace(found, words=tuple(words), heard_lines=True)
        return assess_line(found, 1, VoiceShare()), found.spans[1][1]

    for b_starts, regions in ((3.6, [(0.5, 3.5), (3.6, 6.6)]), (3.15, [(0.5, 6.6)])):
        clip, edge = a_clip(b_starts, regions)
        assert clip.problem is None and clip.end == round(edge - 0.6, 3) <= b_starts
        assert clip.text == "l1w0 l1w1 l1w2 l1w3 l1w4"  # the sixth word is cut off: not in its words


def heard_analysis(folder: Path, cues: list, said: list, regions: list):
    """The analysis of lines heard at ``cues`` (voice, start, end) over a source of two voices speaking where
    ``said`` says, voice activity hearing ``regions``: as without subtitles, its lines the lines heard."""
    from dataclasses import replace

    from omnidub.script import Script
    from omnidub.source.analysis import analyse
    from omnidub.source.heard import heard_line

    audio = two_voices(folder, said, 16.0)
    lines = tuple(heard_line(k, "Words of a line said here.", a, b, "en") for k, (_, a, b) in enumerate(cues, 1))
    found = analyse(Script(lines, (), (), True), audio, VoiceShare(), speech=speech_map(regions, 16.0), heard=True)
    return replace(found, heard_lines=True)


def test_a_heard_line_is_voiced_from_its_own_speech_around_a_voice_spoken_over_it_and_padded_with_its_sentence(
    tmp_path,
):
    # A's sentence is heard as two lines (the ASR cut it at 1.3 s), and B says "Mm-hm." over the second, in no cue.
    # The second line is voiced from its own speech with B's cut out (not refused whole); the first, too short alone,
    # is padded with that speech: the rest of its sentence, though the second line has no usable clip of its own.
    from omnidub.source.identity import own_speech, padded

    cues = [("A", 0.5, 1.3), ("A", 1.3, 4.5), ("B", 5.0, 8.0), ("A", 8.5, 11.5), ("B", 12.0, 15.0)]
    regions = [(0.5, 4.5), (5.0, 8.0), (8.5, 11.5), (12.0, 15.0)]
    found = heard_analysis(tmp_path, cues, cues + [("B", 3.0, 3.5)], regions)  # B's "Mm-hm." over A's second line
    assert found.speakers[1] == found.speakers[2] == found.speakers[4] != found.speakers[3]

    (a, b), _ = own_speech(found, 2, VoiceShare())
    assert b - a >= 1.0 and (b <= 3.0 or a >= 3.5), (a, b)  # A's own speech, B's "Mm-hm." cut out
    clip = padded(found, 1, VoiceShare(), {}, None, pad=True, clips={})
    assert clip is not None and clip.note.startswith("joined: "), clip
    assert (a, b) in clip.parts and all(y <= 3.0 or x >= 3.5 for x, y in clip.parts), clip.parts


def test_a_heard_line_with_nothing_of_its_own_left_off_the_voice_before_it_is_voiced_from_the_rest_of_its_sentence(
    tmp_path,
):
    # B speaks, then A's sentence, heard as two lines: the first, 0.55 s, starts 0.05 s after B, so its edge moves
    # 0.6 s in off B and nothing of its own is left. It is voiced from the rest of its sentence (the next line heard,
    # A's too, surely), not from a clip of A's from elsewhere.
    from dataclasses import replace

    from omnidub.source.identity import own_speech, sentence_rest

    cues = [("B", 0.2, 2.0), ("A", 2.05, 2.6), ("A", 2.6, 5.0), ("B", 5.5, 8.5), ("A", 9.0, 12.0), ("B", 12.5, 15.5)]
    found = heard_analysis(tmp_path, cues, cues, [(0.2, 5.0), (5.5, 8.5), (9.0, 12.0), (12.5, 15.5)])
    assert found.speakers[2] == found.speakers[3] == found.speakers[5] != found.speakers[1]
    assert own_speech(found, 2, VoiceShare()) is None
    clip = sentence_rest(found, 2, VoiceShare(), {})
    assert clip is not None and clip.note.startswith("the rest of its sentence, the own speech of line 3 "), clip
    parts = clip.parts or ((clip.start, clip.end),)
    assert all(2.6 <= a < b <= 5.0 for a, b in parts) and sum(b - a for a, b in parts) >= 1.0, parts
    # Not across a line of another voice, nor without lines heard.
    assert sentence_rest(found, 4, VoiceShare(), {}) is None
    assert sentence_rest(replace(found, heard_lines=False), 2, VoiceShare(), {}) is None


def test_a_heard_lines_own_speech_starts_off_the_voice_before_it_though_the_overlap_model_marked_it_short(tmp_path):
    # B's last words run 0.6 s under the start of A's line (the ASR cut at 2.6 s, B speaks to 3.2 s), the windows
    # cannot hear B under A, and the overlap model marks only 2.5-2.95 s as two voices. Cutting that stretch first
    # left A's speech 0.35 s from B's line, too far to count as its neighbour: its own speech held 0.25 s of B.
    from dataclasses import replace

    from omnidub.source.clips import HEARD_GUARD
    from omnidub.source.identity import own_speech

    cues = [("B", 0.2, 2.6), ("A", 2.6, 6.0), ("B", 6.5, 9.5), ("A", 10.0, 13.0), ("B", 13.5, 15.5)]
    said = [("B", 0.2, 3.2), ("A", 2.6, 6.0), *cues[2:]]  # A written last: B is not in the samples under A
    regions = [(0.2, 6.0), (6.5, 9.5), (10.0, 13.0), (13.5, 15.5)]
    found = replace(heard_analysis(tmp_path, cues, said, regions), overlapped=((2.5, 2.95),))
    assert found.speakers[2] == found.speakers[4] != found.speakers[1] == found.speakers[3]
    (a, b), _ = own_speech(found, 2, VoiceShare())
    assert a >= 2.6 + HEARD_GUARD - 1e-3 and b - a >= 1.0, (a, b)


def test_own_speech_around_a_back_channel_the_overlap_model_marked_short_holds_none_of_it(tmp_path, monkeypatch):
    # B says "Mm-hm." over A's line at 3.0-3.7 s, in no cue; the overlap model marks 2.9-3.5 s (its stretch, widened,
    # ended up to 0.22 s before the other voice on the scenes). The stretch is cut out GUARD wider: the piece of A's
    # speech after it starts past B's last sound.
    from dataclasses import replace

    from omnidub.source.identity import _clean_pieces

    cues = [("A", 0.5, 5.5), ("B", 6.0, 9.0), ("A", 9.5, 12.5), ("B", 13.0, 15.5)]
    regions = [(0.5, 5.5), (6.0, 9.0), (9.5, 12.5), (13.0, 15.5)]
    found = replace(heard_analysis(tmp_path, cues, [*cues, ("B", 3.0, 3.7)], regions), overlapped=((2.9, 3.5),))

    def of_b(pieces):
        return sum(max(0.0, min(b, 3.7) - max(a, 3.0)) for a, b in pieces)

    with monkeypatch.context() as patched:
        patched.setattr("omnidub.source.overlap.GUARD", 0.0)
        assert of_b(_clean_pieces(found, 1)) > 0.1
    pieces = _clean_pieces(found, 1)
    assert of_b(pieces) == 0.0 and max(b - a for a, b in pieces) >= 1.5, pieces


def test_a_heard_lines_own_speech_ends_near_its_last_word(tmp_path):
    # A's line is heard to 13.0 s, its last word ends at 12.0 s: what follows is in no transcript (a whisper right
    # after the line that no line heard holds), and a clip's words must be what it says.
    from dataclasses import replace

    from omnidub.asr import Word
    from omnidub.source.identity import WORD_PAD, own_speech

    cues = [("B", 0.2, 2.6), ("A", 3.0, 6.0), ("B", 6.5, 9.5), ("A", 10.0, 13.0), ("B", 13.5, 15.5)]
    regions = [(0.2, 2.6), (3.0, 6.0), (6.5, 9.5), (10.0, 13.0), (13.5, 15.5)]
    words = [Word(w, a + k * 0.4, a + k * 0.4 + 0.3) for _, a, b in cues for k, w in enumerate("Words of a".split())]
    words += [Word("line.", 11.7, 12.0)]
    found = replace(heard_analysis(tmp_path, cues, cues, regions), words=tuple(sorted(words, key=lambda w: w.start)))
    (a, b), text = own_speech(found, 4, VoiceShare())
    assert b <= 12.0 + WORD_PAD + 1e-3 and b - a >= 1.0, (a, b)
    assert text.endswith("line."), text


def test_a_heard_line_mostly_two_voices_at_once_is_unsure_of_its_voice_and_pads_no_other(tmp_path):
    # A's 1.2 s line, the overlap model marking 0.9 s of it as two voices: its embedding is of both, so its group is
    # unsure; it is not cloned from its group's clip, nor does its speech pad another line of its group.
    from dataclasses import replace

    from omnidub.source.identity import _padding, grouping_doubt

    cues = [("A", 0.5, 3.5), ("A", 4.0, 5.2), ("B", 6.0, 9.0), ("A", 9.5, 12.5), ("B", 13.0, 15.5)]
    regions = [(0.5, 3.5), (4.0, 5.2), (6.0, 9.0), (9.5, 12.5), (13.0, 15.5)]
    found = heard_analysis(tmp_path, cues, cues, regions)
    assert grouping_doubt(found, 2) is None and 2 in [piece[0] for piece in _padding(found, 1, VoiceShare(), {}, None)]
    found = replace(found, overlapped=((4.3, 5.2),))
    assert "two voices at once" in (grouping_doubt(found, 2) or "")
    assert 2 not in [piece[0] for piece in _padding(found, 1, VoiceShare(), {}, None)]


# The scene (tests/data/source/scene.opus) as tiny.en hears it, line by line; the last line is the one a whole-source
# transcription skips in the tests below (Whisper base wrote nothing for the last 10 s of a 67 s scene).
SCENE_LINES = [
    (1.13, 2.45, "Good morning everyone."),
    (2.45, 4.6, "Thank you all for coming so early today."),
    (5.29, 6.39, "No problem at all."),
    (6.51, 8.37, "The coffee here is worth the trip."),
    (9.1, 11.64, "We have a lot to cover before the launch next week."),
    (12.27, 14.48, "Is the new design ready for testing?"),
    (15.12, 18.87, "Almost, the team finished the last screens yesterday evening."),
    (19.44, 19.99, "Great."),
    (20.75, 22.96, "Then let us review the schedule and the budget."),
    (22.96, 24.72, "I brought all the numbers with me."),
    (25.52, 31.16, "The users asked for a simpler way to share their files, so we changed the whole menu."),
    (31.82, 33.52, "That sounds very promising."),
    (33.74, 34.8, "Indeed it does."),
    (35.69, 38.58, "Let me show you the first results on the big screen."),
]
LAST = "I will take notes for everyone."


def spread(said: str, start: float, end: float):
    from omnidub.asr import Word

    words = said.split()
    step = (end - start) / len(words)
    return [Word(w, round(start + k * step, 3), round(start + (k + 0.9) * step, 3)) for k, w in enumerate(words)]


class SkippingAsr:
    """Hears the scene whole (with voice activity) as tiny.en does but for its last line, and a stretch of it heard
    again alone as ``again`` says (words spread over the clip); counts both."""

    name = "skipping"

    def __init__(self, again: str = LAST):
        self.said_again = again
        self.whole = self.alone = 0

    def identity(self) -> dict:
        return {"model": "skipping"}

    def transcribe(self, samples, rate, vad=False, **_):
        from omnidub.asr import Transcript

        if vad:
            self.whole += 1
            lines = [spread(text, a, b) for a, b, text in SCENE_LINES]
        else:
            self.alone += 1
            lines = [spread(self.said_again, 0.3, len(samples) / rate - 0.3)]
        return Transcript.of_segments(" ".join(t for *_, t in SCENE_LINES), "en", lines)


def test_speech_a_whole_source_transcription_wrote_no_words_for_is_heard_again_alone_and_kept(own_cache):
    from omnidub.source import read_source
    from omnidub.source.analysis import NO_WORDS
    from omnidub.source.heard import AGAIN, hear_source

    scene = DATA / "scene.opus"
    asr, said = SkippingAsr(), []
    heard = hear_source(read_source(scene), asr, source=scene, status=said.append)
    assert asr.whole == 1 and asr.alone >= 1 and any(s.startswith("hearing again") for s in said), said
    last = [line for line in heard.original.lines if line.start > 38.6]
    # The last line's words, heard alone, are a line of their own that says so; no stretch is left without words.
    assert [line.text for line in last] == [LAST] and last[0].where.endswith(AGAIN)
    assert NO_WORDS not in [line.text for line in heard.original.lines]
    assert not any(line.where.endswith(AGAIN) for line in heard.original.lines if line.start < 38.6)
    # Kept: the next run hears nothing, whole or again, and has the same lines.
    again = hear_source(read_source(scene), asr, source=scene)
    assert (asr.whole, asr.alone) == (1, len([s for s in said if s.startswith("hearing again")]))
    assert [(x.text, x.start, x.where) for x in again.original.lines] == [
        (x.text, x.start, x.where) for x in heard.original.lines
    ]


def test_a_transcription_kept_before_stretches_were_heard_again_is_heard_again_there_only(own_cache):
    from omnidub.source import read_source
    from omnidub.source.heard import hear_source

    scene = DATA / "scene.opus"
    asr = SkippingAsr()
    hear_source(read_source(scene), asr, source=scene)
    (kept,) = (own_cache / "source" / "heard").glob("*.json")
    data = json.loads(kept.read_text())
    data.pop("again")  # as an earlier build kept it: its words are the whole source's alone
    tried = asr.alone
    data["words"] = [w for w in data["words"] if w[1] < 38.6]
    data["starts"] = [k for k in data["starts"] if k < len(data["words"])]
    kept.write_text(json.dumps(data))
    heard = hear_source(read_source(scene), asr, source=scene)
    assert asr.whole == 1 and asr.alone == 2 * tried  # not transcribed whole again
    assert [line.text for line in heard.original.lines if line.start > 38.6] == [LAST]


def test_a_stretch_heard_again_as_a_loop_stays_without_words(own_cache):
    from omnidub.source import read_source
    from omnidub.source.analysis import NO_WORDS
    from omnidub.source.heard import hear_source

    scene = DATA / "scene.opus"
    asr = SkippingAsr(again=" ".join(["for everyone"] * 12))  # a decode that loops
    heard = hear_source(read_source(scene), asr, source=scene)
    assert asr.alone >= 1
    assert [line.text for line in heard.original.lines if line.start > 38.6] == [NO_WORDS]


def test_laughter_coughs_and_music_alone_are_not_heard_again_so_no_words_are_invented_there(own_cache, tmp_path):
    # The scene, then laughter, two coughs and 4 s of a jazz bed alone, at the dialogue's level and 12 dB over it. An
    # ASR that invents words for whatever it is given alone would put a line there if voice activity took any of it
    # for speech: none is.
    from scenes import RATE, cough, jazz, laughter

    from omnidub.source import read_source
    from omnidub.source.heard import hear_source

    rng = np.random.default_rng(7)
    scene = read_source(DATA / "scene.opus").at_rate(RATE).samples
    level = np.sqrt(np.mean(scene[np.abs(scene) > 1e-4] ** 2))
    for db in (0, 12):

        def at(x, db=db):
            return x / np.sqrt(np.mean(x**2)) * level * 10 ** (db / 20)

        noises = [laughter(rng), laughter(rng), np.zeros(RATE), cough(rng), cough(rng), np.zeros(RATE), jazz(4.0, rng)]
        tail = np.concatenate([np.zeros(RATE), *[at(n) if n.any() else n for n in noises], np.zeros(RATE)])
        path = tmp_path / f"noises-{db}.wav"
        sf.write(path, np.concatenate([scene, tail]).astype(np.float32), RATE)
        asr = SkippingAsr(again="I will never forget this day.")
        heard = hear_source(read_source(path), asr, source=path)
        assert asr.alone == 1  # the scene's last line alone, which the ASR skipped whole
        assert [line.text for line in heard.original.lines if line.start > 38.6] == [asr.said_again]


def test_a_reverberant_voice_s_marks_at_a_run_s_end_no_other_voice_speaks_near_are_its_echo(tmp_path):
    # B speaks from a stairwell: the overlap model marks the whole of its 4 s line, which starts 0.3 s after A's line
    # ends and ends 0.5 s before A's next. Its marks within 1 s of A's speech stay (a turn may start under the
    # other's end, and where a line heard ends is a guess), as do those 1 s or more inside its run (a back-channel
    # spoken over it is marked alike); the rest of its ends is its echo. Another voice's marks are left as they are.
    from dataclasses import replace

    from omnidub.source.analysis import REVERB_EDGE

    cues = [("A", 0.5, 4.7), ("B", 5.0, 9.0), ("A", 9.5, 12.5), ("B", 13.0, 15.5)]
    found = heard_analysis(tmp_path, cues, cues, [(a, b) for _, a, b in cues])
    b, a = found.speakers[2], found.speakers[1]
    assert a != b
    found = replace(found, overlapped=((5.0, 9.0), (13.0, 15.5)))
    found.__dict__["reverberant"] = frozenset({b})  # as reverberant_voices finds a voice whose room fills its gaps
    voiced = found.voiced
    near_start = voiced[1][1] + REVERB_EDGE  # A's speech before it, and 1 s after
    near_end = voiced[3][0] - REVERB_EDGE  # A's next line, and 1 s before it
    kept = found.edge_echo(b)
    marked = lambda t: any(x <= t <= y for x, y in kept)  # noqa: E731
    assert marked(5.2) and marked(near_start - 0.05) and not marked(near_start + 0.1)  # the start: A's end nearby
    assert marked(6.5) and marked(7.5)  # inside the run: kept
    assert not marked(near_end - 0.1) and marked(near_end + 0.1)  # the end: A's next line nearby
    assert not marked(15.2)  # B's last line's end: no other voice within 1 s of it
    assert found.edge_echo(a) == found.overlapped


class RepeatingAsr:
    """Hears a source whole (with voice activity) as Whisper sometimes does: a sentence, then the same sentence again
    over the next voice's words; a stretch heard alone (no voice activity filter) as ``alone`` says, its words
    spread over the stretch, where it is the repeated one's (any other stretch: no words). Counts both."""

    name = "repeating"
    SAID = "We should leave on Friday, the roads are quiet."
    FIRST, AGAIN = (0.2, 3.0), (3.2, 6.3)  # the sentence, and where it is written again

    def __init__(self, alone: str):
        self.said_alone = alone
        self.whole = self.alone = 0

    def identity(self) -> dict:
        return {"model": "repeating", "alone": self.said_alone}

    def transcribe(self, samples, rate, vad=False, **_):
        from omnidub.asr import Transcript

        if vad:
            self.whole += 1
            segments = [spread(self.SAID, *self.FIRST), spread(self.SAID, *self.AGAIN)]
            return Transcript.of_segments(f"{self.SAID} {self.SAID}", "en", segments)
        seconds = len(samples) / rate
        stretch = self.AGAIN[1] - self.AGAIN[0] + 2 * 0.2  # the repeated segment and the edges heard with it
        if abs(seconds - stretch) > 0.05:
            return Transcript("", "en", (), ())
        self.alone += 1
        words = spread(self.said_alone, 0.3, seconds - 0.3)
        return Transcript.of_segments(self.said_alone, "en", [words])


def test_a_sentence_the_asr_wrote_again_over_the_next_words_is_heard_again_alone_and_kept_so(own_cache, tmp_path):
    import shutil

    from omnidub.source import read_source
    from omnidub.source.heard import AGAIN, hear_source

    source = tmp_path / "bob.wav"
    shutil.copy(Path(__file__).parent.parent / "examples" / "voices" / "bob.wav", source)
    asr, said = RepeatingAsr("The weather looks better then."), []
    heard = hear_source(read_source(source), asr, source=source, status=said.append)
    assert (asr.whole, asr.alone) == (1, 1), said
    assert heard.transcript.text == "We should leave on Friday, the roads are quiet. The weather looks better then."
    lines = [line for line in heard.original.lines if line.start >= RepeatingAsr.AGAIN[0] - 0.5]
    assert [line.text for line in lines] == ["The weather looks better then."], heard.original.lines
    assert lines[0].where.endswith(AGAIN)  # its words were heard only so: the run names it for a look
    assert any("repeat the words before them" in s for s in said), said
    # Kept: the next run reads the words heard again, and hears nothing.
    again = hear_source(read_source(source), asr, source=source)
    assert (asr.whole, asr.alone) == (1, 1) and again.transcript.text == heard.transcript.text
    # One kept before repeats were heard again is heard again there, and only there.
    [kept] = (own_cache / "source" / "heard").glob("*.json")
    data = json.loads(kept.read_text())
    written = [spread(RepeatingAsr.SAID, *RepeatingAsr.FIRST), spread(RepeatingAsr.SAID, *RepeatingAsr.AGAIN)]
    data.update(words=[[w.text, w.start, w.end] for words in written for w in words], starts=[0, len(written[0])])
    kept.write_text(json.dumps({k: v for k, v in data.items() if k != "repeats"}))
    fixed = hear_source(read_source(source), asr, source=source)
    assert (asr.whole, asr.alone) == (1, 2) and fixed.transcript.text.endswith("The weather looks better then.")


def test_a_sentence_said_again_and_heard_so_alone_keeps_its_words(own_cache, tmp_path):
    import shutil

    from omnidub.source import read_source
    from omnidub.source.heard import AGAIN, hear_source

    source = tmp_path / "bob.wav"
    shutil.copy(Path(__file__).parent.parent / "examples" / "voices" / "bob.wav", source)
    asr = RepeatingAsr(RepeatingAsr.SAID)  # truly said twice: heard so alone too
    heard = hear_source(read_source(source), asr, source=source)
    assert asr.alone == 1 and heard.transcript.text.count("We should leave on Friday") == 2
    assert not any(line.where.endswith(AGAIN) for line in heard.original.lines)


def test_a_short_stretch_opening_a_turn_after_a_silence_stays_in_its_clip_and_a_reply_run_in_does_not(tmp_path):
    # A line heard opens on a short stretch of speech (0.4 s) apart from the rest by a pause, too short for a window
    # to tell whose it is. Right after other speech (0.15 s after "Ready?") it is taken for a reply Whisper ran into
    # the line ("Yes."), and taken off its clip; after 2 s of silence it opens the turn (a first word voice activity
    # heard alone, as it hears a radio voice): it stays.
    from omnidub.source.clips import own_edges

    for before, kept in ((3.0, False), (1.0, True)):
        said = [("A", 0.2, before), ("A", 3.15, 3.55), ("A", 3.85, 7.0), ("B", 8.0, 11.0), ("A", 12.0, 15.0)]
        cues = [("A", 0.2, before), ("A", 3.15, 7.0), ("B", 8.0, 11.0), ("A", 12.0, 15.0)]
        (tmp_path / f"{before}").mkdir()
        found = heard_analysis(tmp_path / f"{before}", cues, said, [(a, b) for _, a, b in said])
        start, _, what = own_edges(found, VoiceShare(), found.speakers[2], *found.spans[2])
        assert (start < 3.5) == kept and ("apart from the rest" in what) != kept, (before, start, what)


class StockAsr:
    """Hears a source whole (with voice activity) as Whisper does over a voice it cannot follow: a line, then a
    sentence of a video's farewell where another line was said, then a line; a stretch heard alone (no voice activity
    filter) of 1.5 s or more as ``alone`` says, its words spread over it (a shorter one: no words). Counts both."""

    name = "stock"
    FIRST = "Thanks for watching the kids tonight."  # a line of dialogue: said so, kept
    STOCK = "I would like to thank you for watching this video."
    LAST = "The roads are quiet then."

    def __init__(self, alone: str):
        self.said_alone = alone
        self.whole = self.alone = 0

    def identity(self) -> dict:
        return {"model": "stock"}

    def transcribe(self, samples, rate, vad=False, **_):
        from omnidub.asr import Transcript

        if vad:
            self.whole += 1
            segments = [spread(self.FIRST, 0.2, 2.0), spread(self.STOCK, 2.2, 4.6), spread(self.LAST, 4.9, 6.3)]
            return Transcript.of_segments(f"{self.FIRST} {self.STOCK} {self.LAST}", "en", segments)
        seconds = len(samples) / rate
        if seconds < 1.5 or not self.said_alone:
            return Transcript("", "en", (), ())
        self.alone += 1
        return Transcript.of_segments(self.said_alone, "en", [spread(self.said_alone, 0.3, seconds - 0.3)])


def _stock_heard(alone: str, tmp_path, said=None):
    import shutil

    from omnidub.source import read_source
    from omnidub.source.heard import hear_source

    source = tmp_path / "bob.wav"
    if not source.exists():
        shutil.copy(Path(__file__).parent.parent / "examples" / "voices" / "bob.wav", source)
    asr = StockAsr(alone)
    heard = hear_source(read_source(source), asr, source=source, status=(said or []).append)
    return asr, heard, source


def test_a_farewell_the_asr_writes_over_a_voice_it_cannot_follow_is_heard_again_alone(own_cache, tmp_path):
    from omnidub.source.heard import AGAIN, was_stock

    said = []
    asr, heard, _ = _stock_heard("The weather looks better then.", tmp_path, said)
    assert (asr.whole, asr.alone) == (1, 1), said
    texts = [line.text for line in heard.original.lines]
    assert texts == [StockAsr.FIRST, "The weather looks better then.", StockAsr.LAST], heard.original.lines
    assert heard.original.lines[1].where.endswith(AGAIN)  # named for a look at its words
    assert not any(map(was_stock, heard.original.lines))
    assert "watching this video" not in heard.transcript.text


def test_speech_the_asr_writes_only_a_farewell_for_is_a_line_with_no_words_named_so(own_cache, tmp_path):
    from omnidub.source.analysis import NO_WORDS
    from omnidub.source.heard import hear_source, was_stock

    # Heard alone it says a farewell again: its words are not taken either.
    asr, heard, source = _stock_heard("Thank you for watching!", tmp_path)
    assert (asr.whole, asr.alone) == (1, 1)
    texts = [line.text for line in heard.original.lines]
    assert texts == [StockAsr.FIRST, NO_WORDS, StockAsr.LAST], heard.original.lines
    assert [was_stock(line) for line in heard.original.lines] == [False, True, False]
    # Kept: the next run reads it as it was, and hears nothing.
    from omnidub.source import read_source

    again = hear_source(read_source(source), asr, source=source)
    assert (asr.whole, asr.alone) == (1, 1)
    assert [was_stock(line) for line in again.original.lines] == [False, True, False]
    # One kept before farewells were taken out (its words in it) is heard again there, once.
    [kept] = (own_cache / "source" / "heard").glob("*.json")
    data = json.loads(kept.read_text())
    written = [
        spread(StockAsr.FIRST, 0.2, 2.0),
        spread(StockAsr.STOCK, 2.2, 4.6),
        spread(StockAsr.LAST, 4.9, 6.3),
    ]
    data.update(
        words=[[w.text, w.start, w.end] for words in written for w in words],
        starts=[0, len(written[0]), len(written[0]) + len(written[1])],
    )
    kept.write_text(json.dumps({k: v for k, v in data.items() if k != "stock"}))
    asr.said_alone = "Quiet, they can hear us."
    fixed = hear_source(read_source(source), asr, source=source)
    assert (asr.whole, asr.alone) == (1, 2)
    assert [line.text for line in fixed.original.lines] == [StockAsr.FIRST, "Quiet, they can hear us.", StockAsr.LAST]


QUIET_BEFORE = "The landlord called again about the broken window."
QUIET_SAID = "If the ferry is late we will miss the last bus into town."
QUIET_AFTER = "Then we should leave before the rain starts."


def quiet_voice_source(tmp_path) -> tuple[Path, list[tuple[float, float]]]:
    """OWEN, then a voice across a hall (IRIS, 14 dB under him, a 1.6 s reverberant tail), then OWEN again, 1 s apart
    over a jazz bed 8 dB under him: Silero's probability over IRIS's line peaks at 0.24, so its usual threshold (0.5)
    hears none of it and the quiet one (0.15) hears it whole. The file, and the three lines' spans."""
    from films import RATE, SPEECH_RMS, speak
    from scenes import jazz, stairwell

    rng = np.random.default_rng(4)
    before, far, after = (speak(voice, [said])[0] for voice, said in (
        ("OWEN", QUIET_BEFORE), ("IRIS", QUIET_SAID), ("OWEN", QUIET_AFTER)
    ))  # fmt: skip
    far = stairwell(far, rng, rt60=1.6)
    far = SPEECH_RMS * 10 ** (-14 / 20) * far / np.sqrt(np.mean(far**2))
    pieces = (before, far, after)
    mix = SPEECH_RMS * 10 ** (-8 / 20) * jazz(4 + sum(p.size for p in pieces) / RATE, rng)
    mix[:RATE] = 0.0  # a second of silence; the bed's start then peaks at 0.35, its other stretches lower
    spans, at = [], 2 * RATE
    for piece in pieces:
        mix[at : at + piece.size] += piece
        spans.append((at / RATE, (at + piece.size) / RATE))
        at += piece.size + RATE
    path = tmp_path / "hall.wav"
    sf.write(path, mix.astype(np.float32), RATE)
    return path, spans


class SpanAsr:
    """Hears a source whole (with voice activity) as ``whole`` says ((start, end, text) each, the words spread
    over it), and a stretch heard alone (no voice activity filter) of 1.5 s or more as ``alone`` says, or heard
    faintly as ``faint`` says (a shorter one, or with nothing to say: no words). Counts each."""

    name = "spans"

    def __init__(self, whole: list[tuple[float, float, str]], alone: str, faint: str = ""):
        self.said_whole, self.said_alone, self.said_faint = whole, alone, faint
        self.whole = self.alone = self.faint = 0

    def identity(self) -> dict:
        return {"model": self.name}

    def transcribe(self, samples, rate, vad=False, faint=False, **_):
        from omnidub.asr import Transcript

        if vad:
            self.whole += 1
            text = " ".join(said for *_, said in self.said_whole)
            return Transcript.of_segments(text, "en", [spread(said, a, b) for a, b, said in self.said_whole])
        seconds = len(samples) / rate
        if faint:
            self.faint += 1
        else:
            self.alone += 1
        said = self.said_faint if faint else self.said_alone
        if seconds < 1.5 or not said:
            return Transcript("", "en", (), ())
        return Transcript.of_segments(said, "en", [spread(said, 0.3, seconds - 0.3)])


@films
def test_a_voice_the_usual_voice_activity_hears_none_of_is_heard_again_alone_and_is_a_line(
    own_cache, tmp_path, monkeypatch
):
    from omnidub.source import read_source, speech
    from omnidub.source.audio import ANALYSIS_RATE
    from omnidub.source.heard import AGAIN, hear_source
    from omnidub.source.speech import QUIET_THRESHOLD, find_speech

    path, (before, far, after) = quiet_voice_source(tmp_path)
    assert find_speech(read_source(path).at_rate(ANALYSIS_RATE)).speech_seconds(*far) == 0  # the premise
    heard_alone = "We will miss the last bus."
    asr = SpanAsr([(*before, QUIET_BEFORE), (*after, QUIET_AFTER)], heard_alone)
    heard = hear_source(read_source(path), asr, source=path)
    lines = heard.original.lines
    assert [line.text for line in lines] == [QUIET_BEFORE, heard_alone, QUIET_AFTER], lines
    assert asr.alone == 1  # only the stretch heard when listened for a quiet voice
    middle = lines[1]
    assert middle.where.endswith(AGAIN)  # named for a look at its words
    inside = min(middle.end, far[1]) - max(middle.start, far[0])
    assert inside >= 0.8 * (far[1] - far[0]) and middle.start > before[1] and middle.end < after[0], middle
    assert heard.speech.speech_seconds(*far) >= 0.8 * (far[1] - far[0])  # its clip has speech to cut
    # Kept: the next run hears nothing, whole or alone, and does not listen for a quiet voice again.
    listened, listen = [], speech._voice_activity
    monkeypatch.setattr(speech, "_voice_activity", lambda track, at: listened.append(at) or listen(track, at))
    again = hear_source(read_source(path), asr, source=path)
    assert (asr.whole, asr.alone) == (1, 1) and QUIET_THRESHOLD not in listened and listened
    assert [x.text for x in again.original.lines] == [x.text for x in lines]
    assert again.speech.regions == heard.speech.regions
    # One kept before quiet voices were listened for (no words there, "quiet" not kept) is heard again there only.
    [kept] = (own_cache / "source" / "heard").glob("*.json")
    data = json.loads(kept.read_text())
    data["words"] = [w for w in data["words"] if not before[1] < w[1] < after[0] - 0.01]
    data["starts"], data["again"] = [0, 8], []
    assert [w[0] for w in data["words"][7:9]] == ["window.", "Then"]
    kept.write_text(json.dumps({k: v for k, v in data.items() if k != "quiet"}))
    fixed = hear_source(read_source(path), asr, source=path)
    assert (asr.whole, asr.alone) == (1, 2)
    assert [x.text for x in fixed.original.lines] == [QUIET_BEFORE, heard_alone, QUIET_AFTER]


@films
def test_a_stretch_heard_only_when_listening_for_a_quiet_voice_with_no_words_in_it_is_not_speech(own_cache, tmp_path):
    # Silero hears a jazz bed alone as it hears a quiet voice: a stretch the ASR, heard alone, hears no words in is
    # neither a line (with no words, named for the editor) nor speech a clip may be cut from.
    from omnidub.source import read_source
    from omnidub.source.heard import hear_source

    path, (before, far, after) = quiet_voice_source(tmp_path)
    for faintly in ("", "you", "I'm sorry."):  # Whisper base, heard faintly over a jazz bed alone
        asr = SpanAsr([(*before, QUIET_BEFORE), (*after, QUIET_AFTER)], "", faintly)
        asr.name = f"spans, faintly {faintly!r}"  # a transcription of its own
        heard = hear_source(read_source(path), asr, source=path)
        assert (asr.alone, asr.faint) == (1, 1)
        assert [line.text for line in heard.original.lines] == [QUIET_BEFORE, QUIET_AFTER], faintly
        assert heard.speech.speech_seconds(*far) == 0


@films
def test_a_quiet_voice_heard_alone_saying_nothing_is_heard_faintly_and_what_it_says_is_a_line(own_cache, tmp_path):
    # Heard alone as usual, Whisper base said nothing for the voice across a hall on the held-out cast (its no-speech
    # rule dropped it); heard faintly it said most of it. A transcription kept before the faint hearing is heard
    # faintly there once.
    from omnidub.source import read_source
    from omnidub.source.heard import AGAIN, hear_source

    path, (before, far, after) = quiet_voice_source(tmp_path)
    faintly = "will miss the last episode of Time."
    asr = SpanAsr([(*before, QUIET_BEFORE), (*after, QUIET_AFTER)], "", faintly)
    heard = hear_source(read_source(path), asr, source=path)
    lines = heard.original.lines
    assert [line.text for line in lines] == [QUIET_BEFORE, faintly, QUIET_AFTER], lines
    assert (asr.alone, asr.faint) == (1, 1) and lines[1].where.endswith(AGAIN)
    assert heard.speech.speech_seconds(*far) >= 0.8 * (far[1] - far[0])
    again = hear_source(read_source(path), asr, source=path)
    assert (asr.whole, asr.alone, asr.faint) == (1, 1, 1)  # kept
    assert [x.text for x in again.original.lines] == [x.text for x in lines]
    [kept] = (own_cache / "source" / "heard").glob("*.json")
    data = json.loads(kept.read_text())
    data["words"] = [w for w in data["words"] if not before[1] < w[1] < after[0] - 0.01]
    data["starts"] = [0, 8]
    kept.write_text(json.dumps({k: v for k, v in data.items() if k != "faint"}))  # as kept before
    fixed = hear_source(read_source(path), asr, source=path)
    assert (asr.whole, asr.alone, asr.faint) == (1, 2, 2)
    assert [x.text for x in fixed.original.lines] == [QUIET_BEFORE, faintly, QUIET_AFTER]
