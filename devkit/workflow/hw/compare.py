"""Measured against predicted: the results store summarised per kernel, shape, dtype, target and backend.

:func:`compare` groups latency records (median of the runs' P50 and P99 against the latest prediction,
microseconds, and the latest run's P50 against the run before it); :func:`comparison_table` prints them;
:func:`hardware_section` is the HTML report's view.  A measured/predicted ratio away from 1 is model
error; a latest P50 above the previous one by more than the threshold is a regression.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from devkit.jsondict import pick
from devkit.workflow.hw.store import ResultsStore, shape_key


@dataclass(frozen=True)
class Comparison:
    """Measured against predicted for one kernel, shape, dtype, target and backend (us)."""

    kernel: str
    shape: str
    dtype: str
    target: str
    backend: str
    runs: int
    measured_p50_us: float
    measured_p99_us: float
    predicted_us: float | None
    numerics_passed: int
    numerics_failed: int
    last_run: str
    #: P50 of the latest run and of the run before it (None with a single run), us.
    last_p50_us: float | None = None
    previous_p50_us: float | None = None

    @property
    def change(self) -> float | None:
        """Latest P50 against the previous run's, as a relative change (0.1 = 10 % slower)."""
        if self.last_p50_us is None or not self.previous_p50_us:
            return None
        return self.last_p50_us / self.previous_p50_us - 1.0

    @property
    def ratio(self) -> float | None:
        """measured P50 / predicted (None without a prediction)."""
        if not self.predicted_us:
            return None
        return self.measured_p50_us / self.predicted_us

    def to_dict(self) -> dict[str, Any]:
        return {
            **pick(
                self,
                "kernel shape dtype target backend runs measured_p50_us measured_p99_us predicted_us ratio "
                "numerics_passed numerics_failed last_run last_p50_us previous_p50_us",
            ),
            "change_vs_previous": self.change,
        }


def compare(records: Iterable[Mapping[str, Any]]) -> list[Comparison]:
    """Group latency records and summarise them: median of the runs' P50 and P99, latest prediction.

    Numerics records of the same group are counted (passed / failed).  Rows are sorted by kernel,
    dtype, target, backend and shape (numerically by the shape's values).
    """
    groups: dict[tuple, list[Mapping[str, Any]]] = {}
    numerics: dict[tuple, list[bool]] = {}
    for r in records:
        key = (r["kernel"], shape_key(r["shape"]), r["dtype"], r.get("target") or "?", r["backend"])
        if r["kind"] == "latency":
            groups.setdefault(key, []).append(r)
        elif r["kind"] == "numerics":
            numerics.setdefault(key, []).append(bool(r.get("passed")))
    rows = []
    for key, runs in groups.items():
        runs = sorted(runs, key=lambda r: r.get("timestamp", ""))
        predicted = next((r.get("predicted_us") for r in reversed(runs) if r.get("predicted_us")), None)
        flags = numerics.get(key, [])
        rows.append(
            Comparison(
                kernel=key[0],
                shape=key[1],
                dtype=key[2],
                target=key[3],
                backend=key[4],
                runs=len(runs),
                measured_p50_us=statistics.median(r["measured_us"]["p50"] for r in runs),
                measured_p99_us=statistics.median(
                    r["measured_us"].get("p99", r["measured_us"]["p50"]) for r in runs
                ),
                predicted_us=float(predicted) if predicted else None,
                numerics_passed=sum(flags),
                numerics_failed=len(flags) - sum(flags),
                last_run=runs[-1].get("timestamp", ""),
                last_p50_us=float(runs[-1]["measured_us"]["p50"]),
                previous_p50_us=float(runs[-2]["measured_us"]["p50"]) if len(runs) > 1 else None,
            )
        )

    def order(c: Comparison) -> tuple:
        dims = tuple(int(v) if v.isdigit() else 0 for v in (p.split("=")[-1] for p in c.shape.split(",")))
        return (c.kernel, c.dtype, c.target, c.backend, dims, c.shape)

    return sorted(rows, key=order)


def comparison_table(rows: Sequence[Comparison], slack: float | None = None, threshold: float = 0.10) -> Any:
    """A rich table of :func:`compare` rows (``slack`` marks model error outside ±slack of the prediction;
    a latest run slower than the previous by more than ``threshold`` is marked as a regression)."""
    from devkit.tables import table

    out = table(
        "Hardware: measured vs predicted latency (us)",
        ("<kernel", "<shape", "<dtype", "<target", "<backend", "runs", "P50", "P99", "predicted", "P50/pred",
         "last vs prev", "numerics"),
    )  # fmt: skip
    for c in rows:
        ratio = c.ratio
        if ratio is None:
            ratio_text = "-"
        else:
            ratio_text = f"{ratio:.2f}x"
            if slack is not None and abs(ratio - 1.0) > slack:
                ratio_text = f"[red]{ratio_text}[/red]"
        checks = (
            f"{c.numerics_passed}/{c.numerics_passed + c.numerics_failed}"
            if (c.numerics_passed + c.numerics_failed)
            else "-"
        )
        change = c.change
        change_text = "-" if change is None else f"{change:+.1%}"
        if change is not None and change > threshold:
            change_text = f"[red]{change_text} regression[/red]"
        out.add_row(
            c.kernel,
            c.shape,
            c.dtype,
            c.target,
            c.backend,
            str(c.runs),
            f"{c.measured_p50_us:,.1f}",
            f"{c.measured_p99_us:,.1f}",
            "-" if c.predicted_us is None else f"{c.predicted_us:,.1f}",
            ratio_text,
            change_text,
            checks,
        )
    return out


def load_rows(results: str | Path, include_fake: bool = False) -> tuple[list[Comparison], list[str]]:
    """Comparison rows of a store (real backend only unless ``include_fake``) and its damaged lines."""
    read = ResultsStore(results).read()
    records = [r for r in read.records if include_fake or r["backend"] != "fake"]
    return compare(records), read.damaged


def hardware_section(
    rows: list[Comparison], slack: float, caption: str, threshold: float = 0.10
) -> dict[str, Any]:
    """The report template's ``hardware`` context (table rows and the measured-vs-predicted plot)."""
    from devkit.workflow.report import plot_measured_vs_predicted

    points = [(f"{c.kernel} ({c.dtype})", c.predicted_us, c.measured_p50_us) for c in rows if c.predicted_us]
    png = plot_measured_vs_predicted(points, slack=slack) if points else None
    out_rows = []
    for c in rows:
        d = c.to_dict()
        ratio = c.ratio
        d["ratio_class"] = "" if ratio is None else ("ok" if abs(ratio - 1) <= slack else "bad")
        n = c.numerics_passed + c.numerics_failed
        d["numerics"] = f"{c.numerics_passed}/{n} passed" if n else "-"
        change = c.change
        d["change_text"] = "-" if change is None else f"{change:+.1%}"
        d["change_class"] = "bad" if change is not None and change > threshold else ""
        out_rows.append(d)
    return {"rows": out_rows, "png": png, "caption": caption}


def report_context(rows: list[Comparison], slack: float, results: str | Path) -> dict[str, Any]:
    """The template context of ``devkit hw report --out`` (see templates/report.html.j2)."""
    import datetime

    from devkit import __version__
    from devkit.workflow.hw.host import git_commit
    from devkit.workflow.report import NO_KERNEL_SECTIONS

    caption = (
        f"Median over runs of the measured P50 (nki.benchmark) against the cost model's prediction "
        f"made at promotion; rows outside ±{slack:.0%} are red. Store: {results}."
    )
    return {
        "title": "devkit hardware report",
        "devkit_version": __version__,
        "target": "per row",
        "mode": "hardware",
        "git_commit": git_commit(),
        "wall_s": None,
        "generated": datetime.datetime.now().isoformat(timespec="seconds"),
        "status": None,
        "validations": [],
        "comparison": None,
        "mlp": None,
        "timeline": None,
        "errors": [],
        "hardware": hardware_section(rows, slack, caption),
        "hardware_howto": "",
        "uncertainty": {"pct": None, "based_on": ""},
        "roofline": None,
        **NO_KERNEL_SECTIONS,
        "results_files": [],
        "notes": ["Predictions come from the devkit cost model at promotion time (devkit promote)."],
    }
