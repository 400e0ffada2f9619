"""Every stop of a review delivers what was done: a real ``omnidub review`` process told Ctrl-C while an edit
renders, while it retakes every failed line, and while the page waits for a line in context; a review killed with
-9 early in a delivery, then opened and stopped again. Each drives the server over HTTP, as the page does."""

from __future__ import annotations

import hashlib
import http.client
import json
import os
import queue
import re
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
from conftest import ROOT
from test_review import SCENE, copy_of, lines, render

# A real omnidub review, with a render that takes SLOW seconds more (a slower machine's, so that a stop surely
# comes while it is in flight) and, with "slow-context", a line in context that takes minutes to make (a long bed
# decoding).
REVIEW = """
import sys, time
import omnidub.job as job
slow = float(sys.argv[2])
for name in ("render_pending", "render_takes"):
    real = getattr(job.Job, name)
    def patched(self, *args, _real=real, **kwargs):
        time.sleep(slow)
        return _real(self, *args, **kwargs)
    setattr(job.Job, name, patched)
if sys.argv[3] == "slow-context":
    from omnidub.review.desk import Review
    Review.context = lambda *args, **kwargs: time.sleep(600)
from omnidub.cli import main
sys.argv = ["omnidub", "review", sys.argv[1], "--no-browser", "--speaker-model", "none"]
main()
"""


@pytest.fixture(scope="module")
def bedded(tmp_path_factory, tiny_model_dir, whisper_tiny_en) -> Path:
    """The scene rendered over a bed and checked by QA (tiny.en fails the noise the random weights speak)."""
    import numpy as np
    import soundfile as sf

    folder = tmp_path_factory.mktemp("bedded")
    sf.write(folder / "bed.wav", np.random.default_rng(0).normal(0, 0.05, (24000 * 12, 2)).astype(np.float32), 24000)
    (folder / "scene.srt").write_text(SCENE, encoding="utf-8")
    out = folder / "out"
    args = ("--bed", folder / "bed.wav", "--asr-model", whisper_tiny_en, "--qa", "--speaker-model", "none")
    result = render(folder / "scene.srt", out, *args)
    assert result.exit_code in (0, 1), result.output
    return out


@pytest.fixture
def folder(bedded, tmp_path) -> Path:
    return copy_of(bedded, tmp_path)


class Server:
    """A real omnidub review process over ``folder``: its address, its events, and what it said on stderr. Every
    one started is killed when the test ends, whatever happened (see ``servers``)."""

    started: list[subprocess.Popen] = []

    def __init__(self, folder: Path, slow: float = 0.0, context: str = "context"):
        self.process = subprocess.Popen(
            [sys.executable, "-c", REVIEW, str(folder), str(slow), context],
            cwd=ROOT,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "OMP_NUM_THREADS": "1"},
        )
        Server.started.append(self.process)
        self.said: list[str] = []
        while True:
            row = self.process.stderr.readline()
            assert row, "".join(self.said)
            self.said.append(row)
            found = re.search(r"http://127\.0\.0\.1:(\d+)/\?token=(\S+)", row)
            if found:
                self.port, self.token = int(found.group(1)), found.group(2)
                break
        self.events: queue.Queue = queue.Queue()
        listening = threading.Event()
        threading.Thread(target=self._listen, args=(listening,), daemon=True).start()
        assert listening.wait(60), "the event stream never opened"

    def _listen(self, listening: threading.Event) -> None:
        stream = http.client.HTTPConnection("127.0.0.1", self.port, timeout=600)
        try:
            stream.request("GET", f"/api/events?token={self.token}")
            response = stream.getresponse()  # its headers come once the stream is subscribed
            listening.set()
            for raw in response:
                if raw.startswith(b"data: "):
                    self.events.put(json.loads(raw[6:]))
        except OSError:
            pass  # the server stopped

    def post(self, path: str, body: dict | None = None) -> int:
        """A POST as the page sends it (its origin, JSON); returns the status."""
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        headers = {"Origin": f"http://127.0.0.1:{self.port}", "Content-Type": "application/json"}
        connection.request("POST", f"{path}?token={self.token}", json.dumps(body or {}), headers)
        return connection.getresponse().status

    def wait_for(self, test, timeout: float = 120.0) -> dict:
        """The first event that passes ``test``."""
        end = time.monotonic() + timeout
        while True:
            event = self.events.get(timeout=max(0.1, end - time.monotonic()))
            if test(event):
                return event

    def interrupt(self, timeout: float = 180.0) -> str:
        """Ctrl-C, then what it said until it ended."""
        self.process.send_signal(signal.SIGINT)
        try:
            rest = self.process.communicate(timeout=timeout)[1]
        finally:
            if self.process.poll() is None:
                self.process.kill()
        return "".join(self.said) + rest


@pytest.fixture(autouse=True)
def servers():
    """No server outlives its test (a test that fails before its Ctrl-C leaves none running)."""
    yield
    while Server.started:
        process = Server.started.pop()
        if process.poll() is None:
            process.kill()
            process.wait(30)


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.slow  # a real server process, a model and an edit rendered: about 20 s
def test_ctrl_c_while_an_edit_renders_delivers_the_edit_in_the_subtitles_and_the_mix(folder):
    mix = sha(folder / "mix-bed.wav")
    server = Server(folder, slow=4.0)
    assert server.post("/api/lines/3/edit", {"text": "Then we are never lost.", "was": lines(folder)[3]["text"]}) == 202
    server.wait_for(lambda e: e["type"] == "status" and str(e.get("busy")).startswith("rendering the edit of line 3"))
    said = server.interrupt()
    assert server.process.returncode == 0, said
    # The edit in flight was finished, then delivered: the stop never says nothing changed.
    assert "nothing changed" not in said and "delivered" in said and "Traceback" not in said, said
    assert re.search(r"delivered 1 line\(s\) changed since the last delivery: new audio on 1 \(3\); edits on 1", said)
    assert "Then we are never lost." in (folder / "scene.dub.srt").read_text(encoding="utf-8")
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["assembly"] is not None and lines(folder)[3]["text"] == "Then we are never lost."
    assert sha(folder / "mix-bed.wav") != mix


@pytest.mark.slow  # a real server process and two retakes: about 20 s
def test_ctrl_c_during_retake_every_failed_line_stops_at_the_next_line(folder):
    qa = {line["index"]: line["verdict"] for line in json.loads((folder / "qa.json").read_text())["lines"]}
    failed = [i for i in sorted(qa) if qa[i] == "failed"]
    assert len(failed) >= 3, "tiny.en fails the noise the random weights speak"
    server = Server(folder, slow=3.0)
    assert server.post("/api/retake-failed") == 202
    server.wait_for(lambda e: e["type"] == "status" and f"(1 of {len(failed)} failed lines)" in str(e.get("busy")))
    said = server.interrupt()
    assert server.process.returncode == 0, said
    retaken = [i for i, line in lines(folder).items() if len(line["attempts"]) > 1]
    assert retaken == failed[:1], said  # the retake in flight was finished; the others never started
    assert f"cancelled after 1 of {len(failed)} retakes" in said and "delivered" in said, said


def test_ctrl_c_while_the_page_waits_for_a_line_in_context_ends_at_once_without_a_traceback(rendered, tmp_path):
    server = Server(copy_of(rendered, tmp_path), context="slow-context")  # a context takes ten minutes to make
    answer: list[int] = []

    def listen() -> None:
        connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=600)
        connection.request("GET", f"/context/1?token={server.token}")
        try:
            answer.append(connection.getresponse().status)
        except OSError:
            answer.append(0)

    threading.Thread(target=listen, daemon=True).start()
    time.sleep(1.0)  # the context is being made: the bed is decoding
    said = server.interrupt(timeout=30)  # it used to wait for the decode (minutes), then print a CancelledError
    assert server.process.returncode == 0, said
    assert "Traceback" not in said and "CancelledError" not in said, said
    assert "nothing changed" in said


KILLED_IN_A_DELIVERY = """
import os, signal, sys
from omnidub.api import Session
from omnidub.review import Action, Review

session, project = Session.reopen(sys.argv[1])
desk = Review(session, project, speaker_model="none")
desk.open()
def listen(event):
    if event["type"] == "progress" and event["text"] == "assembling stems and mix":
        os.kill(os.getpid(), signal.SIGKILL)  # early in the delivery: before any output is written
desk.subscribe(listen)
desk.submit(Action("edit", 3, {"text": "Then we are never lost."}))
desk.submit(Action("deliver"))
import time
time.sleep(300)  # killed long before this
sys.exit(3)
"""


@pytest.mark.slow  # two real processes, a model and an edit rendered: about 25 s
def test_a_delivery_killed_early_is_finished_by_the_next_review(folder):
    killed = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(KILLED_IN_A_DELIVERY), str(folder)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
        timeout=300,
    )
    assert killed.returncode == -9, killed.stderr
    assert "Then we are never lost." not in (folder / "scene.dub.srt").read_text(encoding="utf-8")
    server = Server(folder)
    said = server.interrupt()
    assert server.process.returncode == 0, said
    assert "nothing changed" not in said and "delivered" in said, said
    assert "Then we are never lost." in (folder / "scene.dub.srt").read_text(encoding="utf-8")
    assert json.loads((folder / "manifest.json").read_text())["assembly"] is not None
