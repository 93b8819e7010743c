"""What never-written memory reads as (reference/nki_beta2.md section 6, item 3).

NKI 0.x's CPU simulator fills a new tensor with NaN (floating-point types) or 4 (integer types); Beta 1 keeps
the kit's recognisable integer sentinel (``test_nl_memory.py``).  Output elements a kernel never writes show it.
The poison is filled in lazily (on the first access that is not a write of every element), so the twins here
also cover a fresh tile whose first write is whole and one whose first write is partial.
"""

from __future__ import annotations

import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np
import pytest


def _half_written(dtype):
    @nki.jit
    def k(x):
        out = nl.ndarray((4, 8), dtype=dtype, buffer=nl.shared_hbm)
        t = nl.ndarray((2, 8), dtype=dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x)  # a fresh tile written whole: no poison needed
        nisa.dma_copy(dst=out[0:2, :], src=t)  # half of a fresh output: the other half stays new memory
        return out

    return k


@pytest.mark.parametrize("dtype", [np.int32, np.int16, np.uint8])
def test_never_written_integer_output_elements_read_as_4(dtype):
    x = np.arange(16, dtype=dtype).reshape(2, 8)
    got = nki.simulate(_half_written(dtype))(x)
    np.testing.assert_array_equal(got[0:2], x)
    np.testing.assert_array_equal(got[2:], np.full((2, 8), 4, dtype=dtype))


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_never_written_float_output_elements_read_as_nan(dtype):
    x = np.linspace(-1, 1, 16, dtype=dtype).reshape(2, 8)
    got = nki.simulate(_half_written(dtype))(x)
    np.testing.assert_array_equal(got[0:2], x)
    assert np.isnan(got[2:]).all()


@nki.jit
def _partial_first_write(x):
    out = nl.ndarray((2, 8), dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray((2, 8), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t[:, 0:4], src=x[:, 0:4])  # the tile's first write covers half of it
    nisa.dma_copy(dst=out[:, 0:4], src=t[:, 0:4])
    return out


def test_a_partial_first_write_keeps_the_rest_new():
    x = np.arange(16, dtype=np.int32).reshape(2, 8)
    got = nki.simulate(_partial_first_write)(x)
    np.testing.assert_array_equal(got[:, 0:4], x[:, 0:4])
    np.testing.assert_array_equal(got[:, 4:], np.full((2, 4), 4, dtype=np.int32))
