"""TensorE instructions of ``nki.isa``: ``nc_matmul`` (and the matmul core ``nl.matmul`` shares) and
``nc_transpose`` (TensorE or VectorE).  Limits follow ``reference/nki_api.md`` §3."""

from __future__ import annotations

from typing import Any

import numpy as np

from devkit import dtypes as _dt
from devkit.errors import (
    DtypeError,
    KernelArgumentError,
    MemoryPlacementError,
    TileShapeError,
    UnsupportedError,
    user_location,
)
from devkit.nki._isa_common import (
    _engine,
    engine,
)
from devkit.sim import instr as _x
from devkit.sim import placement as _placement
from devkit.sim import unwritten as _unwritten
from devkit.sim.deferred import Product
from devkit.sim.tensor import Tensor
from devkit.trace import TENSOR, VECTOR

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
    garbage = None
    wmask = _x.mask_array(mask, (mm, n), api)
    if m.numerics:
        # a transpose moves the stationary tile: never-written elements flow (devkit.sim.unwritten)
        g = _unwritten.moved(st) if is_transpose else None
        a = st.read(None, check_init=not is_transpose)
        b = mv.read(None)
        if g is not None:
            a, garbage = _transposed_garbage(a, b, g, st.shape[0], mm, n)
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
    if garbage is not None:  # the positions that received never-written data read as NaN, like fresh memory
        vals = np.where(garbage, np.float32(np.nan), vals.result() if isinstance(vals, Product) else vals)
    return _x.commit(m, p, out, vals, wmask, garbage=garbage)


def _transposed_garbage(
    a: np.ndarray, b: np.ndarray, g: np.ndarray, k: int, mm: int, n: int
) -> tuple[np.ndarray, np.ndarray]:
    """An ``is_transpose`` matmul of a stationary tile holding never-written elements ``g``: the stationary
    values with those elements zeroed (the transpose passes each element through on its own, so garbage
    must not spread along a row as NaN * 0 would) and the result positions that receive garbage."""
    gk = g.reshape(k, mm)
    moving_nonzero = b.reshape(k, n) != 0
    garbage = (gk.T.astype(np.float32) @ moving_nonzero.astype(np.float32)) > 0
    return np.where(g, np.zeros((), a.dtype), a), garbage


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
    g = _unwritten.moved(t) if m.numerics else None  # a move: never-written elements flow
    vals = (
        t.read(check_init=False).reshape(p, f).T.astype(np.float32)
        if m.numerics and _dt.is_float(t.dtype)
        else (t.read(check_init=False).reshape(p, f).T if m.numerics else None)
    )
    garbage = None if g is None else g.reshape(p, f).T
    return _x.commit(m, pend, out, vals, _x.mask_array(mask, (f, p), api), garbage=garbage)
