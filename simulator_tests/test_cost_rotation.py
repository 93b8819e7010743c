"""Compiler buffer rotation and scheduling of input-free instructions (issue 14).

Exact-time programs in the style of test_cost_scheduler.py (every clock 1 GHz, DMA 1 B/ns per engine,
fixed DMA costs 0), good/bad twins, and the allocator's record of multi-buffered and spilled tiles.
"""

from __future__ import annotations

import warnings

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import neuronxcc.nki.typing as nt
import numpy as np
import pytest
from test_cost_scheduler import run

import devkit
from devkit.cost.trace_builder import TraceBuilder
from devkit.errors import SpillWarning
from devkit.sim.alloc import RingAllocator
from devkit.trace import DMA, VECTOR


def _program(first_reads_nothing: bool) -> TraceBuilder:
    """ScalarE works 1000 ns; VectorE's add waits for it; then VectorE fills a fresh buffer (a memset,
    or -- bad twin -- a copy of the add's result) that a 128 x 64 B load overwrites."""
    b = TraceBuilder()
    s = b.scalar("activation", 1000)
    add = b.vector("tensor_copy", 100, deps=[s])
    fill = (
        b.vector("memset", 100, inputs=0) if first_reads_nothing else b.vector("tensor_copy", 100, deps=[add])
    )
    b.dma(partitions=128, bytes_per_partition=64, deps=[fill])
    return b


def test_input_free_memset_is_hoisted_past_its_engines_backlog() -> None:
    sched = run(_program(first_reads_nothing=True))
    ev = sched.timeline.events
    assert ev[2][1:] == (pytest.approx(0.0), pytest.approx(100.0))  # memset at once, not after the add
    assert ev[3][1:] == (pytest.approx(100.0), pytest.approx(100.0 + 8 * 64))  # the load follows it
    report = sched.report()
    # VectorE still spends the memset's 100 ns: the add ends at 1100, the engine is free at 1200
    assert report.latency_us * 1000 == pytest.approx(1200.0)
    assert report.engine_busy_us["vector"] * 1000 == pytest.approx(200.0)
    assert report.hoisted_instructions == 1


def test_instruction_reading_the_previous_result_stays_in_program_order() -> None:
    sched = run(_program(first_reads_nothing=False))
    ev = sched.timeline.events
    assert ev[2][1:] == (pytest.approx(1100.0), pytest.approx(1200.0))
    assert ev[3][1:] == (pytest.approx(1200.0), pytest.approx(1200.0 + 8 * 64))
    assert sched.report().latency_us * 1000 == pytest.approx(1712.0)
    assert sched.report().hoisted_instructions == 0


def test_hoisted_memset_still_waits_for_its_write_after_read_hazard() -> None:
    b = TraceBuilder()
    s = b.scalar("activation", 1000)
    reader = b.vector("tensor_copy", 100, deps=[s])  # last reader of the address the memset reuses
    b.vector("memset", 100, inputs=0, deps=[reader])
    ev = run(b).timeline.events
    assert ev[2][1:] == (pytest.approx(1100.0), pytest.approx(1200.0))


def test_dma_and_vector_codes_in_events() -> None:  # the event tuples name the engines used above
    ev = run(_program(True)).timeline.events
    from devkit.cost.timeline import ENGINE_ORDER

    assert ENGINE_ORDER[ev[2][0]] == VECTOR and ENGINE_ORDER[ev[3][0]] == DMA


# --- the allocator's rotation record ---------------------------------------------------------------


@pytest.mark.parametrize(("capacity", "expected"), [(4 * 1024, 4), (1024, 1), (64 * 1024, 8)])
def test_loop_local_tile_rotates_over_the_buffers_capacity_allows(capacity: int, expected: int) -> None:
    alloc = RingAllocator(capacity)
    for _ in range(8):  # eight iterations of a loop-local 1 KiB tile, each freed before the next
        p = alloc.allocate(1024, ("k.py", 7))
        alloc.free(p)
    assert alloc.buffers_by_site() == {("k.py", 7): expected}


def test_psum_tiles_rotate_over_the_banks() -> None:
    alloc = RingAllocator(16384, bank_bytes=2048)
    for _ in range(20):
        alloc.free(alloc.allocate(2048, ("k.py", 9)))
    assert alloc.buffers_by_site() == {("k.py", 9): 8}


@nki.jit
def loop_local_tiles(a):
    out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    acc = nl.zeros((128, 512), dtype=nl.float32, buffer=nl.sbuf)
    for i in nl.affine_range(4):
        t = nl.load(a[i * 128 : (i + 1) * 128, :])  # one tile per iteration
        acc[...] = nl.add(acc, t)
    nl.store(out, value=acc)
    return out


@nki.jit
def too_much_live(a):
    out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    b0 = nl.zeros((128, 15100), dtype=nl.float32, buffer=nl.sbuf)
    b1 = nl.zeros((128, 15100), dtype=nl.float32, buffer=nl.sbuf)
    b2 = nl.zeros((128, 15100), dtype=nl.float32, buffer=nl.sbuf)  # <- over
    x = nl.add(nl.add(b0[:, 0:512], b1[:, 0:512]), b2[:, 0:512])
    nl.store(out, value=nl.add(x, nl.load(a[0:128, :])))
    return out


def test_report_names_multi_buffered_tiles() -> None:
    report = devkit.estimate(loop_local_tiles, nt.tensor[[512, 512], nl.float32], target="trn1")
    sites = {k: n for k, n in report.multi_buffered.items() if k.startswith("test_cost_rotation.py")}
    assert sites and all(n >= 2 for n in sites.values())
    assert report.spilled_tiles == ()
    assert report.to_dict()["multi_buffered"] == report.multi_buffered


def test_report_names_the_tile_that_spilled() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SpillWarning)
        report = devkit.estimate(too_much_live, np.zeros((128, 512), np.float32), target="trn1")
    assert report.spill_bytes > 0
    assert len(report.spilled_tiles) == 1 and "test_cost_rotation.py" in report.spilled_tiles[0]
    assert "(sbuf)" in report.spilled_tiles[0]


def _blocked_accumulate(zero_fill: bool):
    """Per block: a fresh [128, 4, 512] buffer (nl.zeros, or -- twin -- nl.ndarray) filled by four loads,
    then four matmuls whose results VectorE adds into an SBUF accumulator (the NeuronMM fused kernel's
    load_tensor_block pattern)."""

    @nki.jit
    def kernel(x, w):
        out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
        acc = nl.zeros((128, 512), dtype=nl.float32, buffer=nl.sbuf)
        w_tile = nl.load(w)
        for blk in nl.sequential_range(16):
            if zero_fill:
                buf = nl.zeros((nl.par_dim(128), 4, 512), dtype=nl.bfloat16, buffer=nl.sbuf)
            else:
                buf = nl.ndarray((nl.par_dim(128), 4, 512), dtype=nl.bfloat16, buffer=nl.sbuf)
            for i in nl.affine_range(4):
                buf[:, i, :] = nl.load(x[blk * 512 + i * 128 : blk * 512 + (i + 1) * 128, :])
            for i in nl.affine_range(4):
                ps = nl.matmul(w_tile, buf[:, i, :], transpose_x=True)
                acc[...] = nl.add(acc, ps)
        nl.store(out, value=acc)
        return out

    return kernel


def test_zero_filled_block_buffers_do_not_serialise_the_loads() -> None:
    """The nl.zeros of each block's buffer is hoisted: loads of block b+1 run under block b's compute,
    as with an uninitialised buffer; without hoisting the memset would wait behind VectorE's adds."""
    specs = (nt.tensor[[8192, 512], nl.bfloat16], nt.tensor[[128, 128], nl.bfloat16])
    zeros = devkit.estimate(_blocked_accumulate(True), *specs, target="trn1")
    plain = devkit.estimate(_blocked_accumulate(False), *specs, target="trn1")
    assert zeros.hoisted_instructions >= 15 and plain.hoisted_instructions == 0
    assert zeros.latency_us <= plain.latency_us * 1.05
    assert any(n >= 2 for k, n in zeros.multi_buffered.items() if "test_cost_rotation.py" in k)


# --- compiler renaming of fully overwritten values ------------------------------------------------


def _rewrite_deps(key: object, box2: tuple) -> set[int]:
    """Load (0) writes a tile, VectorE (1) reads it, a second load (2) writes ``box2``: its deps."""
    from devkit.sim.deps import DependencyTracker

    tracker = DependencyTracker()
    sp = tracker.space(key, ())
    box = ((0, 128), (0, 512))
    tracker.access(sp, box, 0, "dma", True, set())
    tracker.access(sp, box, 1, "vector", False, set())
    deps: set[int] = set()
    tracker.access(sp, box2, 2, "dma", True, deps)
    return deps


def test_full_overwrite_of_a_compiler_tile_does_not_wait_for_its_readers() -> None:
    full = ((0, 128), (0, 512))
    assert _rewrite_deps(7, full) == set()  # a compiler-allocated tile: a new value in another buffer
    assert _rewrite_deps(("phys", "sbuf"), full) == {0, 1}  # a direct allocation: fixed address
    assert _rewrite_deps(("hbm", 7), full) == {0, 1}  # HBM keeps its addresses
    assert _rewrite_deps(7, ((0, 128), (0, 256))) == {0, 1}  # a partial write updates the old value
