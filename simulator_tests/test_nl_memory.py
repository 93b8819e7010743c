"""Memory movement and tensor creation: nl.load/store (dtype casts, masks, scalars, PSUM values),
load_transpose2d, copy, broadcast_to, atomic_rmw, ndarray/zeros/ones/full/zeros_like/empty_like,
shared_constant, shared_identity_matrix, NaN poisoning of fresh memory, and the nki.tensor methods."""

from __future__ import annotations

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import numpy as np
import pytest
from _nki_support import (
    BF16,
    F16,
    F32,
    FAST,
    FP8,
    INTS,
    TILE,
    apply,
    assert_exact,
    cast,
    frees,
    partitions,
    rand,
    rng_of,
    seeds,
)
from hypothesis import given
from hypothesis import strategies as st

from devkit.errors import TileShapeError, UninitializedReadError

ALL = (F32, BF16, F16, FP8, *INTS)


@FAST
@given(**TILE, src=st.sampled_from(ALL), dst=st.sampled_from((None, F32, BF16, F16, np.int32)))
def test_load_store_roundtrip_with_dtype_cast(p, f, src, dst, seed):
    x = rand(rng_of(seed), (p, f), src, -100, 100)

    @nki.jit
    def k(a):
        t = nl.load(a, dtype=dst)
        out = nl.ndarray((p, f), dtype=t.dtype, buffer=nl.shared_hbm)
        nl.store(out, value=t)
        return out

    got = k(x)
    if dst is None:
        assert_exact(got, x)
    else:
        assert_exact(got, cast(x.astype(np.float32) if src.kind == "f" else x.astype(np.float64), dst))


@FAST
@given(**TILE, dst=st.sampled_from((BF16, F16, np.int16, np.uint8)))
def test_store_casts_into_the_destination_dtype(p, f, seed, dst):
    x = rand(rng_of(seed), (p, f), F32, -300, 300)

    @nki.jit
    def k(a):
        out = nl.ndarray((p, f), dtype=dst, buffer=nl.shared_hbm)
        nl.store(out, value=nl.load(a))
        return out

    assert_exact(k(x), cast(x, dst))


def test_load_of_1d_hbm_tensor_is_a_column_tile():
    x = np.arange(100, dtype=np.float32)

    @nki.jit
    def k(a):
        t = nl.load(a)
        assert tuple(t.shape) == (100, 1)
        out = nl.ndarray((100, 1), dtype=a.dtype, buffer=nl.shared_hbm)
        nl.store(out, value=t)
        return out

    assert_exact(k(x), x.reshape(100, 1))


@FAST
@given(
    p=partitions,
    f=frees,
    value=st.sampled_from([0, 100, -2.5, 1e-3]),
    dtype=st.sampled_from((F32, BF16, np.int32)),
)
def test_store_a_python_scalar_fills(p, f, value, dtype):
    @nki.jit
    def k(a):
        out = nl.ndarray((p, f), dtype=dtype, buffer=nl.shared_hbm)
        nl.store(out, value)
        return out

    assert_exact(k(np.zeros((1, 1), np.float32)), np.full((p, f), cast(np.float32(value), dtype)))


@pytest.mark.parametrize(
    ("dtype", "value"),
    [(np.int32, 2**24 + 1), (np.int32, -(2**31)), (np.uint32, 2**32 - 1), (np.int32, 2.5), (np.int8, 1000)],
)
def test_store_of_an_integer_scalar_is_exact(dtype, value):
    @nki.jit
    def k(a):
        out = nl.ndarray((2, 3), dtype=dtype, buffer=nl.shared_hbm)
        nl.store(out, value)
        return out

    assert_exact(k(np.zeros((1, 1), np.float32)), np.full((2, 3), cast(np.float64(value), dtype)))


def test_store_accepts_psum_values():
    x = rand(rng_of(1), (64, 100), F32)

    @nki.jit
    def k(a):
        out = nl.ndarray((64, 100), dtype=nl.float32, buffer=nl.shared_hbm)
        ps = nl.ndarray((64, 100), dtype=nl.float32, buffer=nl.psum)
        ps[...] = nl.load(a)
        nl.store(out, value=ps)
        return out

    assert_exact(k(x), x)


@FAST
@given(
    rows=st.integers(1, 128),
    cols=st.integers(1, 128),
    dtype=st.sampled_from((F32, BF16, np.int16)),
    seed=seeds,
)
def test_load_transpose2d(rows, cols, dtype, seed):
    x = rand(rng_of(seed), (rows, cols), dtype, -50, 50)

    @nki.jit
    def k(a):
        out = nl.ndarray((cols, rows), dtype=a.dtype, buffer=nl.shared_hbm)
        nl.store(out, value=nl.load_transpose2d(a))
        return out

    assert_exact(k(x), x.T.copy())


@FAST
@given(**TILE, dtype=st.sampled_from(ALL), to=st.sampled_from((None, F32, BF16, np.int8)))
def test_copy(p, f, dtype, to, seed):
    x = rand(rng_of(seed), (p, f), dtype, -200, 200)
    got = apply(lambda t: nl.copy(t, dtype=to), x)
    if to is None:
        assert_exact(got, x)
    else:
        assert_exact(got, cast(x.astype(np.float32) if dtype.kind == "f" else x.astype(np.float64), to))


def test_copy_of_int32_is_bit_exact():
    x = np.array([[2**31 - 1, -(2**31), 2**24 + 1]], np.int32)
    assert_exact(apply(nl.copy, x), x)
    u = np.array([[2**32 - 1, 2**24 + 3]], np.uint32)
    assert_exact(apply(nl.copy, u), u)


@FAST
@given(**TILE, src=st.sampled_from(["1F", "P1", "11"]))
def test_broadcast_to(p, f, seed, src):
    shape = {"1F": (1, f), "P1": (p, 1), "11": (1, 1)}[src]
    x = rand(rng_of(seed), shape, BF16)
    got = apply(lambda t: nl.broadcast_to(t, shape=(p, f)), x)
    assert_exact(got, np.broadcast_to(x, (p, f)).copy())
    got = apply(lambda t: nl.add(t.broadcast_to((p, f)), 0.0, dtype=nl.bfloat16), x)
    assert_exact(got, np.broadcast_to(x, (p, f)).copy())


def test_broadcast_to_rejects_incompatible_shapes():
    with pytest.raises(TileShapeError):
        apply(lambda t: nl.broadcast_to(t, shape=(8, 6)), np.ones((2, 6), np.float32))


@FAST
@given(rows=st.integers(1, 64), cols=st.integers(1, 64), n=st.integers(1, 128), seed=seeds)
def test_atomic_rmw_accumulates_duplicate_indices(rows, cols, n, seed):
    rng = rng_of(seed)
    base = rand(rng, (rows, cols), F32)
    vals = rand(rng, (n, cols), F32)
    idx = rng.integers(0, rows, size=(n, 1)).astype(np.int32)

    @nki.jit
    def k(b, v, ix):
        out = nl.ndarray((rows, cols), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out, value=nl.load(b))
        i_f = nl.arange(cols)[None, :]
        nl.atomic_rmw(out[nl.load(ix), i_f], value=nl.load(v), op=np.add)
        return out

    want = base.astype(np.float64)
    np.add.at(want, idx[:, 0], vals)
    np.testing.assert_allclose(k(base, vals, idx), want, rtol=1e-5, atol=1e-5)


# ---- creation ----------------------------------------------------------------------------------------


@FAST
@given(
    p=partitions,
    f=frees,
    dtype=st.sampled_from((F32, BF16, F16, np.int32, np.uint8, np.int8)),
    value=st.sampled_from([1.5, -2, 0.1, 7]),
)
def test_zeros_ones_full_and_likes(p, f, dtype, value):
    @nki.jit
    def k(a):
        o = nl.ndarray((4, p, f), dtype=dtype, buffer=nl.shared_hbm)
        nl.store(o[0], value=nl.zeros((p, f), dtype=dtype))
        nl.store(o[1], value=nl.ones((p, f), dtype=dtype))
        nl.store(o[2], value=nl.full((p, f), value, dtype=dtype))
        z = nl.zeros_like(nl.ones((p, f), dtype=dtype))
        assert z.dtype == np.dtype(dtype)
        nl.store(o[3], value=z)
        return o

    got = k(np.zeros((1, 1), np.float32))
    assert_exact(got[0], np.zeros((p, f), dtype))
    assert_exact(got[1], np.ones((p, f), dtype))
    assert_exact(got[2], np.full((p, f), cast(np.float32(value), dtype)))
    assert_exact(got[3], np.zeros((p, f), dtype))


@pytest.mark.parametrize(
    ("dtype", "value"),
    [(BF16, 0.1), (F16, 0.1), (FP8, 0.3), (np.int32, 1.5), (np.int32, 2.5), (np.uint8, -2), (np.int8, 300)],
)
def test_fill_values_are_stored_in_the_declared_dtype(dtype, value):
    """nl.full / nisa.memset / scalar assignment hold the fill value rounded into the tile's dtype, and
    engines compute with that stored value (not with the Python value)."""
    import neuronxcc.nki.isa as nisa

    @nki.jit
    def k(a):
        out = nl.ndarray((3, 2, 4), dtype=nl.float32, buffer=nl.shared_hbm)
        t1 = nl.full((2, 4), value, dtype=dtype)
        t2 = nisa.memset((2, 4), value, dtype=dtype)
        t3 = nl.ndarray((2, 4), dtype=dtype, buffer=nl.sbuf)
        t3[...] = value
        for i, t in enumerate((t1, t2, t3)):
            nl.store(out[i], value=nl.multiply(t, 1.0, dtype=nl.float32))
        return out

    want = cast(np.float32(value) if np.dtype(dtype) in (BF16, F16, FP8) else np.float64(value), dtype)
    np.testing.assert_array_equal(k(np.zeros((1, 1), np.float32)), np.full((3, 2, 4), np.float32(want)))


def test_fresh_ndarray_memory_is_poisoned_and_reading_it_is_an_error():
    @nki.jit
    def reads_fresh(a):
        out = nl.ndarray((4, 4), dtype=nl.float32, buffer=nl.shared_hbm)
        t = nl.ndarray((4, 4), dtype=nl.float32, buffer=nl.sbuf)
        nl.store(out, value=t)
        return out

    with pytest.raises(UninitializedReadError):
        reads_fresh(np.zeros((1, 1), np.float32))

    @nki.jit
    def empty_like_too(a):
        out = nl.ndarray((4, 4), dtype=nl.float32, buffer=nl.shared_hbm)
        t = nl.empty_like(nl.zeros((4, 4), dtype=nl.float32))
        nl.store(out, value=nl.exp(t))
        return out

    with pytest.raises(UninitializedReadError):
        empty_like_too(np.zeros((1, 1), np.float32))


@pytest.mark.parametrize("dtype", [F32, BF16, F16, np.int32, np.int16, np.uint8])
def test_unwritten_output_elements_are_poisoned(dtype):
    """Outputs are fresh HBM memory: elements the kernel never writes hold NaN (ints: a sentinel), not 0."""

    @nki.jit
    def k(a):
        out = nl.ndarray((4, 8), dtype=dtype, buffer=nl.shared_hbm)
        nl.store(out[0:2, :], value=nl.zeros((2, 8), dtype=dtype))
        return out

    got = k(np.zeros((1, 1), np.float32))
    assert_exact(got[0:2], np.zeros((2, 8), dtype))
    if np.dtype(dtype) in (F32, BF16, F16):
        assert np.isnan(got[2:].astype(np.float32)).all()
    else:
        assert (got[2:] != 0).all() and len(np.unique(got[2:])) == 1


def test_masked_off_elements_of_a_fresh_result_are_poisoned():
    x = rand(rng_of(2), (8, 8), F32)

    @nki.jit
    def k(a):
        out = nl.ndarray((8, 8), dtype=nl.float32, buffer=nl.shared_hbm)
        i_p, i_f = nl.mgrid[0:8, 0:8]
        t = nl.exp(nl.load(a), mask=(i_p < 4))
        nl.store(out[i_p, i_f], value=t, mask=(i_p < 4))
        return out

    got = k(x)
    np.testing.assert_allclose(got[:4], np.exp(x[:4]), rtol=1e-6)
    assert np.isnan(got[4:]).all()


@pytest.mark.parametrize("dtype", [F32, BF16, np.int8, FP8])
def test_shared_constant_and_identity(dtype):
    c = np.arange(-6, 6, dtype=np.float32).reshape(3, 4) * 1.3

    @nki.jit
    def k(a):
        o1 = nl.ndarray((3, 4), dtype=dtype, buffer=nl.shared_hbm)
        o2 = nl.ndarray((16, 16), dtype=dtype, buffer=nl.shared_hbm)
        nl.store(o1, value=nl.load(nl.shared_constant(c, dtype=dtype)))
        nl.store(o2, value=nl.load(nl.shared_identity_matrix(16, dtype=dtype)))
        return o1, o2

    o1, o2 = k(np.zeros((1, 1), np.float32))
    assert_exact(o1, cast(c, dtype))
    assert_exact(o2, np.identity(16).astype(np.float32).astype(dtype))


def test_hbm_scratch_tensor_roundtrip():
    x = rand(rng_of(3), (64, 32), F32)

    @nki.jit
    def k(a):
        out = nl.ndarray((64, 32), dtype=nl.float32, buffer=nl.shared_hbm)
        scratch = nl.ndarray((64, 32), dtype=nl.float32, buffer=nl.hbm)
        nl.store(scratch, value=nl.load(a))
        nl.store(out, value=nl.exp(nl.load(scratch)))
        return out

    np.testing.assert_allclose(k(x), np.exp(x), rtol=1e-6)


# ---- nki.tensor methods ------------------------------------------------------------------------------


def test_tensor_properties_and_methods():
    x = rand(rng_of(4), (8, 6), F32)

    @nki.jit
    def k(a):
        assert tuple(a.shape) == (8, 6) and a.ndim == 2 and a.itemsize == 4 and a.dtype == np.float32
        o1 = nl.ndarray((6, 8), dtype=nl.bfloat16, buffer=nl.shared_hbm)
        o2 = nl.ndarray((1, 48), dtype=nl.float32, buffer=nl.shared_hbm)
        o3 = nl.ndarray((8, 1, 6), dtype=nl.float32, buffer=nl.shared_hbm)
        t = nl.load(a)
        b = t.astype(nl.bfloat16)
        assert b.dtype == np.dtype(nl.bfloat16) and b.itemsize == 2
        nl.store(o1, value=nl.transpose(b))
        nl.store(o2, value=nl.load(a.reshape((1, 48))))
        e = t.expand_dims(1)
        assert tuple(e.shape) == (8, 1, 6)
        nl.store(o3, value=e)
        assert t.assert_shape((8, 6)) is t
        return o1, o2, o3

    o1, o2, o3 = k(x)
    assert_exact(o1, x.T.astype(BF16))
    assert_exact(o2, x.reshape(1, 48))
    assert_exact(o3, x.reshape(8, 1, 6))


def test_tensor_view_reinterprets_bits():
    x = np.array([[1.0, -2.0, 0.5]], np.float32)

    @nki.jit
    def k(a):
        out = nl.ndarray((1, 3), dtype=nl.int32, buffer=nl.shared_hbm)
        nl.store(out, value=nl.load(a.view(nl.int32)))
        return out

    assert_exact(k(x), x.view(np.int32))
    y = np.array([[0x3C, 0x40]], np.uint8)

    @nki.jit
    def k8(a):
        out = nl.ndarray((1, 2), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out, value=nl.load(a.view(nl.float8_e5m2), dtype=nl.float32))
        return out

    assert_exact(
        k8(y),
        y.view(np.dtype("float8_e5m2") if False else __import__("ml_dtypes").float8_e5m2).astype(np.float32),
    )


def test_assert_shape_mismatch_is_an_error():
    @nki.jit
    def k(a):
        nl.load(a).assert_shape((4, 4))
        return a

    with pytest.raises(TileShapeError):
        k(np.ones((4, 5), np.float32))


def test_nl_expand_dims_and_finfo():
    x = rand(rng_of(9), (8, 6), F32)

    @nki.jit
    def k(a):
        out = nl.ndarray((8, 6, 1), dtype=nl.float32, buffer=nl.shared_hbm)
        e = nl.expand_dims(nl.load(a), 2)
        assert tuple(e.shape) == (8, 6, 1)
        nl.store(out, value=e)
        return out

    assert_exact(k(x), x[:, :, None])
    assert float(nl.finfo(nl.bfloat16).max) == (2 - 2**-7) * 2.0**127
    assert nl.finfo(nl.int8).min == -128
