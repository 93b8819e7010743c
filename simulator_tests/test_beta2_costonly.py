"""Issue 12: cost-only runs of Beta-2 kernels (``devkit.estimate``) keep the checks of numerics runs.

The same-dtype ``nisa.dma_copy`` has a direct path (no Beta-1 round trip) in both modes; these tests check that
an unwritten source is still reported at the kernel line (numerics) or listed as a skipped check (cost-only),
that the copy marks its destination written, and that it costs what the general path (``dge_mode=swdge``,
which does not take the direct path) costs.
"""

from __future__ import annotations

import inspect

import ml_dtypes
import nki
import nki.isa as nisa
import nki.language as nl
import nki.typing as nt
import numpy as np
import pytest

import devkit
from devkit.errors import UninitializedReadError

SPEC = nt.tensor[[128, 512], nl.bfloat16]


@nki.jit
def copy_through_sbuf(a, write_first=True, dge=nisa.dge_mode.unknown):
    t = nl.ndarray((128, 512), dtype=a.dtype, buffer=nl.sbuf)
    if write_first:
        nisa.dma_copy(dst=t, src=a, dge_mode=dge)
    out = nl.ndarray((128, 512), dtype=a.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=t, dge_mode=dge)  # <- blame
    return out


def test_unwritten_source_raises_when_simulated_and_is_a_skipped_check_when_costed():
    a = np.zeros((128, 512), dtype=ml_dtypes.bfloat16)
    with pytest.raises(UninitializedReadError) as e:
        nki.simulate(copy_through_sbuf)(a, False)
    assert e.value.rule == "uninitialized-read"
    lines, first = inspect.getsourcelines(copy_through_sbuf.func)
    assert e.value.lineno == first + next(i for i, ln in enumerate(lines) if "# <- blame" in ln)
    for dge in (nisa.dge_mode.unknown, nisa.dge_mode.swdge):  # cost-only runs have no values to judge
        rep = devkit.estimate(copy_through_sbuf, SPEC, False, dge, target="trn2")
        assert "uninitialized-read" in rep.checks_skipped


def test_cost_only_copy_marks_its_destination_written():
    rep = devkit.estimate(copy_through_sbuf, SPEC, True, target="trn2")
    assert rep.instructions == 2 and rep.outputs_unwritten == ()


def test_direct_and_general_dma_paths_cost_the_same():
    fast = devkit.estimate(copy_through_sbuf, SPEC, True, nisa.dge_mode.unknown, target="trn2")
    general = devkit.estimate(copy_through_sbuf, SPEC, True, nisa.dge_mode.swdge, target="trn2")
    assert fast.instructions == general.instructions
    assert fast.hbm_read_bytes == general.hbm_read_bytes and fast.hbm_write_bytes == general.hbm_write_bytes
    assert fast.latency_us == pytest.approx(general.latency_us)
