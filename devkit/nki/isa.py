"""``neuronxcc.nki.isa`` (``nisa``) for the simulator: one function per NeuronCore instruction.

Semantics and limits follow the NKI Beta 1 ISA reference (see ``reference/nki_api.md`` §3 and the
project's API notes); each instruction returns a new tile (SBUF, or PSUM for TensorE results) which an
assignment ``t[...] = nisa.x(...)`` writes into ``t`` directly.
"""

from __future__ import annotations

import enum
from typing import Any

import numpy as np

from devkit import dtypes as _dt
from devkit.errors import (
    DtypeError,
    IndexingError,
    KernelArgumentError,
    MemoryPlacementError,
    PartitionMismatchError,
    TileShapeError,
    UnsupportedError,
    user_location,
)
from devkit.nki import _alu as _alu_tables
from devkit.nki import language as _nl
from devkit.nki._alu import (
    _IDENT,
    _REDUCE_FN,
    ACTIVATIONS,
    ALU,
    BITVEC,
    REDUCE_OK,
    _alu_name,
    _require_int,
)
from devkit.nki.language import fp32
from devkit.sim import instr as _x
from devkit.sim import placement as _placement
from devkit.sim.deferred import Product
from devkit.sim.index import IndexExpr, MaskExpr
from devkit.sim.storage import HBM_BUFFERS
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


# ---- ALU operators ---------------------------------------------------------------------------------------


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


# ---- TensorE -----------------------------------------------------------------------------------------------

_MM_DTYPES = {"float8_e4m3", "float8_e5m2", "float8_e4m3fn", "bfloat16", "float16", "tfloat32", "float32"}


def matmul_core(
    api: str,
    stationary: Any,
    moving: Any,
    *,
    mask: Any = None,
    opcode: str = "nc_matmul",
    perf_mode: Any = None,
    is_transpose: bool = False,
    onezero: tuple[bool, bool] = (False, False),
) -> Tensor:
    """``stationary.T @ moving`` on the TensorE into a new PSUM tile (fp32 accumulate)."""
    m = _x.machine(api)
    loc = user_location()
    stationary, moving = (
        _placement.matmul_operand(api, stationary, "stationary", moving),
        _placement.matmul_operand(api, moving, "moving", stationary),
    )
    st = _x.tile(stationary, api, "stationary", psum=False)
    mv = _x.tile(moving, api, "moving", psum=False)
    double_row = perf_mode is not None and str(perf_mode).startswith("double_row")
    if double_row:
        if m.geometry.nc_version < 3:
            raise UnsupportedError(
                f"{api}: perf_mode={perf_mode!r} is only supported on NeuronCore-v3 (trn2)",
                rule="double-row-arch",
            )
        if st.ndim != 3 or mv.ndim != 3 or st.shape[1] != 2 or mv.shape[1] != 2:
            raise TileShapeError(
                f"{api}: double-row operands must be [K, 2, M] and [K, 2, N], got "
                f"{list(st.shape)} and {list(mv.shape)}",
                rule="double-row-shape",
            )
        k, mm, n = st.shape[0] * 2, st.shape[2], mv.shape[2]
    else:
        k, mm, n = st.shape[0], st.free_size, mv.free_size
    for t, nm in ((st, "stationary"), (mv, "moving")):
        if _dt.name_of(t.dtype) not in _MM_DTYPES:
            raise DtypeError(
                f"{api}: {nm} dtype {_dt.name_of(t.dtype)} is not supported by the TensorE "
                f"(use one of {', '.join(sorted(_MM_DTYPES))})",
                rule="matmul-dtype",
            )
    f32 = {_dt.name_of(st.dtype) in ("float32", "tfloat32"), _dt.name_of(mv.dtype) in ("float32", "tfloat32")}
    if len(f32) == 2 and not is_transpose:
        raise DtypeError(
            f"{api}: fp32/tf32 operands can only be multiplied with fp32/tf32 operands, got "
            f"{_dt.name_of(st.dtype)} and {_dt.name_of(mv.dtype)}",
            rule="matmul-dtype",
        )
    if st.shape[0] != mv.shape[0]:
        raise TileShapeError(
            f"{api}: contraction (partition) dims differ: stationary {list(st.shape)} vs moving "
            f"{list(mv.shape)}",
            rule="matmul-contraction",
        )
    if mm > 128:
        raise TileShapeError(
            f"{api}: stationary free size {mm} exceeds gemm_stationary_fmax (128) "
            f"(stationary shape {list(st.shape)})",
            rule="matmul-stationary-size",
        )
    if n > 512:
        raise TileShapeError(
            f"{api}: moving free size {n} exceeds gemm_moving_fmax (512) (moving shape {list(mv.shape)})",
            rule="matmul-moving-size",
        )
    out = _x.new_tile(m, (mm, n), _dt.float32, "psum", loc)
    m.check_read(st, loc)
    m.check_read(mv, loc)
    dt_name = (
        "float32"
        if _dt.name_of(st.dtype) in ("float32",) and _dt.name_of(mv.dtype) in ("float32",)
        else _dt.name_of(mv.dtype)
    )
    attrs = {
        "stationary_free": mm,
        "moving_free": n,
        "contract": k,
        "accumulate": False,
        "dtype": dt_name,
        "is_stationary_onezero": onezero[0],
        "is_moving_onezero": onezero[1],
        "double_row": double_row,
        "transpose": is_transpose,
    }
    p = m.emit(TENSOR, opcode, [st, mv], [out], 2 * k * mm * n, attrs, loc)
    vals = None
    wmask = _x.mask_array(mask, (mm, n), api)
    if m.numerics:
        a = st.read(None)
        b = mv.read(None)
        if double_row:
            a = a.astype(np.float32)
            b = b.astype(np.float32)
            vals = np.einsum("kli,klj->ij", a, b, dtype=np.float32)
        else:
            a = a.reshape(st.shape[0], mm).astype(np.float32, copy=False)
            b = b.reshape(mv.shape[0], n).astype(np.float32, copy=False)
            if st.omask is None and mv.omask is None:
                # computed when needed (devkit.sim.deferred); the operands' writable memory is noted
                vals = Product(a, b, tuple(t.st.id for t in (st, mv) if t.st.lazy is None))
            else:
                a = a.copy()
                b = b.copy()
                rows = np.ones(mm, bool)
                cols = np.ones(n, bool)
                if st.omask is not None:
                    om = st.omask.reshape(st.shape[0], mm)
                    rows = om.any(axis=0)
                    a = np.where(om, a, 0)
                if mv.omask is not None:
                    om = mv.omask.reshape(mv.shape[0], n)
                    cols = om.any(axis=0)
                    b = np.where(om, b, 0)
                om_out = rows[:, None] & cols[None, :]
                wmask = om_out if wmask is None else (wmask & om_out)
                vals = a.T @ b
    elif st.omask is not None or mv.omask is not None:
        rows = st.omask.reshape(st.shape[0], mm).any(0) if st.omask is not None else np.ones(mm, bool)
        cols = mv.omask.reshape(mv.shape[0], n).any(0) if mv.omask is not None else np.ones(n, bool)
        om_out = rows[:, None] & cols[None, :]
        wmask = om_out if wmask is None else (wmask & om_out)
    return _x.commit(m, p, out, vals, wmask)


def nc_matmul(
    stationary: Tensor,
    moving: Tensor,
    *,
    is_stationary_onezero: bool = False,
    is_moving_onezero: bool = False,
    is_transpose: bool = False,
    tile_position: Any = (),
    tile_size: Any = (),
    mask: Any = None,
    perf_mode: Any = None,
    **kwargs: Any,
) -> Tensor:
    """``stationary.T @ moving`` -> PSUM [stationary free, moving free] in fp32."""
    if bool(tile_position) != bool(tile_size):
        raise KernelArgumentError(
            "nc_matmul tile_position and tile_size must be both set or not set", rule="pe-tiling"
        )
    if tile_size:
        for v in tuple(tile_size) + tuple(tile_position):
            if int(v) % 32:
                raise KernelArgumentError(
                    f"nc_matmul: tile_position/tile_size must be multiples of 32, got {v}", rule="pe-tiling"
                )
    return matmul_core(
        "nisa.nc_matmul",
        stationary,
        moving,
        mask=mask,
        perf_mode=perf_mode,
        is_transpose=is_transpose,
        onezero=(bool(is_stationary_onezero), bool(is_moving_onezero)),
    )


def nc_transpose(
    data: Tensor, *, mask: Any = None, dtype: Any = None, engine: Any = engine.unknown, **kwargs: Any
) -> Tensor:
    """2-D partition/free transpose (TensorE: <= 128x128, SBUF -> PSUM; VectorE: <= 32x32)."""
    api = "nisa.nc_transpose"
    m = _x.machine(api)
    loc = user_location()
    t = _x.tile(data, api, "data")
    p, f = t.shape[0], t.free_size
    eng = _engine(engine, VECTOR if (p <= 32 and f <= 32) else TENSOR, (TENSOR, VECTOR), api)
    if eng == TENSOR:
        if p > 128 or f > 128:
            raise TileShapeError(
                f"{api}: TensorE transpose input must be at most 128x128, got {list(t.shape)}",
                rule="transpose-size",
            )
        if t.st.buffer != "sbuf":
            raise MemoryPlacementError(f"{api}: TensorE transpose reads SBUF only")
        buf, default_dt = "psum", (t.dtype if m.geometry.nc_version >= 3 else _dt.float32)
    else:
        if p > 32 or f > 32:
            raise TileShapeError(
                f"{api}: VectorE transpose input must be at most 32x32, got {list(t.shape)}",
                rule="transpose-size",
            )
        buf, default_dt = "sbuf", t.dtype
    odt = _x.out_dtype(dtype, default_dt, api)
    out = _x.new_tile(m, (f, p), odt, buf, loc)
    m.check_read(t, loc)
    attrs = {"stationary_free": p, "moving_free": f, "contract": p} if eng == TENSOR else None
    pend = m.emit(eng, "nc_transpose", [t], [out], 0, attrs, loc)
    vals = (
        t.read().reshape(p, f).T.astype(np.float32)
        if m.numerics and _dt.is_float(t.dtype)
        else (t.read().reshape(p, f).T if m.numerics else None)
    )
    return _x.commit(m, pend, out, vals, _x.mask_array(mask, (f, p), api))


# ---- ScalarE -----------------------------------------------------------------------------------------------


def _activation_fn(op: Any, api: str) -> tuple[str, Any]:
    name = getattr(op, "_nki_activation", None)
    if name is None:
        name = getattr(op, "__name__", None) if not isinstance(op, str) else op
        name = {"expit": "sigmoid", "absolute": "abs", "copy": "copy", "identity": "copy"}.get(name, name)
    if name not in ACTIVATIONS:
        raise KernelArgumentError(
            f"{api}: {op!r} is not a ScalarE activation function "
            f"(supported: {', '.join(sorted(ACTIVATIONS))})",
            rule="bad-activation",
        )
    return name, ACTIVATIONS[name]


def activation(
    op: Any,
    data: Tensor,
    *,
    bias: Any = None,
    scale: Any = 1.0,
    reduce_op: Any = None,
    reduce_res: Any = None,
    reduce_cmd: Any = reduce_cmd.idle,
    mask: Any = None,
    dtype: Any = None,
    **kwargs: Any,
) -> Tensor:
    """``op(data * scale + bias)`` on the ScalarE, with optional accumulation into its registers."""
    return _activation(
        "nisa.activation", op, data, bias, scale, reduce_op, reduce_res, reduce_cmd, mask, dtype
    )


def activation_reduce(
    op: Any,
    data: Tensor,
    *,
    reduce_op: Any,
    reduce_res: Tensor,
    bias: Any = None,
    scale: Any = 1.0,
    mask: Any = None,
    dtype: Any = None,
    **kwargs: Any,
) -> Tensor:
    """``activation`` that also writes the free-axis reduction of its result into ``reduce_res``."""
    if reduce_res is None:
        raise KernelArgumentError("nisa.activation_reduce: reduce_res is required")
    return _activation(
        "nisa.activation_reduce",
        op,
        data,
        bias,
        scale,
        reduce_op,
        reduce_res,
        reduce_cmd.reset_reduce,
        mask,
        dtype,
    )


def _activation(
    api: str,
    op: Any,
    data: Any,
    bias: Any,
    scale: Any,
    reduce_op: Any,
    reduce_res: Any,
    rcmd: Any,
    mask: Any,
    dtype: Any,
) -> Tensor:
    m = _x.machine(api)
    loc = user_location()
    name, fn = _activation_fn(op, api)
    t = _x.tile(data, api, "data")
    shape = _x.aligned_shape(t)
    p = shape[0]
    if bias is not None:
        bias = _vector_operand(bias, p, api, "bias")
        if isinstance(bias, Tensor) and _dt.name_of(bias.dtype) not in ("float32", "float16", "bfloat16"):
            raise DtypeError(
                f"{api}: bias must be a float32/float16/bfloat16 (P, 1) tile, got {_dt.name_of(bias.dtype)}",
                rule="activation-bias-dtype",
            )
        if name == "reciprocal" and m.geometry.nc_version < 3:
            raise KernelArgumentError(
                f"{api}: reciprocal must have bias=None on trn1/inf2", rule="activation-bias"
            )
    if isinstance(scale, Tensor):
        scale = _vector_operand(scale, p, api, "scale")
        if _dt.name_of(scale.dtype) != "float32":
            raise DtypeError(
                f"{api}: a scale tile must be float32, got {_dt.name_of(scale.dtype)}",
                rule="activation-scale-dtype",
            )
    elif not isinstance(scale, _x.Scalar):
        raise KernelArgumentError(f"{api}: scale must be a scalar or a (P, 1) float32 tile")
    rname = None
    rc = reduce_cmd(int(rcmd)) if rcmd is not None else reduce_cmd.idle
    if rc == reduce_cmd.load_reduce:
        raise KernelArgumentError(f"{api}: reduce_cmd=load_reduce is not supported by activation")
    if reduce_op is not None or reduce_res is not None or rc in (reduce_cmd.reduce, reduce_cmd.reset_reduce):
        rname = _alu(reduce_op if reduce_op is not None else "add", api)
        if m.geometry.nc_version < 3 and rname != "add":
            raise KernelArgumentError(
                f"{api}: only add is a legal reduce_op on trn1/inf2", rule="activation-reduce-op"
            )
    if reduce_res is not None:
        rr = _x.tile(reduce_res, api, "reduce_res")
        if rr.shape[0] != p or rr.free_size != 1:
            raise TileShapeError(f"{api}: reduce_res must be ({p}, 1), got {list(rr.shape)}")
    odt = _x.out_dtype(dtype, t.dtype, api)
    marr = _x.mask_array(mask, shape, api)
    out = _x.new_tile(m, shape, odt, "sbuf", loc)
    ins = [t] + [v for v in (bias, scale) if isinstance(v, Tensor)]
    for v in ins:
        m.check_read(v, loc)
    if reduce_res is not None:
        m.check_write(reduce_res, loc)
    size = t.size
    pend = m.emit(
        SCALAR,
        "activation",
        ins,
        [out] + ([reduce_res] if reduce_res is not None else []),
        2 * size,
        {"func": name, "reduce": rname is not None},
        loc,
    )
    vals = None
    if m.numerics:
        x = _x.value_of(t, shape, marr)
        with np.errstate(all="ignore"):  # inf/NaN inputs give IEEE results, not NumPy warnings
            z = x * _val(scale, shape)
            if bias is not None:
                z = z + _val(bias, shape)
            vals = np.asarray(fn(z.astype(np.float32)), dtype=np.float32)
        acc = m.accumulators.setdefault("scalar", np.zeros(128, np.float32))
        if rc in (reduce_cmd.reset, reduce_cmd.reset_reduce):
            acc[:] = _IDENT.get(rname or "add", 0.0)
        if rname is not None and rc in (reduce_cmd.reduce, reduce_cmd.reset_reduce):
            v = vals if marr is None else np.where(marr, vals, _IDENT.get(rname, 0.0))
            red = _reduce_values(rname, v.reshape(p, -1), (1,), False)
            acc[:p] = ALU[rname](acc[:p], red)
        if reduce_res is not None:
            reduce_res.write(
                _dt.round_to(
                    acc[:p].reshape(reduce_res.shape) if reduce_res.ndim else acc[:p], reduce_res.dtype
                )
            )
    elif reduce_res is not None:
        reduce_res.mark_written()
    return _x.commit(m, pend, out, vals, marr)


# ---- VectorE / GpSimd element-wise ---------------------------------------------------------------------


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


def _elementwise_vec(
    api: str,
    eng: str,
    opcode: str,
    fn: Any,
    operands: list[Any],
    shape: tuple[int, ...],
    dtype: Any,
    mask: Any,
    bit: bool,
    attrs: dict,
    default_dtype: Any = None,
) -> Tensor:
    """Element-wise op whose extra operands are scalars or (P, 1) vectors broadcast along free dims."""
    m = _x.machine(api)
    loc = user_location()
    t = operands[0]
    odt = _x.out_dtype(dtype, default_dtype if default_dtype is not None else t.dtype, api)
    marr = _x.mask_array(mask, shape, api)
    out = _x.new_tile(m, shape, odt, "sbuf", loc)
    tiles = [o for o in operands if isinstance(o, Tensor)]
    for o in tiles:
        m.check_read(o, loc)
    pend = m.emit(eng, opcode, tiles, [out], t.size, attrs, loc)
    vals = None
    if m.numerics:
        x = _x.value_of(t, shape, marr, to_float=not bit)
        ops = [_val(o, shape, to_float=not bit) for o in operands[1:]]
        with np.errstate(all="ignore"):
            vals = np.asarray(fn(x, *ops))
        if not bit:
            vals = vals.astype(np.float32, copy=False)
    return _x.commit(m, pend, out, vals, marr)


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
    tiles = [v for v in (t, o0, o1) if isinstance(v, Tensor)]
    for v in tiles:
        m.check_read(v, loc)
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
    tiles = [v for v in (a, b, init) if isinstance(v, Tensor)]
    for v in tiles:
        m.check_read(v, loc)
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
        api, eng, "tensor_copy", lambda a: a, [t], dtype=dtype, default_dtype=t.dtype, mask=mask, bitwise=bit
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
    ins = [v for v in (s, pr, d) if isinstance(v, Tensor)]
    for v in ins:
        m.check_read(v, loc)
    m.check_write(d, loc)
    m.emit(VECTOR, "tensor_copy_predicated", ins, [d], 0, None, loc)
    if m.numerics:
        pv = np.broadcast_to(pr.read().reshape(_x.aligned_shape(pr)), shape) != 0
        if reverse_pred:
            pv = ~pv
        if marr is not None:
            pv = pv & marr
        new = np.broadcast_to(_val(s, shape, to_float=_dt.is_float(d.dtype)), shape)
        old = d.read()
        d.write(_dt.round_to(np.where(pv, new, old), d.dtype))
    else:
        d.mark_written()


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
    tiles = [v for v in (t, b0, b1) if isinstance(v, Tensor)]
    for v in tiles:
        m.check_read(v, loc)
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
    ins = [v for v in (pr, ot, of) if isinstance(v, Tensor)]
    for v in ins:
        m.check_read(v, loc)
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
        pv = np.broadcast_to(pr.read().reshape(_x.aligned_shape(pr)), shape) != 0
        if reverse_pred:
            pv = ~pv
        marr = _x.mask_array(mask, shape, api)  # masked-off elements are neither written nor reduced
        v = np.where(pv, _x.value_of(ot, shape, marr), _val(of, shape)).astype(np.float32)
        d.write(_dt.round_to(v, d.dtype), marr)
        red_in = v if marr is None else np.where(marr, v, _IDENT.get(rname, -np.inf))
        _vector_accumulate(m, reduce_cmd, rname, red_in, reduce_res, p)
    else:
        d.mark_written()
        if reduce_res is not None:
            reduce_res.mark_written()


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


# ---- reductions and statistics -------------------------------------------------------------------------


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

    res = _nl.reduce(api, t, axis, fn, dtype=dtype, mask=mask, keepdims=keepdims, opname=name)
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
    rr = _x.tile(reduce_res, api, "reduce_res")
    odt = _x.out_dtype(dtype, t.dtype, api)
    marr = _x.mask_array(mask, shape, api)
    out = _x.new_tile(m, shape, odt, "sbuf", loc)
    ins = [v for v in (t, o0) if isinstance(v, Tensor)]
    for v in ins:
        m.check_read(v, loc)
    m.check_write(rr, loc)
    pend = m.emit(
        VECTOR, "tensor_scalar_reduce", ins, [out, rr], 2 * t.size, {"op0": n0, "reduce": rname}, loc
    )
    vals = None
    if m.numerics:
        x = _x.value_of(t, shape, marr)
        with np.errstate(all="ignore"):
            vals = np.asarray(
                ALU[n0](_val(o0, shape), x) if reverse0 else ALU[n0](x, _val(o0, shape)), dtype=np.float32
            )
        v = vals if marr is None else np.where(marr, vals, _IDENT.get(rname, 0.0))
        red = _reduce_values(rname, v.reshape(p, -1), (1,), False)
        rr.write(_dt.round_to(red.reshape(_x.aligned_shape(rr)).reshape(rr.shape), rr.dtype))
    else:
        rr.mark_written()
    return _x.commit(m, pend, out, vals, marr)


def bn_stats(data: Tensor, *, mask: Any = None, dtype: Any = None, **kwargs: Any) -> Tensor:
    """Per partition [count, mean, M2] of the even and of the odd free elements -> (P, 6) (VectorE)."""
    api = "nisa.bn_stats"
    m = _x.machine(api)
    loc = user_location()
    t = _x.tile(data, api, "data")
    shape = _x.aligned_shape(t)
    p, f = shape[0], int(np.prod(shape[1:]))
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
    shape = _x.aligned_shape(t)
    p, f = shape[0], int(np.prod(shape[1:]))
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
    shape = _x.aligned_shape(t)
    p, f = shape[0], int(np.prod(shape[1:]))
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
    shape = _x.aligned_shape(d)
    p, f = shape[0], int(np.prod(shape[1:]))
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
    sv = s.read()
    dv = d.read(check_init=False).copy()
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
    d.write(
        _dt.round_to(dv.astype(np.float32) if _dt.is_float(d.dtype) else dv, d.dtype),
        _x.mask_array(mask, d.shape, api),
    )  # the mask applies to dst


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


# ---- DMA ---------------------------------------------------------------------------------------------------


def dma_copy(
    *,
    dst: Tensor,
    src: Tensor,
    mask: Any = None,
    dst_rmw_op: Any = None,
    oob_mode: Any = oob_mode.error,
    dge_mode: Any = dge_mode.unknown,
    **kwargs: Any,
) -> None:
    """Copy ``src`` to ``dst`` through a DMA queue (HBM/SBUF either side); cast via fp32."""
    api = "nisa.dma_copy"
    m = _x.machine(api)
    loc = user_location()
    for t, nm in ((dst, "dst"), (src, "src")):
        if not isinstance(t, Tensor):
            raise KernelArgumentError(f"{api}: {nm} must be a tensor, got {type(t).__name__}")
        t.check_alive()
        if t.st.buffer == "psum":
            raise MemoryPlacementError(f"{api}: DMA cannot access PSUM ({nm})", rule="dma-psum")
    if int(dge_mode) == 2 and m.geometry.nc_version < 3:
        raise UnsupportedError(f"{api}: dge_mode=hwdge needs NeuronCore-v3 (trn2) or newer", rule="arch")
    rmw = None
    if dst_rmw_op is not None:
        rmw = _alu(dst_rmw_op, api)
        if rmw != "add":
            raise KernelArgumentError(f"{api}: dst_rmw_op supports only np.add")
        if int(oob_mode) != 0:
            raise KernelArgumentError(f"{api}: dst_rmw_op requires oob_mode=error")
    if src.size != dst.size:
        raise TileShapeError(
            f"{api}: src {list(src.shape)} and dst {list(dst.shape)} must have the same number of elements",
            rule="shape-mismatch",
        )
    skip = int(oob_mode) == 1
    marr = _x.mask_array(mask, dst.shape, api)
    if not skip:
        src.check_bounds(None if marr is None else marr.reshape(src.shape), "dma_copy source")
        dst.check_bounds(marr, "dma_copy destination")
    m.check_read(src, loc)
    m.check_write(dst, loc, accumulate=rmw is not None)
    m.emit(
        DMA,
        "dma_copy",
        [src],
        [dst],
        0,
        {"indirect": src.dims is None or dst.dims is None, "rmw": rmw is not None},
        loc,
    )
    if not m.numerics:
        dst.mark_written()
        return
    sel = np.ones(dst.shape, bool) if marr is None else marr.copy()
    if skip:
        sb = src.oob_positions()
        db = dst.oob_positions()
        if sb is not None:
            sel &= ~sb.reshape(dst.shape) if sb.size == sel.size else True
        if db is not None:
            sel &= ~db
    v = src.read(None if marr is None and not skip else sel.reshape(src.shape))
    v = v.reshape(dst.shape)
    v = v.astype(np.float32) if _dt.is_float(src.dtype) else v
    if rmw is not None:
        key = dst._fancy_key(dst._index_arrays(), sel)
        data = dst.st.data
        acc = data.astype(np.float32) if _dt.is_float(dst.dtype) else data.astype(np.int64)
        np.add.at(acc, key, v[sel])
        data[...] = _dt.round_to(acc, dst.dtype)
        dst.st.written = True
        return
    dst.write(_dt.round_to(v, dst.dtype), sel)


def dma_transpose(
    src: Tensor, *, axes: Any = None, mask: Any = None, dtype: Any = None, **kwargs: Any
) -> Tensor:
    """Transpose through the DMA (2-D [1,0], 3-D [2,1,0], 4-D [3,1,2,0]) into a new SBUF tile."""
    api = "nisa.dma_transpose"
    m = _x.machine(api)
    loc = user_location()
    if not isinstance(src, Tensor):
        raise KernelArgumentError(f"{api}: src must be a tensor")
    src.check_alive()
    nd = src.ndim
    default = {2: (1, 0), 3: (2, 1, 0), 4: (3, 1, 2, 0)}
    if nd not in default:
        raise TileShapeError(f"{api}: src must be 2-D, 3-D or 4-D, got {list(src.shape)}")
    ax = tuple(axes) if axes is not None else default[nd]
    if ax != default[nd]:
        raise KernelArgumentError(f"{api}: axes must be {default[nd]} for a {nd}-D source, got {ax}")
    out_shape = tuple(src.shape[a] for a in ax)
    if out_shape[0] > 128:
        raise TileShapeError(
            f"{api}: the result would have {out_shape[0]} partitions", rule="partition-limit"
        )
    odt = _x.out_dtype(dtype, src.dtype, api)
    marr = _x.mask_array(mask, out_shape, api)
    src.check_bounds(None if marr is None else marr.transpose(np.argsort(ax)), "dma_transpose source")
    out = _x.new_tile(m, out_shape, odt, "sbuf", loc)
    m.check_read(src, loc)
    pend = m.emit(DMA, "dma_transpose", [src], [out], 0, {"transpose": True}, loc)
    vals = None
    if m.numerics:
        v = src.read(None if marr is None else marr.transpose(np.argsort(ax))).transpose(ax)
        vals = v.astype(np.float32) if _dt.is_float(odt) else v
    return _x.commit(m, pend, out, vals, marr)


def builtin_custom_op(*args: Any, **kwargs: Any) -> Any:
    raise UnsupportedError(
        "nisa.builtin_custom_op runs custom device code and cannot be simulated", rule="unsupported-api"
    )


class constants:
    engine = engine
    oob_mode = oob_mode
    dge_mode = dge_mode
    reduce_cmd = reduce_cmd
    nc_version = nc_version


_ = (HBM_BUFFERS,)
