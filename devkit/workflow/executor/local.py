"""The local backend: the workflow's process pool on this machine (:mod:`devkit.workflow.pool`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any


class LocalExecutor:
    """``jobs`` spawned worker processes with single-threaded BLAS (``jobs <= 1``: in this process).

    A worker that dies loses its job (and the pool's other running jobs); they come back through
    ``on_failure`` as ``"worker failed"`` / ``"not run"`` without a retry: on one machine the cause
    (memory, a crash in native code) would strike again.
    """

    name = "local"

    def __init__(self, jobs: int) -> None:
        self.jobs = max(1, int(jobs))

    def describe(self) -> str:
        return f"{self.jobs} local worker(s)"

    def map(
        self,
        fn: Callable[[Any], Any],
        items: Sequence[Any],
        *,
        order: Sequence[int] | None = None,
        on_start: Callable[[Any], None] | None = None,
        on_done: Callable[[Any], None] | None = None,
        on_failure: Callable[[Any, BaseException, str], Any] | None = None,
        resources: dict[str, float] | None = None,
    ) -> list[Any]:
        from devkit.workflow import pool

        return pool.run_jobs(
            fn, items, jobs=self.jobs, order=order, on_start=on_start, on_done=on_done, on_failure=on_failure
        )

    def close(self) -> None:
        pass
