"""The one process pool of the workflow: independent jobs on worker processes, results by position.

The local backend of the executor interface (:mod:`devkit.workflow.executor.local`), behind the main
job, the block tuner, promotion and the shape sweep.  Workers are *spawned* (never forked: the parent
may hold BLAS threads and the simulator's module state) and run single-threaded BLAS, so ``jobs``
workers use ``jobs`` cores.

At most ``jobs`` jobs are in flight at a time, submitted in the given order, so a caller that wants
largest-first scheduling passes that order and ``on_start`` sees exactly the jobs that are running.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from typing import TypeVar

J = TypeVar("J")
R = TypeVar("R")

#: Thread-count variables pinned to 1 in every worker (one core per worker).
_THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "DEVKIT_BLAS_THREADS")


def init_worker() -> None:
    """Worker initialiser: single-threaded BLAS/OpenMP; Ctrl-C is the parent's to handle.

    A Ctrl-C at the terminal reaches every process of the group; workers ignore it, so that the parent
    alone reports the interruption (one line) and stops them (:func:`run_jobs`).
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    for var in _THREAD_VARS:
        os.environ[var] = "1"


def default_jobs() -> int:
    """Worker processes: one per core this process may run on (at least 1)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - non-Linux
        return max(1, os.cpu_count() or 1)


def run_jobs(
    fn: Callable[[J], R],
    items: Sequence[J],
    *,
    jobs: int,
    order: Sequence[int] | None = None,
    on_start: Callable[[J], None] | None = None,
    on_done: Callable[[R], None] | None = None,
    on_failure: Callable[[J, BaseException, str], R] | None = None,
    isolate: bool = False,
) -> list[R]:
    """``[fn(item) for item in items]``, computed on ``jobs`` worker processes; results in ``items`` order.

    ``order`` is the submission order (positions into ``items``; default: as given).  ``on_start(item)``
    runs when a job is handed to a worker, ``on_done(result)`` as each one completes.  ``jobs <= 1`` or a
    single item runs everything in this process (no pool), unless ``isolate`` (with ``jobs >= 1``: a single
    item still gets a worker process, e.g. a job retried after it took its worker down).

    ``on_failure(item, exc, what)`` turns a job lost with its worker (``what`` = ``"worker failed"``) or
    one that could not be submitted because an earlier worker died (``what`` = ``"not run"``) into a
    result; without it such an exception propagates.  ``fn`` must be picklable (a module-level function).
    """
    positions = list(order) if order is not None else list(range(len(items)))
    if sorted(positions) != list(range(len(items))):
        raise ValueError("order must be a permutation of the item positions")
    results: dict[int, R] = {}

    def finish(i: int, result: R) -> None:
        results[i] = result
        if on_done:
            on_done(result)

    if not items or jobs < 1 or (not isolate and (jobs == 1 or len(items) <= 1)):
        for i in positions:
            if on_start:
                on_start(items[i])
            finish(i, fn(items[i]))
        return [results[i] for i in range(len(items))]

    def failed(i: int, exc: BaseException, what: str) -> None:
        if on_failure is None:
            raise exc
        finish(i, on_failure(items[i], exc, what))

    ctx = multiprocessing.get_context("spawn")
    workers = min(jobs, len(items))
    pool = ProcessPoolExecutor(max_workers=workers, mp_context=ctx, initializer=init_worker)
    try:
        _drive(pool, workers, positions, items, fn, on_start, finish, failed)
    except BaseException:  # Ctrl-C or a callback's error: stop the workers now, not after their jobs
        _stop_workers(pool)
        raise
    pool.shutdown(wait=True)
    return [results[i] for i in range(len(items))]


def _stop_workers(pool: ProcessPoolExecutor) -> None:
    """Terminate the pool's worker processes and drop the queued jobs (nothing they did is kept)."""
    processes = list((getattr(pool, "_processes", None) or {}).values())
    pool.shutdown(wait=False, cancel_futures=True)
    for proc in processes:
        if proc.is_alive():
            proc.terminate()
    for proc in processes:
        proc.join(timeout=5)


def _drive(
    pool: ProcessPoolExecutor,
    workers: int,
    positions: list[int],
    items: Sequence[J],
    fn: Callable[[J], R],
    on_start: Callable[[J], None] | None,
    finish: Callable[[int, R], None],
    failed: Callable[[int, BaseException, str], None],
) -> None:
    """Keep ``workers`` jobs in flight in ``positions`` order until all are done."""
    pending: dict[Future, int] = {}
    queue = list(positions)

    def submit() -> None:
        while queue and len(pending) < workers:
            i = queue.pop(0)
            try:
                pending[pool.submit(fn, items[i])] = i
            except BrokenProcessPool as exc:  # a worker died earlier: report the rest, do not hang
                failed(i, exc, "not run")
                continue
            if on_start:
                on_start(items[i])

    submit()
    while pending:
        done, _ = wait(list(pending), return_when=FIRST_COMPLETED)
        for fut in sorted(done, key=lambda f: pending[f]):
            i = pending.pop(fut)
            try:
                result = fut.result()
            except Exception as exc:  # the worker itself died (e.g. out of memory)
                failed(i, exc, "worker failed")
                continue
            finish(i, result)
        submit()
