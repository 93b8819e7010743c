"""NKI 0.x rules that nki-library's attention kernels (@d2ad3a5, hardware-tested) rely on, with good/bad twins.

* ``nisa.tensor_tensor`` operands need only agree in partitions and elements per partition
  (``reference/nki_beta2.md`` §5.2): ``attention_tkg.py`` subtracts a ``[P, n, s]`` stride-0 view of the
  running maximum from a ``[P, n * s]`` tile, element for element in row-major order.  Operands of different
  element counts stay a ``shape-mismatch`` error at the kernel line (docs/errors.md).
* ``nl.NKIObject`` subclasses are built from their fields, unannotated class attributes included, also under
  ``@dataclass``: ``attention_cte.py`` constructs ``SectionParams(section_idx=..., ...)`` from such a class.
"""

from __future__ import annotations

from dataclasses import dataclass

import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np
import pytest
from _beta2_support import fails, to_hbm, to_sbuf

from devkit.errors import TileShapeError

RNG = np.random.default_rng(12)
P, N, S = 128, 4, 6


# ---- tensor_tensor: free shapes may differ, element counts may not -------------------------------------------------


@nki.jit
def subtract_broadcast_max(qk, qk_max, s_wrong=S):
    """``qk`` is ``[P, N * S]``; ``qk_max`` ``[P, S]`` is read as ``[P, N, s_wrong]`` (stride 0 along N)."""
    a = to_sbuf(qk)
    m = to_sbuf(qk_max)
    view = m[:, 0:s_wrong].expand_dim(1).broadcast(1, N)
    out = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_tensor(out, a, view, op=nl.subtract)  # <- blame
    return to_hbm(out)


def test_stride0_view_of_another_free_shape_is_read_element_for_element():
    qk = RNG.standard_normal((P, N * S)).astype(np.float32)
    qk_max = RNG.standard_normal((P, S)).astype(np.float32)
    got = nki.simulate(subtract_broadcast_max)(qk, qk_max)
    want = (qk.reshape(P, N, S) - qk_max[:, None, :]).reshape(P, N * S)
    np.testing.assert_array_equal(got, want)


def test_views_with_different_elements_per_partition_are_a_shape_mismatch():
    qk = RNG.standard_normal((P, N * S)).astype(np.float32)
    qk_max = RNG.standard_normal((P, S)).astype(np.float32)
    err = fails(subtract_broadcast_max, TileShapeError, "shape-mismatch", qk, qk_max, S - 1)
    assert "elements per partition" in str(err)


@nki.jit
def column_minus_expanded(col, other, width=1):
    """``[P, 1]`` minus a ``[P, 1, width]`` view: the ranks differ (NumPy would broadcast to ``[P, P, 1]``)."""
    a = to_sbuf(col)
    b = to_sbuf(other)
    out = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_tensor(out, a, b[:, 0:width].expand_dim(1), op=nl.subtract)  # <- blame
    return to_hbm(out)


def test_ranks_may_differ_when_the_element_counts_agree():
    col = RNG.standard_normal((P, 1)).astype(np.float32)
    other = RNG.standard_normal((P, 2)).astype(np.float32)
    np.testing.assert_array_equal(nki.simulate(column_minus_expanded)(col, other), col - other[:, 0:1])


def test_ranks_differing_and_element_counts_differing_is_a_shape_mismatch():
    col = RNG.standard_normal((P, 1)).astype(np.float32)
    other = RNG.standard_normal((P, 2)).astype(np.float32)
    fails(column_minus_expanded, TileShapeError, "shape-mismatch", col, other, 2)


# ---- nl.NKIObject: unannotated class attributes are fields, also under @dataclass ----------------------------------


@dataclass
class _Section(nl.NKIObject):
    index = None  # unannotated, as nki-library's SectionParams
    offset = 0

    def end(self, length):
        return self.offset + length


class _PlainSection(nl.NKIObject):
    index = None
    offset = 0


@pytest.mark.parametrize("cls", [_Section, _PlainSection])
def test_nkiobject_unannotated_class_attributes_are_fields(cls):
    s = cls(index=2, offset=512)
    assert (s.index, s.offset) == (2, 512)
    assert cls(index=1).offset == 0  # the class attribute is the default
    assert cls(3, 7).offset == 7  # positionally, in declaration order


@pytest.mark.parametrize("cls", [_Section, _PlainSection])
def test_nkiobject_unknown_field_is_still_refused(cls):
    with pytest.raises(TypeError, match="unexpected keyword argument 'length'"):
        cls(index=0, length=3)
