"""Element-wise arithmetic of ``nki.isa`` on VectorE / GpSimd: tensor-tensor and tensor-scalar
operators, scans, reciprocal, dropout, and the instructions that generate values (``iota``, ``memset``,
``sequence_bounds``).

Declarations of the instruction layer (:mod:`devkit.nki._isa_layer`); :mod:`devkit.nki.isa` generates the
public functions."""

from __future__ import annotations

from typing import Any

import numpy as np

from devkit import dtypes as _dt
from devkit.errors import (
    KernelArgumentError,
    MemoryPlacementError,
    TileShapeError,
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
    _engine,
    _same_partitions,
    _val,
    _vector_operand,
    broadcast_step,
    engine,
    reduce_cmd,
    vector_step,
)
from devkit.nki._isa_layer import Instruction, Step, elementwise
from devkit.sim import dataflow as _flow
from devkit.sim import instr as _x
from devkit.sim.index import IndexExpr
from devkit.sim.tensor import Tensor
from devkit.trace import GPSIMD, SCALAR, VECTOR


def _tensor_tensor(
    s: Step,
    data1: Tensor,
    data2: Tensor,
    op: Any,
    *,
    dtype: Any = None,
    mask: Any = None,
    engine: Any = engine.unknown,
    **kwargs: Any,
) -> None:
    """``data1 op data2`` element-wise (VectorE; GpSimd for power / integer arithmetic)."""
    api = s.api
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
    s.engine = eng = _engine(engine, default, (VECTOR, GPSIMD, SCALAR), api)
    if eng == GPSIMD and in_psum:
        raise MemoryPlacementError(f"{api}: the GpSimd engine cannot access PSUM", rule="gpsimd-psum")
    bit = name in BITVEC
    if bit:
        _require_int(api, a, b)
    native = native and eng == GPSIMD  # engine=vector explicitly: fp32 arithmetic, as documented
    fn = _alu_tables.int32_op(name, odt) if native else ALU[name]
    broadcast_step(s, fn, [a, b], odt, mask, bit or native, {"op": name})


def _tensor_scalar(
    s: Step,
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
) -> None:
    """``(data op0 operand0) op1 operand1`` with scalar or (P, 1) operands."""
    api = s.api
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
    s.engine = _engine(engine, VECTOR, (VECTOR, SCALAR, GPSIMD), api)
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
    vector_step(s, f, operands, _x.aligned_shape(t), dtype, mask, bit, {"op0": n0, "op1": n1})


def _scalar_tensor_tensor(
    s: Step,
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
) -> None:
    """``(data op0 operand0) op1 operand1`` with operand0 scalar/(P,1) and operand1 a full tile (VectorE)."""
    api = s.api
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

    odt = _dt.promote(t.dtype, o1.dtype)
    vector_step(s, f, [t, o0, o1], shape, dtype, mask, False, {"op0": n0, "op1": n1}, default_dtype=odt)
    s.flops = 2 * t.size


def _tensor_tensor_scan(
    s: Step,
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
) -> None:
    """Per partition: ``r[i] = op1(op0(data0[i], r[i-1]), data1[i])`` with ``r[-1] = initial``."""
    api = s.api
    a = _x.tile(data0, api, "data0")
    b = _x.tile(data1, api, "data1")
    if _x.aligned_shape(a) != _x.aligned_shape(b):
        raise TileShapeError(
            f"{api}: data0 {list(a.shape)} and data1 {list(b.shape)} must have the same shape"
        )
    if a.st.buffer == "psum" and b.st.buffer == "psum":
        raise MemoryPlacementError(f"{api}: data0 and data1 cannot both be in PSUM", rule="both-psum")
    shape = _x.aligned_shape(a)
    init = _vector_operand(initial, shape[0], api, "initial")
    n0, n1 = _alu(op0, api), _alu(op1, api)
    s.dtype = _x.out_dtype(dtype, _dt.promote(a.dtype, b.dtype), api)
    s.shape = shape
    s.reads = [a, b, init]
    s.flops = 2 * a.size
    s.attrs = {"op0": n0, "op1": n1}
    s.mask = _x.mask_array(mask, shape, api)
    s.args = (reverse0, reverse1)


def _scan_values(s: Step) -> np.ndarray:
    a, b, init = s.reads
    reverse0, reverse1 = s.args
    shape = s.shape
    p = shape[0]
    x0 = _x.value_of(a, shape, None).reshape(p, -1)
    x1 = _x.value_of(b, shape, None).reshape(p, -1)
    prev = np.broadcast_to(_val(init, (p, 1)), (p, 1)).reshape(p).astype(np.float32)
    r = np.empty_like(x0)
    f0, f1 = ALU[s.attrs["op0"]], ALU[s.attrs["op1"]]
    with np.errstate(all="ignore"):
        for i in range(x0.shape[1]):
            t0 = f0(prev, x0[:, i]) if reverse0 else f0(x0[:, i], prev)
            prev = (f1(x1[:, i], t0) if reverse1 else f1(t0, x1[:, i])).astype(np.float32)
            r[:, i] = prev
    return r.reshape(shape)


def _tensor_scalar_cumulative(
    s: Step,
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
    api = s.api
    t = _x.tile(src, api, "src")
    d = _x.tile(dst, api, "dst")
    shape = _x.aligned_shape(t)
    n0, n1 = _alu(op0, api), _alu(op1, api)
    i0 = _vector_operand(imm0, shape[0], api, "imm0")
    s.reads = [t]
    s.dst = d
    s.shape = shape
    s.flops = t.size
    s.args = (n0, n1, i0, imm1, reduce_cmd)


def _cumulative_values(s: Step) -> np.ndarray:
    (t,) = s.reads
    n0, n1, i0, imm1, rcmd = s.args
    shape = s.shape
    p = shape[0]
    acc = s.m.accumulators.setdefault("vector", np.full(128, -np.inf, np.float32))
    rc = int(rcmd)
    if rc == 3:
        acc[:p] = _IDENT.get(n1, 0.0)
    elif rc == 4:
        acc[:p] = np.broadcast_to(_val(imm1, (p, 1)), (p, 1)).reshape(p)
    x = _x.value_of(t, shape, None).reshape(p, -1)
    a0 = np.broadcast_to(_val(i0, (p, 1)), (p, 1)).reshape(p)
    out = np.empty_like(x)
    with np.errstate(all="ignore"):
        for i in range(x.shape[1]):
            acc[:p] = ALU[n1](ALU[n0](x[:, i], a0), acc[:p])
            out[:, i] = acc[:p]
    return out.reshape(s.dst.shape)  # type: ignore[union-attr]


def _reciprocal_of(a: np.ndarray) -> np.ndarray:
    return np.float32(1) / a


def _reciprocal(s: Step, data: Tensor, *, dtype: Any = None, mask: Any = None, **kwargs: Any) -> None:
    """Precise 1/x on the VectorE."""
    t = _x.tile(data, s.api, "data")
    broadcast_step(s, _reciprocal_of, [t], dtype, mask, False, None)


def _iota(s: Step, expr: Any, dtype: Any, *, mask: Any = None, **kwargs: Any) -> None:
    """Materialise an affine index expression of nl.arange as a tile (GpSimd, int32 arithmetic)."""
    api = s.api
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
    s.dtype = _x.out_dtype(dtype, _dt.int32, api)
    s.shape = shape
    s.mask = _x.mask_array(mask, shape, api)
    s.args = vals_i


def _iota_values(s: Step) -> np.ndarray:
    v = s.args.astype(np.int32)
    return v.astype(np.float32) if _dt.is_float(s.dtype) else v


def _memset(
    s: Step,
    shape: Any,
    value: Any,
    dtype: Any,
    *,
    mask: Any = None,
    engine: Any = engine.unknown,
    **kwargs: Any,
) -> None:
    """A new tile filled with ``value``."""
    from devkit.nki._buffers import parse_shape

    api = s.api
    shp, _ = parse_shape(shape, api)
    s.engine = _engine(engine, VECTOR, (VECTOR, GPSIMD, SCALAR), api)
    s.dtype = _x.out_dtype(dtype, _dt.float32, api)
    s.shape = shp
    s.attrs = {"value": value}
    s.mask = _x.mask_array(mask, shp, api)


def _memset_values(s: Step) -> np.ndarray:
    return np.full(s.shape, s.attrs["value"], dtype=np.float32 if _dt.is_float(s.dtype) else np.float64)  # type: ignore[index]


def _sequence_bounds(s: Step, *, segment_ids: Tensor, dtype: Any = None, **kwargs: Any) -> None:
    """Start and end index of each element's segment -> (1, 2, n) (GpSimd)."""
    api = s.api
    t = _x.tile(segment_ids, api, "segment_ids")
    if t.shape[0] != 1:
        raise TileShapeError(f"{api}: segment_ids must have 1 partition, got {t.shape[0]}")
    s.dtype = _x.out_dtype(dtype, t.dtype, api)
    s.shape = (1, 2, t.free_size)
    s.reads = [t]


def _sequence_bounds_values(s: Step) -> np.ndarray:
    (t,) = s.reads
    n = t.free_size
    seg = t.read().reshape(n)
    start = np.empty(n, np.float32)
    end = np.empty(n, np.float32)
    for i in range(n):
        start[i] = n if seg[i] == 0 else (start[i - 1] if i > 0 and seg[i] == seg[i - 1] else i)
    for i in range(n - 1, -1, -1):
        end[i] = -1 if seg[i] == 0 else (end[i + 1] if i < n - 1 and seg[i] == seg[i + 1] else i + 1)
    return np.stack([start, end])[None]


def _dropout(s: Step, data: Tensor, prob: Any, *, mask: Any = None, dtype: Any = None, **kwargs: Any) -> None:
    """Zero each element with probability ``prob`` (the drop probability), no rescaling (VectorE)."""
    api = s.api
    rng = s.m.rng
    t = _x.tile(data, api, "data")
    shape = _x.aligned_shape(t)
    pr = _vector_operand(prob, shape[0], api, "prob")

    def f(x: np.ndarray, pv: Any) -> np.ndarray:
        keep = rng.random(x.shape, dtype=np.float32) >= pv
        return np.where(keep, x, np.float32(0))

    vector_step(s, f, [t, pr], shape, dtype, mask, False, {})


# ---- the declarations ---------------------------------------------------------------------------------------

TENSOR_TENSOR = Instruction(
    "tensor_tensor", VECTOR, "tensor_tensor", _tensor_tensor, elementwise, dataflow=_flow.elementwise
)
TENSOR_SCALAR = Instruction(
    "tensor_scalar", VECTOR, "tensor_scalar", _tensor_scalar, elementwise, dataflow=_flow.elementwise
)
SCALAR_TENSOR_TENSOR = Instruction(
    "scalar_tensor_tensor", VECTOR, "scalar_tensor_tensor", _scalar_tensor_tensor, elementwise,
    dataflow=_flow.elementwise,
)  # fmt: skip
TENSOR_TENSOR_SCAN = Instruction(
    "tensor_tensor_scan", VECTOR, "tensor_tensor_scan", _tensor_tensor_scan, _scan_values, dataflow=_flow.scan
)
TENSOR_SCALAR_CUMULATIVE = Instruction(
    "tensor_scalar_cumulative", VECTOR, "tensor_scalar_cumulative", _tensor_scalar_cumulative,
    _cumulative_values, writes_dst=True, dataflow=_flow.cumulative,
)  # fmt: skip
RECIPROCAL = Instruction(
    "reciprocal", VECTOR, "reciprocal", _reciprocal, elementwise, dataflow=_flow.elementwise
)
IOTA = Instruction("iota", GPSIMD, "iota", _iota, _iota_values)
MEMSET = Instruction("memset", VECTOR, "memset", _memset, _memset_values)
SEQUENCE_BOUNDS = Instruction(
    "sequence_bounds",
    GPSIMD,
    "sequence_bounds",
    _sequence_bounds,
    _sequence_bounds_values,
    dataflow=_flow.rows,
)
DROPOUT = Instruction("dropout", VECTOR, "dropout", _dropout, elementwise, dataflow=_flow.elementwise)

#: the family's public Beta-1 instructions (:mod:`devkit.nki.isa` generates their functions)
INSTRUCTIONS = (
    TENSOR_TENSOR,
    TENSOR_SCALAR,
    SCALAR_TENSOR_TENSOR,
    TENSOR_TENSOR_SCAN,
    TENSOR_SCALAR_CUMULATIVE,
    RECIPROCAL,
    IOTA,
    MEMSET,
    SEQUENCE_BOUNDS,
    DROPOUT,
)
