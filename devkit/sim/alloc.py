"""On-chip memory allocation: where each SBUF/PSUM tile lives, and whether it fits.

Addresses are byte offsets inside one partition (every tile occupies the same offset range in each
partition it spans, NKI's SBUF layout).  Compiler-managed tiles are placed *next-fit* around a ring:
a freed range is reused as late as possible, which approximates the compiler rotating several
buffers of a loop-local tile (multi-buffering) as far as capacity allows.  Because the dependency
tracker works on physical addresses, reusing an address creates the write-after-read hazards that
limit how far loads can run ahead of compute, so pipelining depth emerges from capacity.

PSUM is 8 banks of 2 KiB per partition, and a compiler-managed PSUM tile occupies whole banks (an
accumulation group owns its bank: two groups interleaved in one bank are illegal on hardware), so at
most 8 PSUM tiles of up to 2 KiB are live at once; a block tile of several banks starts on a bank
boundary.

Each allocation may name its site (``(filename, lineno)`` of the ``nl.ndarray``/``nl.zeros``); the
allocator then records how many distinct physical buffers that site rotated over
(:attr:`RingAllocator.rotation`, capped at :data:`ROTATION_CAP`): 2 or more means the site's tile was
multi-buffered, so iteration ``i + 1`` wrote a different buffer than iteration ``i`` still being
read.
"""

from __future__ import annotations

import bisect
from bisect import bisect_left, bisect_right
from dataclasses import dataclass

#: Distinct buffers recorded per allocation site (beyond this, the depth is reported as the cap).
ROTATION_CAP = 64


@dataclass(slots=True)
class Placement:
    """Where a tile was placed: ``addr`` in bytes per partition; ``virtual`` when it did not fit."""

    addr: int
    nbytes: int
    virtual: bool = False


class RingAllocator:
    """Next-fit allocator over ``[0, capacity)`` bytes per partition, with optional bank rules."""

    def __init__(self, capacity: int, *, bank_bytes: int | None = None, align: int = 4) -> None:
        self.capacity = capacity
        self.bank_bytes = bank_bytes
        self.align = align
        self._starts: list[int] = []  # sorted starts of live ranges
        self._ends: dict[int, int] = {}
        self._cursor = 0
        self._virtual_cursor = capacity
        self.live_bytes = 0
        self.peak_bytes = 0
        #: allocation site -> distinct addresses its tiles were placed at (at most ROTATION_CAP)
        self.rotation: dict[tuple[str, int], set[int]] = {}

    def _fits(self, start: int, nbytes: int) -> int | None:
        """First legal start >= ``start`` for ``nbytes`` under bank rules (ignores live ranges)."""
        a = self.align
        start = -(-start // a) * a
        bank = self.bank_bytes
        if bank:
            if nbytes <= bank:
                if start // bank != (start + nbytes - 1) // bank:
                    start = (start // bank + 1) * bank
            else:
                start = -(-start // bank) * bank
        return start

    def _gap_search(self, lo: int, hi: int, nbytes: int) -> int | None:
        """A start in ``[lo, hi)`` where ``nbytes`` fit between live ranges, or None."""
        starts, ends = self._starts, self._ends
        # without bank rules a legal start is the next aligned one (_fits, inlined: hot path)
        a = None if self.bank_bytes else self.align
        fits = self._fits
        pos = -(-lo // a) * a if a else fits(lo, nbytes)
        i = bisect.bisect_right(starts, pos) - 1
        if i < 0:
            i = 0
        n = len(starts)
        while pos + nbytes <= hi:
            while i < n and ends[starts[i]] <= pos:
                i += 1
            if i < n and starts[i] < pos + nbytes:
                end = ends[starts[i]]
                pos = -(-end // a) * a if a else fits(end, nbytes)
                i += 1
                continue
            return pos
        return None

    def allocate(self, nbytes: int, site: tuple[str, int] | None = None) -> Placement:
        """Place ``nbytes`` per partition; a :class:`Placement` with ``virtual=True`` if no room.

        With banks, the size is rounded up to whole banks (``Placement.nbytes`` is the rounded size).
        ``site`` (the allocating source line) records buffer rotation.
        """
        if not self.bank_bytes and nbytes >= 1:
            # the common case, inlined (hot in loop replay): no bank rules, the aligned cursor is free
            a = self.align
            pos = -(-self._cursor // a) * a
            end = pos + nbytes
            starts = self._starts
            i = bisect_right(starts, pos)
            ends = self._ends
            if (
                end <= self.capacity
                and (i == 0 or ends[starts[i - 1]] <= pos)
                and (i == len(starts) or starts[i] >= end)
            ):
                starts.insert(i, pos)
                ends[pos] = end
                self._cursor = end if end < self.capacity else 0
                live = self.live_bytes = self.live_bytes + nbytes
                if live > self.peak_bytes:
                    self.peak_bytes = live
                p = Placement(pos, nbytes)
                if site is not None:
                    seen = self.rotation.get(site)
                    if seen is None:
                        self.rotation[site] = {pos}
                    elif len(seen) < ROTATION_CAP:
                        seen.add(pos)
                return p
        p = self._allocate(nbytes)
        if site is not None and not p.virtual:
            seen = self.rotation.get(site)
            if seen is None:
                self.rotation[site] = {p.addr}
            elif len(seen) < ROTATION_CAP:
                seen.add(p.addr)
        return p

    def buffers_by_site(self) -> dict[tuple[str, int], int]:
        """Allocation site -> number of distinct physical buffers its tiles rotated over."""
        return {site: len(addrs) for site, addrs in self.rotation.items()}

    def _allocate(self, nbytes: int) -> Placement:
        if nbytes < 1:
            nbytes = 1
        if self.bank_bytes:
            nbytes = -(-nbytes // self.bank_bytes) * self.bank_bytes
        pos = self._gap_search(self._cursor, self.capacity, nbytes)
        if pos is None:
            pos = self._gap_search(0, self.capacity, nbytes)
        if pos is None:
            # No contiguous gap.  If the live set itself fits, only fragmentation is in the way, which the
            # real compiler's allocator (planning the whole kernel) avoids: place the tile out of the way
            # without calling it a spill.  Otherwise it is virtual: it does not fit.
            pos = self._virtual_cursor
            self._virtual_cursor += -(-nbytes // self.align) * self.align
            self.live_bytes += nbytes
            if self.live_bytes > self.peak_bytes:
                self.peak_bytes = self.live_bytes
            return Placement(pos, nbytes, virtual=self.live_bytes > self.capacity)
        bisect.insort(self._starts, pos)
        self._ends[pos] = pos + nbytes
        self._cursor = pos + nbytes
        if self._cursor >= self.capacity:
            self._cursor = 0
        self.live_bytes += nbytes
        if self.live_bytes > self.peak_bytes:
            self.peak_bytes = self.live_bytes
        return Placement(pos, nbytes)

    def free(self, p: Placement) -> None:
        self.live_bytes -= p.nbytes
        if p.virtual:
            return
        starts = self._starts
        addr = p.addr
        i = bisect_left(starts, addr)
        if i < len(starts) and starts[i] == addr:
            del starts[i]
            del self._ends[addr]

    def reserve(self, addr: int, nbytes: int) -> None:
        """Mark a directly allocated range as used (for accounting; overlap checks are the caller's)."""
        self.live_bytes += nbytes
        if self.live_bytes > self.peak_bytes:
            self.peak_bytes = self.live_bytes

    def unreserve(self, nbytes: int) -> None:
        self.live_bytes -= nbytes
