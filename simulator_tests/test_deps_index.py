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
