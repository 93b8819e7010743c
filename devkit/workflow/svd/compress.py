"""The compression pipeline: every MLP projection of a checkpoint replaced by its SVD factors.

:func:`compress_checkpoint` reads Llama/Qwen-style safetensors checkpoints (one file, a
``model.safetensors.index.json`` or a directory), replaces each ``<prefix>.mlp.{gate,up,down}_proj.weight``
by ``<prefix>.mlp.<proj>.svd_u`` ``[in, r]`` and ``<prefix>.mlp.<proj>.svd_v`` ``[r, out]`` and copies every
other tensor through unchanged; every output file is written crash-safely (:mod:`devkit.atomic`).  The
orientation and the rank rule are those of :mod:`devkit.workflow.svd.factor`.  See docs/svd.md.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from devkit import atomic
from devkit.workflow.svd.checkpoint import Calibration, CheckpointSource, load_calibration
from devkit.workflow.svd.factor import (
    DTYPES,
    SvdInputError,
    activation_error,
    as_matrix,
    check_compression,
    rank_for,
    resolve_dtype,
    truncated_svd,
    weight_error,
    whitened_svd,
    whitening_from_activations,
)

__all__ = ["PROJECTIONS", "CompressionSummary", "LayerReport", "compress_checkpoint", "summary_path_for"]

#: The MLP projections that are compressed, in the order they run.
PROJECTIONS = ("gate_proj", "up_proj", "down_proj")

#: Matches ``<prefix>.mlp.<proj>.weight``; MoE experts (``mlp.experts.N.*``) deliberately do not match.
_PROJ_RE = re.compile(r"^(?P<prefix>(?:.*\.)?mlp)\.(?P<proj>gate_proj|up_proj|down_proj)\.weight$")


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
    """Write one safetensors file crash-safely (:func:`devkit.atomic.write_with`)."""
    from safetensors.numpy import save_file

    arrays = {k: np.ascontiguousarray(v) for k, v in tensors.items()}
    atomic.write_with(path, lambda tmp: save_file(arrays, str(tmp), metadata=metadata))


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
        return self._cached(prefix, f"W:{proj}", lambda: as_matrix(self.src.get(name).T, name, np.float32))

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
        atomic.write_text(out / "model.safetensors.index.json", json.dumps(index, indent=2) + "\n")

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
    atomic.write_text(summary_path_for(out), json.dumps(summary.to_dict(), indent=2) + "\n")
    return summary


def _storage_dtype(requested: str, weight_dtype: np.dtype, name: str) -> np.dtype:
    if requested != "auto":
        return resolve_dtype(requested)
    if weight_dtype in DTYPES.values():
        return np.dtype(weight_dtype)
    raise SvdInputError(f"{name} has dtype {weight_dtype}; pass --dtype float32|bfloat16|float16")
