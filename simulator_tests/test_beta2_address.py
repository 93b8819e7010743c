"""Issue 12: ``nl.ndarray(address=(partition_offset, free_offset))`` places an SBUF/PSUM tensor -- the address is
checked against the target and recorded (aliasing between placements is not modelled, as in AWS's simulator).
Each failing kernel has a passing twin; error class, rule and blamed line are asserted."""

from __future__ import annotations

import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np
from _beta2_support import fails

from devkit.errors import CapacityError, KernelArgumentError
from devkit.nki.runner import run_kernel

A = np.arange(128 * 64, dtype=np.float32).reshape(128, 64)


@nki.jit
def k_at(a, free_offset, partition_offset=0, rows=128):
    at = (partition_offset, free_offset)
    t = nl.ndarray((rows, 64), dtype=a.dtype, buffer=nl.sbuf, address=at)  # <- blame
    nisa.dma_copy(t, a[0:rows, :])
    out = nl.ndarray((rows, 64), dtype=a.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(out, t)
    return out


def test_a_placed_tensor_holds_its_values_and_its_address_is_recorded():
    res = run_kernel(k_at.func, (A, 150_000), {})
    np.testing.assert_array_equal(res.outputs, A)
    assert res.stats.sbuf_peak_bytes_per_partition >= 150_000 + 64 * 4


def test_placed_tensors_must_lie_inside_the_partitions():
    fails(k_at, CapacityError, "direct-alloc-range", A, 300_000)  # past the partition of every target
    fails(k_at, CapacityError, "direct-alloc-range", A, 0, 64)  # partitions [64, 192)
    nki.simulate(k_at)(A[:64], 0, 64, 64)  # partitions [64, 128)


@nki.jit
def k_overlap(a, second_offset):
    x = nl.ndarray((128, 64), dtype=a.dtype, buffer=nl.sbuf, address=(0, 1024))
    y = nl.ndarray((128, 64), dtype=a.dtype, buffer=nl.sbuf, address=(0, second_offset))
    nisa.dma_copy(x, a)
    nisa.memset(y, 0.0)  # overwrites x's bytes when the two overlap
    out = nl.ndarray((128, 64), dtype=a.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(out, x)
    return out


def test_overlapping_placed_tensors_are_not_aliased_as_in_aws_simulator():
    """AWS's simulator does not model aliasing between allocations (reference §6.9); nki-library's hardware-tested
    kernels place tensors over each other's bytes (qkv_cte's PSUM banks), so the kit does not report overlaps
    and each placed tensor keeps its own values."""
    np.testing.assert_array_equal(nki.simulate(k_overlap)(A, 1024 + 128), A)
    np.testing.assert_array_equal(nki.simulate(k_overlap)(A, 1024 + 256), A)


@nki.jit
def k_psum_at(a, free_offset, cols=1024):
    t = nl.ndarray((128, cols), dtype=nl.float32, buffer=nl.psum, address=(0, free_offset))  # <- blame
    nisa.memset(t, 2.0)
    s = nl.ndarray((128, cols), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(s, t)
    out = nl.ndarray((128, cols), dtype=nl.float32, buffer=nl.shared_hbm)
    nisa.dma_copy(out, s)
    return out


def test_psum_placement_follows_the_banks():
    np.testing.assert_array_equal(nki.simulate(k_psum_at)(A, 2 * 2048), np.full((128, 1024), 2.0, np.float32))
    fails(k_psum_at, CapacityError, "direct-alloc-range", A, 2048 + 1024)  # spans banks off a boundary
    fails(k_psum_at, CapacityError, "direct-alloc-range", A, 7 * 2048)  # banks 7 and 8: there is no bank 8
    nki.simulate(k_psum_at)(A, 1024, 128)  # 512 bytes inside bank 0


@nki.jit
def k_hbm_address(a, address):
    t = nl.ndarray((128, 64), dtype=a.dtype, buffer=nl.shared_hbm, address=address)  # <- blame
    nisa.dma_copy(t, a)
    return t


def test_address_applies_to_on_chip_tensors_and_is_a_pair():
    fails(k_hbm_address, KernelArgumentError, "bad-argument", A, (0, 0))
    fails(k_hbm_address, KernelArgumentError, "bad-argument", A, (0, -4))
    fails(k_hbm_address, KernelArgumentError, "bad-argument", A, 5)
    nki.simulate(k_hbm_address)(A, None)


@nki.jit
def k_same_address_per_program(a):
    """Both LNC-2 programs place a tensor at the same address of their own SBUF (nki-library's stack allocator)."""
    pid = nl.program_id(0)
    x = nl.ndarray((64, 64), dtype=a.dtype, buffer=nl.sbuf, address=(0, 1024))
    nisa.dma_copy(x, a[pid * 64 : (pid + 1) * 64, :])
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(out[pid * 64 : (pid + 1) * 64, :], x)
    return out


def test_lnc2_programs_place_tensors_in_their_own_memories():
    np.testing.assert_array_equal(nki.simulate(k_same_address_per_program[2])(A), A)
