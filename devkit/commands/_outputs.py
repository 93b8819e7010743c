"""Output locations checked before any work starts.

A command that will write a report, a table or a test file calls :func:`check_dir` or
:func:`check_file` on each location first, so that a read-only directory, a file where a directory is
needed or a corrupt existing table fails in a second with one line (a :class:`UsageError`, exit 2)
instead of after minutes of simulation.  Writability is probed by creating (and removing) a temporary
file, which also holds for read-only file systems and for the superuser.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from devkit.commands._errors import bad_value


def _probe(directory: Path) -> str | None:
    """None if a file can be created in ``directory``, else the reason it cannot."""
    try:
        with tempfile.TemporaryFile(dir=directory, prefix=".devkit-probe-"):
            pass
    except OSError as exc:
        return f"cannot create files there: {(exc.strerror or type(exc).__name__).lower()}"
    return None


def _nearest_existing(path: Path) -> Path:
    p = path.absolute()
    while not p.exists() and p != p.parent:
        p = p.parent
    return p


def check_dir(path: str | Path, argument: str) -> Path:
    """``path`` is (or can be created as) a directory this process can write files into."""
    p = Path(path)
    if p.exists():
        if not p.is_dir():
            raise bad_value(argument, str(path), "a directory (it is an existing file)")
        reason = _probe(p)
        if reason:
            raise bad_value(argument, str(path), f"a writable directory ({reason})")
        return p
    base = _nearest_existing(p)
    if not base.is_dir():
        raise bad_value(argument, str(path), f"a directory path ({base} is a file, not a directory)")
    reason = _probe(base)
    if reason:
        raise bad_value(argument, str(path), f"a directory that can be created ({base}: {reason})")
    return p


def check_file(
    path: str | Path, argument: str, *, parse: Callable[[Path], Any] | None = None, what: str = "file"
) -> Path:
    """``path`` can be (re)written atomically (its directory is writable; it is not a directory), and an
    existing file parses with ``parse`` (which raises on bad content)."""
    p = Path(path)
    if p.is_dir():
        raise bad_value(argument, str(path), f"a {what} path (it is a directory)")
    parent = p.parent if str(p.parent) else Path(".")
    if parent.exists() and not parent.is_dir():
        raise bad_value(argument, str(path), f"a {what} path ({parent} is a file, not a directory)")
    base = parent if parent.exists() else _nearest_existing(parent)
    if not base.is_dir():
        raise bad_value(argument, str(path), f"a {what} path ({base} is a file, not a directory)")
    reason = _probe(base)
    if reason:
        raise bad_value(argument, str(path), f"a {what} in a writable directory ({base}: {reason})")
    if p.exists():
        if not os.access(p, os.R_OK):
            raise bad_value(argument, str(path), f"a readable {what} (permission denied)")
        if parse is not None:
            try:
                parse(p)
            except Exception as exc:  # the parser's own message says what is wrong with the content
                detail = str(exc).removeprefix(f"{p}: ")
                raise bad_value(argument, str(path), f"a valid {what} ({detail})") from None
    return p


def check_input_dir(path: str | Path, argument: str) -> Path:
    """``path`` is an existing directory to read from."""
    p = Path(path)
    if not p.exists():
        raise bad_value(argument, str(path), "an existing directory (no such directory)")
    if not p.is_dir():
        raise bad_value(argument, str(path), "a directory (it is a file)")
    return p
