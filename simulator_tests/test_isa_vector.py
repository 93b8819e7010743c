"""VectorE / GpSimd element-wise instructions against NumPy: tensor_tensor, tensor_scalar,
scalar_tensor_tensor, tensor_tensor_scan, tensor_copy, tensor_copy_predicated, reciprocal, iota, memset."""

from __future__ import annotations

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import numpy as np
import pytest
from _nki_support import (
    BF16,
    F32,
    FAST,
    INTS,
    SLOW,
    TILE,
    apply,
    assert_close,
    assert_exact,
    bit_patterns,
    cast,
    f32,
    float_dtypes,
    frees,
    int_dtypes,
    partitions,
    rand,
    rng_of,
    seeds,
    slow,
)
from hypothesis import given
from hypothesis import strategies as st

from devkit.errors import KernelArgumentError, MemoryPlacementError, PartitionMismatchError

ARITH = {
    "np.add": (np.add, np.add),
    "nl.add": (nl.add, np.add),
    "np.subtract": (np.subtract, np.subtract),
    "nl.multiply": (nl.multiply, np.multiply),
    "np.maximum": (np.maximum, np.maximum),
    "nl.minimum": (nl.minimum, np.minimum),
    "np.divide": (np.divide, np.divide),
    "np.equal": (np.equal, lambda a, b: (a == b).astype(np.float32)),
    "nl.greater": (nl.greater, lambda a, b: (a > b).astype(np.float32)),
    "np.less_equal": (np.less_equal, lambda a, b: (a <= b).astype(np.float32)),
    "nl.logical_or": (nl.logical_or, lambda a, b: ((a != 0) | (b != 0)).astype(np.float32)),
    "nl.power": (nl.power, np.power),
}


@pytest.mark.parametrize("name", sorted(ARITH))
@FAST
@given(**TILE, d1=float_dtypes, d2=float_dtypes)
def test_tensor_tensor_arithmetic(name, p, f, d1, d2, seed):
    op, ref = ARITH[name]
    rng = rng_of(seed)
    a = rand(rng, (p, f), d1, 0.5 if name == "nl.power" else -3, 3)
    b = rand(rng, (p, f), d2, -2, 2)
    if name == "np.divide":
        b = np.where(np.abs(f32(b)) < 0.25, 1.0, f32(b)).astype(d2)
    if name in ("np.equal", "nl.greater", "np.less_equal", "nl.logical_or"):
        a, b = np.round(f32(a)).astype(d1), np.round(f32(b)).astype(d2)
    got = apply(lambda x, y: nisa.tensor_tensor(x, y, op=op), a, b)
    want_dtype = d1 if d1 == d2 else F32
    with np.errstate(all="ignore"):
        want = cast(ref(f32(a), f32(b)), want_dtype)
    if name == "nl.power":
        assert got.dtype == want_dtype
        assert_close(got, want, want_dtype)
    else:
        assert_exact(got, want)


@FAST
@given(**TILE, dtype=int_dtypes)
def test_tensor_tensor_bitvec_ops_on_integers(p, f, dtype, seed):
    rng = rng_of(seed)
    a = bit_patterns(rng, (p, f), dtype)
    b = bit_patterns(rng, (p, f), dtype)
    for op, ref in (
        (np.bitwise_and, np.bitwise_and),
        (nl.bitwise_or, np.bitwise_or),
        (np.bitwise_xor, np.bitwise_xor),
    ):
        assert_exact(apply(lambda x, y, op=op: nisa.tensor_tensor(x, y, op=op), a, b), ref(a, b))


def test_tensor_tensor_dtype_and_psum_operand():
    rng = rng_of(0)
    a = rand(rng, (32, 64), F32)
    b = rand(rng, (32, 64), F32)

    @nki.jit
    def k(x, y):
        out = nl.ndarray((32, 64), dtype=nl.bfloat16, buffer=nl.shared_hbm)
        ps = nl.ndarray((32, 64), dtype=nl.float32, buffer=nl.psum)
        ps[...] = nl.load(x)
        nl.store(out, value=nisa.tensor_tensor(ps, nl.load(y), op=np.multiply, dtype=nl.bfloat16))
        return out

    assert_exact(k(a, b), (a * b).astype(BF16))


def test_tensor_tensor_int32_add_on_gpsimd():
    a = np.array([[2**24 + 1, -5, 7]], np.int32)
    b = np.array([[2, 5, -9]], np.int32)
    got = apply(lambda x, y: nisa.tensor_tensor(x, y, op=np.add, engine=nisa.gpsimd_engine), a, b)
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got[0, 1:], [0, -2])


def test_tensor_tensor_rules():
    a = np.ones((32, 8), np.float32)

    @nki.jit
    def both_psum(x):
        out = nl.ndarray((32, 8), dtype=nl.float32, buffer=nl.shared_hbm)
        p1 = nl.zeros((32, 8), dtype=nl.float32, buffer=nl.psum)
        p2 = nl.zeros((32, 8), dtype=nl.float32, buffer=nl.psum)
        nl.store(out, value=nisa.tensor_tensor(p1, p2, op=np.add))
        return out

    with pytest.raises(MemoryPlacementError):
        both_psum(a)
    with pytest.raises(PartitionMismatchError):
        apply(lambda x, y: nisa.tensor_tensor(x, y, op=np.add), a, np.ones((1, 8), np.float32))


# ---- tensor_scalar ---------------------------------------------------------------------------------

TS_OPS = {
    "add": np.add,
    "subtract": np.subtract,
    "multiply": np.multiply,
    "maximum": np.maximum,
    "minimum": np.minimum,
    "divide": np.divide,
}


@FAST
@given(
    **TILE,
    dtype=float_dtypes,
    op0=st.sampled_from(sorted(TS_OPS)),
    op1=st.sampled_from([None, *sorted(TS_OPS)]),
    reverse0=st.booleans(),
    reverse1=st.booleans(),
    kind0=st.sampled_from(["scalar", "vector"]),
    kind1=st.sampled_from(["scalar", "vector"]),
)
def test_tensor_scalar(p, f, dtype, seed, op0, op1, reverse0, reverse1, kind0, kind1):
    rng = rng_of(seed)
    x = rand(rng, (p, f), dtype, 0.5, 3)
    v0 = rand(rng, (p, 1), F32, 0.5, 2)
    v1 = rand(rng, (p, 1), F32, 0.5, 2)
    s0, s1 = 1.5, 0.75

    def fn(t, a0, a1):
        o0 = a0 if kind0 == "vector" else s0
        o1 = a1 if kind1 == "vector" else s1
        if op1 is None:
            return nisa.tensor_scalar(t, getattr(np, op0), o0, reverse0=reverse0)
        return nisa.tensor_scalar(
            data=t,
            op0=getattr(np, op0),
            operand0=o0,
            reverse0=reverse0,
            op1=getattr(nl, op1),
            operand1=o1,
            reverse1=reverse1,
        )

    got = apply(fn, x, v0, v1)
    o0 = v0 if kind0 == "vector" else np.float32(s0)
    o1 = v1 if kind1 == "vector" else np.float32(s1)
    r = TS_OPS[op0](o0, f32(x)) if reverse0 else TS_OPS[op0](f32(x), o0)
    if op1 is not None:
        r = TS_OPS[op1](o1, r) if reverse1 else TS_OPS[op1](r, o1)
    assert_exact(got, cast(r.astype(np.float32), dtype))


def test_tensor_scalar_doc_examples():
    rng = rng_of(1)
    a = rand(rng, (64, 100), F32)
    f = rand(rng, (64, 1), F32)
    assert_exact(apply(lambda t: nisa.tensor_scalar(t, np.subtract, 1.0), a), a - np.float32(1))
    assert_exact(
        apply(lambda t: nisa.tensor_scalar(t, np.subtract, 1.0, reverse0=True), a), np.float32(1) - a
    )
    got = apply(
        lambda t, ff: nisa.tensor_scalar(t, op0=np.multiply, operand0=ff, op1=np.add, operand1=2.5), a, f
    )
    assert_exact(got, a * f + np.float32(2.5))


@FAST
@given(**TILE, dtype=int_dtypes)
def test_tensor_scalar_bitvec(p, f, dtype, seed):
    rng = rng_of(seed)
    x = bit_patterns(rng, (p, f), dtype)
    got = apply(lambda t: nisa.tensor_scalar(t, np.bitwise_and, 0x3C, op1=np.bitwise_xor, operand1=0x0F), x)
    want = (x & np.array(0x3C).astype(dtype)) ^ np.array(0x0F).astype(dtype)
    assert got.dtype == dtype
    assert_exact(got, want)


def test_tensor_scalar_op_families_must_match():
    x = np.ones((4, 4), np.int32)
    with pytest.raises(KernelArgumentError):
        apply(lambda t: nisa.tensor_scalar(t, np.add, 1, op1=np.bitwise_and, operand1=3), x)
    with pytest.raises(KernelArgumentError):
        apply(lambda t: nisa.tensor_scalar(t, np.add, 1, op1=np.multiply), x)


@pytest.mark.parametrize("engine", ["vector", "scalar", "gpsimd"])
def test_tensor_scalar_engines_agree(engine):
    x = rand(rng_of(2), (32, 20), F32, 0.5, 2)
    eng = {"vector": nisa.vector_engine, "scalar": nisa.scalar_engine, "gpsimd": nisa.gpsimd_engine}[engine]
    got = apply(lambda t: nisa.tensor_scalar(t, np.multiply, 2.0, op1=np.add, operand1=1.0, engine=eng), x)
    assert_exact(got, x * np.float32(2) + np.float32(1))


# ---- scalar_tensor_tensor ---------------------------------------------------------------------------


@FAST
@given(
    **TILE,
    dtype=float_dtypes,
    op0=st.sampled_from(sorted(TS_OPS)),
    op1=st.sampled_from(sorted(TS_OPS)),
    reverse0=st.booleans(),
    reverse1=st.booleans(),
    vector=st.booleans(),
)
def test_scalar_tensor_tensor(p, f, dtype, seed, op0, op1, reverse0, reverse1, vector):
    rng = rng_of(seed)
    x = rand(rng, (p, f), dtype, 0.5, 3)
    y = rand(rng, (p, f), dtype, 0.5, 3)
    v = rand(rng, (p, 1), F32, 0.5, 2)

    def fn(t, u, vv):
        return nisa.scalar_tensor_tensor(
            data=t,
            op0=getattr(np, op0),
            operand0=vv if vector else 1.5,
            op1=getattr(np, op1),
            operand1=u,
            reverse0=reverse0,
            reverse1=reverse1,
        )

    got = apply(fn, x, y, v)
    o0 = v if vector else np.float32(1.5)
    r = TS_OPS[op0](o0, f32(x)) if reverse0 else TS_OPS[op0](f32(x), o0)
    r = TS_OPS[op1](f32(y), r) if reverse1 else TS_OPS[op1](r, f32(y))
    assert_exact(got, cast(r.astype(np.float32), dtype))


# ---- tensor_tensor_scan -----------------------------------------------------------------------------


def _scan(d0, d1, init, f0, f1, reverse0=False, reverse1=False):
    prev = np.broadcast_to(np.float32(init) if np.ndim(init) == 0 else init[:, 0], d0.shape[:1]).astype(
        np.float32
    )
    out = np.empty(d0.shape, np.float32)
    for i in range(d0.shape[1]):
        a = f0(prev, d0[:, i]) if reverse0 else f0(d0[:, i], prev)
        prev = (f1(d1[:, i], a) if reverse1 else f1(a, d1[:, i])).astype(np.float32)
        out[:, i] = prev
    return out


@FAST
@given(
    p=partitions,
    f=st.integers(1, 300),
    seed=seeds,
    init_kind=st.sampled_from(["scalar", "vector"]),
    ops=st.sampled_from([("multiply", "add"), ("add", "multiply"), ("maximum", "add"), ("subtract", "add")]),
    reverse0=st.booleans(),
    reverse1=st.booleans(),
)
def test_tensor_tensor_scan(p, f, seed, init_kind, ops, reverse0, reverse1):
    rng = rng_of(seed)
    d0 = rand(rng, (p, f), F32, 0.5, 1.0)
    d1 = rand(rng, (p, f), F32, -1, 1)
    init = rand(rng, (p, 1), F32, -1, 1)

    def fn(a, b, c):
        i0 = c if init_kind == "vector" else 0.5
        return nisa.tensor_tensor_scan(
            a, b, i0, getattr(np, ops[0]), getattr(np, ops[1]), reverse0=reverse0, reverse1=reverse1
        )

    got = apply(fn, d0, d1, init)
    want = _scan(
        d0,
        d1,
        init if init_kind == "vector" else 0.5,
        getattr(np, ops[0]),
        getattr(np, ops[1]),
        reverse0,
        reverse1,
    )
    assert_close(got, want, F32, rtol=1e-5, atol=1e-5)


def test_tensor_tensor_scan_chained_across_chunks():
    """The documented pattern: the last column of one chunk is the initial value of the next."""
    rng = rng_of(3)
    d0 = rand(rng, (16, 4 * 64), F32, 0.5, 1.0)
    d1 = rand(rng, (16, 4 * 64), F32, -1, 1)

    @nki.jit
    def k(a, b):
        out = nl.ndarray((16, 256), dtype=nl.float32, buffer=nl.shared_hbm)
        init = nl.zeros((16, 1), dtype=nl.float32)
        for i in nl.sequential_range(4):
            ta = nl.load(a[:, i * 64 : (i + 1) * 64])
            tb = nl.load(b[:, i * 64 : (i + 1) * 64])
            r = nisa.tensor_tensor_scan(ta, tb, init, np.multiply, np.add)
            nl.store(out[:, i * 64 : (i + 1) * 64], value=r)
            init[:, :] = r[:, 63]
        return out

    assert_close(k(d0, d1), _scan(d0, d1, 0.0, np.multiply, np.add), F32, rtol=1e-5, atol=1e-5)


# ---- copies -------------------------------------------------------------------------------------------


@FAST
@given(
    **TILE,
    src=st.sampled_from((F32, BF16, *INTS)),
    dst=st.sampled_from((None, F32, BF16, *INTS)),
    engine=st.sampled_from(["vector", "gpsimd", "unknown"]),
)
def test_tensor_copy(p, f, src, dst, seed, engine):
    rng = rng_of(seed)
    x = rand(rng, (p, f), src, -300, 300)
    eng = {"vector": nisa.vector_engine, "gpsimd": nisa.gpsimd_engine, "unknown": nisa.unknown_engine}[engine]
    got = apply(lambda t: nisa.tensor_copy(t, dtype=dst, engine=eng), x)
    if dst is None or np.dtype(dst) == src:
        assert_exact(got, x)  # bit-exact copy
    else:
        assert_exact(got, cast(x.astype(np.float32) if src.kind == "f" else x.astype(np.float64), dst))


def test_tensor_copy_int32_is_bit_exact_on_vector_but_goes_through_fp32_on_scalar():
    x = np.array([[2**24 + 1, -(2**31), 2**31 - 1]], np.int32)
    assert_exact(apply(lambda t: nisa.tensor_copy(t, engine=nisa.vector_engine), x), x)
    assert_exact(apply(nl.copy, x), x)


@FAST
@given(
    **TILE,
    dtype=float_dtypes,
    reverse=st.booleans(),
    scalar_src=st.booleans(),
    pdtype=st.sampled_from([np.uint8, np.uint16, np.uint32]),
)
def test_tensor_copy_predicated(p, f, dtype, seed, reverse, scalar_src, pdtype):
    rng = rng_of(seed)
    a = rand(rng, (p, f), dtype)
    b = rand(rng, (p, f), dtype)
    pred = (rng.random((p, f)) < 0.5).astype(pdtype) * rng.integers(1, 3, size=(p, f)).astype(pdtype)

    @nki.jit
    def k(x, y, pr):
        out = nl.ndarray((p, f), dtype=y.dtype, buffer=nl.shared_hbm)
        dst = nl.load(y)
        src = -7.0 if scalar_src else nl.load(x)
        nisa.tensor_copy_predicated(src=src, dst=dst, predicate=nl.load(pr), reverse_pred=reverse)
        nl.store(out, value=dst)
        return out

    sel = (pred != 0) ^ reverse
    want = np.where(sel, np.float32(-7.0) if scalar_src else f32(a), f32(b)).astype(dtype)
    assert_exact(k(a, b, pred), want)


@FAST
@given(**TILE, dtype=float_dtypes)
def test_reciprocal(p, f, dtype, seed):
    x = rand(rng_of(seed), (p, f), dtype, 0.25, 4)
    x = np.where(rng_of(seed).random((p, f)) < 0.5, x, -f32(x)).astype(dtype)
    assert_exact(apply(nisa.reciprocal, x), cast(np.float32(1) / f32(x), dtype))


# ---- iota / memset ---------------------------------------------------------------------------------

IOTA = {
    "free": (lambda p, f: nl.arange(f)[None, :], lambda p, f: np.arange(f)[None, :]),
    "partition": (lambda p, f: nl.arange(p)[:, None], lambda p, f: np.arange(p)[:, None]),
    "negated": (lambda p, f: nl.arange(f)[None, :] * -1, lambda p, f: -np.arange(f)[None, :]),
    "affine": (lambda p, f: 5 + nl.arange(p)[:, None] * 2, lambda p, f: 5 + 2 * np.arange(p)[:, None]),
    "sum": (
        lambda p, f: nl.arange(f)[None, :] + nl.arange(p)[:, None],
        lambda p, f: np.arange(f)[None, :] + np.arange(p)[:, None],
    ),
    "mgrid": (
        lambda p, f: 3 * nl.mgrid[0:p, 0:f].p - nl.mgrid[0:p, 0:f].x + 7,
        lambda p, f: 3 * np.arange(p)[:, None] - np.arange(f)[None, :] + 7,
    ),
}


@pytest.mark.parametrize("name", sorted(IOTA))
@FAST
@given(p=partitions, f=frees, dtype=st.sampled_from([np.int32, np.float32, np.uint16, BF16, np.int16]))
def test_iota(name, p, f, dtype):
    expr, ref = IOTA[name]
    x = np.zeros((1, 1), np.float32)
    got = apply(lambda _t: nisa.iota(expr(p, f), dtype=dtype), x)
    want = ref(p, f).astype(np.int32)
    assert_exact(
        got,
        cast(want.astype(np.float64), dtype)
        if np.dtype(dtype).kind in "iu"
        else want.astype(np.float32).astype(dtype),
    )


def test_iota_of_a_loop_variable_is_a_1x1_tile():
    @nki.jit
    def k(a):
        out = nl.ndarray((4, 1), dtype=nl.int32, buffer=nl.shared_hbm)
        for i in nl.affine_range(4):
            nl.store(out[i : i + 1, :], value=nisa.iota(i * 3, dtype=nl.int32))
        return out

    assert_exact(k(np.zeros((1, 1), np.float32)), np.array([[0], [3], [6], [9]], np.int32))


@FAST
@given(
    p=partitions,
    f=frees,
    dtype=st.sampled_from([np.float32, BF16, np.int32, np.uint8, np.float16]),
    value=st.sampled_from([0, 0.2, -3, 1.5, 100]),
)
def test_memset(p, f, dtype, value):
    got = apply(lambda _t: nisa.memset(shape=(p, f), value=value, dtype=dtype), np.zeros((1, 1), np.float32))
    assert_exact(got, np.full((p, f), cast(np.float32(value), dtype), dtype=np.dtype(dtype)))


@slow
@SLOW
@given(**TILE, dtype=float_dtypes, op0=st.sampled_from(sorted(TS_OPS)), op1=st.sampled_from(sorted(TS_OPS)))
def test_tensor_scalar_sweep(p, f, dtype, seed, op0, op1):
    rng = rng_of(seed)
    x = rand(rng, (p, f), dtype, 0.5, 3)
    v = rand(rng, (p, 1), F32, 0.5, 2)
    got = apply(
        lambda t, vv: nisa.tensor_scalar(t, getattr(np, op0), vv, op1=getattr(np, op1), operand1=0.5), x, v
    )
    assert_exact(got, cast(TS_OPS[op1](TS_OPS[op0](f32(x), v), np.float32(0.5)).astype(np.float32), dtype))
