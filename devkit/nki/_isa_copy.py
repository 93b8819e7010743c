"""Instructions of ``nki.isa`` that move values without arithmetic: tile copies (plain, dynamic,
predicated), selections (``affine_select``, ``range_select``, ``select_reduce``), the partition shuffle
and the per-core gather.

Declarations of the instruction layer (:mod:`devkit.nki._isa_layer`); :mod:`devkit.nki.isa` generates the
public functions."""

from __future__ import annotations

from typing import Any

import numpy as np

from devkit import dtypes as _dt
from devkit.errors import (
    IndexingError,
    KernelArgumentError,
    MemoryPlacementError,
    PartitionMismatchError,
    TileShapeError,
    UnsupportedError,
)
from devkit.nki._alu import (
    _IDENT,
    ALU,
)
from devkit.nki._isa_common import (
    _alu,
    _engine,
    _predicate,
    _val,
    _vector_accumulate,
    _vector_operand,
    broadcast_step,
    engine,
    reduce_cmd,
    vector_step,
)
from devkit.nki._isa_layer import WRITTEN, Instruction, Step, elementwise, run
from devkit.nki._limits import fp32
from devkit.sim import dataflow as _flow
from devkit.sim import instr as _x
from devkit.sim import unwritten as _unwritten
from devkit.sim.index import MaskExpr
from devkit.sim.tensor import Tensor
from devkit.trace import GPSIMD, SCALAR, VECTOR


def _same(a: np.ndarray) -> np.ndarray:
    return a


def _tensor_copy(
    s: Step, src: Tensor, *, mask: Any = None, dtype: Any = None, engine: Any = engine.unknown, **kwargs: Any
) -> None:
    """Copy a tile (bit-exact when the dtype is unchanged)."""
    api = s.api
    t = _x.tile(src, api, "src")
    s.engine = eng = _engine(engine, VECTOR, (VECTOR, SCALAR, GPSIMD), api)
    if eng == GPSIMD and t.st.buffer == "psum":
        raise MemoryPlacementError(f"{api}: the GpSimd engine cannot access PSUM", rule="gpsimd-psum")
    broadcast_step(s, _same, [t], dtype, mask, not _dt.is_float(t.dtype) and eng != SCALAR, None)
    s.moves = True


def _tensor_copy_dynamic_src(
    s: Step, src: Tensor, *, mask: Any = None, dtype: Any = None, engine: Any = engine.unknown, **kwargs: Any
) -> None:
    """Copy from a source whose index contains a runtime value read from an SBUF tile."""
    t = _x.tile(src, s.api, "src")
    s.engine = _engine(engine, VECTOR, (VECTOR, SCALAR, GPSIMD), s.api)
    broadcast_step(s, _same, [t], dtype, mask, not _dt.is_float(t.dtype), None)
    s.moves = True


def _tensor_copy_predicated(
    s: Step,
    *,
    src: Any,
    dst: Tensor,
    predicate: Tensor,
    reverse_pred: bool = False,
    mask: Any = None,
    dtype: Any = None,
    **kwargs: Any,
) -> None:
    """In place: ``dst = src`` where ``predicate`` is non-zero (inverted with ``reverse_pred``)."""
    api = s.api
    d = _x.tile(dst, api, "dst")
    pr = _x.tile(predicate, api, "predicate")
    sv = _x.tile(src, api, "src") if isinstance(src, Tensor) else src
    shape = _x.aligned_shape(d)
    if _x.aligned_shape(pr)[0] != shape[0]:
        raise PartitionMismatchError(f"{api}: predicate and dst have different partition counts")
    s.reads = [sv, pr, d]
    s.dst = d
    s.shape = shape
    s.args = (_x.mask_array(mask, shape, api), reverse_pred)  # masked-off elements keep dst's value


def _predicated_values(s: Step) -> np.ndarray:
    sv, pr, d = s.reads
    marr, reverse = s.args
    pv = _predicate(pr, s.shape, reverse)
    if marr is not None:
        pv = pv & marr
    new = np.broadcast_to(_val(sv, s.shape, to_float=_dt.is_float(d.dtype)), s.shape)
    return np.where(pv, new, d.read())


def _affine_select(
    s: Step,
    pred: Any,
    on_true_tile: Tensor,
    on_false_value: Any,
    *,
    mask: Any = None,
    dtype: Any = None,
    **kwargs: Any,
) -> None:
    """``pred ? on_true_tile : on_false_value`` with an affine compile-time predicate (GpSimd)."""
    api = s.api
    t = _x.tile(on_true_tile, api, "on_true_tile")
    if not isinstance(pred, MaskExpr):
        raise KernelArgumentError(
            f"{api}: pred must be an affine comparison of nl.arange expressions", rule="bad-mask"
        )
    shape = _x.aligned_shape(t)
    try:
        parr = np.broadcast_to(pred.arr, shape)
    except ValueError:
        raise TileShapeError(
            f"{api}: predicate shape {list(pred.shape)} does not match the tile {list(t.shape)}"
        ) from None
    if not isinstance(on_false_value, _x.Scalar):
        raise KernelArgumentError(f"{api}: on_false_value must be a scalar")
    fv = np.float32(on_false_value)
    vector_step(s, lambda x: np.where(parr, x, fv), [t], shape, dtype, mask, False, {})
    s.args = parr  # (the dataflow rule: only chosen elements count)


def _range_select(
    s: Step,
    *,
    on_true_tile: Tensor,
    comp_op0: Any,
    comp_op1: Any,
    bound0: Tensor,
    bound1: Tensor,
    reduce_cmd: Any = reduce_cmd.idle,
    reduce_res: Any = None,
    reduce_op: Any = np.amax,
    range_start: int = 0,
    on_false_value: Any = fp32.min,
    mask: Any = None,
    dtype: Any = None,
    **kwargs: Any,
) -> None:
    """Keep elements whose free index lies in [bound0, bound1) style ranges; optional max-reduce (trn2+)."""
    api = s.api
    if s.m.geometry.nc_version < 3:
        raise UnsupportedError(f"{api} is only supported on NeuronCore-v3 (trn2) and newer", rule="arch")
    t = _x.tile(on_true_tile, api, "on_true_tile")
    shape = _x.aligned_shape(t)
    p = shape[0]
    b0 = _vector_operand(bound0, p, api, "bound0")
    b1 = _vector_operand(bound1, p, api, "bound1")
    c0, c1 = _alu(comp_op0, api), _alu(comp_op1, api)
    rname = _alu(reduce_op, api) if reduce_op is not None else "max"
    s.dtype = _x.out_dtype(dtype, t.dtype, api)
    s.mask = _x.mask_array(mask, shape, api)
    s.shape = shape
    s.reads = [t, b0, b1]
    s.also = [reduce_res] if reduce_res is not None else []
    s.flops = t.size
    s.args = (c0, c1, rname, range_start, on_false_value, reduce_cmd, reduce_res)


def _range_select_values(s: Step) -> np.ndarray:
    t, b0, b1 = s.reads
    c0, c1, rname, range_start, on_false_value, rcmd, reduce_res = s.args
    shape, marr = s.shape, s.mask
    p = shape[0]
    x = _x.value_of(t, shape, marr).reshape(p, -1)
    idx = (int(range_start) + np.arange(x.shape[1], dtype=np.float32))[None, :]
    keep = (ALU[c0](idx, _val(b0, (p, 1))) != 0) & (ALU[c1](idx, _val(b1, (p, 1))) != 0)
    v = np.where(keep, x, np.float32(on_false_value)).astype(np.float32)
    vals = v.reshape(shape)
    if marr is not None:  # masked-off elements take no part in the reduction
        v = np.where(marr.reshape(p, -1), v, _IDENT.get(rname, -np.inf))
    _vector_accumulate(s.m, rcmd, rname, v, reduce_res, p)
    return vals


def _select_reduce(
    s: Step,
    *,
    dst: Tensor,
    predicate: Tensor,
    on_true: Tensor,
    on_false: Any,
    reduce_res: Any = None,
    reduce_cmd: Any = reduce_cmd.idle,
    reduce_op: Any = np.amax,
    reverse_pred: bool = False,
    mask: Any = None,
    dtype: Any = None,
    **kwargs: Any,
) -> None:
    """In place: ``dst = predicate ? on_true : on_false`` with an optional max-reduce (VectorE)."""
    api = s.api
    d = _x.tile(dst, api, "dst")
    pr = _x.tile(predicate, api, "predicate")
    ot = _x.tile(on_true, api, "on_true")
    shape = _x.aligned_shape(d)
    of = _vector_operand(on_false, shape[0], api, "on_false")
    rname = _alu(reduce_op, api) if reduce_op is not None else "max"
    s.reads = [pr, ot, of]
    s.dst = d
    s.shape = shape
    s.also = [reduce_res] if reduce_res is not None else []
    s.flops = d.size
    s.mask = _x.mask_array(mask, shape, api)  # masked-off elements are neither written nor reduced
    s.args = (rname, reverse_pred, reduce_cmd, reduce_res)


def _select_reduce_values(s: Step) -> np.ndarray:
    pr, ot, of = s.reads
    rname, reverse_pred, rcmd, reduce_res = s.args
    shape, marr = s.shape, s.mask
    pv = _predicate(pr, shape, reverse_pred)
    v = np.where(pv, _x.value_of(ot, shape, marr), _val(of, shape)).astype(np.float32)
    red_in = v if marr is None else np.where(marr, v, _IDENT.get(rname, -np.inf))
    _vector_accumulate(s.m, rcmd, rname, red_in, reduce_res, shape[0])
    return v


def _nc_stream_shuffle(
    s: Step,
    src: Tensor,
    dst: Tensor,
    shuffle_mask: Any,
    *,
    dtype: Any = None,
    mask: Any = None,
    **kwargs: Any,
) -> None:
    """Move partitions within each 32-partition quadrant: ``dst[q*32+i] = src[q*32+mask[i]]`` (255 keeps)."""
    api = s.api
    t = _x.tile(src, api, "src")
    d = _x.tile(dst, api, "dst")
    sm = [int(v) for v in shuffle_mask]
    if len(sm) != 32:
        raise KernelArgumentError(f"{api}: shuffle_mask must have 32 entries, got {len(sm)}")
    s.reads = [t]
    s.dst = d
    s.args = (sm, mask)


def _shuffle_values(s: Step) -> Any:
    (src,) = s.reads
    d = s.dst
    assert d is not None
    sm, mask = s.args
    g = _unwritten.moved(src)  # a move: never-written partitions flow (devkit.sim.unwritten)
    sv = src.read(check_init=False)
    dv = d.read(check_init=False).copy()
    kept = d.unwritten()  # what dst rows the shuffle leaves alone held
    gd = None if g is None and kept is None else (np.zeros(d.shape, bool) if kept is None else kept.copy())
    nq = max(1, -(-d.shape[0] // 32))
    for q in range(nq):
        for i, k in enumerate(sm):
            r = q * 32 + i
            if k == 255 or r >= d.shape[0]:
                continue
            src_row = q * 32 + k if src.shape[0] > 1 else 0
            if src_row >= src.shape[0]:
                raise IndexingError(
                    f"{s.api}: shuffle_mask entry {k} selects partition {src_row} outside src"
                )
            dv[r] = sv[src_row]
            if gd is not None:
                gd[r] = g[src_row] if g is not None else False
    marr = _x.mask_array(mask, d.shape, s.api)  # the mask applies to dst
    d.write(_dt.round_to(dv.astype(np.float32) if _dt.is_float(d.dtype) else dv, d.dtype), marr)
    if gd is not None:
        if marr is not None and kept is not None:
            gd = np.where(marr, gd, kept)
        _unwritten.carry(d, gd, src, moved_in=g is not None)
    return WRITTEN


def _local_gather(
    s: Step,
    src_buffer: Tensor,
    index: Tensor,
    num_elem_per_idx: int = 1,
    num_valid_indices: Any = None,
    *,
    mask: Any = None,
    **kwargs: Any,
) -> None:
    """Per 16-partition GpSimd core, gather runs of elements along the free dim at the core's indices."""
    api = s.api
    t = _x.tile(src_buffer, api, "src_buffer")
    ix = _x.tile(index, api, "index")
    p = t.shape[0]
    if p != ix.shape[0] or p % 16:
        raise TileShapeError(
            f"{api}: src_buffer and index must have the same partition count, a multiple of 16"
        )
    if num_elem_per_idx not in (1, 2, 4, 8, 16, 32):
        raise KernelArgumentError(f"{api}: num_elem_per_idx must be 1, 2, 4, 8, 16 or 32")
    per_core = ix.free_size * 16
    nv = per_core if num_valid_indices is None else int(num_valid_indices)
    if not 0 <= nv <= per_core:
        raise KernelArgumentError(
            f"{api}: num_valid_indices={nv} but the index tile holds {per_core} indices per 16-partition core"
        )
    s.shape = (p, nv * num_elem_per_idx)
    s.dtype = t.dtype
    s.reads = [t, ix]
    s.args = (nv, num_elem_per_idx)


def _gather_offsets(ix: Tensor, nv: int, per: int) -> list[np.ndarray]:
    """Per 16-partition core, the free offsets its partitions read: the core's first ``nv`` indices (its
    ``[16, F]`` block flattened partition-first), each followed by ``per - 1`` neighbours.  Only those indices
    are read, and being used as addresses they must have been written (an observation, devkit.sim.unwritten)."""
    p = ix.shape[0]
    f = ix.size // p
    first = np.zeros(16 * f, dtype=bool)
    first[:nv] = True
    used = np.tile(first.reshape(16, f, order="F"), (p // 16, 1)).reshape(ix.shape)
    iv = ix.read(used).reshape(p, -1).astype(np.int64)
    out = []
    for c in range(p // 16):
        ids = iv[16 * c : 16 * c + 16].flatten(order="F")[:nv]
        out.append((ids[:, None] + np.arange(per)[None, :]).reshape(-1))
    return out


def _gather_values(s: Step) -> np.ndarray:
    """A move within each partition's row: never-written elements of ``src_buffer`` that are gathered flow to
    the result (:mod:`devkit.sim.unwritten`); the elements not gathered are not read.  (nki-library's
    moe_tkg gathers each token's expert affinities from a ``[128, E]`` tile of which only the token rows were
    written; every partition of a core gathers at the same offsets, and the rows of absent tokens are never
    used afterwards.)"""
    t, ix = s.reads
    nv, per = s.args
    p = t.shape[0]
    width = t.size // p
    offs = [np.clip(o, 0, width - 1) for o in _gather_offsets(ix, nv, per)]
    read = np.zeros((p, width), dtype=bool)
    for c, o in enumerate(offs):
        read[16 * c : 16 * c + 16, o] = True
    g = _unwritten.moved(t, read.reshape(t.shape))
    sv = t.read(check_init=False).reshape(p, -1)
    gv = None if g is None else g.reshape(p, -1)
    vals = np.empty((p, nv * per), dtype=sv.dtype)
    garbage = None if gv is None else np.zeros((p, nv * per), dtype=bool)
    for c, o in enumerate(offs):
        rows = slice(16 * c, 16 * c + 16)
        vals[rows] = sv[rows][:, o]
        if garbage is not None:
            garbage[rows] = gv[rows][:, o]
    s.garbage = garbage if garbage is not None and garbage.any() else None
    return vals


# ---- the declarations ---------------------------------------------------------------------------------------

TENSOR_COPY = Instruction(
    "tensor_copy", VECTOR, "tensor_copy", _tensor_copy, elementwise, dataflow=_flow.elementwise
)  # moves: the rule applies to a converting copy only
TENSOR_COPY_DYNAMIC_SRC = Instruction(
    "tensor_copy_dynamic_src", VECTOR, "tensor_copy_dynamic", _tensor_copy_dynamic_src, elementwise
)
TENSOR_COPY_PREDICATED = Instruction(
    "tensor_copy_predicated", VECTOR, "tensor_copy_predicated", _tensor_copy_predicated, _predicated_values,
    writes_dst=True, dataflow=_flow.predicated_copy,
)  # fmt: skip
AFFINE_SELECT = Instruction(
    "affine_select", GPSIMD, "affine_select", _affine_select, elementwise, dataflow=_flow.affine_select
)
RANGE_SELECT = Instruction(
    "range_select", VECTOR, "range_select", _range_select, _range_select_values, dataflow=_flow.range_select
)
SELECT_REDUCE = Instruction(
    "select_reduce", VECTOR, "select_reduce", _select_reduce, _select_reduce_values, writes_dst=True,
    dataflow=_flow.select_reduce,
)  # fmt: skip
NC_STREAM_SHUFFLE = Instruction(
    "nc_stream_shuffle", VECTOR, "nc_stream_shuffle", _nc_stream_shuffle, _shuffle_values, writes_dst=True
)
LOCAL_GATHER = Instruction("local_gather", GPSIMD, "local_gather", _local_gather, _gather_values)


def tensor_copy_dynamic_dst(
    *,
    dst: Tensor,
    src: Tensor,
    mask: Any = None,
    dtype: Any = None,
    engine: Any = engine.unknown,
    **kwargs: Any,
) -> None:
    """Copy ``src`` into a destination whose index contains a runtime value."""
    res = run(TENSOR_COPY_DYNAMIC_SRC, src, mask=mask, dtype=dtype or dst.dtype, engine=engine)
    _x.assign(dst, res)


#: the family's public Beta-1 instructions (:mod:`devkit.nki.isa` generates their functions)
INSTRUCTIONS = (
    TENSOR_COPY,
    TENSOR_COPY_DYNAMIC_SRC,
    TENSOR_COPY_PREDICATED,
    AFFINE_SELECT,
    RANGE_SELECT,
    SELECT_REDUCE,
    NC_STREAM_SHUFFLE,
    LOCAL_GATHER,
)
