"""RingAllocator.allocate's inlined common case (no bank rules, the aligned cursor free) places every
tile exactly where the general next-fit search does."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from devkit.sim.alloc import RingAllocator

ops = st.lists(
    st.tuples(st.booleans(), st.sampled_from([0, 1, 3, 100, 256, 1000, 1024, 3000]), st.integers(0, 50)),
    min_size=1,
    max_size=60,
)


@settings(max_examples=200, deadline=None)
@given(ops, st.sampled_from([1, 4, 64]), st.sampled_from([1000, 4096]))
def test_fast_path_places_as_the_general_search(program: list, align: int, capacity: int) -> None:
    fast, ref = RingAllocator(capacity, align=align), RingAllocator(capacity, align=align)
    live: list[tuple] = []
    for free_one, nbytes, k in program:
        if free_one and live:
            pf, pr = live.pop(k % len(live))
            fast.free(pf)
            ref.free(pr)
            continue
        pf = fast.allocate(nbytes)
        pr = ref._allocate(nbytes)  # the general search, without the inlined first probe
        assert (pf.addr, pf.nbytes, pf.virtual) == (pr.addr, pr.nbytes, pr.virtual)
        live.append((pf, pr))
        assert fast._starts == ref._starts and fast._cursor == ref._cursor
        assert fast.live_bytes == ref.live_bytes and fast.peak_bytes == ref.peak_bytes
