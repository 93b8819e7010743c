"""Dtype names as the cost model needs them: the VectorE fast-path class and the element size.

The TensorE rate class of a dtype belongs to the targets (:func:`devkit.targets.rate_class`).

Names are the NKI / ml_dtypes names the trace carries in :attr:`devkit.trace.Access.dtype`
(``bfloat16``, ``float32``, ``float8_e4m3``, ...).  ``np.dtype`` spellings such as ``<f4`` are not
expected in traces.
"""

from __future__ import annotations

_ITEMSIZE = {
    "bfloat16": 2,
    "float16": 2,
    "float32": 4,
    "tfloat32": 4,
    "float32r": 4,
    "float8_e4m3": 1,
    "float8_e4m3fn": 1,
    "float8_e5m2": 1,
    "int8": 1,
    "uint8": 1,
    "int16": 2,
    "uint16": 2,
    "int32": 4,
    "uint32": 4,
    "bool_": 1,
    "bool": 1,
}

#: Two-byte float dtypes that get the VectorE fast paths (``tensor_reduce``, ``memset``, perf mode).
HALF_FLOATS = frozenset({"bfloat16", "float16"})


def itemsize(dtype: str) -> int:
    """Bytes per element of a dtype name (unknown names: 2 bytes)."""
    return _ITEMSIZE.get(dtype, 2)
