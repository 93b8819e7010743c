"""The streaming scheduler on small hand-computed programs, with exact expected times.

All programs run on a simplified trn1 (every clock 1 GHz so cycles = ns, DMA engines at 1 B/ns,
HBM unlimited unless a test sets it) with the fixed DMA costs and the dependency latency set to 0
unless a test turns them on.
"""

from __future__ import annotations

import json
import sys
from dataclasses import replace

import pytest

from devkit.cost.params import Params, default_params
from devkit.cost.scheduler import Scheduler, schedule
from devkit.cost.trace_builder import TraceBuilder
from devkit.targets import ClockSpec, Target, load_target
from devkit.trace import GPSIMD, HBM, SBUF, SCALAR, VECTOR, MemoryStats


def simple_target(hbm_bw: float = 1e9, share_port: bool = False) -> Target:
    t = load_target("trn1")
    return replace(
        t,
        clock=ClockSpec(tensor_ghz=1.0, vector_ghz=1.0, scalar_ghz=1.0, gpsimd_ghz=1.0),
        dma=replace(t.dma, engine_bw_bytes_per_ns=1.0),
        hbm=replace(t.hbm, bw_bytes_per_ns=hbm_bw),
        pipeline=replace(t.pipeline, vector_gpsimd_share_sbuf_port=share_port),
    )


def simple_params(**values: float) -> Params:
    base = dict(
        dma_descriptor_ns=0.0,
        dma_fixed_latency_ns=0.0,
        dma_queue_busy_ns=0.0,
        dma_transfer_engine_ns=0.0,
        dependency_latency_cycles=0.0,
        dma_transpose_efficiency=1.0,
        kernel_fixed_ns=0.0,
    )
    base.update(values)
    return default_params("trn1").replace(**base)


def run(
    b: TraceBuilder,
    target: Target | None = None,
    params: Params | None = None,
    stats: MemoryStats | None = None,
) -> Scheduler:
    sched = Scheduler(target or simple_target(), params or simple_params())
    for instr in b.instrs:
        sched.emit(instr)
    sched.finish(stats or MemoryStats())
    return sched


def latency_ns(b: TraceBuilder, **kw: object) -> float:
    return run(b, **kw).report().latency_us * 1000  # type: ignore[arg-type]


# --- compute engines -----------------------------------------------------------------------------


def test_serial_chain_on_one_engine() -> None:
    b = TraceBuilder()
    a = b.vector("tensor_copy", 100)
    c = b.vector("tensor_copy", 100, deps=[a])
    b.vector("tensor_copy", 100, deps=[c])
    assert latency_ns(b) == pytest.approx(300)


def test_program_order_on_one_engine_without_deps() -> None:
    b = TraceBuilder()
    for _ in range(3):
        b.vector("tensor_copy", 100)
    assert latency_ns(b) == pytest.approx(300)


def test_dependency_latency_only_on_dependent_instructions() -> None:
    chain, independent = TraceBuilder(), TraceBuilder()
    a = chain.vector("tensor_copy", 100)
    c = chain.vector("tensor_copy", 100, deps=[a])
    chain.vector("tensor_copy", 100, deps=[c])
    for _ in range(3):
        independent.vector("tensor_copy", 100)
    params = simple_params(dependency_latency_cycles=10)
    assert latency_ns(chain, params=params) == pytest.approx(320)
    assert latency_ns(independent, params=params) == pytest.approx(300)


def test_two_independent_engines_overlap() -> None:
    b = TraceBuilder()
    b.vector("tensor_copy", 100)
    b.scalar("activation", 200)
    sched = run(b)
    report = sched.report()
    assert report.latency_us * 1000 == pytest.approx(200)
    assert report.engine_busy_us["vector"] * 1000 == pytest.approx(100)
    assert report.engine_busy_us["scalar"] * 1000 == pytest.approx(200)


def test_cross_engine_dependency_serialises() -> None:
    b = TraceBuilder()
    v = b.vector("tensor_copy", 100)
    b.scalar("activation", 200, deps=[v])
    assert latency_ns(b) == pytest.approx(300)


def test_accumulating_matmuls_are_pipelined() -> None:
    """TensorE -> TensorE dependencies (PSUM accumulation) pay no dependency latency; others do."""
    b = TraceBuilder()
    m0 = b.matmul(128, 512)
    m1 = b.matmul(128, 512, deps=[m0], accumulate=True)
    b.vector("tensor_copy", 512, deps=[m1], in_buffer="psum")
    assert latency_ns(b, params=simple_params(dependency_latency_cycles=100)) == pytest.approx(
        1024 + 100 + 512
    )


def test_vector_and_gpsimd_share_the_sbuf_port_on_nc_v2() -> None:
    b = TraceBuilder()
    b.vector("tensor_copy", 100)
    b.gpsimd("iota", 50)  # 150 + 50 cycles
    assert latency_ns(b, target=simple_target(share_port=True)) == pytest.approx(300)
    assert latency_ns(b, target=simple_target(share_port=False)) == pytest.approx(200)


# --- DMA -----------------------------------------------------------------------------------------


def test_dma_compute_overlap() -> None:
    """Load i+1 while computing i: loads take 800 ns (128 x 100 B over 16 engines), compute 500 ns."""
    b = TraceBuilder()
    for _ in range(3):
        ld = b.dma(partitions=128, bytes_per_partition=100)
        b.vector("tensor_copy", 500, deps=[ld])
    assert latency_ns(b) == pytest.approx(3 * 800 + 500)  # not 3 * (800 + 500)


def test_compute_bound_pipeline() -> None:
    b = TraceBuilder()
    for _ in range(3):
        ld = b.dma(partitions=128, bytes_per_partition=100)
        b.vector("tensor_copy", 1000, deps=[ld])
    assert latency_ns(b) == pytest.approx(800 + 3 * 1000)


def test_dma_spreads_over_16_engines_versus_one() -> None:
    wide, narrow = TraceBuilder(), TraceBuilder()
    wide.dma(partitions=128, bytes_per_partition=64)  # 8192 B over 16 engines
    narrow.dma(partitions=8, bytes_per_partition=1024)  # 8192 B on one engine
    assert latency_ns(wide) == pytest.approx(512)
    assert latency_ns(narrow) == pytest.approx(8192)


def test_small_transfers_run_in_parallel_on_different_engines() -> None:
    b = TraceBuilder()
    for _ in range(16):
        b.dma(partitions=8, bytes_per_partition=1024)
    assert latency_ns(b) == pytest.approx(8192)
    b.dma(partitions=8, bytes_per_partition=1024)  # a 17th must wait for a free engine
    assert latency_ns(b) == pytest.approx(2 * 8192)


def test_dependency_on_a_dma_finishing() -> None:
    b = TraceBuilder()
    ld = b.dma(partitions=128, bytes_per_partition=64)
    b.vector("tensor_copy", 100, deps=[ld])
    # DMA results are ready when the transfer ends: no dependency latency is added
    assert latency_ns(b, params=simple_params(dependency_latency_cycles=50)) == pytest.approx(512 + 100)


def test_fixed_latency_is_hidden_by_pipelined_transfers() -> None:
    b = TraceBuilder()
    b.dma(partitions=128, bytes_per_partition=64, queue="a")
    b.dma(partitions=128, bytes_per_partition=64, queue="b")
    params = simple_params(dma_fixed_latency_ns=1000)
    assert latency_ns(b, params=params) == pytest.approx(1000 + 512 + 512)


def test_queue_is_fifo_for_the_fixed_cost() -> None:
    same, split = TraceBuilder(), TraceBuilder()
    for q in ("a", "a"):
        same.dma(partitions=8, bytes_per_partition=1024, queue=q)
    for q in ("a", "b"):
        split.dma(partitions=8, bytes_per_partition=1024, queue=q)
    params = simple_params(dma_queue_busy_ns=100)
    assert latency_ns(same, params=params) == pytest.approx(100 + 8192)
    assert latency_ns(split, params=params) == pytest.approx(8192)


def test_default_queue_is_the_source_line() -> None:
    b = TraceBuilder()
    b.dma(partitions=8, bytes_per_partition=1024, line=1)
    b.dma(partitions=8, bytes_per_partition=1024, line=1)
    b.dma(partitions=8, bytes_per_partition=1024, line=2)
    assert latency_ns(b, params=simple_params(dma_queue_busy_ns=100)) == pytest.approx(100 + 8192)


def test_descriptor_overhead_per_engine() -> None:
    b = TraceBuilder()
    b.dma(partitions=128, bytes_per_partition=64)  # 128 descriptors, 8 per engine
    assert latency_ns(b, params=simple_params(dma_descriptor_ns=10)) == pytest.approx(8 * 10 + 512)


def test_hbm_cap_binds() -> None:
    b = TraceBuilder()
    b.dma(partitions=128, bytes_per_partition=128)  # engines alone: 1024 ns; HBM at 4 B/ns: 4096 ns
    assert latency_ns(b, target=simple_target(hbm_bw=1e9)) == pytest.approx(1024)
    assert latency_ns(b, target=simple_target(hbm_bw=4.0)) == pytest.approx(4096)
    b.dma(partitions=128, bytes_per_partition=128)
    assert latency_ns(b, target=simple_target(hbm_bw=4.0)) == pytest.approx(8192)


def test_hbm_cap_is_shared_by_parallel_transfers() -> None:
    b = TraceBuilder()
    for _ in range(16):
        b.dma(partitions=8, bytes_per_partition=128)  # 1024 B each on its own engine, 1024 ns
    assert latency_ns(b, target=simple_target(hbm_bw=1e9)) == pytest.approx(1024)
    assert latency_ns(b, target=simple_target(hbm_bw=8.0)) == pytest.approx(16 * 1024 / 8)


def test_hbm_ledger_accepts_out_of_order_bookings() -> None:
    """A store booked late in time must not delay an independent load issued after it in program order."""
    b = TraceBuilder()
    v = b.vector("tensor_copy", 10_000)
    b.dma(src=SBUF, dst=HBM, partitions=128, bytes_per_partition=128, deps=[v], line=1)
    b.dma(partitions=128, bytes_per_partition=128, line=2)
    sched = run(b, target=simple_target(hbm_bw=4.0))
    assert sched.report().latency_us * 1000 == pytest.approx(10_000 + 4096)
    # the load (id 2) finished long before the store
    b2 = TraceBuilder()
    b2.instrs = b.instrs[:]
    b2.vector("tensor_copy", 10, deps=[2])
    assert latency_ns(b2, target=simple_target(hbm_bw=4.0)) == pytest.approx(10_000 + 4096)


# --- bookkeeping ---------------------------------------------------------------------------------


def test_bytes_by_level_and_spills() -> None:
    b = TraceBuilder()
    ld = b.dma(partitions=128, bytes_per_partition=1024)
    mm = b.matmul(128, 512, deps=[ld])
    cp = b.vector("tensor_copy", 512, in_buffer="psum", deps=[mm])
    b.dma(src=SBUF, dst=SBUF, partitions=128, bytes_per_partition=256, deps=[cp])
    b.dma(src=SBUF, dst=HBM, partitions=128, bytes_per_partition=512, spill=True)
    report = run(b).report()
    assert report.bytes_by_level == {
        "hbm_read": 131072,
        "hbm_write": 65536,
        "sbuf_to_psum": 262144,
        "psum_to_sbuf": 262144,
        "sbuf_to_sbuf": 32768,
    }
    assert report.spill_bytes == 65536
    assert report.flops == 2 * 128 * 512 * 128
    assert report.dma_transfers == 3 and report.instructions == 5


def test_untraced_spill_is_charged_as_a_tail() -> None:
    b = TraceBuilder()
    b.vector("tensor_copy", 100)
    report = run(b, stats=MemoryStats(spill_bytes=1000)).report()
    assert report.spill_bytes == 1000
    assert report.hbm_read_bytes == report.hbm_write_bytes == 1000
    assert report.latency_us * 1000 == pytest.approx(100 + 2 * 1000 / 16)  # 16 engines x 1 B/ns


def test_hotspots_by_source_line() -> None:
    b = TraceBuilder("kern.py")
    for _ in range(3):
        b.vector("tensor_copy", 100, line=7)
    b.scalar("activation", 1000, line=9)
    hot = run(b).report().hotspots
    assert [(h.filename, h.lineno, h.instructions) for h in hot] == [("kern.py", 9, 1), ("kern.py", 7, 3)]
    assert hot[1].busy_us["vector"] == pytest.approx(0.3)


def test_timeline_is_bounded_and_histogram_sums_busy_time() -> None:
    b = TraceBuilder()
    for i in range(50):
        b.vector("tensor_copy", 300)
        b.dma(partitions=128, bytes_per_partition=64, line=i % 3)
    sched = Scheduler(simple_target(), simple_params(), timeline_limit=10)
    for instr in b.instrs:
        sched.emit(instr)
    tl = sched.timeline
    assert len(tl.events) == 10
    assert sum(tl.histogram[1]) == pytest.approx(50 * 300)  # vector
    assert sum(tl.histogram[4]) == pytest.approx(50 * 16 * 512)  # DMA engine-ns
    json.dumps(tl.to_dict())


def test_ids_must_be_consecutive() -> None:
    b = TraceBuilder()
    b.vector("tensor_copy", 100)
    b.instrs[0].id = 5
    with pytest.raises(ValueError, match="consecutive from 0: expected 0, got 5"):
        run(b)


def test_unknown_engine_is_an_error() -> None:
    b = TraceBuilder()
    b.add("npu", "nc_matmul")
    with pytest.raises(ValueError, match="unknown engine 'npu'"):
        run(b)


def test_scheduler_keeps_no_reference_to_instructions() -> None:
    b = TraceBuilder()
    ld = b.dma()
    b.matmul(deps=[ld])
    before = [sys.getrefcount(i) for i in b.instrs]
    run(b)
    assert [sys.getrefcount(i) for i in b.instrs] == before


def test_unknown_opcodes_are_reported() -> None:
    b = TraceBuilder()
    b.vector("frobnicate", 100)
    sched = run(b)
    assert sched.unknown_opcodes == {(VECTOR, "frobnicate"): 1}
    assert sched.report().unknown_opcodes == {"vector.frobnicate": 1}


def test_schedule_helper_with_target_name() -> None:
    b = TraceBuilder()
    b.matmul()
    report = schedule(b.instrs, "trn1")
    assert report.target == "trn1"
    # one matmul plus the kernel's launch/drain cost
    assert report.latency_us == pytest.approx((512 / 2.8 + default_params("trn1").kernel_fixed_ns) / 1000)
    assert report.engine_busy_us[GPSIMD] == 0.0 and report.engine_busy_us[SCALAR] == 0.0


def test_psum_zero_init_is_elided() -> None:
    """nl.zeros(buffer=psum) + matmul accumulation: the memset costs nothing and blocks nothing."""
    b = TraceBuilder()
    v = b.vector("tensor_copy", 1000)  # keeps VectorE busy until 1000 ns
    z = b.vector("memset", 512, out_buffer="psum", value=0)  # behind it in VectorE program order
    b.matmul(128, 512, deps=[z])
    sched = run(b, params=simple_params(dependency_latency_cycles=50))
    report = sched.report()
    assert report.latency_us * 1000 == pytest.approx(1000)  # the matmul ran at t = 0 .. 512
    assert report.engine_busy_us["vector"] * 1000 == pytest.approx(1000)
    assert report.instructions == 3 and v == 0


def test_kernel_fixed_cost_is_added_once() -> None:
    b = TraceBuilder()
    b.vector("tensor_copy", 100)
    b.vector("tensor_copy", 100)
    assert latency_ns(b, params=simple_params(kernel_fixed_ns=1000)) == pytest.approx(1200)
    assert latency_ns(TraceBuilder(), params=simple_params(kernel_fixed_ns=1000)) == 0.0
