"""Loop replay for cost-only runs: execute two iterations, synthesise the repeats, execute the last.

NKI Beta 1 traces the body of an ``affine_range``/``sequential_range`` loop once with a symbolic loop
variable (``reference/nki_api.md`` §2.3), so a body cannot branch on the loop variable: every iteration
issues the same instructions, on regions that move affinely with the loop variable.  A cost-only run
therefore need not execute every iteration in Python.  The machine records the instructions of
iterations 0 and 1 together with the memory each operand touched; when the two agree instruction for
instruction (same engines, opcodes, sizes and source lines; operands either private to the iteration,
or the same outer tensor at a region shifted by a constant step), iterations 2 .. n-2 are synthesised
from iteration 1:

- instruction ids shift by the iteration length;
- dependencies inside an iteration and on the previous iteration shift with it (older ones came through
  tensors that outlive the iteration and are recomputed);
- accesses to tensors that outlive the iteration are replayed through the dependency tracker and the
  liveness recorder at their extrapolated regions, so later instructions and capacity see them;
- tiles private to an iteration get one lifetime interval per synthesised iteration.

The last iteration is executed for real (it may be masked differently), so the machine's state after
the loop is the state real execution would leave.  Numerics runs never replay, and neither do loops that
touch directly allocated memory or whose two recorded iterations differ.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from devkit.trace import Instr

if TYPE_CHECKING:
    from devkit.sim.alloc import Placement
    from devkit.sim.deps import DependencyTracker
    from devkit.sim.liveness import Liveness
    from devkit.sim.storage import Storage
    from devkit.trace import TraceSink

#: (identity key, storage, box, is_write) of one operand access; the key tells storage instances
#: apart, including the per-iteration instances that replay synthesises.
Operand = tuple[Any, Any, tuple[tuple[int, int], ...], bool]

MIN_ITERATIONS = 4  # with fewer, there is nothing to skip after executing 0, 1 and the last


class ReplayHost(Protocol):
    """What loop replay needs from the machine it synthesises iterations into."""

    sink: TraceSink
    deps: DependencyTracker
    liveness: Liveness
    recorders: list[LoopRecorder]
    #: replays so far in the run; each one tags its synthesised tile instances with its number
    replays: int

    def take_instr_ids(self, n: int) -> int:
        """Reserve the next ``n`` instruction ids; returns the first."""

    def place_replayed(self, st: Storage, deps: set[int]) -> Placement: ...

    def free_replayed(self, st: Storage, p: Placement, ids: set[int]) -> None: ...

    def replay_access(
        self, st: Storage, box: tuple, iid: int, engine: str, is_write: bool, deps: set[int], accumulate: bool
    ) -> None: ...

    def replay_accessor(
        self, st: Storage, blocks: list[tuple[int, ...]] | None = None
    ) -> Callable[[tuple, int, str, bool, set[int], bool], None]:
        """``replay_access`` bound to ``st`` (valid for the length of one replay); ``blocks``: the logical
        tiles of ``st`` every access touches, if they do not move."""

    def commit_instr(self, instr: Instr, operands: list, accumulate: bool) -> None: ...


@dataclass
class _Iteration:
    first_id: int
    first_sid: int
    instrs: list[Instr] = field(default_factory=list)
    operands: list[list[Operand]] = field(default_factory=list)
    accumulate: list[bool] = field(default_factory=list)


class LoopRecorder:
    """Records iterations 0 and 1 of one loop instance."""

    def __init__(self) -> None:
        self.iters: list[_Iteration] = []
        self.active = False
        self.ok = True

    def start(self, first_id: int, first_sid: int) -> None:
        """An iteration starts: its first instruction will get id ``first_id``; storages it creates get
        ids above ``first_sid``."""
        self.iters.append(_Iteration(first_id, first_sid))
        self.active = True

    def stop(self) -> None:
        self.active = False

    def add(self, instr: Instr, operands: list[Operand], accumulate: bool) -> None:
        it = self.iters[-1]
        it.instrs.append(instr)
        it.operands.append(operands)
        it.accumulate.append(accumulate)


def _sig(i: Instr) -> tuple:
    """What must agree between two iterations' instructions (the loop replay of NKI 0.x compares these)."""
    return (
        i.engine,
        i.opcode,
        i.flops,
        i.lineno,
        i.filename,
        i.ins,
        i.outs,
        tuple(sorted((i.attrs or {}).items(), key=lambda kv: kv[0])) if i.attrs else None,
    )


def _same(a: Instr, b: Instr) -> bool:
    """Whether ``a`` and ``b`` are the same instruction but for their ids and dependencies: the fields of
    :func:`_sig` in its order, attributes as a mapping (no attributes and empty ones are the same).
    Instructions synthesised from one template share their operand and attribute objects, so identity
    answers first.  Raises TypeError where operands do not compare (:mod:`devkit.sim.replay2` says False)."""
    return (
        a.engine == b.engine
        and a.opcode == b.opcode
        and a.flops == b.flops
        and a.lineno == b.lineno
        and a.filename == b.filename
        and (a.ins is b.ins or a.ins == b.ins)
        and (a.outs is b.outs or a.outs == b.outs)
        and (a.attrs is b.attrs or (a.attrs or None) == (b.attrs or None))
    )


def plan(rec: LoopRecorder) -> list | None:
    """Per template operand: ("inner", ordinal) / ("outer", delta per dim) / ("fixed",); None if not replayable."""
    if not rec.ok or len(rec.iters) != 2:
        return None
    it0, it1 = rec.iters
    if len(it0.instrs) != len(it1.instrs) or not it1.instrs:
        return None
    inner0: dict[Any, int] = {}
    inner1: dict[Any, int] = {}
    out = []
    for a, b, oa, ob in zip(it0.instrs, it1.instrs, it0.operands, it1.operands):
        try:
            if not _same(a, b):
                return None
        except TypeError:
            return None
        if len(oa) != len(ob):
            return None
        kinds = []
        for (ka, sa, ba, wa), (kb, sb, bb, wb) in zip(oa, ob):
            if wa != wb or len(ba) != len(bb):
                return None
            a_inner = isinstance(ka, tuple) or (sa.id >= it0.first_sid + 1 and sa.id <= it1.first_sid)
            b_inner = isinstance(kb, tuple) or sb.id > it1.first_sid
            if a_inner != b_inner:
                return None
            if a_inner:
                na = inner0.setdefault(ka, len(inner0))
                nb = inner1.setdefault(kb, len(inner1))
                if na != nb:
                    return None
                kinds.append(("inner", nb))
            else:
                if sa is not sb:
                    return None
                if sa.kind == "direct":
                    return None
                delta = []
                for (a_, b_), (c, d) in zip(ba, bb):
                    if c - a_ != d - b_:
                        return None  # the region changes size: not an affine shift
                    delta.append(c - a_)
                kinds.append(("outer", tuple(delta)))
        out.append(kinds)
    return out


def replay(m: ReplayHost, rec: LoopRecorder, kinds: list, n_iters: int) -> None:
    """Synthesise iterations 2 .. n_iters-2 from the recorded iteration 1."""
    it0, it1 = rec.iters
    a0, a1 = it0.first_id, it1.first_id
    length = len(it1.instrs)
    b0, b1 = a0 + length, a1 + length
    # lifetimes of the tiles private to an iteration, relative to the iteration start
    private: dict[tuple[int, tuple[int, ...]], list] = {}
    # the same tiles as allocations: ordinal -> [storage, first instruction, instructions touching it]
    allocs: dict[int, list] = {}
    for i, (ops, acc) in enumerate(zip(it1.operands, it1.accumulate)):
        for (_key, st, box, is_write), kind in zip(ops, kinds[i]):
            if kind[0] != "inner" or not st.on_chip:
                continue
            a = allocs.get(kind[1])
            if a is None:
                allocs[kind[1]] = [st, i, {i}]
            else:
                a[2].add(i)
            for blk in _blocks(st, box):
                r = private.get((kind[1], blk))
                acc_i = i if acc and is_write else -1  # last accumulating write into the tile, or -1
                if r is None:
                    private[(kind[1], blk)] = [i, i, st, acc_i]
                else:
                    r[1] = i
                    r[3] = max(r[3], acc_i)
    placed_at: dict[int, list[int]] = {}
    freed_after: dict[int, list[int]] = {}
    for ordinal, (_st, first, touched) in allocs.items():
        placed_at.setdefault(first, []).append(ordinal)
        freed_after.setdefault(max(touched), []).append(ordinal)  # dies after its last use
    # per template instruction, precomputed: dependency offsets inside the iteration and into the
    # previous one, and the accesses to tensors that outlive the iteration
    plans_ = []
    accessors: dict[tuple, Callable] = {}
    for i, tmpl in enumerate(it1.instrs):
        internal = tuple(sorted(d - a1 for d in tmpl.deps if a1 <= d < b1))
        carried = tuple(sorted(d - a0 for d in tmpl.deps if a0 <= d < b0))
        # accesses to tensors that outlive the iteration; kernel inputs and constants are never tracked
        outer = []
        # the operand records for recording loops around this one: (key, storage, box, is_write, how
        # it moves: None for inner operands, the moving dimensions of outer ones; its index in outer)
        ops = []
        for (key, st, box, is_write), kind in zip(it1.operands[i], kinds[i]):
            moving = _moving(kind[1]) if kind[0] == "outer" else None
            k = None
            if moving is not None and not (st.is_input or st.kind == "constant"):
                pa = st.par_axis or 0
                # the logical tiles an access touches stay put unless a block coordinate moves
                blocks = _blocks(st, box) if st.on_chip and all(d >= pa for d, _ in moving) else None
                ak = (st.id, None if blocks is None else tuple(blocks))
                fn = accessors.get(ak)
                if fn is None:
                    fn = accessors[ak] = m.replay_accessor(st, blocks)
                k = len(outer)
                outer.append((fn, box, moving, is_write, it1.accumulate[i] and is_write))
            ops.append((key, st, box, is_write, kind[0] == "inner", moving, k))
        plans_.append(
            (tmpl, internal, carried, outer, it1.accumulate[i], placed_at.get(i), freed_after.get(i), ops)
        )
    prev_base = a1
    m.replays += 1
    tag = m.replays  # tells this replay's synthesised tile instances apart from every other replay's
    recording = any(r.active for r in m.recorders)
    emit = m.sink.emit
    for j in range(2, n_iters - 1):
        base = m.take_instr_ids(length)
        step = j - 1
        placements: dict[int, Any] = {}
        at_base = base.__add__
        at_prev = prev_base.__add__
        for i, (tmpl, internal, carried, outer, acc, place, free, ops) in enumerate(plans_):
            iid = base + i
            outer_done = bool(place or outer)
            if outer_done:
                deps: set[int] = set(map(at_base, internal))
                if carried:
                    deps.update(map(at_prev, carried))
                if place:
                    # the private tile is placed where the allocator puts it now, and waits for whatever
                    # used that memory last (address reuse), as it would when executed
                    for ordinal in place:
                        placements[ordinal] = m.place_replayed(allocs[ordinal][0], deps)
                engine = tmpl.engine
                if recording:
                    boxes = [_shifted(box, moving, step) for _, box, moving, _, _ in outer]
                    for (fn, _, _, is_write, accumulates), box in zip(outer, boxes):
                        fn(box, iid, engine, is_write, deps, accumulates)
                else:
                    for fn, box, moving, is_write, accumulates in outer:
                        fn(_shifted(box, moving, step), iid, engine, is_write, deps, accumulates)
                deps.discard(iid)
                dep_ids = tuple(sorted(deps))
            else:
                # carried dependencies (previous iteration) all precede the internal ones
                dep_ids = tuple(map(at_prev, carried)) + tuple(map(at_base, internal))
            instr = Instr(
                iid,
                tmpl.engine,
                tmpl.opcode,
                tmpl.ins,
                tmpl.outs,
                tmpl.flops,
                dep_ids,
                tmpl.filename,
                tmpl.lineno,
                tmpl.attrs,
            )
            if recording:
                operands: list[Operand] = []
                for key, st, box, is_write, inner, moving, k in ops:
                    if k is not None and outer_done:
                        box = boxes[k]
                    elif moving is not None:
                        box = _shifted(box, moving, step)
                    elif inner:
                        key = (key, tag, j)
                    operands.append((key, st, box, is_write))
                m.commit_instr(instr, operands, acc)
            else:
                emit(instr)
            if free:
                for ordinal in free:
                    st, _, touched = allocs[ordinal]
                    m.free_replayed(st, placements.pop(ordinal), set(map(at_base, touched)))
        prev_base = base
    if n_iters > 3:
        # every synthesised iteration is ``length`` instructions after the one before it
        start = prev_base - (n_iters - 4) * length
        for first, last, st, acc_i in private.values():
            acc_last = start + acc_i if acc_i >= 0 else -1
            m.liveness.intervals(st, start + first, start + last, acc_last, n_iters - 3, length)
    shift = prev_base - a1
    if shift:
        m.deps.shift_ids(a1, b1, shift)


def _moving(delta: tuple[int, ...]) -> tuple[tuple[int, int], ...]:
    """(dimension, step per iteration) of the dimensions of an operand region that move."""
    return tuple((d, s) for d, s in enumerate(delta) if s)


def _shifted(box: tuple[tuple[int, int], ...], moving: tuple[tuple[int, int], ...], step: int) -> tuple:
    """``box`` moved ``step`` iterations along its ``moving`` dimensions."""
    if not moving:
        return box
    if len(moving) == 1:
        ((d, s),) = moving
        lo, hi = box[d]
        return (*box[:d], (lo + s * step, hi + s * step), *box[d + 1 :])
    out = list(box)
    for d, s in moving:
        lo, hi = box[d]
        out[d] = (lo + s * step, hi + s * step)
    return tuple(out)


def _blocks(st: Any, box: tuple[tuple[int, int], ...]) -> list[tuple[int, ...]]:
    pa = st.par_axis
    if not pa:
        return [()]
    return list(itertools.product(*[range(lo, hi) for lo, hi in box[:pa]]))
