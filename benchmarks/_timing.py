"""Timing helper shared by the benchmark scripts (run as ``python benchmarks/<script>.py``)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


def _best(fn: Callable[[], Any], repeat: int, clock: Callable[[], float]) -> tuple[float, Any]:
    best, out = float("inf"), None
    for _ in range(repeat):
        t0 = clock()
        out = fn()
        best = min(best, clock() - t0)
    return best, out


def best_wall(fn: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    """(fastest wall time of ``repeat`` calls in seconds, result of the last call)."""
    return _best(fn, repeat, time.perf_counter)


def best_cpu(fn: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    """(least CPU time of ``repeat`` calls in seconds, result of the last call).  CPU time, not wall time:
    on a shared machine another process's load shows in wall time only."""
    return _best(fn, repeat, time.process_time)
