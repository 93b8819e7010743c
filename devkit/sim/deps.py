"""Dependencies between instructions through memory (RAW, WAR, WAW).

Regions are boxes: one ``(lo, hi)`` interval per coordinate.  On-chip memory is tracked by
*physical* location -- ``((partition_lo, partition_hi), (byte_lo, byte_hi))`` in one address space per
buffer -- so a tile placed where an earlier, freed tile lived waits for that tile's last readers and
writer (the hazards that bound multi-buffering).  HBM tensors are tracked per tensor with one interval
per dimension.

Records are bucketed along one coordinate so that tile-structured access patterns cost a handful of
comparisons, not a scan of every earlier access.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Iterator
from typing import Any

Box = tuple[tuple[int, int], ...]

SMALL = 8  # a query with at most this many candidates scans them rather than consult another index
SPREAD = 8  # a record covering up to this many buckets of an index is filed under each of them


IndexSpec = tuple[tuple[int, int], ...]  # ((axis, shift), ...): buckets keyed by (lo >> shift) per axis


class _Space:
    """Access records of one address space, indexed along a few coordinates.

    ``keyspec`` is a tuple of index specs.  An index spec is ``(axis, shift)`` (buckets by
    ``lo >> shift`` on that axis) or a tuple of such pairs (a composite index keyed by the bucket on each
    of its axes: e.g. the block coordinates and a coarse column of a tile with block dimensions).  A record
    spanning up to :data:`SPREAD` buckets of an index goes into each of them; wider ones go to that index's
    "wide" list.  A query reads the index with the fewest candidates among those on which it spans at most
    :data:`SPREAD` buckets, so tile-structured access patterns compare against a handful of records; only
    queries wide on every index scan everything.
    """

    __slots__ = ("all", "indexes", "keyspec", "open", "parts", "reads", "renamable")

    def __init__(self, keyspec: tuple, renamable: bool = False, split_reads: bool = False) -> None:
        self.all: dict[int, list] = {}
        #: per engine, its latest write record (a plain record or a run, see :func:`_extend`), kept out of
        #: the bucket indexes while later writes may still extend it; queries scan it directly
        self.open: dict[str, list] = {}
        #: a write that covers earlier reads starts a new value the compiler may place elsewhere
        self.renamable = renamable
        #: with ``split_reads`` (the dependency tracker's spaces) this space holds the write records and
        #: ``reads`` the read records, so that a read -- which depends on writes only -- never compares
        #: against the (often many: a sliding window) earlier reads
        self.reads: _Reads | None = _Reads(keyspec) if split_reads else None
        self.set_keyspec(keyspec)

    def set_keyspec(self, keyspec: tuple) -> None:
        self.keyspec = keyspec
        self.open = {}  # every record is indexed below, the open ones included
        self.parts: tuple[IndexSpec, ...] = tuple(
            (spec,) if isinstance(spec[0], int) else tuple(spec) for spec in keyspec
        )
        if self.reads is not None:
            self.reads.set_keyspec(keyspec)
            self.reads.parts = self.parts  # one layout object: the key memo serves both
        self.indexes: list[tuple[dict[Any, list[list]], list[list]]] = [({}, []) for _ in keyspec]
        for rec in self.all.values():
            self._index(rec)

    def __len__(self) -> int:
        return len(self.all) + (len(self.reads.all) if self.reads is not None else 0)

    def records(self) -> list[list]:
        """The access records, a run as its members (copies of a run's members: for reading only)."""
        out = []
        for rec in self.all.values():
            if len(rec) == RUN_LEN:
                out += (_run_piece(rec, j, j) for j in range(rec[7]))
            else:
                out.append(rec)
        if self.reads is not None:
            out += self.reads.all.values()
        return out

    def ids(self) -> set[int]:
        """The instruction ids of every record (a run's members included)."""
        out = record_ids(self.all.values())
        if self.reads is not None:
            out.update(rec[1] for rec in self.reads.all.values())
        return out

    def shift_ids(self, delta: int) -> None:
        """Every record's instruction ids become ``id + delta`` (loop replay moves a tile's records to a
        later synthesised iteration)."""
        for rec in self.all.values():
            rec[1] += delta
        if self.reads is not None:
            for rec in self.reads.all.values():
                rec[1] += delta

    def _all_keys(self, box: Box) -> list:
        """The bucket keys of ``box`` in every index (the last answer is kept: a query and the add that
        follows it -- and the reads companion, which shares the index layout -- ask for the same box)."""
        memo = _MEMO
        if memo[0] is box and memo[1] is self.parts:
            return memo[2]
        out = [self._keys(box, parts) for parts in self.parts]
        memo[0], memo[1], memo[2] = box, self.parts, out
        return out

    def overlapping(self, box: Box) -> list[list]:
        scan = _SCANS.get(len(box), records_overlapping)
        if len(self.all) <= SMALL:
            return scan(self.all.values(), box)  # cheaper than computing bucket keys
        best: tuple | None = None
        memo = _MEMO
        known = memo[2] if memo[0] is box and memo[1] is self.parts else None
        computed: list = []
        for i, (buckets, wide) in enumerate(self.indexes):
            if known is not None:
                ks = known[i]
            else:
                ks = self._keys(box, self.parts[i])
                computed.append(ks)
            if ks is None:
                continue
            if len(ks) == 1:
                lst = buckets.get(ks[0])
                lists = [lst] if lst else []
                n = len(wide) + (len(lst) if lst else 0)
            else:
                lists = [lst for lst in (buckets.get(k) for k in ks) if lst]
                n = len(wide) + sum(len(lst) for lst in lists)
            if best is None or n < best[0]:
                best = (n, wide, lists)
                if n <= SMALL:
                    break  # few enough candidates: the other indexes' keys need not be computed
        else:
            if known is None:  # every index's keys: the add that follows a write's query reuses them
                memo[0], memo[1], memo[2] = box, self.parts, computed
        if best is None:
            return scan(self.all.values(), box)
        _, wide, lists = best
        if len(lists) <= 1:
            if not lists:
                found = scan(wide, box)
            else:
                found = scan(wide + lists[0] if wide else lists[0], box)
        else:
            # a record spanning several of the buckets is filed under each: report it once
            found = scan(wide, box) if wide else []
            seen: set[int] = set()
            for lst in lists:
                for rec in scan(lst, box):
                    if id(rec) not in seen:
                        seen.add(id(rec))
                        found.append(rec)
        if self.open:
            found += scan(self.open.values(), box)  # (open records are in no index)
        return found

    @staticmethod
    def _span(box: Box, axis: int, shift: int) -> range | None:
        """The buckets a record covers on ``axis`` (None: more than SPREAD of them, a wide record)."""
        lo, hi = box[axis]
        k = lo >> shift
        last = (hi - 1) >> shift if hi - 1 > lo else k
        return range(k, last + 1) if last - k < SPREAD else None

    @staticmethod
    def _keys(box: Box, parts: IndexSpec) -> list | None:
        """The bucket keys of ``box`` in the index made of ``parts`` (None: more than SPREAD of them)."""
        if len(parts) == 1:
            axis, shift = parts[0]
            r = _Space._span(box, axis, shift)
            return None if r is None else list(r)
        one: list[int] = []  # the common case: one bucket on every axis of the composite
        for axis, shift in parts:
            lo, hi = box[axis]
            k = lo >> shift
            if hi - 1 > lo and (hi - 1) >> shift != k:
                break
            one.append(k)
        else:
            return [tuple(one)]
        keys: list[tuple] = [()]
        for axis, shift in parts:
            r = _Space._span(box, axis, shift)
            if r is None or len(keys) * len(r) > SPREAD:
                return None
            keys = [(*k, i) for k in keys for i in r]
        return keys

    def _index(self, rec: list) -> None:
        for ks, (buckets, wide) in zip(self._all_keys(rec[0]), self.indexes):
            if ks is None:
                wide.append(rec)
                continue
            for k in ks:
                lst = buckets.get(k)
                if lst is None:
                    buckets[k] = [rec]
                else:
                    lst.append(rec)

    def add(self, rec: list) -> None:
        self.all[id(rec)] = rec
        self._index(rec)

    def remove(self, rec: list) -> None:
        if self.all.pop(id(rec), None) is None:
            return
        if self.open and self.open.get(rec[2]) is rec:
            del self.open[rec[2]]  # never indexed
            return
        for ks, (buckets, wide) in zip(self._all_keys(rec[0]), self.indexes):
            for k in (None,) if ks is None else ks:
                lst = wide if k is None else buckets.get(k)
                if not lst:
                    continue
                for i, r in enumerate(lst):
                    if r is rec:
                        del lst[i]
                        break
                if k is not None and not lst:
                    del buckets[k]

    def add_write(self, box: Box, iid: int, engine: str) -> None:
        """Record a write: it extends ``engine``'s open write record into a run when it is that record's
        next member (:func:`_extend`); otherwise the open record is indexed and this write takes its place."""
        o = self.open.get(engine)
        if o is not None:
            if _extend(o, box, iid):
                return
            self._index(o)
        rec = [box, iid, engine, True]
        self.all[id(rec)] = rec
        self.open[engine] = rec

    @property
    def empty(self) -> bool:
        return not self.all and (self.reads is None or not self.reads.all)


class _Reads(_Space):
    """The read records of a dependency-tracker space, with an exact ``(box, engine)`` lookup: a read of
    the same region by the same engine replaces the earlier one (engines run in program order).

    Read records are indexed lazily: only a write asks which reads it overlaps, so a read is appended to
    ``pending`` and goes into the bucket indexes when the next query comes.  A tensor read many times and
    never rewritten (the input of a sliding window) then costs an append per read, not an index update.
    """

    __slots__ = ("exact", "pending")

    def __init__(self, keyspec: tuple) -> None:
        self.exact: dict[tuple, list] = {}
        self.pending: list[list] = []
        super().__init__(keyspec)

    def set_keyspec(self, keyspec: tuple) -> None:
        self.pending = []  # re-indexing every record covers the pending ones
        super().set_keyspec(keyspec)

    def _flush(self) -> None:
        pending, self.pending = self.pending, []
        for rec in pending:
            if id(rec) in self.all:
                self._index(rec)

    def overlapping(self, box: Box) -> list[list]:
        if self.pending:
            self._flush()
        return super().overlapping(box)

    def add(self, rec: list) -> None:
        self.all[id(rec)] = rec
        self.pending.append(rec)
        self.exact[(rec[0], rec[2])] = rec

    def add_read(self, box: Box, iid: int, engine: str) -> None:
        """Record a read by ``iid``: it replaces the record of an earlier read of ``box`` by ``engine``."""
        rec = [box, iid, engine, False]
        known = self.exact.setdefault((box, engine), rec)
        if known is rec:
            self.all[id(rec)] = rec
            self.pending.append(rec)
        else:
            known[1] = iid

    def remove(self, rec: list) -> None:
        if self.pending:
            self._flush()
        super().remove(rec)
        key = (rec[0], rec[2])
        if self.exact.get(key) is rec:
            del self.exact[key]


#: (box, index layout, keys per index) of the last key computation (see _Space._all_keys); a box is
#: an immutable tuple, compared by identity
_MEMO: list = [None, None, None]


def records_overlapping(cands: Any, box: Box) -> list[list]:
    """The records among ``cands`` (lists whose item 0 is a box of half-open ranges) that overlap ``box``."""
    found = []
    for rec in cands:
        for (a, b), (c, d) in zip(rec[0], box):
            if a >= d or c >= b:
                break
        else:
            found.append(rec)
    return found


# The same test unrolled for boxes of 2, 3 and 4 dimensions (every box of one tracker space has its
# storage's rank), checking the last -- the free, most often distinguishing -- axis first.


def _overlapping_2(cands: Any, box: Box) -> list[list]:
    (a0, b0), (a1, b1) = box
    found = []
    for rec in cands:
        (c0, d0), (c1, d1) = rec[0]
        if c1 < b1 and a1 < d1 and c0 < b0 and a0 < d0:
            found.append(rec)
    return found


def _overlapping_3(cands: Any, box: Box) -> list[list]:
    (a0, b0), (a1, b1), (a2, b2) = box
    found = []
    for rec in cands:
        (c0, d0), (c1, d1), (c2, d2) = rec[0]
        if c2 < b2 and a2 < d2 and c0 < b0 and a0 < d0 and c1 < b1 and a1 < d1:
            found.append(rec)
    return found


def _overlapping_4(cands: Any, box: Box) -> list[list]:
    (a0, b0), (a1, b1), (a2, b2), (a3, b3) = box
    found = []
    for rec in cands:
        (c0, d0), (c1, d1), (c2, d2), (c3, d3) = rec[0]
        if c3 < b3 and a3 < d3 and c0 < b0 and a0 < d0 and c1 < b1 and a1 < d1 and c2 < b2 and a2 < d2:
            found.append(rec)
    return found


#: the scan for a box of each rank (records_overlapping for the others)
_SCANS = {2: _overlapping_2, 3: _overlapping_3, 4: _overlapping_4}


# Runs.  A loop writing one column (row, tile ...) per iteration leaves one write record per iteration;
# those records are summarised as one *run* record while they continue a regular pattern:
#     [hull, first_id, engine, True, axis, step, width, count, id_step]
# member j (0 <= j < count) is the write of instruction ``first_id + j * id_step`` to ``hull`` with
# ``axis`` narrowed to ``[lo + j * step, lo + j * step + width)`` (lo: the hull's start on ``axis``).
# Members never overlap (step >= width), so a run answers exactly what its members would: the
# dependency ids of a query, and which members a write covers (the run is then split around them).
# A plain record has 4 items, a run 9; adding the same shift to every id (loop replay) shifts a run's
# first_id alone, as it does a plain record's id.

RUN_LEN = 9


def _extend(rec: list, box: Box, iid: int) -> bool:
    """Make the write ``(box, iid)`` a member of ``rec`` (a plain write record or a run of the same
    engine) if it is its next member; False (``rec`` unchanged) otherwise."""
    hull = rec[0]
    if len(rec) == RUN_LEN:
        axis, step, width, count, id_step = rec[4], rec[5], rec[6], rec[7], rec[8]
        lo = hull[axis][0] + count * step
        if iid != rec[1] + count * id_step or box[axis] != (lo, lo + width):
            return False
        if box[:axis] != hull[:axis] or box[axis + 1 :] != hull[axis + 1 :]:
            return False
        rec[0] = (*hull[:axis], (hull[axis][0], lo + width), *hull[axis + 1 :])
        rec[7] = count + 1
        return True
    if len(box) != len(hull) or iid <= rec[1]:
        return False
    axis = -1
    for d, (old, new) in enumerate(zip(hull, box)):
        if old != new:
            if axis >= 0:
                return False  # moves along two axes
            axis = d
    if axis < 0:
        return False
    (a, b), (c, e) = hull[axis], box[axis]
    width = b - a
    step = c - a
    if e - c != width or step < width:
        return False  # a different size, or overlapping (or preceding) the earlier write
    rec[0] = (*hull[:axis], (a, e), *hull[axis + 1 :])
    rec += (axis, step, width, 2, iid - rec[1])
    return True


def _member_range(rec: list, box: Box) -> tuple[int, int]:
    """Members ``j0 .. j1`` (inclusive; empty if j0 > j1) of run ``rec`` that overlap ``box`` (whose
    overlap with the run's hull is already known)."""
    axis, step, width, count = rec[4], rec[5], rec[6], rec[7]
    lo = rec[0][axis][0]
    qlo, qhi = box[axis]
    return max(0, (qlo - width - lo) // step + 1), min(count - 1, (qhi - lo - 1) // step)


def _run_ids(rec: list, j0: int, j1: int) -> range:
    """Instruction ids of members ``j0 .. j1`` of run ``rec``."""
    first, id_step = rec[1], rec[8]
    return range(first + j0 * id_step, first + j1 * id_step + 1, id_step)


def _run_piece(rec: list, j0: int, j1: int) -> list:
    """A record holding members ``j0 .. j1`` (non-empty) of run ``rec``: a run, or a plain record."""
    hull, first, engine = rec[0], rec[1], rec[2]
    axis, step, width, id_step = rec[4], rec[5], rec[6], rec[8]
    lo = hull[axis][0]
    span = (lo + j0 * step, lo + j1 * step + width)
    box = (*hull[:axis], span, *hull[axis + 1 :])
    if j0 == j1:
        return [box, first + j0 * id_step, engine, True]
    return [box, first + j0 * id_step, engine, True, axis, step, width, j1 - j0 + 1, id_step]


def _write_over_run(sp: _Space, rec: list, box: Box, rename: bool, deps: set[int]) -> None:
    """A write of ``box`` meets run ``rec`` (their hulls overlap): its dependencies on the members it
    overlaps, and the members it covers removed (as :meth:`DependencyTracker.access` does per record)."""
    j0, j1 = _member_range(rec, box)
    if j0 > j1:
        return  # between members
    axis, step, width = rec[4], rec[5], rec[6]
    hull = rec[0]
    c0, c1 = 1, 0  # members covered: none unless the write covers the run's other axes
    for d, ((a, b), (c, e)) in enumerate(zip(box, hull)):
        if d != axis and (c < a or e > b):
            break
    else:
        lo = hull[axis][0]
        qlo, qhi = box[axis]
        c0, c1 = max(j0, -((lo - qlo) // step)), min(j1, (qhi - width - lo) // step)
    if c0 > c1 or not rename:
        deps.update(_run_ids(rec, j0, j1))
    else:
        if j0 < c0:
            deps.update(_run_ids(rec, j0, c0 - 1))
        if c1 < j1:
            deps.update(_run_ids(rec, c1 + 1, j1))
    if c0 <= c1:
        sp.remove(rec)
        for p0, p1 in ((0, c0 - 1), (c1 + 1, rec[7] - 1)):
            if p0 <= p1:
                piece = _run_piece(rec, p0, p1)
                sp.all[id(piece)] = piece
                sp._index(piece)


def record_ids(recs: Any) -> set[int]:
    """The instruction ids held by access records ``recs`` (plain records and runs)."""
    out: set[int] = set()
    for rec in recs:
        if len(rec) == RUN_LEN:
            out.update(_run_ids(rec, 0, rec[7] - 1))
        else:
            out.add(rec[1])
    return out


def keyspec_for(shape: tuple[int, ...], par_axis: int | None) -> tuple:
    """Indexes for a tensor's logical index space: each block dim exactly, plus the trailing free dim
    coarsely (a loop writing one column of a block per iteration, as a depthwise convolution does, must not
    compare against every earlier column of that block); without block dims, the leading and trailing
    non-partition dims, coarsely (about 64-256 buckets each)."""
    if par_axis:
        spec: list = [(d, 0) for d in range(par_axis)]
        last = len(shape) - 1
        if last > par_axis and shape[last] > 64:
            blocks = tuple(spec)
            col = (last, max(0, shape[last].bit_length() - 6))
            spec.append((*blocks, col))  # composite: this block's coarse column
            fine = max(0, shape[last].bit_length() - 9)
            if fine < col[1]:
                # and its fine column (about 512 buckets): one-column writes stay a handful of comparisons
                spec.append((*blocks, (last, fine)))
        return tuple(spec)
    if not shape:
        return ()
    spec = []
    dims = [d for d in range(len(shape)) if d != par_axis and shape[d] > 1]
    for d in (dims[:1] + dims[-1:]) if len(dims) > 1 else dims:
        spec.append((d, max(0, shape[d].bit_length() - (8 if par_axis is None and d == 0 else 6))))
    if par_axis is None and len(dims) > 2:
        spec.append((dims[1], max(0, shape[dims[1]].bit_length() - 6)))
    return tuple(spec)


def _covers(outer: Box, inner: Box) -> bool:
    for (a, b), (c, d) in zip(outer, inner):
        if c < a or d > b:
            return False
    return True


#: a buffer's freed ranges move from the flat map to the blocked one past this many entries
FLAT_LIMIT = 1024
#: blocked map: entries grouped in blocks of 2**BLOCK_SHIFT bytes by start address, so that adding or
#: taking one moves a block's handful of entries, not every entry of the buffer (a loop replay through a
#: ring of small tiles leaves ~15,000 of them in SBUF)
BLOCK_SHIFT = 12


class _BlockedIntervalMap:
    """Non-overlapping byte ranges ``[lo, hi)`` each carrying a set of instruction ids (and its largest id).

    Entries live in blocks keyed by ``start >> BLOCK_SHIFT``; a block holds the parallel sorted lists
    ``[starts, ends, ids, tops]`` of the entries starting in it (an entry may reach into later blocks).
    """

    __slots__ = ("blocks", "order")

    def __init__(self) -> None:
        self.blocks: dict[int, list[list]] = {}
        self.order: list[int] = []  # the keys of ``blocks``, sorted

    @classmethod
    def of(cls, flat: _IntervalMap) -> _BlockedIntervalMap:
        """The entries of ``flat`` (the same set objects) in a blocked map."""
        out = cls()
        for a, b, ids, top in zip(flat.starts, flat.ends, flat.ids, flat.top):
            out._insert(a, b, ids, top)
        return out

    def entries(self) -> Iterator[list[list]]:
        """The blocks' ``[starts, ends, ids, tops]`` lists (for in-place id updates)."""
        return iter(self.blocks.values())

    def _insert(self, lo: int, hi: int, ids: set[int], top: int) -> None:
        key = lo >> BLOCK_SHIFT
        blk = self.blocks.get(key)
        if blk is None:
            self.blocks[key] = [[lo], [hi], [ids], [top]]
            bisect.insort(self.order, key)
            return
        starts = blk[0]
        i = bisect.bisect_left(starts, lo)
        starts.insert(i, lo)
        blk[1].insert(i, hi)
        blk[2].insert(i, ids)
        blk[3].insert(i, top)

    @staticmethod
    def _delete(blk: list[list], i: int) -> None:
        # (an emptied block stays: tiles come and go at the same addresses)
        del blk[0][i], blk[1][i], blk[2][i], blk[3][i]

    def take(self, lo: int, hi: int) -> set[int]:
        """Remove and return the ids of everything overlapping ``[lo, hi)`` (partial ranges are trimmed)."""
        blocks = self.blocks
        if not blocks:
            return set()
        key = lo >> BLOCK_SHIFT
        blk = blocks.get(key)
        if blk is not None and hi <= (key + 1) << BLOCK_SHIFT:
            # the common cases, inside one block: one entry starting at lo and ending by hi (taken
            # whole), or nothing (lo past the end of the entry before it, hi at or before the next)
            starts = blk[0]
            i = bisect.bisect_right(starts, lo) - 1
            if i >= 0 and (i + 1 == len(starts) or starts[i + 1] >= hi):
                ends = blk[1]
                if starts[i] == lo and ends[i] <= hi:
                    ids = blk[2]
                    out = ids[i]
                    del starts[i], ends[i], ids[i], blk[3][i]
                    return out
                if ends[i] <= lo:
                    return set()
        order = self.order
        # the overlapping entries as (block key, block, index), in address order
        found: list[tuple[int, list[list], int]] = []
        # the last entry starting at or before lo (it may reach over lo)
        blk = blocks.get(key)
        i = bisect.bisect_right(blk[0], lo) - 1 if blk is not None else -1
        if i >= 0:
            if blk[1][i] > lo:  # type: ignore[index]
                found.append((key, blk, i))  # type: ignore[arg-type]
        else:
            k = bisect.bisect_left(order, key) - 1
            while k >= 0 and not blocks[order[k]][0]:
                k -= 1  # (emptied blocks)
            if k >= 0:
                pkey = order[k]
                pblk = blocks[pkey]
                j = len(pblk[0]) - 1
                if pblk[1][j] > lo:
                    found.append((pkey, pblk, j))
        # entries starting in (lo, hi)
        k = bisect.bisect_left(order, key)
        n_order = len(order)
        while k < n_order:
            bkey = order[k]
            blk2 = blocks[bkey]
            starts = blk2[0]
            if not starts:
                k += 1
                continue
            if starts[0] >= hi:
                break
            j = bisect.bisect_right(starts, lo) if bkey == key else 0
            n = len(starts)
            while j < n and starts[j] < hi:
                found.append((bkey, blk2, j))
                j += 1
            if j < n:
                break  # the next start is at or past hi
            k += 1
        if not found:
            return set()
        if len(found) == 1:
            bkey, b, j = found[0]
            a, e = b[0][j], b[1][j]
            if a >= lo and e <= hi:  # the common case of reuse: one freed range inside [lo, hi), taken whole
                out = b[2][j]
                self._delete(b, j)
                return out
        out = set()
        keep: list[tuple[int, int, set[int], int]] = []
        for _bkey, b, j in found:
            a, e, ids_j, t_j = b[0][j], b[1][j], b[2][j], b[3][j]
            out |= ids_j
            if a < lo:
                keep.append((a, lo, ids_j, t_j))
            if e > hi:
                keep.append((hi, e, ids_j, t_j))
        # delete back to front, so that the indexes found stay valid
        for _bkey, b, j in reversed(found):
            self._delete(b, j)
        for a, e, ids_j, t_j in keep:
            self._insert(a, e, ids_j, t_j)
        return out

    def put(self, lo: int, hi: int, ids_new: Iterable[int]) -> None:
        """Record ``[lo, hi)`` (merging with whatever it overlaps; ``ids_new`` is copied)."""
        merged = set(ids_new)
        taken = self.take(lo, hi)
        if taken:
            merged |= taken
        top = max(merged) if merged else -1
        blk = self.blocks.get(lo >> BLOCK_SHIFT)
        if blk is None:
            self._insert(lo, hi, merged, top)
            return
        starts = blk[0]  # (_insert, inlined)
        i = bisect.bisect_left(starts, lo)
        starts.insert(i, lo)
        blk[1].insert(i, hi)
        blk[2].insert(i, merged)
        blk[3].insert(i, top)


class _IntervalMap:
    """Non-overlapping byte ranges ``[lo, hi)`` each carrying a set of instruction ids, in four parallel
    sorted lists: the fastest form for the few hundred freed ranges of a typical buffer (a tracker
    switches a buffer to :class:`_BlockedIntervalMap` past :data:`FLAT_LIMIT` entries)."""

    __slots__ = ("ends", "ids", "starts", "top")

    def __init__(self) -> None:
        self.starts: list[int] = []
        self.ends: list[int] = []
        self.ids: list[set[int]] = []
        self.top: list[int] = []  # largest id of each entry

    def __len__(self) -> int:
        return len(self.starts)

    def entries(self) -> Iterator[list[list]]:
        """``[starts, ends, ids, tops]`` lists (for in-place id updates; one, here)."""
        return iter(((self.starts, self.ends, self.ids, self.top),))

    def take(self, lo: int, hi: int) -> set[int]:
        """Remove and return the ids of everything overlapping ``[lo, hi)`` (partial ranges are trimmed)."""
        starts, ends, ids, top = self.starts, self.ends, self.ids, self.top
        i = bisect.bisect_right(starts, lo) - 1
        if i < 0 or ends[i] <= lo:
            i += 1
        n = len(starts)
        if i == n or starts[i] >= hi:
            return set()  # nothing overlaps
        if starts[i] >= lo and ends[i] <= hi and (i + 1 == n or starts[i + 1] >= hi):
            # the common case of reuse: one freed range inside [lo, hi), taken whole
            out = ids[i]
            del starts[i], ends[i], ids[i], top[i]
            return out
        out: set[int] = set()
        j = i
        keep_s: list[int] = []
        keep_e: list[int] = []
        keep_i: list[set[int]] = []
        keep_t: list[int] = []
        while j < len(starts) and starts[j] < hi:
            a, b, ids_j, t_j = starts[j], ends[j], ids[j], top[j]
            out |= ids_j
            if a < lo:
                keep_s.append(a)
                keep_e.append(lo)
                keep_i.append(ids_j)
                keep_t.append(t_j)
            if b > hi:
                keep_s.append(hi)
                keep_e.append(b)
                keep_i.append(ids_j)
                keep_t.append(t_j)
            j += 1
        if j > i:
            starts[i:j] = keep_s
            ends[i:j] = keep_e
            ids[i:j] = keep_i
            top[i:j] = keep_t
        return out

    def put(self, lo: int, hi: int, ids_new: set[int]) -> None:
        """Record ``[lo, hi)`` (merging with whatever it overlaps; ``ids_new`` may be kept: the caller hands
        it over and does not change it afterwards)."""
        starts = self.starts
        i = bisect.bisect_left(starts, lo)
        if (i == len(starts) or starts[i] >= hi) and (i == 0 or self.ends[i - 1] <= lo):
            merged = ids_new  # the common case: nothing overlaps (take would find nothing)
        else:
            merged = ids_new | self.take(lo, hi)
            i = bisect.bisect_left(starts, lo)
        starts.insert(i, lo)
        self.ends.insert(i, hi)
        self.ids.insert(i, merged)
        self.top.insert(i, max(merged) if merged else -1)


class DependencyTracker:
    """Turns the regions an instruction reads and writes into the ids it depends on.

    Each record is ``[box, instr_id, engine, is_write]``, or a run of writes (see "Runs" above: one
    record for an engine's writes that step regularly along one axis, answering per member).  A write
    removes the records it fully covers (later accesses to that region depend on the write, which
    already depends on them); a read replaces an earlier read of the same box by the same engine
    (engines run in program order).  Freed on-chip ranges keep the ids of their last users in a flat
    sorted map per buffer, blocked by address once it holds more than :data:`FLAT_LIMIT` ranges.
    """

    def __init__(self) -> None:
        self._spaces: dict[object, _Space] = {}
        # per on-chip buffer: byte ranges of freed tensors whose last accesses a tensor placed there
        # later must wait for (write-after-read / write-after-write through address reuse)
        self._tombstones: dict[str, _IntervalMap | _BlockedIntervalMap] = {}

    def space(self, key: object, keyspec: tuple) -> _Space:
        """The access records under ``key``: an int is a compiler-allocated on-chip tensor (its values
        may be renamed, see :meth:`access`); tuples are HBM tensors and physical direct allocations."""
        sp = self._spaces.get(key)
        if sp is None:
            sp = _Space(keyspec, renamable=isinstance(key, int), split_reads=True)
            self._spaces[key] = sp
        return sp

    def drop(self, key: object) -> None:
        self._spaces.pop(key, None)

    def ids_of(self, key: object) -> set[int]:
        """Ids of the access records held under ``key`` (what :meth:`retire` would leave behind)."""
        sp = self._spaces.get(key)
        return sp.ids() if sp is not None else set()

    def take_space(self, key: object) -> _Space | None:
        """Remove and return the records under ``key`` (loop replay moves them to another key)."""
        return self._spaces.pop(key, None)

    def put_space(self, key: object, sp: _Space) -> None:
        self._spaces[key] = sp

    def retire(self, key: object, buffer: str, lo: int, hi: int) -> None:
        """A tensor tracked under ``key`` freed the bytes ``[lo, hi)`` of ``buffer``."""
        sp = self._spaces.pop(key, None)
        if sp is None:
            return
        ids = sp.ids()
        if ids:
            tomb = self._tombstones.get(buffer)
            if tomb is None:
                tomb = self._tombstones[buffer] = _IntervalMap()
            tomb.put(lo, hi, ids)
            if type(tomb) is _IntervalMap and len(tomb.starts) > FLAT_LIMIT:
                self._tombstones[buffer] = _BlockedIntervalMap.of(tomb)

    def retire_ids(self, buffer: str, lo: int, hi: int, ids: set[int]) -> None:
        """Freed bytes ``[lo, hi)`` of ``buffer`` were last used by ``ids`` (which the tracker may keep: the
        caller hands the set over and does not change it afterwards)."""
        if ids:
            tomb = self._tombstones.get(buffer)
            if tomb is None:
                tomb = self._tombstones[buffer] = _IntervalMap()
            tomb.put(lo, hi, ids)
            if type(tomb) is _IntervalMap and len(tomb.starts) > FLAT_LIMIT:
                self._tombstones[buffer] = _BlockedIntervalMap.of(tomb)

    def inherit(self, buffer: str, lo: int, hi: int) -> set[int]:
        """Ids a tensor newly placed at ``[lo, hi)`` must wait for; the covered tombstone parts go away."""
        tomb = self._tombstones.get(buffer)
        if tomb is None:
            return set()
        return tomb.take(lo, hi)

    def shift_ids(self, lo: int, hi: int, delta: int) -> None:
        """Ids in ``[lo, hi)`` held by address-reuse records become ``id + delta`` (after loop replay the
        latest iteration is a synthesised one)."""
        for tomb in self._tombstones.values():
            for _, _, ids_list, tops in tomb.entries():
                for k, top in enumerate(tops):
                    if top >= lo:
                        new = {i + delta if lo <= i < hi else i for i in ids_list[k]}
                        ids_list[k] = new
                        tops[k] = max(new)

    @staticmethod
    def access(sp: _Space, box: Box, iid: int, engine: str, is_write: bool, deps: set[int]) -> None:
        """Add the ids ``iid`` depends on through ``box`` to ``deps`` and record the access.

        Compiler renaming: in a compiler-allocated on-chip tensor (``sp.renamable``), a write that
        covers an earlier access's whole region starts a new value; the compiler's allocator gives
        values, not declared tensors, their buffers, so the write waits neither for that read
        (write-after-read) nor for that write (write-after-write).  Partial writes update the old
        value and keep both hazards, as do all accesses to HBM and to direct allocations.
        """
        reads = sp.reads
        if reads is None:  # a space holding reads and writes together
            recs = sp.overlapping(box)
            if is_write:
                rename = sp.renamable
                for rec in recs:
                    covered = _covers(box, rec[0])
                    if not (rename and covered):
                        deps.add(rec[1])
                    if covered:
                        sp.remove(rec)
                sp.add([box, iid, engine, True])
            else:
                replaced = False
                for rec in recs:
                    if rec[3]:
                        deps.add(rec[1])
                    elif not replaced and rec[2] == engine and rec[0] == box:
                        rec[1] = iid
                        replaced = True
                if not replaced:
                    sp.add([box, iid, engine, False])
            return
        if is_write:
            rename = sp.renamable
            for part in (sp, reads) if reads.all else (sp,):
                for rec in part.overlapping(box):
                    if len(rec) == RUN_LEN:
                        _write_over_run(part, rec, box, rename, deps)
                        continue
                    covered = _covers(box, rec[0])
                    if not (rename and covered):
                        deps.add(rec[1])
                    if covered:
                        part.remove(rec)
            sp.add_write(box, iid, engine)
        else:
            writes = sp.all
            if writes:
                if len(writes) <= SMALL:  # (as overlapping() would, without the call)
                    recs = _SCANS.get(len(box), records_overlapping)(writes.values(), box)
                else:
                    recs = sp.overlapping(box)
                for rec in recs:
                    if len(rec) == RUN_LEN:  # (_member_range and _run_ids, inlined)
                        _, first, _, _, axis, step, width, count, id_step = rec
                        lo = rec[0][axis][0]
                        qlo, qhi = box[axis]
                        j0 = (qlo - width - lo) // step + 1
                        j1 = (qhi - lo - 1) // step
                        if j0 < 0:
                            j0 = 0
                        if j1 >= count:
                            j1 = count - 1
                        if j0 <= j1:
                            deps.update(range(first + j0 * id_step, first + j1 * id_step + 1, id_step))
                    else:
                        deps.add(rec[1])
            reads.add_read(box, iid, engine)
