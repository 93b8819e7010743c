"""Issue 12: the NKI 0.5 view methods ``vector_select`` (run-time row gather of an HBM tensor) and
``rearrange`` (einops-style split / reorder / merge of dims) against NumPy, with their rule twins (error class,
rule and blamed line asserted)."""

from __future__ import annotations

import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np
import pytest
from _beta2_support import fails

from devkit.errors import BoundsError, KernelArgumentError, TileShapeError

X = np.arange(10 * 5, dtype=np.float32).reshape(10, 5)


@nki.jit
def k_gather_rows(a, rows, oob=nisa.oob_mode.error):
    idx = nl.ndarray((rows.shape[0], 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(idx, rows)
    d = nl.ndarray((rows.shape[0], a.shape[1]), dtype=a.dtype, buffer=nl.sbuf)
    nisa.memset(d, -1.0)
    nisa.dma_copy(d, a.vector_select(0, idx), oob_mode=oob)  # <- blame
    out = nl.ndarray(d.shape, dtype=d.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(out, d)
    return out


def test_vector_select_gathers_rows_at_run_time():
    rows = np.array([[7], [2], [2], [9], [0]], np.int32)
    np.testing.assert_array_equal(nki.simulate(k_gather_rows)(X, rows), X[rows[:, 0]])


def test_vector_select_rows_outside_are_an_error_or_skipped():
    rows = np.array([[3], [10], [1]], np.int32)
    fails(k_gather_rows, BoundsError, "out-of-bounds", X, rows)
    got = nki.simulate(k_gather_rows)(X, rows, nisa.oob_mode.skip)
    np.testing.assert_array_equal(got[[0, 2]], X[[3, 1]])
    np.testing.assert_array_equal(got[1], np.full(5, -1.0, np.float32))  # the skipped row keeps dst


@nki.jit
def k_vector_select_sbuf(a):
    s = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(s, a)
    idx = nl.ndarray((2, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.iota(idx, [[1, 1]])
    v = s.vector_select(0, idx)  # <- blame
    return v


def test_vector_select_applies_to_hbm_only():
    fails(k_vector_select_sbuf, KernelArgumentError, "bad-argument", X)


@nki.jit
def k_rearrange_hbm(a, src, dst, sizes):
    v = a.rearrange(src, dst, sizes)  # <- blame
    out = nl.ndarray(v.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(out, v)
    return out


@pytest.mark.parametrize(
    ("src", "dst", "sizes", "want"),
    [
        ("a (b c)", "a c b", {"b": 2}, lambda x: x.reshape(4, 2, 3).transpose(0, 2, 1)),
        ("a (b c)", "c a b", {"c": 3}, lambda x: x.reshape(4, 2, 3).transpose(2, 0, 1)),
        (["a", ("b", "c")], [("a", "b"), "c"], {"b": 2}, lambda x: x.reshape(8, 3)),
        ("a b", "b a", None, lambda x: x.T),
    ],
)
def test_rearrange_matches_numpy(src, dst, sizes, want):
    x = np.arange(24, dtype=np.float32).reshape(4, 6)
    np.testing.assert_array_equal(nki.simulate(k_rearrange_hbm)(x, src, dst, sizes), want(x))


def test_rearrange_rules():
    x = np.arange(24, dtype=np.float32).reshape(4, 6)
    fails(k_rearrange_hbm, KernelArgumentError, "reshape", x, "a b", "(b a)", None)  # not contiguous
    nki.simulate(k_rearrange_hbm)(x, "a b", "(a b)", None)
    fails(k_rearrange_hbm, TileShapeError, "reshape", x, "a (b c)", "a b c", {"b": 4})  # 4 does not divide 6
    nki.simulate(k_rearrange_hbm)(x, "a (b c)", "a b c", {"b": 3})
    fails(k_rearrange_hbm, KernelArgumentError, "bad-argument", x, "a b", "a c", None)  # unknown name
    fails(k_rearrange_hbm, KernelArgumentError, "bad-argument", x, "a (b", "a b", None)


@nki.jit
def k_rearrange_sbuf(a, dst):
    s = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(s, a)
    v = s.rearrange("p (f g)", dst, {"f": 2})  # <- blame
    d = nl.ndarray(v.shape, dtype=a.dtype, buffer=nl.sbuf)
    nisa.tensor_copy(d, v)
    out = nl.ndarray(v.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(out, d)
    return out


def test_rearrange_on_chip_keeps_the_partition_dim_first():
    x = np.arange(8 * 6, dtype=np.float32).reshape(8, 6)
    got = nki.simulate(k_rearrange_sbuf)(x, "p g f")
    np.testing.assert_array_equal(got, x.reshape(8, 2, 3).transpose(0, 2, 1))
    fails(k_rearrange_sbuf, KernelArgumentError, "bad-argument", x, "g p f")
