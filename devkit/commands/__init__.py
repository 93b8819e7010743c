"""The ``devkit`` subcommands, one module each; helpers they share live here."""

from __future__ import annotations

import argparse

from rich.console import Console


def stdout_console(min_width: int = 130) -> Console:
    """A console for tables on stdout; piped output is not squeezed into 80 columns (widths in characters)."""
    out = Console()
    if not out.is_terminal:
        out = Console(width=max(out.width, min_width))
    return out


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
