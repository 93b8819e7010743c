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
)
from devkit.nki import _placement
from devkit.nki._isa_common import (
    _engine,
    engine,
)
from devkit.nki._isa_layer import Instruction, Step, execute
from devkit.sim import dataflow as _flow
from devkit.sim import instr as _x
from devkit.sim import unwritten as _unwritten
from devkit.sim.deferred import Product
from devkit.sim.tensor import Tensor
from devkit.trace import TENSOR, VECTOR

_MM_DTYPES = {"float8_e4m3", "float8_e5m2", "float8_e4m3fn", "bfloat16", "float16", "tfloat32", "float32"}


def _matmul_core(
    s: Step,
    stationary: Any,
    moving: Any,
    *,
    mask: Any = None,
    opcode: str = "nc_matmul",
    perf_mode: Any = None,
    is_transpose: bool = False,
    onezero: tuple[bool, bool] = (False, False),
) -> None:
    """``stationary.T @ moving`` on the TensorE into a new PSUM tile (fp32 accumulate)."""
    api, m = s.api, s.m
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
    st_dt, mv_dt = _dt.name_of(st.dtype), _dt.name_of(mv.dtype)
    for dn, nm in ((st_dt, "stationary"), (mv_dt, "moving")):
        if dn not in _MM_DTYPES:
            raise DtypeError(
                f"{api}: {nm} dtype {dn} is not supported by the TensorE "
                f"(use one of {', '.join(sorted(_MM_DTYPES))})",
                rule="matmul-dtype",
            )
    if (st_dt in _FP32) != (mv_dt in _FP32) and not is_transpose:
        raise DtypeError(
            f"{api}: fp32/tf32 operands can only be multiplied with fp32/tf32 operands, got {st_dt} and {mv_dt}",
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
    s.opcode = opcode
    s.shape = (mm, n)
    s.dtype = _dt.float32
    s.buffer = "psum"
    s.reads = [st, mv]
    s.flops = 2 * k * mm * n
    s.attrs = {
        "stationary_free": mm,
        "moving_free": n,
        "contract": k,
        "accumulate": False,
        "dtype": "float32" if st_dt == "float32" and mv_dt == "float32" else mv_dt,
        "is_stationary_onezero": onezero[0],
        "is_moving_onezero": onezero[1],
        "double_row": double_row,
        "transpose": is_transpose,
    }
    wmask = _x.mask_array(mask, (mm, n), api)
    if st.omask is not None or mv.omask is not None:  # rows/columns only masked-off operands reach stay out
        rows = st.omask.reshape(st.shape[0], mm).any(0) if st.omask is not None else np.ones(mm, bool)
        cols = mv.omask.reshape(mv.shape[0], n).any(0) if mv.omask is not None else np.ones(n, bool)
        om_out = rows[:, None] & cols[None, :]
        wmask = om_out if wmask is None else (wmask & om_out)
    s.mask = wmask
    s.args = double_row


_FP32 = ("float32", "tfloat32")


def _matmul_values(s: Step) -> Any:
    vals = _product(s)
    if s.garbage is not None:  # the positions that received never-written data read as NaN, like fresh memory
        vals = np.where(s.garbage, np.float32(np.nan), vals.result() if isinstance(vals, Product) else vals)
    return vals


def _product(s: Step) -> Any:
    st, mv = s.reads
    mm, n = s.shape
    transpose = s.attrs["transpose"]  # type: ignore[index]
    # a transpose moves the stationary tile: never-written elements flow (devkit.sim.unwritten)
    g = _unwritten.moved(st) if transpose else None
    a = st.read(None, check_init=not transpose)
    b = mv.read(None)
    if g is not None:
        a, s.garbage = _transposed_garbage(a, b, g, st.shape[0], mm, n)
    if s.args:  # double row
        return np.einsum("kli,klj->ij", a.astype(np.float32), b.astype(np.float32), dtype=np.float32)
    a = a.reshape(st.shape[0], mm).astype(np.float32, copy=False)
    b = b.reshape(mv.shape[0], n).astype(np.float32, copy=False)
    if st.omask is None and mv.omask is None:
        # computed when needed (devkit.sim.deferred); the operands' writable memory is noted
        return Product(a, b, tuple(t.st.id for t in (st, mv) if t.st.lazy is None))
    if st.omask is not None:
        a = np.where(st.omask.reshape(st.shape[0], mm), a, 0)
    if mv.omask is not None:
        b = np.where(mv.omask.reshape(mv.shape[0], n), b, 0)
    return a.T @ b


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


def _nc_matmul(
    s: Step,
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
) -> None:
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
    _matmul_core(
        s,
        stationary,
        moving,
        mask=mask,
        perf_mode=perf_mode,
        is_transpose=is_transpose,
        onezero=(bool(is_stationary_onezero), bool(is_moving_onezero)),
    )


def _nc_transpose(
    s: Step, data: Tensor, *, mask: Any = None, dtype: Any = None, engine: Any = engine.unknown, **kwargs: Any
) -> None:
    """2-D partition/free transpose (TensorE: <= 128x128, SBUF -> PSUM; VectorE: <= 32x32)."""
    api = s.api
    t = _x.tile(data, api, "data")
    p, f = t.shape[0], t.free_size
    s.engine = eng = _engine(engine, VECTOR if (p <= 32 and f <= 32) else TENSOR, (TENSOR, VECTOR), api)
    if eng == TENSOR:
        if p > 128 or f > 128:
            raise TileShapeError(
                f"{api}: TensorE transpose input must be at most 128x128, got {list(t.shape)}",
                rule="transpose-size",
            )
        if t.st.buffer != "sbuf":
            raise MemoryPlacementError(f"{api}: TensorE transpose reads SBUF only")
        s.buffer, default_dt = "psum", (t.dtype if s.m.geometry.nc_version >= 3 else _dt.float32)
        s.attrs = {"stationary_free": p, "moving_free": f, "contract": p}
    else:
        if p > 32 or f > 32:
            raise TileShapeError(
                f"{api}: VectorE transpose input must be at most 32x32, got {list(t.shape)}",
                rule="transpose-size",
            )
        default_dt = t.dtype
    s.dtype = _x.out_dtype(dtype, default_dt, api)
    s.shape = (f, p)
    s.reads = [t]
    s.mask = _x.mask_array(mask, (f, p), api)


def _transpose_values(s: Step) -> np.ndarray:
    (t,) = s.reads
    p, f = t.shape[0], t.free_size
    g = _unwritten.moved(t)  # a move: never-written elements flow
    s.garbage = None if g is None else g.reshape(p, f).T
    v = t.read(check_init=False).reshape(p, f).T
    return v.astype(np.float32) if _dt.is_float(t.dtype) else v


# ---- the declarations ---------------------------------------------------------------------------------------

MATMUL = Instruction("nc_matmul", TENSOR, "nc_matmul", _matmul_core, _matmul_values, dataflow=_flow.matmul)
NC_MATMUL = Instruction("nc_matmul", TENSOR, "nc_matmul", _nc_matmul, _matmul_values, dataflow=_flow.matmul)
NC_TRANSPOSE = Instruction("nc_transpose", TENSOR, "nc_transpose", _nc_transpose, _transpose_values)


def matmul_core(api: str, stationary: Any, moving: Any, **kwargs: Any) -> Tensor:
    """The TensorE matmul named ``api`` in errors (``nl.matmul``); keyword arguments as ``_matmul_core``."""
    return execute(MATMUL, api, (stationary, moving), kwargs)  # type: ignore[return-value]


#: the family's public Beta-1 instructions (:mod:`devkit.nki.isa` generates their functions)
INSTRUCTIONS = (
    NC_MATMUL,
    NC_TRANSPOSE,
)
