"""Element-wise arithmetic of ``nki.isa`` on VectorE / GpSimd: tensor-tensor and tensor-scalar
operators, scans, reciprocal, dropout, and the instructions that generate values (``iota``, ``memset``,
``sequence_bounds``)."""

from __future__ import annotations

from typing import Any

import numpy as np

from devkit import dtypes as _dt
from devkit.errors import (
    KernelArgumentError,
    MemoryPlacementError,
    TileShapeError,
    user_location,
)
from devkit.nki import _alu as _alu_tables
from devkit.nki._alu import (
    _IDENT,
    ALU,
    BITVEC,
    _require_int,
)
from devkit.nki._isa_common import (
    _alu,
    _elementwise_vec,
    _engine,
    _read_tiles,
    _same_partitions,
    _val,
    _vector_operand,
    engine,
    reduce_cmd,
)
from devkit.sim import instr as _x
from devkit.sim.index import IndexExpr
from devkit.sim.tensor import Tensor
from devkit.trace import GPSIMD, SCALAR, VECTOR


def tensor_tensor(
    data1: Tensor,
    data2: Tensor,
    op: Any,
    *,
    dtype: Any = None,
    mask: Any = None,
    engine: Any = engine.unknown,
    **kwargs: Any,
) -> Tensor:
    """``data1 op data2`` element-wise (VectorE; GpSimd for power / integer arithmetic)."""
    api = "nisa.tensor_tensor"
    name = _alu(op, api)
    a = _x.tile(data1, api, "data1")
    b = _x.tile(data2, api, "data2")
    _same_partitions(api, a, b)
    if a.st.buffer == "psum" and b.st.buffer == "psum":
        raise MemoryPlacementError(f"{api}: data1 and data2 cannot both be in PSUM", rule="both-psum")
    in_psum = "psum" in (a.st.buffer, b.st.buffer)
    odt = _x.out_dtype(dtype, _dt.promote(a.dtype, b.dtype), api)
    native = _alu_tables.int32_native(
        name, (a.dtype, b.dtype), odt
    )  # GpSimd integer arithmetic, unless in PSUM
    default = GPSIMD if name == "power" or (native and not in_psum) else VECTOR
    eng = _engine(engine, default, (VECTOR, GPSIMD, SCALAR), api)
    if eng == GPSIMD and in_psum:
        raise MemoryPlacementError(f"{api}: the GpSimd engine cannot access PSUM", rule="gpsimd-psum")
    bit = name in BITVEC
    if bit:
        _require_int(api, a, b)
    native = native and eng == GPSIMD  # engine=vector explicitly: fp32 arithmetic, as documented
    return _x.elementwise(
        api,
        eng,
        "tensor_tensor",
        _alu_tables.int32_op(name, odt) if native else (lambda x, y: ALU[name](x, y)),
        [a, b],
        dtype=odt,
        mask=mask,
        bitwise=bit or native,
        attrs={"op": name},
    )


def tensor_scalar(
    data: Tensor,
    op0: Any,
    operand0: Any,
    reverse0: bool = False,
    op1: Any = None,
    operand1: Any = None,
    reverse1: bool = False,
    *,
    dtype: Any = None,
    mask: Any = None,
    engine: Any = engine.unknown,
    **kwargs: Any,
) -> Tensor:
    """``(data op0 operand0) op1 operand1`` with scalar or (P, 1) operands."""
    api = "nisa.tensor_scalar"
    t = _x.tile(data, api, "data")
    p = _x.aligned_shape(t)[0]
    n0 = _alu(op0, api)
    o0 = _vector_operand(operand0, p, api, "operand0")
    if (op1 is None) != (operand1 is None):
        raise KernelArgumentError(
            f"{api}: operand1 and op1 input arguments must be both provided or both None"
        )
    n1 = _alu(op1, api) if op1 is not None else None
    o1 = _vector_operand(operand1, p, api, "operand1") if op1 is not None else None
    if n1 is not None and ((n0 in BITVEC) != (n1 in BITVEC)):
        raise KernelArgumentError(f"{api}: op0 and op1 must be both bitvec or both arithmetic operators")
    eng = _engine(engine, VECTOR, (VECTOR, SCALAR, GPSIMD), api)
    bit = n0 in BITVEC
    if bit:
        _require_int(api, t)

    def f(x: np.ndarray, *ops: Any) -> np.ndarray:
        a0 = ops[0]
        r = ALU[n0](a0, x) if reverse0 else ALU[n0](x, a0)
        if n1 is not None:
            a1 = ops[1]
            r = ALU[n1](a1, r) if reverse1 else ALU[n1](r, a1)
        return r

    operands: list[Any] = [t, o0] + ([o1] if n1 is not None else [])
    shape = _x.aligned_shape(t)
    return _elementwise_vec(
        api, eng, "tensor_scalar", f, operands, shape, dtype, mask, bit, {"op0": n0, "op1": n1}
    )


def scalar_tensor_tensor(
    *,
    data: Tensor,
    op0: Any,
    operand0: Any,
    op1: Any,
    operand1: Tensor,
    reverse0: bool = False,
    reverse1: bool = False,
    dtype: Any = None,
    mask: Any = None,
    **kwargs: Any,
) -> Tensor:
    """``(data op0 operand0) op1 operand1`` with operand0 scalar/(P,1) and operand1 a full tile (VectorE)."""
    api = "nisa.scalar_tensor_tensor"
    t = _x.tile(data, api, "data")
    shape = _x.aligned_shape(t)
    o0 = _vector_operand(operand0, shape[0], api, "operand0")
    o1 = _x.tile(operand1, api, "operand1")
    if _x.aligned_shape(o1) != shape:
        raise TileShapeError(f"{api}: operand1 shape {list(o1.shape)} must equal data shape {list(t.shape)}")
    if t.st.buffer == "psum" and o1.st.buffer == "psum":
        raise MemoryPlacementError(f"{api}: data and operand1 cannot both be in PSUM", rule="both-psum")
    n0, n1 = _alu(op0, api), _alu(op1, api)

    def f(x: np.ndarray, a0: Any, a1: Any) -> np.ndarray:
        r = ALU[n0](a0, x) if reverse0 else ALU[n0](x, a0)
        return ALU[n1](a1, r) if reverse1 else ALU[n1](r, a1)

    m = _x.machine(api)
    loc = user_location()
    odt = _x.out_dtype(dtype, _dt.promote(t.dtype, o1.dtype), api)
    marr = _x.mask_array(mask, shape, api)
    out = _x.new_tile(m, shape, odt, "sbuf", loc)
    tiles = _read_tiles(m, loc, t, o0, o1)
    pend = m.emit(VECTOR, "scalar_tensor_tensor", tiles, [out], 2 * t.size, {"op0": n0, "op1": n1}, loc)
    vals = None
    if m.numerics:
        with np.errstate(all="ignore"):
            vals = np.asarray(
                f(_x.value_of(t, shape, marr), _val(o0, shape), _x.value_of(o1, shape, marr)),
                dtype=np.float32,
            )
    return _x.commit(m, pend, out, vals, marr)


def tensor_tensor_scan(
    data0: Tensor,
    data1: Tensor,
    initial: Any,
    op0: Any,
    op1: Any,
    reverse0: bool = False,
    reverse1: bool = False,
    *,
    dtype: Any = None,
    mask: Any = None,
    **kwargs: Any,
) -> Tensor:
    """Per partition: ``r[i] = op1(op0(data0[i], r[i-1]), data1[i])`` with ``r[-1] = initial``."""
    api = "nisa.tensor_tensor_scan"
    a = _x.tile(data0, api, "data0")
    b = _x.tile(data1, api, "data1")
    if _x.aligned_shape(a) != _x.aligned_shape(b):
        raise TileShapeError(
            f"{api}: data0 {list(a.shape)} and data1 {list(b.shape)} must have the same shape"
        )
    if a.st.buffer == "psum" and b.st.buffer == "psum":
        raise MemoryPlacementError(f"{api}: data0 and data1 cannot both be in PSUM", rule="both-psum")
    shape = _x.aligned_shape(a)
    p = shape[0]
    init = _vector_operand(initial, p, api, "initial")
    n0, n1 = _alu(op0, api), _alu(op1, api)
    m = _x.machine(api)
    loc = user_location()
    odt = _x.out_dtype(dtype, _dt.promote(a.dtype, b.dtype), api)
    out = _x.new_tile(m, shape, odt, "sbuf", loc)
    tiles = _read_tiles(m, loc, a, b, init)
    pend = m.emit(VECTOR, "tensor_tensor_scan", tiles, [out], 2 * a.size, {"op0": n0, "op1": n1}, loc)
    vals = None
    if m.numerics:
        x0 = _x.value_of(a, shape, None).reshape(p, -1)
        x1 = _x.value_of(b, shape, None).reshape(p, -1)
        prev = np.broadcast_to(_val(init, (p, 1)), (p, 1)).reshape(p).astype(np.float32)
        r = np.empty_like(x0)
        f0, f1 = ALU[n0], ALU[n1]
        with np.errstate(all="ignore"):
            for i in range(x0.shape[1]):
                t0 = f0(prev, x0[:, i]) if reverse0 else f0(x0[:, i], prev)
                prev = (f1(x1[:, i], t0) if reverse1 else f1(t0, x1[:, i])).astype(np.float32)
                r[:, i] = prev
        vals = r.reshape(shape)
    return _x.commit(m, pend, out, vals, _x.mask_array(mask, shape, api))


def tensor_scalar_cumulative(
    *,
    src: Tensor,
    dst: Tensor,
    op0: Any,
    op1: Any,
    imm0: Any,
    imm1: Any = None,
    reduce_cmd: Any = reduce_cmd.reset_reduce,
    mask: Any = None,
    **kwargs: Any,
) -> None:
    """Running scan along the free dim: ``reg = op1(op0(src[i], imm0), reg); dst[i] = reg`` (VectorE)."""
    api = "nisa.tensor_scalar_cumulative"
    m = _x.machine(api)
    loc = user_location()
    s = _x.tile(src, api, "src")
    d = _x.tile(dst, api, "dst")
    shape = _x.aligned_shape(s)
    p = shape[0]
    n0, n1 = _alu(op0, api), _alu(op1, api)
    i0 = _vector_operand(imm0, p, api, "imm0")
    m.check_read(s, loc)
    m.check_write(d, loc)
    m.emit(VECTOR, "tensor_scalar_cumulative", [s], [d], s.size, None, loc)
    if not m.numerics:
        d.mark_written()
        return
    acc = m.accumulators.setdefault("vector", np.full(128, -np.inf, np.float32))
    rc = int(reduce_cmd)
    if rc == 3:
        acc[:p] = _IDENT.get(n1, 0.0)
    elif rc == 4:
        acc[:p] = np.broadcast_to(_val(imm1, (p, 1)), (p, 1)).reshape(p)
    x = _x.value_of(s, shape, None).reshape(p, -1)
    a0 = np.broadcast_to(_val(i0, (p, 1)), (p, 1)).reshape(p)
    out = np.empty_like(x)
    with np.errstate(all="ignore"):
        for i in range(x.shape[1]):
            acc[:p] = ALU[n1](ALU[n0](x[:, i], a0), acc[:p])
            out[:, i] = acc[:p]
    d.write(_dt.round_to(out.reshape(d.shape), d.dtype))


def reciprocal(data: Tensor, *, dtype: Any = None, mask: Any = None, **kwargs: Any) -> Tensor:
    """Precise 1/x on the VectorE."""
    t = _x.tile(data, "nisa.reciprocal", "data")
    return _x.elementwise(
        "nisa.reciprocal",
        VECTOR,
        "reciprocal",
        lambda a: np.float32(1) / a,
        [t],
        dtype=dtype,
        default_dtype=t.dtype,
        mask=mask,
    )


def iota(expr: Any, dtype: Any, *, mask: Any = None, **kwargs: Any) -> Tensor:
    """Materialise an affine index expression of nl.arange as a tile (GpSimd, int32 arithmetic)."""
    api = "nisa.iota"
    m = _x.machine(api)
    loc = user_location()
    if isinstance(expr, IndexExpr):
        vals_i = expr.values()
        shape = tuple(expr.shape)
    elif isinstance(expr, (int, np.integer)):
        vals_i = np.array([[int(expr)]], dtype=np.int64)
        shape = (1, 1)
    else:
        raise KernelArgumentError(f"{api}: expr must be an nl.arange expression, got {type(expr).__name__}")
    if len(shape) == 1:
        shape = (shape[0], 1)
        vals_i = vals_i.reshape(shape)
    odt = _x.out_dtype(dtype, _dt.int32, api)
    out = _x.new_tile(m, shape, odt, "sbuf", loc)
    pend = m.emit(GPSIMD, "iota", [], [out], 0, None, loc)
    vals = None
    if m.numerics:
        v = vals_i.astype(np.int32)
        vals = v.astype(np.float32) if _dt.is_float(odt) else v
    return _x.commit(m, pend, out, vals, _x.mask_array(mask, shape, api))


def memset(
    shape: Any, value: Any, dtype: Any, *, mask: Any = None, engine: Any = engine.unknown, **kwargs: Any
) -> Tensor:
    """A new tile filled with ``value``."""
    from devkit.nki._buffers import parse_shape

    api = "nisa.memset"
    m = _x.machine(api)
    loc = user_location()
    shp, _ = parse_shape(shape, api)
    eng = _engine(engine, VECTOR, (VECTOR, GPSIMD, SCALAR), api)
    odt = _x.out_dtype(dtype, _dt.float32, api)
    out = _x.new_tile(m, shp, odt, "sbuf", loc)
    pend = m.emit(eng, "memset", [], [out], 0, {"value": value}, loc)
    vals = None
    if m.numerics:
        vals = np.full(shp, value, dtype=np.float32 if _dt.is_float(odt) else np.float64)
    return _x.commit(m, pend, out, vals, _x.mask_array(mask, shp, api))


def sequence_bounds(*, segment_ids: Tensor, dtype: Any = None, **kwargs: Any) -> Tensor:
    """Start and end index of each element's segment -> (1, 2, n) (GpSimd)."""
    api = "nisa.sequence_bounds"
    m = _x.machine(api)
    loc = user_location()
    t = _x.tile(segment_ids, api, "segment_ids")
    if t.shape[0] != 1:
        raise TileShapeError(f"{api}: segment_ids must have 1 partition, got {t.shape[0]}")
    n = t.free_size
    odt = _x.out_dtype(dtype, t.dtype, api)
    out = _x.new_tile(m, (1, 2, n), odt, "sbuf", loc)
    m.check_read(t, loc)
    pend = m.emit(GPSIMD, "sequence_bounds", [t], [out], 0, None, loc)
    vals = None
    if m.numerics:
        s = t.read().reshape(n)
        start = np.empty(n, np.float32)
        end = np.empty(n, np.float32)
        for i in range(n):
            start[i] = n if s[i] == 0 else (start[i - 1] if i > 0 and s[i] == s[i - 1] else i)
        for i in range(n - 1, -1, -1):
            end[i] = -1 if s[i] == 0 else (end[i + 1] if i < n - 1 and s[i] == s[i + 1] else i + 1)
        vals = np.stack([start, end])[None]
    return _x.commit(m, pend, out, vals, None)


def dropout(data: Tensor, prob: Any, *, mask: Any = None, dtype: Any = None, **kwargs: Any) -> Tensor:
    """Zero each element with probability ``prob`` (the drop probability), no rescaling (VectorE)."""
    api = "nisa.dropout"
    m = _x.machine(api)
    t = _x.tile(data, api, "data")
    shape = _x.aligned_shape(t)
    pr = _vector_operand(prob, shape[0], api, "prob")

    def f(x: np.ndarray, pv: Any) -> np.ndarray:
        keep = m.rng.random(x.shape, dtype=np.float32) >= pv
        return np.where(keep, x, np.float32(0))

    return _elementwise_vec(api, VECTOR, "dropout", f, [t, pr], shape, dtype, mask, False, {})
