"""A/B comparison of two cost reports (the JSON objects of ``devkit cost --json`` / ``CostReport.to_dict()``).

:func:`compare` lines up the figures of a baseline ``A`` and a candidate ``B``: latency, the lower
bound and what binds it, bytes per memory level, engine busy time, utilisation, on-chip peaks and
the top source lines, each with the ratio ``B / A``.  :meth:`Comparison.regression_pct` is the
latency change in percent (positive: B is slower), the figure ``devkit compare --fail-above``
tests.

Units: us for times, bytes for sizes, ratios are plain numbers (``None`` when A is 0).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from devkit.jsondict import pick

#: Keys a report must have to be compared (the contract keys of DESIGN.md section 3).
REQUIRED = (
    "target",
    "latency_us",
    "hbm_read_bytes",
    "hbm_write_bytes",
    "instructions",
    "engine_busy_us",
    "tensor_utilization",
    "sbuf_peak_bytes",
    "psum_peak_bytes",
)


class CompareError(ValueError):
    """An input that is not a cost report (the message names it and what is missing)."""


@dataclass(frozen=True)
class Row:
    """One compared figure; ``unit`` is ``"us"``, ``"bytes"``, ``"count"`` or ``"ratio"``."""

    group: str
    name: str
    a: float | None
    b: float | None
    unit: str

    @property
    def ratio(self) -> float | None:
        """``b / a`` (None when either is missing or ``a`` is 0)."""
        if self.a is None or self.b is None or self.a == 0:
            return None
        return self.b / self.a

    def to_dict(self) -> dict[str, Any]:
        return pick(self, "group name a b unit ratio")


@dataclass(frozen=True)
class Comparison:
    """Figures of A and B side by side (see module docstring)."""

    label_a: str
    label_b: str
    rows: tuple[Row, ...]
    bound_by: tuple[str, str]
    hotspots: tuple[list[dict[str, Any]], list[dict[str, Any]]]
    notes: tuple[str, ...] = field(default=())

    def row(self, name: str) -> Row:
        for r in self.rows:
            if r.name == name:
                return r
        raise KeyError(name)

    @property
    def regression_pct(self) -> float:
        """Latency change of B against A in percent (positive: B is slower)."""
        r = self.row("latency_us")
        if not r.a:
            raise CompareError("baseline latency is 0: no relative change can be computed")
        return (r.b / r.a - 1.0) * 100.0  # type: ignore[operator]

    def to_dict(self) -> dict[str, Any]:
        return {
            "a": self.label_a,
            "b": self.label_b,
            "latency_change_pct": self.regression_pct,
            "bound_by": {"a": self.bound_by[0], "b": self.bound_by[1]},
            "rows": [r.to_dict() for r in self.rows],
            "hotspots": {"a": self.hotspots[0], "b": self.hotspots[1]},
            "notes": list(self.notes),
        }


def check_report(data: Any, label: str) -> dict[str, Any]:
    """``data`` if it is a cost report dict, else :class:`CompareError` naming ``label`` and the gaps."""
    if not isinstance(data, dict):
        raise CompareError(
            f"{label}: expected one JSON object from `devkit cost --json`, got {type(data).__name__}"
        )
    missing = [k for k in REQUIRED if k not in data]
    if missing:
        raise CompareError(f"{label}: not a `devkit cost --json` report (missing {', '.join(missing)})")
    if not isinstance(data["engine_busy_us"], dict):
        raise CompareError(f"{label}: engine_busy_us must be an object of engine -> us")
    return data


def _num(d: dict[str, Any], key: str) -> float | None:
    v = d.get(key)
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def compare(
    a: dict[str, Any], b: dict[str, Any], *, label_a: str = "A", label_b: str = "B", hotspots: int = 5
) -> Comparison:
    """Line up two cost reports (dicts); both are checked with :func:`check_report` first."""
    check_report(a, label_a)
    check_report(b, label_b)
    rows: list[Row] = [
        Row("latency", "latency_us", _num(a, "latency_us"), _num(b, "latency_us"), "us"),
        Row("latency", "roofline_us", _num(a, "roofline_us"), _num(b, "roofline_us"), "us"),
        Row("work", "instructions", _num(a, "instructions"), _num(b, "instructions"), "count"),
        Row("work", "flops", _num(a, "flops"), _num(b, "flops"), "count"),
    ]
    levels = list(dict.fromkeys([*a.get("bytes_by_level", {}), *b.get("bytes_by_level", {})]))
    if levels:
        for name in levels:
            rows.append(
                Row(
                    "bytes",
                    name,
                    _num(a.get("bytes_by_level", {}), name),
                    _num(b.get("bytes_by_level", {}), name),
                    "bytes",
                )
            )
    else:
        rows.append(Row("bytes", "hbm_read", _num(a, "hbm_read_bytes"), _num(b, "hbm_read_bytes"), "bytes"))
        rows.append(
            Row("bytes", "hbm_write", _num(a, "hbm_write_bytes"), _num(b, "hbm_write_bytes"), "bytes")
        )
    rows.append(Row("bytes", "spill", _num(a, "spill_bytes"), _num(b, "spill_bytes"), "bytes"))
    engines = list(dict.fromkeys([*a["engine_busy_us"], *b["engine_busy_us"]]))
    for e in engines:
        rows.append(Row("engine busy", e, _num(a["engine_busy_us"], e), _num(b["engine_busy_us"], e), "us"))
    rows += [
        Row(
            "utilisation",
            "tensor_utilization",
            _num(a, "tensor_utilization"),
            _num(b, "tensor_utilization"),
            "ratio",
        ),
        Row("utilisation", "mbu", _num(a, "mbu"), _num(b, "mbu"), "ratio"),
        Row("on-chip", "sbuf_peak_bytes", _num(a, "sbuf_peak_bytes"), _num(b, "sbuf_peak_bytes"), "bytes"),
        Row("on-chip", "psum_peak_bytes", _num(a, "psum_peak_bytes"), _num(b, "psum_peak_bytes"), "bytes"),
    ]
    notes = []
    if a["target"] != b["target"]:
        notes.append(f"different targets: A on {a['target']}, B on {b['target']}")
    return Comparison(
        label_a=label_a,
        label_b=label_b,
        rows=tuple(r for r in rows if r.a is not None or r.b is not None),
        bound_by=(str(a.get("bound_by", "-")), str(b.get("bound_by", "-"))),
        hotspots=(list(a.get("hotspots", []))[:hotspots], list(b.get("hotspots", []))[:hotspots]),
        notes=tuple(notes),
    )
