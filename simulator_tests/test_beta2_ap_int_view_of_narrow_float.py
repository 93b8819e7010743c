"""Reading bfloat16/float16 storage through an integer ``.ap(dtype=)`` view gives the format's own bits (NKI 0.x).

nki-library's ``topk_reduce`` (experimental/collectives/topk_reduce.py:88-92 @d2ad3a5) receives a bf16
``[TK, H + 2]`` buffer whose last two columns hold an int32 token index, and reads those through
``input.ap(pattern, offset=H // 2, dtype=nl.int32)``.  The simulator holds bf16/fp16 values as float32, so such a
view is a read-only copy of the bits; an int32 element is never-written where either of its halves is.
"""

from __future__ import annotations

import ml_dtypes
import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np
from _beta2_support import fails

from devkit.errors import UninitializedReadError, UnsupportedError

T, H = 8, 6
IDX = np.array([0, 1, 5, 127, 70000, -1, -2, 2**31 - 1], dtype=np.int32)


def packed_input(dtype) -> np.ndarray:
    """``[T, H + 2]`` of ``dtype`` whose last two columns hold ``IDX`` as int32 (little-endian halves)."""
    x = np.linspace(-3, 3, T * (H + 2)).astype(dtype).reshape(T, H + 2)
    x.view(np.uint16)[:, H:] = IDX.view(np.uint16).reshape(T, 2)
    return x


@nki.jit
def read_packed_index(x):
    """The int32 column of every row, through an int32 view of the 16-bit float HBM tensor."""
    t, hp = x.shape
    idx = nl.ndarray((t, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=idx, src=x.ap(pattern=[[hp // 2, t], [1, 1]], offset=(hp - 2) // 2, dtype=nl.int32))
    out = nl.ndarray((t, 1), dtype=nl.int32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=idx)
    return out


@nki.jit
def read_int16_view(x):
    """Every element of a 16-bit float SBUF tile as int16."""
    t, hp = x.shape
    tile = nl.ndarray((t, hp), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=tile, src=x)
    bits = nl.ndarray((t, hp), dtype=nl.int16, buffer=nl.sbuf)
    nisa.tensor_copy(dst=bits, src=tile.ap(pattern=[[hp, t], [1, hp]], offset=0, dtype=nl.int16))
    out = nl.ndarray((t, hp), dtype=nl.int16, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=bits)
    return out


@nki.jit
def write_through_int_view(x):
    t, hp = x.shape
    ints = nl.ndarray((t, hp // 2), dtype=nl.int32, buffer=nl.sbuf)
    nisa.memset(dst=ints, value=7)
    tile = nl.ndarray((t, hp), dtype=x.dtype, buffer=nl.sbuf)
    view = tile.ap(pattern=[[hp // 2, t], [1, hp // 2]], offset=0, dtype=nl.int32)
    nisa.tensor_copy(dst=view, src=ints)  # <- blame
    out = nl.ndarray((t, hp), dtype=x.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=tile)
    return out


@nki.jit
def read_half_written_pair(x, n_written):
    """Writes the first ``n_written`` bf16 columns of a fresh tile, then reads int32 column 0 through a view."""
    t = x.shape[0]
    tile = nl.ndarray((t, 4), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=tile[:, 0:n_written], src=x[:, 0:n_written])
    idx = nl.ndarray((t, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=idx, src=tile.ap(pattern=[[2, t], [1, 1]], offset=0, dtype=nl.int32))  # <- blame
    out = nl.ndarray((t, 1), dtype=nl.int32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=idx)
    return out


def test_int32_view_of_bf16_hbm_reads_the_packed_indices():
    got = nki.simulate(read_packed_index)(packed_input(ml_dtypes.bfloat16))
    np.testing.assert_array_equal(got.reshape(-1), IDX)


def test_int16_view_of_bf16_and_fp16_tiles_reads_their_bits():
    for dtype in (ml_dtypes.bfloat16, np.float16):
        x = packed_input(dtype)  # includes bf16 NaN bit patterns (the halves of -1 and -2)
        got = nki.simulate(read_int16_view)(x)
        np.testing.assert_array_equal(got, x.view(np.int16))


def test_writing_through_an_int_view_of_bf16_is_refused():
    err = fails(write_through_int_view, UnsupportedError, "unsupported", packed_input(ml_dtypes.bfloat16))
    assert "int32" in str(err), err


def test_an_int32_element_is_written_when_both_bf16_halves_are():
    x = packed_input(ml_dtypes.bfloat16)
    got = nki.simulate(read_half_written_pair)(x, 2)
    np.testing.assert_array_equal(got.reshape(-1), x[:, 0:2].copy().view(np.int32).reshape(-1))


def test_an_int32_element_with_one_never_written_bf16_half_is_an_uninitialized_read():
    fails(
        read_half_written_pair,
        UninitializedReadError,
        "uninitialized-read",
        packed_input(ml_dtypes.bfloat16),
        1,
    )


@nki.jit
def bf16_pairs_as_fp32_and_back(x):
    """mxfp_load_utils.py:119-121 and :150-153 (@d2ad3a5): load bf16 pairs as fp32, then read the fp32 tile as bf16."""
    m, k = x.shape
    t32 = nl.ndarray((m, k // 2), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t32, src=x.ap(pattern=[[k // 2, m], [1, k // 2]], dtype=nl.float32))
    back = nl.ndarray((m, k), dtype=nl.bfloat16, buffer=nl.sbuf)
    nisa.tensor_copy(dst=back, src=t32.ap(pattern=[[k, m], [1, k]], dtype=nl.bfloat16))
    out32 = nl.ndarray((m, k // 2), dtype=nl.float32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out32, src=t32)
    out = nl.ndarray((m, k), dtype=nl.bfloat16, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=back)
    return out32, out


def test_bf16_pairs_read_as_fp32_keep_their_bits_both_ways():
    x = packed_input(
        ml_dtypes.bfloat16
    )  # the index halves include bf16 NaN patterns (fp32 NaNs with payloads)
    got32, got = nki.simulate(bf16_pairs_as_fp32_and_back)(x)
    np.testing.assert_array_equal(np.asarray(got32).view(np.uint32), x.view(np.uint32))
    np.testing.assert_array_equal(np.asarray(got).view(np.uint16), x.view(np.uint16))
