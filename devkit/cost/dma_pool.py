"""The pool of DMA engines of one core, as groups of engines that become free at the same time.

A transfer takes the ``n`` engines that free up first; each starts when it is free (but not before
the transfer's data may start) and works ``occ`` ns.  Engines are identical, so the pool only keeps
sorted ``(free time, engine count)`` groups: after a 16-engine transfer all engines form one group,
which makes the common cases O(1).

Units: ns.
"""

from __future__ import annotations

from bisect import bisect_left


class DmaPool:
    """Free times of ``engines`` identical DMA engines."""

    __slots__ = ("counts", "engines", "times")

    def __init__(self, engines: int) -> None:
        self.engines = engines
        self.times: list[float] = [0.0]
        self.counts: list[int] = [engines]

    def earliest(self) -> float:
        """When the first engine is free."""
        return self.times[0]

    def take(self, n: int, ready: float, occ: float, not_before: float = 0.0) -> tuple[float, float]:
        """Occupy the ``n`` first-free engines for ``occ`` ns each, none starting before ``ready``.

        No engine is released before ``not_before`` (a transfer held back by the HBM cap keeps its
        engines).  Returns ``(first start, last end)`` of the transfer.
        """
        times, counts = self.times, self.counts
        f0 = times[0]
        first = f0 if f0 > ready else ready
        c0 = counts[0]
        if c0 >= n:
            end = first + occ
            if end < not_before:
                end = not_before
            if c0 > n:
                counts[0] = c0 - n
            elif len(times) == 1:
                times[0] = end
                return first, end
            else:
                del times[0]
                del counts[0]
            self._insert(end, n)
            return first, end
        new_t: list[float] = []
        new_c: list[int] = []
        need = n
        i = 0
        while need:
            c = counts[i]
            f = times[i]
            take = c if c <= need else need
            end = (f if f > ready else ready) + occ
            if end < not_before:
                end = not_before
            if new_t and new_t[-1] == end:
                new_c[-1] += take
            else:
                new_t.append(end)
                new_c.append(take)
            need -= take
            if take == c:
                i += 1
            else:
                counts[i] = c - take
        del times[:i]
        del counts[:i]
        for t, c in zip(new_t, new_c):
            self._insert(t, c)
        return first, new_t[-1]

    def _insert(self, t: float, c: int) -> None:
        times = self.times
        i = bisect_left(times, t)
        if i < len(times) and times[i] == t:
            self.counts[i] += c
        else:
            times.insert(i, t)
            self.counts.insert(i, c)
