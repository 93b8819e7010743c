"""NKI 0.x: never-written data may pass through HBM; it must not be left in an output (docs/errors.md,
``uninitialized-read``).

A Beta-2 kernel may copy a partly written tile into an output and then overwrite the never-written part:
nki-library @d2ad3a5 ``test/integration/nkilib/core/mlp/test_mlp_proj_mxfp4.py:195-201`` copies its whole
``out_sb`` into ``out`` and then writes zeros over the rows it never computed.  The error comes when the kernel
ends with never-written data still in a tensor the host sees (a ``shared_hbm`` output, an argument), blamed on
the line that wrote it there (or on the computation that produced it), or when a write of another LNC program
covers it (which of the two lands last is not defined).  Scratch (``nl.hbm`` / ``private_hbm``) is not seen by
the host.  Beta 1 keeps the error at the write.

Good/bad twins, asserting error class, rule and line.
"""

from __future__ import annotations

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import nki as nki2
import nki.isa as nisa2
import nki.language as nl2
import numpy as np
from _nki_support import line_of, uninit_raises

A = np.linspace(-1, 1, 128 * 32, dtype=np.float32).reshape(128, 32)


# ---- one program: copy everything, then overwrite the never-written rows --------------------------------------


@nki2.jit
def copy_then_patch(a, patch):
    t = nl2.ndarray((128, 32), dtype=nl2.float32, buffer=nl2.sbuf)
    nisa2.dma_copy(dst=t[0:96, :], src=a[0:96, :])
    out = nl2.ndarray((128, 32), dtype=nl2.float32, buffer=nl2.shared_hbm)
    nisa2.dma_copy(dst=out, src=t)  # <- blame
    if patch:
        zeros = nl2.ndarray((32, 32), dtype=nl2.float32, buffer=nl2.sbuf)
        nisa2.memset(dst=zeros, value=0.0)
        nisa2.dma_copy(dst=out[96:128, :], src=zeros)
    return out


def test_never_written_rows_overwritten_before_the_end_are_legal():
    got = nki2.simulate(copy_then_patch)(A, True)
    np.testing.assert_array_equal(got[0:96], A[0:96])
    np.testing.assert_array_equal(got[96:], 0.0)


def test_never_written_rows_left_in_the_output_blame_the_copy():
    err = uninit_raises(copy_then_patch, A, False)
    assert "32 element(s)" not in str(err) and "1024 element(s)" in str(err), err  # rows 96:128 x 32
    assert "still there when the kernel ends" in str(err), err


@nki2.jit
def store_then_patch(a, patch):
    """The same through ``nl.store``."""
    t = nl2.ndarray((128, 32), dtype=nl2.float32, buffer=nl2.sbuf)
    nisa2.dma_copy(dst=t[0:64, :], src=a[0:64, :])
    out = nl2.ndarray((128, 32), dtype=nl2.float32, buffer=nl2.shared_hbm)
    nl2.store(out, t)  # <- blame
    if patch:
        nl2.store(out[64:128, :], nl2.zeros((64, 32), dtype=nl2.float32, buffer=nl2.sbuf))
    return out


def test_nl_store_of_a_partly_written_tile_then_patched():
    got = nki2.simulate(store_then_patch)(A, True)
    np.testing.assert_array_equal(got, np.concatenate([A[0:64], np.zeros((64, 32), np.float32)]))
    uninit_raises(store_then_patch, A, False)


# ---- computed garbage: blamed on its computation ----------------------------------------------------------------


@nki2.jit
def computed_then_patch(a, patch):
    t = nl2.ndarray((128, 32), dtype=nl2.float32, buffer=nl2.sbuf)
    nisa2.dma_copy(dst=t[0:96, :], src=a[0:96, :])
    r = nl2.ndarray((128, 32), dtype=nl2.float32, buffer=nl2.sbuf)
    nisa2.tensor_scalar(dst=r, data=t, op0=nl2.multiply, operand0=2.0)  # <- blame
    out = nl2.ndarray((128, 32), dtype=nl2.float32, buffer=nl2.shared_hbm)
    nisa2.dma_copy(dst=out, src=r)  # <- stored
    if patch:
        nisa2.dma_copy(dst=out[96:128, :], src=a[96:128, :])
    return out


def test_computed_garbage_overwritten_is_legal_and_left_blames_its_computation():
    got = nki2.simulate(computed_then_patch)(A, True)
    np.testing.assert_array_equal(got, np.concatenate([2 * A[0:96], A[96:]]))
    err = uninit_raises(computed_then_patch, A, False)
    assert f"reaches HBM at {err.filename}:{line_of(computed_then_patch, '# <- stored')}" in str(err), err


# ---- scratch is not an output ---------------------------------------------------------------------------------


@nki2.jit
def scratch_partly_written(a):
    t = nl2.ndarray((128, 32), dtype=nl2.float32, buffer=nl2.sbuf)
    nisa2.dma_copy(dst=t[0:64, :], src=a[0:64, :])
    scratch = nl2.ndarray((128, 32), dtype=nl2.float32, buffer=nl2.private_hbm)
    nisa2.dma_copy(dst=scratch, src=t)
    back = nl2.ndarray((64, 32), dtype=nl2.float32, buffer=nl2.sbuf)
    nisa2.dma_copy(dst=back, src=scratch[0:64, :])
    out = nl2.ndarray((64, 32), dtype=nl2.float32, buffer=nl2.shared_hbm)
    nisa2.dma_copy(dst=out, src=back)
    return out


def test_garbage_left_in_scratch_is_not_observed():
    np.testing.assert_array_equal(nki2.simulate(scratch_partly_written)(A), A[0:64])


# ---- two LNC programs ------------------------------------------------------------------------------------------


@nki2.jit
def program_zero_copies_and_patches(a, patcher):
    """Program 0 copies a partly written tile into the output; ``patcher`` overwrites the never-written rows."""
    pid = nl2.program_id(0)
    out = nl2.ndarray((128, 32), dtype=nl2.float32, buffer=nl2.shared_hbm)
    t = nl2.ndarray((128, 32), dtype=nl2.float32, buffer=nl2.sbuf)
    nisa2.dma_copy(dst=t[0:96, :], src=a[0:96, :])
    if pid == 0:
        nisa2.dma_copy(dst=out, src=t)  # <- blame
    if pid == patcher:
        z = nl2.ndarray((32, 32), dtype=nl2.float32, buffer=nl2.sbuf)
        nisa2.memset(dst=z, value=0.0)
        nisa2.dma_copy(dst=out[96:128, :], src=z)  # <- other program
    return out


def test_lnc2_the_same_program_patches_its_output():
    got = nki2.simulate(program_zero_copies_and_patches[2])(A, 0)
    np.testing.assert_array_equal(got[96:], 0.0)
    np.testing.assert_array_equal(got[0:96], A[0:96])


def test_lnc2_another_programs_write_over_the_garbage_is_an_error():
    err = uninit_raises(program_zero_copies_and_patches, A, 1, lnc=2)
    want = line_of(program_zero_copies_and_patches, "# <- other program")
    assert f"overwritten by program [1] at {err.filename}:{want}" in str(err), err


# ---- Beta 1 keeps the error at the write ------------------------------------------------------------------------


@nki.jit
def b1_store_then_patch(a):
    t = nl.ndarray((128, 32), dtype=nl.float32, buffer=nl.sbuf)
    t[0:96, :] = nl.load(a[0:96, :])
    out = nl.ndarray((128, 32), dtype=nl.float32, buffer=nl.shared_hbm)
    nl.store(out, value=t)  # <- blame
    nl.store(out[96:128, :], value=nl.zeros((32, 32), dtype=nl.float32, buffer=nl.sbuf))
    return out


def test_beta1_store_of_never_written_data_is_an_error_at_the_store():
    uninit_raises(b1_store_then_patch, A)
