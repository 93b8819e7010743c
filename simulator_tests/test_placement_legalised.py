"""Issue 13, placement legalisation: a Tensor-Engine result (compiler-placed, in PSUM) used as a matmul
operand is copied to SBUF by the Beta-1 compiler, as AWS's flash-attention backward kernel relies on
(nki-samples 0898a77 ``reference/attention.py:1002``: ``nc_matmul(nc_transpose(dy), softmax)``).

The simulator makes the same copy: the value flows, the copy is a traced and costed ``tensor_copy``, and a
``devkit.PlacementNote`` names the line once.  The bad twins stay errors at their exact line: a tensor the
kernel pinned to PSUM itself, a matmul operand in HBM, and a DMA from PSUM.
"""

from __future__ import annotations

import warnings

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import neuronxcc.nki.typing as nt
import numpy as np
import pytest
from _nki_support import assert_blames, line_of

import devkit
from devkit.errors import MemoryPlacementError
from devkit.nki.runner import run_kernel
from devkit.trace import Trace

RNG = np.random.default_rng(13)
DY = RNG.standard_normal((128, 128)).astype(np.float32)
SM = RNG.standard_normal((128, 512)).astype(np.float32)


@nki.jit
def transposed_stationary(dy, sm):
    out = nl.ndarray((3, 128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    d = nl.load(dy)
    s = nl.load(sm)
    for i in nl.affine_range(3):
        trans = nisa.nc_transpose(d)
        res = nisa.nc_matmul(trans, s)  # <- note
        nl.store(out[i], value=nl.copy(res))
    return out


@nki.jit
def transposed_then_copied(dy, sm):
    out = nl.ndarray((3, 128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    d = nl.load(dy)
    s = nl.load(sm)
    for i in nl.affine_range(3):
        trans = nl.copy(nisa.nc_transpose(d))
        res = nisa.nc_matmul(trans, s)
        nl.store(out[i], value=nl.copy(res))
    return out


def _run(kernel, *args):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = devkit.simulate(kernel, *args)
    return got, [w for w in caught if issubclass(w.category, devkit.PlacementNote)]


def test_tensor_engine_result_as_stationary_flows_with_one_note_per_line():
    got, notes = _run(transposed_stationary, DY, SM)
    want = DY @ SM  # (dy.T).T @ sm
    for i in range(3):
        np.testing.assert_allclose(got[i], want, rtol=1e-5, atol=1e-4)
    assert len(notes) == 1, [str(n.message) for n in notes]
    assert notes[0].lineno == line_of(transposed_stationary, "note")
    assert "stationary" in str(notes[0].message) and "PSUM" in str(notes[0].message)
    twin, twin_notes = _run(transposed_then_copied, DY, SM)
    np.testing.assert_array_equal(got, twin)
    assert twin_notes == []


def test_the_implied_copy_is_traced_and_costed_like_an_explicit_one():
    trace = Trace()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", devkit.PlacementNote)
        run_kernel(transposed_stationary.func, (DY, SM), {}, sink=trace)
    copies = [i for i in trace.instrs if (i.attrs or {}).get("legalised") == "psum-to-sbuf"]
    assert len(copies) == 3
    assert all(c.opcode == "tensor_copy" and c.ins[0].buffer == "psum" for c in copies)
    assert all(c.outs[0].buffer == "sbuf" for c in copies)
    spec = (nt.tensor[[128, 128], nl.float32], nt.tensor[[128, 512], nl.float32])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", devkit.PlacementNote)
        legalised = devkit.estimate(transposed_stationary, *spec)
    explicit = devkit.estimate(transposed_then_copied, *spec)
    assert legalised.instructions == explicit.instructions
    assert legalised.engine_busy_us["vector"] == pytest.approx(explicit.engine_busy_us["vector"])


@nki.jit
def bf16_moving_with_transposed_stationary(dy, sm):
    out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    d = nl.load(dy)
    s = nl.load(sm)
    res = nisa.nc_matmul(nisa.nc_transpose(d), s)
    nl.store(out, value=nl.copy(res))
    return out


def test_fp32_psum_result_is_copied_into_the_other_operands_dtype():
    import ml_dtypes

    bf = ml_dtypes.bfloat16
    dy, sm = DY.astype(bf), SM.astype(bf)
    got, notes = _run(bf16_moving_with_transposed_stationary, dy, sm)
    assert len(notes) == 1 and "float32->bfloat16" in str(notes[0].message)
    want = dy.astype(np.float32) @ sm.astype(np.float32)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-3)


# ---- bad twins: placements the compiler does not change ------------------------------------------------


@nki.jit
def pinned_psum_operand(dy, sm):
    out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    d = nl.load(dy)
    s = nl.load(sm)
    acc = nl.zeros((128, 128), dtype=nl.float32, buffer=nl.psum)
    acc += nisa.nc_matmul(d, d)
    res = nisa.nc_matmul(acc, s)  # <- blame
    nl.store(out, value=nl.copy(res))
    return out


@nki.jit
def hbm_moving_operand(dy, sm):
    out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    d = nl.load(dy)
    res = nisa.nc_matmul(d, sm)  # <- blame
    nl.store(out, value=nl.copy(res))
    return out


@nki.jit
def dma_from_psum(dy, sm):
    out = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.shared_hbm)
    d = nl.load(dy)
    trans = nisa.nc_transpose(d)
    nisa.dma_copy(dst=out, src=trans)  # <- blame
    return out


@pytest.mark.parametrize(
    "kernel, rule",
    [
        (pinned_psum_operand, "operand-in-psum"),  # a tensor the kernel itself pinned to PSUM
        (hbm_moving_operand, "operand-in-hbm"),  # a matmul operand still in HBM
        (dma_from_psum, "dma-psum"),  # a DMA reading PSUM
    ],
    ids=["pinned-psum-operand", "hbm-moving-operand", "dma-from-psum"],
)
def test_placements_the_compiler_does_not_legalise_stay_errors(kernel, rule):
    with pytest.raises(MemoryPlacementError) as e:
        devkit.simulate(kernel, DY, SM)
    assert e.value.rule == rule
    assert_blames(e, kernel)
