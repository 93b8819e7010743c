"""Uninitialised reads where the garbage is consumed, not where it is moved (docs/errors.md, ``uninitialized-read``).

A data movement between on-chip buffers (tile copy, assignment, transpose, SBUF-to-SBUF DMA, partition
shuffle, LNC-2 ``sendrecv``) carries each element's written-state to its destination; computing on a
never-written element, or storing one to HBM, stays an ``UninitializedReadError`` at that statement, and so
does a movement that reads nothing but never-written data.  Hardware-tested nki-library kernels move
partly written buffers this way (``router_topk``, ``find_nonzero_indices``).  Each buggy kernel has a
passing twin; both generations (Beta 1 ``neuronxcc.nki``, Beta 2 ``nki``) are covered.
"""

from __future__ import annotations

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import nki as nki2
import nki.isa as nisa2
import nki.language as nl2
import numpy as np
import pytest
from _nki_support import assert_blames, line_of, simulate_raises, uninit_raises

import devkit
from devkit.errors import UninitializedReadError

A = np.linspace(-1, 1, 128 * 64, dtype=np.float32).reshape(128, 64)


def raises_uninit(kernel, *args):
    return simulate_raises(UninitializedReadError, kernel, *args, rule="uninitialized-read")


# ---- Beta 1: a transpose of a partly written tile --------------------------------------------------------


@nki.jit
def transpose_left_half(a, use_all=False):
    """Columns 0:32 of t are written; its transpose has rows 0:32 written."""
    out = nl.ndarray((32 if not use_all else 64, 128), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
    t[:, 0:32] = nl.load(a[:, 0:32])
    tt = nisa.nc_transpose(t)  # moves the garbage columns along: not an error
    if use_all:
        y = nl.exp(tt)  # <- blame
    else:
        y = nl.exp(tt[0:32, :])
    nl.store(out, value=y)
    return out


def test_transposed_partial_tile_flows_until_its_garbage_is_computed_on():
    np.testing.assert_allclose(devkit.simulate(transpose_left_half, A), np.exp(A[:, 0:32].T), rtol=1e-6)
    err = raises_uninit(transpose_left_half, A, True)
    assert "4096 element(s)" in str(err) and "first at view position [32, 0]" in str(err)
    assert f"a data movement at {err.filename}:{line_of(transpose_left_half, '# moves')}" in str(err)


@nki.jit
def nl_transpose_then_add(a, use_all=False):
    out = nl.ndarray((32 if not use_all else 64, 128), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
    t[:, 0:32] = nl.load(a[:, 0:32])
    tt = nl.transpose(t)
    part = tt if use_all else tt[0:32, :]
    nl.store(out, value=nl.add(part, 1.0))  # <- blame
    return out


def test_nl_transpose_carries_written_state():
    np.testing.assert_allclose(devkit.simulate(nl_transpose_then_add, A), A[:, 0:32].T + 1.0, rtol=1e-6)
    raises_uninit(nl_transpose_then_add, A, True)


# ---- Beta 1: copies ----------------------------------------------------------------------------------------


@nki.jit
def copy_partial_then_store(a, store_all=False):
    """Rows 0:100 written; copied by the vector engine, by assignment and by DMA; then stored."""
    out = nl.ndarray((128 if store_all else 100, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
    t[0:100, :] = nl.load(a[0:100, :])
    c = nisa.tensor_copy(t)
    u = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
    u[...] = c
    w = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=w, src=u)
    if store_all:
        nl.store(out, value=w)  # <- blame
    else:
        nl.store(out, value=w[0:100, :])
    return out


def test_copies_carry_written_state_and_an_output_store_of_garbage_is_an_error():
    np.testing.assert_array_equal(devkit.simulate(copy_partial_then_store, A), A[0:100])
    err = raises_uninit(copy_partial_then_store, A, True)
    assert "1792 element(s)" in str(err) and "[100, 0]" in str(err)


@nki.jit
def copy_result_assigned_to_output(a, rows=128):
    out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
    t[0:100, :] = nl.load(a[0:100, :])
    out[0:rows, :] = nisa.tensor_copy(t[0:rows, :])  # <- blame
    return out


def test_a_moved_result_written_straight_into_an_output_is_checked_there():
    np.testing.assert_array_equal(devkit.simulate(copy_result_assigned_to_output, A, 100)[0:100], A[0:100])
    err = raises_uninit(copy_result_assigned_to_output, A)
    assert "writing 1792 element(s)" in str(err) and "into shared_hbm tensor" in str(err)


@nki.jit
def copy_then_compute(a, overwrite=False):
    out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
    t[0:100, :] = nl.load(a[0:100, :])
    c = nl.copy(t)
    if overwrite:  # the garbage rows of the copy are written before the compute
        c[100:128, :] = nl.load(a[100:128, :])
    nl.store(out, value=nl.multiply(c, 2.0))  # <- blame
    return out


def test_arithmetic_on_copied_garbage_is_blamed_on_the_arithmetic():
    np.testing.assert_allclose(devkit.simulate(copy_then_compute, A, True), 2 * A, rtol=1e-6)
    raises_uninit(copy_then_compute, A)


@nki.jit
def copy_of_nothing(a, write=False):
    out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
    if write:
        t[0:1, :] = nl.load(a[0:1, :])
    c = nisa.tensor_copy(t)  # <- blame
    nl.store(out[0:1, :], value=c[0:1, :])
    return out


def test_a_movement_reading_only_never_written_data_is_an_error():
    """Nothing the copy reads was ever written, so it cannot be the unused part of a partly written buffer."""
    raises_uninit(copy_of_nothing, A)
    np.testing.assert_array_equal(devkit.simulate(copy_of_nothing, A, True)[0], A[0])


@nki.jit
def accumulate_partial_transpose(a, full=False):
    out = nl.ndarray((64, 128), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
    t[:, 0:32] = nl.load(a[:, 0:32])
    if full:
        t[:, 32:64] = nl.load(a[:, 32:64])
    ps = nl.zeros((64, 128), dtype=nl.float32, buffer=nl.psum)
    ps += nisa.nc_transpose(t)  # <- blame
    nl.store(out, value=nl.copy(ps))
    return out


def test_accumulating_a_moved_partial_tile_computes_on_its_garbage():
    np.testing.assert_allclose(devkit.simulate(accumulate_partial_transpose, A, True), A.T, rtol=1e-6)
    raises_uninit(accumulate_partial_transpose, A)


@nki.jit
def shuffle_partial_partitions(a, read_all=False):
    """Partitions 0:16 of each quadrant written; the shuffle moves partition 0 of each quadrant to 31 and
    keeps the others, so partitions 16:31 keep their never-written state."""
    out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
    for q in nl.static_range(4):
        t[q * 32 : q * 32 + 16, :] = nl.load(a[q * 32 : q * 32 + 16, :])
    nisa.nc_stream_shuffle(src=t, dst=t, shuffle_mask=[255] * 31 + [0])
    rows = 17 if read_all else 16
    for q in nl.static_range(4):
        nl.store(out[q * 32 : q * 32 + rows, :], value=nl.add(t[q * 32 : q * 32 + rows, :], 0.0))  # <- blame
        nl.store(out[q * 32 + 31 : q * 32 + 32, :], value=t[q * 32 + 31 : q * 32 + 32, :])
    return out


def test_the_partition_shuffle_moves_written_state_per_partition():
    got = devkit.simulate(shuffle_partial_partitions, A)
    for q in range(4):
        np.testing.assert_array_equal(got[q * 32 : q * 32 + 16], A[q * 32 : q * 32 + 16])
        np.testing.assert_array_equal(got[q * 32 + 31], A[q * 32])
    raises_uninit(shuffle_partial_partitions, A, True)


# ---- Beta 2: LNC-2 sendrecv of a partly written buffer (nki-library router_topk, odd token count) ----------


@nki2.jit
def exchange_odd_rows(a, consume_all=False, store_all=False):
    """T = 5 rows split 2 + 3: each program writes its own rows of a 3-row buffer and sends the buffer; the
    peer uses only the rows the sender wrote."""
    pid = nl2.program_id(0)
    t = a.shape[0]
    first = t // 2
    mine_n = first if pid == 0 else t - first
    theirs_n = t - first if pid == 0 else first
    size = max(first, t - first)
    send = nl2.ndarray((size, a.shape[1]), dtype=a.dtype, buffer=nl2.sbuf)
    nisa2.dma_copy(send[0:mine_n, :], a[pid * first : pid * first + mine_n, :])
    recv = nl2.ndarray((size, a.shape[1]), dtype=a.dtype, buffer=nl2.sbuf)
    nisa2.sendrecv(send, recv, send_to_rank=1 - pid, recv_from_rank=1 - pid, pipe_id=0)
    out = nl2.ndarray(a.shape, dtype=a.dtype, buffer=nl2.shared_hbm)
    lo = (1 - pid) * first
    if consume_all:
        nisa2.tensor_scalar(recv, recv, nl2.multiply, 1.0)  # <- blame
    if store_all:
        nisa2.dma_copy(out[lo : lo + size, :], recv)  # <- garbage stored
    else:
        nisa2.dma_copy(out[lo : lo + theirs_n, :], recv[0:theirs_n, :])
    return out


def test_sendrecv_carries_written_state_to_the_peer():
    a = A[0:5, 0:8].copy()
    np.testing.assert_array_equal(nki2.simulate(exchange_odd_rows[2])(a), a)
    # computing on the received garbage row is legal while its result stays unused (dead garbage)
    np.testing.assert_array_equal(nki2.simulate(exchange_odd_rows[2])(a, True), a)
    # storing that result is the error, blamed on the computation that first consumed the garbage
    err = uninit_raises(exchange_odd_rows, a, True, True, lnc=2)
    want = line_of(exchange_odd_rows, "# <- garbage stored")
    assert f"computed at line {err.lineno}" in str(err) and f"reaches HBM at {err.filename}:{want}" in str(
        err
    ), err


def test_sendrecv_garbage_stored_to_an_output_is_an_error():
    a = A[0:6, 0:8].copy()  # even: rows 0:3 and 3:6, the store of 3 rows fits
    np.testing.assert_array_equal(nki2.simulate(exchange_odd_rows[2])(a, False, True), a)
    a = A[0:5, 0:8].copy()
    with pytest.raises(UninitializedReadError) as e:
        nki2.simulate(exchange_odd_rows[2])(a, False, True)
    # program 0 received 3 rows of which program 1 wrote 3; program 1 received 3 of which program 0 wrote 2
    assert_blames(e, exchange_odd_rows, "# <- garbage stored")


# ---- Beta 2: find_nonzero_indices in small (nki-library core/subkernels) -----------------------------------


@nki2.jit
def nonzero_of_scattered_columns(a, n_cols=8, consume_all=False, store_row=False):
    """Columns 0, 16, ... of a [128, 128] tile hold the input's first ``n_cols`` columns; a TensorE transpose
    (``is_transpose``) turns them into partitions 0, 16, ...; ``nonzero_with_count`` reads only those."""
    spread = nl2.ndarray((128, 128), dtype=nl2.float32, buffer=nl2.sbuf)
    for c in range(n_cols):
        nisa2.dma_copy(spread[:, c * 16 : c * 16 + 1], a[:, c : c + 1])
    ident = nl2.shared_identity_matrix(128, dtype=nl2.float32)
    tp = nl2.ndarray((128, 128), dtype=nl2.float32, buffer=nl2.psum)
    nisa2.nc_matmul(tp, spread, ident, is_transpose=True)
    rows = nl2.ndarray((128, 128), dtype=nl2.float32, buffer=nl2.sbuf)
    nisa2.tensor_copy(rows, tp)
    if consume_all:
        nisa2.tensor_scalar(rows, rows, nl2.add, 1.0)  # <- blame
    found = nl2.ndarray((128, 129), dtype=nl2.int32, buffer=nl2.sbuf)
    nisa2.nonzero_with_count(found, rows)
    out = nl2.ndarray((n_cols, 129), dtype=nl2.int32, buffer=nl2.shared_hbm)
    for c in range(n_cols):
        nisa2.dma_copy(out[c : c + 1, :], found[c * 16 : c * 16 + 1, :])
    if store_row:  # partition 1 of rows is never-written (a garbage column of spread)
        nisa2.dma_copy(out[0:1, 0:128], rows[1:2, :])
    return out


def _nonzero_reference(a: np.ndarray, n_cols: int) -> np.ndarray:
    want = np.full((n_cols, 129), -1, dtype=np.int32)
    for c in range(n_cols):
        nz = np.nonzero(a[:, c])[0]
        want[c, : nz.size] = nz
        want[c, 128] = nz.size
    return want


def test_find_nonzero_pattern_with_scattered_columns():
    a = np.zeros((128, 8), dtype=np.float32)
    a[::3, 0] = 1.0
    a[5:9, 1] = 2.0
    a[100:, 3] = -1.0
    for n in (8, 4):  # 4 columns: cores 64..112 compute on never-written partitions, whose results go unused
        got = nki2.simulate(nonzero_of_scattered_columns)(a, n)
        np.testing.assert_array_equal(got, _nonzero_reference(a, n))
    # computing on the never-written partitions of rows is legal: nonzero_with_count reads only partitions
    # 0, 16, ..., which hold data (dead garbage)
    got = nki2.simulate(nonzero_of_scattered_columns)(a, 8, True)
    np.testing.assert_array_equal(got, _nonzero_reference(a + 1.0, 8))
    uninit_raises(nonzero_of_scattered_columns, a, 8, True, True)  # a garbage result stored


@nki2.jit
def nonzero_result_of_garbage_stored(a, n_store=4):
    spread = nl2.ndarray((128, 128), dtype=nl2.float32, buffer=nl2.sbuf)
    for c in range(4):
        nisa2.dma_copy(spread[:, c * 16 : c * 16 + 1], a[:, c : c + 1])
    ident = nl2.shared_identity_matrix(128, dtype=nl2.float32)
    tp = nl2.ndarray((128, 128), dtype=nl2.float32, buffer=nl2.psum)
    nisa2.nc_matmul(tp, spread, ident, is_transpose=True)
    rows = nl2.ndarray((128, 128), dtype=nl2.float32, buffer=nl2.sbuf)
    nisa2.tensor_copy(rows, tp)
    found = nl2.ndarray((128, 129), dtype=nl2.int32, buffer=nl2.sbuf)
    nisa2.nonzero_with_count(found, rows)
    out = nl2.ndarray((n_store, 129), dtype=nl2.int32, buffer=nl2.shared_hbm)
    for c in range(n_store):
        nisa2.dma_copy(out[c : c + 1, :], found[c * 16 : c * 16 + 1, :])  # <- blame
    return out


def test_nonzero_results_of_never_written_partitions_are_never_written():
    a = np.zeros((128, 4), dtype=np.float32)
    a[3, 2] = 1.0
    np.testing.assert_array_equal(
        nki2.simulate(nonzero_result_of_garbage_stored)(a), _nonzero_reference(a, 4)
    )
    uninit_raises(nonzero_result_of_garbage_stored, a, 5)


# ---- Beta 2: SBUF-to-SBUF DMA copy -------------------------------------------------------------------------


@nki2.jit
def dma_partial_tile(a, store_all=False):
    t = nl2.ndarray((128, 64), dtype=a.dtype, buffer=nl2.sbuf)
    nisa2.dma_copy(t[0:64, :], a[0:64, :])
    u = nl2.ndarray((128, 64), dtype=a.dtype, buffer=nl2.sbuf)
    nisa2.dma_copy(u, t)  # moves the garbage rows along
    out = nl2.ndarray((128, 64), dtype=a.dtype, buffer=nl2.shared_hbm)
    if store_all:
        nisa2.dma_copy(out, u)  # <- blame
    else:
        nisa2.dma_copy(out[0:64, :], u[0:64, :])
        nisa2.dma_copy(out[64:128, :], a[64:128, :])
    return out


def test_dma_copy_between_sbuf_tiles_flows_and_the_output_store_is_checked():
    np.testing.assert_array_equal(nki2.simulate(dma_partial_tile)(A), A)
    err = uninit_raises(dma_partial_tile, A, True)
    assert "4096 element(s)" in str(err)


# ---- Beta 2: local_gather of a partly written tile (nki-library moe_tkg, gather of expert affinities) ------


@nki2.jit
def gather_token_affinities(aff, idx, store_all=False, index_memset=True):
    """``aff`` [T, E] lands in rows 0:T of a [128, E] tile; every partition of a 16-partition core gathers at
    its core's indices (rows 0:16 of ``ix``), so partitions T:128 gather never-written elements, which the
    kernel then leaves unused (moe_tkg_utils.py:142 keeps only each token's row)."""
    t, e = aff.shape
    a_sb = nl2.ndarray((128, e), dtype=nl2.float32, buffer=nl2.sbuf)
    nisa2.dma_copy(a_sb[0:t, :], aff)
    ix = nl2.ndarray((128, 16), dtype=nl2.uint16, buffer=nl2.sbuf)
    if index_memset:
        nisa2.memset(ix, 0)
    nisa2.dma_copy(ix[0:16, :], idx)
    g = nl2.ndarray((128, 256), dtype=nl2.float32, buffer=nl2.sbuf)
    nisa2.local_gather(dst=g, src_buffer=a_sb, index=ix, num_valid_indices=256)  # <- blame
    out = nl2.ndarray((128 if store_all else t, 256), dtype=nl2.float32, buffer=nl2.shared_hbm)
    if store_all:
        nisa2.dma_copy(out, g)  # <- garbage stored
    else:
        nisa2.dma_copy(out, g[0:t, :])
    return out


def test_local_gather_moves_written_state_and_checks_its_indices():
    aff = A[0:3, 0:8].copy()
    idx = np.random.default_rng(7).integers(0, 8, (16, 16)).astype(np.uint16)
    ids = idx.flatten(order="F")  # core 0's indices, partition-first
    np.testing.assert_array_equal(nki2.simulate(gather_token_affinities)(aff, idx), aff[:, ids])
    # the gathered rows of partitions 3:128 hold never-written data: storing them is the error
    with pytest.raises(UninitializedReadError) as e:
        nki2.simulate(gather_token_affinities)(aff, idx, True)
    assert_blames(e, gather_token_affinities, "# <- garbage stored")
    # indices are addresses: cores 1..7 reading never-written indices is an error at the gather
    err = uninit_raises(gather_token_affinities, aff, idx, False, False)
    assert "1792 element(s)" in str(err) and "[16, 0]" in str(err), err  # index rows 16:128, 16 each
