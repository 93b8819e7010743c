"""Stand-in for ``neuron_dtypes``, Neuron's unpublished dtype package, as nki-library's tests use it.

Used names: ``static_cast(array, dtype)``, ``sizeinbytes(dtype)``, ``finfo(dtype)``, ``bfloat16``,
``is_float_type(dtype)``, ``float``, and the packed MX dtypes ``float8_e5m2_x4``, ``float8_e4m3fn_x4``,
``float4_e2m1fn_x4``.  ``dtype`` may be a NumPy dtype, an ml_dtypes type or an NKI dtype
(the simulator's dtype objects, which are NumPy dtypes or markers for ``tfloat32`` and the packed MX types).

Semantics (inference, documented here because the real package is not public): float targets round to
nearest even (NumPy / ml_dtypes casts); float -> integer rounds to nearest even and saturates; a packed MX
x4 target packs groups of four consecutive values of the last axis into one container element (FP8 x4 ->
uint32, FP4 x4 -> uint16, low value in the low bits), which is how the simulator stores those types.
"""

from __future__ import annotations

import builtins

import ml_dtypes
import numpy as np

from devkit import dtypes as _devkit_dtypes  # the packed MX markers (no public package defines them)

bfloat16 = ml_dtypes.bfloat16
float8_e5m2_x4 = _devkit_dtypes.float8_e5m2_x4
float8_e4m3fn_x4 = _devkit_dtypes.float8_e4m3fn_x4
float4_e2m1fn_x4 = _devkit_dtypes.float4_e2m1fn_x4
float = builtins.float


def _packed(dtype: object) -> bool:
    return hasattr(dtype, "container") and hasattr(dtype, "element")


def _np(dtype: object) -> np.dtype:
    if _packed(dtype):
        return np.dtype(dtype.container)  # type: ignore[attr-defined]
    if getattr(dtype, "name", None) == "tfloat32":
        return np.dtype(np.float32)
    return np.dtype(dtype)  # type: ignore[arg-type]


def sizeinbytes(dtype: object) -> int:
    """Bytes per element of ``dtype`` (a packed x4 type counts its container)."""
    return _np(dtype).itemsize


def is_float_type(dtype: object) -> bool:
    d = _np(dtype)
    return d.kind == "f" or d in (np.dtype(ml_dtypes.bfloat16),) or "float" in d.name


def finfo(dtype: object):
    """``np.finfo`` / ``ml_dtypes.finfo`` of ``dtype``."""
    d = _np(dtype)
    try:
        return np.finfo(d)
    except ValueError:
        return ml_dtypes.finfo(d)


def static_cast(array: object, dtype: object) -> np.ndarray:
    """``array`` converted to ``dtype`` (see the module docstring for rounding)."""
    a = np.asarray(array)
    if _packed(dtype):
        from devkit.sim import mx  # the simulator's storage layout of packed MX types

        f = a.astype(np.float32)
        return mx.pack(f.reshape((*f.shape[:-1], f.shape[-1] // 4, 4)), dtype)
    d = _np(dtype)
    if d.kind in "iu" and a.dtype.kind == "f":
        info = np.iinfo(d)
        return np.clip(np.rint(a.astype(np.float64)), info.min, info.max).astype(d)
    return a.astype(d)
