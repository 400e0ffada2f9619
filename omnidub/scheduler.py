"""One scheduler for every pending line of a job: length buckets under a token budget, results streamed per line.

Buckets are formed over the whole job (not slices of the script), longest lines first so that lines of similar
length share a forward and waste the least padding. A line's audio never depends on its bucket: each line
decodes from its own seeded noise, and in float32 the layouts compute the same logits for any grouping.

An executor runs the buckets: :class:`LocalExecutor` on the resident backend in this process, or
``cluster.RayExecutor`` on a pool of Ray actors. Both stream ``Result | Failure`` per line, matched by request id.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterator, Protocol, Sequence, Union

from omnidub.backends.base import Backend, Request, Result
from omnidub.config import EngineOptions
from omnidub.hardware import device_kind

# On CUDA a forward of this many tokens keeps the GPU busy; to be tuned from `omnidub bench` on a GPU.
CUDA_TOKEN_BUDGET = 16384


@dataclass(frozen=True)
class Budget:
    """How much one forward may hold: ``lines`` and ``tokens`` (0 = no limit of that kind)."""

    lines: int = 1
    tokens: int = 0


@dataclass(frozen=True, eq=False)
class Failure:
    """A line the backend could not render, with why."""

    id: str
    error: BaseException


Outcome = Union[Result, Failure]
EXECUTORS = ("local", "ray")


@dataclass(frozen=True)
class ExecutorOptions:
    """Where lines render: ``local`` (the resident backend in this process) or ``ray`` (a pool of actors).

    For ray: ``address`` is "auto", HOST:PORT or None (start a local cluster); ``workers`` None fills the
    cluster; ``gpus_per_worker`` None means 1 when the device is CUDA, else 0; each worker runs
    ``cpus_per_worker`` threads."""

    kind: str = "local"
    address: str | None = None
    workers: int | None = None
    gpus_per_worker: float | None = None
    cpus_per_worker: int = 1


class Executor(Protocol):
    """Runs requests and streams each line's outcome as it finishes (in any order: match them by ``id``)."""

    def stream(
        self,
        requests: Sequence[Request],
        should_stop: Callable[[], bool] = lambda: False,
        on_bucket: Callable[[list[Request]], None] = lambda bucket: None,
    ) -> Iterator[Outcome]: ...

    def close(self) -> None: ...


class LocalExecutor:
    """The resident backend in this process, one bucket after another."""

    def __init__(self, backend: Backend, budget: Budget):
        self.backend = backend
        self.budget = budget

    def stream(
        self,
        requests: Sequence[Request],
        should_stop: Callable[[], bool] = lambda: False,
        on_bucket: Callable[[list[Request]], None] = lambda bucket: None,
    ) -> Iterator[Outcome]:
        return stream(self.backend, requests, self.budget, should_stop, on_bucket)

    def close(self) -> None:
        pass  # the session keeps its backend


def default_budget(options: EngineOptions, device: str) -> Budget:
    """The preset's limits, else one line at a time on a CPU (batching does not pay there: one line already
    keeps every core busy and batched rows pad to the longest) and a token budget on CUDA."""
    if options.batch or options.batch_tokens:
        return Budget(options.batch, options.batch_tokens)
    if device_kind(device) == "cuda":
        return Budget(0, CUDA_TOKEN_BUDGET)
    return Budget(1, 0)


def buckets(requests: Sequence[Request], cost: Callable[[Request], int], budget: Budget) -> list[list[Request]]:
    """Requests grouped longest first; a bucket closes when one more line would pass either limit."""
    ranked = sorted(requests, key=lambda r: -cost(r))
    out: list[list[Request]] = []
    current: list[Request] = []
    tokens = 0
    for request in ranked:
        c = cost(request)
        full = (budget.lines and len(current) >= budget.lines) or (budget.tokens and tokens + c > budget.tokens)
        if current and full:
            out.append(current)
            current, tokens = [], 0
        current.append(request)
        tokens += c
    if current:
        out.append(current)
    return out


def stream(
    backend: Backend,
    requests: Sequence[Request],
    budget: Budget,
    should_stop: Callable[[], bool] = lambda: False,
    on_bucket: Callable[[list[Request]], None] = lambda bucket: None,
    *,
    whole_job: bool = True,
) -> Iterator[Result | Failure]:
    """Render every request, yielding each line's Result (or Failure) as soon as it is done; ``on_bucket`` hears
    which lines a forward is about to hold (for progress). ``whole_job``: the requests are the job's work left,
    which the backend may plan for (--compile auto); a Ray worker's bucket is not, its share was said apart.

    A bucket that fails is retried line by line, so one bad line never takes its neighbours with it."""
    if whole_job:
        backend.expect(sum(backend.cost(r) for r in requests))
    for bucket in buckets(requests, backend.cost, budget):
        if should_stop():
            return
        on_bucket(bucket)
        yield from _run_bucket(backend, bucket)


def _run_bucket(backend: Backend, bucket: list[Request]) -> Iterator[Result | Failure]:
    done: set[str] = set()
    try:
        for result in backend.synthesize(bucket):
            done.add(result.id)
            yield result
    except Exception as exc:  # noqa: BLE001 - any failure of a line is reported, never fatal to the job
        rest = [r for r in bucket if r.id not in done]
        if len(bucket) == 1:
            yield Failure(bucket[0].id, exc)
            return
        for request in rest:
            yield from _run_bucket(backend, [request])
