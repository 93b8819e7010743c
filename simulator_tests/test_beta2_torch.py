"""Issue 12: ``nki.simulate`` takes torch tensors and returns torch tensors (reference/nki_beta2.md §2).

torch is an optional dependency of the kit (a multi-GB install the default environment does not carry), so
these tests run only where ``import torch`` works; the conversion helpers' NumPy side is tested everywhere.
"""

from __future__ import annotations

import ml_dtypes
import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np
import pytest

from devkit.nki.beta2 import torch_io

torch = pytest.importorskip(
    "torch", reason="torch is not installed here; the torch path of nki.simulate needs torch to test"
)

RNG = np.random.default_rng(11)


@nki.jit
def add_rows(a, b):
    ta = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    tb = nl.ndarray(b.shape, dtype=b.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=ta, src=a)
    nisa.dma_copy(dst=tb, src=b)
    nisa.tensor_tensor(dst=ta, data1=ta, data2=tb, op=nl.add)
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=ta)
    return out


@nki.jit
def double_in_place_and_return_two(a):
    t = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a)
    nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=2.0)
    nisa.dma_copy(dst=a, src=t)
    o1 = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    o2 = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=o1, src=t)
    nisa.dma_copy(dst=o2, src=t)
    return o1, o2


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_torch_in_torch_out(dtype):
    a = torch.from_numpy(RNG.standard_normal((128, 64)).astype(np.float32)).to(dtype)
    b = torch.from_numpy(RNG.standard_normal((128, 64)).astype(np.float32)).to(dtype)
    got = nki.simulate(add_rows)(a, b)
    assert isinstance(got, torch.Tensor) and got.dtype == dtype and tuple(got.shape) == (128, 64)
    want = (a.float() + b.float()).to(dtype)
    assert torch.equal(got, want)


def test_numpy_in_numpy_out_unchanged():
    a = RNG.standard_normal((128, 64)).astype(np.float32)
    got = nki.simulate(add_rows)(a, a)
    assert isinstance(got, np.ndarray)
    np.testing.assert_array_equal(got, 2 * a)


def test_written_torch_input_updated_in_place_and_tuple_results():
    a = torch.arange(128 * 32, dtype=torch.float32).reshape(128, 32)
    orig = a.clone()
    o1, o2 = nki.simulate(double_in_place_and_return_two)(a)
    assert torch.equal(a, 2 * orig)  # the kernel wrote its input
    assert torch.equal(o1, 2 * orig) and o2.dtype == torch.float32


def test_written_noncontiguous_torch_input_is_copied_back():
    base = torch.arange(128 * 64, dtype=torch.float32).reshape(64, 128)
    a = base.t()  # (128, 64), not contiguous: the simulator works on a copy
    orig = a.clone()
    nki.simulate(double_in_place_and_return_two)(a)
    assert torch.equal(a, 2 * orig)


def test_bf16_conversion_round_trips_bits():
    t = torch.tensor([[1.0, -2.5, 3.0e38, float("inf")]], dtype=torch.bfloat16)
    arr = torch_io.to_numpy(t)
    assert arr.dtype == np.dtype(ml_dtypes.bfloat16)
    back = torch_io.to_torch(arr, t.device)
    assert back.dtype == torch.bfloat16 and torch.equal(back, t)


def test_nki_simulator_env_call_takes_torch(monkeypatch):
    monkeypatch.setenv("NKI_SIMULATOR", "1")
    a = torch.randn(128, 64)
    b = torch.randn(128, 64)
    got = add_rows(a, b)  # a direct call simulates under NKI_SIMULATOR=1
    assert isinstance(got, torch.Tensor) and torch.equal(got, a + b)
