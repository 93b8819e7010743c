"""Issue 3, uninitialised memory: reading SBUF, PSUM or output/scratch HBM that was never written is an
UninitializedReadError at the reading statement (in these Beta-1 kernels a load from partly written HBM
scratch too; NKI 0.x kernels carry such elements on chip, test_hazard_uninit_hbm.py).

Decisions (see docs/errors.md): a masked write initialises the whole region it addresses (masked-off
padding rows are read-but-unused in correct kernels); ``psum += nc_matmul(...)`` into never-written
PSUM starts an accumulation group and is not a read; any other in-place update (``sbuf += x``) of
never-written memory is an uninitialised read -- the NeuronMM ``XU_result_buf`` bug.
"""

from __future__ import annotations

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import numpy as np
from _nki_support import simulate_raises

import devkit
from devkit.errors import UninitializedReadError
from devkit.sim.options import SimOptions

A = np.linspace(-1, 1, 128 * 512, dtype=np.float32).reshape(128, 512)


def raises_uninit(kernel, *args, **kw):
    return simulate_raises(UninitializedReadError, kernel, *args, rule="uninitialized-read", **kw)


# ---- SBUF ---------------------------------------------------------------------------------------------


@nki.jit
def exp_of_fresh_sbuf(a):
    out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)
    y = nl.exp(t)  # <- blame
    nl.store(out, value=y)
    return out


@nki.jit
def exp_of_zeroed_sbuf(a):
    out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.zeros((128, 512), dtype=nl.float32, buffer=nl.sbuf)
    nl.store(out, value=nl.exp(t))
    return out


def test_reading_never_written_sbuf():
    err = raises_uninit(exp_of_fresh_sbuf, A)
    assert "65536 element(s)" in str(err) and "nl.zeros" in str(err)
    np.testing.assert_array_equal(devkit.simulate(exp_of_zeroed_sbuf, A), 1.0)


@nki.jit
def half_written_tile(a):
    out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.ndarray((128, 512), dtype=nl.float32)
    t[0:100, :] = nl.load(a[0:100, :])
    nl.store(out, value=t)  # <- blame
    return out


@nki.jit
def half_written_tile_half_read(a):
    out = nl.ndarray((100, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.ndarray((128, 512), dtype=nl.float32)
    t[0:100, :] = nl.load(a[0:100, :])
    nl.store(out, value=t[0:100, :])
    return out


def test_partially_written_tile_is_tracked_per_element():
    err = raises_uninit(half_written_tile, A)
    assert "14336 element(s)" in str(err) and "[100, 0]" in str(err)
    np.testing.assert_array_equal(devkit.simulate(half_written_tile_half_read, A), A[:100])


@nki.jit
def unwritten_block(a):
    out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    buf = nl.ndarray((4, nl.par_dim(128), 512), dtype=nl.float32)
    for i in nl.affine_range(3):
        buf[i] = nl.load(a)
    acc = nl.add(buf[0], buf[2])
    nl.store(out, value=nl.add(acc, buf[3]))  # <- blame
    return out


def test_reading_the_one_block_never_written():
    raises_uninit(unwritten_block, A)


# ---- the NeuronMM XU_result_buf bug: SBUF += into memory never written --------------------------------


@nki.jit
def accumulate_into_ndarray(a):
    out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    x = nl.load(a[:, 0:128])
    y = nl.load(a)
    acc = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)
    for _k in nl.sequential_range(2):
        ps = nl.zeros((128, 512), dtype=nl.float32, buffer=nl.psum)
        ps += nisa.nc_matmul(x, y)
        acc += ps  # <- blame
    nl.store(out, value=acc)
    return out


@nki.jit
def accumulate_into_zeros(a):
    out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    x = nl.load(a[:, 0:128])
    y = nl.load(a)
    acc = nl.zeros((128, 512), dtype=nl.float32, buffer=nl.sbuf)
    for _k in nl.sequential_range(2):
        ps = nl.zeros((128, 512), dtype=nl.float32, buffer=nl.psum)
        ps += nisa.nc_matmul(x, y)
        acc += ps
    nl.store(out, value=acc)
    return out


def test_sbuf_accumulation_into_an_uninitialised_buffer_is_an_error():
    raises_uninit(accumulate_into_ndarray, A)
    want = 2 * (A[:, 0:128].T @ A)
    np.testing.assert_allclose(devkit.simulate(accumulate_into_zeros, A), want, rtol=1e-4, atol=1e-3)


# ---- PSUM ---------------------------------------------------------------------------------------------


@nki.jit
def copy_of_fresh_psum(a):
    out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    ps = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum)
    res = nl.copy(ps)  # <- blame
    nl.store(out, value=res)
    return out


def test_reading_never_written_psum():
    raises_uninit(copy_of_fresh_psum, A)


@nki.jit
def matmul_accumulation_into_fresh_psum(a):
    out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    x = nl.load(a[:, 0:128])
    y = nl.load(a)
    ps = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum)
    for _k in nl.affine_range(3):
        ps += nisa.nc_matmul(x, y)  # the first matmul of the group overwrites
    nl.store(out, value=nl.copy(ps))
    return out


@nki.jit
def vector_accumulation_into_fresh_psum(a):
    out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    x = nl.load(a)
    ps = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum)
    ps += x  # <- blame
    nl.store(out, value=nl.copy(ps))
    return out


def test_psum_matmul_accumulation_starts_a_group_but_a_vector_update_reads():
    want = 3 * (A[:, 0:128].T @ A)
    np.testing.assert_allclose(
        devkit.simulate(matmul_accumulation_into_fresh_psum, A), want, rtol=1e-4, atol=1e-3
    )
    raises_uninit(vector_accumulation_into_fresh_psum, A)


# ---- HBM: kernel outputs and private scratch ------------------------------------------------------------


@nki.jit
def read_back_unwritten_output(a):
    out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    x = nl.load(out)  # <- blame
    nl.store(out, value=nl.add(x, 1.0))
    return out


@nki.jit
def read_back_written_output(a):
    out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    nl.store(out, value=nl.load(a))
    x = nl.load(out)
    nl.store(out, value=nl.add(x, 1.0))
    return out


def test_reading_an_output_before_writing_it():
    raises_uninit(read_back_unwritten_output, A)
    np.testing.assert_allclose(devkit.simulate(read_back_written_output, A), A + 1.0)


@nki.jit
def unwritten_scratch(a):
    out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    scratch = nl.ndarray((256, 512), dtype=nl.float32, buffer=nl.hbm)
    nl.store(scratch[0:128, :], value=nl.load(a))
    x = nl.load(scratch[64:192, :])  # <- blame
    nl.store(out, value=x)
    return out


@nki.jit
def never_written_scratch_rows(a):
    out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    scratch = nl.ndarray((256, 512), dtype=nl.float32, buffer=nl.hbm)
    nl.store(scratch[0:128, :], value=nl.load(a))
    x = nl.load(scratch[128:256, :])  # <- blame
    nl.store(out, value=x)
    return out


def test_reading_private_hbm_scratch_never_written():
    err = raises_uninit(unwritten_scratch, A)
    assert "[64, 0]" in str(err)


def test_loading_only_never_written_scratch_is_an_error_at_the_load():
    err = raises_uninit(never_written_scratch_rows, A)
    assert "65536 element(s) of private_hbm tensor" in str(err), err


# ---- masks: a masked write initialises the region it addresses ------------------------------------------


@nki.jit
def masked_load_then_full_compute(a):
    n = a.shape[0]
    out = nl.ndarray((n, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    i_p = nl.arange(128)[:, None]
    i_f = nl.arange(512)[None, :]
    for i in nl.affine_range((n + 127) // 128):
        t = nl.ndarray((128, 512), dtype=nl.float32)
        t[i_p, i_f] = nl.load(a[i * 128 + i_p, i_f], mask=(i * 128 + i_p < n))
        y = nl.exp(t)  # padding rows are read but never stored
        nl.store(out[i * 128 + i_p, i_f], value=y, mask=(i * 128 + i_p < n))
    return out


def test_masked_write_initialises_the_region_it_addresses():
    a = np.linspace(-1, 1, 200 * 512, dtype=np.float32).reshape(200, 512)
    np.testing.assert_allclose(devkit.simulate(masked_load_then_full_compute, a), np.exp(a), rtol=1e-6)


def test_with_the_check_off_fresh_memory_is_nan_poisoned():
    res = devkit.simulate(exp_of_fresh_sbuf, A, options=SimOptions(check_uninit=False))
    assert np.isnan(res).all()
