"""Issue 12, LNC 2: the two programs of ``kernel[2]`` run side by side (one instruction each in turn) and each
has its own SBUF and PSUM of the per-core size (trn2: ``devkit/targets/trn2.toml``).  Failing kernels have
passing twins; the error class, rule and blamed line are asserted."""

from __future__ import annotations

import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np
import pytest
from _nki_support import assert_blames

import devkit
from devkit.errors import CapacityError
from devkit.sim.options import SimOptions

RNG = np.random.default_rng(3)
STRICT = SimOptions(strict_capacity=True)
COLS = 10_000  # 40,000 fp32 bytes per partition: 3 such tiles are ~56% of trn2's 212,984 usable bytes


@nki.jit
def zero_all_then_store_my_half(a):
    """Both programs zero the whole output, then each stores its half (nki-library cascaded_max's pattern,
    without a barrier: correct only because the cores run side by side)."""
    rows, cols = a.shape
    pid, half = nl.program_id(0), rows // nl.num_programs()
    out = nl.ndarray((rows, cols), dtype=a.dtype, buffer=nl.shared_hbm)
    z = nl.ndarray((rows, cols), dtype=a.dtype, buffer=nl.sbuf)
    nisa.memset(z, 0.0)
    nisa.dma_copy(dst=out, src=z)
    t = nl.ndarray((half, cols), dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a[pid * half : (pid + 1) * half, :])
    nisa.dma_copy(dst=out[pid * half : (pid + 1) * half, :], src=t)
    return out


def test_lnc2_programs_alternate_instructions():
    a = RNG.standard_normal((64, 32)).astype(np.float32)
    np.testing.assert_array_equal(nki.simulate(zero_all_then_store_my_half[2])(a), a)
    np.testing.assert_array_equal(nki.simulate(zero_all_then_store_my_half[1])(a), a)


@nki.jit
def live_tiles(a, tiles=3):
    """``tiles`` SBUF tiles of 40,000 bytes per partition, all live at once, in every program."""
    pid = nl.program_id(0)
    out = nl.ndarray((nl.num_programs(), 128, tiles), dtype=nl.float32, buffer=nl.shared_hbm)
    held = []
    for i in range(tiles):
        t = nl.ndarray((128, COLS), dtype=nl.float32, buffer=nl.sbuf)  # <- blame
        nisa.memset(t, float(i + pid))
        held.append(t)
    for i, t in enumerate(held):
        nisa.dma_copy(dst=out[pid, :, i : i + 1], src=t[:, 0:1])
    return out


def test_each_lnc2_program_has_its_own_sbuf():
    a = np.zeros((1, 1), np.float32)
    # 2 programs x 3 tiles = 240,000 bytes per partition: over one SBUF, within each program's own
    got = devkit.simulate(live_tiles[2], a, 3, target="trn2", options=STRICT)
    np.testing.assert_array_equal(got[1], np.tile(np.arange(1, 4, dtype=np.float32), (128, 1)))
    # the twin: one program holding 6 tiles (240,000 bytes) overflows its own SBUF
    with pytest.raises(CapacityError) as e:
        devkit.simulate(live_tiles[2], a, 6, target="trn2", options=STRICT)
    assert e.value.rule == "sbuf-capacity"
    assert_blames(e, live_tiles)


def test_an_lnc1_launch_has_one_sbuf():
    a = np.zeros((1, 1), np.float32)
    devkit.simulate(live_tiles[1], a, 5, target="trn2", options=STRICT)  # 200,000 bytes fit
    with pytest.raises(CapacityError) as e:
        devkit.simulate(live_tiles[1], a, 6, target="trn2", options=STRICT)
    assert e.value.rule == "sbuf-capacity"
    assert_blames(e, live_tiles)
