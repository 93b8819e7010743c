"""SVD factorisation of MLP weights: the rank rule, truncated and whitened SVD, error metrics.

Orientation used throughout this module (it is the kernels' orientation, not Hugging Face's):

* ``W`` is ``(in_features, out_features)`` and a projection computes ``y = x @ W`` for activations
  ``x`` of shape ``(tokens, in_features)``.  A Hugging Face ``nn.Linear`` stores ``weight`` as
  ``(out, in)``, so ``W = weight.T``.
* A rank-``r`` factorisation is ``W ≈ U @ V`` with ``U`` ``(in, r)`` and ``V`` ``(r, out)``, so the
  compressed projection is ``y = (x @ U) @ V``; this is the operand layout of NeuronMM's fused
  ``X·U·V`` kernels (the kernel's "U" is the first factor, hidden -> rank).

**Compression ratio** means the fraction of parameters *removed*: ``keep = 1 - compression``.  The rank
rule is NeuronMM's ``round(I*H*keep / ((I+H)*128)) * 128`` (NMM ``models/llama/modeling_llama.py``,
``NeuronLlamaMLP_SVD.__init__``), with the block size a parameter.  It uses Python's ``round``
(round-half-to-even), exactly like that code.

Checkpoints are read by :mod:`devkit.workflow.svd.checkpoint` and compressed by
:mod:`devkit.workflow.svd.compress` (see docs/svd.md).

Units: ranks, features and parameter counts are element counts; errors are relative Frobenius norms
(dimensionless) unless stated otherwise; shifts are in the units of ``XᵀX`` (activation squared).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import ml_dtypes
import numpy as np

__all__ = [
    "DTYPES",
    "Factorization",
    "SvdInputError",
    "Whitening",
    "activation_error",
    "as_matrix",
    "check_compression",
    "rank_for",
    "resolve_dtype",
    "truncated_svd",
    "weight_error",
    "whitened_svd",
    "whitening_from_activations",
    "whitening_from_gram",
]

#: Float dtypes the compression tools compute in or store factors as.
DTYPES: dict[str, np.dtype] = {
    "float64": np.dtype(np.float64),
    "float32": np.dtype(np.float32),
    "float16": np.dtype(np.float16),
    "bfloat16": np.dtype(ml_dtypes.bfloat16),
}


class SvdInputError(ValueError):
    """Bad input to the compression tools (shapes, ratios, files); the message names what was wrong."""


# --------------------------------------------------------------------------------------------- helpers


def resolve_dtype(name: str | np.dtype | type) -> np.dtype:
    """Map ``"float32"``, ``"bfloat16"``, ``"float16"``, ``"float64"`` (or a NumPy dtype) to a dtype."""
    if isinstance(name, str):
        key = name.strip().lower()
        if key not in DTYPES:
            raise SvdInputError(f"unknown dtype {name!r}; choose one of {sorted(DTYPES)}")
        return DTYPES[key]
    dt = np.dtype(name)
    if dt not in DTYPES.values():
        raise SvdInputError(f"unsupported dtype {dt}; choose one of {sorted(DTYPES)}")
    return dt


_F64 = np.dtype(np.float64)


def as_matrix(a: Any, what: str, dtype: np.dtype = _F64) -> np.ndarray:
    """``a`` as a finite 2-D real matrix of ``dtype``; :class:`SvdInputError` naming ``what`` otherwise."""
    arr = np.asarray(a)
    if arr.ndim != 2:
        raise SvdInputError(f"{what} must be a 2-D matrix, got shape {arr.shape}")
    if arr.size == 0:
        raise SvdInputError(f"{what} is empty (shape {arr.shape})")
    if arr.dtype.kind not in "fiu" and arr.dtype != np.dtype(ml_dtypes.bfloat16):
        raise SvdInputError(f"{what} must hold real numbers, got dtype {arr.dtype}")
    out = arr.astype(dtype)
    if not np.all(np.isfinite(out)):
        raise SvdInputError(f"{what} contains NaN or infinite values")
    return out


def _check_rank(r: int, shape: tuple[int, int], what: str) -> int:
    if isinstance(r, bool) or not isinstance(r, (int, np.integer)):
        raise SvdInputError(f"rank for {what} must be an integer, got {r!r}")
    r = int(r)
    if not 1 <= r <= min(shape):
        raise SvdInputError(f"rank {r} for {what} {shape} must be between 1 and min(in, out) = {min(shape)}")
    return r


# ------------------------------------------------------------------------------------------ rank rule


def check_compression(compression: float) -> float:
    """Validate a compression ratio (fraction of parameters removed, ``0 <= c < 1``); return it as float."""
    if isinstance(compression, bool) or not isinstance(compression, (int, float, np.floating)):
        raise SvdInputError(f"compression ratio must be a number in [0, 1), got {compression!r}")
    c = float(compression)
    if not (0.0 <= c < 1.0):
        raise SvdInputError(
            f"compression ratio must be in [0, 1) (the fraction of parameters removed), got {compression}"
        )
    return c


def rank_for(in_features: int, out_features: int, compression: float, block: int = 128) -> int:
    """Block-aligned rank for an ``in_features x out_features`` weight at a compression ratio.

    ``compression`` is the fraction of parameters removed (0 <= compression < 1), ``keep = 1 - compression``,
    and the rank is ``round(I*H*keep / ((I+H)*block)) * block`` (NeuronMM's rule; Python rounding).  The
    rank of ``U (I x r) @ V (r x H)`` with ``r (I + H) ≈ keep * I * H`` parameters.

    Clamping: the result is at least ``block`` (a rank of 0 would delete the layer) and at most the largest
    multiple of ``block`` that is ``<= min(I, H)`` (an SVD has only ``min(I, H)`` singular values, and the
    kernels tile the rank in blocks).  When ``min(I, H) < block`` no block-aligned rank exists and the rank
    is ``min(I, H)``, i.e. no compression.  Because of the clamp and the rounding the parameters actually
    removed differ from ``compression``; :class:`LayerReport` reports the achieved saving.
    """
    for name, value in (("in_features", in_features), ("out_features", out_features), ("block", block)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
            raise SvdInputError(f"{name} must be a positive integer, got {value!r}")
    i, h, b = int(in_features), int(out_features), int(block)
    keep = 1.0 - check_compression(compression)
    r = round(i * h * keep / ((i + h) * b)) * b
    full = min(i, h)
    upper = (full // b) * b
    if upper < b:
        return full
    return int(min(max(r, b), upper))


# ------------------------------------------------------------------------------------- factorisations


@dataclass(frozen=True)
class Factorization:
    """A rank-``r`` factorisation ``W ≈ u @ v`` of a ``(in, out)`` weight.

    ``u`` is ``(in, r)`` and ``v`` is ``(r, out)``, both in the requested storage dtype.
    ``singular_values`` is the full spectrum of the matrix that was truncated: ``W`` for plain SVD,
    ``Sᵀ W`` (whitened weight) for whitened SVD, in float64, descending.  ``shift`` is the diagonal shift
    added to ``XᵀX`` before its Cholesky factorisation (0.0 when none was needed or for plain SVD).
    Iterating yields ``u`` then ``v``, so ``u, v = truncated_svd(W, r)`` works.
    """

    u: np.ndarray
    v: np.ndarray
    singular_values: np.ndarray
    whitened: bool = False
    shift: float = 0.0

    @property
    def rank(self) -> int:
        """The rank ``r`` (columns of ``u``)."""
        return int(self.u.shape[1])

    @property
    def dropped_norm(self) -> float:
        """Root-sum-square of the dropped singular values (the Eckart-Young error of the truncation)."""
        tail = self.singular_values[self.rank :]
        return float(math.sqrt(float(np.sum(tail * tail))))

    def product(self, dtype: np.dtype | type = np.float64) -> np.ndarray:
        """``u @ v`` computed in ``dtype`` (default float64), shape ``(in, out)``."""
        return self.u.astype(dtype) @ self.v.astype(dtype)

    def __iter__(self) -> Iterator[np.ndarray]:
        yield self.u
        yield self.v


def _split_factors(
    left: np.ndarray, s: np.ndarray, right_t: np.ndarray, r: int
) -> tuple[np.ndarray, np.ndarray]:
    root = np.sqrt(s[:r])
    return left[:, :r] * root[None, :], root[:, None] * right_t[:r, :]


def _svd(m: np.ndarray, compute_dtype: np.dtype) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    left, s, right_t = np.linalg.svd(m.astype(compute_dtype), full_matrices=False)
    return left.astype(np.float64), s.astype(np.float64), right_t.astype(np.float64)


def truncated_svd(
    W: np.ndarray,
    r: int,
    *,
    dtype: str | np.dtype = "float32",
    compute_dtype: str | np.dtype = "float64",
) -> Factorization:
    """Plain truncated SVD ``W ≈ U @ V`` with ``sqrt(Σ_r)`` split into both factors.

    ``W`` is ``(in, out)``; returns ``U (in, r)``, ``V (r, out)`` in ``dtype`` (float32/bfloat16/...).
    The SVD runs in ``compute_dtype`` (float64 or float32).  This is what NeuronMM's own compression
    script does (no whitening).  The Frobenius error is the root-sum-square of the dropped singular values.
    """
    w = as_matrix(W, "W")
    r = _check_rank(r, w.shape, "W")
    left, s, right_t = _svd(w, resolve_dtype(compute_dtype))
    u, v = _split_factors(left, s, right_t, r)
    out = resolve_dtype(dtype)
    return Factorization(u.astype(out), v.astype(out), s)


@dataclass(frozen=True)
class Whitening:
    """Cholesky factor ``L`` (lower, ``(in, in)``, float64) with ``L Lᵀ = XᵀX + shift·I``.

    ``shift`` is the diagonal shift that was needed to make ``XᵀX`` numerically positive definite
    (0.0 if none), ``relative_shift`` the same divided by the mean of ``diag(XᵀX)``, ``samples`` the
    number of calibration rows.  ``S = L`` is SVD-LLM's whitening matrix in this module's orientation.
    """

    factor: np.ndarray
    shift: float
    relative_shift: float
    samples: int

    @property
    def width(self) -> int:
        """The activation width (in_features) this whitening applies to."""
        return int(self.factor.shape[0])


def whitening_from_gram(gram: np.ndarray, samples: int, *, rcond: float = 1e-10) -> Whitening:
    """Cholesky-factor a Gram matrix ``XᵀX`` (float64), adding a growing diagonal shift when needed.

    ``XᵀX`` counts as positive definite when the Cholesky factorisation succeeds and every pivot
    ``L_ii²`` is at least ``rcond`` times the mean diagonal; otherwise ``shift = 10·rcond·scale`` is
    added and multiplied by 10 until it is (``scale`` = mean diagonal, or 1 for an all-zero matrix).
    """
    g = np.asarray(gram, dtype=np.float64)
    if g.ndim != 2 or g.shape[0] != g.shape[1]:
        raise SvdInputError(f"Gram matrix must be square, got shape {g.shape}")
    if not np.all(np.isfinite(g)):
        raise SvdInputError("calibration Gram matrix XᵀX contains NaN or infinite values")
    g = 0.5 * (g + g.T)
    mean_diag = float(np.mean(np.diag(g)))
    scale = mean_diag if mean_diag > 0 else 1.0
    floor = rcond * scale
    eye = np.eye(g.shape[0])
    shift = 0.0
    for attempt in range(20):
        try:
            factor = np.linalg.cholesky(g + shift * eye if shift else g)
        except np.linalg.LinAlgError:
            factor = None
        if factor is not None and float(np.min(np.diag(factor))) ** 2 >= floor:
            return Whitening(factor, shift, shift / scale, int(samples))
        shift = 10.0 * floor * (10.0**attempt)
    raise SvdInputError(  # pragma: no cover - a finite symmetric matrix + 1e19·scale·I is PD
        f"could not make XᵀX positive definite even with a diagonal shift of {shift:g}"
    )


def whitening_from_activations(X: np.ndarray, *, rcond: float = 1e-10) -> Whitening:
    """Whitening for calibration activations ``X`` of shape ``(n, in)`` (Gram matrix in float64)."""
    x = as_matrix(X, "calibration activations X")
    return whitening_from_gram(x.T @ x, x.shape[0], rcond=rcond)


def whitened_svd(
    W: np.ndarray,
    X_calib: np.ndarray | Whitening,
    r: int,
    *,
    dtype: str | np.dtype = "float32",
    compute_dtype: str | np.dtype = "float64",
) -> Factorization:
    """SVD-LLM-style truncation-aware whitened SVD of ``W (in, out)`` for activations ``X (n, in)``.

    With ``S = L`` the lower Cholesky factor of ``XᵀX`` (``L Lᵀ = XᵀX``, float64, shifted if needed):
    ``‖X A‖_F = ‖Lᵀ A‖_F`` for any ``A``, so the activation-space error of an approximation ``W'`` is the
    weight-space error of ``Lᵀ W'`` against ``M = Lᵀ W``.  ``M`` is truncated by SVD,
    ``M ≈ P_r Σ_r Q_rᵀ``, and ``S⁻ᵀ`` is folded into the input-side factor:
    ``U = L⁻ᵀ P_r sqrt(Σ_r)`` ``(in, r)``, ``V = sqrt(Σ_r) Q_rᵀ`` ``(r, out)``, so ``X @ U @ V`` approximates
    ``X @ W`` with activation error ``sqrt(Σ_{i>r} σ_i²)`` (exact when no shift was needed, an upper bound
    otherwise).  (SVD-LLM writes this as ``W S`` for PyTorch's ``(out, in)`` weights; ``Lᵀ W`` is its
    transpose.)  ``X_calib`` may be a precomputed :class:`Whitening` to reuse one factorisation.
    """
    w = as_matrix(W, "W")
    r = _check_rank(r, w.shape, "W")
    wh = X_calib if isinstance(X_calib, Whitening) else whitening_from_activations(X_calib)
    if wh.width != w.shape[0]:
        raise SvdInputError(
            f"calibration activations have width {wh.width} but W has in_features = {w.shape[0]} "
            f"(W is (in, out); activations are (n, in))"
        )
    lower_t = wh.factor.T
    left, s, right_t = _svd(lower_t @ w, resolve_dtype(compute_dtype))
    a, v = _split_factors(left, s, right_t, r)
    u = np.linalg.solve(lower_t, a)
    out = resolve_dtype(dtype)
    return Factorization(u.astype(out), v.astype(out), s, whitened=True, shift=wh.shift)


# --------------------------------------------------------------------------------------- error metrics


def _check_factors(u: np.ndarray, v: np.ndarray, w: np.ndarray) -> None:
    if u.shape[0] != w.shape[0] or v.shape[1] != w.shape[1] or u.shape[1] != v.shape[0]:
        raise SvdInputError(f"factor shapes {u.shape} @ {v.shape} do not reconstruct W {w.shape}")


def _frobenius_error(ref: np.ndarray, approx: np.ndarray, relative: bool) -> float:
    """``‖ref - approx‖_F``, divided by ``‖ref‖_F`` when ``relative`` (0 for an exact zero reference)."""
    err = float(np.linalg.norm(ref - approx))
    if not relative:
        return err
    norm = float(np.linalg.norm(ref))
    return err / norm if norm > 0 else (0.0 if err == 0 else math.inf)


def weight_error(
    W: np.ndarray,
    u: np.ndarray,
    v: np.ndarray,
    *,
    relative: bool = True,
    compute_dtype: str | np.dtype = "float64",
) -> float:
    """Weight-space Frobenius error ``‖W - u v‖_F`` (divided by ``‖W‖_F`` when ``relative``).

    Computed in ``compute_dtype`` (float64 by default; float32 halves the memory for large weights).
    """
    cdt = resolve_dtype(compute_dtype)
    w = as_matrix(W, "W", cdt)
    uu, vv = as_matrix(u, "u", cdt), as_matrix(v, "v", cdt)
    _check_factors(uu, vv, w)
    return _frobenius_error(w, uu @ vv, relative)


def activation_error(
    X: np.ndarray,
    W: np.ndarray,
    u: np.ndarray,
    v: np.ndarray,
    *,
    relative: bool = True,
    compute_dtype: str | np.dtype = "float64",
) -> float:
    """Activation-space Frobenius error ``‖X W - X u v‖_F`` on calibration data ``X (n, in)``.

    Divided by ``‖X W‖_F`` when ``relative``; computed in ``compute_dtype`` (float64 by default).
    """
    cdt = resolve_dtype(compute_dtype)
    x, w = as_matrix(X, "calibration activations X", cdt), as_matrix(W, "W", cdt)
    uu, vv = as_matrix(u, "u", cdt), as_matrix(v, "v", cdt)
    if x.shape[1] != w.shape[0]:
        raise SvdInputError(f"activations of width {x.shape[1]} do not match W with in_features {w.shape[0]}")
    _check_factors(uu, vv, w)
    return _frobenius_error(x @ w, (x @ uu) @ vv, relative)
