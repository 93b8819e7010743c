"""Indexing: slices, nl.ds, nl.arange / nl.mgrid with affine expressions, ints with aranges, block
dimensions (nl.par_dim), integer index on the partition dim, masks legalising out-of-bounds accesses,
indirect (gather/scatter) DMA, assignment broadcasting, and the indexing errors NKI defines."""

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
    assert_close,
    assert_exact,
    rand,
    rng_of,
    seeds,
)
from hypothesis import assume, given
from hypothesis import strategies as st

from devkit.errors import BoundsError, IndexingError, TileShapeError

dims = st.integers(1, 300)


@FAST
@given(rows=st.integers(1, 300), cols=dims, seed=seeds, data=st.data())
def test_slices_and_ds(rows, cols, seed, data):
    r0 = data.draw(st.integers(0, rows - 1))
    r1 = data.draw(st.integers(r0 + 1, min(rows, r0 + 128)))
    c0 = data.draw(st.integers(0, cols - 1))
    c1 = data.draw(st.integers(c0 + 1, cols))
    step = data.draw(st.integers(1, 4))
    x = rand(rng_of(seed), (rows, cols), F32)

    @nki.jit
    def k(a):
        out1 = nl.ndarray((r1 - r0, c1 - c0), dtype=a.dtype, buffer=nl.shared_hbm)
        out2 = nl.ndarray((r1 - r0, len(range(c0, c1, step))), dtype=a.dtype, buffer=nl.shared_hbm)
        t = nl.load(a[r0:r1, nl.ds(c0, c1 - c0)])
        nl.store(out1[:, :], value=t)
        nl.store(out2, value=nl.load(a[r0:r1, c0:c1:step]))
        return out1, out2

    o1, o2 = k(x)
    assert_exact(o1, x[r0:r1, c0:c1])
    assert_exact(o2, x[r0:r1, c0:c1:step])


@FAST
@given(p=st.integers(1, 128), f=st.integers(1, 100), seed=seeds, data=st.data())
def test_affine_arange_expressions(p, f, seed, data):
    off_p = data.draw(st.integers(0, 40))
    off_f = data.draw(st.integers(0, 30))
    stride = data.draw(st.integers(1, 3))
    x = rand(rng_of(seed), (p + off_p, off_f + stride * f), F32)

    @nki.jit
    def k(a):
        out = nl.ndarray((p, f), dtype=a.dtype, buffer=nl.shared_hbm)
        i_p = nl.arange(p)[:, None]
        i_f = nl.arange(f)[None, :]
        t = nl.load(a[off_p + i_p, off_f + stride * i_f])
        nl.store(out[i_p, i_f], value=t)
        return out

    assert_exact(k(x), x[off_p : off_p + p, off_f : off_f + stride * f : stride])


@FAST
@given(p=st.integers(1, 128), f=st.integers(1, 64), seed=seeds)
def test_mgrid_unpacking_and_attributes(p, f, seed):
    x = rand(rng_of(seed), (3, p, 2 * f), F32)

    @nki.jit
    def k(a):
        o1 = nl.ndarray((p, f), dtype=a.dtype, buffer=nl.shared_hbm)
        o2 = nl.ndarray((p, f), dtype=a.dtype, buffer=nl.shared_hbm)
        o3 = nl.ndarray((p, 2, f), dtype=a.dtype, buffer=nl.shared_hbm)
        i_p, i_f = nl.mgrid[0:p, 0:f]
        nl.store(o1[i_p, i_f], value=nl.load(a[1, i_p, i_f]))
        g = nl.mgrid[0:p, 0:f]
        nl.store(o2[g.p, g.x], value=nl.load(a[2, g.p, f + g.x]))
        h = nl.mgrid[0:p, 0:2, 0:f]
        nl.store(o3[h.p, h.x, h.y], value=nl.load(a[0, h.p, h.x * f + h.y]))
        return o1, o2, o3

    o1, o2, o3 = k(x)
    assert_exact(o1, x[1, :, :f])
    assert_exact(o2, x[2, :, f:])
    assert_exact(o3, x[0].reshape(p, 2, f))


def test_mgrid_with_step():
    x = rand(rng_of(1), (64, 64), F32)

    @nki.jit
    def k(a):
        out = nl.ndarray((32, 16), dtype=a.dtype, buffer=nl.shared_hbm)
        i_p, i_f = nl.mgrid[0:32, 0:64:4]
        t = nl.load(a[i_p, i_f])
        nl.store(out, value=t)
        return out

    assert_exact(k(x), x[:32, ::4])


def test_free_axis_permutation_through_index_manipulation():
    """Swapping the index expressions of the free axes permutes them (as in the NKI docs)."""
    x = rand(rng_of(2), (16, 4, 6), F32)

    @nki.jit
    def k(a):
        out = nl.ndarray((16, 6, 4), dtype=a.dtype, buffer=nl.shared_hbm)
        i_p = nl.arange(16)[:, None, None]
        i_x = nl.arange(6)[None, :, None]
        i_y = nl.arange(4)[None, None, :]
        t = nl.load(a)
        nl.store(out[i_p, i_x, i_y], value=nl.copy(t[i_p, i_y, i_x]))
        return out

    assert_exact(k(x), x.transpose(0, 2, 1).copy())


def test_hbm_transposed_load_through_advanced_indexing():
    x = rand(rng_of(3), (40, 70), F32)

    @nki.jit
    def k(a):
        out = nl.ndarray((70, 40), dtype=a.dtype, buffer=nl.shared_hbm)
        i_p = nl.arange(70)[:, None]
        i_f = nl.arange(40)[None, :]
        nl.store(out, value=nl.load(a[i_f, i_p]))
        return out

    assert_exact(k(x), x.T.copy())


def test_loop_variables_in_affine_index_expressions():
    x = rand(rng_of(4), (12, 32, 8), F32)

    @nki.jit
    def k(a):
        out = nl.ndarray((12, 32, 8), dtype=a.dtype, buffer=nl.shared_hbm)
        i_p, i_f = nl.mgrid[0:32, 0:8]
        for i in nl.affine_range(3):
            for j in nl.affine_range(4):
                t = nl.load(a[i * 4 + j, i_p, i_f])
                nl.store(out[11 - (i * 4 + j), i_p, i_f], value=t)
        return out

    assert_exact(k(x), x[::-1].copy())


# ---- block dimensions -------------------------------------------------------------------------------


@FAST
@given(
    b=st.integers(1, 5),
    p=st.integers(1, 128),
    f=st.integers(1, 100),
    seed=seeds,
    dtype=st.sampled_from([F32, BF16]),
)
def test_block_dimension_tensors(b, p, f, seed, dtype):
    x = rand(rng_of(seed), (b, p, f), dtype)

    @nki.jit
    def k(a):
        out = nl.ndarray((b, nl.par_dim(p), f), dtype=a.dtype, buffer=nl.shared_hbm)
        buf = nl.ndarray((b, nl.par_dim(p), f), dtype=a.dtype, buffer=nl.sbuf)
        res = nl.ndarray((b, nl.par_dim(p), f), dtype=nl.float32, buffer=nl.sbuf)
        i_p, i_f = nl.mgrid[0:p, 0:f]
        for i in nl.affine_range(b):
            buf[i] = nl.load(a[i])
        for i in nl.affine_range(b):
            res[i, :, :] = nl.multiply(buf[i, i_p, i_f], float(i + 1))
        for i in nl.affine_range(b):
            nl.store(out[i], value=nl.copy(res[i], dtype=a.dtype))
        return out

    want = (x.astype(np.float32) * np.arange(1, b + 1, dtype=np.float32)[:, None, None]).astype(dtype)
    assert_exact(k(x), want)


def test_two_block_dimensions():
    x = rand(rng_of(5), (2, 3, 16, 8), F32)

    @nki.jit
    def k(a):
        out = nl.ndarray((2, 3, 16, 8), dtype=a.dtype, buffer=nl.shared_hbm)
        buf = nl.ndarray((2, 3, nl.par_dim(16), 8), dtype=a.dtype, buffer=nl.sbuf)
        for g in nl.affine_range(2):
            for j in nl.affine_range(3):
                buf[g, j] = nl.load(a[g, j])
        for g in nl.affine_range(2):
            for j in nl.affine_range(3):
                nl.store(out[g, j], value=nl.negative(buf[g, j]))
        return out

    assert_exact(k(x), -x)


def test_block_tensor_must_be_indexed_before_compute():
    x = np.ones((2, 4, 8), np.float32)

    @nki.jit
    def k(a):
        out = nl.ndarray((4, 8), dtype=a.dtype, buffer=nl.shared_hbm)
        buf = nl.zeros((2, nl.par_dim(4), 8), dtype=nl.float32)
        nl.store(out, value=nl.exp(buf))
        return out

    with pytest.raises(IndexingError):
        k(x)


# ---- integer index on the partition dim ---------------------------------------------------------------


def test_integer_index_on_partition_dim_keeps_a_size_one_partition():
    x = rand(rng_of(6), (8, 16), F32)

    @nki.jit
    def k(a):
        out = nl.ndarray((1, 16), dtype=a.dtype, buffer=nl.shared_hbm)
        col = nl.ndarray((8, 1), dtype=a.dtype, buffer=nl.shared_hbm)
        t = nl.load(a)
        row = t[3, :]
        assert tuple(row.shape) == (1, 16)
        nl.store(out, value=row)
        nl.store(col, value=t[:, 5])
        return out, col

    row, col = k(x)
    assert_exact(row, x[3:4])
    assert_exact(col, x[:, 5:6])


def test_hbm_integer_index_drops_the_dimension():
    x = rand(rng_of(7), (4, 8, 16), F32)

    @nki.jit
    def k(a):
        out = nl.ndarray((8, 16), dtype=a.dtype, buffer=nl.shared_hbm)
        assert tuple(a[2].shape) == (8, 16)
        assert tuple(a[1, :, 0:4].shape) == (8, 4)
        nl.store(out, value=nl.load(a[2]))
        return out

    assert_exact(k(x), x[2])


# ---- masks and bounds ----------------------------------------------------------------------------------


@FAST
@given(rows=st.integers(1, 400), cols=st.integers(1, 200), seed=seeds)
def test_mask_legalises_out_of_bounds_tiles(rows, cols, seed):
    """The padding idiom: loop over 128-row tiles, mask off the rows past the end."""
    x = rand(rng_of(seed), (rows, cols), F32)
    n_tiles = (rows + 127) // 128

    @nki.jit
    def k(a):
        out = nl.ndarray((rows, cols), dtype=a.dtype, buffer=nl.shared_hbm)
        i_f = nl.arange(cols)[None, :]
        for t in nl.affine_range(n_tiles):
            i_p = t * 128 + nl.arange(128)[:, None]
            tile = nl.load(a[i_p, i_f], mask=(i_p < rows))
            res = nl.multiply(tile, 2.0, mask=(i_p < rows))
            nl.store(out[i_p, i_f], value=res, mask=(i_p < rows))
        return out

    assert_exact(k(x), x * np.float32(2))


def test_static_out_of_bounds_without_mask_is_an_error():
    x = np.ones((100, 8), np.float32)

    @nki.jit
    def k(a):
        out = nl.ndarray((100, 8), dtype=a.dtype, buffer=nl.shared_hbm)
        i_p = nl.arange(128)[:, None]
        i_f = nl.arange(8)[None, :]
        nl.store(out[i_p, i_f], value=nl.load(a[i_p, i_f]))
        return out

    with pytest.raises(BoundsError):
        k(x)


@pytest.mark.parametrize("index", ["slice", "int"])
def test_basic_index_out_of_bounds_is_an_error(index):
    x = np.ones((10, 8), np.float32)

    @nki.jit
    def k(a):
        out = nl.ndarray((10, 8), dtype=a.dtype, buffer=nl.shared_hbm)
        if index == "slice":
            nl.store(out, value=nl.load(a[0:10, 0:9]))
        else:
            nl.store(out, value=nl.load(a[10]))
        return out

    with pytest.raises(BoundsError):
        k(x)


@nki.jit
def one_dimensional_arange(a):
    out = nl.ndarray((64, 1), dtype=a.dtype, buffer=nl.shared_hbm)
    t = nl.load(a)
    i = nl.arange(64)
    nl.store(out, value=nl.exp(t[i, 0]))
    return out


@nki.jit
def slices_mixed_with_arange(a):
    out = nl.ndarray((4, 8), dtype=a.dtype, buffer=nl.shared_hbm)
    i = nl.arange(4)[:, None]
    nl.store(out, value=nl.load(a[i, :]))
    return out


@nki.jit
def python_and_on_masks(a):
    out = nl.ndarray((4, 8), dtype=a.dtype, buffer=nl.shared_hbm)
    i_p, i_f = nl.mgrid[0:4, 0:8]
    nl.store(out, value=nl.exp(nl.load(a), mask=(i_p < 2 and i_f < 3)))
    return out


@nki.jit
def index_expression_as_data(a):
    out = nl.ndarray((4, 8), dtype=a.dtype, buffer=nl.shared_hbm)
    _, i_f = nl.mgrid[0:4, 0:8]
    t = nl.load(a)
    t[...] = i_f
    nl.store(out, value=t)
    return out


#: kernel, rows of its (rows, 8) input, the rule of the IndexingError it raises
INDEXING_ERRORS = [
    (one_dimensional_arange, 64, "1d-arange"),
    (slices_mixed_with_arange, 4, "mixed-indexing"),
    (python_and_on_masks, 4, "mask-python-logic"),
    (index_expression_as_data, 4, "index-as-data"),
]


@pytest.mark.parametrize(("kernel", "rows", "rule"), INDEXING_ERRORS, ids=[c[2] for c in INDEXING_ERRORS])
def test_indexing_rules(kernel, rows, rule):
    """A 1-D arange, slices mixed with aranges, Python ``and`` on masks and an index expression used as
    data are each an IndexingError naming its rule."""
    with pytest.raises(IndexingError) as e:
        kernel(np.ones((rows, 8), np.float32))
    assert e.value.rule == rule


# ---- indirect DMA -----------------------------------------------------------------------------------------


@FAST
@given(
    rows=st.integers(1, 300),
    cols=st.integers(1, 200),
    n=st.integers(1, 128),
    seed=seeds,
    form=st.sampled_from(["element", "tile"]),
)
def test_indirect_gather_load(rows, cols, n, seed, form):
    rng = rng_of(seed)
    data = rand(rng, (rows, cols), F32)
    idx = rng.integers(0, rows, size=(n, 1)).astype(np.int32)

    @nki.jit
    def k(d, ix):
        out = nl.ndarray((n, cols), dtype=d.dtype, buffer=nl.shared_hbm)
        i_p = nl.arange(n)[:, None]
        i_f = nl.arange(cols)[None, :]
        idx_tile = nl.load(ix)
        if form == "element":
            t = nl.load(d[idx_tile[i_p, 0], i_f])
        else:
            t = nl.load(d[idx_tile, i_f])
        nl.store(out[i_p, i_f], value=t)
        return out

    assert_exact(k(data, idx), data[idx[:, 0]])


@FAST
@given(rows=st.integers(1, 300), cols=st.integers(1, 100), seed=seeds, data=st.data())
def test_indirect_scatter_store(rows, cols, seed, data):
    n = data.draw(st.integers(1, min(rows, 128)))
    rng = rng_of(seed)
    perm = rng.permutation(rows)[:n].astype(np.int32).reshape(n, 1)
    vals = rand(rng, (n, cols), F32)
    base = rand(rng, (rows, cols), F32)

    @nki.jit
    def k(b, ix, v):
        out = nl.ndarray((rows, cols), dtype=b.dtype, buffer=nl.shared_hbm)
        i_f = nl.arange(cols)[None, :]
        for r in nl.affine_range((rows + 127) // 128):
            i_r = r * 128 + nl.arange(128)[:, None]
            nl.store(out[i_r, i_f], value=nl.load(b[i_r, i_f], mask=i_r < rows), mask=i_r < rows)
        idx_tile = nl.load(ix)
        nl.store(out[idx_tile, i_f], value=nl.load(v))
        return out

    want = base.copy()
    want[perm[:, 0]] = vals
    assert_exact(k(base, perm, vals), want)


def test_gather_with_iota_built_indices():
    data = rand(rng_of(8), (128, 40), F32)

    @nki.jit
    def k(d):
        out = nl.ndarray((64, 40), dtype=d.dtype, buffer=nl.shared_hbm)
        idx_tile = nisa.iota(2 * nl.arange(64)[:, None], dtype=np.int32)
        i_f = nl.arange(40)[None, :]
        nl.store(out, value=nl.load(d[idx_tile, i_f]))
        return out

    assert_exact(k(data), data[::2])


@nki.jit
def gather_rows(d, ix):
    """Rows ``ix`` [2, 1] of ``d`` [R, 4]: an indirect load indexed by a loaded tile."""
    out = nl.ndarray((2, 4), dtype=d.dtype, buffer=nl.shared_hbm)
    i_f = nl.arange(4)[None, :]
    nl.store(out, value=nl.load(d[nl.load(ix), i_f]))
    return out


def test_indirect_gather_out_of_bounds_is_an_error():
    with pytest.raises(BoundsError):
        gather_rows(np.ones((10, 4), np.float32), np.array([[1], [10]], np.int32))


def test_indirect_indices_must_be_integer_sbuf_tiles():
    with pytest.raises(IndexingError):
        gather_rows(np.ones((10, 4), np.float32), np.array([[1.0], [2.0]], np.float32))


# ---- assignment --------------------------------------------------------------------------------------


@FAST
@given(
    p=st.integers(1, 128),
    f=st.integers(1, 200),
    seed=seeds,
    src=st.sampled_from(["P1", "1F", "11", "scalar"]),
)
def test_assignment_broadcasts_the_source(p, f, seed, src):
    rng = rng_of(seed)
    shape = {"P1": (p, 1), "1F": (1, f), "11": (1, 1), "scalar": (1, 1)}[src]
    y = rand(rng, shape, F32)

    @nki.jit
    def k(v):
        out = nl.ndarray((p, f), dtype=nl.float32, buffer=nl.shared_hbm)
        t = nl.ndarray((p, f), dtype=nl.float32, buffer=nl.sbuf)
        if src == "scalar":
            t[...] = 2.5
        else:
            t[...] = nl.load(v)
        nl.store(out, value=t)
        return out

    want = np.full((p, f), 2.5, np.float32) if src == "scalar" else np.broadcast_to(y, (p, f)).copy()
    assert_exact(k(y), want)


def test_assignment_destination_smaller_than_source_is_an_error():
    x = np.ones((128, 512), np.float32)

    @nki.jit
    def k(a):
        out = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.shared_hbm)
        y = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
        y[...] = nl.load(a)
        nl.store(out, value=y)
        return out

    with pytest.raises(TileShapeError):
        k(x)


def test_assignment_casts_to_the_destination_dtype():
    x = np.array([[1.0 + 2**-9, 2.7, -3.5, 300.0]], np.float32)

    @nki.jit
    def k(a):
        o1 = nl.ndarray((1, 4), dtype=nl.bfloat16, buffer=nl.shared_hbm)
        o2 = nl.ndarray((1, 4), dtype=nl.int8, buffer=nl.shared_hbm)
        t = nl.load(a)
        b = nl.ndarray((1, 4), dtype=nl.bfloat16, buffer=nl.sbuf)
        b[...] = t
        i = nl.ndarray((1, 4), dtype=nl.int8, buffer=nl.sbuf)
        i[...] = t
        nl.store(o1, value=b)
        nl.store(o2, value=i)
        return o1, o2

    o1, o2 = k(x)
    assert_exact(o1, x.astype(BF16))
    assert_exact(o2, np.array([[1, 3, -4, 127]], np.int8))  # round to nearest even, saturate


@FAST
@given(p=st.integers(2, 128), f=st.integers(2, 64), seed=seeds, data=st.data())
def test_strided_and_offset_sbuf_views_as_operands_and_destinations(p, f, seed, data):
    a0 = data.draw(st.integers(0, p - 1))
    a1 = data.draw(st.integers(a0 + 1, p))
    assume(f >= 2)
    x = rand(rng_of(seed), (p, 2 * f), F32)

    @nki.jit
    def k(a):
        out = nl.ndarray((p, 2 * f), dtype=nl.float32, buffer=nl.shared_hbm)
        t = nl.load(a)
        t[a0:a1, 0 : 2 * f : 2] = nl.add(t[a0:a1, 1 : 2 * f : 2], t[a0:a1, 0 : 2 * f : 2])
        nl.store(out, value=t)
        return out

    want = x.copy()
    want[a0:a1, 0::2] = x[a0:a1, 1::2] + x[a0:a1, 0::2]
    assert_exact(k(x), want)


@FAST
@given(
    rows=st.integers(1, 300),
    cols=st.integers(1, 300),
    p=st.integers(1, 128),
    f=st.integers(1, 128),
    seed=seeds,
    data=st.data(),
)
def test_random_affine_hbm_access_with_masks_legalising_out_of_bounds(rows, cols, p, f, seed, data):
    p0 = data.draw(st.integers(0, rows + 10))
    sp = data.draw(st.integers(1, 3))
    f0 = data.draw(st.integers(-5, cols + 5))
    sf = data.draw(st.sampled_from([-3, -2, -1, 1, 2, 3]))
    x = rand(rng_of(seed), (rows, cols), F32)

    @nki.jit
    def k(a):
        out = nl.ndarray((p, f), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out, value=-1.0)
        i_p = p0 + sp * nl.arange(p)[:, None]
        i_f = f0 + sf * nl.arange(f)[None, :]
        valid = (i_p < rows) & (i_f >= 0) & (i_f < cols)
        t = nl.load(a[i_p, i_f], mask=valid)
        j_p = nl.arange(p)[:, None]
        j_f = nl.arange(f)[None, :]
        nl.store(out[j_p, j_f], value=nl.multiply(t, 2.0, mask=valid), mask=valid)
        return out

    rp = p0 + sp * np.arange(p)[:, None]
    cf = f0 + sf * np.arange(f)[None, :]
    ok = (rp < rows) & (cf >= 0) & (cf < cols)
    want = np.full((p, f), -1.0, np.float32)
    want[ok] = 2 * x[np.broadcast_to(rp, (p, f))[ok], np.broadcast_to(cf, (p, f))[ok]]
    assert_exact(k(x), want)


@FAST
@given(p=st.integers(1, 128), f=st.integers(1, 60), seed=seeds, data=st.data())
def test_random_strided_sbuf_operands_and_destinations(p, f, seed, data):
    s_in = data.draw(st.integers(1, 3))
    s_out = data.draw(st.integers(1, 3))
    o_in = data.draw(st.integers(0, 5))
    o_out = data.draw(st.integers(0, 5))
    width = max(o_in + s_in * (f - 1), o_out + s_out * (f - 1)) + 1
    x = rand(rng_of(seed), (p, width), F32)

    @nki.jit
    def k(a):
        out = nl.ndarray((p, width), dtype=nl.float32, buffer=nl.shared_hbm)
        t = nl.load(a)
        u = nl.zeros((p, width), dtype=nl.float32)
        i_p = nl.arange(p)[:, None]
        i_f = nl.arange(f)[None, :]
        u[i_p, o_out + s_out * i_f] = nl.exp(t[i_p, o_in + s_in * i_f])
        nl.store(out, value=u)
        return out

    want = np.zeros((p, width), np.float32)
    want[:, o_out : o_out + s_out * f : s_out] = np.exp(x[:, o_in : o_in + s_in * f : s_in])
    assert_close(k(x), want, rtol=1e-6, atol=0)


@nki.jit
def _same_region_twice(x, hi):
    out = nl.ndarray((128, 4), dtype=x.dtype, buffer=nl.shared_hbm)
    a = nl.load(x[0:128, 0:4])
    b = nl.load(x[0:128, 0:4])  # the same region again (the view memo's hit)
    nl.store(out, value=nl.add(a, b))
    nl.load(x[0:128, 0:hi])
    return out


def test_repeated_views_agree_and_bad_ones_fail_every_time():
    import devkit

    x = rand(rng_of(5), (128, 8), F32)
    assert_exact(devkit.simulate(_same_region_twice, x, 8), x[:, 0:4] * 2)
    for _ in range(2):  # an out-of-bounds slice is never remembered as valid
        with pytest.raises(BoundsError):
            devkit.simulate(_same_region_twice, x, 9)


def test_high_rank_mgrid_gather_is_exact_and_kept_compact():
    """A 5-D ``nl.mgrid`` gather (the trilinear-interpolation pattern: sums of grid components index each
    dim) reads and writes the right elements, and the view's coordinate arrays are not materialised at the
    full view shape (issue 13: that made such a kernel run at ~30 instructions/s)."""
    x = rand(rng_of(3), (128, 4, 5, 6), F32)
    views = []

    @nki.jit
    def k(a):
        out = nl.ndarray((128, 6, 8), dtype=a.dtype, buffer=nl.shared_hbm)
        t = nl.load(a)
        o = nl.zeros((128, 6, 8), dtype=a.dtype, buffer=nl.sbuf)
        i_p, i_dx, i_hx, i_dy, i_hy = nl.mgrid[0:128, 0:2, 0:2, 0:3, 0:4]
        src = t[i_p, i_dy + i_dx, i_hy + i_hx, 2]
        views.append(src)
        o[i_p, 2 * i_dy + i_dx, 2 * i_hy + i_hx] = nl.multiply(src, 2.0)
        nl.store(out, value=o)
        return out

    got = k(x)
    want = np.zeros((128, 6, 8), np.float32)
    for dx in range(2):
        for hx in range(2):
            for dy in range(3):
                for hy in range(4):
                    want[:, 2 * dy + dx, 2 * hy + hx] = 2 * x[:, dy + dx, hy + hx, 2]
    assert_exact(got, want)
    (v,) = views
    assert v.shape == (128, 2, 2, 3, 4)
    assert v.dims is None  # a gathered view (coordinate arrays), not an affine one
    assert max(a.size for a in v._garr) < v.size // 4


def _run_elems_reference(t, free_only=False):
    """Average contiguous run of a gathered view, computed the plain way (full int64 offsets)."""
    st = t.st
    strides = [int(np.prod(st.shape[d + 1 :])) for d in range(st.ndim)]
    flat = sum(np.broadcast_to(a, t.shape).astype(np.int64) * s for a, s in zip(t._garr, strides)).reshape(-1)
    run = max(1, t.size // (int(np.count_nonzero(np.diff(flat) != 1)) + 1))
    if free_only and t.pax is not None:
        run = min(run, max(1, t.size // max(t.shape[t.pax], 1)))
    return run


@pytest.mark.parametrize("big", [False, True])
def test_gathered_view_run_length_matches_a_plain_offset_count(big):
    """The run length the cost model reads from a gathered view (computed in place, in 32 bits when every
    offset fits, from compact coordinate arrays) equals a plain full-size 64-bit count.  ``big`` moves one
    row (a masked-off lane) to a coordinate whose offset is 2**32 * 75 elements past its neighbours: in
    32 bits it would wrap onto the contiguous position and hide two breaks."""
    from devkit.sim.storage import Storage
    from devkit.sim.tensor import Tensor

    st = Storage(None, 1, (64, 40, 30), np.float32, "hbm", None, None)
    rows = np.arange(8, dtype=np.int64).reshape(8, 1, 1)
    if big:
        rows = rows.copy()
        rows[3, 0, 0] = 3 + 268_435_456  # 268435456 * 1200 == 75 * 2**32
    cols = np.arange(40, dtype=np.int64).reshape(1, 40, 1)
    last = np.arange(30, dtype=np.int64).reshape(1, 1, 30)
    t = Tensor(st, None, (8, 40, 30), None, (rows, cols, last))
    assert t.run_elems() == _run_elems_reference(t) == (3200 if big else 9600)
    sparse = (rows * 2, np.broadcast_to(cols, (8, 40, 30)), np.full((1, 1, 1), 7, dtype=np.int64))
    t2 = Tensor(st, None, (8, 40, 30), None, sparse)
    assert t2.run_elems() == _run_elems_reference(t2)
