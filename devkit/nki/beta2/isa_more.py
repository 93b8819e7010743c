"""``nki.isa`` adapters of the less used VectorE / GpSimd / DMA instructions (NKI 0.x, dst-passing)."""

from __future__ import annotations

from typing import Any

import numpy as np

from devkit import dtypes as _dt
from devkit.errors import (
    BoundsError,
    DtypeError,
    KernelArgumentError,
    MemoryPlacementError,
    PartitionMismatchError,
    TileShapeError,
)
from devkit.nki import _isa_layer as _layer
from devkit.nki import _isa_reduce as _b1_reduce
from devkit.nki import isa as _b1
from devkit.nki._alu import ALU
from devkit.nki._isa_activation import _activation
from devkit.nki._isa_common import _alu, _val, _vector_operand
from devkit.nki.beta2._convention import (
    _check_fit,
    _dst,
    _into,
    _machine_at_least,
    _member,
    _strict,
)
from devkit.nki.beta2.constants import (
    oob_mode,
    reduce_cmd,
)
from devkit.sim import dataflow as _flow
from devkit.sim import instr as _x
from devkit.sim import unwritten as _unwritten
from devkit.sim.tensor import Tensor
from devkit.trace import DMA, GPSIMD, SCALAR, VECTOR

# ---- less used VectorE / GpSimd instructions ---------------------------------------------------------------


@_strict
def tensor_partition_reduce(dst: Any, op: Any, data: Any, name: Any = None) -> None:
    """Reduce across partitions (add, average, max, bitwise_or, bitwise_and) into ``dst[1, F]`` (GpSimd)."""
    api = "nisa.tensor_partition_reduce"
    d = _dst(dst, api)
    average = getattr(op, "_nki_alu", None) == "average"  # nl.average: the add reduction divided by P
    ins = _b1_reduce.TENSOR_PARTITION_REDUCE
    s = _layer.step(api, ins.engine, ins.opcode)
    s.flow = ins.dataflow
    ins.plan(s, np.add if average else op, data, dtype=d.dtype)
    _into(api, d, _layer.issue(s, _partition_average if average else ins.numerics))  # type: ignore[arg-type]


def _partition_average(s: _layer.Step) -> np.ndarray:
    """The mean over partitions: the fp32 sum divided by the partition count."""
    return _b1_reduce._partition_reduce_values(s) / np.float32(s.reads[0].partitions)


@_strict
def dma_compute(
    dst: Any,
    srcs: Any,
    reduce_op: Any,
    scales: Any = None,
    unique_indices: bool = True,
    oob_mode: Any = oob_mode.error,
    name: Any = None,
) -> None:
    """``dst = sum(srcs)`` through the DMA (add only, up to 16 sources, scales 1.0, fp32 internally)."""
    api = "nisa.dma_compute"
    s = _layer.step(api, DMA, "dma_copy")
    _member(oob_mode, _b1.oob_mode, api, "oob_mode")
    d = _dst(dst, api, buffers=("sbuf", "hbm"))
    try:
        op = _alu(reduce_op, api)
    except KernelArgumentError:
        op = None
    if op != "add":
        raise KernelArgumentError(f"{api}: reduce_op must be nl.add, got {reduce_op!r}", rule="bad-argument")
    items = list(srcs) if isinstance(srcs, (list, tuple)) else [srcs]
    if not 1 <= len(items) <= 16:
        raise KernelArgumentError(f"{api}: between 1 and 16 sources, got {len(items)}", rule="bad-argument")
    if scales is not None and any(float(v) != 1.0 for v in scales):
        raise KernelArgumentError(f"{api}: scales must all be 1.0, got {list(scales)}", rule="bad-argument")
    for i, t in enumerate(items):
        if not isinstance(t, Tensor):
            raise KernelArgumentError(
                f"{api}: srcs[{i}] must be a tensor, got {type(t).__name__}", rule="bad-argument"
            )
        t.check_alive()
        if t.st.buffer == "psum":
            raise MemoryPlacementError(f"{api}: DMA cannot access PSUM (srcs[{i}])", rule="dma-psum")
        if t.size != d.size:
            raise TileShapeError(
                f"{api}: srcs[{i}] {list(t.shape)} and dst {list(d.shape)} must have the same number of elements",
                rule="shape-mismatch",
            )
        t.check_bounds(None, "dma_compute source")
    d.check_bounds(None, "dma_compute destination")
    s.reads = items
    s.dst = d
    s.flops = d.size * (len(items) - 1)
    s.attrs = {"indirect": False, "rmw": False}
    s.flow = _flow.flat_sum
    _layer.issue(s, _sum_values)


def _sum_values(s: _layer.Step) -> np.ndarray:
    shape = s.dst.shape  # type: ignore[union-attr]
    acc = s.reads[0].read().reshape(shape).astype(np.float32)  # from the first source: -0.0 + -0.0 is -0.0
    for t in s.reads[1:]:
        acc = acc + t.read().reshape(shape).astype(np.float32)
    return acc


def _affine_values(
    pattern: Any, offset: Any, channel_multiplier: Any, p: int, api: str
) -> tuple[tuple, np.ndarray]:
    """``offset + partition * channel_multiplier + sum(step * i)`` over a ``[step, count]`` pattern (int64)."""
    try:
        pairs = [(int(st), int(c)) for st, c in pattern]
    except (TypeError, ValueError):
        raise KernelArgumentError(
            f"{api}: pattern must be [step, count] pairs, got {pattern!r}", rule="bad-argument"
        ) from None
    if not 1 <= len(pairs) <= 4:
        raise KernelArgumentError(f"{api}: pattern must have 1 to 4 [step, count] pairs", rule="bad-argument")
    shape = (p, *tuple(c for _, c in pairs))
    v = np.full(shape, int(offset), dtype=np.int64)
    v = v + int(channel_multiplier) * np.arange(p, dtype=np.int64).reshape((p,) + (1,) * len(pairs))
    for ax, (step, count) in enumerate(pairs):
        sh = [1] * len(shape)
        sh[ax + 1] = count
        v = v + step * np.arange(count, dtype=np.int64).reshape(sh)
    return shape, v


@_strict
def affine_select(
    dst: Any,
    pattern: Any,
    channel_multiplier: Any,
    on_true_tile: Any,
    on_false_value: Any,
    cmp_op: Any = None,
    offset: Any = 0,
    name: Any = None,
) -> None:
    """``dst = on_true_tile`` where ``cmp_op(offset + p * channel_multiplier + sum(step * i), 0)`` holds, else the
    fp32 scalar ``on_false_value`` (GpSimd, SBUF; ``cmp_op`` defaults to ``equal``)."""
    api = "nisa.affine_select"
    s = _layer.step(api, GPSIMD, "affine_select")
    d = _dst(dst, api, buffers=("sbuf",))
    t = _x.tile(on_true_tile, api, "on_true_tile", psum=False)
    op = _alu(cmp_op if cmp_op is not None else "equal", api)
    if op not in ("equal", "not_equal", "greater", "greater_equal", "less", "less_equal"):
        raise KernelArgumentError(f"{api}: cmp_op must be a comparison, got {op}", rule="bad-alu-op")
    shape, v = _affine_values(pattern, offset, channel_multiplier, t.partitions, api)
    if int(np.prod(shape[1:])) != t.free_size:
        raise TileShapeError(
            f"{api}: the pattern covers {int(np.prod(shape[1:]))} elements per partition but on_true_tile "
            f"{list(t.shape)} has {t.free_size}",
            rule="shape-mismatch",
        )
    _check_fit(api, d, shape)
    s.shape, s.dtype, s.reads, s.flops = shape, d.dtype, [t], t.size
    s.args = (op, v, on_false_value)
    s.flow = _affine_select_flow
    _into(api, d, _layer.issue(s, _affine_select_values))  # type: ignore[arg-type]


def _affine_kept(s: _layer.Step) -> np.ndarray:
    op, v, _ = s.args
    return ALU[op](v.astype(np.float32), np.float32(0)) != 0


def _affine_select_values(s: _layer.Step) -> np.ndarray:
    keep = _affine_kept(s)
    return np.where(keep, s.reads[0].read().astype(np.float32).reshape(s.shape), np.float32(s.args[2]))


def _affine_select_flow(s: _layer.Step, f: Any) -> list[np.ndarray | None]:
    """The dataflow rule (:mod:`devkit.sim.dataflow`): only the elements of ``on_true_tile`` chosen count."""
    g = f.tile(s.reads[0])
    return [None if g is None else g.reshape(s.shape) & _affine_kept(s)]


@_strict
def nc_n_gather(dst: Any, data: Any, indices: Any, name: Any = None) -> None:
    """Per partition, ``dst[p, j] = data[p].flat[indices[p, j]]`` (uint32 flat free indices, GpSimd)."""
    api = "nisa.nc_n_gather"
    s = _layer.step(api, GPSIMD, "local_gather")
    d = _dst(dst, api, buffers=("sbuf",))
    t = _x.tile(data, api, "data", psum=False)
    ix = _x.tile(indices, api, "indices", psum=False)
    if _dt.name_of(ix.dtype) not in ("uint32", "int32", "uint16"):
        raise DtypeError(f"{api}: indices must be uint32, got {_dt.name_of(ix.dtype)}", rule="dtype")
    if ix.partitions != t.partitions:
        raise PartitionMismatchError(
            f"{api}: data and indices have different partition counts", rule="partition-mismatch"
        )
    shape = tuple(ix.shape)
    _check_fit(api, d, shape)
    s.shape, s.dtype, s.reads, s.attrs = shape, d.dtype, [t, ix], {"op": "nc_n_gather"}
    s.flow = _flow.n_gather
    _into(api, d, _layer.issue(s, _n_gather_values))  # type: ignore[arg-type]


def _n_gather_values(s: _layer.Step) -> np.ndarray:
    t, ix = s.reads
    flat = t.read().reshape(t.partitions, -1)
    idx = ix.read().astype(np.int64).reshape(ix.partitions, -1)
    if idx.size and (idx.min() < 0 or idx.max() >= flat.shape[1]):
        raise BoundsError(
            f"{s.api}: index {int(idx.max())} is outside the {flat.shape[1]} elements per partition of data",
            rule="out-of-bounds",
        )
    g = np.take_along_axis(flat, idx, axis=1).reshape(s.shape)
    return g.astype(np.float32) if _dt.is_float(t.dtype) else g


def _match8(api: str, data: Any, vals: Any) -> tuple[Tensor, Tensor]:
    """The ``data`` and ``vals`` tiles of a find/replace-8 instruction (8 values per partition)."""
    d = _x.tile(data, api, "data", psum=False)
    v = _x.tile(vals, api, "vals", psum=False)
    if v.free_size != 8:
        raise TileShapeError(
            f"{api}: vals must hold 8 values per partition, got {v.free_size}", rule="shape-mismatch"
        )
    if v.partitions != d.partitions:
        raise PartitionMismatchError(
            f"{api}: data and vals have different partition counts", rule="partition-mismatch"
        )
    return d, v


def _match_positions(d: Tensor, v: Tensor, reverse: bool) -> tuple[np.ndarray, np.ndarray]:
    """Per partition, the position of each of 8 values in ``data`` (-1 when unmatched).  A value occurring in
    several slots takes successive matches: slot order ascending (find_index8) or from slot 7 down
    (match_replace8).  Returns (data values as fp32, positions)."""
    x = d.read().astype(np.float32).reshape(d.partitions, -1)
    want = v.read().astype(np.float32).reshape(v.partitions, 8)
    idx = np.full((d.partitions, 8), -1, dtype=np.int64)
    slots = range(7, -1, -1) if reverse else range(8)
    for p in range(d.partitions):
        taken: set[int] = set()
        for j in slots:
            hits = [int(i) for i in np.nonzero(x[p] == want[p, j])[0] if int(i) not in taken]
            if hits:
                idx[p, j] = hits[0]
                taken.add(hits[0])
    return x, idx


@_strict
def nc_find_index8(dst: Any, data: Any, vals: Any, name: Any = None) -> None:
    """Per partition, the index of the first match of each of 8 values; unmatched -> all ones (VectorE)."""
    api = "nisa.nc_find_index8"
    s = _layer.step(api, VECTOR, "nc_find_index8")
    dd = _dst(dst, api, buffers=("sbuf",))
    if _dt.name_of(dd.dtype) not in ("uint32", "uint16"):
        raise DtypeError(f"{api}: dst must be uint32 or uint16, got {_dt.name_of(dd.dtype)}", rule="dtype")
    d, v = _match8(api, data, vals)
    _check_fit(api, dd, (d.partitions, 8))
    s.shape, s.dtype, s.reads, s.flops, s.exact = (d.partitions, 8), dd.dtype, [d, v], d.size, True
    s.flow = _flow.rows
    _into(api, dd, _layer.issue(s, _find_index8_values))  # type: ignore[arg-type]


def _find_index8_values(s: _layer.Step) -> np.ndarray:
    _, idx = _match_positions(*s.reads, reverse=False)
    store = _dt.storage_dtype(s.dtype)
    return np.where(idx < 0, np.iinfo(np.dtype(store)).max, idx).astype(store)


@_strict
def nc_match_replace8(
    dst: Any, data: Any, vals: Any, imm: Any, dst_idx: Any = None, name: Any = None
) -> None:
    """``dst = data`` with the first match of each of 8 values replaced by ``imm``; ``dst_idx`` receives the
    matched indices (duplicates are matched from slot 7 down) (VectorE)."""
    api = "nisa.nc_match_replace8"
    s = _layer.step(api, VECTOR, "nc_match_replace8")
    dd = _dst(dst, api, buffers=("sbuf",))
    d, v = _match8(api, data, vals)
    _check_fit(api, dd, (d.partitions, d.free_size))
    di = None
    if dst_idx is not None:
        di = _dst(dst_idx, api, buffers=("sbuf",))
        _check_fit(api, di, (d.partitions, 8))
        s.also, s.also_checked = [di], True
    s.shape, s.dtype, s.reads, s.flops, s.args = tuple(d.shape), dd.dtype, [d, v], d.size, (imm, di)
    s.flow = _flow.rows
    _into(api, dd, _layer.issue(s, _match_replace8_values))  # type: ignore[arg-type]


def _match_replace8_values(s: _layer.Step) -> np.ndarray:
    d, v = s.reads
    imm, di = s.args
    x, idx = _match_positions(d, v, reverse=True)
    y = x.copy()
    for p in range(d.partitions):
        for j in range(8):
            if idx[p, j] >= 0:
                y[p, idx[p, j]] = np.float32(imm)
    if di is not None:
        ones = np.iinfo(np.dtype(_dt.storage_dtype(di.dtype))).max if _dt.is_int(di.dtype) else -1
        di.write(_dt.round_to(np.where(idx < 0, ones, idx).reshape(di.shape), di.dtype))
    return y.reshape(d.shape)


@_strict
def exponential(
    dst: Any,
    src: Any,
    max_value: Any = 0.0,
    reduce_res: Any = None,
    reduce_cmd: Any = reduce_cmd.idle,
    reduce_init: Any = 0.0,
    name: Any = None,
) -> None:
    """``dst = exp(src - max_value)`` with an optional running sum per partition into ``reduce_res`` (v4).

    Accumulator: ``reset`` clears it, ``reduce`` adds the row sums, ``reset_reduce`` sets them, ``load_reduce``
    sets ``reduce_init`` plus them, ``idle`` leaves it; ``reduce_res`` reads it."""
    api = "nisa.exponential"
    _machine_at_least(api, 4)
    s = _layer.step(api, SCALAR, "activation")
    d = _dst(dst, api)
    rc = _member(reduce_cmd, _b1.reduce_cmd, api, "reduce_cmd")
    t = _x.tile(src, api, "src")
    p = t.partitions
    mx = _vector_operand(max_value, p, api, "max_value")
    shape = _x.aligned_shape(t)
    _check_fit(api, d, shape)
    rr = None
    if reduce_res is not None:
        rr = _x.tile(reduce_res, api, "reduce_res")
        if rr.partitions != p or rr.free_size != 1:
            raise TileShapeError(
                f"{api}: reduce_res must be ({p}, 1), got {list(rr.shape)}", rule="vector-operand-shape"
            )
        s.also, s.also_checked = [rr], True
    s.shape, s.dtype, s.reads, s.flops = shape, d.dtype, [t, mx], 2 * t.size
    s.attrs = {"func": "exp"}
    s.args = (rc, reduce_init, rr)
    s.flow = _flow.exponential
    _into(api, d, _layer.issue(s, _exponential_values))  # type: ignore[arg-type]


def _exponential_values(s: _layer.Step) -> np.ndarray:
    t, mx = s.reads
    rc, reduce_init, rr = s.args
    p = t.partitions
    with np.errstate(over="ignore"):
        vals = np.exp(_x.value_of(t, s.shape, None) - _val(mx, s.shape)).astype(np.float32)
    acc = s.m.accumulators.setdefault("vector", np.zeros(128, np.float32))
    rows = vals.reshape(p, -1).sum(axis=1, dtype=np.float32)
    if rc == _b1.reduce_cmd.reset:
        acc[:p] = 0.0
    elif rc == _b1.reduce_cmd.reduce:
        acc[:p] += rows
    elif rc == _b1.reduce_cmd.reset_reduce:
        acc[:p] = rows
    elif rc == _b1.reduce_cmd.load_reduce:
        acc[:p] = np.broadcast_to(_val(reduce_init, (p, 1)), (p, 1)).reshape(p) + rows
    if rr is not None:
        rr.write(_dt.round_to(acc[:p].reshape(rr.shape), rr.dtype))
    return vals


@_strict
def nonzero_with_count(
    dst: Any, src: Any, index_offset: int = 0, padding_val: Any = -1, name: Any = None
) -> None:
    """On partitions 0, 16, ..., 112: the indices (plus ``index_offset``) of the non-zero elements of ``src``,
    then ``padding_val``, and the count in the last element of ``dst`` (GpSimd, NeuronCore-v3+)."""
    api = "nisa.nonzero_with_count"
    _machine_at_least(api, 3)
    s = _layer.step(api, GPSIMD, "nonzero_with_count")
    d = _dst(dst, api, buffers=("sbuf",))
    t = _x.tile(src, api, "src", psum=False)
    if d.free_size != t.free_size + 1 or d.partitions != t.partitions:
        raise TileShapeError(
            f"{api}: dst {list(d.shape)} must have the partitions of src {list(t.shape)} and one more element "
            "per partition (the count)",
            rule="dst-shape",
        )
    s.reads, s.dst, s.flops, s.args = [t], d, t.size, (index_offset, padding_val)
    _layer.issue(s, _nonzero_values)


def _nonzero_values(s: _layer.Step) -> Any:
    (t,) = s.reads
    d = s.dst
    assert d is not None
    index_offset, padding_val = s.args
    f = t.free_size
    cores = np.zeros(t.shape, dtype=bool)
    cores[::16] = True  # only partitions 0, 16, ..., 112 are read and written; the others may hold anything
    # The eight GpSimd cores run side by side, one partition each: a core partition holding never-written data
    # gives a never-written result partition, an error only where it is used (nki-library's hardware-tested
    # find_nonzero_indices runs all eight with fewer columns to process; devkit.sim.unwritten).  Reading
    # nothing but never-written data is an error here.
    g = _unwritten.moved(t, cores)
    x = t.read(cores, check_init=False).reshape(t.partitions, f)
    cur = d.read(check_init=False).reshape(d.partitions, f + 1).astype(np.float64)
    kept = d.unwritten()  # the partitions the instruction does not write keep their written-state
    for p in range(0, t.partitions, 16):
        nz = np.nonzero(x[p] != 0)[0]
        row = np.full(f + 1, float(padding_val))
        row[: nz.size] = nz + int(index_offset)
        row[f] = nz.size
        cur[p] = row
    d.write(_dt.round_to(cur.reshape(d.shape), d.dtype))
    if kept is not None or g is not None:
        never = np.zeros((d.partitions, f + 1), bool) if kept is None else kept.reshape(d.partitions, f + 1)
        never[::16] = False if g is None else g.reshape(t.partitions, f)[::16].any(axis=1, keepdims=True)
        _unwritten.carry(d, never, t, moved_in=g is not None)
    return _layer.WRITTEN


_ACTIVATE2_PAIRS = {
    ("multiply", "add"),
    ("multiply", "subtract"),
    ("multiply", "bypass"),
    ("add", "bypass"),
    ("subtract", "bypass"),
    ("bypass", "bypass"),
}
_ACTIVATE2_REDUCE = ("add", "max", "min", "abs_max", "abs_min")


@_strict
def activate2(
    dst: Any,
    op: Any,
    data: Any,
    imm0: Any,
    imm1: Any,
    op0: Any,
    op1: Any,
    relu_param: Any = 0.0,
    reverse0: bool = False,
    reverse1: bool = False,
    reduce_op: Any = None,
    reduce_res: Any = None,
    reduce_cmd: Any = reduce_cmd.idle,
    name: Any = None,
) -> None:
    """``dst = op((data op0 imm0) op1 imm1)`` on the ScalarE (fp32; ``prelu`` takes ``relu_param`` as its
    negative slope), with the ``activation`` register reduction (add/max/min/abs_max/abs_min); NeuronCore-v4."""
    api = "nisa.activate2"
    _machine_at_least(api, 4)
    d = _dst(dst, api)
    rc = _member(reduce_cmd, _b1.reduce_cmd, api, "reduce_cmd")
    o0, o1 = _alu(op0, api), _alu(op1, api)
    if (o0, o1) not in _ACTIVATE2_PAIRS:
        raise KernelArgumentError(
            f"{api}: (op0, op1) must be one of {sorted(_ACTIVATE2_PAIRS)}, got ({o0}, {o1})",
            rule="bad-alu-op",
        )
    if reduce_op is not None and _alu(reduce_op, api) not in _ACTIVATE2_REDUCE:
        raise KernelArgumentError(
            f"{api}: reduce_op must be one of {', '.join(_ACTIVATE2_REDUCE)}, got {reduce_op!r}",
            rule="bad-alu-op",
        )
    res = _activation(
        api, op, data, None, 1.0, reduce_op, reduce_res, rc, None, d.dtype,
        pre=((o0, imm0, reverse0), (o1, imm1, reverse1)), relu_param=relu_param,
    )  # fmt: skip
    _into(api, d, res)


@_strict
def topk(val_dst: Any, idx_dst: Any, src: Any, n: Any, name: Any = None) -> None:
    """Top ``K`` of each 16-partition group's snake (``K`` = val_dst's free size; GpSimd, NeuronCore-v3+).

    ``src`` (bf16, SBUF) holds one problem per group of 16 partitions in snake order: element ``i`` of the
    group's ``n`` active values is ``src[g*16 + i % 16, i // 16]``.  Every partition of the group receives the
    group's ``K`` largest values in ascending order (``val_dst``, bf16) and their snake indices (``idx_dst``,
    uint32); equal values are taken lowest index first."""
    api = "nisa.topk"
    _machine_at_least(api, 3)
    s = _layer.step(api, GPSIMD, "topk")
    vd = _dst(val_dst, api, buffers=("sbuf",))
    ix = _dst(idx_dst, api, buffers=("sbuf",))
    t = _x.tile(src, api, "src", psum=False)
    for what, x, want in (("src", t, "bfloat16"), ("val_dst", vd, "bfloat16"), ("idx_dst", ix, "uint32")):
        if _dt.name_of(x.dtype) != want:
            raise DtypeError(f"{api}: {what} must be {want}, got {_dt.name_of(x.dtype)}", rule="dtype")
    p, k = t.partitions, vd.free_size
    if p % 16:
        raise TileShapeError(
            f"{api}: the partition count must be a multiple of 16, got {p}", rule="topk-shape"
        )
    if not isinstance(n, (int, np.integer)) or not 8 <= int(n) < 65536:
        raise KernelArgumentError(
            f"{api}: n must be an integer in [8, 65536), got {n!r}", rule="bad-argument"
        )
    n = int(n)
    if t.free_size * 16 < n:
        raise TileShapeError(
            f"{api}: src holds {t.free_size} elements per partition, fewer than ceil(n / 16) = {-(-n // 16)}",
            rule="topk-shape",
        )
    if not 1 <= k <= n or k >= 32768:
        raise TileShapeError(
            f"{api}: K (val_dst's free size) must be in [1, min(n, 32767)], got {k}", rule="topk-shape"
        )
    for what, x in (("val_dst", vd), ("idx_dst", ix)):
        if x.partitions != p or x.free_size != k:
            raise TileShapeError(
                f"{api}: {what} {list(x.shape)} must be [{p}, {k}] (src's partitions, K elements)",
                rule="dst-shape",
            )
    s.reads, s.dst, s.also, s.also_checked = [t], vd, [ix], True
    s.attrs = {"n": n, "k": k}
    s.flow = _flow.topk
    _layer.issue(s, _topk_values)


def _topk_values(s: _layer.Step) -> np.ndarray:
    (t,) = s.reads
    (ix,) = s.also
    n, k = s.attrs["n"], s.attrs["k"]  # type: ignore[index]
    p = t.partitions
    cols = -(-n // 16)
    x = t.read().astype(np.float32).reshape(p, -1)[:, :cols]
    snakes = x.reshape(p // 16, 16, cols).transpose(0, 2, 1).reshape(p // 16, cols * 16)[:, :n]
    order = np.argsort(-snakes, axis=1, kind="stable")[:, :k]  # largest first, lowest index among equals
    order = order[:, ::-1]  # ascending values
    vals = np.take_along_axis(snakes, order, axis=1)
    ix.write(np.repeat(order, 16, axis=0).astype(np.uint32).reshape(ix.shape))
    return np.repeat(vals, 16, axis=0).reshape(s.dst.shape)  # type: ignore[union-attr]
