"""``devkit promote KERNEL``: write hw_tests/test_<KERNEL>.py, a hardware test of a simulated kernel.

KERNEL is ``FILE.py:KERNEL`` or a declared name.  The test goes into the project's ``hw_tests/``
(``[tool.devkit] hw_tests``): its cases as data in ``hw_tests/cases/<KERNEL>.json`` (shapes, dtypes, pinned
blocks, predicted latencies, slack, timing and the promotion's provenance) and a generated module of a few
lines that loads them, together with the ``conftest.py`` it needs (written once, never overwritten).

Each test is for the NKI API generation its kernel is written in (Beta 1 ``neuronxcc.nki``: Neuron SDK
<= 2.29; Beta 2 ``import nki``: SDK >= 2.27).  ``--generation host`` (the default) promotes the kernel's
versions the host's SDK compiles (every version when no SDK is installed here); ``all``, ``beta1`` or
``beta2`` choose explicitly.

The generated module validates the kernel with the real ``nki.baremetal`` against the registry's NumPy
reference and tolerance, times it with ``nki.benchmark`` (P50, P99), asserts the P50 is within
``--slack`` of the latency the cost model predicts now (written into the case file), and appends every run
to the results store under results/.  Blocks are pinned to the kernel's current defaults.
"""

from __future__ import annotations

import argparse
import shlex
import sys

from rich.console import Console
from rich.markup import escape
from rich.progress import Progress
from rich.table import Table

from devkit.commands import add_jobs_argument, stdout_console
from devkit.commands._errors import UsageError, bad_value
from devkit.commands._outputs import check_dir
from devkit.commands._progress import count_bar
from devkit.workflow import pool, promote
from devkit.workflow.hw.host import git_commit

#: One line in ``devkit --help``.
SUMMARY = "write a hardware test of a kernel (hw_tests/test_<kernel>.py + cases/<kernel>.json)"

EXAMPLES = """examples:
  devkit promote xuv_fused                                   # validation shape + the paper's S=1K, 4K
  devkit promote xuv_fused --shape S=1,H=8192,r=4096,N=16384 --shape 4096,8192,4096,16384
  devkit promote matmul_optimized --dtype bfloat16 --dtype float32 --target trn1 --target trn2
  devkit promote --all                                       # every registered kernel
  devkit promote xuv_fused --generation all                  # its Beta-1 and Beta-2 versions
"""


def arguments(p: argparse.ArgumentParser) -> None:
    """The options of ``devkit promote``."""
    p.add_argument("kernel", nargs="?", help="FILE.py:KERNEL or a declared name (or --all)")
    p.add_argument("--all", action="store_true", help="promote every declared kernel (project and kit)")
    p.add_argument(
        "--shape",
        action="append",
        default=[],
        metavar="SHAPE",
        help="S,H,r,N in registry order or NAME=VALUE,... (repeatable; default: validation shape "
        "and the paper's shapes)",
    )
    p.add_argument("--dtype", action="append", default=[], help="dtype (repeatable; default bfloat16)")
    p.add_argument(
        "--target", action="append", default=[], help="targets to predict for (repeatable; default trn1)"
    )
    p.add_argument(
        "--slack",
        type=float,
        default=promote.DEFAULT_SLACK,
        help=f"allowed |P50 - predicted| / predicted (default {promote.DEFAULT_SLACK})",
    )
    p.add_argument(
        "--warmup", type=int, default=promote.DEFAULT_WARMUP, help="nki.benchmark warmup iterations"
    )
    p.add_argument("--iters", type=int, default=promote.DEFAULT_ITERS, help="nki.benchmark timed iterations")
    p.add_argument(
        "--out-dir",
        default=None,
        metavar="DIR",
        help="where to write test_<kernel>.py and cases/<kernel>.json (default: the project's hw_tests/)",
    )
    p.add_argument(
        "--generation",
        default="host",
        choices=promote.GENERATION_CHOICES,
        help="which NKI API versions of the kernel: those the host's SDK compiles (default), all, or one",
    )
    add_jobs_argument(p, " for the predictions")


def run(args: argparse.Namespace) -> int:
    from devkit.workflow import catalog
    from devkit.workflow.tune import TuneError, parse_shape

    err = Console(stderr=True)
    out = stdout_console(130)
    if bool(args.kernel) == bool(args.all):
        raise UsageError(f"name one KERNEL or pass --all (declared: {', '.join(catalog.names())})")
    everything = catalog.all_specs()
    named = None
    if args.all:
        chosen = everything
    else:
        try:
            named = catalog.get(args.kernel)
        except catalog.KernelRefError as exc:
            raise UsageError(str(exc)) from None
        chosen = promote.family_of(named, [*everything, *catalog.file_specs(args.kernel)])
    chosen, left_out = promote.select_generations(chosen, args.generation)
    for note in left_out:
        err.print(f"[yellow]note:[/] {escape(note)}", highlight=False, soft_wrap=True)
    if not chosen:
        raise UsageError(
            f"nothing to promote: {'; '.join(left_out)} (pass --generation all to write the tests anyway; "
            "they are skipped on hosts whose SDK cannot compile them)"
        )
    kernels = [args.kernel if s is named else catalog.ref_of(s) for s in chosen]
    jobs = args.jobs if args.jobs is not None else pool.default_jobs()
    if jobs < 1:
        raise bad_value("--jobs", str(jobs), "a number of worker processes >= 1")
    check_dir(args.out_dir if args.out_dir is not None else promote.default_out_dir(), "--out-dir")
    targets = args.target or ["trn1"]
    dtypes = args.dtype or ["bfloat16"]
    status = 0
    commit = git_commit()  # before anything is written: the later kernels' files are not "+dirty" from ours
    for kernel in kernels:
        spec = catalog.get(kernel)
        try:
            shapes = [parse_shape(s, spec.shape_params) for s in args.shape] or None
        except TuneError as exc:
            raise UsageError(f"--shape: {exc}") from None
        command = (
            "devkit " + " ".join(shlex.quote(a) for a in sys.argv[1:])
            if sys.argv[1:2] == ["promote"]
            else f"devkit promote {kernel}"
        )
        try:
            with count_bar(f"[bold]promote {escape(kernel)}[/] predicting", err) as bar:
                task = bar.add_task("", total=None)

                def progress(done: int, total: int, bar: Progress = bar, task: int = task) -> None:
                    bar.update(task, completed=done, total=total)

                result = promote.promote(
                    kernel,
                    shapes,
                    dtypes,
                    targets,
                    out_dir=args.out_dir,
                    slack=args.slack,
                    warmup=args.warmup,
                    iters=args.iters,
                    jobs=jobs,
                    command=command,
                    progress=progress,
                    git_commit=commit,
                )
        except promote.PromoteError as exc:
            raise UsageError(str(exc)) from None
        out.print(cases_table(spec.name, result))
        for w in result.warnings:
            err.print(f"[yellow]warning:[/] {escape(w)}", highlight=False, soft_wrap=True)
        for f in result.failures:
            err.print(f"[red]prediction failed:[/] {escape(f)}", highlight=False, soft_wrap=True)
            status = 1
        out.print(
            f"wrote {escape(str(result.path))} and its {len(result.cases)} cases ({escape(str(result.cases_path))}); "
            "run it with `devkit hw run` on a Trainium host",
            highlight=False,
        )
    return status


def cases_table(kernel: str, result: promote.Promoted) -> Table:
    table = Table(title=f"{kernel}: promoted cases (predicted latency, modelled)")
    table.add_column("shape")
    table.add_column("dtype")
    table.add_column("blocks")
    targets = sorted({t for c in result.cases for t in c.predicted_us})
    for t in targets:
        table.add_column(f"{t} predicted", justify="right")
    table.add_column("slack", justify="right")
    for c in result.cases:
        blocks = ", ".join(f"{k}={v}" for k, v in c.blocks.items()) or "-"
        table.add_row(
            ",".join(f"{k}={v}" for k, v in c.shape.items()),
            c.dtype,
            blocks,
            *(f"{c.predicted_us[t]:,.1f} us" if t in c.predicted_us else "-" for t in targets),
            f"±{c.slack:.0%}",
        )
    return table
