"""Garbage-collector settings for the length of a simulation.

A simulation allocates many small, long-lived bookkeeping objects (trace instructions, dependency
records, lifetime records) and little cyclic garbage.  With CPython's default thresholds (700, 10, 10)
every 70,000 allocations start a young collection of generation 1, and the heap growing by a quarter
starts a full one: a cost-only run of 130k instructions spent about a fifth of its CPU time in the
collector (``benchmarks/bench_contributed.py`` conv, measured with ``gc.disable()`` for comparison).

During a run the older generations are collected ten times less often (generation 0 keeps its
threshold: short-lived cycles are still collected as they arise); the previous thresholds come back
when the run ends, nested runs included.  :func:`paused` stops cyclic collection for a block.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

#: multiplier on the generation-1 and generation-2 thresholds during a simulation
OLDER_GENERATIONS_FACTOR = 10


@contextlib.contextmanager
def during_simulation() -> Iterator[None]:
    """Collect generations 1 and 2 less often while the block runs (see the module docstring)."""
    old = gc.get_threshold()
    t0, t1, t2 = old
    gc.set_threshold(t0, t1 * OLDER_GENERATIONS_FACTOR, t2 * OLDER_GENERATIONS_FACTOR)
    try:
        yield
    finally:
        gc.set_threshold(*old)


@contextlib.contextmanager
def paused() -> Iterator[None]:
    """No cyclic collection while the block runs; the collector's earlier state comes back afterwards.

    For work that allocates many short-lived objects and makes no reference cycles (loop replay's planning
    and synthesis, :mod:`devkit.sim.replay2`): a pass over them would find nothing.  Nor would the young
    collection that the first allocation after the block starts (the block's allocations count towards
    it): the objects the block left alive are moved to the oldest generation first (``gc.freeze`` then
    ``gc.unfreeze``: two list splices, no pass), so that only a full collection looks at them.  Skipped
    when the process has frozen objects of its own (``gc.unfreeze`` would release them too)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            if not gc.get_freeze_count():
                gc.freeze()
                gc.unfreeze()
            gc.enable()
