"""Issue 12: the dst-passing ``nki.isa`` instructions against NumPy references (one small kernel per op).

Each kernel loads its inputs, runs one instruction into a preallocated ``dst`` and stores ``dst``; the result
dtype is ``dst.dtype``.
"""

from __future__ import annotations

import ml_dtypes
import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np
import pytest
from _beta2_support import to_hbm, to_sbuf

from devkit.errors import UnsupportedError

BF16 = np.dtype(ml_dtypes.bfloat16)
RNG = np.random.default_rng(11)


@nki.jit
def k_tensor_tensor(a, b, op):
    d = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_tensor(d, to_sbuf(a), to_sbuf(b), op)
    return to_hbm(d)


@pytest.mark.parametrize(
    ("op", "ref"),
    [(nl.add, np.add), (nl.multiply, np.multiply), (nl.maximum, np.maximum), (nl.subtract, np.subtract)],
)
def test_tensor_tensor(op, ref):
    a = RNG.standard_normal((64, 96)).astype(BF16)
    b = RNG.standard_normal((64, 96)).astype(BF16)
    got = nki.simulate(k_tensor_tensor)(a, b, op)
    np.testing.assert_array_equal(got, ref(a.astype(np.float32), b.astype(np.float32)))


@nki.jit
def k_tensor_scalar(a, col):
    d = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    nisa.tensor_scalar(d, to_sbuf(a), nl.multiply, to_sbuf(col), op1=nl.add, operand1=1.5)
    return to_hbm(d)


def test_tensor_scalar_with_a_column_operand_then_a_scalar():
    a = RNG.standard_normal((32, 40)).astype(np.float32)
    col = RNG.standard_normal((32, 1)).astype(np.float32)
    np.testing.assert_allclose(nki.simulate(k_tensor_scalar)(a, col), a * col + 1.5, rtol=1e-6)


@nki.jit
def k_activation(a, bias):
    d = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.sbuf)
    nisa.activation(d, nl.tanh, to_sbuf(a), bias=to_sbuf(bias), scale=0.5)
    return to_hbm(d)


def test_activation_scale_and_bias():
    a = RNG.standard_normal((16, 64)).astype(np.float32)
    bias = RNG.standard_normal((16, 1)).astype(np.float32)
    np.testing.assert_allclose(
        nki.simulate(k_activation)(a, bias), np.tanh(a * 0.5 + bias), rtol=1e-5, atol=1e-6
    )


@nki.jit
def k_reduce(a):
    d = nl.ndarray((a.shape[0], 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_reduce(d, nl.add, to_sbuf(a), axis=1, keepdims=True)
    return to_hbm(d)


def test_tensor_reduce():
    a = RNG.standard_normal((48, 80)).astype(np.float32)
    np.testing.assert_allclose(nki.simulate(k_reduce)(a), a.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-5)


@nki.jit
def k_transpose(a):
    d = nl.ndarray((a.shape[1], a.shape[0]), dtype=a.dtype, buffer=nl.psum)
    nisa.nc_transpose(d, to_sbuf(a))
    s = nl.ndarray(d.shape, dtype=a.dtype, buffer=nl.sbuf)
    nisa.tensor_copy(s, d)
    return to_hbm(s)


def test_nc_transpose_on_the_tensor_engine():
    a = RNG.standard_normal((96, 64)).astype(np.float32)
    np.testing.assert_array_equal(nki.simulate(k_transpose)(a), a.T)


@nki.jit
def k_dma_transpose(a):
    d = nl.ndarray((a.shape[1], a.shape[0]), dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_transpose(d, a)
    return to_hbm(d)


def test_dma_transpose():
    a = RNG.standard_normal((16, 32)).astype(BF16)
    np.testing.assert_array_equal(nki.simulate(k_dma_transpose)(a), a.T)


@nki.jit
def k_stt(a, col, b):
    d = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.sbuf)
    nisa.scalar_tensor_tensor(d, to_sbuf(a), nl.subtract, to_sbuf(col), nl.multiply, to_sbuf(b))
    return to_hbm(d)


def test_scalar_tensor_tensor():
    a, b = (RNG.standard_normal((8, 24)).astype(np.float32) for _ in range(2))
    col = RNG.standard_normal((8, 1)).astype(np.float32)
    np.testing.assert_allclose(nki.simulate(k_stt)(a, col, b), (a - col) * b, rtol=1e-6)


@nki.jit
def k_reciprocal(a):
    d = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.sbuf)
    nisa.reciprocal(d, to_sbuf(a))
    return to_hbm(d)


def test_reciprocal():
    a = RNG.uniform(0.5, 4, (8, 16)).astype(np.float32)
    np.testing.assert_allclose(nki.simulate(k_reciprocal)(a), 1 / a, rtol=1e-6)


@nki.jit
def k_predicated(a, b, pred):
    d = to_sbuf(a)
    nisa.tensor_copy_predicated(d, to_sbuf(b), to_sbuf(pred))
    return to_hbm(d)


def test_tensor_copy_predicated_keeps_dst_where_false():
    a, b = (RNG.standard_normal((16, 32)).astype(np.float32) for _ in range(2))
    pred = RNG.integers(0, 2, (16, 32)).astype(np.uint8)
    np.testing.assert_array_equal(nki.simulate(k_predicated)(a, b, pred), np.where(pred != 0, b, a))


@nki.jit
def k_scan(a, b):
    d = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_tensor_scan(d, to_sbuf(a), to_sbuf(b), 0.0, nl.multiply, nl.add)
    return to_hbm(d)


def test_tensor_tensor_scan_is_a_linear_recurrence():
    a = RNG.uniform(0, 1, (4, 10)).astype(np.float32)
    b = RNG.standard_normal((4, 10)).astype(np.float32)
    want = np.zeros_like(a)
    r = np.zeros(4, np.float32)
    for i in range(10):
        r = a[:, i] * r + b[:, i]
        want[:, i] = r
    np.testing.assert_allclose(nki.simulate(k_scan)(a, b), want, rtol=1e-5, atol=1e-6)


@nki.jit
def k_bn(a):
    stats = nl.ndarray((a.shape[0], 6), dtype=nl.float32, buffer=nl.sbuf)
    nisa.bn_stats(stats, to_sbuf(a))
    mv = nl.ndarray((a.shape[0], 2), dtype=nl.float32, buffer=nl.sbuf)
    nisa.bn_aggr(mv, stats)
    return to_hbm(mv)


def test_bn_stats_and_aggr_give_mean_and_variance():
    a = RNG.standard_normal((32, 128)).astype(np.float32)
    got = nki.simulate(k_bn)(a)
    np.testing.assert_allclose(got[:, 0], a.mean(axis=1), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(got[:, 1], a.var(axis=1), rtol=1e-4, atol=1e-5)


@nki.jit
def k_max8(a):
    d = nl.ndarray((a.shape[0], 8), dtype=a.dtype, buffer=nl.sbuf)
    nisa.max8(d, to_sbuf(a))
    return to_hbm(d)


def test_max8_descending():
    a = RNG.standard_normal((16, 50)).astype(np.float32)
    np.testing.assert_array_equal(nki.simulate(k_max8)(a), -np.sort(-a, axis=1)[:, :8])


@nki.jit
def k_shuffle(a, mask):
    d = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    nisa.memset(d, -1.0)
    nisa.nc_stream_shuffle(d, to_sbuf(a), mask)
    return to_hbm(d)


def test_nc_stream_shuffle_moves_partitions_and_255_keeps_dst():
    a = RNG.standard_normal((32, 4)).astype(np.float32)
    mask = [31 - i for i in range(32)]
    mask[3] = 255
    got = nki.simulate(k_shuffle)(a, mask)
    want = a[::-1].copy()
    want[3] = -1.0
    np.testing.assert_array_equal(got, want)


@nki.jit
def k_partition_reduce(a):
    d = nl.ndarray((1, a.shape[1]), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_partition_reduce(d, nl.add, to_sbuf(a))
    return to_hbm(d)


def test_tensor_partition_reduce():
    a = RNG.standard_normal((64, 16)).astype(np.float32)
    np.testing.assert_allclose(
        nki.simulate(k_partition_reduce)(a), a.sum(axis=0, keepdims=True), rtol=1e-5, atol=1e-5
    )


@nki.jit
def k_select_reduce(pred, a):
    d = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.sbuf)
    red = nl.ndarray((a.shape[0], 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.select_reduce(
        d, to_sbuf(pred), to_sbuf(a), -5.0, reduce_res=red, reduce_cmd=nisa.reduce_cmd.reset_reduce
    )
    return to_hbm(d), to_hbm(red)


def test_select_reduce():
    a = RNG.standard_normal((8, 12)).astype(np.float32)
    pred = RNG.integers(0, 2, (8, 12)).astype(np.uint8)
    d, red = nki.simulate(k_select_reduce)(pred, a)
    want = np.where(pred != 0, a, -5.0)
    np.testing.assert_array_equal(d, want)
    np.testing.assert_array_equal(red[:, 0], want.max(axis=1))


@nki.jit
def k_tsr(a):
    d = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.sbuf)
    red = nl.ndarray((a.shape[0], 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_scalar_reduce(d, to_sbuf(a), nl.multiply, 2.0, nl.add, reduce_res=red)
    return to_hbm(d), to_hbm(red)


def test_tensor_scalar_reduce():
    a = RNG.standard_normal((8, 20)).astype(np.float32)
    d, red = nki.simulate(k_tsr)(a)
    np.testing.assert_array_equal(d, 2 * a)
    np.testing.assert_allclose(red[:, 0], (2 * a).sum(axis=1), rtol=1e-5, atol=1e-5)


@nki.jit
def k_tsr_chain(a, b, init):
    """Three tensor_scalar_reduce calls folding into the VectorE accumulator: reset_reduce, then reduce, then
    idle (the accumulator is kept and read out negated), then load_reduce from ``init``."""
    red = nl.ndarray((a.shape[0], 1), dtype=nl.float32, buffer=nl.sbuf)
    neg = nl.ndarray((a.shape[0], 1), dtype=nl.float32, buffer=nl.sbuf)
    loaded = nl.ndarray((a.shape[0], 1), dtype=nl.float32, buffer=nl.sbuf)
    d = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.sbuf)
    rc = nisa.reduce_cmd
    nisa.tensor_scalar_reduce(d, to_sbuf(a), nl.multiply, 2.0, nl.maximum, reduce_cmd=rc.reset_reduce)
    nisa.tensor_scalar_reduce(d, to_sbuf(b), nl.add, 1.0, nl.maximum, reduce_res=red, reduce_cmd=rc.reduce)
    nisa.tensor_scalar_reduce(
        d, to_sbuf(b), nl.add, 0.0, nl.maximum, reduce_res=neg, reduce_cmd=rc.idle, reduce_res_negate=True
    )
    nisa.tensor_scalar_reduce(
        d,
        to_sbuf(a),
        nl.multiply,
        1.0,
        nl.add,
        reduce_res=loaded,
        reduce_cmd=rc.load_reduce,
        reduce_init=init,
    )
    return red, neg, loaded


def test_tensor_scalar_reduce_accumulator_forms():
    a = RNG.standard_normal((8, 20)).astype(np.float32)
    b = RNG.standard_normal((8, 20)).astype(np.float32)
    red, neg, loaded = nki.simulate(k_tsr_chain)(a, b, 0.5)
    want = np.maximum((2 * a).max(axis=1), (b + 1).max(axis=1))[:, None]
    np.testing.assert_array_equal(red, want)  # reset_reduce, then reduce folds the second row maxima in
    np.testing.assert_array_equal(neg, -want)  # idle keeps the accumulator; the readout is negated
    np.testing.assert_allclose(loaded, 0.5 + a.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-5)


@nki.jit
def k_dma_compute(a, b, c):
    out = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    nisa.dma_compute(out, [a, b, c], nl.add)
    return out


def test_dma_compute_sums_its_sources():
    a, b, c = (RNG.standard_normal((16, 8)).astype(np.float32) for _ in range(3))
    np.testing.assert_allclose(nki.simulate(k_dma_compute)(a, b, c), a + b + c, rtol=1e-6)


@nki.jit
def k_memset_int(a):
    d = nl.ndarray((4, 4), dtype=nl.int32, buffer=nl.sbuf)
    nisa.memset(d, 4)
    return to_hbm(d)


def test_memset_integer():
    np.testing.assert_array_equal(
        nki.simulate(k_memset_int)(np.zeros(1, np.float32)), np.full((4, 4), 4, np.int32)
    )


@nki.jit
def k_affine_select(a):
    d = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    # causal mask: keep column j of row p where p - j >= 0
    nisa.affine_select(d, [[-1, a.shape[1]]], 1, to_sbuf(a), -9.0, cmp_op=nl.greater_equal, offset=0)
    return to_hbm(d)


def test_affine_select_builds_a_causal_mask():
    a = RNG.standard_normal((16, 16)).astype(np.float32)
    want = np.where(np.arange(16)[:, None] - np.arange(16)[None, :] >= 0, a, -9.0)
    np.testing.assert_array_equal(nki.simulate(k_affine_select)(a), want)


@nki.jit
def k_range_select(a, lo, hi):
    d = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.sbuf)
    red = nl.ndarray((a.shape[0], 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.range_select(
        d,
        to_sbuf(a),
        nl.greater_equal,
        nl.less,
        to_sbuf(lo),
        to_sbuf(hi),
        reduce_res=red,
        on_false_value=-1e9,
    )
    return to_hbm(d), to_hbm(red)


def test_range_select_keeps_a_column_range_and_reduces(monkeypatch):
    monkeypatch.setenv("NKI_NC_VERSION", "gen3")
    a = RNG.standard_normal((8, 32)).astype(np.float32)
    lo = RNG.integers(0, 10, (8, 1)).astype(np.float32)
    hi = lo + RNG.integers(1, 20, (8, 1)).astype(np.float32)
    d, red = nki.simulate(k_range_select)(a, lo, hi)
    j = np.arange(32)[None, :]
    want = np.where((j >= lo) & (j < hi), a, np.float32(-1e9))
    np.testing.assert_array_equal(d, want)
    np.testing.assert_array_equal(red[:, 0], want.max(axis=1))


@nki.jit
def k_n_gather(a, idx):
    d = nl.ndarray(idx.shape, dtype=a.dtype, buffer=nl.sbuf)
    nisa.nc_n_gather(d, to_sbuf(a), to_sbuf(idx))
    return to_hbm(d)


def test_nc_n_gather_per_partition():
    a = RNG.standard_normal((16, 40)).astype(np.float32)
    idx = RNG.integers(0, 40, (16, 6)).astype(np.uint32)
    np.testing.assert_array_equal(
        nki.simulate(k_n_gather)(a, idx), np.take_along_axis(a, idx.astype(np.int64), axis=1)
    )


@nki.jit
def k_local_gather(a, idx):
    d = nl.ndarray((a.shape[0], idx.shape[1] * 16), dtype=a.dtype, buffer=nl.sbuf)
    nisa.local_gather(d, to_sbuf(a), to_sbuf(idx))
    return to_hbm(d)


def test_local_gather_uses_each_cores_indices():
    a = RNG.standard_normal((32, 20)).astype(np.float32)
    idx = RNG.integers(0, 20, (32, 2)).astype(np.uint16)
    got = nki.simulate(k_local_gather)(a, idx)
    for core in range(2):
        ids = idx[16 * core : 16 * core + 16].flatten(order="F")
        np.testing.assert_array_equal(got[16 * core : 16 * core + 16], a[16 * core : 16 * core + 16][:, ids])


@nki.jit
def k_find8(a, v):
    d = nl.ndarray((a.shape[0], 8), dtype=nl.uint32, buffer=nl.sbuf)
    nisa.nc_find_index8(d, to_sbuf(a), to_sbuf(v))
    return to_hbm(d)


def test_nc_find_index8_unmatched_all_ones_and_duplicates_take_successive_matches():
    a = np.array([[5, 1, 5, 2, 9, 5, 3, 4, 0, 7]], dtype=np.float32)
    v = np.array([[5, 5, 9, 8, 1, 5, 5, 0]], dtype=np.float32)
    got = nki.simulate(k_find8)(a, v)
    np.testing.assert_array_equal(got, [[0, 2, 4, 0xFFFFFFFF, 1, 5, 0xFFFFFFFF, 8]])


@nki.jit
def k_replace8(a, v):
    d = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    idx = nl.ndarray((a.shape[0], 8), dtype=nl.uint32, buffer=nl.sbuf)
    nisa.nc_match_replace8(d, to_sbuf(a), to_sbuf(v), -1.0, dst_idx=idx)
    return to_hbm(d), to_hbm(idx)


def test_nc_match_replace8_replaces_first_matches_from_slot_7_down():
    a = np.array([[5, 1, 5, 2, 9, 3, 4, 0, 6, 7]], dtype=np.float32)
    v = np.array([[5, 2, 9, 9, 8, 1, 3, 5]], dtype=np.float32)
    d, idx = nki.simulate(k_replace8)(a, v)
    np.testing.assert_array_equal(d, [[-1, -1, -1, -1, -1, -1, 4, 0, 6, 7]])
    # slot 7 (value 5) takes the first 5 at 0, slot 0 the next at 2; slot 3 (9) takes 4, slot 2 finds none
    np.testing.assert_array_equal(idx, [[2, 3, 0xFFFFFFFF, 4, 0xFFFFFFFF, 1, 5, 0]])


@nki.jit
def k_cumulative(a):
    d = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_scalar_cumulative(d, to_sbuf(a), nl.multiply, nl.add, 2.0)
    return to_hbm(d)


def test_tensor_scalar_cumulative_running_sum():
    a = RNG.standard_normal((8, 12)).astype(np.float32)
    np.testing.assert_allclose(nki.simulate(k_cumulative)(a), np.cumsum(2 * a, axis=1), rtol=1e-5, atol=1e-5)


@nki.jit
def k_exponential(a, mx):
    d = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.sbuf)
    s = nl.ndarray((a.shape[0], 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.exponential(
        d, to_sbuf(a), max_value=to_sbuf(mx), reduce_res=s, reduce_cmd=nisa.reduce_cmd.reset_reduce
    )
    return to_hbm(d), to_hbm(s)


def test_exponential_with_running_sum(monkeypatch):
    monkeypatch.setenv("NKI_NC_VERSION", "gen4")
    a = RNG.standard_normal((8, 24)).astype(np.float32)
    mx = a.max(axis=1, keepdims=True)
    d, s = nki.simulate(k_exponential)(a, mx)
    np.testing.assert_allclose(d, np.exp(a - mx), rtol=1e-6)
    np.testing.assert_allclose(s[:, 0], np.exp(a - mx).sum(axis=1), rtol=1e-5)


@nki.jit
def k_nonzero(a):
    d = nl.ndarray((a.shape[0], a.shape[1] + 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.memset(d, 0)
    nisa.nonzero_with_count(d, to_sbuf(a), index_offset=100, padding_val=-1)
    return to_hbm(d)


def test_nonzero_with_count_on_every_16th_partition(monkeypatch):
    monkeypatch.setenv("NKI_NC_VERSION", "gen3")
    a = (RNG.random((32, 10)) < 0.4).astype(np.float32)
    got = nki.simulate(k_nonzero)(a)
    for p in range(32):
        if p % 16:
            np.testing.assert_array_equal(got[p], 0)  # other partitions are not written
            continue
        nz = np.nonzero(a[p])[0]
        want = np.full(11, -1)
        want[: nz.size] = nz + 100
        want[10] = nz.size
        np.testing.assert_array_equal(got[p], want)


@nki.jit
def k_bounds(ids):
    d = nl.ndarray((1, 2, ids.shape[1]), dtype=nl.float32, buffer=nl.sbuf)
    nisa.sequence_bounds(d, to_sbuf(ids))
    return to_hbm(d)


def test_sequence_bounds():
    ids = np.array([[1, 1, 2, 2, 2, 0, 3]], dtype=np.float32)
    got = nki.simulate(k_bounds)(ids)
    np.testing.assert_array_equal(got[0, 0], [0, 0, 2, 2, 2, 7, 6])
    np.testing.assert_array_equal(got[0, 1], [2, 2, 5, 5, 5, -1, 7])


@nki.jit
def k_tsr_load(a, init=None):
    d = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.sbuf)
    red = nl.ndarray((a.shape[0], 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_scalar_reduce(  # <- blame
        d,
        to_sbuf(a),
        nl.multiply,
        1.0,
        nl.add,
        reduce_res=red,
        reduce_cmd=nisa.reduce_cmd.load_reduce,
        reduce_init=init,
    )
    return red


def test_tensor_scalar_reduce_load_reduce_needs_an_initial_value():
    from _nki_support import assert_blames

    from devkit.errors import KernelArgumentError

    a = np.ones((4, 4), np.float32)
    with pytest.raises(KernelArgumentError) as e:
        nki.simulate(k_tsr_load)(a)
    assert e.value.rule == "bad-argument"
    assert_blames(e, k_tsr_load)
    np.testing.assert_array_equal(nki.simulate(k_tsr_load)(a, 2.0), np.full((4, 1), 6.0, np.float32))


@nki.jit
def k_depends(a, producer="earlier"):
    t = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    load = nisa.dma_copy(t, a)
    u = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    copy = nisa.tensor_copy(u, t)
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    store = nisa.dma_copy(out, u)
    which = {"earlier": load, "later": store, "value": 3}[producer]
    assert copy.depends_on(which) is copy  # <- blame
    return out


def test_nki_instruction_depends_on_earlier_instructions_only():
    from _nki_support import assert_blames

    from devkit.errors import KernelArgumentError

    a = RNG.standard_normal((8, 8)).astype(np.float32)
    np.testing.assert_array_equal(nki.simulate(k_depends)(a), a)
    assert isinstance(nisa.NkiInstruction, type)
    for producer, cls, rule in (
        ("later", UnsupportedError, "not-simulated"),
        ("value", KernelArgumentError, "bad-argument"),
    ):
        with pytest.raises(cls) as e:
            nki.simulate(k_depends)(a, producer)
        assert e.value.rule == rule
        assert_blames(e, k_depends)


@nki.jit
def k_hwdge_transpose(a):
    d = nl.ndarray((a.shape[1], a.shape[0]), dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_transpose(d, a, dge_mode=nisa.dge_mode.hwdge)  # <- blame
    out = nl.ndarray(d.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(out, d)
    return out


def test_hardware_dge_transpose_rules():
    from _nki_support import assert_blames

    from devkit.errors import DtypeError, TileShapeError

    a = RNG.standard_normal((16, 96)).astype(BF16)
    np.testing.assert_array_equal(nki.simulate(k_hwdge_transpose)(a), a.T)
    for bad, cls in ((a[:8], TileShapeError), (a.astype(np.float32), DtypeError)):
        with pytest.raises(cls) as e:
            nki.simulate(k_hwdge_transpose)(bad)
        assert e.value.rule == "hwdge-transpose"
        assert_blames(e, k_hwdge_transpose)


@nki.jit
def k_bad_binding(a, how):
    t = to_sbuf(a)
    d = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    args, kwargs = {
        "missing": ((d,), {}),
        "twice": ((d, t), {"src": t}),
        "many": ((d, t, 0, None, None, 1), {}),
    }[how]
    nisa.tensor_copy(*args, **kwargs)  # <- blame
    return to_hbm(d)


@pytest.mark.parametrize(
    ("how", "words"),
    [("missing", "missing 1 required argument(s): 'src'"), ("twice", "multiple values for argument 'src'"),
     ("many", "takes 5 positional arguments but 6 were given")],
)  # fmt: skip
def test_table_instructions_bind_arguments_like_python(how, words):
    from _nki_support import assert_blames

    from devkit.errors import KernelArgumentError

    a = np.ones((4, 4), np.float32)
    with pytest.raises(KernelArgumentError) as e:
        nki.simulate(k_bad_binding)(a, how)
    assert e.value.rule == "bad-arguments" and words in str(e.value)
    assert_blames(e, k_bad_binding)
