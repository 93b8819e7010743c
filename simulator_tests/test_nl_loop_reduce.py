"""``nl.loop_reduce``: ``b[...] = nl.loop_reduce(a, op, loop_indices=[i])`` updates ``b`` (allocated before
the loop) in place as ``b = op(b, a)`` every iteration [B1-NL], an associative reduction that is legal in
``nl.affine_range`` (AWS's ``flash_attn_bwd``, nki-samples 0898a77 ``reference/attention.py:1075``, and
``contributed/matmul.py`` use it).  Any other use of its value is an error naming the pattern."""

from __future__ import annotations

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import numpy as np
import pytest

import devkit
from devkit.errors import KernelArgumentError

A = np.random.default_rng(7).standard_normal((4, 128, 64)).astype(np.float32)


def _make(op):
    @nki.jit
    def kernel(a):
        out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
        acc = nl.full((128, 64), 1.0 if op is np.multiply else 0.0, dtype=nl.float32)
        if op is np.maximum:
            acc = nl.full((128, 64), -1e30, dtype=nl.float32)
        for i in nl.affine_range(4):
            x = nl.load(a[i])
            acc[...] = nl.loop_reduce(x, op=op, loop_indices=[i])
        nl.store(out, value=acc)
        return out

    return kernel


@pytest.mark.parametrize(
    "op, ref", [(np.add, np.sum), (np.maximum, np.max), (np.multiply, np.prod)], ids=["add", "max", "mul"]
)
def test_loop_reduce_accumulates_over_affine_iterations(op, ref):
    got = devkit.simulate(_make(op), A)
    np.testing.assert_allclose(got, ref(A, axis=0), rtol=1e-5)


@nki.jit
def loop_reduce_masked(a):
    out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    acc = nl.zeros((128, 64), dtype=nl.float32)
    i_p = nl.arange(128)[:, None]
    for i in nl.affine_range(4):
        acc[...] = nl.loop_reduce(nl.load(a[i]), op=np.add, loop_indices=[i], mask=(i_p < 100))
    nl.store(out, value=acc)
    return out


def test_loop_reduce_with_a_mask_updates_only_the_selected_rows():
    got = devkit.simulate(loop_reduce_masked, A)
    np.testing.assert_allclose(got[:100], A.sum(axis=0)[:100], rtol=1e-5)
    np.testing.assert_array_equal(got[100:], 0.0)


@nki.jit
def loop_reduce_used_as_a_value(a):
    out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    for i in nl.affine_range(4):
        total = nl.loop_reduce(nl.load(a[i]), op=np.add, loop_indices=[i])
        nl.store(out, value=nl.copy(total))
    return out


def test_loop_reduce_value_must_be_assigned_into_its_accumulator():
    with pytest.raises(KernelArgumentError, match="assigned into the tensor it reduces into"):
        devkit.simulate(loop_reduce_used_as_a_value, A)


@nki.jit
def loop_reduce_bad_op(a):
    out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    acc = nl.zeros((128, 64), dtype=nl.float32)
    for i in nl.affine_range(4):
        acc[...] = nl.loop_reduce(nl.load(a[i]), op=np.subtract, loop_indices=[i])
    nl.store(out, value=acc)
    return out


def test_loop_reduce_rejects_a_non_associative_operator():
    with pytest.raises(KernelArgumentError) as e:
        devkit.simulate(loop_reduce_bad_op, A)
    assert e.value.rule == "bad-reduce-op"
