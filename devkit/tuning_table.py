"""Tuning tables: default configs by shape bucket, looked up in the project's table, then the kit's.

Schema (version 1; ``devkit tune`` rewrites tables in this format)::

    {
      "schema": 1,
      "generated_by": "hand" | "devkit tune ...",     # free text
      "kernels": {
        "<kernel name>": {                             # a declared name, e.g. "xuv_fused"
          "<target>": {                                # "trn1", "inf2", "trn2" or "*" (any target)
            "<dtype>": [                               # "bfloat16", "float32", ... or "*" (any dtype)
              {"when": {"S": [lo, hi], "H": [lo, hi]},  # optional; inclusive bounds, null = open
               "blocks": {"block_tokens": 1024, ...},   # config keyword arguments of the kernel
               "note": "free text"},                   # optional
              ...                                      # first matching entry wins
            ]
          }
        }
      }
    }

A shape parameter missing from ``when`` matches anything.  Lookups fall back from the exact target to
``"*"`` and from the exact dtype to ``"*"``.  The project's table (``[tool.devkit] tuning``, default
``devkit-tuning.json`` in the project root, see :mod:`devkit.project`) is consulted first; a kernel's
packaged defaults (read-only, e.g. the NeuronMM kernels' ``tuning.json``) second.
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Mapping
from typing import Any

SCHEMA = 1


@functools.lru_cache(maxsize=8)
def _load(path: str, mtime: float) -> dict[str, Any]:
    del mtime  # part of the cache key: a rewritten file is re-read
    with open(path) as f:
        data = json.load(f)
    if data.get("schema") != SCHEMA:
        raise ValueError(f"{path}: unsupported tuning schema {data.get('schema')!r} (expected {SCHEMA})")
    return data


def load(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The parsed tuning table at ``path`` (an empty table when the file is missing)."""
    p = os.fspath(path)
    if not os.path.exists(p):
        return {"schema": SCHEMA, "kernels": {}}
    return _load(p, os.path.getmtime(p))


def _matches(when: Mapping[str, Any], shape: Mapping[str, int]) -> bool:
    for name, bounds in when.items():
        if name not in shape:
            continue
        lo, hi = bounds
        v = shape[name]
        if lo is not None and v < lo:
            return False
        if hi is not None and v > hi:
            return False
    return True


def lookup(
    path: str | os.PathLike[str], kernel: str, shape: Mapping[str, int], dtype: str, target: str
) -> dict[str, Any] | None:
    """The first matching entry's blocks in one table, or None."""
    table = load(path).get("kernels", {}).get(kernel, {})
    for tgt in (target, "*"):
        by_dtype = table.get(tgt)
        if not by_dtype:
            continue
        for dt in (dtype, "*"):
            for entry in by_dtype.get(dt, []):
                if _matches(entry.get("when", {}), shape):
                    return dict(entry.get("blocks", {}))
    return None


def project_table() -> str:
    """Path of the current project's tuning table (it may not exist yet)."""
    from devkit import project

    return os.fspath(project.state_path("tuning"))


def blocks_for(
    kernel: str,
    shape: Mapping[str, int],
    dtype: str,
    target: str = "trn1",
    packaged: str | os.PathLike[str] | None = None,
) -> dict[str, Any]:
    """Config keyword arguments for ``kernel`` on ``shape``: the project's table, then ``packaged``."""
    for path in (project_table(), packaged):
        if path is None:
            continue
        found = lookup(path, kernel, shape, dtype, target)
        if found is not None:
            return found
    return {}


def pinned_entries(
    path: str | os.PathLike[str], kernel: str, target: str
) -> list[tuple[str, dict[str, int], dict[str, Any]]]:
    """``(dtype, shape, blocks)`` of every entry for ``kernel`` on ``target`` in one table whose ``when``
    pins each of its parameters to one value (the entries ``devkit tune`` writes by default), table order."""
    out = []
    for dtype, entries in load(path).get("kernels", {}).get(kernel, {}).get(target, {}).items():
        for entry in entries:
            when = entry.get("when", {})
            if when and all(lo is not None and lo == hi for lo, hi in when.values()):
                out.append(
                    (dtype, {k: int(lo) for k, (lo, _) in when.items()}, dict(entry.get("blocks", {})))
                )
    return out
