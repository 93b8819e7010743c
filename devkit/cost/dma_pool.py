"""The pool of DMA engines of one core: when each engine is busy, with back-filling of idle gaps.

A transfer is split into ``n`` packets of ``occ`` ns on ``n`` distinct engines; each packet starts
as early as its engine allows (never before the transfer may start).  Engines are tracked as bit
masks, grouped by state:

* the *tail*: sorted ``(free time, engine mask)`` groups: from that time on the engines are idle
  for good (after a 16-engine transfer all engines form one group: the common case is O(1));
* *holes*: idle gaps ``[start, end)`` left on some engines when a transfer started later than the
  engine was free (it waited for its dependencies).  A transfer that the scheduler sees later in
  program order but that is ready earlier (a load issued after a store that waits for compute)
  fills a hole when it fits, as the hardware's other DMA queues would.  Only the ``max_holes`` most
  recent holes are kept, which bounds memory and time.

Among engines that can start a packet equally early, the one idle the shortest before it goes
first, then the one whose gap closes first (best fit).

Units: ns.
"""

from __future__ import annotations

from bisect import bisect_left
from operator import itemgetter, sub

_INF = float("inf")
_start_of = itemgetter(0)  # of a hole: (start, engine mask)


def _lowest_bits(mask: int, k: int) -> int:
    """The ``k`` lowest set bits of ``mask``."""
    out = 0
    for _ in range(k):
        bit = mask & -mask
        out |= bit
        mask ^= bit
    return out


class DmaPool:
    """Busy/idle state of ``engines`` identical DMA engines."""

    __slots__ = (
        "_longest",
        "_n_longest",
        "_stale",
        "engines",
        "hole_ends",
        "holes",
        "masks",
        "max_holes",
        "times",
    )

    def __init__(self, engines: int, max_holes: int = 64) -> None:
        self.engines = engines
        self.max_holes = max_holes
        self.times: list[float] = [0.0]
        self.masks: list[int] = [(1 << engines) - 1]
        self.hole_ends: list[float] = []
        self.holes: list[tuple[float, int]] = []  # (start, engine mask), parallel to hole_ends
        # the length of the longest kept hole and how many holes have it, unless ``_stale`` (the last of
        # them went away: recomputed on demand, see :attr:`longest_hole`)
        self._longest = 0.0
        self._n_longest = 0
        self._stale = False

    @property
    def longest_hole(self) -> float:
        """The length of the longest kept hole (0.0 without one), in ns."""
        if self._stale:
            lengths = list(map(sub, self.hole_ends, map(_start_of, self.holes)))
            self._longest = max(lengths) if lengths else 0.0
            self._n_longest = lengths.count(self._longest)
            self._stale = False
        return self._longest

    def _forget(self, length: float) -> None:
        """A hole of ``length`` ns is no longer kept."""
        if not self._stale and length >= self._longest:
            self._n_longest -= 1
            if self._n_longest <= 0:
                self._stale = True

    def take(self, n: int, ready: float, occ: float, not_before: float = 0.0) -> tuple[float, float]:
        """Occupy ``n`` engines for ``occ`` ns each, none starting before ``ready``.

        No engine is released before ``not_before`` (a transfer held back by the HBM cap keeps its
        engines).  Returns ``(first start, last end)`` of the transfer.
        """
        times = self.times
        if len(times) != 1 or (
            bisect_left(self.hole_ends, ready + occ if ready + occ > not_before else not_before)
            < len(self.hole_ends)
            and occ <= self.longest_hole
        ):
            return self._take_general(n, ready, occ, not_before)
        # one group of engines, no idle gap to fill: the common case
        f, mask = times[0], self.masks[0]
        first = f if f > ready else ready
        end = first + occ if first + occ > not_before else not_before
        if n >= mask.bit_count():
            picked, rest = mask, 0
        else:
            picked = _lowest_bits(mask, n)
            rest = mask ^ picked
        if ready > f:
            self.add_hole(f, ready, picked)
        if rest:
            self.masks[0] = rest
            self._insert(end, picked)
        else:
            times[0] = end
        return first, end

    def _take_general(self, n: int, ready: float, occ: float, not_before: float) -> tuple[float, float]:
        ends, holes = self.hole_ends, self.holes
        times, masks = self.times, self.masks
        need_end = ready + occ if ready + occ > not_before else not_before
        # (start, idle time before it, end of the gap, engines, hole index or -1 - tail index)
        slots: list[tuple[float, float, float, int, int]] = []
        first_hole = bisect_left(ends, need_end) if occ <= self.longest_hole else len(ends)
        for j in range(first_hole, len(ends)):
            start, mask = holes[j]
            s = start if start > ready else ready
            e = s + occ if s + occ > not_before else not_before
            if e <= ends[j]:
                slots.append((s, s - start, ends[j], mask, j))
        for i, f in enumerate(times):
            s = f if f > ready else ready
            slots.append((s, s - f, _INF, masks[i], -1 - i))
        slots.sort()
        chosen = 0
        remaining = n
        used: list[tuple[int, int, float]] = []  # (where, picked mask, start)
        for s, _, _, mask, where in slots:
            free = mask & ~chosen
            if not free:
                continue
            count = free.bit_count()
            picked = free if count <= remaining else _lowest_bits(free, remaining)
            chosen |= picked
            used.append((where, picked, s))
            remaining -= count if count <= remaining else remaining
            if not remaining:
                break
        first = used[0][2]
        last = 0.0
        new_holes: list[tuple[float, float, int]] = []
        new_tail: list[tuple[float, int]] = []
        hole_updates: dict[int, int] = {}
        tail_updates: dict[int, int] = {}
        for where, picked, s in used:
            e = s + occ if s + occ > not_before else not_before
            if e > last:
                last = e
            if where >= 0:
                start = holes[where][0]
                hole_updates[where] = hole_updates.get(where, holes[where][1]) & ~picked
                new_holes.append((start, s, picked))
                new_holes.append((e, ends[where], picked))
            else:
                i = -1 - where
                tail_updates[i] = tail_updates.get(i, masks[i]) & ~picked
                new_holes.append((times[i], s, picked))
                new_tail.append((e, picked))
        for j in sorted(hole_updates, reverse=True):
            if hole_updates[j]:
                holes[j] = (holes[j][0], hole_updates[j])
            else:
                self._forget(ends[j] - holes[j][0])
                del holes[j]
                del ends[j]
        for i in sorted(tail_updates, reverse=True):
            if tail_updates[i]:
                masks[i] = tail_updates[i]
            else:
                del times[i]
                del masks[i]
        for t, m in new_tail:
            self._insert(t, m)
        for start, end, m in new_holes:
            self.add_hole(start, end, m)
        return first, last

    def _insert(self, t: float, mask: int) -> None:
        times = self.times
        i = bisect_left(times, t)
        if i < len(times) and times[i] == t:
            self.masks[i] |= mask
        else:
            times.insert(i, t)
            self.masks.insert(i, mask)

    def add_hole(self, start: float, end: float, mask: int) -> None:
        """Record that the engines of ``mask`` are idle in ``[start, end)``."""
        if end <= start:
            return
        ends = self.hole_ends
        i = bisect_left(ends, end)
        ends.insert(i, end)
        self.holes.insert(i, (start, mask))
        if not self._stale:
            length = end - start
            if length > self._longest:
                self._longest = length
                self._n_longest = 1
            elif length == self._longest:
                self._n_longest += 1
        if len(ends) > self.max_holes:
            self._forget(ends[0] - self.holes[0][0])
            del ends[0]
            del self.holes[0]
