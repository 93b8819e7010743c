"""Placements the Beta-1 compiler legalises: the simulator performs the same copy and says so.

In NKI Beta 1 the compiler places the results of ISA calls itself.  A Tensor-Engine result lives in PSUM,
but the TensorE reads its operands from SBUF only; when such a compiler-placed result is used as a matmul
operand, the compiler inserts the PSUM->SBUF copy.  AWS's own kernels rely on it: nki-samples 0898a77
``reference/attention.py:1002`` (``flash_attn_bwd``, run on hardware and in AWS's CI) passes the
``nisa.nc_transpose`` result straight to ``nisa.nc_matmul`` as its stationary operand.

Here the copy is an instruction of its own (VectorE ``tensor_copy`` from PSUM into a new SBUF tile, traced
and costed like ``nl.copy``), and a :class:`~devkit.errors.PlacementNote` names the line, once per source
line and run.  Only compiler-placed results are moved: a tensor the kernel pinned to PSUM itself
(``buffer=nl.psum``, a ``nki.compiler`` allocation) stays an ``operand-in-psum`` error, as do HBM operands.
"""

from __future__ import annotations

import warnings
from typing import Any

from devkit import dtypes as dt
from devkit.errors import PlacementNote, user_location
from devkit.nki._isa_nl import elementwise, identity
from devkit.sim import instr as _x
from devkit.sim.tensor import Tensor
from devkit.trace import VECTOR

#: operand dtypes the TensorE pairs only with each other (fp32 operands pair with fp32/tf32 only)
_FP32_LIKE = ("float32", "tfloat32")


def is_compiler_placed_psum(x: Any) -> bool:
    """Whether ``x`` is an ISA result the compiler placed in PSUM (not a tensor the kernel allocated)."""
    return isinstance(x, Tensor) and x.st.buffer == "psum" and x.st.kind == "temp"


def matmul_operand(api: str, x: Any, name: str, other: Any) -> Any:
    """``x`` if the TensorE may read it as it is; for a compiler-placed PSUM result, the SBUF copy the
    compiler inserts.  An fp32 PSUM result paired with a narrower operand is copied into that operand's
    dtype (the only copy that makes the matmul legal; a transposed tile's values are exact in it)."""
    if not is_compiler_placed_psum(x):
        return x
    m = _x.machine(api)
    loc = user_location()
    odt = x.dtype
    if (
        isinstance(other, Tensor)
        and dt.name_of(odt) in _FP32_LIKE
        and dt.name_of(other.dtype) not in _FP32_LIKE
        and dt.is_float(other.dtype)
    ):
        odt = other.dtype
    copied = elementwise(
        f"{api} (PSUM->SBUF copy of operand '{name}')",
        VECTOR,
        "tensor_copy",
        identity,
        [x],
        dtype=odt,
        default_dtype=x.dtype,
        attrs={"legalised": "psum-to-sbuf"},
    )
    copied.omask = x.omask
    if loc not in m.placement_noted:
        m.placement_noted.add(loc)
        warnings.warn_explicit(
            f"{api}: operand '{name}' is a Tensor-Engine result in PSUM; the TensorE reads SBUF, so the "
            f"compiler copies it to SBUF first (one extra {dt.name_of(x.dtype)}->{dt.name_of(odt)} "
            f"tensor_copy of {list(x.shape)} per call, traced and costed); copy it once yourself "
            "(nl.copy) if it is reused",
            PlacementNote,
            loc[0],
            loc[1],
        )
    return copied
