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


def best_interleaved(
    timers: dict[str, Callable[[], tuple[float, Any]]], repeat: int
) -> dict[str, tuple[float, Any]]:
    """Run each timer (a call returning ``(seconds, result)``, e.g. ``lambda: best_cpu(fn, 1)``) once per
    round, ``repeat`` rounds, so that a slow patch of a shared machine hits all of them; returns name ->
    (least seconds, result of the last round)."""
    best: dict[str, tuple[float, Any]] = {name: (float("inf"), None) for name in timers}
    for _ in range(repeat):
        for name, timer in timers.items():
            seconds, out = timer()
            best[name] = (min(best[name][0], seconds), out)
    return best


def bf16_matmul_operands(size: int, seed: int = 0) -> tuple[Any, Any, Any, Any]:
    """``(a, b, a32, b32)``: two standard-normal ``size`` x ``size`` bfloat16 matrices (for
    ``a.T @ b``) and their float32 copies for NumPy's reference product."""
    import ml_dtypes
    import numpy as np

    rng = np.random.default_rng(seed)
    a = rng.standard_normal((size, size)).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal((size, size)).astype(ml_dtypes.bfloat16)
    return a, b, a.astype(np.float32), b.astype(np.float32)
