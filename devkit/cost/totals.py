"""The scheduler's output and the report's input: raw totals of one scheduled trace.

It sits below both :mod:`devkit.cost.scheduler` (which fills it) and :mod:`devkit.cost.report`
(which turns it into a :class:`~devkit.cost.report.CostReport`), so neither imports the other's
internals for it.  Units: nanoseconds and bytes.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class ScheduleTotals:
    """Raw totals of one scheduled trace (ns, bytes), the input of :func:`devkit.cost.report.build_report`.

    ``flops`` are TensorE FLOPs (``Instr.flops`` of tensor instructions); ``other_flops`` the
    element operations the other engines report.  ``hotspots`` maps ``(filename, lineno)`` to a
    list of per-engine instruction counts followed by per-engine busy ns, both in
    :data:`devkit.trace.ENGINES` order (DMA busy = engine-ns summed over the engines each transfer
    used).
    """

    makespan_ns: float = 0.0
    instructions: int = 0
    busy_ns: dict[str, float] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)
    flops: int = 0
    other_flops: int = 0
    tensor_time_at_peak_ns: float = 0.0
    hbm_read_bytes: int = 0
    hbm_write_bytes: int = 0
    sbuf_to_psum_bytes: int = 0
    psum_to_sbuf_bytes: int = 0
    sbuf_to_sbuf_bytes: int = 0
    spill_bytes: int = 0
    spill_tail_ns: float = 0.0
    dma_transfers: int = 0
    dma_descriptors: int = 0
    hoisted: int = 0
    #: instructions the compiler's scheduler moved into an earlier idle gap of their engine
    backfilled: int = 0
    dma_engine_ns: float = 0.0
    queue_busy_ns: float = 0.0
    hotspots: dict[tuple[str, int], list] = field(default_factory=dict)
    unknown_opcodes: dict[tuple[str, str], int] = field(default_factory=dict)
