# ruff: noqa: F811 - the fixtures imported from test_review are the tests' arguments
"""A line's slot moved in review: an edit of its start and end through the page's one door (applied, undone,
refused for bad values, kept on reopening the folder), the timeline's handles dragged in Chromium, and the
programme's solo and mute buttons."""

from __future__ import annotations

import json
import re
import time

import pytest
from conftest import serving
from test_review import CHROMIUM, browser, copy_of, lines, open_desk, render, served  # noqa: F401 - fixtures
from test_review_page import opened
from test_review_timing import Client, settled


def line_of(client: Client, index: int) -> dict:
    status, state = client.get("/api/state")
    assert status == 200
    return next(line for line in state["lines"] if line["index"] == index)


def test_a_slot_moved_through_the_edit_door_is_planned_undone_and_refused_when_bad(served):
    desk, url, folder = served
    client = Client(url)
    # Line 3 is 6.0-8.5 s in the input; its start moved a second later and its end half a second later.
    status, _ = client.post("/api/lines/3/edit", {"start": 7.0, "end": 9.0})
    assert status == 202
    settled(desk)
    moved = line_of(client, 3)
    assert (moved["start"], moved["end"]) == (7.0, 9.0) and moved["audio"] is not None
    assert line_of(client, 2)["end"] == 5.5  # its neighbours keep their slots

    for body, said in [
        ({"start": 8.0, "end": 7.5}, "runs forward"),
        ({"start": -1.0}, "runs forward"),
        ({"start": True}, "start cannot be True"),
        ({"end": "9"}, "end cannot be '9'"),
        ({"end": 5000.0}, "within the programme"),
        ({"start": 7.0, "length": 2}, "edit takes no 'length'"),
    ]:
        status, answer = client.post("/api/lines/3/edit", body)
        assert status == 400 and said in answer["error"] and "\n" not in answer["error"], (body, answer)
    assert (line_of(client, 3)["start"], line_of(client, 3)["end"]) == (7.0, 9.0)

    status, _ = client.post("/api/lines/3/undo")
    assert status == 202
    settled(desk)
    back = line_of(client, 3)
    assert (back["start"], back["end"]) == (6.0, 8.5)


def test_a_moved_slot_is_kept_when_the_folder_is_opened_again_and_by_a_later_render(served, whisper_tiny_en):
    desk, url, folder = served
    client = Client(url)
    status, _ = client.post("/api/lines/2/edit", {"end": 5.0})
    assert status == 202
    settled(desk)
    assert line_of(client, 2)["end"] == 5.0
    desk.close()
    recorded = lines(folder)[2]
    assert (recorded["start"], recorded["end"]) == (3.0, 5.0) and recorded["edit"]["end"] == 5.0
    again = open_desk(folder)
    try:
        line = next(line for line in again.state()["lines"] if line["index"] == 2)
        assert (line["start"], line["end"], line["status"]) == (3.0, 5.0, "cached")
    finally:
        again.close()
    # A later render of the same input keeps the moved slot and its audio: nothing renders.
    result = render(
        json.loads((folder / "manifest.json").read_text())["input"], folder, "--asr-model", whisper_tiny_en, "--json"
    )
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["rendered"] == 0 and lines(folder)[2]["end"] == 5.0


def test_a_slot_is_predicted_as_the_plan_would_fit_the_lines_words_in_it(served):
    desk, url, folder = served
    client = Client(url)
    status, roomy = client.get("/remedies/2?start=3.0&end=5.5")
    assert status == 200 and (roomy["start"], roomy["end"], roomy["slot"]) == (3.0, 5.5, 2.5)
    status, tight = client.get("/remedies/2?start=5.0&end=5.04")
    assert status == 200 and tight["slot"] == 0.04
    # The same words at the same pace: a slot far too short for them, close before line 3, runs late.
    assert tight["natural"] == roomy["natural"] and tight["speed"] > 1.0 and tight["length"] > tight["slot"]
    assert roomy["fits"] and roomy["over"] == 0 and not tight["fits"] and tight["over"] > 0
    status, refused = client.get("/remedies/2?start=5.5&end=5.0")
    assert status == 400 and "runs forward" in refused["error"]


def wait_for(check, timeout: float = 60.0):
    began = time.monotonic()
    while not check():
        assert time.monotonic() - began < timeout, "never came"
        time.sleep(0.05)


@pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's chromium (apt-get install chromium)")
def test_solo_and_mute_reload_the_programme_at_the_same_second(served, browser):
    from playwright.sync_api import expect

    desk, url, folder = served
    page = opened(browser, url)
    expect(page.locator("#mix-length")).to_have_text(re.compile(r"s$"))  # the delivered mix, its length read
    page.locator("#block-3").click()  # line 3 selected, the mix at its start (6 s)
    mix = page.locator("#mix")
    page.get_by_role("button", name="Mute the bed").click()
    expect(page.get_by_role("button", name="Mute the bed")).to_have_attribute("aria-pressed", "true")
    expect(mix).to_have_attribute("src", re.compile(r"^/programme\?start=6\.000&.*dub=1&original=0&bed=0"))
    expect(page.locator("#tracks-said")).to_contain_text("the delivered mix cannot be un-mixed")
    page.get_by_role("button", name="Solo the original").click()
    expect(mix).to_have_attribute("src", re.compile(r"^/programme\?start=6\.000&.*dub=0&original=1&bed=0"))
    # From the keyboard: Shift+2 hears every track not muted again, 3 hears the bed again; in a text box, nothing.
    page.locator("#rows").focus()
    page.keyboard.press("Shift+Digit2")
    expect(page.get_by_role("button", name="Solo the original")).to_have_attribute("aria-pressed", "false")
    expect(mix).to_have_attribute("src", re.compile(r"dub=1&original=0&bed=0"))
    page.get_by_label("Text of line 3", exact=True).press("3")
    expect(page.get_by_role("button", name="Mute the bed")).to_have_attribute("aria-pressed", "true")
    page.locator("#rows").focus()
    page.keyboard.press("3")
    # Back to the delivered mix's own tracks: the delivered mix plays again, at the same second.
    expect(mix).to_have_attribute("src", re.compile(r"^/media/mix"))
    expect(page.locator("#mix")).to_have_js_property("currentTime", 6)
    page.close()


@pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's chromium (apt-get install chromium)")
def test_a_handle_dragged_moves_the_slot_snapped_to_frames_and_the_keyboard_reaches_it(served, browser):
    from playwright.sync_api import expect

    desk, url, folder = served
    page = opened(browser, url)
    page.locator("#row-3").click()
    page.get_by_label("Text of line 3", exact=True).fill("Then we are never lost.")  # unsent text, kept over the move
    program = desk.state()["program_seconds"]
    lanes = page.locator("#lanes").bounding_box()
    x = lambda t: lanes["x"] + lanes["width"] * t / program  # noqa: E731 - second t on the timeline
    block = page.locator("#block-3").bounding_box()
    handle = page.locator("#start-handle-3").bounding_box()
    page.mouse.move(handle["x"] + handle["width"] / 2, handle["y"] + handle["height"] / 2)
    page.mouse.down()
    page.mouse.move(x(6.41), handle["y"] + handle["height"] / 2, steps=4)
    # While dragging: the slot where it goes, and how its words fit there.
    expect(page.locator("#slot-3")).to_contain_text(re.compile(r"6\.40 to 8\.50 s · [0-9.]+ s.*(fits|too late)"))
    page.mouse.up()
    wait_for(lambda: next(line for line in desk.state()["lines"] if line["index"] == 3)["start"] == 6.4)
    settled(desk)
    # 0.4 s later on the timeline, once the page has drawn the line again (its block is replaced as it is drawn)
    later = block["x"] + 0.3 * lanes["width"] / program
    wait_for(lambda: (moved := page.locator("#block-3").bounding_box()) is not None and moved["x"] > later, 20.0)
    expect(page.get_by_label("Text of line 3", exact=True)).to_have_value("Then we are never lost.")
    expect(page.locator("#row-3")).to_have_attribute("aria-label", re.compile("unsent"))

    # The keyboard: the end typed in the line's detail, rendered with Ctrl+Enter (snapped to a frame).
    end = page.get_by_label("End of line 3", exact=True)
    expect(end).to_have_value("8.5")
    end.fill("8.61")
    end.press("Control+Enter")
    wait_for(lambda: next(line for line in desk.state()["lines"] if line["index"] == 3)["end"] == 8.6)
    settled(desk)
    line = next(line for line in desk.state()["lines"] if line["index"] == 3)
    assert (line["start"], line["text"]) == (6.4, "Then we are never lost.")
    page.close()


@pytest.mark.slow  # a render of its own: pytest -m slow runs it
def test_a_line_of_an_untimed_script_has_no_slot_to_move(tmp_path):
    script = tmp_path / "scene.txt"
    script.write_text("ALICE: Did you bring the map?\nBOB: It is in the car.\n")
    assert render(script, tmp_path / "out").exit_code == 0
    desk = open_desk(tmp_path / "out")
    try:
        with serving(desk) as (url, _):
            status, answer = Client(url).post("/api/lines/2/edit", {"start": 0.5, "end": 1.5})
            assert (
                status == 400 and answer["error"] == "line 2: the script is untimed, so its lines have no slot to move"
            )
            assert Client(url).get("/api/state")[1]["timed"] is False  # the page draws no handles, shows no fields
    finally:
        desk.close(deliver=False)
