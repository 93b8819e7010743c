"""Issue 12, hazards in NKI 0.x (Beta 2) kernels: each buggy kernel has a passing twin; the error class, the
rule and the blamed kernel line (``# <- blame``) are asserted.

Differences from Beta 1 exercised here: ``nl.affine_range`` is an alias of ``range`` (a loop-carried write
is legal, not a race); instructions write ``dst`` and unknown keyword arguments or enums given as plain ints
are rejected (NKI 0.2/0.3).
"""

from __future__ import annotations

import inspect
import os
import warnings

import _beta2_support as b2
import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np
import pytest
from _nki_support import assert_blames, line_of

from devkit.errors import (
    BoundsError,
    CapacityError,
    DtypeError,
    KernelArgumentError,
    MemoryPlacementError,
    SpillWarning,
    TileShapeError,
    UninitializedReadError,
)
from devkit.nki.beta2._convention import _member

A = np.linspace(-1, 1, 128 * 64, dtype=np.float32).reshape(128, 64)


def fails(kernel, cls, rule, *args):
    """:func:`_beta2_support.fails` on ``A`` unless other arguments are given."""
    return b2.fails(kernel, cls, rule, *(args or (A,)))


def runs(kernel, *args):
    return nki.simulate(kernel)(*(args or (A,)))


# ---- bounds ------------------------------------------------------------------------------------------------


@nki.jit
def load_past_the_end(a, rows=200):
    t = nl.ndarray((128, 64), dtype=a.dtype, buffer=nl.sbuf)
    src = a[rows - 128 : rows, :]  # a view of HBM past its end is not an access yet ...
    nisa.dma_copy(t, src)  # <- blame  (... the DMA that reads it is, as oob_mode is the instruction's)
    return t


def test_bounds():
    fails(load_past_the_end, BoundsError, "out-of-bounds")
    assert runs(load_past_the_end, A, 128).shape == (128, 64)


@nki.jit
def ap_past_the_end(a, extra=1):
    t = nl.ndarray((128, 64), dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(t, a.ap(pattern=[[64, 128], [1, 64]], offset=extra))  # <- blame
    out = nl.ndarray((128, 64), dtype=a.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(out, t)
    return out


def test_access_pattern_bounds():
    err = fails(ap_past_the_end, BoundsError, "out-of-bounds")
    assert "8192" in str(err)
    np.testing.assert_array_equal(runs(ap_past_the_end, A, 0), A)


# ---- uninitialised reads ------------------------------------------------------------------------------------


@nki.jit
def reads_unwritten(a, write=False):
    t = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
    if write:
        nisa.memset(t, 0.0)
    u = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(u, t)  # <- blame
    return u


def test_uninitialised_read():
    fails(reads_unwritten, UninitializedReadError, "uninitialized-read")
    runs(reads_unwritten, A, True)


@nki.jit
def accumulates_onto_unwritten_psum(a, first=True):
    s = nl.ndarray((128, 64), dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(s, a)
    acc = nl.ndarray((64, 64), dtype=nl.float32, buffer=nl.psum)
    if not first:
        nisa.nc_matmul(acc, s, s)
    nisa.nc_matmul(acc, s, s, accumulate=True)  # <- blame
    return acc


def test_explicit_accumulate_onto_unwritten_psum():
    """AWS's simulator warns (undefined on hardware); the kit reports it as an uninitialised read."""
    fails(accumulates_onto_unwritten_psum, UninitializedReadError, "uninitialized-read")
    runs(accumulates_onto_unwritten_psum, A, False)


# ---- operand placement ----------------------------------------------------------------------------------------


@nki.jit
def compute_on_hbm(a, load=False):
    t = nl.ndarray((128, 64), dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(t, a)
    src = t if load else a
    u = nl.ndarray((128, 64), dtype=a.dtype, buffer=nl.sbuf)
    nisa.tensor_tensor(u, src, t, nl.add)  # <- blame
    return u


def test_compute_engine_operand_in_hbm():
    fails(compute_on_hbm, MemoryPlacementError, "operand-in-hbm")
    runs(compute_on_hbm, A, True)


@nki.jit
def matmul_into_sbuf(a, buffer=nl.sbuf):
    s = nl.ndarray((128, 64), dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(s, a)
    acc = nl.ndarray((64, 64), dtype=nl.float32, buffer=buffer)
    nisa.nc_matmul(acc, s, s)  # <- blame
    return acc


def test_matmul_dst_must_be_psum():
    fails(matmul_into_sbuf, MemoryPlacementError, "dst-placement")
    runs(matmul_into_sbuf, A, nl.psum)


@nki.jit
def dma_from_psum(a, via_sbuf=False):
    s = nl.ndarray((128, 64), dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(s, a)
    acc = nl.ndarray((64, 64), dtype=nl.float32, buffer=nl.psum)
    nisa.nc_matmul(acc, s, s)
    src = acc
    if via_sbuf:
        src = nl.ndarray((64, 64), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(src, acc)
    out = nl.ndarray((64, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    nisa.dma_copy(out, src)  # <- blame
    return out


def test_dma_cannot_read_psum():
    fails(dma_from_psum, MemoryPlacementError, "dma-psum")
    np.testing.assert_allclose(runs(dma_from_psum, A, True), A.T @ A, rtol=1e-5, atol=1e-5)


# ---- shape and dtype rules ------------------------------------------------------------------------------------


@nki.jit
def matmul_contraction_mismatch(a, k=64):
    s = nl.ndarray((128, 64), dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(s, a)
    acc = nl.ndarray((64, 64), dtype=nl.float32, buffer=nl.psum)
    nisa.nc_matmul(acc, s[0:k, :], s)  # <- blame
    return acc


def test_matmul_contraction_dims_must_agree():
    fails(matmul_contraction_mismatch, TileShapeError, "matmul-contraction")
    runs(matmul_contraction_mismatch, A, 128)


@nki.jit
def dst_too_small(a, cols=32):
    s = nl.ndarray((128, 64), dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(s, a)
    u = nl.ndarray((128, cols), dtype=a.dtype, buffer=nl.sbuf)
    nisa.tensor_scalar(u, s, nl.multiply, 2.0)  # <- blame
    return u


def test_dst_must_hold_the_result():
    fails(dst_too_small, TileShapeError, "dst-shape")
    runs(dst_too_small, A, 64)


@nki.jit
def bf16_matmul_result(a, dtype=nl.bfloat16):
    s = nl.ndarray((128, 64), dtype=nl.bfloat16, buffer=nl.sbuf)
    nisa.dma_copy(s, a)
    acc = nl.ndarray((64, 64), dtype=dtype, buffer=nl.psum)
    nisa.nc_matmul(acc, s, s)  # <- blame
    return acc


def test_matmul_psum_dtype_depends_on_the_generation(monkeypatch):
    monkeypatch.setenv("NKI_NC_VERSION", "gen3")
    fails(bf16_matmul_result, DtypeError, "matmul-dst-dtype")
    runs(bf16_matmul_result, A, nl.float32)
    monkeypatch.setenv("NKI_NC_VERSION", "gen4")  # NeuronCore-v4 writes bf16 matmul results
    runs(bf16_matmul_result, A)


@nki.jit
def hwdge_cast(a, dtype=nl.bfloat16):
    s = nl.ndarray((128, 64), dtype=dtype, buffer=nl.sbuf)
    nisa.dma_copy(s, a, dge_mode=nisa.dge_mode.hwdge)  # <- blame
    return s


def test_hwdge_dma_cannot_cast():
    fails(hwdge_cast, DtypeError, "hwdge-cast")
    runs(hwdge_cast, A, nl.float32)


# ---- calling convention -----------------------------------------------------------------------------------------


@nki.jit
def unknown_keyword(a, bad=True):
    s = nl.ndarray((128, 64), dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(s, a)
    u = nl.ndarray((128, 64), dtype=a.dtype, buffer=nl.sbuf)
    kwargs = {"mask": None} if bad else {}
    nisa.tensor_copy(dst=u, src=s, **kwargs)  # <- blame
    return u


def test_unknown_keyword_arguments_are_rejected():
    err = fails(unknown_keyword, KernelArgumentError, "bad-arguments")
    assert "mask" in str(err)
    runs(unknown_keyword, A, False)


@nki.jit
def enum_value(a, mode="skip"):
    s = nl.ndarray((128, 64), dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(s, a, oob_mode=mode)  # <- blame
    return s


def test_enums_are_members_or_their_integer_values():
    """NKI 0.3.0 documents enums by member only, but nki-library passes ``dge_mode=3``: integers equal to a
    member's value are accepted (real code is the arbiter); anything else is an error."""
    err = fails(enum_value, KernelArgumentError, "enum-by-member")
    assert "error=0, skip=1" in str(err)
    runs(enum_value, A, nisa.oob_mode.error)
    runs(enum_value, A, 0)
    fails(enum_value, KernelArgumentError, "enum-by-member", A, 7)


@nki.jit
def matmul_perf_mode(a, mode="none"):
    s = nl.ndarray((128, 64), dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(s, a)
    acc = nl.ndarray((64, 64), dtype=nl.float32, buffer=nl.psum)
    nisa.nc_matmul(acc, s, s, perf_mode=mode)  # <- blame
    out = nl.ndarray((64, 64), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(out, acc)
    return out


def test_enums_with_string_values_accept_the_value():
    """nki-library's MLP-CTE passes ``perf_mode='double_row'`` / ``'none'`` (mlp_cte_projection.py:426): a string
    equal to a member's value is that member; other strings stay errors."""
    want = A.T.astype(np.float64) @ A
    for mode in ("none", nisa.matmul_perf_mode.none):
        got = nki.simulate(matmul_perf_mode)(A, mode)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)
    err = fails(matmul_perf_mode, KernelArgumentError, "enum-by-member", A, "fast")
    assert "none='none', double_row='double_row'" in str(err)
    assert _member("double_row", nisa.matmul_perf_mode, "nisa.nc_matmul", "perf_mode") is (
        nisa.matmul_perf_mode.double_row
    )


# ---- PSUM banks -------------------------------------------------------------------------------------------------


@nki.jit
def many_accumulators(a, n=9):
    s = nl.ndarray((128, 64), dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(s, a)
    accs = []
    for _ in nl.affine_range(n):
        acc = nl.ndarray((64, 512), dtype=nl.float32, buffer=nl.psum)  # <- blame
        nisa.nc_matmul(acc[:, 0:64], s, s)  # opens an accumulation group
        accs.append(acc)
    for acc in accs:
        nisa.nc_matmul(acc[:, 0:64], s, s)  # accumulates: all n groups were open until here
    out = nl.ndarray((64, 64), dtype=nl.float32, buffer=nl.sbuf)
    for acc in accs:
        nisa.tensor_copy(out, acc[:, 0:64])
    return out


def test_psum_banks():
    """Eight 2 KiB PSUM banks: a ninth accumulation group open at once does not fit."""
    err = fails(many_accumulators, CapacityError, "psum-capacity")
    assert "9 PSUM banks of matmul accumulation groups are open at once" in str(err)
    runs(many_accumulators, A, 8)


@nki.jit
def one_group_at_a_time(a, n=12):
    """nki-library's moe_cte gate/up projection (``bwmm_shard_on_I.py:995-1080``) in small: each PSUM tile's
    accumulation finishes before the next one starts, and all of them are read afterwards."""
    s = nl.ndarray((128, 64), dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(s, a)
    accs = []
    for _ in range(n):
        acc = nl.ndarray((64, 512), dtype=nl.float32, buffer=nl.psum)  # <- spill
        for _k in range(2):
            nisa.nc_matmul(acc[:, 0:64], s, s)  # the group closes with its last matmul
        accs.append(acc)
    total = nl.ndarray((64, 64), dtype=nl.float32, buffer=nl.sbuf)
    nisa.memset(total, 0.0)
    for acc in accs:  # n finished results live at once: more than the 8 banks, spilled to SBUF
        nisa.tensor_tensor(total, total, acc[:, 0:64], nl.add)
    return b2.to_hbm(total)


def test_finished_accumulation_groups_beyond_the_banks_spill():
    """Only open accumulation groups are pinned to PSUM: twelve groups closed one after another and read
    later are finished results, which the compiler moves to SBUF (a SpillWarning on the allocation that
    went over), as nki-library @d2ad3a5's moe_cte kernel does on LNC 2 (docs/errors.md, psum-capacity)."""
    with pytest.warns(SpillWarning, match=r"12 PSUM banks of tiles are live at once") as rec:
        got = runs(one_group_at_a_time)
    (w,) = [w for w in rec if issubclass(w.category, SpillWarning)]
    assert os.path.samefile(w.filename, inspect.getsourcefile(one_group_at_a_time.func))
    assert w.lineno == line_of(one_group_at_a_time, "# <- spill")
    np.testing.assert_allclose(got, 12 * 2 * (A.T @ A), rtol=1e-5, atol=1e-4)
    with warnings.catch_warnings():
        warnings.simplefilter("error", SpillWarning)
        runs(one_group_at_a_time, A, 8)  # eight finished results fit the banks


def test_finished_groups_beyond_the_banks_are_an_error_with_strict_capacity(monkeypatch):
    monkeypatch.setenv("DEVKIT_STRICT_CAPACITY", "1")
    with pytest.raises(CapacityError) as e:
        runs(one_group_at_a_time)
    assert e.value.rule == "psum-capacity" and "strict_capacity is on" in str(e.value)
    assert_blames(e, one_group_at_a_time, "# <- spill")


# ---- affine_range is range ---------------------------------------------------------------------------------------


@nki.jit
def loop_carried_update(a):
    t = nl.ndarray((128, 64), dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(t, a)
    for _ in nl.affine_range(4):
        nisa.tensor_scalar(t, t, nl.multiply, 2.0)  # every iteration reads what the previous one wrote
    out = nl.ndarray((128, 64), dtype=a.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(out, t)
    return out


def test_loop_carried_writes_in_affine_range_are_legal():
    np.testing.assert_array_equal(runs(loop_carried_update), A * 16)
