"""``devkit sweep KERNEL``: a perf_report-style shape sweep of a kernel and its declared baselines.

KERNEL is ``FILE.py:KERNEL`` or a declared name.  The x parameter, its values and the fixed parameters
come from the declaration's ``sweep`` (``--x`` / ``--values`` override them); every point is a cost-only
estimate on the target.  Prints the table and writes ``<kernel>.csv``, ``<kernel>.json`` and
``<kernel>.png`` into the project's ``devkit-sweeps/`` (``[tool.devkit] sweeps``) or ``--out``.
"""

from __future__ import annotations

import argparse

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from devkit.commands import add_executor_arguments, add_jobs_argument, stdout_console
from devkit.commands._errors import bad_value, unknown_choice
from devkit.commands._jobs import executor_from_args, job_progress
from devkit.commands._outputs import check_dir

#: One line in ``devkit --help``.
SUMMARY = "shape sweep of a kernel and its baselines: table, CSV/JSON and plot"

EXAMPLES = """examples:
  devkit sweep xuv_fused                               # the declared sweep, with its baselines
  devkit sweep my_kernels.py:scaled_add --x N --values 512,2048,8192
"""


def arguments(p: argparse.ArgumentParser) -> None:
    """The options of ``devkit sweep``."""
    p.add_argument("kernel", help="FILE.py:KERNEL or a declared name")
    p.add_argument("--x", default=None, metavar="NAME", help="shape parameter to sweep (default: declared)")
    p.add_argument("--values", default=None, metavar="V1,V2,...", help="values of the x parameter")
    p.add_argument("--dtype", default=None, help="dtype (default: the declared sweep's)")
    p.add_argument("--target", default="trn1", help="cost-model target: trn1, inf2 or trn2 (default trn1)")
    p.add_argument("--no-baselines", action="store_true", help="sweep the kernel alone")
    p.add_argument("--out", default=None, metavar="DIR", help="output directory (default: the project's)")
    add_jobs_argument(p)
    add_executor_arguments(p)


def run(args: argparse.Namespace) -> int:
    from devkit import project
    from devkit.targets import TARGETS
    from devkit.workflow import catalog
    from devkit.workflow import sweep as sweeper

    if args.target not in TARGETS:
        raise unknown_choice("--target", args.target, "target", TARGETS)
    values = None
    if args.values is not None:
        try:
            values = [int(v) for v in args.values.split(",") if v.strip()]
        except ValueError:
            raise bad_value("--values", args.values, "comma-separated positive integers") from None
    if args.jobs is not None and args.jobs < 1:
        raise bad_value("--jobs", str(args.jobs), "a number of worker processes >= 1")
    out_dir = args.out if args.out is not None else project.state_path("sweeps")
    check_dir(out_dir, "--out")
    spec = catalog.get(args.kernel)
    sweep = sweeper.resolve_sweep(spec, args.x, values, args.dtype)
    if sweep.dtype not in spec.dtypes:
        raise bad_value("--dtype", sweep.dtype, f"one of {', '.join(spec.dtypes)}")
    lines = sweeper.lines_of(spec, catalog.ref_of(spec), not args.no_baselines)
    for line in lines[1:]:
        catalog.get(line.ref)  # an unknown baseline is a declaration error, said before any work
    err = Console(stderr=True)
    ex = executor_from_args(args)
    try:
        err.print(
            f"devkit sweep: {spec.name} over {sweep.x} = {', '.join(map(str, sweep.values))} "
            f"({len(lines)} line(s), {ex.describe()})",
            highlight=False,
        )
        with job_progress("devkit sweep", len(sweep.values) * len(lines), err) as tick:
            result = sweeper.run_sweep(
                spec, sweep, lines, target=args.target, jobs=ex, progress=lambda done, total: tick(done)
            )
    except KeyboardInterrupt:
        err.print(
            "devkit sweep: interrupted: nothing written (a rerun resumes the finished points)",
            highlight=False,
            soft_wrap=True,
        )
        return 130
    finally:
        ex.close()
    out = stdout_console(130)
    out.print(sweep_table(result))
    for e in result.errors:
        err.print(f"[red]point failed:[/] {escape(e)}", highlight=False, soft_wrap=True)
    paths = sweeper.write(result, out_dir)
    out.print("wrote " + ", ".join(escape(str(p)) for p in paths), highlight=False, soft_wrap=True)
    return 1 if result.errors else 0


def sweep_table(result: object) -> Table:
    r = result
    fixed = ", ".join(f"{k}={v}" for k, v in r.fixed.items())  # type: ignore[attr-defined]
    table = Table(title=f"{r.kernel} ({fixed}) {r.dtype}, modelled on {r.target} (us)")  # type: ignore[attr-defined]
    table.add_column(r.x, justify="right")  # type: ignore[attr-defined]
    for lb in r.labels:  # type: ignore[attr-defined]
        table.add_column(lb, justify="right")
    first = r.labels[0]  # type: ignore[attr-defined]
    for lb in r.labels[1:]:  # type: ignore[attr-defined]
        table.add_column(f"{first} vs {lb}", justify="right")
    for row in r.rows:  # type: ignore[attr-defined]
        lat = [row.get(lb) for lb in r.labels]  # type: ignore[attr-defined]
        speed = [f"{b / lat[0]:.2f}x" if b and lat[0] else "-" for b in lat[1:]]
        table.add_row(str(row[r.x]), *("-" if v is None else f"{v:,.1f}" for v in lat), *speed)  # type: ignore[attr-defined]
    return table
