"""Render lines on a pool of Ray actors, each holding one resident backend (``--executor ray``).

The driver plans, encodes every prompt, keys the lines and owns the journal, manifest and outputs. Workers get
buckets of requests (prompts are numpy, so they travel as they are) and send each line's audio back as numpy.
Results are matched by request id, never by order. A worker writes nothing, so a bucket whose worker died is
simply sent again: a retry can neither tear a file nor render a line into the outputs twice.
"""

from __future__ import annotations

import logging
import os
import pickle
import socket
import sys
from collections import Counter, deque
from typing import Callable, Iterator, Sequence

from omnidub.backends.base import Request
from omnidub.errors import OmnidubError
from omnidub.hardware import device_kind
from omnidub.scheduler import Budget, ExecutorOptions, Failure, Outcome, buckets, stream

MAX_ATTEMPTS = 3  # a bucket whose worker dies this often fails its lines (it may be what kills the worker)
MAX_RESTARTS = 3  # Ray restarts a dead worker (reloading the model) this often before it is given up
IN_FLIGHT = 2  # buckets queued per worker, so a worker never idles while the driver stores a result


def require_ray():
    """The ray module, or one clear line saying how to get it."""
    try:
        import ray
    except ImportError as exc:
        raise OmnidubError("--executor ray needs Ray: pip install 'omnidub[ray]'") from exc
    return ray


class Worker:
    """A Ray actor holding one resident backend, built in the worker from the driver's resolved model."""

    def __init__(self, factory: Callable[[], object]):
        # The pool starts each worker with OMP_NUM_THREADS = its CPUs: co-located workers' threads sum to the cores.
        self.backend = factory()

    def ready(self) -> dict:
        threads = None
        if "torch" in sys.modules:
            threads = sys.modules["torch"].get_num_threads()
        return {
            "identity": self.backend.identity,
            "settings": self.backend.settings,
            "pid": os.getpid(),
            "threads": threads,
        }

    def costs(self, requests: Sequence[Request]) -> list[int]:
        return [self.backend.cost(request) for request in requests]

    def expect(self, tokens: int) -> None:
        """This worker's share of the job, in tokens per step: --compile auto weighs it against the compile time
        (a bucket alone never pays for compiling; the whole share may)."""
        self.backend.expect(tokens)

    def render(self, bucket: Sequence[Request]) -> list[Outcome]:
        """One bucket decoded together; a line that fails is retried alone, as in the local executor."""
        return [
            Failure(o.id, _portable(o.error)) if isinstance(o, Failure) else o
            for o in stream(self.backend, list(bucket), Budget(0, 0), whole_job=False)
        ]


class RayExecutor:
    """A pool of :class:`Worker` actors fed with buckets; streams each line's Result or Failure as it returns."""

    def __init__(
        self,
        factory: Callable[[], object],
        budget: Budget,
        options: ExecutorOptions,
        *,
        identity: dict,
        settings: dict,
        device: str,
    ):
        ray = self._ray = require_ray()
        self.budget = budget
        self._owns = False
        self.actors: list = []
        self.resent = 0  # buckets sent again because their worker died
        if not ray.is_initialized():
            _reachable(options.address)
            try:
                ray.init(
                    address=options.address, include_dashboard=False, log_to_driver=False, logging_level=logging.ERROR
                )
            except Exception as exc:  # ConnectionError, ValueError, RuntimeError, timeouts: all mean "not reached"
                what = f"reach the Ray cluster at {options.address}" if options.address else "start a local Ray cluster"
                raise OmnidubError(f"cannot {what}: {_one_line(exc)}") from exc
            self._owns = True
        cpus = options.cpus_per_worker
        gpus = options.gpus_per_worker if options.gpus_per_worker is not None else float(device_kind(device) == "cuda")
        have = ray.cluster_resources()
        have_cpus, have_gpus = have.get("CPU", 0.0), have.get("GPU", 0.0)
        fit = int(have_cpus // cpus) if not gpus else min(int(have_cpus // cpus), int(have_gpus // gpus))
        workers = options.workers or max(1, fit)
        if workers * cpus > have_cpus or workers * gpus > have_gpus:
            self.close()
            raise OmnidubError(
                f"the Ray cluster has {have_cpus:g} CPUs and {have_gpus:g} GPUs: {workers} workers with {cpus} CPUs "
                f"and {gpus:g} GPUs each do not fit (see --workers, --cpus-per-worker, --gpus-per-worker)"
            )
        # A CPU-only worker must ask for num_gpus=0 explicitly, or a CPU cluster waits for GPUs forever.
        actor = ray.remote(Worker).options(
            num_cpus=cpus,
            num_gpus=gpus,
            max_restarts=MAX_RESTARTS,
            max_task_retries=0,
            runtime_env={"env_vars": {"OMP_NUM_THREADS": str(cpus), "MKL_NUM_THREADS": str(cpus)}},
        )
        self.actors = [actor.remote(factory) for _ in range(workers)]
        try:
            self.workers = ray.get([a.ready.remote() for a in self.actors])
        except ray.exceptions.RayError as exc:
            self.close()
            raise OmnidubError(f"the Ray workers could not load the model: {_one_line(exc)}") from exc
        for info in self.workers:
            if info["identity"] != identity or info["settings"] != settings:
                self.close()
                raise OmnidubError(
                    f"a Ray worker renders on {info['identity'].get('device')} in {info['identity'].get('dtype')}, "
                    f"but this machine keyed the lines for {identity.get('device')} in {identity.get('dtype')}: "
                    f"pass --device (and --dtype) to match the workers"
                )

    def stream(
        self,
        requests: Sequence[Request],
        should_stop: Callable[[], bool] = lambda: False,
        on_bucket: Callable[[list[Request]], None] = lambda bucket: None,
    ) -> Iterator[Outcome]:
        """Send buckets to whichever worker is free; yield each line's outcome as its bucket returns."""
        ray = self._ray
        requests = list(requests)
        if not requests:
            return
        ids = {r.id for r in requests}
        cost = dict(zip((r.id for r in requests), self._any(lambda a: a.costs.remote(requests))))
        share = sum(cost.values()) // max(1, len(self.actors))
        try:
            ray.get([actor.expect.remote(share) for actor in self.actors])
        except ray.exceptions.RayError:
            pass  # a dead worker is restarted below; it renders without hearing its share (it will not compile)
        queue = deque(enumerate(buckets(requests, lambda r: cost[r.id], self.budget)))
        deaths: Counter[int] = Counter()
        load: Counter[int] = Counter()
        inflight: dict = {}  # ref -> (worker, bucket number, bucket)
        probes: dict = {}  # ref of ready() -> worker that died and is restarting
        alive = set(range(len(self.actors)))
        done: set[str] = set()
        while True:
            if not should_stop():
                for i in sorted(alive - set(probes.values())):
                    while queue and load[i] < IN_FLIGHT:
                        n, bucket = queue.popleft()
                        on_bucket(bucket)
                        inflight[self.actors[i].render.remote(bucket)] = (i, n, bucket)
                        load[i] += 1
            if not alive and queue:  # every worker is gone for good: what is left cannot render
                for _, bucket in queue:
                    for request in bucket:
                        yield Failure(request.id, OmnidubError("every Ray worker died"))
                queue.clear()
            if not inflight and not (queue and probes and not should_stop()):
                return
            [ref], _ = ray.wait(list(inflight) + list(probes), num_returns=1)
            if ref in probes:
                i = probes.pop(ref)
                try:
                    ray.get(ref)  # restarted: it takes work again
                except ray.exceptions.RayError:
                    alive.discard(i)  # out of restarts
                continue
            i, n, bucket = inflight.pop(ref)
            load[i] -= 1
            try:
                outcomes = ray.get(ref)
            except (
                ray.exceptions.RayActorError,
                ray.exceptions.WorkerCrashedError,
                ray.exceptions.ObjectLostError,
            ) as exc:
                # The worker died with the bucket: nothing of it was stored, so it goes to the next free worker.
                if i in alive and i not in probes.values():
                    probes[self.actors[i].ready.remote()] = i
                deaths[n] += 1
                if deaths[n] < MAX_ATTEMPTS:
                    queue.appendleft((n, bucket))
                    self.resent += 1
                    continue
                outcomes = [
                    Failure(r.id, OmnidubError(f"its Ray worker died {deaths[n]} times: {_one_line(exc)}"))
                    for r in bucket
                ]
            except ray.exceptions.RayTaskError as exc:
                outcomes = [Failure(r.id, exc.cause if isinstance(exc.cause, Exception) else exc) for r in bucket]
            for outcome in outcomes:
                if outcome.id in ids and outcome.id not in done:  # a retried bucket never yields a line twice
                    done.add(outcome.id)
                    yield outcome

    def _any(self, call):
        """The first answer any worker gives to ``call(actor)``."""
        error = None
        for actor in self.actors:
            try:
                return self._ray.get(call(actor))
            except self._ray.exceptions.RayActorError as exc:
                error = exc
        raise OmnidubError(f"no Ray worker answers: {_one_line(error)}") from error

    def close(self) -> None:
        """Stop the workers (and the local cluster this executor started)."""
        for actor in self.actors:
            try:
                self._ray.kill(actor, no_restart=True)
            except Exception:  # noqa: BLE001 - already gone
                pass
        self.actors = []
        if self._owns and self._ray.is_initialized():
            self._ray.shutdown()
            self._owns = False


def _reachable(address: str | None, seconds: float = 10.0) -> None:
    """A HOST:PORT that does not answer is one line now, not minutes of Ray retrying to connect."""
    if not address or address == "auto" or "://" in address:
        return
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=seconds):
            pass
    except (OSError, ValueError) as exc:
        raise OmnidubError(
            f"no Ray cluster answers at {address} ({exc}): start one with `ray start --head`, or "
            f"leave out --ray-address to start a local one"
        ) from exc


def _portable(exc: BaseException) -> BaseException:
    """The exception itself if it survives pickling, else a RuntimeError carrying its text."""
    try:
        pickle.loads(pickle.dumps(exc))
        return exc
    except Exception:  # noqa: BLE001 - any unpicklable exception
        return RuntimeError(f"{type(exc).__name__}: {exc}")


def _one_line(exc: BaseException | None) -> str:
    """The most telling single line of an exception (Ray's carry whole remote tracebacks)."""
    cause = getattr(exc, "cause", None)
    if isinstance(cause, BaseException) and cause is not exc:
        return _one_line(cause)
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    errors = [line for line in lines if ("Error:" in line or "Exception:" in line) and not line.startswith("ray.")]
    text = errors[-1] if errors else (lines[0] if lines else "")
    if "OmnidubError: " in text:  # a user's mistake raised in a worker speaks for itself
        return text.split("OmnidubError: ", 1)[1]
    return (
        text
        if isinstance(exc, OmnidubError) or text.startswith(type(exc).__name__)
        else f"{type(exc).__name__}: {text}"
    )
