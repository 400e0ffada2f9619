# ruff: noqa: F811 - the fixtures imported from test_review are the tests' arguments
"""The review page in a real browser (Debian's Chromium driven by Playwright, by accessible names): an episode of
1,500 lines served by a stand-in desk (the page alone, at scale: its list, filters, search, keys, help, contrast,
a lost server), and the real desk over a rendered scene (undo of each decision, notes and flags kept in the
manifest, A/B of takes)."""

from __future__ import annotations

import contextlib
import json
import re
import shutil
import threading
import time
from pathlib import Path

import pytest
from conftest import another_page, serving
from test_review import CHROMIUM, browser, do, open_desk, run, settle  # noqa: F401 - fixtures

needs_chromium = pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's chromium (apt-get install chromium)")
LOST = "the review server is not answering; run omnidub review OUT_DIR again"
EPISODE = 1500
SPEAKERS = ("ALICE", "BOB", "CAROL")


def line(i: int) -> dict:
    """Line ``i`` of the stand-in episode: every 7th failed, every 11th unchecked, every 5th approved, every
    13th flagged, every 17th edited, every 23rd's take 0.4 s longer than its slot."""
    verdict = "failed" if i % 7 == 0 else "unchecked" if i % 11 == 0 else "passed"
    text = f"Line {i} says the map is in the car"
    return {
        "index": i,
        "speaker": SPEAKERS[i % 3],
        "input_speaker": SPEAKERS[i % 3],
        "text": text,
        "input_text": text if i % 17 else f"Line {i} said it first",
        "original_text": f"Texto original {i}",
        "start": 2.0 * i,
        "end": 2.0 * i + 1.5,
        "slot": 1.5,
        "target": 1.4,
        "duration": 1.9 if i % 23 == 0 else 1.4,
        "flags": [],
        "approved": i % 5 == 0,
        "verdict": verdict,
        "severity": None,
        "reasons": [] if verdict == "passed" else ["a reason"],
        "error_rate": None,
        "voice_similarity": None,
        "audio": None,
        "missing": "segments/x.wav: not there",
        "key": f"k{i}",
        "waveform": None,
        "original": None,
        "own_original": None,
        "reference": None,
        "max_speedup": None,
        "borrow": False,
        "voice": None,
        "takes": [],
        "note": None,
        "look_again": i % 13 == 0,
        "original_heard_again": i % 29 == 0,
        "heard": None,
        "diff": None,
        "voice_from": None,
        # every 19th line's translation flagged by the checks, with why and its back-translation
        "translated_from": f"Line {i} says the map is in the car",
        "translation": {
            "flags": ["meaning"] if i % 19 == 0 else [],
            "checks": {"meaning": f"the back-translation misses line {i}'s words"} if i % 19 == 0 else {},
            "back": f"Line {i} says the map is elsewhere",
        },
        "translate_again": i % 19 != 0,
        "translate_why": None if i % 19 else "none passed its checks",
    }


# A line the source gave no voice surely its own: not rendered, so in no row.
UNVOICED = {
    "index": EPISODE + 1,
    "speaker": "BOB",
    "text": "Yes.",
    "start": 2.0 * EPISODE,
    "end": 2.0 * EPISODE + 0.6,
    "why": "no voice of the source is surely its own (its voice is unsure); label its cue in the original subtitles, "
    "or give it a voice with --voice SPEAKER=FILE",
    "choices": [
        {"voice": "speaker", "speaker": "ALICE"},
        {"voice": "speaker", "speaker": "BOB"},
        {"voice": "given", "speaker": "CAROL"},  # voices the user gave: a file, and one with no sample
        {"voice": "given", "speaker": "DAN"},
    ],
    "likeness": {"ALICE": 0.634, "BOB": 0.412, "CAROL": 0.287},  # CAROL's by its file; DAN's: no sample to judge
    "given": {"CAROL": "carol.wav", "DAN": None},
}


class Desk:
    """A stand-in for omnidub.review.Review serving EPISODE generated lines; an approval is applied at once."""

    token = "t" * 32

    def __init__(self):
        self.lines = {i: line(i) for i in range(1, EPISODE + 1)}
        self.unvoiced = [UNVOICED]
        self.submitted: list = []  # every action the page sent
        self.clips_heard: list = []  # every voice clip the page asked for
        self.subscribers: list = []
        self.states = 0
        self.closing = threading.Event()  # set when the server stops

    def state(self) -> dict:
        self.states += 1
        return {
            "title": "episode",
            "input": "episode.srt",
            "program_seconds": 2.0 * EPISODE + 2,
            "speakers": list(SPEAKERS),
            "source": False,
            "mix": None,
            "lines": [self.lines[i] for i in sorted(self.lines)],
            "counts": {"passed": 0, "failed": 0, "unchecked": 0, "approved": 0, "lines": EPISODE, "unrendered": 0},
            "status": self.status(),
            "max_speedup": 1.25,
            "unvoiced": self.unvoiced,
        }

    def status(self) -> dict:
        return {"busy": None, "queued": 0}

    def subscribe(self, send):
        self.subscribers.append(send)
        return lambda: self.subscribers.remove(send) if send in self.subscribers else None

    def submit(self, action) -> None:
        self.submitted.append(action)
        if action.kind == "voice":  # voiced as the editor chose: a row of its own, listed no more
            left = self.unvoiced.pop()
            self.lines[left["index"]] = {**line(left["index"]), "speaker": action.args["speaker"], "text": left["text"]}
            for send in list(self.subscribers):
                send({"type": "lines"})
        if action.kind == "approve":
            self.lines[action.index] = {**self.lines[action.index], "approved": action.args["approved"]}
            for send in list(self.subscribers):
                send({"type": "line", "line": self.lines[action.index]})

    def media(self, *args):
        return None

    def own_original(self, index):
        return None

    def voice_clip(self, index, choice):
        """Half a second of tone for a choice the unvoiced line offers, as the desk answers it."""
        import numpy as np

        from omnidub.source.audio import wav_bytes

        self.clips_heard.append((index, choice))
        if index != UNVOICED["index"] or not 0 <= choice < len(UNVOICED["choices"]):
            return None
        return wav_bytes(0.1 * np.sin(np.arange(12000) * (0.05 + 0.05 * choice)).astype(np.float32), 24000)

    def picture(self):
        return self.video


Desk.video = None  # no picture unless a test gives one


@pytest.fixture
def episode():
    """The stand-in episode served on a free loopback port: (desk, url, stop)."""
    desk = Desk()
    with serving(desk) as (url, stop):
        yield desk, url, stop


def opened(browser, url, **options):
    from playwright.sync_api import expect

    expect.set_options(timeout=20_000)  # a busy machine (the suite's other worker) slows the page, not its answers
    page = browser.new_page(viewport={"width": 1280, "height": 720}, **options)
    page.set_default_timeout(20_000)
    page.goto(url)
    expect(page.locator("body[data-ready=true]")).to_have_count(1, timeout=60_000)
    return page


def fetched(page, path: str) -> dict:
    """A read as the page itself makes it (its fetch: the browser's cookie and Sec-Fetch-Site): the status, the
    content type and the first four bytes."""
    return page.evaluate(
        """async (path) => {
          const r = await fetch(path), bytes = new Uint8Array(await r.arrayBuffer());
          const head = String.fromCharCode(...bytes.slice(0, 4));
          return {status: r.status, type: r.headers.get("content-type"), head};
        }""",
        path,
    )


def rows(page):
    return page.get_by_role("listbox", name="Lines")


# The list is drawn again (as on any scroll) and two frames have passed.
REDRAWN = """() => new Promise((done) => {
  document.getElementById("rows").dispatchEvent(new Event("scroll"));
  requestAnimationFrame(() => requestAnimationFrame(done));
})"""


def selected(page, row: str) -> None:
    """The selected line is `row`, once the page has handled the key or click (it may still be on its way)."""
    from playwright.sync_api import expect

    expect(page.locator('[role=option][aria-selected="true"]')).to_have_id(row)


@needs_chromium
def test_a_1500_line_episode_opens_with_a_screenful_of_rows_and_one_request_for_the_state(episode, browser):
    from playwright.sync_api import expect

    desk, url, _ = episode
    page = opened(browser, url)
    shown = rows(page).get_by_role("option")
    screenful = 720 // 48 + 10
    assert 5 <= shown.count() <= screenful
    # No player per row: the programme's, and one per clip offered to the line left without a voice.
    offered = sum(c["voice"] != "given" or bool(UNVOICED["given"][c["speaker"]]) for c in UNVOICED["choices"])
    assert page.locator("audio").count() <= 1 + offered and desk.states == 1
    expect(page.get_by_text(f"{EPISODE} of {EPISODE} lines shown")).to_be_visible()
    # A click pressed on a row and released after the list was drawn again (here by a scroll) still selects it.
    box = rows(page).get_by_role("option", name=re.compile(r"^Line 4, ")).bounding_box()
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    page.mouse.down()
    page.evaluate(REDRAWN)
    page.mouse.up()
    selected(page, "row-4")
    # Scrolled down and back: the rows are in the page in the order they are on screen.
    for top in (10 * 48, 0):
        rows(page).evaluate(f"box => box.scrollTop = {top}")
        page.evaluate(REDRAWN)
    expect(rows(page).get_by_role("option", name=re.compile(r"^Line 1, "))).to_be_visible()
    tops = shown.evaluate_all("r => r.map(o => parseFloat(o.style.top))")
    assert tops == sorted(tops) and len(tops) > 10
    # Scrolled to the end: the last line is there, and still only a screenful of rows.
    page.get_by_role("listbox", name="Lines").evaluate("box => box.scrollTop = box.scrollHeight")
    expect(rows(page).get_by_role("option", name=re.compile(rf"^Line {EPISODE}, "))).to_be_visible()
    assert shown.count() <= screenful
    page.close()


@needs_chromium
def test_filters_search_counts_and_the_keys_to_the_next_failed_and_unapproved_line(episode, browser):
    from playwright.sync_api import expect

    _, url, _ = episode
    page = opened(browser, url)
    failed = [i for i in range(1, EPISODE + 1) if line(i)["verdict"] == "failed"]
    page.get_by_label("Show").select_option("failed")
    expect(page.get_by_text(f"{len(failed)} of {EPISODE} lines shown · {len(failed)} failed")).to_be_visible()
    assert all(
        ", Failed" in label for label in rows(page).get_by_role("option").evaluate_all("r => r.map(o => o.ariaLabel)")
    )
    for show, test in (
        ("unchecked", lambda i: line(i)["verdict"] == "unchecked"),
        ("unapproved", lambda i: not line(i)["approved"]),
        ("flagged", lambda i: line(i)["look_again"]),
        ("changed", lambda i: i % 17 == 0),
        ("reheard", lambda i: i % 29 == 0),
    ):
        page.get_by_label("Show").select_option(show)
        count = sum(map(test, range(1, EPISODE + 1)))
        expect(page.get_by_text(f"{count} of {EPISODE} lines shown")).to_be_visible()
    # A line whose original's words were heard again alone says so, in its row and in full.
    rows(page).get_by_role("option", name=re.compile(r"^Line 58, .*, original heard again: ")).click()
    expect(page.locator("#detail")).to_contain_text("The original's words were heard only when their stretch")
    page.get_by_label("Show").select_option("all")
    page.get_by_label("Speaker", exact=True).select_option("CAROL")
    expect(page.get_by_text(f"{EPISODE // 3} of {EPISODE} lines shown")).to_be_visible()
    page.get_by_label("Speaker", exact=True).select_option("")
    # Search reads the translation and the original.
    page.get_by_label("Search").fill("texto original 777")
    expect(page.get_by_text(f"1 of {EPISODE} lines shown")).to_be_visible()
    expect(rows(page).get_by_role("option")).to_have_count(1)
    page.get_by_label("Search").fill("line 1234 says")
    expect(rows(page).get_by_role("option", name=re.compile(r"^Line 1234, "))).to_be_visible()
    page.get_by_label("Search").fill("")
    expect(page.get_by_text(f"{EPISODE} of {EPISODE} lines shown")).to_be_visible()
    # Keys: f and F to the next and previous failed line, u to the next unapproved one.
    rows(page).get_by_role("option", name=re.compile(r"^Line 1, ")).click()
    page.keyboard.press("f")
    selected(page, f"row-{failed[0]}")
    page.keyboard.press("f")
    selected(page, f"row-{failed[1]}")
    page.keyboard.press("Shift+F")
    selected(page, f"row-{failed[0]}")
    rows(page).get_by_role("option", name=re.compile(r"^Line 4, ")).click()
    page.keyboard.press("u")  # line 5 is approved: 6 is the next unapproved
    selected(page, "row-6")
    # The selected line in full: its missing audio said with the reason, its approval from the keyboard.
    expect(page.locator("#detail")).to_contain_text("No audio: segments/x.wav: not there")
    page.keyboard.press("a")
    expect(page.get_by_role("button", name="Approve line 6", exact=True)).to_have_attribute("aria-pressed", "true")
    page.close()


@needs_chromium
def test_keys_inside_a_control_stay_there_the_lines_come_first_and_the_help_opens(episode, browser):
    from playwright.sync_api import expect

    _, url, _ = episode
    page = opened(browser, url)
    page.keyboard.press("Tab")  # the first stop on the page is the list of lines
    assert page.evaluate("document.activeElement.getAttribute('aria-label')") == "Lines"
    page.keyboard.press("j")
    selected(page, "row-1")
    # Arrows in a menu, letters in a text box: theirs, not the list's.
    page.get_by_label("Speaker of line 1", exact=True).focus()
    page.keyboard.press("ArrowDown")
    page.get_by_label("Text of line 1", exact=True).press("j")
    page.get_by_label("Note on line 1", exact=True).press("k")
    page.get_by_label("Search").fill("line 1")
    page.get_by_label("Search").press("ArrowDown")
    page.get_by_label("Search").press("u")
    page.get_by_label("Search").fill("")
    selected(page, "row-1")
    page.get_by_role("listbox", name="Lines").focus()
    page.keyboard.press("?")
    expect(page.get_by_role("dialog", name="Keys")).to_be_visible()
    page.keyboard.press("j")  # not while the help is open
    selected(page, "row-1")
    page.keyboard.press("Escape")
    expect(page.get_by_role("dialog", name="Keys")).to_be_hidden()
    page.close()


@needs_chromium
def test_axe_core_finds_no_violation_in_light_and_dark(episode, browser):
    axe_playwright_python = pytest.importorskip("axe_playwright_python")  # the test extra pins it

    _, url, _ = episode
    axe = (Path(axe_playwright_python.__file__).parent / "axe.min.js").read_text(encoding="utf-8")
    for scheme in ("light", "dark"):
        page = opened(browser, url, bypass_csp=True, color_scheme=scheme)  # axe is injected as a script
        rows(page).get_by_role("option", name=re.compile(r"^Line 7, ")).click()  # a failed line in full beside the list
        page.locator("#unvoiced-box summary").click()  # the lines not rendered, listed
        page.add_script_tag(content=axe)
        found = page.evaluate("async () => (await axe.run(document)).violations")
        assert [(v["id"], [n["target"] for n in v["nodes"]][:3]) for v in found] == [], scheme
        page.close()


@needs_chromium
def test_a_line_left_without_a_voice_is_listed_with_why_and_its_original_heard_there(episode, browser):
    from playwright.sync_api import expect

    desk, url, _ = episode
    page = opened(browser, url)
    box = page.locator("#unvoiced-box")
    expect(box).to_be_visible()
    box.get_by_text("1 line not rendered: no voice surely their own").click()
    listed = page.get_by_role("list", name="1 line not rendered: no voice surely their own")
    expect(listed).to_contain_text(f"Line {EPISODE + 1} (BOB, 50:00.00): Yes.: no voice of the source is surely")
    expect(listed).to_contain_text("--voice SPEAKER=FILE")
    expect(page.get_by_text(f"{EPISODE} of {EPISODE} lines shown")).to_be_visible()  # in no row
    page.get_by_role("button", name=f"Hear the original of line {EPISODE + 1}").click()
    # The programme from the line's start, the original track heard alone.
    expect(page.get_by_role("button", name="Solo the original")).to_have_attribute("aria-pressed", "true")
    src = page.locator("#mix").get_attribute("src")
    assert src.startswith(f"/programme?start={2.0 * EPISODE:.3f}&") and "&dub=0&original=1&bed=0&" in src, src
    # Each voice it may take is heard first: the clip the line would be voiced from, from the desk.
    clip = listed.get_by_label(f"Hear ALICE's clip, for line {EPISODE + 1}")
    clip.evaluate("audio => audio.load()")
    page.wait_for_function("audio => audio.duration > 0.49 && audio.duration < 0.51", arg=clip.element_handle())
    assert desk.clips_heard == [(EPISODE + 1, 0)]
    expect(listed.get_by_label(f"Hear BOB's clip, for line {EPISODE + 1}")).to_have_attribute(
        "src", f"/voice-clip/{EPISODE + 1}/1"
    )
    # Heard, it is voiced from the clip the editor chooses: that choice is what the page sends, and once the desk
    # says the lines changed, the line has a row of its own and the list is gone.
    expect(
        listed.get_by_role("button", name=f"Voice line {EPISODE + 1} from BOB's clip (0.41 like it)")
    ).to_be_visible()
    # A voice the user gave is offered by its file, heard from it; one given with no sample has nothing to hear.
    expect(
        listed.get_by_role(
            "button", name=f"Voice line {EPISODE + 1} from the voice given for CAROL (carol.wav) (0.29 like it)"
        )
    ).to_be_visible()
    expect(
        listed.get_by_label(f"Hear the voice given for CAROL (carol.wav), for line {EPISODE + 1}")
    ).to_have_attribute("src", f"/voice-clip/{EPISODE + 1}/2")
    expect(
        listed.get_by_role("button", name=f"Voice line {EPISODE + 1} from the voice given for DAN", exact=True)
    ).to_be_visible()
    expect(listed.locator("audio")).to_have_count(3)
    listed.get_by_role("button", name=f"Voice line {EPISODE + 1} from ALICE's clip (0.63 like it)").click()
    expect(page.get_by_text(f"{EPISODE + 1} of {EPISODE + 1} lines shown")).to_be_visible()
    expect(box).to_be_hidden()
    [action] = [a for a in desk.submitted if a.kind == "voice"]
    assert (action.index, action.args) == (EPISODE + 1, {"voice": "speaker", "speaker": "ALICE"})
    page.close()


@needs_chromium
def test_the_picture_follows_the_selected_line(episode, browser, tmp_path):
    from conftest import make_video
    from playwright.sync_api import expect

    desk, url, _ = episode
    desk.video = tmp_path / "picture.webm"
    make_video(desk.video, 12, codec="libvpx", audio="libopus", rate=48000)
    page = opened(browser, url)
    picture = page.get_by_label("Picture", exact=True)
    expect(picture).to_be_visible()
    for n in (5, 3):  # line n starts at 2n seconds
        rows(page).get_by_role("option", name=re.compile(rf"^Line {n}, ")).click()
        page.wait_for_function(f"() => Math.abs(document.getElementById('picture').currentTime - {2 * n}) < 0.05")
    page.close()


@needs_chromium
def test_a_lost_server_is_said_plainly(episode, browser):
    from playwright.sync_api import expect

    _, url, _ = episode
    page = opened(browser, url)
    rows(page).get_by_role("option", name=re.compile(r"^Line 2, ")).click()
    page.route("**/api/**", lambda route: route.abort())  # the server gone: nothing answers
    page.get_by_role("button", name="Approve line 2", exact=True).click()
    expect(page.get_by_role("alert")).to_have_text(LOST, timeout=30_000)
    expect(page.get_by_role("status")).to_have_text("Not connected.")
    page.close()


@needs_chromium
def test_the_page_reads_the_state_again_whenever_its_event_stream_reconnects(episode, browser):
    from playwright.sync_api import expect

    desk, url, _ = episode
    page = browser.new_page(viewport={"width": 1280, "height": 720})
    # Every event stream ends at once, so the browser connects again and again: a change made meanwhile, with no
    # event for it, reaches the page all the same.
    page.route(
        "**/api/events",
        lambda route: route.fulfill(status=200, content_type="text/event-stream", body="retry: 300\n\n"),
    )
    page.goto(url)
    expect(page.locator("body[data-ready=true]")).to_have_count(1, timeout=60_000)
    desk.lines[3] = {**desk.lines[3], "approved": True}
    expect(rows(page).get_by_role("option", name=re.compile(r"^Line 3, .*, approved"))).to_be_visible(timeout=30_000)
    assert desk.states >= 2
    page.close()


# -- the real desk ---------------------------------------------------------------------------------------------


@pytest.fixture
def review(rendered, tmp_path):
    """The review of a copy of the rendered scene on a free port: (desk, url, folder, stop); the test closes the
    desk (to open it again), the server is stopped after it."""
    folder = tmp_path / "out"
    shutil.copytree(rendered, folder, symlinks=True)
    desk = open_desk(folder)
    with serving(desk) as (url, stop):
        yield desk, url, folder, stop


@needs_chromium
def test_each_decision_is_undone_a_note_and_a_flag_reach_the_manifest_and_ab_keeps_the_position(
    review, browser, whisper_tiny_en
):
    from playwright.sync_api import expect

    desk, url, folder, stop = review
    page = opened(browser, url)
    # The reads the page makes as it needs them, with the page's own cookie.
    heard = fetched(page, "/context/1")
    assert heard["status"] == 200 and heard["type"] == "audio/wav" and heard["head"] == "RIFF"
    assert fetched(page, "/files/manifest.json")["status"] == 200
    assert fetched(page, "/files/scene.srt")["status"] == 404  # the input: not the folder's own file
    assert fetched(page, "/own-original/1")["status"] == 404  # no source: the page offers none
    assert page.get_by_label("Original of line 1", exact=True).count() == 0
    pick = lambda n: rows(page).get_by_role("option", name=re.compile(rf"^Line {n}, ")).click()  # noqa: E731

    # A retake, heard A/B against the first take at the same position, then undone: take 1 in use again.
    pick(2)
    page.get_by_role("button", name="Retake line 2", exact=True).click()
    expect(page.get_by_role("button", name="Use take 1 of line 2")).to_be_visible(timeout=120_000)
    player = page.get_by_label("A/B player of line 2")
    player.evaluate("a => new Promise(r => a.readyState ? r() : a.addEventListener('loadedmetadata', r))")
    player.evaluate("a => { a.currentTime = 0.5 }")
    page.get_by_role("listbox", name="Lines").focus()
    page.keyboard.press("b")
    expect(page.get_by_text("Hearing take 1")).to_be_visible()
    page.wait_for_function("() => document.querySelector('[aria-label=\"A/B player of line 2\"]').readyState > 0")
    assert abs(player.evaluate("a => a.currentTime") - 0.5) < 0.05
    page.get_by_role("button", name="Undo", exact=True).click()
    expect(page.get_by_role("button", name="Use take 2 of line 2")).to_be_visible(timeout=120_000)
    # Choosing a take, undone: the take it replaced is in use again.
    page.get_by_role("button", name="Use take 2 of line 2").click()
    expect(page.get_by_role("button", name="Use take 1 of line 2")).to_be_visible(timeout=120_000)
    page.get_by_role("button", name="Undo", exact=True).click()
    expect(page.get_by_role("button", name="Use take 2 of line 2")).to_be_visible(timeout=120_000)

    # An approval, undone.
    pick(1)
    approve = page.get_by_role("button", name="Approve line 1", exact=True)
    expect(page.get_by_role("img", name=re.compile(r"^Waveform of line 1, .* s in a slot of 2\.00 s$"))).to_be_visible()
    expect(page.get_by_role("note", name="What QA heard in line 1")).to_contain_text("Heard:")
    page.get_by_label("Dub of line 1", exact=True).evaluate("a => { a.heard = true }")
    approve.click()
    expect(approve).to_have_attribute("aria-pressed", "true")
    # The line was drawn again, its player kept as it was (one playing goes on playing).
    assert page.get_by_label("Dub of line 1", exact=True).evaluate("a => a.heard === true")
    page.keyboard.press("z")
    expect(page.get_by_role("button", name="Approve line 1", exact=True)).to_have_attribute("aria-pressed", "false")

    # An edit of the text, and a move to another voice, each undone.
    pick(3)
    page.get_by_label("Text of line 3", exact=True).fill("Then we are never lost.")
    page.get_by_role("button", name="Render line 3", exact=True).click()
    expect(page.locator("#line-3")).to_contain_text("Input: Then we are not lost at all.", timeout=120_000)
    page.get_by_role("button", name="Undo", exact=True).click()
    expect(page.get_by_label("Text of line 3", exact=True)).to_have_value(
        "Then we are not lost at all.", timeout=120_000
    )
    pick(4)
    page.get_by_label("Speaker of line 4", exact=True).select_option("ALICE")
    page.get_by_role("button", name="Render line 4", exact=True).click()
    expect(page.locator("#line-4 h2")).to_contain_text("ALICE", timeout=120_000)
    page.get_by_role("button", name="Undo", exact=True).click()
    expect(page.locator("#line-4 h2")).to_contain_text("BOB", timeout=120_000)

    # A note and a flag on line 4.
    page.get_by_label("Note on line 4", exact=True).fill("breath before the last word")
    page.get_by_label("Look again at line 4", exact=True).check()  # the change saves the note first (blur)
    expect(rows(page).get_by_role("option", name=re.compile(r"^Line 4, .*look again, note"))).to_be_visible(
        timeout=30_000
    )
    page.close()

    stop()
    desk.close(deliver=False)  # nothing delivered: the journal holds the note and the flag for the next opening
    again = open_desk(folder)
    try:
        line4 = next(x for x in again.state()["lines"] if x["index"] == 4)
        assert line4["note"] == "breath before the last word" and line4["look_again"] is True
        assert line4["speaker"] == "BOB" and not next(x for x in again.state()["lines"] if x["index"] == 1)["approved"]
    finally:
        again.close()
    manifest = {x["index"]: x for x in json.loads((folder / "manifest.json").read_text())["lines"]}
    assert manifest[4]["note"] == "breath before the last word" and manifest[4]["look_again"] is True
    assert manifest[3]["text"] == "Then we are not lost at all."
    # QA's reports name them: the flag as a mark (in qa.html's timeline too), the note beside the findings.
    result = run("qa", folder, "--asr-model", whisper_tiny_en, "--speaker-model", "none")
    assert result.exit_code in (0, 1), result.output
    report = {x["index"]: x for x in json.loads((folder / "qa.json").read_text())["lines"]}
    assert "look-again" in report[4]["marks"] and "editor's note: breath before the last word" in report[4]["note"]
    assert re.search(r'class="bar \w+ look-again" href="#line-4"', (folder / "qa.html").read_text(encoding="utf-8"))


def test_a_line_in_context_is_its_neighbours_and_its_current_take_as_they_stand(rendered, tmp_path):
    import io

    import numpy as np
    import soundfile as sf

    folder = tmp_path / "out"
    shutil.copytree(rendered, folder, symlinks=True)
    desk = open_desk(folder)
    try:

        def heard_at(line: dict, segment: Path) -> float:
            """How far the context, where the line starts, is from the segment (mean absolute difference)."""
            context, rate = sf.read(io.BytesIO(desk.context(2)), dtype="float32")
            samples, _ = sf.read(str(segment), dtype="float32")
            a = int(round((line["start"] - max(0.0, line["start"] - 2.0)) * rate))
            piece = context[a : a + samples.size]
            return float(np.abs(piece - samples[: piece.size]).mean())

        line = next(x for x in desk.state()["lines"] if x["index"] == 2)
        segment = folder / "segments" / "0002-BOB.wav"
        first = segment.read_bytes()
        (tmp_path / "first.wav").write_bytes(first)
        before = heard_at(line, segment)
        do(desk, "retake", 2)
        assert segment.read_bytes() != first
        # The new take is what the context holds (read from the segment as it is now), not the first.
        now, first_take = heard_at(line, segment), heard_at(line, tmp_path / "first.wav")
        assert now < first_take / 5 and before < first_take / 5, (before, now, first_take)
        assert desk.context(99) is None
    finally:
        desk.close(deliver=False)


def test_cancel_stops_the_retakes_of_every_failed_line_at_the_next_line(rendered, tmp_path):
    from omnidub.review import Action

    folder = tmp_path / "out"
    shutil.copytree(rendered, folder, symlinks=True)
    desk = open_desk(folder)
    try:
        failed = [x["index"] for x in desk.state()["lines"] if x["verdict"] == "failed"]
        assert len(failed) >= 2, "tiny.en fails the noise the random weights speak"
        events: list[dict] = []
        stop = desk.subscribe(events.append)
        desk.submit(Action("retake-failed"))
        desk.submit(Action("approve", 1))
        began = time.monotonic()
        while not any("a retake of line" in str(e.get("busy")) for e in list(events)):
            assert time.monotonic() - began < 60
            time.sleep(0.01)
        desk.cancel()
        settle(desk)
        stop()
        said = [e["text"] for e in events if e["type"] == "note"]
        assert "1 queued action(s) dropped" in said, said  # the approval queued behind it
        [cancelled] = [t for t in said if t.startswith("cancelled after")]
        assert cancelled == f"cancelled after 1 of {len(failed)} retakes"
        assert not any(x["approved"] for x in desk.state()["lines"])
        # The page links to the files omnidub wrote in the folder, and to nothing else.
        assert desk.delivered("manifest.json") == folder / "manifest.json"
        assert desk.delivered("../out/manifest.json") is None and desk.delivered("scene.srt") is None
    finally:
        desk.close(deliver=False)


SOURCE = Path(__file__).parent / "data" / "source"


@pytest.mark.slow  # over 10 s on a first run (the source analysed): pytest -m slow runs it, as CI does
def test_a_lines_own_original_is_its_own_span_of_the_source_whichever_clip_its_voice_came_from(
    tiny_model_dir, whisper_tiny_en, tmp_path
):
    import io

    import numpy as np
    import soundfile as sf

    from omnidub.script import read_script
    from omnidub.source.audio import CLIP_RATE, read_source

    (tmp_path / "preset.toml").write_text("steps = 2\n")
    out = tmp_path / "out"
    result = run(
        "render", SOURCE / "dub.srt", "--source", SOURCE / "scene.opus", "--source-subs", SOURCE / "original.srt",
        "--model", "synthetic:tiny", "--asr-model", whisper_tiny_en, "--preset", tmp_path / "preset.toml",
        "--voice-match", "speaker", "--out", out,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    original = {line.index: line for line in read_script(SOURCE / "original.srt").lines}  # the dub's own cues
    source = read_source(SOURCE / "scene.opus", CLIP_RATE)
    desk = open_desk(out)
    try:
        assert desk.previews.ready.wait(120)  # decoded in the background from the moment the review opened
        for line in desk.state()["lines"][:4]:
            n = line["index"]
            # Every voice here is its speaker's one clip, from elsewhere in the scene: the page says which.
            assert line["reference"]["kind"] == "speaker" and line["voice_from"].startswith("its speaker's clip at ")
            assert line["own_original"] == f"/own-original/{n}" and line["original_text"] == original[n].text
            heard, rate = sf.read(io.BytesIO(desk.own_original(n)), dtype="float32")
            own = source.cut(original[n].start, original[n].end)
            assert rate == CLIP_RATE and heard.size == own.size and np.abs(heard - own).max() < 1e-3
        assert desk.own_original(999) is None
    finally:
        desk.close(deliver=False)


@needs_chromium
def test_qa_html_draws_the_same_timeline_zooms_and_a_bar_sets_the_mix_there(rendered, browser):
    from playwright.sync_api import expect

    page = browser.new_page(viewport={"width": 1280, "height": 720})
    page.goto((rendered / "qa.html").as_uri())
    expect(page.locator("#ruler span").first).to_be_visible()
    width = lambda: page.locator("#lanes").evaluate("n => n.getBoundingClientRect().width")  # noqa: E731
    page.get_by_role("button", name="fit", exact=True).click()
    fitted = width()
    page.get_by_role("button", name="+", exact=True).click()
    assert width() > 1.9 * fitted
    bar = page.locator("a.bar").last
    start = float(bar.get_attribute("data-start"))
    bar.click()
    page.wait_for_function(f"() => Math.abs(document.getElementById('mix').currentTime - {start}) < 0.01")
    page.close()


def test_undo_passes_over_a_decision_that_changed_nothing(rendered, tmp_path):
    folder = tmp_path / "out"
    shutil.copytree(rendered, folder, symlinks=True)
    desk = open_desk(folder)
    try:
        approved = lambda: next(x for x in desk.state()["lines"] if x["index"] == 1)["approved"]  # noqa: E731
        do(desk, "approve", 1, approved=True)
        do(desk, "approve", 1, approved=True)  # the same again: nothing changes
        events = do(desk, "undo")
        assert not approved() and {"type": "note", "text": "undone: approving line 1"} in events
        [refused] = [e for e in do(desk, "undo") if e["type"] == "error"]
        assert refused["text"] == "nothing to undo"
    finally:
        desk.close(deliver=False)


@needs_chromium
def test_the_cancel_button_stops_retake_every_failed_line_at_its_next_line(review, browser, monkeypatch):
    from playwright.sync_api import expect

    from omnidub.job import Job

    real = Job.render_takes

    def slow(self, takes):
        time.sleep(1.5)  # a slower machine's take: Cancel is pressed while the first renders
        return real(self, takes)

    monkeypatch.setattr(Job, "render_takes", slow)
    desk, url, folder, stop = review
    failed = [x["index"] for x in desk.state()["lines"] if x["verdict"] == "failed"]
    assert len(failed) >= 2, "tiny.en fails the noise the random weights speak"
    page = opened(browser, url)
    page.get_by_role("button", name="Retake every failed line", exact=True).click()
    expect(page.locator("#status")).to_contain_text(f"a retake of line {failed[0]} (1 of {len(failed)}", timeout=60_000)
    page.get_by_role("button", name="Cancel", exact=True).click()
    expect(page.locator("#notice")).to_have_text(f"cancelled after 1 of {len(failed)} retakes", timeout=60_000)
    expect(page.locator("#error-box")).to_be_hidden()
    page.close()
    stop()
    desk.close(deliver=False)
    retaken = [x["index"] for x in desk.state()["lines"] if len(x["takes"]) > 1]
    assert retaken == failed[:1]


@needs_chromium
def test_undo_says_on_the_page_which_line_it_took_back_until_dismissed(review, browser):
    from playwright.sync_api import expect

    desk, url, folder, stop = review
    page = opened(browser, url)
    pick = lambda n: rows(page).get_by_role("option", name=re.compile(rf"^Line {n}, ")).click()  # noqa: E731
    for n in (1, 2):
        pick(n)
        page.get_by_role("button", name=f"Approve line {n}", exact=True).click()
        expect(page.get_by_role("button", name=f"Approve line {n}", exact=True)).to_have_attribute(
            "aria-pressed", "true"
        )
    pick(1)  # the line in view: its own last decision is taken back, not line 2's
    page.get_by_role("button", name="Undo", exact=True).click()
    notice = page.locator("#notice")
    expect(notice).to_have_text("undone on line 1: approving line 1")
    expect(page.get_by_role("button", name="Approve line 1", exact=True)).to_have_attribute("aria-pressed", "false")
    expect(page.locator("#status")).to_have_text("Ready.")
    expect(notice).to_be_visible()  # the answer stays once the desk is idle again
    assert next(x for x in desk.state()["lines"] if x["index"] == 2)["approved"]
    # A note is a decision too: undone from the keyboard.
    pick(3)
    page.get_by_label("Note on line 3", exact=True).fill("softer")
    page.get_by_role("listbox", name="Lines").focus()  # the change saves the note (blur)
    expect(rows(page).get_by_role("option", name=re.compile(r"^Line 3, .*note"))).to_be_visible()
    page.keyboard.press("z")
    expect(notice).to_have_text("undone on line 3: a note or flag on line 3")
    expect(page.get_by_label("Note on line 3", exact=True)).to_have_value("")
    page.get_by_role("button", name="Dismiss the note", exact=True).click()
    expect(notice).to_be_hidden()
    page.close()
    stop()
    desk.close(deliver=False)


@needs_chromium
def test_translation_flags_are_shown_beside_the_line_with_its_back_translation_and_can_be_filtered(episode, browser):
    from playwright.sync_api import expect

    _, url, _ = episode
    page = opened(browser, url)
    flagged = [i for i in range(1, EPISODE + 1) if line(i)["translation"]["flags"]]
    page.get_by_label("Show").select_option("translation")
    expect(page.get_by_text(f"{len(flagged)} of {EPISODE} lines shown")).to_be_visible()
    rows(page).get_by_role("option", name=re.compile(rf"^Line {flagged[0]}, .*translation: meaning")).click()
    reasons = page.get_by_role("list", name=f"Translation flags of line {flagged[0]}")
    expect(reasons).to_have_text(f"translation: meaning: the back-translation misses line {flagged[0]}'s words")
    expect(page.locator("#detail")).to_contain_text(f"Back-translation: Line {flagged[0]} says the map is elsewhere")
    expect(page.locator("#detail")).to_contain_text("Translate again: not offered (none passed its checks)")
    page.close()


HOSTILE_PLAYER = """<!doctype html><title>another local app</title><body>
<audio id="a" preload="metadata" src="{review}/media/line/1"></audio>
<script>
const a = document.getElementById("a");
a.addEventListener("loadedmetadata", () => {{ document.title = "read " + a.duration; }});
a.addEventListener("error", () => {{ document.title = "refused"; }});
</script>"""


@needs_chromium
def test_a_page_on_another_local_port_cannot_play_or_time_a_line(review, browser):
    desk, url, folder, stop = review
    hostile = HOSTILE_PLAYER.format(review=url.split("/?")[0]).encode()
    with contextlib.ExitStack() as cleanup:
        cleanup.callback(desk.close, deliver=False)
        cleanup.callback(stop)
        elsewhere = cleanup.enter_context(another_page(hostile))
        context = browser.new_context()
        mine = context.new_page()
        mine.goto(url)  # the editor's tab: the cookie is set for 127.0.0.1, every port
        mine.wait_for_selector("body[data-ready=true]")
        assert mine.evaluate("document.querySelector('#detail audio, #mix') !== null")
        evil = context.new_page()
        evil.goto(elsewhere)
        evil.wait_for_function("document.title !== 'another local app'", timeout=30_000)
        assert evil.title() == "refused"
        context.close()
