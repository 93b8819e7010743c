"""Never-written HBM scratch loaded on chip (docs/errors.md, ``uninitialized-read``).

A load from kernel-allocated HBM (``nl.hbm`` / ``private_hbm`` scratch, an output not yet written) carries its
never-written elements into SBUF like an on-chip move does: the error comes where they are *observed* (stored to
HBM, used as an offset, read by an instruction without a dataflow rule), blamed on the first computation on them.
A load that reads nothing but never-written elements stays an error at the load.

A never-written predicate of ``tensor_copy_predicated`` / condition of ``nl.where`` makes its result element
never-written only where the two candidates differ: where they hold the same value the predicate cannot change
the result.  The case that motivated this: nki-library @d2ad3a5 ``moe_cte/bwmm_shard_on_block.py`` stores
per-block "same expert as the previous block" flags to ``private_hbm`` scratch, computing one flag fewer than it
loads back for program 1 when the block count is even; the flag feeds ``tensor_copy_predicated`` (``expert =
skip ? E : expert``) whose result is a DMA ``scalar_offset`` (:func:`b2_skip_flags` keeps that shape).

Good/bad twins in both generations, asserting error class, rule and line.
"""

from __future__ import annotations

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import nki as nki2
import nki.isa as nisa2
import nki.language as nl2
import numpy as np
from _nki_support import names_observer, simulate_raises, uninit_raises

import devkit
from devkit.errors import UninitializedReadError

N_EXPERTS = 4
WEIGHTS = np.arange(N_EXPERTS * 4 * 16, dtype=np.float32).reshape(N_EXPERTS, 4, 16)
BLOCK_EXPERT = np.array([[0, 0, 1, 2, 2, 3, 3, 3]], dtype=np.int32)


# ---- NKI 0.x: the moe_cte shape -------------------------------------------------------------------------------


@nki2.jit
def b2_skip_flags(block_expert, weights, n_used):
    """Flags for blocks 0..n-2 stored to private HBM, all n loaded back; ``expert = flag ? E : expert``; the
    first ``n_used`` experts select weights through a DMA scalar offset (the one-element copy of the expert
    that feeds the offset already observes it: it moves nothing but never-written data)."""
    n = block_expert.shape[1]
    e_count = weights.shape[0]
    flags_hbm = nl2.ndarray((1, n), dtype=nl2.uint8, buffer=nl2.private_hbm)
    flags = nl2.ndarray((1, n), dtype=nl2.uint8, buffer=nl2.sbuf)
    nisa2.memset(flags, 0)
    nisa2.dma_copy(dst=flags_hbm[0:1, 0 : n - 1], src=flags[0:1, 0 : n - 1])  # the last flag is never stored
    skip = nl2.ndarray((1, n), dtype=nl2.uint8, buffer=nl2.sbuf)
    nisa2.dma_copy(dst=skip, src=flags_hbm)  # carries the never-written flag
    expert = nl2.ndarray((1, n), dtype=nl2.int32, buffer=nl2.sbuf)
    nisa2.dma_copy(dst=expert, src=block_expert)
    on_true = nl2.ndarray((1, n), dtype=nl2.int32, buffer=nl2.sbuf)
    nisa2.memset(on_true, e_count)
    nisa2.tensor_copy_predicated(dst=expert, src=on_true, predicate=skip)  # <- blame
    out = nl2.ndarray((n_used, 4, 16), dtype=weights.dtype, buffer=nl2.shared_hbm)
    for i in range(n_used):
        e = nl2.ndarray((1, 1), dtype=nl2.int32, buffer=nl2.sbuf)
        nisa2.tensor_copy(dst=e, src=expert[0:1, i : i + 1])  # <- observed (moves only never-written data)
        w = nl2.ndarray((4, 16), dtype=weights.dtype, buffer=nl2.sbuf)
        nisa2.dma_copy(
            dst=w,
            src=weights.ap(pattern=[[16, 4], [1, 16]], offset=0, scalar_offset=e, indirect_dim=0),
        )
        nisa2.dma_copy(dst=out[i], src=w)
    return out


def test_b2_never_written_scratch_flag_only_for_a_block_not_processed():
    got = nki2.simulate(b2_skip_flags)(BLOCK_EXPERT, WEIGHTS, 7)
    np.testing.assert_array_equal(got, WEIGHTS[BLOCK_EXPERT[0, :7]])


def test_b2_never_written_scratch_flag_deciding_an_offset_is_an_error():
    err = uninit_raises(b2_skip_flags, BLOCK_EXPERT, WEIGHTS, 8)
    assert "private_hbm tensor [1, 8] uint8" in str(err), err  # the scratch the flag came from
    names_observer(err, b2_skip_flags, "# <- observed")


@nki2.jit
def b2_skip_flags_stored(block_expert, e_count):
    """The same predicated copy, its whole result stored: the never-written flag decides the last element
    unless the expert there already is ``e_count``."""
    n = block_expert.shape[1]
    flags_hbm = nl2.ndarray((1, n), dtype=nl2.uint8, buffer=nl2.private_hbm)
    flags = nl2.ndarray((1, n), dtype=nl2.uint8, buffer=nl2.sbuf)
    nisa2.memset(flags, 1)
    nisa2.dma_copy(dst=flags_hbm[0:1, 0 : n - 1], src=flags[0:1, 0 : n - 1])
    skip = nl2.ndarray((1, n), dtype=nl2.uint8, buffer=nl2.sbuf)
    nisa2.dma_copy(dst=skip, src=flags_hbm)
    expert = nl2.ndarray((1, n), dtype=nl2.int32, buffer=nl2.sbuf)
    nisa2.dma_copy(dst=expert, src=block_expert)
    on_true = nl2.ndarray((1, n), dtype=nl2.int32, buffer=nl2.sbuf)
    nisa2.memset(on_true, e_count)
    nisa2.tensor_copy_predicated(dst=expert, src=on_true, predicate=skip)  # <- blame
    out = nl2.ndarray((1, n), dtype=nl2.int32, buffer=nl2.shared_hbm)
    nisa2.dma_copy(dst=out, src=expert)  # <- observed
    return out


def test_b2_never_written_predicate_between_equal_values_decides_nothing():
    be = BLOCK_EXPERT.copy()
    be[0, -1] = 9
    got = nki2.simulate(b2_skip_flags_stored)(be, 9)
    np.testing.assert_array_equal(got, np.full((1, 8), 9))


def test_b2_never_written_predicate_between_different_values_is_observed():
    err = uninit_raises(b2_skip_flags_stored, BLOCK_EXPERT, 9)
    assert "1 element(s)" in str(err) and "position [0, 7]" in str(err), err
    names_observer(err, b2_skip_flags_stored, "# <- observed")


@nki2.jit
def b2_partly_written_scratch(a, rows_out):
    """Scratch rows 0:64 written, rows 0:128 loaded into SBUF; ``rows_out`` of them stored."""
    scratch = nl2.ndarray((128, 32), dtype=nl2.float32, buffer=nl2.private_hbm)
    nisa2.dma_copy(dst=scratch[0:64, :], src=a[0:64, :])
    t = nl2.ndarray((128, 32), dtype=nl2.float32, buffer=nl2.sbuf)
    nisa2.dma_copy(dst=t, src=scratch)
    y = nl2.ndarray((128, 32), dtype=nl2.float32, buffer=nl2.sbuf)
    nisa2.tensor_scalar(y, t, nl2.multiply, 2.0)  # <- blame
    out = nl2.ndarray((rows_out, 32), dtype=nl2.float32, buffer=nl2.shared_hbm)
    nisa2.dma_copy(dst=out, src=y[0:rows_out, :])  # <- observed
    return out


@nki2.jit
def b2_never_written_scratch(a):
    scratch = nl2.ndarray((128, 32), dtype=nl2.float32, buffer=nl2.private_hbm)
    nisa2.dma_copy(dst=scratch[0:64, :], src=a[0:64, :])
    t = nl2.ndarray((64, 32), dtype=nl2.float32, buffer=nl2.sbuf)
    nisa2.dma_copy(dst=t, src=scratch[64:128, :])  # <- blame
    out = nl2.ndarray((64, 32), dtype=nl2.float32, buffer=nl2.shared_hbm)
    nisa2.dma_copy(dst=out, src=t)
    return out


def test_b2_loaded_scratch_garbage_computed_on_and_stored():
    a = np.linspace(-1, 1, 128 * 32, dtype=np.float32).reshape(128, 32)
    np.testing.assert_array_equal(nki2.simulate(b2_partly_written_scratch)(a, 64), 2 * a[0:64])
    err = uninit_raises(b2_partly_written_scratch, a, 128)
    assert "reaches HBM" in str(err), err
    names_observer(err, b2_partly_written_scratch, "# <- observed")
    err = uninit_raises(b2_never_written_scratch, a)
    assert "private_hbm tensor [128, 32]" in str(err), err


# ---- NKI Beta 1 ------------------------------------------------------------------------------------------------


@nki.jit
def skip_flags_stored(block_expert, e_count):
    """Beta 1: flags written for all but the last block (on chip: a Beta-1 load of never-written HBM is an
    error at the load, ``test_hazard_uninit.py``), and a predicated copy ``expert = flag ? e_count : expert``
    stored whole."""
    n = block_expert.shape[1]
    skip = nl.ndarray((1, n), dtype=nl.uint8, buffer=nl.sbuf)  # (Beta 1: on chip; HBM loads check)
    skip[0:1, 0 : n - 1] = nl.full((1, n - 1), 1, dtype=nl.uint8)
    expert = nl.load(block_expert)
    on_true = nl.full((1, n), e_count, dtype=nl.int32)
    nisa.tensor_copy_predicated(src=on_true, dst=expert, predicate=skip)  # <- blame
    out = nl.ndarray((1, n), dtype=nl.int32, buffer=nl.shared_hbm)
    nl.store(out, value=expert)
    return out


@nki.jit
def skip_flags_used_in_part(block_expert, e_count):
    n = block_expert.shape[1]
    skip = nl.ndarray((1, n), dtype=nl.uint8, buffer=nl.sbuf)  # (Beta 1: on chip; HBM loads check)
    skip[0:1, 0 : n - 1] = nl.full((1, n - 1), 1, dtype=nl.uint8)
    expert = nl.load(block_expert)
    on_true = nl.full((1, n), e_count, dtype=nl.int32)
    nisa.tensor_copy_predicated(src=on_true, dst=expert, predicate=skip)
    out = nl.ndarray((1, n - 1), dtype=nl.int32, buffer=nl.shared_hbm)
    nl.store(out, value=expert[0:1, 0 : n - 1])
    return out


def test_b1_never_written_scratch_flag():
    np.testing.assert_array_equal(
        devkit.simulate(skip_flags_used_in_part, BLOCK_EXPERT, 9), np.full((1, 7), 9)
    )
    be = BLOCK_EXPERT.copy()
    be[0, -1] = 9
    np.testing.assert_array_equal(devkit.simulate(skip_flags_stored, be, 9), np.full((1, 8), 9))
    err = simulate_raises(
        UninitializedReadError, skip_flags_stored, BLOCK_EXPERT, 9, rule="uninitialized-read"
    )
    assert "reaches HBM" in str(err), err


@nki.jit
def where_on_scratch_condition(a, b):
    """``nl.where`` with a condition whose rows 64:128 were never written."""
    cond = nl.ndarray((128, 32), dtype=nl.uint8, buffer=nl.sbuf)
    cond[0:64, :] = nl.full((64, 32), 1, dtype=nl.uint8)
    x = nl.load(a)
    y = nl.load(b)
    w = nl.where(cond, x, y)  # <- blame
    out = nl.ndarray((128, 32), dtype=nl.float32, buffer=nl.shared_hbm)
    nl.store(out, value=w)
    return out


def test_b1_where_on_a_never_written_condition():
    a = np.linspace(-1, 1, 128 * 32, dtype=np.float32).reshape(128, 32)
    b = a.copy()
    b[0:64] = 7.0  # x and y agree on the rows whose condition is never-written
    np.testing.assert_array_equal(devkit.simulate(where_on_scratch_condition, a, b), a)
    b[100, 3] = 5.0  # one element where they differ: the condition decides it
    err = simulate_raises(UninitializedReadError, where_on_scratch_condition, a, b, rule="uninitialized-read")
    assert "1 element(s)" in str(err) and "position [100, 3]" in str(err), err
