"""Detection of dependencies between iterations of ``nl.affine_range`` loops.

NKI lets the compiler run ``affine_range`` iterations in any order and overlap them, so two iterations
must not write the same location, and one iteration must not read what another writes.  The exception
is an associative reduction: every iteration updating the same location with the same commutative
in-place operation (``psum += nc_matmul(...)``, ``acc[...] += x`` in SBUF, ``dma_copy(dst_rmw_op=np.add)``)
gives the same result in any order (NKI: "associative reductions are allowed"), so two such updates of
one kind never conflict -- but reading a partially reduced location from another iteration does.

Every access inside a loop is recorded with its *loop context* -- the ``(loop instance, iteration,
kind)`` of each enclosing loop -- and compared with earlier accesses of the same tensor: two accesses
conflict when their contexts first differ at an ``affine_range`` loop (same loop instance, different
iterations), at least one writes, and the elements they touch overlap.  Overlap is decided on the
bounding boxes first (cheap) and then exactly (strided views: arithmetic progressions per dimension;
gathered views: sets of flat indices).  When a loop instance finishes, its records collapse onto the
enclosing context, so the next iteration of an outer ``affine_range`` loop is compared with them too.

Cost: tensors created inside the innermost ``affine_range`` loop of an access are private to one
iteration and are not recorded at all; kernel inputs and constants are never written and are skipped.
"""

from __future__ import annotations

import itertools
import math
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from devkit.errors import RaceError
from devkit.sim.deps import records_overlapping

if TYPE_CHECKING:
    from devkit.sim.tensor import Tensor

Box = tuple[tuple[int, int], ...]


class Frame(Protocol):
    """One running loop, as the machine keeps it on its loop stack."""

    kind: str  # "affine", "sequential" or "static"
    instance: int  # number of this loop instance in the run
    iter: int  # the iteration executing


#: In-place operators whose repeated application commutes (``a - x - y == a - y - x``), so that
#: ``affine_range`` iterations may apply them to one location in any order.  Value: the class of updates
#: that commute with each other.
REDUCE_CLASS = {
    "add": "add",
    "sub": "add",
    "mul": "mul",
    "div": "mul",
    "and": "and",
    "or": "or",
    "xor": "xor",
}

_EXACT_LIMIT = 1 << 18  # elements materialised for an exact overlap test of gathered views
_MAX_KEYS = 32  # buckets one record may occupy before it is kept in the "wide" list

# record: [box, ctx, is_write, reduce_class, loc, exact]


def _diverge(a: tuple, b: tuple) -> int | None:
    """First nesting level (among ``affine_range`` loops) where two contexts are in the same loop
    instance but different iterations; None when they are ordered by the program."""
    for i, (fa, fb) in enumerate(zip(a, b)):
        if fa[0] != fb[0]:
            return None  # different instances of a loop: the program orders them
        if fa[1] != fb[1]:
            return i
    return None


class _Records:
    """Access records of one tensor, bucketed on its non-partition dimensions.

    Block dimensions get one bucket per logical tile, other dimensions about 8 buckets each; a record
    whose box spans more than ``_MAX_KEYS`` buckets is kept in the ``wide`` list.  ``sigs`` maps each
    record's signature (box, context, kind, exact view) to it: identical records are kept once, and a
    query over everything scans ``sigs`` without duplicates.
    """

    __slots__ = ("buckets", "sigs", "spec", "wide")

    def __init__(self, shape: tuple[int, ...], par_axis: int | None) -> None:
        spec: list[tuple[int, int]] = []
        for d, n in enumerate(shape):
            if d == par_axis or n <= 1:
                continue
            spec.append((d, 0 if (par_axis is not None and d < par_axis) else _shift(n)))
        self.spec = tuple(spec)
        self.buckets: dict[tuple[int, ...], list[list]] = {}
        self.wide: list[list] = []
        self.sigs: dict[tuple, list] = {}

    def _keys(self, box: Box) -> list[tuple[int, ...]] | None:
        ranges = []
        total = 1
        for ax, sh in self.spec:
            lo, hi = box[ax]
            a = lo >> sh
            b = ((max(hi, lo + 1) - 1) >> sh) + 1
            total *= b - a
            if total > _MAX_KEYS:
                return None
            ranges.append(range(a, b))
        if total == 1:
            return [tuple(r.start for r in ranges)]
        return list(itertools.product(*ranges))

    def overlapping(self, box: Box, keys: Any = False) -> list[list]:
        if keys is False:
            keys = self._keys(box)
        if keys is None:
            cands: Any = self.sigs.values()
        elif len(keys) == 1:
            lst = self.buckets.get(keys[0])
            cands = self.wide + lst if lst else self.wide
        else:
            seen: dict[int, list] = {}
            for k in keys:
                for r in self.buckets.get(k, ()):
                    seen[id(r)] = r
            cands = self.wide + list(seen.values())
        return records_overlapping(cands, box)

    def add(self, rec: list, keys: Any = False) -> None:
        self.sigs[rec[6]] = rec
        if keys is False:
            keys = self._keys(rec[0])
        if keys is None:
            self.wide.append(rec)
            return
        for k in keys:
            lst = self.buckets.get(k)
            if lst is None:
                self.buckets[k] = [rec]
            else:
                lst.append(rec)

    def remove(self, rec: list) -> None:
        self.sigs.pop(rec[6], None)
        keys = self._keys(rec[0])
        for k in keys if keys is not None else (None,):
            lst = self.wide if k is None else self.buckets.get(k)
            if not lst:
                continue
            for i, r in enumerate(lst):
                if r is rec:
                    del lst[i]
                    break
            if k is not None and not lst:
                del self.buckets[k]

    @property
    def empty(self) -> bool:
        return not self.sigs

    def clear(self) -> None:
        self.sigs.clear()
        self.buckets.clear()
        self.wide.clear()


def _shift(n: int) -> int:
    """Bucket width (log2) giving about 8 buckets along a dimension of size ``n``."""
    return max(0, (max(n, 1) - 1).bit_length() - 3)


def _sig(box: Box, ctx: tuple, is_write: bool, reduce: str | None, exact: Any) -> tuple:
    """Identity of a record, for keeping one of equivalent records.

    The iteration of the innermost affine loop is left out: the same access made by several iterations
    of that loop is recorded once, by the first iteration that ran it.  Nothing is missed: an access of
    another iteration conflicting with a dropped record also conflicts with the kept one, and a
    conflicting access of the kept iteration itself ran before the dropped ones (iterations execute one
    after another), so it was compared with them when they were made.  Gathered views (index arrays)
    are only identical to themselves.
    """
    return (box, ctx[:-1], ctx[-1][0], is_write, reduce, exact if exact[0] == "d" else id(exact))


# ---- exact overlap of two views ------------------------------------------------------------------


def _prog(e: Any) -> tuple[int, int, int]:
    """A view dimension as an increasing progression ``(start, step, count)`` (step >= 1)."""
    if isinstance(e, int):
        return (e, 1, 1)
    start, step, count, _ = e
    if count <= 1 or step == 0:
        return (start, 1, 1 if count else 0)
    if step < 0:
        return (start + step * (count - 1), -step, count)
    return (start, step, count)


def _progs_meet(p: tuple[int, int, int], q: tuple[int, int, int]) -> bool:
    s1, d1, n1 = p
    s2, d2, n2 = q
    if n1 == 0 or n2 == 0:
        return False
    e1, e2 = s1 + d1 * (n1 - 1), s2 + d2 * (n2 - 1)
    lo, hi = max(s1, s2), min(e1, e2)
    if lo > hi:
        return False
    if n1 == 1:
        return (s1 - s2) % d2 == 0
    if n2 == 1:
        return (s2 - s1) % d1 == 0
    if d1 == d2:
        return (s1 - s2) % d1 == 0
    if d1 > d2:  # enumerate the sparser progression inside the overlap
        s1, d1, s2, d2 = s2, d2, s1, d1
    first = s2 + -(-(lo - s2) // d2) * d2
    if (hi - first) // d2 + 1 > _EXACT_LIMIT:
        return True
    v = np.arange(first, hi + 1, d2, dtype=np.int64)
    return bool(((v - s1) % d1 == 0).any())


def _flat(exact: Any, shape: tuple[int, ...]) -> np.ndarray | None:
    """Flat indices of the in-bounds elements a view touches (None when too many to materialise)."""
    kind, data = exact
    if kind == "d":
        n = 1
        for e in data:
            n *= 1 if isinstance(e, int) else max(e[2], 1)
        if n > _EXACT_LIMIT:
            return None
        nd = len(data)
        arrs = []
        for i, e in enumerate(data):
            sh = [1] * nd
            if isinstance(e, int):
                arrs.append(np.full(sh, e, dtype=np.int64))
            else:
                start, step, count, _ = e
                sh[i] = count
                arrs.append((start + step * np.arange(count, dtype=np.int64)).reshape(sh))
        full = [a.ravel() for a in np.broadcast_arrays(*arrs)]
    else:
        if data and math.prod(np.broadcast_shapes(*(np.shape(a) for a in data))) > _EXACT_LIMIT:
            return None
        full = [np.asarray(a).ravel() for a in np.broadcast_arrays(*data)]
    ok = np.ones(full[0].shape, dtype=bool) if full else np.ones((), dtype=bool)
    for a, n in zip(full, shape):
        ok &= (a >= 0) & (a < n)
    full = [a[ok] for a in full]
    return np.unique(np.ravel_multi_index(tuple(full), shape)) if shape else np.zeros(1, np.int64)


def _overlap(a: Any, b: Any, shape: tuple[int, ...]) -> bool:
    """Whether two views of one storage (``("d", dims)`` or ``("g", index arrays)``) share an element."""
    if a[0] == "d" and b[0] == "d":
        return all(_progs_meet(_prog(x), _prog(y)) for x, y in zip(a[1], b[1]))
    fa, fb = _flat(a, shape), _flat(b, shape)
    if fa is None or fb is None:
        return True  # too large to decide exactly: the bounding boxes overlap
    return bool(np.intersect1d(fa, fb, assume_unique=True).size)


class RaceChecker:
    """Per-tensor access records of the ``affine_range`` loops currently running.

    A context is the ``(loop instance, iteration)`` of every enclosing ``affine_range`` loop.  Sequential
    and static loops are left out: they order their iterations, and a loop nested in one gets a new
    instance number per iteration, so contexts stay comparable.  Records live until the outermost
    ``affine_range`` loop around them finishes (or their tensor dies).
    """

    def __init__(self, loops: list[Frame]) -> None:
        self.loops = loops  # the machine's loop stack, innermost last (read, never written)
        self._spaces: dict[int, tuple[_Records, _Records]] = {}  # sid -> (writes, reads)
        self._records_by_instance: dict[int, list[tuple[int, list]]] = {}
        self._ctx_key: tuple[int, int] | None = None
        self._ctx: tuple = ()
        self._deepest_affine = -1

    def _context(self) -> None:
        loops = self.loops
        f = loops[-1]
        key = (f.instance, f.iter)
        if key != self._ctx_key:
            self._ctx_key = key
            self._ctx = tuple((fr.instance, fr.iter) for fr in loops if fr.kind == "affine")
            self._deepest_affine = max((i for i, fr in enumerate(loops) if fr.kind == "affine"), default=-1)

    def access(self, t: Tensor, is_write: bool, reduce: Any, loc: tuple[str, int]) -> None:
        """Record one access and raise :class:`RaceError` if it conflicts with another iteration.

        ``reduce``: False for a plain access, else the class of commutative in-place update it is part
        of (``True`` means ``"add"``: matmul accumulation, DMA read-modify-write add).
        """
        st = t.st
        if st.is_input or st.kind == "constant":
            return  # never written, so never part of a race
        self._context()
        if self._deepest_affine < st.depth:
            return  # created inside the innermost affine loop: private to one iteration
        if reduce is True:
            reduce = "add"
        elif not reduce:
            reduce = None
        ctx = self._ctx
        box = t.box()
        spaces = self._spaces.get(st.id)
        if spaces is None:
            spaces = self._spaces[st.id] = (_Records(st.shape, st.par_axis), _Records(st.shape, st.par_axis))
        writes, reads = spaces
        keys = writes._keys(box)
        exact = ("d", t.dims) if t.dims is not None else ("g", t._garr)
        # a read can only conflict with writes; a write with both
        for sp in (writes, reads) if is_write else (writes,):
            for rec in sp.overlapping(box, keys):
                if reduce is not None and rec[3] == reduce:
                    continue  # commuting updates of one reduction
                rctx = rec[1]
                if rctx is ctx:
                    continue
                level = _diverge(rctx, ctx)
                if level is None:
                    continue
                if not _overlap(rec[5], exact, st.shape):
                    continue
                self._raise(t, rec, ctx, is_write, reduce, loc, level)
        # an identical record (same elements, context and kind) is kept once
        sp = writes if is_write else reads
        sig = _sig(box, ctx, is_write, reduce, exact)
        if sig in sp.sigs:
            return
        rec = [box, ctx, is_write, reduce, loc, exact, sig]
        sp.add(rec, keys)
        self._records_by_instance.setdefault(ctx[0][0], []).append((st.id, rec))

    def _raise(
        self,
        t: Tensor,
        rec: list,
        ctx: tuple,
        is_write: bool,
        reduce: str | None,
        loc: tuple[str, int],
        level: int,
    ) -> None:
        def kind(w: bool, r: str | None) -> str:
            if r is not None:
                return f"updates ({r} reduction)"
            return "writes" if w else "reads"

        other_kind, this_kind = kind(rec[2], rec[3]), kind(is_write, reduce)
        it_a, it_b = rec[1][level][1], ctx[level][1]
        ofn, oln = rec[4]
        if is_write and rec[2] and reduce is None and rec[3] is None:
            what = "write the same location"
        else:
            what = "depend on each other through memory"
        lo_hi = ", ".join(f"{a}:{b}" for a, b in rec[0])
        raise RaceError(
            f"iterations {it_a} and {it_b} of an nl.affine_range loop (affine nesting level {level}) {what}: "
            f"{t.st.describe()} [{lo_hi}] {other_kind} at {ofn}:{oln} (iteration {it_a}) and {this_kind} "
            f"here (iteration {it_b}); give each iteration its own region (index with the loop variable), or "
            "use nl.sequential_range for a loop-carried dependency",
            filename=loc[0],
            lineno=loc[1],
        )

    def loop_ended(self, frame: Frame) -> None:
        """A loop instance finished: if it was an outermost ``affine_range``, its records go."""
        self._ctx_key = None
        recs = self._records_by_instance.pop(frame.instance, None)
        if not recs:
            return
        by_space: dict[tuple[int, bool], list[list]] = {}
        for sid, rec in recs:
            by_space.setdefault((sid, rec[2]), []).append(rec)
        for (sid, is_write), lst in by_space.items():
            spaces = self._spaces.get(sid)
            if spaces is None:
                continue
            sp = spaces[0] if is_write else spaces[1]
            if len(lst) >= len(sp.sigs):
                sp.clear()
            else:
                for rec in lst:
                    if sp.sigs.get(rec[6]) is rec:
                        sp.remove(rec)
            if spaces[0].empty and spaces[1].empty:
                del self._spaces[sid]

    def forget(self, sid: int) -> None:
        self._spaces.pop(sid, None)
