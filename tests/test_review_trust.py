"""A review you can trust: a folder opens exactly as its render recorded it (never re-decided by the models at hand),
stopping never loses audio nobody changed, no other page can act, every decision names what it decided about and is
saved before it counts, and decisions follow their line when cues move."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from conftest import ROOT, another_page, serving
from test_review import HOST, SCENE, copy_of, do, lines, open_desk, render, run, segments, settle

from omnidub.errors import OmnidubError
from omnidub.review import Action

SOURCE = Path(__file__).parent / "data" / "source"


@pytest.fixture
def folder(rendered, tmp_path) -> Path:
    """A copy of the rendered and checked scene (conftest's ``rendered``)."""
    return copy_of(rendered, tmp_path)


# -- opened as rendered --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def film(tiny_model_dir, whisper_tiny_en, tmp_path_factory) -> Path:
    """A three-voice film dubbed from its source WITHOUT an ASR model, then checked by QA WITH one: the render's
    reference cuts were decided without it."""
    folder = tmp_path_factory.mktemp("film")
    preset = folder / "preset.toml"
    preset.write_text("steps = 2\n")
    out = folder / "out"
    args = ["--source", SOURCE / "scene.opus", "--source-subs", SOURCE / "original.srt", "--model", "synthetic:tiny"]
    result = run("render", SOURCE / "dub.srt", *args, "--preset", preset, "--out", out)
    assert result.exit_code == 0, result.output
    result = run("qa", out, "--asr-model", whisper_tiny_en, "--speaker-model", "none")
    assert result.exit_code in (0, 1), result.output
    return out


@pytest.mark.slow  # over 10 s on a first run (the source analysed): pytest -m slow runs it, as CI does
def test_a_review_after_qa_with_another_asr_model_opens_every_line_with_its_audio_and_delivers_it_intact(
    film, tmp_path
):
    import shutil

    folder = tmp_path / "film"
    shutil.copytree(film, folder, symlinks=True)
    before = segments(folder)
    desk = open_desk(folder)
    try:
        state = desk.state()
        assert state["counts"]["unrendered"] == 0 and all(line["audio"] and line["key"] for line in state["lines"])
        assert not any(line["missing"] for line in state["lines"])
        do(desk, "deliver")  # Deliver with nothing changed: every segment, cue and the mix's speech stay
    finally:
        desk.close()
    assert segments(folder) == before
    cues = (folder / "dub.dub.srt").read_text(encoding="utf-8")
    assert len(re.findall(r"-->", cues)) == len(before)
    import soundfile as sf

    mix, _ = sf.read(folder / "mix.wav")
    assert abs(mix).max() > 0.01
    # The dry run agrees with the page: every line cached.
    preset = film.parent / "preset.toml"
    args = ["--source", SOURCE / "scene.opus", "--source-subs", SOURCE / "original.srt", "--model", "synthetic:tiny"]
    result = run("render", SOURCE / "dub.srt", *args, "--preset", preset, "--out", folder, "--dry-run", "--json")
    assert result.exit_code == 0, result.output
    assert all(line["status"] == "cached" for line in json.loads(result.stdout)["lines"])


def test_a_line_whose_key_the_models_at_hand_would_change_keeps_the_audio_its_render_recorded(folder, monkeypatch):
    """Whatever else changed around it (a model rebuilt, another reference cut), a review shows each line as it
    was rendered, not as the things at hand would key it now."""
    import hashlib

    import omnidub.plan

    recorded = {i: line["key"] for i, line in lines(folder).items()}
    keyed = omnidub.plan.key_for
    monkeypatch.setattr(
        omnidub.plan, "key_for", lambda *a, **k: hashlib.sha256(("elsewhere" + keyed(*a, **k)).encode()).hexdigest()
    )
    desk = open_desk(folder)
    try:
        state = desk.state()
        assert all(line["audio"] and not line["missing"] for line in state["lines"])
        assert {line["index"]: line["key"] for line in state["lines"]} == recorded
    finally:
        desk.close(deliver=False)


def test_a_folder_whose_lines_were_timed_by_another_pace_model_reopens_with_the_audio_it_recorded(folder, monkeypatch):
    """A folder rendered before the pace model changed (its natural lengths, so its targets and keys, were predicted
    otherwise): a review opens every line with the audio and key its render recorded."""
    _reopens_as_recorded_under_another_pace(folder, monkeypatch)


@pytest.mark.slow  # a render of its own (about 8 s idle): pytest -m slow runs it, as CI does
def test_an_untimed_script_whose_lines_were_timed_by_another_pace_model_reopens_with_its_audio(tmp_path, monkeypatch):
    """In an untimed script every line's place follows the lengths predicted before it, so another pace model moves
    every line: the review still opens each with the audio its render recorded."""
    script = tmp_path / "scene.txt"
    script.write_text(
        "ALICE: Did you bring the map this time?\nBOB: It is in the car, under the seat.\nALICE: Then we are fine.\n"
    )
    result = render(script, tmp_path / "out")
    assert result.exit_code == 0, result.output
    _reopens_as_recorded_under_another_pace(tmp_path / "out", monkeypatch)


def _reopens_as_recorded_under_another_pace(folder: Path, monkeypatch) -> None:
    import omnidub.plan

    recorded = {i: (line["key"], line["start"]) for i, line in lines(folder).items()}
    predicted = omnidub.plan.natural_seconds
    monkeypatch.setattr(omnidub.plan, "natural_seconds", lambda *a, **k: predicted(*a, **k) * 1.3)
    desk = open_desk(folder)
    try:
        state = desk.state()
        assert all(line["audio"] and not line["missing"] for line in state["lines"]), state["lines"]
        assert {line["index"]: (line["key"], line["start"]) for line in state["lines"]} == recorded
        assert any("are as rendered" in note for note in desk.project.notes)  # the new model would have keyed them anew
    finally:
        desk.close(deliver=False)


def test_a_missing_segment_is_named_and_delivery_refuses_to_drop_it(folder):
    (folder / "segments" / sorted(segments(folder))[1]).unlink()
    from omnidub.folder import OutputFolder

    cache = OutputFolder(folder).state / "cache"
    for stored in cache.rglob("*"):
        if stored.is_file():
            stored.unlink()  # the cache lost it too: the audio is really gone
    desk = open_desk(folder)
    try:
        line = desk.state()["lines"][1]
        assert line["audio"] is None and "is gone" in line["missing"] and "segments/0002" in line["missing"]
        events = do(desk, "deliver")
        assert any(e["type"] == "error" and "drop them from the mix" in e["text"] for e in events), events
    finally:
        desk.close(deliver=False)


# -- stopping --------------------------------------------------------------------------------------------------


def test_stopping_delivers_only_what_changed(folder):
    manifest = (folder / "manifest.json").stat().st_mtime_ns
    desk = open_desk(folder)
    assert desk.close() is None  # nothing changed: nothing is assembled or written
    assert (folder / "manifest.json").stat().st_mtime_ns == manifest
    desk = open_desk(folder)
    do(desk, "approve", 1, key=desk.state()["lines"][0]["key"])
    delivery = desk.close()
    assert delivery is not None and delivery.approved == (1,) and not delivery.audio
    assert lines(folder)[1]["approved"]


REVIEW = """
import sys
from omnidub.cli import main
sys.argv = ["omnidub", "review", sys.argv[1], "--no-browser", "--speaker-model", "none"]
main()
"""


def test_ctrl_c_stops_the_server_with_an_event_stream_open_and_twice_quits_without_delivering(folder):
    import http.client

    process = subprocess.Popen(
        [sys.executable, "-c", REVIEW, str(folder)],
        cwd=ROOT,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    said = []
    try:
        url = None
        while url is None:
            row = process.stderr.readline()
            assert row, "".join(said)
            said.append(row)
            found = re.search(r"(http://127\.0\.0\.1:(\d+)/\?token=\S+)", row)
            url = found and found.groups()
        port, token = int(url[1]), url[0].split("token=")[1]
        stream = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        stream.request("GET", f"/api/events?token={token}")
        response = stream.getresponse()
        assert response.status == 200 and response.read(5)  # the page's live stream is open
        process.send_signal(signal.SIGINT)
        process.wait(timeout=60)  # a stream left open kept it up for a minute or forever; now it ends at once
        rest = process.stderr.read()
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 0, "".join(said) + rest
    assert "nothing changed" in rest and "Traceback" not in rest


# -- only the page can act -----------------------------------------------------------------------------------


def test_no_other_page_can_act_and_every_body_is_parsed_strictly(folder):
    from starlette.testclient import TestClient

    from omnidub.review.app import BODY_LIMIT, build_app

    desk = open_desk(folder)
    try:
        client = TestClient(build_app(desk, {HOST}), base_url=f"http://{HOST}")
        client.get(f"/?token={desk.token}")  # the cookie, as the page has it
        key = desk.state()["lines"][0]["key"]
        own = {"Origin": f"http://{HOST}"}
        approve = "/api/lines/1/approve"
        # Another local port is the same *site* (the cookie rides along) but another origin: refused.
        assert client.post(approve, json={"key": key}, headers={"Origin": "http://127.0.0.1:3000"}).status_code == 403
        assert client.post(approve, json={"key": key}).status_code == 403  # neither Origin nor Sec-Fetch-Site
        assert client.post(approve, json={"key": key}, headers={"Sec-Fetch-Site": "same-site"}).status_code == 403
        # A text/plain POST (a foreign page's "simple" request) is not JSON to this server.
        plain = {**own, "Content-Type": "text/plain"}
        assert client.post(approve, content=json.dumps({"key": key}), headers=plain).status_code == 415
        big = json.dumps({"key": key, "x": "a" * BODY_LIMIT})
        assert client.post(approve, content=big, headers={**own, "Content-Type": "application/json"}).status_code == 413
        nested = "[" * 10_000 + "]" * 10_000
        assert (
            client.post(approve, content=nested, headers={**own, "Content-Type": "application/json"}).status_code == 400
        )
        for wrong in (0, "no", None, 1):  # only a boolean is a boolean
            assert client.post(approve, json={"approved": wrong, "key": key}, headers=own).status_code == 400
        assert client.post(approve, json={}, headers=own).status_code == 400  # names no audio
        assert client.post("/api/approve", json={"key": key}, headers=own).status_code == 400  # names no line
        assert client.post(approve, json={"key": key, "extra": 1}, headers=own).status_code == 400
        assert not desk.state()["lines"][0]["approved"]
        assert client.post(approve, json={"key": key}, headers={"Sec-Fetch-Site": "same-origin"}).status_code == 202
        settle(desk)
        assert desk.state()["lines"][0]["approved"]
        assert client.get("/favicon.ico").status_code == 204  # no 404 in the page's console
    finally:
        desk.close(deliver=False)


# -- every decision names what it decided about -----------------------------------------------------------------


def test_an_approval_behind_a_retake_is_refused_not_given_to_the_take_nobody_heard(folder):
    desk = open_desk(folder)
    try:
        heard = desk.state()["lines"][2]["key"]
        events: list[dict] = []
        stop = desk.subscribe(events.append)
        desk.submit(Action("retake", 3))
        desk.submit(Action("approve", 3, {"approved": True, "key": heard}))  # pressed while the take renders
        desk.submit(Action("edit", 3, {"max_speedup": 1.5}))
        settle(desk)
        stop()
        line = desk.state()["lines"][2]
        assert not line["approved"] and line["key"] != heard
        assert any(e["type"] == "error" and "changed since you heard it" in e["text"] for e in events), events
    finally:
        desk.close(deliver=False)


def test_a_stale_tabs_edit_is_refused(folder):
    desk = open_desk(folder)
    try:
        was = desk.state()["lines"][2]["text"]
        do(desk, "edit", 3, text="Then we are never lost.", was=was)
        with pytest.raises(OmnidubError, match="changed since you read it"):
            desk.submit(Action("edit", 3, {"text": "Then we are found.", "was": was}))  # the other tab's
        assert desk.state()["lines"][2]["text"] == "Then we are never lost."
    finally:
        desk.close(deliver=False)


def test_a_decision_whose_save_fails_changes_nothing(folder, monkeypatch):
    import errno

    from omnidub.files import cannot_write

    desk = open_desk(folder)
    try:
        full = OSError(errno.ENOSPC, "No space left on device")

        def no_space(entry):
            raise cannot_write(folder / ".omnidub" / "journal.jsonl", full)

        monkeypatch.setattr(desk.project.journal, "append", no_space)
        events = do(desk, "approve", 1, key=desk.state()["lines"][0]["key"])
        events += do(desk, "edit", 2, text="It is in the boot.", was=desk.state()["lines"][1]["text"])
        assert sum(e["type"] == "error" and "no space left" in e["text"] for e in events) == 2, events
        assert not desk.state()["lines"][0]["approved"] and desk.state()["lines"][1]["text"] != "It is in the boot."
        monkeypatch.undo()  # the space is free again
        do(desk, "deliver")
    finally:
        desk.close(deliver=False)
    assert not lines(folder)[1]["approved"] and lines(folder)[2]["text"] == "It is in the car, under the seat."


def test_a_retake_of_a_hand_edited_segment_moves_the_edit_aside_and_uses_the_take_everywhere(folder):
    import soundfile as sf

    name = sorted(segments(folder))[2]
    path = folder / "segments" / name
    audio, rate = sf.read(path)
    sf.write(path, audio * 0.5, rate)  # an editor's hand edit
    desk = open_desk(folder)
    try:
        assert "edited" in desk.state()["lines"][2]["flags"]
        events = do(desk, "retake", 3)
        assert any(e["type"] == "note" and "moved to" in e["text"] for e in events), events
        do(desk, "deliver")
    finally:
        desk.close(deliver=False)
    import hashlib

    line = lines(folder)[3]
    assert "edited" not in line["flags"]
    assert hashlib.sha256(path.read_bytes()).hexdigest() == line["sha256"]  # the segment is the take
    kept = [p.name for p in (folder / "segments").glob(f"{Path(name).stem}.edited-*.wav")]
    assert kept, "the hand edit was not kept"


# -- decisions follow their line ---------------------------------------------------------------------------------


def test_edits_moves_and_approvals_follow_their_line_when_cues_are_inserted_and_deleted_above(folder, whisper_tiny_en):
    desk = open_desk(folder)
    try:
        state = desk.state()["lines"]
        do(desk, "edit", 3, text="Then we are never lost.", was=state[2]["text"])
        do(desk, "edit", 4, speaker="ALICE")
        do(desk, "approve", 2, key=desk.state()["lines"][1]["key"])
    finally:
        desk.close()
    script = Path(json.loads((folder / "manifest.json").read_text())["input"])
    inserted = "1\n00:00:00,000 --> 00:00:00,400\nBOB: Hm.\n\n" + re.sub(
        r"^(\d+)$", lambda m: str(int(m.group(1)) + 1), SCENE, flags=re.M
    )
    script.write_text(inserted)
    try:
        result = render(script, folder, "--asr-model", whisper_tiny_en)
        assert result.exit_code == 0, result.output
        moved = lines(folder)
        assert moved[3]["approved"] and moved[3]["text"] == "It is in the car, under the seat."
        assert (
            moved[4]["text"] == "Then we are never lost." and moved[4]["edit"]["from"] == "Then we are not lost at all."
        )
        assert moved[5]["speaker"] == "ALICE" and moved[5]["text"] == "We never were."
        assert "moved" in result.output
        script.write_text(SCENE)  # and the cue deleted again
        result = render(script, folder, "--asr-model", whisper_tiny_en)
        assert result.exit_code == 0, result.output
        back = lines(folder)
        assert back[2]["approved"] and back[3]["text"] == "Then we are never lost." and back[4]["speaker"] == "ALICE"
    finally:
        script.write_text(SCENE)


def test_follow_aligns_lines_by_text_and_keeps_a_changed_line_in_its_place():
    from omnidub.script import follow

    before = [(1, "a", 0, 1), (2, "b", 1, 2), (3, "c", 2, 3), (4, "d", 3, 4)]
    now = [(1, "new", 0, 0.5), (2, "a", 0, 1), (3, "b", 1, 2), (4, "C!", 2, 3), (5, "d", 3, 4)]
    assert follow(before, now) == {1: 2, 2: 3, 3: 4, 4: 5}
    assert follow(before, [(1, "b", 1, 2), (2, "d", 3, 4)]) == {2: 1, 4: 2}


# -- dead ends ---------------------------------------------------------------------------------------------------


def test_a_truncated_manifest_says_how_to_repair_and_the_render_that_repairs_it_keeps_the_approvals(
    folder, whisper_tiny_en
):
    script = Path(json.loads((folder / "manifest.json").read_text())["input"])
    desk = open_desk(folder)
    do(desk, "approve", 1, key=desk.state()["lines"][0]["key"])
    desk.close(deliver=False)  # the approval is in the journal only
    manifest = folder / "manifest.json"
    manifest.write_text(manifest.read_text()[:200])  # a full disk cut it short
    result = run("review", folder, "--no-browser")
    assert result.exit_code == 2 and "damaged" in result.stderr and "--out" in result.stderr, result.output
    result = render(script, folder, "--asr-model", whisper_tiny_en)  # the repair it names: the same render again
    assert result.exit_code == 0, result.output
    assert lines(folder)[1]["approved"]
    assert list(folder.glob("manifest.changed-*.json"))  # the damaged one moved aside, not lost


def test_review_during_a_first_render_says_the_folder_is_in_use(tmp_path):
    from omnidub.folder import OutputFolder

    out = tmp_path / "out"
    busy = OutputFolder(out)
    busy.claim(None, doing="omnidub render scene.srt")
    try:
        result = run("review", out, "--no-browser")
        assert result.exit_code == 2 and "in use" in result.stderr and "holds no render" not in result.stderr
    finally:
        busy.release()


# -- a hostile page, in a real browser ---------------------------------------------------------------------------

HOSTILE = """<!doctype html><title>another local app</title><body><form id="f" method="post"
action="{review}/api/lines/1/approve" enctype="text/plain"><input name='{{"key":"{key}","x":"' value='"}}'></form>
<script>
const payload = JSON.stringify({{key: "{key}"}});
Promise.allSettled([
  fetch("{review}/api/lines/1/approve", {{method: "POST", mode: "no-cors", credentials: "include",
                                          headers: {{"Content-Type": "text/plain"}}, body: payload}}),
  fetch("{review}/api/lines/3/edit", {{method: "POST", credentials: "include",
                                       headers: {{"Content-Type": "application/json"}},
                                       body: JSON.stringify({{text: "Hacked.", was: "{was}"}})}}),
]).then(() => {{ document.title = "sent"; document.getElementById("f").submit(); }});
</script>"""


@pytest.mark.skipif(not Path("/usr/bin/chromium").exists(), reason="needs Debian's chromium (apt-get install chromium)")
def test_a_page_on_another_local_port_cannot_change_anything_even_with_the_cookie(folder):
    playwright = pytest.importorskip("playwright.sync_api")
    desk = open_desk(folder)
    with contextlib.ExitStack() as cleanup:
        cleanup.callback(desk.close, deliver=False)
        url, _ = cleanup.enter_context(serving(desk))
        review = url.split("/?")[0]
        line = desk.state()["lines"]
        hostile = HOSTILE.format(review=review, key=line[0]["key"], was=line[2]["text"]).encode()

        elsewhere = cleanup.enter_context(another_page(hostile))
        with playwright.sync_playwright() as p:
            browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox", "--disable-gpu"])
            context = browser.new_context()
            page = context.new_page()
            page.goto(url)  # the editor's tab: the cookie is set for 127.0.0.1
            page.wait_for_selector("body[data-ready=true]")
            evil = context.new_page()
            evil.goto(elsewhere)
            # Its requests settle, then its form posts: the navigation lands on the server's refusal.
            evil.wait_for_url(re.compile(r"/api/lines/1/approve$"), timeout=60_000)
            assert "403" in evil.content()
            browser.close()
        settle(desk)
        state = desk.state()["lines"]
        assert not state[0]["approved"] and state[2]["text"] == line[2]["text"]


# -- every route the page calls, as the page calls it ------------------------------------------------------------

PAGE = Path(__file__).parent.parent / "omnidub" / "review" / "page" / "review.js"
BODIES = {"approve": {"approved": True, "key": "k"}, "edit": {"text": "x", "was": "y"}, "choose": {"take": 1}}
BODIES |= {"mark": {"note": "n"}, "voice": {"voice": "speaker", "speaker": "BOB"}}


class Recorder:
    """A stand-in desk that records what the routes hand it."""

    token = "t" * 32
    closing = threading.Event()

    def __init__(self):
        self.submitted: list[Action] = []
        self.cancelled = 0

    def submit(self, action: Action) -> None:
        self.submitted.append(action)

    def cancel(self) -> None:
        self.cancelled += 1

    def status(self) -> dict:
        return {"busy": None, "queued": len(self.submitted)}


def test_every_action_the_page_sends_reaches_the_desk_as_that_action():
    from starlette.testclient import TestClient

    from omnidub.editor import VERBS
    from omnidub.review.app import build_app

    script = PAGE.read_text(encoding="utf-8")
    folder_wide = set(re.findall(r'post\("/api/([\w-]+)"', script))
    per_line = set(re.findall(r'lineAction\([^,()]+, "([\w-]+)"', script))
    assert {"cancel", "undo", "deliver", "retake-failed", "approve-passed"} <= folder_wide
    assert {"approve", "retake", "render", "edit", "choose", "mark", "translate", "undo", "voice"} <= per_line
    desk = Recorder()
    client = TestClient(build_app(desk, {HOST}), base_url=f"http://{HOST}")
    page = {"Origin": f"http://{HOST}", "Cookie": f"omnidub_review={desk.token}"}
    for verb in sorted(folder_wide):
        assert client.post(f"/api/{verb}", json={}, headers=page).status_code == 202, verb
    for verb in sorted(per_line):
        assert client.post(f"/api/lines/3/{verb}", json=BODIES.get(verb, {}), headers=page).status_code == 202, verb
    # Cancel acts at once (it is not queued behind what it cancels); everything else is an editor's verb.
    assert desk.cancelled == 1 and "cancel" not in {a.kind for a in desk.submitted}
    assert {a.kind for a in desk.submitted} == (folder_wide - {"cancel"}) | per_line <= set(VERBS)
    assert all(a.index == 3 for a in desk.submitted if a.kind in per_line - folder_wide)


def test_cancel_through_its_route_answers_at_once(folder):
    from starlette.testclient import TestClient

    from omnidub.review.app import build_app

    desk = open_desk(folder)
    try:
        client = TestClient(build_app(desk, {HOST}), base_url=f"http://{HOST}")
        client.get(f"/?token={desk.token}")
        answer = client.post("/api/cancel", json={}, headers={"Origin": f"http://{HOST}"})
        assert answer.status_code == 202 and answer.json()["cancelled"] is True
    finally:
        desk.close(deliver=False)


def test_text_that_is_not_utf8_is_refused_before_it_is_queued(folder):
    from starlette.testclient import TestClient

    from omnidub.review.app import build_app

    desk = open_desk(folder)
    try:
        client = TestClient(build_app(desk, {HOST}), base_url=f"http://{HOST}")
        client.get(f"/?token={desk.token}")
        was = desk.state()["lines"][2]["text"]
        body = '{"text": "Then we are \\ud800 lost.", "was": %s}' % json.dumps(
            was
        )  # a lone surrogate, as JSON sends it
        headers = {"Origin": f"http://{HOST}", "Content-Type": "application/json"}
        answer = client.post("/api/lines/3/edit", content=body.encode(), headers=headers)
        assert answer.status_code == 400 and "lone surrogate" in answer.json()["error"]
        note = '{"note": "\\udfff"}'
        assert client.post("/api/lines/3/mark", content=note.encode(), headers=headers).status_code == 400
        assert desk.status() == {"busy": None, "queued": 0}
        assert desk.state()["lines"][2]["text"] == was and desk.state()["lines"][2]["note"] is None
    finally:
        desk.close(deliver=False)


def test_a_speaker_move_from_a_stale_tab_is_refused(folder):
    from starlette.testclient import TestClient

    from omnidub.review.app import build_app

    desk = open_desk(folder)
    try:
        client = TestClient(build_app(desk, {HOST}), base_url=f"http://{HOST}")
        client.get(f"/?token={desk.token}")
        own = {"Origin": f"http://{HOST}"}
        move = {"speaker": "BOB", "was_speaker": "ALICE"}
        assert client.post("/api/lines/3/edit", json=move, headers=own).status_code == 202  # one tab
        settle(desk)
        stale = client.post("/api/lines/3/edit", json=move, headers=own)  # the other, which still shows ALICE
        assert stale.status_code == 409 and "it is BOB's now" in stale.json()["error"]
        assert client.post("/api/lines/3/edit", json={"speaker": "ALICE"}, headers=own).status_code == 400
    finally:
        desk.close(deliver=False)


def test_audio_and_files_play_only_to_the_page_itself(folder):
    from starlette.testclient import TestClient

    from omnidub.review.app import build_app

    desk = open_desk(folder)
    try:
        client = TestClient(build_app(desk, {HOST}), base_url=f"http://{HOST}")
        client.get(f"/?token={desk.token}")  # the cookie rides along on every port of the host, as a browser's does
        for path in ("/media/line/1", "/media/mix", "/context/1", "/files/manifest.json", "/media/take/1/1"):
            # A page on another local port: the same site, another origin. Its <audio> would play what it asked for.
            assert client.get(path, headers={"Sec-Fetch-Site": "same-site"}).status_code == 403, path
            assert client.get(path, headers={"Sec-Fetch-Site": "cross-site"}).status_code == 403, path
            assert client.get(path).status_code == 403, path  # no browser's word on where it came from
            assert client.get(path, headers={"Sec-Fetch-Site": "same-origin"}).status_code == 200, path
            assert client.get(f"{path}?token={desk.token}").status_code == 200, path  # a player given the address
        # The state is no audio: it stays readable with the cookie alone (no CORS header lets another page read it).
        assert client.get("/api/state", headers={"Sec-Fetch-Site": "same-site"}).status_code == 200
    finally:
        desk.close(deliver=False)


def test_undo_takes_back_the_last_decision_of_the_line_asked_for_notes_and_flags_too(folder):
    from starlette.testclient import TestClient

    from omnidub.review.app import build_app

    desk = open_desk(folder)
    events: list[dict] = []
    stop = desk.subscribe(events.append)
    try:
        client = TestClient(build_app(desk, {HOST}), base_url=f"http://{HOST}")
        client.get(f"/?token={desk.token}")
        own = {"Origin": f"http://{HOST}"}
        keys = [line["key"] for line in desk.state()["lines"]]
        for n in (1, 2):
            assert client.post(f"/api/lines/{n}/approve", json={"key": keys[n - 1]}, headers=own).status_code == 202
        assert (
            client.post("/api/lines/3/mark", json={"note": "softer", "look_again": True}, headers=own).status_code
            == 202
        )
        settle(desk)
        assert client.post("/api/lines/1/undo", json={}, headers=own).status_code == 202  # line 1's, not line 3's
        settle(desk)
        state = desk.state()["lines"]
        assert not state[0]["approved"] and state[1]["approved"] and state[2]["note"] == "softer"
        assert {"type": "note", "text": "undone on line 1: approving line 1"} in events
        assert client.post("/api/lines/3/undo", json={}, headers=own).status_code == 202
        settle(desk)
        state = desk.state()["lines"]
        assert (state[2]["note"], state[2]["look_again"]) == (None, False)
        assert {"type": "note", "text": "undone on line 3: a note or flag on line 3"} in events
        assert client.post("/api/lines/3/undo", json={}, headers=own).status_code == 202
        settle(desk)
        assert {"type": "error", "index": 3, "text": "nothing to undo on line 3"} in events
    finally:
        stop()
        desk.close(deliver=False)


def test_review_of_a_dub_folder_names_its_render_folder(rendered, tmp_path):
    import shutil

    dub = tmp_path / "dub" / "scene"
    shutil.copytree(rendered, dub / "render", symlinks=True)
    result = run("review", dub, "--no-browser")
    assert result.exit_code == 2 and f"omnidub review {dub / 'render'}" in result.stderr, result.output
