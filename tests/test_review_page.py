"""omnidub review in a real browser: Debian's Chromium driven by Playwright, by the controls' accessible names."""

from __future__ import annotations

import json
import re
import shutil
import threading
from pathlib import Path

import pytest
from test_review import lines, open_desk, rendered, segments  # noqa: F401 (rendered: the fixture)

CHROMIUM = Path("/usr/bin/chromium")
pytestmark = pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's chromium (apt-get install chromium)")


@pytest.fixture
def served(rendered, tmp_path):
    """The review of a copy of the rendered scene, served on a free loopback port; yields (desk, url)."""
    from omnidub.review import serve

    folder = tmp_path / "out"
    shutil.copytree(rendered, folder, symlinks=True)
    desk = open_desk(folder)
    ready, stop = threading.Event(), []
    url = []

    def on_ready(address, stopper):
        url.append(address)
        stop.append(stopper)
        ready.set()

    thread = threading.Thread(target=serve, args=(desk,), kwargs={"on_ready": on_ready}, daemon=True)
    thread.start()
    assert ready.wait(30)
    yield desk, url[0], folder
    stop[0]()
    thread.join(30)
    desk.close()


@pytest.fixture(scope="module")
def browser():
    playwright = pytest.importorskip("playwright.sync_api")
    with playwright.sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=str(CHROMIUM), args=[
            "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
            "--disable-sync", "--no-first-run"])
        yield chromium
        chromium.close()


def test_the_editor_retakes_edits_and_approves_from_the_page(served, browser):
    from playwright.sync_api import expect

    desk, url, folder = served
    page = browser.new_page()
    page.goto(url)
    expect(page.locator("body[data-ready=true]")).to_have_count(1)
    # Every player says its length before it is played.
    expect(page.get_by_label("Dub of line 2", exact=True)).to_have_attribute("preload", "metadata")
    before = segments(folder)

    page.get_by_role("button", name="Retake line 2", exact=True).click()
    expect(page.get_by_role("button", name="Use take 1 of line 2")).to_be_visible(timeout=60_000)
    after = segments(folder)
    assert {name for name in before if before[name] != after[name]} == {"0002-BOB.wav"}

    page.get_by_label("Text of line 3", exact=True).fill("Then we are never lost.")
    page.get_by_role("button", name="Render line 3", exact=True).click()
    expect(page.locator("#line-3 .small", has_text="Input: Then we are not lost at all.")).to_be_visible(
        timeout=60_000)

    approve = page.get_by_role("button", name="Approve line 1", exact=True)
    approve.click()
    expect(approve).to_have_attribute("aria-pressed", "true")
    page.reload()
    expect(page.get_by_role("button", name="Approve line 1", exact=True)).to_have_attribute("aria-pressed", "true")

    # From the keyboard: line 4 selected with j, approved with a.
    page.locator("#line-1").click()
    for _ in range(3):
        page.keyboard.press("j")
    expect(page.locator("#line-4")).to_have_class(re.compile(r"\bselected\b"))
    page.keyboard.press("a")
    expect(page.get_by_role("button", name="Approve line 4", exact=True)).to_have_attribute("aria-pressed", "true")

    page.get_by_role("button", name="Deliver", exact=True).click()
    expect(page.get_by_role("status")).to_have_text(re.compile("Delivered"), timeout=60_000)
    recorded = lines(folder)
    assert recorded[1]["approved"] and recorded[4]["approved"] and recorded[3]["text"] == "Then we are never lost."
    assert json.loads((folder / "manifest.json").read_text())["assembly"] is not None
    page.close()
