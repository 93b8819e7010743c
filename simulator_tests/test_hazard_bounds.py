"""Issue 3, bounds: a static index outside a tensor without a mask is a BoundsError at the access
statement (load, store, any tile access, plain slices); the same access legalised by a mask passes;
gathered (indirect) indices out of range fail at run time.

Negative tests assert the class and the blamed line (marked ``# <- blame``); each has a positive twin.
"""

from __future__ import annotations

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import numpy as np
from _nki_support import simulate_raises

import devkit
from devkit.errors import BoundsError

A = np.arange(128 * 512, dtype=np.float32).reshape(128, 512)


def raises_bounds(kernel, *args, **kw):
    return simulate_raises(BoundsError, kernel, *args, rule="out-of-bounds", **kw)


# ---- plain slices ------------------------------------------------------------------------------------


@nki.jit
def load_256_rows_of_128(a):
    out = nl.ndarray((128, 512), dtype=a.dtype, buffer=nl.shared_hbm)
    x = nl.load(a[0:256, 0:512])  # <- blame
    nl.store(out, value=x[0:128, :])
    return out


@nki.jit
def load_128_rows(a):
    out = nl.ndarray((128, 512), dtype=a.dtype, buffer=nl.shared_hbm)
    x = nl.load(a[0:128, 0:512])
    nl.store(out, value=x)
    return out


def test_load_of_a_slice_past_the_tensor():
    err = raises_bounds(load_256_rows_of_128, A)
    assert "0:256" in str(err) and "'a'" in str(err)
    np.testing.assert_array_equal(devkit.simulate(load_128_rows, A), A)


@nki.jit
def sbuf_slice_past_the_partitions(a):
    out = nl.ndarray((128, 512), dtype=a.dtype, buffer=nl.shared_hbm)
    t = nl.load(a)
    u = t[0:256]  # <- blame
    nl.store(out, value=u)
    return out


@nki.jit
def sbuf_column_slice(a):
    out = nl.ndarray((128, 256), dtype=a.dtype, buffer=nl.shared_hbm)
    t = nl.load(a)
    nl.store(out, value=t[:, 256:512])
    return out


def test_plain_slice_of_an_sbuf_tile_past_its_partitions():
    raises_bounds(sbuf_slice_past_the_partitions, A)
    np.testing.assert_array_equal(devkit.simulate(sbuf_column_slice, A), A[:, 256:])


@nki.jit
def store_past_the_columns(a):
    out = nl.ndarray((128, 512), dtype=a.dtype, buffer=nl.shared_hbm)
    i_p = nl.arange(128)[:, None]
    i_f = nl.arange(512)[None, :]
    x = nl.load(a)
    nl.store(out[i_p, i_f], value=x)
    nl.store(out[i_p, 400 + i_f], value=x)  # <- blame
    return out


@nki.jit
def store_past_the_columns_masked(a):
    out = nl.ndarray((128, 512), dtype=a.dtype, buffer=nl.shared_hbm)
    i_p = nl.arange(128)[:, None]
    i_f = nl.arange(512)[None, :]
    x = nl.load(a)
    nl.store(out[i_p, i_f], value=x)
    nl.store(out[i_p, 400 + i_f], value=x, mask=(400 + i_f < 512))
    return out


def test_store_of_an_arange_past_the_tensor_and_its_masked_twin():
    err = raises_bounds(store_past_the_columns, A)
    assert "[0, 512]" in str(err) and "mask" in str(err)
    want = A.copy()
    want[:, 400:] = A[:, :112]
    np.testing.assert_array_equal(devkit.simulate(store_past_the_columns_masked, A), want)


# ---- arange accesses of tiles (reads and writes inside compute instructions) --------------------------


@nki.jit
def exp_of_shifted_columns(a):
    out = nl.ndarray((128, 512), dtype=a.dtype, buffer=nl.shared_hbm)
    t = nl.load(a)
    i_p = nl.arange(128)[:, None]
    i_f = nl.arange(512)[None, :]
    y = nl.exp(t[i_p, i_f + 100])  # <- blame
    nl.store(out, value=y)
    return out


@nki.jit
def exp_of_shifted_columns_masked(a):
    out = nl.ndarray((128, 412), dtype=a.dtype, buffer=nl.shared_hbm)
    t = nl.load(a)
    i_p = nl.arange(128)[:, None]
    i_f = nl.arange(512)[None, :]
    y = nl.exp(t[i_p, i_f + 100], mask=(i_f + 100 < 512))
    nl.store(out[i_p, i_f], value=y, mask=(i_f < 412))
    return out


def test_instruction_reading_a_tile_past_its_end_and_its_masked_twin():
    raises_bounds(exp_of_shifted_columns, A)
    a = np.linspace(-1, 1, 128 * 512, dtype=np.float32).reshape(128, 512)
    np.testing.assert_allclose(
        devkit.simulate(exp_of_shifted_columns_masked, a), np.exp(a[:, 100:]), rtol=1e-6
    )


@nki.jit
def copy_into_shifted_columns(a):
    out = nl.ndarray((128, 512), dtype=a.dtype, buffer=nl.shared_hbm)
    t = nl.zeros((128, 512), dtype=a.dtype)
    x = nl.load(a)
    i_p = nl.arange(128)[:, None]
    i_f = nl.arange(512)[None, :]
    t[i_p, i_f + 100] = nl.copy(x)  # <- blame
    nl.store(out, value=t)
    return out


@nki.jit
def copy_into_shifted_columns_masked(a):
    out = nl.ndarray((128, 512), dtype=a.dtype, buffer=nl.shared_hbm)
    t = nl.zeros((128, 512), dtype=a.dtype)
    x = nl.load(a)
    i_p = nl.arange(128)[:, None]
    i_f = nl.arange(512)[None, :]
    t[i_p, i_f + 100] = nl.copy(x, mask=(i_f + 100 < 512))
    nl.store(out, value=t)
    return out


def test_writing_a_tile_past_its_end_and_its_masked_twin():
    raises_bounds(copy_into_shifted_columns, A)
    want = np.zeros_like(A)
    want[:, 100:] = A[:, :412]
    np.testing.assert_array_equal(devkit.simulate(copy_into_shifted_columns_masked, A), want)


@nki.jit
def fifth_of_four_blocks(a):
    out = nl.ndarray((128, 512), dtype=a.dtype, buffer=nl.shared_hbm)
    buf = nl.zeros((4, nl.par_dim(128), 512), dtype=a.dtype)
    nl.store(out, value=buf[4])  # <- blame
    return out


def test_integer_index_past_a_block_dimension():
    raises_bounds(fifth_of_four_blocks, A)


# ---- ragged tiling in a loop: the classic padding bug and its fix --------------------------------------


@nki.jit
def ragged_rows_unmasked(a):
    n, f = a.shape
    out = nl.ndarray((n, f), dtype=a.dtype, buffer=nl.shared_hbm)
    i_p = nl.arange(128)[:, None]
    i_f = nl.arange(f)[None, :]
    for i in nl.affine_range((n + 127) // 128):
        x = nl.load(a[i * 128 + i_p, i_f])  # <- blame
        nl.store(out[i * 128 + i_p, i_f], value=x)
    return out


@nki.jit
def ragged_rows_masked(a):
    n, f = a.shape
    out = nl.ndarray((n, f), dtype=a.dtype, buffer=nl.shared_hbm)
    i_p = nl.arange(128)[:, None]
    i_f = nl.arange(f)[None, :]
    for i in nl.affine_range((n + 127) // 128):
        x = nl.load(a[i * 128 + i_p, i_f], mask=(i * 128 + i_p < n))
        y = nl.multiply(x, 2.0)  # padding rows of x are unspecified but legal to compute on
        nl.store(out[i * 128 + i_p, i_f], value=y, mask=(i * 128 + i_p < n))
    return out


def test_ragged_tiles_need_a_mask():
    a = np.random.default_rng(0).random((300, 64), dtype=np.float32)
    err = raises_bounds(ragged_rows_unmasked, a)
    assert "[300, 0]" in str(err)
    np.testing.assert_array_equal(devkit.simulate(ragged_rows_masked, a), 2 * a)


# ---- indirect (gathered / scattered) indices: checked at run time -------------------------------------


@nki.jit
def gather_rows(data, idx):
    out = nl.ndarray((64, 512), dtype=data.dtype, buffer=nl.shared_hbm)
    i_p = nl.arange(64)[:, None]
    i_f = nl.arange(512)[None, :]
    rows = nl.load(idx)
    x = nl.load(data[rows[i_p, 0], i_f])  # <- blame
    nl.store(out, value=x)
    return out


def test_gathered_row_index_out_of_range_fails_at_run_time():
    idx = (np.arange(64, dtype=np.int32) * 2).reshape(64, 1)
    np.testing.assert_array_equal(devkit.simulate(gather_rows, A, idx), A[idx[:, 0]])
    bad = idx.copy()
    bad[40, 0] = 128
    err = raises_bounds(gather_rows, A, bad)
    assert "[128, 0]" in str(err)


@nki.jit
def scatter_rows(data, idx):
    out = nl.ndarray((128, 512), dtype=data.dtype, buffer=nl.shared_hbm)
    nl.store(out, value=0.0)
    i_p = nl.arange(64)[:, None]
    i_f = nl.arange(512)[None, :]
    rows = nl.load(idx)
    x = nl.load(data[0:64, :])
    nl.store(out[rows[i_p, 0], i_f], value=x)  # <- blame
    return out


def test_scattered_row_index_out_of_range_fails_at_run_time():
    idx = (np.arange(64, dtype=np.int32) + 64).reshape(64, 1)
    want = np.zeros_like(A)
    want[64:] = A[:64]
    np.testing.assert_array_equal(devkit.simulate(scatter_rows, A, idx), want)
    raises_bounds(scatter_rows, A, idx + 1)
