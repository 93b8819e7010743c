"""Python's ``/`` on integer tiles is true division: the quotient is not rounded to an integer on the way
(nki-samples 0898a77 ``reference/vision.py`` resize_nearest floors ``position_tile / width`` itself, and
its test compares against NumPy's floor of the true quotient); ``//`` floors and keeps the integer dtype.
``nl.divide`` itself keeps the documented type promotion (int32 in, int32 out)."""

from __future__ import annotations

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import numpy as np

import devkit


@nki.jit
def quotients(a):
    out = nl.ndarray((128, 4), dtype=nl.float32, buffer=nl.shared_hbm)
    pos = nisa.iota(nl.arange(128)[:, None] + 2176, dtype=nl.int32)
    res = nl.ndarray((128, 4), dtype=nl.float32)
    true_q = pos / 38
    res[:, 0:1] = nl.copy(true_q, dtype=nl.float32)
    res[:, 1:2] = nl.copy(nl.floor(true_q, dtype=nl.int32), dtype=nl.float32)
    floor_q = pos // 38
    res[:, 2:3] = nl.copy(floor_q, dtype=nl.float32)
    res[:, 3:4] = nl.copy(nl.divide(pos, 38), dtype=nl.float32)
    nl.store(out, value=res)
    return out


def test_true_division_of_integer_tiles():
    got = devkit.simulate(quotients, np.zeros((1, 1), np.float32))
    pos = np.arange(2176, 2176 + 128)
    np.testing.assert_array_equal(got[:, 0], (pos / 38).astype(np.float32))
    np.testing.assert_array_equal(got[:, 1], np.floor(pos / 38))
    np.testing.assert_array_equal(got[:, 2], pos // 38)
    # nl.divide of int32 by an int: int32 result, fp32 quotient rounded to nearest on output
    np.testing.assert_array_equal(got[:, 3], np.rint(pos / 38))


@nki.jit
def floor_divide_dtype(a):
    out = nl.ndarray((128, 1), dtype=nl.int32, buffer=nl.shared_hbm)
    pos = nisa.iota(nl.arange(128)[:, None], dtype=nl.int32)
    q = pos // 7
    assert q.dtype == nl.int32
    nl.store(out, value=q)
    return out


def test_floor_division_keeps_the_integer_dtype():
    got = devkit.simulate(floor_divide_dtype, np.zeros((1, 1), np.float32))
    np.testing.assert_array_equal(got[:, 0], np.arange(128) // 7)
