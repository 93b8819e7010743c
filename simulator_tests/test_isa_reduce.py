"""Reductions and statistics on the VectorE / GpSimd: tensor_reduce, tensor_partition_reduce,
tensor_scalar_reduce, bn_stats / bn_aggr (layernorm), max8 / nc_find_index8 / nc_match_replace8."""

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
    TILE,
    apply,
    as_tile,
    assert_close,
    assert_exact,
    bit_patterns,
    bn_stats_kernel,
    cast,
    f32,
    float_dtypes,
    int_dtypes,
    partitions,
    rand,
    rng_of,
    seeds,
)
from hypothesis import given
from hypothesis import strategies as st

from devkit.errors import KernelArgumentError, TileShapeError

RED = {
    "np.add": (np.add, np.sum),
    "nl.add": (nl.add, np.sum),
    "np.max": (np.max, np.max),
    "nl.maximum": (nl.maximum, np.max),
    "np.min": (np.min, np.min),
    "np.amin": (np.amin, np.min),
    "np.multiply": (np.multiply, np.prod),
}


@pytest.mark.parametrize("name", sorted(RED))
@FAST
@given(
    p=partitions,
    f=st.integers(1, 200),
    dtype=float_dtypes,
    seed=seeds,
    negate=st.booleans(),
    keepdims=st.booleans(),
    three_d=st.booleans(),
)
def test_tensor_reduce(name, p, f, dtype, seed, negate, keepdims, three_d):
    op, ref = RED[name]
    shape = (p, 2, f) if three_d else (p, f)
    axis = (1, 2) if three_d else 1
    lo, hi = (0.95, 1.05) if ref is np.prod else (-4, 4)
    x = rand(rng_of(seed), shape, dtype, lo, hi)
    got = apply(lambda t: nisa.tensor_reduce(op, t, axis=axis, negate=negate, keepdims=keepdims), x)
    want = as_tile(ref(f32(x), axis=axis, keepdims=keepdims))
    want = cast(-want if negate else want, dtype)
    if ref in (np.max, np.min):
        assert_exact(got, want)
    else:
        assert got.dtype == dtype
        assert_close(got, want, dtype, rtol=1e-4 if dtype == F32 else None, atol=1e-4 * f)


@FAST
@given(p=partitions, f=st.integers(1, 200), dtype=int_dtypes, seed=seeds)
def test_tensor_reduce_bitvec(p, f, dtype, seed):
    x = bit_patterns(rng_of(seed), (p, f), dtype)
    for op, ref in (
        (np.bitwise_and, np.bitwise_and),
        (np.bitwise_or, np.bitwise_or),
        (nl.bitwise_xor, np.bitwise_xor),
    ):
        got = apply(lambda t, op=op: nisa.tensor_reduce(op, t, axis=[1], keepdims=True), x)
        assert_exact(got, ref.reduce(x, axis=1, keepdims=True))


def test_tensor_reduce_bitvec_with_mask():
    x = rng_of(5).integers(0, 256, size=(16, 40)).astype(np.uint8)

    @nki.jit
    def k(a):
        out = nl.ndarray((16, 2), dtype=nl.uint8, buffer=nl.shared_hbm)
        _, i_f = nl.mgrid[0:16, 0:40]
        t = nl.load(a)
        r = nl.zeros((16, 2), dtype=nl.uint8)
        r[:, 0:1] = nisa.tensor_reduce(np.bitwise_and, t, axis=1, keepdims=True, mask=(i_f < 10))
        r[:, 1:2] = nisa.tensor_reduce(np.bitwise_or, t, axis=1, keepdims=True, mask=(i_f < 10))
        nl.store(out, value=r)
        return out

    got = k(x)
    assert_exact(got[:, 0], np.bitwise_and.reduce(x[:, :10], axis=1))
    assert_exact(got[:, 1], np.bitwise_or.reduce(x[:, :10], axis=1))


def test_tensor_reduce_dtype_and_rules():
    x = rand(rng_of(1), (32, 64), F32)
    got = apply(lambda t: nisa.tensor_reduce(np.add, t, axis=1, dtype=nl.bfloat16, keepdims=True), x)
    assert got.dtype == BF16
    assert_close(got, cast(x.sum(axis=1, keepdims=True), BF16), BF16)
    with pytest.raises(KernelArgumentError):
        apply(lambda t: nisa.tensor_reduce(np.bitwise_and, t, axis=1, negate=True), np.ones((4, 4), np.int32))
    with pytest.raises(KernelArgumentError):
        apply(lambda t: nisa.tensor_reduce(np.divide, t, axis=1), x)


@FAST
@given(
    p=partitions,
    f=st.integers(1, 64),
    dtype=st.sampled_from([F32, BF16, np.int32]),
    seed=seeds,
    op=st.sampled_from(["add", "max"]),
    three_d=st.booleans(),
)
def test_tensor_partition_reduce(p, f, dtype, seed, op, three_d):
    shape = (p, f, 3) if three_d else (p, f)
    x = rand(rng_of(seed), shape, dtype, -50, 50)
    fn = {"add": np.add, "max": np.max}[op]
    got = apply(lambda t: nisa.tensor_partition_reduce(fn, t), x)
    want = {"add": np.sum, "max": np.max}[op](x.astype(np.float64), axis=0, keepdims=True)
    assert got.shape == (1, *shape[1:])
    if op == "max" or dtype != F32:
        assert_exact(got, cast(want, dtype))
    else:
        assert_close(got, cast(want, dtype), atol=1e-4 * p)


def test_tensor_partition_reduce_bitwise():
    x = rng_of(2).integers(0, 2**16, size=(64, 10)).astype(np.int32)
    assert_exact(
        apply(lambda t: nisa.tensor_partition_reduce(np.bitwise_or, t), x),
        np.bitwise_or.reduce(x, axis=0, keepdims=True),
    )
    assert_exact(
        apply(lambda t: nisa.tensor_partition_reduce(np.bitwise_and, t), x),
        np.bitwise_and.reduce(x, axis=0, keepdims=True),
    )
    with pytest.raises(KernelArgumentError):
        apply(lambda t: nisa.tensor_partition_reduce(np.multiply, t), x)


@FAST
@given(
    **TILE,
    op0=st.sampled_from(["add", "multiply", "subtract"]),
    red=st.sampled_from(["add", "max", "min"]),
    vector=st.booleans(),
)
def test_tensor_scalar_reduce(p, f, seed, op0, red, vector):
    rng = rng_of(seed)
    x = rand(rng, (p, f), F32)
    v = rand(rng, (p, 1), F32)

    @nki.jit
    def k(a, b):
        out = nl.ndarray((p, f), dtype=nl.float32, buffer=nl.shared_hbm)
        r = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.shared_hbm)
        rr = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
        res = nisa.tensor_scalar_reduce(
            data=nl.load(a),
            op0=getattr(np, op0),
            operand0=nl.load(b) if vector else 0.5,
            reduce_op=getattr(np, red if red == "add" else "m" + red[1:] + "imum"),
            reduce_res=rr,
        )
        nl.store(out, value=res)
        nl.store(r, value=rr)
        return out, r

    got, r = k(x, v)
    want = getattr(np, op0)(x, v if vector else np.float32(0.5))
    assert_exact(got, want)
    ref = {"add": np.sum, "max": np.max, "min": np.min}[red](want.astype(np.float64), axis=1, keepdims=True)
    assert_close(r, ref, atol=1e-5 * f)


# ---- bn_stats / bn_aggr --------------------------------------------------------------------------


def _bn_stats(x):
    out = []
    for xs in (x[:, 0::2], x[:, 1::2]):
        n = xs.shape[1]
        out += [
            np.full(x.shape[0], n),
            xs.mean(1) if n else np.zeros(x.shape[0]),
            (xs.var(1) * n) if n else np.zeros(x.shape[0]),
        ]
    return np.stack(out, axis=1)


@FAST
@given(p=partitions, f=st.integers(1, 512), seed=seeds, dtype=float_dtypes)
def test_bn_stats_and_bn_aggr(p, f, seed, dtype):
    x = rand(rng_of(seed), (p, f), dtype, -3, 5)
    s, g = bn_stats_kernel(x)
    x64 = x.astype(np.float64)
    assert_close(s, _bn_stats(x64), atol=1e-4, rtol=1e-4)
    assert_close(g[:, 0], x64.mean(1), atol=1e-5, rtol=1e-4)
    assert_close(g[:, 1], x64.var(1), atol=1e-4, rtol=1e-4)


@FAST
@given(p=partitions, chunks=st.integers(1, 4), seed=seeds)
def test_bn_aggr_of_several_bn_stats_chunks(p, chunks, seed):
    """Free size > 512: one bn_stats per 512-chunk into stats[:, 6i:6i+6], then one bn_aggr (layernorm)."""
    f = 512 * chunks - 37 * (chunks > 1)
    x = rand(rng_of(seed), (p, f), F32, -2, 6)
    n = (f + 511) // 512

    @nki.jit
    def k(a):
        g = nl.ndarray((p, 2), dtype=nl.float32, buffer=nl.shared_hbm)
        t = nl.load(a)
        stats = nl.ndarray((p, 6 * n), dtype=nl.float32, buffer=nl.sbuf)
        for i in nl.affine_range(n):
            w = min(512, f - 512 * i)
            stats[:, 6 * i : 6 * i + 6] = nisa.bn_stats(t[:, 512 * i : 512 * i + w])
        nl.store(g, value=nisa.bn_aggr(stats))
        return g

    g = k(x)
    assert_close(g[:, 0], x.astype(np.float64).mean(1), atol=1e-5, rtol=1e-4)
    assert_close(g[:, 1], x.astype(np.float64).var(1), atol=1e-4, rtol=1e-4)


def test_layernorm_with_bn_stats_matches_numpy():
    rng = rng_of(3)
    x = rand(rng, (128, 300), F32, -3, 3)
    gamma = rand(rng, (1, 300), F32, 0.5, 1.5)
    beta = rand(rng, (1, 300), F32, -1, 1)
    eps = 1e-5

    @nki.jit
    def layernorm(a, g, b):
        out = nl.ndarray((128, 300), dtype=nl.float32, buffer=nl.shared_hbm)
        t = nl.load(a)
        mv = nisa.bn_aggr(nisa.bn_stats(t))
        rstd = nisa.activation(op=nl.rsqrt, data=mv[:, 1:2], bias=nisa.memset((128, 1), eps, nl.float32))
        y = nisa.tensor_scalar(data=t, op0=np.subtract, operand0=mv[:, 0:1], op1=np.multiply, operand1=rstd)
        y = nl.add(
            nl.multiply(y, nl.broadcast_to(nl.load(g), shape=(128, 300))),
            nl.broadcast_to(nl.load(b), shape=(128, 300)),
        )
        nl.store(out, value=y)
        return out

    x64 = x.astype(np.float64)
    want = (x64 - x64.mean(1, keepdims=True)) / np.sqrt(x64.var(1, keepdims=True) + eps) * gamma + beta
    assert_close(layernorm(x, gamma, beta), want, rtol=1e-4, atol=1e-4)


def test_bn_stats_rules():
    with pytest.raises(TileShapeError):
        apply(nisa.bn_stats, np.ones((4, 513), np.float32))
    with pytest.raises(TileShapeError):
        apply(nisa.bn_aggr, np.ones((4, 7), np.float32))


# ---- max8 / find_index8 / match_replace8 ----------------------------------------------------------


def _distinct(rng, p, f, dtype):
    """Per partition, a permutation of distinct values exactly representable in dtype."""
    base = np.stack([rng.permutation(f) for _ in range(p)]).astype(np.float32) - f / 2
    return (base / 4).astype(dtype)


@FAST
@given(
    p=partitions,
    f=st.integers(8, 1024),
    seed=seeds,
    dtype=st.sampled_from([F32, BF16]),
    three_d=st.booleans(),
)
def test_max8(p, f, seed, dtype, three_d):
    rng = rng_of(seed)
    x = _distinct(rng, p, f, dtype) if dtype == F32 else rand(rng, (p, f), dtype)
    shape = (p, 2, f) if three_d else (p, f)
    x = np.concatenate([x, x[:, ::-1]], axis=1).reshape(shape) if three_d else x
    got = apply(lambda t: nisa.max8(src=t), x)
    want = -np.sort(-f32(x).reshape(p, -1), axis=1)[:, :8]
    assert_exact(got, want.astype(dtype))


@FAST
@given(p=partitions, f=st.integers(8, 600), seed=seeds)
def test_nc_find_index8(p, f, seed):
    rng = rng_of(seed)
    x = _distinct(rng, p, f, F32)
    cols = np.stack([rng.choice(f, 8, replace=False) for _ in range(p)])
    vals = np.take_along_axis(x, cols, axis=1)
    got = apply(lambda d, v: nisa.nc_find_index8(data=d, vals=v), x, vals)
    assert_exact(got, cols.astype(np.uint32))
    got16 = apply(lambda d, v: nisa.nc_find_index8(data=d, vals=v, dtype=nl.uint16), x, vals)
    assert_exact(got16, cols.astype(np.uint16))


def test_nc_find_index8_returns_the_first_occurrence():
    x = np.array([[5, 1, 5, 2, 1, 3, 9, 9, 4, 7, 8, 0]], np.float32)
    vals = np.array([[5, 1, 9, 0, 4, 7, 8, 3]], np.float32)
    got = apply(lambda d, v: nisa.nc_find_index8(data=d, vals=v), x, vals)
    assert_exact(got, np.array([[0, 1, 6, 11, 8, 9, 10, 5]], np.uint32))


@FAST
@given(p=partitions, f=st.integers(8, 600), seed=seeds, k_rounds=st.integers(1, 3))
def test_top_k_with_max8_and_nc_match_replace8(p, f, seed, k_rounds):
    """The top-k idiom: repeated max8 + match_replace8(imm=-inf) with indices written into dst_idx."""
    k_rounds = min(k_rounds, f // 8)
    x = _distinct(rng_of(seed), p, f, F32)

    @nki.jit
    def k(a):
        vals = nl.ndarray((p, 8 * k_rounds), dtype=nl.float32, buffer=nl.shared_hbm)
        idx = nl.ndarray((p, 8 * k_rounds), dtype=nl.uint32, buffer=nl.shared_hbm)
        d = nl.load(a)
        v_sb = nl.ndarray((p, 8 * k_rounds), dtype=nl.float32, buffer=nl.sbuf)
        i_sb = nl.ndarray((p, 8 * k_rounds), dtype=nl.uint32, buffer=nl.sbuf)
        for r in nl.sequential_range(k_rounds):
            v_sb[:, 8 * r : 8 * r + 8] = nisa.max8(src=d)
            d[...] = nisa.nc_match_replace8(
                data=d, vals=v_sb[:, 8 * r : 8 * r + 8], imm=float("-inf"), dst_idx=i_sb[:, 8 * r : 8 * r + 8]
            )
        nl.store(vals, value=v_sb)
        nl.store(idx, value=i_sb)
        return vals, idx

    vals, idx = k(x)
    order = np.argsort(-x, axis=1, kind="stable")[:, : 8 * k_rounds]
    assert_exact(idx, order.astype(np.uint32))
    assert_exact(vals, np.take_along_axis(x, order, axis=1))


def test_nc_match_replace8_duplicates_hit_successive_occurrences():
    x = np.array([[3, 1, 3, 3, 2, 2, 7, 0, 5, 6]], np.float32)
    vals = np.array([[3, 3, 2, 7, 0, 5, 6, 3]], np.float32)

    @nki.jit
    def k(a, b):
        out = nl.ndarray((1, 10), dtype=nl.float32, buffer=nl.shared_hbm)
        ix = nl.ndarray((1, 8), dtype=nl.uint32, buffer=nl.shared_hbm)
        i_sb = nl.ndarray((1, 8), dtype=nl.uint32, buffer=nl.sbuf)
        nl.store(out, value=nisa.nc_match_replace8(data=nl.load(a), vals=nl.load(b), imm=-1.0, dst_idx=i_sb))
        nl.store(ix, value=i_sb)
        return out, ix

    out, ix = k(x, vals)
    assert_exact(ix, np.array([[0, 2, 4, 6, 7, 8, 9, 3]], np.uint32))
    assert_exact(out, np.array([[-1, 1, -1, -1, -1, 2, -1, -1, -1, -1]], np.float32))


def test_max8_size_limits():
    with pytest.raises(TileShapeError):
        apply(lambda t: nisa.max8(src=t), np.ones((4, 7), np.float32))
