"""``devkit tune KERNEL --shape S,H,r,N``: search the kernel's declared config space with the cost model.

KERNEL is ``FILE.py:KERNEL`` or a declared name.  Enumerates the declared block candidates, prunes the
infeasible ones with the kernel's declared constraint, ranks the rest with its closed-form model (when it
declares one), re-ranks the best few (and the current default) with the trace-based model in worker
processes, prints the top K and merges the winner into the project's tuning table (``[tool.devkit]
tuning``, default ``devkit-tuning.json`` in the project root), which later runs use as the default.
Same inputs, same answer.
"""

from __future__ import annotations

import argparse
import shlex
import sys

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from devkit.commands import add_executor_arguments, add_jobs_argument, stdout_console
from devkit.commands._jobs import executor_from_args
from devkit.commands._outputs import check_file
from devkit.commands._progress import Heartbeat, count_bar
from devkit.workflow import tune as tuner

#: One line in ``devkit --help``.
SUMMARY = "config search ranked by the cost model; writes the project's tuning table"

EXAMPLES = """examples:
  devkit tune xuv_fused --shape 4096,8192,4096,16384
  devkit tune xuv_fused --shape S=1,H=8192,r=4096,N=16384 --top 3 --jobs 2
  devkit tune matmul_optimized --shape K=8192,M=4096,N=16384 --no-write
  devkit tune svd_mlp --shape S=1024,H=2048,I=8192,r=1280 --when S=512:2048
"""


def arguments(p: argparse.ArgumentParser) -> None:
    """The options of ``devkit tune``."""
    p.add_argument("kernel", help="FILE.py:KERNEL or a declared name (e.g. xuv_fused)")
    p.add_argument(
        "--shape",
        default=None,
        help="shape parameters in declaration order (S,H,r,N) or NAME=VALUE,... (default: the declared "
        "default_shape)",
    )
    p.add_argument(
        "--dtype",
        default=None,
        help="input dtype (default bfloat16, or the kernel's first declared dtype when it declares no bfloat16)",
    )
    p.add_argument("--target", default="trn1", help="trn1, inf2 or trn2 (default trn1)")
    p.add_argument("--top", type=int, default=5, metavar="K", help="configurations to print (default 5)")
    p.add_argument(
        "--rerank",
        type=int,
        default=8,
        metavar="N",
        help="best closed-form configurations re-ranked by the trace model (default 8)",
    )
    add_jobs_argument(p)
    add_executor_arguments(p)
    p.add_argument(
        "--when",
        action="append",
        default=[],
        metavar="NAME=LO:HI",
        help="widen the tuning entry beyond this exact shape (repeatable; empty side = open)",
    )
    p.add_argument(
        "--tuning-file", default=None, metavar="PATH", help="tuning table (default: the project's)"
    )
    p.add_argument("--no-write", action="store_true", help="print only; leave the tuning table alone")


def run(args: argparse.Namespace) -> int:
    err = Console(stderr=True)
    out = stdout_console(130)
    from devkit.targets import TARGETS
    from devkit.workflow import catalog

    ex = None
    try:
        if args.target not in TARGETS:
            raise tuner.TuneError(f"unknown target {args.target!r}; choose one of {', '.join(TARGETS)}")
        if args.top < 1 or args.rerank < 1:
            raise tuner.TuneError("--top and --rerank must be >= 1")
        spec = catalog.get(args.kernel)
        if args.dtype is None:
            args.dtype = "bfloat16" if "bfloat16" in spec.dtypes or not spec.dtypes else spec.dtypes[0]
        shape = tuner.parse_shape(args.shape, spec.shape_params) if args.shape else dict(spec.default_shape)
        when = tuner.parse_when(args.when, shape)
        if args.jobs is not None and args.jobs < 1:
            raise tuner.TuneError("--jobs must be >= 1")
        if not args.no_write:
            check_file(
                args.tuning_file or tuner.default_tuning_path(),
                "--tuning-file",
                parse=tuner.read_tuning_table,
                what="tuning table",
            )
        ex = executor_from_args(args)
        err.print(
            f"devkit tune: searching the blocks of {args.kernel} for "
            f"{','.join(f'{k}={v}' for k, v in shape.items())} {args.dtype} on {args.target} "
            f"({ex.describe()})",
            highlight=False,
        )
        counts = {"phase": "", "done": 0, "total": 0}
        with (
            Heartbeat(
                "devkit tune",
                status=lambda: f"{counts['phase']}: {counts['done']}/{counts['total']} done",
                terminal=False,
            ),
            count_bar("[bold]tune[/] {task.description}", err) as bar,
        ):
            tasks: dict[str, int] = {}

            def progress(phase: str, done: int, total: int) -> None:
                counts.update(phase=phase, done=done, total=total)
                if phase not in tasks:
                    tasks[phase] = bar.add_task(phase, total=total)
                bar.update(tasks[phase], completed=done, total=total)
                if done == total and phase.startswith("trace model"):  # one line per search round stays
                    bar.console.print(f"tune: {phase}: {total} traced", highlight=False)

            result = tuner.tune(
                args.kernel,
                shape,
                dtype=args.dtype,
                target=args.target,
                rerank=max(args.rerank, args.top),
                jobs=ex,
                progress=progress,
            )
    except KeyboardInterrupt:
        err.print(
            "devkit tune: interrupted: the tuning table was not changed (a rerun resumes the finished jobs)",
            highlight=False,
            soft_wrap=True,
        )
        return 130
    finally:
        if ex is not None:
            ex.close()
    out.print(result_table(result, args.top))
    best = result.best
    speed = result.speedup_over_default
    default_text = "-" if result.default_us is None else f"{result.default_us:,.1f} us"
    out.print(
        f"default blocks {result.default_blocks}: {default_text}; best {best.blocks}: "
        f"{best.trace_us:,.1f} us" + (f" ({speed:.3f}x the default)" if speed else ""),
        highlight=False,
    )
    from devkit import VALUE_CHECKS

    err.print(
        f"note: cost-only ranking: the {' and '.join(VALUE_CHECKS)} checks were not run "
        "(devkit run validates the kernels in the simulator)",
        highlight=False,
        soft_wrap=True,
    )
    if args.no_write:
        return 0
    command = (
        "devkit tune " + " ".join(shlex.quote(a) for a in sys.argv[2:])
        if sys.argv[1:2] == ["tune"]
        else f"devkit tune {args.kernel}" + (f" --shape {args.shape}" if args.shape else "")
    )
    path = tuner.write_tuning(result, args.tuning_file, when=when, command=command)
    out.print(
        f"wrote {escape(str(path))}: {result.kernel} on {args.target}/{args.dtype} for {when} now "
        f"defaults to {best.blocks}",
        highlight=False,
    )
    return 0


def result_table(result: tuner.TuneResult, top: int) -> Table:
    shape = ",".join(f"{k}={v}" for k, v in result.shape.items())
    table = Table(
        title=f"{result.kernel} [{shape}] {result.dtype} on {result.target}: {result.enumerated} "
        f"candidates, {result.feasible} feasible ({result.distinct} distinct), "
        f"{len(result.ranked)} re-ranked",
        caption="bound: closed-form lower bound; trace: the trace-based cost model (modelled latencies, us); "
        "same plan: other candidates identical to this one once clamped to the shape",
    )
    names = list(result.ranked[0].blocks)
    table.add_column("#", justify="right")
    table.add_column("", justify="left")
    for n in names:
        table.add_column(n, justify="right")
    for col in ("bound us", "trace us", "vs default", "SBUF KiB/part", "same plan"):
        table.add_column(col, justify="right")
    for i, c in enumerate(result.ranked[:top], start=1):
        vs = "-"
        if c.trace_us and result.default_us:
            vs = f"{result.default_us / c.trace_us:.3f}x"
        if c.trace_us is not None:
            trace = f"{c.trace_us:,.1f}"
        else:
            trace = f"[red]{escape(c.trace_error or 'failed')}[/]"
        table.add_row(
            str(i),
            "default" if c.is_default else "",
            *(str(c.blocks[n]) for n in names),
            f"{c.closed_form_us:,.1f}" if c.closed_form_us is not None else "-",
            trace,
            vs,
            f"{c.footprint / 1024:,.1f}",
            f"+{c.equivalents}" if c.equivalents else "",
        )
    return table
