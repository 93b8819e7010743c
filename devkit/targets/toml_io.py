"""TOML reading (stdlib ``tomllib`` on 3.11+, ``tomli`` on 3.10) and a minimal writer.

The writer covers only what :mod:`devkit.cost.params` stores: tables and arrays of tables whose
values are strings, numbers, booleans and flat lists of those.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib as _toml_reader
else:  # pragma: no cover - exercised only on Python 3.10
    try:
        import tomli as _toml_reader
    except ImportError as exc:
        raise ImportError(
            "devkit.targets needs the 'tomli' package on Python 3.10 (tomllib is stdlib from 3.11): "
            "pip install 'tomli>=2'"
        ) from exc

TOMLDecodeError = _toml_reader.TOMLDecodeError


def loads(text: str) -> dict[str, Any]:
    """Parse TOML text into plain dicts."""
    return _toml_reader.loads(text)


def load_file(path: Path, error: type[Exception]) -> dict[str, Any]:
    """Parse the TOML file at ``path``; invalid TOML raises ``error`` naming the file."""
    try:
        return loads(path.read_text(encoding="utf-8"))
    except TOMLDecodeError as exc:
        raise error(f"{path}: invalid TOML: {exc}") from exc


def _scalar(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"cannot write non-finite float {value!r} to TOML")
        return repr(value)
    if isinstance(value, str):
        escaped = value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
        return f'"{escaped}"'
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_scalar(v) for v in value) + "]"
    raise TypeError(f"cannot write {type(value).__name__} to TOML: {value!r}")


def dump_table(header: str, table: Mapping[str, Any], array: bool = False) -> str:
    """One ``[header]`` (or ``[[header]]`` when ``array``) block with scalar/list values."""
    head = f"[[{header}]]" if array else f"[{header}]"
    lines = [head] + [f"{key} = {_scalar(val)}" for key, val in table.items()]
    return "\n".join(lines) + "\n"
