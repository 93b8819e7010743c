"""Loop replay of NKI 0.x (Beta 2) kernels in cost-only runs: exactly what executing every iteration gives.

Each kernel runs twice, with replay (the default) and with ``replay_loops=False``; the instruction traces
(ids, engines, opcodes, sizes, lines and every dependency), the memory statistics and the modelled
latency must be identical.  Kernels whose body cannot be proved replayable (a branch on the loop index,
a store to a Python list, non-affine index arithmetic) must fall back to executing every iteration --
still identical, and counted.
"""

from __future__ import annotations

import inspect
import sys

import nki
import nki.isa as nisa
import nki.language as nl
import nki.typing as nt
import pytest

import devkit
from devkit.errors import BoundsError, KernelError
from devkit.kernels.beta2.tutorial import tiled_matmul  # three nested affine loops, all replayable
from devkit.nki.beta2 import loopsafety
from devkit.nki.runner import run_kernel
from devkit.sim import replay2
from devkit.sim.options import SimOptions
from devkit.trace import Trace

NO_REPLAY = SimOptions(numerics=False, replay_loops=False)
BF16 = nl.bfloat16


@nki.jit
def sequential_sum(x):
    """A loop-carried accumulation through an SBUF tile allocated before a sequential_range loop."""
    out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    acc = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=acc, value=0.0)
    for t in nl.sequential_range(x.shape[0] // 128):
        tile = nl.ndarray((128, 512), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=tile, src=x[t * 128 : (t + 1) * 128, :])
        nisa.tensor_tensor(dst=acc, data1=acc, data2=tile, op=nl.add)
    nisa.dma_copy(dst=out, src=acc)
    return out


@nki.jit
def branch_on_index(x):
    """The body issues an extra instruction in one middle iteration: replay would miss it."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    for t in nl.affine_range(x.shape[0] // 128):
        tile = nl.ndarray((128, 512), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=tile, src=x[t * 128 : (t + 1) * 128, :])
        if t == 4:
            nisa.tensor_copy(dst=tile, src=tile)
        nisa.dma_copy(dst=out[t * 128 : (t + 1) * 128, :], src=tile)
    return out


@nki.jit
def store_to_list(x):
    """The body keeps every tile in a Python list, used after the loop: replay would lose entries."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    tiles = []
    for t in nl.affine_range(x.shape[0] // 128):
        tile = nl.ndarray((128, 512), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=tile, src=x[t * 128 : (t + 1) * 128, :])
        tiles.append(tile)
    for t, tile in enumerate(tiles):
        nisa.dma_copy(dst=out[t * 128 : (t + 1) * 128, :], src=tile)
    return out


@nki.jit
def carried_local(x):
    """A plain Python counter carried from one iteration to the next (a running row offset)."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    row = 0
    for _t in nl.affine_range(x.shape[0] // 128):
        tile = nl.ndarray((128, 512), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=tile, src=x[row : row + 128, :])
        nisa.dma_copy(dst=out[row : row + 128, :], src=tile)
        row = row + 128
    return out


@nki.jit
def wrapped_index(x):
    """Rows ``(t % 4) * 128``: affine on iterations 0-2, wraps at 4 (only the static check can tell)."""
    out = nl.ndarray((512, 512), dtype=x.dtype, buffer=nl.shared_hbm)
    for t in nl.affine_range(x.shape[0] // 128):
        tile = nl.ndarray((128, 512), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=tile, src=x[t * 128 : (t + 1) * 128, :])
        nisa.dma_copy(dst=out[(t % 4) * 128 : (t % 4 + 1) * 128, :], src=tile)
    return out


OFFSETS = (0, 256, 128, 384, 512, 640, 896, 768)


@nki.jit
def lookup_index(x):
    """Rows looked up in a tuple by the loop index: affine on iterations 0-2 only by accident of the data."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    for t in nl.affine_range(8):
        tile = nl.ndarray((128, 512), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=tile, src=x[OFFSETS[t] : OFFSETS[t] + 128, :])
        nisa.dma_copy(dst=out[t * 128 : (t + 1) * 128, :], src=tile)
    return out


@nki.jit
def cubic_index(x):
    """Rows ``t * (t - 1) * (t - 2) * 2``: 0 on iterations 0, 1, 2 (a constant step of 0), 12 on iteration 3."""
    out = nl.ndarray((128, 512), dtype=x.dtype, buffer=nl.shared_hbm)
    acc = nl.ndarray((128, 512), dtype=x.dtype, buffer=nl.sbuf)
    nisa.memset(dst=acc, value=0.0)
    for t in nl.affine_range(6):
        tile = nl.ndarray((128, 512), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=tile, src=x[t * (t - 1) * (t - 2) * 2 : t * (t - 1) * (t - 2) * 2 + 128, :])
        nisa.dma_copy(dst=out, src=tile)
    return out


@nki.jit
def late_fault(x, n):
    """Iterations past the rows of ``x`` read out of bounds: the first bad one is the last."""
    out = nl.ndarray((128, 512), dtype=x.dtype, buffer=nl.shared_hbm)
    for t in nl.affine_range(n):
        tile = nl.ndarray((128, 512), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=tile, src=x[t * 128 : (t + 1) * 128, :])  # <- fault
        nisa.dma_copy(dst=out, src=tile)
    return out


@nki.jit
def quadratic_fault(x):
    """Rows from ``t * (7 - t) * 32``: 0, 192, 320, 384, 384, 320, 192, 0 -- in bounds of 500 rows on
    iterations 0-2 and the last, out of bounds on iterations 3 and 4 only (which replay would skip)."""
    out = nl.ndarray((128, 512), dtype=x.dtype, buffer=nl.shared_hbm)
    for t in nl.affine_range(8):
        tile = nl.ndarray((128, 512), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=tile, src=x[t * (7 - t) * 32 : t * (7 - t) * 32 + 128, :])  # <- quadratic
        nisa.dma_copy(dst=out, src=tile)
    return out


def _run(kernel, *args, options=None):
    tr = Trace()
    run_kernel(kernel.func, args, {}, options=options or SimOptions(numerics=False), sink=tr, target="trn2")
    return tr


@pytest.fixture
def replays(monkeypatch):
    """Counts the loops that were replayed (synthesised) during a test."""
    seen: list[int] = []
    real = replay2.synthesise

    def spy(m, rec, tmpl, n):
        seen.append(n)
        return real(m, rec, tmpl, n)

    monkeypatch.setattr(replay2, "synthesise", spy)
    return seen


CASES = {
    "tiled_matmul": (tiled_matmul, (nt.tensor[[768, 640], BF16], nt.tensor[[768, 2560], BF16])),
    "sequential_sum": (sequential_sum, (nt.tensor[[1024, 512], nl.float32],)),
    "branch_on_index": (branch_on_index, (nt.tensor[[1024, 512], BF16],)),
    "store_to_list": (store_to_list, (nt.tensor[[1024, 512], BF16],)),
    "carried_local": (carried_local, (nt.tensor[[1024, 512], BF16],)),
    "wrapped_index": (wrapped_index, (nt.tensor[[1024, 512], BF16],)),
    "lookup_index": (lookup_index, (nt.tensor[[1024, 512], BF16],)),
    "cubic_index": (cubic_index, (nt.tensor[[1024, 512], BF16],)),
}
#: kernels whose loops must fall back to executing every iteration
FALLBACK = (
    "branch_on_index",
    "store_to_list",
    "carried_local",
    "wrapped_index",
    "lookup_index",
    "cubic_index",
)


@pytest.mark.parametrize("name", list(CASES))
def test_replay_gives_the_trace_of_full_execution(name, replays):
    kernel, args = CASES[name]
    full = _run(kernel, *args, options=NO_REPLAY)
    assert not replays
    fast = _run(kernel, *args)
    assert len(fast.instrs) == len(full.instrs) > 0
    for a, b in zip(full.instrs, fast.instrs):
        assert a == b  # every field, dependencies included
    assert fast.stats == full.stats
    if name in FALLBACK:
        assert replays == []
    else:
        assert replays, "the loop was expected to replay"


@pytest.mark.parametrize("name", list(CASES))
def test_replayed_estimate_is_identical(name):
    kernel, args = CASES[name]
    full = devkit.estimate(kernel, *args, target="trn2", options=NO_REPLAY)
    fast = devkit.estimate(kernel, *args, target="trn2")
    assert fast.instructions == full.instructions
    assert fast.latency_us == full.latency_us
    assert (fast.sbuf_peak_bytes, fast.hbm_read_bytes, fast.hbm_write_bytes) == (
        full.sbuf_peak_bytes,
        full.hbm_read_bytes,
        full.hbm_write_bytes,
    )


def test_every_level_of_the_tiled_matmul_replays(replays):
    kernel, args = CASES["tiled_matmul"]
    _run(kernel, *args)
    # m loop (5 iterations) once; n loops (5) in the 4 executed m iterations; k loops (6) in the
    # executed (m, n) pairs: 4 x 4
    assert sorted(replays) == [5] * (1 + 4) + [6] * 16


def test_fallbacks_are_counted():
    from devkit.sim import machine

    counts = []
    real = machine.Machine.finish

    def finish(self):
        counts.append(self.replay_fallbacks)
        return real(self)

    machine.Machine.finish = finish
    try:
        for name in FALLBACK:
            kernel, args = CASES[name]
            _run(kernel, *args)
        kernel, args = CASES["sequential_sum"]
        _run(kernel, *args)
    finally:
        machine.Machine.finish = real
    assert counts == [1] * len(FALLBACK) + [0]


def test_numerics_runs_execute_every_iteration(replays):
    import numpy as np

    x = np.arange(1024 * 512, dtype=np.float32).reshape(1024, 512) % 7
    out = nki.simulate(sequential_sum)(x)
    np.testing.assert_array_equal(out, x.reshape(8, 128, 512).sum(axis=0))
    assert replays == []


def _line_of(kernel, marker):
    lines, first = inspect.getsourcelines(kernel.func)
    return first + next(i for i, ln in enumerate(lines) if marker in ln)


def _fault(kernel, *args, options=None):
    with pytest.raises(KernelError) as e:
        _run(kernel, *args, options=options)
    return e.value


def test_a_fault_in_the_last_iteration_is_reported_at_its_line():
    # 8 iterations over 7.5 tiles of rows: iteration 7 reads past the end.  Replay executes the last
    # iteration, and an affine region that leaves the tensor in some iteration leaves it in the first or
    # the last one, which are both executed: the fault replay reports is the one full execution reports.
    args = (nt.tensor[[7 * 128 + 64, 512], BF16], 8)
    full = _fault(late_fault, *args, options=NO_REPLAY)
    fast = _fault(late_fault, *args)
    assert type(fast) is type(full) and isinstance(fast, BoundsError)
    assert (
        (fast.rule, fast.lineno)
        == (full.rule, full.lineno)
        == (full.rule, _line_of(late_fault, "# <- fault"))
    )
    assert str(fast) == str(full)


def test_a_fault_only_a_skipped_iteration_would_hit_is_still_found():
    # quadratic rows (a product of loop-varying values): the loop is not replayed, so the out-of-bounds read
    # of iteration 3 is found as full execution finds it
    full = _fault(quadratic_fault, nt.tensor[[500, 512], BF16], options=NO_REPLAY)
    fast = _fault(quadratic_fault, nt.tensor[[500, 512], BF16])
    assert isinstance(fast, BoundsError) and str(fast) == str(full)
    assert fast.lineno == _line_of(quadratic_fault, "# <- quadratic")


# ---- the static check of loop bodies -----------------------------------------------------------------------


def _site(fn):
    """The static verdict on the first ``for`` loop over a call in ``fn``."""
    import dis

    # from 3.11 a running frame's last instruction may be a call's inline cache entry (shown from 3.11 on)
    caches = {"show_caches": True} if sys.version_info >= (3, 11) else {}
    ins = list(dis.get_instructions(fn.__code__, **caches))
    k = next(i for i, x in enumerate(ins) if x.opname == "GET_ITER")
    lasti = max(x.offset for x in ins[:k])  # the call's last cache entry, as a running frame reports it
    return loopsafety._static(fn.__code__, lasti)


def test_static_check_accepts_straight_line_bodies_and_rejects_the_rest():
    def straight(n, x, nl):
        for t in nl.affine_range(n):
            x.foo(t * 128 + 1, n // 2)

    def branch(n, x, nl):
        for t in nl.affine_range(n):
            if t:
                x.foo(t)

    def breaks(n, x, nl):
        for t in nl.affine_range(n):
            x.foo(t)
            break

    def modulo(n, x, nl):
        for t in nl.affine_range(n):
            x.foo(t % 4)

    def attr_store(n, x, nl):
        for t in nl.affine_range(n):
            x.last = t

    def product(n, x, nl):
        for t in nl.affine_range(n):
            x.foo(t * (t + 1))

    def lookup(n, x, nl):
        for t in nl.affine_range(n):
            x.foo(n.bar[t])

    def carried(n, x, nl):
        r = 0
        for _t in nl.affine_range(n):
            x.foo(r)
            r = r + 1

    def stored(n, x, nl):
        r = nl.affine_range(n)
        for t in r:
            x.foo(t)

    assert _site(straight).safe
    for fn in (branch, breaks, modulo, attr_store, carried, product):
        assert not _site(fn).safe, fn.__name__
    assert _site(stored) is None  # not a for statement's iterable: a plain range
    # a loop-indexed subscript is allowed only into what turns out to be a tensor
    assert _site(lookup).safe and _site(lookup).tensors == (("LOAD_FAST", "n", ("bar",)),)
