"""The ``devkit`` command.  Each subcommand lives in devkit.commands and registers itself.

Errors of every subcommand go through one path (devkit.commands._errors): a user mistake is one line
naming the argument and exit status 2, a kernel fault one line with the kernel's file:line, the user's
own exception the user's traceback, Ctrl-C one line and exit status 130.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
from typing import NoReturn

import devkit.commands as _commands
from devkit.commands import _errors, plain_text


class Parser(argparse.ArgumentParser):
    """argparse with a one-line error (``devkit cost: error: argument --grid: ...``, exit status 2) and
    ``--help`` in plain text (the texts keep their docstring markup for the generated documentation)."""

    def format_help(self) -> str:
        return plain_text(super().format_help()) or ""

    def error(self, message: str) -> NoReturn:
        sys.stderr.write(f"{self.prog}: error: {message} (see {self.prog} --help)\n")
        raise SystemExit(_errors.EXIT_USAGE)


def build_parser() -> argparse.ArgumentParser:
    from devkit import __version__

    p = Parser(
        prog="devkit",
        description="NeuronMM devkit: simulate, estimate and prove NKI kernels for AWS Trainium.",
    )
    p.add_argument("--version", action="version", version=f"devkit {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    for info in sorted(pkgutil.iter_modules(_commands.__path__), key=lambda i: i.name):
        if info.name.startswith("_"):
            continue
        _commands.add_module_command(sub, info.name, importlib.import_module(f"devkit.commands.{info.name}"))
    return p


#: Commands whose first argument is a subcommand (named in error messages: ``devkit hw report: ...``).
_NESTED = ("hw", "svd")


def _prog(argv: list[str]) -> str:
    """``devkit CMD [SUBCMD]`` for messages, from the leading words of ``argv``."""
    words = ["devkit"]
    if argv and not argv[0].startswith("-"):
        words.append(argv[0])
        if argv[0] in _NESTED and len(argv) > 1 and not argv[1].startswith("-"):
            words.append(argv[1])
    return " ".join(words)


def main(argv: list[str] | None = None) -> int:
    """Run ``devkit ARGV``; returns the exit status (every error is reported here, see the docstring)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        return _dispatch(argv)
    except BrokenPipeError:
        # output piped into e.g. `head`, which closed early: not an error of ours
        import os

        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    except SystemExit:
        raise
    except BaseException as exc:  # the one place every error is reported
        return _errors.report(exc, _prog(argv))


def _dispatch(argv: list[str]) -> int:
    # `devkit simulate` passes everything after the script through untouched
    if argv and argv[0] == "simulate":
        from devkit.commands.simulate import run_simulate

        return run_simulate(argv[1:])
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, --version, or a parse error already printed as one line
        return exc.code if isinstance(exc.code, int) else _errors.EXIT_USAGE
    if not getattr(args, "func", None):
        parser.print_help()
        return 0 if not argv else 2
    return int(args.func(args) or 0)
