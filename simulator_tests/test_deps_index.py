"""The dependency tracker's bucketed record index (devkit.sim.deps._Space) finds exactly the records a
full scan finds, for single-axis and composite indexes (block coordinates plus a coarse column, the index
of tiles with block dimensions), for queries inside one bucket, across a few, and wide ones."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from devkit.sim.deps import _Space, keyspec_for, records_overlapping

SHAPE = (3, 4, 128, 2048)  # (block, block, partition, free): keyspec_for gives a composite index


@st.composite
def boxes(draw):
    out = []
    for n in SHAPE:
        lo = draw(st.integers(0, n - 1))
        width = draw(st.one_of(st.integers(1, 4), st.integers(1, n)))
        out.append((lo, min(n, lo + width)))
    return tuple(out)


def test_keyspec_of_a_tensor_with_block_dims_is_composite():
    spec = keyspec_for(SHAPE, 2)
    assert spec[:2] == ((0, 0), (1, 0))
    assert spec[2][:2] == ((0, 0), (1, 0)) and spec[2][2][0] == 3


@given(st.lists(boxes(), min_size=1, max_size=60), st.lists(boxes(), min_size=1, max_size=20), st.data())
def test_index_finds_what_a_scan_finds(records, queries, data):
    sp = _Space(keyspec_for(SHAPE, 2))
    recs = [[b, i, "vector", False] for i, b in enumerate(records)]
    for r in recs:
        sp.add(r)
    removed = data.draw(st.sets(st.integers(0, len(recs) - 1), max_size=len(recs) // 2))
    for i in removed:
        sp.remove(recs[i])
    live = [r for i, r in enumerate(recs) if i not in removed]
    for q in queries:
        got = sp.overlapping(q)
        want = records_overlapping(live, q)
        assert sorted(r[1] for r in got) == sorted(r[1] for r in want)


def test_keyspec_adds_a_fine_column_index_for_wide_block_tiles():
    spec = keyspec_for(SHAPE, 2)
    coarse, fine = spec[2][2], spec[3][2]
    assert coarse[0] == fine[0] == 3 and fine[1] < coarse[1]


class _Reference:
    """The dependency rules written as a plain scan of every earlier access (no index, no read/write split):
    a read waits for overlapping writes and replaces an earlier read of the same box by the same engine; a
    write waits for every overlapping access except, in a renamable space, those it covers, and removes
    the records it covers."""

    def __init__(self, renamable: bool) -> None:
        self.recs: list[list] = []
        self.renamable = renamable

    def access(self, box, iid, engine, is_write):
        deps = set()
        over = records_overlapping(self.recs, box)
        if is_write:
            for rec in over:
                covered = all(c <= a and b <= d for (a, b), (c, d) in zip(rec[0], box))
                if not (self.renamable and covered):
                    deps.add(rec[1])
                if covered:
                    self.recs.remove(rec)
            self.recs.append([box, iid, engine, True])
        else:
            deps.update(rec[1] for rec in over if rec[3])
            same = [r for r in over if not r[3] and r[2] == engine and r[0] == box]
            if same:
                same[0][1] = iid
            else:
                self.recs.append([box, iid, engine, False])
        return deps


@given(
    st.lists(
        st.tuples(boxes(), st.booleans(), st.sampled_from(["vector", "scalar"])), min_size=1, max_size=80
    ),
    st.booleans(),
)
def test_split_read_write_tracker_gives_the_dependencies_of_a_full_scan(accesses, renamable):
    """Good/bad twin of the fast path: the tracker's space (writes indexed apart from reads, reads replaced
    through an exact lookup, keys memoised per box) yields, access by access, the dependencies of the plain
    scan; a repeated read box (the replacement case) is drawn often because boxes repeat in the list."""
    from devkit.sim.deps import DependencyTracker

    tracker = DependencyTracker()
    sp = tracker.space(1 if renamable else ("hbm", 1), keyspec_for(SHAPE, 2))
    assert sp.reads is not None
    ref = _Reference(renamable)
    for iid, (box, is_write, engine) in enumerate(accesses + accesses[::-1]):
        deps: set[int] = set()
        tracker.access(sp, box, iid, engine, is_write, deps)
        assert deps == ref.access(box, iid, engine, is_write), (iid, box, is_write)
    assert sorted(r[1] for r in sp.records()) == sorted(r[1] for r in ref.recs)


@given(st.lists(boxes(), min_size=1, max_size=60), st.lists(boxes(), min_size=1, max_size=20), st.data())
def test_lazily_indexed_reads_find_what_a_scan_finds(records, queries, data):
    """The read records of a tracker space are appended unindexed and indexed at the next query; a query
    (and a removal, which indexes them first) sees exactly what a scan of the live records sees, whether
    the space is small enough to be scanned or large enough to consult its bucket indexes."""
    from devkit.sim.deps import _Reads

    sp = _Reads(keyspec_for(SHAPE, 2))
    recs = [[b, i, "vector", False] for i, b in enumerate(records)]
    live: list[list] = []
    for r in recs:
        sp.add(r)
        live.append(r)
        if data.draw(st.booleans()):  # a removal between adds: pending records are indexed first
            victim = data.draw(st.sampled_from(live))
            sp.remove(victim)
            live.remove(victim)
            assert not sp.pending
    for q in queries:
        got = sp.overlapping(q)
        assert not sp.pending
        assert sorted(r[1] for r in got) == sorted(r[1] for r in records_overlapping(live, q))


@given(st.integers(1, 300), st.integers(1, 5), st.sampled_from([(0, 4), (100, 101), (0, 2048), (50, 60)]))
def test_sliding_window_reads_then_a_write_match_a_full_scan(n, width, cols):
    """The conv pattern of issue 13: many overlapping window reads of one block row (indexed lazily), then
    one write; the write waits for exactly the reads it overlaps, as in the plain scan, and so do later
    reads and writes."""
    from devkit.sim.deps import DependencyTracker

    tracker = DependencyTracker()
    sp = tracker.space(("hbm", 1), keyspec_for(SHAPE, 2))
    ref = _Reference(False)
    accesses = [(((0, 1), (1, 2), (0, 128), (i, i + width)), False) for i in range(n)]
    accesses += [(((0, 1), (1, 2), (0, 128), cols), True), (((0, 1), (1, 2), (0, 128), (0, 3)), False)]
    accesses += [(((0, 1), (1, 2), (0, 128), (5, 6)), True)]
    for iid, (box, is_write) in enumerate(accesses):
        deps: set[int] = set()
        tracker.access(sp, box, iid, "vector", is_write, deps)
        assert deps == ref.access(box, iid, "vector", is_write), (iid, box, is_write)
    assert sorted(r[1] for r in sp.records()) == sorted(r[1] for r in ref.recs)


@given(st.integers(2, 4).flatmap(lambda n: st.lists(boxes().map(lambda b: b[-n:]), min_size=2, max_size=40)))
def test_unrolled_scans_agree_with_the_generic_scan(bxs):
    """The per-rank scans of a tracker space (last axis first) report exactly what the generic scan
    reports, for boxes of 2, 3 and 4 dimensions."""
    from devkit.sim.deps import _SCANS

    recs = [[b, i, "vector", True] for i, b in enumerate(bxs)]
    for q in bxs:
        got = _SCANS[len(q)](recs, q)
        assert [r[1] for r in got] == [r[1] for r in records_overlapping(recs, q)]
