"""NKI data types, their storage in the simulator, rounding, and type promotion.

Values of every floating-point NKI type are *stored* in the simulator as ``float32`` arrays whose
values are always exactly representable in the declared type (bf16, fp16, fp8, tf32 values are all
exactly representable in fp32).  That is numerically identical to holding them in the declared
``ml_dtypes`` type, and it lets engine arithmetic (which the hardware does in fp32) run without a
conversion on every read.  Integer and boolean types are stored natively (bool as uint8).
Conversion to the declared type happens on every write (:func:`round_to`) and at the kernel
boundary (:func:`to_external`).

Type promotion follows the NKI documentation (nki.api.shared, "Type promotion"); see
``reference/nki_api.md`` §2.6.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

# Bytes per element of a declared type: the one home is devkit.dtype_names (re-exported for the simulator).
from devkit import packed_numpy as _packed_numpy
from devkit.dtype_names import itemsize as itemsize

bfloat16 = np.dtype(ml_dtypes.bfloat16)
float8_e4m3 = np.dtype(ml_dtypes.float8_e4m3)
float8_e5m2 = np.dtype(ml_dtypes.float8_e5m2)
float8_e4m3fn = np.dtype(ml_dtypes.float8_e4m3fn)
float8_e8m0fnu = np.dtype(ml_dtypes.float8_e8m0fnu)
float16 = np.dtype(np.float16)
float32 = np.dtype(np.float32)
int8 = np.dtype(np.int8)
int16 = np.dtype(np.int16)
int32 = np.dtype(np.int32)
uint8 = np.dtype(np.uint8)
uint16 = np.dtype(np.uint16)
uint32 = np.dtype(np.uint32)
bool_ = np.dtype(np.bool_)


class _TF32:
    """Marker type for NKI's ``tfloat32`` (1 sign, 8 exponent, 10 mantissa bits).

    NumPy has no tf32; the simulator stores tf32 values as float32 rounded to 10 mantissa bits and
    hands them to the host as float32.
    """

    name = "tfloat32"
    itemsize = 4
    kind = "f"

    def __repr__(self) -> str:
        return "tfloat32"


tfloat32 = _TF32()


class _PackedX4:
    """Marker type for NKI's packed MX types (four 8-bit or 4-bit values per element).

    The simulator stores their raw bits in an unsigned integer container (``uint32`` for the FP8 x4
    types, ``uint16`` for FP4 x4: two FP4 values per byte, low nibble first) and hands them to the host
    typed as the type's NumPy dtype (``.dtype``, :mod:`devkit.packed_numpy`), whose ``.view(container)``
    gives the bits back; arrays of that dtype or of the container type are accepted as inputs.  Only MX
    instructions interpret the bits (:mod:`devkit.sim.mx`).
    """

    kind = "V"

    def __init__(self, name: str, container: np.dtype, element: np.dtype) -> None:
        self.name = name
        self.container = container
        self.itemsize = container.itemsize
        self.element = element  # the ml_dtypes type of one packed value
        #: the host-side NumPy dtype (:mod:`devkit.packed_numpy`): ``np.zeros(shape, dtype=marker)`` uses it
        self.dtype = _packed_numpy.BY_NAME[name]

    def __repr__(self) -> str:
        return self.name

    def __reduce__(self) -> str:
        return self.name

    # Equal to (and hashing like) its NumPy dtype, so arrays' dtypes find markers in dicts and vice versa.
    def __eq__(self, other: object) -> bool:
        if isinstance(other, _PackedX4):
            return other.name == self.name
        if isinstance(other, np.dtype):
            return other == self.dtype
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self.dtype)


float8_e5m2_x4 = _PackedX4("float8_e5m2_x4", np.dtype(np.uint32), float8_e5m2)
float8_e4m3fn_x4 = _PackedX4("float8_e4m3fn_x4", np.dtype(np.uint32), float8_e4m3fn)
float4_e2m1fn_x4 = _PackedX4("float4_e2m1fn_x4", np.dtype(np.uint16), np.dtype(ml_dtypes.float4_e2m1fn))
PACKED_X4 = (float8_e5m2_x4, float8_e4m3fn_x4, float4_e2m1fn_x4)

#: Every dtype the simulator accepts, by name.
BY_NAME: dict[str, object] = {
    "bfloat16": bfloat16,
    "float8_e4m3": float8_e4m3,
    "float8_e5m2": float8_e5m2,
    "float8_e4m3fn": float8_e4m3fn,
    "float8_e8m0fnu": float8_e8m0fnu,
    "float8_e5m2_x4": float8_e5m2_x4,
    "float8_e4m3fn_x4": float8_e4m3fn_x4,
    "float4_e2m1fn_x4": float4_e2m1fn_x4,
    "float16": float16,
    "float32": float32,
    "tfloat32": tfloat32,
    "int8": int8,
    "int16": int16,
    "int32": int32,
    "uint8": uint8,
    "uint16": uint16,
    "uint32": uint32,
    "bool": bool_,
    "bool_": bool_,
}
_ALIASES = {
    "bf16": "bfloat16",
    "fp32": "float32",
    "fp16": "float16",
    "half": "float16",
    "float": "float32",
    "fp8": "float8_e4m3",
    "float8": "float8_e4m3",
    "tf32": "tfloat32",
}

_FLOAT_NAMES = {
    "bfloat16",
    "float8_e4m3",
    "float8_e5m2",
    "float8_e4m3fn",
    "float8_e8m0fnu",
    "float16",
    "float32",
    "tfloat32",
}
_KNOWN_NP = {d for d in BY_NAME.values() if isinstance(d, np.dtype)}


class DtypeNotSupported(TypeError):
    """Raised by :func:`as_dtype` for a type NKI does not have (the caller decides how to blame)."""


def as_dtype(x: object) -> np.dtype | _TF32:
    """Normalise a dtype given as a name, NumPy type, ``np.dtype`` or ml_dtypes type."""
    if x is tfloat32 or isinstance(x, _TF32):
        return tfloat32
    if isinstance(x, _PackedX4):
        return x
    packed = _packed_numpy.name_of(x)
    if packed is not None:  # an array's packed x4 NumPy dtype
        return BY_NAME[packed]  # type: ignore[return-value]
    if isinstance(x, str):
        name = _ALIASES.get(x, x)
        if name in BY_NAME:
            return BY_NAME[name]  # type: ignore[return-value]
        raise DtypeNotSupported(f"unknown dtype {x!r}; NKI dtypes are {', '.join(sorted(BY_NAME))}")
    try:
        d = np.dtype(x)  # type: ignore[arg-type]
    except TypeError as e:
        raise DtypeNotSupported(f"{x!r} is not a dtype") from e
    if d in _KNOWN_NP:
        return d
    raise DtypeNotSupported(
        f"dtype {d} is not supported by NKI (supported: {', '.join(sorted(BY_NAME))}); "
        "cast the array first, e.g. to float32 or bfloat16"
    )


_NAME_CACHE: dict[object, str] = {}


def name_of(dt: object) -> str:
    """Canonical NKI name of a dtype (``"bfloat16"``, ``"float32"``...)."""
    try:
        return _NAME_CACHE[dt]
    except (KeyError, TypeError):
        pass
    if isinstance(dt, _TF32):
        name = "tfloat32"
    elif isinstance(dt, _PackedX4):
        name = dt.name
    elif _packed_numpy.name_of(dt) is not None:
        name = _packed_numpy.name_of(dt)  # type: ignore[assignment]
    else:
        d = np.dtype(dt)  # type: ignore[arg-type]
        name = "bool" if d == bool_ else d.name
    try:
        _NAME_CACHE[dt] = name
    except TypeError:
        pass
    return name


def is_float(dt: object) -> bool:
    return isinstance(dt, _TF32) or name_of(dt) in _FLOAT_NAMES


def is_int(dt: object) -> bool:
    return not is_float(dt) and name_of(dt) != "bool" and not is_packed(dt)


def is_packed(dt: object) -> bool:
    """Whether ``dt`` is one of the packed MX x4 types (raw bits in an integer container), as the simulator's
    marker or as its host-side NumPy dtype."""
    return isinstance(dt, _PackedX4) or _packed_numpy.name_of(dt) is not None


def storage_dtype(dt: object) -> np.dtype:
    """The NumPy dtype the simulator stores values of ``dt`` in."""
    if is_float(dt):
        return float32
    if isinstance(dt, _PackedX4):
        return dt.container
    if name_of(dt) == "bool":
        return uint8
    return np.dtype(dt)  # type: ignore[arg-type]


#: what NKI 0.x's CPU simulator fills a new integer tensor with (reference/nki_beta2.md section 6, item 3)
NKI0_FRESH_INT = 4


def poison_value(dt: object, *, nki0: bool = False) -> float | int:
    """Value fresh (uninitialised) memory of type ``dt`` is filled with: NaN, or for ints a sentinel (Beta 1)
    or, with ``nki0`` (an NKI 0.x run), :data:`NKI0_FRESH_INT` as AWS's NKI 0.x simulator does."""
    if is_float(dt):
        return float("nan")
    if nki0 and not isinstance(dt, _PackedX4):
        return NKI0_FRESH_INT
    d = dt.container if isinstance(dt, _PackedX4) else np.dtype(dt)  # type: ignore[arg-type]
    if d in (uint8, bool_):
        return 0xA5
    info = np.iinfo(d)
    # A recognisable sentinel near the top of the range (like NKI's simulator, not 0).
    return int(info.max) - 0x5A if info.max > 0x5A else int(info.max)


def _round_tf32(a: np.ndarray) -> np.ndarray:
    u = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32)
    rounded = (u + np.uint32(0xFFF) + ((u >> np.uint32(13)) & np.uint32(1))) & np.uint32(0xFFFFE000)
    out = rounded.view(np.float32)
    return np.where(np.isnan(a), a, out).astype(np.float32, copy=False)


#: Narrow IEEE-style float formats: (bits, mantissa bits).  Their NaN payloads are kept through the
#: fp32 storage: widening puts the payload in the top mantissa bits of an fp32 NaN (as the hardware's
#: and NumPy's fp16/bf16 widening do), narrowing keeps those top bits.  ``float8_e4m3fn`` has one NaN
#: per sign and needs nothing.
_NAN_FORMATS: dict[np.dtype, tuple[int, int]] = {
    bfloat16: (16, 7),
    float16: (16, 10),
    float8_e4m3: (8, 3),
    float8_e5m2: (8, 2),
}


def _keep_nan_payload(out: np.ndarray, src: np.ndarray, mant: int) -> np.ndarray:
    """In fp32 ``out``, give each NaN of fp32 ``src`` the NaN a ``mant``-bit format holds for it.

    That NaN keeps the sign and the top ``mant`` mantissa bits of the fp32 NaN; if those are all
    zero (the NaN would become inf), the top mantissa bit is set (a quiet NaN).  Narrowing a value
    that came from the format therefore gives back the same bits.
    """
    nan = np.isnan(src)
    if not nan.any():
        return out
    u = np.array(src, dtype=np.float32).view(np.uint32)[nan]  # (keeps 0-d arrays 0-d)
    keep = np.uint32(((1 << mant) - 1) << (23 - mant))
    payload = u & keep
    payload = np.where(payload == 0, np.uint32(1 << 22), payload)
    out = np.array(out, dtype=np.float32, copy=True)
    out.view(np.uint32)[nan] = (u & np.uint32(0x80000000)) | np.uint32(0x7F800000) | payload
    return out


def round_to(values: np.ndarray | float, dt: object) -> np.ndarray:
    """Convert engine results (fp32 or ints) to the storage representation of ``dt``.

    Floats round to nearest-even into the declared format and come back as float32; integers are
    first converted to fp32 (int -> fp32 -> format, the documented path), and a NaN keeps its sign
    and the payload bits the format can hold (so a same-dtype copy moves bits unchanged).  Integers
    round to nearest-even and saturate (NaN becomes 0).  Booleans are 0/1 in uint8.
    """
    a = np.asarray(values)
    if isinstance(dt, _TF32):
        return _round_tf32(a.astype(np.float32, copy=False))
    if isinstance(dt, _PackedX4):
        return a.astype(dt.container, copy=False)  # raw bits: only MX instructions produce them
    d = np.dtype(dt)  # type: ignore[arg-type]
    if d == float32:
        return a.astype(np.float32, copy=False)
    if d.kind == "f" or d in (bfloat16, float8_e4m3, float8_e5m2, float8_e4m3fn, float8_e8m0fnu):
        if a.dtype != np.float32:
            a = a.astype(np.float32)  # ints (and wider floats) go through fp32 first
        with np.errstate(over="ignore", invalid="ignore"):
            out = a.astype(d).astype(np.float32)
        fmt = _NAN_FORMATS.get(d)
        return out if fmt is None else _keep_nan_payload(out, a, fmt[1])
    if d == bool_:
        return (a != 0).astype(np.uint8)
    if a.dtype.kind in "iub":
        if a.dtype == d:
            return a
        info = np.iinfo(d)
        return np.clip(a, info.min, info.max).astype(d)
    info = np.iinfo(d)
    with np.errstate(invalid="ignore"):
        r = np.rint(a.astype(np.float64))
        r = np.nan_to_num(r, nan=0.0, posinf=info.max, neginf=info.min)
    return np.clip(r, info.min, info.max).astype(d)


#: elements per block when NaN payloads are carried between fp32 storage and a narrow format: the NaN mask
#: and payload temporaries are per block (4 MiB of mask), not one mask the size of a whole HBM tensor
_NAN_BLOCK = 1 << 22


def _blocks(src: np.ndarray, dst: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
    """Matching flat blocks of two arrays of one shape (views when both are C-contiguous, else the arrays)."""
    if src.ndim == 0 or not (src.flags.c_contiguous and dst.flags.c_contiguous):
        return [(src, dst)]
    s, d = src.reshape(-1), dst.reshape(-1)
    return [(s[i : i + _NAN_BLOCK], d[i : i + _NAN_BLOCK]) for i in range(0, s.size, _NAN_BLOCK)]


def _narrow_bits(data: np.ndarray, d: np.dtype) -> np.ndarray:
    """fp32 storage values -> the narrow float format ``d``, NaN payloads kept (see ``round_to``)."""
    with np.errstate(over="ignore", invalid="ignore"):
        out = data.astype(d)
    fmt = _NAN_FORMATS.get(d)
    if fmt is None:
        return out
    bits, mant = fmt
    ui = np.dtype(f"u{bits // 8}")
    exp = np.uint32(((1 << (bits - 1 - mant)) - 1) << mant)
    for src, dst in _blocks(data, out):
        nan = np.isnan(src)
        if nan.any():
            u = src.view(np.uint32)[nan]
            payload = (u >> np.uint32(23 - mant)) & np.uint32((1 << mant) - 1)
            payload = np.where(payload == 0, np.uint32(1 << (mant - 1)), payload)
            sign = (u >> np.uint32(31)) << np.uint32(bits - 1)
            dst.view(ui)[nan] = (sign | exp | payload).astype(ui)
    return out


def _widen_bits(arr: np.ndarray, d: np.dtype) -> np.ndarray:
    """Narrow float format ``d`` -> fp32 storage values, NaN payloads kept in the top mantissa bits."""
    out = np.array(arr, dtype=np.float32, copy=True)
    fmt = _NAN_FORMATS.get(d)
    if fmt is None:
        return out
    bits, mant = fmt
    ui = np.dtype(f"u{bits // 8}")
    for src, dst in _blocks(arr, out):
        nan = np.isnan(dst)
        if nan.any():
            u = src.view(ui)[nan].astype(np.uint32)
            sign = (u >> np.uint32(bits - 1)) << np.uint32(31)
            payload = (u & np.uint32((1 << mant) - 1)) << np.uint32(23 - mant)
            dst.view(np.uint32)[nan] = sign | np.uint32(0x7F800000) | payload
    return out


def to_storage(arr: np.ndarray, dt: object) -> np.ndarray:
    """Host array of declared type ``dt`` -> simulator storage array (a copy)."""
    if is_float(dt):
        a = np.asarray(arr)
        if a.dtype in _NAN_FORMATS and a.dtype == np.dtype(dt):  # type: ignore[arg-type]
            return _widen_bits(a, a.dtype)
        return np.array(arr, dtype=np.float32, copy=True)
    if isinstance(dt, _PackedX4):
        a = np.asarray(arr)
        if _packed_numpy.name_of(a.dtype) is not None:  # a typed x4 array: its bits
            a = _packed_numpy.to_bits(a)
        return np.array(a, dtype=dt.container, copy=True)
    if name_of(dt) == "bool":
        return np.array(arr, dtype=np.uint8, copy=True)
    return np.array(arr, dtype=np.dtype(dt), copy=True)  # type: ignore[arg-type]


def to_external(data: np.ndarray, dt: object) -> np.ndarray:
    """Simulator storage array -> host array in the declared type (tf32 stays float32)."""
    if isinstance(dt, _TF32):
        return np.array(data, dtype=np.float32)
    if isinstance(
        dt, _PackedX4
    ):  # the container bits typed as the x4 NumPy dtype (as Neuron's toolchain does)
        return _packed_numpy.from_bits(np.array(data, dtype=dt.container), dt.name)
    d = np.dtype(dt)  # type: ignore[arg-type]
    if d == bool_:
        return data.astype(np.bool_)
    if d in _NAN_FORMATS and data.dtype == np.float32:
        return _narrow_bits(data, d)
    with np.errstate(over="ignore", invalid="ignore"):
        return data.astype(d)


# ---- type promotion (nki.api.shared "Type promotion") ----------------------------------------

_FLOAT_RANK = {
    "float8_e4m3": 0,
    "float8_e4m3fn": 0,
    "float8_e5m2": 0,
    "float8_e8m0fnu": 0,
    "bfloat16": 1,
    "float16": 1,
    "tfloat32": 2,
    "float32": 3,
}


def _promote_pair(a: object, b: object) -> object:
    na, nb = name_of(a), name_of(b)
    if na == nb:
        return a
    fa, fb = na in _FLOAT_NAMES, nb in _FLOAT_NAMES
    if fa and not fb:
        return a
    if fb and not fa:
        return b
    if fa and fb:
        pair = {na, nb}
        if pair == {"float16", "bfloat16"}:
            return float32
        if pair <= {"float8_e4m3", "float8_e5m2", "float8_e4m3fn"}:
            return bfloat16
        if pair == {"float32", "tfloat32"}:
            return float32
        return a if _FLOAT_RANK[na] >= _FLOAT_RANK[nb] else b
    # integers (bool behaves as uint8)
    da = uint8 if na == "bool" else np.dtype(a)  # type: ignore[arg-type]
    db = uint8 if nb == "bool" else np.dtype(b)  # type: ignore[arg-type]
    r = np.promote_types(da, db)
    if r.itemsize > 4:  # (int32, uint32) -> float32 [B1-SH]; likewise uint32 with int8/int16 (no NKI int64)
        return float32
    return r


def promote(*dts: object) -> object:
    """Result type of an arithmetic op on tensors of the given dtypes."""
    out = dts[0]
    for d in dts[1:]:
        out = _promote_pair(out, d)
    return out


def scalar_dtype(value: object) -> object:
    """The NKI type of a weak Python scalar: bool->uint8, int->int32, float->float32."""
    if isinstance(value, (bool, np.bool_)):
        return uint8
    if isinstance(value, (int, np.integer)):
        return int32 if not isinstance(value, np.integer) else value.dtype
    if isinstance(value, np.floating) and value.dtype != np.float64:
        return value.dtype
    return float32
