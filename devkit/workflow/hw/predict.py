"""The calibration bridge: results-store measurements and cost-model predictions of the same calls.

:func:`store_measurements` turns latency records into :class:`devkit.cost.calibrate.Measurement` values;
:func:`trace_predictor` records each measured call's instruction trace once and reschedules it under
candidate parameters (us), which is what ``devkit calibrate`` fits.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from devkit.workflow.hw.store import StoreError, shape_key


def store_measurements(records: Iterable[Mapping[str, Any]], include_fake: bool = False) -> list[Any]:
    """Latency records -> :class:`devkit.cost.calibrate.Measurement` (one per kernel, shape, dtype, blocks
    and target: the median of the runs' P50).  Fake-backend records are left out unless asked for."""
    from devkit.cost.calibrate import Measurement

    groups: dict[tuple, list[Mapping[str, Any]]] = {}
    for r in records:
        if r["kind"] != "latency" or (r["backend"] == "fake" and not include_fake) or not r.get("target"):
            continue
        blocks = dict(r.get("blocks") or {})
        key = (r["kernel"], shape_key(r["shape"]), r["dtype"], shape_key(blocks), r["target"])
        groups.setdefault(key, []).append(r)
    out = []
    for (kernel, skey, dtype, bkey, target), runs in sorted(groups.items()):
        first = runs[0]
        mid = f"{kernel}[{skey}|{dtype}" + (f"|{bkey}" if bkey else "") + f"]@{target}"
        out.append(
            Measurement(
                kernel=kernel,
                target=target,
                measured_us=float(statistics.median(r["measured_us"]["p50"] for r in runs)),
                shape=skey,
                dtype=dtype,
                id=mid,
                args={"shape": dict(first["shape"]), "blocks": dict(first.get("blocks") or {})},
                source=f"results store: median P50 of {len(runs)} run(s) on "
                f"{first.get('instance_type', '?')}",
            )
        )
    return out


def trace_of(
    kernel: str, args: Mapping[str, Any], dtype: str | None, target: str, registry: Any = None
) -> Any:
    """Record the instruction trace of one measured call (cost-only) so it can be rescheduled cheaply.

    ``args`` is either ``{"shape": {...}, "blocks": {...}}`` for a registry kernel, or
    ``{arg name: "DTYPE[D0,D1,...]", ...}`` (in argument order) with ``kernel`` a registry name or
    ``FILE.py:FUNCTION``.
    """
    from devkit.nki.runner import TensorSpec, run_kernel
    from devkit.sim.options import SimOptions
    from devkit.trace import Trace

    blocks: dict[str, Any] = {}
    if "shape" in args:
        if registry is None:
            from kernels import registry
        spec = registry.get(kernel)
        obj = spec.kernel()
        specs = list(spec.arg_specs(dict(args["shape"]), dtype or "bfloat16"))
        blocks = dict(args.get("blocks") or {})
    else:
        from devkit.workflow.kernel_ref import parse_arg_spec

        if ":" in kernel:
            from devkit.workflow.kernel_ref import load_kernel

            obj = load_kernel(kernel)
        else:
            if registry is None:
                from kernels import registry
            obj = registry.get(kernel).kernel()
        specs = []
        for value in args.values():
            dt, dims = parse_arg_spec(str(value))
            specs.append(TensorSpec(dims, dt))
    func = getattr(obj, "func", obj)
    grid = getattr(obj, "grid", None)
    trace = Trace()
    run_kernel(
        func, tuple(specs), blocks, grid=grid, target=target, options=SimOptions(numerics=False), sink=trace
    )
    return trace


def trace_predictor(measurements: Sequence[Any], registry: Any = None) -> Callable[[Any], dict[str, float]]:
    """``predict(params) -> {measurement id: us}`` that reschedules traces recorded once per measurement."""
    from devkit.cost.scheduler import schedule

    traces = {}
    for m in measurements:
        if m.metric != "latency_us":
            raise StoreError(
                f"{m.id}: only latency_us measurements can be predicted from kernel traces (got {m.metric})"
            )
        if not m.args:
            raise StoreError(
                f"{m.id}: no 'args' to rebuild the call (need shape/blocks or DTYPE[dims] per argument)"
            )
        traces[m.id] = (m.target, trace_of(m.kernel, m.args, m.dtype, m.target, registry))

    def predict(params: Any) -> dict[str, float]:
        return {
            mid: schedule(tr.instrs, target, tr.stats, params).latency_us
            for mid, (target, tr) in traces.items()
        }

    return predict
