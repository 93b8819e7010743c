"""Issue 13: ``nl.zeros/ones/full(..., buffer=nl.shared_hbm)`` are accepted.  The Beta-1 API reference lists
HBM among the buffers ``nl.zeros`` accepts and the published NeuronMM kernels (``two_mm.py``) allocate
their outputs that way on hardware.  The tensor starts filled, by DMA writes that are traced and costed
(one per 128 leading rows); reading a never-written ``nl.ndarray`` HBM tensor stays an error."""

from __future__ import annotations

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import neuronxcc.nki.typing as nt
import numpy as np
import pytest
from _nki_support import assert_blames

import devkit
from devkit.errors import UninitializedReadError
from devkit.nki.runner import run_kernel
from devkit.trace import Trace

A = np.arange(64 * 512, dtype=np.float32).reshape(64, 512)


@nki.jit
def zeros_output_half_written(a):
    out = nl.zeros((300, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    nl.store(out[0:64, :], value=nl.load(a))
    return out


@nki.jit
def full_private_hbm_read_back(a):
    out = nl.ndarray((64, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    scratch = nl.full((64, 512), 2.5, dtype=nl.bfloat16, buffer=nl.hbm)
    nl.store(out, value=nl.add(nl.load(scratch), nl.load(a)))
    return out


def test_zero_filled_shared_hbm_output():
    got = devkit.simulate(zeros_output_half_written, A)
    np.testing.assert_array_equal(got[:64], A)
    np.testing.assert_array_equal(got[64:], 0.0)


def test_filled_private_hbm_scratch_reads_its_value():
    np.testing.assert_array_equal(devkit.simulate(full_private_hbm_read_back, A), A + 2.5)


def test_the_fill_is_traced_and_costed_as_dma_writes():
    trace = Trace()
    run_kernel(zeros_output_half_written.func, (A,), {}, sink=trace)
    fills = [i for i in trace.instrs if (i.attrs or {}).get("fill") is not None]
    assert [f.engine for f in fills] == ["dma"] * 3  # 300 rows: blocks of 128, 128 and 44
    assert sum(f.outs[0].bytes for f in fills) == 300 * 512 * 4
    with_fill = devkit.estimate(zeros_output_half_written, nt.tensor[[64, 512], nl.float32])
    assert with_fill.hbm_write_bytes == 300 * 512 * 4 + 64 * 512 * 4


@nki.jit
def read_never_written_hbm(a):
    out = nl.ndarray((64, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    scratch = nl.ndarray((64, 512), dtype=nl.float32, buffer=nl.hbm)
    nl.store(out, value=nl.load(scratch))  # <- blame
    return out


def test_reading_a_never_written_ndarray_stays_an_error():
    with pytest.raises(UninitializedReadError) as e:
        devkit.simulate(read_never_written_hbm, A)
    assert_blames(e, read_never_written_hbm)


@nki.jit
def store_single_elements(a):
    """One element per store, addressed by integers only (flash_attn_bwd stores its per-head sink
    gradient as ``out[b, h]``)."""
    out = nl.ndarray((2, 3), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.load(a[0:2, 0:3])
    for i in nl.affine_range(2):
        for j in nl.affine_range(3):
            nl.store(out[i, j], value=t[i : i + 1, j : j + 1])
    return out


def test_store_of_one_integer_addressed_element():
    np.testing.assert_array_equal(devkit.simulate(store_single_elements, A), A[0:2, 0:3])


@nki.jit
def fp32_scales_viewed_as_fp8(a):
    """Four fp8 bytes per fp32 scale, stored next to the data (nki-samples 0898a77 rmsnorm_quant)."""
    out = nl.ndarray((64, 4), dtype=nl.float8_e4m3, buffer=nl.shared_hbm)
    scales = nl.load(a[0:64, 0:1])
    nl.store(out, value=scales.view(nl.float8_e4m3)[:, 0:4])
    return out


def test_view_that_changes_the_element_size_reinterprets_bytes():
    import ml_dtypes

    # bytes of finite fp8 values (NaN payloads are not preserved by copies yet, a numerics matter)
    rng = np.random.default_rng(11)
    a = rng.integers(0, 0x78, size=(64, 512 * 4), dtype=np.uint8).view(np.float32)
    got = devkit.simulate(fp32_scales_viewed_as_fp8, a)
    want = np.ascontiguousarray(a[:, 0:1]).view(ml_dtypes.float8_e4m3)
    np.testing.assert_array_equal(np.asarray(got).view(np.uint8), want.view(np.uint8))


@nki.jit
def view_of_a_slice_changing_size(a):
    out = nl.ndarray((64, 4), dtype=nl.float8_e4m3, buffer=nl.shared_hbm)
    t = nl.load(a[0:64, 0:2])
    nl.store(out, value=t[:, 0:1].view(nl.float8_e4m3))  # <- blame
    return out


def test_size_changing_view_of_a_slice_is_refused_with_a_clear_error():
    from devkit.errors import KernelArgumentError

    with pytest.raises(KernelArgumentError, match="whole tensor") as e:
        devkit.simulate(view_of_a_slice_changing_size, A)
    assert_blames(e, view_of_a_slice_changing_size)
