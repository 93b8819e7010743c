"""``nki.language.dtypes`` (also bound as ``nki.dtype`` by nki-library's harness): the NKI 0.x dtypes.

Values are the simulator's dtype objects (NumPy / ml_dtypes dtypes, and markers for ``tfloat32`` and the
packed MX x4 types): they compare by value, hash, and ``str()`` gives the canonical name
(``reference/nki_beta2.md`` §3.1).
"""

from __future__ import annotations

from devkit import dtypes as _dt

bool_ = _dt.bool_
int8, int16, int32 = _dt.int8, _dt.int16, _dt.int32
uint8, uint16, uint32 = _dt.uint8, _dt.uint16, _dt.uint32
float16, float32, bfloat16, tfloat32 = _dt.float16, _dt.float32, _dt.bfloat16, _dt.tfloat32
float8_e4m3, float8_e4m3fn, float8_e5m2 = _dt.float8_e4m3, _dt.float8_e4m3fn, _dt.float8_e5m2
float8_e8m0fnu = _dt.float8_e8m0fnu
float8_e5m2_x4, float8_e4m3fn_x4, float4_e2m1fn_x4 = (
    _dt.float8_e5m2_x4,
    _dt.float8_e4m3fn_x4,
    _dt.float4_e2m1fn_x4,
)

__all__ = [
    "bfloat16",
    "bool_",
    "float4_e2m1fn_x4",
    "float8_e4m3",
    "float8_e4m3fn",
    "float8_e4m3fn_x4",
    "float8_e5m2",
    "float8_e5m2_x4",
    "float8_e8m0fnu",
    "float16",
    "float32",
    "int8",
    "int16",
    "int32",
    "tfloat32",
    "uint8",
    "uint16",
    "uint32",
]
