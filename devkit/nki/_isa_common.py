"""The NKI Beta-1 ISA's enums and the operand rules its instruction families share.

Everything here is private to :mod:`devkit.nki.isa` (which re-exports the enums): engine selection,
ALU operator names, the ``(P, 1)`` vector-operand rule, operand values for the numerics, predicate tiles, the
plans of element-wise instructions (broadcast tiles, or a tile with scalar/vector operands), and the VectorE
accumulator registers.
"""

from __future__ import annotations

import enum
from typing import Any

import numpy as np

from devkit import dtypes as _dt
from devkit.errors import (
    KernelArgumentError,
    PartitionMismatchError,
    TileShapeError,
)
from devkit.nki._alu import (
    _IDENT,
    _REDUCE_FN,
    ALU,
    _alu_name,
)
from devkit.nki._isa_layer import Step
from devkit.sim import instr as _x
from devkit.sim.tensor import Tensor
from devkit.trace import DMA, GPSIMD, SCALAR, TENSOR, VECTOR


class engine(enum.IntEnum):
    unknown = 0
    tensor = 1
    scalar = 2
    gpsimd = 3
    dma = 4
    vector = 5
    sync = 6


tensor_engine = engine.tensor
vector_engine = engine.vector
scalar_engine = engine.scalar
gpsimd_engine = engine.gpsimd
unknown_engine = engine.unknown
dma_engine = engine.dma


class reduce_cmd(enum.IntEnum):
    idle = 0
    reset = 1
    reduce = 2
    reset_reduce = 3
    load_reduce = 4


class dge_mode(enum.IntEnum):
    none = 0
    swdge = 1
    hwdge = 2
    unknown = 3


class oob_mode(enum.IntEnum):
    error = 0
    skip = 1


class nc_version(enum.IntEnum):
    gen2 = 2
    gen3 = 3
    gen4 = 4


def get_nc_version() -> nc_version:
    """NeuronCore generation of the simulated target (gen2: trn1/inf2, gen3: trn2)."""
    m = _x.current()
    return nc_version(m.geometry.nc_version if m is not None else 2)


_ENGINE_NAME = {
    engine.tensor: TENSOR,
    engine.scalar: SCALAR,
    engine.gpsimd: GPSIMD,
    engine.vector: VECTOR,
    engine.dma: DMA,
}


def _engine(e: Any, default: str, allowed: tuple[str, ...], api: str) -> str:
    if e is None or e == engine.unknown:
        return default
    try:
        name = _ENGINE_NAME[engine(int(e))]
    except (ValueError, KeyError):
        raise KernelArgumentError(f"{api}: unknown engine {e!r}") from None
    if name not in allowed:
        raise KernelArgumentError(
            f"{api}: engine must be one of {', '.join(allowed)}, got {name}", rule="bad-engine"
        )
    return name


def _alu(op: Any, api: str) -> str:
    name = _alu_name(op)
    if name not in ALU:
        raise KernelArgumentError(f"{api}: {name!r} is not an ALU operator", rule="bad-alu-op")
    return name


def _reduce_values(name: str, v: np.ndarray, axis: Any, keepdims: bool) -> np.ndarray:
    fn = _REDUCE_FN[name]
    if name.startswith("bitwise"):
        out = v
        for a in sorted(axis, reverse=True):
            out = fn(out, axis=a)
            if keepdims:
                out = np.expand_dims(out, a)
        return out
    return np.asarray(fn(v, axis=axis, keepdims=keepdims))


def _same_partitions(api: str, *tiles: Tensor) -> None:
    ps = {_x.aligned_shape(t)[0] for t in tiles if isinstance(t, Tensor)}
    if len(ps) > 1:
        raise PartitionMismatchError(
            f"{api}: operands have different partition counts {sorted(ps)}; use "
            "broadcast_to for a partition broadcast",
            rule="partition-mismatch",
        )


def _vector_operand(x: Any, p: int, api: str, name: str) -> Any:
    """A scalar, or a (P, 1) tile broadcast along the free dims."""
    if isinstance(x, Tensor):
        t = _x.tile(x, api, name)
        s = _x.aligned_shape(t)
        if s[0] not in (p, 1) and int(np.prod(s[1:])) == 1:
            raise PartitionMismatchError(
                f"{api}: {name} has {s[0]} partitions but the data has {p}; use a ({p}, 1) vector tile",
                rule="partition-mismatch",
            )
        if s[0] not in (p, 1) or int(np.prod(s[1:])) != 1:
            raise TileShapeError(
                f"{api}: {name} must be a scalar or a ({p}, 1) vector tile, got shape {list(t.shape)}",
                rule="vector-operand-shape",
            )
        return t
    if isinstance(x, _x.Scalar):
        return x
    raise KernelArgumentError(f"{api}: {name} must be a scalar or a (P, 1) tile, got {type(x).__name__}")


def _val(x: Any, shape: tuple[int, ...] | None = None, *, to_float: bool = True) -> Any:
    if isinstance(x, Tensor):
        v = _x.value_of(x, None, None, to_float=to_float)
        if x.ndim >= 2 and shape is not None and _x.aligned_shape(x)[1:] == (1,) * (x.ndim - 1):
            v = v.reshape((v.shape[0],) + (1,) * (len(shape) - 1))
        return v
    return np.float32(x) if to_float else x


def _predicate(pred: Tensor, shape: tuple[int, ...], reverse: bool) -> np.ndarray:
    """Where a predicate tile, broadcast to ``shape``, is non-zero (zero with ``reverse``)."""
    pv = np.broadcast_to(pred.read().reshape(_x.aligned_shape(pred)), shape) != 0
    return ~pv if reverse else pv


def _per_partition(t: Tensor) -> tuple[tuple[int, ...], int, int]:
    """``(aligned shape, partitions, elements per partition)`` of a tile."""
    shape = _x.aligned_shape(t)
    return shape, shape[0], int(np.prod(shape[1:]))


def vector_step(
    s: Step,
    fn: Any,
    operands: list[Any],
    shape: tuple[int, ...],
    dtype: Any,
    mask: Any,
    bit: bool,
    attrs: dict | None,
    default_dtype: Any = None,
) -> None:
    """``s`` is the element-wise ``fn`` of a tile (``operands[0]``) and scalars or ``(P, 1)`` vectors broadcast
    along its free dims, into a new tile of ``dtype`` (default: ``default_dtype``, else the tile's)."""
    t = operands[0]
    s.dtype = _x.out_dtype(dtype, default_dtype if default_dtype is not None else t.dtype, s.api)
    s.mask = _x.mask_array(mask, shape, s.api)
    s.shape = shape
    s.reads = operands
    s.flops = t.size
    s.attrs = attrs
    s.bit = bit
    s.fn = fn


def broadcast_step(
    s: Step, fn: Any, tiles: list[Tensor], dtype: Any, mask: Any, bit: bool, attrs: dict | None
) -> None:
    """``s`` is the element-wise ``fn`` of ``tiles`` broadcast together (NumPy rules on their aligned shapes)
    into a new tile of ``dtype`` (default: the operands' promoted dtype)."""
    if len(tiles) == 1:
        shape = _x.aligned_shape(tiles[0])
        s.flops = tiles[0].size
    else:
        shape = _x.broadcast(s.api, [_x.aligned_shape(t) for t in tiles])
        s.flops = int(np.prod(shape))
    s.dtype = _x.out_dtype(dtype, _dt.promote(*[t.dtype for t in tiles]) if dtype is None else None, s.api)
    s.mask = _x.mask_array(mask, shape, s.api)
    s.shape = shape
    s.reads = tiles
    s.attrs = attrs
    s.bit = bit
    s.fn = fn
    s.evacuate = len(tiles) == 1  # a one-operand instruction on a PSUM accumulator waits for its chain


def _vector_accumulate(m: Any, rcmd: Any, rname: str, v: np.ndarray, reduce_res: Any, p: int) -> None:
    acc = m.accumulators.setdefault("vector", np.full(128, -np.inf, np.float32))
    rc = int(rcmd) if rcmd is not None else 0
    if rc in (reduce_cmd.reset, reduce_cmd.reset_reduce):
        acc[:] = _IDENT.get(rname, -np.inf)
    if rc in (reduce_cmd.reduce, reduce_cmd.reset_reduce):
        red = _reduce_values(rname, v.reshape(p, -1), (1,), False)
        acc[:p] = ALU[rname](acc[:p], red)
    if reduce_res is not None:
        reduce_res.write(_dt.round_to(acc[:p].reshape(reduce_res.shape), reduce_res.dtype))
