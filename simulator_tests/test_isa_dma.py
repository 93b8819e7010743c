"""nisa.dma_copy (HBM/SBUF either side, casts, masks, indirect gather/scatter, dst_rmw_op=np.add,
oob_mode.skip, dge_mode) and nisa.dma_transpose against NumPy."""

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
    assert_exact,
    cast,
    partitions,
    rand,
    rng_of,
    seeds,
)
from hypothesis import given
from hypothesis import strategies as st
from neuronxcc.nki.isa.constants import dge_mode, oob_mode

import devkit
from devkit.errors import BoundsError, KernelArgumentError, UnsupportedError


@FAST
@given(
    p=partitions,
    f=st.integers(1, 300),
    src=st.sampled_from((F32, BF16, *INTS)),
    dst=st.sampled_from((F32, BF16, np.int32, np.int8)),
    seed=seeds,
    path=st.sampled_from(["hbm-hbm", "hbm-sbuf-hbm", "sbuf-sbuf"]),
)
def test_dma_copy_paths_and_casts(p, f, src, dst, seed, path):
    x = rand(rng_of(seed), (p, f), src, -100, 100)

    @nki.jit
    def k(a):
        out = nl.ndarray((p, f), dtype=dst, buffer=nl.shared_hbm)
        if path == "hbm-hbm":
            nisa.dma_copy(dst=out, src=a)
        elif path == "hbm-sbuf-hbm":
            t = nl.ndarray((p, f), dtype=dst, buffer=nl.sbuf)
            nisa.dma_copy(dst=t, src=a)
            nisa.dma_copy(dst=out, src=t)
        else:
            t = nl.load(a)
            u = nl.ndarray((p, f), dtype=dst, buffer=nl.sbuf)
            nisa.dma_copy(dst=u, src=t)
            nl.store(out, value=u)
        return out

    want = (
        x
        if np.dtype(dst) == src
        else cast(x.astype(np.float32) if src.kind == "f" or src == BF16 else x.astype(np.float64), dst)
    )
    assert_exact(k(x), want)


@FAST
@given(rows=st.integers(1, 300), cols=st.integers(1, 64), seed=seeds, data=st.data())
def test_dma_copy_slices_and_mask(rows, cols, seed, data):
    r0 = data.draw(st.integers(0, rows - 1))
    n = data.draw(st.integers(1, min(128, rows - r0)))
    mp = data.draw(st.integers(0, n))
    x = rand(rng_of(seed), (rows, cols), F32)

    @nki.jit
    def k(a):
        out = nl.ndarray((n, cols), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out, value=0.0)
        i_p, i_f = nl.mgrid[0:n, 0:cols]
        nisa.dma_copy(dst=out[i_p, i_f], src=a[r0 + i_p, i_f], mask=(i_p < mp))
        return out

    want = np.zeros((n, cols), np.float32)
    want[:mp] = x[r0 : r0 + mp]
    assert_exact(k(x), want)


@FAST
@given(rows=st.integers(1, 200), cols=st.integers(1, 64), n=st.integers(1, 128), seed=seeds)
def test_dma_copy_indirect_gather(rows, cols, n, seed):
    rng = rng_of(seed)
    x = rand(rng, (rows, cols), F32)
    idx = rng.integers(0, rows, size=(n, 1)).astype(np.int32)

    @nki.jit
    def k(a, ix):
        out = nl.ndarray((n, cols), dtype=nl.float32, buffer=nl.shared_hbm)
        ix_sb = nl.load(ix)
        t = nl.ndarray((n, cols), dtype=nl.float32, buffer=nl.sbuf)
        i_p, i_f = nl.mgrid[0:n, 0:cols]
        nisa.dma_copy(src=a[ix_sb[i_p, 0], i_f], dst=t[i_p, i_f])
        nl.store(out, value=t)
        return out

    assert_exact(k(x, idx), x[idx[:, 0]])


@FAST
@given(rows=st.integers(1, 200), cols=st.integers(1, 64), n=st.integers(1, 128), seed=seeds)
def test_dma_copy_scatter_add_with_duplicates(rows, cols, n, seed):
    """dst_rmw_op=np.add: out[idx[r]] += src[r], duplicate indices accumulate."""
    rng = rng_of(seed)
    base = rand(rng, (rows, cols), F32)
    v = rand(rng, (n, cols), F32)
    idx = rng.integers(0, rows, size=(n, 1)).astype(np.int32)

    @nki.jit
    def k(b, vals, ix):
        out = nl.ndarray((rows, cols), dtype=nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=b)
        ix_sb = nl.load(ix)
        iy = nl.arange(cols)[None, :]
        nisa.dma_copy(dst=out[ix_sb, iy], src=nl.load(vals), dst_rmw_op=np.add)
        return out

    want = base.copy()  # fp32 read-modify-write, duplicates applied in row order
    np.add.at(want, idx[:, 0], v)
    assert_exact(k(base, v, idx), want)


def _scatter_rows(rows: int, stride: int, **dma_kwargs):
    """Kernel: row i of ``vals`` goes to row ``stride * i`` of a zeroed ``rows``-row fp32 tensor, through one
    indirect ``nisa.dma_copy`` (iota row indices) with ``dma_kwargs``."""

    @nki.jit
    def k(vals):
        n, f = vals.shape
        out = nl.ndarray((rows, f), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out, value=0.0)
        idx = nisa.iota(stride * nl.arange(n)[:, None], dtype=nl.int32)
        iy = nl.arange(f)[None, :]
        nisa.dma_copy(dst=out[idx, iy], src=nl.load(vals), **dma_kwargs)
        return out

    return k


def test_dma_copy_scatter_add_doc_example():
    inp = rand(rng_of(1), (64, 32), F32)
    want = np.zeros((128, 32), np.float32)
    want[::2] += inp
    assert_exact(_scatter_rows(128, 2, dst_rmw_op=np.add)(inp), want)


@pytest.mark.parametrize("stride", [2, 3, 5])
def test_dma_copy_oob_skip_leaves_rows_untouched(stride):
    """Gather rows stride*arange(64) of a 128-row tensor with oob_mode.skip: out-of-range rows keep -1."""
    x = rand(rng_of(2), (128, 16), F32)

    @nki.jit
    def k(a):
        out = nl.ndarray((64, 16), dtype=nl.float32, buffer=nl.shared_hbm)
        t = nisa.memset((64, 16), -1.0, dtype=nl.float32)
        idx = nisa.iota(stride * nl.arange(64)[:, None], dtype=nl.int32)
        ix, iy = nl.mgrid[0:64, 0:16]
        nisa.dma_copy(src=a[idx[ix, 0], iy], dst=t[ix, iy], oob_mode=oob_mode.skip)
        nl.store(out, value=t)
        return out

    rows = stride * np.arange(64)
    ok = rows < 128
    want = np.full((64, 16), -1.0, np.float32)
    want[ok] = x[rows[ok]]
    assert_exact(k(x), want)


def test_dma_copy_oob_skip_on_scatter_destination():
    v = rand(rng_of(3), (8, 4), F32)
    want = np.zeros((10, 4), np.float32)
    want[[0, 3, 6, 9]] = v[:4]  # rows 12, 15, 18, 21 are past the 10-row destination: skipped
    assert_exact(_scatter_rows(10, 3, oob_mode=oob_mode.skip)(v), want)


def test_dma_copy_oob_error_mode_raises():
    @nki.jit
    def k(a):
        out = nl.ndarray((64, 16), dtype=nl.float32, buffer=nl.shared_hbm)
        t = nl.ndarray((64, 16), dtype=nl.float32, buffer=nl.sbuf)
        idx = nisa.iota(3 * nl.arange(64)[:, None], dtype=nl.int32)
        ix, iy = nl.mgrid[0:64, 0:16]
        nisa.dma_copy(src=a[idx[ix, 0], iy], dst=t[ix, iy])
        nl.store(out, value=t)
        return out

    with pytest.raises(BoundsError):
        k(np.ones((128, 16), np.float32))


def test_dma_copy_rmw_rules():
    @nki.jit
    def k(a, mode):
        out = nl.ndarray((4, 4), dtype=nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(
            dst=out,
            src=a,
            dst_rmw_op=np.add if mode == "skip" else np.multiply,
            oob_mode=oob_mode.skip if mode == "skip" else oob_mode.error,
        )
        return out

    for mode in ("skip", "mul"):
        with pytest.raises(KernelArgumentError):
            k(np.ones((4, 4), np.float32), mode)


def test_dma_copy_hwdge_needs_trn2():
    x = rand(rng_of(4), (128, 64), F32)

    def k(a):
        out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=a, dge_mode=dge_mode.hwdge)
        return out

    with pytest.raises(UnsupportedError):
        devkit.simulate(k, x, target="trn1")
    assert_exact(devkit.simulate(k, x, target="trn2"), x)


# ---- dma_transpose ------------------------------------------------------------------------------


@FAST
@given(
    a=st.integers(1, 128),
    b=st.integers(1, 128),
    seed=seeds,
    dtype=st.sampled_from([F32, BF16, np.float16]),
    from_sbuf=st.booleans(),
)
def test_dma_transpose_2d(a, b, seed, dtype, from_sbuf):
    x = rand(rng_of(seed), (a, b), dtype)

    @nki.jit
    def k(t):
        out = nl.ndarray((b, a), dtype=t.dtype, buffer=nl.shared_hbm)
        src = nl.load(t) if from_sbuf else t
        nl.store(out, value=nisa.dma_transpose(src))
        return out

    assert_exact(k(x), x.T.copy())


@pytest.mark.parametrize(("shape", "axes"), [((4, 8, 16), (2, 1, 0)), ((3, 4, 5, 6), (3, 1, 2, 0))])
@pytest.mark.parametrize("explicit", [False, True])
def test_dma_transpose_3d_and_4d(shape, axes, explicit):
    x = rand(rng_of(5), shape, F32)
    out_shape = tuple(shape[i] for i in axes)

    @nki.jit
    def k(t):
        out = nl.ndarray(out_shape, dtype=t.dtype, buffer=nl.shared_hbm)
        nl.store(out, value=nisa.dma_transpose(t, axes=axes) if explicit else nisa.dma_transpose(t))
        return out

    assert_exact(k(x), x.transpose(axes).copy())


def test_dma_transpose_rejects_other_permutations():
    @nki.jit
    def k(t):
        out = nl.ndarray((4, 5, 3), dtype=t.dtype, buffer=nl.shared_hbm)
        nl.store(out, value=nisa.dma_transpose(t, axes=(1, 2, 0)))
        return out

    with pytest.raises(KernelArgumentError):
        k(np.ones((3, 4, 5), np.float32))


def test_isa_enums_have_the_beta1_values():
    from neuronxcc.nki.isa.constants import engine

    assert (engine.unknown, engine.tensor, engine.scalar, engine.gpsimd, engine.vector, engine.sync) == (
        0,
        1,
        2,
        3,
        5,
        6,
    )
    assert nisa.tensor_engine == engine.tensor and nisa.vector_engine == engine.vector
    assert nisa.scalar_engine == engine.scalar and nisa.gpsimd_engine == engine.gpsimd
    assert nisa.unknown_engine == engine.unknown
    rc = nisa.reduce_cmd
    assert (rc.idle, rc.reset, rc.reduce, rc.reset_reduce) == (0, 1, 2, 3)
    assert (dge_mode.none, dge_mode.swdge, dge_mode.hwdge, dge_mode.unknown) == (0, 1, 2, 3)
    assert (oob_mode.error, oob_mode.skip) == (0, 1)
    assert (nisa.nc_version.gen2, nisa.nc_version.gen3) == (2, 3)
    assert nisa.fp32.min == float(np.finfo(np.float32).min)
