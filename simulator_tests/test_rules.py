"""Negative tests: every instruction-level rule (reference/nki_api.md §2.8 items 1-6, 9, 10, plus the
allocation, scope and loop rules) raises its KernelError subclass, and blames the kernel's own line
(``.filename`` the module that defines the kernel -- this file, or the hazard suite whose specimen is
reused -- and ``.lineno`` the line marked ``# <- blame``)."""

from __future__ import annotations

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import numpy as np
import pytest
from _nki_support import BF16, FAST, assert_blames
from hypothesis import given
from hypothesis import strategies as st
from test_hazard_races import reduction_written_as_a_plain_assignment
from test_hazard_rules import use_after_the_loop
from test_hazard_uninit import exp_of_fresh_sbuf

import devkit
from devkit.errors import (
    BoundsError,
    CapacityError,
    DtypeError,
    ImmutableInputError,
    IndexingError,
    KernelArgumentError,
    KernelError,
    MemoryPlacementError,
    PartitionMismatchError,
    RaceError,
    ScopeError,
    TileShapeError,
    UninitializedReadError,
)

A = np.ones((128, 512), np.float32)


def _raises(cls, kernel, *args, **kwargs):
    with pytest.raises(cls) as e:
        kernel(*args, **kwargs)
    assert isinstance(e.value, KernelError)
    assert type(e.value) is cls, f"expected exactly {cls.__name__}, got {type(e.value).__name__}: {e.value}"
    assert_blames(e, kernel)
    # the message names the location too
    assert f":{e.value.lineno}:" in str(e.value)
    return e.value


# ---- 1. partition dimension <= 128 ------------------------------------------------------------------


@nki.jit
def sbuf_256_partitions(a):
    out = nl.ndarray((128, 8), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.zeros((256, 8), dtype=nl.float32, buffer=nl.sbuf)  # <- blame
    nl.store(out, value=t[0:128, :])
    return out


@nki.jit
def psum_129_partitions(a):
    out = nl.ndarray((128, 8), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.ndarray((129, 8), dtype=nl.float32, buffer=nl.psum)  # <- blame
    nl.store(out, value=t[0:128, :])
    return out


@nki.jit
def block_tensor_200_partitions(a):
    out = nl.ndarray((128, 8), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.zeros((2, nl.par_dim(200), 8), dtype=nl.float32)  # <- blame
    nl.store(out, value=t[0, 0:128, :])
    return out


@nki.jit
def load_256_partitions(a):
    out = nl.ndarray((128, 4), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.load(a)  # <- blame
    nl.store(out, value=t[0:128, :])
    return out


@nki.jit
def memset_129_partitions(a):
    out = nl.ndarray((128, 4), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nisa.memset((129, 4), 0.0, dtype=nl.float32)  # <- blame
    nl.store(out, value=t[0:128, :])
    return out


@pytest.mark.parametrize(
    "kernel",
    [sbuf_256_partitions, psum_129_partitions, block_tensor_200_partitions, memset_129_partitions],
    ids=lambda k: k.__name__,
)
def test_partition_limit_on_allocation(kernel):
    err = _raises(TileShapeError, kernel, A)
    assert "128" in str(err)


def test_partition_limit_on_load():
    _raises(TileShapeError, load_256_partitions, np.ones((256, 4), np.float32))


# ---- 2. matmul operand limits and placement --------------------------------------------------------


@nki.jit
def nc_matmul_of(s, m):
    """nisa.nc_matmul of two loaded operands: their shapes and dtypes decide which rule it breaks."""
    out = nl.ndarray((s.shape[1], m.shape[1]), dtype=nl.float32, buffer=nl.shared_hbm)
    ts, tm = nl.load(s), nl.load(m)
    res = nisa.nc_matmul(ts, tm)  # <- blame
    nl.store(out, value=res)
    return out


@nki.jit
def stationary_in_psum(s, m):
    out = nl.ndarray((64, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    ps = nl.zeros((128, 64), dtype=nl.float32, buffer=nl.psum)
    res = nisa.nc_matmul(ps, nl.load(m))  # <- blame
    nl.store(out, value=res)
    return out


@nki.jit
def moving_in_psum(s, m):
    out = nl.ndarray((64, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    ts = nl.load(s)
    ps = nl.zeros((128, 64), dtype=nl.float32, buffer=nl.psum)
    res = nl.matmul(ts, ps, transpose_x=True)  # <- blame
    nl.store(out, value=res)
    return out


@nki.jit
def nl_matmul_of(x, y):
    """nl.matmul(x, y, transpose_x=True) of two loaded operands: their shapes decide which rule it breaks."""
    out = nl.ndarray((x.shape[1], y.shape[1]), dtype=nl.float32, buffer=nl.shared_hbm)
    tx, ty = nl.load(x), nl.load(y)
    res = nl.matmul(tx, ty, transpose_x=True)  # <- blame
    nl.store(out, value=res)
    return out


@nki.jit
def matmul_into_sbuf(s, m):
    out = nl.ndarray((64, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    res = nl.ndarray((64, 64), dtype=nl.float32, buffer=nl.sbuf)
    ts, tm = nl.load(s), nl.load(m)
    res[...] = nisa.nc_matmul(ts, tm)  # <- blame
    nl.store(out, value=res)
    return out


def _bf(shape):
    return np.ones(shape, BF16)


@pytest.mark.parametrize(
    "kernel, s_shape, m_shape, rule",
    [
        (nc_matmul_of, (128, 129), (128, 64), "matmul-stationary-size"),  # free size 129 > 128
        (nc_matmul_of, (128, 64), (128, 513), "matmul-moving-size"),  # free size 513 > 512
        (nc_matmul_of, (64, 32), (128, 32), "matmul-contraction"),  # 64 != 128 partitions
        (nl_matmul_of, (64, 129), (64, 64), "matmul-stationary-size"),  # x free size 129 > 128
        (nl_matmul_of, (128, 64), (128, 600), "matmul-moving-size"),  # y free size 600 > 512
    ],
    ids=[
        "stationary-free-129",
        "moving-free-513",
        "contraction-mismatch",
        "nl-matmul-x-129",
        "nl-matmul-y-600",
    ],
)
def test_matmul_operand_size_limits(kernel, s_shape, m_shape, rule):
    assert _raises(TileShapeError, kernel, _bf(s_shape), _bf(m_shape)).rule == rule


@pytest.mark.parametrize("kernel", [stationary_in_psum, moving_in_psum], ids=lambda k: k.__name__)
def test_matmul_operands_must_be_in_sbuf(kernel):
    _raises(MemoryPlacementError, kernel, _bf((128, 64)), _bf((128, 64)))


def test_matmul_assigned_to_sbuf_lowers_to_a_psum_write_and_a_copy():
    """The TensorE writes PSUM only: assigning its result to SBUF is the PSUM write plus a copy out."""
    from devkit.nki.runner import run_kernel
    from devkit.trace import Trace

    a, b = _bf((128, 64)), _bf((128, 64))
    trace = Trace()
    out = run_kernel(matmul_into_sbuf.func, (a, b), {}, sink=trace).outputs
    ops = [(i.engine, i.opcode, i.outs[0].buffer) for i in trace.instrs if i.engine != "dma"]
    mm = next(k for k, op in enumerate(ops) if op[1] == "nc_matmul")
    assert ops[mm] == ("tensor", "nc_matmul", "psum")
    assert ops[mm + 1][1] == "tensor_copy" and ops[mm + 1][2] == "sbuf"
    ref = a.astype(np.float32).T @ b.astype(np.float32)
    np.testing.assert_allclose(np.asarray(out, dtype=np.float32), ref, rtol=1e-2, atol=1e-2)


def test_matmul_operand_dtypes():
    _raises(DtypeError, nc_matmul_of, np.ones((128, 64), np.int32), np.ones((128, 64), np.int32))


# ---- 3. PSUM tile <= 2 KiB per partition ------------------------------------------------------------


@nki.jit
def psum_tile_513_fp32(a):
    out = nl.ndarray((128, 8), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.zeros((128, 513), dtype=nl.float32, buffer=nl.psum)  # <- blame
    nl.store(out, value=t[:, 0:8])
    return out


@nki.jit
def psum_tile_2_by_300_fp32(a):
    out = nl.ndarray((128, 8), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.ndarray((128, 2, 300), dtype=nl.float32, buffer=nl.psum)  # <- blame
    nl.store(out, value=t[:, 0, 0:8])
    return out


@nki.jit
def psum_block_tile_ok_but_tile_too_big(a):
    out = nl.ndarray((128, 8), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.zeros((2, nl.par_dim(128), 1025), dtype=nl.bfloat16, buffer=nl.psum)  # <- blame
    nl.store(out, value=t[0, :, 0:8])
    return out


@pytest.mark.parametrize(
    "kernel",
    [psum_tile_513_fp32, psum_tile_2_by_300_fp32, psum_block_tile_ok_but_tile_too_big],
    ids=lambda k: k.__name__,
)
def test_psum_tile_fits_one_bank(kernel):
    err = _raises(CapacityError, kernel, A)
    assert err.rule == "psum-tile-size"


def test_psum_tile_of_exactly_one_bank_is_fine():
    @nki.jit
    def k(a):
        out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
        t = nl.zeros((2, nl.par_dim(128), 512), dtype=nl.float32, buffer=nl.psum)
        nl.store(out, value=t[1])
        return out

    np.testing.assert_array_equal(k(A), 0.0)


# ---- 4. buffer legality: compute never on HBM, load from HBM, store to HBM --------------------------


@nki.jit
def exp_on_hbm(a):
    out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.exp(a)  # <- blame
    nl.store(out, value=t)
    return out


@nki.jit
def tensor_tensor_on_hbm(a):
    out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.load(a)
    r = nisa.tensor_tensor(t, a, op=np.add)  # <- blame
    nl.store(out, value=r)
    return out


@nki.jit
def activation_on_hbm(a):
    out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    scratch = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.hbm)
    nl.store(scratch, value=nl.load(a))
    r = nisa.activation(op=nl.exp, data=scratch)  # <- blame
    nl.store(out, value=r)
    return out


@nki.jit
def matmul_on_hbm(a):
    out = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.shared_hbm)
    r = nisa.nc_matmul(a[:, 0:128], nl.load(a))  # <- blame
    nl.store(out, value=r)
    return out


@nki.jit
def load_from_sbuf(a):
    out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.load(a)
    u = nl.load(t)  # <- blame
    nl.store(out, value=u)
    return out


@nki.jit
def store_to_sbuf(a):
    out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.load(a)
    u = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)
    nl.store(u, value=t)  # <- blame
    nl.store(out, value=u)
    return out


@nki.jit
def store_to_psum(a):
    out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    u = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum)
    nl.store(u, value=nl.load(a))  # <- blame
    nl.store(out, value=u)
    return out


@pytest.mark.parametrize(
    "kernel",
    [
        exp_on_hbm,
        tensor_tensor_on_hbm,
        activation_on_hbm,
        matmul_on_hbm,
        load_from_sbuf,
        store_to_sbuf,
        store_to_psum,
    ],
    ids=lambda k: k.__name__,
)
def test_buffer_legality(kernel):
    _raises(MemoryPlacementError, kernel, A if kernel is not matmul_on_hbm else A[:, :128].astype(BF16))


# ---- 5. partition-count agreement --------------------------------------------------------------------


@nki.jit
def tensor_tensor_partition_mismatch(a, b):
    out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    x, y = nl.load(a), nl.load(b)
    r = nisa.tensor_tensor(x, y, op=nl.add)  # <- blame
    nl.store(out, value=r)
    return out


@nki.jit
def tensor_scalar_partition_mismatch(a, b):
    out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    x, y = nl.load(a), nl.load(b)
    r = nisa.tensor_scalar(x, np.multiply, y[0:64, 0:1])  # <- blame
    nl.store(out, value=r)
    return out


@nki.jit
def find_index8_partition_mismatch(a, b):
    out = nl.ndarray((128, 8), dtype=nl.uint32, buffer=nl.shared_hbm)
    x, y = nl.load(a), nl.load(b)
    r = nisa.nc_find_index8(data=x, vals=y[0:64, 0:8])  # <- blame
    nl.store(out, value=r)
    return out


@pytest.mark.parametrize(
    "kernel",
    [tensor_tensor_partition_mismatch, tensor_scalar_partition_mismatch, find_index8_partition_mismatch],
    ids=lambda k: k.__name__,
)
def test_partition_count_mismatch(kernel):
    b = np.ones((64, 512), np.float32) if kernel is tensor_tensor_partition_mismatch else A
    _raises(PartitionMismatchError, kernel, A, b)


# ---- 6. GpSimd cannot access PSUM; tensor_tensor inputs not both in PSUM -------------------------------


@nki.jit
def gpsimd_reads_psum(a):
    out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    ps = nl.zeros((128, 512), dtype=nl.float32, buffer=nl.psum)
    r = nisa.tensor_copy(ps, engine=nisa.gpsimd_engine)  # <- blame
    nl.store(out, value=r)
    return out


@nki.jit
def tensor_tensor_both_psum(a):
    out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    p1 = nl.zeros((128, 512), dtype=nl.float32, buffer=nl.psum)
    p2 = nl.zeros((128, 512), dtype=nl.float32, buffer=nl.psum)
    r = nisa.tensor_tensor(p1, p2, op=np.add)  # <- blame
    nl.store(out, value=r)
    return out


@pytest.mark.parametrize("kernel", [gpsimd_reads_psum, tensor_tensor_both_psum], ids=lambda k: k.__name__)
def test_psum_access_rules(kernel):
    _raises(MemoryPlacementError, kernel, A)


# ---- 9. reductions on free axes, bn_stats and transpose limits ----------------------------------------


@nki.jit
def reduce_partition_axis(a):
    out = nl.ndarray((1, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.load(a)
    r = nl.sum(t, axis=0)  # <- blame
    nl.store(out, value=r)
    return out


@nki.jit
def tensor_reduce_partition_axis(a):
    out = nl.ndarray((1, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.load(a)
    r = nisa.tensor_reduce(np.add, t, axis=(0,))  # <- blame
    nl.store(out, value=r)
    return out


@nki.jit
def bn_stats_too_wide(a):
    out = nl.ndarray((128, 6), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.load(a)
    r = nisa.bn_stats(t)  # <- blame
    nl.store(out, value=r)
    return out


@nki.jit
def tensor_engine_transpose_too_big(a):
    out = nl.ndarray((129, 128), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.load(a)
    r = nisa.nc_transpose(t, engine=nisa.tensor_engine)  # <- blame
    nl.store(out, value=r)
    return out


@nki.jit
def vector_engine_transpose_too_big(a):
    out = nl.ndarray((32, 33), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.load(a)
    r = nisa.nc_transpose(t, engine=nisa.vector_engine)  # <- blame
    nl.store(out, value=r)
    return out


@nki.jit
def nl_transpose_too_big(a):
    out = nl.ndarray((512, 128), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.load(a)
    r = nl.transpose(t)  # <- blame
    nl.store(out, value=r)
    return out


@nki.jit
def nl_transpose_rank3(a):
    out = nl.ndarray((64, 32, 2), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.zeros((64, 32, 2), dtype=nl.float32)
    r = nl.transpose(t)  # <- blame
    nl.store(out, value=r)
    return out


def test_reductions_only_on_free_axes():
    _raises(IndexingError, reduce_partition_axis, A)
    _raises(IndexingError, tensor_reduce_partition_axis, A)


def test_bn_stats_free_size_limit():
    _raises(TileShapeError, bn_stats_too_wide, np.ones((128, 513), np.float32))


@pytest.mark.parametrize(
    ("kernel", "shape"),
    [
        (tensor_engine_transpose_too_big, (128, 129)),
        (vector_engine_transpose_too_big, (33, 32)),
        (nl_transpose_too_big, (128, 512)),
        (nl_transpose_rank3, (1, 1)),
    ],
    ids=lambda k: getattr(k, "__name__", ""),
)
def test_transpose_limits(kernel, shape):
    _raises(TileShapeError, kernel, np.ones(shape, np.float32))


# ---- 10. activation bias / scale shapes and dtypes ----------------------------------------------------


def _act_kernel(bias_shape, bias_dtype, scale_shape, scale_dtype):
    @nki.jit
    def k(a):
        out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
        t = nl.load(a)
        b = nisa.memset(bias_shape, 0.5, dtype=bias_dtype) if bias_shape else None
        s = nisa.memset(scale_shape, 2.0, dtype=scale_dtype) if scale_shape else 1.0
        r = nisa.activation(op=nl.exp, data=t, bias=b, scale=s)  # <- blame
        nl.store(out, value=r)
        return out

    return k


@pytest.mark.parametrize(
    ("bias_shape", "scale_shape"),
    [
        ((1, 128), None),
        ((128, 2), None),
        ((128, 512), None),
        (None, (1, 128)),
        (None, (128, 128)),
        (None, (64, 1)),
    ],
)
def test_activation_bias_and_scale_shapes(bias_shape, scale_shape):
    k = _act_kernel(bias_shape, nl.float32, scale_shape, nl.float32)
    cls = PartitionMismatchError if scale_shape == (64, 1) else TileShapeError
    _raises(cls, k, A)


@pytest.mark.parametrize(
    ("bias_dtype", "scale_dtype"),
    [(nl.int8, None), (nl.int32, None), (None, nl.float16), (None, nl.bfloat16)],
)
def test_activation_bias_and_scale_dtypes(bias_dtype, scale_dtype):
    k = _act_kernel(
        (128, 1) if bias_dtype else None, bias_dtype, (128, 1) if scale_dtype else None, scale_dtype
    )
    _raises(DtypeError, k, A)


@pytest.mark.parametrize("bias_dtype", [nl.float32, nl.float16, nl.bfloat16])
def test_activation_legal_bias_dtypes(bias_dtype):
    k = _act_kernel((128, 1), bias_dtype, (128, 1), nl.float32)
    np.testing.assert_allclose(k(A), np.exp(np.float32(2.0) + np.float32(0.5)), rtol=1e-6)


@nki.jit
def reciprocal_with_bias_on_trn1(a):
    out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    b = nisa.memset((128, 1), 1.0, dtype=nl.float32)
    r = nisa.activation(op=nl.reciprocal, data=nl.load(a), bias=b)  # <- blame
    nl.store(out, value=r)
    return out


def test_activation_reciprocal_takes_no_bias_on_trn1():
    _raises(KernelArgumentError, reciprocal_with_bias_on_trn1, A)
    got = devkit.simulate(reciprocal_with_bias_on_trn1, A, target="trn2")
    np.testing.assert_allclose(got, 0.5)


# ---- allocation, scope, initialisation and loop rules -------------------------------------------------
# (the uninitialised read, use out of scope and affine-range race specimens are the hazard suites' own,
# imported above: one kernel per fault, blamed on its line in the module that defines it)


@nki.jit
def one_dim_sbuf_tile(a):
    out = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.zeros((128,), dtype=nl.float32)  # <- blame
    nl.store(out, value=t)
    return out


@nki.jit
def shared_hbm_in_loop(a):
    for _i in nl.affine_range(2):
        out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)  # <- blame
        nl.store(out, value=nl.load(a))
    return out


@nki.jit
def store_into_input(a):
    nl.store(a, value=nl.load(a))  # <- blame
    return a


@nki.jit
def static_oob_index(a):
    out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    i_p, i_f = nl.mgrid[0:128, 0:520]
    t = nl.load(a[i_p, i_f])  # <- blame
    nl.store(out, value=t[:, 0:512])
    return out


@nki.jit
def unknown_dtype(a):
    out = nl.ndarray((128, 512), dtype=np.float64, buffer=nl.shared_hbm)  # <- blame
    return out


@pytest.mark.parametrize(
    ("kernel", "cls"),
    [
        (one_dim_sbuf_tile, TileShapeError),
        (shared_hbm_in_loop, KernelArgumentError),
        (store_into_input, ImmutableInputError),
        (exp_of_fresh_sbuf, UninitializedReadError),
        (use_after_the_loop, ScopeError),
        (reduction_written_as_a_plain_assignment, RaceError),
        (static_oob_index, BoundsError),
        (unknown_dtype, DtypeError),
    ],
    ids=lambda v: getattr(v, "__name__", ""),
)
def test_other_kernel_rules(kernel, cls):
    _raises(cls, kernel, A)


def test_sequential_range_allows_the_same_loop_carried_update():
    @nki.jit
    def k(a):
        out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
        acc = nl.zeros((128, 512), dtype=nl.float32)
        for _i in nl.sequential_range(4):
            acc[...] = nl.add(acc, nl.load(a))
        nl.store(out, value=acc)
        return out

    np.testing.assert_array_equal(k(A), 4.0)


def test_errors_blame_the_kernel_line_inside_helper_functions():
    """A helper called from the kernel: the innermost user frame (the helper's line) is blamed."""

    def helper(t):
        return nl.exp(t)  # <- blame

    @nki.jit
    def k(a):
        out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out, value=helper(a))
        return out

    with pytest.raises(MemoryPlacementError) as e:
        k(A)
    assert_blames(e, helper)


# ---- capacity: the allocation that overflows is blamed --------------------------------------------


@nki.jit
def nine_live_psum_banks(a):
    out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    x = nl.load(a[:, 0:128])
    y = nl.load(a)
    tiles = [nl.zeros((128, 512), dtype=nl.float32, buffer=nl.psum) for _ in range(8)]
    ninth = nl.zeros((128, 512), dtype=nl.float32, buffer=nl.psum)  # <- blame
    for t in [*tiles, ninth]:
        t += nisa.nc_matmul(x, y)  # nine matmul accumulation tiles...
    total = nl.copy(ninth)
    for t in tiles:
        total = nl.add(total, t)  # ...all read here, so all live at once
    nl.store(out, value=total)
    return out


@nki.jit
def sbuf_tile_larger_than_a_partition(a):
    out = nl.ndarray((128, 8), dtype=nl.float32, buffer=nl.shared_hbm)
    big = nl.zeros((128, 60000), dtype=nl.float32, buffer=nl.sbuf)  # <- blame
    nl.store(out, value=big[:, 0:8])
    return out


@pytest.mark.parametrize(
    "kernel", [nine_live_psum_banks, sbuf_tile_larger_than_a_partition], ids=lambda k: k.__name__
)
def test_capacity_faults_blame_the_allocation(kernel):
    _raises(CapacityError, kernel, A)


def test_psum_banks_are_reused_after_a_tile_dies():
    @nki.jit
    def k(a):
        out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
        acc = nl.zeros((128, 512), dtype=nl.float32)
        for _i in nl.sequential_range(20):
            ps = nl.zeros((128, 512), dtype=nl.float32, buffer=nl.psum)
            ps[...] = nl.load(a)
            acc[...] = nl.add(acc, ps)
        nl.store(out, value=acc)
        return out

    np.testing.assert_array_equal(k(A), 20.0)


# ---- the limits exactly at their boundaries --------------------------------------------------------


@FAST
@given(
    p=st.integers(1, 300), f=st.integers(1, 1100), dtype=st.sampled_from([nl.float32, nl.bfloat16, nl.int32])
)
def test_psum_and_partition_limits_at_the_boundary(p, f, dtype):
    @nki.jit
    def k(a):
        out = nl.ndarray((1, 1), dtype=nl.float32, buffer=nl.shared_hbm)
        t = nl.zeros((p, f), dtype=dtype, buffer=nl.psum)  # <- blame
        nl.store(out, value=nl.copy(t[0:1, 0:1], dtype=nl.float32))
        return out

    too_many_partitions = p > 128
    too_wide = f * np.dtype(dtype).itemsize > 2048
    if too_many_partitions:
        _raises(TileShapeError, k, A)
    elif too_wide:
        _raises(CapacityError, k, A)
    else:
        np.testing.assert_array_equal(k(A), 0.0)


@FAST
@given(k_=st.integers(1, 200), m=st.integers(1, 200), n=st.integers(1, 700))
def test_matmul_limits_at_the_boundary(k_, m, n):
    @nki.jit
    def kern(s, mv):
        out = nl.ndarray((m, n), dtype=nl.float32, buffer=nl.shared_hbm)
        res = nisa.nc_matmul(s[...], mv[...])  # <- blame
        nl.store(out, value=res)
        return out

    @nki.jit
    def load_then_matmul(s, mv):
        ts = nl.load(s)
        tm = nl.load(mv)
        return kern.func(ts, tm)

    s, mv = _bf((k_, m)), _bf((k_, n))
    if k_ > 128:
        with pytest.raises(TileShapeError):
            load_then_matmul(s, mv)
    elif m > 128 or n > 512:
        with pytest.raises(TileShapeError) as e:
            load_then_matmul(s, mv)
        assert_blames(e, kern)
    else:
        np.testing.assert_array_equal(load_then_matmul(s, mv), float(k_))


@nki.jit
def affine_range_true_dependency(a):
    out = nl.ndarray((128, 8), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.zeros((128, 8), dtype=nl.float32)
    for i in nl.affine_range(7):
        t[:, i + 1 : i + 2] = nl.add(t[:, i : i + 1], 1.0)  # <- blame
    nl.store(out, value=t)
    return out


def test_affine_range_loop_carried_read_is_a_race():
    _raises(RaceError, affine_range_true_dependency, A)


def test_the_same_recurrence_in_sequential_range_is_legal():
    @nki.jit
    def k(a):
        out = nl.ndarray((128, 8), dtype=nl.float32, buffer=nl.shared_hbm)
        t = nl.zeros((128, 8), dtype=nl.float32)
        for i in nl.sequential_range(7):
            t[:, i + 1 : i + 2] = nl.add(t[:, i : i + 1], 1.0)
        nl.store(out, value=t)
        return out

    np.testing.assert_array_equal(k(A), np.broadcast_to(np.arange(8, dtype=np.float32), (128, 8)))


@pytest.mark.parametrize("runner", ["simulate_kernel", "devkit.simulate", "grid", "trn2"])
def test_blame_is_the_same_through_every_runner(runner):
    with pytest.raises(MemoryPlacementError) as e:
        if runner == "simulate_kernel":
            nki.simulate_kernel(exp_on_hbm, A)
        elif runner == "devkit.simulate":
            devkit.simulate(exp_on_hbm, A)
        elif runner == "grid":
            exp_on_hbm[2, 2](A)
        else:
            devkit.simulate(exp_on_hbm, A, target="trn2")
    assert_blames(e, exp_on_hbm)
