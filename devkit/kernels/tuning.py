"""Default block sizes of the NeuronMM kernels by shape bucket (read by the kernels in their prologue).

The kit's defaults ship read-only in ``tuning.json`` next to this file; a project's own table (written by
``devkit tune``, see :mod:`devkit.project`) is consulted first.  The schema and the lookup rules are
documented in :mod:`devkit.tuning_table`.  Unknown kernels, targets or shapes give ``{}`` (the kernel then
derives its blocks from its own fit rules).  The kernels apply the looked-up blocks, override them with
explicit keyword arguments, and shrink any *default* that does not fit SBUF.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from devkit import tuning_table

TUNING_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tuning.json")
SCHEMA = tuning_table.SCHEMA


def load(path: str | None = None) -> dict[str, Any]:
    """The parsed tuning table (the packaged defaults unless ``path``)."""
    return tuning_table.load(path or TUNING_FILE)


def blocks_for(
    kernel: str, shape: Mapping[str, int], dtype: str, target: str = "trn1", path: str | None = None
) -> dict[str, Any]:
    """Block keyword arguments for ``kernel`` on ``shape`` (``path``: only that table)."""
    if path is not None:
        return tuning_table.lookup(path, kernel, shape, dtype, target) or {}
    return tuning_table.blocks_for(kernel, shape, dtype, target, packaged=TUNING_FILE)


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
