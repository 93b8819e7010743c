"""Dataflow rules of the per-partition, gathering, selecting, scanning and MX instructions
(:mod:`devkit.sim.dataflow`; docs/errors.md, ``uninitialized-read``, *Computing is not observing*).

Each instruction here computes on a tile of which some partitions (or columns) were never written: the results
its rule names become never-written, and only storing them is the error, blamed on the instruction (the first
computation on the never-written data) and naming the storing line.  Each rule shape has a passing twin (only
the results computed from written data are stored) and a failing one; both NKI generations where the
instruction exists in both.
"""

from __future__ import annotations

import ml_dtypes
import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import nki as nki2
import nki.isa as nisa2
import nki.language as nl2
import numpy as np
import pytest
from _nki_support import assert_blames, uninit_raises

import devkit
from devkit.errors import UninitializedReadError

RNG = np.random.default_rng(5)
BF16 = np.dtype(ml_dtypes.bfloat16)


def raises(kernel, *args):
    """The error of ``kernel`` (either generation), blamed on ``# <- blame``, naming ``# <- observed``."""
    return uninit_raises(kernel, *args, observed="# <- observed")


@pytest.fixture
def gen4(monkeypatch):
    monkeypatch.setenv("NKI_NC_VERSION", "gen4")


# ---- rows: every result of a partition from every element read there (max8, find/replace-8, bn_*) ----------


@nki2.jit
def b2_max8(a, store_rows):
    """Partitions 0:8 of the source written, 8:16 never: max8 of the latter is garbage."""
    x = nl2.ndarray(a.shape, dtype=nl2.float32, buffer=nl2.sbuf)
    nisa2.dma_copy(dst=x[0:8, :], src=a[0:8, :])
    d = nl2.ndarray((a.shape[0], 8), dtype=nl2.float32, buffer=nl2.sbuf)
    nisa2.max8(d, x)  # <- blame
    out = nl2.ndarray((store_rows, 8), dtype=nl2.float32, buffer=nl2.shared_hbm)
    nisa2.dma_copy(dst=out, src=d[0:store_rows, :])  # <- observed
    return out


def test_b2_max8_of_never_written_partitions():
    a = RNG.standard_normal((16, 32)).astype(np.float32)
    got = nki2.simulate(b2_max8)(a, 8)
    np.testing.assert_array_equal(got, -np.sort(-a[0:8], axis=1)[:, :8])
    err = raises(b2_max8, a, 16)
    assert "64 element(s)" in str(err) and "position [8, 0]" in str(err), err


@nki.jit
def b1_max8(a, store_rows):
    x = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.sbuf)
    x[0:8, :] = nl.load(a[0:8, :])
    d = nisa.max8(src=x)  # <- blame
    out = nl.ndarray((store_rows, 8), dtype=nl.float32, buffer=nl.shared_hbm)
    nl.store(out, value=d[0:store_rows, :])  # <- observed
    return out


def test_b1_max8_of_never_written_partitions():
    a = RNG.standard_normal((16, 32)).astype(np.float32)
    np.testing.assert_array_equal(devkit.simulate(b1_max8, a, 8), -np.sort(-a[0:8], axis=1)[:, :8])
    raises(b1_max8, a, 16)


@nki2.jit
def b2_replace8(a, v, store_rows):
    """The 8 values of partitions 4:8 never written: those rows of dst and dst_idx are garbage."""
    x = nl2.ndarray(a.shape, dtype=a.dtype, buffer=nl2.sbuf)
    nisa2.dma_copy(dst=x, src=a)
    vals = nl2.ndarray(v.shape, dtype=v.dtype, buffer=nl2.sbuf)
    nisa2.dma_copy(dst=vals[0:4, :], src=v[0:4, :])
    d = nl2.ndarray(a.shape, dtype=a.dtype, buffer=nl2.sbuf)
    idx = nl2.ndarray((a.shape[0], 8), dtype=nl2.uint32, buffer=nl2.sbuf)
    nisa2.nc_match_replace8(d, x, vals, -1.0, dst_idx=idx)  # <- blame
    out = nl2.ndarray((store_rows, 8), dtype=nl2.uint32, buffer=nl2.shared_hbm)
    nisa2.dma_copy(dst=out, src=idx[0:store_rows, :])  # <- observed
    return out


def test_b2_match_replace8_second_output_follows_the_rows():
    a = np.tile(np.arange(16, dtype=np.float32), (8, 1))
    v = np.tile(np.arange(8, dtype=np.float32)[::-1], (8, 1))
    got = nki2.simulate(b2_replace8)(a, v, 4)
    np.testing.assert_array_equal(got, np.tile(np.arange(8)[::-1], (4, 1)))
    raises(b2_replace8, a, v, 8)


# ---- topk: a 16-partition group's results from the group's active elements -------------------------------------


@nki2.jit
def b2_topk(a, store_rows):
    """Group 1 (partitions 16:32) has one never-written element: all its rows of both outputs are garbage."""
    x = nl2.ndarray(a.shape, dtype=a.dtype, buffer=nl2.sbuf)
    nisa2.dma_copy(dst=x[0:31, :], src=a[0:31, :])
    nisa2.dma_copy(dst=x[31:32, 0:7], src=a[31:32, 0:7])
    vals = nl2.ndarray((32, 8), dtype=nl2.bfloat16, buffer=nl2.sbuf)
    idx = nl2.ndarray((32, 8), dtype=nl2.uint32, buffer=nl2.sbuf)
    nisa2.topk(vals, idx, x, 128)  # <- blame
    out = nl2.ndarray((store_rows, 8), dtype=nl2.uint32, buffer=nl2.shared_hbm)
    nisa2.dma_copy(dst=out, src=idx[0:store_rows, :])  # <- observed
    return out


def test_b2_topk_group_with_a_never_written_element(gen4):
    a = RNG.permutation(32 * 8).reshape(32, 8).astype(np.float32).astype(BF16)
    got = nki2.simulate(b2_topk)(a, 16)
    snake = a[0:16].astype(np.float32).T.reshape(-1)
    np.testing.assert_array_equal(got[0], np.argsort(-snake, kind="stable")[:8][::-1])
    err = raises(b2_topk, a, 32)
    assert "128 element(s)" in str(err) and "position [16, 0]" in str(err), err


# ---- dma_compute: element-wise sum by flat position -------------------------------------------------------------


@nki2.jit
def b2_dma_compute(a, b, store_rows):
    x = nl2.ndarray(a.shape, dtype=nl2.float32, buffer=nl2.sbuf)
    nisa2.dma_copy(dst=x[0:64, :], src=a[0:64, :])
    y = nl2.ndarray(b.shape, dtype=nl2.float32, buffer=nl2.sbuf)
    nisa2.dma_copy(dst=y, src=b)
    d = nl2.ndarray(a.shape, dtype=nl2.float32, buffer=nl2.sbuf)
    nisa2.dma_compute(d, [x, y], nl2.add)  # <- blame
    out = nl2.ndarray((store_rows, a.shape[1]), dtype=nl2.float32, buffer=nl2.shared_hbm)
    nisa2.dma_copy(dst=out, src=d[0:store_rows, :])  # <- observed
    return out


def test_b2_dma_compute_of_a_partly_written_source():
    a = RNG.standard_normal((128, 16)).astype(np.float32)
    b = RNG.standard_normal((128, 16)).astype(np.float32)
    np.testing.assert_allclose(nki2.simulate(b2_dma_compute)(a, b, 64), a[0:64] + b[0:64], rtol=1e-6)
    err = raises(b2_dma_compute, a, b, 128)
    assert "1024 element(s)" in str(err), err


# ---- gathers: the gathered element's state; the indices are observed ---------------------------------------------


@nki2.jit
def b2_n_gather(a, idx, idx_rows=16):
    """Columns 0:20 of the data written; the gathered columns decide; ``idx_rows`` < 16 leaves index rows
    never written (an index is observed at once)."""
    x = nl2.ndarray(a.shape, dtype=nl2.float32, buffer=nl2.sbuf)
    nisa2.dma_copy(dst=x[:, 0:20], src=a[:, 0:20])
    ix = nl2.ndarray(idx.shape, dtype=idx.dtype, buffer=nl2.sbuf)
    nisa2.dma_copy(dst=ix[0:idx_rows, :], src=idx[0:idx_rows, :])
    d = nl2.ndarray(idx.shape, dtype=nl2.float32, buffer=nl2.sbuf)
    nisa2.nc_n_gather(d, x, ix)  # <- blame
    out = nl2.ndarray(idx.shape, dtype=nl2.float32, buffer=nl2.shared_hbm)
    nisa2.dma_copy(dst=out, src=d)  # <- observed
    return out


def test_b2_n_gather_carries_the_gathered_elements_state():
    a = RNG.standard_normal((16, 40)).astype(np.float32)
    idx = RNG.integers(0, 20, (16, 6)).astype(np.uint32)
    got = nki2.simulate(b2_n_gather)(a, idx)
    np.testing.assert_array_equal(got, np.take_along_axis(a, idx.astype(np.int64), axis=1))
    idx[3, 2] = 33  # one gathered element never written
    err = raises(b2_n_gather, a, idx)
    assert "1 element(s)" in str(err) and "position [3, 2]" in str(err), err


def test_b2_n_gather_with_a_never_written_index_is_an_error_at_the_gather():
    a = RNG.standard_normal((16, 40)).astype(np.float32)
    idx = RNG.integers(0, 20, (16, 6)).astype(np.uint32)
    with pytest.raises(UninitializedReadError) as e:
        nki2.simulate(b2_n_gather)(a, idx, 8)
    assert e.value.rule == "uninitialized-read" and "position [8, 0]" in str(e.value), e.value
    assert_blames(e, b2_n_gather)


@nki.jit
def b1_local_gather(a, idx):
    """Beta 1: columns 0:10 of the source written; each core gathers at its indices."""
    x = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.sbuf)
    x[:, 0:10] = nl.load(a[:, 0:10])
    ix = nl.load(idx)
    d = nisa.local_gather(x, ix)  # a movement: the gathered elements keep their written-state
    out = nl.ndarray(d.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    nl.store(out, value=d)  # <- blame
    return out


def test_b1_local_gather_carries_the_gathered_elements_state():
    a = RNG.standard_normal((16, 20)).astype(np.float32)
    idx = RNG.integers(0, 10, (16, 2)).astype(np.uint16)
    got = devkit.simulate(b1_local_gather, a, idx)
    np.testing.assert_array_equal(got, a[:, idx.flatten(order="F")])
    idx[5, 1] = 15
    with pytest.raises(UninitializedReadError) as e:  # moved garbage: blamed where it is stored
        devkit.simulate(b1_local_gather, a, idx)
    assert e.value.rule == "uninitialized-read", e.value
    assert_blames(e, b1_local_gather)
    assert "16 element(s)" in str(e.value), e.value  # one gathered column, all 16 partitions of the core


# ---- selections with a reduction into the VectorE register -------------------------------------------------------


@nki2.jit
def b2_select_reduce(pred, a, b):
    """The predicate of partitions 4:8 never written: the result there is garbage where ``on_true`` differs
    from ``on_false`` (a per-partition column), and so are those rows' reductions."""
    pr = nl2.ndarray(pred.shape, dtype=pred.dtype, buffer=nl2.sbuf)
    nisa2.dma_copy(dst=pr[0:4, :], src=pred[0:4, :])
    x = nl2.ndarray(a.shape, dtype=nl2.float32, buffer=nl2.sbuf)
    nisa2.dma_copy(dst=x, src=a)
    f = nl2.ndarray(b.shape, dtype=nl2.float32, buffer=nl2.sbuf)
    nisa2.dma_copy(dst=f, src=b)
    d = nl2.ndarray(a.shape, dtype=nl2.float32, buffer=nl2.sbuf)
    red = nl2.ndarray((a.shape[0], 1), dtype=nl2.float32, buffer=nl2.sbuf)
    cmd = nisa2.reduce_cmd.reset_reduce
    nisa2.select_reduce(d, pr, x, f, reduce_res=red, reduce_cmd=cmd)  # <- blame
    out = nl2.ndarray((a.shape[0], 1), dtype=nl2.float32, buffer=nl2.shared_hbm)
    nisa2.dma_copy(dst=out, src=red)  # <- observed
    return out


def test_b2_select_reduce_with_a_never_written_predicate():
    pred = RNG.integers(0, 2, (8, 12)).astype(np.uint8)
    a = RNG.standard_normal((8, 12)).astype(np.float32)
    b = np.full((8, 1), -5.0, dtype=np.float32)
    a[4:8] = -5.0  # on_true equals on_false where the predicate is never written: it decides nothing
    got = nki2.simulate(b2_select_reduce)(pred, a, b)
    np.testing.assert_array_equal(got[:, 0], np.where(pred != 0, a, -5.0).max(axis=1))
    a[6, 3] = 1.0
    err = raises(b2_select_reduce, pred, a, b)
    assert "1 element(s)" in str(err) and "position [6, 0]" in str(err), err


@nki2.jit
def b2_range_select(a, lo, hi, store_rows):
    """The upper bound of partitions 6:8 never written: those rows are garbage."""
    x = nl2.ndarray(a.shape, dtype=nl2.float32, buffer=nl2.sbuf)
    nisa2.dma_copy(dst=x, src=a)
    b0 = nl2.ndarray(lo.shape, dtype=nl2.float32, buffer=nl2.sbuf)
    nisa2.dma_copy(dst=b0, src=lo)
    b1 = nl2.ndarray(hi.shape, dtype=nl2.float32, buffer=nl2.sbuf)
    nisa2.dma_copy(dst=b1[0:6, :], src=hi[0:6, :])
    d = nl2.ndarray(a.shape, dtype=nl2.float32, buffer=nl2.sbuf)
    nisa2.range_select(d, x, nl2.greater_equal, nl2.less, b0, b1, on_false_value=-1e9)  # <- blame
    out = nl2.ndarray((store_rows, a.shape[1]), dtype=nl2.float32, buffer=nl2.shared_hbm)
    nisa2.dma_copy(dst=out, src=d[0:store_rows, :])  # <- observed
    return out


def test_b2_range_select_with_a_never_written_bound(monkeypatch):
    monkeypatch.setenv("NKI_NC_VERSION", "gen3")
    a = RNG.standard_normal((8, 32)).astype(np.float32)
    lo = RNG.integers(0, 10, (8, 1)).astype(np.float32)
    hi = lo + RNG.integers(1, 20, (8, 1)).astype(np.float32)
    got = nki2.simulate(b2_range_select)(a, lo, hi, 6)
    j = np.arange(32)[None, :]
    np.testing.assert_array_equal(got, np.where((j >= lo) & (j < hi), a, np.float32(-1e9))[0:6])
    err = raises(b2_range_select, a, lo, hi, 8)
    assert "position [6, 0]" in str(err), err


@nki2.jit
def b2_exponential(a, store_rows):
    """Partitions 12:16 of the source never written: their exponentials and running sums are garbage."""
    x = nl2.ndarray(a.shape, dtype=nl2.float32, buffer=nl2.sbuf)
    nisa2.dma_copy(dst=x[0:12, :], src=a[0:12, :])
    d = nl2.ndarray(a.shape, dtype=nl2.float32, buffer=nl2.sbuf)
    s = nl2.ndarray((a.shape[0], 1), dtype=nl2.float32, buffer=nl2.sbuf)
    nisa2.exponential(d, x, reduce_res=s, reduce_cmd=nisa2.reduce_cmd.reset_reduce)  # <- blame
    out = nl2.ndarray((store_rows, 1), dtype=nl2.float32, buffer=nl2.shared_hbm)
    nisa2.dma_copy(dst=out, src=s[0:store_rows, :])  # <- observed
    return out


def test_b2_exponential_running_sum_of_never_written_partitions(gen4):
    a = RNG.standard_normal((16, 24)).astype(np.float32)
    got = nki2.simulate(b2_exponential)(a, 12)
    np.testing.assert_allclose(got[:, 0], np.exp(a[0:12]).sum(axis=1), rtol=1e-5)
    err = raises(b2_exponential, a, 16)
    assert "4 element(s)" in str(err) and "position [12, 0]" in str(err), err


# ---- MX: matmul columns and quantisation groups -----------------------------------------------------------------


@nki2.jit(platform_target="trn3")
def b2_quantize_then_matmul(x, w, cols_written, store_rows):
    """Quantise ``x`` of which columns ``cols_written``: were never written (whole 8x4 groups garbage, so
    packed stationary columns), multiply with a clean moving tile: output row ``i`` is stationary column ``i``."""
    p, f = x.shape
    src = nl2.ndarray((p, f), dtype=x.dtype, buffer=nl2.sbuf)
    nisa2.dma_copy(dst=src[:, 0:cols_written], src=x[:, 0:cols_written])
    q = nl2.ndarray((p, f // 4), dtype=nl2.float8_e4m3fn_x4, buffer=nl2.sbuf)
    qs = nl2.ndarray((p, f // 4), dtype=nl2.uint8, buffer=nl2.sbuf)
    nisa2.memset(dst=qs, value=0)
    nisa2.quantize_mx(dst=q, src=src, dst_scale=qs)  # <- blame
    wsrc = nl2.ndarray((p, f), dtype=w.dtype, buffer=nl2.sbuf)
    nisa2.dma_copy(dst=wsrc, src=w)
    mq = nl2.ndarray((p, f // 4), dtype=nl2.float8_e4m3fn_x4, buffer=nl2.sbuf)
    ms = nl2.ndarray((p, f // 4), dtype=nl2.uint8, buffer=nl2.sbuf)
    nisa2.memset(dst=ms, value=0)
    nisa2.quantize_mx(dst=mq, src=wsrc, dst_scale=ms)
    acc = nl2.ndarray((f // 4, f // 4), dtype=nl2.float32, buffer=nl2.psum)
    nisa2.nc_matmul_mx(acc, q, mq, qs, ms)
    res = nl2.ndarray((f // 4, f // 4), dtype=nl2.float32, buffer=nl2.sbuf)
    nisa2.tensor_copy(dst=res, src=acc)
    out = nl2.ndarray((store_rows, f // 4), dtype=nl2.float32, buffer=nl2.shared_hbm)
    nisa2.dma_copy(dst=out, src=res[0:store_rows, :])  # <- observed
    return out


def test_b2_mx_garbage_groups_reach_the_outputs_they_contract_into():
    x = RNG.standard_normal((32, 16)).astype(BF16)
    w = RNG.standard_normal((32, 16)).astype(BF16)
    full = nki2.simulate(b2_quantize_then_matmul)(x, w, 16, 4)  # everything written
    got = nki2.simulate(b2_quantize_then_matmul)(x, w, 8, 2)  # packed columns 2:4 garbage, rows 0:2 stored
    np.testing.assert_array_equal(got, full[0:2])
    err = raises(b2_quantize_then_matmul, x, w, 8, 4)
    assert "8 element(s)" in str(err) and "position [2, 0]" in str(err), err


@nki.jit
def b1_gather_flattened(a, idx):
    """Beta 1 ``nl.gather_flattened``: columns 0:10 of the data written; the gathered elements decide."""
    x = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.sbuf)
    x[:, 0:10] = nl.load(a[:, 0:10])
    g = nl.gather_flattened(x, nl.load(idx))  # <- blame
    out = nl.ndarray(idx.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    nl.store(out, value=g)  # <- observed
    return out


def test_b1_gather_flattened_carries_the_gathered_elements_state():
    a = RNG.standard_normal((16, 20)).astype(np.float32)
    idx = RNG.integers(0, 10, (16, 4)).astype(np.int32)
    got = devkit.simulate(b1_gather_flattened, a, idx)
    np.testing.assert_array_equal(got, np.take_along_axis(a, idx.astype(np.int64), axis=1))
    idx[2, 1] = 17
    err = raises(b1_gather_flattened, a, idx)
    assert "1 element(s)" in str(err) and "position [2, 1]" in str(err), err
