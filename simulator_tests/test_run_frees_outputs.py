"""A finished simulation holds no memory: its storages are freed by reference counting, not left in cycles.

nki-library's harness runs hundreds of kernels in one process under a memory cap; a reference cycle that keeps a
run's output storages alive until the next full garbage collection made its later tests run out of memory (the
collector's thresholds count objects, not bytes, so a few large arrays in cycles pile up).
"""

from __future__ import annotations

import gc
import tracemalloc

import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np

ROWS, COLS = 256, 8192  # 8 MiB of float32 per output


@nki.jit
def two_outputs(x):
    a = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    b = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    for i in range(x.shape[0] // 128):
        t = nl.ndarray((128, x.shape[1]), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x[i * 128 : (i + 1) * 128, :])
        nisa.dma_copy(dst=a[i * 128 : (i + 1) * 128, :], src=t)
        nisa.dma_copy(dst=b[i * 128 : (i + 1) * 128, :], src=t)
    return a, (b,)


def _retained_after_runs(runs: int) -> int:
    """Bytes still allocated after ``runs`` simulations whose results were dropped (cyclic collector off)."""
    x = np.ones((ROWS, COLS), dtype=np.float32)
    got = nki.simulate(two_outputs)(x)  # warm up caches outside the measurement
    np.testing.assert_array_equal(got[0], x)
    del got
    gc.collect()
    was_enabled = gc.isenabled()
    gc.disable()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        for _ in range(runs):
            got = nki.simulate(two_outputs)(x)
            del got
        return tracemalloc.get_traced_memory()[0] - base
    finally:
        tracemalloc.stop()
        if was_enabled:
            gc.enable()


def test_output_storages_are_freed_without_the_cyclic_collector():
    retained = _retained_after_runs(3)
    one_run_outputs = 2 * ROWS * COLS * 4
    assert retained < one_run_outputs // 4, f"{retained} bytes retained after 3 runs"
