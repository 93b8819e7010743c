"""Tiles returned by the NKI 0.x ``nl.*`` convenience wrappers die when the kernel drops them.

Each wrapper (``nl.exp``, ``nl.add``, ``nl.load``, ...) allocates a new tile.  NKI 0.x tensors live as long
as the kernel holds them, so rebinding the name in the next loop iteration ends the previous tile's life:
its SBUF space is free again and the allocation site needs one buffer, not one per iteration.  The
simulator frees a tile when its last reference goes (``Storage.__del__``), which needs the tile not to sit
in a reference cycle.  A wrapper's result used to: the result tensor pointed at its pending instruction
(kept for ``dst[...] = result`` retargeting) and the instruction listed the tensor among its outputs, so
every iteration's tile stayed allocated until Python's cycle collector ran.  That inflated the allocator's
high-water mark and made the loop look different from one iteration to the next, so loop replay
(:mod:`devkit.sim.replay2`) fell back to executing every iteration.

The twins: a loop that drops each wrapper tile (one tile's worth of SBUF, the loop replays) and one that
keeps every tile in a Python list (N tiles' worth, and the loop may not replay).  The cycle collector is off
during these runs, so only reference counting frees tiles, as in the leak.
"""

from __future__ import annotations

import gc
import weakref

import nki
import nki.isa as nisa
import nki.language as nl
import nki.typing as nt
import numpy as np
import pytest

import devkit
from devkit.sim import machine
from devkit.sim.options import SimOptions

N = 16  # loop iterations (long enough to replay: replay2.MIN_ITERATIONS)
ROWS, COLS = 128, 512
TILE_BYTES_PP = COLS * 4  # one fp32 [128, 512] tile, bytes per partition


@nki.jit
def load_per_iteration(x):
    """Good: ``y = nl.load(...)`` rebinds ``y`` every iteration; the previous tile is dropped."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(x.shape[0] // ROWS):
        y = nl.load(x[i * ROWS : (i + 1) * ROWS, :])
        nl.store(out[i * ROWS : (i + 1) * ROWS, :], y)
    return out


@nki.jit
def load_kept_in_a_list(x):
    """Bad twin: every iteration's tile stays referenced (a Python list), so all N are live at the end."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    kept = []
    for i in nl.affine_range(x.shape[0] // ROWS):
        y = nl.load(x[i * ROWS : (i + 1) * ROWS, :])
        kept.append(y)
        nl.store(out[i * ROWS : (i + 1) * ROWS, :], y)
    return out


@nki.jit
def exp_per_iteration(x):
    """Good: an element-wise wrapper's result, rebound every iteration."""
    out = nl.ndarray((ROWS, COLS), dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray((ROWS, COLS), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    for _ in nl.affine_range(N):
        y = nl.exp(t)
        nisa.dma_copy(dst=out, src=y)
    return out


TILES: list[weakref.ref] = []  # each iteration's nl.add tile storage
PREVIOUS_ALIVE: list[bool] = []  # per iteration after the first: is the previous iteration's tile allocated?


@nki.jit
def watch_previous_tile(x):
    """Records, in each iteration, whether the previous iteration's ``nl.add`` tile is still allocated."""
    out = nl.ndarray((ROWS, COLS), dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray((ROWS, COLS), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    for i in range(4):
        y = nl.add(t, float(i))
        TILES.append(weakref.ref(y.st))
        nisa.dma_copy(dst=out, src=y)
        if i:
            prev = TILES[-2]()
            PREVIOUS_ALIVE.append(prev is not None and prev.alive)
    return out


@pytest.fixture
def no_cycle_collector():
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


@pytest.fixture
def runs(monkeypatch):
    """Per finished run: (loops replayed, loops that fell back to full execution, SBUF allocator high-water
    mark in bytes per partition)."""
    seen: list[tuple[int, int, int]] = []
    real = machine.Machine.finish

    def finish(self):
        seen.append((self.replays, self.replay_fallbacks, self.sbuf.peak_bytes))
        return real(self)

    monkeypatch.setattr(machine.Machine, "finish", finish)
    return seen


def _x(rows: int) -> np.ndarray:
    return np.random.default_rng(0).standard_normal((rows, COLS)).astype(np.float32)


def test_a_dropped_wrapper_tile_is_freed_at_once(no_cycle_collector):
    TILES.clear()
    PREVIOUS_ALIVE.clear()
    x = _x(ROWS)
    out = nki.simulate(watch_previous_tile)(x)
    np.testing.assert_array_equal(out, x + np.float32(3.0))
    assert PREVIOUS_ALIVE == [False, False, False]
    assert TILES[-1]() is None  # and the last one when the kernel ends


@pytest.mark.parametrize("numerics", [True, False], ids=["numerics", "cost-only"])
@pytest.mark.parametrize(
    ("kernel", "tiles", "replay"),
    [
        (load_per_iteration, 1, (1, 0)),  # rebound per iteration: one tile's worth, the loop replays
        (load_kept_in_a_list, N, (0, 1)),  # a store to a Python list: every iteration executes
    ],
    ids=["rebound-per-iteration-one-tile", "kept-alive-n-tiles"],
)
def test_wrapper_tiles_live_as_long_as_python_holds_them(
    no_cycle_collector, runs, numerics, kernel, tiles, replay
):
    x = _x(N * ROWS)
    if numerics:
        np.testing.assert_array_equal(nki.simulate(kernel)(x), x)
    else:
        devkit.estimate(kernel, nt.tensor[[N * ROWS, COLS], nl.float32], target="trn2")
    replays, fallbacks, peak = runs[-1]
    assert peak == tiles * TILE_BYTES_PP
    if not numerics:  # (numerics runs execute every iteration)
        assert (replays, fallbacks) == replay


def test_elementwise_wrapper_loop_replays_with_the_trace_of_full_execution(no_cycle_collector, runs):
    spec = nt.tensor[[ROWS, COLS], nl.float32]
    full = devkit.estimate(
        exp_per_iteration, spec, target="trn2", options=SimOptions(numerics=False, replay_loops=False)
    )
    fast = devkit.estimate(exp_per_iteration, spec, target="trn2")
    assert runs[-1][:2] == (1, 0)  # the loop replayed
    assert (fast.instructions, fast.latency_us, fast.sbuf_peak_bytes) == (
        full.instructions,
        full.latency_us,
        full.sbuf_peak_bytes,
    )
    assert fast.instructions == 2 * N + 1
    assert runs[-1][2] == runs[-2][2] == 2 * TILE_BYTES_PP  # the input tile and one nl.exp tile
    x = _x(ROWS)
    np.testing.assert_allclose(nki.simulate(exp_per_iteration)(x), np.exp(x), rtol=1e-6)
