"""Checkpoint and calibration input of the SVD tools: safetensors checkpoints (one file, an index JSON or a
directory of shards) read lazily tensor by tensor, and calibration activations (``.npy`` / ``.npz``).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from devkit.workflow.svd.factor import SvdInputError, as_matrix

__all__ = ["Calibration", "CheckpointSource", "load_calibration"]


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
    return as_matrix(a, f"calibration activations {what}", np.dtype(np.float32))
