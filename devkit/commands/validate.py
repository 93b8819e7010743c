"""``devkit validate KERNEL``: hypothesis-driven numerics of a declared kernel in the simulator.

KERNEL is ``FILE.py:KERNEL`` or a declared name; several KERNELs are independent jobs (``--jobs``,
``--executor ray``: one job per kernel, the same examples as one by one).  Shapes are drawn from the
declaration's ``shape_space``
(the default shape first), dtypes from its ``dtypes``, inputs from a seed; every example is simulated with
numerics on and compared with the NumPy reference within the declared tolerance.  A failure is shrunk to
the smallest failing shape.  Exit status 0 when every example passed, 1 otherwise.
"""

from __future__ import annotations

import argparse

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from devkit.commands import add_executor_arguments, add_jobs_argument, stdout_console
from devkit.commands._errors import unknown_choice
from devkit.tables import table

#: One line in ``devkit --help``.
SUMMARY = "hypothesis numerics of a kernel against its declared reference (simulator)"

EXAMPLES = """examples:
  devkit validate my_kernels.py:scaled_add           # 10 hypothesis examples
  devkit validate xuv_fused --examples 25 --dtype bfloat16
  devkit validate xuv_fused matmul_tiled svd_mlp --jobs 2     # one kernel per worker
"""


def arguments(p: argparse.ArgumentParser) -> None:
    """The options of ``devkit validate``."""
    p.add_argument("kernel", help="FILE.py:KERNEL or a declared name")
    p.add_argument("more_kernels", nargs="*", metavar="KERNEL", help="more kernels, each an independent job")
    p.add_argument("--examples", type=int, default=10, metavar="N", help="hypothesis examples (default 10)")
    p.add_argument("--dtype", action="append", default=[], help="dtypes to draw from (default: the declared)")
    p.add_argument("--target", default="trn1", help="simulated target: trn1, inf2 or trn2 (default trn1)")
    add_jobs_argument(p, ", one kernel each", in_process=True)
    add_executor_arguments(p)


def run(args: argparse.Namespace) -> int:
    from devkit.targets import TARGETS
    from devkit.workflow import catalog

    if args.target not in TARGETS:
        raise unknown_choice("--target", args.target, "target", TARGETS)
    err = Console(stderr=True)
    out = stdout_console(130)
    specs = [catalog.get(k) for k in (args.kernel, *getattr(args, "more_kernels", []))]
    names = ", ".join(s.name for s in specs)
    err.print(
        f"devkit validate: {names}: up to {args.examples} hypothesis examples each on {args.target}",
        highlight=False,
    )
    reports = _validate_all(args, specs, err)
    passed = True
    for report in reports:
        out.print(examples_table(report))
        passed &= _verdict(report, out, several=len(reports) > 1)
    return 0 if passed else 1


def _print_example(res: object, err: Console) -> None:
    mark = "[green]✓[/]" if res.ok else "[red]✗[/]"  # type: ignore[attr-defined]
    err.print(f"{mark} {escape(res.message)}", highlight=False, soft_wrap=True)  # type: ignore[attr-defined]


def _validate_all(args: argparse.Namespace, specs: list, err: Console) -> list:
    """Each kernel's report: one by one in this process (examples printed as they run) by default, else
    one job per kernel on the executor (examples printed as each kernel's job returns)."""
    from devkit.commands._jobs import executor_from_args
    from devkit.workflow import catalog, executor
    from devkit.workflow import validate as validator

    if args.jobs is None and args.executor == "local":
        return [
            validator.validate(
                spec,
                examples=args.examples,
                dtypes=args.dtype or None,
                target=args.target,
                on_example=lambda res: _print_example(res, err),
            )
            for spec in specs
        ]
    items = [
        {
            "kernel": catalog.ref_of(s),
            "examples": args.examples,
            "dtypes": args.dtype or None,
            "target": args.target,
        }
        for s in specs
    ]

    def arrived(report: object) -> None:
        for res in report.examples:  # type: ignore[attr-defined]
            _print_example(res, err)

    ex = executor_from_args(args)
    try:
        return executor.run_jobs(validator.validate_job, items, jobs=ex, on_done=arrived)
    finally:
        ex.close()


def _verdict(report: object, out: Console, several: bool) -> bool:
    who = f"{report.kernel}: " if several else ""  # type: ignore[attr-defined]
    if report.passed:  # type: ignore[attr-defined]
        out.print(f"[green]OK[/]: {who}{len(report.examples)} examples within tolerance", highlight=False)  # type: ignore[attr-defined]
        return True
    if report.failure is not None:  # type: ignore[attr-defined]
        out.print(
            f"[red]FAILED[/] (shrunk): {escape(report.failure.message)}",  # type: ignore[attr-defined]
            highlight=False,
            soft_wrap=True,
        )
    if report.error is not None:  # type: ignore[attr-defined]
        out.print(f"[red]FAILED[/]: {escape(report.error)}", highlight=False, soft_wrap=True)  # type: ignore[attr-defined]
    return False


def examples_table(report: object) -> Table:
    rows = [
        (",".join(f"{k}={v}" for k, v in r.shape.items()), r.dtype, str(r.seed),
         "[green]pass[/]" if r.ok else "[red]FAIL[/]", f"{r.max_error:.2e}", f"{r.tolerance:.0e}")
        for r in report.examples  # type: ignore[attr-defined]
    ]  # fmt: skip
    return table(
        f"{report.kernel}: numerics against the reference (simulator)",  # type: ignore[attr-defined]
        ("<shape", "<dtype", "seed", "<result", "max error", "tolerance"),
        rows,
    )
