"""The Ray backend's bookkeeping without Ray: an in-process stand-in for the few ``ray`` calls it makes.

``test_executor_ray.py`` runs a real cluster where the extra is installed; this file checks, everywhere,
what the backend does with the answers: results in item order, ``order`` as the submission order, the
hooks, the per-job resources, a lost job through ``on_failure`` or the job's own exception without it.
"""

from __future__ import annotations

import sys
import types
from typing import Any

import pytest

from devkit.workflow import executor
from devkit.workflow.executor import ray_backend


def _square(x: int) -> int:
    return x * x


def _fail_on_negative(x: int) -> int:
    if x < 0:
        raise ValueError(f"negative item {x}")
    return x


class _RayError(Exception):
    """Stand-in for ``ray.exceptions.RayError``."""


class _TaskError(_RayError):
    """Stand-in for ``ray.exceptions.RayTaskError``: the job's own exception as ``cause``."""

    def __init__(self, cause: BaseException) -> None:
        super().__init__(str(cause))
        self.cause = cause


class _Ref:
    def __init__(self, fn: Any, args: tuple) -> None:
        self.fn, self.args = fn, args


def _fake_ray(options_seen: list[dict[str, Any]]) -> types.ModuleType:
    """``ray`` as the backend uses it: remote tasks run when their result is fetched, one node."""
    ray = types.ModuleType("ray")
    ray.exceptions = types.SimpleNamespace(RayError=_RayError, RayTaskError=_TaskError)  # type: ignore[attr-defined]
    ray.init = lambda **kw: None  # type: ignore[attr-defined]
    ray.shutdown = lambda: None  # type: ignore[attr-defined]
    ray.cluster_resources = lambda: {"CPU": 2}  # type: ignore[attr-defined]
    ray.get_runtime_context = lambda: types.SimpleNamespace(get_node_id=lambda: "node-1")  # type: ignore[attr-defined]
    ray.cancel = lambda *a, **k: None  # type: ignore[attr-defined]

    def remote(fn: Any) -> Any:
        class Task:
            def options(self, **kw: Any) -> Task:
                options_seen.append(kw)
                return self

            def remote(self, *args: Any) -> _Ref:
                return _Ref(fn, args)

        return Task()

    def get(ref: _Ref) -> Any:
        try:
            return ref.fn(*ref.args)
        except Exception as exc:
            raise _TaskError(exc) from exc

    ray.remote = remote  # type: ignore[attr-defined]
    ray.get = get  # type: ignore[attr-defined]
    ray.wait = lambda refs, num_returns=1, timeout=None: (refs[:1], refs[1:])  # type: ignore[attr-defined]
    return ray


@pytest.fixture
def ray_executor(monkeypatch: pytest.MonkeyPatch) -> tuple[ray_backend.RayExecutor, list[dict[str, Any]]]:
    seen: list[dict[str, Any]] = []
    fake = _fake_ray(seen)
    monkeypatch.setitem(sys.modules, "ray", fake)
    monkeypatch.setattr(ray_backend, "import_ray", lambda: fake)
    return ray_backend.RayExecutor("local", local_cpus=2), seen


def test_results_in_item_order_hooks_and_resources(ray_executor: Any) -> None:
    ex, seen = ray_executor
    started: list[int] = []
    done: list[int] = []
    out = executor.run_jobs(
        _square,
        [3, 1, 2],
        jobs=ex,
        order=[2, 0, 1],
        on_start=started.append,
        on_done=done.append,
        resources={"neuron_cores": 1},
    )
    assert out == [9, 1, 4]
    assert started == [2, 3, 1] and done == [4, 9, 1]  # submitted and finished in ``order``
    assert seen[-1]["resources"] == {"neuron_cores": 1} and seen[-1]["num_cpus"] == 0
    assert ex.nodes["node-1"] == 3


def test_a_failed_job_goes_through_on_failure_or_raises_its_own_error(ray_executor: Any) -> None:
    ex, seen = ray_executor
    out = executor.run_jobs(
        _fail_on_negative, [1, -1], jobs=ex, on_failure=lambda item, exc, what: f"{item}: {what}"
    )
    assert out == [1, "-1: worker failed"]
    assert seen[-1]["num_cpus"] == 1 and seen[-1]["resources"] is None
    with pytest.raises(ValueError, match="negative item -1"):
        executor.run_jobs(_fail_on_negative, [1, -1], jobs=ex)
