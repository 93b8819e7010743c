"""NumPy dtypes of the packed MX x4 types: what x4 data is on the host side of the kernel boundary.

NKI's packed MX types (``float8_e4m3fn_x4``, ``float8_e5m2_x4``: four FP8 values in 32 bits;
``float4_e2m1fn_x4``: four FP4 values in 16 bits, low nibble first) have no NumPy type.  Neuron's
toolchain gives them one (its internal ``neuron_dtypes`` package), and real code relies on it:
nki-library @d2ad3a5 allocates goldens with ``np.zeros(shape, dtype=nl.float8_e4m3fn_x4)``
(``test/integration/nkilib/core/subkernels/test_rmsnorm_mx_quantize_tkg.py:192``), views x4 arrays as
their container (``.view(np.uint32)`` / ``.view(np.uint16)`` in
``src/nkilib_src/nkilib/core/utils/mx_torch_common.py:71,89,114``), and expects ``astype(np.float32)`` of one to raise
``TypeError`` (``test/utils/output_validator.py:248-251``: "Packed x4 dtypes ... cannot be cast to float32").

The dtypes here reproduce those properties with plain NumPy: each is a structured dtype of the type's size
(4 or 2 bytes) whose fields are its bytes, and whose scalar type is a ``numpy.void`` subclass named after the NKI
type.  FP8 x4 fields are the four values (``v0`` .. ``v3``, ml_dtypes ``float8_e4m3fn`` / ``float8_e5m2``;
``v0`` is the least significant byte of the container); FP4 x4 fields are two bytes of two values each
(``v0v1``, ``v2v3``: low nibble first).  Consequences, all as in Neuron's toolchain:

* ``np.zeros/empty(shape, dtype=x4)`` work, ``arr.view(np.uint32)`` (FP8) / ``arr.view(np.uint16)`` (FP4)
  give the container bits;
* ``arr.astype(np.float32)`` raises ``TypeError`` (a packed element is four numbers, not one);
* the three dtypes differ from each other (``==``, hashing).

Where they differ from a C-level NumPy type: ``str(dtype)`` shows the structure, not the bare name (use
:func:`name_of`), and ``np.asarray(uint_array, dtype=x4)`` converts values field by field instead of copying
bits (use :func:`from_bits`).
"""

from __future__ import annotations

import ml_dtypes
import numpy as np


class float8_e4m3fn_x4(np.void):  # (named as NKI names the type)
    """Scalar type of one ``float8_e4m3fn_x4`` element (four packed OCP FP8 E4M3 values)."""


class float8_e5m2_x4(np.void):
    """Scalar type of one ``float8_e5m2_x4`` element (four packed FP8 E5M2 values)."""


class float4_e2m1fn_x4(np.void):
    """Scalar type of one ``float4_e2m1fn_x4`` element (four packed FP4 E2M1 values, low nibble first)."""


def _fp8_fields(element: type) -> list[tuple[str, np.dtype]]:
    return [(f"v{i}", np.dtype(element)) for i in range(4)]


#: NKI name -> the NumPy dtype of that packed type
BY_NAME: dict[str, np.dtype] = {
    "float8_e4m3fn_x4": np.dtype((float8_e4m3fn_x4, _fp8_fields(ml_dtypes.float8_e4m3fn))),
    "float8_e5m2_x4": np.dtype((float8_e5m2_x4, _fp8_fields(ml_dtypes.float8_e5m2))),
    "float4_e2m1fn_x4": np.dtype((float4_e2m1fn_x4, [("v0v1", np.uint8), ("v2v3", np.uint8)])),
}
#: NKI name -> the unsigned integer type holding the same bits (the simulator's storage of the type)
CONTAINER: dict[str, np.dtype] = {
    "float8_e4m3fn_x4": np.dtype(np.uint32),
    "float8_e5m2_x4": np.dtype(np.uint32),
    "float4_e2m1fn_x4": np.dtype(np.uint16),
}
_NAMES: dict[np.dtype, str] = {d: name for name, d in BY_NAME.items()}


def name_of(dtype: object) -> str | None:
    """The NKI name of ``dtype`` if it is one of the packed NumPy dtypes (or their scalar types), else None."""
    if isinstance(dtype, np.dtype):
        return _NAMES.get(dtype) if dtype.kind == "V" else None
    if isinstance(dtype, type) and issubclass(dtype, np.void):
        name = dtype.__name__
        return name if BY_NAME.get(name, np.dtype(np.void)).type is dtype else None
    return None


def is_packed_array(a: object) -> bool:
    """Whether ``a`` is a NumPy array of one of the packed dtypes."""
    return isinstance(a, np.ndarray) and name_of(a.dtype) is not None


def to_bits(a: np.ndarray) -> np.ndarray:
    """An array of a packed dtype -> a view of its container bits (uint32 or uint16), same shape."""
    name = name_of(a.dtype)
    if name is None:
        raise TypeError(f"not an array of a packed MX x4 dtype: {a.dtype}")
    return a.view(CONTAINER[name])


def from_bits(bits: np.ndarray, name: str) -> np.ndarray:
    """Container bits (any integer array of the type's size) -> a view typed as the packed dtype ``name``."""
    d = BY_NAME[name]
    b = np.asarray(bits)
    if b.dtype.itemsize != d.itemsize or b.dtype.kind not in "ui":
        b = b.astype(CONTAINER[name])
    return b.view(d)
