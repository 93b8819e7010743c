"""Promoted cases: what the generated tests in ``hw_tests/`` run, check and record.

A :class:`Case` is one registry kernel on a named shape and dtype with pinned blocks and the latency the
cost model predicted at promotion (us).  The device is reached through a runner of the kernel's NKI
generation (:mod:`devkit.workflow.hw.runners`).  :func:`prepare` builds the kernel and its seeded inputs,
:func:`check_numerics` compares an output with the registry reference, :func:`judge_latency` compares a
measured latency with the previous measurement of the same case (the regression check) and with the
model's prediction (reported as model error, never a failure), and :func:`numerics_record` /
:func:`latency_record` make the store records of one run.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from devkit.workflow.hw.host import HostContext
from devkit.workflow.hw.runners import latency_percentiles
from devkit.workflow.hw.store import ResultsStore, make_record, shape_key

__all__ = ["Case", "latency_percentiles", "prepare", "run_latency", "run_numerics"]


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


def prepare(registry: Any, case: Case, seed: int = 0, generation: str | None = None) -> Prepared:
    """Kernel (as bound by the SDK that imported ``kernels``) and the registry's seeded inputs; with
    ``generation`` (the runner's), a kernel of the other NKI generation is refused before it is run."""
    spec = registry.get(case.kernel)
    declared = getattr(spec, "generation", "beta1")
    if generation is not None and declared != generation:
        raise ValueError(
            f"{case.kernel} is a {declared} kernel but the test runs it as {generation}: re-promote it "
            f"(`devkit promote {case.kernel}`)"
        )
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


def case_record(ctx: HostContext, case: Case, kind: str, **fields: Any) -> dict[str, Any]:
    """Store record of one run of ``case`` (its kernel, shape, dtype and blocks; ``fields`` add the
    figures of the ``kind``)."""
    return make_record(
        ctx, kind=kind, kernel=case.kernel, shape=case.shape, dtype=case.dtype, blocks=case.blocks, **fields
    )


def numerics_record(
    ctx: HostContext, case: Case, check: NumericsCheck, generation: str = "beta1"
) -> dict[str, Any]:
    """Store record of one numerics run."""
    err = check.max_error if math.isfinite(check.max_error) else None
    return case_record(
        ctx,
        case,
        "numerics",
        passed=check.passed,
        max_error=err,
        tolerance=check.tolerance,
        generation=generation,
    )


@dataclass(frozen=True)
class LatencyJudgement:
    """A measured P50 against the previous measurement of the same case and against the model (us).

    ``regression`` is true when the P50 exceeds the previous P50 by more than ``threshold`` (a
    fraction); without a previous measurement there is nothing to regress from.  ``model_ratio`` is
    P50 / predicted; ``model_note`` says how far the model is off when that is beyond ``slack``
    (model error: it is reported and recorded, it does not fail the test).
    """

    p50_us: float
    previous_p50_us: float | None
    previous_id: str | None
    threshold: float
    predicted_us: float | None
    slack: float
    latency_clock: str = "neuron-bench"

    @property
    def change(self) -> float | None:
        """Relative change of the P50 against the previous measurement (0.1 = 10 % slower)."""
        if self.previous_p50_us is None or self.previous_p50_us <= 0:
            return None
        return self.p50_us / self.previous_p50_us - 1.0

    @property
    def regression(self) -> bool:
        c = self.change
        return c is not None and c > self.threshold

    @property
    def model_ratio(self) -> float | None:
        return self.p50_us / self.predicted_us if self.predicted_us else None

    @property
    def message(self) -> str:
        """One line for the test report."""
        if self.change is None:
            base = f"P50 {self.p50_us:.1f} us (first measurement of this case here: baseline recorded)"
        else:
            base = (
                f"P50 {self.p50_us:.1f} us vs previous {self.previous_p50_us:.1f} us ({self.change:+.1%}; "
                f"regression threshold +{self.threshold:.0%})"
            )
        return base + (f"; {self.model_note}" if self.model_note else "")

    @property
    def model_note(self) -> str:
        """Model error beyond the slack ("" when within it or without a prediction)."""
        r = self.model_ratio
        if r is None or abs(r - 1.0) <= self.slack:
            return ""
        if self.latency_clock == "host":
            return (
                f"measured/predicted = {r:.2f} (predicted {self.predicted_us:.1f} us device time, slack "
                f"±{self.slack:.0%}); Beta-2 latencies are host wall clock (launch and copies included), "
                "an upper bound of the device time: not a calibration measurement"
            )
        return (
            f"model error: measured/predicted = {r:.2f} (predicted {self.predicted_us:.1f} us, slack "
            f"±{self.slack:.0%}); recalibrate with `devkit calibrate --from results/`"
        )


def judge_latency(
    store: Any,
    ctx: HostContext,
    case: Case,
    measured: Mapping[str, float],
    predicted_us: float | None,
    slack: float,
    threshold: float,
    latency_clock: str = "neuron-bench",
) -> LatencyJudgement:
    """Judge ``measured`` (percentiles, us) against the latest earlier latency record in ``store`` of the
    same kernel, shape, dtype, blocks, target, backend and clock, and against ``predicted_us``."""
    previous = None
    for r in store.read(case.kernel).records:
        if (
            r["kind"] == "latency"
            and r["shape"] == dict(case.shape)
            and r["dtype"] == case.dtype
            and dict(r.get("blocks") or {}) == dict(case.blocks)
            and r["target"] == ctx.target
            and r["backend"] == ctx.backend
            and r.get("latency_clock", "neuron-bench") == latency_clock
        ):
            previous = r  # file order is time order: keep the last
    return LatencyJudgement(
        p50_us=float(measured["p50"]),
        previous_p50_us=float(previous["measured_us"]["p50"]) if previous else None,
        previous_id=previous.get("id") if previous else None,
        threshold=threshold,
        predicted_us=predicted_us,
        slack=slack,
        latency_clock=latency_clock,
    )


def latency_record(
    ctx: HostContext,
    case: Case,
    measured: Mapping[str, float],
    predicted_us: float | None,
    slack: float,
    warmup: int,
    iters: int,
    judgement: LatencyJudgement | None = None,
    runner: Any = None,
) -> dict[str, Any]:
    """Store record of one benchmark run (with the regression and model-error figures when judged; with
    the runner's ``generation`` and ``latency_clock``, default Beta 1's ``neuron-bench``)."""
    extra: dict[str, Any] = {
        "generation": getattr(runner, "generation", "beta1"),
        "latency_clock": getattr(runner, "latency_clock", "neuron-bench"),
    }
    if judgement is not None:
        extra |= {
            "previous_p50_us": judgement.previous_p50_us,
            "previous_id": judgement.previous_id,
            "regression_threshold": judgement.threshold,
            "regression": judgement.regression,
            "model_ratio": judgement.model_ratio,
        }
    return case_record(
        ctx,
        case,
        "latency",
        measured_us=dict(measured),
        predicted_us=predicted_us,
        slack=slack,
        warmup=warmup,
        iters=iters,
        **extra,
    )


def run_numerics(
    runner: Any, registry: Any, ctx: HostContext, store: ResultsStore, case: Case, *, seed: int
) -> NumericsCheck:
    """Run one case on the device (``runner``: :mod:`devkit.workflow.hw.runners`), compare it with the
    registry reference, append the record, return the check."""
    run = prepare(registry, case, seed=seed, generation=runner.generation)
    check = check_numerics(registry, case, run.inputs, runner.run(run.kernel, run.inputs, case.blocks))
    store.append(numerics_record(ctx, case, check, runner.generation))
    return check


def run_latency(
    runner: Any,
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
    """Time one case with the runner (percentiles, us), judge its P50, append the record;
    ``slack=None``: the case's own."""
    run = prepare(registry, case, seed=seed, generation=runner.generation)
    measured = runner.benchmark(run.kernel, run.inputs, case.blocks, warmup=warmup, iters=iters)
    predicted = case.predicted_us.get(ctx.target) if ctx.target else None
    slack = case.slack if slack is None else slack
    verdict = judge_latency(store, ctx, case, measured, predicted, slack, threshold, runner.latency_clock)
    store.append(latency_record(ctx, case, measured, predicted, slack, warmup, iters, verdict, runner))
    return verdict
