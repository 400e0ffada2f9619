"""omnidub review: the desk's actions on disk, the routes' token and Host checks, a render beside it, a restart, a
kill -9 in the middle of a take, and the page in a real browser (Debian's Chromium driven by Playwright, by the
controls' accessible names)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from conftest import EXAMPLES, ROOT, serving
from typer.testing import CliRunner

from omnidub.cli import app
from omnidub.review.view import WAVE_BINS, waveform

runner = CliRunner()
SCENE = """1
00:00:00,500 --> 00:00:02,500
ALICE: Did you bring the map this time?

2
00:00:03,000 --> 00:00:05,500
BOB: It is in the car, under the seat.

3
00:00:06,000 --> 00:00:08,500
ALICE: Then we are not lost at all.

4
00:00:09,000 --> 00:00:11,000
BOB: We never were.
"""
HOST = "127.0.0.1:8765"


def run(*args):
    return runner.invoke(app, [str(a) for a in args], catch_exceptions=False)


def render(script, out, *more):
    """``omnidub render`` of ``script`` into ``out``: synthetic:tiny on the CPU, the 2-step preset beside the
    script (written where missing)."""
    preset = Path(script).parent / "fast.toml"
    if not preset.exists():
        preset.write_text('steps = 2\ndtype = "float32"\nreference_seconds = 0\n')
    voices = EXAMPLES / "voices.toml"
    return run(
        "render",
        script,
        "--voices",
        voices,
        "--model",
        "synthetic:tiny",
        "--device",
        "cpu",
        "--preset",
        preset,
        "--out",
        out,
        *more,
    )


def render_scene(folder: Path, asr_model: Path) -> Path:
    """The scene rendered with synthetic:tiny (2 steps, fp32) and checked by QA with ``asr_model``, in ``folder``."""
    (folder / "scene.srt").write_text(SCENE, encoding="utf-8")
    out = folder / "out"
    result = render(folder / "scene.srt", out, "--asr-model", asr_model, "--qa", "--speaker-model", "none")
    assert result.exit_code in (0, 1), result.output  # QA fails the noise the random weights speak
    return out


def copy_of(rendered: Path, tmp_path: Path) -> Path:
    """A copy of a rendered folder of a test's own (times kept, so the ledger still knows every file)."""
    copy = tmp_path / "out"
    shutil.copytree(rendered, copy, symlinks=True)
    return copy


@pytest.fixture
def folder(rendered, tmp_path) -> Path:
    return copy_of(rendered, tmp_path)


def open_desk(folder: Path):
    from omnidub.api import Session
    from omnidub.review import Review

    session, project = Session.reopen(folder)
    desk = Review(session, project, speaker_model="none")
    desk.open()
    return desk


def settle(desk, timeout: float = 120.0) -> None:
    began = time.monotonic()
    while desk.status()["busy"] or desk.status()["queued"] or not desk._actions.empty():
        assert time.monotonic() - began < timeout, "the desk never finished"
        time.sleep(0.05)


def do(desk, kind: str, index: int | None = None, **args) -> list[dict]:
    """Run one action to its end; returns the events it published."""
    from omnidub.review import Action

    events: list[dict] = []
    stop = desk.subscribe(events.append)
    desk.submit(Action(kind, index, args))
    settle(desk)
    stop()
    return events


def render_as_changed(folder: Path, text: str, *more):
    """Render the folder's input again as if it said ``text`` (written in its place, then put back)."""
    script = Path(json.loads((folder / "manifest.json").read_text())["input"])
    script.write_text(text)
    try:
        return render(script, folder, *more)
    finally:
        script.write_text(SCENE)


def segments(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted((folder / "segments").glob("*.wav"))}


def lines(folder: Path) -> dict[int, dict]:
    return {line["index"]: line for line in json.loads((folder / "manifest.json").read_text())["lines"]}


def test_a_retake_changes_only_that_lines_segment_and_keeps_every_take(folder):
    desk = open_desk(folder)
    try:
        assert desk.state()["counts"]["passed"] == 0  # tiny.en fails the noise: nothing is called passed
        before = segments(folder)
        events = do(desk, "retake", 2)
        assert not [e for e in events if e["type"] == "error"], events
        after = segments(folder)
        assert {name for name in before if before[name] != after[name]} == {"0002-BOB.wav"}
        line = desk.state()["lines"][1]
        # The page draws the take in use: its waveform is read from the new segment.
        assert line["waveform"] == waveform(folder / "segments" / "0002-BOB.wav")
        assert len(line["takes"]) == 2 and [t["chosen"] for t in line["takes"]] == [False, True]
        assert line["takes"][1]["verdict"] in ("failed", "unchecked")  # heard by QA at once (tiny.en, noise)
        # The first take is chosen again: the segment is what it was, bit for bit.
        do(desk, "choose", 2, take=1)
        assert segments(folder) == before
    finally:
        desk.close()
    # Delivered on close: the manifest records both takes, the first in use.
    attempts = lines(folder)[2]["attempts"]
    assert [a["chosen"] for a in attempts] == [True, False]


def test_delivery_writes_qa_again_of_the_lines_as_they_stand_hearing_no_audio_twice(folder):
    before = {line["index"]: line for line in json.loads((folder / "qa.json").read_text())["lines"]}
    desk = open_desk(folder)
    try:
        do(desk, "retake", 3)
        verdict = desk.state()["lines"][2]["takes"][-1]["verdict"]
        events = do(desk, "deliver")
    finally:
        desk.close(deliver=False)
    [delivered] = [e for e in events if e["type"] == "delivered"]
    assert {"qa.json", "qa.html"} <= set(delivered["files"])
    report = json.loads((folder / "qa.json").read_text())
    after = {line["index"]: line for line in report["lines"]}
    # Line 3's report is of its new take, with the verdict the review gave it; the others' as they were.
    assert after[3]["sha256"] == lines(folder)[3]["sha256"] != before[3]["sha256"]
    assert after[3]["verdict"] == verdict
    assert all(after[i]["sha256"] == before[i]["sha256"] for i in (1, 2, 4))
    # The render's QA heard lines 1, 2 and 4, the review heard the take: nothing is transcribed again.
    assert any(note.startswith("4 of 4 line(s) were heard by") for note in report["notes"]), report["notes"]


def test_a_qa_page_someone_changed_is_moved_aside_at_delivery_and_said(folder):
    desk = open_desk(folder)
    try:
        do(desk, "retake", 3)
        page = (folder / "qa.html").read_text(encoding="utf-8") + "<!-- my notes -->\n"
        (folder / "qa.html").write_text(page, encoding="utf-8")
        events = do(desk, "deliver")
    finally:
        desk.close(deliver=False)
    assert not [e for e in events if e["type"] == "error"], events
    [aside] = folder.glob("qa.changed-*.html")
    assert aside.read_text(encoding="utf-8") == page and "my notes" not in (folder / "qa.html").read_text()
    said = [e["text"] for e in events if e["type"] == "note"]
    assert any(f"qa.html was changed after omnidub wrote it; it was moved to {aside.name}" in t for t in said), said


def test_the_mix_a_render_left_plays_until_a_line_changes_and_again_once_delivered(folder):
    desk = open_desk(folder)
    try:
        # Opened on a rendered folder: its mix is the lines as they are, so the page plays it at once.
        assert desk.state()["mix"] == "/media/mix" and desk.media("mix") == folder / "mix.wav"
        events = do(desk, "retake", 1)
        assert {"type": "mix", "mix": None} in events  # the page hears that the mix is no longer these lines
        assert desk.state()["mix"] is None and desk.media("mix") is None
        events = do(desk, "deliver")
        assert any(e["type"] == "delivered" for e in events) and desk.state()["mix"] == "/media/mix"
    finally:
        desk.close()


def test_a_render_over_a_longer_bed_given_by_a_relative_path_is_up_to_date_for_review_and_render(tmp_path, monkeypatch):
    import numpy as np
    import soundfile as sf

    # A bed longer than the lines (the programme grows to it when assembled), named relative to the folder.
    monkeypatch.chdir(tmp_path)
    sf.write("bed.wav", np.random.default_rng(0).normal(0, 0.05, (24000 * 15, 2)).astype(np.float32), 24000)
    (tmp_path / "scene.srt").write_text(SCENE, encoding="utf-8")
    result = render(tmp_path / "scene.srt", "out", "--bed", "bed.wav")
    assert result.exit_code == 0, result.output
    out = tmp_path / "out"
    assert json.loads((out / "manifest.json").read_text())["assembly"] is not None
    again = render(tmp_path / "scene.srt", "out", "--bed", "bed.wav")
    assert again.exit_code == 0 and "stems and mix are up to date" in again.stderr, again.output
    desk = open_desk(out)  # reopened from the manifest, where the bed is an absolute path
    try:
        assert desk.state()["mix"] == "/media/mix" and desk.media("mix") == out / "mix-bed.wav"
        events = do(desk, "deliver")
        assert any(e["type"] == "delivered" for e in events) and desk.project.generation.reused  # nothing written
    finally:
        desk.close()
    last = render(tmp_path / "scene.srt", "out", "--bed", "bed.wav")
    assert last.exit_code == 0 and "stems and mix are up to date" in last.stderr, last.output


def test_a_waveform_is_each_stretchs_peak_and_the_level_of_the_loudest(tmp_path):
    import numpy as np
    import soundfile as sf

    # A second of silence, then a second at half scale with one full-scale sample: the bars follow it.
    audio = np.zeros(48000, dtype=np.float32)
    audio[24000:] = 0.5
    audio[40000] = -1.0
    sf.write(tmp_path / "line.wav", audio, 24000)
    form = waveform(tmp_path / "line.wav")
    half = WAVE_BINS // 2
    assert form["peaks"][:half] == [0.0] * half and form["peak_dbfs"] == 0.0
    assert sorted(set(form["peaks"][half:])) == [0.5, 1.0] and form["peaks"][int(40000 / 48000 * WAVE_BINS)] == 1.0
    sf.write(tmp_path / "quiet.wav", np.zeros(2400, dtype=np.float32), 24000)
    assert waveform(tmp_path / "quiet.wav") == {"peaks": [0.0] * WAVE_BINS, "peak_dbfs": None}
    (tmp_path / "broken.wav").write_bytes(b"RIFF")
    assert waveform(tmp_path / "broken.wav") is None and waveform(None) is None


def test_an_edited_text_is_rendered_and_kept_by_a_later_render(folder, whisper_tiny_en):
    desk = open_desk(folder)
    try:
        events = do(desk, "edit", 3, text="Then we are <i>never</i> lost.")
        assert not [e for e in events if e["type"] == "error"], events
        line = desk.state()["lines"][2]
        assert line["text"] == "Then we are never lost." and line["input_text"] == "Then we are not lost at all."
        from omnidub.errors import OmnidubError
        from omnidub.review import Action

        with pytest.raises(OmnidubError, match="sound description only, so there is nothing to say"):
            desk.submit(Action("edit", 4, {"text": "[door slams]"}))  # refused before it is queued
    finally:
        desk.close()
    recorded = lines(folder)[3]
    assert recorded["text"] == "Then we are never lost." and recorded["edit"]["from"] == "Then we are not lost at all."
    # A later render of the same input keeps the edit and its audio: nothing renders.
    manifest = json.loads((folder / "manifest.json").read_text())
    result = render(manifest["input"], folder, "--asr-model", whisper_tiny_en, "--json")
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["rendered"] == 0 and lines(folder)[3]["text"] == "Then we are never lost."


def test_a_line_moved_to_another_voice_is_said_by_it_and_in_its_stem_and_a_later_render_keeps_it(
    folder, whisper_tiny_en
):
    from omnidub.errors import OmnidubError
    from omnidub.review import Action

    desk = open_desk(folder)
    try:
        with pytest.raises(OmnidubError, match="no voice called 'CAROL' in this render"):
            desk.submit(Action("edit", 3, {"speaker": "CAROL"}))  # refused before it is queued
        with pytest.raises(OmnidubError, match="speaker cannot be 3"):
            from omnidub.review.app import _arguments

            _arguments("edit", {"speaker": 3})
        before = segments(folder)
        events = do(desk, "edit", 3, speaker="BOB")
        assert not [e for e in events if e["type"] == "error"], events
        line = desk.state()["lines"][2]
        assert (line["speaker"], line["input_speaker"]) == ("BOB", "ALICE") and line["audio"]
    finally:
        desk.close()
    after = segments(folder)
    # The line is BOB's now: its segment is named for him (ALICE's is gone), and nothing else changed.
    assert "0003-ALICE.wav" in before and "0003-ALICE.wav" not in after and "0003-BOB.wav" in after
    assert {name: data for name, data in after.items() if name != "0003-BOB.wav"} == {
        name: data for name, data in before.items() if name != "0003-ALICE.wav"
    }
    recorded = lines(folder)[3]
    assert recorded["speaker"] == "BOB" and recorded["edit"]["speaker"] == "BOB"
    manifest = json.loads((folder / "manifest.json").read_text())
    assert set(manifest["stems"]) == {"ALICE", "BOB"}  # ALICE keeps lines 1
    assert sum(1 for entry in manifest["lines"] if entry["speaker"] == "BOB") == 3
    # A later render of the same input keeps the move and its audio: nothing renders.
    result = render(manifest["input"], folder, "--asr-model", whisper_tiny_en, "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["rendered"] == 0 and lines(folder)[3]["speaker"] == "BOB"
    # The take from before the move, chosen again, is ALICE's again, bit for bit; then moved back by hand.
    desk = open_desk(folder)
    try:
        events = do(desk, "choose", 3, take=1)
        assert not [e for e in events if e["type"] == "error"], events
        assert desk.state()["lines"][2]["speaker"] == "ALICE"
        assert segments(folder)["0003-ALICE.wav"] == before["0003-ALICE.wav"]
        do(desk, "choose", 3, take=2)
        assert desk.state()["lines"][2]["speaker"] == "BOB"
        do(desk, "edit", 3, speaker="ALICE")
        assert desk.state()["lines"][2]["speaker"] == "ALICE"
    finally:
        desk.close()
    assert "speaker" not in (lines(folder)[3].get("edit") or {}) and "0003-ALICE.wav" in segments(folder)


def test_a_line_moved_to_a_voice_the_input_no_longer_has_stays_its_own_speakers(folder, whisper_tiny_en):
    desk = open_desk(folder)
    try:
        do(desk, "edit", 3, speaker="BOB")
    finally:
        desk.close()
    # BOB's lines are ALICE's now: he is gone.
    result = render_as_changed(folder, SCENE.replace("BOB:", "ALICE:"), "--asr-model", whisper_tiny_en)
    assert result.exit_code == 0, result.output
    assert "it was moved to BOB in review, a voice this render no longer has" in result.stderr
    assert {line["speaker"] for line in lines(folder).values()} == {"ALICE"}


def test_a_take_from_before_an_edit_comes_back_with_the_text_and_cap_it_was_made_with(folder):
    before = segments(folder)
    desk = open_desk(folder)
    try:
        do(desk, "edit", 3, text="Then we are never lost.", max_speedup=1.5)
        events = do(desk, "choose", 3, take=1)
        assert not [e for e in events if e["type"] == "error"], events
        line = desk.state()["lines"][2]
        assert line["text"] == "Then we are not lost at all." and line["max_speedup"] is None
        assert segments(folder) == before
        do(desk, "choose", 3, take=2)
        line = desk.state()["lines"][2]
        assert line["text"] == "Then we are never lost." and line["max_speedup"] == 1.5
    finally:
        desk.close()


def test_an_approval_survives_a_restart_and_a_render_beside_the_review_is_refused(folder):
    desk = open_desk(folder)
    try:
        do(desk, "approve", 1)
        assert desk.state()["lines"][0]["approved"]
        manifest = json.loads((folder / "manifest.json").read_text())
        result = run(
            "render",
            manifest["input"],
            "--voices",
            EXAMPLES / "voices.toml",
            "--model",
            "synthetic:tiny",
            "--out",
            folder,
        )
        assert result.exit_code == 2 and "is in use by" in result.stderr and "review" in result.stderr
    finally:
        desk.close()
    assert lines(folder)[1]["approved"]
    again = open_desk(folder)
    try:
        assert again.state()["lines"][0]["approved"] and not again.state()["lines"][1]["approved"]
        # An approval is of the audio: a retake of the line takes it back.
        do(again, "retake", 1)
        assert not again.state()["lines"][0]["approved"]
    finally:
        again.close()


def test_every_request_needs_the_token_and_the_servers_own_host(folder):
    from starlette.testclient import TestClient

    from omnidub.review.app import build_app

    desk = open_desk(folder)
    try:
        client = TestClient(build_app(desk, {HOST}), base_url=f"http://{HOST}")
        assert client.get("/api/state").status_code == 403
        assert client.get("/?token=wrong").status_code == 403
        assert client.post("/api/lines/1/approve", json={}).status_code == 403
        page = client.get(f"/?token={desk.token}")
        assert page.status_code == 200 and "SameSite=Strict" in page.headers["set-cookie"]
        assert "access-control-allow-origin" not in page.headers
        # The cookie carries the token from now on; a foreign Host is refused even with it.
        state = client.get("/api/state", headers={"Origin": "http://evil.example"})
        assert state.status_code == 200 and len(state.json()["lines"]) == 4
        assert "access-control-allow-origin" not in state.headers
        assert client.get("/api/state", headers={"Host": "evil.example"}).status_code == 403
        assert (
            client.get(f"/?token={desk.token}", headers={"Host": f"evil.example:{HOST.split(':')[1]}"}).status_code
            == 403
        )
        # Media: the line's segment plays to the page's own player (with byte ranges, so a player can seek);
        # nothing else is served.
        player = {"Sec-Fetch-Site": "same-origin"}
        audio = client.get("/media/line/1", headers={"Range": "bytes=0-99", **player})
        assert audio.status_code == 206 and len(audio.content) == 100
        assert client.get("/media/line/99", headers=player).status_code == 404
        assert client.get("/media/line/..%2F..%2Fmanifest.json", headers=player).status_code == 404
        assert client.get("/static/../../manifest.json").status_code in (403, 404)
        # Bad actions are one line, 400, and queue nothing (the page's own origin, as a browser sends it).
        page_origin = {"Origin": f"http://{HOST}"}
        text = desk.state()["lines"][0]["text"]
        assert (
            client.post(
                "/api/lines/1/edit", json={"text": "[door slams]", "was": text}, headers=page_origin
            ).status_code
            == 400
        )
        assert client.post("/api/lines/1/choose", json={"take": "1; rm -rf /"}, headers=page_origin).status_code == 400
        assert client.post("/api/lines/99/retake", json={}, headers=page_origin).status_code == 400
        key = desk.state()["lines"][0]["key"]
        assert client.post("/api/lines/1/approve", json={"key": key}, headers=page_origin).status_code == 202
        settle(desk)
        assert client.get("/api/state").json()["lines"][0]["approved"]
    finally:
        desk.close()


KILLED_MID_TAKE = """
import os, signal, sys
from omnidub.api import Session
from omnidub.review import Action, Review

session, project = Session.reopen(sys.argv[1])
desk = Review(session, project, speaker_model="none")
desk.open()
def listen(event):
    if event["type"] == "rendering" and event["index"] == 2:
        os.kill(os.getpid(), signal.SIGKILL)  # the take of line 2 is being rendered
desk.subscribe(listen)
desk.submit(Action("approve", 1))
desk.submit(Action("retake", 2))
import time
time.sleep(120)  # killed long before this
sys.exit(3)
"""


def test_kill_9_during_a_take_leaves_a_consistent_folder_and_loses_no_approval(folder, whisper_tiny_en):
    before = segments(folder)
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(KILLED_MID_TAKE), str(folder)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
        timeout=300,
    )
    assert result.returncode == -9, result.stderr
    assert segments(folder) == before  # the take in flight never reached a segment
    desk = open_desk(folder)  # the folder opens again: its lock went with the process
    try:
        state = desk.state()
        assert state["lines"][0]["approved"] and all(line["audio"] for line in state["lines"])
    finally:
        desk.close()
    # Every file the ledger lists holds what omnidub wrote, and a render finds every line in place.
    from omnidub.folder import OutputFolder

    ledger = OutputFolder(folder)
    assert all(ledger.status(relative) == "ours" for relative in ledger._ledger().files)
    manifest = json.loads((folder / "manifest.json").read_text())
    result = render(manifest["input"], folder, "--asr-model", whisper_tiny_en, "--json")
    assert result.exit_code == 0 and json.loads(result.stdout)["rendered"] == 0, result.output


def test_a_folder_review_cannot_open_is_one_line(tmp_path):
    result = run("review", tmp_path / "nothing", "--no-browser")
    assert result.exit_code == 2 and "no such folder" in result.stderr
    (tmp_path / "empty").mkdir()
    result = run("review", tmp_path / "empty", "--no-browser")
    assert result.exit_code == 2 and "holds no render" in result.stderr


def test_a_spanish_dub_checked_by_an_english_only_model_is_never_called_passed(
    tmp_path, tiny_model_dir, whisper_tiny_en
):
    script = tmp_path / "es.srt"
    script.write_text(
        "1\n00:00:00,500 --> 00:00:02,500\nALICE: ¿Trajiste el mapa esta vez?\n\n"
        "2\n00:00:03,000 --> 00:00:05,000\nBOB: Está en el coche.\n",
        encoding="utf-8",
    )
    out = tmp_path / "out"
    result = render(script, out, "--language", "es", "--qa", "--asr-model", whisper_tiny_en, "--speaker-model", "none")
    qa = json.loads((out / "qa.json").read_text())
    assert result.exit_code == (1 if qa["failed"] else 0), result.output  # no judge of Spanish here: no failure
    desk = open_desk(out)
    try:
        counts = desk.state()["counts"]
        assert counts["passed"] == 0 and counts["unchecked"] == 2
        assert all("English-only" in " ".join(line["reasons"]) for line in desk.state()["lines"])
        do(desk, "approve-passed")
        assert not any(line["approved"] for line in desk.state()["lines"])  # none passed, so none approved
        do(desk, "retake", 1)  # a new take is heard at once, and is unchecked too
        assert desk.state()["lines"][0]["verdict"] == "unchecked" and desk.state()["counts"]["passed"] == 0
    finally:
        desk.close()


# -- the page, in a browser ---------------------------------------------------------------------------------------

CHROMIUM = Path("/usr/bin/chromium")


@pytest.fixture
def served(rendered, tmp_path):
    """The review of a copy of the rendered scene, served on a free loopback port; yields (desk, url, folder)."""
    folder = tmp_path / "out"
    shutil.copytree(rendered, folder, symlinks=True)
    desk = open_desk(folder)
    with serving(desk) as (url, _):
        yield desk, url, folder
    desk.close()


@pytest.fixture(scope="module")
def browser():
    playwright = pytest.importorskip("playwright.sync_api")
    with playwright.sync_playwright() as p:
        chromium = p.chromium.launch(
            executable_path=str(CHROMIUM),
            args=[
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--no-first-run",
            ],
        )
        yield chromium
        chromium.close()


@pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's chromium (apt-get install chromium)")
def test_the_editor_retakes_edits_and_approves_from_the_page_in_a_browser(served, browser):
    from playwright.sync_api import expect

    desk, url, folder = served
    page = browser.new_page()
    page.goto(url)
    expect(page.locator("body[data-ready=true]")).to_have_count(1)
    pick = lambda n: page.locator(f"#row-{n}").click()  # noqa: E731 - the page shows the line picked in full
    # Every player says its length before it is played.
    pick(2)
    expect(page.get_by_label("Dub of line 2", exact=True)).to_have_attribute("preload", "metadata")
    before = segments(folder)

    page.get_by_role("button", name="Retake line 2", exact=True).click()
    expect(page.get_by_role("button", name="Use take 1 of line 2")).to_be_visible(timeout=60_000)
    after = segments(folder)
    assert {name for name in before if before[name] != after[name]} == {"0002-BOB.wav"}

    pick(3)
    page.get_by_label("Text of line 3", exact=True).fill("Then we are never lost.")
    page.get_by_role("button", name="Render line 3", exact=True).click()
    expect(page.locator("#line-3 .small", has_text="Input: Then we are not lost at all.")).to_be_visible(timeout=60_000)

    # Line 4 moved to ALICE: said in her voice, its block in her lane of the timeline.
    pick(4)
    page.get_by_label("Speaker of line 4", exact=True).select_option("ALICE")
    page.get_by_role("button", name="Render line 4", exact=True).click()
    expect(page.locator('#lanes .lane[data-speaker="ALICE"] #block-4')).to_have_count(1, timeout=60_000)
    expect(page.locator("#line-4 h2")).to_contain_text("ALICE")
    expect(page.locator("#line-4 .small", has_text="Input: BOB")).to_be_visible()

    pick(1)
    expect(
        page.get_by_role("img", name=re.compile(r"^Waveform of line 1, (peak -?[0-9.]+ dBFS|silent)"))
    ).to_be_visible()
    approve = page.get_by_role("button", name="Approve line 1", exact=True)
    approve.click()
    expect(approve).to_have_attribute("aria-pressed", "true")
    page.reload()
    pick(1)
    expect(page.get_by_role("button", name="Approve line 1", exact=True)).to_have_attribute("aria-pressed", "true")

    # From the keyboard: line 4 selected with j, approved with a.
    for _ in range(3):
        page.keyboard.press("j")
    expect(page.locator("#row-4")).to_have_attribute("aria-selected", "true")
    page.keyboard.press("a")
    expect(page.get_by_role("button", name="Approve line 4", exact=True)).to_have_attribute("aria-pressed", "true")

    page.get_by_role("button", name="Deliver", exact=True).click()
    # Lines 2 and 3 are not approved: Deliver names them and asks once.
    asked = page.get_by_role("dialog", name="Deliver now?")
    expect(asked).to_contain_text("2 of 4 lines not approved: 2-3")
    asked.get_by_role("button", name="Deliver anyway").click()
    expect(page.locator("#status")).to_have_text(re.compile("Delivered"), timeout=60_000)
    recorded = lines(folder)
    assert recorded[1]["approved"] and recorded[4]["approved"] and recorded[3]["text"] == "Then we are never lost."
    assert recorded[4]["speaker"] == "ALICE" and (folder / recorded[4]["file"]).name == "0004-ALICE.wav"
    assert json.loads((folder / "manifest.json").read_text())["assembly"] is not None
    page.close()


def test_an_approval_and_a_take_belong_to_their_line_not_to_every_line_that_says_the_same(tmp_path, tiny_model_dir):
    script = tmp_path / "twice.srt"
    script.write_text(
        "1\n00:00:00,500 --> 00:00:02,500\nALICE: Yes.\n\n2\n00:00:05,000 --> 00:00:07,000\nALICE: Yes.\n",
        encoding="utf-8",
    )
    out = tmp_path / "out"
    result = render(script, out)
    assert result.exit_code == 0, result.output
    desk = open_desk(out)
    try:
        do(desk, "retake", 1)
        do(desk, "approve", 1)
    finally:
        desk.close()
    again = open_desk(out)
    try:
        first, second = again.state()["lines"]
        assert first["approved"] and not second["approved"]
        assert len(first["takes"]) == 2 and len(second["takes"]) == 1  # line 2 keeps its own audio
        assert first["audio"] != second["audio"]
    finally:
        again.close()


def test_a_render_says_which_approved_lines_it_renders_again_once_their_text_changed(folder, whisper_tiny_en):
    desk = open_desk(folder)
    try:
        do(desk, "approve", 1)
        do(desk, "approve", 2)
    finally:
        desk.close()
    manifest = json.loads((folder / "manifest.json").read_text())
    script = Path(manifest["input"])
    changed = script.parent / "changed.srt"
    changed.write_text(SCENE.replace("Did you bring the map this time?", "Did you bring the new map?"))
    result = render(changed, folder, "--asr-model", whisper_tiny_en, "--allow-other-files")
    assert result.exit_code == 2 and "holds a render of" in result.stderr  # another input: refused, as ever
    new = SCENE.replace("Did you bring the map this time?", "Did you bring the new map?")
    result = render_as_changed(folder, new, "--asr-model", whisper_tiny_en)
    assert result.exit_code == 0, result.output
    assert "line(s) 1 had been approved, but render again now" in result.stderr
    recorded = lines(folder)
    assert not recorded[1]["approved"] and recorded[2]["approved"]  # line 2 is as it was approved
