"""``devkit run``: the main job.

Validates every declared kernel (the project's ``[tool.devkit] kernels``, then the kit's unless
``include_kit = false``; or just the KERNELs named) against its NumPy reference in the simulator, estimates NeuronMM
against its baselines on the paper's shapes and the MLPs of small LLMs (cost-only), prints summary
tables and writes an HTML report.  Exit status: 0 when every validation passed and every estimate ran;
1 otherwise (the failures are listed at the end); 2 for bad options.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from devkit.commands import add_executor_arguments, add_jobs_argument, stdout_console
from devkit.commands._errors import unknown_choice
from devkit.commands._jobs import executor_from_args
from devkit.commands._outputs import check_dir, check_input_dir
from devkit.commands._progress import Heartbeat, count_bar
from devkit.tables import table
from devkit.workflow import executor as executors
from devkit.workflow import run as main_job

#: One line in ``devkit --help``.
SUMMARY = "the main job: validate all kernels, estimate NeuronMM, write the report"

EXAMPLES = """examples:
  devkit run                         # full run, report in devkit-report/index.html
  devkit run --quick                 # smaller shapes and fewer points (about a minute on 2 cores)
  devkit run --target trn2 --out /tmp/report --jobs 1
"""


def arguments(p: argparse.ArgumentParser) -> None:
    """The options of ``devkit run``."""
    p.add_argument(
        "kernels",
        nargs="*",
        metavar="KERNEL",
        help="FILE.py:KERNEL or declared names (default: all declared)",
    )
    p.add_argument(
        "--quick", action="store_true", help="smaller validation shapes and fewer sequence lengths"
    )
    p.add_argument(
        "--out", default=None, metavar="DIR", help="report directory (default: the project's devkit-report/)"
    )
    p.add_argument("--target", default="trn1", help="cost-model target: trn1, inf2 or trn2 (default trn1)")
    add_jobs_argument(p)
    add_executor_arguments(p)
    p.add_argument(
        "--results",
        default=None,
        metavar="DIR",
        help="hardware results store to include in the report (default: results/ when it has data)",
    )


def run(args: argparse.Namespace) -> int:
    err = Console(stderr=True)
    if not err.is_terminal:
        err = Console(stderr=True, width=max(err.width, 130))
    from devkit.targets import TARGETS

    if args.target not in TARGETS:
        raise unknown_choice("--target", args.target, "target", TARGETS)
    ex = executor_from_args(args)
    if args.out is None:
        from devkit import project

        args.out = str(project.state_path("reports"))
    check_dir(args.out, "--out")
    if args.results:
        check_input_dir(args.results, "--results")
    t0 = time.perf_counter()
    from devkit.workflow import catalog

    specs = [catalog.get(k) for k in args.kernels] if args.kernels else None
    tasks = main_job.plan(quick=args.quick, target=args.target, specs=specs)
    n_valid = sum(t.kind == "validate" for t in tasks)
    try:
        err.print(
            f"devkit run: {n_valid} validations and {len(tasks) - n_valid} estimates on {ex.describe()}; "
            f"report to {escape(str(args.out))}",
            highlight=False,
            soft_wrap=True,
        )
        results = _execute_with_progress(tasks, ex, err)
    except KeyboardInterrupt:
        err.print("devkit run: interrupted: no report written", highlight=False)
        return 130
    finally:
        ex.close()
    summary = main_job.summarise(results)
    wall = time.perf_counter() - t0
    out = stdout_console(130)
    out.print(validation_table(summary))
    if summary.paper_rows:
        out.print(paper_table(summary, args.target))
    if summary.mlp_rows:
        out.print(mlp_table(summary, args.target))
    for t in kernel_tables(summary, args.target):
        out.print(t)
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


def _execute_with_progress(
    tasks: list[main_job.Task], jobs: int | executors.Executor, err: Console
) -> list[main_job.TaskResult]:
    running: list[str] = []
    finished = [0]

    def status() -> str:
        return f"{finished[0]}/{len(tasks)} done; running: {', '.join(running) or '-'}"

    with (
        Heartbeat("devkit run", status=status, terminal=False),
        count_bar("[bold]devkit run[/]", err, spinner=True, description=True) as bar,
    ):
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
            finished[0] += 1
            bar.advance(job)
            bar.update(job, description=escape(running[-1]) if running else "")

        return main_job.execute(tasks, jobs=jobs, on_start=on_start, on_done=on_done)


def _us(v: float | None) -> str:
    from devkit.workflow.report import fmt_us

    return fmt_us(v)


def validation_table(summary: main_job.Summary) -> Table:
    rows = [
        (r.task.kernel.rsplit(":", 1)[-1], r.task.shape_text, r.task.dtype,
         "[green]pass[/]" if r.ok else "[red]FAIL[/]",
         "-" if r.max_error is None else f"{r.max_error:.2e}",
         "-" if r.tolerance is None else f"{r.tolerance:.0e}",
         f"{r.seconds:.1f} s")
        for r in summary.validations
    ]  # fmt: skip
    return table(
        "Validation against the NumPy references (simulator)",
        ("<kernel", "<shape", "<dtype", "<result", "max error", "tolerance", "time"),
        rows,
    )


def band_caption(target: str) -> str:
    """The uncertainty band of modelled latencies on ``target``, as a table caption."""
    from devkit.cost.uncertainty import band, no_band_text

    b = band(target)
    if b is None:
        return no_band_text(target)
    return (
        f"modelled latencies ±{b.pct:.0f} % (largest error against the {len(b.residuals)} measured "
        f"latencies the model has on {target})"
    )


def paper_table(summary: main_job.Summary, target: str) -> Table:
    out = table(
        f"NeuronMM (S, {main_job.PAPER_H})·({main_job.PAPER_H}, {main_job.PAPER_R})·"
        f"({main_job.PAPER_R}, {main_job.PAPER_N}) bf16, modelled on {target}",
        ("S", "fused", "sequential", "dense", "fused vs dense", "fused vs seq", "HBM fused", "HBM seq",
         "HBM dense", "TensorE util", "<bound by"),
        caption=band_caption(target),
    )  # fmt: skip
    from devkit.workflow.report import fmt_bytes

    for row in summary.paper_rows:
        lat, hbm = row["latency_us"], row["hbm_bytes"]
        out.add_row(
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
    return out


def _x(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}x"


def mlp_table(summary: main_job.Summary, target: str) -> Table:
    rows = [
        (r["model"], r["compression"], str(r["S"]), str(r["H"]), str(r["I"]), r["ranks"], _us(r["svd_us"]),
         _us(r["dense_us"]), _x(r["speedup"]))
        for r in summary.mlp_rows
    ]  # fmt: skip
    return table(
        f"SVD MLP vs dense MLP (bf16), modelled on {target}",
        ("<model", "compression", "S", "H", "I", "rank", "svd_mlp", "dense_mlp", "speedup"),
        rows,
        caption=band_caption(target),
    )


def kernel_tables(summary: main_job.Summary, target: str) -> list[Table]:
    """The per-kernel tables: kernels against their baselines, each sweep, tuned against declared
    configs, and Beta 1 next to Beta 2 (only those with rows)."""
    tables = []
    on = f"modelled on {target}"
    if summary.kernel_rows:
        rows = [
            (r["kernel"], r["shape"], r["dtype"], _us(r["latency_us"]), r["bound_by"],
             "; ".join(f"{b['label']} {_us(b['latency_us'])} ({_x(b['speedup'])})" for b in r["baselines"]) or "-")
            for r in summary.kernel_rows
        ]  # fmt: skip
        tables.append(
            table(
                f"Kernels against their declared baselines, {on}",
                ("<kernel", "<shape", "<dtype", "latency", "<bound by", "<baselines (kernel's speedup)"),
                rows,
                caption=band_caption(target),
            )
        )
    for t in summary.sweeps:
        rows = [(str(r["x"]), *(_us(r["latency_us"][lb]) for lb in t["labels"])) for r in t["rows"]]
        tables.append(
            table(f"Sweep of {t['kernel']} over {t['x']} ({t['dtype']}), {on}", (t["x"], *t["labels"]), rows)
        )
    if summary.tuning_rows:
        rows = [
            (r["kernel"], r["shape"], r["dtype"], str(r["tuned_blocks"]), _us(r["tuned_us"]),
             str(r["default_blocks"]), _us(r["default_us"]), _x(r["speedup"]))
            for r in summary.tuning_rows
        ]  # fmt: skip
        tables.append(
            table(
                f"Tuned configurations (project tuning table), {on}",
                ("<kernel", "<shape", "<dtype", "<tuned", "tuned", "<declared default", "default", "speedup"),
                rows,
            )
        )
    if summary.generation_rows:
        rows = [
            (g["family"], g["dtype"], g["beta1"]["kernel"], _err(g["beta1"]["max_error"]), g["beta2"]["kernel"],
             _err(g["beta2"]["max_error"]), _us(g["beta1"]["latency_us"]), _us(g["beta2"]["latency_us"]),
             "-" if g["latency_diff_pct"] is None else f"{g['latency_diff_pct']:+.1f} %")
            for g in summary.generation_rows
        ]  # fmt: skip
        tables.append(
            table(
                f"Beta 1 and Beta 2 side by side, {on}",
                (
                    "<family",
                    "<dtype",
                    "<Beta 1",
                    "max error",
                    "<Beta 2",
                    "max error",
                    "Beta 1",
                    "Beta 2",
                    "Beta 2 vs 1",
                ),
                rows,
            )
        )
    return tables


def _err(v: float | None) -> str:
    return "-" if v is None else f"{v:.2e}"


def _write_report(summary: main_job.Summary, args: argparse.Namespace, wall: float) -> Path:
    from devkit.workflow.report import write_report
    from devkit.workflow.run_report import report_context

    context = report_context(
        summary, target=args.target, quick=args.quick, wall_s=wall, results_dir=args.results
    )
    from devkit.workflow.results import write_results

    write_results(summary, args.out, target=args.target, quick=args.quick)
    return write_report(context, args.out)
