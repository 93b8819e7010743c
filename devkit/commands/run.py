"""``devkit run``: the main job.

Validates every registered kernel against its NumPy reference in the simulator, estimates NeuronMM
against its baselines on the paper's shapes and the MLPs of small LLMs (cost-only), prints summary
tables and writes an HTML report.  Exit status: 0 when every validation passed and every estimate ran;
1 otherwise (the failures are listed at the end); 2 for bad options.
"""

from __future__ import annotations

import argparse
import datetime
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table

from devkit import main_job
from devkit.commands import add_jobs_argument, stdout_console

_EXAMPLES = """examples:
  devkit run                         # full run, report in devkit-report/index.html
  devkit run --quick                 # smaller shapes and fewer points (about a minute on 2 cores)
  devkit run --target trn2 --out /tmp/report --jobs 1
"""


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "run",
        help="the main job: validate all kernels, estimate NeuronMM, write the report",
        description=__doc__,
        epilog=_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--quick", action="store_true", help="smaller validation shapes and fewer sequence lengths"
    )
    p.add_argument(
        "--out", default="devkit-report", metavar="DIR", help="report directory (default devkit-report)"
    )
    p.add_argument("--target", default="trn1", help="cost-model target: trn1, inf2 or trn2 (default trn1)")
    add_jobs_argument(p)
    p.add_argument(
        "--results",
        default=None,
        metavar="DIR",
        help="hardware results store to include in the report (default: results/ when it has data)",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    err = Console(stderr=True)
    if not err.is_terminal:
        err = Console(stderr=True, width=max(err.width, 130))
    from devkit.targets import TARGETS

    if args.target not in TARGETS:
        err.print(
            f"[red]error:[/] unknown target {escape(args.target)!r}; choose one of {', '.join(TARGETS)}",
            highlight=False,
        )
        return 2
    jobs = args.jobs if args.jobs is not None else main_job.default_jobs()
    if jobs < 1:
        err.print("[red]error:[/] --jobs must be >= 1", highlight=False)
        return 2
    t0 = time.perf_counter()
    tasks = main_job.plan(quick=args.quick, target=args.target)
    try:
        results = _execute_with_progress(tasks, jobs, err)
    except KeyboardInterrupt:
        err.print("[red]interrupted[/]: no report written", highlight=False)
        return 130
    summary = main_job.summarise(results)
    wall = time.perf_counter() - t0
    out = stdout_console(130)
    out.print(validation_table(summary))
    if summary.paper_rows:
        out.print(paper_table(summary, args.target))
    if summary.mlp_rows:
        out.print(mlp_table(summary, args.target))
    path = _write_report(summary, args, wall)
    out.print(f"report: {escape(str(path))}", highlight=False)
    if summary.passed:
        out.print(
            f"[green]OK[/]: {len(summary.validations)} validations passed, "
            f"{len(results) - len(summary.validations)} estimates ran ({wall:.0f} s)",
            highlight=False,
        )
        return 0
    out.print(f"[red]FAILED[/] ({wall:.0f} s):", highlight=False)
    for r in summary.failures:
        out.print(
            f"  - validation {escape(r.task.kernel)} [{escape(r.task.shape_text)}] {r.task.dtype}: "
            f"{escape(r.error or 'failed')}",
            highlight=False,
            soft_wrap=True,
        )
    for r in summary.estimate_errors:
        out.print(
            f"  - estimate {escape(r.task.kernel)} [{escape(r.task.shape_text)}]: {escape(r.error or '')}",
            highlight=False,
            soft_wrap=True,
        )
    return 1


def _execute_with_progress(tasks: list[main_job.Task], jobs: int, err: Console) -> list[main_job.TaskResult]:
    running: list[str] = []
    with Progress(
        SpinnerColumn(),
        TextColumn("[bold]devkit run[/]"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("{task.description}"),
        console=err,
        transient=True,
    ) as bar:
        job = bar.add_task("", total=len(tasks))

        def on_start(task: main_job.Task) -> None:
            running.append(task.describe())
            bar.update(job, description=escape(running[-1]))

        def on_done(res: main_job.TaskResult) -> None:
            name = res.task.describe()
            if name in running:
                running.remove(name)
            if res.ok:
                extra = ""
                if res.task.kind == "validate":
                    extra = f" error {res.max_error:.2g} <= {res.tolerance:.2g}"
                else:
                    extra = f" {res.figures['latency_us']:,.1f} us"
                bar.console.print(
                    f"[green]✓[/] {escape(name)}{extra} [dim]({res.seconds:.1f} s)[/]", highlight=False
                )
            else:
                bar.console.print(
                    f"[red]✗ {escape(name)}[/]: {escape(res.error or '')}", highlight=False, soft_wrap=True
                )
            bar.advance(job)
            bar.update(job, description=escape(running[-1]) if running else "")

        return main_job.execute(tasks, jobs=jobs, on_start=on_start, on_done=on_done)


def _us(v: float | None) -> str:
    from devkit.report import fmt_us

    return fmt_us(v)


def validation_table(summary: main_job.Summary) -> Table:
    table = Table(title="Validation against the NumPy references (simulator)")
    for col, justify in (
        ("kernel", "left"),
        ("shape", "left"),
        ("dtype", "left"),
        ("result", "left"),
        ("max error", "right"),
        ("tolerance", "right"),
        ("time", "right"),
    ):
        table.add_column(col, justify=justify)  # type: ignore[arg-type]
    for r in summary.validations:
        result = "[green]pass[/]" if r.ok else "[red]FAIL[/]"
        table.add_row(
            r.task.kernel,
            r.task.shape_text,
            r.task.dtype,
            result,
            "-" if r.max_error is None else f"{r.max_error:.2e}",
            "-" if r.tolerance is None else f"{r.tolerance:.0e}",
            f"{r.seconds:.1f} s",
        )
    return table


def paper_table(summary: main_job.Summary, target: str) -> Table:
    table = Table(
        title=f"NeuronMM (S, {main_job.PAPER_H})·({main_job.PAPER_H}, {main_job.PAPER_R})·"
        f"({main_job.PAPER_R}, {main_job.PAPER_N}) bf16, modelled on {target}"
    )
    for col in (
        "S",
        "fused",
        "sequential",
        "dense",
        "fused vs dense",
        "fused vs seq",
        "HBM fused",
        "HBM seq",
        "HBM dense",
        "TensorE util",
        "bound by",
    ):
        table.add_column(col, justify="left" if col == "bound by" else "right")
    from devkit.report import fmt_bytes

    for row in summary.paper_rows:
        lat, hbm = row["latency_us"], row["hbm_bytes"]
        table.add_row(
            str(row["S"]),
            _us(lat["fused"]),
            _us(lat["sequential"]),
            _us(lat["dense"]),
            _x(row["speedup_dense"]),
            _x(row["speedup_sequential"]),
            *("-" if hbm[k] is None else fmt_bytes(hbm[k]) for k in ("fused", "sequential", "dense")),
            "-" if row["tensor_utilization"] is None else f"{row['tensor_utilization']:.1%}",
            row["bound_by"],
        )
    return table


def _x(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}x"


def mlp_table(summary: main_job.Summary, target: str) -> Table:
    table = Table(title=f"SVD MLP vs dense MLP (bf16), modelled on {target}")
    for col in ("model", "compression", "S", "H", "I", "rank", "svd_mlp", "dense_mlp", "speedup"):
        table.add_column(col, justify="left" if col == "model" else "right")
    for r in summary.mlp_rows:
        table.add_row(
            r["model"],
            r["compression"],
            str(r["S"]),
            str(r["H"]),
            str(r["I"]),
            r["ranks"],
            _us(r["svd_us"]),
            _us(r["dense_us"]),
            _x(r["speedup"]),
        )
    return table


def report_context(
    summary: main_job.Summary,
    *,
    target: str,
    quick: bool,
    wall_s: float | None,
    results_dir: str | None = None,
) -> dict[str, Any]:
    """The template context of the main report (see templates/report.html.j2)."""
    from devkit import __version__, hw
    from devkit.report import hotspot_rows, plot_sweep, plot_timeline
    from devkit.targets import load_target

    comparison = None
    if summary.paper_rows:
        xs = [r["S"] for r in summary.paper_rows]
        names = list(main_job.COMPARISON)
        lat_series = {
            f"{n} ({main_job.COMPARISON[n]})": [r["latency_us"][n] for r in summary.paper_rows] for n in names
        }
        hbm_series = {
            f"{n} ({main_job.COMPARISON[n]})": [
                None if r["hbm_bytes"][n] is None else r["hbm_bytes"][n] / 2**30 for r in summary.paper_rows
            ]
            for n in names
        }
        rows = [
            {**r, "S_text": f"{r['S'] // 1024}K" if r["S"] % 1024 == 0 else str(r["S"])}
            for r in summary.paper_rows
        ]
        shape_text = (
            f"X[S, {main_job.PAPER_H}] · U[{main_job.PAPER_H}, {main_job.PAPER_R}] · "
            f"V[{main_job.PAPER_R}, {main_job.PAPER_N}] in bf16; dense = matmul_optimized on "
            f"X · W[{main_job.PAPER_H}, {main_job.PAPER_N}]"
        )
        comparison = {
            "shape_text": shape_text,
            "kernels": names,
            "rows": rows,
            "latency_png": plot_sweep(
                xs, lat_series, ylabel="modelled latency (us)", title=f"latency vs sequence length ({target})"
            ),
            "hbm_png": plot_sweep(
                xs,
                hbm_series,
                ylabel="HBM traffic, read + write (GiB)",
                title="HBM traffic vs sequence length",
            ),
        }
    mlp = None
    if summary.mlp_rows:
        mlp = {
            "rows": summary.mlp_rows,
            "caption": "svd_mlp (fused gate/up with the activation written transposed, then the fused down "
            "projection) against dense_mlp at the NeuronMM block-aligned ranks; one prefill of S tokens.",
        }
    timeline = None
    if summary.timeline is not None:
        rep = summary.timeline.report
        t = summary.timeline.task
        tgt = load_target(t.target)
        label = f"{t.kernel} [{t.shape_text}] {t.dtype}"
        timeline = {
            "label": label,
            "latency_us": rep.latency_us,
            "bound_by": rep.bound_by,
            "tensor_utilization": rep.tensor_utilization,
            "instructions": rep.instructions,
            "engines": ["tensor", "vector", "scalar", "gpsimd", "dma"],
            "png": plot_timeline(
                rep.timeline, dma_engines=tgt.dma.engines, latency_us=rep.latency_us, title=t.kernel
            ),
            "hotspots": hotspot_rows(rep, code=summary.timeline.figures.get("hotspot_code")),
        }
    validations = [
        {
            "kernel": r.task.kernel,
            "shape": r.task.shape_text,
            "dtype": r.task.dtype,
            "passed": r.ok,
            "max_error": r.max_error,
            "tolerance": r.tolerance,
            "seconds": r.seconds,
            "detail": r.error or "",
        }
        for r in summary.validations
    ]
    hardware = _hardware_context(results_dir)
    return {
        "title": "NeuronMM devkit report",
        "devkit_version": __version__,
        "target": target,
        "mode": "quick" if quick else "full",
        "git_commit": hw.git_commit(),
        "generated": datetime.datetime.now().isoformat(timespec="seconds"),
        "wall_s": wall_s,
        "status": {
            "passed": summary.passed,
            "validations": len(summary.validations),
            "failures": len(summary.failures),
            "estimate_errors": len(summary.estimate_errors),
        },
        "validations": validations,
        "comparison": comparison,
        "mlp": mlp,
        "timeline": timeline,
        "hardware": hardware,
        "errors": [{"task": r.task.describe(), "message": r.error or ""} for r in summary.estimate_errors],
        "notes": [
            f"Latencies, bytes and utilisation are modelled by the devkit cost model for one {target} "
            "NeuronCore (trace-based: every instruction of the unmodified kernel is scheduled on the "
            "engines and DMA queues); they are not measurements.",
            "Validation runs the kernels with numerics on and compares with the registry's NumPy "
            "reference (normalised max error max|out-ref|/max|ref| against the tolerance for the dtype).",
        ],
    }


def _hardware_context(results_dir: str | None) -> dict[str, Any] | None:
    from devkit import hw
    from devkit.commands.hw import hardware_section, load_rows

    root = Path(results_dir) if results_dir else hw.project_dir("results")
    rows, _ = load_rows(root)
    if not rows:
        return None
    return hardware_section(
        rows,
        0.25,
        f"Median measured P50 per kernel and shape from {root} against the "
        "prediction made at promotion (devkit hw report for details).",
    )


def _write_report(summary: main_job.Summary, args: argparse.Namespace, wall: float) -> Path:
    from devkit.report import write_report

    context = report_context(
        summary, target=args.target, quick=args.quick, wall_s=wall, results_dir=args.results
    )
    return write_report(context, args.out)
