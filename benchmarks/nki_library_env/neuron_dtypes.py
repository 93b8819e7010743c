"""Stand-in for ``neuron_dtypes``, Neuron's unpublished dtype package, as nki-library's tests use it.

Used names: ``static_cast(array, dtype)``, ``sizeinbytes(dtype)``, ``finfo(dtype)``, ``bfloat16``,
``is_float_type(dtype)``, ``float``, and the packed MX dtypes ``float8_e5m2_x4``, ``float8_e4m3fn_x4``,
``float4_e2m1fn_x4``.  ``dtype`` may be a NumPy dtype, an ml_dtypes type or an NKI dtype
(the simulator's dtype objects, which are NumPy dtypes or markers for ``tfloat32`` and the packed MX types).

Semantics (inference, documented here because the real package is not public): float targets round to
nearest even (NumPy / ml_dtypes casts); float -> integer rounds to nearest even and saturates.  Packed MX x4
types are NumPy dtypes (the kit's, :mod:`devkit.packed_numpy`: 4 bytes FP8 x4, 2 bytes FP4 x4, low value in
the low bits); ``static_cast`` to one packs each four consecutive values of the last axis into one element
(``[..., 4F]`` -> ``[..., F]``), and ``static_cast`` of an x4 array to any other type unpacks them first
(``[..., F]`` -> ``[..., 4F]``), as nki-library's ``test/utils/mx_utils.py:222-228`` (``dequantize_mx_golden``)
and ``nc_matmul_mx_golden`` expect.
"""

from __future__ import annotations

import builtins

import ml_dtypes
import numpy as np

from devkit import dtypes as _devkit_dtypes  # the packed MX markers (no public package defines them)
from devkit import packed_numpy as _packed_numpy

bfloat16 = ml_dtypes.bfloat16
float8_e5m2_x4 = _devkit_dtypes.float8_e5m2_x4
float8_e4m3fn_x4 = _devkit_dtypes.float8_e4m3fn_x4
float4_e2m1fn_x4 = _devkit_dtypes.float4_e2m1fn_x4
float = builtins.float


def _packed_name(dtype: object) -> str | None:
    """The x4 type's name for a packed marker or x4 NumPy dtype, else None."""
    if hasattr(dtype, "container") and hasattr(dtype, "element"):
        return str(dtype)
    return _packed_numpy.name_of(dtype)


def _packed(dtype: object) -> bool:
    return _packed_name(dtype) is not None


def _np(dtype: object) -> np.dtype:
    name = _packed_name(dtype)
    if name is not None:
        return _packed_numpy.CONTAINER[name]
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
    from devkit.sim import mx  # the packing of the x4 types' values into their containers

    a = np.asarray(array)
    target = _packed_name(dtype)
    source = _packed_numpy.name_of(a.dtype)
    if source is not None:
        if target == source:
            return a.copy()
        values = mx.unpack(_packed_numpy.to_bits(a), _devkit_dtypes.BY_NAME[source])  # [..., F, 4]
        a = values.reshape((*a.shape[:-1], a.shape[-1] * 4))
    if target is not None:
        f = a.astype(np.float32)
        if f.ndim == 0 or f.shape[-1] % 4:
            raise ValueError(f"static_cast to {target}: the last axis ({f.shape}) must be a multiple of 4")
        bits = mx.pack(f.reshape((*f.shape[:-1], f.shape[-1] // 4, 4)), _devkit_dtypes.BY_NAME[target])
        return _packed_numpy.from_bits(bits, target)
    d = _np(dtype)
    if d.kind in "iu" and a.dtype.kind == "f":
        info = np.iinfo(d)
        return np.clip(np.rint(a.astype(np.float64)), info.min, info.max).astype(d)
    return a.astype(d)
