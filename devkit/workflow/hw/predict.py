"""The calibration bridge: results-store measurements and cost-model predictions of the same calls.

:func:`store_measurements` turns latency records into :class:`devkit.cost.calibrate.Measurement` values;
:func:`trace_predictor` records each measured call's instruction trace once and reschedules it under
candidate parameters (us); :func:`gather` reads measurements from a store or a JSON-lines file and
:func:`fit_target` fits the cost model's parameters to one target's measurements (``devkit calibrate``).
"""

from __future__ import annotations

import contextlib
import json
import statistics
import tempfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from devkit.workflow.hw.store import ResultsStore, StoreError, read_jsonl, shape_key


def store_measurements(records: Iterable[Mapping[str, Any]], include_fake: bool = False) -> list[Any]:
    """Latency records -> :class:`devkit.cost.calibrate.Measurement` (one per kernel, shape, dtype, blocks
    and target: the median of the runs' P50).  Fake-backend records are left out unless asked for, and so
    are host-clock latencies (Beta 2's, which include the launch and copies: not device time)."""
    from devkit.cost.calibrate import Measurement

    groups: dict[tuple, list[Mapping[str, Any]]] = {}
    for r in records:
        if r["kind"] != "latency" or (r["backend"] == "fake" and not include_fake) or not r.get("target"):
            continue
        if r.get("latency_clock", "neuron-bench") == "host":
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
    if registry is None:
        from devkit import project
        from devkit.workflow.catalog import ProjectKernels

        registry = ProjectKernels(project.find().root)  # declared names and FILE.py:KERNEL, like promote
    if "shape" in args:
        spec = registry.get(kernel)
        obj = spec.kernel_object()
        specs = list(spec.arg_specs(dict(args["shape"]), dtype or "bfloat16"))
        blocks = dict(args.get("blocks") or {})
    else:
        from devkit.workflow.kernel_ref import parse_arg_spec

        if ":" in kernel:
            from devkit.workflow.kernel_ref import load_kernel

            obj = load_kernel(kernel)
        else:
            obj = registry.get(kernel).kernel_object()
        specs = []
        for value in args.values():
            dt, dims = parse_arg_spec(str(value))
            specs.append(TensorSpec(dims, dt))
    func = getattr(obj, "func", obj)
    grid = getattr(obj, "grid", None)
    trace = Trace()
    run_kernel(
        func,
        tuple(specs),
        blocks,
        grid=grid,
        target=target,
        options=SimOptions(numerics=False),
        sink=trace,
        host_outputs=False,
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


# --- calibration from measurements ---------------------------------------------------------------


class CalibrationInputError(ValueError):
    """Bad calibration input: a missing or unreadable measurement source (reported without a traceback)."""


def is_store_file(path: Path) -> bool:
    """Whether a JSON-lines file holds results-store records (rather than measurement records)."""
    for line in path.read_text(encoding="utf-8").splitlines():
        text = line.strip()
        if text and not text.startswith("#"):
            try:
                first = json.loads(text)
            except json.JSONDecodeError:
                return False
            return isinstance(first, dict) and "schema" in first and "kind" in first
    return False


def gather(
    source: str,
    include_fake: bool,
    warn: Callable[[str], None],
    *,
    percentile: int = 50,
    profile_call: Mapping[str, Any] | None = None,
) -> list[Any]:
    """Latency measurements from a store directory, a JSON-lines file of store or measurement records,
    or an SDK capture (:mod:`devkit.workflow.hw.imports`: ``nki.benchmark`` records at ``percentile``, or
    a profile summary of the call ``profile_call`` = ``{"kernel", "target", "args", "dtype"}``); ``warn``
    hears about skipped records."""
    from devkit.cost.calibrate import MeasurementError, load_measurements
    from devkit.workflow.hw import imports

    path = Path(source)
    if path.is_dir():
        read = ResultsStore(path).read()
        for d in read.damaged:
            warn(f"unreadable record skipped: {d}")
        return store_measurements(read.records, include_fake)
    if not path.is_file():
        raise CalibrationInputError(f"no such file or directory: {source}")
    kind = imports.detect(path)
    try:
        if kind == "benchmark":
            return imports.read_benchmark(path, percentile)
        if kind == "profile":
            if not profile_call or not profile_call.get("kernel") or not profile_call.get("target"):
                raise CalibrationInputError(
                    f"{source} is a profile summary, which does not name the call: give --kernel "
                    "(FILE.py:KERNEL or a registry name), --arg DTYPE[dims] per argument and --target"
                )
            return imports.read_profile(
                path,
                kernel=profile_call["kernel"],
                target=profile_call["target"],
                args=profile_call.get("args") or {},
                dtype=profile_call.get("dtype"),
            )
    except (imports.ImportFormatError, MeasurementError) as exc:
        raise CalibrationInputError(str(exc)) from None
    if is_store_file(path):
        records, damaged = read_jsonl(path)
        for d in damaged:
            warn(f"unreadable record skipped: {d}")
        return store_measurements(records, include_fake)
    try:
        ms = load_measurements(path)
    except MeasurementError as exc:
        raise CalibrationInputError(str(exc)) from None
    kept = [m for m in ms if m.metric == "latency_us"]
    for m in ms:
        if m.metric != "latency_us":
            warn(f"{m.id}: metric {m.metric} is not a kernel latency; skipped")
    return kept


def _write_measurements(ms: list[Any], path: Path) -> None:
    with path.open("w", encoding="utf-8") as f:
        for m in ms:
            f.write(
                json.dumps(
                    {
                        "kernel": m.kernel,
                        "target": m.target,
                        "measured_us": m.measured_us,
                        "shape": m.shape,
                        "dtype": m.dtype,
                        "args": dict(m.args or {}),
                        "id": m.id,
                        "metric": m.metric,
                        "source": m.source,
                    }
                )
                + "\n"
            )


def fit_target(
    group: Sequence[Any],
    target: str,
    names: Sequence[str],
    *,
    before: Any,
    params_path: Path,
    write: bool,
    max_evaluations: int,
    status: Callable[[str], AbstractContextManager[Any]] | None = None,
) -> dict[str, Any]:
    """Fit ``names`` to the measurements of one target; the before/after figures as a JSON-ready dict.

    ``before`` is the target's current :class:`~devkit.cost.params.Params`; ``write`` stores the fit as
    per-target overrides in ``params_path``; ``status(text)`` (e.g. a rich console's ``status``) wraps the
    slow steps.  Latencies in us.
    """
    from devkit.cost.calibrate import calibrate_file

    def step(text: str) -> AbstractContextManager[Any]:
        return status(text) if status is not None else contextlib.nullcontext()

    with step(f"tracing {len(group)} measured call(s) for {target}"):
        predict = trace_predictor(group)
    with tempfile.TemporaryDirectory() as tmp:
        mpath = Path(tmp) / "measurements.jsonl"
        _write_measurements(group, mpath)
        with step(f"fitting {len(names)} parameter(s) on {target}"):
            result, _ = calibrate_file(
                mpath,
                predict,
                target,
                names=tuple(names),
                params_path=params_path,
                write=write,
                per_target=True,
                max_evaluations=max_evaluations,
            )
    predicted_before = predict(before)
    return {
        "target": target,
        "loss_before": result.loss_before,
        "loss_after": result.loss_after,
        "evaluations": result.evaluations,
        "params": {n: {"before": getattr(before, n), "after": v} for n, v in result.fitted.items()},
        "measurements": [
            {
                "id": m.id,
                "measured_us": m.measured_us,
                "predicted_before_us": predicted_before[m.id],
                "predicted_after_us": result.predicted_us[m.id],
            }
            for m in group
        ],
    }
