"""nl.matmul (both layouts, accumulation over K tiles in PSUM, operand masking), nl.transpose and the
NKI matmul tutorial kernels, against NumPy.  TensorE multiplies the *stored* values, accumulates in fp32."""

from __future__ import annotations

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import numpy as np
import pytest
from _nki_support import (
    BF16,
    F32,
    FAST,
    FLOATS,
    SLOW,
    assert_close,
    assert_exact,
    f32,
    rand,
    rng_of,
    seeds,
    slow,
)
from hypothesis import given
from hypothesis import strategies as st

mm_dtypes = st.sampled_from(FLOATS)
K = st.integers(1, 128)
M = st.integers(1, 128)
N = st.integers(1, 512)


def _ints(rng, shape, dtype):
    """Small integer values: every product and partial sum is exact in fp32 (order-independent)."""
    return rng.integers(-8, 9, size=shape).astype(np.float32).astype(dtype)


@nki.jit
def matmul_kernel(x, y, transpose_x):
    out = nl.ndarray(
        (x.shape[0] if not transpose_x else x.shape[1], y.shape[1]), dtype=nl.float32, buffer=nl.shared_hbm
    )
    tx = nl.load(x)
    ty = nl.load(y)
    res = nl.matmul(tx, ty, transpose_x=transpose_x)
    nl.store(out, value=res)
    return out


@FAST
@given(k=K, m=M, n=N, dx=mm_dtypes, seed=seeds, transpose_x=st.booleans())
def test_matmul_exact_on_integer_values(k, m, n, dx, seed, transpose_x):
    rng = rng_of(seed)
    dy = dx if dx == F32 else (BF16 if dx != F32 else F32)
    x = _ints(rng, (k, m) if transpose_x else (m, k), dx)
    y = _ints(rng, (k, n), dy)
    got = matmul_kernel(x, y, transpose_x)
    want = (f32(x).T if transpose_x else f32(x)) @ f32(y)
    assert_exact(got, want)


@FAST
@given(k=K, m=M, n=N, dtype=mm_dtypes, seed=seeds, transpose_x=st.booleans())
def test_matmul_random_values_fp32_accumulate(k, m, n, dtype, seed, transpose_x):
    rng = rng_of(seed)
    x = rand(rng, (k, m) if transpose_x else (m, k), dtype, -1, 1)
    y = rand(rng, (k, n), dtype, -1, 1)
    got = matmul_kernel(x, y, transpose_x)
    # reference: the stored (already rounded) values, products and sums in float64
    want = (x.astype(np.float64).T if transpose_x else x.astype(np.float64)) @ y.astype(np.float64)
    assert got.dtype == F32
    assert_close(got, want, F32, rtol=1e-5, atol=1e-5 * k)


def test_matmul_accumulates_in_fp32_not_in_the_operand_dtype():
    # 1 + 127 * 2^-9: every bf16 operand is exact, the fp32 sum keeps all the small terms
    x = np.ones((128, 1), np.float32).astype(BF16)
    y = np.full((128, 1), 2**-9, np.float32)
    y[0] = 1.0
    got = matmul_kernel(x, y.astype(BF16), True)
    assert_exact(got, np.array([[1.0 + 127 * 2**-9]], np.float32))


def test_matmul_multiplies_the_stored_bf16_values():
    # the HBM input is fp32; nl.load(dtype=bf16) rounds it, and the TensorE uses the rounded value
    @nki.jit
    def k(x, y):
        out = nl.ndarray((1, 1), dtype=nl.float32, buffer=nl.shared_hbm)
        tx = nl.load(x, dtype=nl.bfloat16)
        ty = nl.load(y, dtype=nl.bfloat16)
        nl.store(out, value=nl.matmul(tx, ty, transpose_x=True))
        return out

    x = np.array([[1.0 + 2**-9]], np.float32)  # rounds to 1.0 in bf16
    y = np.array([[3.0]], np.float32)
    assert_exact(k(x, y), np.array([[3.0]], np.float32))


def _tiled(a_t, b, tk, tm, tn):
    """The NKI tutorial 'tiled matmul': lhsT [K, M], rhs [K, N], loops over M, N and K tiles."""

    @nki.jit
    def nki_matmul_tiled_(lhsT, rhs):
        K, M = lhsT.shape
        K_, N = rhs.shape
        assert K == K_
        result = nl.ndarray((M, N), dtype=lhsT.dtype, buffer=nl.shared_hbm)
        for m in nl.affine_range(M // tm):
            for n in nl.affine_range(N // tn):
                res_psum = nl.zeros((tm, tn), nl.float32, buffer=nl.psum)
                for k in nl.affine_range(K // tk):
                    lhsT_tile = nl.ndarray((tk, tm), dtype=lhsT.dtype, buffer=nl.sbuf)
                    rhs_tile = nl.ndarray((tk, tn), dtype=rhs.dtype, buffer=nl.sbuf)
                    lhsT_tile[...] = nl.load(lhsT[k * tk : (k + 1) * tk, m * tm : (m + 1) * tm])
                    rhs_tile[...] = nl.load(rhs[k * tk : (k + 1) * tk, n * tn : (n + 1) * tn])
                    res_psum += nl.matmul(lhsT_tile[...], rhs_tile[...], transpose_x=True)
                res_sb = nl.copy(res_psum, dtype=result.dtype)
                nl.store(result[m * tm : (m + 1) * tm, n * tn : (n + 1) * tn], value=res_sb)
        return result

    return nki_matmul_tiled_(a_t, b)


@FAST
@given(
    kt=st.integers(1, 4),
    mt=st.integers(1, 2),
    nt=st.integers(1, 2),
    seed=seeds,
    tiles=st.sampled_from([(128, 128, 512), (64, 32, 96), (128, 128, 33), (7, 5, 3)]),
)
def test_tiled_matmul_accumulates_over_k_tiles(kt, mt, nt, seed, tiles):
    tk, tm, tn = tiles
    rng = rng_of(seed)
    a_t = _ints(rng, (kt * tk, mt * tm), BF16)
    b = _ints(rng, (kt * tk, nt * tn), BF16)
    got = _tiled(a_t, b, tk, tm, tn)
    assert_exact(got, (f32(a_t).T @ f32(b)).astype(BF16))


@slow
@SLOW
@given(kt=st.integers(1, 4), seed=seeds, dtype=mm_dtypes)
def test_tiled_matmul_random_sweep(kt, seed, dtype):
    rng = rng_of(seed)
    a_t = rand(rng, (kt * 128, 256), dtype, -1, 1)
    b = rand(rng, (kt * 128, 512), dtype, -1, 1)
    got = _tiled(a_t, b, 128, 128, 512)
    want = (a_t.astype(np.float64).T @ b.astype(np.float64)).astype(np.float32).astype(dtype)
    assert_close(got, want, dtype)


def test_matmul_fully_optimized_style_block_dims():
    """Block-dimension SBUF tensors (nl.par_dim) as in the 'fully optimized' tutorial."""
    rng = rng_of(11)
    K, M, N, TK, TM, TN = 256, 128, 1024, 128, 128, 512
    a_t = _ints(rng, (K, M), BF16)
    b = _ints(rng, (K, N), BF16)

    @nki.jit
    def k(lhsT, rhs):
        result = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.shared_hbm)
        lhsT_tiles = nl.ndarray((K // TK, nl.par_dim(TK), M), dtype=lhsT.dtype, buffer=nl.sbuf)
        rhs_tiles = nl.ndarray((K // TK, nl.par_dim(TK), N), dtype=rhs.dtype, buffer=nl.sbuf)
        for kk in nl.affine_range(K // TK):
            lhsT_tiles[kk] = nl.load(lhsT[kk * TK : (kk + 1) * TK, :])
            rhs_tiles[kk] = nl.load(rhs[kk * TK : (kk + 1) * TK, :])
        for n in nl.affine_range(N // TN):
            res_psum = nl.zeros((TM, TN), nl.float32, buffer=nl.psum)
            for kk in nl.affine_range(K // TK):
                res_psum += nl.matmul(
                    lhsT_tiles[kk, :, 0:TM], rhs_tiles[kk, :, n * TN : (n + 1) * TN], transpose_x=True
                )
            nl.store(result[:, n * TN : (n + 1) * TN], value=nl.copy(res_psum))
        return result

    assert_exact(k(a_t, b), f32(a_t).T @ f32(b))


def test_matmul_accumulation_into_fresh_ndarray_psum_starts_from_the_first_product():
    rng = rng_of(2)
    x = _ints(rng, (3 * 128, 64), BF16)
    y = _ints(rng, (3 * 128, 100), BF16)

    @nki.jit
    def k(a, b):
        out = nl.ndarray((64, 100), dtype=nl.float32, buffer=nl.shared_hbm)
        acc = nl.ndarray((64, 100), dtype=nl.float32, buffer=nl.psum)
        for i in nl.affine_range(3):
            acc += nl.matmul(
                nl.load(a[i * 128 : (i + 1) * 128, :]),
                nl.load(b[i * 128 : (i + 1) * 128, :]),
                transpose_x=True,
            )
        nl.store(out, value=acc)
        return out

    assert_exact(k(x, y), f32(x).T @ f32(y))


def test_matmul_assignment_overwrites_psum():
    rng = rng_of(3)
    x = _ints(rng, (32, 16), BF16)
    y = _ints(rng, (32, 8), BF16)

    @nki.jit
    def k(a, b):
        out = nl.ndarray((16, 8), dtype=nl.float32, buffer=nl.shared_hbm)
        acc = nl.zeros((16, 8), dtype=nl.float32, buffer=nl.psum)
        ta, tb = nl.load(a), nl.load(b)
        acc += nl.matmul(ta, tb, transpose_x=True)
        acc[...] = nl.matmul(ta, tb, transpose_x=True)  # overwrite, not accumulate
        acc += nl.matmul(ta, tb, transpose_x=True)
        nl.store(out, value=acc)
        return out

    assert_exact(k(x, y), 2 * (f32(x).T @ f32(y)))


@FAST
@given(k=st.integers(1, 128), m=st.integers(2, 128), n=st.integers(2, 512), seed=seeds, data=st.data())
def test_matmul_operand_masking(k, m, n, seed, data):
    """nl.matmul(lhsT[i_lhs_f < a], rhs[i_rhs_f < b]) computes only output rows < a and columns < b."""
    a = data.draw(st.integers(1, m))
    b = data.draw(st.integers(1, n))
    rng = rng_of(seed)
    x = _ints(rng, (k, m), BF16)
    y = _ints(rng, (k, n), BF16)

    @nki.jit
    def kern(lhsT, rhs):
        out = nl.ndarray((m, n), dtype=nl.float32, buffer=nl.shared_hbm)
        i_k = nl.arange(k)[:, None]
        i_lhs_f = nl.arange(m)[None, :]
        i_rhs_f = nl.arange(n)[None, :]
        tl = nl.load(lhsT[i_k, i_lhs_f])
        tr = nl.load(rhs[i_k, i_rhs_f])
        res = nl.full((m, n), -1.0, dtype=nl.float32, buffer=nl.psum)
        res[...] = nl.matmul(tl[i_lhs_f < a], tr[i_rhs_f < b], transpose_x=True)
        nl.store(out, value=res)
        return out

    want = np.full((m, n), -1.0, np.float32)
    want[:a, :b] = (f32(x).T @ f32(y))[:a, :b]
    assert_exact(kern(x, y), want)


# ---- nl.transpose ------------------------------------------------------------------------------------


@FAST
@given(p=st.integers(1, 128), f=st.integers(1, 128), dtype=mm_dtypes, seed=seeds)
def test_nl_transpose(p, f, dtype, seed):
    x = rand(rng_of(seed), (p, f), dtype)

    @nki.jit
    def k(a):
        out = nl.ndarray((f, p), dtype=a.dtype, buffer=nl.shared_hbm)
        nl.store(out, value=nl.transpose(nl.load(a)))
        return out

    assert_exact(k(x), x.T.copy())


@pytest.mark.parametrize("dtype", [np.float32, BF16])
def test_tensor_T_property_transposes(dtype):
    x = rand(rng_of(4), (20, 30), dtype)

    @nki.jit
    def k(a):
        out = nl.ndarray((30, 20), dtype=a.dtype, buffer=nl.shared_hbm)
        nl.store(out, value=nl.load(a).T)
        return out

    assert_exact(k(x), x.T.copy())
