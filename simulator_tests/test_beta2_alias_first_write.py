"""A whole-tensor ``dma_copy`` through a reshape alias initialises the tensor it stands for (NKI 0.x).

nki-library's hardware-tested ``indexed_flatten`` fills a private-HBM scratch through
``scratch.reshape(...)`` and later reads it through another reshape: the first write's fast path (no
per-element bookkeeping for a fresh tensor written whole) must not skip the alias's base.
"""

from __future__ import annotations

import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np
from _beta2_support import fails

from devkit.errors import UninitializedReadError


@nki.jit
def fill_through_alias(x):
    scratch = nl.ndarray((4, 256), dtype=x.dtype, buffer=nl.private_hbm)
    t = nl.ndarray((128, 8), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    nisa.dma_copy(dst=scratch.reshape((128, 8)), src=t)
    back = nl.ndarray((128, 8), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=back, src=scratch.reshape((128, 8)))
    out = nl.ndarray((128, 8), dtype=x.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=back)
    return out


@nki.jit
def fill_base_read_through_earlier_alias(x):
    scratch = nl.ndarray((4, 256), dtype=x.dtype, buffer=nl.private_hbm)
    view = scratch.reshape((128, 8))  # made before the base is written
    t = nl.ndarray((4, 256), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x.reshape((4, 256)))
    nisa.dma_copy(dst=scratch, src=t)
    back = nl.ndarray((128, 8), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=back, src=view)
    out = nl.ndarray((128, 8), dtype=x.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=back)
    return out


@nki.jit
def read_through_alias_never_written(x):
    scratch = nl.ndarray((4, 256), dtype=x.dtype, buffer=nl.private_hbm)
    back = nl.ndarray((128, 8), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=back, src=scratch.reshape((128, 8)))  # <- blame
    out = nl.ndarray((128, 8), dtype=x.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=back)
    return out


X = np.arange(128 * 8, dtype=np.int32).reshape(128, 8)


def test_a_whole_write_through_an_alias_initialises_its_base():
    np.testing.assert_array_equal(nki.simulate(fill_through_alias)(X), X)


def test_a_whole_write_of_the_base_initialises_an_earlier_alias():
    np.testing.assert_array_equal(nki.simulate(fill_base_read_through_earlier_alias)(X), X)


def test_reading_an_alias_of_a_never_written_tensor_is_an_error():
    fails(read_through_alias_never_written, UninitializedReadError, "uninitialized-read", X)
