"""Voices from a film built from a seed (tests/films.py): four voices, two of them male diphone voices of one
synthesizer, a music bed 6 dB under the speech with an effect burst, cues leading and trailing the speech, two
condensed cues and one cue that also covers another voice's uncued reply. Judged against the generator's truth.

Needs Debian's flite, festival (festvox-kallpc16k, festvox-kdlpc16k, festvox-us-slt-hts) and espeak-ng.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
from films import available, extract_labelled, make_film
from test_cli import one_error_line, run

from omnidub.errors import OmnidubError
from omnidub.script import read_script

pytestmark = pytest.mark.skipif(not available(), reason="needs Debian's flite, festival and espeak-ng")
DATA = Path(__file__).parent / "data" / "source"


@pytest.fixture(scope="module")
def encoder(source_voice_encoder):
    return source_voice_encoder


@pytest.fixture(scope="module")
def film(tmp_path_factory):
    return make_film(tmp_path_factory.mktemp("film"), seed=1, bed_db=6)


@pytest.fixture(scope="module")
def labelled(film, encoder):
    return extract_labelled(film, encoder)


@pytest.mark.slow  # over 10 s of CPU: pytest -m slow runs it, as CI does
def test_similar_voices_are_told_apart_when_the_original_is_unlabelled(film, encoder):
    from omnidub.source import extract_voices, read_source

    extraction = extract_voices(read_source(film.audio), read_script(film.unlabelled), encoder=encoder, asr=None)
    grouping = extraction.analysis.grouping
    found = {g.index: g.speaker for g in grouping.lines}
    truth = {row["line"]: row["speaker"] for row in film.lines}
    names = {}
    for group in grouping.speakers:
        voices = [truth[i] for i, s in found.items() if s == group]
        names[group] = max(set(voices), key=voices.count)
    assert len(grouping.speakers) == 4 and set(names.values()) == set(film.truth["cast"]), grouping.how
    assert sum(names[found[i]] != truth[i] for i in truth) <= 1  # at most one line in sixteen misplaced
    for group, clip in extraction.chosen.items():
        assert film.clip_voices(clip) == {names[group]}


@pytest.mark.slow  # the film's voices extracted with labels (a module fixture): about 20 s of CPU
def test_long_single_voice_lines_keep_their_own_clip_under_music(film, labelled):
    lines = {row["line"]: row for row in film.lines}
    single = [
        i
        for i, row in lines.items()
        if "uncued" not in row and not row.get("condensed") and row["speech"][1] - row["speech"][0] >= 3.0
    ]
    kept = [i for i in single if labelled.line_clips[i].problem is None]
    assert len(kept) >= 0.85 * len(single), {i: labelled.line_clips[i].problem for i in single}


@pytest.mark.slow  # the film's voices extracted with labels (a module fixture): about 20 s of CPU
def test_no_clip_holding_two_voices_passes(film, labelled):
    usable = [c for c in labelled.line_clips.values() if c.problem is None]
    usable += [c for found in labelled.candidates.values() for c in found if c.problem is None]
    assert usable and all(len(film.clip_voices(c)) == 1 for c in usable)
    [reply] = [row for row in film.lines if "uncued" in row]  # its cue runs on into another voice
    clip = labelled.line_clips[reply["line"]]
    # Refused for the other voice, or kept with that voice cut out, heard from the audio (no cue says so).
    if clip.problem is None:
        assert "another voice heard spoken over it" in clip.note and film.clip_voices(clip) == {reply["speaker"]}
    else:
        assert clip.problem.startswith("another voice"), clip.problem


@pytest.mark.slow  # the film's voices extracted with labels (a module fixture): about 20 s of CPU
def test_a_condensed_cue_is_refused_without_an_asr_model(film, labelled):
    for row in film.lines:
        if row.get("condensed"):
            problem = labelled.line_clips[row["line"]].problem
            assert problem and "the subtitle looks condensed" in problem, problem
            assert not any(row["line"] in c.lines for c in labelled.chosen.values())
    whole = [row["line"] for row in film.lines if not row.get("condensed")]
    assert not any(i in labelled.analysis.condensed for i in whole)


@pytest.mark.slow  # the film's voices extracted with labels (a module fixture): about 20 s of CPU
def test_every_speakers_clip_is_that_speaker_alone(film, labelled):
    assert set(labelled.chosen) == set(film.truth["cast"])
    for speaker, clip in labelled.chosen.items():
        assert film.clip_voices(clip) == {speaker}


def test_subtitles_ten_seconds_off_are_refused_with_the_offset(tmp_path):
    late = make_film(tmp_path / "film", seed=2, bed_db=14, shift=-10.0)  # the audio starts 10 s after its cues
    out = tmp_path / "voices"
    message = one_error_line(run("voices", "extract", late.audio, "--subs", late.subs, "--out", out))
    assert re.search(r"do not fit film\.wav: they look (9\.9|10\.0|10\.1) s early", message), message
    assert re.search(r"shift them by \+(9\.9|10\.0|10\.1) s", message), message
    assert not out.exists() or not any(p.name != ".omnidub" for p in out.iterdir())


def test_a_source_without_speech_is_one_line(tmp_path):
    quiet = tmp_path / "quiet.wav"
    sf.write(quiet, np.zeros(16000 * 50, np.float32), 16000)
    message = one_error_line(run("voices", "extract", quiet, "--subs", DATA / "original.srt", "--out", tmp_path / "v"))
    assert "quiet.wav: no speech found in it" in message


@pytest.mark.slow  # over 10 s of CPU: pytest -m slow runs it, as CI does
def test_subtitles_in_another_language_are_one_line(tmp_path, whisper_tiny_en):
    message = one_error_line(
        run(
            "voices",
            "extract",
            DATA / "scene.opus",
            "--subs",
            DATA / "dub.srt",
            "--out",
            tmp_path / "v",
            "--asr-model",
            whisper_tiny_en,
        )
    )
    assert "do not say what scene.opus says" in message and "another language than the audio" in message


@pytest.mark.slow  # over 10 s of CPU: pytest -m slow runs it, as CI does
def test_names_rename_the_voices_of_an_unlabelled_original(tmp_path):
    from omnidub.voices import load_voices

    out = tmp_path / "v"
    result = run(
        "voices",
        "extract",
        DATA / "scene.opus",
        "--subs",
        DATA / "original-unlabelled.srt",
        "--out",
        out,
        "--names",
        "S1=ALICE,S3=CAROL",
    )
    assert result.exit_code == 0, result.output
    assert set(load_voices(out / "voices.toml", [], [])) == {"ALICE", "S2", "CAROL"}
    report = json.loads((out / "extract.json").read_text())
    assert report["grouping"]["speakers"] == ["ALICE", "S2", "CAROL"]
    assert "the source has no voice S9" in one_error_line(
        run(
            "voices",
            "extract",
            DATA / "scene.opus",
            "--subs",
            DATA / "original-unlabelled.srt",
            "--out",
            tmp_path / "w",
            "--names",
            "S9=ALICE",
        )
    )
    assert "VOICE=NAME" in one_error_line(
        run(
            "voices",
            "extract",
            DATA / "scene.opus",
            "--subs",
            DATA / "original-unlabelled.srt",
            "--out",
            tmp_path / "x",
            "--names",
            "ALICE",
        )
    )


@pytest.mark.slow  # over 10 s of CPU: pytest -m slow runs it, as CI does
def test_render_source_names_the_real_cause_of_a_missing_voice(tmp_path):
    # A labelled dub over an unlabelled original: the voices found are S1..S3, not the dub's names.
    result = run(
        "render",
        DATA / "dub.srt",
        "--source",
        DATA / "scene.opus",
        "--source-subs",
        DATA / "original-unlabelled.srt",
        "--model",
        "synthetic:tiny",
        "--dry-run",
        "--out",
        tmp_path / "o",
    )
    assert result.exit_code == 2 and "Traceback" not in result.output
    [message] = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert "the original subtitles name no speakers" in message and "--names S1=" in message
    assert "no voice for speaker" not in message
    # --names gives the voices the dub's names: every line then has its voice.
    result = run(
        "render",
        DATA / "dub.srt",
        "--source",
        DATA / "scene.opus",
        "--source-subs",
        DATA / "original-unlabelled.srt",
        "--names",
        "S1=ALICE,S2=BOB,S3=CAROL",
        "--model",
        "synthetic:tiny",
        "--dry-run",
        "--json",
        "--out",
        tmp_path / "o",
    )
    assert result.exit_code == 0, result.output
    assert {line["speaker"] for line in json.loads(result.stdout)["lines"]} == {"ALICE", "BOB", "CAROL"}


def test_the_unlabelled_line_error_points_at_source():
    from omnidub.voices import voice_for

    with pytest.raises(OmnidubError, match="--source VIDEO"):
        voice_for("default", {})


def test_two_tight_sub_groups_are_split():
    from omnidub.source.speakers import silhouette, split_tight

    rng = np.random.default_rng(0)
    base = [rng.standard_normal(32) for _ in range(3)]
    twin = base[2] + 0.9 * rng.standard_normal(32)  # a voice like the third, but its own
    vectors = []
    for centre, count in ((base[0], 5), (base[1], 5), (base[2], 4), (twin, 4)):
        for _ in range(count):
            v = centre + 0.25 * rng.standard_normal(32)
            vectors.append(v / np.linalg.norm(v))
    vectors = np.stack(vectors)
    merged = np.array([1] * 5 + [2] * 5 + [3] * 8)
    labels, splits = split_tight(vectors, merged)
    assert len(splits) == 1 and len(set(labels)) == 4
    assert len(set(labels[10:14])) == 1 and len(set(labels[14:])) == 1 and labels[10] != labels[14]
    # One voice's lines alone are never split.
    alone, none = split_tight(vectors[:5], np.ones(5, int))
    assert none == [] and len(set(alone)) == 1
    assert silhouette(1 - vectors @ vectors.T, labels) > 0


def _lines_alike(rows: str) -> np.ndarray:
    """Unit vectors, one a line, whose dot products are exactly the similarity matrix written in ``rows``."""
    return np.linalg.cholesky(np.array([[float(x) for x in row.split()] for row in rows.splitlines()]))


def test_two_voices_alike_split_though_one_line_lies_between_them():
    # The similarities of the nine lines of two builds of one voice (flite's and festival's `slt`) that a film heard
    # without subtitles under a bed 6 dB down grouped together: 0.13 apart, and the first line, 3.4 s of the first
    # voice, only 0.007 nearer its own lines than the other's. Two-means keeps no line on a side by its likeness to
    # itself, and a line nearer its own side by any margin counts.
    from omnidub.source.speakers import split_tight

    rows = """1.00 0.52 0.68 0.46 0.59 0.66 0.64 0.76 0.72
              0.52 1.00 0.73 0.35 0.44 0.72 0.72 0.38 0.47
              0.68 0.73 1.00 0.45 0.50 0.79 0.84 0.50 0.56
              0.46 0.35 0.45 1.00 0.63 0.47 0.50 0.49 0.63
              0.59 0.44 0.50 0.63 1.00 0.55 0.50 0.70 0.76
              0.66 0.72 0.79 0.47 0.55 1.00 0.79 0.56 0.65
              0.64 0.72 0.84 0.50 0.50 0.79 1.00 0.49 0.58
              0.76 0.38 0.50 0.49 0.70 0.56 0.49 1.00 0.81
              0.72 0.47 0.56 0.63 0.76 0.65 0.58 0.81 1.00"""
    vectors = _lines_alike(rows)
    labels, splits = split_tight(vectors, np.ones(9, int))
    first = [0, 3, 4, 7, 8]  # the lines of the first voice
    assert len(splits) == 1
    assert len(set(labels[first])) == 1 and set(labels) - set(labels[first]) == set(np.delete(labels, first))


def test_two_voices_split_though_a_stray_line_sits_between_them(monkeypatch):
    # The similarities of the nine lines heard (Whisper base, no subtitles) that the Spanish scene of seed 2 grouped
    # as one voice: JORGE (rows 1, 6, 7, 9), TOMAS (on the telephone, rows 2, 3, 4, 8) and a
    # line NIEVES whispered (row 5), 0.17-0.45 like every other. JORGE and TOMAS come 0.17 apart alone, but any
    # two halves must hold the whisper, which closes the gap under the split's 0.15.
    import omnidub.source.speakers as speakers

    rows = """1.00 0.58 0.49 0.53 0.31 0.65 0.81 0.59 0.77
              0.58 1.00 0.84 0.81 0.19 0.54 0.60 0.87 0.60
              0.49 0.84 1.00 0.82 0.21 0.49 0.52 0.79 0.53
              0.53 0.81 0.82 1.00 0.24 0.48 0.48 0.74 0.56
              0.31 0.19 0.21 0.24 1.00 0.41 0.17 0.18 0.45
              0.65 0.54 0.49 0.48 0.41 1.00 0.57 0.45 0.85
              0.81 0.60 0.52 0.48 0.17 0.57 1.00 0.65 0.64
              0.59 0.87 0.79 0.74 0.18 0.45 0.65 1.00 0.56
              0.77 0.60 0.53 0.56 0.45 0.85 0.64 0.56 1.00"""
    vectors = _lines_alike(rows)
    jorge, tomas, whisper = [0, 5, 6, 8], [1, 2, 3, 7], 4
    labels, splits = speakers.split_tight(vectors, np.ones(9, int))
    assert len(splits) == 1 and len(set(labels[jorge])) == 1 and len(set(labels[tomas])) == 1
    assert labels[jorge[0]] != labels[tomas[0]] and labels[whisper] == labels[jorge[0]]  # the whisper: nearer JORGE
    # Before, every line was weighed in each half: one voice.
    monkeypatch.setattr(speakers, "STRAYS", 0.0)
    assert len(set(speakers.split_tight(vectors, np.ones(9, int))[0])) == 1
    monkeypatch.undo()
    # JORGE's four lines and the whisper are one voice: with the whisper set aside, two lines a side (0.15 apart)
    # are too few to split.
    alone, none = speakers.split_tight(vectors[[*jorge, whisper]], np.ones(5, int))
    assert none == [] and len(set(alone)) == 1


def test_a_window_is_judged_against_the_sources_own_calibration():
    from omnidub.source.speakers import VoiceCalibration, calibrate

    rng = np.random.default_rng(1)
    a, b = (v / np.linalg.norm(v) for v in rng.standard_normal((2, 16)))

    def noisy(centre, scale):  # music lowers every window's similarity alike
        found = [centre + scale * rng.standard_normal(16) for _ in range(20)]
        return [v / np.linalg.norm(v) for v in found]

    for scale in (0.1, 0.25):
        windows = {"A": noisy(a, scale), "B": noisy(b, scale)}
        centroids = {
            name: np.mean(found, axis=0) / np.linalg.norm(np.mean(found, axis=0)) for name, found in windows.items()
        }
        calibration = calibrate(windows, centroids)
        assert calibration["A"].windows == 20 and calibration["A"].margin <= -0.05
        own = [float(w @ centroids["A"]) for w in windows["A"]]
        other = [float(w @ centroids["B"]) for w in windows["A"]]
        passed = [calibration["A"].problem(o, {"B": x}, "A") is None for o, x in zip(own, other)]
        assert sum(passed) >= 0.9 * len(passed)
        assert calibration["A"].alike == {}  # two distinct voices keep the one margin
        mixed = (a + b) / np.linalg.norm(a + b)  # half one voice, half the other
        assert calibration["A"].problem(float(mixed @ centroids["A"]), {"B": float(mixed @ centroids["B"])}, "A")
    assert VoiceCalibration(0.5, -0.1, 0).problem(0.4, {}, "A").startswith("similarity 0.40 to A")


def test_a_voice_alike_to_another_is_judged_by_how_far_its_own_windows_lean():
    # One synthesizer's voice in two accents: A's own windows come within the margin of A2, so the one margin would
    # refuse most of A's own lines. Against A2 a window fails only when it leans further than A's own ever do;
    # against a distinct voice C the margin is as before.
    from dataclasses import replace

    from omnidub.source.speakers import calibrate

    rng = np.random.default_rng(2)
    a, c = (v / np.linalg.norm(v) for v in rng.standard_normal((2, 16)))
    a2 = a + 0.12 * rng.standard_normal(16)
    a2 /= np.linalg.norm(a2)

    def noisy(centre):
        return [(v := centre + 0.15 * rng.standard_normal(16)) / np.linalg.norm(v) for _ in range(20)]

    windows = {"A": noisy(a), "A2": noisy(a2), "C": noisy(c)}
    centroids = {name: (m := np.mean(w, axis=0)) / np.linalg.norm(m) for name, w in windows.items()}
    calibration = calibrate(windows, centroids)["A"]
    assert set(calibration.alike) == {"A2"} and calibration.alike["A2"] > calibration.margin

    def sims(v):
        return float(v @ centroids["A"]), {n: float(v @ centroids[n]) for n in ("A2", "C")}

    own = [calibration.problem(*sims(w), "A") for w in windows["A"]]
    assert own.count(None) >= 0.9 * len(own)
    one_margin = replace(calibration, alike={})
    assert [one_margin.problem(*sims(w), "A") for w in windows["A"]].count(None) < 0.9 * len(own)
    assert calibration.problem(*sims(centroids["A2"]), "A")  # A2 itself is not A
    mixed = (a + c) / np.linalg.norm(a + c)
    assert "C" in calibration.problem(*sims(mixed), "A")


@pytest.mark.slow  # over 10 s on a first run (the source analysed): pytest -m slow runs it, as CI does
def test_subtitles_no_asr_model_can_check_are_said_to_be_unchecked(tmp_path):
    # The Spanish dub given as the English scene's original, with no ASR model to hear the scene: taken, and said.
    result = run("voices", "extract", DATA / "scene.opus", "--subs", DATA / "dub.srt", "--out", tmp_path / "v")
    assert result.exit_code in (0, 1), result.output
    said = " ".join(result.output.split())
    assert "the original subtitles could not be checked against what the source says (no ASR model)" in said
