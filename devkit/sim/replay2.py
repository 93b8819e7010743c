"""Loop replay for NKI 0.x (Beta 2) kernels in cost-only runs.

In NKI 0.x a loop is a plain Python ``range`` and a tile lives as long as the kernel holds it: a tile
bound to a name in one iteration dies when the next iteration rebinds the name.  So, unlike Beta 1
(:mod:`devkit.sim.replay`), an iteration frees the *previous* iteration's tiles, part-way through.  This
module records each iteration as a sequence of events -- a tile placed (``A``), an instruction
committed (``I``), a tile freed (``F``) -- and replays them:

- iterations 0, 1 and 2 execute; 1 and 2 are compared event by event (iteration 0 frees nothing of a
  previous iteration, so it cannot be the template): the same instructions (engines, opcodes, sizes,
  lines, attributes), tiles placed and freed at the same positions, each operand either a tile of this
  iteration, a tile of the previous one (by creation order), or the same outer tensor at a region
  shifted by a constant step -- the same step from iteration 0 to 1 as from 1 to 2;
- iterations 3 .. n-2 are synthesised from iteration 2: tiles are placed and freed through the
  machine's allocator at their recorded positions (addresses and address-reuse dependencies come out
  as executing would give them), dependencies through tiles shift with the iteration, accesses to outer
  tensors go through the dependency tracker at their extrapolated regions, tile lifetimes are recorded
  in bulk;
- the tiles the kernel's variables still hold from iteration 2 then take over the state of the last
  synthesised iteration's tiles (id, placement, access records with ids shifted, open lifetime), and
  iteration n-1 executes for real, freeing them as it rebinds the names.

Whether a loop body may be replayed at all (no branches, no Python state carried between iterations)
is decided by the front end (:mod:`devkit.nki.beta2.loopsafety`); anything the comparison here cannot
prove equivalent runs every iteration.  Numerics runs never replay.
"""

from __future__ import annotations

import functools
import weakref
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from devkit.sim import gcpolicy
from devkit.sim.replay import _blocks, _same, _shifted
from devkit.trace import Instr

if TYPE_CHECKING:
    from devkit.sim.machine import Machine

#: executed: 0, 1, 2 and the last; fewer iterations leave nothing to synthesise
MIN_ITERATIONS = 5
#: synthesised instructions are sent to the trace sink in batches of at least this many (at iteration
#: ends), which keeps the scheduler's and the simulator's working sets apart: faster than interleaving
_BATCH = 512


@dataclass
class _Iter:
    first_id: int
    first_sid: int
    events: list[tuple] = field(default_factory=list)
    n_instrs: int = 0


class Snap:
    """What replay needs to know about a storage, without keeping it alive: an NKI 0.x tile dies when the
    kernel drops it, and a recording must not change when that happens."""

    __slots__ = (
        "buffer",
        "bytes_pp",
        "dtype",
        "id",
        "is_input",
        "kind",
        "name",
        "on_chip",
        "origin",
        "par_axis",
        "ref",
        "shape",
        "tile_bytes",
    )

    def __init__(self, st: Any) -> None:
        self.ref = weakref.ref(st)
        self.id = st.id
        self.buffer = st.buffer
        self.bytes_pp = st.bytes_pp
        self.tile_bytes = st.tile_bytes
        self.shape = st.shape
        self.par_axis = st.par_axis
        self.origin = st.origin
        self.dtype = st.dtype
        self.name = st.name
        self.kind = st.kind
        self.is_input = st.is_input
        self.on_chip = st.on_chip


class Recorder:
    """Records the events of the first three iterations of one NKI 0.x loop."""

    def __init__(self) -> None:
        self.iters: list[_Iter] = []
        self.active = False
        self._snaps: dict[int, Snap] = {}

    def _snap(self, st: Any) -> Snap:
        if isinstance(st, Snap):
            return st
        sn = self._snaps.get(id(st))
        if sn is None or sn.ref() is not st:
            sn = self._snaps[id(st)] = Snap(st)
        return sn

    def start(self, first_id: int, first_sid: int) -> None:
        self.iters.append(_Iter(first_id, first_sid))
        self.active = True

    def stop(self) -> None:
        self.active = False

    def add(self, instr: Instr, operands: list, accumulate: bool, reuse: set[int]) -> None:
        it = self.iters[-1]
        ops = [(k, self._snap(st), box, w) for k, st, box, w in operands]
        it.events.append(("I", instr, ops, accumulate, frozenset(reuse)))
        it.n_instrs += 1

    def alloc(self, key: int, st: Any) -> None:
        self.iters[-1].events.append(("A", key, self._snap(st)))

    def free(self, key: int, st: Any, ids: set[int]) -> None:
        self.iters[-1].events.append(("F", key, self._snap(st), frozenset(ids)))


def _proto(st: Any) -> tuple:
    return (st.buffer, st.bytes_pp, st.tile_bytes, st.shape, st.par_axis, st.origin, st.dtype, st.name)


@dataclass
class Template:
    """What synthesising an iteration needs, taken from iteration 2 (lifetimes from iteration 1)."""

    length: int
    events: list[tuple]
    protos: list[Any]  # per ordinal of a tile placed in an iteration: a storage shaped like it
    carried: list[int]  # ordinals of the tiles that outlive their iteration (freed by the next one)
    #: (ordinal, block) -> [first, last, last accumulating write or -1], ids relative to the iteration start
    lifetimes: dict[tuple[int, tuple[int, ...]], list]
    moving: dict[
        tuple[int, int], tuple
    ]  # (instruction index, operand index) -> moving dims of an outer operand


def _classify(key: Any, created: dict, prev: dict) -> tuple:
    o = created.get(key)
    if o is not None:
        return ("inner", o)
    o = prev.get(key)
    if o is not None:
        return ("prev", o)
    return ("outer",)


def plan(rec: Recorder) -> Template | None:
    """The replay template, or None when iterations 1 and 2 are not provably equivalent."""
    if len(rec.iters) != 3:
        return None
    it0, it1, it2 = rec.iters
    length = it1.n_instrs
    if not length or it0.n_instrs != length or it2.n_instrs != length:
        return None
    if it1.first_id != it0.first_id + length or it2.first_id != it1.first_id + length:
        return None
    placed = [[e[1] for e in it.events if e[0] == "A"] for it in rec.iters]
    ords = [{k: i for i, k in enumerate(p)} for p in placed]
    ord0, ord1, ord2 = ords
    instrs0 = [e for e in it0.events if e[0] == "I"]  # iteration 0's instructions (for the steps)
    if len(it1.events) != len(it2.events):
        return None
    moving: dict[
        tuple[int, int], tuple
    ] = {}  # (instruction index, operand index) -> moving dims of an outer operand
    protos = [e[2] for e in it2.events if e[0] == "A"]
    lifetimes: dict[tuple[int, tuple[int, ...]], list] = {}
    freed_in = [set(), set()]  # ordinals of iteration-t tiles freed in t (index 0) / in t+1 (index 1)
    for e1, e2 in zip(it1.events, it2.events):
        if e1[0] != e2[0]:
            return None
        kind = e1[0]
        if kind == "A":
            if ords[1][e1[1]] != ords[2][e2[1]] or _proto(e1[2]) != _proto(e2[2]):
                return None
            continue
        if kind == "F":
            c1 = _classify(e1[1], ords[1], ords[0])
            c2 = _classify(e2[1], ords[2], ords[1])
            if c1 != c2 or c1[0] == "outer":
                return None
            if {i + length for i in e1[3]} != e2[3]:  # the same ids relative to the iteration start
                return None
            freed_in[0 if c2[0] == "inner" else 1].add(c2[1])
            continue
        # an instruction
        _, i1, ops1, acc1, reuse1 = e1
        _, i2, ops2, acc2, reuse2 = e2
        if not _same_sig(i1, i2):
            return None
        if acc1 != acc2 or len(ops1) != len(ops2):
            return None
        if _rel_deps(i1, reuse1, it0.first_id, it1.first_id, length) != _rel_deps(
            i2, reuse2, it1.first_id, it2.first_id, length
        ):
            return None
        i0_ops = instrs0[i1.id - it1.first_id][2]
        if len(i0_ops) != len(ops1):
            return None
        for n_op, ((k0, _s0, b0, _w0), (k1, s1, b1, w1), (k2, s2, b2, w2)) in enumerate(
            zip(i0_ops, ops1, ops2)
        ):
            if w1 != w2 or len(b1) != len(b2):
                return None
            # _classify, inlined: a tile of this iteration (its ordinal), of the previous one, or outer
            in1 = ord1.get(k1)
            in2 = ord2.get(k2)
            if in1 != in2:
                return None
            if in1 is not None:
                if b1 != b2:
                    return None
                if not s2.on_chip or s2.kind in ("direct", "constant", "input"):
                    return None
                continue
            pr1 = ord0.get(k1)
            if pr1 != ord1.get(k2):
                return None
            if pr1 is None:  # outer
                # the same tensor, created before the loop, at a region moving by a constant step
                if k1 != k2 or k0 != k1 or k1 > it0.first_sid or s1.kind == "direct" or len(b0) != len(b1):
                    return None
                if s2.ref() is None and not (s2.is_input or s2.kind == "constant"):
                    return None
                # per dimension: both ends move by one step, the same from iteration 0 to 1 as from 1 to 2
                mv = []
                for dim, ((lo0, hi0), (lo1, hi1), (lo2, hi2)) in enumerate(zip(b0, b1, b2)):
                    step = lo2 - lo1
                    if hi2 - hi1 != step or lo1 - lo0 != step or hi1 - hi0 != step:
                        return None
                    if step:
                        mv.append((dim, step))
                moving[(i2.id - it2.first_id, n_op)] = tuple(mv)  # (as replay._moving gives them)
                continue
            if not s2.on_chip or s2.kind in ("direct", "constant", "input"):
                return None
            if b1 != b2:
                return None
    # lifetimes of iteration-1 tiles: touched in iteration 1 (as "inner") and 2 (as "prev")
    for t, it, own, older in ((1, it1, ords[1], ords[0]), (2, it2, ords[2], ords[1])):
        for e in it.events:
            if e[0] != "I":
                continue
            instr, ops, acc = e[1], e[2], e[3]
            rel = instr.id - it1.first_id
            for key, st, box, is_write in ops:
                # (_classify, inlined) iteration 1's tiles: "inner" in iteration 1, "prev" in 2
                o = own.get(key)
                if t == 2:
                    if o is not None:
                        continue
                    o = older.get(key)
                if o is None:
                    continue
                acc_rel = rel if acc and is_write else -1  # last accumulating write into the tile, or -1
                for blk in _blocks(st, box):
                    r = lifetimes.get((o, blk))
                    if r is None:
                        lifetimes[(o, blk)] = [rel, rel, acc_rel]
                    else:
                        r[1] = rel
                        r[2] = max(r[2], acc_rel)
    # every tile of an iteration dies in it or in the next one (nothing accumulates over iterations)
    if freed_in[0] & freed_in[1] or (freed_in[0] | freed_in[1]) != set(range(len(protos))):
        return None
    return Template(length, it2.events, protos, sorted(freed_in[1]), lifetimes, moving)


def _same_sig(a: Instr, b: Instr) -> bool:
    """Whether two instructions have the same :func:`devkit.sim.replay._sig` (False where comparing them
    raises TypeError), without building the signatures."""
    try:
        return _same(a, b)
    except TypeError:
        return False


def _rel_deps(i: Instr, reuse: frozenset, prev_first: int, first: int, length: int) -> tuple:
    """Dependencies through tiles and outer tensors, relative to the iteration (address-reuse ones are
    recomputed when replaying); older ones must come through outer tensors, which replay re-tracks."""
    end = first + length
    internal = []
    carried = []
    for d in i.deps:
        if reuse and d in reuse:
            continue
        if first <= d < end:
            internal.append(d - first)
        elif prev_first <= d < first:
            carried.append(d - prev_first)
    internal.sort()
    carried.sort()
    return tuple(internal), tuple(carried)


def synthesise(m: Machine, rec: Recorder, tmpl: Template, n_iters: int) -> None:
    """Synthesise iterations 3 .. n_iters-2 from iteration 2; the tiles iteration 2 left alive become
    those of iteration n_iters-2."""
    it1, it2 = rec.iters[1], rec.iters[2]
    a2 = it2.first_id
    length = tmpl.length
    placed2 = [e[1] for e in it2.events if e[0] == "A"]
    # the state of iteration 2's surviving tiles moves aside: iteration 3 frees them as "previous" tiles
    # and they come back as the tiles of the last synthesised iteration
    held: dict[int, tuple] = {}
    # the previous iteration's carried tiles: placement by ordinal, and key by ordinal (a list of every
    # tile's key, of which only the carried ones are read)
    prev_place: dict[int, Any] = {}
    prev_key: list[int] = placed2
    for o in tmpl.carried:
        key = placed2[o]
        held[o] = (tmpl.protos[o], m.deps.take_space(key), m.liveness.take_open(key))
        prev_place[o] = m.placements.pop(key)
    # The NKI 0.x loops recording around this one (in their iterations 0-2) get the synthesised events
    # appended to their current iteration directly: what Machine.commit_instr / note_alloc / note_free
    # followed by Recorder.add / alloc / free record, without the per-event dispatch.  A Beta-1 recorder
    # (m.recorders) takes the general path through the machine.
    general = bool(m.recorders)
    outer_iters = [r.iters[-1] for r in m.recorders2 if r.active]
    recording = general or bool(outer_iters)
    direct = recording and not general
    # An instruction goes to the sink as (the template's repeater, id, dependencies): a sink that offers
    # repeaters (the scheduler) then needs no Instr built per synthesised instruction (the recorders keep
    # their own); the general path commits through the machine
    repeater = (
        None if general else getattr(m.sink, "repeater", None) or functools.partial(_repeater, m.sink.emit)
    )
    accessors: dict[int, Callable] = {}

    def accessor(st: Any) -> Callable:
        fn = accessors.get(st.id)
        if fn is None:
            fn = accessors[st.id] = m.replay_accessor(st)
        return fn

    # precomputed per template event
    steps: list[tuple] = []
    ordinal = 0
    first_touch: set[int] = set()
    ords2 = {k: i for i, k in enumerate(placed2)}
    ords1 = {e[1]: i for i, e in enumerate(e for e in it1.events if e[0] == "A")}
    for e in tmpl.events:
        if e[0] == "A":
            st = e[2]
            # (Machine.place_replayed / free_replayed, inlined: the allocator of the tile's buffer)
            alloc = m.sbuf if st.buffer == "sbuf" else m.psum
            steps.append(("A", ordinal, st, alloc, st.buffer, st.bytes_pp, st.origin))
            ordinal += 1
        elif e[0] == "F":
            c = _classify(e[1], ords2, ords1)
            st = e[2]
            alloc = m.sbuf if st.buffer == "sbuf" else m.psum
            steps.append(
                ("F", c[0] == "inner", c[1], st, tuple(sorted(i - a2 for i in e[3])), alloc, st.buffer)
            )
        else:
            instr, ops, acc, reuse = e[1], e[2], e[3], e[4]
            internal, carried = _rel_deps(instr, reuse, it1.first_id, a2, length)
            opk = []
            for key, st, box, is_write in ops:
                c = _classify(key, ords2, ords1)
                if c[0] == "outer":
                    tracked = not (st.is_input or st.kind == "constant")
                    if tracked:
                        st = st.ref()
                    opk.append(("outer", st, box, is_write, tmpl.moving[(instr.id - a2, len(opk))], tracked))
                else:
                    first = c[0] == "inner" and c[1] not in first_touch
                    if first:
                        first_touch.add(c[1])
                    opk.append((c[0], st, box, is_write, c[1], first))
            # the template's dependencies through tiles, relative to the iteration start (carried ones first)
            offs = tuple(d - length for d in carried) + internal
            # (Machine.replay_access, with what it looks up per storage resolved once)
            tracked = [(accessor(k[1]), k[2], k[3], k[4]) for k in opk if k[0] == "outer" and k[5]]
            firsts = [k[4] for k in opk if k[0] != "outer" and k[5]]
            again = repeater(instr) if repeater is not None else None
            if tracked or firsts:
                steps.append(("I", instr, offs, acc, opk, tracked, firsts, again))
            else:  # nothing to re-track: the dependencies are the template's, shifted
                steps.append(("J", instr, offs, acc, opk, again))
    protos = tmpl.protos
    m.replays += 1
    rec_ops: list = []  # per "I"/"J" step (direct recording): its operands as the recorders keep them
    if direct:
        snap = next(r for r in m.recorders2 if r.active)._snap
        for s in steps:
            if s[0] in ("I", "J"):
                rec_ops.append(
                    [
                        (2, st.id, snap(st), box, is_write, x)
                        if kind == "outer"
                        else (0 if kind == "inner" else 1, x, st, box, is_write, None)
                        for kind, st, box, is_write, x, _ in s[4]
                    ]
                )
    evlists = [it.events for it in outer_iters]
    batch: list = []  # (repeater, id, dependencies)
    put = batch.append
    commit = m.commit_instr
    inherit_ids = m.deps.inherit
    retire_ids = m.deps.retire_ids
    prev_base = a2
    keys: list[int] = []
    places: dict[int, Any] = {}
    inherit: dict[int, set[int]] = {}
    # Without recorders the placements and address-reuse records of an iteration (A, F) go first, then its
    # instructions (I, J): they touch disjoint state (allocators and tombstones / instruction ids, outer
    # tensors' records), and doing each kind together is faster.  Recorders see the events in order.
    order = steps if recording else [s for s in steps if s[0] in "AF"] + [s for s in steps if s[0] in "IJ"]
    for j in range(3, n_iters - 1):
        base = m.take_instr_ids(length)
        if base != prev_base + length:
            raise AssertionError("loop replay: instructions were issued between iterations")
        step = j - 2
        first_sid = m.take_sids(len(protos))
        keys = list(range(first_sid, first_sid + len(protos)))
        places = {}
        inherit = {}
        i = 0
        n_ev = 0  # index into rec_ops
        for s in order:
            tag = s[0]
            if tag == "J":
                _, t, offs, acc, opk, again = s
                n_offs = len(offs)
                if n_offs == 2:  # (the common case, without a comprehension's frame)
                    dep_t = (base + offs[0], base + offs[1])
                elif n_offs == 1:
                    dep_t = (base + offs[0],)
                else:
                    dep_t = tuple([base + d for d in offs])
                if not recording:
                    put((again, base + i, dep_t))
                    i += 1
                    continue
                instr = Instr(
                    base + i, t.engine, t.opcode, t.ins, t.outs, t.flops, dep_t, t.filename, t.lineno, t.attrs
                )
                i += 1
                if direct:
                    put((again, instr.id, dep_t))
                    ev = ("I", instr, _rec_operands(rec_ops[n_ev], step, keys, prev_key), acc, _NO_IDS)
                    n_ev += 1
                    for events in evlists:
                        events.append(ev)
                else:
                    m.reuse_now = set()
                    commit(instr, _operands(opk, step, keys, prev_key), acc)
            elif tag == "A":
                _, o, st, alloc, buf, bytes_pp, origin = s
                p = places[o] = alloc.allocate(bytes_pp, origin)
                # (never mutated here, nor by the machine: held as the tracker hands it over)
                inherit[o] = inherit_ids(buf, p.addr, p.addr + p.nbytes)
                if direct:
                    ev = ("A", keys[o], st)
                    for events in evlists:
                        events.append(ev)
                elif recording:
                    m.note_alloc(keys[o], st)
            elif tag == "F":
                _, inner, o, st, rel, alloc, buf = s
                p = places.pop(o) if inner else prev_place.pop(o)
                if len(rel) == 2:  # (the common case, without a comprehension's frame)
                    ids = {base + rel[0], base + rel[1]}
                else:
                    ids = {base + r for r in rel}
                alloc.free(p)
                retire_ids(buf, p.addr, p.addr + p.nbytes, ids)
                if direct:
                    ev = ("F", keys[o] if inner else prev_key[o], st, frozenset(ids))
                    for events in evlists:
                        events.append(ev)
                elif recording:
                    m.note_free(keys[o] if inner else prev_key[o], st, ids)
            else:
                _, t, offs, acc, opk, tracked, firsts, again = s
                iid = base + i
                i += 1
                extra: set[int] | None = None  # address-reuse dependencies (sets are never mutated)
                for o in firsts:
                    got = inherit.pop(o, None)
                    if got:
                        extra = got if extra is None else extra | got
                if recording:
                    m.reuse_now = set(extra) if extra else set()
                if tracked:
                    deps = {base + d for d in offs}
                    if extra:
                        deps |= extra
                    engine = t.engine
                    for access, box, is_write, moving in tracked:
                        access(_shifted(box, moving, step), iid, engine, is_write, deps, acc and is_write)
                    deps.discard(iid)
                    dep_t = tuple(sorted(deps))
                elif extra:
                    deps = set(extra)
                    for d in offs:
                        deps.add(base + d)
                    dep_t = tuple(sorted(deps))
                else:
                    dep_t = tuple([base + d for d in offs])
                if not recording:
                    put((again, iid, dep_t))
                    continue
                instr = Instr(
                    iid, t.engine, t.opcode, t.ins, t.outs, t.flops, dep_t, t.filename, t.lineno, t.attrs
                )
                if direct:
                    put((again, iid, dep_t))
                    reuse = m.reuse_now
                    ev = (
                        "I",
                        instr,
                        _rec_operands(rec_ops[n_ev], step, keys, prev_key),
                        acc,
                        frozenset(reuse) if reuse else _NO_IDS,
                    )
                    n_ev += 1
                    for events in evlists:
                        events.append(ev)
                else:
                    commit(instr, _operands(opk, step, keys, prev_key), acc)
        for it in outer_iters:
            it.n_instrs += length
        if len(batch) >= _BATCH:
            _send(batch)
            batch.clear()
        prev_base = base
        # every tile dies in its iteration or in the next (plan checks it): the placements left are
        # exactly the carried tiles'
        prev_place = places
        prev_key = keys
    _send(batch)
    # lifetimes of the synthesised tiles (and of iteration 2's carried ones, which end in iteration 3)
    # (carried tiles: iterations 2 .. n-3; the others: 3 .. n-2)
    count = n_iters - 4
    carried_set = set(tmpl.carried)
    for (o, _blk), (first, last, acc_rel) in tmpl.lifetimes.items():
        start = a2 if o in carried_set else a2 + length
        acc_last = start + acc_rel if acc_rel >= 0 else -1
        m.liveness.intervals(protos[o], start + first, start + last, acc_last, count, length)
    # iteration 2's surviving tiles become the last synthesised iteration's
    shift = prev_base - a2
    for o, (snap, space, live) in held.items():
        new = prev_key[o]
        st = snap.ref()
        if st is None:
            raise AssertionError("loop replay: a tile the kernel still held died while replaying")
        m.rename_storage(st, new)
        st.addr = prev_place[o].addr
        m.placements[new] = prev_place[o]
        if space is not None:
            space.shift_ids(shift)
            m.deps.put_space(new, space)
        if live is not None:
            for r in live.values():
                r[0] += shift
                r[1] += shift
                if r[5] >= 0:  # the last accumulating write
                    r[5] += shift
            m.liveness.put_open(new, live)
        got = inherit.get(o)  # (the last synthesised iteration's)
        if got:
            m.reuse_deps[new] = got


def _repeater(emit: Callable[[Instr], None], t: Instr) -> Callable[[int, tuple[int, ...]], None]:
    """For a sink without repeaters (:class:`devkit.trace.TraceSink`): ``again(id, deps)`` emits a new
    instruction equal to ``t`` but for its ``id`` and ``deps``."""

    def again(iid: int, deps: tuple[int, ...]) -> None:
        emit(Instr(iid, t.engine, t.opcode, t.ins, t.outs, t.flops, deps, t.filename, t.lineno, t.attrs))

    return again


def _send(batch: list) -> None:
    """Send a batch of synthesised instructions, ``(repeater, id, dependencies)``, to the sink."""
    for again, iid, deps in batch:
        again(iid, deps)


#: the reuse set of an event without address-reuse dependencies (shared: frozensets are immutable)
_NO_IDS: frozenset[int] = frozenset()


def _rec_operands(ops: list, step: int, keys: list[int], prev_key: list[int]) -> list:
    """:func:`_operands` with each storage already snapshotted, as :meth:`Recorder.add` records them:
    ``ops`` holds ``(0 inner / 1 previous iteration's / 2 outer, ordinal or key, snapshot, box, is_write,
    moving dims)``."""
    out = []
    for kind, x, st, box, is_write, moving in ops:
        if kind == 0:
            out.append((keys[x], st, box, is_write))
        elif kind == 1:
            out.append((prev_key[x], st, box, is_write))
        else:
            out.append((x, st, _shifted(box, moving, step), is_write))
    return out


def _operands(opk: list, step: int, keys: list[int], prev_key: list[int]) -> list:
    """The operand records of a synthesised instruction, for the loops recording around this one."""
    out = []
    for kind, st, box, is_write, x, _ in opk:
        if kind == "outer":
            out.append((st.id, st, _shifted(box, x, step), is_write))
        else:
            out.append((keys[x] if kind == "inner" else prev_key[x], st, box, is_write))
    return out


def iterate(m: Machine, seq: Sequence[int], may_replay: Callable[[], bool]) -> Iterator[int]:
    """Run an NKI 0.x loop over ``seq`` in a cost-only run, replaying it when it is long enough, the body
    passed ``may_replay`` (checked after iteration 2, when the body's values exist) and iterations 1 and 2
    are equivalent.  Iteration boundaries flush the pending instruction either way, so a run with replay
    switched off places tiles exactly as a replayed one."""
    n = len(seq)
    rec = Recorder() if (m.options.replay_loops and n >= MIN_ITERATIONS and len(m.grid) <= 1) else None
    if rec is not None:
        m.recorders2.append(rec)
    try:
        k = 0
        while k < n:
            m.flush()
            if rec is not None:
                rec.start(m.take_instr_ids(0), m.take_sids(0) - 1)
            yield seq[k]
            m.flush()
            if rec is not None:
                rec.stop()
                if k == 2:
                    m.recorders2.remove(rec)
                    tmpl = None
                    if may_replay():
                        with gcpolicy.paused():
                            tmpl = plan(rec)
                            if tmpl is not None:
                                synthesise(m, rec, tmpl, n)
                    if tmpl is not None:
                        k = n - 2
                    else:
                        m.replay_fallbacks += 1
                    rec = None
            k += 1
    finally:
        if rec is not None and rec in m.recorders2:
            m.recorders2.remove(rec)
