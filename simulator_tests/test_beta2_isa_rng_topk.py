"""Issue 12: the NKI 0.x instructions added last -- ``topk``, ``activate2``, ``dropout`` and the PRNG family
(``rng``, ``rand2``, ``set_rng_seed``, ``rand_set_state``, ``rand_get_state``) -- against NumPy, each operand
rule with a failing kernel and its passing twin (error class, rule and blamed line asserted)."""

from __future__ import annotations

import ml_dtypes
import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np
import pytest
from _beta2_support import fails, to_hbm, to_sbuf

from devkit.errors import DtypeError, KernelArgumentError, TileShapeError, UnsupportedError

BF16 = np.dtype(ml_dtypes.bfloat16)
RNG = np.random.default_rng(5)


@pytest.fixture
def gen4(monkeypatch):
    monkeypatch.setenv("NKI_NC_VERSION", "gen4")


@pytest.fixture
def gen3(monkeypatch):
    monkeypatch.setenv("NKI_NC_VERSION", "gen3")


# ---- topk -----------------------------------------------------------------------------------------------------


@nki.jit
def k_topk(a, n, k, val_dtype=nl.bfloat16, p=None):
    src = to_sbuf(a)
    rows = a.shape[0] if p is None else p
    vals = nl.ndarray((rows, k), dtype=val_dtype, buffer=nl.sbuf)
    idx = nl.ndarray((rows, k), dtype=nl.uint32, buffer=nl.sbuf)
    nisa.topk(vals, idx, src[0:rows, :], n)  # <- blame
    return to_hbm(vals), to_hbm(idx)


def _snake(a, n):
    """Each 16-partition group's first n snake elements (element i at partition i % 16, column i // 16)."""
    p, f = a.shape
    return a.astype(np.float32).reshape(p // 16, 16, f).transpose(0, 2, 1).reshape(p // 16, 16 * f)[:, :n]


@pytest.mark.parametrize(("p", "f", "n", "k"), [(16, 8, 128, 8), (32, 10, 150, 20), (128, 4, 64, 64)])
def test_topk_selects_each_groups_largest_in_ascending_order(gen3, p, f, n, k):
    a = RNG.permutation(p * f).reshape(p, f).astype(np.float32)  # distinct values: the order is unique
    a = a.astype(BF16)  # integers < 256 are exact in bf16; larger ones may round into ties
    vals, idx = nki.simulate(k_topk)(a, n, k)
    snakes = _snake(a, n)
    for g in range(p // 16):
        order = np.argsort(-snakes[g], kind="stable")[:k][::-1]
        want_v = snakes[g][order]
        for r in range(16):
            np.testing.assert_array_equal(vals[g * 16 + r].astype(np.float32), want_v)
            np.testing.assert_array_equal(snakes[g][idx[g * 16 + r]], want_v)
    assert idx.dtype == np.uint32 and np.all(idx < n)
    assert np.all(np.diff(vals.astype(np.float32), axis=1) >= 0)


def test_topk_rules(gen3):
    a = RNG.standard_normal((32, 8)).astype(BF16)
    fails(k_topk, DtypeError, "dtype", a, 64, 8, nl.float32)
    nki.simulate(k_topk)(a, 64, 8, nl.bfloat16)
    fails(k_topk, TileShapeError, "topk-shape", a, 64, 8, nl.bfloat16, 24)
    nki.simulate(k_topk)(a, 64, 8, nl.bfloat16, 16)
    fails(k_topk, TileShapeError, "topk-shape", a, 200, 8)  # 8 columns x 16 < 200
    nki.simulate(k_topk)(a, 128, 8)
    fails(k_topk, TileShapeError, "topk-shape", a, 16, 20)  # K > n
    fails(k_topk, KernelArgumentError, "bad-argument", a, 4, 2)  # n < 8
    fails(k_topk, DtypeError, "dtype", a.astype(np.float32), 64, 8)


def test_topk_needs_neuroncore_v3(monkeypatch):
    monkeypatch.setenv("NKI_NC_VERSION", "gen2")
    fails(k_topk, UnsupportedError, "arch", RNG.standard_normal((16, 8)).astype(BF16), 64, 8)


# ---- activate2 ------------------------------------------------------------------------------------------------


@nki.jit
def k_activate2(a, op, imm0, imm1, op0, op1, reverse0=False, relu_param=0.0, reduce_op=None):
    src = to_sbuf(a)
    d = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.sbuf)
    red = nl.ndarray((a.shape[0], 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.activate2(  # <- blame
        d, op, src, imm0, imm1, op0, op1, relu_param=relu_param, reverse0=reverse0,
        reduce_op=reduce_op, reduce_res=red if reduce_op is not None else None,
        reduce_cmd=nisa.reduce_cmd.reset_reduce if reduce_op is not None else nisa.reduce_cmd.idle,
    )  # fmt: skip
    return to_hbm(d), to_hbm(red) if reduce_op is not None else to_hbm(d)


def test_activate2_scale_then_shift_then_function(gen4):
    a = RNG.standard_normal((32, 48)).astype(np.float32)
    got, _ = nki.simulate(k_activate2)(a, nl.exp, 0.5, 0.25, nl.multiply, nl.subtract)
    np.testing.assert_allclose(got, np.exp(a * np.float32(0.5) - np.float32(0.25)), rtol=1e-6)
    got, _ = nki.simulate(k_activate2)(a, nl.copy, 3.0, 0.0, nl.subtract, nl.bypass, True)
    np.testing.assert_array_equal(got, np.float32(3.0) - a)  # reverse0: imm0 - data


def test_activate2_prelu_uses_relu_param_and_reduces_abs_max(gen4):
    a = RNG.standard_normal((16, 40)).astype(np.float32)
    got, red = nki.simulate(k_activate2)(a, nl.prelu, 2.0, 1.0, nl.multiply, nl.add, False, 0.1, nl.abs_max)
    z = a * np.float32(2.0) + np.float32(1.0)
    want = np.where(z >= 0, z, np.float32(0.1) * z)
    np.testing.assert_allclose(got, want, rtol=1e-6)
    pick = np.take_along_axis(want, np.abs(want).argmax(axis=1)[:, None], axis=1)
    np.testing.assert_allclose(red, pick, rtol=1e-6)


def test_activate2_rules(gen4):
    a = RNG.standard_normal((16, 8)).astype(np.float32)
    fails(k_activate2, KernelArgumentError, "bad-alu-op", a, nl.exp, 1.0, 1.0, nl.add, nl.add)
    nki.simulate(k_activate2)(a, nl.exp, 1.0, 1.0, nl.multiply, nl.add)
    fails(
        k_activate2,
        KernelArgumentError,
        "bad-alu-op",
        a,
        nl.exp,
        1.0,
        1.0,
        nl.multiply,
        nl.add,
        False,
        0.0,
        nl.multiply,
    )
    nki.simulate(k_activate2)(a, nl.exp, 1.0, 1.0, nl.multiply, nl.add, False, 0.0, nl.maximum)


def test_activate2_needs_neuroncore_v4(gen3):
    a = RNG.standard_normal((16, 8)).astype(np.float32)
    fails(k_activate2, UnsupportedError, "arch", a, nl.exp, 1.0, 1.0, nl.multiply, nl.add)


# ---- dropout --------------------------------------------------------------------------------------------------


@nki.jit
def k_dropout(a, prob):
    d = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    nisa.dropout(d, to_sbuf(a), prob)  # <- blame
    return to_hbm(d)


def test_dropout_keeps_or_zeroes_each_element_at_the_rate():
    a = np.ones((128, 256), np.float32)
    got = nki.simulate(k_dropout)(a, 0.25)
    assert set(np.unique(got)) <= {0.0, 1.0}
    assert abs((got == 0).mean() - 0.25) < 0.02
    np.testing.assert_array_equal(nki.simulate(k_dropout)(a, 0.0), a)
    np.testing.assert_array_equal(nki.simulate(k_dropout)(a, 1.0), np.zeros_like(a))


@nki.jit
def k_dropout_dst(a):
    d = nl.ndarray((a.shape[0], a.shape[1] + 1), dtype=a.dtype, buffer=nl.sbuf)
    nisa.dropout(d, to_sbuf(a), 0.5)  # <- blame
    return to_hbm(d)


def test_dropout_dst_must_fit_the_result():
    fails(k_dropout_dst, TileShapeError, "dst-shape", np.ones((8, 8), np.float32))
    nki.simulate(k_dropout)(np.ones((8, 9), np.float32), 0.5)


# ---- PRNG -----------------------------------------------------------------------------------------------------


@nki.jit
def k_seeded(seed, dtype=nl.uint32, p=32, f=20, engine=nisa.engine.vector):
    s = to_sbuf(seed)
    nisa.set_rng_seed(s)
    d = nl.ndarray((p, f), dtype=dtype, buffer=nl.sbuf)
    nisa.rng(d, engine=engine)  # <- blame
    return to_hbm(d)


def test_rng_same_seed_same_bits_and_truncation_keeps_the_low_bits():
    seed = np.array([[1234]], np.uint32)
    a = nki.simulate(k_seeded)(seed)
    b = nki.simulate(k_seeded)(seed)
    c = nki.simulate(k_seeded)(np.array([[99]], np.uint32))
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)
    assert a.dtype == np.uint32 and len(np.unique(a)) > 600  # 640 draws of 32 bits: practically distinct
    low = nki.simulate(k_seeded)(seed, nl.uint8)
    np.testing.assert_array_equal(low, (a & 0xFF).astype(np.uint8))
    i16 = nki.simulate(k_seeded)(seed, nl.int16)
    np.testing.assert_array_equal(i16, (a & 0xFFFF).astype(np.uint16).view(np.int16))


def test_rng_bits_are_roughly_uniform():
    a = nki.simulate(k_seeded)(np.array([[7]], np.uint32), nl.uint32, 128, 64).astype(np.float64)
    assert abs(a.mean() / 2**32 - 0.5) < 0.02
    bits = np.unpackbits(a.astype(np.uint32).view(np.uint8))
    assert abs(bits.mean() - 0.5) < 0.01


def test_rng_rules():
    seed = np.array([[1]], np.uint32)
    fails(k_seeded, UnsupportedError, "not-simulated", seed, nl.float32)
    fails(k_seeded, KernelArgumentError, "bad-engine", seed, nl.uint32, 32, 20, nisa.engine.scalar)
    nki.simulate(k_seeded)(seed, nl.uint32, 32, 20, nisa.engine.gpsimd)


@nki.jit
def k_seed_shape(seed):
    s = to_sbuf(seed)
    nisa.set_rng_seed(s)  # <- blame
    return to_hbm(s)


def test_set_rng_seed_takes_one_32_bit_value():
    fails(k_seed_shape, TileShapeError, "bad-shape", np.ones((1, 2), np.uint32))
    fails(k_seed_shape, DtypeError, "dtype", np.ones((1, 1), np.uint16))
    nki.simulate(k_seed_shape)(np.ones((1, 1), np.int32))


@nki.jit
def k_rand2(seed, lo, hi, p=64, f=100):
    nisa.set_rng_seed(to_sbuf(seed))
    d = nl.ndarray((p, f), dtype=nl.float32, buffer=nl.sbuf)
    nisa.rand2(d, lo, hi)  # <- blame
    return to_hbm(d)


def test_rand2_is_uniform_in_the_interval(gen4):
    got = nki.simulate(k_rand2)(np.array([[3]], np.uint32), -2.0, 6.0)
    assert got.min() >= -2.0 and got.max() < 6.0
    assert abs(got.mean() - 2.0) < 0.1
    assert abs(np.var(got) - 64 / 12) < 0.3  # variance of U(a, b) is (b - a)^2 / 12


def test_rand2_needs_neuroncore_v4(gen3):
    fails(k_rand2, UnsupportedError, "arch", np.array([[3]], np.uint32), 0.0, 1.0)


@nki.jit
def k_state_roundtrip(state, engine=nisa.engine.gpsimd, words=6):
    s = to_sbuf(state)
    nisa.rand_set_state(s, engine=engine)  # <- blame
    first = nl.ndarray((state.shape[0], 8), dtype=nl.uint32, buffer=nl.sbuf)
    nisa.rng(first, engine=engine)
    back = nl.ndarray((state.shape[0], words), dtype=nl.uint32, buffer=nl.sbuf)
    nisa.rand_get_state(back, engine=engine)
    nisa.rand_set_state(s, engine=engine)
    again = nl.ndarray((state.shape[0], 8), dtype=nl.uint32, buffer=nl.sbuf)
    nisa.rng(again, engine=engine)
    return to_hbm(first), to_hbm(again), to_hbm(back)


@pytest.mark.parametrize(("engine", "words"), [(nisa.engine.gpsimd, 6), (nisa.engine.vector, 24)])
def test_rand_set_state_replays_the_stream_and_get_state_reads_it(gen4, engine, words):
    state = RNG.integers(1, 2**32, size=(16, words), dtype=np.uint32)
    first, again, back = nki.simulate(k_state_roundtrip)(state, engine, words)
    np.testing.assert_array_equal(first, again)  # the same state gives the same numbers
    assert not np.array_equal(back, state)  # drawing advanced the state ...
    _, _, back2 = nki.simulate(k_state_roundtrip)(state, engine, words)
    np.testing.assert_array_equal(back2, back)  # ... deterministically


def test_rand_state_rules(gen3):
    state = RNG.integers(1, 2**32, size=(16, 24), dtype=np.uint32)
    # NeuronCore-v3 reaches only the GpSimd's state (6 words per lane)
    fails(k_state_roundtrip, KernelArgumentError, "bad-engine", state, nisa.engine.vector, 24)
    fails(k_state_roundtrip, TileShapeError, "rng-state-shape", state, nisa.engine.gpsimd, 6)
    fails(k_state_roundtrip, DtypeError, "dtype", state[:, :6].astype(np.int32), nisa.engine.gpsimd, 6)
    nki.simulate(k_state_roundtrip)(state[:, :6], nisa.engine.gpsimd, 6)


def test_rand_state_needs_neuroncore_v3(monkeypatch):
    monkeypatch.setenv("NKI_NC_VERSION", "gen2")
    state = RNG.integers(1, 2**32, size=(16, 6), dtype=np.uint32)
    fails(k_state_roundtrip, UnsupportedError, "arch", state)
