"""Voices from quick dialogue (tests/films.py make_dialogue): five voices in two similar pairs, replies 0.02-0.15 s
after the line before, two turns spoken over each other, a line cut off mid-sentence, one-word replies, a music
bed 6 dB under the speech. Judged against the generator's truth.

Needs Debian's flite, festival (festvox-kallpc16k, festvox-kdlpc16k, festvox-us-slt-hts) and espeak-ng.
"""

from __future__ import annotations

import json

import pytest
from films import available, extract_labelled, make_dialogue
from test_cli import run

pytestmark = pytest.mark.skipif(not available(), reason="needs Debian's flite, festival and espeak-ng")


@pytest.fixture(scope="module")
def film(tmp_path_factory):
    return make_dialogue(tmp_path_factory.mktemp("dialogue"), seed=0, bed_db=6)


@pytest.fixture(scope="module")
def labelled(film, source_voice_encoder):
    return extract_labelled(film, source_voice_encoder)


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
        assert film.speakers_in(clip.start, clip.end) == {speaker}, (speaker, clip)
        clean = any(c.problem is None for c in labelled.candidates[speaker])
        assert clean or (
            clip.fallback.startswith(f"line {clip.lines[0]}: ") and "for want of a clean clip" in clip.fallback
        )


def test_no_usable_line_clip_holds_another_voice(film, labelled):
    usable = [c for c in labelled.line_clips.values() if c.problem is None]
    assert len(usable) >= 6 and all(film.speakers_in(c.start, c.end) == {c.speaker} for c in usable)
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
