# ruff: noqa: F811 - the fixtures imported from test_review are the tests' arguments
"""What the review plays, as the page reaches it: the source and the bed decoded in the background (the page's
actions answered meanwhile, its players answered at once and played once ready), byte ranges on a line's own
original and its context, and the programme as the lines stand, heard without a delivery."""

from __future__ import annotations

import contextlib
import io
import re
import shutil
import threading
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
from conftest import serving
from test_review import CHROMIUM, browser, do, open_desk, run  # noqa: F401 - fixtures
from test_review_page import fetched, opened, rows

needs_chromium = pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's chromium (apt-get install chromium)")
SOURCE = Path(__file__).parent / "data" / "source"


def serve_copy(rendered: Path, tmp_path: Path):
    """A copy of a rendered folder under review on a free loopback port: (desk, url, folder, stop)."""
    folder = tmp_path / "out"
    shutil.copytree(rendered, folder, symlinks=True)
    desk = open_desk(folder)
    server = contextlib.ExitStack()
    url, _ = server.enter_context(serving(desk))

    def stopped():
        server.close()
        desk.close(deliver=False)

    return desk, url, folder, stopped


def ranged(page, path: str, first: int, last: int) -> dict:
    """A read of bytes ``first`` to ``last`` as the page's own player makes it: status, Content-Range and bytes."""
    return page.evaluate(
        """async ([path, range]) => {
          const r = await fetch(path, {headers: {Range: range}});
          return {status: r.status, range: r.headers.get("content-range"),
                  bytes: Array.from(new Uint8Array(await r.arrayBuffer()))};
        }""",
        [path, f"bytes={first}-{last}"],
    )


def noting_plays(page) -> None:
    """Keep, in the page, the name of every player that starts playing: a short clip played through is paused
    again at its end, before a busy machine's test may look at it."""
    page.evaluate(
        """() => { window.played = [];
                   document.addEventListener("playing", (e) => window.played.push(e.target.getAttribute("aria-label")),
                                             true); }"""
    )


def expect_played(page, label: str) -> None:
    """``label`` started playing (within a minute: a loaded machine answers late); if not, what the page showed."""
    from playwright.sync_api import TimeoutError as Late

    try:
        page.wait_for_function("(label) => window.played.includes(label)", arg=label, timeout=60_000)
    except Late:
        seen = page.evaluate(
            """(label) => {
              const a = document.querySelector('audio[aria-label="' + label + '"]');
              return {played: window.played, status: document.getElementById("status").textContent,
                      player: a && [a.paused, a.error && a.error.code, a.networkState, a.readyState]};
            }""",
            label,
        )
        raise AssertionError(f"{label} never played: {seen}") from None


def whole(page, path: str) -> bytes:
    return bytes(
        page.evaluate("async (path) => Array.from(new Uint8Array(await (await fetch(path)).arrayBuffer()))", path)
    )


@pytest.fixture(scope="session")
def sourced(tmp_path_factory, tiny_model_dir, whisper_tiny_en) -> Path:
    """The source scene's Spanish dub rendered with its voices cloned from the source (scene.opus), once a session."""
    folder = tmp_path_factory.mktemp("sourced")
    (folder / "preset.toml").write_text("steps = 2\n")
    result = run(
        "render", SOURCE / "dub.srt", "--source", SOURCE / "scene.opus", "--source-subs", SOURCE / "original.srt",
        "--model", "synthetic:tiny", "--asr-model", whisper_tiny_en, "--preset", folder / "preset.toml",
        "--voice-match", "speaker", "--out", folder / "out",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    return folder / "out"


@pytest.fixture
def slow_decoding(monkeypatch):
    """Decoding the source waits until the test lets it go (set the event); yields the event and the decodes
    that finished."""
    from omnidub.review import previews

    gate, finished, decode = threading.Event(), [], previews.decoded

    def waiting(path):
        assert gate.wait(120)
        found = decode(path)
        finished.append(path)
        return found

    monkeypatch.setattr(previews, "decoded", waiting)
    yield gate, finished
    gate.set()


@needs_chromium
@pytest.mark.slow  # over 10 s on a first run (the source analysed)
def test_the_first_ten_approvals_are_answered_while_the_source_is_still_decoding(
    sourced, tmp_path, browser, slow_decoding
):
    from playwright.sync_api import expect

    gate, finished = slow_decoding
    desk, url, _, stop = serve_copy(sourced, tmp_path)
    try:
        page = opened(browser, url)
        noting_plays(page)
        # A line's own original asked for now is answered at once: not yet, and when to ask again.
        early = page.evaluate("async () => { const r = await fetch('/own-original/1'); "
                              "return [r.status, r.headers.get('retry-after')]; }")  # fmt: skip
        assert early == [503, "2"]
        for n in range(1, 11):
            rows(page).get_by_role("option", name=re.compile(rf"^Line {n}, ")).click()
            page.get_by_role("listbox", name="Lines").focus()
            # Its context, the mix, its original, then the approval; the last line's original is the one left to
            # hear (the mix asked for after the context takes its place).
            for key in ("c", "m", "o", "a") if n == 10 else ("o", "c", "m", "a"):
                page.keyboard.press(key)
            expect(page.get_by_role("button", name=f"Approve line {n}", exact=True)).to_have_attribute(
                "aria-pressed", "true"
            )
        assert sum(line["approved"] for line in desk.state()["lines"]) == 10
        assert not finished and not desk.state()["media_ready"]  # every answer came while the source was decoding
        # Once decoded, the original asked for (line 10's) plays: the page asked again when the desk said so.
        gate.set()
        assert desk.previews.ready.wait(180)  # decoding the rest takes a while on a loaded machine
        expect_played(page, "Original of line 10")
        page.close()
    finally:
        stop()


@needs_chromium
@pytest.mark.slow  # over 10 s on a first run (the source analysed)
def test_an_original_whose_refusal_arrives_after_the_source_is_decoded_is_asked_for_again_and_plays(
    sourced, tmp_path, browser, slow_decoding
):
    """A busy machine: the desk's 503 for line 4's original reaches the player only after the page heard that the
    source is decoded. The page asks again and plays it, rather than waiting for a word already said."""
    from playwright.sync_api import expect

    gate, _ = slow_decoding
    desk, url, _, stop = serve_copy(sourced, tmp_path)
    said, ready = threading.Event(), desk.previews.on_ready

    def on_ready(what):
        ready(what)
        if what == "all":
            said.set()

    desk.previews.on_ready = on_ready
    held = []

    def hold(route):
        if held:
            route.continue_()
        else:
            held.append(route)  # the first ask, answered below

    try:
        page = opened(browser, url)
        noting_plays(page)
        page.route(re.compile(r"/own-original/4$"), hold)
        rows(page).get_by_role("option", name=re.compile(r"^Line 4, ")).click()
        page.get_by_role("listbox", name="Lines").focus()
        page.keyboard.press("o")
        for _ in range(400):
            if held:
                break
            page.wait_for_timeout(50)
        assert held, "the page never asked for line 4's original"
        gate.set()
        assert said.wait(120)
        # An approval made after the desk said so: once the page shows it, it has had the word that went before.
        page.keyboard.press("a")
        expect(page.get_by_role("button", name="Approve line 4", exact=True)).to_have_attribute("aria-pressed", "true")
        held[0].fulfill(status=503, headers={"Retry-After": "2"}, body="the source is being decoded\n")
        expect_played(page, "Original of line 4")
        page.close()
    finally:
        stop()


@needs_chromium
@pytest.mark.slow  # over 10 s on a first run (the source analysed)
def test_an_own_original_and_a_context_are_served_in_byte_ranges_and_the_original_is_in_the_programme(
    sourced, tmp_path, browser
):
    from omnidub.script import read_script
    from omnidub.source.audio import CLIP_RATE, read_source

    desk, url, folder, stop = serve_copy(sourced, tmp_path)
    try:
        assert desk.previews.ready.wait(120)
        page = opened(browser, url)
        original = {line.index: line for line in read_script(SOURCE / "original.srt").lines}
        source = read_source(SOURCE / "scene.opus", CLIP_RATE)
        full = whole(page, "/own-original/3")
        heard, rate = sf.read(io.BytesIO(full), dtype="float32")
        own = source.cut(original[3].start, original[3].end)
        assert rate == CLIP_RATE and heard.size == own.size and np.abs(heard - own).max() < 1e-3
        for path in ("/own-original/3", "/context/3"):
            size = len(whole(page, path))
            for first, last in ((0, 99), (1000, 4999), (size - 10, size + 50)):
                piece = ranged(page, path, first, last)
                end = min(last, size - 1)
                assert piece["status"] == 206 and piece["range"] == f"bytes {first}-{end}/{size}", (path, piece)
                assert bytes(piece["bytes"]) == whole(page, path)[first : end + 1]
            assert ranged(page, path, size, size + 10)["status"] == 416
        # The programme with the source's own audio and without the dub is the source itself.
        line = next(x for x in desk.state()["lines"] if x["index"] == 3)
        start, end = line["start"], line["end"]
        mixed = whole(page, f"/programme?start={start}&end={end}&dub=0&original=1&bed=0")
        heard, _ = sf.read(io.BytesIO(mixed), dtype="float32")
        assert np.abs(heard - source.cut(start, end)[: heard.size]).max() < 1e-3
        page.close()
    finally:
        stop()


def test_the_programme_holds_a_retake_at_once_without_a_delivery(rendered, tmp_path):
    """GET /programme over a line's span, as the page's mix player asks for it, before and after a retake."""
    import json

    from starlette.testclient import TestClient

    from omnidub.review.app import build_app

    folder = tmp_path / "out"
    shutil.copytree(rendered, folder, symlinks=True)
    desk = open_desk(folder)
    try:
        client = TestClient(build_app(desk, {"testserver"}), cookies={"omnidub_review": desk.token})
        page = {"Sec-Fetch-Site": "same-origin"}  # what the page's own player sends, with the page's cookie
        line = next(x for x in desk.state()["lines"] if x["index"] == 2)
        span = f"/programme?start={line['start'] - 1}&end={line['end'] + 1}&dub=1&original=0&bed=1"
        segment = folder / "segments" / "0002-BOB.wav"
        mix = (folder / "mix.wav").read_bytes()

        gain = 10 ** (json.loads((folder / "manifest.json").read_text())["loudness"]["mix"]["gain"] / 20)

        def distance(audio: bytes, wav: Path) -> float:
            """How far the programme, where the line plays, is from the segment at the mix's loudness gain."""
            heard, rate = sf.read(io.BytesIO(audio), dtype="float32")
            samples, _ = sf.read(str(wav), dtype="float32")
            piece = heard[int(round(rate)) :][: samples.size]  # the line starts one second in
            return float(np.abs(piece - gain * samples[: piece.size]).mean())

        (tmp_path / "first.wav").write_bytes(segment.read_bytes())
        before = client.get(span, headers=page)
        assert before.status_code == 200 and before.headers["content-type"] == "audio/wav"
        do(desk, "retake", 2)
        after = client.get(span, headers=page)
        assert after.status_code == 200 and after.content != before.content
        now, first = distance(after.content, segment), distance(after.content, tmp_path / "first.wav")
        assert now < first / 5 and distance(before.content, tmp_path / "first.wav") < first / 5, (now, first)
        assert (folder / "mix.wav").read_bytes() == mix  # nothing delivered
        assert desk.state()["mix"] is None  # the page plays the programme, saying it is not delivered
        # A byte range of it, as a player seeks.
        part = client.get(span, headers={**page, "Range": "bytes=44-1043"})
        assert part.status_code == 206 and part.content == after.content[44:1044]
        # The longest span, as the page writes it (its end minus its start is 120.00000000000001 in floats).
        assert client.get("/programme?start=58.860&end=178.860", headers=page).status_code == 200
        # A span too long, or backwards, or a flag that is not 0 or 1: one line each.
        for bad, said in (
            ("start=0&end=500", "the programme is heard 120 s at a time (asked for 500 s)"),
            ("start=5&end=2", "the programme's span must run forward from 0 or later (not 5 to 2)"),
            ("start=0&end=2&bed=yes", "bed is 1 (heard) or 0 (left out), not 'yes'"),
            ("start=0", "give the programme's span as start=SECONDS&end=SECONDS"),
        ):
            answer = client.get(f"/programme?{bad}", headers=page)
            assert (answer.status_code, answer.text) == (400, f"400: {said}\n")
    finally:
        desk.close(deliver=False)


def test_the_programme_answers_only_the_page_itself(rendered, tmp_path):
    from starlette.testclient import TestClient

    from omnidub.review.app import build_app

    folder = tmp_path / "out"
    shutil.copytree(rendered, folder, symlinks=True)
    desk = open_desk(folder)
    try:
        app, span = build_app(desk, {"testserver"}), "/programme?start=0&end=4"
        stranger, client = TestClient(app), TestClient(app, cookies={"omnidub_review": desk.token})
        for site in ("cross-site", "same-site"):  # another site, or a page on another port of this host
            refused = client.get(span, headers={"Sec-Fetch-Site": site})
            assert refused.status_code == 403 and "only the review page itself can play this" in refused.text
        assert stranger.get(span, headers={"Sec-Fetch-Site": "same-origin"}).status_code == 403  # no token
        own = client.get(span, headers={"Sec-Fetch-Site": "same-origin"})
        assert own.status_code == 200 and own.content[:4] == b"RIFF"
    finally:
        desk.close(deliver=False)


@needs_chromium
def test_m_plays_the_programme_from_the_line_while_the_mix_is_not_delivered_and_the_picture_follows(
    rendered, tmp_path, browser
):
    from conftest import make_video
    from playwright.sync_api import expect

    desk, url, _, stop = serve_copy(rendered, tmp_path)
    try:
        do(desk, "retake", 3)  # the mix the render left is no longer the lines as they stand
        video = tmp_path / "picture.webm"
        make_video(video, 12, codec="libvpx", audio="libopus", rate=48000)
        desk.previews.picture = lambda: video  # the scene has no video of its own
        page = opened(browser, url)
        rows(page).get_by_role("option", name=re.compile(r"^Line 3, ")).click()
        page.get_by_role("listbox", name="Lines").focus()
        page.keyboard.press("m")
        mix = page.locator("#mix")
        expect(mix).to_have_js_property("paused", False)
        assert re.search(r"^/programme\?start=6\.000&end=", mix.get_attribute("src"))
        expect(page.locator("#mix-length")).to_have_text("the programme as it stands (not delivered)")
        # The picture plays at the programme's time: where line 3 starts, not at the span's own zero.
        page.wait_for_function("() => !document.getElementById('picture').paused")
        assert page.evaluate("() => document.getElementById('picture').currentTime") >= 6.0
        page.close()
    finally:
        stop()


@needs_chromium
def test_a_page_on_another_local_port_cannot_play_the_programme(rendered, tmp_path, browser):
    import http.server

    from test_review_page import HOSTILE_PLAYER

    desk, url, _, stop = serve_copy(rendered, tmp_path)
    hostile = HOSTILE_PLAYER.format(review=url.split("/?")[0]).replace("/media/line/1", "/programme?start=0&amp;end=4")

    class Page(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.end_headers()
            self.wfile.write(hostile.encode())

        def log_message(self, *args):
            pass

    other = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Page)
    threading.Thread(target=other.serve_forever, daemon=True).start()
    try:
        context = browser.new_context()
        mine = context.new_page()
        mine.goto(url)  # the editor's tab: the cookie is set for 127.0.0.1, every port
        mine.wait_for_selector("body[data-ready=true]")
        assert fetched(mine, "/programme?start=0&end=4")["head"] == "RIFF"  # the page itself hears it
        evil = context.new_page()
        evil.goto(f"http://127.0.0.1:{other.server_address[1]}/")
        evil.wait_for_function("document.title !== 'another local app'", timeout=30_000)
        assert evil.title() == "refused"
        context.close()
    finally:
        other.shutdown()
        stop()


@pytest.mark.slow  # over 10 s: the scene is assembled again over the bed (its lines from the line store)
def test_the_programme_over_a_bed_is_ducked_as_the_delivered_mix_ducks_it(rendered, tmp_path):
    """The scene rendered again over a bed (its lines from the line store): the programme the page plays before a
    delivery is the mix over the bed the render delivered, but for the mix's loudness gain."""
    import json

    from starlette.testclient import TestClient
    from test_review import render

    from omnidub.media import load_audio
    from omnidub.review.app import build_app

    folder = tmp_path / "out"
    shutil.copytree(rendered, folder, symlinks=True)
    script = Path(json.loads((folder / "manifest.json").read_text())["input"])
    result = render(script, folder, "--bed", SOURCE / "scene.opus")
    assert result.exit_code in (0, 1), result.output
    delivered = load_audio(folder / "mix-bed.wav", 24000)  # both channels, as the programme hears the bed
    desk = open_desk(folder)
    try:
        assert desk.previews.ready.wait(60)
        client = TestClient(build_app(desk, {"testserver"}), cookies={"omnidub_review": desk.token})
        page = {"Sec-Fetch-Site": "same-origin"}

        def residue(query: str) -> tuple[float, float]:
            """What is left of the delivered mix (0 to 11 s) once the programme, at its best gain, is taken away
            (a share of the mix's energy), and that gain."""
            heard, rate = sf.read(io.BytesIO(client.get(f"/programme?start=0&end=11{query}", headers=page).content))
            mix = delivered[: heard.size]
            gain = float(heard @ mix) / float(heard @ heard)
            return float(np.sum((mix - gain * heard) ** 2) / np.sum(mix**2)), gain

        (ducked, level), (dub_alone, _), (bed_alone, _) = residue(""), residue("&bed=0"), residue("&dub=0")
        # What is left is the two resamplings' (the mix at 48 kHz heard at 24 kHz) and the limiter's, not the bed's.
        assert ducked < 0.05 and dub_alone > 1.5 * ducked and bed_alone > 0.5, (ducked, dub_alone, bed_alone)
        assert 0.8 < level < 1.25  # at the delivered mix's level (the dub there is 25 dB up, the whole 3.7 dB down)
    finally:
        desk.close(deliver=False)


# What a browser does to a page whose tab goes to the background (headless pages are never hidden on their own).
HIDE = """() => {
  Object.defineProperty(document, "visibilityState", {value: "hidden", configurable: true});
  document.dispatchEvent(new Event("visibilitychange"));
}"""
SHOW = """() => {
  Object.defineProperty(document, "visibilityState", {value: "visible", configurable: true});
  document.dispatchEvent(new Event("visibilitychange"));
}"""


@needs_chromium
def test_a_sixth_tab_loads_while_five_others_are_open_in_the_background(rendered, tmp_path, browser):
    from playwright.sync_api import expect

    desk, url, _, stop = serve_copy(rendered, tmp_path)
    try:
        context = browser.new_context(viewport={"width": 1280, "height": 720})
        streams: list[str] = []
        context.on("request", lambda request: streams.append(request.url) if "/api/events" in request.url else None)
        tabs = []
        for _ in range(6):  # a browser opens six connections to one server: one stream a tab would take them all
            tab = context.new_page()
            tab.goto(url)
            expect(tab.locator("body[data-ready=true]")).to_have_count(1, timeout=30_000)
            tab.evaluate(HIDE)  # the next tab comes to the front
            tabs.append(tab)
        assert len(streams) == 6  # one event stream a page
        # Back in front, a tab listens again and reads what changed meanwhile.
        do(desk, "approve", 1, approved=True, key=desk.state()["lines"][0]["key"])
        tabs[0].evaluate(SHOW)
        expect(rows(tabs[0]).get_by_role("option", name=re.compile(r"^Line 1, .*approved"))).to_be_visible()
        context.close()
    finally:
        stop()


def test_the_decoded_copies_kept_are_the_most_recently_used_within_the_budget(tmp_path, monkeypatch):
    import os

    from omnidub.review import previews

    monkeypatch.setenv("OMNIDUB_CACHE", str(tmp_path / "cache"))
    sources = []
    for k in range(3):
        source = tmp_path / f"source{k}.wav"
        sf.write(str(source), np.zeros(previews.RATE, dtype=np.float32), previews.RATE)  # 1 s: 48 KB decoded
        sources.append(source)
    first, second = previews.decoded(sources[0]), previews.decoded(sources[1])
    os.utime(first, (1_000_000, 1_000_000))
    os.utime(second, (2_000_000, 2_000_000))
    assert previews.decoded(sources[0]) == first  # used again: now the most recent
    monkeypatch.setattr(previews, "KEEP_BYTES", first.stat().st_size * 2 + 10)
    third = previews.decoded(sources[2])
    # Two fit the budget: the one just made and the one used last; the least recently used went.
    assert third.is_file() and first.is_file() and not second.exists()
    assert previews.decoded(sources[1]).is_file()  # decoded again when asked for
