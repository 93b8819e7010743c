"""``devkit compare A B``: two cost reports side by side, with ratios, for A/B work and CI.

A and B are each a saved ``devkit cost --json`` report (a ``.json`` file) or a kernel
``FILE.py:KERNEL`` that is estimated here with the shared ``--arg``/``--kwarg``/``--grid``/``--target``
(the same call for both).  The table shows latency, the lower bound and what binds it, bytes per
memory level, engine busy time, utilisation, on-chip peaks and the top source lines; the last
column is B / A.

With ``--fail-above PCT`` the exit status is 1 when B's latency is more than PCT percent above A's
(a regression), else 0.  Exit status 2: bad input.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from devkit.commands import add_call_arguments
from devkit.cost.compare import CompareError, Comparison, check_report, compare
from devkit.workflow.kernel_ref import KernelRefError, load_kernel, parse_arg_spec, parse_kwarg

#: One line in ``devkit --help``.
SUMMARY = "compare two cost reports (saved --json files or FILE.py:KERNEL) with ratios"


def arguments(p: argparse.ArgumentParser) -> None:
    """The options of ``devkit compare``."""
    p.add_argument("a", metavar="A", help="baseline: report.json or FILE.py:KERNEL")
    p.add_argument("b", metavar="B", help="candidate: report.json or FILE.py:KERNEL")
    add_call_arguments(
        p,
        "positional tensor argument for FILE.py:KERNEL sides (repeat in order)",
        "keyword argument (Python literal) for FILE.py:KERNEL sides",
    )
    p.add_argument("--grid", default=None, metavar="G0[,G1...]", help="SPMD launch grid for kernel sides")
    p.add_argument("--target", default="trn1", help="target for kernel sides (default trn1)")
    p.add_argument(
        "--fail-above",
        type=float,
        default=None,
        metavar="PCT",
        help="exit 1 when B's latency exceeds A's by more than PCT percent",
    )
    p.add_argument("--json", action="store_true", help="print the comparison as one JSON object")


def _side(ref: str, args: argparse.Namespace, label: str) -> dict[str, Any]:
    """One side of the comparison as a report dict (read from JSON or estimated now)."""
    if ref.endswith(".json") or (Path(ref).is_file() and ":" not in Path(ref).name):
        path = Path(ref)
        if not path.is_file():
            raise CompareError(f"{label}: no such file: {ref}")
        try:
            data = json.loads(path.read_text())
        except json.JSONDecodeError as e:
            raise CompareError(f"{label}: {ref} is not valid JSON ({e.msg} at line {e.lineno})") from None
        return check_report(data, f"{label} ({ref})")
    import devkit
    from devkit.nki.runner import TensorSpec
    from devkit.targets import TARGETS

    if args.target not in TARGETS:
        raise CompareError(f"unknown target {args.target!r}; choose one of {', '.join(TARGETS)}")
    if not args.arg and not args.kwarg:
        raise CompareError(f"{label}: {ref} is a kernel; give its arguments with --arg (and --kwarg)")
    specs = []
    for a in args.arg:
        dtype, dims = parse_arg_spec(a)
        try:
            specs.append(TensorSpec(dims, dtype))
        except devkit.KernelError as e:
            raise CompareError(f"--arg {a!r}: {e.detail}") from None
    kwargs = dict(parse_kwarg(k) for k in args.kwarg)
    grid = tuple(int(g) for g in args.grid.split(",")) if args.grid else None
    kernel = load_kernel(ref)
    return devkit.estimate(kernel, *specs, grid=grid, target=args.target, **kwargs).to_dict()


def _fmt(value: float | None, unit: str) -> str:
    from devkit.cost.render import _bytes

    if value is None:
        return "-"
    if unit == "bytes":
        return _bytes(value)
    if unit == "ratio":
        return f"{value:.1%}"
    if unit == "count":
        return f"{value:,.0f}"
    return f"{value:,.2f}"


def _print(c: Comparison) -> None:
    from devkit.commands import stdout_console
    from devkit.tables import table

    figures = table(f"A = {c.label_a}\nB = {c.label_b}", ("<group", "<figure", "A", "B", "B / A"))
    for r in c.rows:
        unit = " us" if r.unit == "us" else ""
        ratio = "-" if r.ratio is None else f"{r.ratio:.3f}x"
        figures.add_row(r.group, r.name, _fmt(r.a, r.unit) + unit, _fmt(r.b, r.unit) + unit, ratio)
    figures.add_row("latency", "bound by", c.bound_by[0], c.bound_by[1], "")
    out = stdout_console()
    out.print(figures)
    hot = table("top source lines (total busy us)", ("<A", "<B"))
    ha, hb = c.hotspots
    for i in range(max(len(ha), len(hb))):
        cells = []
        for h in (ha, hb):
            cells.append(
                f"{Path(h[i]['file']).name}:{h[i]['line']}  {h[i]['total_busy_us']:,.1f}"
                if i < len(h)
                else ""
            )
        hot.add_row(*cells)
    if ha or hb:
        out.print(hot)
    for n in c.notes:
        out.print(f"[yellow]note: {n}[/yellow]")
    change = c.regression_pct
    out.print(f"latency B vs A: {change:+.2f} %")


def run(args: argparse.Namespace) -> int:
    import devkit

    try:
        a = _side(args.a, args, "A")
        b = _side(args.b, args, "B")
        c = compare(a, b, label_a=args.a, label_b=args.b)
        change = c.regression_pct
    except (CompareError, KernelRefError) as e:
        print(f"devkit compare: {e}", file=sys.stderr)
        return 2
    except devkit.KernelError as e:
        print(f"devkit compare: kernel fault: {e}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(c.to_dict(), indent=2))
    else:
        _print(c)
    if args.fail_above is not None and change > args.fail_above:
        print(
            f"devkit compare: regression: B's latency is {change:.2f} % above A's (threshold {args.fail_above:g} %)",
            file=sys.stderr,
        )
        return 1
    return 0
