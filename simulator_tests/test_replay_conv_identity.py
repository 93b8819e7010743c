"""A depthwise-convolution-shaped kernel (issue 13's slow case, written small): each iteration reads a
sliding window of a padded SBUF row and writes one output column.  Cost-only runs with loop replay, and
with every iteration executed, give the same instruction trace -- ids, engines, operands and every
dependency -- and the same modelled latency; the dependency tracker's run records and the blocked
address-reuse map (devkit.sim.deps) must not change a single dependency."""

from __future__ import annotations

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import neuronxcc.nki.typing as nt
import numpy as np
import pytest
from _kernel_checks import assert_same_instructions

import devkit
from devkit.nki.runner import run_kernel
from devkit.sim.options import SimOptions
from devkit.trace import Trace

TAPS = 3


@nki.jit
def depthwise_rows(img, taps):
    """out[b, c, x] = sum_k img[b, c, x + k - 1] * taps[c, k] (zero padding of one column each side)."""
    batch, chans, width = img.shape
    out = nl.ndarray((batch, chans, width), dtype=img.dtype, buffer=nl.shared_hbm)
    i_p = nl.arange(chans)[:, None]
    i_x = nl.arange(width)[None, :]
    i_k = nl.arange(TAPS)[None, :]
    padded = nl.zeros((batch, nl.par_dim(chans), width + TAPS - 1), dtype=img.dtype, buffer=nl.sbuf)
    for b in nl.affine_range(batch):
        padded[b, i_p, i_x + 1] = nl.load(img[b, i_p, i_x])
    weights = nl.load(taps[i_p, i_k])
    result = nl.zeros((batch, nl.par_dim(chans), width), dtype=img.dtype, buffer=nl.sbuf)
    for b in nl.affine_range(batch):
        for x in nl.affine_range(width):
            prod = nisa.tensor_tensor(padded[b, i_p, i_k + x], weights[i_p, i_k], np.multiply)
            result[b, i_p, x] = nisa.tensor_reduce(np.add, prod[i_p, i_k], axis=[1])
    for b in nl.affine_range(batch):
        nl.store(out[b, i_p, i_x], result[b, i_p, i_x])
    return out


SPECS = (nt.tensor[[3, 128, 40], nl.float32], nt.tensor[[128, TAPS], nl.float32])


def _trace(replay: bool) -> Trace:
    tr = Trace()
    run_kernel(
        depthwise_rows.func, SPECS, {}, options=SimOptions(numerics=False, replay_loops=replay), sink=tr
    )
    return tr


def test_the_kernel_computes_a_depthwise_convolution():
    rng = np.random.default_rng(3)
    img = rng.standard_normal((2, 128, 16)).astype(np.float32)
    taps = rng.standard_normal((128, TAPS)).astype(np.float32)
    padded = np.pad(img, ((0, 0), (0, 0), (1, 1)))
    want = sum(padded[:, :, k : k + 16] * taps[None, :, k, None] for k in range(TAPS))
    np.testing.assert_allclose(devkit.simulate(depthwise_rows, img, taps), want, rtol=1e-5, atol=1e-5)


def test_replayed_trace_is_the_executed_trace_dependency_for_dependency():
    full, fast = _trace(False), _trace(True)
    assert len(full.instrs) > 3 * 40 * 2
    assert_same_instructions(full, fast, extra=("deps", "attrs"))
    # each store waits for the column writes of its batch row (one per iteration, held as a run)
    stores = [i for i in full.instrs if i.opcode == "store"]
    assert len(stores) == 3 and all(len(s.deps) > 40 for s in stores)


def test_replayed_estimate_matches_full_execution():
    full = devkit.estimate(depthwise_rows, *SPECS, options=SimOptions(numerics=False, replay_loops=False))
    fast = devkit.estimate(depthwise_rows, *SPECS)
    assert fast.instructions == full.instructions
    assert fast.latency_us == pytest.approx(full.latency_us, rel=1e-12)
    assert fast.sbuf_peak_bytes == full.sbuf_peak_bytes
