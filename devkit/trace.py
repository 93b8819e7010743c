"""The instruction trace: the one-way interface between the simulator and the cost model.

The simulator (``devkit.sim``) emits one :class:`Instr` per hardware instruction it executes, in
program order, to a :class:`TraceSink`.  The cost model (``devkit.cost``) consumes those records and
nothing else from the simulator: it never imports ``devkit.sim``.

Units: bytes are bytes, element counts are elements, nothing here is time.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

#: Engine names used in :attr:`Instr.engine`.
TENSOR = "tensor"
VECTOR = "vector"
SCALAR = "scalar"
GPSIMD = "gpsimd"
DMA = "dma"
ENGINES = (TENSOR, VECTOR, SCALAR, GPSIMD, DMA)

#: Memory names used in :attr:`Access.buffer`.
HBM = "hbm"
SBUF = "sbuf"
PSUM = "psum"


@dataclass(slots=True)
class Access:
    """One operand of an instruction as the memory system sees it.

    ``partitions`` is the number of SBUF/PSUM partitions touched (for an HBM operand of a DMA: the
    number of rows that land on separate partitions on the on-chip side).  ``elems`` is the number of
    elements per partition.  ``bytes`` is the total number of bytes touched.  ``run_bytes`` is the
    length in bytes of one contiguous run in the operand's own memory (a DMA descriptor moves at most
    one run; an element-wise transposed access has ``run_bytes == itemsize``).
    """

    buffer: str
    dtype: str
    partitions: int
    elems: int
    bytes: int
    run_bytes: int


@dataclass(slots=True)
class Instr:
    """One executed instruction.

    ``id`` values are consecutive from 0 in emission (program) order within one kernel run.

    ``deps`` are the ids of earlier instructions this one must wait for: read-after-write,
    write-after-read and write-after-write on overlapping memory (including reuse of the same
    physical SBUF/PSUM addresses by a later allocation, and PSUM bank reuse).

    ``attrs`` carries opcode-specific facts the cost model may use:

    - ``nc_matmul``/``matmul``: ``stationary_free`` (M), ``moving_free`` (N), ``contract`` (K),
      ``accumulate`` (bool), ``is_stationary_onezero``/``is_moving_onezero`` (bool);
    - ``activation``: ``func`` (name), ``reduce`` (bool);
    - ``tensor_tensor``/``tensor_reduce``/``tensor_partition_reduce``: ``op`` (ALU name);
      ``tensor_scalar``/``scalar_tensor_tensor``: ``op0``/``op1``;
    - ``memset``: ``value``;
    - DMA: ``transpose``, ``spill``, ``indirect`` (bool) and ``queue`` (any hashable; the cost model
      defaults to the source line).
    """

    id: int
    engine: str
    opcode: str
    ins: tuple[Access, ...]
    outs: tuple[Access, ...]
    flops: int
    deps: tuple[int, ...]
    filename: str
    lineno: int
    attrs: dict | None = None


@dataclass(slots=True)
class MemoryStats:
    """What the simulator's allocator saw over a whole kernel run.

    Peaks are per partition (bytes of the busiest partition's address space in use at once);
    multiply by the partition count for a total.  ``spill_bytes`` is the total spill traffic in bytes
    (spill stores plus reloads) caused by auto-allocated tensors that did not fit on chip; when the
    simulator also emits those transfers as DMA instructions with ``attrs["spill"]``, they are the same
    bytes (the cost model charges only what the trace does not already carry).
    """

    sbuf_peak_bytes_per_partition: int = 0
    psum_peak_bytes_per_partition: int = 0
    spill_bytes: int = 0
    partitions: int = 128
    #: On request only (a sink whose ``wants_occupancy`` is true): on-chip bytes per partition live
    #: over the run, ``{"sbuf": [(instruction id, bytes), ...], "psum": [...]}``, a step function
    #: that holds from each id to the next (PSUM counted in whole banks), downsampled to keep each
    #: window's peak.  It covers tiles whose lifetimes the allocator tracks (not direct allocations).
    occupancy: dict[str, list[tuple[int, int]]] | None = None
    #: ``(buffer, filename, lineno)`` of each on-chip allocation site -> distinct physical buffers its
    #: tiles rotated over (>= 2: multi-buffered by the allocator; see devkit.sim.alloc)
    buffers: dict[tuple[str, str, int], int] = field(default_factory=dict)
    #: ``(buffer, filename, lineno, description)`` of the allocation that took the live set over
    #: capacity, where the compiler spills (empty when everything fits)
    spilled: tuple[tuple[str, str, int, str], ...] = ()


class TraceSink(Protocol):
    """Receives instructions while a kernel runs.

    A sink may also offer ``repeater(template) -> again``, where ``again(id, deps)`` emits an instruction
    equal to ``template`` but for its ``id`` and ``deps`` (loop replay synthesises most of a long loop's
    instructions from a template; :meth:`devkit.cost.scheduler.Scheduler.repeater` then builds no
    :class:`Instr` per instruction).  Without it the simulator builds each instruction and calls ``emit``.
    """

    def emit(self, instr: Instr) -> None: ...

    def finish(self, stats: MemoryStats) -> None: ...


@dataclass
class Trace:
    """A sink that keeps every instruction (the default)."""

    instrs: list[Instr] = field(default_factory=list)
    stats: MemoryStats = field(default_factory=MemoryStats)
    finished: bool = False

    def emit(self, instr: Instr) -> None:
        self.instrs.append(instr)

    def finish(self, stats: MemoryStats) -> None:
        self.stats = stats
        self.finished = True

    def __len__(self) -> int:
        return len(self.instrs)


class NullSink:
    """A sink that drops everything (plain numerics runs with no cost question asked)."""

    def emit(self, instr: Instr) -> None:  # pragma: no cover - trivial
        pass

    def finish(self, stats: MemoryStats) -> None:  # pragma: no cover - trivial
        pass
