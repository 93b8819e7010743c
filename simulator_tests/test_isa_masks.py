"""mask= on every element-wise nl / nisa instruction: assigned into an existing tile, the instruction
computes only where the mask holds and every other element keeps its old value."""

from __future__ import annotations

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import numpy as np
import pytest
from _nki_support import F32, FAST, assert_close, f32, rand, rng_of, seeds
from hypothesis import given
from hypothesis import strategies as st

# name -> (fn(x, y, v, mask) -> tile, reference(x, y, v) in float64); x, y: (P, F), v: (P, 1)
OPS = {
    "nl.exp": (lambda x, y, v, m: nl.exp(x, mask=m), lambda x, y, v: np.exp(x)),
    "nl.add": (lambda x, y, v, m: nl.add(x, y, mask=m), lambda x, y, v: x + y),
    "nl.maximum_bcast": (lambda x, y, v, m: nl.maximum(x, v, mask=m), lambda x, y, v: np.maximum(x, v)),
    "nl.where": (
        lambda x, y, v, m: nl.where(nl.greater(x, 0.0), x, y, mask=m),
        lambda x, y, v: np.where(x > 0, x, y),
    ),
    "nl.copy": (lambda x, y, v, m: nl.copy(x, mask=m), lambda x, y, v: x),
    "tensor_tensor": (
        lambda x, y, v, m: nisa.tensor_tensor(x, y, np.multiply, mask=m),
        lambda x, y, v: x * y,
    ),
    "tensor_scalar": (
        lambda x, y, v, m: nisa.tensor_scalar(x, np.add, v, op1=np.multiply, operand1=2.0, mask=m),
        lambda x, y, v: (x + v) * 2,
    ),
    "scalar_tensor_tensor": (
        lambda x, y, v, m: nisa.scalar_tensor_tensor(
            data=x, op0=np.multiply, operand0=v, op1=np.subtract, operand1=y, mask=m
        ),
        lambda x, y, v: x * v - y,
    ),
    "activation": (
        lambda x, y, v, m: nisa.activation(nl.tanh, x, bias=v, scale=0.5, mask=m),
        lambda x, y, v: np.tanh(x * 0.5 + v),
    ),
    "tensor_copy": (lambda x, y, v, m: nisa.tensor_copy(x, mask=m), lambda x, y, v: x),
    "reciprocal": (lambda x, y, v, m: nisa.reciprocal(y, mask=m), lambda x, y, v: 1 / y),
    "memset": (
        lambda x, y, v, m: nisa.memset(x.shape, 3.5, nl.float32, mask=m),
        lambda x, y, v: np.full(x.shape, 3.5),
    ),
    "affine_select": (
        lambda x, y, v, m: nisa.affine_select(
            pred=(nl.arange(x.shape[0])[:, None] >= nl.arange(x.shape[1])[None, :]),
            on_true_tile=x,
            on_false_value=-1.0,
            mask=m,
        ),
        lambda x, y, v: np.where(np.arange(x.shape[0])[:, None] >= np.arange(x.shape[1])[None, :], x, -1.0),
    ),
    "tensor_tensor_scan": (
        lambda x, y, v, m: nisa.tensor_tensor_scan(x, y, 0.0, np.multiply, np.add, mask=m),
        None,
    ),
    "dropout_p0": (lambda x, y, v, m: nisa.dropout(x, 0.0, mask=m), lambda x, y, v: x),
    "iota": (
        lambda x, y, v, m: nisa.iota(
            nl.arange(x.shape[1])[None, :] + 0 * nl.arange(x.shape[0])[:, None], nl.float32, mask=m
        ),
        lambda x, y, v: np.broadcast_to(np.arange(x.shape[1])[None, :], x.shape),
    ),
}


def _scan(x, y):
    r = np.zeros(x.shape)
    prev = np.zeros(x.shape[0])
    for i in range(x.shape[1]):
        prev = x[:, i] * prev + y[:, i]
        r[:, i] = prev
    return r


@pytest.mark.parametrize("name", sorted(OPS))
@FAST
@given(p=st.integers(1, 128), f=st.integers(1, 200), seed=seeds, data=st.data())
def test_mask_on_every_elementwise_instruction(name, p, f, seed, data):
    fn, ref = OPS[name]
    a = data.draw(st.integers(0, p))
    b = data.draw(st.integers(0, f))
    rng = rng_of(seed)
    x = rand(rng, (p, f), F32, -1, 1)
    y = rand(rng, (p, f), F32, 0.5, 2)
    v = rand(rng, (p, 1), F32, -1, 1)
    old = rand(rng, (p, f), F32, 10, 20)

    @nki.jit
    def k(xa, ya, va, oa):
        out = nl.ndarray((p, f), dtype=nl.float32, buffer=nl.shared_hbm)
        i_p = nl.arange(p)[:, None]
        i_f = nl.arange(f)[None, :]
        tx, ty, tv = nl.load(xa), nl.load(ya), nl.load(va)
        res = nl.load(oa)
        res[i_p, i_f] = fn(tx, ty, tv, (i_p < a) & (i_f < b))
        nl.store(out, value=res)
        return out

    got = k(x, y, v, old)
    full = (
        _scan(f32(x).astype(np.float64), y.astype(np.float64))
        if ref is None
        else ref(x.astype(np.float64), y.astype(np.float64), v.astype(np.float64))
    )
    want = old.astype(np.float64).copy()
    want[:a, :b] = full[:a, :b]
    assert_close(got, want, rtol=1e-5, atol=1e-5)
