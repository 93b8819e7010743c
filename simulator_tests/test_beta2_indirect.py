"""``tensor.indirect(index, num_elem)`` (NKI 0.5, NeuronCore-v4): gather and scatter of free-dim columns by a
run-time index tensor, checked against NumPy, with its hazards as good/bad twins.

Semantics (``reference/nki_beta2.md`` §4 ``.indirect``): element ``(p, i)`` of the view is
``data[p, offset]`` with ``offset = index[g * G + i % G, i // G]`` for partition group ``g = p // G``;
``G`` is 16 partitions on the Vector/Scalar/GpSimd engines and 32 on the TensorE.
"""

from __future__ import annotations

import nki
import nki.isa as nisa
import nki.language as nl
import nki.typing as nt
import numpy as np
import pytest
from _nki_support import line_of

import devkit
from devkit.errors import BoundsError, KernelArgumentError, UnsupportedError

RNG = np.random.default_rng(7)
P, F, K = 128, 256, 4  # data partitions and free size; index columns


@pytest.fixture(autouse=True)
def trn3(monkeypatch):
    monkeypatch.setenv("NKI_NC_VERSION", "gen4")


def offsets_of(idx: np.ndarray, partitions: int, n: int, group: int) -> np.ndarray:
    """The NumPy statement of the rule: offset ``i`` of partition ``p`` is ``idx[(p // G) * G + i % G, i // G]``."""
    p = np.arange(partitions)[:, None]
    i = np.arange(n)[None, :]
    return idx[(p // group) * group + i % group, i // group]


def _load(src):
    t = nl.ndarray(src.shape, dtype=src.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=src)
    return t


@nki.jit
def gather_copy(x, idx):
    n = idx.shape[1] * 16
    out = nl.ndarray((x.shape[0], n), dtype=x.dtype, buffer=nl.shared_hbm)
    t, it = _load(x), _load(idx)
    r = nl.ndarray((x.shape[0], n), dtype=x.dtype, buffer=nl.sbuf)
    nisa.tensor_copy(dst=r, src=t.indirect(it))  # <- gather
    nisa.dma_copy(dst=out, src=r)
    return out


@nki.jit
def gather_add(x, y, idx):
    """tensor_tensor with one indirect operand: ``out = x[:, offsets] + y``."""
    out = nl.ndarray(y.shape, dtype=y.dtype, buffer=nl.shared_hbm)
    t, u, it = _load(x), _load(y), _load(idx)
    r = nl.ndarray(y.shape, dtype=y.dtype, buffer=nl.sbuf)
    nisa.tensor_tensor(dst=r, data1=t.indirect(it, num_elem=y.shape[1]), data2=u, op=nl.add)
    nisa.dma_copy(dst=out, src=r)
    return out


@nki.jit
def scatter_copy(x, base, idx):
    """tensor_copy into an indirect dst: ``out = base; out[:, offsets] = x``."""
    out = nl.ndarray(base.shape, dtype=base.dtype, buffer=nl.shared_hbm)
    t, b, it = _load(x), _load(base), _load(idx)
    nisa.tensor_copy(dst=b.indirect(it, num_elem=x.shape[1]), src=t)  # <- scatter
    nisa.dma_copy(dst=out, src=b)
    return out


@nki.jit
def gather_matmul(a, b, idx):
    """nc_matmul with an indirect moving operand (TensorE: partition groups of 32)."""
    n = 64
    out = nl.ndarray((a.shape[1], n), dtype=nl.float32, buffer=nl.shared_hbm)
    sa, sb, it = _load(a), _load(b), _load(idx)
    acc = nl.ndarray((a.shape[1], n), dtype=nl.float32, buffer=nl.psum)
    nisa.nc_matmul(dst=acc, stationary=sa, moving=sb.indirect(it, num_elem=n))
    r = nl.ndarray((a.shape[1], n), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=r, src=acc)
    nisa.dma_copy(dst=out, src=r)
    return out


@nki.jit
def queries(x, idx):
    t, it = _load(x), _load(idx)
    v = t.indirect(it)
    assert v.is_indirect() and not t.is_indirect()
    assert tuple(v.shape) == (x.shape[0], 16 * idx.shape[1]) and v.dtype == t.dtype
    out = nl.ndarray((1, 1), dtype=x.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=t[0:1, 0:1])
    return out


def _idx(rows: int = P, cols: int = K, high: int = F) -> np.ndarray:
    return RNG.integers(0, high, (rows, cols)).astype(np.uint16)


# ---- numerics --------------------------------------------------------------------------------------------------


def test_gather_reads_the_columns_each_partition_group_names():
    x = RNG.standard_normal((P, F)).astype(np.float32)
    idx = _idx()
    out = nki.simulate(gather_copy)(x, idx)
    off = offsets_of(idx, P, 16 * K, 16)
    np.testing.assert_array_equal(out, np.take_along_axis(x, off, axis=1))
    # the 8 partition groups read different offsets (the rule is not one list for all partitions)
    assert not np.array_equal(off[0], off[16])


def test_gather_operand_of_tensor_tensor():
    x = RNG.standard_normal((P, F)).astype(np.float32)
    y = RNG.standard_normal((P, 48)).astype(np.float32)
    idx = _idx()
    out = nki.simulate(gather_add)(x, y, idx)
    np.testing.assert_allclose(out, np.take_along_axis(x, offsets_of(idx, P, 48, 16), axis=1) + y, rtol=1e-6)


def test_scatter_writes_the_columns_and_leaves_the_rest():
    x = RNG.standard_normal((P, 32)).astype(np.float32)
    base = RNG.standard_normal((P, F)).astype(np.float32)
    # distinct offsets per partition group (a scatter to one column twice has no defined winner)
    idx = np.zeros((P, 2), dtype=np.uint16)
    for g in range(P // 16):
        cols = RNG.permutation(F)[:32].astype(np.uint16)
        idx[g * 16 : (g + 1) * 16, :] = cols.reshape(2, 16).T  # offset i -> idx[g*16 + i%16, i//16]
    out = nki.simulate(scatter_copy)(x, base, idx)
    want = base.copy()
    np.put_along_axis(want, offsets_of(idx, P, 32, 16), x, axis=1)
    np.testing.assert_array_equal(out, want)


def test_tensor_engine_reads_offsets_in_groups_of_32():
    k, m = 64, 32
    a = RNG.integers(-3, 4, (k, m)).astype(np.float32)
    b = RNG.integers(-3, 4, (k, F)).astype(np.float32)
    idx = _idx(rows=k, cols=2)
    out = nki.simulate(gather_matmul)(a, b, idx)
    off32 = offsets_of(idx, k, 64, 32)
    np.testing.assert_array_equal(out, a.T @ np.take_along_axis(b, off32, axis=1))
    # read in groups of 16 the first 32 offsets would differ: the engine's group size matters
    assert not np.array_equal(offsets_of(idx, k, 32, 16), off32[:, :32])


def test_view_queries_and_shape():
    nki.simulate(queries)(RNG.standard_normal((P, F)).astype(np.float32), _idx())


def test_cost_only_run_traces_the_indirect_instruction():
    rep = devkit.estimate(
        gather_copy, nt.tensor[[P, F], nl.float32], nt.tensor[[P, K], nl.uint16], target="trn3"
    )
    assert rep.instructions == 4  # two loads, the gathering copy, the store


# ---- hazards: good/bad twins -----------------------------------------------------------------------------------


def test_out_of_bounds_offset_is_caught_at_the_instruction_line():
    x = RNG.standard_normal((P, F)).astype(np.float32)
    good = _idx(high=F)  # every offset < F
    nki.simulate(gather_copy)(x, good)
    bad = good.copy()
    bad[37, 2] = F  # one offset one past the last column (partition group 2, element 37 % 16 + 2 * 16 = 37)
    with pytest.raises(BoundsError) as e:
        nki.simulate(gather_copy)(x, bad)
    assert e.value.rule == "out-of-bounds"
    assert e.value.lineno == line_of(gather_copy, "# <- gather")
    assert f"offset {F} (index[37, 2]" in str(e.value)


def test_out_of_bounds_scatter_is_caught_at_the_instruction_line():
    x = RNG.standard_normal((P, 32)).astype(np.float32)
    base = np.zeros((P, F), np.float32)
    idx = _idx(cols=2, high=F)
    idx[5, 1] = 4000
    with pytest.raises(BoundsError) as e:
        nki.simulate(scatter_copy)(x, base, idx)
    assert e.value.lineno == line_of(scatter_copy, "# <- scatter")


@nki.jit
def indirect_on_trn2(x, idx):
    t, it = _load(x), _load(idx)
    v = t.indirect(it)  # <- v4 only
    out = nl.ndarray((P, 16 * K), dtype=x.dtype, buffer=nl.shared_hbm)
    r = nl.ndarray((P, 16 * K), dtype=x.dtype, buffer=nl.sbuf)
    nisa.tensor_copy(dst=r, src=v)
    nisa.dma_copy(dst=out, src=r)
    return out


@pytest.mark.parametrize("gen", ["gen2", "gen3"])
def test_indirect_needs_neuroncore_v4(monkeypatch, gen):
    x, idx = RNG.standard_normal((P, F)).astype(np.float32), _idx()
    monkeypatch.setenv("NKI_NC_VERSION", "gen4")
    nki.simulate(indirect_on_trn2)(x, idx)  # the twin: the same kernel on trn3
    monkeypatch.setenv("NKI_NC_VERSION", gen)
    with pytest.raises(UnsupportedError) as e:
        nki.simulate(indirect_on_trn2)(x, idx)
    assert e.value.rule == "arch" and "NeuronCore-v4" in str(e.value)
    assert e.value.lineno == line_of(indirect_on_trn2, "# <- v4 only")


@nki.jit
def indirect_into_dma(x, idx):
    t, it = _load(x), _load(idx)
    out = nl.ndarray((P, 16 * K), dtype=x.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=t.indirect(it))  # <- not a compute op
    return out


@nki.jit
def indirect_into_nl_wrapper(x, idx):
    t, it = _load(x), _load(idx)
    e = nl.exp(t.indirect(it))  # <- wrapper
    out = nl.ndarray((P, 16 * K), dtype=x.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=e)
    return out


@pytest.mark.parametrize(
    "kernel,marker",
    [(indirect_into_dma, "# <- not a compute op"), (indirect_into_nl_wrapper, "# <- wrapper")],
)
def test_only_the_listed_instructions_take_an_indirect_operand(kernel, marker):
    with pytest.raises(KernelArgumentError) as e:
        nki.simulate(kernel)(RNG.standard_normal((P, F)).astype(np.float32), _idx())
    assert e.value.rule == "indirect-operand" and e.value.lineno == line_of(kernel, marker)


@nki.jit
def bad_index(x, idx, case):
    t = _load(x)
    it = _load(idx)
    if case == "float":
        f = nl.ndarray(idx.shape, dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=f, src=it)
        t.indirect(f)  # <- index
    elif case == "quadrant":
        t.indirect(it[8:24, :])  # <- index
    elif case == "short":
        r = nl.ndarray((P, 16 * K), dtype=x.dtype, buffer=nl.sbuf)
        nisa.tensor_copy(dst=r, src=t.indirect(it[0:32, :]))  # <- index
    elif case == "again":
        t.indirect(it).indirect(it)  # <- view
    elif case == "slice":
        t.indirect(it)[:, 0:4]  # <- view
    elif case == "slice method":
        t.indirect(it).slice(1, 0, 4)  # <- view
    elif case == "ap":
        t.indirect(it).ap([[F, P], [1, 4]])  # <- view
    elif case == "operator":
        t.indirect(it) + 1.0  # <- operator
    out = nl.ndarray((1, 1), dtype=nl.float32, buffer=nl.shared_hbm)
    return out


@pytest.mark.parametrize(
    "case,rule,marker",
    [
        ("float", "indirect-index", "t.indirect(f)"),
        ("quadrant", "indirect-index", "it[8:24, :]"),
        ("short", "indirect-index", "it[0:32, :]"),
        ("again", "indirect-view", ".indirect(it).indirect(it)"),
        ("slice", "indirect-view", "[:, 0:4]"),
        ("slice method", "indirect-view", ".slice(1, 0, 4)"),
        ("ap", "indirect-view", ".ap([[F, P], [1, 4]])"),
        ("operator", "indirect-operand", "# <- operator"),
    ],
)
def test_bad_index_tensors_and_views(case, rule, marker):
    with pytest.raises(KernelArgumentError) as e:
        nki.simulate(bad_index)(RNG.standard_normal((P, F)).astype(np.float32), _idx(), case)
    assert e.value.rule == rule and e.value.lineno == line_of(bad_index, marker)
