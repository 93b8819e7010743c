"""nisa.activation / activation_reduce on the ScalarE: op(data * scale + bias) computed in fp32 and cast,
scalar and (P,1) scale/bias, masks, and the per-partition accumulator registers (reduce_cmd)."""

from __future__ import annotations

import math

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import numpy as np
import pytest
from _nki_support import (
    BF16,
    F32,
    FAST,
    TILE,
    assert_close,
    assert_exact,
    cast,
    f32,
    float_dtypes,
    rand,
    rng_of,
)
from hypothesis import given
from hypothesis import strategies as st

ACT = {
    "exp": (nl.exp, np.exp),
    "np.exp": (np.exp, np.exp),
    "tanh": (nl.tanh, np.tanh),
    "np.tanh": (np.tanh, np.tanh),
    "square": (nl.square, np.square),
    "np.square": (np.square, np.square),
    "copy": (nl.copy, lambda x: x),
    "relu": (nl.relu, lambda x: np.maximum(x, 0)),
    "sigmoid": (nl.sigmoid, lambda x: 1 / (1 + np.exp(-x))),
    "abs": (nl.abs, np.abs),
    "sign": (nl.sign, np.sign),
    "rsqrt": (nl.rsqrt, lambda x: 1 / np.sqrt(x)),
    "sqrt": (nl.sqrt, np.sqrt),
    "log": (nl.log, np.log),
    "reciprocal": (nl.reciprocal, lambda x: 1 / x),
    "gelu_apprx_tanh": (
        nl.gelu_apprx_tanh,
        lambda x: 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3))),
    ),
    "silu": (nl.silu, lambda x: x / (1 + np.exp(-x))),
    "arctan": (nl.arctan, np.arctan),
    "sin": (nl.sin, np.sin),
    "softplus": (nl.softplus, lambda x: np.logaddexp(0, x)),
}
POSITIVE = {"rsqrt", "sqrt", "log", "reciprocal"}


@pytest.mark.parametrize("name", sorted(ACT))
@FAST
@given(**TILE, dtype=float_dtypes, scale_kind=st.sampled_from(["scalar", "vector"]), with_bias=st.booleans())
def test_activation_scale_and_bias(name, p, f, dtype, seed, scale_kind, with_bias):
    op, ref = ACT[name]
    rng = rng_of(seed)
    pos = name in POSITIVE
    x = rand(rng, (p, f), dtype, 0.5 if pos else -2, 2)
    scale = rand(rng, (p, 1), F32, 0.5, 1.5) if scale_kind == "vector" else np.float32(1.25)
    bias = rand(rng, (p, 1), dtype, 0.0 if pos else -1, 1)
    if name == "reciprocal":
        with_bias = False  # no bias on trn1

    @nki.jit
    def k(a, s, b):
        out = nl.ndarray((p, f), dtype=a.dtype, buffer=nl.shared_hbm)
        t = nl.load(a)
        sc = nl.load(s) if scale_kind == "vector" else 1.25
        bi = nl.load(b) if with_bias else None
        nl.store(out, value=nisa.activation(op=op, data=t, scale=sc, bias=bi))
        return out

    got = k(x, scale if scale_kind == "vector" else np.zeros((p, 1), np.float32), bias)
    z = f32(x) * (scale if scale_kind == "vector" else np.float32(1.25))
    if with_bias:
        z = z + f32(bias)
    want = cast(ref(z.astype(np.float64)), dtype)
    assert got.dtype == dtype
    if name in ("copy", "relu", "abs", "square", "sign"):
        # the composed fp32 arithmetic (x*scale + bias) is what the engine evaluates
        assert_exact(got, cast(ref(z.astype(np.float32)), dtype))
    else:
        assert_close(
            got, want, dtype, rtol=1e-5 if dtype == F32 else None, atol=1e-5 if dtype == F32 else None
        )


def test_activation_dtype_casts_the_fp32_result():
    x = np.array([[1.0, 2.0, 3.0]], np.float32)

    @nki.jit
    def k(a):
        out = nl.ndarray((1, 3), dtype=nl.bfloat16, buffer=nl.shared_hbm)
        nl.store(
            out, value=nisa.activation(op=np.square, data=nl.load(a), scale=1.0 + 2**-9, dtype=nl.bfloat16)
        )
        return out

    want = (x * np.float32(1 + 2**-9)) ** 2
    assert_exact(k(x), want.astype(BF16))


@FAST
@given(**TILE, data=st.data())
def test_activation_mask(p, f, seed, data):
    mp, mf = data.draw(st.integers(0, p)), data.draw(st.integers(0, f))
    x = rand(rng_of(seed), (p, f), F32)

    @nki.jit
    def k(a):
        out = nl.ndarray((p, f), dtype=nl.float32, buffer=nl.shared_hbm)
        i_p, i_f = nl.mgrid[0:p, 0:f]
        t = nl.load(a)
        t[i_p, i_f] = nisa.activation(op=nl.exp, data=t, mask=(i_p < mp) & (i_f < mf))
        nl.store(out, value=t)
        return out

    want = x.copy()
    want[:mp, :mf] = np.exp(x[:mp, :mf])
    assert_close(k(x), want)


# ---- accumulator registers ---------------------------------------------------------------------------


@FAST
@given(**TILE, reduce_op=st.sampled_from([nl.add, np.add, np.sum]))
def test_activation_reduce_writes_the_row_sum(p, f, seed, reduce_op):
    rng = rng_of(seed)
    x = rand(rng, (p, f), F32, -1, 1)
    bias = rand(rng, (p, 1), F32, -1, 1)

    @nki.jit
    def k(a, b):
        out = nl.ndarray((p, f), dtype=nl.float32, buffer=nl.shared_hbm)
        red = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.shared_hbm)
        res = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
        e = nisa.activation_reduce(
            op=nl.exp, data=nl.load(a), bias=nl.load(b), reduce_op=reduce_op, reduce_res=res
        )
        nl.store(out, value=e)
        nl.store(red, value=res)
        return out, red

    got, red = k(x, bias)
    want = np.exp(x.astype(np.float64) + bias)
    assert_close(got, want)
    assert_close(red, want.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-5 * f)


def test_activation_accumulator_registers_chain_across_instructions():
    """reset_reduce starts the registers, reduce keeps adding, idle leaves them alone, reset zeroes them."""
    rng = rng_of(1)
    p, f = 64, 40
    xs = [rand(rng, (p, f), F32, -1, 1) for _ in range(3)]

    cmd = nisa.reduce_cmd
    # (activation, input, accumulator command, result column the registers are read into or None)
    steps = [
        (nl.copy, 0, cmd.reset_reduce, None),
        (nl.copy, 1, cmd.reduce, 0),
        (nl.square, 2, cmd.idle, 1),
        (nl.square, 2, cmd.reduce, 2),
        (nl.copy, 0, cmd.reset, 3),
    ]

    @nki.jit
    def k(*ins):
        r = nl.ndarray((p, 4), dtype=nl.float32, buffer=nl.shared_hbm)
        res = nl.ndarray((p, 4), dtype=nl.float32, buffer=nl.sbuf)
        for op, i, command, col in steps:
            read = {} if col is None else {"reduce_res": res[:, col]}
            nisa.activation(op=op, data=nl.load(ins[i]), reduce_op=nl.add, reduce_cmd=command, **read)
        nl.store(r, value=res)
        return r

    got = k(*xs)
    s01 = xs[0].sum(1) + xs[1].sum(1)
    assert_close(got[:, 0], s01)
    assert_close(got[:, 1], s01)
    assert_close(got[:, 2], s01 + (xs[2] ** 2).sum(1))
    assert_exact(got[:, 3], np.zeros(p, np.float32))


def test_activation_max_reduce_on_trn2():
    rng = rng_of(2)
    x = rand(rng, (32, 50), F32)

    @nki.jit(platform_target="trn2")
    def k(a):
        r = nl.ndarray((32, 1), dtype=nl.float32, buffer=nl.shared_hbm)
        res = nl.ndarray((32, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation(
            op=nl.exp,
            data=nl.load(a),
            reduce_op=nl.max,
            reduce_res=res,
            reduce_cmd=nisa.reduce_cmd.reset_reduce,
        )
        nl.store(r, value=res)
        return r

    assert_close(k(x), np.exp(x.astype(np.float64)).max(axis=1, keepdims=True))


def test_softmax_pattern_with_activation_reduce():
    """exp(x - rowmax) with the row sums from the accumulator, as in the attention kernels."""
    rng = rng_of(3)
    x = rand(rng, (128, 512), F32, -5, 5)

    @nki.jit
    def k(a):
        out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
        t = nl.load(a)
        neg_max = nisa.tensor_reduce(np.max, t, axis=(1,), negate=True, keepdims=True)
        sums = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
        e = nisa.activation(
            op=nl.exp,
            data=t,
            bias=neg_max,
            reduce_op=nl.add,
            reduce_res=sums,
            reduce_cmd=nisa.reduce_cmd.reset_reduce,
        )
        inv = nisa.reciprocal(sums)
        nl.store(out, value=nisa.tensor_scalar(e, np.multiply, inv))
        return out

    x64 = x.astype(np.float64)
    e = np.exp(x64 - x64.max(axis=1, keepdims=True))
    assert_close(k(x), e / e.sum(axis=1, keepdims=True), atol=1e-7)
