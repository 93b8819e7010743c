"""Instructions of ``nki.isa`` that move values without arithmetic: tile copies (plain, dynamic,
predicated), selections (``affine_select``, ``range_select``, ``select_reduce``), the partition shuffle
and the per-core gather."""

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
    user_location,
)
from devkit.nki._alu import (
    _IDENT,
    ALU,
)
from devkit.nki._isa_common import (
    _alu,
    _elementwise_vec,
    _engine,
    _predicate,
    _read_tiles,
    _val,
    _vector_accumulate,
    _vector_operand,
    engine,
    reduce_cmd,
)
from devkit.nki._limits import fp32
from devkit.sim import instr as _x
from devkit.sim import unwritten as _unwritten
from devkit.sim.index import MaskExpr
from devkit.sim.tensor import Tensor
from devkit.trace import GPSIMD, SCALAR, VECTOR


def tensor_copy(
    src: Tensor, *, mask: Any = None, dtype: Any = None, engine: Any = engine.unknown, **kwargs: Any
) -> Tensor:
    """Copy a tile (bit-exact when the dtype is unchanged)."""
    api = "nisa.tensor_copy"
    t = _x.tile(src, api, "src")
    eng = _engine(engine, VECTOR, (VECTOR, SCALAR, GPSIMD), api)
    if eng == GPSIMD and t.st.buffer == "psum":
        raise MemoryPlacementError(f"{api}: the GpSimd engine cannot access PSUM", rule="gpsimd-psum")
    bit = not _dt.is_float(t.dtype) and eng != SCALAR
    return _x.elementwise(
        api,
        eng,
        "tensor_copy",
        lambda a: a,
        [t],
        dtype=dtype,
        default_dtype=t.dtype,
        mask=mask,
        bitwise=bit,
        moves=True,
    )


def tensor_copy_dynamic_src(
    src: Tensor, *, mask: Any = None, dtype: Any = None, engine: Any = engine.unknown, **kwargs: Any
) -> Tensor:
    """Copy from a source whose index contains a runtime value read from an SBUF tile."""
    api = "nisa.tensor_copy_dynamic_src"
    t = _x.tile(src, api, "src")
    eng = _engine(engine, VECTOR, (VECTOR, SCALAR, GPSIMD), api)
    return _x.elementwise(
        api,
        eng,
        "tensor_copy_dynamic",
        lambda a: a,
        [t],
        dtype=dtype,
        default_dtype=t.dtype,
        mask=mask,
        bitwise=not _dt.is_float(t.dtype),
        moves=True,
    )


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
    res = tensor_copy_dynamic_src(src, mask=mask, dtype=dtype or dst.dtype, engine=engine)
    _x.assign(dst, res)


def tensor_copy_predicated(
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
    api = "nisa.tensor_copy_predicated"
    m = _x.machine(api)
    loc = user_location()
    d = _x.tile(dst, api, "dst")
    pr = _x.tile(predicate, api, "predicate")
    s = _x.tile(src, api, "src") if isinstance(src, Tensor) else src
    shape = _x.aligned_shape(d)
    if _x.aligned_shape(pr)[0] != shape[0]:
        raise PartitionMismatchError(f"{api}: predicate and dst have different partition counts")
    marr = _x.mask_array(mask, shape, api)
    ins = _read_tiles(m, loc, s, pr, d)
    m.check_write(d, loc)
    m.emit(VECTOR, "tensor_copy_predicated", ins, [d], 0, None, loc)
    if m.numerics:
        pv = _predicate(pr, shape, reverse_pred)
        if marr is not None:
            pv = pv & marr
        new = np.broadcast_to(_val(s, shape, to_float=_dt.is_float(d.dtype)), shape)
        old = d.read()
        d.write(_dt.round_to(np.where(pv, new, old), d.dtype))
    else:
        d.mark_written()


def affine_select(
    pred: Any,
    on_true_tile: Tensor,
    on_false_value: Any,
    *,
    mask: Any = None,
    dtype: Any = None,
    **kwargs: Any,
) -> Tensor:
    """``pred ? on_true_tile : on_false_value`` with an affine compile-time predicate (GpSimd)."""
    api = "nisa.affine_select"
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
    return _elementwise_vec(
        api, GPSIMD, "affine_select", lambda x: np.where(parr, x, fv), [t], shape, dtype, mask, False, {}
    )


def range_select(
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
) -> Tensor:
    """Keep elements whose free index lies in [bound0, bound1) style ranges; optional max-reduce (trn2+)."""
    api = "nisa.range_select"
    m = _x.machine(api)
    if m.geometry.nc_version < 3:
        raise UnsupportedError(f"{api} is only supported on NeuronCore-v3 (trn2) and newer", rule="arch")
    loc = user_location()
    t = _x.tile(on_true_tile, api, "on_true_tile")
    shape = _x.aligned_shape(t)
    p = shape[0]
    b0 = _vector_operand(bound0, p, api, "bound0")
    b1 = _vector_operand(bound1, p, api, "bound1")
    c0, c1 = _alu(comp_op0, api), _alu(comp_op1, api)
    rname = _alu(reduce_op, api) if reduce_op is not None else "max"
    odt = _x.out_dtype(dtype, t.dtype, api)
    marr = _x.mask_array(mask, shape, api)
    out = _x.new_tile(m, shape, odt, "sbuf", loc)
    tiles = _read_tiles(m, loc, t, b0, b1)
    outs = [out] + ([reduce_res] if reduce_res is not None else [])
    pend = m.emit(VECTOR, "range_select", tiles, outs, t.size, None, loc)
    vals = None
    if m.numerics:
        x = _x.value_of(t, shape, marr).reshape(p, -1)
        idx = (int(range_start) + np.arange(x.shape[1], dtype=np.float32))[None, :]
        keep = (ALU[c0](idx, _val(b0, (p, 1))) != 0) & (ALU[c1](idx, _val(b1, (p, 1))) != 0)
        v = np.where(keep, x, np.float32(on_false_value)).astype(np.float32)
        vals = v.reshape(shape)
        if marr is not None:  # masked-off elements take no part in the reduction
            v = np.where(marr.reshape(p, -1), v, _IDENT.get(rname, -np.inf))
        _vector_accumulate(m, reduce_cmd, rname, v, reduce_res, p)
    elif reduce_res is not None:
        reduce_res.mark_written()
    return _x.commit(m, pend, out, vals, marr)


def select_reduce(
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
    api = "nisa.select_reduce"
    m = _x.machine(api)
    loc = user_location()
    d = _x.tile(dst, api, "dst")
    pr = _x.tile(predicate, api, "predicate")
    ot = _x.tile(on_true, api, "on_true")
    shape = _x.aligned_shape(d)
    p = shape[0]
    of = _vector_operand(on_false, p, api, "on_false")
    rname = _alu(reduce_op, api) if reduce_op is not None else "max"
    ins = _read_tiles(m, loc, pr, ot, of)
    m.check_write(d, loc)
    m.emit(
        VECTOR,
        "select_reduce",
        ins,
        [d] + ([reduce_res] if reduce_res is not None else []),
        d.size,
        None,
        loc,
    )
    if m.numerics:
        pv = _predicate(pr, shape, reverse_pred)
        marr = _x.mask_array(mask, shape, api)  # masked-off elements are neither written nor reduced
        v = np.where(pv, _x.value_of(ot, shape, marr), _val(of, shape)).astype(np.float32)
        d.write(_dt.round_to(v, d.dtype), marr)
        red_in = v if marr is None else np.where(marr, v, _IDENT.get(rname, -np.inf))
        _vector_accumulate(m, reduce_cmd, rname, red_in, reduce_res, p)
    else:
        d.mark_written()
        if reduce_res is not None:
            reduce_res.mark_written()


def nc_stream_shuffle(
    src: Tensor, dst: Tensor, shuffle_mask: Any, *, dtype: Any = None, mask: Any = None, **kwargs: Any
) -> None:
    """Move partitions within each 32-partition quadrant: ``dst[q*32+i] = src[q*32+mask[i]]`` (255 keeps)."""
    api = "nisa.nc_stream_shuffle"
    m = _x.machine(api)
    loc = user_location()
    s = _x.tile(src, api, "src")
    d = _x.tile(dst, api, "dst")
    sm = [int(v) for v in shuffle_mask]
    if len(sm) != 32:
        raise KernelArgumentError(f"{api}: shuffle_mask must have 32 entries, got {len(sm)}")
    m.check_read(s, loc)
    m.check_write(d, loc)
    m.emit(VECTOR, "nc_stream_shuffle", [s], [d], 0, None, loc)
    if not m.numerics:
        d.mark_written()
        return
    g = _unwritten.moved(s)  # a move: never-written partitions flow (devkit.sim.unwritten)
    sv = s.read(check_init=False)
    dv = d.read(check_init=False).copy()
    kept = d.unwritten()  # what dst rows the shuffle leaves alone held
    gd = None if g is None and kept is None else (np.zeros(d.shape, bool) if kept is None else kept.copy())
    nq = max(1, -(-d.shape[0] // 32))
    for q in range(nq):
        for i, k in enumerate(sm):
            r = q * 32 + i
            if k == 255 or r >= d.shape[0]:
                continue
            src_row = q * 32 + k if s.shape[0] > 1 else 0
            if src_row >= s.shape[0]:
                raise IndexingError(f"{api}: shuffle_mask entry {k} selects partition {src_row} outside src")
            dv[r] = sv[src_row]
            if gd is not None:
                gd[r] = g[src_row] if g is not None else False
    marr = _x.mask_array(mask, d.shape, api)
    d.write(
        _dt.round_to(dv.astype(np.float32) if _dt.is_float(d.dtype) else dv, d.dtype), marr
    )  # the mask applies to dst
    if gd is not None:
        if marr is not None and kept is not None:
            gd = np.where(marr, gd, kept)
        _unwritten.carry(d, gd, s, moved_in=g is not None)


def local_gather(
    src_buffer: Tensor,
    index: Tensor,
    num_elem_per_idx: int = 1,
    num_valid_indices: Any = None,
    *,
    mask: Any = None,
    **kwargs: Any,
) -> Tensor:
    """Per 16-partition GpSimd core, gather runs of elements along the free dim at the core's indices."""
    api = "nisa.local_gather"
    m = _x.machine(api)
    loc = user_location()
    s = _x.tile(src_buffer, api, "src_buffer")
    ix = _x.tile(index, api, "index")
    p = s.shape[0]
    if p != ix.shape[0] or p % 16:
        raise TileShapeError(
            f"{api}: src_buffer and index must have the same partition count, a multiple of 16"
        )
    if num_elem_per_idx not in (1, 2, 4, 8, 16, 32):
        raise KernelArgumentError(f"{api}: num_elem_per_idx must be 1, 2, 4, 8, 16 or 32")
    per_core = ix.free_size * 16
    nv = per_core if num_valid_indices is None else int(num_valid_indices)
    out = _x.new_tile(m, (p, nv * num_elem_per_idx), s.dtype, "sbuf", loc)
    m.check_read(s, loc)
    m.check_read(ix, loc)
    pend = m.emit(GPSIMD, "local_gather", [s, ix], [out], 0, None, loc)
    vals = None
    if m.numerics:
        sv = s.read().reshape(p, -1)
        iv = ix.read().reshape(p, -1).astype(np.int64)
        vals = np.empty((p, nv * num_elem_per_idx), dtype=sv.dtype)
        for c in range(p // 16):
            ids = iv[16 * c : 16 * c + 16].flatten(order="F")[:nv]
            offs = (ids[:, None] + np.arange(num_elem_per_idx)[None, :]).reshape(-1)
            offs = np.clip(offs, 0, sv.shape[1] - 1)
            vals[16 * c : 16 * c + 16] = sv[16 * c : 16 * c + 16][:, offs]
    return _x.commit(m, pend, out, vals, None)
