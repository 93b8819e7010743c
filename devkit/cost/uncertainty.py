"""The uncertainty band of modelled latencies, from the model's residuals against measured points.

The cost model's only measured kernel latencies are the calibration anchors of ``params.toml``
(``[[anchors]]`` with ``metric = "latency_us"``: the AWS NKI matmul tutorial progression measured
on trn1).  ``residuals.toml`` (next to this module) holds the model's prediction for each of them
at the current parameters, written by ``benchmarks/anchor_residuals.py``; a test re-predicts them
and fails when the file is stale.

The band of a target is the largest relative error over its anchors,
``max |predicted / measured - 1|`` (a conservative choice for four points: no distribution is
assumed).  A target without measured latencies has no band (:func:`band` returns ``None``), and
every consumer says so rather than showing a number.

Units: ``pct`` is a percentage (12.1 means ±12.1 %).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

from devkit.targets import toml_io

RESIDUALS_PATH = Path(__file__).with_name("residuals.toml")


class ResidualsError(ValueError):
    """``residuals.toml`` is malformed."""


@dataclass(frozen=True)
class Residual:
    """One anchor: measured and modelled latency (us)."""

    id: str
    kernel: str
    target: str
    measured_us: float
    predicted_us: float

    @property
    def ratio(self) -> float:
        """predicted / measured."""
        return self.predicted_us / self.measured_us


@dataclass(frozen=True)
class Band:
    """± ``pct`` % around a modelled latency, and what it rests on."""

    target: str
    pct: float
    residuals: tuple[Residual, ...]
    source: str

    @property
    def fraction(self) -> float:
        return self.pct / 100.0

    @property
    def based_on(self) -> str:
        """One sentence for reports: the points, their ratios and where they come from."""
        ratios = ", ".join(f"{r.kernel} {r.ratio:.2f}" for r in self.residuals)
        return (
            f"±{self.pct:.0f} % = the largest |predicted/measured - 1| of the cost model over the "
            f"{len(self.residuals)} measured {self.target} latencies it has (predicted/measured: {ratios}; "
            f"{self.source}); not a confidence interval; kernels unlike these may be off by more "
            "(docs/calibration.md validates the model on a wider set of published latencies)."
        )

    def to_dict(self) -> dict:
        return {
            "target": self.target,
            "pct": self.pct,
            "based_on": self.based_on,
            "points": [
                {"id": r.id, "kernel": r.kernel, "measured_us": r.measured_us, "predicted_us": r.predicted_us}
                for r in self.residuals
            ],
        }


@functools.lru_cache(maxsize=4)
def load_residuals(path: str | None = None) -> tuple[tuple[Residual, ...], str]:
    """The residual points and their provenance sentence from ``residuals.toml`` (or ``path``)."""
    p = Path(path) if path else RESIDUALS_PATH
    data = toml_io.load_file(p, ResidualsError)
    if data.get("schema") != 1 or not isinstance(data.get("points"), list):
        raise ResidualsError(f"{p}: expected schema = 1 and [[points]] tables")
    points = []
    for i, t in enumerate(data["points"]):
        try:
            r = Residual(
                str(t["id"]),
                str(t["kernel"]),
                str(t["target"]),
                float(t["measured_us"]),
                float(t["predicted_us"]),
            )
        except (KeyError, TypeError, ValueError) as e:
            keys = "id, kernel, target, measured_us, predicted_us"
            raise ResidualsError(f"{p}: points[{i}]: {e!r}; keys: {keys}") from None
        if r.measured_us <= 0 or r.predicted_us <= 0:
            raise ResidualsError(f"{p}: points[{i}] ({r.id}): latencies must be > 0")
        points.append(r)
    return tuple(points), str(data.get("source", ""))


def band(target: str, path: str | None = None) -> Band | None:
    """The band for ``target``, or ``None`` when the model has no measured latency for it."""
    points, source = load_residuals(path)
    mine = tuple(r for r in points if r.target == target)
    if not mine:
        return None
    pct = max(abs(r.ratio - 1.0) for r in mine) * 100.0
    return Band(target, pct, mine, source)


def no_band_text(target: str) -> str:
    """What reports say where :func:`band` is ``None``."""
    return (
        f"no uncertainty band on {target}: the cost model has no measured kernel latency for it "
        f"(calibration anchors with metric latency_us); figures are unvalidated model output"
    )
