# ruff: noqa: F811 - the fixtures imported from test_review and test_review_page are the tests' arguments
"""The review page as an editor who works by keyboard and judges lip-sync uses it, in Chromium: a line's text
edited in place (Enter), rendered (Ctrl+Enter) or left (Escape) with its unsent text kept per line, over a reload
and another tab's edit; the picture playing with whichever player is heard, where it is in the programme; loop
and playback rate on every player; the overflow column and filter."""

from __future__ import annotations

import re
import time

import numpy as np
import pytest
import soundfile as sf
from conftest import serving
from test_review import browser  # noqa: F401 - a fixture
from test_review_page import EPISODE, Desk, episode, line, needs_chromium, opened, review, rows, selected  # noqa: F401

FOCUSED = "() => document.activeElement.id || document.activeElement.getAttribute('aria-label')"


def focused(page) -> str:
    return page.evaluate(FOCUSED)


def back_in_the_list(page) -> None:
    page.wait_for_function(f"() => ({FOCUSED})() === 'rows'")


@needs_chromium
def test_ctrl_enter_renders_the_edit_typed_in_place_and_escape_returns_to_the_list(review, browser):
    from playwright.sync_api import expect

    desk, url, folder, stop = review
    page = opened(browser, url)
    rows(page).focus()
    for _ in range(3):
        page.keyboard.press("j")
    selected(page, "row-3")
    page.keyboard.press("Enter")  # the text box of line 3, from the list
    assert focused(page) == "text-3"
    page.keyboard.press("Control+a")
    page.keyboard.type("Then we are never lost.")
    expect(rows(page).get_by_role("option", name=re.compile(r"^Line 3, .*unsent text"))).to_be_visible()
    page.keyboard.press("Control+Enter")
    back_in_the_list(page)
    selected(page, "row-3")
    expect(page.locator("#line-3")).to_contain_text("Input: Then we are not lost at all.", timeout=120_000)
    assert next(x for x in desk.state()["lines"] if x["index"] == 3)["text"] == "Then we are never lost."
    # Rendered: no longer unsent, in the list or in the browser's storage.
    expect(rows(page).get_by_role("option", name=re.compile(r"^Line 3, "))).not_to_have_attribute(
        "aria-label", re.compile("unsent|sent text")
    )
    assert page.evaluate("() => Object.keys(localStorage).filter(k => k.startsWith('omnidub-drafts:'))") == []
    # Escape from the text box goes back to the list, the line still selected; `e` edits as Enter does.
    page.keyboard.press("k")
    selected(page, "row-2")
    page.keyboard.press("e")
    assert focused(page) == "text-2"
    page.keyboard.press("End")
    page.keyboard.type(" Now.")
    page.keyboard.press("Escape")
    back_in_the_list(page)
    selected(page, "row-2")
    expect(page.locator("#status")).to_contain_text("line 2: your text is kept, unsent")
    now = {x["index"]: x for x in desk.state()["lines"]}
    assert now[3]["text"] == "Then we are never lost." and now[2]["text"] == "It is in the car, under the seat."
    page.close()
    stop()
    desk.close(deliver=False)


@needs_chromium
def test_unsent_text_is_kept_per_line_over_a_move_a_reload_and_another_tabs_edit(episode, browser):
    from playwright.sync_api import expect

    desk, url, _ = episode
    page = opened(browser, url)
    rows(page).focus()
    page.keyboard.press("j")
    page.keyboard.press("j")
    selected(page, "row-2")
    page.keyboard.press("Enter")
    page.keyboard.press("Control+a")
    page.keyboard.type("My own words for line two")
    page.keyboard.press("Escape")
    back_in_the_list(page)
    row2 = rows(page).get_by_role("option", name=re.compile(r"^Line 2, "))
    expect(row2).to_have_attribute("aria-label", re.compile("unsent text"))
    expect(row2.locator(".unsent")).to_have_text("unsent")
    # To another line and back: the draft is in the text box, said unsent.
    page.keyboard.press("j")
    selected(page, "row-3")
    expect(page.get_by_label("Text of line 3", exact=True)).to_have_value(line(3)["text"])
    page.keyboard.press("k")
    selected(page, "row-2")
    text = page.get_by_label("Text of line 2", exact=True)
    expect(text).to_have_value("My own words for line two")
    expect(page.locator("#draft-2")).to_contain_text("Unsent")
    # The filter finds every line with unsent text.
    page.get_by_label("Show").select_option("unsent")
    expect(page.get_by_text(f"1 of {EPISODE} lines shown")).to_be_visible()
    page.get_by_label("Show").select_option("all")
    # A reload keeps it.
    page.reload()
    expect(page.locator("body[data-ready=true]")).to_have_count(1, timeout=60_000)
    expect(rows(page).get_by_role("option", name=re.compile(r"^Line 2, .*unsent text"))).to_be_visible()
    rows(page).get_by_role("option", name=re.compile(r"^Line 2, ")).click()
    expect(text).to_have_value("My own words for line two")
    # Another tab renders an edit of line 2: the page says so and keeps the draft, sent over the change if rendered.
    changed = {**desk.lines[2], "text": "Changed in another tab"}
    desk.lines[2] = changed
    for send in list(desk.subscribers):
        send({"type": "line", "line": changed})
    expect(page.locator("#notice")).to_contain_text("line 2 was changed elsewhere to “Changed in another tab”")
    expect(text).to_have_value("My own words for line two")
    expect(page.locator("#draft-2")).to_contain_text("changed elsewhere meanwhile to “Changed in another tab”")
    assert text.get_attribute("data-text") == "Changed in another tab"  # what a render says it replaces
    # Discarded on purpose: the line's own text again, nothing unsent.
    page.get_by_role("button", name="Discard unsent text of line 2", exact=True).click()
    expect(text).to_have_value("Changed in another tab")
    expect(row2).not_to_have_attribute("aria-label", re.compile("unsent"))
    page.reload()
    expect(page.locator("body[data-ready=true]")).to_have_count(1, timeout=60_000)
    expect(rows(page).get_by_role("option", name=re.compile(r"^Line 2, "))).not_to_have_attribute(
        "aria-label", re.compile("unsent")
    )
    page.close()


@needs_chromium
def test_the_overflow_column_and_filter_show_the_takes_longer_than_their_slot(episode, browser):
    from playwright.sync_api import expect

    _, url, _ = episode
    page = opened(browser, url)
    over = [i for i in range(1, EPISODE + 1) if line(i)["duration"] > line(i)["slot"]]
    page.get_by_label("Show").select_option("overflowing")
    expect(page.get_by_text(f"{len(over)} of {EPISODE} lines shown")).to_be_visible()
    labels = rows(page).get_by_role("option").evaluate_all("r => r.map(o => o.ariaLabel)")
    assert labels and all(re.search(r"overflows its slot by 0\.40 s", label) for label in labels)
    shown = rows(page).get_by_role("option").evaluate_all("r => r.map(o => Number(o.id.slice(4)))")
    assert set(shown) <= set(over) and shown[0] == over[0]
    expect(page.locator(f"#row-{over[0]} .over")).to_have_text("+0.40 s")
    page.get_by_label("Show").select_option("all")
    expect(page.locator("#row-1 .over")).to_have_text("")
    page.close()


@needs_chromium
def test_loop_and_speed_reach_every_player_of_the_line_and_the_mix(review, browser):
    from playwright.sync_api import expect

    desk, url, folder, stop = review
    page = opened(browser, url)
    rows(page).focus()
    page.keyboard.press("j")
    selected(page, "row-1")
    dub = page.get_by_label("Dub of line 1", exact=True)
    page.keyboard.press("l")
    expect(page.get_by_role("button", name="Loop the line (l)")).to_have_attribute("aria-pressed", "true")
    assert dub.evaluate("a => a.loop") and page.get_by_label("Line 1 in context").evaluate("a => a.loop")
    for _ in range(2):
        page.keyboard.press("]")
    expect(page.get_by_label("Playback speed", exact=True)).to_have_value("1.25")
    assert dub.evaluate("a => a.playbackRate") == 1.25 and page.locator("#mix").evaluate("a => a.playbackRate") == 1.25
    for _ in range(6):  # past the slowest: it stays there
        page.keyboard.press("[")
    expect(page.get_by_label("Playback speed", exact=True)).to_have_value("0.5")
    # The next line's players are made looping, at the rate chosen.
    page.keyboard.press("j")
    selected(page, "row-2")
    dub2 = page.get_by_label("Dub of line 2", exact=True)
    assert dub2.evaluate("a => [a.loop, a.playbackRate]") == [True, 0.5]
    page.get_by_label("Playback speed", exact=True).select_option("2")
    assert dub2.evaluate("a => a.playbackRate") == 2
    # The mix played from the line (m) goes back to the line's start at its end, while looping.
    start = next(x for x in desk.state()["lines"] if x["index"] == 2)["start"]
    mix = page.locator("#mix")
    mix.evaluate("m => { m.back = []; m.addEventListener('seeked', () => m.back.push(m.currentTime)); }")
    page.keyboard.press("m")
    page.wait_for_function(
        f"() => document.getElementById('mix').back.filter(t => Math.abs(t - {start}) < 0.05).length >= 2",
        timeout=30_000,
    )
    mix.evaluate("m => m.pause()")
    page.keyboard.press("l")
    expect(page.get_by_role("button", name="Loop the line (l)")).to_have_attribute("aria-pressed", "false")
    assert dub2.evaluate("a => a.loop") is False
    page.close()
    stop()
    desk.close(deliver=False)


class Heard(Desk):
    """The stand-in episode whose every line plays a tone of 1.4 s, over a picture; its own original (from 0.3 s
    before the line) and its context are tones too, the context made slowly, as a cold one is."""

    def __init__(self, sound, video):
        super().__init__()
        self.sound, self.video = sound, video
        for i, entry in self.lines.items():
            self.lines[i] = {**entry, "audio": f"/media/line/{i}?v=1", "missing": None,
                             "own_original": f"/own-original/{i}", "own_start": entry["start"] - 0.3}  # fmt: skip

    def media(self, what, index=None, take=None):
        return self.sound if what == "line" else None

    def own_original(self, index):
        return tone(2.1)

    def context(self, index):
        time.sleep(1.5)  # the source and the bed decoded first
        return tone(5.4)


def tone(seconds: float) -> bytes:
    import io

    t = np.arange(int(seconds * 48000)) / 48000
    data = io.BytesIO()
    sf.write(data, (0.2 * np.sin(2 * np.pi * 220 * t)).astype(np.float32), 48000, format="WAV")
    return data.getvalue()


@pytest.fixture
def heard(tmp_path):
    from conftest import make_video

    sound, video = tmp_path / "tone.wav", tmp_path / "picture.webm"
    sound.write_bytes(tone(1.4))
    make_video(video, 24, codec="libvpx", audio="libopus", rate=48000)
    desk = Heard(sound, video)
    with serving(desk) as (url, _):
        yield desk, url


class Editing(Desk):
    """The stand-in episode whose edits are applied at once, their text read as the server reads a cue's (here:
    its spaces made single)."""

    def submit(self, action) -> None:
        if action.kind != "edit":
            return super().submit(action)
        self.lines[action.index] = {**self.lines[action.index], "text": " ".join(action.args["text"].split())}
        for send in list(self.subscribers):
            send({"type": "line", "line": self.lines[action.index]})


@needs_chromium
def test_a_draft_rendered_as_the_server_reads_it_is_done_not_said_changed_elsewhere(browser):
    from playwright.sync_api import expect

    desk = Editing()
    with serving(desk) as (url, _):
        page = opened(browser, url)
        rows(page).focus()
        page.keyboard.press("j")
        page.keyboard.press("Enter")
        page.keyboard.press("Control+a")
        page.keyboard.type("Two  spaces   here")
        page.keyboard.press("Control+Enter")
        back_in_the_list(page)
        expect(page.locator("#notice")).to_have_text("line 1 was rendered as “Two spaces here”")
        expect(page.get_by_label("Text of line 1", exact=True)).to_have_value("Two spaces here")
        expect(rows(page).get_by_role("option", name=re.compile(r"^Line 1, "))).not_to_have_attribute(
            "aria-label", re.compile("unsent|sent text")
        )
        page.close()


@needs_chromium
def test_the_picture_plays_with_the_line_heard_from_when_its_sound_starts_and_the_playhead_follows(heard, browser):
    from playwright.sync_api import expect

    desk, url = heard
    page = opened(browser, url)
    picture = page.get_by_label("Picture", exact=True)
    expect(picture).to_be_visible()
    # Larger on asking, and full screen from the keyboard.
    small = picture.bounding_box()["width"]
    page.get_by_role("button", name="Picture: small").click()
    expect(page.get_by_role("button", name="Picture: medium")).to_be_visible()
    assert picture.bounding_box()["width"] > 1.5 * small
    # The order in which the picture and the sound start, as they happen.
    page.evaluate(
        """() => {
          window.order = [];
          const picture = (e) => e.target.id === "picture";
          document.addEventListener("playing", (e) => order.push(picture(e) ? "picture" : "sound"), true);
          document.addEventListener("play", (e) => { if (picture(e)) order.push("picture asked"); }, true);
        }"""
    )
    rows(page).focus()
    for _ in range(5):
        page.keyboard.press("j")
    selected(page, "row-5")  # line 5 starts at 10 s
    page.keyboard.press("]")  # at 1.1 times: the picture too
    page.keyboard.press("l")  # looped, so it is still playing when read
    page.keyboard.press("p")
    page.wait_for_function("() => !document.getElementById('picture').paused")
    order = page.evaluate("() => order")
    assert order.index("sound") < order.index("picture asked"), order
    in_sync = """() => {
      const dub = document.querySelector('[aria-label="Dub of line 5"]'), picture = document.getElementById('picture');
      return !dub.paused && !picture.paused && Math.abs(picture.currentTime - (10 + dub.currentTime)) < 0.15 &&
             picture.playbackRate === dub.playbackRate && dub.playbackRate === 1.1;
    }"""
    page.wait_for_function(in_sync)
    expect(page.locator("#picture-with")).to_have_text("Playing with Dub of line 5")
    # Pushed a second off (a decoder that fell behind): put back while it plays.
    page.evaluate("() => { document.getElementById('picture').currentTime += 1; }")
    page.wait_for_function(in_sync)
    # The playhead follows the dub where it is in the programme (line 5 at 10 s of 3,002 s).
    page.wait_for_function(
        """() => {
          const dub = document.querySelector('[aria-label="Dub of line 5"]');
          const left = parseFloat(document.getElementById('playhead').style.left);
          return Math.abs(left - 100 * (10 + dub.currentTime) / 3002) < 0.02;
        }"""
    )
    # Stopped with its sound.
    page.keyboard.press("p")
    page.wait_for_function("() => document.getElementById('picture').paused")
    # The line in context, made slowly: the picture waits for its sound, then plays where it is (2 s before the
    # line); the line's own original from where that starts in the programme.
    for key, label, start in (("c", "Line 5 in context", 8.0), ("o", "Original of line 5", 9.7)):
        page.evaluate("() => { order.length = 0; }")
        page.keyboard.press(key)
        page.wait_for_function("() => !document.getElementById('picture').paused")
        order = page.evaluate("() => order")
        assert order.index("sound") < order.index("picture asked"), (key, order)
        page.wait_for_function(
            """([label, start]) => {
              const heard = document.querySelector(`[aria-label="${label}"]`);
              const picture = document.getElementById('picture'), at = start + heard.currentTime;
              return !heard.paused && !picture.paused && Math.abs(picture.currentTime - at) < 0.15;
            }""",
            arg=[label, start],
        )
        expect(page.locator("#picture-with")).to_have_text(f"Playing with {label}")
        page.keyboard.press(key)
        page.wait_for_function("() => document.getElementById('picture').paused")
    # Any size by dragging its corner; Escape from its controls back to the list.
    box = page.locator("#picture-box").bounding_box()
    page.mouse.move(box["x"] + box["width"] - 3, box["y"] + box["height"] - 3)
    page.mouse.down()
    page.mouse.move(box["x"] + box["width"] + 150, box["y"] + box["height"] + 60, steps=5)
    page.mouse.up()
    assert page.locator("#picture-box").bounding_box()["width"] > box["width"] + 100
    page.get_by_role("button", name="Picture: medium").focus()
    page.keyboard.press("Escape")
    back_in_the_list(page)
    page.keyboard.press("v")
    page.wait_for_function("() => document.fullscreenElement && document.fullscreenElement.id === 'picture-box'")
    page.close()
