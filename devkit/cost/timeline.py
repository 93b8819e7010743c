"""A bounded sample of engine activity for plotting.

Two views, both bounded in memory whatever the trace length:

* ``events``: the first ``limit`` intervals verbatim, as ``(engine, start_ns, end_ns)`` with the
  engine index of :data:`ENGINE_ORDER` (enough to draw a Gantt chart of a kernel's start);
* ``histogram``: per engine, busy ns summed into ``bins`` equal time bins that cover the whole run.
  The bin width starts at ``bin_ns`` and doubles (merging neighbouring bins) whenever an interval
  lands beyond the last bin, so a 50 ms kernel ends with ~100 us bins.  An interval's busy time is
  spread over the bins it overlaps.  For DMA the busy time is engine-ns summed over the engines a
  transfer used (divide by the engine count for a 0..1 utilisation).

For speed each engine keeps an open bin (``lo``/``hi``/``acc``): the scheduler adds intervals that
fall inside it with one addition and calls :meth:`Timeline.add` otherwise.
"""

from __future__ import annotations

from devkit.trace import ENGINES

#: Engine order of the indices used in ``events`` and ``histogram``.
ENGINE_ORDER = ENGINES


class Timeline:
    """Bounded engine-activity sample (see module docstring)."""

    __slots__ = ("_rows", "acc", "bins", "events", "hi", "limit", "lo", "scale")

    def __init__(self, limit: int = 20_000, bins: int = 512, bin_ns: float = 1000.0) -> None:
        self.limit = limit
        self.bins = bins
        #: ``[1 / bin width in ns]``, a list so that holders of it see coarsening.
        self.scale = [1.0 / bin_ns]
        self.events: list[tuple[int, float, float]] = []
        self._rows: list[list[float]] = [[0.0] * bins for _ in ENGINE_ORDER]
        # open bin per engine: [lo, hi) and the busy ns added to it but not yet to the rows
        self.lo = [0.0] * len(ENGINE_ORDER)
        self.hi = [0.0] * len(ENGINE_ORDER)
        self.acc = [0.0] * len(ENGINE_ORDER)

    @property
    def bin_ns(self) -> float:
        """Current width of a histogram bin, in ns."""
        return 1.0 / self.scale[0]

    @property
    def histogram(self) -> list[list[float]]:
        """Busy ns per engine (rows in :data:`ENGINE_ORDER`) per bin of :attr:`bin_ns`."""
        self._flush_all()
        return self._rows

    def add(self, engine: int, start_ns: float, end_ns: float, busy_ns: float) -> None:
        """Add ``busy_ns`` of work by ``engine`` between ``start_ns`` and ``end_ns``."""
        acc = self.acc
        if acc[engine]:  # (_flush, inlined: the scheduler calls this often)
            self._rows[engine][int(self.lo[engine] * self.scale[0])] += acc[engine]
            acc[engine] = 0.0
        width = 1.0 / self.scale[0]  # (bin_ns)
        last = int(end_ns // width)
        if last >= self.bins:
            self._flush_all()
            while last >= self.bins:
                self._coarsen()
                width = self.bin_ns
                last = int(end_ns // width)
        first = int(start_ns // width)
        row = self._rows[engine]
        if first == last or end_ns <= start_ns:
            row[first] += busy_ns
        else:
            rate = busy_ns / (end_ns - start_ns)
            row[first] += ((first + 1) * width - start_ns) * rate
            for b in range(first + 1, last):
                row[b] += width * rate
            row[last] += (end_ns - last * width) * rate
        self.lo[engine] = last * width
        self.hi[engine] = (last + 1) * width

    def _flush(self, engine: int) -> None:
        if self.acc[engine]:
            self._rows[engine][int(self.lo[engine] * self.scale[0])] += self.acc[engine]
            self.acc[engine] = 0.0

    def _flush_all(self) -> None:
        for e in range(len(ENGINE_ORDER)):
            self._flush(e)

    def _coarsen(self) -> None:
        half = self.bins // 2
        for row in self._rows:
            row[:] = [row[2 * i] + row[2 * i + 1] for i in range(half)] + [0.0] * (self.bins - half)
        self.scale[0] *= 0.5
        for e in range(len(ENGINE_ORDER)):  # open bins must be re-opened at the new width
            self.lo[e] = self.hi[e] = 0.0

    def to_dict(self) -> dict:
        """JSON-serialisable form."""
        rows = self.histogram
        return {
            "engines": list(ENGINE_ORDER),
            "events": [list(ev) for ev in self.events],
            "bin_ns": self.bin_ns,
            "histogram": {name: list(rows[i]) for i, name in enumerate(ENGINE_ORDER)},
        }
