"""Issue 13, masks gate bounds checks: a mask decides which elements an instruction accesses, so lanes it
switches off are never bounds-checked, for every access form -- affine ``nl.arange`` indices, gathered
(indirect) indices, static slices of HBM tensors, ``nisa.dma_copy`` and ``nisa.dma_transpose``.  The same
access without the mask is a BoundsError at the access statement.

The positive twins are the patterns of nki-samples 0898a77 ``reference/vision.py``: ``resize_nearest``
gathers with ``mask=valid`` while the masked-off lanes hold indices past the end (line 234), and
``adaptive_avg_pool2d`` copies a static slice that runs past dim 0 with a mask excluding exactly those rows
(line 353).  Negative tests assert the class and the blamed line (marked ``# <- blame``).
"""

from __future__ import annotations

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import numpy as np
import pytest
from _nki_support import simulate_raises

import devkit
from devkit.errors import BoundsError

DATA = np.arange(100 * 64, dtype=np.float32).reshape(100, 64)


def raises_bounds(kernel, *args, **kw) -> BoundsError:
    return simulate_raises(BoundsError, kernel, *args, rule="out-of-bounds", **kw)


# ---- gathered indices: masked-off lanes hold indices past the end -------------------------------------


@nki.jit
def gather_masked(data, rows):
    out = nl.ndarray((128, 64), dtype=data.dtype, buffer=nl.shared_hbm)
    i_p = nl.arange(128)[:, None]
    i_f = nl.arange(64)[None, :]
    idx = nl.load(rows)
    valid = i_p < 90
    x = nl.load(data[idx[i_p, 0], i_f], mask=valid)
    nl.store(out[i_p, i_f], value=x, mask=valid)
    return out


@nki.jit
def gather_unmasked(data, rows):
    out = nl.ndarray((128, 64), dtype=data.dtype, buffer=nl.shared_hbm)
    i_p = nl.arange(128)[:, None]
    i_f = nl.arange(64)[None, :]
    idx = nl.load(rows)
    x = nl.load(data[idx[i_p, 0], i_f])  # <- blame
    nl.store(out[i_p, i_f], value=x)
    return out


def _rows_past_the_end_after_90() -> np.ndarray:
    rows = (np.arange(128, dtype=np.int32) + 10).reshape(128, 1)  # rows 90.. index 100..137: outside
    return rows


def test_gather_whose_masked_off_lanes_index_past_the_end():
    rows = _rows_past_the_end_after_90()
    got = devkit.simulate(gather_masked, DATA, rows)
    np.testing.assert_array_equal(got[:90], DATA[10:100])
    err = raises_bounds(gather_unmasked, DATA, rows)
    assert "[100, 0]" in str(err)


def test_gather_mask_does_not_hide_a_bad_index_in_an_active_lane():
    rows = _rows_past_the_end_after_90()
    rows[5, 0] = 100  # lane 5 is active
    with pytest.raises(BoundsError) as e:
        devkit.simulate(gather_masked, DATA, rows)
    assert "[100, 0]" in str(e.value)


# ---- static slices of HBM tensors: the access checks what its mask selects ----------------------------


@nki.jit
def load_static_slice_masked(data):
    out = nl.ndarray((128, 64), dtype=data.dtype, buffer=nl.shared_hbm)
    i_p = nl.arange(128)[:, None]
    i_f = nl.arange(64)[None, :]
    x = nl.load(data[0:128, :], mask=(i_p < 100))
    nl.store(out[i_p, i_f], value=x, mask=(i_p < 100))
    return out


@nki.jit
def load_static_slice_unmasked(data):
    out = nl.ndarray((128, 64), dtype=data.dtype, buffer=nl.shared_hbm)
    rows = data[0:128, :]
    x = nl.load(rows)  # <- blame
    nl.store(out, value=x)
    return out


@nki.jit
def load_static_slice_mask_too_wide(data):
    out = nl.ndarray((128, 64), dtype=data.dtype, buffer=nl.shared_hbm)
    i_p = nl.arange(128)[:, None]
    x = nl.load(data[0:128, :], mask=(i_p < 101))  # <- blame
    nl.store(out, value=x)
    return out


def test_static_slice_past_the_end_of_an_hbm_tensor():
    got = devkit.simulate(load_static_slice_masked, DATA)
    np.testing.assert_array_equal(got[:100], DATA)
    err = raises_bounds(load_static_slice_unmasked, DATA)
    assert "slice 0:128:1 is outside dim 0 of size 100" in str(err) and "'data'" in str(err)
    raises_bounds(load_static_slice_mask_too_wide, DATA)


def test_static_slice_past_the_end_is_checked_in_cost_only_runs():
    import neuronxcc.nki.typing as nt

    with pytest.raises(BoundsError):
        devkit.estimate(load_static_slice_unmasked, nt.tensor[[100, 64], nl.float32])
    report = devkit.estimate(load_static_slice_masked, nt.tensor[[100, 64], nl.float32])
    assert report.instructions >= 2


# ---- nisa.dma_copy of a static slice past dim 0 --------------------------------------------------------


@nki.jit
def dma_copy_masked(data):
    out = nl.ndarray((2, 64, 64), dtype=data.dtype, buffer=nl.shared_hbm)
    buf = nl.ndarray((2, nl.par_dim(64), 64), dtype=data.dtype, buffer=nl.sbuf)
    for t in nl.affine_range(2):
        i_p = nl.arange(64)[:, None] + t * 64
        nisa.dma_copy(src=data[t * 64 : t * 64 + 64, :], dst=buf[t], mask=(i_p < 100))
        nl.store(out[t], value=buf[t])
    return out


@nki.jit
def dma_copy_unmasked(data):
    out = nl.ndarray((2, 64, 64), dtype=data.dtype, buffer=nl.shared_hbm)
    buf = nl.ndarray((2, nl.par_dim(64), 64), dtype=data.dtype, buffer=nl.sbuf)
    for t in nl.affine_range(2):
        nisa.dma_copy(src=data[t * 64 : t * 64 + 64, :], dst=buf[t])  # <- blame
        nl.store(out[t], value=buf[t])
    return out


def test_dma_copy_of_a_slice_past_dim_0():
    got = devkit.simulate(dma_copy_masked, DATA)
    np.testing.assert_array_equal(got.reshape(128, 64)[:100], DATA)
    err = raises_bounds(dma_copy_unmasked, DATA)
    assert "64:128:1" in str(err)


@nki.jit
def dma_copy_into_a_3d_tile_masked(data):
    out = nl.ndarray((50, 2, 64), dtype=data.dtype, buffer=nl.shared_hbm)
    src = data.reshape((50, 2, 64))
    buf = nl.ndarray((64, 2, 64), dtype=data.dtype, buffer=nl.sbuf)
    i_p = nl.arange(64)[:, None, None]
    nisa.dma_copy(src=src[0:64, :, :], dst=buf, mask=(i_p < 50))
    nl.store(out, value=buf[0:50])
    return out


def test_dma_copy_masked_in_three_dimensions():
    got = devkit.simulate(dma_copy_into_a_3d_tile_masked, DATA)
    np.testing.assert_array_equal(got, DATA.reshape(50, 2, 64))


# ---- nisa.dma_transpose: the mask is on the result, the check on the source ---------------------------


@nki.jit
def dma_transpose_masked(data):
    out = nl.ndarray((64, 100), dtype=data.dtype, buffer=nl.shared_hbm)
    i_p = nl.arange(64)[:, None]
    i_f = nl.arange(128)[None, :]
    t = nisa.dma_transpose(data[0:128, :], mask=(i_f < 100))
    nl.store(out, value=t[i_p, nl.arange(100)[None, :]])
    return out


@nki.jit
def dma_transpose_unmasked(data):
    out = nl.ndarray((64, 100), dtype=data.dtype, buffer=nl.shared_hbm)
    t = nisa.dma_transpose(data[0:128, :])  # <- blame
    nl.store(out, value=t[:, 0:100])
    return out


def test_dma_transpose_of_a_slice_past_the_end():
    got = devkit.simulate(dma_transpose_masked, DATA)
    np.testing.assert_array_equal(got, DATA.T)
    raises_bounds(dma_transpose_unmasked, DATA)


# ---- on-chip tiles keep the check at the slice -------------------------------------------------------


@nki.jit
def sbuf_slice_past_the_end(data):
    out = nl.ndarray((100, 64), dtype=data.dtype, buffer=nl.shared_hbm)
    t = nl.load(data)
    u = t[0:128]  # <- blame
    nl.store(out, value=u[0:100])
    return out


def test_a_slice_past_an_sbuf_tile_is_blamed_where_it_is_taken():
    raises_bounds(sbuf_slice_past_the_end, DATA)
