"""Streaming list scheduler: places each traced instruction on the engines of a target core.

The scheduler is a :class:`devkit.trace.TraceSink`: feed it with :meth:`Scheduler.emit` in program
order, call :meth:`Scheduler.finish`, then :meth:`Scheduler.report`.  It keeps O(1) state per
instruction (one float and one byte, for dependency look-ups), never the instructions themselves.

Model (reference/nki_api.md section 4.3-4.5):

* **Compute engines** (tensor, vector, scalar, gpsimd) execute their instructions in program
  order; an instruction starts at ``max(engine free, ready time of each dependency)`` and occupies
  its engine for :class:`devkit.cost.instr_cost.CostModel` ns.  On targets where VectorE and
  GpSimdE share the SBUF port (``pipeline.vector_gpsimd_share_sbuf_port``) they share one slot.
* **Idle gaps are filled** (the compiler's instruction scheduler: ``affine_range`` iterations are
  independent and "may be pipelined across engines", reference/nki_api.md section 2 [B1-PM]): when an
  engine idles waiting for another engine's data, the gap is remembered (up to ``_MAX_HOLES`` per
  engine, the shortest forgotten first); a later instruction whose dependencies are ready before its
  engine is free goes into the first remembered gap it fits.  A TensorE instruction that depends on
  an earlier TensorE one (PSUM accumulation group) goes no earlier than that one's end.  Counted in
  ``backfilled``.
* **Input-free instructions** (``memset``, ``iota``: no operand read) are not held in program order
  behind their engine's earlier work: the compiler's instruction scheduler moves them up to where
  their write-after-read/write hazards allow (e.g. the ``nl.zeros`` of a loop-local buffer, placed
  on a rotating address, runs while the previous iteration is still being computed).  Their
  engine time still delays the engine's later instructions.  Counted in ``hoisted``.
* **Elided instructions** (a rule returns :data:`devkit.cost.instr_cost.ELIDED`, e.g. the memset
  of a PSUM accumulator that the compiler folds into the first matmul) take no engine time and no
  place in program order: they are done when their own dependencies are.
* **Dependencies**: a compute producer's result is ready ``dependency_latency_cycles`` (of the
  producer's clock) after it finishes; TensorE-to-TensorE dependencies (PSUM accumulation groups)
  are pipelined and wait for nothing beyond program order.  A DMA's data is ready when it finishes.
* **DMA**: a transfer is issued on its queue (``attrs["queue"]``, else its source line: one call
  site = one queue) when its dependencies are ready and the queue has finished the fixed part of
  the previous transfer (``dma_queue_busy_ns``, FIFO within a queue [DMAOV]).  Its bytes start
  moving ``dma_fixed_latency_ns`` after issue, as ``n`` packets of equal length on ``n`` distinct
  engines of the pool (:mod:`devkit.cost.dma_cost` for ``n`` and the packet length,
  :mod:`devkit.cost.dma_pool` for the placement): each packet takes the engine that can start it
  first, back-filling idle gaps left by transfers that waited for their dependencies, so a load
  seen after a store that waits for compute still runs early, as on another hardware queue.  The
  transfer ends when its last packet ends.
* **HBM cap**: the HBM bytes of every transfer are booked on one per-core ledger
  (:mod:`devkit.cost.hbm`); a transfer cannot end before its HBM share is served.  Booking starts
  where the transfer's first packet can start (at its ready time when it may back-fill an idle
  gap).  On targets where all DMA engines together cannot outrun HBM with one-sided transfers
  (trn1, inf2: 16 x 17 B/ns < 410 B/ns) only HBM->HBM copies are booked, since nothing else can
  reach the cap.
* **Spills**: DMA instructions with ``attrs["spill"]`` are scheduled like any transfer and counted
  in ``spill_bytes``.  Spill bytes that :class:`devkit.trace.MemoryStats` reports beyond the traced
  ones are charged in :meth:`Scheduler.totals` as a serial tail: written and read back once at the
  full DMA rate (the lower of the DMA engines' aggregate and the HBM bandwidth).

* **Kernel fixed cost**: ``kernel_fixed_ns`` (launch and drain) is added once to a non-empty
  kernel's makespan.

Recorded: per-engine busy time and instruction count, makespan, HBM read/write bytes, SBUF<->PSUM
bytes (bytes written to / read from PSUM by any engine), SBUF->SBUF DMA bytes, spill bytes, FLOPs
(and TensorE time at peak per dtype), per-source-line hotspots, a bounded timeline
(:mod:`devkit.cost.timeline`) and the opcodes that had no specific cost rule.

Units: ns inside; the report converts to us.
"""

from __future__ import annotations

from array import array
from collections import Counter
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from devkit.cost.dma_pool import DmaPool
from devkit.cost.hbm import HbmLedger
from devkit.cost.instr_cost import _RULES, CostModel
from devkit.cost.params import Params
from devkit.cost.report import CostReport, build_report
from devkit.cost.timeline import Timeline
from devkit.cost.totals import ScheduleTotals
from devkit.targets import Target
from devkit.trace import DMA, ENGINES, PSUM, SBUF, TENSOR, Instr, MemoryStats

if TYPE_CHECKING:
    from typing import Protocol

    class Recorder(Protocol):
        """Sees every instruction where the scheduler placed it (opt-in; nothing is kept without one)."""

        def record(self, instr: Instr, engine: int, start_ns: float, end_ns: float, busy_ns: float) -> None:
            """``engine`` indexes :data:`devkit.trace.ENGINES`; ``busy_ns`` is engine time (DMA: summed
            over the DMA engines the transfer used), ``-1.0`` for an instruction the compiler elides."""

        def finish(self, stats: MemoryStats) -> None: ...


_CODE = {name: i for i, name in enumerate(ENGINES)}
_T, _DMA = _CODE[TENSOR], _CODE[DMA]
_N = len(ENGINES)
_PRUNE_EVERY = 4096
#: Idle gaps of a compute engine remembered for back-filling (the oldest is forgotten first), and
#: the shortest gap worth remembering, in ns.
_MAX_HOLES = 8
_MIN_HOLE_NS = 5.0


def _fields(t: Instr) -> tuple:
    """The fields of ``t`` in :class:`Instr` order (for a copy)."""
    return (t.id, t.engine, t.opcode, t.ins, t.outs, t.flops, t.deps, t.filename, t.lineno, t.attrs)


def _forget_shortest(gaps: list[list[float]]) -> None:
    """Drop the shortest remembered idle gap (the one least likely to take an instruction)."""
    # (the first of the shortest, as lengths.index(min(lengths)) finds it; a plain loop is faster here)
    shortest = 0
    best = gaps[0][1] - gaps[0][0]
    i = 0
    for g in gaps:
        length = g[1] - g[0]
        if length < best:
            best = length
            shortest = i
        i += 1
    del gaps[shortest]


class Scheduler:
    """A :class:`devkit.trace.TraceSink` that schedules instructions as they arrive.

    ``target`` is a name (``"trn1"``, ``"inf2"``, ``"trn2"``) or a :class:`Target`; ``params``
    defaults to the bundled calibrated values for that target.  ``timeline_limit`` bounds the
    verbatim part of the timeline sample.  ``recorder``, when given, is called once per instruction
    as it is placed (see :class:`Recorder`; e.g. :class:`devkit.cost.chrome_trace.TraceRecorder`);
    without one the hot path only pays a ``None`` test.

    For speed, ``emit`` is a closure over the scheduler state built per instance (the method below
    documents it and is replaced in ``__init__``).
    """

    def __init__(
        self,
        target: str | Target = "trn1",
        params: Params | None = None,
        *,
        kernel_name: str = "",
        timeline_limit: int = 20_000,
        recorder: Recorder | None = None,
    ) -> None:
        self.cost = CostModel(target, params)
        self.target = self.cost.target
        self.params = self.cost.params
        self.kernel_name = kernel_name
        self.stats = MemoryStats()
        self.finished = False
        self.timeline = Timeline(limit=timeline_limit)
        self._pool = DmaPool(self.target.dma.engines)
        self._hbm = HbmLedger()
        self._queues: dict[object, list] = {}
        self._hot: dict[tuple[str, int], list] = {}
        self._free = [0.0, 0.0, 0.0, 0.0]
        self._codes = bytearray()
        self.recorder = recorder
        self.emit, self._scalars, self._repeater = self._build_core()  # type: ignore[method-assign]

    def emit(self, instr: Instr) -> None:  # replaced per instance by the closure of _build_core
        """Schedule one instruction (ids consecutive from 0; deps are earlier ids)."""
        raise NotImplementedError  # pragma: no cover

    def finish(self, stats: MemoryStats) -> None:
        """End of the kernel run: keep the allocator's statistics (untraced spills are charged in totals)."""
        self.stats = stats
        self.finished = True
        if self.recorder is not None:
            self.recorder.finish(stats)

    def repeater(self, template: Instr) -> Callable[[int, tuple[int, ...]], None]:
        """``again(id, deps)``: schedule an instruction equal to ``template`` but for its ``id`` and ``deps``
        (loop replay issues most of a long loop's instructions this way, see :class:`devkit.trace.TraceSink`).

        The result is what :meth:`emit` of that instruction gives.  Faster: the engine, the source line's
        record and the engine time (compute) or transfer timing (DMA) of ``template`` are looked up once,
        and without a recorder (which may keep what it sees) one private copy of ``template``, renumbered
        in place, serves every call instead of a new :class:`Instr` each.  ``template`` is not changed;
        its operands and attributes must not change while the repeater is in use."""
        return self._repeater(template)

    @property
    def wants_occupancy(self) -> bool:
        """Whether the simulator should attach on-chip occupancy over time to the MemoryStats it sends."""
        return self.recorder is not None and getattr(self.recorder, "wants_occupancy", False)

    def _build_core(
        self,
    ) -> tuple[
        Callable[[Instr], None],
        Callable[[], dict[str, float]],
        Callable[[Instr], Callable[[int, tuple[int, ...]], None]],
    ]:
        """The hot path: one closure per scheduler, all state in local cells."""
        t, p, cost = self.target, self.params, self.cost
        k = cost.consts
        rules = [_RULES.get(e) for e in ENGINES]
        fallback = cost.rule
        nspc = [cost.ns_per_cycle(e) if e != DMA else 0.0 for e in ENGINES]
        lat = [p.dependency_latency_cycles * c for c in nspc]
        slot_of = [0, 1, 2, 1 if t.pipeline.vector_gpsimd_share_sbuf_port else 3]
        free = self._free
        holes: list[list[list[float]]] = [[] for _ in free]  # per slot: idle gaps [start, end) ns
        max_holes = _MAX_HOLES
        min_hole = _MIN_HOLE_NS
        avail = array("d")
        codes = self._codes
        hot_lines = self._hot
        peak_by_dtype: dict[str, float] = {}
        peak_of = t.peak_flops_per_ns
        dma_raw = cost.dma.raw
        dma_memo = cost.dma.memo
        pool = self._pool
        pool_take = pool.take
        pool_times = pool.times  # lists mutated in place by the pool: safe to hold
        hole_ends = pool.hole_ends
        all_engines = t.dma.engines
        hbm_book = self._hbm.book
        hbm_used = self._hbm.used
        bucket_ns = self._hbm.bucket_ns
        hbm_bw = t.hbm.bw_bytes_per_ns
        # the cap can only bind if the DMA engines, all busy, could outrun HBM (one-sided transfers
        # move each byte through HBM once, HBM->HBM copies twice)
        dma_peak = t.dma.engines * t.dma.engine_bw_bytes_per_ns
        book_one_sided = dma_peak > hbm_bw
        book_two_sided = 2 * dma_peak > hbm_bw
        queues = self._queues
        q_busy = p.dma_queue_busy_ns
        dma_latency = p.dma_fixed_latency_ns
        timeline = self.timeline
        tl_add = timeline.add
        tl_events = timeline.events
        tl_limit = timeline.limit
        tl_lo, tl_hi, tl_acc = timeline.lo, timeline.hi, timeline.acc
        code_of = _CODE.get
        record = self.recorder.record if self.recorder is not None else None
        flops_total = 0
        other_flops = 0
        peak_time = 0.0
        s2p = p2s = s2s = 0
        hbm_r = hbm_w = 0
        spill = 0
        transfers = descriptors_total = 0
        hoisted = backfilled = 0

        def emit(instr: Instr, static: tuple | None = None) -> None:
            nonlocal flops_total, other_flops, peak_time, s2p, p2s, s2s, hbm_r, hbm_w, spill, transfers
            nonlocal descriptors_total, hoisted, backfilled
            n = len(codes)
            if instr.id != n:
                raise ValueError(f"instruction ids must be consecutive from 0: expected {n}, got {instr.id}")
            if static is None:
                e = code_of(instr.engine)
                if e is None:
                    raise ValueError(
                        f"unknown engine {instr.engine!r} at {instr.filename}:{instr.lineno}; "
                        f"valid engines: {', '.join(ENGINES)}"
                    )
                key = (instr.filename, instr.lineno)
                # per source line: counts and busy ns per engine, then the line's own DMA queue state
                line = hot_lines.get(key)
                if line is None:
                    line = hot_lines[key] = [0, 0, 0, 0, 0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0]
            else:  # from a repeater: the engine, the line record and the cost are known
                e, line, cost = static
            deps = instr.deps
            if e != _DMA:
                if static is None:
                    fn = rules[e].get(instr.opcode) or fallback(instr.engine, instr.opcode)
                    cycles = fn(instr, k)
                else:
                    cycles = cost
                if cycles < 0.0:  # elided by the compiler: no engine time, no program-order slot
                    ready = 0.0
                    for d in deps:
                        if avail[d] > ready:
                            ready = avail[d]
                    avail.append(ready)
                    codes.append(e)
                    line[e] += 1
                    if record is not None:
                        record(instr, e, ready, ready, -1.0)
                    return
                busy = cycles * nspc[e]
                slot = slot_of[e]
                start = free[slot]
                if not instr.ins and e != _T:
                    # reads nothing (memset, iota): the compiler's scheduler moves it up to where its
                    # write-after-read/write hazards allow; its engine time still delays what follows
                    start = 0.0
                    for d in deps:
                        if avail[d] > start:
                            start = avail[d]
                    if start < free[slot]:
                        hoisted += 1
                        free[slot] += busy
                    else:
                        free[slot] = start + busy
                    end = start + busy
                else:
                    ready = 0.0
                    # a TensorE producer (PSUM accumulation group) is pipelined with its TensorE
                    # consumer in program order; moved into an earlier gap, the consumer must at
                    # least start after the producer has finished
                    after_tensor = 0.0
                    if e == _T:
                        for d in deps:
                            if codes[d] != _T:
                                if avail[d] > ready:
                                    ready = avail[d]
                            elif avail[d] > after_tensor:
                                after_tensor = avail[d]
                    else:
                        for d in deps:
                            if avail[d] > ready:
                                ready = avail[d]
                    gaps = holes[slot]
                    if ready >= start:
                        if ready - start > min_hole:
                            # the engine idles waiting for data: the compiler may fill the gap later
                            if len(gaps) == max_holes:
                                _forget_shortest(gaps)
                            gaps.append([start, ready])
                        start = ready
                        end = free[slot] = start + busy
                    elif gaps and gaps[-1][1] >= (ready if ready > after_tensor else after_tensor) + busy:
                        # ready before the engine is free: the compiler's scheduler moves it into
                        # an earlier idle gap of its engine when it fits (independent iterations);
                        # gaps are kept in time order, so none fits when the last one ends too early
                        if after_tensor > ready:
                            ready = after_tensor
                        for i, gap in enumerate(gaps):
                            s0 = gap[0] if gap[0] > ready else ready
                            if s0 + busy <= gap[1]:
                                start, end = s0, s0 + busy
                                backfilled += 1
                                if end + min_hole < gap[1]:
                                    if s0 - gap[0] > min_hole:
                                        gaps.insert(i + 1, [end, gap[1]])
                                        gap[1] = s0
                                        if len(gaps) > max_holes:
                                            _forget_shortest(gaps)
                                    else:
                                        gap[0] = end
                                elif s0 - gap[0] > min_hole:
                                    gap[1] = s0
                                else:
                                    del gaps[i]
                                break
                        else:
                            end = free[slot] = start + busy
                    else:
                        end = free[slot] = start + busy
                avail.append(end + lat[e])
                flops = instr.flops
                if e == _T:
                    for acc in instr.outs:
                        if acc.buffer == PSUM:
                            s2p += acc.bytes
                    if flops:
                        flops_total += flops
                        dtype = instr.ins[-1].dtype if instr.ins else "bfloat16"
                        peak = peak_by_dtype.get(dtype)
                        if peak is None:
                            peak = peak_by_dtype[dtype] = peak_of(dtype)
                        peak_time += flops / peak
                else:
                    if flops:
                        other_flops += flops
                    for acc in instr.outs:
                        if acc.buffer == PSUM:
                            s2p += acc.bytes
                    for acc in instr.ins:
                        if acc.buffer == PSUM:
                            p2s += acc.bytes
                first = start
            else:
                attrs = instr.attrs
                ins, outs = instr.ins, instr.outs
                if static is not None:
                    timing = cost
                else:
                    timing = None
                    if len(ins) == 1 and len(outs) == 1:  # DmaCostModel.raw's memo, same key, inlined
                        src, dst = ins[0], outs[0]
                        timing = dma_memo.get(
                            (
                                src.buffer,
                                src.bytes,
                                src.partitions,
                                src.run_bytes,
                                dst.buffer,
                                dst.bytes,
                                dst.partitions,
                                dst.run_bytes,
                                instr.opcode,
                                attrs.get("transpose") if attrs else None,
                                src.dtype,
                            )
                        )
                    if timing is None:
                        timing = dma_raw(instr)
                engines, descriptors, occ, moved, rd, wr, _ = timing
                queue = attrs.get("queue") if attrs else None
                if queue is None:  # the source line is the queue: its state lives in the line record
                    ready = line[10]
                    for d in deps:
                        if avail[d] > ready:
                            ready = avail[d]
                    line[10] = ready + q_busy
                    line[11] += 1
                else:
                    qstate = queues.get(queue)
                    if qstate is None:
                        qstate = queues[queue] = [0.0, 0]
                    ready = qstate[0]
                    for d in deps:
                        if avail[d] > ready:
                            ready = avail[d]
                    qstate[0] = ready + q_busy
                    qstate[1] += 1
                ready += dma_latency
                hbm_bytes = rd + wr
                served = 0.0
                transfers += 1
                descriptors_total += descriptors
                if hbm_bytes:
                    hbm_r += rd
                    hbm_w += wr
                    if book_one_sided or (book_two_sided and rd and wr):
                        # book from where the first packet can start (`ready` if it may back-fill)
                        f0 = pool_times[0]
                        # (pool.longest_hole, the property inlined: exact unless marked stale)
                        if f0 < ready or occ <= (pool.longest_hole if pool._stale else pool._longest):
                            f0 = ready
                        need = hbm_bytes / hbm_bw
                        bucket = int(f0 // bucket_ns)
                        lo = bucket * bucket_ns
                        used = hbm_used.get(bucket, 0.0)
                        begin = lo + used if lo + used > f0 else f0
                        if begin + need <= lo + bucket_ns:
                            hbm_used[bucket] = used + need
                            served = begin + need
                        else:
                            served = hbm_book(f0, need)
                        if transfers % _PRUNE_EVERY == 0:
                            self._hbm.prune(min([pool.times[0]] + [h[0] for h in pool.holes]))
                elif instr.ins and instr.outs and instr.ins[0].buffer == SBUF == instr.outs[0].buffer:
                    s2s += moved
                if (
                    engines == all_engines
                    and len(pool_times) == 1
                    and (
                        not hole_ends
                        or ready + occ > hole_ends[-1]
                        or occ > (pool.longest_hole if pool._stale else pool._longest)
                    )
                ):
                    # fast path: every engine in one group, no idle gap it could use (see DmaPool.take)
                    f = pool_times[0]
                    first = f if f > ready else ready
                    end = first + occ if first + occ > served else served
                    if ready > f:
                        pool.add_hole(f, ready, pool.masks[0])
                    pool_times[0] = end
                else:
                    first, end = pool_take(engines, ready, occ, served)
                avail.append(end)
                busy = engines * occ
                if attrs and attrs.get("spill"):
                    spill += moved
            codes.append(e)
            line[e] += 1
            line[_N + e] += busy
            if n < tl_limit:
                tl_events.append((e, first, end))
            if tl_lo[e] <= first and end <= tl_hi[e]:
                tl_acc[e] += busy
            else:
                tl_add(e, first, end, busy)
            if record is not None:
                record(instr, e, first, end, busy)

        def repeater(template: Instr) -> Callable[[int, tuple[int, ...]], None]:
            """See :meth:`Scheduler.repeater`."""
            t = template
            # without a recorder nothing keeps an instruction: one private copy, renumbered per call
            own = None if record is not None else Instr(*_fields(t))
            static: tuple | None = None  # (engine code, line record, cost), known after the first call

            def again(iid: int, deps: tuple[int, ...]) -> None:
                nonlocal static
                instr = own if own is not None else Instr(*_fields(t))
                instr.id = iid
                instr.deps = deps
                if static is not None:
                    emit(instr, static)
                    return
                emit(instr)  # (checks the engine, opens the line record)
                e = code_of(t.engine)
                if e == _DMA:
                    static = (e, hot_lines[(t.filename, t.lineno)], dma_raw(t))
                elif rules[e].get(t.opcode) is not None:  # (a default rule counts every use: not primed)
                    static = (e, hot_lines[(t.filename, t.lineno)], rules[e][t.opcode](t, k))

            return again

        def scalars() -> dict[str, float]:
            return {
                "flops": flops_total,
                "other_flops": other_flops,
                "peak_time": peak_time,
                "s2p": s2p,
                "p2s": p2s,
                "s2s": s2s,
                "hbm_r": hbm_r,
                "hbm_w": hbm_w,
                "spill": spill,
                "transfers": transfers,
                "descriptors": descriptors_total,
                "hoisted": hoisted,
                "backfilled": backfilled,
            }

        return emit, scalars, repeater

    @property
    def unknown_opcodes(self) -> Counter[tuple[str, str]]:
        """``(engine, opcode)`` pairs scheduled with an engine default rule, with counts."""
        return self.cost.unknown_opcodes

    def totals(self) -> ScheduleTotals:
        """Snapshot of the raw totals (including the untraced-spill tail once finished)."""
        sc = self._scalars()
        counts = [0] * _N
        busy = [0.0] * _N
        for line in self._hot.values():
            for i in range(_N):
                counts[i] += line[i]
                busy[i] += line[_N + i]
        makespan = max(max(self._free), self._pool.times[-1]) if self._codes else 0.0
        traced_spill = sc["spill"]
        untraced = max(0, self.stats.spill_bytes - traced_spill) if self.finished else 0
        tail = 0.0
        if untraced:
            rate = min(
                self.target.dma.engines * self.target.dma.engine_bw_bytes_per_ns,
                self.target.hbm.bw_bytes_per_ns,
            )
            tail = 2 * untraced / rate
        return ScheduleTotals(
            makespan_ns=makespan + tail + (self.params.kernel_fixed_ns if self._codes else 0.0),
            instructions=len(self._codes),
            busy_ns=dict(zip(ENGINES, busy)),
            counts=dict(zip(ENGINES, counts)),
            flops=int(sc["flops"]),
            other_flops=int(sc["other_flops"]),
            tensor_time_at_peak_ns=sc["peak_time"],
            hbm_read_bytes=int(sc["hbm_r"]) + untraced,
            hbm_write_bytes=int(sc["hbm_w"]) + untraced,
            sbuf_to_psum_bytes=int(sc["s2p"]),
            psum_to_sbuf_bytes=int(sc["p2s"]),
            sbuf_to_sbuf_bytes=int(sc["s2s"]),
            spill_bytes=int(traced_spill) + untraced,
            spill_tail_ns=tail,
            dma_transfers=int(sc["transfers"]),
            dma_descriptors=int(sc["descriptors"]),
            hoisted=int(sc["hoisted"]),
            backfilled=int(sc["backfilled"]),
            dma_engine_ns=busy[_DMA],
            queue_busy_ns=max(
                [q[1] for q in self._queues.values()] + [v[11] for v in self._hot.values()], default=0
            )
            * self.params.dma_queue_busy_ns,
            hotspots={key: v[: 2 * _N] for key, v in self._hot.items()},
            unknown_opcodes=dict(self.cost.unknown_opcodes),
        )

    def report(self, kernel_name: str | None = None, hotspot_limit: int = 20) -> CostReport:
        """The :class:`devkit.cost.report.CostReport` of everything emitted so far."""
        return build_report(
            self.totals(),
            self.target,
            self.params,
            self.stats,
            kernel_name=self.kernel_name if kernel_name is None else kernel_name,
            timeline=self.timeline,
            hotspot_limit=hotspot_limit,
        )


def schedule(
    instrs: Iterable[Instr],
    target: str | Target = "trn1",
    stats: MemoryStats | None = None,
    params: Params | None = None,
    kernel_name: str = "",
) -> CostReport:
    """Schedule a finished trace (e.g. :attr:`devkit.trace.Trace.instrs`) and return its CostReport."""
    sched = Scheduler(target, params, kernel_name=kernel_name)
    for instr in instrs:
        sched.emit(instr)
    sched.finish(stats if stats is not None else MemoryStats())
    return sched.report()
