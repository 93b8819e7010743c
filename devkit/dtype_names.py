"""Dtype names and their element sizes: the one home for "how many bytes is one element of DTYPE".

Names are the NKI / ml_dtypes spellings (``bfloat16``, ``float32``, ``float8_e4m3``, ``int32`` ...), the
ones the trace carries in :attr:`devkit.trace.Access.dtype` and the CLI accepts in ``--arg``.  Everything
in the kit that needs an element size (the simulator's tensors, the cost model, the tuner, the LLM
estimator, the kernels' block planners) asks :func:`itemsize` here.

This module imports nothing from the rest of ``devkit`` (it sits at the foundation).
"""

from __future__ import annotations

from typing import Any

#: Bytes per element of each dtype name the kit knows.
ITEMSIZE: dict[str, int] = {
    "bfloat16": 2,
    "float16": 2,
    "float32": 4,
    "tfloat32": 4,
    "float32r": 4,
    "float8_e4m3": 1,
    "float8_e4m3fn": 1,
    "float8_e5m2": 1,
    "float8_e4m3fn_x4": 4,
    "float8_e5m2_x4": 4,
    "float4_e2m1fn_x4": 2,
    "float8_e8m0fnu": 1,
    "int8": 1,
    "uint8": 1,
    "int16": 2,
    "uint16": 2,
    "int32": 4,
    "uint32": 4,
    "int64": 8,
    "uint64": 8,
    "float64": 8,
    "bool_": 1,
    "bool": 1,
}


def itemsize(dtype: Any) -> int:
    """Bytes per element of ``dtype``: a dtype name, a NumPy/ml_dtypes dtype or scalar type, or any
    object with an integer ``itemsize`` attribute (e.g. the simulator's ``tfloat32`` marker).

    Raises ``ValueError`` naming the value for anything else.
    """
    if isinstance(dtype, str):
        try:
            return ITEMSIZE[dtype]
        except KeyError:
            raise ValueError(f"unknown dtype name {dtype!r}; known: {', '.join(sorted(ITEMSIZE))}") from None
    size = getattr(dtype, "itemsize", None)
    if isinstance(size, int):
        return size
    name = getattr(dtype, "__name__", None) or getattr(dtype, "name", None)
    if isinstance(name, str) and name in ITEMSIZE:
        return ITEMSIZE[name]
    import numpy as np

    try:
        return int(np.dtype(dtype).itemsize)
    except TypeError:
        raise ValueError(f"not a dtype: {dtype!r}") from None
