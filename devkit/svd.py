"""SVD compression of MLP weights: the rank rule, truncated and whitened SVD, error metrics, checkpoint IO.

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

Checkpoints: ``compress_checkpoint`` reads Llama/Qwen-style safetensors checkpoints (one file, a
``model.safetensors.index.json`` or a directory), replaces each ``<prefix>.mlp.{gate,up,down}_proj.weight``
by ``<prefix>.mlp.<proj>.svd_u`` ``[in, r]`` and ``<prefix>.mlp.<proj>.svd_v`` ``[r, out]`` and copies every
other tensor through unchanged.  See docs/svd.md.

Units: ranks, features and parameter counts are element counts; errors are relative Frobenius norms
(dimensionless) unless stated otherwise; shifts are in the units of ``XᵀX`` (activation squared).
"""

from __future__ import annotations

import json
import math
import os
import re
import tempfile
from collections.abc import Callable, Iterator, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np

__all__ = [
    "PROJECTIONS",
    "Calibration",
    "CheckpointSource",
    "CompressionSummary",
    "Factorization",
    "LayerReport",
    "SvdInputError",
    "Whitening",
    "activation_error",
    "check_compression",
    "compress_checkpoint",
    "load_calibration",
    "rank_for",
    "resolve_dtype",
    "summary_path_for",
    "truncated_svd",
    "weight_error",
    "whitened_svd",
    "whitening_from_activations",
    "whitening_from_gram",
]

#: The MLP projections that are compressed, in the order they run.
PROJECTIONS = ("gate_proj", "up_proj", "down_proj")

#: Matches ``<prefix>.mlp.<proj>.weight``; MoE experts (``mlp.experts.N.*``) deliberately do not match.
_PROJ_RE = re.compile(r"^(?P<prefix>(?:.*\.)?mlp)\.(?P<proj>gate_proj|up_proj|down_proj)\.weight$")

_DTYPES: dict[str, np.dtype] = {
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
        if key not in _DTYPES:
            raise SvdInputError(f"unknown dtype {name!r}; choose one of {sorted(_DTYPES)}")
        return _DTYPES[key]
    dt = np.dtype(name)
    if dt not in _DTYPES.values():
        raise SvdInputError(f"unsupported dtype {dt}; choose one of {sorted(_DTYPES)}")
    return dt


_F64 = np.dtype(np.float64)


def _as_matrix(a: Any, what: str, dtype: np.dtype = _F64) -> np.ndarray:
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
    w = _as_matrix(W, "W")
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
    x = _as_matrix(X, "calibration activations X")
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
    w = _as_matrix(W, "W")
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
    w = _as_matrix(W, "W", cdt)
    uu, vv = _as_matrix(u, "u", cdt), _as_matrix(v, "v", cdt)
    if uu.shape[0] != w.shape[0] or vv.shape[1] != w.shape[1] or uu.shape[1] != vv.shape[0]:
        raise SvdInputError(f"factor shapes {uu.shape} @ {vv.shape} do not reconstruct W {w.shape}")
    err = float(np.linalg.norm(w - uu @ vv))
    if not relative:
        return err
    ref = float(np.linalg.norm(w))
    return err / ref if ref > 0 else (0.0 if err == 0 else math.inf)


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
    x, w = _as_matrix(X, "calibration activations X", cdt), _as_matrix(W, "W", cdt)
    uu, vv = _as_matrix(u, "u", cdt), _as_matrix(v, "v", cdt)
    if x.shape[1] != w.shape[0]:
        raise SvdInputError(f"activations of width {x.shape[1]} do not match W with in_features {w.shape[0]}")
    if uu.shape[0] != w.shape[0] or vv.shape[1] != w.shape[1] or uu.shape[1] != vv.shape[0]:
        raise SvdInputError(f"factor shapes {uu.shape} @ {vv.shape} do not reconstruct W {w.shape}")
    ref_out = x @ w
    err = float(np.linalg.norm(ref_out - (x @ uu) @ vv))
    if not relative:
        return err
    ref = float(np.linalg.norm(ref_out))
    return err / ref if ref > 0 else (0.0 if err == 0 else math.inf)


# ------------------------------------------------------------------------------------ checkpoint input


def _safe_open(path: Path):  # pragma: no cover - thin wrapper
    from safetensors import safe_open

    return safe_open(str(path), framework="np")


@dataclass
class CheckpointSource:
    """A safetensors checkpoint: one file, an index JSON, or a directory of shards.

    ``shards`` lists the files in order; ``weight_map`` maps every tensor name to its shard.
    Tensors are read lazily, one at a time.
    """

    root: Path
    shards: list[Path]
    weight_map: dict[str, Path]
    indexed: bool = False
    _handles: dict[Path, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def open(cls, path: str | os.PathLike[str]) -> CheckpointSource:
        """Open ``path``: a ``.safetensors`` file, a ``*.index.json`` or a directory holding either."""
        p = Path(path)
        if not p.exists():
            raise SvdInputError(f"checkpoint {p} does not exist")
        if p.is_dir():
            indexes = sorted(p.glob("*.safetensors.index.json"))
            if len(indexes) == 1:
                return cls._from_index(indexes[0])
            if len(indexes) > 1:
                raise SvdInputError(f"{p} holds several index files {[i.name for i in indexes]}; pass one")
            files = sorted(p.glob("*.safetensors"))
            if not files:
                raise SvdInputError(f"directory {p} holds no *.safetensors files")
            return cls._from_files(p, files, indexed=False)
        if p.name.endswith(".json"):
            return cls._from_index(p)
        return cls._from_files(p.parent, [p], indexed=False)

    @classmethod
    def _from_index(cls, index: Path) -> CheckpointSource:
        try:
            data = json.loads(index.read_text())
            raw_map = data["weight_map"]
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise SvdInputError(f"{index} is not a safetensors index (needs a 'weight_map'): {exc}") from exc
        if not isinstance(raw_map, dict) or not raw_map:
            raise SvdInputError(f"{index}: 'weight_map' must be a non-empty object")
        shards: list[Path] = []
        for fname in raw_map.values():
            shard = index.parent / str(fname)
            if shard not in shards:
                shards.append(shard)
        missing = [s.name for s in shards if not s.is_file()]
        if missing:
            raise SvdInputError(f"{index} refers to missing shard(s): {', '.join(missing)}")
        src = cls._from_files(index.parent, shards, indexed=True)
        absent = sorted(set(raw_map) - set(src.weight_map))
        if absent:
            raise SvdInputError(f"{index} lists tensors not found in its shards, e.g. {absent[:3]}")
        return src

    @classmethod
    def _from_files(cls, root: Path, files: list[Path], *, indexed: bool) -> CheckpointSource:
        weight_map: dict[str, Path] = {}
        src = cls(root, list(files), weight_map, indexed)
        for f in files:
            for name in src._handle(f).keys():
                if name in weight_map:
                    raise SvdInputError(
                        f"tensor {name!r} appears in both {weight_map[name].name} and {f.name}"
                    )
                weight_map[name] = f
        return src

    def _handle(self, f: Path) -> Any:
        if f not in self._handles:
            try:
                self._handles[f] = _safe_open(f).__enter__()
            except Exception as exc:  # safetensors raises its own error types
                raise SvdInputError(f"cannot read {f} as safetensors: {exc}") from exc
        return self._handles[f]

    def names(self, shard: Path | None = None) -> list[str]:
        """Tensor names, all or of one shard, in file order."""
        if shard is None:
            return list(self.weight_map)
        return [n for n, f in self.weight_map.items() if f == shard]

    def get(self, name: str) -> np.ndarray:
        """Load one tensor as a NumPy array (bf16 via ml_dtypes)."""
        if name not in self.weight_map:
            raise SvdInputError(f"tensor {name!r} is not in the checkpoint")
        try:
            return self._handle(self.weight_map[name]).get_tensor(name)
        except SvdInputError:
            raise
        except Exception as exc:
            raise SvdInputError(f"cannot load tensor {name!r}: {exc}") from exc

    def metadata(self, shard: Path) -> dict[str, str]:
        """The string metadata stored in a shard's header (may be empty)."""
        return dict(self._handle(shard).metadata() or {})

    def close(self) -> None:
        """Release the open file handles."""
        for h in self._handles.values():
            h.__exit__(None, None, None)
        self._handles.clear()


# ------------------------------------------------------------------------------------------ calibration


@dataclass(frozen=True)
class Calibration:
    """Calibration activations for the compressor.

    ``default`` is an ``(n, hidden)`` array of MLP inputs used for every layer (from a ``.npy``, or the
    ``default`` key of an ``.npz``); ``keyed`` maps ``.npz`` keys to arrays.  Lookup for projection
    ``<prefix>.<proj>`` (prefix like ``model.layers.3.mlp``): the key ``<prefix>.<proj>`` (that
    projection's own input activations), then ``<prefix>`` (that layer's MLP input), then ``default``.
    MLP inputs feed gate/up directly; down_proj then sees ``silu(X W_gate) * (X W_up)`` computed from the
    layer's dense weights.
    """

    path: str
    default: np.ndarray | None
    keyed: Mapping[str, np.ndarray]

    def direct(self, prefix: str, proj: str) -> np.ndarray | None:
        """Activations recorded for exactly this projection's input, if given."""
        return self.keyed.get(f"{prefix}.{proj}")

    def mlp_input(self, prefix: str) -> tuple[np.ndarray, str] | None:
        """The MLP input for the layer with this prefix and where it came from, if any."""
        if prefix in self.keyed:
            return self.keyed[prefix], f"{self.path}[{prefix}]"
        if self.default is not None:
            return self.default, self.path
        return None


def load_calibration(path: str | os.PathLike[str]) -> Calibration:
    """Load calibration activations: ``.npy`` ``(n, hidden)`` or keyed ``.npz`` (see :class:`Calibration`)."""
    p = Path(path)
    if not p.is_file():
        raise SvdInputError(f"calibration file {p} does not exist")
    try:
        loaded = np.load(p, allow_pickle=False)
    except (OSError, ValueError) as exc:
        raise SvdInputError(f"cannot read calibration file {p} (expected .npy or .npz): {exc}") from exc
    if isinstance(loaded, np.ndarray):
        return Calibration(str(p), _calib_matrix(loaded, str(p)), {})
    with loaded:
        keyed = {k: _calib_matrix(loaded[k], f"{p}[{k}]") for k in loaded.files}
    if not keyed:
        raise SvdInputError(f"calibration archive {p} is empty")
    default = keyed.pop("default", None)
    return Calibration(str(p), default, keyed)


def _calib_matrix(a: np.ndarray, what: str) -> np.ndarray:
    if a.ndim == 3:  # (batch, seq, hidden) -> (batch*seq, hidden)
        a = a.reshape(-1, a.shape[-1])
    return _as_matrix(a, f"calibration activations {what}", np.dtype(np.float32))


def _silu(z: np.ndarray) -> np.ndarray:
    return z / (1.0 + np.exp(-np.clip(z, -80.0, 80.0)))


# -------------------------------------------------------------------------------------------- reports


@dataclass(frozen=True)
class LayerReport:
    """Result for one compressed projection.

    ``name`` is the original tensor name, ``in_features``/``out_features`` the kernel-orientation shape,
    ``dense_params``/``svd_params`` element counts, ``saving`` = 1 - svd/dense (fraction of parameters
    removed), errors are relative Frobenius norms (``activation_error`` is None without calibration data),
    ``shift`` the whitening diagonal shift (None when not whitened), ``calibration`` where activations came
    from (``"derived"`` = silu(X·W_gate)·(X·W_up) for down_proj).
    """

    name: str
    in_features: int
    out_features: int
    rank: int
    dense_params: int
    svd_params: int
    saving: float
    weight_error: float
    activation_error: float | None
    whitened: bool
    shift: float | None
    calibration: str | None


@dataclass(frozen=True)
class CompressionSummary:
    """What ``compress_checkpoint`` did: settings, per-projection reports and totals (element counts)."""

    source: str
    outputs: list[str]
    compression: float
    block: int
    dtype: str
    whiten: bool
    calibration: str | None
    layers: list[LayerReport]
    params_before: int
    params_after: int

    @property
    def mlp_params_before(self) -> int:
        """Parameters of the compressed projections before compression."""
        return sum(layer.dense_params for layer in self.layers)

    @property
    def mlp_params_after(self) -> int:
        """Parameters of their factors."""
        return sum(layer.svd_params for layer in self.layers)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (the content of the summary file)."""
        before, after = self.mlp_params_before, self.mlp_params_after
        return {
            "source": self.source,
            "outputs": self.outputs,
            "compression": self.compression,
            "compression_convention": "fraction of parameters removed; keep = 1 - compression",
            "block": self.block,
            "dtype": self.dtype,
            "whiten": self.whiten,
            "calibration": self.calibration,
            "layout": "W (in, out) ≈ svd_u (in, r) @ svd_v (r, out); HF weight = W.T",
            "totals": {
                "mlp_params_before": before,
                "mlp_params_after": after,
                "mlp_saving": 1.0 - after / before if before else 0.0,
                "params_before": self.params_before,
                "params_after": self.params_after,
                "saving": 1.0 - self.params_after / self.params_before if self.params_before else 0.0,
            },
            "layers": [asdict(layer) for layer in self.layers],
        }


def summary_path_for(output: str | os.PathLike[str]) -> Path:
    """Path of the JSON summary: ``X.svd-summary.json`` next to ``X.safetensors``, or inside a directory."""
    out = Path(output)
    if out.suffix == ".safetensors":
        return out.with_name(out.name[: -len(".safetensors")] + ".svd-summary.json")
    return out / "svd-summary.json"


# ---------------------------------------------------------------------------------------- compression


ProgressFn = Callable[[int, int, str], None]


def _atomic_save(tensors: dict[str, np.ndarray], path: Path, metadata: dict[str, str]) -> None:
    from safetensors.numpy import save_file

    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        save_file({k: np.ascontiguousarray(v) for k, v in tensors.items()}, tmp, metadata=metadata)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _atomic_write_text(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


class _Compressor:
    """Per-checkpoint state: settings, a one-layer cache of whitenings and activations."""

    def __init__(
        self,
        src: CheckpointSource,
        *,
        compression: float,
        block: int,
        compute_dtype: np.dtype,
        calib: Calibration | None,
        whiten: bool,
    ) -> None:
        self.src, self.compression, self.block = src, compression, block
        self.compute_dtype, self.calib, self.whiten = compute_dtype, calib, whiten
        self._cache_prefix: str | None = None
        self._cache: dict[str, Any] = {}

    def _cached(self, prefix: str, key: str, make: Callable[[], Any]) -> Any:
        if self._cache_prefix != prefix:
            self._cache_prefix, self._cache = prefix, {}
        if key not in self._cache:
            self._cache[key] = make()
        return self._cache[key]

    def _dense(self, prefix: str, proj: str) -> np.ndarray:
        name = f"{prefix}.{proj}.weight"
        return self._cached(prefix, f"W:{proj}", lambda: _as_matrix(self.src.get(name).T, name, np.float32))

    def _activations(self, prefix: str, proj: str, width: int) -> tuple[np.ndarray, str] | None:
        """Input activations of this projection, or None when the calibration data cannot supply them."""
        if self.calib is None:
            return None
        name = f"{prefix}.{proj}"
        direct = self.calib.direct(prefix, proj)
        if direct is not None:
            found: tuple[np.ndarray, str] = (direct, f"{self.calib.path}[{name}]")
        else:
            mlp_in = self.calib.mlp_input(prefix)
            if mlp_in is None:
                return None
            if proj != "down_proj":
                found = mlp_in
            else:
                needed = [f"{prefix}.{p}.weight" for p in ("gate_proj", "up_proj")]
                if any(n not in self.src.weight_map for n in needed):
                    return None
                x = mlp_in[0]

                def derive() -> np.ndarray:
                    wg, wu = self._dense(prefix, "gate_proj"), self._dense(prefix, "up_proj")
                    if x.shape[1] != wg.shape[0]:
                        raise SvdInputError(
                            f"calibration activations {mlp_in[1]} have width {x.shape[1]} but "
                            f"{prefix}.gate_proj expects hidden size {wg.shape[0]}"
                        )
                    return _silu(x @ wg) * (x @ wu)

                found = (self._cached(prefix, "derived", derive), "derived")
        if found[0].shape[1] != width:
            raise SvdInputError(
                f"calibration activations {found[1]} have width {found[0].shape[1]} but {name} has "
                f"in_features = {width}"
            )
        return found

    def compress(
        self, name: str, prefix: str, proj: str, out_dtype: np.dtype
    ) -> tuple[np.ndarray, np.ndarray, LayerReport]:
        w = self._dense(prefix, proj)
        n_in, n_out = w.shape
        r = rank_for(n_in, n_out, self.compression, self.block)
        acts = self._activations(prefix, proj, n_in)
        if self.whiten and acts is not None:
            source = acts[1]
            wh = self._cached(prefix, f"wh:{source}", lambda: whitening_from_activations(acts[0]))
            fac = whitened_svd(w, wh, r, dtype=out_dtype, compute_dtype=self.compute_dtype)
        else:
            fac = truncated_svd(w, r, dtype=out_dtype, compute_dtype=self.compute_dtype)
        u32, v32 = fac.u.astype(np.float32), fac.v.astype(np.float32)
        cdt = self.compute_dtype
        act_err = activation_error(acts[0], w, u32, v32, compute_dtype=cdt) if acts is not None else None
        report = LayerReport(
            name=name,
            in_features=n_in,
            out_features=n_out,
            rank=r,
            dense_params=n_in * n_out,
            svd_params=r * (n_in + n_out),
            saving=1.0 - r * (n_in + n_out) / (n_in * n_out),
            weight_error=weight_error(w, u32, v32, compute_dtype=cdt),
            activation_error=act_err,
            whitened=fac.whitened,
            shift=fac.shift if fac.whitened else None,
            calibration=acts[1] if acts is not None else None,
        )
        return fac.u, fac.v, report


def compress_checkpoint(
    source: str | os.PathLike[str],
    output: str | os.PathLike[str],
    *,
    compression: float,
    calibration: str | os.PathLike[str] | None = None,
    whiten: bool = False,
    dtype: str = "auto",
    compute_dtype: str = "float64",
    block: int = 128,
    progress: ProgressFn | None = None,
) -> CompressionSummary:
    """Compress the MLP projections of a safetensors checkpoint into SVD factors.

    ``source``: a ``.safetensors`` file, a ``model.safetensors.index.json`` or a directory.
    ``output``: a path ending in ``.safetensors`` writes one file; anything else is a directory that gets
    one output shard per input shard (same file names) plus ``model.safetensors.index.json`` when the
    input had an index.  Each ``<prefix>.mlp.<proj>.weight`` (HF ``(out, in)``) becomes
    ``<prefix>.mlp.<proj>.svd_u`` ``(in, r)`` and ``<prefix>.mlp.<proj>.svd_v`` ``(r, out)``; all other
    tensors are copied unchanged.  ``dtype="auto"`` stores factors in the weight's own float dtype.
    ``whiten`` needs ``calibration`` (see :class:`Calibration`); without ``whiten``, calibration data only
    adds activation errors to the report.  ``progress(done, total, name)`` is called after each projection.
    Files are written atomically.  Returns the summary and writes it as JSON (:func:`summary_path_for`).
    """
    if whiten and calibration is None:
        raise SvdInputError("--whiten needs calibration activations (--calib ACTS.npy or .npz)")
    compression = check_compression(compression)
    if isinstance(block, bool) or not isinstance(block, int) or block < 1:
        raise SvdInputError(f"block must be a positive integer, got {block!r}")
    cdt = resolve_dtype(compute_dtype)
    if cdt not in (np.dtype(np.float64), np.dtype(np.float32)):
        raise SvdInputError(f"compute dtype must be float64 or float32, got {compute_dtype!r}")
    if dtype != "auto":
        resolve_dtype(dtype)
    calib = load_calibration(calibration) if calibration is not None else None
    src = CheckpointSource.open(source)
    try:
        return _compress(src, Path(output), compression, block, dtype, cdt, calib, whiten, progress)
    finally:
        src.close()


def _compress(
    src: CheckpointSource,
    out: Path,
    compression: float,
    block: int,
    dtype: str,
    cdt: np.dtype,
    calib: Calibration | None,
    whiten: bool,
    progress: ProgressFn | None,
) -> CompressionSummary:
    single = out.suffix == ".safetensors"
    in_files = {s.resolve() for s in src.shards}
    targets = [out] if single else [out / s.name for s in src.shards]
    if any(t.resolve() in in_files for t in targets):
        raise SvdInputError(f"output {out} would overwrite the input checkpoint; choose another path")
    if out.exists() and single == out.is_dir():
        kind = "a directory" if out.is_dir() else "a file"
        raise SvdInputError(f"output {out} exists and is {kind}; pass a .safetensors file or a directory")

    plan = [(n, m) for n in src.names() if (m := _PROJ_RE.match(n))]
    if not plan:
        raise SvdInputError(
            f"no MLP projection weights (*.mlp.gate_proj/up_proj/down_proj.weight) found in {src.root}"
        )
    for name, _ in plan:
        shape = src._handle(src.weight_map[name]).get_slice(name).get_shape()
        if len(shape) != 2:
            raise SvdInputError(f"{name} has shape {tuple(shape)}; MLP projection weights must be 2-D")

    comp = _Compressor(
        src, compression=compression, block=block, compute_dtype=cdt, calib=calib, whiten=whiten
    )
    reports: list[LayerReport] = []
    params_before = params_after = 0
    shards_out: dict[Path, dict[str, np.ndarray]] = {}
    weight_map: dict[str, str] = {}
    total_bytes = 0
    done = 0
    if progress is not None:
        progress(0, len(plan), "")
    meta_extra = {
        "devkit.svd": json.dumps(
            {
                "compression": compression,
                "block": block,
                "whiten": whiten,
                "layout": "svd_u (in, r) @ svd_v (r, out) = W (in, out) = HF weight.T",
            }
        )
    }
    metadata: dict[str, str] = {}
    for shard in src.shards:
        target = out if single else out / shard.name
        bucket = shards_out.setdefault(target, {})
        metadata.update(src.metadata(shard))
        for name in src.names(shard):
            tensor = src.get(name)
            params_before += int(tensor.size)
            match = _PROJ_RE.match(name)
            if match is None:
                bucket[name] = tensor
                weight_map[name] = target.name
                params_after += int(tensor.size)
                total_bytes += int(tensor.nbytes)
                continue
            store = _storage_dtype(dtype, tensor.dtype, name)
            u, v, report = comp.compress(name, match["prefix"], match["proj"], store)
            base = name[: -len(".weight")]
            for suffix, arr in (("svd_u", u), ("svd_v", v)):
                bucket[f"{base}.{suffix}"] = arr
                weight_map[f"{base}.{suffix}"] = target.name
            params_after += int(u.size + v.size)
            total_bytes += int(u.nbytes + v.nbytes)
            reports.append(report)
            done += 1
            if progress is not None:
                progress(done, len(plan), name)
        if not single:
            _atomic_save(bucket, target, {**src.metadata(shard), **meta_extra})
            shards_out.pop(target)
    if single:
        _atomic_save(shards_out[out], out, {**metadata, **meta_extra})
    elif src.indexed:
        index = {
            "metadata": {"total_size": total_bytes, **meta_extra},
            "weight_map": dict(sorted(weight_map.items())),
        }
        _atomic_write_text(out / "model.safetensors.index.json", json.dumps(index, indent=2) + "\n")

    summary = CompressionSummary(
        source=str(src.root if len(src.shards) > 1 or src.indexed else src.shards[0]),
        outputs=[str(t) for t in targets],
        compression=compression,
        block=block,
        dtype=dtype,
        whiten=whiten,
        calibration=calib.path if calib is not None else None,
        layers=reports,
        params_before=params_before,
        params_after=params_after,
    )
    _atomic_write_text(summary_path_for(out), json.dumps(summary.to_dict(), indent=2) + "\n")
    return summary


def _storage_dtype(requested: str, weight_dtype: np.dtype, name: str) -> np.dtype:
    if requested != "auto":
        return resolve_dtype(requested)
    if weight_dtype in _DTYPES.values():
        return np.dtype(weight_dtype)
    raise SvdInputError(f"{name} has dtype {weight_dtype}; pass --dtype float32|bfloat16|float16")
