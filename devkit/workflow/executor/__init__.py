"""One executor interface for the workflow's independent jobs: a local process pool or a Ray cluster.

``devkit run``, ``devkit tune``, the shape sweep and ``devkit hw run`` hand lists of independent jobs
to :func:`run_jobs`.  A job is a module-level function named by reference (``module:function``, see
:mod:`devkit.workflow.executor.refs`) and one item of plain data (kernel references -- a declared name or
``FILE.py:KERNEL`` --, shapes, dtypes, targets); nothing else crosses to a worker, least of all
simulator state.  The backends:

* :class:`~devkit.workflow.executor.local.LocalExecutor` -- the process pool of this machine
  (:mod:`devkit.workflow.pool`), the default; no new dependency;
* :class:`~devkit.workflow.executor.ray_backend.RayExecutor` -- tasks on a Ray cluster (``--executor ray``,
  address from ``--ray-address`` or ``RAY_ADDRESS``; the optional extra ``neuronmm-devkit[ray]``).

Both return results in item order, call ``on_done`` as each job finishes, and turn a job lost with its
worker (after the backend's bounded retries) into a result through ``on_failure`` -- a job is never
silently dropped.  With a :class:`~devkit.workflow.executor.checkpoint.Checkpoint`, results are recorded
as they arrive and a rerun after the driver died skips the finished jobs.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any, Protocol, TypeVar, runtime_checkable

from devkit.workflow.executor.batch import Batch
from devkit.workflow.executor.checkpoint import Checkpoint
from devkit.workflow.executor.refs import ExecutorError, fn_ref, resolve_fn

J = TypeVar("J")
R = TypeVar("R")

#: Names accepted by ``--executor``.
BACKENDS = ("local", "ray")
#: Environment variable holding the Ray cluster address (Ray's own convention).
RAY_ADDRESS_ENV = "RAY_ADDRESS"

__all__ = [
    "BACKENDS",
    "Batch",
    "Checkpoint",
    "Executor",
    "ExecutorError",
    "create",
    "fn_ref",
    "resolve",
    "resolve_fn",
    "run_jobs",
]


@runtime_checkable
class Executor(Protocol):
    """What a backend provides: ``map`` a module-level function over items, results in item order."""

    name: str

    def describe(self) -> str:
        """One phrase for progress lines (``2 local worker(s)``, ``Ray cluster at HOST:PORT (4 CPUs)``)."""

    def map(self, batch: Batch) -> list[Any]:
        """``[batch.fn(item) for item in batch.items]`` on the backend's workers, in item order (see
        :func:`run_jobs`)."""

    def close(self) -> None:
        """Release the backend (disconnect from a cluster); the executor is not used afterwards."""


def create(kind: str = "local", *, jobs: int | None = None, address: str | None = None) -> Executor:
    """The executor named ``kind`` (``local`` or ``ray``).

    ``jobs``: local worker processes (default one per core).  ``address``: the Ray cluster
    (``HOST:PORT``, ``ray://HOST:PORT``, or ``local`` to start a one-machine Ray inside this process);
    default ``$RAY_ADDRESS``.  A missing ``ray`` package raises :class:`ExecutorError` naming the extra.
    """
    from devkit.workflow import pool

    if kind == "local":
        from devkit.workflow.executor.local import LocalExecutor

        if address:
            raise ExecutorError("--ray-address is for --executor ray; the local executor takes --jobs")
        return LocalExecutor(jobs if jobs is not None else pool.default_jobs())
    if kind == "ray":
        from devkit.workflow.executor.ray_backend import RayExecutor

        address = address or os.environ.get(RAY_ADDRESS_ENV) or None
        if not address:
            raise ExecutorError(
                "--executor ray needs the cluster address: pass --ray-address HOST:PORT or set RAY_ADDRESS "
                "(--ray-address local starts a one-machine Ray in this process)"
            )
        return RayExecutor(address, local_cpus=jobs)
    raise ExecutorError(f"unknown executor {kind!r}; choose one of {', '.join(BACKENDS)}")


def resolve(jobs: int | Executor) -> Executor:
    """An executor as given, or a local one with ``jobs`` worker processes (``<= 1``: in this process)."""
    if isinstance(jobs, Executor):
        return jobs
    from devkit.workflow.executor.local import LocalExecutor

    return LocalExecutor(int(jobs))


def run_jobs(
    fn: Callable[[J], R],
    items: Sequence[J],
    *,
    jobs: int | Executor,
    order: Sequence[int] | None = None,
    on_start: Callable[[J], None] | None = None,
    on_done: Callable[[R], None] | None = None,
    on_failure: Callable[[J, BaseException, str], R] | None = None,
    checkpoint: Checkpoint | None = None,
    resources: dict[str, float] | None = None,
) -> list[R]:
    """``[fn(item) for item in items]`` on ``jobs`` (a worker count for the local pool, or an executor).

    ``fn`` must be a module-level function (it is shipped by reference); ``items`` plain data.  Results
    come back in ``items`` order; ``order`` is the submission order (positions into ``items``).
    ``on_start(item)`` runs when a job is handed to a worker, ``on_done(result)`` as each one finishes
    (also for jobs a checkpoint already holds, first).  ``on_failure(item, exc, what)`` turns a job
    lost with its worker (``"worker failed"``, after the backend's retries) or never run (``"not run"``)
    into a result; without it the exception propagates.

    ``checkpoint``: results are appended to it as they arrive, finished jobs found in it are not run
    again, and it is removed once every job has a result (see
    :class:`~devkit.workflow.executor.checkpoint.Checkpoint`).  ``resources``: what each job needs on a
    cluster (e.g. ``{"neuron_cores": 1}``); the local pool ignores it.
    """
    executor = resolve(jobs)
    fn_ref(fn)  # refuse lambdas and closures before any work starts, whatever the backend
    positions = list(order) if order is not None else list(range(len(items)))
    if sorted(positions) != list(range(len(items))):
        raise ValueError("order must be a permutation of the item positions")
    done: dict[int, Any] = checkpoint.load() if checkpoint is not None else {}
    done = {i: r for i, r in done.items() if 0 <= i < len(items)}
    for i in sorted(done):
        if on_done:
            on_done(done[i])
    todo = [i for i in positions if i not in done]
    if todo:

        def finished(i: int, result: Any) -> None:
            if checkpoint is not None:
                checkpoint.record(i, result)
            if on_done:
                on_done(result)

        # results carry no position, so each job is wrapped: (position, item) in, (position, result) out
        wrapped = [(i, items[i]) for i in todo]
        results = executor.map(
            Batch(
                _Positioned(fn),
                wrapped,
                on_start=(lambda pair: on_start(pair[1])) if on_start else None,
                on_done=lambda pr: finished(pr[0], pr[1]),
                on_failure=(
                    (lambda pair, exc, what: (pair[0], on_failure(pair[1], exc, what)))
                    if on_failure
                    else None
                ),
                resources=resources,
            )
        )
        for i, result in results:
            done[i] = result
    if checkpoint is not None:
        checkpoint.finish()
    return [done[i] for i in range(len(items))]


class _Positioned:
    """``fn`` applied to the item of a ``(position, item)`` pair, keeping the position (picklable: it holds
    only the function's reference)."""

    def __init__(self, fn: Callable[[Any], Any]) -> None:
        self.ref = fn_ref(fn)

    def __call__(self, pair: tuple[int, Any]) -> tuple[int, Any]:
        i, item = pair
        return i, resolve_fn(self.ref)(item)
