"""``devkit cost FILE.py:KERNEL --arg DTYPE[D0,D1,...] ...``: cost-only estimate of one kernel.

The file is imported unmodified with ``neuronxcc.nki`` mapped to the simulator; the kernel runs on
shape/dtype placeholders (no arithmetic) and the cost model schedules its instruction trace.
"""

from __future__ import annotations

import argparse
import json
import sys

from devkit.workflow.kernel_ref import KernelRefError, load_kernel, parse_arg_spec, parse_kwarg


class CostUsageError(ValueError):
    """Bad command-line input for ``devkit cost`` (reported without a traceback)."""


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "cost",
        help="cost-only latency estimate of one kernel from an unmodified file",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("kernel", metavar="FILE.py:KERNEL", help="kernel to estimate")
    p.add_argument(
        "--arg",
        action="append",
        default=[],
        metavar="DTYPE[D0,D1,...]",
        help="one positional tensor argument (repeat in order)",
    )
    p.add_argument(
        "--kwarg",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a keyword argument given as a Python literal (repeatable)",
    )
    p.add_argument("--grid", default=None, metavar="G0[,G1...]", help="SPMD launch grid")
    p.add_argument("--target", default="trn1", help="trn1, inf2 or trn2 (default trn1)")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    p.add_argument("--timeline", action="store_true", help="include the engine timeline in the JSON")
    p.add_argument(
        "--trace",
        default=None,
        metavar="FILE.json",
        help="also write the scheduled trace as Chrome/Perfetto trace-event JSON (ui.perfetto.dev)",
    )
    p.add_argument(
        "--plot",
        default=None,
        metavar="FILE.png|FILE.svg",
        help="also write the kernel's roofline chart (intensity and throughput under the target's roofs)",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import devkit
    from devkit.cost.render import render_table
    from devkit.nki.runner import TensorSpec

    try:
        from devkit.targets import TARGETS

        if args.target not in TARGETS:
            raise CostUsageError(f"unknown target {args.target!r}; choose one of {', '.join(TARGETS)}")
        specs = []
        for a in args.arg:
            dtype, dims = parse_arg_spec(a)
            try:
                specs.append(TensorSpec(dims, dtype))
            except devkit.KernelError as e:
                raise CostUsageError(f"--arg {a!r}: {e.detail}") from None
        kwargs = dict(parse_kwarg(k) for k in args.kwarg)
        grid = tuple(int(g) for g in args.grid.split(",")) if args.grid else None
        if args.plot and not args.plot.lower().endswith((".png", ".svg")):
            raise CostUsageError(f"--plot {args.plot!r}: the file must end in .png or .svg")
        kernel = load_kernel(args.kernel)
    except (CostUsageError, KernelRefError) as e:
        print(f"devkit cost: {e}", file=sys.stderr)
        return 2
    try:
        report = devkit.estimate(kernel, *specs, grid=grid, target=args.target, trace=args.trace, **kwargs)
    except devkit.KernelError as e:
        print(f"devkit cost: kernel fault: {e}", file=sys.stderr)
        return 1
    if args.plot:
        from devkit.cost.roofline import point_of, report_roofs
        from devkit.workflow.report import roofline_figure, save_figure

        fig = roofline_figure(
            [point_of(report)], report_roofs(report), title=f"{report.kernel} on {report.target}: roofline"
        )
        save_figure(fig, args.plot)
    if args.json:
        print(json.dumps(report.to_dict(include_timeline=args.timeline), indent=2))
    else:
        from rich.console import Console

        Console().print(render_table(report))
    return 0
