"""The main job behind ``devkit run``: validate every registered kernel, estimate the NeuronMM comparison.

:func:`plan` turns the options into a list of independent :class:`Task` values; :func:`execute` runs
them in worker processes (largest first) and hands each :class:`TaskResult` to a callback as it
completes; :func:`summarise` folds the results into the figures the tables and the HTML report show.
Nothing is cached: every run simulates every kernel again, so a regression can never hide behind a
stale result.

Workloads (all cost figures are modelled on ``target`` by the trace-based cost model):

* validation: every registry kernel on its default validation shape (``--quick``: every dimension
  divided by 4, which keeps ragged edges) in each dtype the registry lists, numerics on, against the
  NumPy reference within the registry's tolerance;
* the paper's microbenchmark ``(S, 8192)·(8192, 4096)·(4096, 16384)``: ``xuv_fused`` vs
  ``xuv_sequential`` vs dense ``matmul_optimized`` on ``X[S, 8192]·W[8192, 16384]``, cost-only;
* the MLPs of the small LLMs: ``svd_mlp`` vs ``dense_mlp`` at the NeuronMM ranks, cost-only.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from math import prod
from typing import Any

from devkit.errors import failure_text
from devkit.workflow import executor

#: The paper's microbenchmark: X[S, H] . U[H, r] . V[r, N] (reference/neuronmm.md, issue 5).
PAPER_H, PAPER_R, PAPER_N = 8192, 4096, 16384
PAPER_S_FULL = (1024, 4096, 8192, 16384, 32768)
PAPER_S_QUICK = (256, 512, 1024)
#: Kernels of the comparison: name in the report -> registry kernel.
COMPARISON = {"fused": "xuv_fused", "sequential": "xuv_sequential", "dense": "matmul_optimized"}
#: MLP comparison: models, compression ratios and tokens.
MLP_MODELS_FULL = ("Llama-3.2-1B", "Llama-3.2-3B", "Qwen3-1.7B", "Qwen3-4B")
MLP_MODELS_QUICK = ("Llama-3.2-1B",)
MLP_RATIOS_FULL = (0.1, 0.2)
MLP_RATIOS_QUICK = (0.2,)
MLP_TOKENS_FULL = 1024
MLP_TOKENS_QUICK = 256
#: Kernel whose engine timeline the report shows (at the middle sequence length of the sweep).
TIMELINE_KERNEL = "xuv_fused"


@dataclass(frozen=True)
class Task:
    """One independent unit of work (picklable: it crosses into a worker process)."""

    kind: str  # "validate" | "estimate"
    kernel: str
    shape: tuple[tuple[str, int], ...]
    dtype: str
    target: str
    group: str = ""
    label: str = ""
    timeline: bool = False
    #: Explicit config of an estimate (``None``: the kernel's defaults, tuning table included).
    blocks: tuple[tuple[str, Any], ...] | None = None
    #: The kernel's family and API generation (validations and per-kernel estimates; pairs Beta 1/Beta 2).
    family: str = ""
    generation: str = ""
    #: The x value of a sweep point (``group`` ``sweep:<kernel>:<x>``).
    point: int | None = None

    @property
    def shape_dict(self) -> dict[str, int]:
        return dict(self.shape)

    @property
    def shape_text(self) -> str:
        return ",".join(f"{k}={v}" for k, v in self.shape)

    @property
    def weight(self) -> float:
        """Rough work estimate for largest-first scheduling: FLOPs of the call (x10 with numerics)."""
        d = self.shape_dict
        keys = set(d)
        if keys == {"K", "M", "N"}:
            flops = 2.0 * d["K"] * d["M"] * d["N"]
        elif keys == {"S", "H", "r", "N"}:
            flops = 2.0 * d["S"] * d["r"] * (d["H"] + d["N"])
        elif keys == {"S", "H", "I", "r"}:
            flops = 6.0 * d["S"] * d["r"] * (d["H"] + d["I"])
        elif keys == {"S", "H", "I"}:
            flops = 6.0 * d["S"] * d["H"] * d["I"]
        else:
            flops = float(prod(d.values()))
        return flops * (10.0 if self.kind == "validate" else 1.0)

    def describe(self) -> str:
        verb = "validate" if self.kind == "validate" else "estimate"
        return f"{verb} {self.kernel} [{self.shape_text}] {self.dtype}"


@dataclass
class TaskResult:
    """What a worker sends back (``error`` set when the kernel or the devkit raised)."""

    task: Task
    seconds: float
    ok: bool
    error: str | None = None
    max_error: float | None = None
    tolerance: float | None = None
    figures: dict[str, Any] = field(default_factory=dict)
    report: Any = None  # the CostReport (with its timeline) when task.timeline
    trace: Any = None  # the exported Chrome/Perfetto trace (a dict) when task.timeline


def _shape(d: Mapping[str, int]) -> tuple[tuple[str, int], ...]:
    return tuple((k, int(v)) for k, v in d.items())


def quick_shape(shape: Mapping[str, int]) -> dict[str, int]:
    """A validation shape a quarter of the size in every dimension (ragged edges survive)."""
    return {k: max(1, int(v) // 4) for k, v in shape.items()}


def plan(
    *,
    quick: bool,
    target: str = "trn1",
    registry: Any = None,
    seq_lens: Sequence[int] | None = None,
    specs: Sequence[Any] | None = None,
    comparisons: bool | None = None,
) -> list[Task]:
    """Every task of one run, in a deterministic order.

    ``specs``: the kernels to validate (default: everything the project declares, then the kit's kernels
    unless ``[tool.devkit] include_kit = false``; or ``registry.all_specs()``).  ``comparisons``: add the
    NeuronMM estimates (default: when the kit's kernels are validated).
    """
    from devkit.workflow import catalog, llm

    if specs is None:
        specs = registry.all_specs() if registry is not None else catalog.all_specs()
    kit = {s.name for s in catalog.kit_specs()}
    if comparisons is None:
        comparisons = any(s.name in kit for s in specs)
    tasks: list[Task] = []

    def ref_of(spec: Any) -> str:
        return spec.name if registry is not None else catalog.ref_of(spec)

    for spec in specs:
        shape = quick_shape(spec.default_shape) if quick else dict(spec.default_shape)
        for dtype in spec.dtypes:
            tasks.append(
                Task(
                    "validate",
                    ref_of(spec),
                    _shape(shape),
                    dtype,
                    target,
                    family=spec.family,
                    generation=spec.generation,
                )
            )
    tasks += kernel_tasks(specs, kit=kit, quick=quick, target=target, ref_of=ref_of)
    if not comparisons:
        return tasks
    s_values = tuple(seq_lens) if seq_lens else (PAPER_S_QUICK if quick else PAPER_S_FULL)
    timeline_s = s_values[len(s_values) // 2]
    for s in s_values:
        for label, kernel in COMPARISON.items():
            if kernel == "matmul_optimized":
                shape = {"K": PAPER_H, "M": s, "N": PAPER_N}
            else:
                shape = {"S": s, "H": PAPER_H, "r": PAPER_R, "N": PAPER_N}
            tasks.append(
                Task(
                    "estimate",
                    kernel,
                    _shape(shape),
                    "bfloat16",
                    target,
                    group="paper",
                    label=label,
                    timeline=(kernel == TIMELINE_KERNEL and s == timeline_s),
                )
            )
    tokens = MLP_TOKENS_QUICK if quick else MLP_TOKENS_FULL
    for model in MLP_MODELS_QUICK if quick else MLP_MODELS_FULL:
        cfg = llm.get_config(model)
        tasks.append(
            Task(
                "estimate",
                "dense_mlp",
                _shape({"S": tokens, "H": cfg.hidden, "I": cfg.intermediate}),
                "bfloat16",
                target,
                group=f"mlp:{model}",
                label="dense",
            )
        )
        for ratio in MLP_RATIOS_QUICK if quick else MLP_RATIOS_FULL:
            ranks = llm.mlp_ranks(cfg, ratio)
            shape = {"S": tokens, "H": cfg.hidden, "I": cfg.intermediate, "r": ranks.gate}
            tasks.append(
                Task(
                    "estimate",
                    "svd_mlp",
                    _shape(shape),
                    "bfloat16",
                    target,
                    group=f"mlp:{model}",
                    label=f"svd@{ratio:g}",
                )
            )
    return tasks


def _paired_families(specs: Sequence[Any]) -> set[str]:
    """Families with kernels of more than one API generation among ``specs`` (Beta 1 next to Beta 2)."""
    gens: dict[str, set[str]] = {}
    for spec in specs:
        gens.setdefault(spec.family, set()).add(spec.generation)
    return {f for f, g in gens.items() if len(g) > 1}


def kernel_tasks(
    specs: Sequence[Any], *, kit: set[str], quick: bool, target: str, ref_of: Callable[[Any], str]
) -> list[Task]:
    """The per-kernel estimates of a run, for every kernel that is not the kit's own (the project's kernels:
    they get every table and plot the kit's kernels get) and every kernel whose family has both API
    generations here:

    * ``kernel:<name>``: the kernel (label = its name) on its validation shape in each of its dtypes, and
      each declared baseline (label = the baseline's label or name) on the mapped shape;
    * ``sweep:<name>:<x>``: the kernel and its baselines at each value of its declared sweep
      (``--quick``: the first three values);
    * ``tuning:<name>``: each project tuning-table entry for the kernel on ``target`` that pins a shape,
      with the tuned config (label ``tuned``) and the declared default (label ``default``).

    The kit's kernels keep their NeuronMM comparisons only (unless paired by generation: then the kernel
    estimate, without baselines), so a kit-only run plans the same tasks as before.
    """
    from devkit import tuning_table
    from devkit.workflow.sweep import lines_of, resolve_sweep

    paired = _paired_families(specs)
    tasks: list[Task] = []
    for spec in specs:
        ours = spec.name not in kit
        if not ours and spec.family not in paired:
            continue
        shape = quick_shape(spec.default_shape) if quick else dict(spec.default_shape)
        group = f"kernel:{spec.name}"
        for dtype in spec.dtypes:
            tasks.append(
                Task(
                    "estimate",
                    ref_of(spec),
                    _shape(shape),
                    dtype,
                    target,
                    group=group,
                    label=spec.name,
                    family=spec.family,
                    generation=spec.generation,
                )
            )
            for line in lines_of(spec, "")[1:] if ours else ():  # the declared baselines
                mapped = dict(line.shape(shape)) if line.shape else shape
                tasks.append(Task("estimate", line.ref, _shape(mapped), dtype, target, group, line.label))
        if not ours:
            continue
        if spec.sweep is not None:
            sw = resolve_sweep(spec)
            for v in sw.values[:3] if quick else sw.values:
                point = {**dict(sw.fixed or {}), sw.x: int(v)}
                for line in lines_of(spec, ref_of(spec)):
                    shp = dict(line.shape(point)) if line.shape else point
                    group = f"sweep:{spec.name}:{sw.x}"
                    tasks.append(
                        Task(
                            "estimate",
                            line.ref,
                            _shape(shp),
                            sw.dtype,
                            target,
                            group,
                            line.label,
                            point=int(v),
                        )
                    )
        for dtype, shp, tuned in tuning_table.pinned_entries(tuning_table.project_table(), spec.name, target):
            if set(shp) != set(spec.shape_params) or dtype not in spec.dtypes:
                continue
            declared = spec.declared_blocks(shp, dtype, target)
            for label, blocks in (("tuned", tuned), ("default", declared)):
                tasks.append(
                    Task(
                        "estimate",
                        ref_of(spec),
                        _shape(shp),
                        dtype,
                        target,
                        f"tuning:{spec.name}",
                        label,
                        blocks=tuple(sorted(blocks.items())),
                    )
                )
    return tasks


def _traced_estimate(spec: Any, task: Task) -> tuple[Any, dict[str, Any]]:
    """Cost-only estimate with the scheduled trace recorded: (CostReport, trace-event dict)."""
    from devkit.api import _unwrap
    from devkit.cost.chrome_trace import build_trace, tracing_scheduler
    from devkit.nki import _tensor_ops  # noqa: F401
    from devkit.nki.runner import run_kernel

    func, grid = _unwrap(spec.kernel_object(), None)
    sched = tracing_scheduler(task.target, kernel_name=task.kernel)
    args = spec.arg_specs(task.shape_dict, task.dtype)
    run_kernel(func, args, {}, grid=grid, target=task.target, sink=sched, host_outputs=False)
    report = sched.report()
    return report, build_trace(sched.recorder, report, sched.target)


def run_task(task: Task) -> TaskResult:
    """Execute one task in this process (the worker entry point)."""
    from devkit.workflow import catalog

    t0 = time.perf_counter()
    try:
        spec = catalog.get(task.kernel)
        if task.kind == "validate":
            res = spec.check(task.shape_dict, task.dtype, seed=0, target=task.target)
            return TaskResult(
                task,
                time.perf_counter() - t0,
                bool(res.ok),
                None
                if res.ok
                else f"max error {res.max_error:.3g} exceeds the tolerance {res.tolerance:.3g}",
                max_error=float(res.max_error),
                tolerance=float(res.tolerance),
            )
        trace = None
        if task.timeline:  # the report's timeline: the whole scheduled trace (devkit.cost.chrome_trace)
            report, trace = _traced_estimate(spec, task)
        else:
            blocks = dict(task.blocks) if task.blocks is not None else None
            report = spec.estimate(task.shape_dict, task.dtype, task.target, blocks)
        figures = {
            k: v
            for k, v in report.to_dict().items()
            if k
            in (
                "latency_us",
                "hbm_read_bytes",
                "hbm_write_bytes",
                "tensor_utilization",
                "bound_by",
                "instructions",
                "flops",
                "mbu",
                "roofline_us",
                "sbuf_peak_bytes",
                "spill_bytes",
            )
        }
        if task.timeline:
            from devkit.workflow.report import hotspot_code

            figures["hotspot_code"] = hotspot_code(report)
        return TaskResult(
            task,
            time.perf_counter() - t0,
            True,
            figures=figures,
            report=report if task.timeline else None,
            trace=trace,
        )
    except Exception as exc:  # reported per task; the run goes on and exits non-zero
        return TaskResult(task, time.perf_counter() - t0, False, failure_text(exc))


def execute(
    tasks: Sequence[Task],
    *,
    jobs: int | executor.Executor,
    on_start: Callable[[Task], None] | None = None,
    on_done: Callable[[TaskResult], None] | None = None,
) -> list[TaskResult]:
    """Run ``tasks`` (largest first) on ``jobs`` worker processes (or an executor: a Ray cluster, see
    :mod:`devkit.workflow.executor`); results come back in ``tasks`` order.

    ``jobs <= 1`` runs everything in this process (no pool).  A task lost with its worker becomes a
    failed :class:`TaskResult`; the run goes on.
    """
    order = sorted(range(len(tasks)), key=lambda i: (-tasks[i].weight, i))

    def lost(task: Task, exc: BaseException, what: str) -> TaskResult:
        return TaskResult(task, 0.0, False, f"{what}: {failure_text(exc)}")

    return executor.run_jobs(
        run_task, tasks, jobs=jobs, order=order, on_start=on_start, on_done=on_done, on_failure=lost
    )


# --- summaries -----------------------------------------------------------------------------------


@dataclass
class Summary:
    """Everything the tables and the report show, derived from the task results."""

    validations: list[TaskResult]
    paper_rows: list[dict[str, Any]]
    mlp_rows: list[dict[str, Any]]
    timeline: TaskResult | None
    estimate_errors: list[TaskResult]
    #: Every estimate task's result, in plan order (results.json / CSV and the roofline chart).
    estimates: list[TaskResult] = field(default_factory=list)
    #: Per-kernel estimates with their baselines, sweeps, tuned-vs-default and Beta 1/Beta 2 pairs
    #: (see :func:`kernel_tasks`; rows described at :func:`kernel_rows` and below).
    kernel_rows: list[dict[str, Any]] = field(default_factory=list)
    sweeps: list[dict[str, Any]] = field(default_factory=list)
    tuning_rows: list[dict[str, Any]] = field(default_factory=list)
    generation_rows: list[dict[str, Any]] = field(default_factory=list)

    @property
    def failures(self) -> list[TaskResult]:
        return [v for v in self.validations if not v.ok]

    @property
    def passed(self) -> bool:
        return not self.failures and not self.estimate_errors


def _speedup(base: float | None, new: float | None) -> float | None:
    return base / new if base and new else None


def summarise(results: Iterable[TaskResult]) -> Summary:
    results = list(results)
    validations = [r for r in results if r.task.kind == "validate"]
    estimates = [r for r in results if r.task.kind == "estimate"]
    errors = [r for r in estimates if not r.ok]
    paper: dict[int, dict[str, TaskResult]] = {}
    for r in estimates:
        if r.task.group == "paper":
            s = r.task.shape_dict.get("S", r.task.shape_dict.get("M"))
            paper.setdefault(int(s), {})[r.task.label] = r
    paper_rows = []
    for s in sorted(paper):
        by = paper[s]

        def fig(label: str, key: str, by: dict[str, TaskResult] = by) -> Any:
            r = by.get(label)
            return r.figures.get(key) if r is not None and r.ok else None

        lat = {label: fig(label, "latency_us") for label in COMPARISON}
        hbm = {
            label: (fig(label, "hbm_read_bytes") or 0) + (fig(label, "hbm_write_bytes") or 0)
            if fig(label, "hbm_read_bytes") is not None
            else None
            for label in COMPARISON
        }
        paper_rows.append(
            {
                "S": s,
                "latency_us": lat,
                "hbm_bytes": hbm,
                "speedup_dense": _speedup(lat["dense"], lat["fused"]),
                "speedup_sequential": _speedup(lat["sequential"], lat["fused"]),
                "tensor_utilization": fig("fused", "tensor_utilization"),
                "bound_by": fig("fused", "bound_by") or "-",
            }
        )
    mlp: dict[str, dict[str, TaskResult]] = {}
    for r in estimates:
        if r.task.group.startswith("mlp:"):
            mlp.setdefault(r.task.group[4:], {})[r.task.label] = r
    mlp_rows = []
    for model, by in mlp.items():
        dense = by.get("dense")
        for label, r in by.items():
            if not label.startswith("svd@"):
                continue
            shp = r.task.shape_dict
            svd_us = r.figures.get("latency_us") if r.ok else None
            dense_us = dense.figures.get("latency_us") if dense is not None and dense.ok else None
            mlp_rows.append(
                {
                    "model": model,
                    "compression": label[4:],
                    "S": shp["S"],
                    "H": shp["H"],
                    "I": shp["I"],
                    "ranks": str(shp["r"]),
                    "svd_us": svd_us,
                    "dense_us": dense_us,
                    "speedup": _speedup(dense_us, svd_us),
                    "svd_hbm": (r.figures["hbm_read_bytes"] + r.figures["hbm_write_bytes"]) if r.ok else None,
                    "dense_hbm": (dense.figures["hbm_read_bytes"] + dense.figures["hbm_write_bytes"])
                    if dense is not None and dense.ok
                    else None,
                }
            )
    timeline = next((r for r in estimates if r.task.timeline and r.ok and r.report is not None), None)
    return Summary(
        validations,
        paper_rows,
        mlp_rows,
        timeline,
        errors,
        estimates,
        kernel_rows=kernel_rows(estimates),
        sweeps=sweep_tables(estimates),
        tuning_rows=tuning_rows(estimates),
        generation_rows=generation_rows(validations, estimates),
    )


def _latency(r: TaskResult | None) -> float | None:
    return r.figures.get("latency_us") if r is not None and r.ok else None


def _hbm(r: TaskResult | None) -> int | None:
    if r is None or not r.ok:
        return None
    return (r.figures.get("hbm_read_bytes") or 0) + (r.figures.get("hbm_write_bytes") or 0)


def _by_group(estimates: Sequence[TaskResult], prefix: str) -> dict[str, list[TaskResult]]:
    out: dict[str, list[TaskResult]] = {}
    for r in estimates:
        if r.task.group.startswith(prefix):
            out.setdefault(r.task.group[len(prefix) :], []).append(r)
    return out


def kernel_rows(estimates: Sequence[TaskResult]) -> list[dict[str, Any]]:
    """One row per kernel and dtype of the ``kernel:<name>`` estimates: ``latency_us``, ``hbm_bytes``,
    ``bound_by``, ``tensor_utilization`` and ``baselines`` (``label``, ``latency_us``, ``speedup`` =
    baseline latency / the kernel's)."""
    rows = []
    for name, results in _by_group(estimates, "kernel:").items():
        for r in (r for r in results if r.task.label == name):
            own = _latency(r)
            baselines = [
                {"label": b.task.label, "latency_us": _latency(b), "speedup": _speedup(_latency(b), own)}
                for b in results
                if b.task.label != name and b.task.dtype == r.task.dtype
            ]
            rows.append(
                {
                    "kernel": name,
                    "shape": r.task.shape_text,
                    "dtype": r.task.dtype,
                    "latency_us": own,
                    "hbm_bytes": _hbm(r),
                    "bound_by": r.figures.get("bound_by") or "-",
                    "tensor_utilization": r.figures.get("tensor_utilization"),
                    "baselines": baselines,
                }
            )
    return rows


def sweep_tables(estimates: Sequence[TaskResult]) -> list[dict[str, Any]]:
    """One table per ``sweep:<name>:<x>`` group: ``kernel``, ``x``, ``dtype``, ``labels`` (the kernel, then
    its baselines) and ``rows`` (``{"x": value, "latency_us": {label: us or None}}``)."""
    tables = []
    for key, results in _by_group(estimates, "sweep:").items():
        name, _, x = key.rpartition(":")
        labels = list(dict.fromkeys(r.task.label for r in results))
        points = sorted({int(r.task.point or 0) for r in results})
        lat = {(r.task.point, r.task.label): _latency(r) for r in results}
        rows = [{"x": v, "latency_us": {lb: lat.get((v, lb)) for lb in labels}} for v in points]
        tables.append(
            {"kernel": name, "x": x, "dtype": results[0].task.dtype, "labels": labels, "rows": rows}
        )
    return tables


def tuning_rows(estimates: Sequence[TaskResult]) -> list[dict[str, Any]]:
    """Tuned against declared default per ``tuning:<name>`` entry: ``kernel``, ``shape``, ``dtype``, both
    configs and latencies, ``speedup`` = default / tuned."""
    rows = []
    for name, results in _by_group(estimates, "tuning:").items():
        for tuned, default in zip(results[0::2], results[1::2]):
            rows.append(
                {
                    "kernel": name,
                    "shape": tuned.task.shape_text,
                    "dtype": tuned.task.dtype,
                    "tuned_blocks": dict(tuned.task.blocks or ()),
                    "tuned_us": _latency(tuned),
                    "default_blocks": dict(default.task.blocks or ()),
                    "default_us": _latency(default),
                    "speedup": _speedup(_latency(default), _latency(tuned)),
                }
            )
    return rows


def generation_rows(
    validations: Sequence[TaskResult], estimates: Sequence[TaskResult]
) -> list[dict[str, Any]]:
    """Beta 1 next to Beta 2, one row per family and dtype where both generations ran: per generation the
    ``kernel``, ``shape``, ``max_error``, ``tolerance``, ``passed`` and modelled ``latency_us`` (its
    ``kernel:`` estimate), and ``latency_diff_pct`` = (Beta 2 - Beta 1) / Beta 1 x 100 (None when either
    latency is missing or the shapes differ)."""
    lat = {
        (r.task.family, r.task.generation, r.task.dtype): _latency(r)
        for r in estimates
        if r.task.group.startswith("kernel:") and r.task.generation
    }
    found: dict[tuple[str, str], dict[str, dict[str, Any]]] = {}
    for r in validations:
        if not r.task.family:
            continue
        side = found.setdefault((r.task.family, r.task.dtype), {})
        side.setdefault(
            r.task.generation,
            {
                "kernel": r.task.kernel.rsplit(":", 1)[-1],
                "shape": r.task.shape_text,
                "max_error": r.max_error,
                "tolerance": r.tolerance,
                "passed": r.ok,
                "latency_us": lat.get((r.task.family, r.task.generation, r.task.dtype)),
            },
        )
    rows = []
    for (family, dtype), side in found.items():
        if "beta1" not in side or "beta2" not in side:
            continue
        b1, b2 = side["beta1"], side["beta2"]
        diff = None
        if b1["latency_us"] and b2["latency_us"] is not None and b1["shape"] == b2["shape"]:
            diff = (b2["latency_us"] - b1["latency_us"]) / b1["latency_us"] * 100.0
        rows.append({"family": family, "dtype": dtype, "beta1": b1, "beta2": b2, "latency_diff_pct": diff})
    return rows
