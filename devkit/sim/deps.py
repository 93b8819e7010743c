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

Box = tuple[tuple[int, int], ...]


class _Space:
    """Access records of one address space, bucketed by a key built from a few coordinates.

    ``keyspec`` is a tuple of ``(axis, shift)``: a box whose extent on each such axis stays inside one
    ``2**shift`` bucket gets the exact key ``(lo >> shift, ...)``; other boxes are "wide" and compared with
    everything.  Tile-structured access patterns then compare against a handful of records.
    """

    __slots__ = ("buckets", "keyspec", "wide")

    def __init__(self, keyspec: tuple[tuple[int, int], ...]) -> None:
        self.keyspec = keyspec
        self.buckets: dict[tuple[int, ...], list[list]] = {}
        self.wide: list[list] = []

    def _key(self, box: Box) -> tuple[int, ...] | None:
        key = []
        for axis, shift in self.keyspec:
            lo, hi = box[axis]
            k = lo >> shift
            if hi - 1 > lo and ((hi - 1) >> shift) != k:
                return None
            key.append(k)
        return tuple(key)

    def __len__(self) -> int:
        return len(self.wide) + sum(len(v) for v in self.buckets.values())

    def records(self) -> list[list]:
        out = list(self.wide)
        for lst in self.buckets.values():
            out.extend(lst)
        return out

    def overlapping(self, box: Box) -> list[list]:
        key = self._key(box)
        if key is None:
            cands = self.records()
        else:
            lst = self.buckets.get(key)
            cands = self.wide + lst if lst else self.wide
        found = []
        for rec in cands:
            for (a, b), (c, d) in zip(rec[0], box):
                if a >= d or c >= b:
                    break
            else:
                found.append(rec)
        return found

    def add(self, rec: list) -> None:
        key = self._key(rec[0])
        if key is None:
            self.wide.append(rec)
        else:
            lst = self.buckets.get(key)
            if lst is None:
                self.buckets[key] = [rec]
            else:
                lst.append(rec)

    def remove(self, rec: list) -> None:
        key = self._key(rec[0])
        lst = self.wide if key is None else self.buckets.get(key)
        if lst is None:
            return
        for i, r in enumerate(lst):
            if r is rec:
                del lst[i]
                break
        if key is not None and not lst:
            del self.buckets[key]

    @property
    def empty(self) -> bool:
        return not self.wide and not self.buckets


def keyspec_for(shape: tuple[int, ...], par_axis: int | None) -> tuple[tuple[int, int], ...]:
    """Bucketing for a tensor's logical index space: block dims exactly, else coarse rows/columns."""
    if par_axis:
        return tuple((d, 0) for d in range(par_axis))
    if not shape:
        return ()
    spec = []
    if par_axis is None:
        spec.append((0, max(0, shape[0].bit_length() - 8)))
    if len(shape) >= 2:
        spec.append((len(shape) - 1, max(0, shape[-1].bit_length() - 6)))
    return tuple(spec)


def _covers(outer: Box, inner: Box) -> bool:
    for (a, b), (c, d) in zip(outer, inner):
        if c < a or d > b:
            return False
    return True


class _IntervalMap:
    """Non-overlapping byte ranges ``[lo, hi)`` each carrying a set of instruction ids."""

    __slots__ = ("ends", "ids", "starts")

    def __init__(self) -> None:
        self.starts: list[int] = []
        self.ends: list[int] = []
        self.ids: list[set[int]] = []

    def take(self, lo: int, hi: int) -> set[int]:
        """Remove and return the ids of everything overlapping ``[lo, hi)`` (partial ranges are trimmed)."""
        out: set[int] = set()
        starts, ends, ids = self.starts, self.ends, self.ids
        i = bisect.bisect_right(starts, lo) - 1
        if i < 0 or ends[i] <= lo:
            i += 1
        j = i
        keep_s: list[int] = []
        keep_e: list[int] = []
        keep_i: list[set[int]] = []
        while j < len(starts) and starts[j] < hi:
            a, b, ids_j = starts[j], ends[j], ids[j]
            out |= ids_j
            if a < lo:
                keep_s.append(a)
                keep_e.append(lo)
                keep_i.append(ids_j)
            if b > hi:
                keep_s.append(hi)
                keep_e.append(b)
                keep_i.append(ids_j)
            j += 1
        if j > i:
            starts[i:j] = keep_s
            ends[i:j] = keep_e
            ids[i:j] = keep_i
        return out

    def put(self, lo: int, hi: int, ids_new: set[int]) -> None:
        """Record ``[lo, hi)`` (merging with whatever it overlaps)."""
        old = self.take(lo, hi)
        i = bisect.bisect_left(self.starts, lo)
        self.starts.insert(i, lo)
        self.ends.insert(i, hi)
        self.ids.insert(i, ids_new | old)


class DependencyTracker:
    """Turns the regions an instruction reads and writes into the ids it depends on.

    Each record is ``[box, instr_id, engine, is_write]``.  A write removes the records it fully covers
    (later accesses to that region depend on the write, which already depends on them); a read
    replaces an earlier read of the same box by the same engine (engines run in program order).
    """

    def __init__(self) -> None:
        self._spaces: dict[object, _Space] = {}
        # per on-chip buffer: byte ranges of freed tensors whose last accesses a tensor placed there
        # later must wait for (write-after-read / write-after-write through address reuse)
        self._tombstones: dict[str, _IntervalMap] = {}

    def space(self, key: object, keyspec: tuple[tuple[int, int], ...]) -> _Space:
        sp = self._spaces.get(key)
        if sp is None:
            sp = _Space(keyspec)
            self._spaces[key] = sp
        return sp

    def drop(self, key: object) -> None:
        self._spaces.pop(key, None)

    def retire(self, key: object, buffer: str, lo: int, hi: int) -> None:
        """A tensor tracked under ``key`` freed the bytes ``[lo, hi)`` of ``buffer``."""
        sp = self._spaces.pop(key, None)
        if sp is None:
            return
        ids = {rec[1] for rec in sp.records()}
        if ids:
            tomb = self._tombstones.get(buffer)
            if tomb is None:
                tomb = self._tombstones[buffer] = _IntervalMap()
            tomb.put(lo, hi, ids)

    def inherit(self, buffer: str, lo: int, hi: int) -> set[int]:
        """Ids a tensor newly placed at ``[lo, hi)`` must wait for; the covered tombstone parts go away."""
        tomb = self._tombstones.get(buffer)
        if tomb is None:
            return set()
        return tomb.take(lo, hi)

    @staticmethod
    def access(sp: _Space, box: Box, iid: int, engine: str, is_write: bool, deps: set[int]) -> None:
        recs = sp.overlapping(box)
        if is_write:
            for rec in recs:
                deps.add(rec[1])
                if _covers(box, rec[0]):
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
