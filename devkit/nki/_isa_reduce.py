"""Reductions and statistics of ``nki.isa`` (and the free-axis reduction behind ``nl.sum`` & co.):
``tensor_reduce``, ``tensor_partition_reduce``, ``tensor_scalar_reduce``, ``bn_stats``/``bn_aggr``,
``max8`` and the find/replace-8 instructions."""

from __future__ import annotations

from typing import Any

import numpy as np

from devkit import dtypes as _dt
from devkit.errors import (
    IndexingError,
    KernelArgumentError,
    PartitionMismatchError,
    TileShapeError,
    user_location,
)
from devkit.nki._alu import (
    _IDENT,
    ALU,
    BITVEC,
    REDUCE_OK,
    _require_int,
)
from devkit.nki._isa_common import (
    _alu,
    _per_partition,
    _read_tiles,
    _reduce_values,
    _val,
    _vector_operand,
)
from devkit.nki._isa_common import (
    reduce_cmd as _reduce_cmd,
)
from devkit.sim import instr as _x
from devkit.sim.tensor import Tensor
from devkit.trace import GPSIMD, VECTOR


def _axes(api: str, x: Tensor, axis: Any) -> tuple[int, ...]:
    nd = _x.aligned_shape(x).__len__()
    if axis is None:
        raise KernelArgumentError(f"{api}: axis is required (free axes only)")
    ax = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    out = []
    for a in ax:
        a = int(a)
        if a < 0:
            a += nd
        if a == 0:
            raise IndexingError(
                f"{api}: cannot reduce along the partition axis (axis 0); reduce free axes, or "
                "transpose / use nisa.tensor_partition_reduce",
                rule="reduce-partition-axis",
            )
        if a >= nd:
            raise IndexingError(f"{api}: axis {a} is out of range for a tile of rank {nd}")
        out.append(a)
    # The API docs describe the axes as the trailing free axes, but the documented average-pool example
    # reduces axes [2, 4] of a 5-D access pattern: any set of free axes is accepted.
    return tuple(sorted(set(out)))


def reduce(
    api: str,
    x: Tensor,
    axis: Any,
    fn: Any,
    *,
    dtype: Any,
    mask: Any,
    keepdims: bool,
    opname: str,
    default_dtype: Any = None,
) -> Tensor:
    """A free-axis reduction on VectorE."""
    m = _x.machine(api)
    loc = user_location()
    t = _x.tile(x, api, "x")
    shape_in = _x.aligned_shape(t)
    axes = _axes(api, t, axis)
    out_shape = (
        tuple(1 if i in axes else n for i, n in enumerate(shape_in))
        if keepdims
        else tuple(n for i, n in enumerate(shape_in) if i not in axes)
    )
    if len(out_shape) < 2:
        out_shape = (out_shape[0], 1)  # on-chip tiles are at least 2-D: (P,) is (P, 1)
    odt = _x.out_dtype(dtype, default_dtype if default_dtype is not None else t.dtype, api)
    marr = _x.mask_array(mask, shape_in, api)
    out = _x.new_tile(m, out_shape, odt, "sbuf", loc)
    m.check_read(t, loc)
    p = m.emit(VECTOR, "tensor_reduce", [t], [out], t.size, {"op": opname}, loc)
    vals = None
    if m.numerics:
        bit = opname.startswith("bitwise")  # bitvec reductions work on the raw integers, not through fp32
        v = _x.value_of(t, shape_in, marr, to_float=not bit)
        if marr is not None:
            ident = (
                np.array(-1 if opname == "bitwise_and" else 0).astype(v.dtype)
                if bit
                else _REDUCE_IDENTITY.get(opname, 0.0)
            )
            v = np.where(marr, v, ident) if bit else np.where(marr, v, ident).astype(np.float32)
        with np.errstate(all="ignore"):
            if marr is not None and opname in ("mean", "var"):  # statistics of the masked elements only
                n = np.sum(marr, axis=axes, keepdims=True)
                mu = np.sum(v, axis=axes, keepdims=True) / n
                if opname == "var":
                    mu = np.sum(np.where(marr, (v - mu) ** 2, 0), axis=axes, keepdims=True) / n
                r = mu
                vals = np.asarray(r if keepdims else np.squeeze(r, axis=axes), dtype=np.float32)
            else:
                vals = np.asarray(fn(v, axis=axes, keepdims=keepdims), dtype=None if bit else np.float32)
    return _x.commit(m, p, out, vals, None)


_REDUCE_IDENTITY = {"add": 0.0, "max": -np.inf, "min": np.inf, "multiply": 1.0, "all": 1.0}


def tensor_reduce(
    op: Any,
    data: Tensor,
    axis: Any,
    *,
    mask: Any = None,
    dtype: Any = None,
    negate: bool = False,
    keepdims: bool = False,
    **kwargs: Any,
) -> Tensor:
    """Reduce along free axes (VectorE); any set of free axes, as ``nl`` reductions accept."""
    api = "nisa.tensor_reduce"
    name = _alu(op, api)
    if name not in REDUCE_OK:
        raise KernelArgumentError(f"{api}: {name} is not a legal reduction operator", rule="bad-reduce-op")
    if negate and name in BITVEC:
        raise KernelArgumentError(f"{api}: negate is only supported for arithmetic operators")
    t = _x.tile(data, api, "data")
    if name in BITVEC:
        _require_int(api, t)

    def fn(v: np.ndarray, axis: Any, keepdims: bool) -> np.ndarray:
        r = _reduce_values(name, v, axis, keepdims)
        return -r if negate else r

    res = reduce(api, t, axis, fn, dtype=dtype, mask=mask, keepdims=keepdims, opname=name)
    return res


def tensor_partition_reduce(
    op: Any, data: Tensor, *, mask: Any = None, dtype: Any = None, **kwargs: Any
) -> Tensor:
    """Reduce across partitions: (P, F...) -> (1, F...) (GpSimd)."""
    api = "nisa.tensor_partition_reduce"
    name = _alu(op, api)
    if name not in ("add", "max", "bitwise_or", "bitwise_and"):
        raise KernelArgumentError(
            f"{api}: op must be add, max, bitwise_or or bitwise_and, got {name}", rule="bad-reduce-op"
        )
    m = _x.machine(api)
    loc = user_location()
    t = _x.tile(data, api, "data")
    shape = _x.aligned_shape(t)
    out_shape = (1, *shape[1:])
    odt = _x.out_dtype(dtype, t.dtype, api)
    out = _x.new_tile(m, out_shape, odt, "sbuf", loc)
    m.check_read(t, loc)
    pend = m.emit(GPSIMD, "tensor_partition_reduce", [t], [out], t.size, {"op": name}, loc)
    vals = None
    if m.numerics:
        bit = name in BITVEC
        v = _x.value_of(t, shape, None, to_float=not bit)
        vals = _reduce_values(name, v, (0,), True)
    return _x.commit(m, pend, out, vals, _x.mask_array(mask, out_shape, api))


def tensor_scalar_reduce(
    *,
    data: Tensor,
    op0: Any,
    operand0: Any,
    reduce_op: Any,
    reduce_res: Tensor,
    reverse0: bool = False,
    dtype: Any = None,
    mask: Any = None,
    **kwargs: Any,
) -> Tensor:
    """``out = data op0 operand0`` and ``reduce_res = reduce_op(out)`` over the free axes (VectorE)."""
    return _tensor_scalar_reduce(data, op0, operand0, reduce_op, reduce_res, reverse0, dtype, mask)


def _tensor_scalar_reduce(
    data: Any,
    op0: Any,
    operand0: Any,
    reduce_op: Any,
    reduce_res: Any,
    reverse0: bool = False,
    dtype: Any = None,
    mask: Any = None,
    *,
    reduce_cmd: Any = _reduce_cmd.reset_reduce,
    reduce_init: Any = None,
    reduce_res_negate: bool = False,
) -> Tensor:
    """The instruction, with the VectorE accumulator (shared with ``select_reduce``, ``range_select``...):
    ``reset`` sets it to the reduction's identity, ``reduce`` folds the row reductions in, ``reset_reduce``
    sets it to them, ``load_reduce`` to ``reduce_init`` (scalar or ``(P, 1)``) folded with them, ``idle`` leaves
    it; ``reduce_res`` (optional) receives it, negated with ``reduce_res_negate``."""
    api = "nisa.tensor_scalar_reduce"
    m = _x.machine(api)
    loc = user_location()
    t = _x.tile(data, api, "data")
    shape = _x.aligned_shape(t)
    p = shape[0]
    n0 = _alu(op0, api)
    o0 = _vector_operand(operand0, p, api, "operand0")
    rname = _alu(reduce_op, api)
    if rname not in ("add", "subtract", "multiply", "max", "min"):
        raise KernelArgumentError(
            f"{api}: reduce_op must be add, subtract, multiply, max or min, got {rname}"
        )
    rc = _reduce_cmd(int(reduce_cmd))
    init = _vector_operand(reduce_init, p, api, "reduce_init") if reduce_init is not None else None
    if rc == _reduce_cmd.load_reduce and init is None:
        raise KernelArgumentError(f"{api}: reduce_cmd=load_reduce needs a reduce_init", rule="bad-argument")
    rr = _x.tile(reduce_res, api, "reduce_res") if reduce_res is not None else None
    odt = _x.out_dtype(dtype, t.dtype, api)
    marr = _x.mask_array(mask, shape, api)
    out = _x.new_tile(m, shape, odt, "sbuf", loc)
    ins = _read_tiles(m, loc, t, o0, init)
    if rr is not None:
        m.check_write(rr, loc)
    outs = [out] + ([rr] if rr is not None else [])
    pend = m.emit(VECTOR, "tensor_scalar_reduce", ins, outs, 2 * t.size, {"op0": n0, "reduce": rname}, loc)
    vals = None
    if m.numerics:
        x = _x.value_of(t, shape, marr)
        with np.errstate(all="ignore"):
            vals = np.asarray(
                ALU[n0](_val(o0, shape), x) if reverse0 else ALU[n0](x, _val(o0, shape)), dtype=np.float32
            )
            v = vals if marr is None else np.where(marr, vals, _IDENT.get(rname, 0.0))
            red = np.asarray(_reduce_values(rname, v.reshape(p, -1), (1,), False), dtype=np.float32)
            acc = m.accumulators.setdefault("vector", np.full(128, -np.inf, np.float32))
            if rc == _reduce_cmd.reset:
                acc[:p] = _IDENT.get(rname, 0.0)
            elif rc == _reduce_cmd.reduce:
                acc[:p] = ALU[rname](acc[:p], red)
            elif rc == _reduce_cmd.reset_reduce:
                acc[:p] = red
            elif rc == _reduce_cmd.load_reduce:
                acc[:p] = ALU[rname](np.broadcast_to(_val(init, (p, 1)), (p, 1)).reshape(p), red)
        if rr is not None:
            got = -acc[:p] if reduce_res_negate else acc[:p]
            rr.write(_dt.round_to(got.reshape(_x.aligned_shape(rr)).reshape(rr.shape), rr.dtype))
    elif rr is not None:
        rr.mark_written()
    return _x.commit(m, pend, out, vals, marr)


def bn_stats(data: Tensor, *, mask: Any = None, dtype: Any = None, **kwargs: Any) -> Tensor:
    """Per partition [count, mean, M2] of the even and of the odd free elements -> (P, 6) (VectorE)."""
    api = "nisa.bn_stats"
    m = _x.machine(api)
    loc = user_location()
    t = _x.tile(data, api, "data")
    shape, p, f = _per_partition(t)
    if f > 512:
        raise TileShapeError(f"{api}: free size {f} exceeds bn_stats_fmax (512)", rule="bn-stats-size")
    marr = _x.mask_array(mask, shape, api)
    odt = _x.out_dtype(dtype, t.dtype, api)
    out = _x.new_tile(m, (p, 6), odt, "sbuf", loc)
    m.check_read(t, loc)
    pend = m.emit(VECTOR, "bn_stats", [t], [out], t.size, None, loc)
    vals = None
    if m.numerics:
        x = _x.value_of(t, shape, marr).reshape(p, f).astype(np.float64)
        valid = np.ones((p, f), bool) if marr is None else marr.reshape(p, f)
        cols = []
        for par in (0, 1):
            xs, vs = x[:, par::2], valid[:, par::2]
            n = vs.sum(axis=1).astype(np.float64)
            s = np.where(vs, xs, 0).sum(axis=1)
            mean = np.divide(s, n, out=np.zeros_like(s), where=n > 0)
            m2 = np.where(vs, (xs - mean[:, None]) ** 2, 0).sum(axis=1)
            cols += [n, mean, m2]
        vals = np.stack(cols, axis=1).astype(np.float32)
    return _x.commit(m, pend, out, vals, None)


def bn_aggr(data: Tensor, *, mask: Any = None, dtype: Any = None, **kwargs: Any) -> Tensor:
    """Combine bn_stats outputs (triples of count, mean, M2) into (P, 2) = [mean, variance] (VectorE)."""
    api = "nisa.bn_aggr"
    m = _x.machine(api)
    loc = user_location()
    t = _x.tile(data, api, "data")
    shape, p, f = _per_partition(t)
    if f % 3:
        raise TileShapeError(
            f"{api}: the input must hold (count, mean, M2) triples; {f} elements per partition is "
            "not a multiple of 3",
            rule="bn-aggr-size",
        )
    odt = _x.out_dtype(dtype, t.dtype, api)
    out = _x.new_tile(m, (p, 2), odt, "sbuf", loc)
    m.check_read(t, loc)
    pend = m.emit(VECTOR, "bn_aggr", [t], [out], t.size, None, loc)
    vals = None
    if m.numerics:
        s = _x.value_of(t, shape, None).reshape(p, f).astype(np.float64)
        n_i, m_i, q_i = s[:, 0::3], s[:, 1::3], s[:, 2::3]
        n = n_i.sum(axis=1)
        mean = np.divide((n_i * m_i).sum(axis=1), n, out=np.zeros(p), where=n > 0)
        m2 = (q_i + n_i * (m_i - mean[:, None]) ** 2).sum(axis=1)
        var = np.divide(m2, n, out=np.zeros(p), where=n > 0)
        vals = np.stack([mean, var], axis=1).astype(np.float32)
    return _x.commit(m, pend, out, vals, _x.mask_array(mask, (p, 2), api))


def max8(*, src: Tensor, mask: Any = None, dtype: Any = None, **kwargs: Any) -> Tensor:
    """The 8 largest values per partition, in descending order -> (P, 8) (VectorE)."""
    api = "nisa.max8"
    m = _x.machine(api)
    loc = user_location()
    t = _x.tile(src, api, "src")
    shape, p, f = _per_partition(t)
    if not 8 <= f <= 16384:
        raise TileShapeError(f"{api}: elements per partition must be between 8 and 16384, got {f}")
    odt = _x.out_dtype(dtype, t.dtype, api)
    out = _x.new_tile(m, (p, 8), odt, "sbuf", loc)
    m.check_read(t, loc)
    pend = m.emit(VECTOR, "max8", [t], [out], t.size, None, loc)
    vals = None
    if m.numerics:
        x = _x.value_of(t, shape, None).reshape(p, f)
        vals = -np.sort(-x, axis=1)[:, :8]
    return _x.commit(m, pend, out, vals, _x.mask_array(mask, (p, 8), api))


def _find8(api: str, data: Tensor, vals: Tensor, replace: Any, dst_idx: Any, mask: Any, dtype: Any) -> Tensor:
    m = _x.machine(api)
    loc = user_location()
    d = _x.tile(data, api, "data")
    v = _x.tile(vals, api, "vals")
    shape, p, f = _per_partition(d)
    if v.free_size != 8:
        raise TileShapeError(f"{api}: vals must hold exactly 8 values per partition, got {v.free_size}")
    if _x.aligned_shape(v)[0] != p:
        raise PartitionMismatchError(f"{api}: data and vals have different partition counts")
    if replace is None:
        odt = _x.out_dtype(dtype, _dt.uint32, api)
        out_shape: tuple[int, ...] = (p, 8)
    else:
        odt = _x.out_dtype(dtype, d.dtype, api)
        out_shape = shape
    out = _x.new_tile(m, out_shape, odt, "sbuf", loc)
    m.check_read(d, loc)
    m.check_read(v, loc)
    outs = [out] + ([dst_idx] if dst_idx is not None else [])
    pend = m.emit(
        VECTOR,
        "nc_match_replace8" if replace is not None else "nc_find_index8",
        [d, v],
        outs,
        d.size,
        None,
        loc,
    )
    res = None
    if m.numerics:
        x = _x.value_of(d, shape, None).reshape(p, f).copy()
        vv = _x.value_of(v, None, None).reshape(p, 8)
        marr = _x.mask_array(mask, shape, api)
        valid = np.ones((p, f), bool) if marr is None else marr.reshape(p, f)
        idx = np.zeros((p, 8), dtype=np.int64)
        for q in range(p):
            for j in range(8):
                hits = np.nonzero((x[q] == vv[q, j]) & valid[q])[0]
                if hits.size:
                    idx[q, j] = hits[0]
                    if replace is not None:
                        x[q, hits[0]] = np.float32(replace)
        if replace is None:
            res = idx
        else:
            res = x.reshape(shape)
            if dst_idx is not None:
                di = _x.tile(dst_idx, api, "dst_idx")
                di.write(_dt.round_to(idx.reshape(di.shape), di.dtype))
    elif dst_idx is not None:
        dst_idx.mark_written()
    return _x.commit(m, pend, out, res, None)


def nc_find_index8(
    *, data: Tensor, vals: Tensor, mask: Any = None, dtype: Any = None, **kwargs: Any
) -> Tensor:
    """Index of the first occurrence of each of 8 values per partition -> (P, 8) uint32."""
    return _find8("nisa.nc_find_index8", data, vals, None, None, mask, dtype)


def nc_match_replace8(
    *,
    data: Tensor,
    vals: Tensor,
    imm: Any,
    dst_idx: Any = None,
    mask: Any = None,
    dtype: Any = None,
    **kwargs: Any,
) -> Tensor:
    """Replace the first occurrence of each of 8 values per partition with ``imm``."""
    return _find8("nisa.nc_match_replace8", data, vals, imm, dst_idx, mask, dtype)
