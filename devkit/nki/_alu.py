"""The ALU operator and activation-function tables shared by ``nki.language`` and ``nki.isa``.

One home for what both front-end modules need to agree on: the names an ALU operator may be given
(``nl.add``, ``np.add``, ``"add"`` ...) and their NumPy implementations, which of them are bitvec
operators and legal reductions, and the ScalarE activation functions.  It sits below both modules and
imports neither, so ``nki.isa`` and ``nki.language`` do not depend on each other for these tables.

Sources: the ALU operator table ("Supported Math Operators for NKI ISA") and the activation table
("Supported Activation Functions for NKI ISA") of AWS's ``nki.api.shared`` page (reference/nki_api.md §3).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from devkit import dtypes as _dt
from devkit.errors import DtypeError, KernelArgumentError
from devkit.sim.tensor import Tensor

# ---- ALU operators (VectorE / GpSimd / ScalarE) ----------------------------------------------------------


def _shr(a: np.ndarray, b: Any) -> np.ndarray:
    a = np.asarray(a)
    if a.dtype.kind == "i":
        u = a.view(np.dtype(f"u{a.dtype.itemsize}"))
        return (u >> np.asarray(b).astype(u.dtype)).view(a.dtype)
    return a >> np.asarray(b).astype(a.dtype)


ALU: dict[str, Any] = {
    "add": np.add,
    "subtract": np.subtract,
    "multiply": np.multiply,
    "divide": np.divide,
    "max": np.maximum,
    "min": np.minimum,
    "power": np.power,
    "mod": np.mod,
    "fmod": np.fmod,
    "equal": lambda a, b: (a == b).astype(np.float32),
    "not_equal": lambda a, b: (a != b).astype(np.float32),
    "greater": lambda a, b: (a > b).astype(np.float32),
    "greater_equal": lambda a, b: (a >= b).astype(np.float32),
    "less": lambda a, b: (a < b).astype(np.float32),
    "less_equal": lambda a, b: (a <= b).astype(np.float32),
    "logical_and": lambda a, b: ((a != 0) & (b != 0)).astype(np.float32),
    "logical_or": lambda a, b: ((a != 0) | (b != 0)).astype(np.float32),
    "logical_xor": lambda a, b: ((a != 0) ^ (b != 0)).astype(np.float32),
    "logical_not": lambda a, b: (a == 0).astype(np.float32),
    "bitwise_and": np.bitwise_and,
    "bitwise_or": np.bitwise_or,
    "bitwise_xor": np.bitwise_xor,
    "invert": lambda a, b: np.invert(a),
    "left_shift": lambda a, b: np.left_shift(a, np.asarray(b).astype(a.dtype)),
    "right_shift": _shr,
    "rsqrt": lambda a, b: 1.0 / np.sqrt(a),
    "reciprocal": lambda a, b: 1.0 / a,
    "abs": lambda a, b: np.abs(a),
    "bypass": lambda a, b: a,
    # NKI 0.4.0: the signed operand of larger / smaller magnitude, ties (and NaN comparisons) -> b
    "abs_max": lambda a, b: np.where(np.abs(a) > np.abs(b), a, b),
    "abs_min": lambda a, b: np.where(np.abs(a) < np.abs(b), a, b),
}
BITVEC = {"bitwise_and", "bitwise_or", "bitwise_xor", "invert", "left_shift", "right_shift"}
REDUCE_OK = {
    "add",
    "subtract",
    "multiply",
    "max",
    "min",
    "bitwise_and",
    "bitwise_or",
    "bitwise_xor",
    "logical_and",
    "logical_or",
}


def _abs_extreme(pick: Any) -> Any:
    """Reduction to the signed element of largest (``np.argmax``) / smallest (``np.argmin``) magnitude."""

    def reduce(v: np.ndarray, axis: Any, keepdims: bool = False) -> np.ndarray:
        axes = (axis,) if isinstance(axis, int) else tuple(axis)
        moved = np.moveaxis(v, axes, tuple(range(-len(axes), 0)))
        flat = moved.reshape(*moved.shape[: moved.ndim - len(axes)], -1)
        out = np.take_along_axis(flat, pick(np.abs(flat), axis=-1)[..., None], axis=-1)[..., 0]
        if keepdims:
            out = np.expand_dims(out, tuple(sorted(a % v.ndim for a in axes)))
        return out

    return reduce


_REDUCE_FN = {
    "add": np.sum,
    "multiply": np.prod,
    "max": np.max,
    "min": np.min,
    "subtract": np.sum,
    "bitwise_and": np.bitwise_and.reduce,
    "bitwise_or": np.bitwise_or.reduce,
    "bitwise_xor": np.bitwise_xor.reduce,
    "logical_and": lambda v, axis, keepdims=False: np.all(v != 0, axis=axis, keepdims=keepdims),
    "logical_or": lambda v, axis, keepdims=False: np.any(v != 0, axis=axis, keepdims=keepdims),
    "abs_max": _abs_extreme(np.argmax),
    "abs_min": _abs_extreme(np.argmin),
}
_IDENT = {
    "add": 0.0,
    "subtract": 0.0,
    "multiply": 1.0,
    "max": -np.inf,
    "min": np.inf,
    "abs_max": 0.0,
    "abs_min": np.inf,
}


#: Arithmetic operators that GpSimd computes in native 32-bit integer arithmetic.  "When all input/output
#: tiles are int32 or uint32, the operation defaults to GpSimd Engine, which uses native integer
#: arithmetic.  This ensures exact results for all 32-bit integer values" [N2-ISA tensor_tensor]; Beta 1:
#: "32-bit integer add and multiply only on GpSimd" [B1-SH].  Overflow is not documented for tiles; the
#: kit reads "native" as two's-complement wrap-around modulo 2**32, the documented behaviour of NKI's
#: 32-bit scalars [N2-ISA NkiScalar].  Division, power, mod and the comparisons stay fp32 operators.
INT32_NATIVE: dict[str, Any] = {
    "add": np.add,
    "subtract": np.subtract,
    "multiply": np.multiply,
    "max": np.maximum,
    "min": np.minimum,
}
_INT32_NAMES = ("int32", "uint32")


def int32_native(name: str, in_dtypes: tuple[Any, ...], out_dtype: Any) -> bool:
    """Whether ALU operator ``name`` on these dtypes takes GpSimd's native 32-bit integer path."""
    return name in INT32_NATIVE and all(_dt.name_of(d) in _INT32_NAMES for d in (*in_dtypes, out_dtype))


def int32_op(name: str, out_dtype: Any) -> Any:
    """``name`` on integer arrays, exact, wrapped modulo 2**32 into ``out_dtype`` (int32 or uint32)."""
    f = INT32_NATIVE[name]
    od = np.dtype(out_dtype)

    def op(a: Any, b: Any) -> np.ndarray:
        r = f(np.asarray(a).astype(np.int64), np.asarray(b).astype(np.int64))  # int64 wraps mod 2**64
        return np.asarray(r).astype(od)  # and the cast keeps the low 32 bits

    return op


# ---- operator names -------------------------------------------------------------------------------------

_ALU_ALIASES = {
    "add": "add",
    "sum": "add",
    "subtract": "subtract",
    "multiply": "multiply",
    "prod": "multiply",
    "divide": "divide",
    "true_divide": "divide",
    "maximum": "max",
    "max": "max",
    "amax": "max",
    "minimum": "min",
    "min": "min",
    "amin": "min",
    "power": "power",
    "equal": "equal",
    "not_equal": "not_equal",
    "greater": "greater",
    "greater_equal": "greater_equal",
    "less": "less",
    "less_equal": "less_equal",
    "logical_and": "logical_and",
    "logical_or": "logical_or",
    "logical_xor": "logical_xor",
    "logical_not": "logical_not",
    "bitwise_and": "bitwise_and",
    "bitwise_or": "bitwise_or",
    "bitwise_xor": "bitwise_xor",
    "invert": "invert",
    "bitwise_not": "invert",
    "left_shift": "left_shift",
    "right_shift": "right_shift",
    "rsqrt": "rsqrt",
    "reciprocal": "reciprocal",
    "abs": "abs",
    "absolute": "abs",
    "mod": "mod",
    "remainder": "mod",
    "fmod": "fmod",
    "bypass": "bypass",
    "abs_max": "abs_max",
    "abs_min": "abs_min",
}


def _alu_name(op: Any) -> str:
    """Normalise an ALU operator given as nl.x, np.x (ufunc or function) or a string."""
    if isinstance(op, str):
        name = op
    else:
        name = getattr(op, "_nki_alu", None) or getattr(op, "__name__", None) or ""
        act = getattr(op, "_nki_activation", None)
        if act and not name:
            name = act
    name = name.rsplit(".", 1)[-1]
    if name in _ALU_ALIASES:
        return _ALU_ALIASES[name]
    raise KernelArgumentError(f"unknown ALU operator {op!r}", rule="bad-alu-op")


def _require_int(api: str, *xs: Any) -> None:
    for x in xs:
        if isinstance(x, Tensor) and _dt.is_float(x.dtype):
            raise DtypeError(
                f"{api} is a bitwise operation and needs integer tiles, got {_dt.name_of(x.dtype)}",
                rule="bitwise-float",
            )
        if isinstance(x, (float, np.floating)):
            raise DtypeError(
                f"{api} is a bitwise operation and needs integer operands, got {x!r}", rule="bitwise-float"
            )


# ---- activation functions (ScalarE) -----------------------------------------------------------------------


def _erf(x: np.ndarray) -> np.ndarray:
    return np.vectorize(math.erf, otypes=[np.float32])(x) if x.size < 64 else _erf_fast(x)


def _erf_fast(x: np.ndarray) -> np.ndarray:
    # Abramowitz-Stegun 7.1.26 is too coarse; use float64 with math.erf via frompyfunc for exactness.
    f = np.frompyfunc(math.erf, 1, 1)
    return f(x.astype(np.float64)).astype(np.float32)


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return (1.0 / (1.0 + np.exp(-x.astype(np.float64)))).astype(np.float32)


def _gelu(x: np.ndarray) -> np.ndarray:
    return (0.5 * x * (1.0 + _erf(x / np.float32(math.sqrt(2.0))))).astype(np.float32)


def _gelu_dx(x: np.ndarray) -> np.ndarray:
    cdf = 0.5 * (1.0 + _erf(x / np.float32(math.sqrt(2.0))))
    pdf = np.exp(-0.5 * x * x) / np.float32(math.sqrt(2.0 * math.pi))
    return (cdf + x * pdf).astype(np.float32)


def _gelu_tanh(x: np.ndarray) -> np.ndarray:
    c = np.float32(math.sqrt(2.0 / math.pi))
    return (0.5 * x * (1.0 + np.tanh(c * (x + np.float32(0.044715) * x * x * x)))).astype(np.float32)


def _gelu_sigmoid(x: np.ndarray) -> np.ndarray:
    return (x * _sigmoid(np.float32(1.702) * x)).astype(np.float32)


def _silu(x: np.ndarray) -> np.ndarray:
    return (x * _sigmoid(x)).astype(np.float32)


def _silu_dx(x: np.ndarray) -> np.ndarray:
    s = _sigmoid(x)
    return (s * (1.0 + x * (1.0 - s))).astype(np.float32)


def _softplus(x: np.ndarray) -> np.ndarray:
    return np.logaddexp(np.float32(0), x).astype(np.float32)


def _mish(x: np.ndarray) -> np.ndarray:
    return (x * np.tanh(_softplus(x))).astype(np.float32)


def _erf_dx(x: np.ndarray) -> np.ndarray:
    return (np.float32(2.0 / math.sqrt(math.pi)) * np.exp(-x * x)).astype(np.float32)


def _rsqrt(x: np.ndarray) -> np.ndarray:
    return (1.0 / np.sqrt(x)).astype(np.float32)


#: Activation functions (ScalarE): name -> NumPy implementation in fp32.
ACTIVATIONS: dict[str, Any] = {
    "copy": lambda x: x,
    "identity": lambda x: x,
    "square": np.square,
    "sigmoid": _sigmoid,
    "relu": lambda x: np.maximum(x, np.float32(0)),
    "gelu": _gelu,
    "gelu_dx": _gelu_dx,
    "gelu_apprx_tanh": _gelu_tanh,
    "gelu_apprx_sigmoid": _gelu_sigmoid,
    "silu": _silu,
    "silu_dx": _silu_dx,
    "softplus": _softplus,
    "mish": _mish,
    "erf": _erf,
    "erf_dx": _erf_dx,
    "tanh": np.tanh,
    "exp": np.exp,
    "log": np.log,
    "sin": np.sin,
    "cos": np.cos,
    "tan": np.tan,
    "arctan": np.arctan,
    "sqrt": np.sqrt,
    "rsqrt": _rsqrt,
    "reciprocal": lambda x: np.float32(1) / x,
    "sign": np.sign,
    "abs": np.abs,
}

#: Limits at -inf and +inf of the activations whose formulas evaluate inf * 0 there.  The activation
#: table gives [-inf, inf] as their valid input range [B1-SH], so the result at +-inf is the limit of
#: the function, not NaN.  The zeros carry the sign of the function next to the limit (x * sigmoid(x) is
#: negative for every finite negative x), which is also what the fp32 formula gives at -1e30.
ACTIVATION_LIMITS: dict[str, tuple[float, float]] = {
    "silu": (-0.0, np.inf),
    "silu_dx": (-0.0, 1.0),
    "gelu": (-0.0, np.inf),
    "gelu_dx": (0.0, 1.0),
    "gelu_apprx_tanh": (-0.0, np.inf),
    "gelu_apprx_sigmoid": (-0.0, np.inf),
    "mish": (-0.0, np.inf),
}


def _with_limits(fn: Any, lo: float, hi: float) -> Any:
    def at_limits(x: np.ndarray) -> np.ndarray:
        x = np.asarray(x)
        r = np.asarray(fn(x), dtype=np.float32)
        inf = np.isinf(x)
        if inf.any():
            r = np.where(inf, np.where(x > 0, np.float32(hi), np.float32(lo)), r).astype(np.float32)
        return r

    at_limits.__name__ = getattr(fn, "__name__", "activation")
    return at_limits


for _name, (_lo, _hi) in ACTIVATION_LIMITS.items():
    ACTIVATIONS[_name] = _with_limits(ACTIVATIONS[_name], _lo, _hi)
