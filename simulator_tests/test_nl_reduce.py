"""nl reductions (sum prod max min mean var all) over trailing free axes with keepdims and masks, and the
fused helpers softmax and rms_norm, against NumPy."""

from __future__ import annotations

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import numpy as np
import pytest
from _nki_support import (
    F32,
    FAST,
    SLOW,
    TILE,
    apply,
    as_tile,
    assert_close,
    assert_exact,
    cast,
    f32,
    float_dtypes,
    partitions,
    rand,
    rng_of,
    seeds,
    slow,
)
from hypothesis import given
from hypothesis import strategies as st

from devkit.errors import IndexingError

REDUCE = {"sum": np.sum, "prod": np.prod, "max": np.max, "min": np.min, "mean": np.mean, "var": np.var}
EXACT = {"max", "min"}

# (tile shape builder, axis argument, numpy axes)
AXES = [
    (lambda p, f: (p, f), 1, (1,)),
    (lambda p, f: (p, f), [1], (1,)),
    (lambda p, f: (p, f), -1, (1,)),
    (lambda p, f: (p, 3, f), [1, 2], (1, 2)),
    (lambda p, f: (p, 3, f), 2, (2,)),
    (lambda p, f: (p, 2, 3, f), (2, 3), (2, 3)),
]


def _check_reduce(name, case, keepdims, p, f, dtype, seed):
    shape_of, axis, np_axes = AXES[case]
    shape = shape_of(p, f)
    lo, hi = (0.9, 1.1) if name == "prod" else (-4, 4)
    x = rand(rng_of(seed), shape, dtype, lo, hi)
    kw = {} if name == "var" else {"keepdims": keepdims}
    got = apply(lambda t: getattr(nl, name)(t, axis=axis, **kw), x)
    want = as_tile(REDUCE[name](f32(x), axis=np_axes, keepdims=keepdims and name != "var"))
    want = cast(want, dtype)
    if name in EXACT:
        assert_exact(got, want)
    else:
        assert got.dtype == dtype and got.shape == want.shape
        assert_close(got, want, dtype, rtol=max(1e-4, {F32: 1e-4}.get(dtype, 1.6e-2)), atol=1e-3 * f)


@pytest.mark.parametrize("name", sorted(REDUCE))
@pytest.mark.parametrize("case", range(len(AXES)))
@FAST
@given(p=partitions, f=st.integers(1, 200), dtype=float_dtypes, seed=seeds, keepdims=st.booleans())
def test_reductions_match_numpy(name, case, keepdims, p, f, dtype, seed):
    _check_reduce(name, case, keepdims, p, f, dtype, seed)


@slow
@pytest.mark.parametrize("name", sorted(REDUCE))
@SLOW
@given(**TILE, dtype=float_dtypes, keepdims=st.booleans(), case=st.integers(0, len(AXES) - 1))
def test_reductions_match_numpy_sweep(name, case, keepdims, p, f, dtype, seed):
    _check_reduce(name, case, keepdims, p, f, dtype, seed)


@FAST
@given(**TILE)
def test_all(p, f, seed):
    rng = rng_of(seed)
    x = (rng.random((p, f)) < 0.97).astype(np.float32)
    got = apply(lambda t: nl.all(t, axis=1), x)
    assert_exact(got, np.all(x != 0, axis=1, keepdims=True))


def test_mean_of_integers_is_float32():
    x = np.arange(12, dtype=np.int32).reshape(3, 4)
    got = apply(lambda t: nl.mean(t, axis=1), x)
    assert_exact(got, np.mean(x, axis=1, keepdims=True).astype(np.float32))


def test_reduction_dtype_argument():
    x = rand(rng_of(0), (16, 100), np.float32)
    got = apply(lambda t: nl.sum(t, axis=1, dtype=nl.bfloat16, keepdims=True), x)
    assert got.dtype == np.dtype(nl.bfloat16) and got.shape == (16, 1)
    assert_close(got, cast(x.sum(axis=1, keepdims=True), nl.bfloat16), nl.bfloat16)


@FAST
@given(**TILE, data=st.data())
def test_masked_reduction_only_reduces_the_masked_region(p, f, seed, data):
    mp = data.draw(st.integers(1, p))
    mf = data.draw(st.integers(1, f))
    x = rand(rng_of(seed), (p, f), np.float32)

    @nki.jit
    def k(a):
        out = nl.ndarray((p, 2), dtype=nl.float32, buffer=nl.shared_hbm)
        i_p = nl.arange(p)[:, None]
        i_f = nl.arange(f)[None, :]
        t = nl.load(a)
        res = nl.zeros((p, 2), dtype=nl.float32)
        res[i_p, 0] = nl.max(t, axis=1, keepdims=True, mask=(i_p < mp) & (i_f < mf))
        res[i_p, 1] = nl.sum(t, axis=1, keepdims=True, mask=(i_p < mp) & (i_f < mf))
        nl.store(out, value=res)
        return out

    got = k(x)[:mp]
    assert_exact(got[:, 0], x[:mp, :mf].max(axis=1))
    assert_close(got[:, 1], x[:mp, :mf].sum(axis=1), atol=1e-4 * f)


@pytest.mark.parametrize("axis", [0, [0, 1], [1, 0]])
def test_reducing_the_partition_axis_is_an_error(axis):
    x = np.ones((4, 8), np.float32)
    with pytest.raises(IndexingError):
        apply(lambda t: nl.sum(t, axis=axis), x)


@pytest.mark.parametrize(
    ("shape", "axes"),
    [((4, 3, 8), 1), ((4, 3, 8), [1]), ((6, 2, 3, 4, 5), [2, 4]), ((6, 2, 3, 4, 5), (1, 3))],
)
@pytest.mark.parametrize("keepdims", [False, True])
def test_non_trailing_free_axes_reduce_like_numpy(shape, axes, keepdims):
    """The average-pool example of the NKI docs reduces axes [2, 4] of a 5-D access pattern."""
    x = rand(rng_of(9), shape, np.float32)
    got = apply(lambda t: nl.max(t, axis=axes, keepdims=keepdims), x)
    assert_exact(got, as_tile(np.max(x, axis=tuple(np.atleast_1d(axes)), keepdims=keepdims)))


# ---- softmax / rms_norm ----------------------------------------------------------------------------


def _softmax(x, axis):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


@FAST
@given(**TILE, dtype=float_dtypes)
def test_softmax(p, f, dtype, seed):
    x = rand(rng_of(seed), (p, f), dtype, -8, 8)
    got = apply(lambda t: nl.softmax(t, axis=1), x)
    assert got.dtype == dtype
    assert_close(got, cast(_softmax(x.astype(np.float64), 1), dtype), dtype, atol=1e-6)
    np.testing.assert_allclose(got.astype(np.float64).sum(axis=1), 1.0, rtol=2e-2 if dtype != F32 else 1e-5)


def test_softmax_is_stable_for_large_inputs_and_takes_dtype():
    x = np.array([[1000.0, 1000.0, -1000.0, 999.0]], np.float32)
    got = apply(lambda t: nl.softmax(t, axis=1, dtype=nl.float32), x)
    assert_close(got, _softmax(x.astype(np.float64), 1))
    got = apply(lambda t: nl.softmax(t, axis=[1], compute_dtype=nl.bfloat16), x)
    assert got.dtype == np.dtype(nl.bfloat16)


@FAST
@given(**TILE, dtype=float_dtypes)
def test_rms_norm(p, f, dtype, seed):
    rng = rng_of(seed)
    x = rand(rng, (p, f), dtype)
    w = rand(rng, (1, f), dtype, 0.5, 2)
    got = apply(lambda t, ww: nl.rms_norm(t, ww, axis=1, n=f, epsilon=1e-5), x, w)
    x64 = x.astype(np.float64)
    want = x64 / np.sqrt((x64**2).sum(axis=1, keepdims=True) / f + 1e-5) * w.astype(np.float64)
    assert got.dtype == dtype
    assert_close(got, cast(want, dtype), dtype, rtol=3e-2 if dtype != F32 else 1e-4, atol=1e-4)


def test_reductions_of_block_tile_need_indexing():
    """A reduction on one logical tile of a block-dimension tensor."""
    x = rand(rng_of(5), (3, 64, 32), np.float32)

    @nki.jit
    def k(a):
        out = nl.ndarray((3, 64), dtype=nl.float32, buffer=nl.shared_hbm)
        buf = nl.ndarray((3, nl.par_dim(64), 32), dtype=nl.float32, buffer=nl.sbuf)
        for b in nl.affine_range(3):
            buf[b] = nl.load(a[b])
            nl.store(out[b], value=nl.max(buf[b], axis=1))
        return out

    assert_exact(k(x), x.max(axis=2))


@pytest.mark.parametrize("name", ["mean", "var", "prod", "min", "all"])
@FAST
@given(p=partitions, f=st.integers(2, 200), seed=seeds, data=st.data())
def test_masked_statistics_only_see_the_masked_elements(name, p, f, seed, data):
    mf = data.draw(st.integers(1, f))
    rng = rng_of(seed)
    x = (
        rand(rng, (p, f), np.float32, 0.9, 1.1)
        if name != "all"
        else (rng.random((p, f)) < 0.9).astype(np.float32)
    )

    @nki.jit
    def k(a):
        out = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.shared_hbm)
        i_f = nl.arange(f)[None, :]
        r = getattr(nl, name)(nl.load(a), axis=1, mask=(i_f < mf), dtype=nl.float32)
        nl.store(out, value=r)
        return out

    ref = {"mean": np.mean, "var": np.var, "prod": np.prod, "min": np.min, "all": np.all}[name]
    want = ref(x[:, :mf].astype(np.float64), axis=1, keepdims=True).astype(np.float32)
    assert_close(k(x), want, rtol=1e-5, atol=1e-6)


@FAST
@given(p=partitions, f=st.integers(1, 130), seed=seeds, square=st.booleans())
def test_reduction_result_broadcasts_along_the_free_axis_on_assignment(p, f, seed, square):
    """t[...] = nl.sum(x, axis=1): the (P,) result is one value per partition (also when P == F)."""
    f = p if square else f
    x = rand(rng_of(seed), (p, f), np.float32)

    @nki.jit
    def k(a):
        out = nl.ndarray((p, f), dtype=nl.float32, buffer=nl.shared_hbm)
        t = nl.ndarray((p, f), dtype=nl.float32, buffer=nl.sbuf)
        t[...] = nl.max(nl.load(a), axis=1)
        nl.store(out, value=t)
        return out

    assert_exact(k(x), np.broadcast_to(x.max(axis=1, keepdims=True), (p, f)).copy())
