"""NKI 0.x PSUM capacity counts *open* accumulation groups (devkit.sim.liveness): a tile is pinned to PSUM from its
first touch to its last accumulating matmul write.  Loop replay (cost-only runs, :mod:`devkit.sim.replay2`)
synthesises those windows for the iterations it does not execute; they must equal the executed ones.

The hazard twins themselves (nine groups open at once: an error; twelve groups closed one after another and read
later: a spill) are in test_beta2_hazards.py.
"""

from __future__ import annotations

import nki
import nki.isa as nisa
import nki.language as nl
import nki.typing as nt
import numpy as np
import pytest

import devkit
from devkit.sim import machine

A = np.linspace(-1, 1, 128 * 64, dtype=np.float32).reshape(128, 64)
N = 16  # iterations: enough for replay (replay2.MIN_ITERATIONS)


@nki.jit
def two_groups_per_iteration(a):
    """Each iteration opens two groups, closes both (second matmul each) and reads them: two open at once."""
    s = nl.ndarray((128, 64), dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(s, a)
    out = nl.ndarray((64, 64), dtype=nl.float32, buffer=nl.sbuf)
    for _ in nl.affine_range(N):
        first = nl.ndarray((64, 512), dtype=nl.float32, buffer=nl.psum)
        second = nl.ndarray((64, 512), dtype=nl.float32, buffer=nl.psum)
        nisa.nc_matmul(first[:, 0:64], s, s)
        nisa.nc_matmul(second[:, 0:64], s, s)
        nisa.nc_matmul(first[:, 0:64], s, s)
        nisa.nc_matmul(second[:, 0:64], s, s)
        nisa.tensor_copy(out, first[:, 0:64])
        nisa.tensor_copy(out, second[:, 0:64])
    o = nl.ndarray((64, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    nisa.dma_copy(o, out)
    return o


@pytest.fixture
def open_windows(monkeypatch):
    """Per finished run: (loops replayed, sorted (first, last) open-group windows of program 0)."""
    seen: list[tuple[int, list[tuple[int, int]]]] = []
    real = machine.Machine.finish

    def finish(self):
        stats = real(self)
        lv = getattr(self.liveness, "parts", [self.liveness])[0]
        seen.append((self.replays, sorted(zip(lv.psum_open.first.tolist(), lv.psum_open.last.tolist()))))
        return stats

    monkeypatch.setattr(machine.Machine, "finish", finish)
    return seen


def test_replayed_iterations_have_the_executed_open_group_windows(open_windows):
    got = nki.simulate(two_groups_per_iteration)(A)
    np.testing.assert_allclose(got, 2 * (A.T @ A), rtol=1e-5, atol=1e-5)
    devkit.estimate(two_groups_per_iteration, nt.tensor[[128, 64], nl.float32], target="trn2")
    (executed_replays, executed), (replays, synthesised) = open_windows
    assert executed_replays == 0 and replays == 1  # the cost-only run replayed the loop
    assert len(executed) == 2 * N
    # each window runs from the group's first matmul to its second, two instructions later
    assert all(last - first == 2 for first, last in executed)
    assert synthesised == executed
