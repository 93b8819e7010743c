"""A NumPy reference for NKI numerics, written from AWS's documentation (not from the simulator's code).

What each function models, and where the rule is written down (source keys as in docs/simulator.md):

- Storage and conversion: the dtype table (fp8 e4m3 is the IEEE-style format, max 240) [B1-SH];
  conversions round to nearest even [B1-SH "output cast", RN 2.31/2.32 simulator: fp32 -> int is
  round-to-nearest-even and saturating]; DMA casts go src -> fp32 -> dst [DMAOV, B1-ISA dma_copy].
- Engine arithmetic: "calculation done in FP32, output cast" [B1-SH, ARCH2]: every arithmetic
  operator reads its inputs as fp32, computes one IEEE fp32 operation, and rounds once into the output
  dtype.  Bitvec operators work on the integer bit patterns [B1-SH].  int32/uint32 tile arithmetic
  (add, subtract, multiply, max, min) is GpSimd's native integer arithmetic [N2-ISA tensor_tensor].
- Type promotion: the table of [B1-SH] "Type promotion"; Python scalars are weak (int -> int32,
  float -> float32, bool -> uint8).
- Activation functions: the mathematical definitions of the names in the activation table [B1-SH],
  evaluated in float64 (the hardware approximates them; the comparison allows for that).

Readings where the documents are silent are marked "reading:" and listed in docs/simulator.md.
"""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np

BF16 = np.dtype(ml_dtypes.bfloat16)
FP8 = np.dtype(ml_dtypes.float8_e4m3)
FP8_E5 = np.dtype(ml_dtypes.float8_e5m2)
F16 = np.dtype(np.float16)
F32 = np.dtype(np.float32)
I8, I16, I32 = np.dtype(np.int8), np.dtype(np.int16), np.dtype(np.int32)
U8, U16, U32 = np.dtype(np.uint8), np.dtype(np.uint16), np.dtype(np.uint32)
BOOL = np.dtype(np.bool_)

FLOATS = (FP8, FP8_E5, BF16, F16, F32)
INTS = (I8, I16, I32, U8, U16, U32)
ALL = FLOATS + INTS

#: Mantissa bits of each float format (for ulp arithmetic).
MANTISSA = {FP8: 3, FP8_E5: 2, BF16: 7, F16: 10, F32: 23}


def is_float(d: np.dtype) -> bool:
    return np.dtype(d) in FLOATS


def uint_of(d: np.dtype) -> np.dtype:
    return np.dtype(f"u{np.dtype(d).itemsize}")


def bits(a: np.ndarray) -> np.ndarray:
    a = np.ascontiguousarray(a)
    return a.view(uint_of(a.dtype)) if a.dtype != BOOL else a.view(np.uint8)


# ---- special values -------------------------------------------------------------------------------------


def special_floats(d: np.dtype) -> list[float]:
    """Values worth hitting in format ``d``: signed zeros, infinities, subnormals, extremes, ties.

    Ties are the fp32 values exactly halfway between two neighbours of a narrower format; they are
    only distinct values in fp32 (a narrower format cannot hold them), and exercise round-to-even.
    """
    fi = ml_dtypes.finfo(d)
    m = MANTISSA[np.dtype(d)]
    vals = [0.0, -0.0, 1.0, -1.0, float(fi.max), -float(fi.max), float(fi.smallest_normal)]
    vals += [float(fi.smallest_subnormal), -float(fi.smallest_subnormal)]
    vals += [float(fi.smallest_normal) - float(fi.smallest_subnormal)]  # largest subnormal
    if np.dtype(d) != ml_dtypes.float8_e4m3fn:
        vals += [math.inf, -math.inf]
    if np.dtype(d) == F32:
        for mm in (2, 3, 7, 10):  # ties of fp8 e5m2, e4m3, bf16, fp16 around 1 and 3
            vals += [1 + 2.0 ** -(mm + 1), 1 + 3 * 2.0 ** -(mm + 1), -(3 + 2.0**-(mm))]
        vals += [2.0**24 + 1, 2.0**24 + 2, -(2.0**31), 2.0**31 - 128, 4294967040.0, 0.5, 2.5, -1.5]
    else:
        vals += [1 + 2.0**-m, 2.0, 0.5]
    return vals


def nan_bits(d: np.dtype) -> list[int]:
    """NaN bit patterns of ``d`` with both signs and non-canonical payloads."""
    d = np.dtype(d)
    if d == F32:
        return [0x7FC00000, 0xFFC00000, 0x7FC00001, 0xFFFFFFFF, 0x7F800001, 0x7FA5A5A5]
    if d == BF16:
        return [0x7FC0, 0xFFC0, 0x7FC1, 0xFFFF, 0x7F81]
    if d == F16:
        return [0x7E00, 0xFE00, 0x7C01, 0xFFFF]
    if d == FP8:
        return [0x79, 0x7C, 0x7F, 0xFF, 0xFA]
    if d == FP8_E5:
        return [0x7D, 0x7E, 0x7F, 0xFF]
    return []


def special_ints(d: np.dtype) -> list[int]:
    """Integer values worth hitting: extremes, 0, +-1, and values beyond 2**24 (not exact in fp32)."""
    info = np.iinfo(d)
    vals = [0, 1, int(info.max), int(info.min), int(info.max) - 1]
    if info.min < 0:
        vals += [-1, int(info.min) + 1]
    for v in (2**24 + 1, 2**24 + 2**16 + 1, 2**30 + 1, -(2**24) - 3, 123456789, 2**31 - 1, 2**32 - 3):
        if info.min <= v <= info.max:
            vals.append(v)
    return vals


# ---- conversions ----------------------------------------------------------------------------------------


def to_f32(a: np.ndarray) -> np.ndarray:
    """How engines read a value: floats widen exactly to fp32, integers convert (round to nearest even)."""
    a = np.asarray(a)
    if a.dtype == BOOL:
        return a.astype(np.float32)
    return a.astype(np.float32)


def cast(x: np.ndarray, d: np.dtype) -> np.ndarray:
    """One rounding of fp32 results into ``d``: floats RNE (overflow -> inf); integers RNE and
    saturating [RN 2.31/2.32]; reading: NaN -> 0 (the documents do not say); bool: nonzero -> True."""
    d = np.dtype(d)
    x = np.asarray(x, dtype=np.float32)
    if d == BOOL:
        return x != 0
    if d in INTS:
        info = np.iinfo(d)
        r = np.rint(x.astype(np.float64))
        r = np.nan_to_num(r, nan=0.0, posinf=info.max, neginf=info.min)
        return np.clip(r, info.min, info.max).astype(d)
    with np.errstate(over="ignore", invalid="ignore"):
        return x.astype(d)


def convert(a: np.ndarray, d: np.dtype) -> np.ndarray:
    """A conversion between dtypes (DMA with a dtype change, tensor_copy(dtype=)): src -> fp32 -> dst
    [DMAOV]; between integer types the value is kept and saturated (reading: no fp32 detour for
    int -> int, since every NKI integer fits int64 exactly; the documents only describe float paths)."""
    a = np.asarray(a)
    d = np.dtype(d)
    if a.dtype == d:
        return a.copy()
    if a.dtype in INTS and d in INTS:
        info = np.iinfo(d)
        return np.clip(a.astype(np.int64), info.min, info.max).astype(d)
    return cast(to_f32(a), d)


# ---- type promotion [B1-SH] -------------------------------------------------------------------------------

_FLOAT_RANK = {FP8: 0, FP8_E5: 0, BF16: 1, F16: 1, F32: 3}


def promote(a: np.dtype, b: np.dtype) -> np.dtype:
    """Result dtype of an arithmetic operator on tiles of dtypes ``a`` and ``b`` [B1-SH]."""
    a, b = np.dtype(a), np.dtype(b)
    a = U8 if a == BOOL else a
    b = U8 if b == BOOL else b
    if a == b:
        return a
    fa, fb = a in FLOATS, b in FLOATS
    if fa != fb:
        return a if fa else b
    if fa:
        if {a, b} == {F16, BF16}:
            return F32
        if {a, b} == {FP8, FP8_E5}:
            return BF16
        return a if _FLOAT_RANK[a] >= _FLOAT_RANK[b] else b
    r = np.promote_types(a, b)
    # (int32, uint32) -> float32 [B1-SH]; reading: every integer pair without a common NKI integer
    # type (uint32 with int8/int16 too: NKI has no int64) promotes to float32 the same way
    return F32 if r.itemsize > 4 else r


def scalar_dtype(v: object) -> np.dtype:
    """Weak Python scalars: bool -> uint8, int -> int32, float -> float32 [B1-SH]."""
    if isinstance(v, bool):
        return U8
    return I32 if isinstance(v, int) else F32


# ---- ALU operators (fp32 math) -----------------------------------------------------------------------------


def _mod(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Remainder with the sign of the divisor (NumPy's ``mod``, which nl.mod names)."""
    r = np.fmod(x, y)
    fix = (r != 0) & ((r < 0) != (y < 0))
    r = np.where(fix, r + y, r)
    return np.where(r == 0, np.copysign(np.float32(0), y), r).astype(np.float32)


#: Arithmetic ALU operators on fp32 arrays: one IEEE fp32 operation each (NumPy float32 arithmetic is
#: IEEE single precision).  Comparisons and logical operators give 1.0 / 0.0.
FP32_ALU = {
    "add": np.add,
    "subtract": np.subtract,
    "multiply": np.multiply,
    "divide": np.divide,
    "maximum": np.maximum,  # reading: NaN propagates through max/min (the documents do not say)
    "minimum": np.minimum,
    "fmod": np.fmod,
    "mod": _mod,
    "equal": lambda x, y: (x == y).astype(np.float32),
    "not_equal": lambda x, y: (x != y).astype(np.float32),
    "greater": lambda x, y: (x > y).astype(np.float32),
    "greater_equal": lambda x, y: (x >= y).astype(np.float32),
    "less": lambda x, y: (x < y).astype(np.float32),
    "less_equal": lambda x, y: (x <= y).astype(np.float32),
    "logical_and": lambda x, y: ((x != 0) & (y != 0)).astype(np.float32),
    "logical_or": lambda x, y: ((x != 0) | (y != 0)).astype(np.float32),
    "logical_xor": lambda x, y: ((x != 0) ^ (y != 0)).astype(np.float32),
}
#: NKI 0.4.0 ``abs_max`` / ``abs_min``: "return the signed operand with larger/smaller magnitude, ties ->
#: y" [B2 §3.7]; reading: a NaN operand makes the comparison false, so y is returned.
ABS_SELECT = {
    "abs_max": lambda x, y: np.where(np.abs(x) > np.abs(y), x, y).astype(np.float32),
    "abs_min": lambda x, y: np.where(np.abs(x) < np.abs(y), x, y).astype(np.float32),
}
#: The operators whose fp32 result is correctly rounded, so simulator and reference agree bit for bit.
EXACT_ALU = set(FP32_ALU)
#: Approximated operators (GpSimd power): compared with a tolerance.
APPROX_ALU = {"power": lambda x, y: np.power(x.astype(np.float64), y.astype(np.float64))}
#: Names of the comparison and logical operators (result dtype bool by default [B1-NL]).
PREDICATES = {n for n in FP32_ALU if n not in ("add", "subtract", "multiply", "divide", "maximum", "minimum")}
PREDICATES -= {"fmod", "mod"}
#: int32/uint32 operators computed natively on GpSimd (exact, wrap-around) [N2-ISA tensor_tensor].
INT32_NATIVE = {"add": np.add, "subtract": np.subtract, "multiply": np.multiply}
INT32_NATIVE |= {"maximum": np.maximum, "minimum": np.minimum}


def int32_native(op: str, a: np.ndarray, b: np.ndarray, out: np.dtype) -> np.ndarray:
    """Exact integer result, low 32 bits kept (reading: two's-complement wrap, as NKI's 32-bit
    scalars are documented to wrap [N2-ISA NkiScalar])."""
    return np.asarray(INT32_NATIVE[op](a.astype(np.int64), b.astype(np.int64))).astype(out)


def bitvec(op: str, a: np.ndarray, b: np.ndarray, out: np.dtype) -> np.ndarray:
    """Bitvec operators [B1-SH]: and/or/xor on the operands widened by value to ``out``; shifts are
    logical (right_shift fills with zeros: "arithmetic shift right: not supported") on the data
    operand's own bits ("bit patterns without any data type casting" [B1-ISA tensor_tensor])."""
    out = np.dtype(out)
    if op in ("left_shift", "right_shift"):  # the data operand's own bits, then its value converts
        u = uint_of(a.dtype)
        sh = b.astype(np.int64).astype(u)
        r = (a.view(u) << sh) if op == "left_shift" else (a.view(u) >> sh)
        return r.astype(u).view(a.dtype).astype(np.int64).astype(out)
    x = a.astype(np.int64).astype(out)
    y = b.astype(np.int64).astype(out)
    if op == "bitwise_and":
        return x & y
    if op == "bitwise_or":
        return x | y
    if op == "bitwise_xor":
        return x ^ y
    raise KeyError(op)


# ---- activation functions: definitions in float64 -----------------------------------------------------

_SQRT2 = math.sqrt(2.0)
_erf = np.vectorize(math.erf, otypes=[np.float64])


def _phi(x):  # standard normal CDF
    return 0.5 * (1.0 + _erf(x / _SQRT2))


def _sig(x):
    with np.errstate(over="ignore"):
        return 1.0 / (1.0 + np.exp(-x))


def _softplus(x):
    return np.logaddexp(0.0, x)


#: name -> (float64 function, (limit at -inf, limit at +inf) or None).  The limits are the functions'
#: limits (the activation table gives [-inf, inf] as the valid range of these [B1-SH]).
ACTIVATION_DEFS = {
    "copy": (lambda x: x, None),
    "square": (lambda x: x * x, None),
    "sigmoid": (_sig, None),
    "relu": (lambda x: np.where(np.isnan(x), x, np.maximum(x, 0.0)), None),
    "gelu": (lambda x: x * _phi(x), (0.0, math.inf)),
    "gelu_dx": (lambda x: _phi(x) + x * np.exp(-0.5 * x * x) / math.sqrt(2 * math.pi), (0.0, 1.0)),
    # reading: the tanh approximation 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) (Hendrycks & Gimpel)
    "gelu_apprx_tanh": (
        lambda x: 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3))),
        (0.0, math.inf),
    ),
    # reading: the sigmoid approximation x * sigmoid(1.702 x) (Hendrycks & Gimpel)
    "gelu_apprx_sigmoid": (lambda x: x * _sig(1.702 * x), (0.0, math.inf)),
    "silu": (lambda x: x * _sig(x), (0.0, math.inf)),
    "silu_dx": (lambda x: _sig(x) * (1 + x * (1 - _sig(x))), (0.0, 1.0)),
    "tanh": (np.tanh, None),
    "softplus": (_softplus, None),
    "mish": (lambda x: x * np.tanh(_softplus(x)), (0.0, math.inf)),
    "erf": (_erf, None),
    "erf_dx": (lambda x: 2 / math.sqrt(math.pi) * np.exp(-x * x), None),
    "exp": (np.exp, None),
    "log": (np.log, None),
    "sin": (np.sin, None),
    "cos": (np.cos, None),
    "tan": (np.tan, None),
    "arctan": (np.arctan, None),
    "sqrt": (np.sqrt, None),
    "rsqrt": (lambda x: 1.0 / np.sqrt(x), None),
    "reciprocal": (lambda x: 1.0 / x, None),
    "sign": (np.sign, None),
    "abs": (np.abs, None),
}
#: Activations whose fp32 evaluation is exact (one correctly rounded operation or none).
EXACT_ACTIVATIONS = {"copy", "square", "relu", "sign", "abs"}


def activation(name: str, x32: np.ndarray) -> np.ndarray:
    """The activation ``name`` of fp32 inputs, as float64 (limits at +-inf where defined)."""
    fn, lim = ACTIVATION_DEFS[name]
    x = np.asarray(x32, dtype=np.float64)
    if name == "square":
        return (np.asarray(x32, np.float32) * np.asarray(x32, np.float32)).astype(np.float64)
    with np.errstate(all="ignore"):
        r = np.asarray(fn(x), dtype=np.float64)
    if lim is not None:
        r = np.where(np.isneginf(x), lim[0], np.where(np.isposinf(x), lim[1], r))
    return r


#: nl element-wise unary functions that are not activations, as fp32 operations (VectorE).
VECTOR_UNARY = {
    "negative": np.negative,
    "trunc": np.trunc,
    "floor": np.floor,
    "ceil": np.ceil,
}


# ---- comparison ----------------------------------------------------------------------------------------


def ulp(x: np.ndarray, d: np.dtype) -> np.ndarray:
    """Spacing of format ``d`` at |x| (its smallest subnormal below the normal range)."""
    d = np.dtype(d)
    fi = ml_dtypes.finfo(d)
    ax = np.abs(np.asarray(x, np.float64))
    e = np.floor(np.log2(np.maximum(ax, float(fi.smallest_normal))))
    return np.exp2(e - MANTISSA[d])


def same_values(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    """Elementwise: equal bit for bit, except that any NaN matches any NaN."""
    got, want = np.asarray(got), np.asarray(want)
    if got.dtype in FLOATS:
        g, w = got.astype(np.float32), want.astype(np.float32)
        return (bits(g) == bits(w)) | (np.isnan(g) & np.isnan(w))
    return got == want


def close_values(got: np.ndarray, want64: np.ndarray, d: np.dtype, n_ulp: float) -> np.ndarray:
    """Elementwise: ``got`` (dtype d) within ``n_ulp`` units in the last place of ``d`` of the exact
    value ``want64`` (float64); infinities and NaNs must match; integers within ``n_ulp`` (>= 1)."""
    d = np.dtype(d)
    g = np.asarray(got).astype(np.float64)
    w = np.asarray(want64, dtype=np.float64)
    if d in INTS or d == BOOL:
        wi = cast(np.clip(w, -3.4e38, 3.4e38).astype(np.float32), d).astype(np.float64)
        return (np.abs(g - wi) <= max(1.0, n_ulp)) | (np.isnan(w) & (g == 0))
    fi = ml_dtypes.finfo(d)
    wr = np.asarray(cast(w.astype(np.float32), d), dtype=np.float64)  # the correctly rounded target
    both_nan = np.isnan(g) & np.isnan(w)
    big = np.abs(w) > float(fi.max)  # overflow: either the largest finite or inf is acceptable
    with np.errstate(invalid="ignore"):
        near = np.abs(g - wr) <= n_ulp * ulp(wr, d)
        near |= np.abs(g - w) <= n_ulp * ulp(w, d)
        inf_ok = np.isinf(g) & (g == wr)
        ovf_ok = big & ((np.abs(g) >= float(fi.max)) & (np.sign(g) == np.sign(w)))
    return both_nan | (near & np.isfinite(g)) | inf_ok | ovf_ok


# ---- composite instructions (one reference for both API generations) ----------------------------------------

#: Fill values of the creation tests: signed zeros, infinities, NaN, values that round in bf16/fp16/int32,
#: the fp16 maximum and the smallest fp32 subnormal.
SPECIAL_FILLS = [
    0.0,
    -0.0,
    1.0,
    -2.5,
    math.inf,
    -math.inf,
    math.nan,
    1 + 2**-8,
    2**24 + 1,
    -(2**31),
    65504.0,
    1e-45,
]


def tensor_scalar(x32: np.ndarray, op0: str, o0, op1: str | None, o1, rev: tuple[bool, bool]) -> np.ndarray:
    """``(x op0 o0) op1 o1`` in fp32 (``rev[i]`` swaps the operands of op i); reading: the intermediate
    stays fp32 [B1-ISA tensor_scalar, B2 §5]."""
    with np.errstate(all="ignore"):
        r = FP32_ALU[op0](o0, x32) if rev[0] else FP32_ALU[op0](x32, o0)
        if op1 is not None:
            r = FP32_ALU[op1](o1, r) if rev[1] else FP32_ALU[op1](r, o1)
    return np.asarray(r, np.float32)


def scalar_tensor_tensor(
    x32: np.ndarray, op0: str, scalar: float, op1: str, y32: np.ndarray, rev: tuple[bool, bool]
) -> np.ndarray:
    """``(x op0 scalar) op1 y`` in fp32, ``rev`` as in :func:`tensor_scalar` [B1-ISA, B2 §5]."""
    return tensor_scalar(x32, op0, np.float32(scalar), op1, y32, rev)


def tensor_tensor_scan(x32: np.ndarray, y32: np.ndarray, initial: float, op0: str, op1: str) -> np.ndarray:
    """``r[i] = op1(op0(x[i], r[i-1]), y[i])`` along the free axis, ``r[-1] = initial``; reading: the
    running value stays fp32 [B1-ISA, B2 §5]."""
    r = np.empty_like(x32)
    prev = np.full(x32.shape[0], initial, np.float32)
    with np.errstate(all="ignore"):
        for i in range(x32.shape[1]):
            prev = FP32_ALU[op1](FP32_ALU[op0](x32[:, i], prev), y32[:, i])
            r[:, i] = prev
    return r


def bn_stats(x64: np.ndarray) -> np.ndarray:
    """(count, mean, count x variance) of the even- and then of the odd-index free elements, per partition
    (float64, shape (P, 6)) [B1-ISA bn_stats, B2 §5]."""
    cols = []
    for par in (0, 1):
        xs = x64[:, par::2]
        n = xs.shape[1]
        mean = xs.mean(axis=1) if n else np.zeros(x64.shape[0])
        cols += [
            np.full(x64.shape[0], n, np.float64),
            mean,
            ((xs - mean[:, None]) ** 2).sum(axis=1) if n else np.zeros(x64.shape[0]),
        ]
    return np.stack(cols, axis=1)


def max8(x32: np.ndarray) -> np.ndarray:
    """The 8 largest values of each partition, descending [B1-ISA max8, B2 §5]."""
    return -np.sort(-x32, axis=1)[:, :8]


def match_replace8(x32: np.ndarray, values: np.ndarray, imm: float = -1e30) -> np.ndarray:
    """``x`` with the first not-yet-replaced occurrence of each of ``values`` (per partition) set to
    ``imm`` [B1-ISA nc_match_replace8, B2 §5]."""
    out = x32.copy()
    for q in range(x32.shape[0]):
        for v in values[q]:
            hit = np.nonzero(out[q] == v)[0]
            if hit.size:
                out[q, hit[0]] = np.float32(imm)
    return out


def sequence_bounds(ids: np.ndarray) -> np.ndarray:
    """[start, end) of each element's run of equal segment ids, shape (2, n) float32; id 0 is padding
    with bounds (n, -1) [B1-ISA sequence_bounds, its documented example; B2 §5]."""
    n = ids.size
    start, end = np.empty(n), np.empty(n)
    for i in range(n):
        if ids[i] == 0:
            start[i], end[i] = n, -1
            continue
        j, k = i, i
        while j > 0 and ids[j - 1] == ids[i]:
            j -= 1
        while k < n - 1 and ids[k + 1] == ids[i]:
            k += 1
        start[i], end[i] = j, k + 1
    return np.stack([start, end]).astype(np.float32)


def local_gather(x: np.ndarray, index: np.ndarray) -> np.ndarray:
    """Per 16-partition GpSimd core: its uint16 ``index`` rows read column-major, each partition of the
    core gathering its own row at those offsets [B1-ISA local_gather, B2 §5]."""
    p = x.shape[0]
    per_core = 16 * index.shape[1]
    want = np.empty((p, per_core), x.dtype)
    for c in range(p // 16):
        ids = index[16 * c : 16 * c + 16].flatten(order="F").astype(np.int64)
        want[16 * c : 16 * c + 16] = x[16 * c : 16 * c + 16][:, ids]
    return want


def softmax(x32: np.ndarray) -> np.ndarray:
    """``exp(x - max) / sum exp(x - max)`` along the free axis, in float64 [B1-NL, B2 §3.7]."""
    x64 = x32.astype(np.float64)
    e = np.exp(x64 - x64.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)
