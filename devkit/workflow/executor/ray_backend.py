"""The Ray backend: each job a Ray task on an existing cluster (``--executor ray``).

What a task carries: the job function's reference (``module:function``), the job's item (plain data:
kernel references, shapes, dtypes, targets), the driver's working directory and ``PYTHONPATH``.  The
worker changes to that directory when it exists there (a shared file system; otherwise the project's
declared names must be importable on the worker), imports the function and runs it with
single-threaded BLAS.  Results are pickled back, the same objects a local run returns.

Fault handling is Ray's: a task lost with its worker or node is retried up to :data:`MAX_RETRIES` times
(``max_retries``; the job functions return errors of the kernel as values, so only lost workers are
retried); a job still lost after that reaches ``on_failure`` as ``"worker failed"`` with Ray's error.
Ctrl-C (or any error in a callback) cancels every outstanding task before it propagates.
"""

from __future__ import annotations

import os
from collections import Counter
from typing import Any

from devkit.workflow.executor.batch import Batch
from devkit.workflow.executor.refs import ExecutorError

#: Times Ray re-runs a task whose worker or node died (then the job is reported as failed).
MAX_RETRIES = 3
#: Object-store size of a one-machine Ray started with ``--ray-address local`` (bytes).
LOCAL_OBJECT_STORE_BYTES = 200_000_000
#: Thread-count variables pinned to 1 on the workers (one core per task), as in the local pool.
_THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "DEVKIT_BLAS_THREADS")


def import_ray() -> Any:
    """The ``ray`` module; :class:`ExecutorError` naming the extra when it is not installed."""
    try:
        import ray
    except ImportError:
        raise ExecutorError(
            "--executor ray needs Ray: install the extra with pip install 'neuronmm-devkit[ray]'"
        ) from None
    return ray


def _call(job: Any, item: Any, cwd: str) -> tuple[Any, str]:
    """The task body on a worker: (result of the job, id of the node it ran on).  ``job`` is a
    ``module:function`` reference or a picklable wrapper holding one (``run_jobs``' positioned job)."""
    import ray

    from devkit.workflow.executor.refs import resolve_fn

    if cwd and os.path.isdir(cwd) and os.getcwd() != cwd:
        os.chdir(cwd)
    fn = resolve_fn(job) if isinstance(job, str) else job
    return fn(item), ray.get_runtime_context().get_node_id()


class RayExecutor:
    """Jobs as tasks on the Ray cluster at ``address`` (``local``: a one-machine Ray in this process with
    ``local_cpus`` CPUs)."""

    name = "ray"

    def __init__(
        self, address: str, *, local_cpus: int | None = None, max_retries: int = MAX_RETRIES
    ) -> None:
        self.ray = import_ray()
        self.address = address
        self.local_cpus = local_cpus
        self.max_retries = max_retries
        self.nodes: Counter[str] = Counter()  # finished jobs per node id
        self._connected = False

    def connect(self) -> None:
        """Join the cluster (once); a bad address is an :class:`ExecutorError` naming it."""
        if self._connected:
            return
        ray = self.ray
        env = {var: "1" for var in _THREAD_VARS}
        pythonpath = os.environ.get("PYTHONPATH")
        if pythonpath:
            env["PYTHONPATH"] = os.pathsep.join(os.path.abspath(p) for p in pythonpath.split(os.pathsep) if p)
        kwargs: dict[str, Any] = {
            "runtime_env": {"env_vars": env},
            "log_to_driver": False,
            "configure_logging": False,
        }
        if self.address == "local":
            kwargs.update(
                num_cpus=self.local_cpus or None,
                include_dashboard=False,
                object_store_memory=LOCAL_OBJECT_STORE_BYTES,
            )
        else:
            kwargs["address"] = self.address
        try:
            ray.init(**kwargs)
        except (ConnectionError, ValueError, RuntimeError) as exc:
            raise ExecutorError(f"cannot connect to the Ray cluster at {self.address!r}: {exc}") from None
        self._connected = True

    def cpus(self) -> int:
        """CPUs of the cluster now (at least 1)."""
        self.connect()
        return max(1, int(self.ray.cluster_resources().get("CPU", 1)))

    def describe(self) -> str:
        where = "a one-machine Ray" if self.address == "local" else f"the Ray cluster at {self.address}"
        return f"{where} ({self.cpus()} CPUs)"

    def map(self, batch: Batch) -> list[Any]:
        from devkit.workflow.executor.refs import fn_ref

        ray = self.ray
        self.connect()
        items = batch.items
        # a plain function goes by reference; run_jobs' positioned wrapper holds one and is shipped as is
        job: Any = batch.fn if hasattr(batch.fn, "ref") else fn_ref(batch.fn)
        positions = batch.positions()
        resources = dict(batch.resources or {})
        num_cpus = resources.pop("CPU", 0 if resources else 1)
        task = ray.remote(_call).options(
            num_cpus=num_cpus,
            resources=resources or None,
            max_retries=self.max_retries,
            retry_exceptions=False,
        )
        cwd = os.getcwd()
        # keep the cluster busy but not flooded: twice its CPUs in flight (re-read as nodes come and go)
        window = 2 * self.cpus()
        pending: dict[Any, int] = {}
        results: dict[int, Any] = {}
        queue = list(positions)

        def submit() -> None:
            while queue and len(pending) < window:
                i = queue.pop(0)
                pending[task.remote(job, items[i], cwd)] = i
                if batch.on_start:
                    batch.on_start(items[i])

        try:
            submit()
            while pending:
                ready, _ = ray.wait(list(pending), num_returns=1, timeout=1.0)
                for obj in ready:
                    i = pending.pop(obj)
                    try:
                        result, node = ray.get(obj)
                    except ray.exceptions.RayError as exc:  # lost with its worker after the retries
                        if batch.on_failure is None:
                            cause = getattr(exc, "cause", None)  # the job's own exception, as locally
                            if isinstance(exc, ray.exceptions.RayTaskError) and isinstance(cause, Exception):
                                raise cause from None
                            raise ExecutorError(f"job {items[i]!r} failed on the Ray cluster: {exc}") from exc
                        result = batch.on_failure(items[i], exc, "worker failed")
                    else:
                        self.nodes[node] += 1
                    results[i] = result
                    if batch.on_done:
                        batch.on_done(result)
                if not ready:
                    window = 2 * self.cpus()
                submit()
        except BaseException:  # Ctrl-C or a callback's error: cancel what is still queued or running
            for obj in pending:
                try:
                    ray.cancel(obj, force=True)
                except Exception:  # already finished or its node is gone
                    pass
            raise
        return [results[i] for i in range(len(items))]

    def close(self) -> None:
        if self._connected:
            self.ray.shutdown()
            self._connected = False
