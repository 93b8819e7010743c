"""``neuronxcc.nki.language`` (``nl``) for the simulator: NKI Beta 1 semantics on NumPy.

Each function validates its arguments, then calls the executors of :mod:`devkit.sim.instr`.  The
engine each call lowers to (for the cost model) follows the NKI documentation: transcendental and
activation functions run on ScalarE (``activation``), binary arithmetic on VectorE (``tensor_tensor``
/ ``tensor_scalar``), reductions on VectorE, matmul on TensorE, loads and stores on the DMA queues.
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from devkit import dtypes as _dt
from devkit.errors import (
    DtypeError,
    IndexingError,
    KernelArgumentError,
    MemoryPlacementError,
    TileShapeError,
    UnsupportedError,
    user_location,
)
from devkit.nki import _buffers, _isa_common, _isa_matmul, _isa_nl, _isa_vector
from devkit.nki import _isa_layer as _layer
from devkit.nki._alu import ACTIVATIONS, _alu_name  # noqa: F401  (nl.ACTIVATIONS: the shared table)
from devkit.nki._buffers import hbm, par_dim, private_hbm, psum, sbuf, shared_hbm  # noqa: F401
from devkit.nki._isa_reduce import reduce
from devkit.nki._limits import bfp16, fp32  # noqa: F401
from devkit.nki._tilesize import tile_size  # noqa: F401
from devkit.sim import instr as _x
from devkit.sim import unwritten as _unwritten
from devkit.sim.index import GridIndex, IndexExpr, MaskExpr, arange, ds, mgrid  # noqa: F401
from devkit.sim.storage import HBM_BUFFERS
from devkit.sim.tensor import Tensor
from devkit.trace import DMA, GPSIMD, TENSOR, VECTOR

# ---- dtypes ------------------------------------------------------------------------------------------
bool_ = _dt.bool_
int8, int16, int32 = _dt.int8, _dt.int16, _dt.int32
uint8, uint16, uint32 = _dt.uint8, _dt.uint16, _dt.uint32
float16, float32, bfloat16 = _dt.float16, _dt.float32, _dt.bfloat16
float8_e4m3, float8_e5m2, float8_e4m3fn = _dt.float8_e4m3, _dt.float8_e5m2, _dt.float8_e4m3fn
tfloat32 = _dt.tfloat32


def finfo(dtype: Any) -> Any:
    import ml_dtypes

    return ml_dtypes.finfo(_dt.as_dtype(dtype)) if _dt.is_float(dtype) else np.iinfo(_dt.as_dtype(dtype))


def static_cast(input_data: ArrayLike, dtype: Any) -> np.ndarray:
    """Host-side cast of a NumPy array (or scalar) to an NKI dtype (round to nearest even)."""
    d = _dt.as_dtype(dtype)
    a = np.asarray(input_data)
    if _dt.is_float(d):
        return _dt.to_external(_dt.round_to(a.astype(np.float32), d), d)
    return _dt.to_external(_dt.round_to(a, d), d)


# ---- loops and SPMD ----------------------------------------------------------------------------------


def _range_args(api: str, args: tuple) -> range:
    for a in args:
        if not isinstance(a, (int, np.integer)):
            raise KernelArgumentError(f"{api} bounds must be integers known at trace time, got {a!r}")
    return range(*[int(a) for a in args])


def affine_range(*args: int, **kwargs: Any) -> Any:
    """Parallel loop: iterations must not depend on each other (checked by the simulator)."""
    m = _x.current()
    r = _range_args("affine_range", args)
    return m.iterate("affine", r, sys._getframe(1)) if m is not None else iter(r)


def sequential_range(*args: int, **kwargs: Any) -> Any:
    """Ordered loop: iterations may depend on earlier ones."""
    m = _x.current()
    r = _range_args("sequential_range", args)
    return m.iterate("sequential", r, sys._getframe(1)) if m is not None else iter(r)


def static_range(*args: int, **kwargs: Any) -> Any:
    """Fully unrolled loop."""
    m = _x.current()
    r = _range_args("static_range", args)
    return m.iterate("static", r, sys._getframe(1)) if m is not None else iter(r)


def program_id(axis: int) -> int:
    m = _x.machine("nl.program_id")
    if not isinstance(axis, (int, np.integer)) or axis < 0 or axis >= len(m.grid):
        if not m.grid and axis == 0:
            return 0
        raise IndexingError(
            f"nl.program_id({axis!r}): the launch grid has {len(m.grid)} dimension(s)", rule="program-id-axis"
        )
    return m.program_ids[axis]


def num_programs(axes: Any = None) -> int:
    m = _x.machine("nl.num_programs")
    grid = m.grid or (1,)
    if axes is None:
        return int(np.prod(grid))
    if isinstance(axes, (int, np.integer)):
        if axes >= len(grid):
            raise IndexingError(f"nl.num_programs({axes}): the launch grid has {len(grid)} dimension(s)")
        return grid[axes]
    return int(np.prod([grid[a] for a in axes]))


def program_ndim() -> int:
    m = _x.machine("nl.program_ndim")
    return len(m.grid)


class nc:
    """``nl.nc(n)``: a launch-grid dimension spread over ``n`` physical NeuronCores (trn2)."""

    def __init__(self, n: int) -> None:
        self.n = int(n)

    def __mul__(self, k: int) -> spmd_dim:
        return spmd_dim(self, k)

    def __rmul__(self, k: int) -> spmd_dim:
        return spmd_dim(k, self)

    def __int__(self) -> int:
        return self.n

    __index__ = __int__


class spmd_dim:
    """``nl.spmd_dim(a, b)``: a grid dimension of size a*b (one factor may be ``nl.nc(n)``)."""

    def __init__(self, *factors: Any) -> None:
        self.factors = factors
        self.n = int(np.prod([int(f) for f in factors]))

    def __int__(self) -> int:
        return self.n

    __index__ = __int__


def device_print(prefix: str, x: Any = None, *, mask: Any = None, **kwargs: Any) -> None:
    """Print a tile's values (simulation only)."""
    m = _x.machine("nl.device_print")
    if x is None:
        x = kwargs.get("x")
    if not m.numerics:
        return
    if isinstance(x, Tensor):
        print(prefix, _dt.to_external(x.read(check_init=False), x.dtype))
    else:
        print(prefix, x)


# ---- creation ------------------------------------------------------------------------------------------


def _alloc(api: str, shape: Any, dtype: Any, buffer: Any, name: str, fill: Any) -> Tensor:
    m = _x.machine(api)
    loc = user_location()
    buf = _buffers.resolve(buffer)
    shp, pax = _buffers.parse_shape(shape, api)
    try:
        d = _dt.as_dtype(dtype)
    except _dt.DtypeNotSupported as e:
        raise DtypeError(f"{api}: {e}") from None
    if buf.kind in HBM_BUFFERS:
        if buf.kind == "shared_hbm" and m.loops:
            raise KernelArgumentError(
                f"{api}: shared_hbm tensors must be created at the top level of the kernel, "
                "not inside a loop",
                rule="shared-hbm-scope",
            )
        t = _buffers.hbm_tensor(m, shp, d, buf.kind, name, loc)
        if fill != "poison":
            _buffers.fill_hbm(m, t, fill, loc)
        return t
    if buf.direct is not None:
        if fill != "poison":
            raise KernelArgumentError(
                f"{api}: directly allocated tensors cannot have an initial value", rule="direct-init-value"
            )
        return buf.direct.create(m, shp, pax, d, name, loc)
    if not isinstance(fill, str):  # the fill value is written in the declared dtype (RNE; ints saturate)
        fill = _dt.round_to(np.float32(fill) if _dt.is_float(d) else np.asarray(fill), d).item()
    st = m.new_storage(
        shp, d, buf.kind, par_axis=pax, fill=fill if fill != "poison" else "poison", name=name, loc=loc
    )
    t = Tensor.whole(st)
    if fill != "poison":
        m.emit(VECTOR, "memset", [], [t], 0, {"value": fill}, loc)
    return t


def ndarray(shape: Any, dtype: Any, *, buffer: Any = None, name: str = "", **kwargs: Any) -> Tensor:
    """Allocate an uninitialised tensor (reading it before writing it is an error)."""
    return _alloc("nl.ndarray", shape, dtype, buffer, name, "poison")


def zeros(shape: Any, dtype: Any, *, buffer: Any = None, name: str = "", **kwargs: Any) -> Tensor:
    return _alloc("nl.zeros", shape, dtype, buffer, name, 0)


def ones(shape: Any, dtype: Any, *, buffer: Any = None, name: str = "", **kwargs: Any) -> Tensor:
    return _alloc("nl.ones", shape, dtype, buffer, name, 1)


def full(
    shape: Any, fill_value: Any, dtype: Any, *, buffer: Any = None, name: str = "", **kwargs: Any
) -> Tensor:
    return _alloc("nl.full", shape, dtype, buffer, name, fill_value)


def zeros_like(a: Tensor, dtype: Any = None, *, buffer: Any = None, name: str = "", **kwargs: Any) -> Tensor:
    return _alloc("nl.zeros_like", a.shape, dtype or a.dtype, buffer, name, 0)


def empty_like(a: Tensor, dtype: Any = None, *, buffer: Any = None, name: str = "", **kwargs: Any) -> Tensor:
    return _alloc("nl.empty_like", a.shape, dtype or a.dtype, buffer, name, "poison")


def ndarray_like(
    a: Tensor, dtype: Any = None, *, buffer: Any = None, name: str = "", **kwargs: Any
) -> Tensor:
    return empty_like(a, dtype, buffer=buffer, name=name)


def rand(shape: Any, dtype: Any = np.float32, **kwargs: Any) -> Tensor:
    """A tile of uniform random values in [0, 1) (GpSimd)."""
    m = _x.machine("nl.rand")
    loc = user_location()
    shp, _ = _buffers.parse_shape(shape, "nl.rand")
    d = _x.out_dtype(dtype, np.float32, "nl.rand")
    out = _x.new_tile(m, shp, d, "sbuf", loc)
    p = m.emit(GPSIMD, "rand", [], [out], 0, None, loc)
    vals = m.rng.random(shp, dtype=np.float32) if m.numerics else None
    return _x.commit(m, p, out, vals, None)


def random_seed(seed: Any, *, mask: Any = None, **kwargs: Any) -> None:
    m = _x.machine("nl.random_seed")
    if isinstance(seed, Tensor):
        seed = int(seed.read().ravel()[0]) if m.numerics else 0
    m.rng = np.random.default_rng(int(seed))


def shared_constant(constant: ArrayLike, dtype: Any = None, **kwargs: Any) -> Tensor:
    """A constant HBM tensor holding ``constant`` cast to ``dtype``."""
    m = _x.machine("nl.shared_constant")
    loc = user_location()
    arr = np.asarray(constant)
    d = _x.out_dtype(dtype, None, "nl.shared_constant") if dtype is not None else None
    if d is None:
        try:
            d = _dt.as_dtype(arr.dtype)
        except _dt.DtypeNotSupported:
            d = _dt.float32 if arr.dtype.kind == "f" else _dt.int32
    data = None
    if m.numerics and _dt.is_float(d) and _dt.name_of(d) != "tfloat32" and np.dtype(d) == arr.dtype:
        data = _dt.to_storage(arr, d)  # the array's own dtype: its bits, NaN payloads included
    elif m.numerics:
        data = _dt.round_to(arr.astype(np.float32) if _dt.is_float(d) else arr, d)
    st = m.new_storage(tuple(arr.shape), d, "shared_hbm", data=data, fill=None, kind="constant", loc=loc)
    return Tensor.whole(st)


def shared_identity_matrix(n: int, dtype: Any = np.uint8, **kwargs: Any) -> Tensor:
    return shared_constant(np.identity(int(n)), dtype=dtype)


# ---- memory movement -------------------------------------------------------------------------------------


def _hbm_view(x: Any, api: str, name: str) -> Tensor:
    if not isinstance(x, Tensor):
        raise KernelArgumentError(
            f"{api}: '{name}' must be a tensor (indexed HBM tensor), got {type(x).__name__}"
        )
    x.check_alive()
    if x.st.buffer not in HBM_BUFFERS:
        raise MemoryPlacementError(
            f"{api}: '{name}' must be in HBM, got a tile in {x.st.buffer}",
            rule="dma-src-not-hbm" if name == "src" else "dma-dst-not-hbm",
        )
    return x


def load(src: Tensor, *, mask: Any = None, dtype: Any = None, **kwargs: Any) -> Tensor:
    """DMA an HBM region into a new SBUF tile (its first dimension becomes the partition dim)."""
    m = _x.machine("nl.load")
    loc = user_location()
    _hbm_view(src, "nl.load", "src")
    shape = src.shape if src.ndim != 1 else (src.shape[0], 1)
    if len(shape) == 0:
        shape = (1, 1)
    marr = _x.mask_array(mask, src.shape, "nl.load")
    src.check_bounds(marr, "load")
    if shape[0] > _x.PMAX:
        raise TileShapeError(
            f"nl.load: the loaded tile would have {shape[0]} partitions (shape {list(shape)}); "
            f"the limit is {_x.PMAX}",
            rule="partition-limit",
        )
    d = _x.out_dtype(dtype, src.dtype, "nl.load")
    out = _x.new_tile(m, tuple(shape), d, "sbuf", loc)
    m.check_read(src, loc)
    p = m.emit(DMA, "load", [src], [out], 0, {"indirect": src.dims is None}, loc)
    vals = garbage = None
    if m.numerics:
        # never-written elements of kernel-allocated HBM (scratch, an output) are carried (devkit.sim.unwritten)
        garbage = _unwritten.moved(src, marr)
        vals = src.read(marr, check_init=False).reshape(shape)
        vals = vals.astype(np.float32) if _dt.is_float(d) and vals.dtype != np.float32 else vals
    _x.commit(
        m,
        p,
        out,
        vals,
        None if marr is None else marr.reshape(shape),
        exact=d == src.dtype,
        immutable=src.st.is_input,
    )
    if garbage is not None:
        _unwritten.carry(out, garbage.reshape(shape), src)
    return out


def store(dst: Tensor, value: Any, *, mask: Any = None, **kwargs: Any) -> None:
    """DMA a tile (SBUF, or PSUM via an extra copy) or a scalar into an HBM region."""
    m = _x.machine("nl.store")
    loc = user_location()
    _hbm_view(dst, "nl.store", "dst")
    marr = _x.mask_array(mask, dst.shape, "nl.store")
    dst.check_bounds(marr, "store")
    m.check_write(dst, loc)
    if isinstance(value, _x.Scalar):
        m.emit(DMA, "store", [], [dst], 0, None, loc)
        if m.numerics:
            v = np.float32(value) if _dt.is_float(dst.dtype) else np.asarray(value)  # ints stay exact
            dst.write(_dt.round_to(v, dst.dtype), marr)
        else:
            dst.mark_written()
        return
    v = _x.tile(value, "nl.store", "value")
    vshape = _x.aligned_shape(v)
    if vshape != dst.shape and v.size != dst.size:
        try:
            np.broadcast_shapes(vshape, dst.shape)
        except ValueError:
            raise TileShapeError(
                f"nl.store: value of shape {list(v.shape)} does not match the destination "
                f"shape {list(dst.shape)}",
                rule="shape-mismatch",
            ) from None
    if v.st.buffer == "psum":
        v = copy(v)
        loc = user_location()
    m.check_read(v, loc)
    m.emit(DMA, "store", [v], [dst], 0, None, loc)
    if m.numerics and marr is None and _x.defer_store(m, v, dst):
        return
    if m.numerics:
        g = None
        if m.nki_beta2 or v.st.taint is not None:
            # results computed from never-written data reaching HBM are blamed on that computation; in NKI 0.x
            # never-written data may pass through HBM (devkit.sim.unwritten.passes_through_hbm)
            g = _unwritten.moved(v, to_chip=False)
        vals = v.read(None, check_init=g is None)
        vals = (
            vals.reshape(dst.shape)
            if vals.size == dst.size
            else np.broadcast_to(vals.reshape(vshape), dst.shape)
        )
        dst.write(_dt.round_to(vals.astype(np.float32) if _dt.is_float(v.dtype) else vals, dst.dtype), marr)
        if g is not None:
            landed = (
                g.reshape(dst.shape) if g.size == dst.size else np.broadcast_to(g.reshape(vshape), dst.shape)
            )
            _unwritten.carry(dst, landed if marr is None else landed & marr, v)
    else:
        dst.mark_written()


def load_transpose2d(src: Tensor, *, mask: Any = None, dtype: Any = None, **kwargs: Any) -> Tensor:
    """DMA-transpose a 2-D HBM region [F, P] into an SBUF tile [P, F] (much lower DMA bandwidth)."""
    m = _x.machine("nl.load_transpose2d")
    loc = user_location()
    _hbm_view(src, "nl.load_transpose2d", "src")
    if src.ndim != 2:
        raise TileShapeError(f"nl.load_transpose2d: source must be 2-D, got shape {list(src.shape)}")
    if src.dims is None and any(isinstance(a, np.ndarray) for a in (src._garr or ())) and False:
        pass
    f, p_ = src.shape
    if p_ > _x.PMAX:
        raise TileShapeError(
            f"nl.load_transpose2d: the transposed tile would have {p_} partitions; the limit is {_x.PMAX}",
            rule="partition-limit",
        )
    d = _x.out_dtype(dtype, src.dtype, "nl.load_transpose2d")
    marr = _x.mask_array(mask, src.shape, "nl.load_transpose2d")
    src.check_bounds(marr, "load")
    out = _x.new_tile(m, (p_, f), d, "sbuf", loc)
    m.check_read(src, loc)
    p = m.emit(DMA, "load_transpose2d", [src], [out], 0, {"transpose": True}, loc)
    vals = garbage = None
    if m.numerics:
        garbage = _unwritten.moved(src, marr)  # carried, as by nl.load
        vals = src.read(marr, check_init=False).T
        vals = vals.astype(np.float32) if _dt.is_float(d) and vals.dtype != np.float32 else vals
    _x.commit(m, p, out, vals, None if marr is None else marr.T)
    if garbage is not None:
        _unwritten.carry(out, garbage.T, src)
    return out


def broadcast_to(src: Tensor, *, shape: Any, **kwargs: Any) -> Tensor:
    """A new tile with ``src`` broadcast to ``shape`` (partition broadcast runs on the TensorE)."""
    t = _x.tile(src, "nl.broadcast_to", "src")
    shape = tuple(int(s) for s in shape)
    if t.shape == shape:
        return t
    try:
        np.broadcast_shapes(_x.aligned_shape(t), shape)
    except ValueError:
        raise TileShapeError(
            f"nl.broadcast_to: cannot broadcast shape {list(t.shape)} to {list(shape)}"
        ) from None
    engine = TENSOR if _x.aligned_shape(t)[0] != shape[0] else VECTOR
    m = _x.machine("nl.broadcast_to")
    loc = user_location()
    out = _x.new_tile(m, shape, t.dtype, "sbuf", loc)
    m.check_read(t, loc)
    p = m.emit(engine, "broadcast", [t], [out], 0, None, loc)
    vals = (
        np.broadcast_to(_x.value_of(t, None, None, to_float=_dt.is_float(t.dtype)), shape)
        if m.numerics
        else None
    )
    return _x.commit(m, p, out, vals, None)


def atomic_rmw(dst: Tensor, value: Any, op: Any, *, mask: Any = None, **kwargs: Any) -> None:
    """``dst = op(dst, value)`` on HBM with duplicate indices accumulating (only ``np.add``)."""
    m = _x.machine("nl.atomic_rmw")
    loc = user_location()
    _hbm_view(dst, "nl.atomic_rmw", "dst")
    if _alu_name(op) != "add":
        raise KernelArgumentError("nl.atomic_rmw supports only op=np.add", rule="atomic-rmw-add-only")
    marr = _x.mask_array(mask, dst.shape, "nl.atomic_rmw")
    m.check_write(dst, loc)
    ins = [value] if isinstance(value, Tensor) else []
    m.emit(DMA, "atomic_rmw", ins, [dst], 0, {"indirect": True}, loc)
    if not m.numerics:
        dst.mark_written()
        return
    v = np.broadcast_to(_x.value_of(value, dst.shape, None), dst.shape)
    sel = np.ones(dst.shape, bool) if marr is None else marr.copy()
    bad = dst.oob_positions()
    if bad is not None:
        if (bad & sel).any():
            dst.check_bounds(sel, "atomic_rmw")
        sel &= ~bad
    key = dst._fancy_key(dst._index_arrays(), sel)
    data = dst.st.data.astype(np.float32)
    np.add.at(data, key, v[sel])
    dst.st.data[...] = _dt.round_to(data, dst.dtype)


# ---- element-wise: one instruction each, declared in devkit.nki._isa_nl ------------------------------------

#: ``nl.add``, ``nl.exp``, ``nl.copy``, ... generated from their declarations
_ELEMENTWISE = _isa_nl.functions()
globals().update(_ELEMENTWISE)
# the ones this module calls itself
copy = _ELEMENTWISE["copy"]
add = _ELEMENTWISE["add"]
subtract = _ELEMENTWISE["subtract"]
multiply = _ELEMENTWISE["multiply"]
divide = _ELEMENTWISE["divide"]
exp = _ELEMENTWISE["exp"]
square = _ELEMENTWISE["square"]
rsqrt = _ELEMENTWISE["rsqrt"]


# ---- reductions ----------------------------------------------------------------------------------------


def _free_reduction(name: str, fn: Any, opname: str):  # type: ignore[no-untyped-def]
    """``nl.<name>``: the free-axis reduction of the instruction layer (VectorE ``tensor_reduce``)."""

    def op(
        x: Tensor, axis: Any, *, dtype: Any = None, mask: Any = None, keepdims: bool = False, **kwargs: Any
    ) -> Tensor:
        return reduce(f"nl.{name}", x, axis, fn, dtype=dtype, mask=mask, keepdims=keepdims, opname=opname)

    op.__name__ = op.__qualname__ = name
    op.__doc__ = f"``{opname}`` reduction of ``x`` along the free ``axis`` (VectorE)."
    return op


sum = _free_reduction("sum", np.sum, "add")
prod = _free_reduction("prod", np.prod, "multiply")
max = _free_reduction("max", np.max, "max")
min = _free_reduction("min", np.min, "min")


def mean(
    x: Tensor, axis: Any, *, dtype: Any = None, mask: Any = None, keepdims: bool = False, **kwargs: Any
) -> Tensor:
    d = None if not isinstance(x, Tensor) or _dt.is_float(x.dtype) else _dt.float32
    return reduce(
        "nl.mean", x, axis, np.mean, dtype=dtype, mask=mask, keepdims=keepdims, opname="mean", default_dtype=d
    )


def var(x: Tensor, axis: Any, *, dtype: Any = None, mask: Any = None, **kwargs: Any) -> Tensor:
    d = None if not isinstance(x, Tensor) or _dt.is_float(x.dtype) else _dt.float32
    return reduce(
        "nl.var", x, axis, np.var, dtype=dtype, mask=mask, keepdims=False, opname="var", default_dtype=d
    )


def all(x: Tensor, axis: Any, *, dtype: Any = _dt.bool_, mask: Any = None, **kwargs: Any) -> Tensor:
    return reduce(
        "nl.all",
        x,
        axis,
        lambda v, axis, keepdims: np.all(v != 0, axis=axis, keepdims=keepdims),
        dtype=dtype,
        mask=mask,
        keepdims=False,
        opname="all",
        default_dtype=_dt.bool_,
    )


# ---- matmul and transpose ---------------------------------------------------------------------------------


def matmul(x: Tensor, y: Tensor, *, transpose_x: bool = False, mask: Any = None, **kwargs: Any) -> Tensor:
    """``x @ y`` (or ``x.T @ y`` with ``transpose_x=True``) on the TensorE into a PSUM tile (fp32)."""
    if not transpose_x:
        t = _x.tile(x, "nl.matmul", "x", psum=False)
        if t.ndim != 2:
            raise TileShapeError(f"nl.matmul: x must be 2-D, got {list(t.shape)}")
        if t.shape[0] > 128 or t.shape[1] > 128:
            raise TileShapeError(
                f"nl.matmul: x of shape {list(t.shape)} must be at most [128, 128] when "
                "transpose_x=False (it is transposed on the TensorE)",
                rule="matmul-stationary-size",
            )
        xt = copy(_layer.run(_isa_matmul.NC_TRANSPOSE, t, engine=_isa_common.engine.tensor), dtype=t.dtype)
        if t.omask is not None:
            xt.omask = t.omask.T
        x = xt
    return _isa_matmul.matmul_core("nl.matmul", x, y, mask=mask, opcode="matmul")


def transpose(x: Tensor, *, dtype: Any = None, mask: Any = None, **kwargs: Any) -> Tensor:
    """2-D transpose of a tile (each dim <= 128) on the TensorE."""
    t = _x.tile(x, "nl.transpose", "x")
    if t.ndim > 2:
        raise TileShapeError(
            f"nl.transpose: tiles of rank {t.ndim} are not supported (2-D only)", rule="transpose-rank"
        )
    res = _layer.run(_isa_matmul.NC_TRANSPOSE, t, engine=_isa_common.engine.tensor, mask=mask)
    return copy(res, dtype=dtype or t.dtype)


# ---- fused helpers ----------------------------------------------------------------------------------------


def softmax(
    x: Tensor, axis: Any, *, dtype: Any = None, compute_dtype: Any = None, mask: Any = None, **kwargs: Any
) -> Tensor:
    """Softmax over trailing free axes (max-subtracted, computed in fp32)."""
    t = _x.tile(x, "nl.softmax", "x")
    odt = dtype or compute_dtype or t.dtype
    mx = max(t, axis, keepdims=True, dtype=_dt.float32, mask=mask)
    e = exp(subtract(t, mx, dtype=_dt.float32, mask=mask), dtype=_dt.float32, mask=mask)
    s = sum(e, axis, keepdims=True, dtype=_dt.float32, mask=mask)
    return divide(e, s, dtype=odt, mask=mask)


def rms_norm(
    x: Tensor,
    w: Tensor,
    axis: Any,
    n: Any,
    epsilon: float = 1e-6,
    *,
    dtype: Any = None,
    compute_dtype: Any = None,
    mask: Any = None,
    **kwargs: Any,
) -> Tensor:
    """``x * rsqrt(sum(x^2, axis) / n + epsilon) * w``."""
    t = _x.tile(x, "nl.rms_norm", "x")
    odt = dtype or compute_dtype or t.dtype
    ss = sum(square(t, dtype=_dt.float32, mask=mask), axis, keepdims=True, dtype=_dt.float32, mask=mask)
    r = rsqrt(
        add(multiply(ss, 1.0 / float(n), dtype=_dt.float32), float(epsilon), dtype=_dt.float32),
        dtype=_dt.float32,
    )
    return multiply(multiply(t, r, dtype=_dt.float32, mask=mask), w, dtype=odt, mask=mask)


def dropout(x: Tensor, rate: Any, *, dtype: Any = None, mask: Any = None, **kwargs: Any) -> Tensor:
    """Zero each element with probability ``rate`` (no rescaling, like nisa.dropout)."""
    return _layer.run(_isa_vector.DROPOUT, x, rate, dtype=dtype, mask=mask)


def gather_flattened(
    data: Tensor, indices: Tensor, *, mask: Any = None, dtype: Any = None, **kwargs: Any
) -> Tensor:
    """Per partition, gather elements of the flattened free dims of ``data`` at ``indices``."""
    m = _x.machine("nl.gather_flattened")
    loc = user_location()
    d = _x.tile(data, "nl.gather_flattened", "data")
    ix = _x.tile(indices, "nl.gather_flattened", "indices")
    if d.shape[0] != ix.shape[0]:
        raise TileShapeError("nl.gather_flattened: data and indices must have the same number of partitions")
    odt = _x.out_dtype(dtype, d.dtype, "nl.gather_flattened")
    out = _x.new_tile(m, ix.shape, odt, "sbuf", loc)
    m.check_read(d, loc)
    m.check_read(ix, loc)
    p = m.emit(GPSIMD, "gather_flattened", [d, ix], [out], 0, None, loc)
    vals = garbage = taint = None
    if m.numerics:
        iv = ix.read().reshape(ix.shape[0], -1).astype(np.int64)  # the indices are observed
        dv = d.read(check_init=False).reshape(d.shape[0], -1)  # moved, not computed: ints stay exact
        iv = np.clip(iv, 0, dv.shape[1] - 1)
        vals = np.take_along_axis(dv, iv, axis=1).reshape(ix.shape)
        g = d.unwritten() if d.st.uninit is not None else None
        if g is not None:  # the gathered elements' state (the dataflow rule of nc_n_gather)
            garbage = np.take_along_axis(g.reshape(dv.shape), iv, axis=1).reshape(ix.shape)
            taint = _unwritten.taint_of(d.st, loc) if garbage.any() else None
            garbage = garbage if taint is not None else None
    marr = _x.mask_array(mask, ix.shape, "nl.gather_flattened")
    return _x.commit(m, p, out, vals, marr, garbage=garbage, taint=taint)


_LOOP_REDUCE_FNS = {
    "add": np.add,
    "multiply": np.multiply,
    "max": np.maximum,
    "min": np.minimum,
    "bitwise_and": np.bitwise_and,
    "bitwise_or": np.bitwise_or,
    "bitwise_xor": np.bitwise_xor,
}


def loop_reduce(
    x: Tensor, op: Any, loop_indices: Any, *, dtype: Any = None, mask: Any = None, **kwargs: Any
) -> Any:
    """Reduce ``x`` over loop iterations: ``b[...] = nl.loop_reduce(x, op, loop_indices=[i])`` updates
    ``b`` (allocated before the loop) in place, ``b = op(b, x)``, every iteration."""
    _x.machine("nl.loop_reduce")
    name = _alu_name(op)
    if name not in _LOOP_REDUCE_FNS:
        raise KernelArgumentError(
            f"nl.loop_reduce: {name} is not an associative reduction operator "
            f"(use one of {', '.join(sorted(_LOOP_REDUCE_FNS))})",
            rule="bad-reduce-op",
        )
    if not isinstance(x, Tensor):
        raise KernelArgumentError(f"nl.loop_reduce: x must be a tile, got {type(x).__name__}")
    return _x.LoopReduction(x, name, _LOOP_REDUCE_FNS[name], mask, dtype, _isa_nl.loop_reduce_step)


def all_reduce(
    x: Tensor,
    op: Any,
    program_axes: Any,
    *,
    dtype: Any = None,
    mask: Any = None,
    parallel_reduce: bool = True,
    asynchronous: bool = False,
    **kwargs: Any,
) -> Tensor:
    raise UnsupportedError(
        "nl.all_reduce (collective across SPMD programs) is not supported by the simulator",
        rule="unsupported-api",
    )


def expand_dims(data: Tensor, axis: Any) -> Tensor:
    return data.expand_dims(axis)


def gemm_grid(*args: Any, **kwargs: Any) -> Any:
    raise UnsupportedError("nl.gemm_grid is undocumented and not supported by the simulator")


def gemm_stationary_grid(*args: Any, **kwargs: Any) -> Any:
    raise UnsupportedError("nl.gemm_stationary_grid is undocumented and not supported by the simulator")
