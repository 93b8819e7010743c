"""Never-written data flows through computations until it is observed (docs/errors.md, ``uninitialized-read``).

An instruction with a dataflow rule (:mod:`devkit.sim.dataflow`) may compute on never-written elements; the
results computed from them become never-written too.  Only an *observation* is an error: storing such a result
to HBM, using it as an index or register, moving nothing else, or reading it with an instruction that has no
rule.  The error blames the first computation that consumed never-written data (``.lineno``), and names the
observing line.  AWS's hardware-tested nki-library ``attention_tkg`` computes on dead lanes this way.

Each class has a passing twin (dead garbage) and a buggy kernel (the garbage observed), in both generations.
"""

from __future__ import annotations

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import nki as nki2
import nki.isa as nisa2
import nki.language as nl2
import numpy as np
from _nki_support import names_observer, simulate_raises, uninit_raises

import devkit
from devkit.errors import UninitializedReadError

A = np.linspace(-1, 1, 128 * 64, dtype=np.float32).reshape(128, 64)
B = np.linspace(0.5, 2, 128 * 32, dtype=np.float32).reshape(128, 32)


def raises_uninit(kernel, *args):
    return simulate_raises(UninitializedReadError, kernel, *args, rule="uninitialized-read")


# ---- Beta 1: element-wise --------------------------------------------------------------------------------------


@nki.jit
def exp_of_half_written(a, store_all=False):
    """Partitions 0:64 written; exp computes on all 128 (64 dead lanes)."""
    out = nl.ndarray((128 if store_all else 64, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
    t[0:64, :] = nl.load(a[0:64, :])
    y = nl.exp(t)  # <- blame
    if store_all:
        nl.store(out, value=y)  # <- observed
    else:
        nl.store(out, value=y[0:64, :])
    return out


def test_elementwise_dead_garbage_is_legal_and_a_stored_result_blames_the_computation():
    np.testing.assert_allclose(devkit.simulate(exp_of_half_written, A), np.exp(A[0:64]), rtol=1e-6)
    err = raises_uninit(exp_of_half_written, A, True)
    names_observer(err, exp_of_half_written, "# <- observed")
    assert "4096 element(s)" in str(err) and "reaches HBM" in str(err) and "allocated at" in str(err)


@nki.jit
def scale_by_partial_vector(a, b, store_all=False):
    """A (P, 1) per-partition operand written on partitions 0:32 only: tensor_scalar's rows 32: are garbage."""
    out = nl.ndarray((128 if store_all else 32, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    x = nl.load(a)
    v = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
    v[0:32, :] = nl.load(b[0:32, 0:1])
    y = nisa.tensor_scalar(x, nl.multiply, v, op1=nl.add, operand1=1.0)  # <- blame
    z = nl.add(y, 2.0)  # garbage moves on through a second computation
    nl.store(out, value=z if store_all else z[0:32, :])
    return out


def test_per_partition_scalar_operand_taints_only_its_partitions():
    got = devkit.simulate(scale_by_partial_vector, A, B)
    np.testing.assert_allclose(got, A[0:32] * B[0:32, 0:1] + 3.0, rtol=1e-6)
    err = raises_uninit(scale_by_partial_vector, A, B, True)
    assert "position [32, 0]" in str(err) and "reaches HBM" in str(err), err


# ---- Beta 1: free-axis reduce ------------------------------------------------------------------------------------


@nki.jit
def row_sums(a, cols=64, rows=128):
    """Columns 0:60 written; the reduce over ``cols`` columns is garbage when it reaches 60:64."""
    out = nl.ndarray((rows, 1), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
    t[:, 0:60] = nl.load(a[:, 0:60])
    t[0:64, 60:64] = nl.load(a[0:64, 60:64])
    r = nisa.tensor_reduce(nl.add, t[:, 0:cols], axis=[1])  # <- blame
    nl.store(out, value=r[0:rows, :])
    return out


def test_garbage_through_a_reduce_into_a_stored_value_is_an_error():
    np.testing.assert_allclose(devkit.simulate(row_sums, A, 60), A[:, 0:60].sum(1, keepdims=True), rtol=1e-5)
    # rows 0:64 are fully written: their sums are clean, rows 64: are dead
    np.testing.assert_allclose(devkit.simulate(row_sums, A, 64, 64), A[0:64].sum(1, keepdims=True), rtol=1e-5)
    err = raises_uninit(row_sums, A, 64, 128)
    assert "64 element(s)" in str(err) and "position [64, 0]" in str(err), err


# ---- Beta 1: matmul --------------------------------------------------------------------------------------------


@nki.jit
def matmul_partial(a, b, garbage_k=False, store_all=False):
    """out[M, N] = st[K, M].T @ mv[K, N]: st columns 32:64 never written (unused output partitions), or
    (``garbage_k``) partition 100 of mv never written (a contraction element of every column)."""
    out = nl.ndarray((64 if store_all else 32, 32), dtype=nl.float32, buffer=nl.shared_hbm)
    st = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
    st[:, 0:32] = nl.load(a[:, 0:32])
    if garbage_k:
        st[:, 32:64] = nl.load(a[:, 32:64])
    mv = nl.ndarray((128, 32), dtype=nl.float32, buffer=nl.sbuf)
    if garbage_k:
        mv[0:100, :] = nl.load(b[0:100, :])
        mv[101:128, :] = nl.load(b[101:128, :])
    else:
        mv[...] = nl.load(b)
    ps = nisa.nc_matmul(st, mv)  # <- blame
    res = nl.copy(ps)
    nl.store(out, value=res if store_all else res[0:32, :])
    return out


def test_matmul_garbage_in_unused_output_partitions_is_legal():
    got = devkit.simulate(matmul_partial, A, B)
    np.testing.assert_allclose(got, A[:, 0:32].T @ B, rtol=1e-4, atol=1e-4)
    err = raises_uninit(matmul_partial, A, B, False, True)  # the garbage partitions stored
    assert "1024 element(s)" in str(err) and "position [32, 0]" in str(err), err


def test_matmul_garbage_in_a_contraction_partition_taints_every_result():
    err = raises_uninit(matmul_partial, A, B, True)
    # every result is garbage: the PSUM evacuation (nl.copy) moves nothing else, which observes it
    assert "2048 element(s)" in str(err) and "moved with nothing written alongside" in str(err), err


# ---- Beta 1: activation with a reduction, selections -------------------------------------------------------------


@nki.jit
def exp_with_row_sums(a, rows=64):
    out = nl.ndarray((rows, 1), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
    t[0:64, :] = nl.load(a[0:64, :])
    s = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.activation_reduce(op=nl.exp, data=t, reduce_op=nl.add, reduce_res=s, bias=None)  # <- blame
    nl.store(out, value=s[0:rows, :])
    return out


def test_activation_reduce_result_rows_of_garbage_are_dead_until_stored():
    want = np.exp(A[0:64]).sum(1, keepdims=True)
    np.testing.assert_allclose(devkit.simulate(exp_with_row_sums, A), want, rtol=1e-5)
    raises_uninit(exp_with_row_sums, A, 128)


@nki.jit
def select_upper(a, keep_lower=False):
    """Rows 0:64 written; affine_select keeps x where i_p < 64 (the written rows), 0 elsewhere."""
    out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
    t[0:64, :] = nl.load(a[0:64, :])
    i_p, _ = nl.mgrid[0:128, 0:64]
    pred = (i_p >= 64) if keep_lower else (i_p < 64)
    y = nisa.affine_select(pred, t, 0.0)  # <- blame
    nl.store(out, value=y)
    return out


def test_affine_select_counts_only_the_chosen_source():
    want = np.vstack([A[0:64], np.zeros((64, 64), np.float32)])
    np.testing.assert_array_equal(devkit.simulate(select_upper, A), want)
    raises_uninit(select_upper, A, True)


@nki.jit
def bn_stats_of_garbage(a, store_all=False):
    """``bn_stats`` (a per-partition rule) on computed garbage in rows 64:128: those rows' statistics are
    garbage too, and storing them is blamed on the computation."""
    rows = 128 if store_all else 64
    out = nl.ndarray((rows, 6), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
    t[0:64, :] = nl.load(a[0:64, :])
    y = nl.multiply(t, 2.0)  # <- blame
    st = nisa.bn_stats(y)
    nl.store(out, value=st[0:rows, :])  # <- observed
    return out


def test_per_partition_statistics_of_garbage_rows_are_garbage():
    got = devkit.simulate(bn_stats_of_garbage, A)
    y = 2 * A[0:64].astype(np.float64)
    np.testing.assert_allclose(got[:, 1], y[:, 0::2].mean(axis=1), rtol=1e-5, atol=1e-6)
    err = raises_uninit(bn_stats_of_garbage, A, True)
    assert "384 element(s)" in str(err), err  # rows 64:128, 6 statistics each
    names_observer(err, bn_stats_of_garbage, "# <- observed")


@nki2.jit
def b2_seed_from_garbage(a, seed_written=True):
    """``set_rng_seed`` has no dataflow rule (a seed is engine state, not data): reading a computed garbage
    seed is the observation, blamed on the computation."""
    s = nl2.ndarray((1, 1), dtype=nl2.int32, buffer=nl2.sbuf)
    if seed_written:
        nisa2.memset(s, 7)
    t = nl2.ndarray((1, 1), dtype=nl2.int32, buffer=nl2.sbuf)
    nisa2.tensor_scalar(t, s, nl2.add, 1)  # <- blame
    nisa2.set_rng_seed(t)  # <- observed
    out = nl2.ndarray((1, 1), dtype=nl2.int32, buffer=nl2.shared_hbm)
    nisa2.dma_copy(out, t)
    return out


def test_b2_an_instruction_without_a_rule_observes_the_garbage():
    np.testing.assert_array_equal(nki2.simulate(b2_seed_from_garbage)(A), [[8]])
    err = uninit_raises(b2_seed_from_garbage, A, False)
    names_observer(err, b2_seed_from_garbage, "# <- observed")


# ---- Beta 2 ------------------------------------------------------------------------------------------------------


@nki2.jit
def b2_add_partial(a, b, store_all=False):
    """tensor_tensor of two tiles, one written on partitions 0:96 (the attention_tkg pattern: padding
    partitions of the last tile computed on, never stored)."""
    x = nl2.ndarray((128, 32), dtype=nl2.float32, buffer=nl2.sbuf)
    nisa2.dma_copy(x[0:96, :], a[0:96, 0:32])
    y = nl2.ndarray((128, 32), dtype=nl2.float32, buffer=nl2.sbuf)
    nisa2.dma_copy(y, b)
    z = nl2.ndarray((128, 32), dtype=nl2.float32, buffer=nl2.sbuf)
    nisa2.tensor_tensor(z, x, y, nl2.add)  # <- blame
    nisa2.reciprocal(z, z)  # in place, on garbage again
    rows = 128 if store_all else 96
    out = nl2.ndarray((rows, 32), dtype=nl2.float32, buffer=nl2.shared_hbm)
    nisa2.dma_copy(out, z[0:rows, :])  # <- observed
    return out


def test_b2_elementwise_dead_garbage_is_legal_and_stored_garbage_blames_the_origin():
    got = nki2.simulate(b2_add_partial)(A, B)
    np.testing.assert_allclose(got, 1.0 / (A[0:96, 0:32] + B[0:96]), rtol=1e-5)
    err = uninit_raises(b2_add_partial, A, B, True)
    names_observer(err, b2_add_partial, "# <- observed")
    assert "reaches HBM" in str(err), err


@nki2.jit
def b2_reduce_then_store(a, cols=64):
    t = nl2.ndarray((128, 64), dtype=nl2.float32, buffer=nl2.sbuf)
    nisa2.dma_copy(t[:, 0:48], a[:, 0:48])
    r = nl2.ndarray((128, 1), dtype=nl2.float32, buffer=nl2.sbuf)
    nisa2.tensor_reduce(r, nl2.maximum, t[:, 0:cols], axis=1)  # <- blame
    s = nl2.ndarray((128, 1), dtype=nl2.float32, buffer=nl2.sbuf)
    nisa2.activation(s, nl2.exp, r, scale=-1.0)
    out = nl2.ndarray((128, 1), dtype=nl2.float32, buffer=nl2.shared_hbm)
    nisa2.dma_copy(out, s)
    return out


def test_b2_reduce_over_garbage_into_a_stored_value():
    got = nki2.simulate(b2_reduce_then_store)(A, 48)
    np.testing.assert_allclose(got, np.exp(-A[:, 0:48].max(1, keepdims=True)), rtol=1e-5)
    uninit_raises(b2_reduce_then_store, A, 64)


@nki2.jit
def b2_matmul(a, b, garbage_k=False, store_all=False):
    st = nl2.ndarray((128, 64), dtype=nl2.float32, buffer=nl2.sbuf)
    nisa2.dma_copy(st[:, 0:40], a[:, 0:40])
    mv = nl2.ndarray((128, 32), dtype=nl2.float32, buffer=nl2.sbuf)
    nisa2.dma_copy(mv[0 : 127 if garbage_k else 128, :], b[0 : 127 if garbage_k else 128, :])
    ps = nl2.ndarray((64, 32), dtype=nl2.float32, buffer=nl2.psum)
    nisa2.nc_matmul(ps, st, mv)  # <- blame
    nisa2.nc_matmul(ps, st, mv)  # accumulates (implicit): garbage stays garbage
    res = nl2.ndarray((64, 32), dtype=nl2.float32, buffer=nl2.sbuf)
    nisa2.tensor_copy(res, ps)
    rows = 64 if store_all else 40
    out = nl2.ndarray((rows, 32), dtype=nl2.float32, buffer=nl2.shared_hbm)
    nisa2.dma_copy(out, res[0:rows, :])
    return out


def test_b2_matmul_unused_output_partitions_and_garbage_contraction():
    got = nki2.simulate(b2_matmul)(A, B)
    np.testing.assert_allclose(got, 2 * (A[:, 0:40].T @ B), rtol=1e-4, atol=1e-4)
    uninit_raises(b2_matmul, A, B, False, True)  # the garbage partitions 40:64 stored
    err = uninit_raises(b2_matmul, A, B, True)  # partition 127 of moving feeds every result
    assert "first at view position [0, 0]" in str(err), err


@nki2.jit
def b2_garbage_index(table, idx, use_garbage=False):
    """Indices computed from a partly written tile: a gather reading the garbage ones observes them."""
    i_raw = nl2.ndarray((16, 1), dtype=nl2.int32, buffer=nl2.sbuf)
    nisa2.dma_copy(i_raw[0:8, :], idx[0:8, :])
    i_sb = nl2.ndarray((16, 1), dtype=nl2.int32, buffer=nl2.sbuf)
    nisa2.tensor_scalar(i_sb, i_raw, nl2.add, 0)  # <- blame
    n = 16 if use_garbage else 8
    g = nl2.ndarray((n, 8), dtype=table.dtype, buffer=nl2.sbuf)
    src = table.ap(pattern=[[8, n], [1, 8]], offset=0, vector_offset=i_sb[0:n, :])  # <- observed
    nisa2.dma_copy(dst=g, src=src)
    out = nl2.ndarray((n, 8), dtype=table.dtype, buffer=nl2.shared_hbm)
    nisa2.dma_copy(out, g)
    return out


def test_b2_garbage_used_as_an_index_is_an_error():
    table = np.linspace(0, 1, 50 * 8, dtype=np.float32).reshape(50, 8)
    idx = np.array([[3], [7], [0], [49], [12], [5], [5], [30]] + [[0]] * 8, dtype=np.int32)
    got = nki2.simulate(b2_garbage_index)(table, idx)
    np.testing.assert_array_equal(got, table[idx[0:8, 0]])
    err = uninit_raises(b2_garbage_index, table, idx, True)
    names_observer(err, b2_garbage_index, "# <- observed")


@nki2.jit
def b2_predicated(a, b, pick_garbage=False):
    """dst = src where predicate != 0: src written on partitions 0:64 only; the predicate picks those (or
    not)."""
    src = nl2.ndarray((128, 32), dtype=nl2.float32, buffer=nl2.sbuf)
    nisa2.dma_copy(src[0:64, :], a[0:64, 0:32])
    pred = nl2.ndarray((128, 32), dtype=nl2.uint8, buffer=nl2.sbuf)
    nisa2.memset(pred[0:64, :], 1)
    nisa2.memset(pred[64:128, :], 1 if pick_garbage else 0)
    dst = nl2.ndarray((128, 32), dtype=nl2.float32, buffer=nl2.sbuf)
    nisa2.dma_copy(dst, b)
    nisa2.tensor_copy_predicated(dst, src, pred)  # <- blame
    out = nl2.ndarray((128, 32), dtype=nl2.float32, buffer=nl2.shared_hbm)
    nisa2.dma_copy(out, dst)
    return out


def test_b2_predicated_copy_counts_only_the_chosen_source():
    got = nki2.simulate(b2_predicated)(A, B)
    np.testing.assert_array_equal(got, np.vstack([A[0:64, 0:32], B[64:128]]))
    uninit_raises(b2_predicated, A, B, True)


@nki.jit
def where_and_sum(a, pick_garbage=False, sum_all=False):
    """nl.where picks the written half (or the garbage one); nl.sum reduces rows (some of them garbage)."""
    out = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
    t[:, 0:32] = nl.load(a[:, 0:32])
    _, i_f = nl.mgrid[0:128, 0:64]
    cond = nisa.iota(i_f, dtype=nl.float32)
    keep = nl.less(cond, 64.0 if pick_garbage else 32.0)
    w = nl.where(keep, t, 0.0)  # <- blame
    s = nl.sum(w[:, 0:64] if sum_all else w[:, 0:32], axis=1)
    nl.store(out, value=s)
    return out


def test_nl_where_counts_only_the_chosen_operand_and_nl_sum_reduces_garbage():
    got = devkit.simulate(where_and_sum, A)
    np.testing.assert_allclose(got, A[:, 0:32].sum(1, keepdims=True), rtol=1e-5)
    # the garbage half is never chosen: summing all 64 columns is clean
    np.testing.assert_allclose(devkit.simulate(where_and_sum, A, False, True), got, rtol=1e-6)
    raises_uninit(where_and_sum, A, True, True)


@nki2.jit
def b2_register_carry(a, b, rows=96):
    """Rows 96: of x never written: the first activation folds their garbage into the ScalarE accumulator
    register; the second (clean data, ``reduce_cmd.reduce``) adds to it and writes it to ``reduce_res``."""
    x = nl2.ndarray((128, 32), dtype=nl2.float32, buffer=nl2.sbuf)
    nisa2.dma_copy(x[0:96, :], a[0:96, 0:32])
    y = nl2.ndarray((128, 32), dtype=nl2.float32, buffer=nl2.sbuf)
    nisa2.dma_copy(y, b)
    e = nl2.ndarray((128, 32), dtype=nl2.float32, buffer=nl2.sbuf)
    nisa2.activation(e, nl2.exp, x, reduce_op=nl2.add, reduce_cmd=nisa2.reduce_cmd.reset_reduce)  # <- blame
    s = nl2.ndarray((128, 1), dtype=nl2.float32, buffer=nl2.sbuf)
    nisa2.activation(e, nl2.exp, y, reduce_op=nl2.add, reduce_res=s, reduce_cmd=nisa2.reduce_cmd.reduce)
    out = nl2.ndarray((rows, 1), dtype=nl2.float32, buffer=nl2.shared_hbm)
    nisa2.dma_copy(out, s[0:rows, :])
    return out


def test_b2_accumulator_register_carries_garbage_rows_to_reduce_res():
    got = nki2.simulate(b2_register_carry)(A, B)
    want = np.exp(A[0:96, 0:32]).sum(1, keepdims=True) + np.exp(B[0:96]).sum(1, keepdims=True)
    np.testing.assert_allclose(got, want, rtol=1e-5)
    err = uninit_raises(b2_register_carry, A, B, 128)
    assert "position [96, 0]" in str(err), err


@nki.jit
def scan_partial(a, cols=40):
    """Column 40 of x never written: the running scan is garbage from column 40 on."""
    out = nl.ndarray((128, cols), dtype=nl.float32, buffer=nl.shared_hbm)
    x = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
    x[:, 0:40] = nl.load(a[:, 0:40])
    x[:, 41:64] = nl.load(a[:, 41:64])
    ones = nl.full((128, 64), 1.0, dtype=nl.float32, buffer=nl.sbuf)
    r = nisa.tensor_tensor_scan(ones, x, 0.0, nl.multiply, nl.add)  # <- blame
    nl.store(out, value=r[:, 0:cols])
    return out


def test_scan_garbage_reaches_every_later_element():
    np.testing.assert_allclose(
        devkit.simulate(scan_partial, A), np.cumsum(A[:, 0:40], axis=1), rtol=1e-5, atol=1e-6
    )
    err = raises_uninit(scan_partial, A, 41)
    assert "128 element(s)" in str(err) and "position [0, 40]" in str(err), err


@nki.jit
def gather_by_computed_rows(data, idx, n=32):
    """Row indices written for partitions 0:32; computed on (+1) for all 64; a gather of ``n`` rows."""
    out = nl.ndarray((n, 64), dtype=data.dtype, buffer=nl.shared_hbm)
    raw = nl.ndarray((64, 1), dtype=nl.int32, buffer=nl.sbuf)
    raw[0:32, :] = nl.load(idx[0:32, :])
    rows = nl.add(raw, 1, dtype=nl.int32)  # <- blame
    i_p = nl.arange(n)[:, None]
    i_f = nl.arange(64)[None, :]
    x = nl.load(data[rows[i_p, 0], i_f])  # <- observed
    nl.store(out, value=x)
    return out


def test_garbage_used_as_a_gather_index_is_an_error():
    idx = (np.arange(64, dtype=np.int32) * 3 % 120).reshape(64, 1)
    np.testing.assert_array_equal(devkit.simulate(gather_by_computed_rows, A, idx), A[idx[0:32, 0] + 1])
    err = raises_uninit(gather_by_computed_rows, A, idx, 64)
    names_observer(err, gather_by_computed_rows, "# <- observed")


@nki2.jit
def b2_causal_select(a, keep_garbage=False):
    """Row p of x written on columns 0..p only (a causal mask's kept triangle); affine_select keeps
    ``i - p <= 0`` (or, buggy, ``i - p >= 0``) and fills the rest with -inf."""
    x = nl2.ndarray((32, 32), dtype=nl2.float32, buffer=nl2.sbuf)
    for p in range(32):
        nisa2.dma_copy(x[p : p + 1, 0 : p + 1], a[p : p + 1, 0 : p + 1])
    y = nl2.ndarray((32, 32), dtype=nl2.float32, buffer=nl2.sbuf)
    cmp = nl2.greater_equal if keep_garbage else nl2.less_equal
    nisa2.affine_select(y, [[1, 32]], -1, x, -np.inf, cmp_op=cmp)  # <- blame
    out = nl2.ndarray((32, 32), dtype=nl2.float32, buffer=nl2.shared_hbm)
    nisa2.dma_copy(out, y)
    return out


def test_b2_affine_select_counts_only_the_chosen_source():
    got = nki2.simulate(b2_causal_select)(A)
    want = np.where(np.tril(np.ones((32, 32), bool)), A[0:32, 0:32], -np.inf)
    np.testing.assert_array_equal(got, want)
    uninit_raises(b2_causal_select, A, True)


@nki.jit
def rewritten_then_moved(a):
    """y once held computed garbage, then was wholly rewritten; garbage moved in later is not computed
    garbage: storing it is blamed on the store, as before."""
    out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
    t[0:64, :] = nl.load(a[0:64, :])
    y = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
    y[...] = nl.exp(t)  # computed garbage in rows 64:, dead
    y[...] = nl.load(a)  # wholly rewritten
    y[...] = nl.copy(t)  # rows 64: never written again (moved in)
    nl.store(out, value=y)  # <- blame
    return out


def test_a_rewritten_tile_forgets_its_old_origin():
    err = raises_uninit(rewritten_then_moved, A)
    assert "computed at" not in str(err) and "a data movement at" in str(err), err


@nki2.jit
def b2_register_then_cumulative(a, b, vector=False, keep=False):
    """Rows 96: of x never written fold into an accumulator register (the ScalarE's via activation, or the
    VectorE's via tensor_scalar_reduce); then tensor_scalar_cumulative, which starts its scan from the VectorE
    register (``reduce_cmd=reduce``: ``keep``) or from the identity (``reset_reduce``)."""
    x = nl2.ndarray((128, 32), dtype=nl2.float32, buffer=nl2.sbuf)
    nisa2.dma_copy(x[0:96, :], a[0:96, 0:32])
    e = nl2.ndarray((128, 32), dtype=nl2.float32, buffer=nl2.sbuf)
    if vector:
        nisa2.tensor_scalar_reduce(e, x, nl2.multiply, 2.0, nl2.add)  # <- blame
    else:
        nisa2.activation(e, nl2.exp, x, reduce_op=nl2.add, reduce_cmd=nisa2.reduce_cmd.reset_reduce)
    y = nl2.ndarray((128, 32), dtype=nl2.float32, buffer=nl2.sbuf)
    nisa2.dma_copy(y, b)
    c = nl2.ndarray((128, 32), dtype=nl2.float32, buffer=nl2.sbuf)
    cmd = nisa2.reduce_cmd.reduce if keep else nisa2.reduce_cmd.reset_reduce
    nisa2.tensor_scalar_cumulative(c, y, nl2.multiply, nl2.add, 2.0, reduce_cmd=cmd)
    out = nl2.ndarray((128, 32), dtype=nl2.float32, buffer=nl2.shared_hbm)
    nisa2.dma_copy(out, c)  # <- observed
    return out


def test_b2_a_register_holding_garbage_rows_flows_into_a_scan_that_keeps_it():
    want = np.cumsum(2 * B, axis=1)
    got = nki2.simulate(b2_register_then_cumulative)(A, B)  # the ScalarE register: not what cumulative reads
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    got = nki2.simulate(b2_register_then_cumulative)(A, B, True)  # reset: the garbage rows are not read
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    err = uninit_raises(b2_register_then_cumulative, A, B, True, True)
    names_observer(err, b2_register_then_cumulative, "# <- observed")
    assert "1024 element(s)" in str(err) and "position [96, 0]" in str(err), err  # rows 96:128, every column
