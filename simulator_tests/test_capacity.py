"""Issue 3, capacity: SBUF per target, compiler spills, PSUM banks and tile size, direct allocation.

Every negative test runs a small buggy kernel and asserts the error class and the blamed line (the
allocation that overflowed, marked ``# <- blame``); every one has a positive twin that must pass.
"""

from __future__ import annotations

import inspect
import os
import warnings

import neuronxcc.nki as nki
import neuronxcc.nki.compiler as ncc
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import numpy as np
import pytest
from _nki_support import line_of, simulate_raises

import devkit
from devkit.errors import CapacityError, KernelError, SpillWarning
from devkit.nki.runner import run_kernel
from devkit.sim.options import SimOptions
from devkit.trace import Trace

A = np.ones((128, 512), np.float32)
USABLE = {"trn1": 180224, "inf2": 180224, "trn2": 212984}


def raises(cls, kernel, *args, **kw):
    return simulate_raises(cls, kernel, *args, **kw)


def passes(kernel, *args, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("error", SpillWarning)
        return devkit.simulate(kernel, *args, **kw)


# ---- one SBUF tensor larger than a partition ---------------------------------------------------------


def sbuf_tile_kernel(free_bytes: int):
    @nki.jit
    def k(a):
        out = nl.ndarray((128, 4), dtype=nl.uint8, buffer=nl.shared_hbm)
        big = nl.ndarray((128, free_bytes), dtype=nl.uint8, buffer=nl.sbuf)  # <- blame
        big[:, 0:16] = 0
        nl.store(out, value=big[:, 0:4])
        return out

    return k


@pytest.mark.parametrize("target", ["trn1", "inf2", "trn2"])
def test_sbuf_tile_larger_than_the_usable_partition_fails_at_its_allocation(target):
    err = raises(CapacityError, sbuf_tile_kernel(USABLE[target] + 1), A, target=target)
    assert err.rule == "sbuf-capacity"
    assert str(USABLE[target]) in str(err) and target in str(err)


@pytest.mark.parametrize("target", ["trn1", "inf2", "trn2"])
def test_sbuf_tile_of_exactly_the_usable_partition_fits(target):
    passes(sbuf_tile_kernel(USABLE[target]), A, target=target)


def test_a_tile_too_big_for_trn1_fits_trn2():
    k = sbuf_tile_kernel(200_000)
    raises(CapacityError, k, A, target="trn1")
    passes(k, A, target="trn2")


# ---- the live set of compiler-managed SBUF tensors: spill warning / strict error -------------------


@nki.jit
def three_live_buffers(a):
    out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    b0 = nl.zeros((128, 15100), dtype=nl.float32, buffer=nl.sbuf)  # 60,400 B per partition
    b1 = nl.zeros((128, 15100), dtype=nl.float32, buffer=nl.sbuf)
    b2 = nl.zeros((128, 15100), dtype=nl.float32, buffer=nl.sbuf)  # <- blame
    x = nl.load(a)
    y = nl.add(x, b0[:, 0:512])
    y2 = nl.add(y, b1[:, 0:512])
    nl.store(out, value=nl.add(y2, b2[:, 0:512]))
    return out


@nki.jit
def three_buffers_one_at_a_time(a):
    out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    acc = nl.load(a)
    for _i in nl.sequential_range(3):
        b = nl.zeros((128, 15100), dtype=nl.float32, buffer=nl.sbuf)  # dies at the end of the iteration
        acc[...] = nl.add(acc, b[:, 0:512])
    nl.store(out, value=acc)
    return out


def test_live_set_over_capacity_warns_spill_at_the_allocation_and_records_spill_bytes():
    trace = Trace()
    with pytest.warns(SpillWarning) as rec:
        res = run_kernel(three_live_buffers.func, (A,), {}, sink=trace)
    first = rec[0]
    assert first.filename == inspect.getsourcefile(three_live_buffers.func)
    assert first.lineno == line_of(three_live_buffers, "# <- blame")
    msg = str(first.message)
    assert "allocated at" in msg and f":{first.lineno}" in msg and "spill" in msg
    # 3 x 60,400 B (plus the small tiles) live at once against 180,224 usable: the excess is stored
    # and reloaded once
    assert res.stats.sbuf_peak_bytes_per_partition >= 3 * 60_400
    assert res.stats.spill_bytes == 2 * (res.stats.sbuf_peak_bytes_per_partition - 180_224) * 128
    np.testing.assert_array_equal(res.outputs, A)  # a spill is a cost, not a wrong result


def test_live_set_within_capacity_records_no_spill():
    trace = Trace()
    with warnings.catch_warnings():
        warnings.simplefilter("error", SpillWarning)
        res = run_kernel(three_buffers_one_at_a_time.func, (A,), {}, sink=trace)
    assert res.stats.spill_bytes == 0
    assert not [i for i in trace.instrs if i.opcode.startswith("spill_")]


def test_strict_capacity_turns_the_spill_into_an_error():
    err = raises(CapacityError, three_live_buffers, A, options=SimOptions(strict_capacity=True))
    assert "strict_capacity" in str(err)
    passes(three_buffers_one_at_a_time, A, options=SimOptions(strict_capacity=True))


def test_devkit_strict_capacity_environment_variable(monkeypatch):
    monkeypatch.setenv("DEVKIT_STRICT_CAPACITY", "1")
    assert SimOptions().strict_capacity
    raises(CapacityError, three_live_buffers, A)
    passes(three_buffers_one_at_a_time, A)
    monkeypatch.setenv("DEVKIT_STRICT_CAPACITY", "0")
    assert not SimOptions().strict_capacity


def test_the_same_live_set_fits_trn2():
    @nki.jit
    def k(a):
        out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
        b0 = nl.zeros((128, 17000), dtype=nl.float32, buffer=nl.sbuf)
        b1 = nl.zeros((128, 17000), dtype=nl.float32, buffer=nl.sbuf)
        b2 = nl.zeros((128, 17000), dtype=nl.float32, buffer=nl.sbuf)  # 204,000 B live: > trn1, < trn2
        nl.store(out, value=nl.add(nl.add(b0[:, 0:512], b1[:, 0:512]), b2[:, 0:512]))
        return out

    with pytest.warns(SpillWarning):
        devkit.simulate(k, A, target="trn1")
    passes(k, A, target="trn2")


# ---- PSUM: 8 banks of 2 KiB per partition -----------------------------------------------------------


@nki.jit
def nine_accumulators(a):
    out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    x = nl.load(a[:, 0:128])
    y = nl.load(a)
    accs = []
    for _i in range(9):  # Python loop: nine accumulation groups live at once
        ps = nl.zeros((128, 512), dtype=nl.float32, buffer=nl.psum)  # <- blame
        ps += nisa.nc_matmul(x, y)
        accs.append(ps)
    total = nl.copy(accs[0])
    for ps in accs[1:]:  # every accumulator is read here, so all nine are live at once
        total = nl.add(total, ps)
    nl.store(out, value=total)
    return out


@nki.jit
def eight_accumulators(a):
    out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    x = nl.load(a[:, 0:128])
    y = nl.load(a)
    accs = []
    for _i in range(8):
        ps = nl.zeros((128, 512), dtype=nl.float32, buffer=nl.psum)
        ps += nisa.nc_matmul(x, y)
        accs.append(ps)
    total = nl.copy(accs[0])
    for ps in accs[1:]:
        total = nl.add(total, ps)
    nl.store(out, value=total)
    return out


def test_more_live_psum_accumulators_than_banks_is_an_error():
    err = raises(CapacityError, nine_accumulators, A)
    assert err.rule == "psum-capacity"


def test_eight_live_psum_accumulators_fit():
    np.testing.assert_allclose(passes(eight_accumulators, A), 8 * 128.0)


def small_accumulators(n: int):
    @nki.jit
    def k(a):
        out = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.shared_hbm)
        x = nl.load(a[:, 0:128])
        accs = []
        for _i in range(n):  # each accumulation group owns a bank, however small the tile
            ps = nl.zeros((128, 128), dtype=nl.float32, buffer=nl.psum)  # <- blame
            ps += nisa.nc_matmul(x, x)
            accs.append(ps)
        total = nl.copy(accs[0])
        for ps in accs[1:]:
            total = nl.add(total, ps)
        nl.store(out, value=total)
        return out

    return k


def test_small_psum_tiles_still_take_a_bank_each():
    err = raises(CapacityError, small_accumulators(9), A)
    assert err.rule == "psum-capacity" and "[128, 128]" in str(err)
    np.testing.assert_allclose(passes(small_accumulators(8), A), 8 * 128.0)


def test_psum_accumulators_in_a_loop_reuse_banks():
    @nki.jit
    def k(a):
        out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
        x = nl.load(a[:, 0:128])
        y = nl.load(a)
        for i in nl.affine_range(4):
            ps = nl.zeros((128, 512), dtype=nl.float32, buffer=nl.psum)  # dies every iteration
            for _k in nl.affine_range(3):
                ps += nisa.nc_matmul(x, y)
            nl.store(out[i * 32 : (i + 1) * 32, :], value=nl.copy(ps[0:32, :]))
        return out

    np.testing.assert_allclose(passes(k, A), 3 * 128.0)


@nki.jit
def psum_tile_of_two_banks(a):
    out = nl.ndarray((128, 8), dtype=nl.float32, buffer=nl.shared_hbm)
    ps = nl.zeros((128, 1024), dtype=nl.float32, buffer=nl.psum)  # <- blame
    nl.store(out, value=nl.copy(ps[:, 0:8]))
    return out


def test_psum_tile_larger_than_a_bank_is_an_error():
    err = raises(CapacityError, psum_tile_of_two_banks, A)
    assert err.rule == "psum-tile-size"


def test_psum_tile_of_one_bank_and_a_block_tensor_of_banks_fit():
    @nki.jit
    def k(a):
        out = nl.ndarray((128, 8), dtype=nl.float32, buffer=nl.shared_hbm)
        ps = nl.zeros((128, 512), dtype=nl.float32, buffer=nl.psum)
        blocks = nl.zeros((4, nl.par_dim(128), 512), dtype=nl.float32, buffer=nl.psum)  # 4 banks
        nl.store(out, value=nl.add(nl.copy(ps[:, 0:8]), blocks[3, :, 0:8]))
        return out

    passes(k, A)


# ---- direct allocation (nki.compiler) -------------------------------------------------------------


@nki.jit
def overlapping_allocations(a):
    out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    x = nl.ndarray((128, 512), dtype=nl.float32, buffer=ncc.sbuf.mod_alloc(base_addr=0))
    y = nl.ndarray((128, 512), dtype=nl.float32, buffer=ncc.sbuf.mod_alloc(base_addr=1024))  # overlaps x
    x[...] = nl.load(a)
    y[...] = nl.load(a)
    z = nl.ndarray((128, 512), dtype=nl.float32, buffer=ncc.sbuf.mod_alloc(base_addr=4096))
    z[...] = nl.add(x, y)  # <- blame
    nl.store(out, value=z)
    return out


@nki.jit
def disjoint_allocations(a):
    out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    x = nl.ndarray((128, 512), dtype=nl.float32, buffer=ncc.sbuf.mod_alloc(base_addr=0))
    y = nl.ndarray((128, 512), dtype=nl.float32, buffer=ncc.sbuf.mod_alloc(base_addr=2048))
    x[...] = nl.load(a)
    y[...] = nl.load(a)
    z = nl.ndarray((128, 512), dtype=nl.float32, buffer=ncc.sbuf.mod_alloc(base_addr=4096))
    z[...] = nl.add(x, y)
    nl.store(out, value=z)
    return out


def test_direct_allocations_overlapping_while_in_use_is_an_error():
    err = raises(CapacityError, overlapping_allocations, A)
    assert err.rule == "direct-alloc-overlap"
    src = inspect.getsourcefile(overlapping_allocations.func)
    assert f"{src}:{line_of(overlapping_allocations, 'overlaps x')}" in str(err)  # names the other tensor


def test_disjoint_direct_allocations_pass():
    np.testing.assert_array_equal(passes(disjoint_allocations, A), 2 * A)


@nki.jit
def too_few_physical_tiles(a):
    out = nl.ndarray((4, 128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.ndarray(
        (4, nl.par_dim(128), 512),
        dtype=nl.float32,
        buffer=ncc.sbuf.mod_alloc(base_addr=0, num_free_tiles=(2,)),
    )
    for i in nl.affine_range(4):
        t[i] = nl.load(a)  # all 4 logical tiles loaded, only 2 physical tiles
    for i in nl.affine_range(4):
        nl.store(out[i], value=t[i])  # <- blame
    return out


@nki.jit
def double_buffered_pipeline(a):
    """Logical tiles that alias (num_free_tiles=(2,)) are legal when their lifetimes do not overlap."""
    out = nl.ndarray((4, 128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.ndarray(
        (4, nl.par_dim(128), 512),
        dtype=nl.float32,
        buffer=ncc.sbuf.mod_alloc(base_addr=0, num_free_tiles=(2,)),
    )
    for i in nl.affine_range(4):
        t[i] = nl.load(a)
        nl.store(out[i], value=t[i])
    return out


def test_aliased_logical_tiles_read_after_being_overwritten_is_an_error():
    err = raises(CapacityError, too_few_physical_tiles, A)
    assert "logical tile [0]" in str(err) and "logical tile [2]" in str(err)


def test_aliased_logical_tiles_with_disjoint_lifetimes_pass():
    np.testing.assert_array_equal(passes(double_buffered_pipeline, A), np.stack([A] * 4))


def test_two_tensors_sharing_psum_banks_with_disjoint_lifetimes_pass():
    """allocated_attention reuses the same banks for two tensors whose lifetimes do not overlap."""

    @nki.jit
    def k(a):
        out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
        x = nl.ndarray((nl.par_dim(128), 128), dtype=nl.float32, buffer=ncc.sbuf.mod_alloc(base_addr=0))
        y = nl.ndarray((nl.par_dim(128), 512), dtype=nl.float32, buffer=ncc.sbuf.mod_alloc(base_addr=512))
        r = nl.ndarray((nl.par_dim(128), 512), dtype=nl.float32, buffer=ncc.sbuf.mod_alloc(base_addr=2560))
        x[...] = nl.load(a[:, 0:128])
        y[...] = nl.load(a)
        p1 = nl.ndarray(
            (2, nl.par_dim(128), 512),
            dtype=nl.float32,
            buffer=ncc.psum.mod_alloc(base_bank=0, num_bank_tiles=(2,)),
        )
        p2 = nl.ndarray(
            (2, nl.par_dim(128), 512),
            dtype=nl.float32,
            buffer=ncc.psum.mod_alloc(base_bank=0, num_bank_tiles=(2,)),
        )  # same banks as p1
        p1[0] += nisa.nc_matmul(x, y)
        r[...] = nl.copy(p1[0])  # p1 is dead from here on
        p2[0] += nisa.nc_matmul(x, y)
        r[...] = nl.add(r, p2[0])
        nl.store(out, value=r)
        return out

    np.testing.assert_allclose(passes(k, A), 256.0)


def direct_at(addr: int):
    @nki.jit
    def k(a):
        out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
        t = nl.ndarray((128, 512), dtype=nl.float32, buffer=ncc.sbuf.mod_alloc(base_addr=addr))  # <- blame
        t[...] = nl.load(a)
        nl.store(out, value=t)
        return out

    return k


def test_direct_allocation_running_past_the_partition_is_an_error():
    err = raises(CapacityError, direct_at(300_000), A)
    assert err.rule == "direct-alloc-range"


def test_direct_allocation_past_the_usable_size_warns_and_is_an_error_when_strict():
    k = direct_at(USABLE["trn1"] - 1024)  # 2048 bytes from there run past the usable size
    with pytest.warns(SpillWarning) as rec:
        devkit.simulate(k, A)
    assert rec[0].lineno == line_of(k, "# <- blame")
    raises(CapacityError, k, A, options=SimOptions(strict_capacity=True))
    passes(k, A, target="trn2")


def test_direct_allocation_at_the_end_of_the_usable_size_fits():
    passes(direct_at(USABLE["trn1"] - 2048), A)


@nki.jit
def psum_bank_out_of_range(a):
    out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    banks = ncc.psum.mod_alloc(base_bank=7, num_bank_tiles=(2,))  # banks 7 and 8: there is no bank 8
    ps = nl.ndarray((2, nl.par_dim(128), 512), dtype=nl.float32, buffer=banks)  # <- blame
    ps[0] = nl.load(a)
    nl.store(out, value=nl.copy(ps[0]))
    return out


@nki.jit
def psum_last_two_banks(a):
    out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    ps = nl.ndarray(
        (2, nl.par_dim(128), 512),
        dtype=nl.float32,
        buffer=ncc.psum.mod_alloc(base_bank=6, num_bank_tiles=(2,)),
    )
    ps[1] = nl.load(a)
    nl.store(out, value=nl.copy(ps[1]))
    return out


def test_direct_psum_allocation_past_the_last_bank_is_an_error():
    err = raises(CapacityError, psum_bank_out_of_range, A)
    assert err.rule == "direct-alloc-range"
    np.testing.assert_array_equal(passes(psum_last_two_banks, A), A)


def test_capacity_errors_are_kernel_errors_with_a_location():
    with pytest.raises(KernelError) as e:
        devkit.simulate(psum_tile_of_two_banks, A)
    assert os.path.samefile(e.value.filename, __file__)
    assert f"{e.value.filename}:{e.value.lineno}: [psum-tile-size]" in str(e.value)
