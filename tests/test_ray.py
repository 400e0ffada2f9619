"""The Ray executor on a local two-CPU cluster: the same audio as the local executor, a worker killed mid-job
loses nothing, and a rerun after the driver is killed resumes from the journal."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from conftest import EXAMPLES

ray = pytest.importorskip("ray")
# A local Ray cluster and a worker process per model take about 90 s on two cores: CI's second run (pytest -m slow).
pytestmark = pytest.mark.slow

from omnidub.api import Session  # noqa: E402
from omnidub.config import load_preset  # noqa: E402
from omnidub.journal import read_entries  # noqa: E402
from omnidub.progress import Listener  # noqa: E402
from omnidub.scheduler import ExecutorOptions, Failure  # noqa: E402

# Few steps: the executors are compared, not the voices.
PRESET = load_preset("fast").with_overrides(steps=4)

SCENE = """1
00:00:00,300 --> 00:00:02,400
BOB: The ferry leaves at nine, not at ten.

2
00:00:02,800 --> 00:00:05,000
ALICE: Then we should pack the car tonight.

3
00:00:05,400 --> 00:00:07,600
BOB: I will set two alarms, just in case.

4
00:00:08,000 --> 00:00:10,000
ALICE: And I will bring the coffee.
"""


@pytest.fixture(scope="module")
def cluster():
    # Two CPUs for the pool's two workers, one for the worker of the driver that the last test kills.
    ray.init(num_cpus=3, include_dashboard=False, log_to_driver=False)
    yield ray.get_runtime_context().gcs_address
    ray.shutdown()


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> list[Path]:
    folder = tmp_path_factory.mktemp("inputs")
    (folder / "ferry.srt").write_text(SCENE)
    return [EXAMPLES / "dialogue.srt", folder / "ferry.srt"]


@pytest.fixture(scope="module")
def options(tiny_model_dir, whisper_tiny_en) -> dict:
    return {"voices": EXAMPLES / "voices.toml"}


@pytest.fixture(scope="module")
def asr(whisper_tiny_en) -> str:
    return str(whisper_tiny_en)


@pytest.fixture(scope="module")
def local(tmp_path_factory, inputs, options, asr) -> Path:
    """Both inputs rendered by the local executor: the reference every Ray run must match byte for byte."""
    import torch

    out = tmp_path_factory.mktemp("local")
    session = Session("synthetic:tiny", "cpu", PRESET, asr_model=asr)
    # Each worker runs one thread (--cpus-per-worker 1). Float32 sums are bit-identical only at equal thread
    # counts (tokens match at any count; audio differs by ~1e-7 otherwise), so the reference runs one too.
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        runs = session.job(inputs, out_dir=out, **options).run()
    finally:
        torch.set_num_threads(threads)
    assert all(run.summary.rendered == run.summary.lines for run in runs)
    return out


@pytest.fixture(scope="module")
def pool(cluster, asr):
    session = Session("synthetic:tiny", "cpu", PRESET, asr_model=asr, executor=ExecutorOptions("ray", workers=2))
    yield session
    session.close()


def outputs(folder: Path) -> dict[str, bytes]:
    return {
        p.relative_to(folder).as_posix(): p.read_bytes()
        for p in sorted(folder.rglob("*.wav"))
        if ".omnidub" not in p.parts
    }


def test_two_inputs_through_two_workers_give_the_local_executors_audio(pool, local, inputs, options, tmp_path):
    runs = pool.job(inputs, out_dir=tmp_path, **options).run()
    assert [run.summary.failed for run in runs] == [0, 0]
    workers = pool.engine.executor().workers
    assert len({w["pid"] for w in workers}) == 2 and all(w["threads"] == 1 for w in workers)
    assert outputs(tmp_path) == outputs(local) and len(outputs(local)) == 11 + 4 + 2 * 3


class _KillOnFirstLine(Listener):
    """Kills a worker when the first line is rendered, and counts every line each input finishes."""

    def __init__(self, pid: int):
        self.pid, self.killed, self.current, self.finished = pid, False, None, Counter()

    def input(self, name):
        self.current = name

    def line_done(self, entry, audio_seconds, wall_seconds):
        self.finished[(self.current, entry.index, entry.status)] += 1
        if not self.killed and entry.status == "rendered":
            self.killed = True
            os.kill(self.pid, signal.SIGKILL)


def test_a_worker_killed_mid_job_loses_nothing_and_renders_nothing_twice(
    pool, local, inputs, options, tmp_path, monkeypatch
):
    executor = pool.engine.executor()
    sent, answered = [], []

    def counted(stream):
        # What the executor hands back is what gets stored: count it where it happens, not in the manifest.
        def stream_counted(requests, *args, **kwargs):
            sent.extend(request.id for request in requests)
            for outcome in stream(requests, *args, **kwargs):
                answered.append(outcome)
                yield outcome

        return stream_counted

    monkeypatch.setattr(executor, "stream", counted(executor.stream))
    listener = _KillOnFirstLine(executor.workers[0]["pid"])
    runs = pool.job(inputs, out_dir=tmp_path, listener=listener, **options).run()
    assert listener.killed and executor.resent >= 1  # the dead worker's buckets went out again
    # Every request answered exactly once, none with a failure, although a bucket was rendered twice.
    assert sorted(outcome.id for outcome in answered) == sorted(sent) and len(set(sent)) == len(sent)
    assert not [outcome for outcome in answered if isinstance(outcome, Failure)]
    for run in runs:
        # Every line of every input finished exactly once, as rendered: none lost, none stored twice.
        done = [
            (index, status, n) for (name, index, status), n in listener.finished.items() if name == run.out_dir.name
        ]
        assert sorted(done) == [(i, "rendered", 1) for i in range(1, run.summary.lines + 1)]
    assert outputs(tmp_path) == outputs(local)


def test_a_rerun_after_the_driver_is_killed_resumes(cluster, pool, local, inputs, options, asr, tmp_path):
    out = tmp_path / "out"
    command = [
        sys.executable,
        "-m",
        "omnidub",
        "render",
        *map(str, inputs),
        "--voices",
        str(options["voices"]),
        "--model",
        "synthetic:tiny",
        "--device",
        "cpu",
        "--asr-model",
        asr,
        "--out",
        str(out),
        "--executor",
        "ray",
        "--ray-address",
        cluster,
        "--workers",
        "1",
        "--steps",
        "4",
    ]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=os.environ.copy())
    deadline = time.monotonic() + 120
    while sum(len(read_entries(out / name)) for name in ("dialogue", "ferry")) < 2:
        assert process.poll() is None, process.stderr.read().decode()
        assert time.monotonic() < deadline, "the driver rendered nothing"
        time.sleep(0.05)
    process.send_signal(signal.SIGKILL)
    process.wait()
    done = sum(e.status == "rendered" for name in ("dialogue", "ferry") for e in read_entries(out / name))
    assert 2 <= done < 15

    # The rerun's driver is this process, with the pool's two workers.
    runs = pool.job(inputs, out_dir=out, **options).run()
    assert [run.summary.failed for run in runs] == [0, 0]
    cached = sum(e.status == "cached" for name in ("dialogue", "ferry") for e in read_entries(out / name))
    assert cached >= done  # what the killed driver finished is reused, not rendered again
    assert outputs(out) == outputs(local)


def test_workers_that_cannot_load_the_model_are_one_clear_line(cluster):
    import functools

    from omnidub.cluster import RayExecutor
    from omnidub.errors import OmnidubError
    from omnidub.models import resolve_model
    from omnidub.scheduler import Budget

    unloadable = functools.partial(resolve_model, "/nowhere/model")  # what a worker without the folder meets
    with pytest.raises(OmnidubError) as caught:
        RayExecutor(unloadable, Budget(), ExecutorOptions("ray", workers=1), identity={}, settings={}, device="cpu")
    assert str(caught.value) == "the Ray workers could not load the model: model folder not found: /nowhere/model"


def test_retakes_go_through_the_pool_every_inputs_failing_lines_together(
    pool, local, inputs, options, tmp_path, monkeypatch
):
    executor = pool.engine.executor()
    streams = []
    stream = executor.stream

    def counted(requests, *args, **kwargs):
        streams.append([request.seed for request in requests])
        return stream(requests, *args, **kwargs)

    # A job keeps the pool it rendered with for its retakes: the same executor object, counted.
    monkeypatch.setattr(executor, "stream", counted)
    runs = pool.job(inputs, out_dir=tmp_path, qa=True, retakes=1, speaker_model="none", **options).run()
    assert [run.report is not None for run in runs] == [True, True]
    # The random weights speak noise: QA fails every line's words, and every line of both inputs got one take,
    # all of them in one stream after the render's.
    assert len(streams) == 2 and len(streams[1]) == sum(run.summary.lines for run in runs)
    for run in runs:
        for entry in read_entries(run.out_dir):
            if entry.attempts:
                assert len(entry.attempts) == 2 and sum(a.chosen for a in entry.attempts) == 1
