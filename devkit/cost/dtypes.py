"""Dtype names as the cost model needs them: the TensorE rate class and the element size.

Names are the NKI / ml_dtypes names the trace carries in :attr:`devkit.trace.Access.dtype`
(``bfloat16``, ``float32``, ``float8_e4m3``, ...).  ``np.dtype`` spellings such as ``<f4`` are not
expected in traces.
"""

from __future__ import annotations

#: TensorE rate classes with a peak entry in the target files (``tensor.peak_tflops_<class>``).
RATE_CLASSES = ("bf16", "fp16", "tf32", "fp8", "fp32")

_RATE_CLASS = {
    "bfloat16": "bf16",
    "float16": "fp16",
    "tfloat32": "tf32",
    "float32r": "tf32",
    "float32": "fp32",
    "float8_e4m3": "fp8",
    "float8_e4m3fn": "fp8",
    "float8_e5m2": "fp8",
    "float8_e4m3fn_x4": "fp8",
    "float8_e5m2_x4": "fp8",
}

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


def rate_class(dtype: str) -> str:
    """TensorE rate class of a dtype name; integer and unknown names count as ``bf16``."""
    return _RATE_CLASS.get(dtype, "bf16")


def itemsize(dtype: str) -> int:
    """Bytes per element of a dtype name (unknown names: 2 bytes)."""
    return _ITEMSIZE.get(dtype, 2)
