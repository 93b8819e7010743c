"""Run records and the blocked address-reuse map of the dependency tracker (devkit.sim.deps) answer
exactly what the plain per-access records would.

A loop writing one column (tile, row) per iteration leaves a *run*: one record for writes of the same size
stepping along one axis.  Queries read member ids off it, a write that covers some members splits it, and
a write off the pattern starts a new record.  Every case is checked access by access against a plain scan
of all earlier accesses."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from devkit.sim.deps import (
    FLAT_LIMIT,
    DependencyTracker,
    _BlockedIntervalMap,
    _IntervalMap,
    keyspec_for,
    record_ids,
    records_overlapping,
)

SHAPE = (2, 3, 128, 64)  # block, block, partition, free


class _Plain:
    """Every access as its own record, scanned in full: a read waits for the writes it overlaps and
    replaces an earlier read of the same box by the same engine; a write waits for every access it
    overlaps except, renamable, those it covers, and removes those it covers."""

    def __init__(self, renamable: bool) -> None:
        self.recs: list[list] = []
        self.renamable = renamable

    def access(self, box, iid, engine, is_write):
        deps = set()
        for rec in records_overlapping(self.recs, box):
            if is_write:
                covered = all(c <= a and b <= d for (a, b), (c, d) in zip(rec[0], box))
                if not (self.renamable and covered):
                    deps.add(rec[1])
                if covered:
                    self.recs.remove(rec)
            elif rec[3]:
                deps.add(rec[1])
        if not is_write:
            for rec in self.recs:
                if not rec[3] and rec[2] == engine and rec[0] == box:
                    rec[1] = iid
                    return deps
        self.recs.append([box, iid, engine, is_write])
        return deps


def _column(b0: int, b1: int, lo: int, width: int, axis: int = 3, p: tuple = (0, 128)):
    box = [(b0, b0 + 1), (b1, b1 + 1), p, (0, 64)]
    box[axis] = (lo, lo + width)
    return tuple(box)


@st.composite
def patterned_accesses(draw):
    """Loops of column writes (runs, with steps >= width, sometimes a second engine interleaved), plus
    random reads and writes that hit, cover, split and straddle them."""
    out = []
    for _ in range(draw(st.integers(1, 6))):
        kind = draw(st.sampled_from(["loop", "loop", "read", "write", "wide_read"]))
        b0, b1 = draw(st.integers(0, 1)), draw(st.integers(0, 2))
        engine = draw(st.sampled_from(["vector", "scalar"]))
        if kind == "loop":
            width = draw(st.integers(1, 3))
            step = draw(st.integers(width, width + 2))
            start = draw(st.integers(0, 8))
            n = draw(st.integers(1, 12))
            axis = draw(st.sampled_from([3, 3, 2]))
            other = draw(st.booleans())
            for j in range(n):
                lo = start + j * step
                if lo + width > SHAPE[axis]:
                    break
                out.append((_column(b0, b1, lo, width, axis), True, engine))
                if other:  # an interleaved access by another engine
                    out.append((_column(b0, b1, lo, width, axis), False, "gpsimd"))
        else:
            lo = draw(st.integers(0, 40))
            width = draw(st.integers(1, 24))
            p = (0, 128) if draw(st.booleans()) else (0, draw(st.integers(1, 127)))
            box = _column(b0, b1, lo, width, 3, p)
            if kind == "wide_read":
                box = ((0, 2), (0, 3), (0, 128), (lo, lo + width))
            out.append((box, kind == "write", engine))
    return out


@given(patterned_accesses(), st.booleans())
def test_run_records_give_the_dependencies_of_plain_records(accesses, renamable):
    tracker = DependencyTracker()
    key = 7 if renamable else ("hbm", 7)
    sp = tracker.space(key, keyspec_for(SHAPE, 2))
    ref = _Plain(renamable)
    for iid, (box, is_write, engine) in enumerate(accesses):
        deps: set[int] = set()
        tracker.access(sp, box, iid, engine, is_write, deps)
        assert deps == ref.access(box, iid, engine, is_write), (iid, box, is_write, engine)
    # the records, members of runs expanded, are the plain records; ids_of agrees
    got = sorted((r[0], r[1], r[2], r[3]) for r in sp.records())
    assert got == sorted(tuple(r) for r in ref.recs)
    assert tracker.ids_of(key) == {r[1] for r in ref.recs}


def test_a_column_loop_is_held_as_one_record_and_a_store_reads_every_member():
    tracker = DependencyTracker()
    sp = tracker.space(5, keyspec_for(SHAPE, 2))
    for j in range(64):
        tracker.access(sp, _column(1, 2, j, 1), 10 + 2 * j, "vector", True, set())
    assert len(sp.all) == 1  # one run, not 64 records
    deps: set[int] = set()
    tracker.access(sp, ((1, 2), (2, 3), (0, 128), (0, 64)), 200, "sync", False, deps)
    assert deps == {10 + 2 * j for j in range(64)}
    deps = set()
    tracker.access(sp, ((1, 2), (2, 3), (0, 128), (20, 23)), 201, "sync", False, deps)
    assert deps == {50, 52, 54}


def test_a_covering_write_splits_a_run_and_shifted_ids_follow():
    tracker = DependencyTracker()
    sp = tracker.space(5, keyspec_for(SHAPE, 2))
    for j in range(10):
        tracker.access(sp, _column(0, 0, 2 * j, 1), j, "vector", True, set())
    deps: set[int] = set()
    # renamable space: the covered members (columns 4..8: j = 2, 3, 4) are replaced without a dependency
    tracker.access(sp, _column(0, 0, 4, 5), 100, "scalar", True, deps)
    assert deps == set()
    assert tracker.ids_of(5) == {0, 1, 5, 6, 7, 8, 9, 100}
    sp.shift_ids(1000)
    assert tracker.ids_of(5) == {1000, 1001, 1005, 1006, 1007, 1008, 1009, 1100}
    deps = set()
    tracker.access(sp, _column(0, 0, 0, 64), 2000, "vector", False, deps)
    assert deps == {1000, 1001, 1005, 1006, 1007, 1008, 1009, 1100}


class _PlainMap:
    """Byte ranges with id sets as a flat list, scanned in full."""

    def __init__(self) -> None:
        self.entries: list[tuple[int, int, frozenset]] = []

    def take(self, lo, hi):
        out: set[int] = set()
        keep = []
        for a, b, ids in self.entries:
            if a < hi and lo < b:
                out |= ids
                if a < lo:
                    keep.append((a, lo, ids))
                if b > hi:
                    keep.append((hi, b, ids))
            else:
                keep.append((a, b, ids))
        self.entries = keep
        return out

    def put(self, lo, hi, ids):
        merged = frozenset(set(ids) | self.take(lo, hi))
        self.entries.append((lo, hi, merged))


def _entries(m) -> list[tuple[int, int, frozenset]]:
    out = []
    for starts, ends, ids, tops in m.entries():
        for a, b, i, t in zip(starts, ends, ids, tops):
            assert t == (max(i) if i else -1)
            out.append((a, b, frozenset(i)))
    return sorted(out)


@given(
    st.lists(
        st.tuples(
            st.booleans(),
            st.one_of(st.integers(0, 300), st.integers(0, 40000)),
            st.one_of(st.integers(1, 64), st.integers(1, 20000)),
        ),
        min_size=1,
        max_size=80,
    )
)
def test_reuse_maps_match_a_flat_scan(ops):
    """Puts and takes of ranges inside one block, across block boundaries and spanning many blocks, in
    the flat map and in the blocked one."""
    for kind in (_IntervalMap, _BlockedIntervalMap):
        _check_against_scan(kind(), ops)


def _check_against_scan(m, ops):
    ref = _PlainMap()
    for k, (is_put, lo, size) in enumerate(ops):
        if is_put:
            m.put(lo, lo + size, {k, k + 1000})
            ref.put(lo, lo + size, {k, k + 1000})
        else:
            assert m.take(lo, lo + size) == ref.take(lo, lo + size)
        assert _entries(m) == sorted(ref.entries)


@pytest.mark.parametrize("kind", [_IntervalMap, _BlockedIntervalMap])
def test_ring_of_small_tiles_reuses_addresses_exactly(kind):
    """The loop-replay pattern: thousands of small tiles placed round a ring, each inheriting the ids of
    the tile that last used its bytes."""
    rng = random.Random(5)
    m, ref = kind(), _PlainMap()
    pos = 0
    for k in range(3000):
        size = rng.choice([12, 12, 12, 64, 4096])
        if pos + size > 50000:
            pos = 0
        assert m.take(pos, pos + size) == ref.take(pos, pos + size)
        m.put(pos, pos + size, {k})
        ref.put(pos, pos + size, {k})
        pos += size
    assert _entries(m) == sorted(ref.entries)
    assert record_ids([]) == set()


def test_a_buffer_with_many_freed_ranges_moves_to_the_blocked_map_with_the_same_answers():
    tracker = DependencyTracker()
    ref = _PlainMap()
    for k in range(FLAT_LIMIT + 10):
        tracker.retire_ids("sbuf", 16 * k, 16 * k + 12, {k})
        ref.put(16 * k, 16 * k + 12, {k})
    assert isinstance(tracker._tombstones["sbuf"], _BlockedIntervalMap)
    tracker.shift_ids(5, 10, 100)  # ids 5..9 become 105..109
    for lo, hi in ((0, 40), (70, 170), (4000, 9000), (16 * FLAT_LIMIT, 16 * FLAT_LIMIT + 400)):
        want = {i + 100 if 5 <= i < 10 else i for i in ref.take(lo, hi)}
        assert tracker.inherit("sbuf", lo, hi) == want
