"""The local backend: the workflow's process pool on this machine (:mod:`devkit.workflow.pool`)."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures.process import BrokenProcessPool
from typing import Any

from devkit.workflow.executor.batch import Batch

#: Times a job lost with its worker process is run again, in a fresh pool, before it is reported.
MAX_RETRIES = 1


class _Indexed:
    """``fn`` applied to the item of a ``(position, item)`` pair, keeping the position (picklable when
    ``fn`` is: a module-level function or a wrapper holding only function references)."""

    def __init__(self, fn: Callable[[Any], Any]) -> None:
        self.fn = fn

    def __call__(self, pair: tuple[int, Any]) -> tuple[int, Any]:
        return pair[0], self.fn(pair[1])


class LocalExecutor:
    """``jobs`` spawned worker processes with single-threaded BLAS (``jobs <= 1``: in this process).

    A worker that dies (out of memory, a crash in native code) breaks the pool: its job and the pool's
    other unfinished jobs are run again in a fresh pool, up to ``retries`` times; a job still lost after
    that reaches ``on_failure`` as ``"worker failed"`` (or ``"not run"``) with the error.
    """

    name = "local"

    def __init__(self, jobs: int, retries: int = MAX_RETRIES) -> None:
        self.jobs = max(1, int(jobs))
        self.retries = max(0, int(retries))

    def describe(self) -> str:
        return f"{self.jobs} local worker(s)"

    def map(self, batch: Batch) -> list[Any]:
        results: dict[int, Any] = {}
        todo = batch.positions()
        attempts = self.retries + 1 if self.jobs > 1 else 1  # in this process no worker can be lost
        for attempt in range(attempts):
            lost = self._attempt(batch, todo, results, attempt, attempt == attempts - 1)
            todo = [i for i in todo if i in lost]
            if not todo:
                break
        return [results[i] for i in range(len(batch.items))]

    def _attempt(
        self, batch: Batch, todo: list[int], results: dict[int, Any], attempt: int, last: bool
    ) -> set[int]:
        """Run the jobs at ``todo`` in one pool; returns the positions lost (kept for another attempt
        unless ``last``, when they go through ``on_failure``)."""
        from devkit.workflow import pool

        lost: set[int] = set()
        items, on_start, on_done, on_failure = batch.items, batch.on_start, batch.on_done, batch.on_failure

        def failed(pair: tuple[int, Any], exc: BaseException, what: str) -> tuple[int, Any]:
            if not last and isinstance(exc, BrokenProcessPool):  # the worker died: try once more
                lost.add(pair[0])
                return pair[0], None
            if on_failure is None:
                raise exc
            return pair[0], on_failure(pair[1], exc, what)

        def done(pair: tuple[int, Any]) -> None:
            if pair[0] not in lost:
                results[pair[0]] = pair[1]
                if on_done:
                    on_done(pair[1])

        pool.run_jobs(
            _Indexed(batch.fn),
            [(i, items[i]) for i in todo],
            jobs=self.jobs,
            on_start=(lambda pair: on_start(pair[1])) if on_start else None,
            on_done=done,
            on_failure=failed,
            isolate=attempt > 0,  # a retried job runs in a worker even when it is the only one
        )
        return lost

    def close(self) -> None:
        pass
