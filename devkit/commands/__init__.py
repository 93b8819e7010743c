"""The ``devkit`` subcommands, one module each; helpers they share live here.

A command module either declares its command -- ``SUMMARY`` (one line in ``devkit --help``), the module
docstring (its ``--help``), ``EXAMPLES`` (optional epilog), ``arguments(parser)`` and ``run(args)``,
wired by :func:`add_module_command` -- or, for nested or differently formatted commands, builds its own
parser in ``register(subparsers)``.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable
from types import ModuleType

from rich.console import Console


def stdout_console(min_width: int = 130) -> Console:
    """A console for tables on stdout; piped output is not squeezed into 80 columns (widths in characters)."""
    out = Console()
    if not out.is_terminal:
        out = Console(width=max(out.width, min_width))
    return out


def add_command(
    sub: argparse._SubParsersAction,
    name: str,
    summary: str,
    doc: str | None,
    examples: str | None = None,
    *,
    func: Callable[[argparse.Namespace], int] | None = None,
) -> argparse.ArgumentParser:
    """The parser of one subcommand: ``summary`` in ``devkit --help``; its own ``--help`` shows the module
    docstring ``doc`` and the ``examples`` epilog with their line breaks kept; ``func(args)`` runs it."""
    p = sub.add_parser(
        name,
        help=summary,
        description=doc,
        epilog=examples,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    if func is not None:
        p.set_defaults(func=func)
    return p


def add_module_command(sub: argparse._SubParsersAction, name: str, module: ModuleType) -> None:
    """The command ``name`` that ``module`` declares (see the module docstring): its parser, options and
    ``run``; a module with ``register(sub)`` builds its parser itself."""
    register = getattr(module, "register", None)
    if register is not None:
        register(sub)
        return
    p = add_command(
        sub, name, module.SUMMARY, module.__doc__, getattr(module, "EXAMPLES", None), func=module.run
    )
    module.arguments(p)


def add_jobs_argument(p: argparse.ArgumentParser, what: str = "", *, in_process: bool = False) -> None:
    """``--jobs N``: worker processes (``what`` says for what); the default is one per core, or with
    ``in_process`` one, in this process."""
    if in_process:
        default = "1, in this process"
    else:
        from devkit.workflow import pool

        default = f"one per core, here {pool.default_jobs()}"
    p.add_argument(
        "--jobs", type=int, default=None, metavar="N", help=f"worker processes{what} (default: {default})"
    )


def add_call_arguments(p: argparse.ArgumentParser, arg_help: str, kwarg_help: str | None = None) -> None:
    """``--arg DTYPE[D0,D1,...]`` (repeatable, in order: the kernel's tensor arguments) and, with
    ``kwarg_help``, ``--kwarg NAME=VALUE`` (repeatable: keyword arguments as Python literals); read
    with :func:`devkit.workflow.kernel_ref.parse_arg_spec` and ``parse_kwarg``."""
    p.add_argument("--arg", action="append", default=[], metavar="DTYPE[D0,D1,...]", help=arg_help)
    if kwarg_help is not None:
        p.add_argument("--kwarg", action="append", default=[], metavar="NAME=VALUE", help=kwarg_help)


def add_executor_arguments(p: argparse.ArgumentParser) -> None:
    """``--executor {local,ray}`` and ``--ray-address``: where the command's independent jobs run."""
    p.add_argument(
        "--executor",
        choices=("local", "ray"),
        default="local",
        help="where the jobs run: local worker processes (default) or a Ray cluster (needs the extra "
        "neuronmm-devkit[ray]; see docs/cluster.md)",
    )
    p.add_argument(
        "--ray-address",
        default=None,
        metavar="HOST:PORT",
        help="Ray cluster to run on with --executor ray (default: $RAY_ADDRESS; 'local' starts a "
        "one-machine Ray)",
    )


#: Docstring markup that has no business in ``--help``: ``literal``, :role:`target`, :role:`text <target>`.
_ROLE = re.compile(r":[a-z]+(?::[a-z]+)?:`~?([^`<]*?)(?:\s*<[^>]*>)?`")
_LITERAL = re.compile(r"``([^`]*)``")


def plain_text(text: str | None) -> str | None:
    """``--help`` text without reStructuredText markup (``x`` -> x, :mod:`devkit.x` -> devkit.x)."""
    if not text:
        return text
    text = _ROLE.sub(lambda m: m.group(1).strip().lstrip("~"), text)
    return _LITERAL.sub(r"\1", text)
