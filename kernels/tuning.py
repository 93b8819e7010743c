"""Default block sizes by shape bucket, read from ``kernels/tuning.json`` (pure Python, no devkit).

Schema of ``tuning.json`` (version 1; the tuner rewrites the file, keep this format)::

    {
      "schema": 1,
      "generated_by": "hand" | "devkit tune ...",     # free text
      "kernels": {
        "<kernel name>": {                             # a registry name, e.g. "xuv_fused"
          "<target>": {                                # "trn1", "inf2", "trn2" or "*" (any target)
            "<dtype>": [                               # "bfloat16", "float32", ... or "*" (any dtype)
              {"when": {"S": [lo, hi], "H": [lo, hi]},  # optional; inclusive bounds, null = open
               "blocks": {"block_tokens": 1024, ...},   # block keyword arguments of the kernel
               "note": "free text"},                   # optional
              ...                                      # first matching entry wins
            ]
          }
        }
      }
    }

A shape parameter missing from ``when`` matches anything.  Lookups fall back from the exact target to
``"*"`` and from the exact dtype to ``"*"``.  Unknown kernels, targets or shapes give ``{}`` (the kernel
then derives its blocks from its own fit rules).  The kernels apply the looked-up blocks, override
them with explicit keyword arguments, and shrink any *default* that does not fit SBUF.
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Mapping
from typing import Any

TUNING_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tuning.json")
SCHEMA = 1


@functools.lru_cache(maxsize=4)
def _load(path: str, mtime: float) -> dict[str, Any]:
    del mtime  # part of the cache key: a rewritten file is re-read
    with open(path) as f:
        data = json.load(f)
    if data.get("schema") != SCHEMA:
        raise ValueError(f"{path}: unsupported tuning schema {data.get('schema')!r} (expected {SCHEMA})")
    return data


def load(path: str | None = None) -> dict[str, Any]:
    """The parsed tuning table (``{}``-like structure when the file is missing)."""
    p = path or TUNING_FILE
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


def blocks_for(
    kernel: str, shape: Mapping[str, int], dtype: str, target: str = "trn1", path: str | None = None
) -> dict[str, Any]:
    """Block keyword arguments for ``kernel`` on ``shape`` (dict of shape parameter -> size)."""
    table = load(path).get("kernels", {}).get(kernel, {})
    for tgt in (target, "*"):
        by_dtype = table.get(tgt)
        if not by_dtype:
            continue
        for dt in (dtype, "*"):
            for entry in by_dtype.get(dt, []):
                if _matches(entry.get("when", {}), shape):
                    return dict(entry.get("blocks", {}))
    return {}


def dtype_name(dtype: Any) -> str:
    """Canonical name of an NKI/NumPy dtype (``"bfloat16"``, ``"float32"``, ...)."""
    name = getattr(dtype, "name", None) or getattr(dtype, "__name__", None) or str(dtype)
    return str(name).replace("numpy.", "")


def target_name() -> str:
    """The target the current kernel is traced for, from the NeuronCore version (gen2 -> trn1)."""
    try:
        import neuronxcc.nki.isa as nisa

        v = int(nisa.get_nc_version())
    except Exception:  # outside a kernel or an SDK without the query
        return "trn1"
    return {2: "trn1", 3: "trn2"}.get(v, "trn1")
