"""nisa.nc_matmul (dtypes incl. fp8, PSUM accumulation over K tiles, masks, multi-dim free axes, PE
tiling, double-row on trn2) and nisa.nc_transpose (TensorE and VectorE) against NumPy."""

from __future__ import annotations

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import numpy as np
import pytest
from _nki_support import (
    BF16,
    F16,
    F32,
    FAST,
    FP8,
    FP8_E5,
    assert_close,
    assert_exact,
    f32,
    rand,
    rng_of,
    seeds,
)
from hypothesis import given
from hypothesis import strategies as st

import devkit
from devkit.errors import TileShapeError

LOW = (BF16, F16, FP8, FP8_E5)


def _ints(rng, shape, dtype, lo=-4, hi=4):
    return rng.integers(lo, hi + 1, size=shape).astype(np.float32).astype(dtype)


def _operands(seed: int, s_shape: tuple, m_shape: tuple, ds=BF16, dm=None) -> tuple[np.ndarray, np.ndarray]:
    """Seeded small-integer stationary (``ds``) and moving (``dm``, default ``ds``) operands: every product
    and partial sum is exact in fp32."""
    rng = rng_of(seed)
    return _ints(rng, s_shape, ds), _ints(rng, m_shape, ds if dm is None else dm)


@nki.jit
def nc_matmul_kernel(stationary, moving):
    out = nl.ndarray((stationary.shape[1], moving.shape[1]), dtype=nl.float32, buffer=nl.shared_hbm)
    s = nl.load(stationary)
    m = nl.load(moving)
    res = nl.ndarray((stationary.shape[1], moving.shape[1]), dtype=nl.float32, buffer=nl.psum)
    res[...] = nisa.nc_matmul(s, m)
    nl.store(out, value=res)
    return out


@FAST
@given(
    k=st.integers(1, 128),
    m=st.integers(1, 128),
    n=st.integers(1, 512),
    ds=st.sampled_from(LOW),
    dm=st.sampled_from(LOW),
    seed=seeds,
)
def test_nc_matmul_low_precision_operands(k, m, n, ds, dm, seed):
    s, mv = _operands(seed, (k, m), (k, n), ds, dm)
    assert_exact(nc_matmul_kernel(s, mv), f32(s).T @ f32(mv))


@FAST
@given(k=st.integers(1, 128), m=st.integers(1, 128), n=st.integers(1, 512), seed=seeds)
def test_nc_matmul_fp32(k, m, n, seed):
    rng = rng_of(seed)
    s = rand(rng, (k, m), F32, -1, 1)
    mv = rand(rng, (k, n), F32, -1, 1)
    assert_close(nc_matmul_kernel(s, mv), s.astype(np.float64).T @ mv.astype(np.float64), atol=1e-5 * k)


def test_nc_matmul_uses_the_fp8_stored_values():
    # 0.3 is not representable in fp8_e4m3; the product uses the stored (rounded) value
    s = np.full((4, 2), 0.3, np.float32).astype(FP8)
    mv = np.full((4, 3), 1.0, np.float32).astype(FP8)
    stored = float(np.float32(s[0, 0]))
    assert stored != pytest.approx(0.3, abs=1e-3)
    assert_exact(nc_matmul_kernel(s, mv), np.full((2, 3), 4 * stored, np.float32))


@FAST
@given(kt=st.integers(1, 5), m=st.integers(1, 128), n=st.integers(1, 512), seed=seeds)
def test_nc_matmul_psum_accumulation_over_k_tiles(kt, m, n, seed):
    s, mv = _operands(seed, (kt * 128, m), (kt * 128, n), BF16)

    @nki.jit
    def k(st_, mv_):
        out = nl.ndarray((m, n), dtype=nl.float32, buffer=nl.shared_hbm)
        acc = nl.zeros((m, n), dtype=nl.float32, buffer=nl.psum)
        for i in nl.affine_range(kt):
            a = nl.load(st_[i * 128 : (i + 1) * 128, :])
            b = nl.load(mv_[i * 128 : (i + 1) * 128, :])
            acc += nisa.nc_matmul(a, b)
        nl.store(out, value=nl.copy(acc, dtype=nl.float32))
        return out

    assert_exact(k(s, mv), f32(s).T @ f32(mv))


def test_nc_matmul_accumulation_into_a_block_dim_psum_tile():
    s, mv = _operands(1, (2, 128, 64), (2, 128, 256), BF16)

    @nki.jit
    def k(st_, mv_):
        out = nl.ndarray((2, 64, 256), dtype=nl.float32, buffer=nl.shared_hbm)
        acc = nl.zeros((2, nl.par_dim(64), 256), dtype=nl.float32, buffer=nl.psum)
        for b in nl.affine_range(2):
            for _i in nl.affine_range(3):
                acc[b] += nisa.nc_matmul(nl.load(st_[b]), nl.load(mv_[b]))
            nl.store(out[b], value=acc[b])
        return out

    want = 3 * np.einsum("bkm,bkn->bmn", f32(s), f32(mv))
    assert_exact(k(s, mv), want)


def test_nc_matmul_multi_dim_free_axes_are_flattened():
    s, mv = _operands(2, (32, 4, 8), (32, 2, 50), BF16)

    @nki.jit
    def k(a, b):
        out = nl.ndarray((32, 100), dtype=nl.float32, buffer=nl.shared_hbm)
        res = nisa.nc_matmul(nl.load(a), nl.load(b))
        nl.store(out, value=res)
        return out

    assert_exact(k(s, mv), f32(s).reshape(32, 32).T @ f32(mv).reshape(32, 100))


@FAST
@given(m=st.integers(1, 128), n=st.integers(1, 512), seed=seeds, data=st.data())
def test_nc_matmul_mask_limits_the_output_region(m, n, seed, data):
    a = data.draw(st.integers(0, m))
    b = data.draw(st.integers(0, n))
    s, mv = _operands(seed, (64, m), (64, n), BF16)

    @nki.jit
    def k(st_, mv_):
        out = nl.ndarray((m, n), dtype=nl.float32, buffer=nl.shared_hbm)
        i_p = nl.arange(m)[:, None]
        i_f = nl.arange(n)[None, :]
        res = nl.full((m, n), 7.0, dtype=nl.float32, buffer=nl.psum)
        res[...] = nisa.nc_matmul(nl.load(st_), nl.load(mv_), mask=(i_p < a) & (i_f < b))
        nl.store(out, value=res)
        return out

    want = np.full((m, n), 7.0, np.float32)
    want[:a, :b] = (f32(s).T @ f32(mv))[:a, :b]
    assert_exact(k(s, mv), want)


def test_nc_matmul_pe_tiling_is_numerically_an_ordinary_matmul():
    """The tile_position example of the docs: 2x2 batched (64,64).T @ (64,512) on sub-arrays."""
    s, mv = _operands(3, (2, 2, 64, 64), (2, 2, 64, 512), BF16)

    @nki.jit
    def k(a, b):
        out = nl.ndarray((2, 2, 64, 512), dtype=nl.float32, buffer=nl.shared_hbm)
        for i in nl.affine_range(2):
            for j in nl.affine_range(2):
                ta = nl.load(a[i, j])
                tb = nl.load(b[i, j])
                res = nisa.nc_matmul(ta, tb, tile_position=((i % 2) * 64, (j % 2) * 64), tile_size=(64, 64))
                nl.store(out[i, j], value=res)
        return out

    assert_exact(k(s, mv), np.einsum("ijkm,ijkn->ijmn", f32(s), f32(mv)))


def test_nc_matmul_onezero_hints_do_not_change_results():
    rng = rng_of(4)
    s = rng.integers(0, 2, size=(16, 8)).astype(np.float32)
    mv = rng.integers(0, 2, size=(16, 9)).astype(np.float32)

    @nki.jit
    def k(a, b):
        out = nl.ndarray((8, 9), dtype=nl.float32, buffer=nl.shared_hbm)
        res = nisa.nc_matmul(nl.load(a), nl.load(b), is_stationary_onezero=True, is_moving_onezero=True)
        nl.store(out, value=res)
        return out

    assert_exact(k(s, mv), s.T @ mv)


def test_nc_matmul_double_row_on_trn2():
    s, mv = _operands(5, (128, 2, 16), (128, 2, 512), FP8)

    @nki.jit(platform_target="trn2")
    def k(a, b):
        out = nl.ndarray((16, 512), dtype=nl.float32, buffer=nl.shared_hbm)
        acc = nl.zeros((16, 512), dtype=nl.float32, buffer=nl.psum)
        acc += nisa.nc_matmul(nl.load(a), nl.load(b), perf_mode="double_row_gen3")
        nl.store(out, value=acc)
        return out

    assert_exact(k(s, mv), np.einsum("kli,klj->ij", f32(s), f32(mv)))


def test_get_nc_version_follows_the_target():
    @nki.jit
    def k(a):
        out = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.shared_hbm)
        nl.store(out, value=int(nisa.get_nc_version()))
        return out

    a = np.zeros((1, 1), np.float32)
    assert int(k(a)[0, 0]) == int(nisa.nc_version.gen2)
    assert int(devkit.simulate(k, a, target="trn2")[0, 0]) == int(nisa.nc_version.gen3)
    assert int(nki.jit(k.func, platform_target="trn2")(a)[0, 0]) == 3


# ---- nc_transpose --------------------------------------------------------------------------------------


@FAST
@given(p=st.integers(1, 128), f=st.integers(1, 128), dtype=st.sampled_from((F32, BF16, F16)), seed=seeds)
def test_nc_transpose_tensor_engine(p, f, dtype, seed):
    x = rand(rng_of(seed), (p, f), dtype)

    @nki.jit
    def k(a):
        out = nl.ndarray((f, p), dtype=a.dtype, buffer=nl.shared_hbm)
        t = nisa.nc_transpose(nl.load(a), engine=nisa.tensor_engine)
        nl.store(out, value=nl.copy(t, dtype=a.dtype))
        return out

    assert_exact(k(x), x.T.copy())


@FAST
@given(
    p=st.integers(1, 32),
    f=st.integers(1, 32),
    dtype=st.sampled_from((F32, BF16, np.dtype(np.int32))),
    seed=seeds,
    from_psum=st.booleans(),
)
def test_nc_transpose_vector_engine(p, f, dtype, seed, from_psum):
    x = rand(rng_of(seed), (p, f), dtype, -100, 100)

    @nki.jit
    def k(a):
        out = nl.ndarray((f, p), dtype=a.dtype, buffer=nl.shared_hbm)
        t = nl.load(a)
        if from_psum:
            src = nl.ndarray((p, f), dtype=nl.float32, buffer=nl.psum)
            src[...] = nl.copy(t, dtype=nl.float32)
            t = src
        r = nisa.nc_transpose(t, engine=nisa.vector_engine)
        nl.store(out, value=nl.copy(r, dtype=a.dtype))
        return out

    if from_psum and dtype.kind == "i":
        dtype = F32
        x = x.astype(np.float32)
    assert_exact(k(x), x.T.copy())


def test_nc_transpose_flattens_extra_free_axes():
    x = rand(rng_of(6), (16, 3, 4), np.float32)

    @nki.jit
    def k(a):
        out = nl.ndarray((12, 16), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out, value=nisa.nc_transpose(nl.load(a), engine=nisa.tensor_engine))
        return out

    assert_exact(k(x), x.reshape(16, 12).T.copy())


@pytest.mark.parametrize(
    ("engine", "shape"),
    [("vector", (33, 8)), ("tensor", (4, 129))],
    ids=["vector-33-rows", "tensor-129-cols"],
)
def test_nc_transpose_limits(engine, shape):
    """VectorE transposes at most 32 x 32 elements, TensorE at most 128 x 128."""

    @nki.jit
    def k(a):
        out = nl.ndarray(shape[::-1], dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out, value=nisa.nc_transpose(nl.load(a), engine=getattr(nisa, f"{engine}_engine")))
        return out

    with pytest.raises(TileShapeError):
        k(np.zeros(shape, np.float32))


def test_transpose_via_matmul_with_identity_is_exact():
    """The allocated-kernel idiom: nc_matmul(x, identity) transposes x (is_transpose=True)."""
    x = rand(rng_of(7), (128, 96), BF16)

    @nki.jit
    def k(a):
        out = nl.ndarray((96, 128), dtype=nl.float32, buffer=nl.shared_hbm)
        ident_h = nl.shared_identity_matrix(128, dtype=nl.bfloat16)
        ident = nl.load(ident_h)
        res = nl.ndarray((96, 128), dtype=nl.float32, buffer=nl.psum)
        res[...] = nisa.nc_matmul(nl.load(a), ident, is_transpose=True)
        nl.store(out, value=res)
        return out

    assert_exact(k(x), f32(x).T.copy())


def test_accumulation_into_a_slice_of_a_psum_tile():
    s, mv = _operands(8, (2, 128, 64), (2, 128, 512), BF16)

    @nki.jit
    def k(a, b):
        out = nl.ndarray((64, 1024), dtype=nl.float32, buffer=nl.shared_hbm)
        acc = nl.zeros((2, nl.par_dim(64), 512), dtype=nl.float32, buffer=nl.psum)
        for j in nl.affine_range(2):
            for i in nl.affine_range(2):
                acc[j, :, 0:256] += nisa.nc_matmul(nl.load(a[i]), nl.load(b[i, :, 256 * j : 256 * j + 256]))
                acc[j, :, 256:512] += nisa.nc_matmul(nl.load(a[i]), nl.load(b[i, :, 256 * j : 256 * j + 256]))
            nl.store(out[:, 512 * j : 512 * j + 512], value=acc[j])
        return out

    full = np.einsum("ikm,ikn->mn", f32(s), f32(mv))
    want = np.concatenate([full[:, 0:256], full[:, 0:256], full[:, 256:512], full[:, 256:512]], axis=1)
    assert_exact(k(s, mv), want)
