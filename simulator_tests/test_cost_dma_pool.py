"""The DMA engine pool against a brute-force per-engine interval reference."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from devkit.cost.dma_pool import DmaPool


class ReferencePool:
    """Each engine keeps its busy intervals; a packet goes to the earliest gap that fits; among
    engines that can start equally early, to the one idle the shortest before it, then the one whose
    gap closes first (best fit)."""

    def __init__(self, engines: int) -> None:
        self.busy: list[list[tuple[float, float]]] = [[] for _ in range(engines)]

    def _earliest(
        self, intervals: list[tuple[float, float]], ready: float, occ: float
    ) -> tuple[float, float, float]:
        s, idle_since, gap_end = ready, 0.0, float("inf")
        for a, b in sorted(intervals):
            if s + occ <= a:
                gap_end = a
                break
            s, idle_since = max(s, b), b
        idle_since = max((b for _, b in intervals if b <= s), default=0.0)
        return s, s - idle_since, gap_end

    def take(self, n: int, ready: float, occ: float) -> tuple[float, float]:
        starts = sorted((*self._earliest(iv, ready, occ), j) for j, iv in enumerate(self.busy))[:n]
        for s, _, _, j in starts:
            self.busy[j].append((s, s + occ))
        return starts[0][0], max(s for s, _, _, _ in starts) + occ


def test_single_group_fast_path() -> None:
    pool = DmaPool(16)
    assert pool.take(16, 0.0, 100.0) == (0.0, 100.0)
    assert pool.take(16, 0.0, 100.0) == (100.0, 200.0)
    assert (pool.times, pool.masks) == ([200.0], [0xFFFF])


def test_waiting_transfer_leaves_a_hole_that_a_later_one_fills() -> None:
    pool = DmaPool(16)
    assert pool.take(16, 1000.0, 100.0) == (1000.0, 1100.0)  # waits for its dependencies
    assert pool.take(16, 0.0, 100.0) == (0.0, 100.0)  # fits in the idle gap before it
    assert pool.take(16, 0.0, 2000.0) == (1100.0, 3100.0)  # does not fit: goes to the tail


def test_hbm_stall_keeps_engines() -> None:
    pool = DmaPool(16)
    assert pool.take(16, 0.0, 100.0, not_before=400.0) == (0.0, 400.0)
    assert pool.take(1, 0.0, 10.0) == (400.0, 410.0)


transfers = st.lists(
    st.tuples(st.sampled_from([1, 2, 3, 8, 16]), st.integers(0, 40), st.integers(1, 12)),
    min_size=1,
    max_size=25,
)


@settings(max_examples=200, deadline=None)
@given(transfers)
def test_matches_reference(program: list[tuple[int, int, int]]) -> None:
    pool, ref = DmaPool(16, max_holes=10_000), ReferencePool(16)
    for n, ready, occ in program:
        assert pool.take(n, ready * 10.0, occ * 10.0) == ref.take(n, ready * 10.0, occ * 10.0)


@settings(max_examples=200, deadline=None)
@given(transfers, st.sampled_from([2, 4, 64]))
def test_longest_hole_is_the_longest_kept_hole(program: list[tuple[int, int, int]], max_holes: int) -> None:
    # kept incrementally (with a count of holes of that length) and recomputed only when the last of
    # them is dropped: always the exact maximum, which decides whether a transfer searches the holes
    pool = DmaPool(16, max_holes=max_holes)
    for n, ready, occ in program:
        pool.take(n, ready * 10.0, occ * 10.0)
        lengths = [end - start for end, (start, _) in zip(pool.hole_ends, pool.holes)]
        assert pool.longest_hole == max(lengths, default=0.0)
