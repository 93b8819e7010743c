"""An ``.ap(dtype=)`` view of a reshaped tensor reads the bytes of the reshaped storage (NKI 0.x).

nki-library's MLP-CTE (``mlp_cte/mlp_cte_tensor_io.py:300-363`` @d2ad3a5, quantised inputs) reshapes the hidden
tensor (``_reshape_io_tensor``, ``tensor.reshape``) and reads the per-row fp32 scale packed after each row's
data through ``view.ap(dtype=nl.float32, pattern=..., offset=...)``.  The reinterpreting view of such an alias
(an alias of an alias) used to come out without values, and the DMA reading it failed with the simulator's
internal "read() in a cost-only run" instead of copying the scales.
"""

from __future__ import annotations

import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np
from _beta2_support import fails

from devkit.errors import BoundsError

ROWS, DATA = 4, 32  # each row: DATA uint8 payload bytes, then one float32 scale (4 bytes)
SCALES = np.array([1.5, -2.0, 0.25, 1e-3], dtype=np.float32)


def packed_rows() -> np.ndarray:
    x = np.arange(ROWS * (DATA + 4), dtype=np.uint8).reshape(2, ROWS // 2, DATA + 4)
    x.reshape(ROWS, DATA + 4)[:, DATA:] = SCALES.view(np.uint8).reshape(ROWS, 4)
    return x


@nki.jit
def read_scales(x, step=(DATA + 4) // 4):
    """The fp32 scale of every row, through a float32 view of the ``[1, ROWS, DATA + 4]`` reshape of ``x``."""
    flat = x.reshape((1, ROWS, DATA + 4))
    per_row = (DATA + 4) // 4
    s = nl.ndarray((ROWS, 1), dtype=nl.float32, buffer=nl.sbuf)
    view = flat.ap(dtype=nl.float32, pattern=[[step, ROWS], [1, 1]], offset=per_row - 1)
    nisa.dma_copy(dst=s, src=view)  # <- blame
    out = nl.ndarray((ROWS, 1), dtype=nl.float32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=s)
    return out


def test_fp32_view_of_a_reshaped_uint8_input_reads_its_scales():
    got = nki.simulate(read_scales)(packed_rows())
    np.testing.assert_array_equal(got.reshape(-1), SCALES)


def test_a_pattern_past_the_end_of_the_reshaped_storage_is_still_refused():
    # one step too long: the last row's view runs past the storage; the DMA refuses it (oob_mode=error)
    err = fails(read_scales, BoundsError, "out-of-bounds", packed_rows(), (DATA + 4) // 4 + 1)
    assert "[1, 4, 9] float32" in str(err), err
