"""The simulated NeuronCore: memory, loops, instruction issue and the trace.

One :class:`Machine` exists per kernel run.  The ``devkit.nki`` API functions validate their arguments
and call into it: allocate storage, execute an instruction's numerics, and :meth:`Machine.emit` the
instruction record.  The last emitted instruction stays *pending* until the next one is emitted, so
that ``dst[...] = op(...)`` can retarget ``op``'s output to ``dst`` (one instruction on hardware, not an
op plus a copy) before the record reaches the trace.
"""

from __future__ import annotations

import functools
import itertools
import random
import threading
import warnings
import weakref
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from devkit import dtypes as dt
from devkit.errors import (
    CapacityError,
    ImmutableInputError,
    SpillWarning,
    TileShapeError,
    user_location,
)
from devkit.sim import tensor as _tensor
from devkit.sim.alloc import Placement, RingAllocator
from devkit.sim.deferred import Chains
from devkit.sim.deps import DependencyTracker, keyspec_for
from devkit.sim.liveness import Liveness
from devkit.sim.options import Geometry, SimOptions
from devkit.sim.races import RaceChecker
from devkit.sim.replay import MIN_ITERATIONS, LoopRecorder, plan, replay
from devkit.sim.storage import HBM_BUFFERS, Storage
from devkit.sim.tensor import Tensor
from devkit.sim.tracelocals import LocalsGuard
from devkit.sim.unwritten import note_overwrites
from devkit.trace import Access, Instr, MemoryStats, NullSink, TraceSink

_current = threading.local()


def current() -> Machine | None:
    """The machine of the kernel running on this thread, if any."""
    return getattr(_current, "machine", None)


@dataclass
class LoopFrame:
    kind: str  # "affine", "sequential", "static"
    instance: int
    iter: int = -1
    scope: list = field(default_factory=list)


@dataclass
class Pending:
    engine: str
    opcode: str
    ins: list[Tensor]
    outs: list[Tensor]
    flops: int
    attrs: dict | None
    loc: tuple[str, int]
    raw: Any = None  # fp32 results before rounding (for retargeting into a destination of another dtype)
    mask: Any = None  # positions the instruction wrote
    exact: Any = None  # dtype in which ``raw`` is exactly representable, if any


class Machine:
    """State of one kernel run: memories, allocators, loops, dependencies and the trace sink."""

    def __init__(self, options: SimOptions, geometry: Geometry, sink: TraceSink) -> None:
        self.options = options
        self.geometry = geometry
        self.sink = sink
        # a sink that drops instructions (plain numerics runs) needs no dependency tracking and no
        # instruction records: only liveness (capacity verdicts) is kept per access
        self.tracing = not isinstance(sink, NullSink)
        self.numerics = options.numerics
        self.active = False
        self._sid = 0
        self._iid = 0
        self._loop_instance = 0
        self.loops: list[LoopFrame] = []
        self.pending: Pending | None = None
        self.sbuf = RingAllocator(geometry.sbuf_usable_bytes_per_partition, align=4)
        self.psum = RingAllocator(
            geometry.psum_bytes_per_partition, bank_bytes=geometry.psum_bank_bytes, align=4
        )
        self.placements: dict[int, Placement] = {}
        self.reuse_deps: dict[int, set[int]] = {}  # sid -> ids its first access waits for (address reuse)
        self.direct: dict[int, Any] = {}  # sid -> DirectPlacement (nki.compiler allocations)
        self.direct_high_water = {"sbuf": 0, "psum": 0}
        self._owners: dict[str, Any] = {}
        self.deps = DependencyTracker()
        self.chains = Chains()  # deferred matmul accumulation (numerics runs; devkit.sim.deferred)
        self.liveness = Liveness(geometry)
        self.recorders: list[LoopRecorder] = []  # loops recording iterations for replay (cost-only runs)
        # NKI 0.x loops recording iterations for replay (devkit.sim.replay2), and the address-reuse ids the
        # instruction being committed inherited (they are recomputed when replayed, not shifted)
        self.recorders2: list[Any] = []
        self.reuse_now: set[int] = set()
        self.replays = 0
        self.replay_fallbacks = 0  # NKI 0.x loops that could have replayed but executed every iteration
        self._accumulating = False  # set while flushing a matmul that accumulates into PSUM
        self.races = RaceChecker(self.loops) if (options.check_races and options.numerics) else None
        self._spill_warned: set[tuple[str, int]] = set()
        self.placement_noted: set[tuple[str, int]] = set()  # lines given a PlacementNote (nki/_placement.py)
        self.program_ids: tuple[int, ...] = ()
        self.grid: tuple[int, ...] = ()
        self.shared_outputs: list[Storage] = []
        self._shared_cursor = 0
        self.rng = np.random.default_rng(options.seed)
        self._shuffle = random.Random(options.seed) if options.affine_order == "shuffled" else None
        self.inputs: list[Storage] = []
        self.accumulators: dict[str, Any] = {}  # ScalarE / VectorE accumulator registers
        # banks one compiler-managed PSUM tensor may span: 1 in Beta 1; NKI 0.x tensors may span several
        # (set by devkit.nki.beta2.language.ndarray)
        self.psum_tile_banks = 1
        # an NKI 0.x (Beta 2) kernel runs: its rules apply, e.g. fresh integer memory reads as 4 (set by
        # devkit.nki.beta2.language)
        self.nki_beta2 = False
        # NKI 0.x: HBM storages (by id) that received never-written data, with what they received
        # (devkit.sim.unwritten.StoredGarbage; checked when the kernel ends)
        self.stored_garbage: dict[int, Any] = {}
        # (storage, box, reduce class) of the `dst op= value` being executed: its read and write of dst
        # are one commutative update (races.py lets affine_range iterations reduce into one location)
        self.reducing: tuple | None = None
        self._layouts: dict[
            int, tuple[tuple[int, ...], int]
        ] = {}  # storage id -> (shape, itemsize) first tracked

    # ---- activation --------------------------------------------------------------------------------
    def __enter__(self) -> Machine:
        if current() is not None:
            raise RuntimeError("a kernel is already being simulated on this thread")
        _current.machine = self
        self.active = True
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            if exc[0] is None:
                self.flush()
        finally:
            _current.machine = None
            self.active = False

    def finish(self) -> MemoryStats:
        self.flush()
        self.chains.finish()
        v = self.liveness.verdict(open_groups=self.nki_beta2)  # see devkit.sim.liveness
        self._judge_capacity(v)
        stats = MemoryStats(
            sbuf_peak_bytes_per_partition=max(v.sbuf_peak_bytes, self.direct_high_water["sbuf"]),
            psum_peak_bytes_per_partition=max(v.psum_peak_bytes, self.direct_high_water["psum"]),
            spill_bytes=v.spill_bytes,
            partitions=self.geometry.partitions,
            buffers={
                **{("sbuf", *k): n for k, n in self.sbuf.buffers_by_site().items()},
                **{("psum", *k): n for k, n in self.psum.buffers_by_site().items()},
            },
            spilled=tuple(
                (buf, over[1][0], over[1][1], over[2])
                for buf, over in (("sbuf", v.sbuf_over), ("psum", v.psum_over))
                if over is not None
            ),
        )
        if getattr(self.sink, "wants_occupancy", False):  # opt-in (trace export): costs nothing otherwise
            stats.occupancy = self.liveness.occupancy()
        self.sink.finish(stats)
        return stats

    def _judge_capacity(self, v: Any) -> None:
        """Capacity verdicts from true tile lifetimes (see :mod:`devkit.sim.liveness`)."""
        g = self.geometry
        if v.psum_acc_over is not None:
            banks, (fn, ln), desc = v.psum_acc_over
            if self.nki_beta2:  # NKI 0.x: only open accumulation groups are pinned to PSUM
                msg = (
                    f"{banks} PSUM banks of matmul accumulation groups are open at once ({desc} allocated at "
                    f"{fn}:{ln} went over) but PSUM has {g.psum_banks} banks of {g.psum_bank_bytes} bytes, and "
                    "an accumulation group cannot leave PSUM before its last matmul; finish each group before "
                    "opening more (each PSUM tile occupies whole banks)"
                )
            else:
                msg = (
                    f"{banks} PSUM banks of matmul accumulation tiles are live at once ({desc} allocated at "
                    f"{fn}:{ln} went over) but PSUM has {g.psum_banks} banks of {g.psum_bank_bytes} bytes, and "
                    "matmul accumulation cannot be spilled; copy results out and let accumulation tiles die "
                    "before starting more (each PSUM tile occupies whole banks)"
                )
            raise CapacityError(msg, rule="psum-capacity", filename=fn, lineno=ln)
        if v.psum_over is not None:
            banks, (fn, ln), desc = v.psum_over
            msg = (
                f"{banks} PSUM banks of tiles are live at once ({desc} allocated at {fn}:{ln} went over) but "
                f"PSUM has {g.psum_banks}; the compiler would spill PSUM tiles to SBUF"
            )
            self._over_capacity(msg, "psum-capacity", (fn, ln))
        if v.sbuf_over is not None:
            peak, (fn, ln), desc = v.sbuf_over
            msg = (
                f"{desc} allocated at {fn}:{ln} does not fit: {peak} bytes per partition of SBUF are live at "
                f"once, {g.sbuf_usable_bytes_per_partition} usable on {g.name}; the compiler would spill to HBM"
            )
            self._over_capacity(msg, "sbuf-capacity", (fn, ln))

    def _over_capacity(self, msg: str, rule: str, loc: tuple[str, int]) -> None:
        if self.options.strict_capacity:
            raise CapacityError(msg + " (strict_capacity is on)", rule=rule, filename=loc[0], lineno=loc[1])
        if loc not in self._spill_warned:
            self._spill_warned.add(loc)
            warnings.warn_explicit(msg, SpillWarning, loc[0], loc[1])

    # ---- storage -----------------------------------------------------------------------------------
    def new_storage(
        self,
        shape: tuple[int, ...],
        dtype: Any,
        buffer: str,
        *,
        par_axis: int | None = None,
        fill: Any = "poison",
        data: np.ndarray | None = None,
        name: str = "",
        kind: str = "auto",
        temp: bool = False,
        loc: tuple[str, int] | None = None,
    ) -> Storage:
        """Create a tensor's storage.

        ``fill``: ``"poison"`` (NaN / int sentinel, tracked as uninitialised), a number, or ``None``
        when ``data`` is given or the caller writes every element at once.  ``temp``: the result of an
        instruction, placed in on-chip memory only when the instruction is committed (so that an
        immediate ``dst[...] = result`` costs no extra space).
        """
        if loc is None:
            loc = user_location()
        on_chip = buffer in ("sbuf", "psum")
        if on_chip:
            if par_axis is None:
                par_axis = 0
            if len(shape) < 2 and kind not in ("direct", "temp"):
                raise TileShapeError(
                    f"{buffer} tensors need at least 2 dimensions (partition + free), got shape {list(shape)}; "
                    "use shape (P, 1) for a column",
                    rule="insufficient-rank",
                    filename=loc[0],
                    lineno=loc[1],
                )
            p = shape[par_axis]
            if p > self.geometry.partitions:
                raise TileShapeError(
                    f"partition dimension {p} exceeds the architecture limit of {self.geometry.partitions} "
                    f"({buffer} tensor of shape {list(shape)})",
                    rule="partition-limit",
                    filename=loc[0],
                    lineno=loc[1],
                )
        else:
            par_axis = None
        for s in shape:
            if not isinstance(s, (int, np.integer)) or s < 0:
                raise TileShapeError(
                    f"tensor shape {list(shape)} must be non-negative integers",
                    filename=loc[0],
                    lineno=loc[1],
                )
        self._sid += 1
        sdata = None
        if self.numerics:
            if data is not None:
                sdata = data
            else:
                sd = dt.storage_dtype(dtype)
                if fill is None:
                    sdata = np.empty(shape, dtype=sd)
                elif isinstance(fill, str):
                    if self.options.check_uninit:  # poisoned on first access (Storage._poison)
                        sdata = np.empty(shape, dtype=sd)
                    else:
                        sdata = np.full(shape, dt.poison_value(dtype, nki0=self.nki_beta2), dtype=sd)
                elif isinstance(fill, (int, float)) and fill == 0 and not np.signbit(fill):  # not -0.0
                    sdata = np.zeros(shape, dtype=sd)
                else:
                    sdata = np.full(shape, fill, dtype=sd)
        st = Storage(
            self,
            self._sid,
            tuple(int(s) for s in shape),
            dtype,
            buffer,
            par_axis,
            sdata,
            name=name,
            kind=kind,
            origin=loc,
        )
        if self.numerics and fill == "poison" and self.options.check_uninit and data is None:
            st.uninit = np.ones(shape, dtype=bool)
            st.n_uninit = st.uninit.size
            st.unfilled = True
        if on_chip and not temp and kind != "direct":
            self._place(st, loc)
        if self.loops:
            self.loops[-1].scope.append(weakref.ref(st))
            st.depth = len(self.loops)
        return st

    def _place(self, st: Storage, loc: tuple[str, int]) -> None:
        """Give an on-chip tensor an address.  Whether everything fits is judged from true lifetimes when
        the kernel ends (:meth:`finish`); here only a single logical tile larger than the memory is a fault."""
        g = self.geometry
        tile_bytes = st.tile_bytes
        if st.buffer == "sbuf":
            if tile_bytes > g.sbuf_usable_bytes_per_partition:
                per = " per logical tile" if st.par_axis else ""
                raise CapacityError(
                    f"{st.describe()} needs {tile_bytes} bytes per partition{per}"
                    f" but only {g.sbuf_usable_bytes_per_partition} bytes per partition of SBUF are usable on "
                    f"{g.name}; split it into smaller tiles",
                    rule="sbuf-capacity",
                    filename=loc[0],
                    lineno=loc[1],
                )
            p = self.sbuf.allocate(st.bytes_pp, st.origin)
        else:
            bank = g.psum_bank_bytes
            if tile_bytes > bank * self.psum_tile_banks:
                fits = (
                    f"one {bank}-byte bank (512 fp32 elements)"
                    if self.psum_tile_banks == 1
                    else f"the {self.psum_tile_banks} banks of {bank} bytes"
                )
                raise CapacityError(
                    f"PSUM tile {st.describe()} uses {tile_bytes} bytes per partition; a PSUM tile must fit {fits}",
                    rule="psum-tile-size",
                    filename=loc[0],
                    lineno=loc[1],
                )
            p = self.psum.allocate(st.bytes_pp, st.origin)
        st.addr = p.addr
        self.placements[st.id] = p
        if self.recorders2:
            self.note_alloc(st.id, st)
        if self.tracing:
            inherited = self.deps.inherit(st.buffer, p.addr, p.addr + p.nbytes)
            if inherited:
                self.reuse_deps[st.id] = inherited

    def take_sids(self, n: int) -> int:
        """Reserve the next ``n`` storage ids (loop replay names synthesised tile instances with them);
        returns the first."""
        first = self._sid + 1
        self._sid += n
        return first

    def rename_storage(self, st: Storage, new: int) -> None:
        """Loop replay: a live tile takes the id ``new`` of a synthesised tile whose state it takes over
        (placements, access records and lifetimes are moved by the caller)."""
        layout = self._layouts.pop(st.id, None)
        if layout is not None:
            self._layouts[new] = layout
        self.reuse_deps.pop(st.id, None)
        st.id = new

    def note_alloc(self, key: int, st: Storage) -> None:
        """Tell recording NKI 0.x loops that tile ``key`` (shaped like ``st``) was placed."""
        for rec in self.recorders2:
            if rec.active:
                rec.alloc(key, st)

    def note_free(self, key: int, st: Storage, ids: set[int]) -> None:
        """Tell recording NKI 0.x loops that tile ``key`` was freed, last used by ``ids``."""
        for rec in self.recorders2:
            if rec.active:
                rec.free(key, st, ids)

    def take_instr_ids(self, n: int) -> int:
        """Reserve the next ``n`` instruction ids (loop replay issues a synthesised iteration's
        instructions under them); returns the first."""
        first = self._iid
        self._iid += n
        return first

    def place_replayed(self, st: Storage, deps: set[int]) -> Placement:
        """Loop replay: allocate a synthesised instance of private tile ``st``; address-reuse
        dependencies go into ``deps``."""
        alloc = self.sbuf if st.buffer == "sbuf" else self.psum
        p = alloc.allocate(st.bytes_pp, st.origin)
        deps |= self.deps.inherit(st.buffer, p.addr, p.addr + p.nbytes)
        return p

    def free_replayed(self, st: Storage, p: Placement, ids: set[int]) -> None:
        """Loop replay: a synthesised tile instance dies; ``ids`` are the instructions that used it."""
        (self.sbuf if st.buffer == "sbuf" else self.psum).free(p)
        self.deps.retire_ids(st.buffer, p.addr, p.addr + p.nbytes, ids)

    def release(self, st: Storage) -> None:
        """End of a tensor's life: its on-chip space can be reused."""
        if not st.alive:
            return
        st.alive = False
        if self.chains.pending:
            self.chains.settle(st.id)  # (an alias of the tile may still show its values)
        self.liveness.close(st.id)
        p = self.placements.pop(st.id, None)
        if p is not None and self.recorders2:
            self.note_free(st.id, st, self.deps.ids_of(st.id))
        if p is not None:
            (self.sbuf if st.buffer == "sbuf" else self.psum).free(p)
            self.deps.retire(st.id, st.buffer, p.addr, p.addr + p.nbytes)
            self.reuse_deps.pop(st.id, None)
        self.direct.pop(st.id, None)
        if self.races is not None:
            self.races.forget(st.id)
        if st.buffer in HBM_BUFFERS:
            self.deps.drop(("hbm", st.id))

    def discard_temp(self, st: Storage) -> None:
        """A result that was retargeted before it was committed: it never occupied memory."""
        st.alive = False

    def input_storage(self, arr: np.ndarray | None, shape: tuple[int, ...], dtype: Any, name: str) -> Storage:
        data = dt.to_storage(arr, dtype) if (arr is not None and self.numerics) else None
        self._sid += 1
        st = Storage(
            self,
            self._sid,
            shape,
            dtype,
            "shared_hbm",
            None,
            data,
            name=name,
            kind="input",
            origin=("<kernel argument>", 0),
        )
        self.inputs.append(st)
        return st

    # ---- loops -------------------------------------------------------------------------------------
    def iterate(self, kind: str, values: Iterable[int], caller: Any = None) -> Iterator[int]:
        """Run a kernel loop: every iteration executes; tensors created in an iteration die at its end.

        ``caller`` is the kernel frame running the loop: for ``affine``/``sequential`` loops its plain
        Python locals are reset before every iteration (Beta 1 traces such loop bodies once; see
        :mod:`devkit.sim.tracelocals`).
        """
        self._loop_instance += 1
        frame = LoopFrame(kind, self._loop_instance)
        self.loops.append(frame)
        seq = list(values)
        if kind == "affine" and self._shuffle is not None:
            self._shuffle.shuffle(seq)
        guard = LocalsGuard(caller) if kind != "static" and caller is not None else None
        rec = None
        if (
            not self.numerics
            and self.options.replay_loops
            and kind != "static"
            and len(seq) >= MIN_ITERATIONS
        ):
            rec = LoopRecorder()
            self.recorders.append(rec)
        try:
            n = 0
            while n < len(seq):
                v = seq[n]
                frame.iter = v
                if n and guard is not None:
                    guard.restore()
                if rec is not None and n < 2:
                    self.flush()
                    rec.start(self._iid, self._sid)
                yield v
                self._end_scope(frame)
                if rec is not None and n < 2:
                    self.flush()
                    rec.stop()
                    if n == 1:
                        self.recorders.remove(rec)
                        kinds = plan(rec)
                        if kinds is not None:
                            replay(self, rec, kinds, len(seq))
                            n = len(seq) - 2  # iterations 2 .. n-2 were synthesised
                        rec = None
                n += 1
        finally:
            if rec is not None and rec in self.recorders:
                self.recorders.remove(rec)
            if guard is not None:
                guard.release()
            self._end_scope(frame)
            if frame in self.loops:
                del self.loops[self.loops.index(frame) :]
            if self.races is not None:
                self.races.loop_ended(frame)

    def _end_scope(self, frame: LoopFrame) -> None:
        if not frame.scope:
            return
        self.flush()
        for ref in frame.scope:
            st = ref()
            if st is not None and st.alive:
                self.release(st)
        frame.scope.clear()

    def loop_context(self) -> tuple[tuple[int, int, str], ...]:
        return tuple((f.instance, f.iter, f.kind) for f in self.loops)

    # ---- writes and reads that the checks see --------------------------------------------------------
    def register_direct(self, st: Storage, placement: Any) -> None:
        """A tensor placed by a nki.compiler allocator (every logical tile at a kernel-chosen address)."""
        self.direct[st.id] = placement
        top = max((a for _, a in placement.blocks.values()), default=0) + placement.tile_bytes
        if st.buffer == "psum":
            top = max(top, 0)
        self.direct_high_water[st.buffer] = max(self.direct_high_water[st.buffer], top)

    def _direct_regions(
        self, t: Tensor
    ) -> list[tuple[tuple[int, ...], tuple[tuple[int, int], tuple[int, int]]]]:
        """Physical regions (per logical tile touched) of a view of a directly allocated tensor."""
        st = t.st
        pl = self.direct[st.id]
        box = t.box()
        pa = st.par_axis or 0
        ranges = [range(lo, hi) for lo, hi in box[:pa]]
        # byte range inside one logical tile
        lo = hi = 0
        stride = st.itemsize
        for d in range(st.ndim - 1, pa, -1):
            a, b = box[d]
            lo += a * stride
            hi += (b - 1) * stride
            stride *= st.shape[d]
        out = []
        plo, phi = box[pa]
        for idx in itertools.product(*ranges):
            sp, addr = pl.blocks[tuple(idx)]
            out.append((tuple(idx), ((sp + plo, sp + phi), (addr + lo, addr + hi + st.itemsize))))
        return out

    def _check_direct(
        self, t: Tensor, is_write: bool, loc: tuple[str, int], accumulate: bool = False
    ) -> None:
        """Reading a logical tile whose bytes another tile overwrote is a fault of the allocation."""
        st = t.st
        sp = self._owners.get(st.buffer)
        if sp is None:
            from devkit.sim.deps import _Space

            sp = self._owners[st.buffer] = _Space(((1, 10),))
        for idx, region in self._direct_regions(t):
            me = (st.id, idx)
            if is_write:
                (p0, p1), (b0, b1) = region
                for rec in sp.overlapping(region):
                    (q0, q1), (c0, c1) = rec[0]
                    if p0 <= q0 and q1 <= p1:
                        # the new write owns [b0, b1) now; the old tile keeps what lies outside
                        sp.remove(rec)
                        for lo, hi in ((c0, min(c1, b0)), (max(c0, b1), c1)):
                            if lo < hi:
                                sp.add([((q0, q1), (lo, hi)), *rec[1:]])
                sp.add([region, me, loc, st.describe(), st.name, st.origin])
            elif not accumulate:
                for rec in sp.overlapping(region):
                    if rec[1] != me:
                        ofn, oln = rec[2]
                        raise CapacityError(
                            f"{st.describe()} (allocated at {st.origin[0]}:{st.origin[1]}) logical tile {list(idx)} "
                            f"is read after its memory ({st.buffer} partitions [{region[0][0]}, {region[0][1]}), "
                            f"bytes [{region[1][0]}, {region[1][1]})) was overwritten by {rec[3]} (allocated at "
                            f"{rec[5][0]}:{rec[5][1]}) logical tile {list(rec[1][1])} at {ofn}:{oln}: the two "
                            "allocations overlap while both are in use; give them disjoint addresses or more "
                            "buffers (num_free_tiles)",
                            rule="direct-alloc-overlap",
                            filename=loc[0],
                            lineno=loc[1],
                        )

    def check_write(self, t: Tensor, loc: tuple[str, int] | None = None, *, accumulate: bool = False) -> None:
        st = t.st
        if st.kind == "direct":
            self._check_direct(t, True, loc or user_location(), accumulate)
        if st.is_input:
            if loc is None:
                loc = user_location()
            raise ImmutableInputError(
                f"kernel input '{st.name}' {list(st.shape)} is immutable; allocate an output with "
                "nl.ndarray(..., buffer=nl.shared_hbm) and write that instead",
                filename=loc[0],
                lineno=loc[1],
            )
        if self.races is not None and self.loops:
            r = self.reducing
            if r is not None and r[0] is st and r[1] == t.box():
                accumulate = r[2]
            self.races.access(t, True, accumulate, loc or user_location())

    def check_read(self, t: Tensor, loc: tuple[str, int] | None = None) -> None:
        if t.st.kind == "direct":
            self._check_direct(t, False, loc or user_location())
        if self.races is not None and self.loops:
            r = self.reducing
            red = r[2] if (r is not None and r[0] is t.st and r[1] == t.box()) else False
            self.races.access(t, False, red, loc or user_location())

    # ---- instruction issue ---------------------------------------------------------------------------
    def emit(
        self,
        engine: str,
        opcode: str,
        ins: list[Tensor],
        outs: list[Tensor],
        flops: int = 0,
        attrs: dict | None = None,
        loc: tuple[str, int] | None = None,
    ) -> Pending:
        """Issue one instruction (committed to the trace when the next one is issued)."""
        if self.pending is not None:
            self.flush()
        p = Pending(engine, opcode, ins, outs, flops, attrs, loc or user_location())
        if self.stored_garbage:  # NKI 0.x: never-written data another program wrote into HBM
            note_overwrites(self, outs, p.loc)
        self.pending = p
        return p

    def retarget(self, p: Pending, old: Tensor, new: Tensor) -> None:
        """Make pending instruction ``p`` write ``new`` instead of its temporary result ``old``."""
        for i, o in enumerate(p.outs):
            if o is old:
                p.outs[i] = new
                break
        # The temporary stays valid (its values are those just written to ``new``): a kernel that also
        # keeps the result under a name (`t = nl.load(a); b[...] = t`) may read it later, and it is then
        # placed in memory on first use.

    def flush(self) -> None:
        p = self.pending
        if p is None:
            return
        self.pending = None
        for o in p.outs:
            if o._fresh is p:
                # a result's link to its instruction matters only while that is pending (retargeting);
                # dropped now, so that result and instruction do not keep each other (and the tile) alive
                o._fresh = None
            st = o.st
            if st.on_chip and st.addr is None and st.alive and st.kind != "direct":
                self._place(st, p.loc)
        for t in p.ins:
            st = t.st
            if st.on_chip and st.addr is None and st.alive and st.kind == "temp":
                self._place(st, p.loc)  # a retargeted result read under its own name
        iid = self._iid
        self._iid += 1
        if self.recorders2:
            self.reuse_now = set()
        if not self.tracing:
            self._touch_only(p, iid)
            return
        ins = tuple(self._access(t) for t in p.ins)
        outs = tuple(self._access(t) for t in p.outs)
        deps: set[int] = set()
        operands: list = []
        for t in p.ins:
            operands.append(self._dep(t, iid, p.engine, False, deps))
        acc = bool(p.attrs and p.attrs.get("accumulate")) and p.engine == "tensor"
        self._accumulating = acc
        for t in p.outs:
            operands.append(self._dep(t, iid, p.engine, True, deps))
        self._accumulating = False
        if _tensor.offset_views_made[0]:
            for t in self._offset_tiles(p):
                operands.append(self._dep(t, iid, p.engine, False, deps))
        deps.discard(iid)
        instr = Instr(
            iid, p.engine, p.opcode, ins, outs, p.flops, tuple(sorted(deps)), p.loc[0], p.loc[1], p.attrs
        )
        self.commit_instr(instr, operands, acc)

    def _touch_only(self, p: Pending, iid: int) -> None:
        """Untraced issue: record the on-chip accesses of ``p`` for liveness and nothing else."""
        acc = bool(p.attrs and p.attrs.get("accumulate")) and p.engine == "tensor"
        offsets = self._offset_tiles(p) if _tensor.offset_views_made[0] else ()
        for ts, accumulate in ((p.ins, False), (p.outs, acc), (offsets, False)):
            for t in ts:
                st = t.st
                if st.on_chip and st.kind != "direct" and st.kind != "constant":
                    self._touch(st, t.box() if st.par_axis else (), iid, accumulate)

    @staticmethod
    def _offset_tiles(p: Pending) -> list[Tensor]:
        """The on-chip tiles ``p``'s operands took run-time offsets from (see :class:`~devkit.sim.tensor.OffsetView`):
        read by the instruction, without operand bytes."""
        out: list[Tensor] = []
        for t in (*p.ins, *p.outs):
            if t.__class__ is _tensor.OffsetView:
                for x in t.offset_tiles:  # type: ignore[attr-defined]
                    if x.st.alive and all(x is not y for y in out):
                        out.append(x)
        return out

    def _touch(self, st: Storage, box: tuple, iid: int, accumulate: bool) -> None:
        """Liveness: instruction ``iid`` accesses the logical tiles of on-chip ``st`` that ``box`` spans."""
        self.liveness.touch(st, blocks_of(box, st.par_axis), st.tile_bytes, iid, accumulate)

    def commit_instr(self, instr: Instr, operands: list, accumulate: bool) -> None:
        """Send one instruction to the trace (and to the loop recorders of a cost-only run)."""
        self.sink.emit(instr)
        if self.recorders:
            for rec in self.recorders:
                if rec.active:
                    rec.add(instr, operands, accumulate)
        if self.recorders2:
            for rec in self.recorders2:
                if rec.active:
                    rec.add(instr, operands, accumulate, self.reuse_now)

    def _access(self, t: Tensor) -> Access:
        st = t.st
        size = t.size
        if st.on_chip:
            parts = t.partitions
            run = t.run_elems(free_only=True) * st.itemsize
            buf = st.buffer
        else:
            parts = t.shape[0] if t.shape else 1
            run = t.run_elems() * st.itemsize
            buf = "hbm"
        return Access(
            buf, dt.name_of(st.dtype), parts, size // parts if parts else 0, size * st.itemsize, run
        )

    def _dep(self, t: Tensor, iid: int, engine: str, is_write: bool, deps: set[int]) -> tuple:
        """Record the access in the dependency tracker and the liveness recorder; returns the operand
        record ``(key, storage, box, is_write)`` that loop replay uses."""
        st = t.st
        box = t.box()
        if st.is_input or st.kind == "constant":
            return (st.id, st, box, is_write)
        if st.kind == "direct":
            # direct allocations alias on purpose: track them by physical address
            sp = self.deps.space(("phys", st.buffer), ((1, 10),))
            for _, region in self._direct_regions(t):
                self.deps.access(sp, region, iid, engine, is_write, deps)
            for rec in self.recorders:
                rec.ok = False
            return (st.id, st, box, is_write)
        self._track(st, box, iid, engine, is_write, deps, self._accumulating)
        return (st.id, st, box, is_write)

    def replay_access(
        self, st: Storage, box: tuple, iid: int, engine: str, is_write: bool, deps: set[int], accumulate: bool
    ) -> None:
        """An access synthesised by loop replay (see :mod:`devkit.sim.replay`)."""
        if st.is_input or st.kind == "constant":
            return
        self._track(st, box, iid, engine, is_write, deps, accumulate)

    def replay_accessor(
        self, st: Storage, blocks: list[tuple[int, ...]] | None = None
    ) -> Callable[[tuple, int, str, bool, set[int], bool], None]:
        """:meth:`replay_access` for one storage, with what it looks up per call resolved once (loop replay
        calls it for every synthesised access of a tensor that outlives the iteration).  The generic path
        serves storages whose tracking is not settled yet (not accessed under its first layout, address
        reuse pending) and any call after the storage's tracker space was replaced.  ``blocks``: the
        logical tiles every access touches, when the caller knows they do not move."""
        generic = functools.partial(self.replay_access, st)
        if st.is_input or st.kind == "constant" or st.kind == "direct":
            return generic
        if self._layouts.get(st.id) != (st.shape, st.itemsize):
            return generic  # a reshaped alias (its boxes are mapped per call), or not tracked yet
        key: object = st.id if st.on_chip else ("hbm", st.id)
        spaces = self.deps._spaces
        sp = spaces.get(key)
        if sp is None or sp.keyspec == () or st.id in self.reuse_deps:
            return generic
        access = self.deps.access
        if not st.on_chip:

            def hbm_access(
                box: tuple, iid: int, engine: str, is_write: bool, deps: set[int], accumulate: bool
            ) -> None:
                if spaces.get(key) is not sp:
                    generic(box, iid, engine, is_write, deps, accumulate)
                    return
                access(sp, box, iid, engine, is_write, deps)

            return hbm_access
        touch = self.liveness.touch
        pa = st.par_axis
        tile_bytes = st.tile_bytes

        def on_chip_access(
            box: tuple, iid: int, engine: str, is_write: bool, deps: set[int], accumulate: bool
        ) -> None:
            if spaces.get(key) is not sp or st.id in self.reuse_deps:
                generic(box, iid, engine, is_write, deps, accumulate)
                return
            touch(st, blocks if blocks is not None else blocks_of(box, pa), tile_bytes, iid, accumulate)
            access(sp, box, iid, engine, is_write, deps)

        return on_chip_access

    def _track(
        self, st: Storage, box: tuple, iid: int, engine: str, is_write: bool, deps: set[int], accumulate: bool
    ) -> None:
        layout = self._layouts.setdefault(st.id, (st.shape, st.itemsize))
        if layout != (st.shape, st.itemsize):
            # a reshaped or reinterpreted alias of the storage: track the enclosing region of the first layout
            box = enclosing_box(st.shape, st.itemsize, box, *layout)
        if st.on_chip:
            self._touch(st, box, iid, accumulate)
            sp = self.deps.space(st.id, ())
            if sp.keyspec == () and not sp.all:
                sp.set_keyspec(keyspec_for(st.shape, st.par_axis))
            if self.reuse_deps:
                inherited = self.reuse_deps.pop(st.id, None)
                if inherited:
                    deps |= inherited
                    if self.recorders2:
                        self.reuse_now |= inherited
        else:
            sp = self.deps.space(("hbm", st.id), ())
            if sp.keyspec == () and not sp.all:
                sp.set_keyspec(keyspec_for(st.shape, None))
        self.deps.access(sp, box, iid, engine, is_write, deps)


def blocks_of(box: tuple, par_axis: int) -> list[tuple[int, ...]]:
    """The logical tiles (block indices: the coordinates before the partition axis) that ``box`` spans."""
    if not par_axis:
        return [()]
    head = box[:par_axis]
    for lo, hi in head:
        if hi - lo != 1:
            return list(itertools.product(*[range(lo, hi) for lo, hi in head]))
    return [tuple([lo for lo, _ in head])]


def enclosing_box(
    shape: tuple[int, ...], itemsize: int, box: tuple, base_shape: tuple[int, ...], base_itemsize: int
) -> tuple[tuple[int, int], ...]:
    """The smallest box of a storage laid out as ``base_shape``/``base_itemsize`` that holds the bytes of
    ``box`` in the same storage viewed as ``shape``/``itemsize`` (row-major; a reshape or reinterpretation)."""

    def strides(sh: tuple[int, ...]) -> list[int]:
        out = [1] * len(sh)
        for d in range(len(sh) - 2, -1, -1):
            out[d] = out[d + 1] * sh[d + 1]
        return out

    st = strides(shape)
    lo = sum(a * s for (a, _), s in zip(box, st)) * itemsize
    hi = (sum((b - 1) * s for (_, b), s in zip(box, st)) + 1) * itemsize - 1
    lo, hi = lo // base_itemsize, hi // base_itemsize
    out: list[tuple[int, int]] = []
    same = True
    for n, s in zip(base_shape, strides(base_shape)):
        a, b = (lo // s) % n, (hi // s) % n
        if same and a == b:
            out.append((a, a + 1))
        elif same:
            out.append((a, b + 1))
            same = False
        else:
            out.append((0, n))
    return tuple(out)
