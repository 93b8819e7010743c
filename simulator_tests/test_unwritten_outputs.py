"""An output written through a reshape (an alias with its own Storage) counts as written.

Real kernels allocate their HBM output and store into a reshaped view of it (nki-library's cumsum:
``y = nl.ndarray(...); y_2d = y.reshape(...)``, then DMAs into ``y_2d``).  The unwritten-output check
(:class:`devkit.UnwrittenOutputWarning`, ``CostReport.outputs_unwritten``) must see those writes even
after the alias went out of scope; an output that nothing writes, directly or through an alias, is
still reported.
"""

from __future__ import annotations

import warnings

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import numpy as np
import pytest

import devkit
from devkit.errors import UnwrittenOutputWarning
from devkit.nki.runner import TensorSpec


def _store_through_reshape(a):
    out = nl.ndarray((4, 128, 64), dtype=a.dtype, buffer=nl.shared_hbm)
    flat = out.reshape((512, 64))
    for i in nl.affine_range(4):
        t = nl.load(a[i * 128 : (i + 1) * 128, :])
        nl.store(flat[i * 128 : (i + 1) * 128, :], t)
    return out


def _reshape_but_never_store(a):
    out = nl.ndarray((4, 128, 64), dtype=a.dtype, buffer=nl.shared_hbm)
    flat = out.reshape((512, 64))
    del flat
    return out


good = nki.jit(_store_through_reshape)
bad = nki.jit(_reshape_but_never_store)

A = np.arange(512 * 64, dtype=np.float32).reshape(512, 64)


def test_write_through_a_reshape_counts_as_written():
    with warnings.catch_warnings():
        warnings.simplefilter("error", UnwrittenOutputWarning)
        out = devkit.simulate(good, A)
    np.testing.assert_array_equal(out.reshape(512, 64), A)
    report = devkit.estimate(good, TensorSpec((512, 64), "float32"))
    assert report.outputs_unwritten == ()


def test_reshape_without_a_write_is_still_unwritten():
    with pytest.warns(UnwrittenOutputWarning, match=r"_reshape_but_never_store: the returned tensor"):
        devkit.simulate(bad, A)
    report = devkit.estimate(bad, TensorSpec((512, 64), "float32"))
    assert len(report.outputs_unwritten) == 1


def test_aliases_written_in_a_loop_are_not_all_retained():
    """A loop that reshapes and writes its output every iteration keeps one written alias as evidence,
    not one alias per iteration (the base's alias list stays bounded)."""
    from devkit.sim.storage import Storage, alias_of, ever_written

    base = Storage(None, 0, (4, 8), np.float32, "shared_hbm", None, None, name="out", kind="output")
    for _ in range(100):
        a = Storage(None, 0, (32,), np.float32, "shared_hbm", None, None, name="out", kind="output")
        alias_of(a, base)
        a.written = True
    assert ever_written(base)
    assert len(base.aliases) <= 2
