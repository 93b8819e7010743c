"""The ``devkit`` command.  Each subcommand lives in :mod:`devkit.commands` and registers itself."""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys

import devkit.commands as _commands


def build_parser() -> argparse.ArgumentParser:
    from devkit import __version__

    p = argparse.ArgumentParser(
        prog="devkit",
        description="NeuronMM devkit: simulate, estimate and prove NKI kernels for AWS Trainium.",
    )
    p.add_argument("--version", action="version", version=f"devkit {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    for info in sorted(pkgutil.iter_modules(_commands.__path__), key=lambda i: i.name):
        mod = importlib.import_module(f"devkit.commands.{info.name}")
        reg = getattr(mod, "register", None)
        if reg is not None:
            reg(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    # `devkit simulate` passes everything after the script through untouched
    if argv and argv[0] == "simulate":
        from devkit.commands.simulate import run_simulate

        return run_simulate(argv[1:])
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 0 if not argv else 2
    try:
        return int(args.func(args) or 0)
    except BrokenPipeError:
        # output piped into e.g. `head`, which closed early: not an error of ours
        import os

        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
