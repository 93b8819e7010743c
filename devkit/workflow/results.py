"""``devkit run`` results as data: ``results.json``, ``validations.csv`` and ``estimates.csv`` next to the HTML
(and ``trace.json``, the Chrome/Perfetto trace of the timeline kernel).

:func:`results_data` holds every row the run's tables show: each validation (kernel, shape, dtype,
pass/fail, max error, tolerance, seconds, detail), each estimate (the cost report's figures plus its
roofline point and uncertainty band), and the derived rows of the paper microbenchmark, the MLP tables,
the kernels against their baselines, their sweeps, tuned configurations and Beta 1/Beta 2 pairs
(:mod:`devkit.workflow.run`).  The CSV files hold the validation and estimate rows, one per line, with the
same column names as the JSON keys.

Units: latencies in us, bytes in bytes, throughput in TFLOP/s, ``band_pct`` in percent.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

from devkit import atomic
from devkit.workflow import run as main_job

#: Format identifier of results.json (bump on incompatible changes).
SCHEMA = "devkit-run-results/1"

VALIDATION_COLUMNS = ("kernel", "shape", "dtype", "target", "passed", "max_error", "tolerance", "seconds",
                      "detail")  # fmt: skip
#: Cost-report figures copied into each estimate row as they are.
FIGURE_COLUMNS = ("roofline_us", "bound_by", "instructions", "flops", "hbm_read_bytes", "hbm_write_bytes",
                  "tensor_utilization", "mbu", "sbuf_peak_bytes", "spill_bytes")  # fmt: skip
ESTIMATE_COLUMNS = (
    "kernel", "group", "label", "shape", "dtype", "target", "ok", "error", "seconds",
    "latency_us", "band_pct", "latency_low_us", "latency_high_us",
    *FIGURE_COLUMNS,
    "arithmetic_intensity", "achieved_tflops",
)  # fmt: skip


def validation_rows(summary: main_job.Summary) -> list[dict[str, Any]]:
    """One row per validation task."""
    return [
        {
            "kernel": r.task.kernel,
            "shape": r.task.shape_text,
            "dtype": r.task.dtype,
            "target": r.task.target,
            "passed": r.ok,
            "max_error": r.max_error,
            "tolerance": r.tolerance,
            "seconds": round(r.seconds, 3),
            "detail": r.error or "",
        }
        for r in summary.validations
    ]


def estimate_rows(summary: main_job.Summary, band_pct: float | None) -> list[dict[str, Any]]:
    """One row per estimate task (figures empty when it failed); ``band_pct`` is the target's band."""
    rows = []
    for r in summary.estimates:
        f = r.figures
        lat = f.get("latency_us")
        flops = f.get("flops")
        hbm = (f.get("hbm_read_bytes") or 0) + (f.get("hbm_write_bytes") or 0)
        band = band_pct if (lat is not None and band_pct is not None) else None
        row = {
            "kernel": r.task.kernel,
            "group": r.task.group,
            "label": r.task.label,
            "shape": r.task.shape_text,
            "dtype": r.task.dtype,
            "target": r.task.target,
            "ok": r.ok,
            "error": r.error or "",
            "seconds": round(r.seconds, 3),
            "latency_us": lat,
            "band_pct": band,
            "latency_low_us": lat * (1 - band / 100) if band is not None else None,
            "latency_high_us": lat * (1 + band / 100) if band is not None else None,
            **{k: f.get(k) for k in FIGURE_COLUMNS},
            "arithmetic_intensity": flops / hbm if flops and hbm else None,
            "achieved_tflops": flops / (lat * 1e6) if flops and lat else None,
        }
        rows.append(row)
    return rows


def results_data(summary: main_job.Summary, *, target: str, quick: bool) -> dict[str, Any]:
    """The whole ``results.json`` object (see module docstring)."""
    from devkit.cost.uncertainty import band, no_band_text

    b = band(target)
    return {
        "schema": SCHEMA,
        "target": target,
        "mode": "quick" if quick else "full",
        "passed": summary.passed,
        "uncertainty": b.to_dict()
        if b is not None
        else {"target": target, "pct": None, "based_on": no_band_text(target)},
        "validations": validation_rows(summary),
        "estimates": estimate_rows(summary, b.pct if b is not None else None),
        "paper_rows": summary.paper_rows,
        "mlp_rows": summary.mlp_rows,
        "kernel_rows": summary.kernel_rows,
        "sweeps": summary.sweeps,
        "tuning_rows": summary.tuning_rows,
        "generation_rows": summary.generation_rows,
    }


def _csv(rows: list[dict[str, Any]], columns: tuple[str, ...]) -> str:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(columns), lineterminator="\n")
    w.writeheader()
    for row in rows:
        w.writerow({k: "" if row.get(k) is None else row[k] for k in columns})
    return buf.getvalue()


def write_results(summary: main_job.Summary, out_dir: str | Path, *, target: str, quick: bool) -> list[Path]:
    """Write ``results.json``, ``validations.csv`` and ``estimates.csv`` into ``out_dir``; returns the paths."""
    data = results_data(summary, target=target, quick=quick)
    out = Path(out_dir)
    paths = [
        atomic.write_text(out / "results.json", json.dumps(data, indent=1, default=str) + "\n"),
        atomic.write_text(out / "validations.csv", _csv(data["validations"], VALIDATION_COLUMNS)),
        atomic.write_text(out / "estimates.csv", _csv(data["estimates"], ESTIMATE_COLUMNS)),
    ]
    if summary.timeline is not None and summary.timeline.trace is not None:
        trace = json.dumps(summary.timeline.trace, separators=(",", ":"))
        paths.append(atomic.write_text(out / "trace.json", trace))
    return paths
