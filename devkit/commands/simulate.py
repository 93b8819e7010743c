"""``devkit simulate SCRIPT [ARGS...]`` / ``devkit simulate -m MODULE [ARGS...]``: run Python code with the
``neuronxcc.nki`` (Beta 1) and ``nki`` / ``nki_cpu_simulator.nki`` (Beta 2) modules mapped to the simulator,
exactly like ``python`` would run it."""

from __future__ import annotations

import argparse
import importlib.util
import os
import runpy
import sys

from devkit.commands import plain_text
from devkit.commands._errors import UsageError, UserCodeError, bad_value
from devkit.commands._progress import Heartbeat

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

    if not argv:
        raise UsageError(f"name a SCRIPT or -m MODULE ({USAGE})")
    if argv[0] in ("-h", "--help"):
        print(USAGE)
        print(plain_text(__doc__))
        return 0
    compat.install()
    with Heartbeat("devkit simulate", only_in_kernel=True, first_after_s=KERNEL_QUIET_S):
        return _run(argv)


#: Seconds one kernel simulation may run before ``devkit simulate`` starts reporting its progress.
KERNEL_QUIET_S = 10.0


def _run(argv: list[str]) -> int:
    old_argv = sys.argv
    old_path = list(sys.path)
    try:
        if argv[0] == "-m":
            if len(argv) < 2:
                raise UsageError("-m needs a MODULE name (" + USAGE + ")")
            sys.path.insert(0, os.getcwd())
            _check_module(argv[1])
            sys.argv = [argv[1], *argv[2:]]
            what = f"running module {argv[1]}"
            try:
                runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
            except (SystemExit, KeyboardInterrupt):
                raise
            except Exception as exc:
                raise UserCodeError(what) from exc
        else:
            script = argv[0]
            _check_script(script)
            sys.argv = [script, *argv[1:]]
            sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
            try:
                runpy.run_path(script, run_name="__main__")
            except (SystemExit, KeyboardInterrupt):
                raise
            except Exception as exc:
                raise UserCodeError(f"running {script}") from exc
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


def _check_script(script: str) -> None:
    """A script that python could run: a file, or a directory/zip with a ``__main__.py``."""
    if not os.path.exists(script):
        raise bad_value("SCRIPT", script, "an existing Python file (no such file or directory)")
    if os.path.isdir(script) and not os.path.isfile(os.path.join(script, "__main__.py")):
        raise bad_value(
            "SCRIPT", script, "a Python file, or a directory with a __main__.py (this one has none)"
        )
    if not os.access(script, os.R_OK):
        raise bad_value("SCRIPT", script, "a readable file (permission denied)")


def _check_module(name: str) -> None:
    """``-m NAME`` names an importable module (import errors inside its parent package are the user's)."""
    try:
        found = importlib.util.find_spec(name)
    except ModuleNotFoundError as exc:
        found = None
        if exc.name is None or not name.startswith(exc.name):
            raise UserCodeError(f"importing the parent package of {name}") from exc
    except Exception as exc:
        raise UserCodeError(f"importing the parent package of {name}") from exc
    if found is None:
        raise bad_value("-m", name, "an importable module (no module of that name on sys.path)")
