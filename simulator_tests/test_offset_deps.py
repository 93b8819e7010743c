"""An instruction whose operand takes run-time offsets from an on-chip tile reads that tile: in the trace it
waits for the tile's last writer (cost model), as the hardware's DMA or engine must read the offsets before
it can address the data.  Twins: the same kernels with a static offset carry no such dependency.

Covered: a Beta-1 subscript by an index tile (``nl.load(t[idx, ...])``), ``t.ap(scalar_offset=)``,
``t.ap(vector_offset=)`` and ``tensor.indirect`` (NeuronCore-v4).  The view records the tiles it read
(``devkit.sim.tensor.OffsetView``); no operand bytes are added, so byte counts are those of the data alone.
"""

from __future__ import annotations

import neuronxcc.nki as nki1
import neuronxcc.nki.isa as nisa1
import neuronxcc.nki.language as nl1
import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np
import pytest
from _nki_support import line_of

from devkit.nki.runner import run_kernel
from devkit.sim.options import SimOptions
from devkit.trace import Trace

RNG = np.random.default_rng(3)


def _trace(kernel, *arrays, numerics: bool = True, target: str = "trn2") -> Trace:
    tr = Trace()
    run_kernel(kernel.func, arrays, {}, target=target, options=SimOptions(numerics=numerics), sink=tr)
    return tr


def _at(tr: Trace, kernel, marker: str):
    """The one instruction issued at the line of ``kernel`` marked ``# <- marker``."""
    line = line_of(kernel.func, marker)
    found = [i for i in tr.instrs if i.lineno == line]
    assert len(found) == 1, found
    return found[0]


def _waits_for(tr: Trace, kernel, user: str, writer: str) -> bool:
    return _at(tr, kernel, writer).id in _at(tr, kernel, user).deps


# ---- Beta 2: t.ap(scalar_offset=...) ---------------------------------------------------------------------------


@nki.jit
def row_by_scalar_offset(table, dynamic):
    row = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.iota(row, pattern=[[0, 1]], offset=3)  # <- offset written
    d = table.shape[1]
    t = nl.ndarray((1, d), dtype=table.dtype, buffer=nl.sbuf)
    if dynamic:
        src = table.ap(pattern=[[d, 1], [1, d]], offset=0, scalar_offset=row, indirect_dim=0)
    else:
        src = table.ap(pattern=[[d, 1], [1, d]], offset=3 * d)
    nisa.dma_copy(dst=t, src=src)  # <- load
    out = nl.ndarray((1, d), dtype=table.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=t)
    return out


@pytest.mark.parametrize("numerics", [True, False])
def test_scalar_offset_load_waits_for_the_offset_tile(numerics):
    table = RNG.standard_normal((8, 64)).astype(np.float32)
    dyn = _trace(row_by_scalar_offset, table, True, numerics=numerics)
    assert _waits_for(dyn, row_by_scalar_offset, "load", "offset written")
    static = _trace(row_by_scalar_offset, table, False, numerics=numerics)
    assert not _waits_for(static, row_by_scalar_offset, "load", "offset written")
    # the same bytes move either way: the offset tile adds a dependency, not an operand
    assert _at(dyn, row_by_scalar_offset, "load").ins == _at(static, row_by_scalar_offset, "load").ins


def test_scalar_offset_values_are_unchanged():
    table = RNG.standard_normal((8, 64)).astype(np.float32)
    np.testing.assert_array_equal(nki.simulate(row_by_scalar_offset)(table, True), table[3:4])


# ---- Beta 2: t.ap(vector_offset=...) ---------------------------------------------------------------------------


@nki.jit
def rows_by_vector_offset(table, idx, dynamic):
    p, d = idx.shape[0], table.shape[1]
    i_sb = nl.ndarray((p, 1), dtype=idx.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=i_sb, src=idx)  # <- offsets loaded
    g = nl.ndarray((p, d), dtype=table.dtype, buffer=nl.sbuf)
    if dynamic:
        src = table.ap(pattern=[[d, p], [1, d]], offset=0, vector_offset=i_sb)
    else:
        src = table.ap(pattern=[[d, p], [1, d]], offset=0)
    nisa.dma_copy(dst=g, src=src)  # <- gather
    out = nl.ndarray((p, d), dtype=table.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=g)
    return out


def test_vector_offset_gather_waits_for_the_offset_load():
    table = RNG.standard_normal((40, 16)).astype(np.float32)
    idx = RNG.integers(0, 40, (16, 1)).astype(np.int32)
    dyn = _trace(rows_by_vector_offset, table, idx, True)
    assert _waits_for(dyn, rows_by_vector_offset, "gather", "offsets loaded")
    static = _trace(rows_by_vector_offset, table, idx, False)
    assert not _waits_for(static, rows_by_vector_offset, "gather", "offsets loaded")
    np.testing.assert_array_equal(nki.simulate(rows_by_vector_offset)(table, idx, True), table[idx[:, 0]])


# ---- Beta 2: tensor.indirect (NeuronCore-v4) --------------------------------------------------------------------


@nki.jit
def columns_by_indirect(x, idx, dynamic):
    p, f = x.shape
    n = idx.shape[1] * 16
    t = nl.ndarray((p, f), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    it = nl.ndarray(idx.shape, dtype=idx.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=it, src=idx)  # <- index loaded
    r = nl.ndarray((p, n), dtype=x.dtype, buffer=nl.sbuf)
    nisa.tensor_copy(dst=r, src=t.indirect(it) if dynamic else t[:, 0:n])  # <- gather
    out = nl.ndarray((p, n), dtype=x.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=r)
    return out


def test_indirect_operand_waits_for_the_index(monkeypatch):
    monkeypatch.setenv("NKI_NC_VERSION", "gen4")
    x = RNG.standard_normal((32, 64)).astype(np.float32)
    idx = RNG.integers(0, 64, (32, 2)).astype(np.uint16)
    dyn = _trace(columns_by_indirect, x, idx, True, target="trn3")
    assert _waits_for(dyn, columns_by_indirect, "gather", "index loaded")
    static = _trace(columns_by_indirect, x, idx, False, target="trn3")
    assert not _waits_for(static, columns_by_indirect, "gather", "index loaded")


# ---- Beta 1: a subscript by an index tile ----------------------------------------------------------------------


@nki1.jit
def rows_by_index_tile(table, idx, dynamic):
    p, d = idx.shape[0], table.shape[1]
    out = nl1.ndarray((p, d), dtype=table.dtype, buffer=nl1.shared_hbm)
    i_sb = nl1.load(idx)  # <- index loaded
    i_p, i_f = nl1.mgrid[0:p, 0:d]
    if dynamic:
        rows = nl1.load(table[i_sb[i_p, 0], i_f])  # <- gather
    else:
        rows = nl1.load(table[i_p, i_f])  # <- gather
    nl1.store(out, value=nisa1.tensor_copy(rows))
    return out


def test_beta1_index_tile_gather_waits_for_the_index_load():
    table = RNG.standard_normal((40, 16)).astype(np.float32)
    idx = RNG.integers(0, 40, (16, 1)).astype(np.int32)
    dyn = _trace(rows_by_index_tile, table, idx, True, target="trn1")
    (load,) = [i for i in dyn.instrs if i.lineno == line_of(rows_by_index_tile.func, "index loaded")]
    gathers = [i for i in dyn.instrs if i.lineno in _gather_lines()]
    assert len(gathers) == 1 and load.id in gathers[0].deps
    static = _trace(rows_by_index_tile, table, idx, False, target="trn1")
    gathers = [i for i in static.instrs if i.lineno in _gather_lines()]
    assert len(gathers) == 1 and load.id not in gathers[0].deps


def _gather_lines() -> set[int]:
    import inspect

    src, first = inspect.getsourcelines(rows_by_index_tile.func)
    return {first + n for n, text in enumerate(src) if "# <- gather" in text}
