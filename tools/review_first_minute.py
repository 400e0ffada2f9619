"""Time an editor's first minute in omnidub review over a folder rendered with a source (a video, say): the page
opened as soon as the review is, then for each of the first lines its own original (o), its context (c), the mix
or programme (m) and the approval (a), in Debian's Chromium (Playwright).

    python tools/review_first_minute.py FOLDER [--lines 10] [--listen 1] [--warm] [--edits 5] [--json FILE]

Without ``--warm`` the review's decoded copies of the source and the bed are removed from omnidub's cache first
(``<cache>/review/``), as on a first review; the source's analysis stays (it is the render's). Times are from the
key's event to the page showing the line approved; the first line's original from the page's opening to its
answer. Works on the review page before and after the source was decoded in the background (the keys are the same).

``--edits N`` then edits N lines from the keyboard (Enter, the words, Ctrl+Enter) and times, for each, the line
rendered (its row no longer says its text is sent) and the edit heard: ``m`` pressed at once, until the programme
around the line plays with the new take (no delivery). The folder is changed: run it on a copy.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import threading
import time
from pathlib import Path

# In the page: for each line, select it, press o, c and m, listen a moment, then a, and time the approval; meanwhile
# the first line's original is read until the server answers it.
FIRST_LINES = """async ([lines, listen]) => {
  const key = (k) => document.dispatchEvent(new KeyboardEvent("keydown", {key: k}));
  const wait = async (test) => { while (!test()) await new Promise((r) => setTimeout(r, 2)); };
  const approvals = [], began = performance.now();
  // The first line's original as the page reads it, asked again every 100 ms while the server says not yet.
  const heard = (async () => {
    for (;;) {
      const r = await fetch("/own-original/" + lines[0]);
      if (r.status !== 503) return [r.status, performance.now() - began];
      await new Promise((done) => setTimeout(done, 100));
    }
  })();
  for (const i of lines) {
    document.getElementById("row-" + i).click();
    await wait(() => document.getElementById("line-" + i));
    key("o"); key("c"); key("m");
    // The editor listens a moment (up to `listen` seconds for the original to play) before approving.
    const player = document.querySelector('[aria-label="Original of line ' + i + '"]'), heard0 = performance.now();
    await wait(() => (player && !player.paused && player.readyState >= 3) || performance.now() - heard0 > listen);
    const t = performance.now();
    key("a");
    await wait(() => {
      const button = [...document.getElementById("line-" + i).querySelectorAll("button")]
        .find((b) => b.textContent === "Approve line " + i);
      return button && button.getAttribute("aria-pressed") === "true";
    });
    approvals.push(performance.now() - t);
  }
  const approved = performance.now() - began, [status, original] = await heard;
  return {approvals, approved_ms: approved, original_status: status, original_ms: original};
}"""


def edit_and_hear(page, desk, index: int) -> tuple[float, float]:
    """Line ``index`` edited from the keyboard and rendered, then heard in the programme: seconds from Ctrl+Enter
    to the line rendered (the desk idle with the new words, the page no longer saying they are sent), and to the
    programme playing with it."""
    page.locator(f"#row-{index}").click()
    page.wait_for_selector(f"#line-{index}")
    page.keyboard.press("Enter")
    page.keyboard.press("End")
    page.keyboard.type(" Sim.")
    began = time.perf_counter()
    page.keyboard.press("Control+Enter")
    while True:
        line = next(x for x in desk.state()["lines"] if x["index"] == index)
        status = desk.status()
        if line["text"].endswith(" Sim.") and status["busy"] is None and not status["queued"]:
            break
        time.sleep(0.02)
    page.wait_for_function(
        """(i) => { const row = document.getElementById("row-" + i);
                     return row && !/unsent|sent text/.test(row.getAttribute("aria-label") || ""); }""",
        arg=index,
        timeout=300_000,
        polling=20,
    )
    rendered = time.perf_counter() - began
    page.keyboard.press("m")
    page.wait_for_function(
        """() => { const mix = document.getElementById("mix");
                   return (mix.getAttribute("src") || "").startsWith("/programme") && !mix.paused &&
                          mix.readyState >= 3 && mix.currentTime > 0; }""",
        timeout=300_000,
        polling=20,
    )
    heard = time.perf_counter() - began
    page.evaluate("() => document.getElementById('mix').pause()")
    return round(rendered, 2), round(heard, 2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--lines", type=int, default=10)
    parser.add_argument("--warm", action="store_true", help="keep the decoded source and bed in the cache")
    parser.add_argument("--listen", type=float, default=1.0, help="seconds the editor waits to hear the original")
    parser.add_argument("--edits", type=int, default=0, help="then edit this many lines and time hearing each")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    from playwright.sync_api import expect, sync_playwright
    from review_episode import report  # tools/, beside this one

    from omnidub.api import Session
    from omnidub.files import cache_home
    from omnidub.hardware import cpu_name
    from omnidub.review import Review, serve

    if not args.warm:
        shutil.rmtree(cache_home() / "review", ignore_errors=True)
    figures: dict = {"cpu": cpu_name(), "cores": os.cpu_count(), "load_before": round(os.getloadavg()[0], 2)}
    began = time.perf_counter()
    session, project = Session.reopen(args.folder)
    desk = Review(session, project, speaker_model="none")
    desk.open()
    figures["open_seconds"] = round(time.perf_counter() - began, 2)
    ready, url, stop = threading.Event(), [], []
    heard = {"on_ready": lambda u, s: (url.append(u), stop.append(s), ready.set())}
    threading.Thread(target=serve, args=(desk,), daemon=True, kwargs=heard).start()
    ready.wait(30)
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox", "--disable-gpu"])
            page = browser.new_page(viewport={"width": 1280, "height": 720})
            began = time.perf_counter()
            page.goto(url[0])
            expect(page.locator("body[data-ready=true]")).to_have_count(1, timeout=300_000)
            figures["page_load_seconds"] = round(time.perf_counter() - began, 2)
            lines = [line["index"] for line in desk.state()["lines"][: args.lines]]
            timed = page.evaluate(FIRST_LINES, [lines, args.listen * 1000])
            edits = [line["index"] for line in desk.state()["lines"][args.lines : args.lines + args.edits]]
            heard_edits = [edit_and_hear(page, desk, index) for index in edits]
            browser.close()
    finally:
        stop[0]()
        desk.close(deliver=False)
    approvals = timed["approvals"]
    figures.update(
        {
            "lines": len(desk.state()["lines"]),
            "approvals_ms": [round(t) for t in approvals],
            "approval_ms_median": round(statistics.median(approvals)),
            "approval_ms_max": round(max(approvals)),
            "approvals_over_1_s": sum(t > 1000 for t in approvals),
            "all_approved_seconds": round(timed["approved_ms"] / 1000, 2),
            "first_original_status": timed["original_status"],
            "first_original_seconds": round(timed["original_ms"] / 1000, 2),
            "load_after": round(os.getloadavg()[0], 2),
        }
    )
    if heard_edits:
        rendered = [r for r, _ in heard_edits]
        heard = [h for _, h in heard_edits]
        figures["edits"] = {
            "rendered_seconds": rendered,
            "heard_seconds": heard,
            "rendered_median": round(statistics.median(rendered), 2),
            "heard_median": round(statistics.median(heard), 2),
            "heard_max": max(heard),
        }
    report(figures, args.json)


if __name__ == "__main__":
    main()
