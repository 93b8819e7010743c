"""``devkit cost FILE.py:KERNEL --arg DTYPE[D0,D1,...] ...``: cost-only estimate of one kernel.

The file is imported unmodified with ``neuronxcc.nki`` mapped to the simulator; the kernel runs on
shape/dtype placeholders (no arithmetic) and the cost model schedules its instruction trace.
A declared kernel (``FILE.py:KERNEL`` declared with ``devkit.declare_kernel``, or a declared name such as
``xuv_fused``) may instead be given ``--shape NAME=VALUE,...`` (default: its declared default shape) and
``--dtype``: its declaration makes the arguments and the config (the project's tuning table first).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from typing import Any

from devkit.commands import add_call_arguments
from devkit.commands._errors import UsageError, UserCodeError, bad_value, unknown_choice
from devkit.dtype_names import itemsize
from devkit.workflow.kernel_ref import KernelRefError, load_kernel, parse_arg_spec, parse_kwarg

#: One line in ``devkit --help``.
SUMMARY = "cost-only latency estimate of one kernel from an unmodified file"


def arguments(p: argparse.ArgumentParser) -> None:
    """The options of ``devkit cost``."""
    p.add_argument("kernel", metavar="FILE.py:KERNEL", help="kernel to estimate (or a declared name)")
    add_call_arguments(
        p,
        "one positional tensor argument (repeat in order)",
        "a keyword argument given as a Python literal (repeatable)",
    )
    p.add_argument(
        "--shape",
        default=None,
        metavar="NAME=VALUE,...",
        help="shape of a declared kernel (instead of --arg; default: its declared default shape)",
    )
    p.add_argument("--dtype", default=None, help="dtype of a declared kernel (default: its first declared)")
    p.add_argument("--grid", default=None, metavar="G0[,G1...]", help="SPMD launch grid")
    p.add_argument(
        "--target",
        default=None,
        help="trn1, inf2, trn2 or trn3 (default: NEURON_PLATFORM_TARGET_OVERRIDE or DEVKIT_TARGET, else trn1)",
    )
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


def run(args: argparse.Namespace) -> int:
    import devkit
    from devkit.commands import _progress
    from devkit.cost.render import render_table

    if args.timeline and not args.json:
        raise UsageError("--timeline: the timeline is only printed as JSON; add --json")
    from devkit.targets import DEFAULT_TARGET, TARGETS, from_environment

    if args.target is None:
        args.target = from_environment(default=DEFAULT_TARGET)
    if args.target not in TARGETS:
        raise unknown_choice("--target", args.target, "target", TARGETS)
    kwargs = dict(parse_kwarg(k) for k in args.kwarg)
    grid = parse_grid(args.grid)
    if args.plot and not args.plot.lower().endswith((".png", ".svg")):
        raise bad_value("--plot", args.plot, "a file name ending in .png or .svg")
    from devkit.commands._outputs import check_file

    for flag, path in (("--trace", args.trace), ("--plot", args.plot)):
        if path:
            check_file(path, flag)
    if _declared_form(args):
        kernel, specs, kwargs = _declared_call(args, kwargs)
    else:
        if args.dtype is not None:
            raise UsageError("--dtype: only with a declared kernel and --shape (use --arg DTYPE[...])")
        specs = [_tensor_spec(a) for a in args.arg]
        kernel = _load(args.kernel)
    _check_signature(kernel, specs, kwargs)
    work = sum(itemsize(s.dtype) * math.prod(s.shape) for s in specs)
    with _progress.Heartbeat("devkit cost", work_bytes=work):
        report = devkit.estimate(kernel, *specs, grid=grid, target=args.target, trace=args.trace, **kwargs)
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
        if report.checks_skipped:
            print(
                f"note: cost-only estimate: checks not run: {', '.join(report.checks_skipped)} "
                "(run the kernel with devkit.simulate on real inputs to make them)",
                file=sys.stderr,
            )
    for what in report.outputs_unwritten:
        print(f"devkit cost: warning: {what} was never written by the kernel", file=sys.stderr)
    return 0


def _tensor_spec(text: str) -> Any:
    """``--arg DTYPE[D0,...]`` -> a TensorSpec placeholder."""
    import devkit
    from devkit.nki.runner import TensorSpec

    dtype, dims = parse_arg_spec(text)
    try:
        spec = TensorSpec(dims, dtype)
    except devkit.KernelError as e:
        raise bad_value("--arg", text, f"DTYPE[D0,...] with a known dtype ({e.detail})") from None
    return spec


def parse_grid(text: str | None) -> tuple[int, ...] | None:
    """``--grid 4,2`` -> (4, 2); every size a positive integer."""
    if text is None:
        return None
    parts = [p.strip() for p in text.split(",")]
    if not parts or not all(p.isdigit() and int(p) > 0 for p in parts):
        raise bad_value("--grid", text, "positive integers separated by commas, e.g. 4 or 4,2")
    return tuple(int(p) for p in parts)


def _declared_form(args: argparse.Namespace) -> bool:
    """A declared kernel without --arg: a declared name, or FILE.py:KERNEL with --shape."""
    from devkit.workflow import catalog

    if args.arg:
        if args.shape is not None:
            raise UsageError("--shape and --arg: give either the declared shape or every argument")
        return False
    return args.shape is not None or not catalog.is_file_ref(args.kernel)


def _declared_call(args: argparse.Namespace, kwargs: dict) -> tuple[Any, list, dict]:
    from devkit.workflow import catalog
    from devkit.workflow.tune import TuneError, parse_shape

    spec = catalog.get(args.kernel)
    try:
        shape = parse_shape(args.shape, spec.shape_params) if args.shape else dict(spec.default_shape)
    except TuneError as exc:
        raise UsageError(f"--shape: {exc}") from None
    dtype = args.dtype or spec.dtypes[0]
    if dtype not in spec.dtypes:
        raise bad_value("--dtype", dtype, f"one of {', '.join(spec.dtypes)} (declared by {spec.name})")
    config = spec.call_blocks(shape, dtype, args.target, None)
    return spec.kernel_object(), list(spec.arg_specs(shape, dtype)), {**config, **kwargs}


def _load(ref: str) -> Any:
    """The kernel named by FILE.py:KERNEL; an exception from the user's file is the user's."""
    try:
        return load_kernel(ref)
    except KernelRefError:
        raise
    except Exception as exc:
        raise UserCodeError(f"importing {ref.rsplit(':', 1)[0]}") from exc


def _check_signature(kernel: Any, specs: list, kwargs: dict) -> None:
    """The --arg/--kwarg list must fit the kernel's parameters (checked before anything runs)."""
    import inspect

    func = getattr(kernel, "func", kernel)
    try:
        sig = inspect.signature(func)
    except (TypeError, ValueError):
        return
    try:
        sig.bind(*specs, **kwargs)
    except TypeError as e:
        name = getattr(func, "__name__", "kernel")
        positional = [
            p.name
            for p in sig.parameters.values()
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty
        ]
        given = f"{len(specs)} --arg" + (f" and --kwarg {', '.join(sorted(kwargs))}" if kwargs else "")
        raise UsageError(
            f"kernel {name}{sig} cannot take {given}: {e} "
            f"(give one --arg per tensor parameter, in order: {', '.join(positional) or 'none'})"
        ) from None
