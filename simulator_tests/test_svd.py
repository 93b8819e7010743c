"""Rank rule, truncated SVD, whitened SVD and error metrics on matrices with planted spectra."""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest

from devkit.workflow.svd.factor import (
    SvdInputError,
    activation_error,
    rank_for,
    truncated_svd,
    weight_error,
    whitened_svd,
    whitening_from_activations,
)

# reference/neuronmm.md §4.2: (H, I) and the ranks at compression 0.05 / 0.10 / 0.20.
PAPER_RANKS = {
    "Llama-3.2-1B": (2048, 8192, (1536, 1536, 1280)),
    "Llama-3.2-3B": (3072, 8192, (2176, 2048, 1792)),
    "Qwen3-1.7B": (2048, 6144, (1408, 1408, 1280)),
    "Qwen3-4B": (2560, 9728, (1920, 1792, 1664)),
    "Llama-3.1-8B": (4096, 14336, (3072, 2816, 2560)),
    "Qwen3-8B": (4096, 12288, (2944, 2816, 2432)),
}


def _orthonormal(rng: np.random.Generator, rows: int, cols: int) -> np.ndarray:
    q, _ = np.linalg.qr(rng.standard_normal((rows, cols)))
    return q


def _planted(rng: np.random.Generator, n_in: int, n_out: int, sigma: np.ndarray) -> np.ndarray:
    k = len(sigma)
    return _orthonormal(rng, n_in, k) @ np.diag(sigma) @ _orthonormal(rng, n_out, k).T


# ------------------------------------------------------------------------------------------ rank rule


@pytest.mark.parametrize("model", sorted(PAPER_RANKS))
def test_rank_rule_reproduces_the_paper_table(model: str) -> None:
    h, i, expected = PAPER_RANKS[model]
    for ratio, r in zip((0.05, 0.10, 0.20), expected):
        assert rank_for(h, i, ratio) == r, (model, ratio)
        assert rank_for(i, h, ratio) == r  # the rule is symmetric: down_proj gets the same rank


def test_rank_rule_hand_value_llama_1b() -> None:
    # 8192*2048*0.8 / (10240*128) = 10.24 -> 10 blocks of 128
    assert rank_for(2048, 8192, 0.2) == 1280
    assert rank_for(2048, 8192, 0.2, block=64) == 20 * 64  # 20.48 -> 20


def test_rank_rule_uses_python_rounding_half_to_even() -> None:
    # 640*640*1.0 / (1280*128) = 2.5 exactly: NeuronMM's round() gives 2 (not 3) blocks
    assert rank_for(640, 640, 0.0) == 256
    # 896*896 / (1792*128) = 3.5 -> 4 blocks
    assert rank_for(896, 896, 0.0) == 512


def test_rank_rule_clamps() -> None:
    assert rank_for(4096, 4096, 0.99) == 128  # would round to 0 blocks: at least one block
    assert rank_for(64, 100, 0.2) == 64  # min(I, H) < block: no block-aligned rank exists
    # 47*1e6 / (1000047*16) = 2.94 -> 3 blocks = 48 > min(I, H) = 47: largest block multiple is 32
    assert rank_for(47, 1_000_000, 0.0, block=16) == 32


@pytest.mark.parametrize("bad", [1.0, -0.1, float("nan"), "0.2", None, True])
def test_rank_rule_rejects_bad_ratios(bad: object) -> None:
    with pytest.raises(SvdInputError, match="compression ratio"):
        rank_for(2048, 8192, bad)  # type: ignore[arg-type]


def test_rank_rule_rejects_bad_sizes() -> None:
    with pytest.raises(SvdInputError, match="block"):
        rank_for(2048, 8192, 0.2, block=0)
    with pytest.raises(SvdInputError, match="in_features"):
        rank_for(-3, 8192, 0.2)


# ------------------------------------------------------------------------------------- truncated SVD


def test_truncated_svd_error_is_the_dropped_singular_values() -> None:
    rng = np.random.default_rng(0)
    sigma = np.array([20.0, 11.0, 7.0, 3.0, 2.0, 0.5, 0.25])
    w = _planted(rng, 48, 36, sigma)
    for r in (1, 3, 5):
        fac = truncated_svd(w, r, dtype="float64")
        dropped = math.sqrt(float(np.sum(sigma[r:] ** 2)))
        assert fac.u.shape == (48, r) and fac.v.shape == (r, 36)
        assert weight_error(w, fac.u, fac.v, relative=False) == pytest.approx(dropped, rel=1e-9)
        assert weight_error(w, fac.u, fac.v) == pytest.approx(dropped / np.linalg.norm(sigma), rel=1e-9)
        assert fac.dropped_norm == pytest.approx(dropped, rel=1e-9)
        np.testing.assert_allclose(fac.singular_values[: len(sigma)], sigma, rtol=1e-9)


def test_truncated_svd_splits_sqrt_sigma_into_both_factors() -> None:
    rng = np.random.default_rng(1)
    sigma = np.array([16.0, 9.0, 4.0, 1.0])
    u, v = truncated_svd(_planted(rng, 20, 30, sigma), 3, dtype="float64")  # unpacks like a tuple
    np.testing.assert_allclose(np.linalg.norm(u, axis=0), np.sqrt(sigma[:3]), rtol=1e-9)
    np.testing.assert_allclose(np.linalg.norm(v, axis=1), np.sqrt(sigma[:3]), rtol=1e-9)


def test_truncated_svd_storage_dtype_bfloat16() -> None:
    rng = np.random.default_rng(2)
    w = _planted(rng, 64, 40, np.linspace(5, 1, 20))
    f32 = truncated_svd(w, 10, dtype="float32")
    bf16 = truncated_svd(w, 10, dtype="bfloat16", compute_dtype="float32")
    assert f32.u.dtype == np.float32
    assert bf16.u.dtype == np.dtype(ml_dtypes.bfloat16) and bf16.v.dtype == np.dtype(ml_dtypes.bfloat16)
    e32 = weight_error(w, f32.u, f32.v)
    e16 = weight_error(w, bf16.u.astype(np.float32), bf16.v.astype(np.float32))
    assert e32 < e16 < e32 + 0.02  # bf16 rounding adds a little error, not a lot


@pytest.mark.parametrize(
    ("w", "r", "match"),
    [
        (np.ones(5), 1, "2-D"),
        (np.ones((4, 6)), 0, "between 1 and"),
        (np.ones((4, 6)), 5, "between 1 and"),
        (np.full((4, 6), np.nan), 2, "NaN"),
        (np.ones((4, 6)), 2.0, "integer"),
    ],
)
def test_truncated_svd_bad_input(w: np.ndarray, r: object, match: str) -> None:
    with pytest.raises(SvdInputError, match=match):
        truncated_svd(w, r)  # type: ignore[arg-type]


# -------------------------------------------------------------------------------------- whitened SVD


def test_whitening_identity_on_a_planted_whitened_spectrum() -> None:
    """Activation error of dropping singular values of LᵀW is the root-sum-square of the dropped ones."""
    rng = np.random.default_rng(3)
    n, n_in, n_out = 300, 24, 18
    lower = np.tril(rng.standard_normal((n_in, n_in))) * 0.3 + np.diag(rng.uniform(0.5, 3.0, n_in))
    x = _orthonormal(rng, n, n_in) @ lower.T  # XᵀX = L Lᵀ exactly
    sigma = np.array([30.0, 12.0, 6.0, 2.0, 1.0, 0.3])
    w = np.linalg.solve(lower.T, _planted(rng, n_in, n_out, sigma))  # Lᵀ W has spectrum sigma
    for r in (2, 4):
        fac = whitened_svd(w, x, r, dtype="float64")
        assert fac.whitened and fac.shift == 0.0
        np.testing.assert_allclose(fac.singular_values[: len(sigma)], sigma, rtol=1e-8)
        dropped = math.sqrt(float(np.sum(sigma[r:] ** 2)))
        assert activation_error(x, w, fac.u, fac.v, relative=False) == pytest.approx(dropped, rel=1e-8)
        assert fac.dropped_norm == pytest.approx(dropped, rel=1e-8)


def test_whitened_beats_plain_svd_in_activation_space() -> None:
    rng = np.random.default_rng(4)
    n_in, n_out = 40, 32
    x = rng.standard_normal((500, n_in)) * np.geomspace(10.0, 0.1, n_in)  # strongly anisotropic inputs
    w = rng.standard_normal((n_in, n_out))
    plain = truncated_svd(w, 8, dtype="float64")
    white = whitened_svd(w, x, 8, dtype="float64")
    plain_err = activation_error(x, w, plain.u, plain.v)
    white_err = activation_error(x, w, white.u, white.v)
    assert white_err < 0.7 * plain_err
    # ...and pays for it in weight space, which is not what it optimises
    assert weight_error(w, white.u, white.v) > weight_error(w, plain.u, plain.v)


def test_rank_deficient_calibration_needs_a_shift_and_stays_bounded() -> None:
    rng = np.random.default_rng(5)
    n_in, n_out = 32, 20
    x = rng.standard_normal((10, n_in))  # 10 samples < 32 features: XᵀX is singular
    w = rng.standard_normal((n_in, n_out))
    wh = whitening_from_activations(x)
    assert wh.shift > 0.0 and 0.0 < wh.relative_shift < 1e-3
    fac = whitened_svd(w, wh, 6, dtype="float64")
    assert fac.shift == wh.shift
    assert np.all(np.isfinite(fac.u)) and np.all(np.isfinite(fac.v))
    # with L Lᵀ = XᵀX + shift·I the dropped singular values bound the activation error from above
    assert activation_error(x, w, fac.u, fac.v, relative=False) <= fac.dropped_norm * (1 + 1e-9)
    # a full-rank calibration set needs no shift
    assert whitening_from_activations(rng.standard_normal((200, n_in))).shift == 0.0


def test_all_zero_calibration_falls_back_to_plain_svd() -> None:
    rng = np.random.default_rng(6)
    w = _planted(rng, 16, 12, np.array([5.0, 3.0, 1.0, 0.5]))
    fac = whitened_svd(w, np.zeros((8, 16)), 2, dtype="float64")
    assert fac.shift > 0.0
    plain = truncated_svd(w, 2, dtype="float64")
    assert weight_error(w, fac.u, fac.v) == pytest.approx(weight_error(w, plain.u, plain.v), rel=1e-6)


def test_whitened_svd_width_mismatch_is_a_clear_error() -> None:
    with pytest.raises(SvdInputError, match="width 5 but W has in_features = 6"):
        whitened_svd(np.ones((6, 4)), np.ones((10, 5)), 2)
    with pytest.raises(SvdInputError, match="do not match W"):
        activation_error(np.ones((10, 5)), np.ones((6, 4)), np.ones((6, 2)), np.ones((2, 4)))
    with pytest.raises(SvdInputError, match="do not reconstruct"):
        weight_error(np.ones((6, 4)), np.ones((6, 2)), np.ones((3, 4)))
