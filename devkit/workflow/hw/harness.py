"""Promoted cases: what the generated tests in ``hw_tests/`` run, check and record.

A :class:`Case` is one registry kernel on a named shape and dtype with pinned blocks and the latency the
cost model predicted at promotion (us).  :func:`prepare` builds the kernel and its seeded inputs,
:func:`check_numerics` compares an output with the registry reference, and :func:`numerics_record` /
:func:`latency_record` make the store records of one run.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from devkit.workflow.hw.host import HostContext
from devkit.workflow.hw.store import PERCENTILES, make_record, shape_key


def latency_percentiles(benchmark_result: Any) -> dict[str, float]:
    """``{"p0": .., "p50": .., "p99": ..}`` in us from an SDK ``benchmark_result``."""
    lat = benchmark_result.nc_latency
    return {f"p{p}": float(lat.get_latency_percentile(p)) for p in PERCENTILES}


@dataclass(frozen=True)
class Case:
    """One promoted hardware case: a registry kernel on a named shape and dtype with pinned blocks.

    ``predicted_us`` maps a cost-model target to the latency predicted at promotion time (us);
    ``slack`` is the allowed relative deviation of the measured P50 from it.
    """

    kernel: str
    shape: Mapping[str, int]
    dtype: str
    blocks: Mapping[str, int] = field(default_factory=dict)
    predicted_us: Mapping[str, float] = field(default_factory=dict)
    slack: float = 0.25

    def test_id(self) -> str:
        """``S1024-H8192-r4096-N16384-bfloat16`` (pytest ids)."""
        return "-".join([*(f"{k}{v}" for k, v in self.shape.items()), self.dtype])


@dataclass(frozen=True)
class Prepared:
    """The kernel object and its inputs for one case."""

    kernel: Any
    inputs: tuple[Any, ...]


def prepare(registry: Any, case: Case, seed: int = 0) -> Prepared:
    """Kernel (as bound by the SDK that imported ``kernels``) and the registry's seeded inputs."""
    spec = registry.get(case.kernel)
    return Prepared(spec.kernel_object(), tuple(spec.make_inputs(dict(case.shape), case.dtype, seed)))


@dataclass(frozen=True)
class NumericsCheck:
    """Output against the registry reference: normalised max error ``max|out-ref|/max|ref|``."""

    passed: bool
    max_error: float
    tolerance: float
    message: str


def check_numerics(registry: Any, case: Case, inputs: Sequence[Any], output: Any) -> NumericsCheck:
    """Compare a kernel output with the registry's reference within its tolerance for the dtype."""
    import numpy as np

    spec = registry.get(case.kernel)
    tol = float(spec.tolerance(case.dtype))
    where = f"{case.kernel} [{shape_key(case.shape)}] {case.dtype}"
    out = np.asarray(output)
    ref = spec.reference(*inputs)
    if out.shape != ref.shape:
        return NumericsCheck(
            False, math.inf, tol, f"{where}: output shape {out.shape}, reference {ref.shape}"
        )
    if out.dtype != np.asarray(inputs[0]).dtype:
        return NumericsCheck(
            False,
            math.inf,
            tol,
            f"{where}: output dtype {out.dtype}, expected the input dtype {inputs[0].dtype}",
        )
    err = float(registry.max_error(out, ref))
    passed = err <= tol
    verdict = "within" if passed else "EXCEEDS"
    return NumericsCheck(passed, err, tol, f"{where}: max error {err:.3g} {verdict} the tolerance {tol:.3g}")


def numerics_record(ctx: HostContext, case: Case, check: NumericsCheck) -> dict[str, Any]:
    """Store record of one numerics run."""
    err = check.max_error if math.isfinite(check.max_error) else None
    return make_record(
        ctx,
        kind="numerics",
        kernel=case.kernel,
        shape=case.shape,
        dtype=case.dtype,
        blocks=case.blocks,
        passed=check.passed,
        max_error=err,
        tolerance=check.tolerance,
    )


def latency_record(
    ctx: HostContext,
    case: Case,
    measured: Mapping[str, float],
    predicted_us: float | None,
    slack: float,
    warmup: int,
    iters: int,
) -> dict[str, Any]:
    """Store record of one benchmark run."""
    return make_record(
        ctx,
        kind="latency",
        kernel=case.kernel,
        shape=case.shape,
        dtype=case.dtype,
        blocks=case.blocks,
        measured_us=dict(measured),
        predicted_us=predicted_us,
        slack=slack,
        warmup=warmup,
        iters=iters,
    )
