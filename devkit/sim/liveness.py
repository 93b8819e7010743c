"""True liveness of on-chip tiles, and the capacity verdicts that follow from it.

The compiler allocates SBUF and PSUM by the lifetime of each tile -- from the instruction that first
touches it to the one that last does -- and block dimensions are a list of independent logical tiles,
each with a lifetime of its own.  The simulator cannot know a tile's last use while the kernel runs,
so it records every logical tile's interval ``[first, last]`` (instruction ids) as it goes and judges
capacity when the kernel ends:

- SBUF: the peak of the bytes per partition live at once.  Above the usable size the compiler spills
  to HBM: a :class:`~devkit.errors.SpillWarning` naming the allocation that went over (an error with
  ``strict_capacity``); the spill traffic is estimated as the excess stored once and loaded once.
- PSUM: every tile occupies whole 2 KiB banks.  More *accumulation tiles* (tiles that receive
  ``+=`` of matmul results) live at once than there are banks is an error -- matmul accumulation happens
  in PSUM, it cannot be spilled.  Other PSUM tiles (plain results such as ``t[...] = nc_matmul(...)``)
  beyond the banks are spilled to SBUF by the compiler: a warning.
- What "live at once" means for accumulation tiles depends on the generation (:meth:`Liveness.verdict`):
  Beta 1 counts an accumulation tile for its whole lifetime; NKI 0.x (Beta 2) counts it only while its
  accumulation group is *open* -- from its first touch to its last accumulating matmul write.  After that
  it holds a finished result like any other PSUM tile, which the compiler may move to SBUF (nki-library's
  ``moe_cte/bwmm_shard_on_I.py`` accumulates twelve [128, 512] fp32 tiles one after another and reads
  them all afterwards, on LNC 2 with 8 banks per core; see docs/errors.md, ``psum-capacity``).

Units: bytes are bytes per partition; times are instruction ids.
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass

import numpy as np

from devkit.sim.options import Geometry
from devkit.sim.storage import describe_storage


@dataclass
class Verdict:
    """Outcome of the capacity analysis of one kernel run."""

    sbuf_peak_bytes: int
    psum_peak_bytes: int
    spill_bytes: int  # estimated spill traffic (bytes, all partitions)
    sbuf_over: tuple[int, tuple[str, int], str] | None  # (peak, allocation site, description)
    psum_over: tuple[int, tuple[str, int], str] | None  # (peak banks, site, description), spill only
    psum_acc_over: tuple[int, tuple[str, int], str] | None  # (pinned banks, site, description): an error


class _Intervals:
    """Closed intervals with a weight, stored compactly."""

    __slots__ = ("first", "last", "site", "weight")

    def __init__(self) -> None:
        self.first = array("q")
        self.last = array("q")
        self.weight = array("q")
        self.site = array("q")

    def add(self, first: int, last: int, weight: int, site: int) -> None:
        self.first.append(first)
        self.last.append(last)
        self.weight.append(weight)
        self.site.append(site)

    def extend(self, firsts: range, lasts: range, weight: int, site: int) -> None:
        """Add one interval per pair of ``firsts``/``lasts``, all of the same weight and site."""
        self.first.extend(firsts)
        self.last.extend(lasts)
        n = len(firsts)
        self.weight.extend(array("q", [weight]) * n)
        self.site.extend(array("q", [site]) * n)

    def peak(self, cap: int) -> tuple[int, int]:
        """(peak weight, interval whose start first took the level above ``cap``, or -1)."""
        n = len(self.first)
        if n == 0:
            return 0, -1
        first = np.frombuffer(self.first, dtype=np.int64)
        last = np.frombuffer(self.last, dtype=np.int64)
        w = np.frombuffer(self.weight, dtype=np.int64)
        times = np.concatenate([first, last + 1])
        deltas = np.concatenate([w, -w])
        idx = np.concatenate([np.arange(n), np.arange(n)])
        order = np.lexsort((deltas, times))  # at equal times, ends (negative) before starts
        level = np.cumsum(deltas[order])
        peak = int(level.max())
        over = np.nonzero(level > cap)[0]
        culprit = int(idx[order][over[0]]) if over.size else -1
        return peak, culprit

    def steps(self, max_points: int) -> list[tuple[int, int]]:
        """Live weight over instruction ids as ``(id, level)`` steps, at most ``max_points`` of them:
        past that, each window of ids keeps its peak (occupancy is never under-drawn)."""
        n = len(self.first)
        if n == 0:
            return [(0, 0)]
        first = np.frombuffer(self.first, dtype=np.int64)
        last = np.frombuffer(self.last, dtype=np.int64)
        w = np.frombuffer(self.weight, dtype=np.int64)
        times = np.concatenate([first, last + 1])
        deltas = np.concatenate([w, -w])
        order = np.argsort(times, kind="stable")
        times, level = times[order], np.cumsum(deltas[order])
        # one level per distinct id: the level after all changes at that id
        keep = np.append(times[1:] != times[:-1], True)
        times, level = times[keep], level[keep]
        if times.size > max_points:
            width = -(-int(times[-1] + 1) // max_points)
            window = times // width
            starts = np.flatnonzero(np.append(True, window[1:] != window[:-1]))
            level = np.maximum.reduceat(level, starts)
            times = window[starts] * width
        steps = [(int(t), int(v)) for t, v in zip(times, level)]
        return steps if steps[0][0] == 0 else [(0, 0), *steps]


class Liveness:
    """Records logical tiles' lifetimes during a run and judges capacity at the end."""

    def __init__(self, geometry: Geometry) -> None:
        self.geometry = geometry
        # sid -> {block index -> [first, last, bytes, buffer, site, last accumulating write or -1, unused]}
        self._open: dict[int, dict[tuple[int, ...], list]] = {}
        self._sites: list[tuple[tuple[str, int], tuple]] = []  # (origin, describe_storage fields)
        self._site_of: dict[int, int] = {}
        self.sbuf = _Intervals()
        self.psum = _Intervals()
        self.psum_acc = _Intervals()  # accumulation tiles, whole lifetime (Beta 1)
        self.psum_open = _Intervals()  # accumulation tiles while their group is open (NKI 0.x)

    def touch(
        self, st: object, blocks: list[tuple[int, ...]], tile_bytes: int, iid: int, accumulate: bool
    ) -> None:
        """Instruction ``iid`` accesses the logical tiles ``blocks`` of on-chip tensor ``st``."""
        sid = st.id  # type: ignore[attr-defined]
        tiles = self._open.get(sid)
        if tiles is None:
            tiles = self._open[sid] = {}
            if sid not in self._site_of:
                self._site_of[sid] = len(self._sites)
                self._sites.append((st.origin, (st.buffer, st.name, st.shape, st.dtype)))  # type: ignore[attr-defined]
        site = self._site_of[sid]
        for b in blocks:
            rec = tiles.get(b)
            if rec is None:
                rec = tiles[b] = [iid, iid, tile_bytes, st.buffer, site, -1, -1]  # type: ignore[attr-defined]
            else:
                rec[1] = iid
            if accumulate:
                rec[5] = iid

    def intervals(self, st: object, first: int, last: int, acc_last: int, count: int, period: int) -> None:
        """Complete lifetimes of one logical tile of ``st``: ``[first, last]`` and its ``count - 1`` repeats
        every ``period`` instructions (the iterations synthesised by loop replay).  ``acc_last``: the
        instruction of the first repeat's last accumulating matmul write into the tile, or -1 if none."""
        sid = st.id  # type: ignore[attr-defined]
        if sid not in self._site_of:
            self._site_of[sid] = len(self._sites)
            self._sites.append((st.origin, (st.buffer, st.name, st.shape, st.dtype)))  # type: ignore[attr-defined]
        nbytes = st.tile_bytes  # type: ignore[attr-defined]
        site = self._site_of[sid]
        starts = range(first, first + count * period, period)
        ends = range(last, last + count * period, period)
        if st.buffer == "sbuf":  # type: ignore[attr-defined]
            self.sbuf.extend(starts, ends, nbytes, site)
            return
        banks = -(-max(nbytes, 1) // self.geometry.psum_bank_bytes)
        self.psum.extend(starts, ends, banks, site)
        if acc_last >= 0:
            self.psum_acc.extend(starts, ends, banks, site)
            self.psum_open.extend(starts, range(acc_last, acc_last + count * period, period), banks, site)

    def take_open(self, sid: int) -> dict | None:
        """Remove and return the open lifetimes of tensor ``sid`` (loop replay moves them to another id)."""
        return self._open.pop(sid, None)

    def put_open(self, sid: int, tiles: dict) -> None:
        self._open[sid] = tiles

    def close(self, sid: int) -> None:
        """Tensor ``sid`` died: its tiles' intervals are final."""
        tiles = self._open.pop(sid, None)
        if tiles:
            for rec in tiles.values():
                self._retire(rec)

    def _retire(self, rec: list) -> None:
        first, last, nbytes, buf, site, acc_last, _ = rec
        if buf == "sbuf":
            self.sbuf.add(first, last, nbytes, site)
            return
        banks = -(-max(nbytes, 1) // self.geometry.psum_bank_bytes)
        self.psum.add(first, last, banks, site)
        if acc_last >= 0:
            self.psum_acc.add(first, last, banks, site)
            self.psum_open.add(first, acc_last, banks, site)

    def _site(self, k: int) -> tuple[tuple[str, int], str]:
        """(allocation site, description) of the tensor behind site index ``k``."""
        origin, fields = self._sites[k]
        return origin, describe_storage(*fields)

    def occupancy(self, max_points: int = 4000) -> dict[str, list[tuple[int, int]]]:
        """Bytes per partition live over instruction ids (see :attr:`devkit.trace.MemoryStats.occupancy`);
        call after :meth:`verdict` (which closes the open tiles)."""
        bank = self.geometry.psum_bank_bytes
        return {
            "sbuf": self.sbuf.steps(max_points),
            "psum": [(i, banks * bank) for i, banks in self.psum.steps(max_points)],
        }

    def verdict(self, open_groups: bool = False) -> Verdict:
        """Capacity verdict of the run.  ``open_groups`` (NKI 0.x): an accumulation tile is pinned to PSUM
        only while its group is open (first touch to last accumulating write), not for its whole life."""
        for sid in list(self._open):
            self.close(sid)
        g = self.geometry
        sbuf_peak, s_k = self.sbuf.peak(g.sbuf_usable_bytes_per_partition)
        psum_banks, p_k = self.psum.peak(g.psum_banks)
        pinned = self.psum_open if open_groups else self.psum_acc
        acc_banks, a_k = pinned.peak(g.psum_banks)
        sbuf_over = psum_over = acc_over = None
        spill = 0
        if sbuf_peak > g.sbuf_usable_bytes_per_partition:
            site, desc = self._site(self.sbuf.site[s_k])
            sbuf_over = (sbuf_peak, site, desc)
            spill += 2 * (sbuf_peak - g.sbuf_usable_bytes_per_partition) * g.partitions
        if psum_banks > g.psum_banks:
            site, desc = self._site(self.psum.site[p_k])
            psum_over = (psum_banks, site, desc)
            spill += 2 * (psum_banks - g.psum_banks) * g.psum_bank_bytes * g.partitions
        if acc_banks > g.psum_banks:
            site, desc = self._site(pinned.site[a_k])
            acc_over = (acc_banks, site, desc)
        return Verdict(sbuf_peak, psum_banks * g.psum_bank_bytes, spill, sbuf_over, psum_over, acc_over)
