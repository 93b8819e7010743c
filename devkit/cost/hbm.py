"""The HBM bandwidth cap shared by all DMA engines of a core, as a bucketed ledger of booked time.

Time is cut into buckets of ``bucket_ns``; each bucket can carry ``bucket_ns`` of HBM transfer time
(bytes / per-core HBM bandwidth).  A transfer books its HBM time from the moment its first engine
starts, filling whatever capacity is left in each bucket, so transfers booked out of time order
(the scheduler sees them in program order) still share the bandwidth correctly up to one bucket of
resolution.  Buckets that no future transfer can reach are dropped (:meth:`HbmLedger.prune`), so
memory stays bounded on long traces.

Units: ns.
"""

from __future__ import annotations


class HbmLedger:
    """Booked HBM time per bucket."""

    __slots__ = ("bucket_ns", "used")

    def __init__(self, bucket_ns: float = 1000.0) -> None:
        self.bucket_ns = bucket_ns
        self.used: dict[int, float] = {}

    def book(self, start_ns: float, need_ns: float) -> float:
        """Book ``need_ns`` of HBM time from ``start_ns`` on; return when the last of it is served.

        Within a bucket the already-booked time is taken to sit at the bucket's start.
        """
        width = self.bucket_ns
        used = self.used
        b = int(start_ns // width)
        t = start_ns
        while True:
            lo = b * width
            u = used.get(b, 0.0)
            begin = lo + u if lo + u > t else t
            room = lo + width - begin
            if room >= need_ns:
                used[b] = u + need_ns
                return begin + need_ns
            if room > 0.0:
                used[b] = u + room
                need_ns -= room
            b += 1
            t = b * width

    def prune(self, before_ns: float) -> None:
        """Forget buckets that end before ``before_ns`` (no future booking can start there)."""
        limit = int(before_ns // self.bucket_ns)
        for key in [k for k in self.used if k < limit]:
            del self.used[key]
