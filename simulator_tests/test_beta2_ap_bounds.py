"""Issue 12, bounds of NKI 0.x access patterns (``t.ap(pattern, offset)``) on SBUF: good/bad twins.

Two rules, both from how the hardware addresses an on-chip tensor (``reference/nki_beta2.md`` §4, ``.ap``):

* Making a view is not an access.  nki-library @d2ad3a5 (hardware-tested) builds ``.ap`` views past the end
  of a weight tile for the columns of an incomplete last PSUM tile and skips the ``nc_matmul`` that would use
  them (``output_projection_tkg``, ``if h_2_idx < cfg.h_2_size``).  So an out-of-bounds view is legal to make;
  the instruction that uses it raises :class:`BoundsError` at its own line, naming the line that made the view.
* On SBUF/PSUM the first ``[step, count]`` pair walks partitions and the others walk one partition's
  ``A * B`` elements (of a ``[P, A, B]`` tile); they never continue into the next partition (each partition is
  its own memory row), so a free offset at or past ``A * B`` is out of bounds even when the flat element
  number is below the tile's size.
"""

from __future__ import annotations

import _beta2_support as b2
import ml_dtypes
import nki
import nki.isa as nisa
import nki.language as nl
import nki.typing as nt
import numpy as np
import pytest
from _nki_support import line_of

import devkit
from devkit.errors import BoundsError

P, HEADS, H1, H2 = (
    128,
    2,
    4,
    3,
)  # a [P, HEADS, H1 * H2] weight tile, columns of stride H2 (as output_projection)
W = np.arange(P * HEADS * H1 * H2, dtype=np.float32).reshape(P, HEADS, H1 * H2) % 97


def fails(kernel, *args):
    """The kernel raises BoundsError (rule out-of-bounds) blamed on its ``# <- blame`` line."""
    return b2.fails(kernel, BoundsError, "out-of-bounds", *args)


# ---- a view past the end is legal to make, an error to use --------------------------------------------------


@nki.jit
def strided_columns(w, n_cols=H2 + 1, guard=True):
    """out[p, h, j, i] = w[p, h, i * H2 + j]; for ``j == H2`` the view runs past the tile (the kernel skips it
    when ``guard``)."""
    t = b2.to_sbuf(w)
    out = nl.ndarray((P, HEADS, H2, H1), dtype=w.dtype, buffer=nl.sbuf)
    for h in range(HEADS):
        for j in range(n_cols):
            col = t.ap(pattern=[[HEADS * H1 * H2, P], [H2, H1]], offset=h * H1 * H2 + j)  # <- made
            if j < H2 or not guard:
                nisa.tensor_copy(dst=out[:, h, j % H2, :], src=col)  # <- blame
    return b2.to_hbm(out)


def test_out_of_bounds_view_that_is_never_used_is_legal():
    got = nki.simulate(strided_columns)(W)
    want = W.reshape(P, HEADS, H1, H2).transpose(0, 1, 3, 2)
    np.testing.assert_array_equal(got, want)


def test_using_the_out_of_bounds_view_raises_at_the_using_line_and_names_the_making_line():
    err = fails(strided_columns, W, H2 + 1, False)
    msg = str(err)
    assert "reaches element 24 of a partition" in msg and "holds 24 elements per partition" in msg, msg
    assert f":{line_of(strided_columns, '# <- made')})" in msg, msg


@nki.jit
def slice_of_view(w, stop=3):
    """A slice of an out-of-bounds view is usable when the slice itself stays inside the tile."""
    t = b2.to_sbuf(w)
    col = t.ap(pattern=[[HEADS * H1 * H2, P], [H2, H1]], offset=H1 * H2 + H2)  # elements 15, 18, 21, 24
    out = nl.ndarray((P, 3), dtype=w.dtype, buffer=nl.sbuf)
    nisa.tensor_copy(dst=out, src=col[:, stop - 3 : stop])  # <- blame
    return b2.to_hbm(out)


def test_a_slice_of_an_out_of_bounds_view_is_checked_by_its_own_elements():
    np.testing.assert_array_equal(nki.simulate(slice_of_view)(W), W[:, 1, [3, 6, 9]])
    fails(slice_of_view, W, 4)


@nki.jit
def wrapper_on_view(w, offset=0):
    t = b2.to_sbuf(w)
    col = t.ap(pattern=[[HEADS * H1 * H2, P], [H2, H1]], offset=offset)
    out = nl.add(col, col)  # <- blame
    return b2.to_hbm(out)


def test_nl_wrappers_check_the_view_too():
    np.testing.assert_array_equal(nki.simulate(wrapper_on_view)(W), 2 * W[:, 0, 0:12:3])
    fails(wrapper_on_view, W, H1 * H2 + H2)


def test_a_cost_only_run_reports_the_use_too():
    spec = nt.tensor[[P, HEADS, H1 * H2], nl.float32]
    rep = devkit.estimate(strided_columns, spec, target="trn2")
    assert rep.instructions == 2 + HEADS * H2  # two DMAs and the six columns used
    with pytest.raises(BoundsError) as e:
        devkit.estimate(strided_columns, spec, H2 + 1, False, target="trn2")
    assert e.value.lineno == line_of(strided_columns, "# <- blame")


# ---- free elements are bounded per partition --------------------------------------------------------------------

A, B = 2, 8  # an SBUF [P, A, B] tile: 16 elements per partition
X = (np.arange(P * A * B, dtype=np.float32).reshape(P, A, B) % 29) - 14  # exact in float8_e4m3


@nki.jit
def partition_window(x, first=3, start=2, count=14, n_part=8):
    """Partitions first .. first + n_part - 1, elements start .. start + count - 1 of each."""
    t = b2.to_sbuf(x)
    out = nl.ndarray((n_part, count), dtype=x.dtype, buffer=nl.sbuf)
    view = t.ap(pattern=[[A * B, n_part], [1, count]], offset=first * A * B + start)
    nisa.tensor_copy(dst=out, src=view)  # <- blame
    return b2.to_hbm(out)


def test_a_window_of_partitions_and_elements():
    got = nki.simulate(partition_window)(X)
    np.testing.assert_array_equal(got, X.reshape(P, A * B)[3:11, 2:16])


def test_free_elements_do_not_continue_into_the_next_partition():
    # elements 4 .. 19 of partitions 0 .. 63: element numbers below the tile's 2048, yet 16 .. 19 lie past
    # each partition's 16 elements (the old flat check read partition p + 1 there)
    err = fails(partition_window, X, 0, 4, 16, 64)
    assert "reaches element 19 of a partition" in str(err), err


def test_partitions_past_the_last_are_out_of_bounds():
    err = fails(partition_window, X, 121, 0, 16, 8)
    assert "reaches partition 128" in str(err), err


@nki.jit
def fp8_pairs(x, offset=0):
    """A three-pair pattern (partition, A, B) over a float8_e4m3 tile, as output_projection's double-row views."""
    t8 = nl.ndarray((P, A, B), dtype=nl.float8_e4m3, buffer=nl.sbuf)
    nisa.tensor_copy(dst=t8, src=b2.to_sbuf(x))
    view = t8.ap(pattern=[[A * B, P], [B, A], [1, B // 2]], offset=offset)
    out = nl.ndarray((P, A, B // 2), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=out, src=view)  # <- blame
    return b2.to_hbm(out)


def test_fp8_three_pair_pattern():
    got = nki.simulate(fp8_pairs)(X, 4)
    want = X.astype(ml_dtypes.float8_e4m3fn).astype(np.float32)[:, :, 4:8]
    np.testing.assert_array_equal(got, want)
    err = fails(fp8_pairs, X, 5)  # element 8 + 5 + 3 = 16 of a 16-element partition
    assert "float8_e4m3" in str(err), err
