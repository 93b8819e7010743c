"""Keeps the scheduled instruction trace for export (opt-in: the scheduler's ``recorder`` hook).

A :class:`TraceRecorder` is handed every instruction where :class:`devkit.cost.scheduler.Scheduler`
placed it.  It keeps:

* the first ``limit`` instructions **verbatim**: the :class:`devkit.trace.Instr` with its track,
  start, end and busy time;
* every later instruction **aggregated**: per track and per time bin one record of the count, busy
  time, bytes, FLOPs and the source lines that took the time.  The bin width starts at the span of
  the verbatim part / 64 and doubles (merging neighbouring bins) whenever an instruction lands past
  the last of ``bins`` bins, so memory stays bounded and the whole kernel is covered;
* the start time of every instruction (8 bytes each: the on-chip occupancy counters map
  instruction ids to time with it) and the running end of the schedule.

Tracks: one per compute engine (``tensor``, ``vector``, ``scalar``, ``gpsimd``) and one per DMA
queue (``attrs["queue"]`` when the trace names one, else the source line of the transfer, which is
how the scheduler models queues).

Busy time: a compute instruction's busy time is its duration on its engine.  A DMA transfer's busy
time is engine time summed over the DMA engines it used (``dma_engines`` x time per engine); the
report's ``engine_busy_us["dma"]`` is the sum over all transfers divided by the target's DMA engine
count.  Elided instructions (folded away by the compiler) are kept with busy time 0.

Units: ns, bytes.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable
from dataclasses import dataclass, field

from devkit.trace import DMA, ENGINES, Instr, MemoryStats

_DMA_CODE = ENGINES.index(DMA)


@dataclass(slots=True)
class Placed:
    """One verbatim instruction where the scheduler put it (ns; ``busy_ns`` < 0: elided)."""

    instr: Instr
    track: str
    start_ns: float
    end_ns: float
    busy_ns: float
    dma_engines: int = 0


@dataclass(slots=True)
class Aggregate:
    """Instructions of one track in one time bin, merged (ns, bytes)."""

    track: str
    engine: str
    start_ns: float
    end_ns: float
    count: int = 0
    busy_ns: float = 0.0
    bytes: int = 0
    flops: int = 0
    #: ``(filename, lineno)`` -> busy ns of that line in this bin.
    lines: dict[tuple[str, int], float] = field(default_factory=dict)
    opcodes: dict[str, int] = field(default_factory=dict)

    def merge(self, other: Aggregate) -> None:
        self.start_ns = min(self.start_ns, other.start_ns)
        self.end_ns = max(self.end_ns, other.end_ns)
        self.count += other.count
        self.busy_ns += other.busy_ns
        self.bytes += other.bytes
        self.flops += other.flops
        for k, v in other.lines.items():
            self.lines[k] = self.lines.get(k, 0.0) + v
        for k, c in other.opcodes.items():
            self.opcodes[k] = self.opcodes.get(k, 0) + c


def track_of(instr: Instr) -> str:
    """The track an instruction is drawn on: its engine, or ``dma <queue>`` for a DMA transfer."""
    if instr.engine != DMA:
        return instr.engine
    queue = instr.attrs.get("queue") if instr.attrs else None
    if queue is None:
        return f"dma {instr.filename}:{instr.lineno}"
    return f"dma queue {queue}"


def moved_bytes(instr: Instr) -> int:
    """Bytes an instruction moves: the larger of what it reads and what it writes."""
    return max(sum(a.bytes for a in instr.ins), sum(a.bytes for a in instr.outs))


class TraceRecorder:
    """Scheduler recorder hook (see module docstring); ``limit`` verbatim instructions, ``bins`` per
    track for the aggregated rest.  ``dma_timing`` (``DmaCostModel.raw``) supplies the DMA engine count
    of each verbatim transfer."""

    wants_occupancy = True

    def __init__(
        self,
        *,
        limit: int = 20_000,
        bins: int = 256,
        dma_timing: Callable[[Instr], tuple] | None = None,
    ) -> None:
        if limit < 0 or bins < 2:
            raise ValueError(f"limit must be >= 0 and bins >= 2, got limit={limit}, bins={bins}")
        self.limit = limit
        self.bins = bins
        self.dma_timing = dma_timing
        self.placed: list[Placed] = []
        self.aggregates: dict[tuple[str, int], Aggregate] = {}
        self.starts = array("d")
        self.end_ns = 0.0
        self.instructions = 0
        self.elided = 0
        self.busy_by_track: dict[str, float] = {}
        self.count_by_track: dict[str, int] = {}
        self.stats: MemoryStats | None = None
        self._bin_ns = 0.0

    @property
    def aggregated(self) -> int:
        """Instructions that are only in the aggregates (not verbatim)."""
        return self.instructions - len(self.placed)

    @property
    def bin_ns(self) -> float:
        """Current width of an aggregation bin (0 while everything is verbatim)."""
        return self._bin_ns

    def record(self, instr: Instr, engine: int, start_ns: float, end_ns: float, busy_ns: float) -> None:
        track = track_of(instr)
        self.instructions += 1
        self.starts.append(start_ns)
        if end_ns > self.end_ns:
            self.end_ns = end_ns
        busy = busy_ns if busy_ns > 0.0 else 0.0
        if busy_ns < 0.0:
            self.elided += 1
        self.busy_by_track[track] = self.busy_by_track.get(track, 0.0) + busy
        self.count_by_track[track] = self.count_by_track.get(track, 0) + 1
        if len(self.placed) < self.limit:
            n = 0
            if engine == _DMA_CODE and self.dma_timing is not None:
                n = int(self.dma_timing(instr)[0])
            self.placed.append(Placed(instr, track, start_ns, end_ns, busy_ns, n))
            return
        if not self._bin_ns:
            self._bin_ns = max(1000.0, self.end_ns / 64)
        b = int(start_ns // self._bin_ns)
        while b >= self.bins:
            self._coarsen()
            b = int(start_ns // self._bin_ns)
        agg = self.aggregates.get((track, b))
        if agg is None:
            agg = self.aggregates[(track, b)] = Aggregate(track, instr.engine, start_ns, end_ns)
        elif start_ns < agg.start_ns or end_ns > agg.end_ns:
            agg.start_ns = min(agg.start_ns, start_ns)
            agg.end_ns = max(agg.end_ns, end_ns)
        agg.count += 1
        agg.busy_ns += busy
        agg.bytes += moved_bytes(instr)
        agg.flops += instr.flops
        key = (instr.filename, instr.lineno)
        agg.lines[key] = agg.lines.get(key, 0.0) + busy
        agg.opcodes[instr.opcode] = agg.opcodes.get(instr.opcode, 0) + 1

    def _coarsen(self) -> None:
        self._bin_ns *= 2
        merged: dict[tuple[str, int], Aggregate] = {}
        for (track, b), agg in self.aggregates.items():
            key = (track, b // 2)
            have = merged.get(key)
            if have is None:
                merged[key] = agg
            else:
                have.merge(agg)
        self.aggregates = merged

    def finish(self, stats: MemoryStats) -> None:
        self.stats = stats
