"""Fit the calibrated parameters (``params.toml``) to measured latencies.

Measurements file format (JSON lines, one object per line; blank lines and lines starting with
``#`` are ignored)::

    {"kernel": "nki_matmul_tiled_", "target": "trn1", "measured_us": 51800.0,
     "shape": "lhsT[8192,4096] @ rhs[8192,8192]", "dtype": "bfloat16",
     "args": {"lhsT": "bfloat16[8192,4096]", "rhs": "bfloat16[8192,8192]"},
     "id": "mmt_tiled_trn1", "metric": "latency_us", "source": "MMT ..."}

Required: ``kernel`` (str), ``target`` (str), and ``measured_us`` or ``p50_us`` (number > 0, us).
Optional: ``shape``, ``dtype``, ``args`` (whatever the prediction callback needs to rebuild the
call), ``id`` (default ``"<kernel>@<target>"`` plus ``[shape]`` when given), ``metric`` (what was
measured: ``latency_us`` default, ``dma_engine_us``, ``initiation_interval_us``) and ``source``.

Fitting: the caller supplies ``predict(params) -> {measurement id: predicted us}`` (the simulator
runs the kernels through the scheduler with those parameters).  :func:`fit` minimises the mean
squared log error ``mean((ln predicted - ln measured)^2)`` over the chosen parameters (each inside
its ``bounds`` from ``params.toml``) with a deterministic Nelder-Mead (:mod:`devkit.cost.nelder_mead`).
:func:`calibrate_file` wires a measurements file, the fit and the rewrite of ``params.toml``
(provenance of untouched entries is preserved; fitted entries get ``fitted_from`` = measurement ids,
``fit_date`` and ``method = "least-squares"``).
"""

from __future__ import annotations

import datetime
import json
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from devkit.cost.nelder_mead import minimize
from devkit.cost.params import PARAMS_PATH, Params, ParamSet, load_params_file, save_params
from devkit.jsondict import pick

METRICS = ("latency_us", "dma_engine_us", "initiation_interval_us")
Predict = Callable[[Params], Mapping[str, float]]


class MeasurementError(ValueError):
    """A measurements file or record is malformed."""


@dataclass(frozen=True)
class Measurement:
    """One measured figure (us) of one kernel call on one target."""

    kernel: str
    target: str
    measured_us: float
    shape: str | None = None
    dtype: str | None = None
    args: Mapping[str, Any] | None = field(default=None, compare=False)
    id: str = ""
    metric: str = "latency_us"
    source: str = ""

    def __post_init__(self) -> None:
        if not self.id:
            suffix = f"[{self.shape}]" if self.shape else ""
            object.__setattr__(self, "id", f"{self.kernel}{suffix}@{self.target}")
        value = self.measured_us
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
            raise MeasurementError(f"{self.id}: measured_us must be a positive number, got {value!r}")
        if self.metric not in METRICS:
            raise MeasurementError(
                f"{self.id}: metric must be one of {', '.join(METRICS)}, got {self.metric!r}"
            )


_RECORD_KEYS = {
    "kernel",
    "target",
    "measured_us",
    "p50_us",
    "shape",
    "dtype",
    "args",
    "id",
    "metric",
    "source",
}


def parse_measurement(record: Mapping[str, Any], where: str = "<record>") -> Measurement:
    """One JSON object -> :class:`Measurement` (see the module docstring for the keys)."""
    if not isinstance(record, Mapping):
        raise MeasurementError(f"{where}: expected a JSON object")
    unknown = set(record) - _RECORD_KEYS
    if unknown:
        raise MeasurementError(f"{where}: unknown keys {sorted(unknown)}; valid: {sorted(_RECORD_KEYS)}")
    for key in ("kernel", "target"):
        if not isinstance(record.get(key), str):
            raise MeasurementError(f"{where}: {key!r} (string) is required")
    value = record.get("measured_us", record.get("p50_us"))
    if value is None:
        raise MeasurementError(f"{where}: 'measured_us' or 'p50_us' is required")
    shape = record.get("shape")
    try:
        return Measurement(
            kernel=record["kernel"],
            target=record["target"],
            measured_us=value,
            shape=None if shape is None else str(shape),
            dtype=record.get("dtype"),
            args=record.get("args"),
            id=record.get("id", ""),
            metric=record.get("metric", "latency_us"),
            source=record.get("source", ""),
        )
    except MeasurementError as exc:
        raise MeasurementError(f"{where}: {exc}") from None


def load_measurements(path: str | Path) -> list[Measurement]:
    """Read a JSON-lines measurements file; errors name the line."""
    out: list[Measurement] = []
    for lineno, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), start=1):
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        try:
            record = json.loads(text)
        except json.JSONDecodeError as exc:
            raise MeasurementError(f"{path}:{lineno}: invalid JSON: {exc.msg}") from None
        out.append(parse_measurement(record, f"{path}:{lineno}"))
    ids = [m.id for m in out]
    dupes = sorted({i for i in ids if ids.count(i) > 1})
    if dupes:
        raise MeasurementError(f"{path}: duplicate measurement ids {dupes}")
    return out


def anchor_measurements(param_set: ParamSet) -> list[Measurement]:
    """The ``[[anchors]]`` of a params file as measurements."""
    return [
        Measurement(**pick(a, "kernel target measured_us shape dtype id metric source"))
        for a in param_set.anchors
    ]


def log_error(measured: Iterable[Measurement], predicted: Mapping[str, float]) -> float:
    """Mean squared natural-log error of ``predicted`` (by measurement id) against ``measured``."""
    terms = []
    for m in measured:
        if m.id not in predicted:
            raise MeasurementError(f"prediction missing for measurement {m.id!r}")
        p = predicted[m.id]
        terms.append((math.log(p) - math.log(m.measured_us)) ** 2 if p > 0 else 1e6)
    return sum(terms) / len(terms) if terms else 0.0


@dataclass(frozen=True)
class FitResult:
    """Outcome of :func:`fit`."""

    params: Params
    fitted: dict[str, float]
    loss_before: float
    loss_after: float
    evaluations: int
    predicted_us: dict[str, float]
    measured_us: dict[str, float]

    def ratios(self) -> dict[str, float]:
        """predicted / measured per measurement id."""
        return {k: self.predicted_us[k] / v for k, v in self.measured_us.items()}


def fit(
    predict: Predict,
    measurements: Sequence[Measurement],
    start: Params,
    *,
    names: Sequence[str] | None = None,
    bounds: Mapping[str, tuple[float, float]],
    max_evaluations: int = 400,
) -> FitResult:
    """Least squares on log latency over ``names`` (default: all parameters), inside ``bounds``."""
    names = tuple(names) if names is not None else Params.names()
    unknown = set(names) - set(Params.names())
    if unknown or not names or len(names) > 8:
        raise ValueError(f"fit 1 to 8 parameters of {Params.names()}; got {list(names)}")
    if not measurements:
        raise ValueError("no measurements to fit")
    lows = [bounds[n][0] for n in names]
    highs = [bounds[n][1] for n in names]

    def to_params(x: Sequence[float]) -> Params:
        return start.replace(**{n: lo + xi * (hi - lo) for n, xi, lo, hi in zip(names, x, lows, highs)})

    def loss(x: Sequence[float]) -> float:
        return log_error(measurements, predict(to_params(x)))

    x0 = [(getattr(start, n) - lo) / (hi - lo) if hi > lo else 0.0 for n, lo, hi in zip(names, lows, highs)]
    before = loss(x0)
    best = minimize(loss, x0, max_evaluations=max_evaluations)
    params = to_params(best.x)
    predicted = dict(predict(params))
    return FitResult(
        params=params,
        fitted={n: getattr(params, n) for n in names},
        loss_before=before,
        loss_after=best.value,
        evaluations=best.evaluations,
        predicted_us={m.id: predicted[m.id] for m in measurements},
        measured_us={m.id: m.measured_us for m in measurements},
    )


def calibrate_file(
    measurements_path: str | Path,
    predict: Predict,
    target: str,
    *,
    names: Sequence[str] | None = None,
    params_path: str | Path = PARAMS_PATH,
    write: bool = False,
    per_target: bool = True,
    fit_date: str | None = None,
    max_evaluations: int = 400,
) -> tuple[FitResult, ParamSet]:
    """Fit ``target``'s parameters to the measurements for that target in a JSON-lines file.

    With ``write``, the fitted values go back into ``params_path`` as overrides for ``target``
    (``per_target``) or as new defaults.  Returns the fit and the updated :class:`ParamSet`.
    """
    param_set = load_params_file(params_path)
    measurements = [m for m in load_measurements(measurements_path) if m.target == target]
    if not measurements:
        raise MeasurementError(f"{measurements_path}: no measurements for target {target!r}")
    bounds = {n: spec.bounds for n, spec in param_set.specs.items()}
    result = fit(
        predict,
        measurements,
        param_set.for_target(target),
        names=names,
        bounds=bounds,
        max_evaluations=max_evaluations,
    )
    date = fit_date or datetime.date.today().isoformat()
    updated = param_set.with_values(
        target if per_target else None,
        result.fitted,
        fitted_from=tuple(m.id for m in measurements),
        fit_date=date,
        method="least-squares",
        source=f"least-squares fit on log latency to {Path(measurements_path).name} "
        f"(loss {result.loss_before:.4g} -> {result.loss_after:.4g})",
    )
    if write:
        save_params(updated, params_path)
    return result, updated
