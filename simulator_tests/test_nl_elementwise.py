"""nl element-wise ops against NumPy: unary/binary math, comparisons, logical and bitwise ops, where,
Python operators, NumPy broadcasting (incl. (P,1), (1,F) and scalars), masks, type promotion and the
numerics rule "engines compute in fp32, the result is rounded to nearest-even into the output dtype"."""

from __future__ import annotations

import math

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import numpy as np
import pytest
from _nki_support import (
    BF16,
    F32,
    FAST,
    FLOATS,
    FP8,
    SLOW,
    TILE,
    apply,
    assert_close,
    assert_exact,
    bit_patterns,
    cast,
    f32,
    float_dtypes,
    int_dtypes,
    partitions,
    rand,
    rng_of,
    seeds,
    slow,
)
from hypothesis import example, given
from hypothesis import strategies as st

_erf = np.vectorize(math.erf, otypes=[np.float64])


def _sig(x):
    return 1.0 / (1.0 + np.exp(-x))


def _softplus(x):
    return np.logaddexp(0.0, x)


# name -> (reference in float64, input range, exact?)  exact ops must match bit for bit
UNARY = {
    "exp": (np.exp, (-4, 4), False),
    "log": (np.log, (0.05, 8), False),
    "sqrt": (np.sqrt, (0.01, 9), False),
    "rsqrt": (lambda x: 1 / np.sqrt(x), (0.05, 9), False),
    "reciprocal": (lambda x: 1 / x, (0.25, 4), False),
    "square": (np.square, (-4, 4), True),
    "sin": (np.sin, (-3, 3), False),
    "cos": (np.cos, (-3, 3), False),
    "tan": (np.tan, (-1.2, 1.2), False),
    "tanh": (np.tanh, (-4, 4), False),
    "arctan": (np.arctan, (-1.5, 1.5), False),
    "sigmoid": (_sig, (-6, 6), False),
    "relu": (lambda x: np.maximum(x, 0), (-4, 4), True),
    "gelu": (lambda x: 0.5 * x * (1 + _erf(x / math.sqrt(2))), (-4, 4), False),
    "gelu_dx": (
        lambda x: 0.5 * (1 + _erf(x / math.sqrt(2))) + x * np.exp(-x * x / 2) / math.sqrt(2 * math.pi),
        (-4, 4),
        False,
    ),
    "gelu_apprx_tanh": (
        lambda x: 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3))),
        (-4, 4),
        False,
    ),
    "gelu_apprx_sigmoid": (lambda x: x * _sig(1.702 * x), (-4, 4), False),
    "silu": (lambda x: x * _sig(x), (-6, 6), False),
    "silu_dx": (lambda x: _sig(x) * (1 + x * (1 - _sig(x))), (-6, 6), False),
    "erf": (_erf, (-3, 3), False),
    "erf_dx": (lambda x: 2 / math.sqrt(math.pi) * np.exp(-x * x), (-3, 3), False),
    "softplus": (_softplus, (-6, 6), False),
    "mish": (lambda x: x * np.tanh(_softplus(x)), (-4, 4), False),
    "abs": (np.abs, (-4, 4), True),
    "negative": (np.negative, (-4, 4), True),
    "sign": (np.sign, (-4, 4), True),
    "trunc": (np.trunc, (-6, 6), True),
    "floor": (np.floor, (-6, 6), True),
    "ceil": (np.ceil, (-6, 6), True),
}


def _check_unary(name, p, f, dtype, seed):
    ref, (lo, hi), exact = UNARY[name]
    x = rand(rng_of(seed), (p, f), dtype, lo, hi)
    got = apply(getattr(nl, name), x)
    if exact:
        assert_exact(got, cast(ref(f32(x)), dtype))
    else:
        assert got.dtype == dtype
        assert_close(got, cast(ref(x.astype(np.float64)), dtype), dtype)


@pytest.mark.parametrize("name", sorted(UNARY))
@FAST
@given(**TILE, dtype=float_dtypes)
def test_unary_matches_numpy(name, p, f, dtype, seed):
    _check_unary(name, p, f, dtype, seed)


@slow
@pytest.mark.parametrize("name", sorted(UNARY))
@SLOW
@given(**TILE, dtype=float_dtypes)
def test_unary_matches_numpy_sweep(name, p, f, dtype, seed):
    _check_unary(name, p, f, dtype, seed)


def test_unary_result_is_rne_of_fp32_result_for_bf16():
    # 1 + 2^-8 is a tie between two bf16 neighbours: RNE gives 1.0, 1 + 3*2^-8 rounds up to 1 + 2^-6
    x = np.array([[1.0 + 2**-8, 1.0 + 3 * 2**-8, -(1.0 + 2**-8)]], dtype=np.float32)
    got = apply(lambda t: nl.abs(t, dtype=nl.bfloat16), x)
    assert got.dtype == BF16
    np.testing.assert_array_equal(got.astype(np.float32), [[1.0, 1.0 + 2**-6, 1.0]])


def test_unary_dtype_argument_casts_output():
    x = rand(rng_of(1), (64, 33), np.float32)
    for d in (nl.bfloat16, nl.float16, nl.float32, nl.int32, nl.int8):
        got = apply(lambda t, d=d: nl.negative(t, dtype=d), x)
        assert_exact(got, cast(-x, np.dtype(d)))


# ---- binary ops ------------------------------------------------------------------------------------

BINARY = {
    "add": np.add,
    "subtract": np.subtract,
    "multiply": np.multiply,
    "divide": np.divide,
    "maximum": np.maximum,
    "minimum": np.minimum,
    "power": np.power,
    "mod": np.mod,
    "fmod": np.fmod,
}
COMPARE = {
    "equal": np.equal,
    "not_equal": np.not_equal,
    "greater": np.greater,
    "greater_equal": np.greater_equal,
    "less": np.less,
    "less_equal": np.less_equal,
    "logical_and": np.logical_and,
    "logical_or": np.logical_or,
    "logical_xor": np.logical_xor,
}

# operand shapes (x, y) for a (P, F) result
_BCAST = ["PF,PF", "PF,P1", "P1,PF", "PF,1F", "1F,PF", "P1,1F", "PF,11", "11,PF"]


def _shape(code, p, f):
    return tuple({"P": p, "F": f, "1": 1}[c] for c in code)


def _binary_inputs(name, p, f, dx, dy, seed, bcast):
    rng = rng_of(seed)
    sx, sy = (_shape(c, p, f) for c in bcast.split(","))
    x = rand(rng, sx, dx, -4, 4)
    y = rand(rng, sy, dy, -4, 4)
    if name == "power":
        x = rand(rng, sx, dx, 0.25, 3)
        y = rand(rng, sy, dy, -2, 2)
    if name in ("divide", "mod", "fmod"):
        y = np.where(np.abs(f32(y)) < 0.25, 1.0, f32(y)).astype(dy)
    if name in COMPARE:  # make equal values common
        y = np.round(f32(y)).astype(dy)
        x = np.round(f32(x)).astype(dx)
    return x, y


@pytest.mark.parametrize("bcast", _BCAST)
@pytest.mark.parametrize("name", sorted(BINARY))
@FAST
@given(**TILE, dx=float_dtypes, dy=float_dtypes)
def test_binary_matches_numpy_with_broadcasting(name, bcast, p, f, dx, dy, seed):
    x, y = _binary_inputs(name, p, f, dx, dy, seed, bcast)
    got = apply(getattr(nl, name), x, y)
    want_dtype = F32 if dx != dy else dx
    with np.errstate(all="ignore"):
        want = BINARY[name](f32(x), f32(y))
    if name == "power":
        assert_close(got, cast(want, want_dtype), want_dtype)
        assert got.dtype == want_dtype
    else:
        assert_exact(got, cast(want, want_dtype))


@slow
@pytest.mark.parametrize("name", sorted(BINARY))
@SLOW
@given(**TILE, dx=float_dtypes, dy=float_dtypes, bcast=st.sampled_from(_BCAST))
def test_binary_matches_numpy_sweep(name, p, f, dx, dy, seed, bcast):
    test_binary_matches_numpy_with_broadcasting.hypothesis.inner_test(name, bcast, p, f, dx, dy, seed)


@pytest.mark.parametrize("name", sorted(COMPARE))
@FAST
@given(**TILE, dtype=float_dtypes, bcast=st.sampled_from(_BCAST))
def test_comparisons_and_logical_default_to_bool(name, p, f, dtype, seed, bcast):
    x, y = _binary_inputs(name, p, f, dtype, dtype, seed, bcast)
    got = apply(getattr(nl, name), x, y)
    assert_exact(got, COMPARE[name](f32(x), f32(y)))


@pytest.mark.parametrize("name", ["equal", "less", "logical_and"])
def test_comparison_with_numeric_dtype_gives_one_and_zero(name):
    x = np.array([[0.0, 1.0, 2.0, 3.0]], np.float32)
    y = np.array([[0.0, 2.0, 2.0, 0.0]], np.float32)
    got = apply(lambda a, b: getattr(nl, name)(a, b, dtype=nl.float32), x, y)
    assert_exact(got, COMPARE[name](x, y).astype(np.float32))


@pytest.mark.parametrize("name", sorted(BINARY))
@pytest.mark.parametrize("scalar", [2.5, 3, -1.25])
@pytest.mark.parametrize("side", ["left", "right"])
def test_binary_with_python_scalar(name, scalar, side):
    rng = rng_of(7)
    x = (
        rand(rng, (37, 41), np.float32, 0.5, 3)
        if name in ("power", "mod", "fmod")
        else rand(rng, (37, 41), np.float32)
    )
    op = getattr(nl, name)
    fn = (lambda t: op(t, scalar)) if side == "left" else (lambda t: op(scalar, t))
    got = apply(fn, x)
    with np.errstate(all="ignore"):
        want = BINARY[name](x, np.float32(scalar)) if side == "left" else BINARY[name](np.float32(scalar), x)
    assert got.dtype == F32
    if name == "power":
        assert_close(got, want.astype(np.float32))
    else:
        assert_exact(got, want.astype(np.float32))


def test_mod_is_python_style_and_fmod_is_c_style():
    x = np.array([[-7.0, 7.0, -7.5, 7.5]], np.float32)
    y = np.array([[3.0, -3.0, 2.0, -2.0]], np.float32)
    assert_exact(apply(nl.mod, x, y), np.array([[2.0, -2.0, 0.5, -0.5]], np.float32))
    assert_exact(apply(nl.fmod, x, y), np.array([[-1.0, 1.0, -1.5, 1.5]], np.float32))


def test_bf16_binary_result_is_round_to_nearest_even_of_fp32_result():
    # bf16 inputs: the sum is computed in fp32 and rounded once (ties to even) into bf16
    x = np.array([[1.0, 1.0, 256.0, 1.0]], np.float32).astype(BF16)
    y = np.array([[2**-8, 3 * 2**-8, 1.0, 2**-9]], np.float32).astype(BF16)
    got = apply(nl.add, x, y)
    assert got.dtype == BF16
    np.testing.assert_array_equal(got.astype(np.float32), [[1.0, 1.0 + 2**-6, 256.0, 1.0]])
    # the same with an fp32 result dtype keeps every bit
    got32 = apply(lambda a, b: nl.add(a, b, dtype=nl.float32), x, y)
    np.testing.assert_array_equal(got32, [[1.0 + 2**-8, 1.0 + 3 * 2**-8, 257.0, 1.0 + 2**-9]])


def test_engines_compute_in_fp32_not_in_the_input_dtype():
    # (a*b) in fp16 would overflow to inf; the engine computes in fp32 and only the result is cast
    a = np.full((4, 8), 300.0, np.float16)
    got = apply(lambda t: nl.multiply(nl.multiply(t, t, dtype=nl.float32), 1.0 / 300.0, dtype=nl.float16), a)
    assert_exact(got, np.full((4, 8), 300.0, np.float16))
    # bf16 input 1 + 2^-7 squared in fp32 is 1 + 2^-6 + 2^-14, rounded to bf16 is 1 + 2^-6
    b = np.full((2, 2), 1 + 2**-7, np.float32).astype(BF16)
    got = apply(lambda t: nl.multiply(t, t, dtype=nl.float32), b)
    np.testing.assert_array_equal(got, np.full((2, 2), (1 + 2**-7) ** 2, np.float32))


# ---- type promotion -----------------------------------------------------------------------------------

PROMOTION = [
    (np.int32, np.float16, np.float16),
    (np.float32, BF16, np.float32),
    (np.float16, BF16, np.float32),
    (FP8, np.float16, np.float16),
    (FP8, BF16, BF16),
    (np.int16, np.int32, np.int32),
    (np.uint8, np.uint16, np.uint16),
    (np.uint16, np.int32, np.int32),
    (np.int8, np.uint8, np.int16),
    (np.int8, np.uint16, np.int32),
    (np.int32, np.uint32, np.float32),
    (np.float32, np.float32, np.float32),
]


@pytest.mark.parametrize(("a", "b", "want"), PROMOTION, ids=lambda d: np.dtype(d).name)
def test_type_promotion_table(a, b, want):
    x = np.ones((3, 5), a)
    y = np.full((3, 5), 2, b)
    for xx, yy in ((x, y), (y, x)):
        got = apply(nl.add, xx, yy)
        assert got.dtype == np.dtype(want)
        np.testing.assert_array_equal(got.astype(np.float32), 3.0)


@pytest.mark.parametrize(
    ("dtype", "scalar", "want"),
    [
        (np.int8, 2, np.int32),
        (np.float16, 1.5, np.float32),
        (np.uint8, True, np.uint8),
        (BF16, 2, BF16),
        (np.int16, 2.5, np.float32),
    ],
)
def test_weak_python_scalar_promotion(dtype, scalar, want):
    x = np.ones((2, 3), dtype)
    got = apply(lambda t: nl.add(t, scalar), x)
    assert got.dtype == np.dtype(want)
    np.testing.assert_array_equal(got.astype(np.float64), 1.0 + float(scalar))


# ---- integer and bitwise ops ----------------------------------------------------------------------


@FAST
@given(**TILE, dtype=int_dtypes, bcast=st.sampled_from(["PF,PF", "PF,P1", "PF,1F"]))
@example(p=4, f=1, dtype=np.int32, seed=0, bcast="PF,1F")  # a (1, 1) operand: tensor_scalar, fp32
@example(p=4, f=1, dtype=np.uint32, seed=0, bcast="PF,P1")  # same shapes: native
def test_integer_arithmetic_rounds_and_saturates_into_the_int_dtype(p, f, dtype, seed, bcast):
    rng = rng_of(seed)
    sx, sy = (_shape(c, p, f) for c in bcast.split(","))
    info = np.iinfo(dtype)
    lo, hi = max(info.min, -(2**20)), min(info.max, 2**20)
    x, y = rand(rng, sx, dtype, lo, hi), rand(rng, sy, dtype, lo, hi)
    # int32/uint32 tile-by-tile arithmetic is GpSimd's native integer arithmetic (exact, wrapping;
    # test_numerics_regressions); an operand of one free element ((P, 1), or (1, 1) when f == 1) broadcast
    # against a different shape makes it a tensor_scalar, which computes in fp32
    column = sx[1:] == (1,) or sy[1:] == (1,)
    native = np.dtype(dtype) in (np.dtype(np.int32), np.dtype(np.uint32)) and (sx == sy or not column)
    for name in ("add", "subtract", "multiply", "maximum", "minimum"):
        got = apply(getattr(nl, name), x, y)
        if native:
            want = getattr(np, name)(x.astype(np.int64), y.astype(np.int64)).astype(dtype)
        else:
            want = cast(
                getattr(np, name)(x.astype(np.float64), y.astype(np.float64)).astype(np.float32), dtype
            )
        assert_exact(got, want)


BITWISE = {"bitwise_and": np.bitwise_and, "bitwise_or": np.bitwise_or, "bitwise_xor": np.bitwise_xor}


@FAST
@given(**TILE, dtype=int_dtypes, bcast=st.sampled_from(_BCAST))
def test_bitwise_ops_on_bit_patterns(p, f, dtype, seed, bcast):
    rng = rng_of(seed)
    sx, sy = (_shape(c, p, f) for c in bcast.split(","))
    x, y = bit_patterns(rng, sx, dtype), bit_patterns(rng, sy, dtype)
    for name, ref in BITWISE.items():
        assert_exact(apply(getattr(nl, name), x, y), ref(x, y))
    assert_exact(apply(nl.invert, x), np.invert(x))


@FAST
@given(**TILE, dtype=int_dtypes)
def test_shifts_are_logical(p, f, dtype, seed):
    rng = rng_of(seed)
    bits = 8 * np.dtype(dtype).itemsize
    x = bit_patterns(rng, (p, f), dtype)
    s = rand(rng, (p, f), dtype, 0, bits - 1)
    u = np.dtype(f"u{np.dtype(dtype).itemsize}")
    assert_exact(apply(nl.left_shift, x, s), np.left_shift(x.view(u), s.astype(u)).view(dtype))
    assert_exact(apply(nl.right_shift, x, s), np.right_shift(x.view(u), s.astype(u)).view(dtype))


def test_bitwise_ops_reject_float_tiles():
    from devkit.errors import DtypeError

    x = np.ones((4, 4), np.float32)
    for name in ("bitwise_and", "left_shift"):
        with pytest.raises(DtypeError):
            apply(getattr(nl, name), x, x)
    with pytest.raises(DtypeError):
        apply(nl.invert, x)


def test_logical_not():
    x = np.array([[0.0, 1.0, -2.0, 0.0]], np.float32)
    assert_exact(apply(nl.logical_not, x), np.array([[True, False, False, True]]))


# ---- where ----------------------------------------------------------------------------------------


@FAST
@given(**TILE, dtype=float_dtypes, ybc=st.sampled_from(["PF", "P1", "1F", "scalar"]))
def test_where(p, f, dtype, seed, ybc):
    rng = rng_of(seed)
    c = rng.random((p, f)) < 0.5
    x = rand(rng, (p, f), dtype)
    if ybc == "scalar":
        got = apply(lambda cc, xx: nl.where(cc, xx, -3.0, dtype=dtype), c.astype(np.uint8), x)
        want = np.where(c, f32(x), np.float32(-3.0)).astype(dtype)
    else:
        y = rand(rng, _shape(ybc, p, f), dtype)
        got = apply(nl.where, c.astype(np.uint8), x, y)
        want = np.where(c, x, y)
    assert_exact(got, want)


# ---- masks ------------------------------------------------------------------------------------------


@FAST
@given(**TILE, data=st.data())
def test_mask_restricts_the_computed_region(p, f, seed, data):
    """Assigned into an existing tile, masked-off elements keep their old values."""
    mp = data.draw(st.integers(0, p))
    mf = data.draw(st.integers(0, f))
    rng = rng_of(seed)
    x = rand(rng, (p, f), np.float32)
    y = rand(rng, (p, f), np.float32)

    @nki.jit
    def k(a, b):
        out = nl.ndarray((p, f), dtype=nl.float32, buffer=nl.shared_hbm)
        i_p = nl.arange(p)[:, None]
        i_f = nl.arange(f)[None, :]
        ta = nl.load(a)
        tb = nl.load(b)
        tb[i_p, i_f] = nl.multiply(ta, 3.0, mask=(i_p < mp) & (i_f < mf))
        nl.store(out[i_p, i_f], value=tb)
        return out

    want = y.copy()
    want[:mp, :mf] = x[:mp, :mf] * np.float32(3.0)
    assert_exact(k(x, y), want)


def test_mask_square_tutorial_example():
    """The masking example of the NKI docs: only [0:64, 0:256] is computed and stored."""
    a = rand(rng_of(3), (128, 512), np.float32)

    @nki.jit
    def k(in_tensor):
        out_tensor = nl.ndarray((64, 256), dtype=in_tensor.dtype, buffer=nl.shared_hbm)
        i_p = nl.arange(128)[:, None]
        i_f = nl.arange(512)[None, :]
        in_tile = nl.load(in_tensor[i_p, i_f])
        out_tile = nl.square(in_tile, mask=((i_p < 64) & (i_f < 256)))
        nl.store(out_tensor[i_p, i_f], out_tile[i_p, i_f], mask=((i_p < 64) & (i_f < 256)))
        return out_tensor

    assert_exact(k(a), np.square(a[:64, :256]))


# ---- Python operators on tiles ---------------------------------------------------------------------

OPS = {
    "+": (lambda a, b: a + b, np.add),
    "-": (lambda a, b: a - b, np.subtract),
    "*": (lambda a, b: a * b, np.multiply),
    "/": (lambda a, b: a / b, np.divide),
}


@pytest.mark.parametrize("op", sorted(OPS))
@FAST
@given(**TILE, dtype=float_dtypes, ybc=st.sampled_from(["PF", "P1", "1F"]))
def test_python_operators(op, p, f, dtype, seed, ybc):
    fn, ref = OPS[op]
    rng = rng_of(seed)
    x = rand(rng, (p, f), dtype)
    y = rand(rng, _shape(ybc, p, f) if ybc != "1F" else (p, f), dtype, 0.5, 4)
    got = apply(fn, x, y)
    assert_exact(got, cast(ref(f32(x), f32(y)), dtype))
    # with scalars on either side
    assert_exact(apply(lambda t: fn(t, 2.0), x), cast(ref(f32(x), np.float32(2.0)), F32))
    assert_exact(apply(lambda t: fn(1.5, t), y), cast(ref(np.float32(1.5), f32(y)), F32))


def test_unary_operators_and_comparisons():
    x = np.array([[-2.0, 0.0, 1.5, 3.0]], np.float32)
    assert_exact(apply(lambda t: -t, x), -x)
    assert_exact(apply(lambda t: abs(t), x), np.abs(x))
    assert_exact(apply(lambda t: t < 1.0, x), x < 1.0)
    assert_exact(apply(lambda t: t >= 0.0, x), x >= 0.0)
    i = np.array([[1, 2, 4, -8]], np.int32)
    assert_exact(apply(lambda t: t << 1, i), (i << 1).astype(np.int32))
    assert_exact(apply(lambda t: t & 6, i), (i & 6).astype(np.int32))
    assert_exact(apply(lambda t: ~t, i), ~i)


@pytest.mark.parametrize("dtype", FLOATS)
def test_fp16_and_bf16_saturation_is_ieee_overflow_to_inf(dtype):
    x = np.array([[60000.0, -60000.0, 1e30]], np.float32)
    got = apply(lambda t: nl.multiply(t, 2.0, dtype=dtype), x)
    assert_exact(got, cast(x * np.float32(2.0), dtype))


# ---- more shapes: 3-D tiles, reduction results as (P, 1) operands, in-place updates -------------------


@FAST
@given(p=partitions, g=st.integers(1, 6), f=st.integers(1, 64), seed=seeds, dtype=float_dtypes)
def test_three_dimensional_broadcasting(p, g, f, seed, dtype):
    rng = rng_of(seed)
    x = rand(rng, (p, 1, f), dtype)
    y = rand(rng, (p, g, 1), dtype)
    z = rand(rng, (1, g, f), dtype)
    got = apply(lambda a, b, c: nl.subtract(nl.multiply(a, b), c), x, y, z)
    want = cast(cast(f32(x) * f32(y), dtype).astype(np.float32) - f32(z), dtype)
    assert_exact(got, want)


@FAST
@given(**TILE)
def test_reduction_result_used_as_a_per_partition_operand(p, f, seed):
    """The RMSNorm tutorial: nl.multiply(a_tile, nl.rsqrt(nl.sum(sq, axis=[1]))) with a (P,) reduction."""
    x = rand(rng_of(seed), (p, f), np.float32, 0.5, 2)
    got = apply(lambda t: nl.multiply(t, nl.rsqrt(nl.sum(nl.square(t), axis=[1]))), x)
    want = x.astype(np.float64) / np.sqrt((x.astype(np.float64) ** 2).sum(axis=1, keepdims=True))
    assert_close(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("op", ["+=", "-=", "*=", "/="])
@FAST
@given(**TILE, dtype=float_dtypes, scalar=st.booleans())
def test_augmented_assignment_updates_in_place(op, p, f, seed, dtype, scalar):
    rng = rng_of(seed)
    x = rand(rng, (p, f), dtype)
    y = rand(rng, (p, f), dtype, 0.5, 2)

    @nki.jit
    def k(a, b):
        out = nl.ndarray((p, f), dtype=a.dtype, buffer=nl.shared_hbm)
        t = nl.load(a)
        u = 1.5 if scalar else nl.load(b)
        if op == "+=":
            t += u
        elif op == "-=":
            t -= u
        elif op == "*=":
            t[...] *= u
        else:
            t[...] /= u
        nl.store(out, value=t)
        return out

    ref = {"+=": np.add, "-=": np.subtract, "*=": np.multiply, "/=": np.divide}[op]
    want = cast(ref(f32(x), np.float32(1.5) if scalar else f32(y)), dtype)
    assert_exact(k(x, y), want)


def test_elementwise_on_psum_operands_and_results_assigned_to_psum():
    x = rand(rng_of(5), (64, 128), np.float32)

    @nki.jit
    def k(a):
        out = nl.ndarray((64, 128), dtype=nl.float32, buffer=nl.shared_hbm)
        ps = nl.ndarray((64, 128), dtype=nl.float32, buffer=nl.psum)
        ps[...] = nl.load(a)
        ps[...] = nl.exp(ps)
        nl.store(out, value=nl.add(ps, 1.0))
        return out

    assert_close(k(x), np.exp(x.astype(np.float64)) + 1, rtol=1e-6)
