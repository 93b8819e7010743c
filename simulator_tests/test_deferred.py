"""Deferred matmul products and PSUM accumulation chains (devkit.sim.deferred): a chain of K-tile products
settles as one stacked product, and every way of touching the memory involved settles it first."""

from __future__ import annotations

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import numpy as np
import pytest

import devkit
from devkit.sim import deferred
from devkit.sim.deferred import stack_rows


def _operands(seed: int, k: int, m: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Seeded fp32 ``lhsT`` (k, m) and ``rhs`` (k, n) of a product ``lhsT.T @ rhs``."""
    rng = np.random.default_rng(seed)
    return rng.standard_normal((k, m)).astype(np.float32), rng.standard_normal((k, n)).astype(np.float32)


def _assert_product(got, lhsT, rhs) -> None:
    """``got`` is ``lhsT.T @ rhs`` within fp32 summation-order rounding."""
    np.testing.assert_allclose(got, lhsT.T @ rhs, rtol=1e-5, atol=1e-4)


def _simulate_product(kernel, seed: int, k: int, m: int, n: int) -> None:
    """Simulate ``kernel(lhsT, rhs)`` on :func:`_operands` and check it computes ``lhsT.T @ rhs``."""
    lhsT, rhs = _operands(seed, k, m, n)
    _assert_product(devkit.simulate(kernel, lhsT, rhs), lhsT, rhs)


def _record_joins(monkeypatch, name):
    """Record ``(parts joined, joined without a copy)`` for each call of ``deferred.<name>``."""
    return _record(monkeypatch, name, lambda parts, view: (len(parts), view is not None))


def _record(monkeypatch, name, what):
    """Wrap ``deferred.<name>`` (one argument) and record ``what(argument, result)`` for each call."""
    calls = []
    real = getattr(deferred, name)

    def spy(arg):
        out = real(arg)
        calls.append(what(arg, out))
        return out

    monkeypatch.setattr(deferred, name, spy)
    return calls


# ---- stack_rows ------------------------------------------------------------------------------------------


def test_stack_rows_joins_consecutive_row_blocks_without_copying():
    base = np.arange(64 * 8, dtype=np.float32).reshape(64, 8)
    parts = [base[0:16, 2:6], base[16:40, 2:6], base[40:48, 2:6]]
    out = stack_rows(parts)
    assert out is not None
    np.testing.assert_array_equal(out, base[0:48, 2:6])
    assert np.shares_memory(out, base)
    assert not out.flags.writeable


def test_stack_rows_follows_a_row_stride():
    base = np.arange(64 * 8, dtype=np.float32).reshape(64, 8)
    out = stack_rows([base[0:32:2], base[32:64:2]])
    assert out is not None
    np.testing.assert_array_equal(out, base[0:64:2])


@pytest.mark.parametrize(
    "make",
    [
        lambda b, o: [b[0:16], b[17:33]],  # a gap
        lambda b, o: [b[16:32], b[0:16]],  # out of order
        lambda b, o: [b[0:16, 0:4], b[16:32, 0:5]],  # different widths
        lambda b, o: [b[0:16], o[16:32]],  # different arrays
        lambda b, o: [b[0:32:2], b[32:48]],  # different row strides
        lambda b, o: [b[0:16].copy(), b[16:32]],  # an owned copy
    ],
    ids=["gap", "order", "width", "arrays", "strides", "owned"],
)
def test_stack_rows_refuses_anything_else(make):
    base = np.zeros((64, 8), np.float32)
    other = np.zeros((64, 8), np.float32)
    assert stack_rows(make(base, other)) is None


# ---- kernels ---------------------------------------------------------------------------------------------


@nki.jit
def k_tiled(lhsT, rhs):
    """PSUM accumulation over K tiles loaded straight from the inputs."""
    out = nl.ndarray((lhsT.shape[1], rhs.shape[1]), dtype=nl.float32, buffer=nl.shared_hbm)
    acc = nl.zeros((lhsT.shape[1], rhs.shape[1]), nl.float32, buffer=nl.psum)
    for k in nl.affine_range(lhsT.shape[0] // 128):
        a = nl.load(lhsT[k * 128 : (k + 1) * 128, :])
        b = nl.load(rhs[k * 128 : (k + 1) * 128, :])
        acc += nisa.nc_matmul(a, b)
    nl.store(out, value=acc)
    return out


def test_k_tiled_chain_settles_as_one_stacked_product(monkeypatch):
    stacked = _record_joins(monkeypatch, "stack_rows")
    _simulate_product(k_tiled, 1, 512, 128, 256)
    # the stationary and the moving operands of the one chain were stacked (never one product per tile)
    assert stacked and all(parts == 4 and ok for parts, ok in stacked)


@nki.jit
def reused_buffers(lhsT, rhs):
    """The operand tiles are overwritten while products that read them may still be pending."""
    out = nl.ndarray((128, rhs.shape[1]), dtype=nl.float32, buffer=nl.shared_hbm)
    buf_a = nl.ndarray((128, 128), dtype=lhsT.dtype, buffer=nl.sbuf)
    buf_b = nl.ndarray((128, rhs.shape[1]), dtype=rhs.dtype, buffer=nl.sbuf)
    acc = nl.zeros((128, rhs.shape[1]), nl.float32, buffer=nl.psum)
    for k in nl.sequential_range(lhsT.shape[0] // 128):
        buf_a[...] = nl.load(lhsT[k * 128 : (k + 1) * 128, :])
        buf_b[...] = nl.load(rhs[k * 128 : (k + 1) * 128, :])
        acc += nisa.nc_matmul(buf_a, buf_b)
    nl.store(out, value=acc)
    return out


def test_overwriting_an_operand_settles_the_pending_products_first():
    _simulate_product(reused_buffers, 2, 384, 128, 64)


@nki.jit
def read_and_rewrite_midway(lhsT, rhs):
    """acc is read (copied out) and rewritten (scaled in place) between accumulations."""
    mid = nl.ndarray((128, rhs.shape[1]), dtype=nl.float32, buffer=nl.shared_hbm)
    out = nl.ndarray((128, rhs.shape[1]), dtype=nl.float32, buffer=nl.shared_hbm)
    acc = nl.zeros((128, rhs.shape[1]), nl.float32, buffer=nl.psum)
    a0 = nl.load(lhsT[0:128, :])
    b0 = nl.load(rhs[0:128, :])
    a1 = nl.load(lhsT[128:256, :])
    b1 = nl.load(rhs[128:256, :])
    acc += nisa.nc_matmul(a0, b0)
    acc += nisa.nc_matmul(a1, b1)
    nl.store(mid, value=nl.copy(acc))
    acc[...] = nl.multiply(acc, 2.0)
    acc += nisa.nc_matmul(a0, b0)
    nl.store(out, value=acc)
    return mid, out


def test_reading_or_rewriting_the_accumulator_settles_it_in_order():
    lhsT, rhs = _operands(3, 256, 128, 512)
    p0 = lhsT[:128].T @ rhs[:128]
    p1 = lhsT[128:].T @ rhs[128:]
    mid, out = devkit.simulate(read_and_rewrite_midway, lhsT, rhs)
    np.testing.assert_allclose(mid, p0 + p1, rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(out, 2 * (p0 + p1) + p0, rtol=1e-5, atol=1e-4)


@nki.jit
def product_read_directly(lhsT, rhs):
    """A matmul result both accumulated and stored from its own PSUM tile."""
    single = nl.ndarray((128, rhs.shape[1]), dtype=nl.float32, buffer=nl.shared_hbm)
    out = nl.ndarray((128, rhs.shape[1]), dtype=nl.float32, buffer=nl.shared_hbm)
    acc = nl.zeros((128, rhs.shape[1]), nl.float32, buffer=nl.psum)
    for k in nl.affine_range(2):
        a = nl.load(lhsT[k * 128 : (k + 1) * 128, :])
        b = nl.load(rhs[k * 128 : (k + 1) * 128, :])
        acc += nisa.nc_matmul(a, b)
    p = nisa.nc_matmul(nl.load(lhsT[0:128, :]), nl.load(rhs[0:128, :]))
    nl.store(single, value=p)
    nl.store(out, value=acc)
    return single, out


def test_a_product_read_as_a_tile_is_computed():
    lhsT, rhs = _operands(4, 256, 128, 96)
    single, out = devkit.simulate(product_read_directly, lhsT, rhs)
    np.testing.assert_allclose(single, lhsT[:128].T @ rhs[:128], rtol=1e-5, atol=1e-4)
    _assert_product(out, lhsT, rhs)


# ---- copies and stores that wait with their chain --------------------------------------------------------


@nki.jit
def mn_tiled(lhsT, rhs):
    """The tutorial's loop nest: every (m, n) block is a K chain, copied out and stored."""
    out = nl.ndarray((lhsT.shape[1], rhs.shape[1]), dtype=nl.float32, buffer=nl.shared_hbm)
    for m in nl.affine_range(lhsT.shape[1] // 128):
        for n in nl.affine_range(rhs.shape[1] // 128):
            acc = nl.zeros((128, 128), nl.float32, buffer=nl.psum)
            for k in nl.affine_range(lhsT.shape[0] // 128):
                a = nl.load(lhsT[k * 128 : (k + 1) * 128, m * 128 : (m + 1) * 128])
                b = nl.load(rhs[k * 128 : (k + 1) * 128, n * 128 : (n + 1) * 128])
                acc += nisa.nc_matmul(a, b)
            nl.store(out[m * 128 : (m + 1) * 128, n * 128 : (n + 1) * 128], value=nl.copy(acc))
    return out


def test_the_chains_of_a_loop_nest_become_one_product(monkeypatch):
    joined = _record_joins(monkeypatch, "stack_cols")
    _simulate_product(mn_tiled, 5, 256, 256, 384)
    # per m block, the 3 n chains side by side; then the 2 m blocks side by side
    assert joined == [(3, True), (3, True), (2, True)]


@nki.jit
def store_then_load(lhsT, rhs):
    """A stored copy of a chain is loaded back, and part of it is overwritten, before the kernel ends."""
    out = nl.ndarray((128, rhs.shape[1]), dtype=nl.float32, buffer=nl.shared_hbm)
    twice = nl.ndarray((128, rhs.shape[1]), dtype=nl.float32, buffer=nl.shared_hbm)
    acc = nl.zeros((128, rhs.shape[1]), nl.float32, buffer=nl.psum)
    for k in nl.affine_range(lhsT.shape[0] // 128):
        acc += nisa.nc_matmul(
            nl.load(lhsT[k * 128 : (k + 1) * 128, :]), nl.load(rhs[k * 128 : (k + 1) * 128, :])
        )
    nl.store(out, value=nl.copy(acc))
    back = nl.load(out)
    nl.store(twice, value=nl.multiply(back, 2.0))
    nl.store(out[:, 0:8], value=nl.zeros((128, 8), nl.float32, buffer=nl.sbuf))
    return out, twice


def test_a_deferred_store_is_carried_out_before_the_memory_is_used():
    lhsT, rhs = _operands(6, 256, 128, 64)
    ref = lhsT.T @ rhs
    out, twice = devkit.simulate(store_then_load, lhsT, rhs)
    np.testing.assert_allclose(twice, 2 * ref, rtol=1e-5, atol=1e-4)
    np.testing.assert_array_equal(out[:, 0:8], 0)  # the later store wins
    np.testing.assert_allclose(out[:, 8:], ref[:, 8:], rtol=1e-5, atol=1e-4)


@nki.jit
def many_chains(lhsT, rhs):
    out = nl.ndarray((128, rhs.shape[1]), dtype=nl.float32, buffer=nl.shared_hbm)
    for n in nl.affine_range(rhs.shape[1] // 4):
        acc = nl.zeros((128, 4), nl.float32, buffer=nl.psum)
        for k in nl.affine_range(2):
            a = nl.load(lhsT[k * 128 : (k + 1) * 128, :])
            b = nl.load(rhs[k * 128 : (k + 1) * 128, n * 4 : (n + 1) * 4])
            acc += nisa.nc_matmul(a, b)
        nl.store(out[:, n * 4 : (n + 1) * 4], value=nl.copy(acc))
    return out


def test_deferred_stores_are_carried_out_in_bounded_batches(monkeypatch):
    batches = _record(monkeypatch, "_batch", lambda evacs, _: len(evacs))
    _simulate_product(many_chains, 7, 256, 128, 4 * 70)
    assert batches == [deferred.Chains.MAX_WRITES, 70 - deferred.Chains.MAX_WRITES]


# ---- bounded memory: deferral never keeps a whole kernel's operands alive -------------------------------


@nki.jit
def accumulations_stored_late(a, b):
    """Per output block, a PSUM accumulation over K fresh operand tiles, then copied out and stored (the
    dV/dK pattern of flash attention): deferred, every chain and every waiting store would keep all of
    its operand tiles alive."""
    n, k = 8, a.shape[0] // 128
    out = nl.ndarray((n, 128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    for j in nl.affine_range(n):
        acc = nl.zeros((128, 512), dtype=nl.float32, buffer=nl.psum)
        for i in nl.affine_range(k):
            lhs = nl.multiply(nl.load(a[i * 128 : (i + 1) * 128, :]), j + 1)
            rhs = nl.load(b[i * 128 : (i + 1) * 128, :])
            acc += nisa.nc_matmul(lhs, rhs)
        nl.store(out[j], value=nl.copy(acc))
    return out


def test_deferred_work_is_bounded_by_held_bytes(monkeypatch):
    monkeypatch.setattr(deferred.Chains, "MAX_CHAIN_BYTES", 1 << 20)
    monkeypatch.setattr(deferred.Chains, "MAX_PENDING_BYTES", 2 << 20)
    seen = []
    real_add, real_evacuate = deferred.Chains.add, deferred.Chains.evacuate

    def add(self, *args):
        real_add(self, *args)
        seen.append((self.held_total, self.evac_held))

    def evacuate(self, *args):
        ev = real_evacuate(self, *args)
        seen.append((self.held_total, self.evac_held))
        return ev

    monkeypatch.setattr(deferred.Chains, "add", add)
    monkeypatch.setattr(deferred.Chains, "evacuate", evacuate)
    a, b = _operands(5, 10 * 128, 128, 512)
    got = devkit.simulate(accumulations_stored_late, a, b)
    want = np.stack([(a * (j + 1)).T @ b for j in range(8)])
    np.testing.assert_allclose(got, want, rtol=2e-4, atol=2e-3)
    step = 128 * 128 * 4 + 128 * 512 * 4  # operand bytes of one product (about 320 KiB)
    assert seen
    assert max(h for h, _ in seen) <= (1 << 20) + step
    assert max(e for _, e in seen) <= (2 << 20) + (1 << 20) + step


@nki.jit
def reshape_and_view(a):
    out = nl.ndarray((64, 256), dtype=a.dtype, buffer=nl.shared_hbm)
    flat = a.reshape((64, 256))
    bits = nl.load(flat).view(nl.int32)
    nl.store(out, value=nl.load(flat))
    assert bits.dtype == nl.int32
    return out


def test_a_finished_run_keeps_no_storage_alive():
    """Reshape/view aliases keep their original storage alive only as long as they live (a module-level
    registry used to keep every original of every run, a memory leak across a test session)."""
    import gc

    from devkit.sim.storage import Storage

    def alive() -> int:
        gc.collect()
        return sum(1 for o in gc.get_objects() if isinstance(o, Storage))

    a = np.ones((128, 128), np.float32)
    devkit.simulate(reshape_and_view, a)  # warm up imports and caches
    before = alive()
    for _ in range(3):
        np.testing.assert_array_equal(devkit.simulate(reshape_and_view, a), a.reshape(64, 256))
    assert alive() == before
