"""The public face of the hardware stage for the generated tests in ``hw_tests/`` (and their conftest).

``hw_tests/test_<kernel>.py`` (rendered from ``devkit/templates/hw_test.py.j2`` by ``devkit promote``)
and ``hw_tests/conftest.py`` import only this module, so its names are a stable interface even when the
implementation under :mod:`devkit.workflow.hw` moves.  Everything else in the kit imports those modules
directly.  The record schema of the results store is documented in :mod:`devkit.workflow.hw.store`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from devkit.errors import HardwareUnavailableError
from devkit.project import find as find_project
from devkit.workflow.hw import harness as _h
from devkit.workflow.hw.fake import FakeNki, fake_nki
from devkit.workflow.hw.harness import Case, LatencyJudgement, NumericsCheck
from devkit.workflow.hw.host import HostContext, check_requirements, load_sdk, sdk_version
from devkit.workflow.hw.store import ResultsStore

__all__ = ["Case", "FakeNki", "HardwareUnavailableError", "HostContext", "ResultsStore", "check_requirements"]
__all__ += ["fake_nki", "find_project", "load_sdk", "project_kernels", "run_latency", "run_numerics"]
__all__ += ["sdk_version"]


def run_numerics(
    nki: Any, registry: Any, ctx: HostContext, store: ResultsStore, case: Case, *, seed: int
) -> NumericsCheck:
    """``nki.baremetal`` one case, compare it with the registry reference, append the record, return the check."""
    run = _h.prepare(registry, case, seed=seed)
    check = _h.check_numerics(
        registry, case, run.inputs, nki.baremetal(run.kernel)(*run.inputs, **case.blocks)
    )
    store.append(_h.numerics_record(ctx, case, check))
    return check


def run_latency(
    nki: Any,
    registry: Any,
    ctx: HostContext,
    store: ResultsStore,
    case: Case,
    *,
    seed: int,
    warmup: int,
    iters: int,
    slack: float | None,
    threshold: float,
) -> LatencyJudgement:
    """``nki.benchmark`` one case, judge its P50 (us), append the record; ``slack=None``: the case's own."""
    run = _h.prepare(registry, case, seed=seed)
    bench = nki.benchmark(warmup=warmup, iters=iters)(run.kernel)
    bench(*run.inputs, **case.blocks)
    measured = _h.latency_percentiles(bench.benchmark_result)
    predicted = case.predicted_us.get(ctx.target) if ctx.target else None
    slack = case.slack if slack is None else slack
    verdict = _h.judge_latency(store, ctx, case, measured, predicted, slack, threshold)
    store.append(_h.latency_record(ctx, case, measured, predicted, slack, warmup, iters, verdict))
    return verdict


def project_kernels(root: str | Path) -> Any:
    """The kernels the project at ``root`` declares, plus the kit's (``get(ref)``, ``max_error``)."""
    from devkit.workflow.catalog import ProjectKernels

    return ProjectKernels(root)
