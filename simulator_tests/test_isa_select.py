"""Selection, shuffling and gather instructions against NumPy: affine_select, range_select (trn2),
select_reduce, nc_stream_shuffle, sequence_bounds, tensor_scalar_cumulative, local_gather,
tensor_copy_dynamic_src/dst, nl.gather_flattened; and the random ops (dropout, nl.rand) statistically."""

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
    assert_close,
    assert_exact,
    cast,
    f32,
    float_dtypes,
    partitions,
    rand,
    rng_of,
    seeds,
    stream_shuffle_kernel,
)
from hypothesis import given
from hypothesis import strategies as st

import devkit
from devkit.errors import UnsupportedError

FP32_MIN = np.float32(np.finfo(np.float32).min)


# ---- affine_select --------------------------------------------------------------------------------

PREDS = {
    "causal": (lambda ip, jf, c: jf < ip, lambda ip, jf, c: jf < ip),
    "ge_offset": (lambda ip, jf, c: c * 2 + ip >= jf + 3, lambda ip, jf, c: c * 2 + ip >= jf + 3),
    "gt": (lambda ip, jf, c: jf > c, lambda ip, jf, c: jf > c),
    "le": (lambda ip, jf, c: 2 * jf <= ip + c, lambda ip, jf, c: 2 * jf <= ip + c),
}


@pytest.mark.parametrize("name", sorted(PREDS))
@FAST
@given(
    **TILE,
    c=st.integers(0, 40),
    dtype=float_dtypes,
    false_value=st.sampled_from([float(FP32_MIN), -9984.0, 0.0]),
)
def test_affine_select(name, p, f, c, dtype, seed, false_value):
    pred, ref = PREDS[name]
    x = rand(rng_of(seed), (p, f), dtype)

    @nki.jit
    def k(a):
        out = nl.ndarray((p, f), dtype=a.dtype, buffer=nl.shared_hbm)
        ix, iy = nl.mgrid[0:p, 0:f]
        t = nl.load(a)
        nl.store(
            out,
            value=nisa.affine_select(
                pred=pred(ix, iy, c), on_true_tile=t[ix, iy], on_false_value=false_value
            ),
        )
        return out

    ip, jf = np.arange(p)[:, None], np.arange(f)[None, :]
    want = np.where(ref(ip, jf, c), f32(x), np.float32(false_value))
    assert_exact(k(x), cast(want, dtype))


def test_affine_select_with_loop_variables_in_the_predicate():
    """The attention usage: pred=(q_tile*128 + ip >= k_tile*512 + if)."""
    x = rand(rng_of(1), (2, 128, 2, 512), F32)

    @nki.jit
    def k(a):
        out = nl.ndarray((2, 128, 2, 512), dtype=a.dtype, buffer=nl.shared_hbm)
        ip = nl.arange(128)[:, None]
        jf = nl.arange(512)[None, :]
        for q in nl.affine_range(2):
            for kk in nl.affine_range(2):
                t = nl.load(a[q, :, kk, :])
                r = nisa.affine_select(
                    pred=(q * 128 + ip >= kk * 512 + jf), on_true_tile=t, on_false_value=-1e4
                )
                nl.store(out[q, :, kk, :], value=r)
        return out

    q = np.arange(2)[:, None, None, None]
    kk = np.arange(2)[None, None, :, None]
    ip = np.arange(128)[None, :, None, None]
    jf = np.arange(512)[None, None, None, :]
    want = np.where(q * 128 + ip >= kk * 512 + jf, x, np.float32(-1e4))
    assert_exact(k(x), want)


# ---- range_select / select_reduce -------------------------------------------------------------------

CMP = {
    "equal": np.equal,
    "less": np.less,
    "less_equal": np.less_equal,
    "greater": np.greater,
    "greater_equal": np.greater_equal,
}


@FAST
@given(
    **TILE,
    c0=st.sampled_from(["greater_equal", "greater", "equal"]),
    c1=st.sampled_from(["less", "less_equal"]),
    start=st.integers(0, 1000),
    dtype=st.sampled_from([F32, BF16]),
)
def test_range_select_on_trn2(p, f, seed, c0, c1, start, dtype):
    rng = rng_of(seed)
    x = rand(rng, (p, f), dtype)
    b0 = (start + rng.integers(-5, f, size=(p, 1))).astype(np.float32)
    b1 = b0 + rng.integers(0, f, size=(p, 1)).astype(np.float32)

    @nki.jit(platform_target="trn2")
    def k(a, lo, hi):
        out = nl.ndarray((p, f), dtype=a.dtype, buffer=nl.shared_hbm)
        red = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.shared_hbm)
        rr = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
        r = nisa.range_select(
            on_true_tile=nl.load(a),
            comp_op0=getattr(np, c0),
            comp_op1=getattr(np, c1),
            bound0=nl.load(lo),
            bound1=nl.load(hi),
            reduce_cmd=nisa.reduce_cmd.reset_reduce,
            reduce_res=rr,
            reduce_op=np.max,
            range_start=start,
        )
        nl.store(out, value=r)
        nl.store(red, value=rr)
        return out, red

    out, red = k(x, b0, b1)
    idx = start + np.arange(f, dtype=np.float32)[None, :]
    keep = CMP[c0](idx, b0) & CMP[c1](idx, b1)
    want = np.where(keep, f32(x), FP32_MIN)
    assert_exact(out, cast(want, dtype))
    assert_exact(red, want.max(axis=1, keepdims=True))


def test_range_select_chained_reduction_across_calls():
    rng = rng_of(2)
    xs = [rand(rng, (32, 64), F32) for _ in range(3)]
    lo = np.full((32, 1), 10, np.float32)
    hi = np.full((32, 1), 40, np.float32)

    @nki.jit(platform_target="trn2")
    def k(a0, a1, a2, b0, b1):
        red = nl.ndarray((32, 1), dtype=nl.float32, buffer=nl.shared_hbm)
        rr = nl.ndarray((32, 1), dtype=nl.float32, buffer=nl.sbuf)
        lo_t, hi_t = nl.load(b0), nl.load(b1)
        for i, a in enumerate((a0, a1, a2)):
            cmd = nisa.reduce_cmd.reset_reduce if i == 0 else nisa.reduce_cmd.reduce
            nisa.range_select(
                on_true_tile=nl.load(a),
                comp_op0=np.greater_equal,
                comp_op1=np.less,
                bound0=lo_t,
                bound1=hi_t,
                reduce_cmd=cmd,
                reduce_res=rr if i == 2 else None,
                range_start=i * 64,
            )
        nl.store(red, value=rr)
        return red

    got = k(*xs, lo, hi)
    want = np.max(
        [
            np.where((np.arange(64) + 64 * i >= 10) & (np.arange(64) + 64 * i < 40), x, FP32_MIN).max(axis=1)
            for i, x in enumerate(xs)
        ],
        axis=0,
    )
    assert_exact(got[:, 0], want.astype(np.float32))


def test_range_select_is_trn2_only():
    @nki.jit
    def k(a):
        out = nl.ndarray((4, 8), dtype=a.dtype, buffer=nl.shared_hbm)
        b = nisa.memset((4, 1), 0.0, dtype=nl.float32)
        nl.store(
            out,
            value=nisa.range_select(
                on_true_tile=nl.load(a), comp_op0=np.greater_equal, comp_op1=np.less, bound0=b, bound1=b
            ),
        )
        return out

    with pytest.raises(UnsupportedError):
        k(np.ones((4, 8), np.float32))


@FAST
@given(
    **TILE,
    reverse=st.booleans(),
    vector_false=st.booleans(),
    dtype=st.sampled_from([F32, BF16]),
    pdtype=st.sampled_from([np.uint8, np.int8, np.uint16, np.int16]),
)
def test_select_reduce(p, f, seed, reverse, vector_false, dtype, pdtype):
    rng = rng_of(seed)
    x = rand(rng, (p, f), dtype)
    pred = (rng.random((p, f)) < 0.5).astype(pdtype)
    fv = rand(rng, (p, 1), F32)

    @nki.jit
    def k(a, pr, onf):
        out = nl.ndarray((p, f), dtype=a.dtype, buffer=nl.shared_hbm)
        red = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.shared_hbm)
        dst = nl.ndarray((p, f), dtype=a.dtype, buffer=nl.sbuf)
        rr = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.select_reduce(
            dst=dst,
            predicate=nl.load(pr),
            on_true=nl.load(a),
            on_false=nl.load(onf) if vector_false else -5.0,
            reduce_res=rr,
            reduce_cmd=nisa.reduce_cmd.reset_reduce,
            reduce_op=np.max,
            reverse_pred=reverse,
        )
        nl.store(out, value=dst)
        nl.store(red, value=rr)
        return out, red

    out, red = k(x, pred, fv)
    sel = (pred != 0) ^ reverse
    want = np.where(sel, f32(x), fv if vector_false else np.float32(-5.0))
    assert_exact(out, cast(want, dtype))
    assert_exact(red, want.max(axis=1, keepdims=True))


def test_select_reduce_mask_leaves_masked_off_elements():
    x = rand(rng_of(3), (16, 20), F32)

    @nki.jit
    def k(a):
        out = nl.ndarray((16, 20), dtype=nl.float32, buffer=nl.shared_hbm)
        i_p, i_f = nl.mgrid[0:16, 0:20]
        dst = nl.zeros((16, 20), dtype=nl.float32)
        pred = nisa.memset((16, 20), 1, dtype=nl.uint8)
        nisa.select_reduce(
            dst=dst, predicate=pred, on_true=nl.load(a), on_false=0.0, mask=(i_p < 8) & (i_f < 5)
        )
        nl.store(out, value=dst)
        return out

    want = np.zeros((16, 20), np.float32)
    want[:8, :5] = x[:8, :5]
    assert_exact(k(x), want)


# ---- nc_stream_shuffle -----------------------------------------------------------------------------


@FAST
@given(
    quadrants=st.integers(1, 4),
    f=st.integers(1, 100),
    seed=seeds,
    keep_frac=st.floats(0, 0.5),
    dtype=st.sampled_from([F32, BF16, np.int32]),
)
def test_nc_stream_shuffle(quadrants, f, seed, keep_frac, dtype):
    rng = rng_of(seed)
    p = 32 * quadrants
    src = rand(rng, (p, f), dtype, -100, 100)
    old = rand(rng, (p, f), dtype, -100, 100)
    mask = [int(v) for v in rng.integers(0, 32, size=32)]
    for i in range(32):
        if rng.random() < keep_frac:
            mask[i] = 255

    want = old.copy()
    for q in range(quadrants):
        for i, m in enumerate(mask):
            if m != 255:
                want[32 * q + i] = src[32 * q + m]
    assert_exact(stream_shuffle_kernel(src, old, mask), want)


def test_nc_stream_shuffle_in_place_rotation_and_broadcast():
    x = rand(rng_of(4), (32, 16), F32)

    @nki.jit
    def k(a):
        rot = nl.ndarray((32, 16), dtype=nl.float32, buffer=nl.shared_hbm)
        bc = nl.ndarray((32, 16), dtype=nl.float32, buffer=nl.shared_hbm)
        t = nl.load(a)
        nisa.nc_stream_shuffle(src=t, dst=t, shuffle_mask=[(i - 1) % 32 for i in range(32)])
        nl.store(rot, value=t)
        b = nl.ndarray((32, 16), dtype=nl.float32, buffer=nl.sbuf)
        one = nl.load(a[0:1, :])
        nisa.nc_stream_shuffle(src=one, dst=b, shuffle_mask=[0] * 32)
        nl.store(bc, value=b)
        return rot, bc

    rot, bc = k(x)
    assert_exact(rot, x[[(i - 1) % 32 for i in range(32)]])
    assert_exact(bc, np.broadcast_to(x[0:1], (32, 16)).copy())


def test_nc_stream_shuffle_mask_applies_to_dst():
    x = rand(rng_of(11), (32, 8), F32)
    y = rand(rng_of(12), (32, 8), F32)

    @nki.jit
    def k(a, b):
        out = nl.ndarray((32, 8), dtype=nl.float32, buffer=nl.shared_hbm)
        i_p, i_f = nl.mgrid[0:32, 0:8]
        dst = nl.load(b)
        nisa.nc_stream_shuffle(
            src=nl.load(a), dst=dst, shuffle_mask=list(range(31, -1, -1)), mask=(i_p < 16) & (i_f < 3)
        )
        nl.store(out, value=dst)
        return out

    want = y.copy()
    want[:16, :3] = x[::-1][:16, :3]
    assert_exact(k(x, y), want)


def test_range_select_mask_excludes_elements_from_the_reduction():
    x = np.tile(np.arange(10, dtype=np.float32), (4, 1))

    @nki.jit(platform_target="trn2")
    def k(a):
        red = nl.ndarray((4, 1), dtype=nl.float32, buffer=nl.shared_hbm)
        rr = nl.ndarray((4, 1), dtype=nl.float32, buffer=nl.sbuf)
        _, i_f = nl.mgrid[0:4, 0:10]
        lo = nisa.memset((4, 1), 0.0, dtype=nl.float32)
        hi = nisa.memset((4, 1), 100.0, dtype=nl.float32)
        nisa.range_select(
            on_true_tile=nl.load(a),
            comp_op0=np.greater_equal,
            comp_op1=np.less,
            bound0=lo,
            bound1=hi,
            reduce_cmd=nisa.reduce_cmd.reset_reduce,
            reduce_res=rr,
            mask=(i_f < 6),
        )
        nl.store(red, value=rr)
        return red

    assert_exact(k(x), np.full((4, 1), 5.0, np.float32))


# ---- sequence_bounds ---------------------------------------------------------------------------------


def _bounds(s):
    n = len(s)
    start = np.empty(n)
    end = np.empty(n)
    for i in range(n):
        start[i] = n if s[i] == 0 else (start[i - 1] if i > 0 and s[i] == s[i - 1] else i)
    for i in reversed(range(n)):
        end[i] = -1 if s[i] == 0 else (end[i + 1] if i < n - 1 and s[i] == s[i + 1] else i + 1)
    return np.stack([start, end])[None]


def test_sequence_bounds_doc_example():
    s = np.array([[0, 1, 1, 2, 2, 2, 0, 3, 3]], np.int32)
    got = apply(lambda t: nisa.sequence_bounds(segment_ids=t), s)
    assert_exact(got, np.array([[[9, 1, 1, 3, 3, 3, 9, 7, 7], [-1, 3, 3, 6, 6, 6, -1, 9, 9]]], np.int32))


@FAST
@given(n=st.integers(1, 300), seed=seeds, dtype=st.sampled_from([np.int32, np.float32]))
def test_sequence_bounds(n, seed, dtype):
    rng = rng_of(seed)
    runs = rng.integers(1, 6, size=n)
    ids = np.repeat(np.arange(n) % 4, runs)[:n]
    s = ids.astype(dtype).reshape(1, n)
    got = apply(lambda t: nisa.sequence_bounds(segment_ids=t), s)
    assert_exact(got, _bounds(ids).astype(dtype))


# ---- tensor_scalar_cumulative ------------------------------------------------------------------------


def test_tensor_scalar_cumulative():
    rng = rng_of(5)
    x = rand(rng, (16, 64), F32, -1, 1)

    @nki.jit
    def k(a):
        o = nl.ndarray((3, 16, 64), dtype=nl.float32, buffer=nl.shared_hbm)
        t = nl.load(a)
        d = nl.ndarray((16, 64), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar_cumulative(
            src=t, dst=d, op0=np.add, op1=np.add, imm0=0.5, reduce_cmd=nisa.reduce_cmd.reset_reduce
        )
        nl.store(o[0], value=d)
        nisa.tensor_scalar_cumulative(
            src=t, dst=d, op0=np.add, op1=np.add, imm0=0.0, reduce_cmd=nisa.reduce_cmd.reduce
        )
        nl.store(o[1], value=d)
        nisa.tensor_scalar_cumulative(
            src=t,
            dst=d,
            op0=np.multiply,
            op1=np.add,
            imm0=1.0,
            imm1=2.0,
            reduce_cmd=nisa.reduce_cmd.load_reduce,
        )
        nl.store(o[2], value=d)
        return o

    o = k(x)
    c0 = np.cumsum(x.astype(np.float64) + 0.5, axis=1)
    assert_close(o[0], c0, rtol=1e-5, atol=1e-5)
    assert_close(o[1], c0[:, -1:] + np.cumsum(x.astype(np.float64), axis=1), rtol=1e-5, atol=1e-5)
    assert_close(o[2], 2 + np.cumsum(x.astype(np.float64), axis=1), rtol=1e-5, atol=1e-5)


# ---- local_gather -------------------------------------------------------------------------------------


@FAST
@given(
    cores=st.integers(1, 8),
    f=st.integers(8, 128),
    n_idx=st.integers(1, 4),
    e=st.sampled_from([1, 2, 4]),
    seed=seeds,
)
def test_local_gather(cores, f, n_idx, e, seed):
    rng = rng_of(seed)
    p = 16 * cores
    src = rand(rng, (p, f), F32)
    index = rng.integers(0, f - e + 1, size=(p, n_idx)).astype(np.uint16)

    @nki.jit
    def k(s, ix):
        out = nl.ndarray((p, 16 * n_idx * e), dtype=s.dtype, buffer=nl.shared_hbm)
        nl.store(out, value=nisa.local_gather(nl.load(s), nl.load(ix), num_elem_per_idx=e))
        return out

    want = np.empty((p, 16 * n_idx * e), np.float32)
    for c in range(cores):
        ids = index[16 * c : 16 * c + 16].flatten(order="F").astype(np.int64)
        offs = (ids[:, None] + np.arange(e)[None, :]).reshape(-1)
        want[16 * c : 16 * c + 16] = src[16 * c : 16 * c + 16][:, offs]
    assert_exact(k(src, index), want)


# ---- dynamic copies ---------------------------------------------------------------------------------


@FAST
@given(p=partitions, f=st.integers(1, 100), n=st.integers(1, 16), seed=seeds)
def test_tensor_copy_dynamic_src_gathers_columns(p, f, n, seed):
    rng = rng_of(seed)
    x = rand(rng, (p, f), F32)
    offs = rng.integers(0, f, size=(1, n)).astype(np.int32)

    @nki.jit
    def k(a, o):
        out = nl.ndarray((p, n), dtype=a.dtype, buffer=nl.shared_hbm)
        src = nl.load(a)
        offs_sb = nl.load(o)
        res = nl.ndarray((p, n), dtype=a.dtype, buffer=nl.sbuf)
        ix, iy = nl.mgrid[0:p, 0:1]
        for idx in nl.affine_range(n):
            res[ix, idx] = nisa.tensor_copy_dynamic_src(src[ix, offs_sb[0, idx] + iy])
        nl.store(out, value=res)
        return out

    assert_exact(k(x, offs), x[:, offs[0]])


def test_tensor_copy_dynamic_dst_scatters_columns():
    rng = rng_of(6)
    x = rand(rng, (8, 5), F32)
    offs = np.array([[7, 0, 3, 9, 4]], np.int32)

    @nki.jit
    def k(a, o):
        out = nl.ndarray((8, 10), dtype=a.dtype, buffer=nl.shared_hbm)
        src = nl.load(a)
        offs_sb = nl.load(o)
        res = nl.zeros((8, 10), dtype=a.dtype)
        ix, iy = nl.mgrid[0:8, 0:1]
        for idx in nl.affine_range(5):
            nisa.tensor_copy_dynamic_dst(dst=res[ix, offs_sb[0, idx] + iy], src=src[ix, idx + iy])
        nl.store(out, value=res)
        return out

    want = np.zeros((8, 10), np.float32)
    want[:, offs[0]] = x
    assert_exact(k(x, offs), want)


# ---- nl.gather_flattened ----------------------------------------------------------------------------


def test_gather_flattened_doc_example():
    data = np.array([[[1, 2], [3, 4]], [[5, 6], [7, 8]]], np.float32)
    idx = np.array([[[0, 1], [1, 3]], [[3, 3], [1, 0]]], np.uint32)
    got = apply(nl.gather_flattened, data, idx)
    assert_exact(got, np.array([[[1, 2], [2, 4]], [[8, 8], [6, 5]]], np.float32))


@FAST
@given(p=partitions, f=st.integers(1, 100), m=st.integers(1, 100), seed=seeds, dtype=float_dtypes)
def test_gather_flattened(p, f, m, seed, dtype):
    rng = rng_of(seed)
    data = rand(rng, (p, f), dtype)
    idx = rng.integers(0, f, size=(p, m)).astype(np.uint32)
    got = apply(nl.gather_flattened, data, idx)
    assert_exact(got, np.take_along_axis(data, idx.astype(np.int64), axis=1))


# ---- random: dropout and rand (statistical) -----------------------------------------------------------


@pytest.mark.parametrize("api", ["nisa", "nl"])
@pytest.mark.parametrize("rate", [0.0, 0.1, 0.5, 0.9, 1.0])
def test_dropout_drops_the_given_fraction_without_rescaling(api, rate):
    x = rand(rng_of(7), (128, 512), F32, 1, 2)
    fn = (lambda t: nisa.dropout(t, rate)) if api == "nisa" else (lambda t: nl.dropout(t, rate))
    got = apply(fn, x)
    dropped = got == 0
    kept = ~dropped
    np.testing.assert_array_equal(got[kept], x[kept])  # no 1/(1-rate) scaling
    frac = dropped.mean()
    # 65536 Bernoulli trials: 6 standard deviations
    assert abs(frac - rate) <= 6 * np.sqrt(max(rate * (1 - rate), 1e-12) / x.size) + 1e-12


def test_dropout_with_per_partition_probabilities():
    x = rand(rng_of(8), (64, 512), F32, 1, 2)
    probs = np.where(np.arange(64) % 2 == 0, 1.0, 0.0).astype(np.float32).reshape(64, 1)
    got = apply(lambda t, pr: nisa.dropout(t, pr), x, probs)
    assert (got[0::2] == 0).all()
    assert_exact(got[1::2], x[1::2])


def test_dropout_respects_random_seed():
    x = rand(rng_of(9), (32, 256), F32, 1, 2)

    @nki.jit
    def k(a):
        out = nl.ndarray((3, 32, 256), dtype=nl.float32, buffer=nl.shared_hbm)
        t = nl.load(a)
        nl.random_seed(seed=1234)
        nl.store(out[0], value=nisa.dropout(t, 0.5))
        nl.store(out[1], value=nisa.dropout(t, 0.5))
        nl.random_seed(seed=1234)
        nl.store(out[2], value=nisa.dropout(t, 0.5))
        return out

    o = k(x)
    assert_exact(o[0], o[2])
    assert not np.array_equal(o[0], o[1])
    assert_exact(k(x), o)  # deterministic across runs


def test_rand_is_uniform_in_unit_interval():
    @nki.jit
    def k(a):
        out = nl.ndarray((2, 128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out[0], value=nl.rand((128, 512)))
        nl.store(out[1], value=nl.rand((128, 512), dtype=nl.float32))
        return out

    o = k(np.zeros((1, 1), np.float32))
    assert (o >= 0).all() and (o < 1).all()
    assert abs(o.mean() - 0.5) < 6 * np.sqrt(1 / 12 / o.size)
    assert abs(o.var() - 1 / 12) < 0.005
    assert not np.array_equal(o[0], o[1])


def test_trn2_target_via_devkit_simulate():
    x = rand(rng_of(10), (8, 16), F32)

    def k(a):
        out = nl.ndarray((8, 16), dtype=a.dtype, buffer=nl.shared_hbm)
        b0 = nisa.memset((8, 1), 2.0, dtype=nl.float32)
        b1 = nisa.memset((8, 1), 5.0, dtype=nl.float32)
        nl.store(
            out,
            value=nisa.range_select(
                on_true_tile=nl.load(a),
                comp_op0=np.greater_equal,
                comp_op1=np.less,
                bound0=b0,
                bound1=b1,
                on_false_value=0.0,
            ),
        )
        return out

    got = devkit.simulate(k, x, target="trn2")
    want = np.zeros_like(x)
    want[:, 2:5] = x[:, 2:5]
    assert_exact(got, want)
