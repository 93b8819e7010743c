"""The cost report of one kernel run: :class:`CostReport` and its JSON form (the rich table is
:mod:`devkit.cost.render`).

``CostReport.to_dict()`` carries the contract keys of DESIGN.md section 3 (``target``,
``latency_us``, ``hbm_read_bytes``, ``hbm_write_bytes``, ``instructions``, ``engine_busy_us`` with
exactly ``tensor``/``vector``/``scalar``/``gpsimd``/``dma``, ``tensor_utilization``,
``sbuf_peak_bytes``, ``psum_peak_bytes``) plus the derived figures below.

Definitions:

* ``engine_busy_us.dma`` is DMA engine time divided by the number of DMA engines (the time the
  whole DMA pool would need at 100 % occupancy); compute engines report their own busy time.
* ``flops`` counts TensorE FLOPs (matmul work); ``flops_other_engines`` the element operations of
  Vector/Scalar/GpSimd instructions as the simulator reports them.
* ``tensor_utilization`` = TensorE time at peak for the FLOPs executed (per dtype, target
  ``tensor.peak_tflops_*``) / latency: achieved FLOP rate over peak for the dtype mix.
* ``mbu`` = (HBM read + write bytes) / latency / per-core HBM bandwidth.
* ``resource_bounds_us``: a lower bound on latency per resource (busy time of each compute engine;
  ``dma/hbm`` = the largest of DMA pool time, HBM bytes / bandwidth and the busiest DMA queue's
  fixed costs).  ``roofline_us`` is their maximum and ``bound_by`` names it.
* ``sbuf_peak_bytes`` / ``psum_peak_bytes`` = per-partition peak x partitions (per-partition
  figures under ``*_per_partition``).
* ``bytes_by_level``: HBM read/write by DMA; ``sbuf_to_psum`` = bytes written into PSUM by any
  engine; ``psum_to_sbuf`` = bytes read out of PSUM by any engine; ``sbuf_to_sbuf`` = DMA SBUF->SBUF.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from devkit.cost.params import Params
from devkit.cost.timeline import Timeline
from devkit.cost.totals import ScheduleTotals
from devkit.targets import Target
from devkit.trace import DMA, ENGINES, MemoryStats

BUSY_KEYS = ENGINES  # ("tensor", "vector", "scalar", "gpsimd", "dma")


@dataclass(frozen=True)
class Hotspot:
    """Work attributed to one kernel source line (DMA busy = engine time / DMA engines, as in
    ``engine_busy_us``)."""

    filename: str
    lineno: int
    instructions: int
    busy_us: dict[str, float]

    @property
    def total_busy_us(self) -> float:
        return sum(self.busy_us.values())

    def to_dict(self) -> dict[str, Any]:
        return {
            "file": self.filename,
            "line": self.lineno,
            "instructions": self.instructions,
            "busy_us": dict(self.busy_us),
            "total_busy_us": self.total_busy_us,
        }


@dataclass(frozen=True)
class CostReport:
    """Modelled cost of one kernel run on one target (times in us, sizes in bytes)."""

    target: str
    kernel: str
    latency_us: float
    instructions: int
    engine_busy_us: dict[str, float]
    instructions_by_engine: dict[str, int]
    flops: int
    flops_other_engines: int
    tensor_utilization: float
    hbm_read_bytes: int
    hbm_write_bytes: int
    mbu: float
    bytes_by_level: dict[str, int]
    spill_bytes: int
    sbuf_peak_bytes: int
    sbuf_peak_bytes_per_partition: int
    psum_peak_bytes: int
    psum_peak_bytes_per_partition: int
    roofline_us: float
    bound_by: str
    resource_bounds_us: dict[str, float]
    dma_transfers: int
    dma_descriptors: int
    hotspots: tuple[Hotspot, ...]
    unknown_opcodes: dict[str, int]
    params: dict[str, float]
    timeline: Timeline | None = field(default=None, compare=False, repr=False)
    #: correctness checks this run did not make (rule codes; cost-only runs skip the value-based ones)
    checks_skipped: tuple[str, ...] = ()
    #: returned tensors the kernel never wrote (no store was modelled for them)
    outputs_unwritten: tuple[str, ...] = ()
    #: on-chip allocation sites (``"file:line (sbuf)"``) whose tiles the allocator rotated over two or
    #: more physical buffers (multi-buffering), with the number of buffers
    multi_buffered: dict[str, int] = field(default_factory=dict)
    #: allocations that took the live set over capacity, where the compiler spills
    spilled_tiles: tuple[str, ...] = ()
    #: input-free instructions (memset, iota) the compiler's scheduler moved ahead of their engine's
    #: earlier work
    hoisted_instructions: int = 0
    #: instructions the compiler's scheduler moved into an earlier idle gap of their engine (an
    #: independent later instruction run while the engine waited for another engine's data)
    backfilled_instructions: int = 0

    def to_dict(self, include_timeline: bool = False) -> dict[str, Any]:
        """JSON-serialisable dict (the timeline only on request: it can be large)."""
        out: dict[str, Any] = {
            "target": self.target,
            "kernel": self.kernel,
            "modelled": True,
            "latency_us": self.latency_us,
            "instructions": self.instructions,
            "engine_busy_us": dict(self.engine_busy_us),
            "instructions_by_engine": dict(self.instructions_by_engine),
            "flops": self.flops,
            "flops_other_engines": self.flops_other_engines,
            "tensor_utilization": self.tensor_utilization,
            "hbm_read_bytes": self.hbm_read_bytes,
            "hbm_write_bytes": self.hbm_write_bytes,
            "mbu": self.mbu,
            "bytes_by_level": dict(self.bytes_by_level),
            "spill_bytes": self.spill_bytes,
            "sbuf_peak_bytes": self.sbuf_peak_bytes,
            "sbuf_peak_bytes_per_partition": self.sbuf_peak_bytes_per_partition,
            "psum_peak_bytes": self.psum_peak_bytes,
            "psum_peak_bytes_per_partition": self.psum_peak_bytes_per_partition,
            "roofline_us": self.roofline_us,
            "bound_by": self.bound_by,
            "resource_bounds_us": dict(self.resource_bounds_us),
            "dma_transfers": self.dma_transfers,
            "dma_descriptors": self.dma_descriptors,
            "hotspots": [h.to_dict() for h in self.hotspots],
            "unknown_opcodes": dict(self.unknown_opcodes),
            "params": dict(self.params),
            "checks_skipped": list(self.checks_skipped),
            "outputs_unwritten": list(self.outputs_unwritten),
            "multi_buffered": dict(self.multi_buffered),
            "spilled_tiles": list(self.spilled_tiles),
            "hoisted_instructions": self.hoisted_instructions,
            "backfilled_instructions": self.backfilled_instructions,
        }
        if include_timeline and self.timeline is not None:
            out["timeline"] = self.timeline.to_dict()
        return out


def build_report(
    totals: ScheduleTotals,
    target: Target,
    params: Params,
    stats: MemoryStats,
    *,
    kernel_name: str = "",
    timeline: Timeline | None = None,
    hotspot_limit: int = 20,
) -> CostReport:
    """Derive the report figures from raw schedule totals."""
    ns_to_us = 1e-3
    makespan = totals.makespan_ns
    busy_ns = dict(totals.busy_ns)
    busy_ns[DMA] = totals.dma_engine_ns / target.dma.engines
    engine_busy_us = {k: busy_ns.get(k, 0.0) * ns_to_us for k in BUSY_KEYS}
    hbm_bytes = totals.hbm_read_bytes + totals.hbm_write_bytes
    hbm_ns = hbm_bytes / target.hbm.bw_bytes_per_ns
    bounds_ns = {k: busy_ns.get(k, 0.0) for k in BUSY_KEYS if k != DMA}
    bounds_ns["dma/hbm"] = max(busy_ns[DMA], hbm_ns, totals.queue_busy_ns) + totals.spill_tail_ns
    bound_by = max(bounds_ns, key=lambda k: bounds_ns[k])
    parts = stats.partitions
    n = len(ENGINES)
    dma_index = ENGINES.index(DMA)
    hotspots = []
    for (filename, lineno), v in totals.hotspots.items():
        busy = {name: v[n + i] * ns_to_us for i, name in enumerate(ENGINES)}
        busy[DMA] = v[n + dma_index] * ns_to_us / target.dma.engines
        hotspots.append(Hotspot(filename=filename, lineno=lineno, instructions=sum(v[:n]), busy_us=busy))
    hotspots.sort(key=lambda h: (-h.total_busy_us, h.filename, h.lineno))
    return CostReport(
        target=target.name,
        kernel=kernel_name,
        latency_us=makespan * ns_to_us,
        instructions=totals.instructions,
        engine_busy_us=engine_busy_us,
        instructions_by_engine={k: totals.counts.get(k, 0) for k in BUSY_KEYS},
        flops=totals.flops,
        flops_other_engines=totals.other_flops,
        tensor_utilization=totals.tensor_time_at_peak_ns / makespan if makespan > 0 else 0.0,
        hbm_read_bytes=totals.hbm_read_bytes,
        hbm_write_bytes=totals.hbm_write_bytes,
        mbu=hbm_ns / makespan if makespan > 0 else 0.0,
        bytes_by_level={
            "hbm_read": totals.hbm_read_bytes,
            "hbm_write": totals.hbm_write_bytes,
            "sbuf_to_psum": totals.sbuf_to_psum_bytes,
            "psum_to_sbuf": totals.psum_to_sbuf_bytes,
            "sbuf_to_sbuf": totals.sbuf_to_sbuf_bytes,
        },
        spill_bytes=totals.spill_bytes,
        sbuf_peak_bytes=stats.sbuf_peak_bytes_per_partition * parts,
        sbuf_peak_bytes_per_partition=stats.sbuf_peak_bytes_per_partition,
        psum_peak_bytes=stats.psum_peak_bytes_per_partition * parts,
        psum_peak_bytes_per_partition=stats.psum_peak_bytes_per_partition,
        roofline_us=bounds_ns[bound_by] * ns_to_us,
        bound_by=bound_by,
        resource_bounds_us={k: v * ns_to_us for k, v in bounds_ns.items()},
        dma_transfers=totals.dma_transfers,
        dma_descriptors=totals.dma_descriptors,
        hotspots=tuple(hotspots[:hotspot_limit]),
        multi_buffered={
            f"{Path(fn).name}:{ln} ({buf})": n
            for (buf, fn, ln), n in sorted(stats.buffers.items(), key=lambda kv: (-kv[1], kv[0]))
            if n >= 2
        },
        spilled_tiles=tuple(f"{desc} at {Path(fn).name}:{ln} ({buf})" for buf, fn, ln, desc in stats.spilled),
        hoisted_instructions=totals.hoisted,
        backfilled_instructions=totals.backfilled,
        unknown_opcodes={f"{e}.{op}": c for (e, op), c in sorted(totals.unknown_opcodes.items())},
        params=params.as_dict(),
        timeline=timeline,
    )
