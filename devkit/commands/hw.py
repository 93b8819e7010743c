"""``devkit hw run`` / ``devkit hw report``: the hardware stage.

``devkit hw run [--require-hardware] [--tox] [-- PYTEST ARGS...]`` runs ``hw_tests/`` with pytest in this
environment (or, with ``--tox``, in tox's ``hw`` environment).  Without a Neuron device or the real
``neuronx-cc`` every test is skipped with one reason; ``--require-hardware`` fails at once instead,
naming what is missing, without starting pytest.

``devkit hw report [--results DIR] [--out DIR]`` compares measured with predicted latency per kernel,
shape, dtype and target from the results store (a table, and an HTML page with a plot).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from devkit.commands import add_command, add_executor_arguments, stdout_console
from devkit.commands._errors import UsageError, bad_value, missing_subcommand
from devkit.commands._outputs import check_dir, check_input_dir
from devkit.workflow.hw import compare, host

_EXAMPLES = """examples:
  devkit hw run                          # pytest hw_tests in this environment
  devkit hw run --require-hardware -- -x # fail at once unless a device and the real SDK are here
  devkit hw run --tox                    # the same through `tox -e hw`
  devkit hw report                       # measured vs predicted from results/
  devkit hw report --out devkit-report   # ... and write devkit-report/hw.html with the plot
"""


def register(sub: argparse._SubParsersAction) -> None:
    p = add_command(
        sub, "hw", "hardware stage: run hw_tests, compare measured with predicted", __doc__, _EXAMPLES
    )
    p.set_defaults(func=lambda a: missing_subcommand(p))
    hsub = p.add_subparsers(dest="hw_command", metavar="SUBCOMMAND")

    r = hsub.add_parser(
        "run",
        help="run hw_tests/ (skipped with one reason where there is no hardware)",
        description="Run the generated hardware tests. Arguments after -- go to pytest.",
    )
    r.add_argument(
        "--require-hardware",
        action="store_true",
        help="fail at once, naming what is missing, unless a Neuron device and the real SDK exist",
    )
    r.add_argument("--tox", action="store_true", help="run through `tox -e hw` instead of pytest in this env")
    r.add_argument(
        "--tests", default=None, metavar="DIR", help="hardware test directory (default: hw_tests/)"
    )
    r.add_argument("--results-dir", default=None, metavar="DIR", help="results store (default: results/)")
    add_executor_arguments(r)
    r.add_argument("pytest_args", nargs=argparse.REMAINDER, help="after --: passed to pytest")
    r.set_defaults(func=run_tests)

    rep = hsub.add_parser("report", help="measured vs predicted latency from the results store")
    rep.add_argument("--results", default=None, metavar="DIR", help="results store (default: ./results)")
    rep.add_argument("--out", default=None, metavar="DIR", help="also write DIR/hw.html with a plot")
    rep.add_argument("--slack", type=float, default=0.25, help="mark rows outside ±slack (default 0.25)")
    rep.add_argument("--include-fake", action="store_true", help="include records of the fake backend")
    rep.add_argument("--json", action="store_true", help="print the rows as JSON")
    rep.set_defaults(func=run_report)


def _tests_dir(arg: str | None) -> Path:
    return Path(arg) if arg else host.project_dir("hw_tests")


def run_tests(args: argparse.Namespace) -> int:
    err = Console(stderr=True)
    req = host.check_requirements()
    if args.require_hardware and not req.ok:
        err.print(
            "[red]devkit hw run --require-hardware: cannot run the hardware tests on this machine:[/]",
            highlight=False,
        )
        for item in req.missing:
            err.print(f"  - {escape(item)}", highlight=False, soft_wrap=True)
        return 2
    tests = _tests_dir(args.tests)
    if args.tests:
        check_input_dir(args.tests, "--tests")
    elif not tests.is_dir():
        raise bad_value("--tests", str(tests), "a hardware test directory (default hw_tests/ does not exist)")
    if args.results_dir:
        check_dir(args.results_dir, "--results-dir")
    extra = [a for a in args.pytest_args if a != "--"]
    fake = any(a == "--fake-neuron" or a.startswith("--fake-neuron=") for a in extra)
    if args.require_hardware:
        extra.insert(0, "--require-hardware")
    if args.results_dir:
        extra[:0] = ["--results-dir", args.results_dir]
    if getattr(args, "executor", "local") == "ray":
        return _run_on_cluster(args, tests, extra, fake, err)
    if args.tox:
        if shutil.which("tox") is None:
            err.print(
                "[red]error:[/] tox is not installed (pip install tox), or run without --tox", highlight=False
            )
            return 2
        cmd = ["tox", "-e", "hw", "--", *extra]
    else:
        cmd = [sys.executable, "-m", "pytest", str(tests), "-rs", *extra]
    if fake:
        err.print(
            "[yellow]note:[/] --fake-neuron: the fake backend stands in for the device", highlight=False
        )
    else:
        err.print(f"hardware stage: {escape(req.summary())}", highlight=False, soft_wrap=True)
    if not fake and not req.ok:
        err.print(
            f"[yellow]note:[/] {escape(req.reason())}; the tests will be skipped",
            highlight=False,
            soft_wrap=True,
        )
    err.print(f"$ {escape(' '.join(cmd))}", highlight=False)
    env = dict(os.environ)
    return subprocess.call(cmd, cwd=str(tests.resolve().parent), env=env)


def _run_on_cluster(args: argparse.Namespace, tests: Path, extra: list[str], fake: bool, err: Console) -> int:
    """``--executor ray``: each test a job on a node with a free ``neuron_cores``; records into the
    driver's results store as they arrive (:mod:`devkit.workflow.hw.cluster`)."""
    from devkit.commands._jobs import executor_from_args, job_progress
    from devkit.workflow.hw import cluster

    if args.tox:
        raise UsageError("--tox runs on this host; it cannot be combined with --executor ray")
    results = Path(args.results_dir) if args.results_dir else host.project_dir("results")
    if fake and (args.results_dir is None or results.resolve() == host.RESULTS_DIR.resolve()):
        raise UsageError(
            "--fake-neuron needs --results-dir DIR other than the project's results/ "
            "(fake measurements never enter the real store)"
        )
    # the jobs get their own --results-dir (a private store on the worker); the rest goes to pytest as is
    extra = [a for a in args.pytest_args if a != "--"]
    if args.require_hardware:
        extra.insert(0, "--require-hardware")
    ex = executor_from_args(args)
    outcomes: list[dict] = []
    try:
        err.print(
            f"devkit hw run: each test on a node with a free {cluster.NEURON_RESOURCE} of {ex.describe()}; "
            f"results -> {escape(str(results))}",
            highlight=False,
            soft_wrap=True,
        )
        test_ids = cluster.collect(tests, extra)
        with job_progress("devkit hw run", len(test_ids), err) as tick:

            def on_result(res: dict) -> None:
                mark = {"passed": "[green]✓[/]", "skipped": "[yellow]s[/]"}.get(res["outcome"], "[red]✗[/]")
                err.print(
                    f"{mark} {escape(res['test'])}: {res['outcome']} on node {res['node']} ({res['host']}), "
                    f"{len(res['records'])} record(s)",
                    highlight=False,
                    soft_wrap=True,
                )
                if res["outcome"] in ("failed", "error"):
                    err.print(escape(res["output"]), highlight=False, soft_wrap=True)
                tick(res)

            outcomes = cluster.run_on_cluster(ex, tests, results, extra, on_result=on_result)
    except cluster.HwClusterError as exc:
        err.print(f"[red]devkit hw run:[/] {escape(str(exc))}", highlight=False, soft_wrap=True)
        return 2
    except KeyboardInterrupt:
        err.print(
            "devkit hw run: interrupted: outstanding tests cancelled; finished ones are recorded",
            highlight=False,
            soft_wrap=True,
        )
        return 130
    finally:
        ex.close()
    counts = {k: sum(o["outcome"] == k for o in outcomes) for k in ("passed", "skipped", "failed", "error")}
    err.print(", ".join(f"{n} {k}" for k, n in counts.items() if n) or "no tests", highlight=False)
    return 1 if counts["failed"] or counts["error"] else 0


def run_report(args: argparse.Namespace) -> int:
    err = Console(stderr=True)
    out = stdout_console(140)
    if args.slack <= 0:
        raise bad_value("--slack", str(args.slack), "a positive fraction, e.g. 0.25")
    if args.results:
        check_input_dir(args.results, "--results")
    if args.out:
        check_dir(args.out, "--out")
    results = Path(args.results) if args.results else host.project_dir("results")
    rows, damaged = compare.load_rows(results, args.include_fake)
    for d in damaged:
        err.print(
            f"[yellow]warning:[/] unreadable record skipped: {escape(d)}", highlight=False, soft_wrap=True
        )
    if args.json:
        print(json.dumps([r.to_dict() for r in rows], indent=2))
    elif not rows:
        out.print(
            f"no hardware measurements in {escape(str(results))} yet: run `devkit hw run` on a "
            "Trainium/Inferentia host",
            highlight=False,
        )
    else:
        out.print(compare.comparison_table(rows, args.slack))
    if args.out:
        from devkit.workflow.report import write_report

        context = compare.report_context(rows, args.slack, results)
        path = write_report(context, args.out, "hw.html")
        out.print(f"wrote {escape(str(path))}", highlight=False)
    return 0
