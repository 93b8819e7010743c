"""The ``devkit`` subcommands, one module each; helpers they share live here."""

from __future__ import annotations

import argparse
import re

from rich.console import Console


def stdout_console(min_width: int = 130) -> Console:
    """A console for tables on stdout; piped output is not squeezed into 80 columns (widths in characters)."""
    out = Console()
    if not out.is_terminal:
        out = Console(width=max(out.width, min_width))
    return out


def add_command(
    sub: argparse._SubParsersAction, name: str, summary: str, doc: str | None, examples: str | None = None
) -> argparse.ArgumentParser:
    """The parser of one subcommand: ``summary`` in ``devkit --help``; its own ``--help`` shows the module
    docstring ``doc`` and the ``examples`` epilog with their line breaks kept."""
    return sub.add_parser(
        name,
        help=summary,
        description=doc,
        epilog=examples,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )


def add_jobs_argument(p: argparse.ArgumentParser, what: str = "") -> None:
    """``--jobs N``: worker processes (default one per core)."""
    from devkit.workflow import pool

    p.add_argument(
        "--jobs",
        type=int,
        default=None,
        metavar="N",
        help=f"worker processes{what} (default: one per core, here {pool.default_jobs()})",
    )


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
