"""``devkit validate KERNEL``: hypothesis-driven numerics of a declared kernel in the simulator.

KERNEL is ``FILE.py:KERNEL`` or a declared name.  Shapes are drawn from the declaration's ``shape_space``
(the default shape first), dtypes from its ``dtypes``, inputs from a seed; every example is simulated with
numerics on and compared with the NumPy reference within the declared tolerance.  A failure is shrunk to
the smallest failing shape.  Exit status 0 when every example passed, 1 otherwise.
"""

from __future__ import annotations

import argparse

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from devkit.commands import add_command, stdout_console
from devkit.commands._errors import unknown_choice

_EXAMPLES = """examples:
  devkit validate my_kernels.py:scaled_add           # 10 hypothesis examples
  devkit validate xuv_fused --examples 25 --dtype bfloat16
"""


def register(sub: argparse._SubParsersAction) -> None:
    p = add_command(
        sub,
        "validate",
        "hypothesis numerics of a kernel against its declared reference (simulator)",
        __doc__,
        _EXAMPLES,
    )
    p.add_argument("kernel", help="FILE.py:KERNEL or a declared name")
    p.add_argument("--examples", type=int, default=10, metavar="N", help="hypothesis examples (default 10)")
    p.add_argument("--dtype", action="append", default=[], help="dtypes to draw from (default: the declared)")
    p.add_argument("--target", default="trn1", help="simulated target: trn1, inf2 or trn2 (default trn1)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from devkit.targets import TARGETS
    from devkit.workflow import catalog
    from devkit.workflow import validate as validator

    if args.target not in TARGETS:
        raise unknown_choice("--target", args.target, "target", TARGETS)
    err = Console(stderr=True)
    out = stdout_console(130)
    spec = catalog.get(args.kernel)
    err.print(
        f"devkit validate: {spec.name}: up to {args.examples} hypothesis examples on {args.target}",
        highlight=False,
    )

    def on_example(res: object) -> None:
        mark = "[green]✓[/]" if res.ok else "[red]✗[/]"  # type: ignore[attr-defined]
        err.print(f"{mark} {escape(res.message)}", highlight=False, soft_wrap=True)  # type: ignore[attr-defined]

    report = validator.validate(
        spec, examples=args.examples, dtypes=args.dtype or None, target=args.target, on_example=on_example
    )
    out.print(examples_table(report))
    if report.passed:
        out.print(f"[green]OK[/]: {len(report.examples)} examples within tolerance", highlight=False)
        return 0
    if report.failure is not None:
        out.print(
            f"[red]FAILED[/] (shrunk): {escape(report.failure.message)}", highlight=False, soft_wrap=True
        )
    if report.error is not None:
        out.print(f"[red]FAILED[/]: {escape(report.error)}", highlight=False, soft_wrap=True)
    return 1


def examples_table(report: object) -> Table:
    table = Table(title=f"{report.kernel}: numerics against the reference (simulator)")  # type: ignore[attr-defined]
    for col in ("shape", "dtype", "seed", "result", "max error", "tolerance"):
        table.add_column(col, justify="right" if col in ("seed", "max error", "tolerance") else "left")
    for r in report.examples:  # type: ignore[attr-defined]
        table.add_row(
            ",".join(f"{k}={v}" for k, v in r.shape.items()),
            r.dtype,
            str(r.seed),
            "[green]pass[/]" if r.ok else "[red]FAIL[/]",
            f"{r.max_error:.2e}",
            f"{r.tolerance:.0e}",
        )
    return table
