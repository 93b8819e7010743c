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

Box = tuple[tuple[int, int], ...]


class _Space:
    """Access records of one address space, bucketed along coordinate ``axis``."""

    __slots__ = ("axis", "buckets", "shift")

    def __init__(self, axis: int, bucket_bytes: int) -> None:
        self.axis = axis
        self.shift = max(bucket_bytes.bit_length() - 1, 0)
        self.buckets: dict[int, list[list]] = {}

    def _keys(self, box: Box) -> range:
        lo, hi = box[self.axis]
        s = self.shift
        return range(lo >> s, ((max(hi, lo + 1) - 1) >> s) + 1)

    def overlapping(self, box: Box) -> list[list]:
        found: list[list] = []
        seen: set[int] = set()
        buckets = self.buckets
        for k in self._keys(box):
            lst = buckets.get(k)
            if not lst:
                continue
            for rec in lst:
                rid = id(rec)
                if rid in seen:
                    continue
                seen.add(rid)
                rb = rec[0]
                for (a, b), (c, d) in zip(rb, box):
                    if a >= d or c >= b:
                        break
                else:
                    found.append(rec)
        return found

    def add(self, rec: list) -> None:
        for k in self._keys(rec[0]):
            self.buckets.setdefault(k, []).append(rec)

    def remove(self, rec: list) -> None:
        for k in self._keys(rec[0]):
            lst = self.buckets.get(k)
            if lst is not None:
                try:
                    lst.remove(rec)
                except ValueError:
                    pass
                if not lst:
                    del self.buckets[k]


def _covers(outer: Box, inner: Box) -> bool:
    for (a, b), (c, d) in zip(outer, inner):
        if c < a or d > b:
            return False
    return True


class DependencyTracker:
    """Turns the regions an instruction reads and writes into the ids it depends on.

    Each record is ``[box, instr_id, engine, is_write]``.  A write removes the records it fully covers
    (later accesses to that region depend on the write, which already depends on them); a read
    replaces an earlier read of the same box by the same engine (engines run in program order).
    """

    def __init__(self) -> None:
        self._spaces: dict[object, _Space] = {}
        # per on-chip buffer: records [((lo, hi),), ids] -- byte ranges of freed tensors whose last accesses
        # a tensor placed there later must wait for (write-after-read / write-after-write through reuse)
        self._tombstones: dict[str, _Space] = {}

    def space(self, key: object, axis: int, bucket_bytes: int) -> _Space:
        sp = self._spaces.get(key)
        if sp is None:
            sp = _Space(axis, bucket_bytes)
            self._spaces[key] = sp
        return sp

    def drop(self, key: object) -> None:
        self._spaces.pop(key, None)

    def retire(self, key: object, buffer: str, lo: int, hi: int) -> None:
        """A tensor tracked under ``key`` freed the bytes ``[lo, hi)`` of ``buffer``."""
        sp = self._spaces.pop(key, None)
        if sp is None:
            return
        ids = {rec[1] for lst in sp.buckets.values() for rec in lst}
        if ids:
            tomb = self._tombstones.get(buffer)
            if tomb is None:
                tomb = self._tombstones[buffer] = _Space(0, 1024)
            tomb.add([((lo, hi),), ids])

    def inherit(self, buffer: str, lo: int, hi: int) -> set[int]:
        """Ids a tensor newly placed at ``[lo, hi)`` must wait for; the covered tombstone parts go away."""
        out: set[int] = set()
        tomb = self._tombstones.get(buffer)
        if tomb is None or not tomb.buckets:
            return out
        for rec in tomb.overlapping(((lo, hi),)):
            (a, b), = rec[0]
            ids = rec[1]
            out |= ids
            tomb.remove(rec)
            if a < lo:
                tomb.add([((a, lo),), ids])
            if b > hi:
                tomb.add([((hi, b),), ids])
        return out

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
