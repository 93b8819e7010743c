"""``devkit simulate SCRIPT [ARGS...]`` / ``devkit simulate -m MODULE [ARGS...]``: run Python code with the
``neuronxcc.nki`` (Beta 1) and ``nki`` / ``nki_cpu_simulator.nki`` (Beta 2) modules mapped to the simulator,
exactly like ``python`` would run it."""

from __future__ import annotations

import argparse
import os
import runpy
import sys

USAGE = "usage: devkit simulate SCRIPT [ARGS...] | devkit simulate -m MODULE [ARGS...]"


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "simulate",
        help="run a script or module with neuronxcc.nki and nki mapped to the simulator",
        description=__doc__,
        add_help=True,
    )
    p.add_argument("script", nargs="?", help="Python script (or -m MODULE)")
    p.add_argument("args", nargs=argparse.REMAINDER, help="arguments passed to the script")
    p.set_defaults(func=lambda a: run_simulate(([a.script] if a.script else []) + list(a.args)))


def run_simulate(argv: list[str]) -> int:
    """Run ``argv`` like the python command-line would, with the simulator installed."""
    from devkit import compat

    if not argv or argv[0] in ("-h", "--help"):
        print(USAGE)
        print(__doc__)
        return 0 if argv else 2
    compat.install()
    old_argv = sys.argv
    old_path = list(sys.path)
    try:
        if argv[0] == "-m":
            if len(argv) < 2:
                print(USAGE, file=sys.stderr)
                return 2
            sys.argv = [argv[1], *argv[2:]]
            sys.path.insert(0, os.getcwd())
            runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
        else:
            script = argv[0]
            if not os.path.exists(script):
                print(f"devkit simulate: no such file: {script}", file=sys.stderr)
                return 2
            sys.argv = [script, *argv[1:]]
            sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
            runpy.run_path(script, run_name="__main__")
    except SystemExit as e:
        code = e.code
        if code is None:
            return 0
        if isinstance(code, int):
            return code
        print(code, file=sys.stderr)
        return 1
    finally:
        sys.argv = old_argv
        sys.path[:] = old_path
    return 0
