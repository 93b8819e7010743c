"""``devkit cost FILE.py:KERNEL --arg DTYPE[D0,D1,...] ...``: cost-only estimate of one kernel.

The file is imported unmodified with ``neuronxcc.nki`` mapped to the simulator; the kernel runs on
shape/dtype placeholders (no arithmetic) and the cost model schedules its instruction trace.
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import json
import os
import re
import sys
from typing import Any

_ARG_RE = re.compile(r"^\s*([A-Za-z0-9_]+)\s*\[\s*([0-9,\s]*)\]\s*$")


class CostUsageError(ValueError):
    """Bad command-line input for ``devkit cost`` (reported without a traceback)."""


def parse_arg_spec(text: str) -> tuple[str, tuple[int, ...]]:
    """``bfloat16[8192,4096]`` -> ("bfloat16", (8192, 4096))."""
    m = _ARG_RE.match(text)
    if not m:
        raise CostUsageError(f"--arg {text!r}: expected DTYPE[D0,D1,...], e.g. bfloat16[8192,4096]")
    dims = tuple(int(d) for d in m.group(2).split(",") if d.strip())
    if not dims or any(d <= 0 for d in dims):
        raise CostUsageError(f"--arg {text!r}: dimensions must be positive integers")
    return m.group(1), dims


def parse_kwarg(text: str) -> tuple[str, Any]:
    """``NAME=VALUE`` with VALUE a Python literal (int, float, bool, string, tuple); bare words are strings."""
    if "=" not in text:
        raise CostUsageError(f"--kwarg {text!r}: expected NAME=VALUE")
    name, value = text.split("=", 1)
    if not name.isidentifier():
        raise CostUsageError(f"--kwarg {text!r}: {name!r} is not a valid argument name")
    try:
        return name, ast.literal_eval(value)
    except (ValueError, SyntaxError):
        return name, value


def load_kernel(ref: str) -> Any:
    """``path/to/file.py:KERNEL`` -> the kernel object, imported with the simulator mapped in."""
    from devkit import compat

    if ":" not in ref:
        raise CostUsageError(f"{ref!r}: expected FILE.py:KERNEL")
    path, name = ref.rsplit(":", 1)
    if not os.path.isfile(path):
        raise CostUsageError(f"no such file: {path}")
    if not compat.is_installed():
        compat.install()
    mod_name = "_devkit_cost_" + re.sub(r"\W", "_", os.path.splitext(os.path.basename(path))[0])
    spec = importlib.util.spec_from_file_location(mod_name, path)
    if spec is None or spec.loader is None:
        raise CostUsageError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[mod_name] = module
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.pop(0)
    if not hasattr(module, name):
        kernels = [k for k, v in vars(module).items() if callable(v) and not k.startswith("_")]
        raise CostUsageError(
            f"{path} has no kernel {name!r}; candidates: {', '.join(sorted(kernels)) or 'none'}"
        )
    return getattr(module, name)


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
    p.add_argument("--target", default="trn1", help="trn1, inf2, trn2 or trn3 (default trn1)")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    p.add_argument("--timeline", action="store_true", help="include the engine timeline in the JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import devkit
    from devkit.cost.report import render_table
    from devkit.nki.runner import TensorSpec

    try:
        from devkit.cost.target import TARGETS

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
        kernel = load_kernel(args.kernel)
    except CostUsageError as e:
        print(f"devkit cost: {e}", file=sys.stderr)
        return 2
    try:
        report = devkit.estimate(kernel, *specs, grid=grid, target=args.target, **kwargs)
    except devkit.KernelError as e:
        print(f"devkit cost: kernel fault: {e}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(report.to_dict(include_timeline=args.timeline), indent=2))
    else:
        from rich.console import Console

        Console().print(render_table(report))
    return 0
