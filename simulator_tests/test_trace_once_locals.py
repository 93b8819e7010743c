"""Beta-1 "trace the loop body once" emulation (devkit.sim.tracelocals): plain Python locals are restored at
the start of every iteration, and a local the kernel re-binds to an index expression is never evaluated as
a boolean (nki-samples 0898a77 ``contributed/neuron-team-kernels/conv.py`` ``conv1d_depthwise_default``
re-binds its loop variable ``i_out`` to ``i_k1 * K0 + i_k0`` in a later loop)."""

from __future__ import annotations

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import numpy as np

import devkit

A = np.arange(128 * 64, dtype=np.float32).reshape(128, 64)


@nki.jit
def loop_variable_rebound_to_an_index_expression(a):
    out = nl.ndarray((2, 128, 64), dtype=a.dtype, buffer=nl.shared_hbm)
    t = nl.load(a)
    for i_col in nl.affine_range(4):  # leaves i_col bound to a plain int
        t[:, i_col] = nl.multiply(t[:, i_col], 1.0)
    i_p = nl.arange(128)[:, None]
    for n in nl.affine_range(2):
        i_col = nl.arange(64)[None, :] * 1  # the same name, now an index expression
        nl.store(out[n, i_p, i_col], value=t[i_p, i_col])
    return out


@nki.jit
def counter_advances_once(a):
    out = nl.ndarray((128, 64), dtype=a.dtype, buffer=nl.shared_hbm)
    t = nl.load(a)
    offset = 0
    for _i in nl.sequential_range(4):
        offset += 16  # traced once: 16 in every iteration, not 16, 32, 48, 64
        t[:, 0:16] = nl.add(t[:, 0:16], float(offset))
    nl.store(out, value=t)
    return out


def test_a_local_rebound_to_an_index_expression_is_not_compared():
    got = devkit.simulate(loop_variable_rebound_to_an_index_expression, A)
    np.testing.assert_array_equal(got, np.stack([A, A]))


def test_plain_locals_are_restored_every_iteration():
    got = devkit.simulate(counter_advances_once, A)
    want = A.copy()
    want[:, 0:16] += 4 * 16.0
    np.testing.assert_array_equal(got, want)
