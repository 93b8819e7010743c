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


@nki.jit
def store_through_views(x):
    """Writes its output through a reshape alias and reads its input through a reinterpreting ``.ap`` view:
    both make a Storage that stands for another one (:func:`devkit.sim.storage.alias_of`)."""
    out = nl.ndarray((x.shape[0] // 128, 128, x.shape[1]), dtype=x.dtype, buffer=nl.shared_hbm)
    flat = out.reshape(x.shape)
    bits = x.ap([[x.shape[1], x.shape[0]], [1, x.shape[1]]], dtype=nl.int32)
    for i in range(x.shape[0] // 128):
        t = nl.ndarray((128, x.shape[1]), dtype=nl.int32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=bits[i * 128 : (i + 1) * 128, :])
        nisa.dma_copy(
            dst=flat[i * 128 : (i + 1) * 128, :],
            src=t.ap([[x.shape[1], 128], [1, x.shape[1]]], dtype=x.dtype),
        )
    return out


def _storages_tracked() -> int:
    """Storages the garbage collector tracks, reachable or not (cyclic garbage not yet collected included)."""
    from devkit.sim.storage import Storage

    return sum(1 for o in gc.get_objects() if isinstance(o, Storage))


def test_aliased_storages_are_freed_without_the_cyclic_collector():
    """A reshape/view alias and the storage it stands for form no reference cycle: once the run returned and its
    result was dropped, no Storage of it is left for the cyclic collector (before, every aliased input, output
    and tile of a run -- with their value and never-written arrays -- stayed allocated until a full collection;
    in nki-library's rmsnorm_quant run about 310 MB of 700 MB)."""
    x = np.arange(256 * 64, dtype=np.float32).reshape(256, 64)
    got = nki.simulate(store_through_views)(x)
    np.testing.assert_array_equal(got.reshape(x.shape), x)
    del got
    gc.collect()
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        before = _storages_tracked()
        got = nki.simulate(store_through_views)(x)
        del got
        left = _storages_tracked() - before
    finally:
        if was_enabled:
            gc.enable()
    assert left == 0, f"{left} storages of a finished run wait for the cyclic collector"


def test_a_dead_written_alias_still_counts_as_a_write_of_its_base():
    """The base refers to its aliases weakly: an alias dies with its last reference, and a write made through it
    stays recorded on the base."""
    import weakref

    from devkit.sim.storage import Storage, alias_of, ever_written, live_aliases

    def storage() -> Storage:
        return Storage(None, 0, (4, 8), np.float32, "shared_hbm", None, None, name="out", kind="output")

    written_base, unwritten_base = storage(), storage()
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        a, b = storage(), storage()
        alias_of(a, written_base)
        alias_of(b, unwritten_base)
        a.written = True
        assert live_aliases(written_base) == [a]
        dead_a, dead_b = weakref.ref(a), weakref.ref(b)
        del a, b
        assert dead_a() is None and dead_b() is None  # freed by reference counting alone
    finally:
        if was_enabled:
            gc.enable()
    assert live_aliases(written_base) == []
    assert ever_written(written_base)
    assert not ever_written(unwritten_base)
