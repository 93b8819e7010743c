"""Reductions and statistics of ``nki.isa`` (and the free-axis reduction behind ``nl.sum`` & co.):
``tensor_reduce``, ``tensor_partition_reduce``, ``tensor_scalar_reduce``, ``bn_stats``/``bn_aggr``,
``max8`` and the find/replace-8 instructions.

Declarations of the instruction layer (:mod:`devkit.nki._isa_layer`); :mod:`devkit.nki.isa` generates the
public functions."""

from __future__ import annotations

from typing import Any

import numpy as np

from devkit import dtypes as _dt
from devkit.errors import (
    IndexingError,
    KernelArgumentError,
    PartitionMismatchError,
    TileShapeError,
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
    _reduce_values,
    _val,
    _vector_operand,
)
from devkit.nki._isa_common import (
    reduce_cmd as _reduce_cmd,
)
from devkit.nki._isa_layer import Instruction, Step, execute
from devkit.sim import dataflow as _flow
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


def _free_reduce(
    s: Step,
    x: Tensor,
    axis: Any,
    fn: Any,
    *,
    dtype: Any,
    mask: Any,
    keepdims: bool,
    opname: str,
    default_dtype: Any = None,
) -> None:
    """A free-axis reduction on VectorE: ``fn(values, axis=, keepdims=)`` (``nl.sum`` & co. and ``tensor_reduce``)."""
    api = s.api
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
    s.dtype = _x.out_dtype(dtype, default_dtype if default_dtype is not None else t.dtype, api)
    s.shape = out_shape
    s.reads = [t]
    s.flops = t.size
    s.attrs = {"op": opname}
    s.fn = fn
    s.args = (_x.mask_array(mask, shape_in, api), shape_in, axes, keepdims)  # the mask selects inputs


def _free_reduce_values(s: Step) -> np.ndarray:
    (t,) = s.reads
    marr, shape_in, axes, keepdims = s.args
    opname = s.attrs["op"]  # type: ignore[index]
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
            return np.asarray(mu if keepdims else np.squeeze(mu, axis=axes), dtype=np.float32)
        return np.asarray(s.fn(v, axis=axes, keepdims=keepdims), dtype=None if bit else np.float32)


_REDUCE_IDENTITY = {"add": 0.0, "max": -np.inf, "min": np.inf, "multiply": 1.0, "all": 1.0}


def _tensor_reduce(
    s: Step,
    op: Any,
    data: Tensor,
    axis: Any,
    *,
    mask: Any = None,
    dtype: Any = None,
    negate: bool = False,
    keepdims: bool = False,
    **kwargs: Any,
) -> None:
    """Reduce along free axes (VectorE); any set of free axes, as ``nl`` reductions accept."""
    api = s.api
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

    _free_reduce(s, t, axis, fn, dtype=dtype, mask=mask, keepdims=keepdims, opname=name)


def _tensor_partition_reduce(
    s: Step, op: Any, data: Tensor, *, mask: Any = None, dtype: Any = None, **kwargs: Any
) -> None:
    """Reduce across partitions: (P, F...) -> (1, F...) (GpSimd)."""
    api = s.api
    name = _alu(op, api)
    if name not in ("add", "max", "bitwise_or", "bitwise_and"):
        raise KernelArgumentError(
            f"{api}: op must be add, max, bitwise_or or bitwise_and, got {name}", rule="bad-reduce-op"
        )
    t = _x.tile(data, api, "data")
    shape = _x.aligned_shape(t)
    s.shape = (1, *shape[1:])
    s.dtype = _x.out_dtype(dtype, t.dtype, api)
    s.reads = [t]
    s.flops = t.size
    s.attrs = {"op": name}
    s.mask = _x.mask_array(mask, s.shape, api)


def _partition_reduce_values(s: Step) -> np.ndarray:
    (t,) = s.reads
    name = s.attrs["op"]  # type: ignore[index]
    v = _x.value_of(t, _x.aligned_shape(t), None, to_float=name not in BITVEC)
    return _reduce_values(name, v, (0,), True)


def _tensor_scalar_reduce(
    s: Step,
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
) -> None:
    """``out = data op0 operand0`` and ``reduce_res = reduce_op(out)`` over the free axes (VectorE)."""
    _accumulating_scalar_reduce(s, data, op0, operand0, reduce_op, reduce_res, reverse0, dtype, mask)


def _accumulating_scalar_reduce(
    s: Step,
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
) -> None:
    """The instruction, with the VectorE accumulator (shared with ``select_reduce``, ``range_select``...):
    ``reset`` sets it to the reduction's identity, ``reduce`` folds the row reductions in, ``reset_reduce``
    sets it to them, ``load_reduce`` to ``reduce_init`` (scalar or ``(P, 1)``) folded with them, ``idle`` leaves
    it; ``reduce_res`` (optional) receives it, negated with ``reduce_res_negate``."""
    api = s.api
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
    s.dtype = _x.out_dtype(dtype, t.dtype, api)
    s.mask = _x.mask_array(mask, shape, api)
    s.shape = shape
    s.reads = [t, o0, init]
    s.also = [rr] if rr is not None else []
    s.also_checked = True
    s.flops = 2 * t.size
    s.attrs = {"op0": n0, "reduce": rname}
    s.args = (reverse0, rc, rr, reduce_res_negate)


def _scalar_reduce_values(s: Step) -> np.ndarray:
    t, o0, init = s.reads
    reverse0, rc, rr, negate = s.args
    n0, rname = s.attrs["op0"], s.attrs["reduce"]  # type: ignore[index]
    shape, marr = s.shape, s.mask
    p = shape[0]
    x = _x.value_of(t, shape, marr)
    with np.errstate(all="ignore"):
        vals = np.asarray(
            ALU[n0](_val(o0, shape), x) if reverse0 else ALU[n0](x, _val(o0, shape)), dtype=np.float32
        )
        v = vals if marr is None else np.where(marr, vals, _IDENT.get(rname, 0.0))
        red = np.asarray(_reduce_values(rname, v.reshape(p, -1), (1,), False), dtype=np.float32)
        acc = s.m.accumulators.setdefault("vector", np.full(128, -np.inf, np.float32))
        if rc == _reduce_cmd.reset:
            acc[:p] = _IDENT.get(rname, 0.0)
        elif rc == _reduce_cmd.reduce:
            acc[:p] = ALU[rname](acc[:p], red)
        elif rc == _reduce_cmd.reset_reduce:
            acc[:p] = red
        elif rc == _reduce_cmd.load_reduce:
            acc[:p] = ALU[rname](np.broadcast_to(_val(init, (p, 1)), (p, 1)).reshape(p), red)
    if rr is not None:
        got = -acc[:p] if negate else acc[:p]
        rr.write(_dt.round_to(got.reshape(_x.aligned_shape(rr)).reshape(rr.shape), rr.dtype))
    return vals


def _per_partition_step(s: Step, t: Tensor, out_free: int, dtype: Any) -> tuple[tuple[int, ...], int, int]:
    """``s`` reads tile ``t`` into a new ``(P, out_free)`` tile; ``t``'s aligned shape, partitions, elements
    per partition."""
    shape, p, f = _per_partition(t)
    s.dtype = _x.out_dtype(dtype, t.dtype, s.api)
    s.shape = (p, out_free)
    s.reads = [t]
    s.flops = t.size
    return shape, p, f


def _bn_stats(s: Step, data: Tensor, *, mask: Any = None, dtype: Any = None, **kwargs: Any) -> None:
    """Per partition [count, mean, M2] of the even and of the odd free elements -> (P, 6) (VectorE)."""
    api = s.api
    t = _x.tile(data, api, "data")
    shape, _, f = _per_partition(t)
    if f > 512:
        raise TileShapeError(f"{api}: free size {f} exceeds bn_stats_fmax (512)", rule="bn-stats-size")
    marr = _x.mask_array(mask, shape, api)  # the mask selects the inputs counted
    _per_partition_step(s, t, 6, dtype)
    s.args = marr


def _bn_stats_values(s: Step) -> np.ndarray:
    (t,) = s.reads
    marr = s.args
    shape, p, f = _per_partition(t)
    x = _x.value_of(t, shape, marr).reshape(p, f).astype(np.float64)
    valid = np.ones((p, f), bool) if marr is None else marr.reshape(p, f)
    cols = []
    for par in (0, 1):
        xs, vs = x[:, par::2], valid[:, par::2]
        n = vs.sum(axis=1).astype(np.float64)
        total = np.where(vs, xs, 0).sum(axis=1)
        mean = np.divide(total, n, out=np.zeros_like(total), where=n > 0)
        m2 = np.where(vs, (xs - mean[:, None]) ** 2, 0).sum(axis=1)
        cols += [n, mean, m2]
    return np.stack(cols, axis=1).astype(np.float32)


def _bn_aggr(s: Step, data: Tensor, *, mask: Any = None, dtype: Any = None, **kwargs: Any) -> None:
    """Combine bn_stats outputs (triples of count, mean, M2) into (P, 2) = [mean, variance] (VectorE)."""
    api = s.api
    t = _x.tile(data, api, "data")
    _, p, f = _per_partition(t)
    if f % 3:
        raise TileShapeError(
            f"{api}: the input must hold (count, mean, M2) triples; {f} elements per partition is "
            "not a multiple of 3",
            rule="bn-aggr-size",
        )
    _per_partition_step(s, t, 2, dtype)
    s.mask = _x.mask_array(mask, (p, 2), api)


def _bn_aggr_values(s: Step) -> np.ndarray:
    (t,) = s.reads
    shape, p, f = _per_partition(t)
    st = _x.value_of(t, shape, None).reshape(p, f).astype(np.float64)
    n_i, m_i, q_i = st[:, 0::3], st[:, 1::3], st[:, 2::3]
    n = n_i.sum(axis=1)
    mean = np.divide((n_i * m_i).sum(axis=1), n, out=np.zeros(p), where=n > 0)
    m2 = (q_i + n_i * (m_i - mean[:, None]) ** 2).sum(axis=1)
    var = np.divide(m2, n, out=np.zeros(p), where=n > 0)
    return np.stack([mean, var], axis=1).astype(np.float32)


def _max8(s: Step, *, src: Tensor, mask: Any = None, dtype: Any = None, **kwargs: Any) -> None:
    """The 8 largest values per partition, in descending order -> (P, 8) (VectorE)."""
    api = s.api
    t = _x.tile(src, api, "src")
    _, p, f = _per_partition(t)
    if not 8 <= f <= 16384:
        raise TileShapeError(f"{api}: elements per partition must be between 8 and 16384, got {f}")
    _per_partition_step(s, t, 8, dtype)
    s.mask = _x.mask_array(mask, (p, 8), api)


def _max8_values(s: Step) -> np.ndarray:
    (t,) = s.reads
    shape, p, f = _per_partition(t)
    x = _x.value_of(t, shape, None).reshape(p, f)
    return -np.sort(-x, axis=1)[:, :8]


def _find8(s: Step, data: Tensor, vals: Tensor, replace: Any, dst_idx: Any, mask: Any, dtype: Any) -> None:
    """``nc_find_index8`` (``replace`` None) and ``nc_match_replace8``."""
    api = s.api
    d = _x.tile(data, api, "data")
    v = _x.tile(vals, api, "vals")
    shape, p, _ = _per_partition(d)
    if v.free_size != 8:
        raise TileShapeError(f"{api}: vals must hold exactly 8 values per partition, got {v.free_size}")
    if _x.aligned_shape(v)[0] != p:
        raise PartitionMismatchError(f"{api}: data and vals have different partition counts")
    if replace is None:
        s.dtype = _x.out_dtype(dtype, _dt.uint32, api)
        s.shape = (p, 8)
    else:
        s.dtype = _x.out_dtype(dtype, d.dtype, api)
        s.shape = shape
    s.reads = [d, v]
    s.also = [dst_idx] if dst_idx is not None else []
    s.flops = d.size
    s.args = (replace, dst_idx, mask)


def _find8_values(s: Step) -> np.ndarray:
    d, v = s.reads
    replace, dst_idx, mask = s.args
    shape, p, f = _per_partition(d)
    x = _x.value_of(d, shape, None).reshape(p, f).copy()
    vv = _x.value_of(v, None, None).reshape(p, 8)
    marr = _x.mask_array(mask, shape, s.api)
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
        return idx
    if dst_idx is not None:
        di = _x.tile(dst_idx, s.api, "dst_idx")
        di.write(_dt.round_to(idx.reshape(di.shape), di.dtype))
    return x.reshape(shape)


def _nc_find_index8(
    s: Step, *, data: Tensor, vals: Tensor, mask: Any = None, dtype: Any = None, **kwargs: Any
) -> None:
    """Index of the first occurrence of each of 8 values per partition -> (P, 8) uint32."""
    _find8(s, data, vals, None, None, mask, dtype)


def _nc_match_replace8(
    s: Step,
    *,
    data: Tensor,
    vals: Tensor,
    imm: Any,
    dst_idx: Any = None,
    mask: Any = None,
    dtype: Any = None,
    **kwargs: Any,
) -> None:
    """Replace the first occurrence of each of 8 values per partition with ``imm``."""
    _find8(s, data, vals, imm, dst_idx, mask, dtype)


# ---- the declarations ---------------------------------------------------------------------------------------

FREE_REDUCE = Instruction(
    "tensor_reduce", VECTOR, "tensor_reduce", _free_reduce, _free_reduce_values, dataflow=_flow.free_reduce
)
TENSOR_REDUCE = Instruction(
    "tensor_reduce", VECTOR, "tensor_reduce", _tensor_reduce, _free_reduce_values, dataflow=_flow.free_reduce
)
TENSOR_PARTITION_REDUCE = Instruction(
    "tensor_partition_reduce", GPSIMD, "tensor_partition_reduce", _tensor_partition_reduce,
    _partition_reduce_values, dataflow=_flow.partition_reduce,
)  # fmt: skip
TENSOR_SCALAR_REDUCE = Instruction(
    "tensor_scalar_reduce", VECTOR, "tensor_scalar_reduce", _tensor_scalar_reduce, _scalar_reduce_values,
    dataflow=_flow.scalar_reduce,
)  # fmt: skip
#: ``tensor_scalar_reduce`` with the accumulator controls NKI 0.x exposes (``reduce_cmd``, ``reduce_init``,
#: ``reduce_res_negate``): the instruction the Beta-2 adapter runs
ACCUMULATING_SCALAR_REDUCE = Instruction(
    "tensor_scalar_reduce", VECTOR, "tensor_scalar_reduce", _accumulating_scalar_reduce, _scalar_reduce_values,
    dataflow=_flow.scalar_reduce,
)  # fmt: skip
BN_STATS = Instruction("bn_stats", VECTOR, "bn_stats", _bn_stats, _bn_stats_values, dataflow=_flow.rows)
BN_AGGR = Instruction("bn_aggr", VECTOR, "bn_aggr", _bn_aggr, _bn_aggr_values, dataflow=_flow.rows)
MAX8 = Instruction("max8", VECTOR, "max8", _max8, _max8_values, dataflow=_flow.rows)
NC_FIND_INDEX8 = Instruction(
    "nc_find_index8", VECTOR, "nc_find_index8", _nc_find_index8, _find8_values, dataflow=_flow.rows
)
NC_MATCH_REPLACE8 = Instruction(
    "nc_match_replace8", VECTOR, "nc_match_replace8", _nc_match_replace8, _find8_values, dataflow=_flow.rows
)


def reduce(api: str, x: Tensor, axis: Any, fn: Any, **kwargs: Any) -> Tensor:
    """A free-axis reduction on VectorE, named ``api`` in errors (``nl.sum`` & co.); keyword arguments as
    ``_free_reduce``."""
    return execute(FREE_REDUCE, api, (x, axis, fn), kwargs)  # type: ignore[return-value]


#: the family's public Beta-1 instructions (:mod:`devkit.nki.isa` generates their functions)
INSTRUCTIONS = (
    TENSOR_REDUCE,
    TENSOR_PARTITION_REDUCE,
    TENSOR_SCALAR_REDUCE,
    BN_STATS,
    BN_AGGR,
    MAX8,
    NC_FIND_INDEX8,
    NC_MATCH_REPLACE8,
)
