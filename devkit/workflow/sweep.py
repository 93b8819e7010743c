"""``devkit sweep``: a ``perf_report``-style shape sweep of a kernel and its declared baselines.

One declaration gives the table and the plot (Triton's ``Benchmark``/``perf_report`` idea): the kernel's
``sweep`` names the x parameter, its values and the fixed parameters; each baseline is estimated on the
same shape (mapped through ``Baseline.shape`` when it has different parameters).  Every point is a
cost-only estimate on the target (modelled latency, microseconds; HBM bytes).  :func:`write` saves
``<name>.csv``, ``<name>.json`` and ``<name>.png`` in the project's ``devkit-sweeps/`` (``[tool.devkit]
sweeps``) or a given directory.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from devkit import atomic
from devkit.declare import KernelSpec, Sweep
from devkit.jsondict import pick


class SweepError(ValueError):
    """Bad sweep input (no sweep declared and no --x, an x that is not a shape parameter, ...)."""


@dataclass(frozen=True)
class Line:
    """One curve: a label, the spec's reference (for workers) and the shape mapping."""

    label: str
    ref: str
    shape: Callable[[dict[str, int]], Any] | None


@dataclass
class SweepResult:
    """Rows: ``{x: value, <label>: latency_us | None, <label> hbm: bytes | None}``; errors per point."""

    kernel: str
    x: str
    fixed: dict[str, int]
    dtype: str
    target: str
    labels: list[str]
    rows: list[dict[str, Any]]
    errors: list[str]

    def to_dict(self) -> dict[str, Any]:
        return {
            **pick(self, "kernel x fixed dtype target"),
            "unit": "us (modelled, cost-only)",
            "lines": self.labels,
            **pick(self, "rows errors"),
        }


def resolve_sweep(
    spec: KernelSpec, x: str | None = None, values: Sequence[int] | None = None, dtype: str | None = None
) -> Sweep:
    """The declared sweep, overridden by ``x`` / ``values`` / ``dtype``; without one, ``x`` is required
    (values default to the default shape's value times 1/4, 1/2, 1, 2, 4)."""
    base = spec.sweep
    if x is None and base is None:
        raise SweepError(
            f"{spec.name} declares no sweep: pass --x NAME (one of {', '.join(spec.shape_params)})"
        )
    x = x or base.x  # type: ignore[union-attr]
    if x not in spec.shape_params:
        raise SweepError(f"--x {x!r}: not a shape parameter of {spec.name} ({', '.join(spec.shape_params)})")
    if values:
        vals = tuple(int(v) for v in values)
    elif base is not None and base.x == x:
        vals = base.values
    else:
        d = int(spec.default_shape[x])
        vals = tuple(sorted({max(1, d // 4), max(1, d // 2), d, 2 * d, 4 * d}))
    if not vals or any(v < 1 for v in vals):
        raise SweepError(f"sweep values of {x} must be positive integers, got {vals}")
    fixed = dict(base.fixed) if base is not None and base.fixed else {}
    fixed = {p: int(fixed.get(p, spec.default_shape[p])) for p in spec.shape_params if p != x}
    return Sweep(x, vals, fixed, dtype or (base.dtype if base else spec.dtypes[0]))


def lines_of(spec: KernelSpec, ref: str, with_baselines: bool = True) -> list[Line]:
    """The kernel's line and one per declared baseline (a baseline declared in the kernel's own file is
    found there; others by their declared name)."""
    from devkit.workflow import catalog

    out = [Line(spec.name, ref, None)]
    if with_baselines:
        for b in spec.baselines:
            out.append(Line(b.label or b.name, catalog.related_ref(spec, b.name), b.shape))
    return out


def _point(args: tuple) -> tuple[int, str, float | None, int | None, str | None]:
    i, label, ref, shape, dtype, target = args
    from devkit.errors import failure_text
    from devkit.workflow import catalog

    try:
        spec = catalog.get(ref)
        rep = spec.estimate(spec._shape(shape), dtype, target)
        return i, label, float(rep.latency_us), int(rep.hbm_read_bytes + rep.hbm_write_bytes), None
    except Exception as exc:  # one failing point is a value in the table, not a crash
        return i, label, None, None, failure_text(exc)


def run_sweep(
    spec: KernelSpec,
    sweep: Sweep,
    lines: Sequence[Line],
    *,
    target: str = "trn1",
    jobs: int | Any = 1,
    progress: Callable[[int, int], None] | None = None,
) -> SweepResult:
    """Estimate every line at every x value (``jobs`` worker processes or an executor, see
    :mod:`devkit.workflow.executor`; results in sweep order, checkpointed as they arrive so that a rerun
    after an interruption skips the finished points)."""
    from devkit.workflow import executor

    jobs_args = []
    for i, v in enumerate(sweep.values):
        shape = {**dict(sweep.fixed or {}), sweep.x: int(v)}
        for line in lines:
            mapped = dict(line.shape(shape)) if line.shape else shape
            jobs_args.append((i, line.label, line.ref, mapped, sweep.dtype, target))
    done = [0]

    def on_done(_: Any) -> None:
        done[0] += 1
        if progress:
            progress(done[0], len(jobs_args))

    checkpoint = executor.Checkpoint.for_jobs("sweep", executor.fn_ref(_point), jobs_args)
    results = executor.run_jobs(_point, jobs_args, jobs=jobs, on_done=on_done, checkpoint=checkpoint)
    rows = [{sweep.x: int(v)} for v in sweep.values]
    errors = []
    for i, label, us, hbm, err in results:
        rows[i][label] = us
        rows[i][f"{label} hbm_bytes"] = hbm
        if err:
            errors.append(f"{label} at {sweep.x}={sweep.values[i]}: {err}")
    return SweepResult(
        spec.name,
        sweep.x,
        dict(sweep.fixed or {}),
        sweep.dtype,
        target,
        [ln.label for ln in lines],
        rows,
        errors,
    )


def to_csv(result: SweepResult) -> str:
    buf = io.StringIO()
    cols = [result.x, *(f"{lb} us" for lb in result.labels), *(f"{lb} hbm_bytes" for lb in result.labels)]
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(cols)
    for r in result.rows:
        w.writerow(
            [
                r[result.x],
                *(_cell(r.get(lb)) for lb in result.labels),
                *(_cell(r.get(f"{lb} hbm_bytes")) for lb in result.labels),
            ]
        )
    return buf.getvalue()


def _cell(v: Any) -> str:
    return "" if v is None else (f"{v:.3f}" if isinstance(v, float) else str(v))


def plot(result: SweepResult, path: Path) -> Path:
    """Latency against x, one line per kernel (log-log), saved as PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    for lb in result.labels:
        pts = [(r[result.x], r.get(lb)) for r in result.rows if r.get(lb) is not None]
        if pts:
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=lb)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel(result.x)
    ax.set_ylabel(f"modelled latency on {result.target} (us)")
    fixed = ", ".join(f"{k}={v}" for k, v in result.fixed.items())
    ax.set_title(f"{result.kernel} ({fixed}) {result.dtype}", fontsize=9)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    try:
        return atomic.write_with(path, lambda tmp: fig.savefig(tmp, format="png", dpi=110))
    finally:
        plt.close(fig)


def write(result: SweepResult, out_dir: str | Path, name: str | None = None) -> list[Path]:
    """``<out_dir>/<name>.csv``, ``.json`` and ``.png`` (atomic writes); returns the paths."""
    out = Path(out_dir)
    stem = name or result.kernel
    return [
        atomic.write_text(out / f"{stem}.csv", to_csv(result)),
        atomic.write_text(out / f"{stem}.json", json.dumps(result.to_dict(), indent=2) + "\n"),
        plot(result, out / f"{stem}.png"),
    ]
