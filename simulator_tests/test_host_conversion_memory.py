"""Converting between host arrays and the simulator's fp32 storage holds no whole-tensor temporaries beyond the
result, and a finished run lets go of its arguments' storage copies before it converts its outputs.

nki-library's rmsnorm_quant tests ran out of memory (6 GB cap) while the kit converted a 2 x 27264 x 7172 fp8 output:
the NaN-payload step allocated a mask the size of the whole tensor next to the arguments' fp32 copies.
"""

from __future__ import annotations

import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np
import pytest

from devkit import dtypes as dt
from devkit.nki import runner

FORMATS = [dt.bfloat16, np.dtype(np.float16), dt.float8_e4m3, dt.float8_e5m2]


def _random_bits(d: np.dtype, n: int, seed: int) -> np.ndarray:
    """Every bit pattern of the format is as likely: NaNs with all payloads and signs included."""
    rng = np.random.default_rng(seed)
    u = np.dtype(f"u{d.itemsize}")
    return rng.integers(0, np.iinfo(u).max + 1, size=n, dtype=u).view(d)


@pytest.mark.parametrize("d", FORMATS, ids=str)
@pytest.mark.parametrize("block", [7, 64, 1 << 22])
def test_blocked_nan_payload_round_trip_keeps_every_bit(d, block, monkeypatch):
    """host -> fp32 storage -> host gives back every bit pattern (NaN payloads and signs too), whether the blocks
    split the array mid-row or not, for contiguous and strided arrays."""
    monkeypatch.setattr(dt, "_NAN_BLOCK", block)
    host = _random_bits(d, 3 * 1000, seed=block).reshape(3, 1000)
    assert np.isnan(host.astype(np.float32)).any()  # the payload path runs
    for a in (host, host[:, ::3], host.T):
        back = dt.to_external(dt.to_storage(a, d), d)
        np.testing.assert_array_equal(
            back.view(f"u{d.itemsize}"), np.ascontiguousarray(a).view(f"u{d.itemsize}")
        )


@pytest.mark.parametrize("d", FORMATS, ids=str)
def test_blocked_narrowing_equals_unblocked(d, monkeypatch):
    """fp32 values with arbitrary NaN payloads narrow the same in blocks of 5 as in one block."""
    rng = np.random.default_rng(1)
    bits = rng.integers(0, 2**32, size=(4, 301), dtype=np.uint32)
    bits[:, ::2] |= np.uint32(0x7F800000)  # half of them NaN or inf, with random payloads
    fp32 = bits.view(np.float32)
    whole = dt.to_external(fp32, d)
    monkeypatch.setattr(dt, "_NAN_BLOCK", 5)
    blocked = dt.to_external(fp32, d)
    u = f"u{d.itemsize}"
    np.testing.assert_array_equal(blocked.view(u), whole.view(u))


@nki.jit
def double(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    nisa.tensor_tensor(dst=t, data1=t, data2=t, op=nl.add)
    nisa.dma_copy(dst=out, src=t)
    return out


@nki.jit
def returns_its_argument(x):
    t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    nisa.tensor_tensor(dst=t, data1=t, data2=t, op=nl.add)
    nisa.dma_copy(dst=x, src=t)
    return x


def _argument_values_at_conversion(monkeypatch, kernel, x):
    """Run ``kernel(x)``; which of the run's argument storages still hold values when the outputs are converted."""
    seen: list[list[bool]] = []
    to_host = runner._to_host

    def spy(m, value):
        seen.append([st._data is not None for st in m.inputs])
        return to_host(m, value)

    monkeypatch.setattr(runner, "_to_host", spy)
    got = nki.simulate(kernel)(x)
    return got, seen


def test_arguments_are_released_before_the_outputs_are_converted(monkeypatch):
    x = np.arange(128 * 64, dtype=np.float32).reshape(128, 64)
    got, seen = _argument_values_at_conversion(monkeypatch, double, x)
    np.testing.assert_array_equal(got, 2 * np.arange(128 * 64, dtype=np.float32).reshape(128, 64))
    assert seen == [[False]]


def test_an_argument_the_kernel_returns_keeps_its_values(monkeypatch):
    x = np.arange(128 * 64, dtype=np.float32).reshape(128, 64)
    want = 2 * x
    got, seen = _argument_values_at_conversion(monkeypatch, returns_its_argument, x)
    assert seen == [[True]]
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(x, want)  # NKI 0.x: the written argument is updated in place too
