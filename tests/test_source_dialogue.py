"""Voices from quick dialogue (tests/films.py make_dialogue): five voices in two similar pairs, replies 0.02-0.15 s
after the line before, two turns spoken over each other, a line cut off mid-sentence, one-word replies, a music
bed 6 dB under the speech. Judged against the generator's truth.

Needs Debian's flite, festival (festvox-kallpc16k, festvox-kdlpc16k, festvox-us-slt-hts) and espeak-ng.
"""

from __future__ import annotations

import json

import pytest
from films import ACCENT_CAST, available, extract_labelled, make_dialogue
from test_cli import run

pytestmark = pytest.mark.skipif(not available(), reason="needs Debian's flite, festival and espeak-ng")


@pytest.fixture(scope="module")
def film(tmp_path_factory):
    return make_dialogue(tmp_path_factory.mktemp("dialogue"), seed=0, bed_db=6)


@pytest.fixture(scope="module")
def labelled(film, source_voice_encoder):
    return extract_labelled(film, source_voice_encoder)


@pytest.fixture(scope="module")
def accents(tmp_path_factory):
    # Built differently: one espeak-ng voice variant in two accents, flite's and festival's builds of one speaker,
    # 22 lines in 80 s, replies up to 0.3 s late.
    return make_dialogue(tmp_path_factory.mktemp("accents"), seed=0, bed_db=6, lines=19, cast=ACCENT_CAST, quick=0.3)


def test_the_film_is_quick_dialogue(film):
    rows = film.lines
    gaps = [b["speech"][0] - a["speech"][1] for a, b in zip(rows, rows[1:])]
    assert len(film.truth["cast"]) == 5 and sum(-0.6 <= g <= -0.3 for g in gaps) >= 2
    assert sum(0 < g < 0.15 for g in gaps) >= len(gaps) // 2
    assert sum(bool(row.get("reply")) for row in rows) == 3 and sum(bool(row.get("interrupted")) for row in rows) == 1


def test_every_voice_gets_a_clip_of_its_own_voice_alone_and_a_fallback_says_what_it_is(film, labelled):
    # Every line sits within 0.15 s of another voice: no clip is clean by the 0.1 s rule, none is refused for it.
    assert set(labelled.chosen) == set(film.truth["cast"]) and not labelled.missing
    for speaker, clip in labelled.chosen.items():
        assert film.clip_voices(clip) == {speaker}, (speaker, clip)
        clean = any(c.problem is None for c in labelled.candidates[speaker])
        assert clean or (
            clip.fallback.startswith(f"line {clip.lines[0]}: ") and "for want of a clean clip" in clip.fallback
        )


def test_no_usable_line_clip_holds_another_voice(film, labelled):
    usable = [c for c in labelled.line_clips.values() if c.problem is None]
    assert len(usable) >= 6 and all(film.clip_voices(c) == {c.speaker} for c in usable)
    for row in film.lines:
        if row.get("overlapped"):  # spoken over the line before: no own clip holds both
            assert labelled.line_clips[row["line"]].problem or film.speakers_in(
                labelled.line_clips[row["line"]].start, labelled.line_clips[row["line"]].end
            ) == {row["speaker"]}


@pytest.mark.slow
def test_a_render_of_quick_dialogue_is_never_refused(film, tmp_path):
    result = run(
        "render",
        film.unlabelled,
        "--source",
        film.audio,
        "--source-subs",
        film.subs,
        "--model",
        "synthetic:tiny",
        "--dry-run",
        "--json",
        "--out",
        tmp_path / "o",
    )
    assert result.exit_code == 0, result.output
    speakers = {line["index"]: line["speaker"] for line in json.loads(result.stdout)["lines"]}
    assert speakers == {row["line"]: row["speaker"] for row in film.lines}


@pytest.mark.slow  # over 10 s of CPU: pytest -m slow runs it, as CI does
def test_one_voice_in_two_accents_is_two_voices_in_unlabelled_subtitles(accents, source_voice_encoder):
    # The two accents come about 0.13 apart, under the 0.15 that splits any group: each line of each is nearer its
    # own than the other, so they are split, and every line lands with its own voice.
    from omnidub.script import read_script
    from omnidub.source import ExtractOptions, extract_voices, read_source

    found = extract_voices(
        read_source(accents.audio),
        read_script(accents.unlabelled),
        encoder=source_voice_encoder,
        asr=None,
        options=ExtractOptions(),
    )
    groups = {}
    for line in accents.lines:
        groups.setdefault(found.analysis.speakers[line["line"]], set()).add(line["speaker"])
    assert len(groups) == 5 and all(len(voices) == 1 for voices in groups.values()), groups


@pytest.mark.slow  # over 10 s of CPU: pytest -m slow runs it, as CI does
def test_lines_of_a_voice_alike_to_another_are_still_cloned_from_themselves(accents, source_voice_encoder):
    # Labelled: the windows of a voice alike to another come within the one margin of it; judged by how far that
    # voice's own windows lean, its long lines keep their own clips, and none holds another voice.
    found = extract_labelled(accents, source_voice_encoder)
    usable = [c for c in found.line_clips.values() if c.problem is None]
    assert all(accents.clip_voices(c) == {c.speaker} for c in usable)
    long = [
        row["line"]
        for row in accents.lines
        if row["speech"][1] - row["speech"][0] >= 2 and accents.speakers_in(*row["cue"]) == {row["speaker"]}
    ]
    own = [i for i in long if found.line_clips[i].problem is None]
    assert len(own) >= 0.8 * len(long), [found.line_clips[i].problem for i in long if i not in own]
