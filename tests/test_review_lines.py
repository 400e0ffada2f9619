# ruff: noqa: F811 - the fixture imported from test_translate is a fixture's argument
"""Decisions and translation records follow their line by what it is (its slot and its text together), never by
its number: cues moved in the input, an identical line inserted above, a cue added to a translation by hand, and a
translation whose checks flagged its candidates (translate.json's flags, checks and back-translations)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from test_review import SCENE, copy_of, do, open_desk, render
from test_translate import en_pt  # noqa: F401 - a fixture

from omnidub.records import TranslationRecord
from omnidub.script import follow

BLOCKS = [block for block in SCENE.strip().split("\n\n")]  # the scene's four cues, each "N\nTIME\nTEXT"


def scene_of(*blocks: str) -> str:
    """An SRT of the given cue blocks in this order, numbered again 1, 2, ... (their times kept)."""
    return "\n\n".join(re.sub(r"^\d+\n", f"{n}\n", block, count=1) for n, block in enumerate(blocks, 1)) + "\n"


def line_saying(state: dict, text: str) -> dict:
    [found] = [line for line in state["lines"] if line["text"] == text]
    return found


@pytest.fixture
def folder(rendered, tmp_path):
    """A copy of the rendered scene; its input (shared with every copy) is put back as it was after the test."""
    script = Path(json.loads((rendered / "manifest.json").read_text())["input"])
    yield copy_of(rendered, tmp_path)
    script.write_text(SCENE, encoding="utf-8")


def reopen(folder: Path, script: str) -> dict:
    """The review's state over ``folder`` once its input says ``script``."""
    Path(json.loads((folder / "manifest.json").read_text())["input"]).write_text(script, encoding="utf-8")
    desk = open_desk(folder)
    try:
        return desk.state()
    finally:
        desk.close(deliver=False)


def test_follow_knows_a_line_by_its_slot_and_its_text_together():
    before = [(1, "a", 0, 1), (2, "b", 1, 2), (3, "c", 2, 3), (4, "d", 3, 4)]
    # Two cues moved past each other (their times with them): a move, not one line lost and one new.
    assert follow(before, [(1, "a", 0, 1), (2, "c", 2, 3), (3, "b", 1, 2), (4, "d", 3, 4)]) == {1: 1, 2: 3, 3: 2, 4: 4}
    # The same words in another slot, where the line that said them is still in its own: another line.
    yes = [(1, "Yes.", 0, 1), (2, "x", 1, 2), (3, "Yes.", 5, 6)]
    now = [(1, "Yes.", 0, 1), (2, "x", 1, 2), (3, "Yes.", 3, 4), (4, "Yes.", 5, 6)]
    assert follow(yes, now) == {1: 1, 2: 2, 3: 4}
    # A cue retimed keeps its words, so it is the same line; its text changed in its slot, too.
    assert follow(before, [(1, "a", 0, 1), (2, "b", 1.2, 2.2), (3, "C!", 2, 3), (4, "d", 3, 4)]) == {
        1: 1,
        2: 2,
        3: 3,
        4: 4,
    }
    # Neither its slot nor its words: gone.
    assert follow(before, [(1, "a", 0, 1), (2, "new", 1.5, 2.5)]) == {1: 1}


def test_cues_moved_past_each_other_keep_every_decision_through_a_delivery_and_a_stop_without_one(folder):
    desk = open_desk(folder)
    try:
        state = desk.state()["lines"]
        do(desk, "mark", 1, note="a breath before it")  # a line the move does not touch
        do(desk, "edit", 2, speaker="ALICE")
        do(desk, "approve", 3, key=state[2]["key"])
    finally:
        desk.close()
    first, second, third, fourth = BLOCKS
    state = reopen(folder, scene_of(first, third, second, fourth))  # cues 2 and 3 swapped, times and all
    assert [line["text"] for line in state["lines"]][1:3] == [
        "Then we are not lost at all.",
        "It is in the car, under the seat.",
    ]
    assert state["lines"][0]["note"] == "a breath before it"
    assert line_saying(state, "It is in the car, under the seat.")["speaker"] == "ALICE"
    assert line_saying(state, "Then we are not lost at all.")["approved"]
    # A note made now (journaled under the new numbers, the manifest still under the old) and a stop that delivers
    # nothing: the next opening keeps both.
    desk = open_desk(folder)
    try:
        do(desk, "mark", 4, note="keep this")
    finally:
        desk.close(deliver=False)
    desk = open_desk(folder)
    try:
        state = desk.state()
    finally:
        desk.close(deliver=False)
    assert state["lines"][0]["note"] == "a breath before it" and state["lines"][3]["note"] == "keep this"
    assert line_saying(state, "It is in the car, under the seat.")["speaker"] == "ALICE"
    assert line_saying(state, "Then we are not lost at all.")["approved"]


def test_an_identical_line_inserted_above_is_another_line(folder):
    desk = open_desk(folder)
    try:
        do(desk, "mark", 4, note="the last word, softer", look_again=True)
        do(desk, "approve", 4, key=desk.state()["lines"][3]["key"])
    finally:
        desk.close()
    first, second, third, fourth = BLOCKS
    again = "5\n00:00:08,550 --> 00:00:08,950\nBOB: We never were."  # the same words, in a slot of their own
    state = reopen(folder, scene_of(first, second, third, again, fourth))
    new, old = state["lines"][3], state["lines"][4]
    assert new["text"] == old["text"] == "We never were."
    assert (old["note"], old["look_again"], old["approved"]) == ("the last word, softer", True, True)
    assert (new["note"], new["look_again"], new["approved"]) == (None, False, False)


# -- translation records ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def translation(en_pt, tmp_path_factory, tiny_model_dir):
    """omnidub translate's Portuguese of the example dialogue, a cue added at its start by hand, and its render:
    (the translation folder, the render, translate.json's lines)."""
    from conftest import EXAMPLES
    from test_review import run

    folder = tmp_path_factory.mktemp("translated")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("OMNIDUB_CACHE", str(folder / "cache"))
        out = folder / "translation"
        result = run("translate", EXAMPLES / "dialogue.srt", "--to", "pt", "--mt-model", en_pt, "--out", out)
        assert result.exit_code == 0, result.output
        srt = out / "dialogue.pt.srt"
        added = "0\n00:00:00,000 --> 00:00:00,250\nALICE: Ei.\n\n"  # the reader numbers lines itself
        srt.write_text(added + srt.read_text(encoding="utf-8"), encoding="utf-8")
        result = render(srt, folder / "dub", "--language", "pt")
        assert result.exit_code == 0, result.output
    return out, folder / "dub", json.loads((out / "translate.json").read_text())["lines"]


@pytest.fixture
def translated(translation, tmp_path):
    """The translation, a copy of its render of this test's own, and translate.json's lines; the translation folder
    is put back as it was after the test."""
    out, dub, records = translation
    kept = {name: (out / name).read_bytes() for name in ("dialogue.pt.srt", "translate.json")}
    yield out, copy_of(dub, tmp_path), records
    (out / "dialogue.pt.srt").write_bytes(kept["dialogue.pt.srt"])
    written(out, kept["translate.json"].decode("utf-8"))


def test_a_cue_added_to_a_translation_by_hand_moves_no_record_to_another_line(translated):
    _, dub, records = translated
    several = next(r for r in records if len({c["text"] for c in r["candidates"]}) > 1)
    desk = open_desk(dub)
    try:
        state = desk.state()["lines"]
        added = state[0]
        assert added["text"] == "Ei." and added["translated_from"] is None and not added["translate_again"]
        assert "no line at its time" in added["translate_why"]
        # Every other line shows its own original, found by its time and text, though its number moved by one.
        for record in records:
            line = state[record["index"]]  # the line after the added one
            assert (line["start"], line["translated_from"]) == (pytest.approx(record["start"]), record["original"])
        index = several["index"] + 1
        do(desk, "translate", index)
        again = desk.state()["lines"][index - 1]
        assert again["text"] != several["translation"] and again["text"] in {c["text"] for c in several["candidates"]}
        events = do(desk, "translate", 1)  # the added line: refused, saying why
        assert any(e["type"] == "error" and "no line at its time" in e["text"] for e in events), events
        assert desk.state()["lines"][0]["text"] == "Ei."
    finally:
        desk.close(deliver=False)


def test_a_line_the_translation_was_edited_by_hand_in_gets_no_translation_action(translated):
    out, dub, records = translated
    record = records[2]
    srt = out / "dialogue.pt.srt"
    srt.write_text(srt.read_text(encoding="utf-8").replace(record["translation"], "Outra coisa."), encoding="utf-8")
    desk = open_desk(dub)
    try:
        line = desk.state()["lines"][record["index"]]
        assert line["text"] == "Outra coisa." and line["translated_from"] is None and not line["translate_again"]
        assert "edited by hand" in line["translate_why"]
    finally:
        desk.close(deliver=False)


def written(out: Path, text: str) -> None:
    """translate.json written as omnidub translate writes it (through its folder, so the ledger knows it)."""
    from omnidub.folder import TRANSLATE_RECORD, OutputFolder

    folder = OutputFolder(out, record=TRANSLATE_RECORD, others=None, made="the translation of")
    folder.claim(Path(json.loads(text)["input"]))
    try:
        folder.write_text(TRANSLATE_RECORD, text)
    finally:
        folder.release()


def written_as_checked(out: Path, change) -> None:
    """translate.json written again after ``change`` (a function of its lines) gave its lines the checks' keys
    (flags, checks, back), as omnidub translate writes them."""
    data = json.loads((out / "translate.json").read_text())
    change(data["lines"])
    written(out, json.dumps(data, indent=2, ensure_ascii=False) + "\n")


def test_the_checks_flags_and_back_translation_are_shown_and_translate_again_offers_only_what_passed(translated):
    out, dub, records = translated
    several = [r for r in records if len({c["text"] for c in r["candidates"]}) > 1]
    assert len(several) >= 2, "the example dialogue has lines with more than one candidate"
    flagged, fine = several[0], several[1]

    def checked(lines: list[dict]) -> None:
        for line in lines:
            if line["index"] == flagged["index"]:
                line["flags"] = ["meaning", "overflow"]
                line["checks"] = {"meaning": "the back-translation shares 31 % of the original's words"}
                line["back"] = "Something else entirely."
                for candidate in line["candidates"]:
                    if candidate["text"] != line["translation"]:
                        candidate["flags"] = ["garbled"]
            if line["index"] == fine["index"]:
                line["candidates"][0]["flags"] = []  # read defensively: present, empty, or absent alike

    written_as_checked(out, checked)
    desk = open_desk(dub)
    try:
        state = desk.state()["lines"]
        line = state[flagged["index"]]
        assert line["translation"] == {
            "flags": ["meaning", "overflow"],
            "checks": {"meaning": "the back-translation shares 31 % of the original's words"},
            "back": "Something else entirely.",
        }
        assert not line["translate_again"] and "passed its checks (garbled)" in line["translate_why"]
        events = do(desk, "translate", flagged["index"] + 1)
        assert any(e["type"] == "error" and "passed its checks (garbled)" in e["text"] for e in events), events
        other = state[fine["index"]]
        assert other["translate_again"] and other["translation"]["flags"] == []
    finally:
        desk.close(deliver=False)


def test_a_translation_record_is_found_by_slot_and_text_and_read_defensively():
    record = TranslationRecord.parse(
        {
            "lines": [
                {"index": 1, "start": 0.5, "end": 2.0, "original": "Hi.", "translation": "Olá.", "candidates": []},
                {"index": 2, "start": 3.0, "end": 4.0, "original": "Yes.", "translation": "Sim.", "candidates": "?"},
                {"index": 3, "start": 5.0, "end": 6.0, "original": "No.", "translation": "Não.", "candidates": [{}]},
            ]
        }
    )
    assert record.find(0.5, 2.0, "Olá.")[0]["original"] == "Hi."
    assert record.find(0.5, 2.0, "Oi.")[0] is None
    assert record.find(3.0, 4.0, "Sim.")[0] is None  # a damaged record is no record
    found, _ = record.find(5.0, 6.0, "Não.")
    assert record.judged(found, "Não.") == {"flags": [], "checks": {}, "back": None}
    assert record.again(found, "Não.") == (None, "omnidub translate gave no other translation of it")
