# ruff: noqa: F811 - the fixtures imported from test_review are the tests' arguments
"""A line's slot moved in review: an edit of its start and end through the page's one door (applied, undone,
refused for bad values, kept on reopening the folder), the timeline's handles dragged in Chromium, and the
programme's solo and mute buttons."""

from __future__ import annotations

import json
import re
import urllib.parse

import pytest
from conftest import serving
from test_review import CHROMIUM, browser, copy_of, lines, open_desk  # noqa: F401 - fixtures
from test_review_timing import Client, settled


@pytest.fixture
def served(rendered, tmp_path):
    """The review of a copy of the rendered scene, served; yields (desk, url, folder)."""
    folder = copy_of(rendered, tmp_path)
    desk = open_desk(folder)
    with serving(desk) as (url, _):
        yield desk, url, folder
    desk.close()


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


def test_a_moved_slot_is_kept_when_the_folder_is_opened_again(served):
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
