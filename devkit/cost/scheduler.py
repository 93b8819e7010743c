"""Streaming list scheduler: places each traced instruction on the engines of a target core.

The scheduler is a :class:`devkit.trace.TraceSink`: feed it with :meth:`Scheduler.emit` in program
order, call :meth:`Scheduler.finish`, then :meth:`Scheduler.report`.  It keeps O(1) state per
instruction (one float and one byte, for dependency look-ups), never the instructions themselves.

Model (reference/nki_api.md section 4.3-4.5):

* **Compute engines** (tensor, vector, scalar, gpsimd) execute their instructions in program
  order; an instruction starts at ``max(engine free, ready time of each dependency)`` and occupies
  its engine for :class:`devkit.cost.instr_cost.CostModel` ns.  On targets where VectorE and
  GpSimdE share the SBUF port (``pipeline.vector_gpsimd_share_sbuf_port``) they share one slot.
* **Dependencies**: a compute producer's result is ready ``dependency_latency_cycles`` (of the
  producer's clock) after it finishes; TensorE-to-TensorE dependencies (PSUM accumulation groups)
  are pipelined and wait for nothing beyond program order.  A DMA's data is ready when it finishes.
* **DMA**: a transfer is issued on its queue (``attrs["queue"]``, else its source line: one call
  site = one queue) when its dependencies are ready and the queue has finished the fixed part of
  the previous transfer (``dma_queue_busy_ns``, FIFO within a queue [DMAOV]).  Its bytes start
  moving ``dma_fixed_latency_ns`` after issue, on the ``n`` DMA engines of the pool of
  ``dma.engines`` that free up first (:mod:`devkit.cost.dma_cost`); each engine starts when it is
  free, the transfer ends when its last engine ends.
* **HBM cap**: the HBM bytes of every transfer are booked on one per-core ledger
  (:mod:`devkit.cost.hbm`); a transfer cannot end before its HBM share is served.
* **Spills**: DMA instructions with ``attrs["spill"]`` are scheduled like any transfer and counted
  in ``spill_bytes``.  Spill bytes that :class:`devkit.trace.MemoryStats` reports beyond the traced
  ones are charged at :meth:`finish` as a serial tail: written and read back once at the full DMA
  rate.

Recorded: per-engine busy time and instruction count, makespan, HBM read/write bytes, SBUF<->PSUM
bytes (bytes written to / read from PSUM by any engine), SBUF->SBUF DMA bytes, spill bytes, FLOPs
(and TensorE time at peak per dtype), per-source-line hotspots, a bounded timeline
(:mod:`devkit.cost.timeline`) and the opcodes that had no specific cost rule.

Units: ns inside; the report converts to us.
"""

from __future__ import annotations

from array import array
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

from devkit.cost.dma_pool import DmaPool
from devkit.cost.hbm import HbmLedger
from devkit.cost.instr_cost import _RULES, CostModel
from devkit.cost.params import Params
from devkit.cost.target import Target
from devkit.cost.timeline import Timeline
from devkit.trace import DMA, ENGINES, PSUM, SBUF, TENSOR, Instr, MemoryStats

_CODE = {name: i for i, name in enumerate(ENGINES)}
_T, _DMA = _CODE[TENSOR], _CODE[DMA]
_PRUNE_EVERY = 4096


@dataclass
class ScheduleTotals:
    """Raw totals of one scheduled trace (ns and bytes), input of :func:`devkit.cost.report.build_report`."""

    makespan_ns: float = 0.0
    instructions: int = 0
    busy_ns: dict[str, float] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)
    flops: int = 0
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
    dma_engine_ns: float = 0.0
    queue_busy_ns: float = 0.0
    hotspots: dict[tuple[str, int], list] = field(default_factory=dict)
    unknown_opcodes: dict[tuple[str, str], int] = field(default_factory=dict)


class Scheduler:
    """A :class:`devkit.trace.TraceSink` that schedules instructions as they arrive.

    ``target`` is a name (``"trn1"``, ``"inf2"``, ``"trn2"``) or a :class:`Target`; ``params``
    defaults to the bundled calibrated values for that target.  ``timeline_limit`` bounds the
    verbatim part of the timeline sample.
    """

    def __init__(self, target: str | Target = "trn1", params: Params | None = None, *,
                 kernel_name: str = "", timeline_limit: int = 20_000) -> None:
        self.cost = CostModel(target, params)
        self.target = self.cost.target
        self.params = self.cost.params
        self.kernel_name = kernel_name
        self.stats = MemoryStats()
        self.finished = False
        self.timeline = Timeline(limit=timeline_limit)
        self._timeline_add = self.timeline.add
        t, p = self.target, self.params
        self._k = self.cost.consts
        self._rules = [_RULES.get(e) for e in ENGINES]
        nspc = [self.cost.ns_per_cycle(e) if e != DMA else 0.0 for e in ENGINES]
        self._nspc = nspc
        self._lat = [p.dependency_latency_cycles * c for c in nspc]
        shared = t.pipeline.vector_gpsimd_share_sbuf_port
        self._slot = [0, 1, 2, 1 if shared else 3]
        self._free = [0.0, 0.0, 0.0, 0.0]
        self._avail = array("d")
        self._codes = bytearray()
        self._busy = [0.0] * len(ENGINES)
        self._count = [0] * len(ENGINES)
        self._makespan = 0.0
        self._flops = 0
        self._peak_time = 0.0
        self._peak_per_dtype: dict[str, float] = {}
        self._s2p = self._p2s = self._s2s = 0
        self._hbm_r = self._hbm_w = 0
        self._spill = 0
        self._transfers = self._descriptors = 0
        self._hot: dict[tuple[str, int], list] = {}
        # DMA side
        self._dma_raw = self.cost.dma.raw
        self._n_dma = t.dma.engines
        self._pool = DmaPool(t.dma.engines)
        self._queues: dict[object, list] = {}
        self._q_busy = p.dma_queue_busy_ns
        self._latency = p.dma_fixed_latency_ns
        self._hbm_bw = t.hbm.bw_bytes_per_ns
        self._hbm = HbmLedger()

    # -- TraceSink -------------------------------------------------------------------------------

    def emit(self, instr: Instr) -> None:
        """Schedule one instruction (ids must be consecutive from 0, deps must be earlier ids)."""
        codes = self._codes
        if instr.id != len(codes):
            raise ValueError(f"instruction ids must be consecutive from 0: expected {len(codes)}, got {instr.id}")
        e = _CODE.get(instr.engine)
        if e is None:
            raise ValueError(f"unknown engine {instr.engine!r} at {instr.filename}:{instr.lineno}; "
                             f"valid engines: {', '.join(ENGINES)}")
        if e == _DMA:
            self._emit_dma(instr)
            return
        fn = self._rules[e].get(instr.opcode)
        if fn is None:
            fn = self.cost.rule(instr.engine, instr.opcode)
        dur = fn(instr, self._k) * self._nspc[e]
        slot = self._slot[e]
        free = self._free
        avail = self._avail
        start = free[slot]
        deps = instr.deps
        if deps:
            if e == _T:
                for d in deps:
                    if codes[d] != _T:
                        a = avail[d]
                        if a > start:
                            start = a
            else:
                for d in deps:
                    a = avail[d]
                    if a > start:
                        start = a
        end = start + dur
        free[slot] = end
        avail.append(end + self._lat[e])
        codes.append(e)
        self._busy[e] += dur
        self._count[e] += 1
        if end > self._makespan:
            self._makespan = end
        flops = instr.flops
        if flops:
            self._flops += flops
            if e == _T:
                self._peak_time += flops / self._peak(instr)
        for acc in instr.outs:
            if acc.buffer == PSUM:
                self._s2p += acc.bytes
        for acc in instr.ins:
            if acc.buffer == PSUM:
                self._p2s += acc.bytes
        key = (instr.filename, instr.lineno)
        hot = self._hot.get(key)
        if hot is None:
            hot = self._hot[key] = [0, 0.0, 0.0, 0.0, 0.0, 0.0]
        hot[0] += 1
        hot[e + 1] += dur
        self._timeline_add(e, start, end, dur)

    def finish(self, stats: MemoryStats) -> None:
        """End of the kernel run: keep the allocator's statistics (untraced spills are charged in totals)."""
        self.stats = stats
        self.finished = True

    # -- DMA -------------------------------------------------------------------------------------

    def _emit_dma(self, instr: Instr) -> None:
        engines, descriptors, occ, moved, hbm_r, hbm_w, _ = self._dma_raw(instr)
        attrs = instr.attrs
        queue = attrs.get("queue") if attrs else None
        if queue is None:
            queue = (instr.filename, instr.lineno)
        qstate = self._queues.get(queue)
        if qstate is None:
            qstate = self._queues[queue] = [0.0, 0]
        ready = qstate[0]
        deps = instr.deps
        if deps:
            avail = self._avail
            for d in deps:
                a = avail[d]
                if a > ready:
                    ready = a
        qstate[0] = ready + self._q_busy
        qstate[1] += 1
        ready += self._latency
        pool = self._pool
        hbm_bytes = hbm_r + hbm_w
        served = 0.0
        if hbm_bytes:
            f0 = pool.times[0]
            served = self._hbm.book(f0 if f0 > ready else ready, hbm_bytes / self._hbm_bw)
        first, end = pool.take(engines, ready, occ, served)
        self._avail.append(end)
        self._codes.append(_DMA)
        busy = engines * occ
        self._busy[_DMA] += busy
        self._count[_DMA] += 1
        if end > self._makespan:
            self._makespan = end
        self._transfers += 1
        self._descriptors += descriptors
        if hbm_bytes:
            self._hbm_r += hbm_r
            self._hbm_w += hbm_w
            if self._transfers % _PRUNE_EVERY == 0:
                self._hbm.prune(pool.times[0])
        elif instr.ins and instr.outs and instr.ins[0].buffer == SBUF and instr.outs[0].buffer == SBUF:
            self._s2s += moved
        if attrs and attrs.get("spill"):
            self._spill += moved
        key = (instr.filename, instr.lineno)
        hot = self._hot.get(key)
        if hot is None:
            hot = self._hot[key] = [0, 0.0, 0.0, 0.0, 0.0, 0.0]
        hot[0] += 1
        hot[_DMA + 1] += busy
        self._timeline_add(_DMA, first, end, busy)

    # -- helpers ---------------------------------------------------------------------------------

    def _peak(self, instr: Instr) -> float:
        ins = instr.ins
        dtype = ins[-1].dtype if ins else "bfloat16"
        peak = self._peak_per_dtype.get(dtype)
        if peak is None:
            peak = self._peak_per_dtype[dtype] = self.target.peak_flops_per_ns(dtype)
        return peak

    @property
    def unknown_opcodes(self) -> Counter[tuple[str, str]]:
        """``(engine, opcode)`` pairs scheduled with an engine default rule, with counts."""
        return self.cost.unknown_opcodes

    def totals(self) -> ScheduleTotals:
        """Snapshot of the raw totals (including the untraced-spill tail once finished)."""
        traced_spill = self._spill
        untraced = max(0, self.stats.spill_bytes - traced_spill) if self.finished else 0
        tail = 0.0
        if untraced:
            rate = min(self._n_dma * self.target.dma.engine_bw_bytes_per_ns, self._hbm_bw)
            tail = 2 * untraced / rate
        counts = dict(zip(ENGINES, self._count))
        return ScheduleTotals(
            makespan_ns=self._makespan + tail,
            instructions=len(self._codes),
            busy_ns=dict(zip(ENGINES, self._busy)),
            counts=counts,
            flops=self._flops,
            tensor_time_at_peak_ns=self._peak_time,
            hbm_read_bytes=self._hbm_r + untraced,
            hbm_write_bytes=self._hbm_w + untraced,
            sbuf_to_psum_bytes=self._s2p,
            psum_to_sbuf_bytes=self._p2s,
            sbuf_to_sbuf_bytes=self._s2s,
            spill_bytes=traced_spill + untraced,
            spill_tail_ns=tail,
            dma_transfers=self._transfers,
            dma_descriptors=self._descriptors,
            dma_engine_ns=self._busy[_DMA],
            queue_busy_ns=max((q[1] for q in self._queues.values()), default=0) * self._q_busy,
            hotspots=dict(self._hot),
            unknown_opcodes=dict(self.cost.unknown_opcodes),
        )

    def report(self, kernel_name: str | None = None, hotspot_limit: int = 20):
        """The :class:`devkit.cost.report.CostReport` of everything emitted so far."""
        from devkit.cost.report import build_report

        return build_report(self.totals(), self.target, self.params, self.stats,
                            kernel_name=self.kernel_name if kernel_name is None else kernel_name,
                            timeline=self.timeline, hotspot_limit=hotspot_limit)


def schedule(instrs: Iterable[Instr], target: str | Target = "trn1", stats: MemoryStats | None = None,
             params: Params | None = None, kernel_name: str = ""):
    """Schedule a finished trace (e.g. :attr:`devkit.trace.Trace.instrs`) and return its CostReport."""
    sched = Scheduler(target, params, kernel_name=kernel_name)
    for instr in instrs:
        sched.emit(instr)
    sched.finish(stats if stats is not None else MemoryStats())
    return sched.report()

