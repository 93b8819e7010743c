"""CostReport: contract keys, types, derived figures and the rich table."""

from __future__ import annotations

import io
import json

import pytest
from rich.console import Console

from devkit.cost.params import default_params
from devkit.cost.render import render_table
from devkit.cost.report import CostReport
from devkit.cost.scheduler import Scheduler
from devkit.cost.trace_builder import TraceBuilder
from devkit.trace import HBM, SBUF, MemoryStats

CONTRACT_KEYS = {
    "target",
    "latency_us",
    "hbm_read_bytes",
    "hbm_write_bytes",
    "instructions",
    "engine_busy_us",
    "tensor_utilization",
    "sbuf_peak_bytes",
    "psum_peak_bytes",
}
EXTRA_KEYS = {
    "mbu",
    "roofline_us",
    "bound_by",
    "bytes_by_level",
    "spill_bytes",
    "hotspots",
    "flops",
    "sbuf_peak_bytes_per_partition",
    "psum_peak_bytes_per_partition",
}


def _matmul_program(tiles: int = 8) -> TraceBuilder:
    b = TraceBuilder("kern.py")
    prev = None
    for _ in range(tiles):
        lhs = b.dma(partitions=128, bytes_per_partition=256, line=10)
        rhs = b.dma(partitions=128, bytes_per_partition=1024, line=11)
        prev = b.matmul(deps=[lhs, rhs] + ([prev] if prev is not None else []), line=12)
    cp = b.vector("tensor_copy", 512, in_buffer="psum", dtype="bfloat16", deps=[prev], line=13)
    b.dma(src=SBUF, dst=HBM, partitions=128, bytes_per_partition=1024, deps=[cp], line=14)
    return b


def _report(b: TraceBuilder, target: str = "trn1", stats: MemoryStats | None = None) -> CostReport:
    # the report's arithmetic on the schedule alone: no per-kernel launch/drain cost
    sched = Scheduler(target, default_params(target).replace(kernel_fixed_ns=0.0), kernel_name="matmul")
    for instr in b.instrs:
        sched.emit(instr)
    sched.finish(
        stats
        or MemoryStats(
            sbuf_peak_bytes_per_partition=10_240, psum_peak_bytes_per_partition=2048, partitions=128
        )
    )
    return sched.report()


def test_contract_keys_and_types() -> None:
    d = _report(_matmul_program()).to_dict()
    assert CONTRACT_KEYS | EXTRA_KEYS <= set(d)
    assert d["target"] == "trn1"
    assert set(d["engine_busy_us"]) == {"tensor", "vector", "scalar", "gpsimd", "dma"}
    for key in ("latency_us", "tensor_utilization", "mbu", "roofline_us"):
        assert isinstance(d[key], float), key
    for key in (
        "hbm_read_bytes",
        "hbm_write_bytes",
        "instructions",
        "sbuf_peak_bytes",
        "psum_peak_bytes",
        "spill_bytes",
        "flops",
    ):
        assert isinstance(d[key], int) and not isinstance(d[key], bool), key
    assert all(isinstance(v, float) for v in d["engine_busy_us"].values())
    assert set(d["bytes_by_level"]) == {
        "hbm_read",
        "hbm_write",
        "sbuf_to_psum",
        "psum_to_sbuf",
        "sbuf_to_sbuf",
    }
    assert json.loads(json.dumps(d)) == d


def test_values() -> None:
    r = _report(_matmul_program(8))
    assert r.instructions == 8 * 3 + 2
    assert r.hbm_read_bytes == 8 * (32768 + 131072)
    assert r.hbm_write_bytes == 131072
    assert r.flops == 8 * 2 * 128 * 512 * 128
    assert r.sbuf_peak_bytes == 10_240 * 128 and r.sbuf_peak_bytes_per_partition == 10_240
    assert r.psum_peak_bytes == 2048 * 128 and r.psum_peak_bytes_per_partition == 2048
    assert r.engine_busy_us["tensor"] == pytest.approx(8 * 512 / 2.8 / 1000)
    # utilization = FLOPs at the bf16 peak / latency, and MBU = HBM bytes / (latency x bandwidth)
    assert r.tensor_utilization == pytest.approx(r.flops / 92_000 / (r.latency_us * 1000))
    assert r.mbu == pytest.approx((r.hbm_read_bytes + r.hbm_write_bytes) / 410 / (r.latency_us * 1000))
    assert 0.0 < r.tensor_utilization < 1.0 and 0.0 < r.mbu < 1.0


def test_bound_by_and_roofline() -> None:
    memory_bound = _report(_matmul_program(16))
    assert memory_bound.bound_by == "dma/hbm"
    assert memory_bound.roofline_us == pytest.approx(max(memory_bound.resource_bounds_us.values()))
    assert memory_bound.roofline_us <= memory_bound.latency_us

    b = TraceBuilder()
    ld = b.dma(partitions=128, bytes_per_partition=1024)
    for _ in range(200):
        b.matmul(deps=[ld])
    compute_bound = _report(b)
    assert compute_bound.bound_by == "tensor"
    assert compute_bound.tensor_utilization > 0.9


def test_dtype_mix_utilization() -> None:
    b = TraceBuilder()
    b.matmul(dtype="float32")
    r = _report(b)
    # fp32: 4 x 512 cycles for 2*128*512*128 FLOPs against the 23 TFLOP/s fp32 peak
    assert r.tensor_utilization == pytest.approx((2 * 128 * 512 * 128 / 23_000) / (4 * 512 / 2.8))


def test_hotspots_are_sorted_and_capped() -> None:
    r = _report(_matmul_program())
    lines = [h.lineno for h in r.hotspots]
    totals = [h.total_busy_us for h in r.hotspots]
    assert totals == sorted(totals, reverse=True)
    assert set(lines) == {10, 11, 12, 13, 14}
    assert r.to_dict()["hotspots"][0]["file"] == "kern.py"


def test_timeline_only_on_request() -> None:
    r = _report(_matmul_program())
    assert "timeline" not in r.to_dict()
    tl = r.to_dict(include_timeline=True)["timeline"]
    assert (
        tl["engines"] == ["tensor", "vector", "scalar", "gpsimd", "dma"]
        and len(tl["events"]) == r.instructions
    )


def test_render_table() -> None:
    console = Console(file=io.StringIO(), width=140, record=True)
    console.print(render_table(_report(_matmul_program())))
    text = console.export_text()
    assert "matmul on trn1 (modelled)" in text
    assert "latency" in text and "dma/hbm" in text and "kern.py:11" in text
