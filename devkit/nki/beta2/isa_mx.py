"""``nki.isa`` MX instructions (NeuronCore-v4): ``nc_matmul_mx`` and ``quantize_mx`` over packed x4 tiles
(numerics in :mod:`devkit.sim.mx`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from devkit import dtypes as _dt
from devkit.errors import DtypeError, TileShapeError
from devkit.nki import _isa_layer as _layer
from devkit.nki._isa_layer import Instruction
from devkit.nki.beta2._convention import (
    _accumulate_into,
    _check_fit,
    _dst,
    _machine_at_least,
    declared,
)
from devkit.sim import dataflow as _flow
from devkit.sim import instr as _x
from devkit.sim import mx as _mx
from devkit.sim.tensor import Tensor
from devkit.trace import TENSOR, VECTOR

# ---- MX (NeuronCore-v4) --------------------------------------------------------------------------------------


def _packed_tile(x: Any, api: str, name: str) -> Tensor:
    t = _x.tile(x, api, name, psum=False)
    if not _dt.is_packed(t.dtype):
        raise DtypeError(
            f"{api}: {name} must be an MX x4 type (float8_e5m2_x4, float8_e4m3fn_x4, float4_e2m1fn_x4), "
            f"got {_dt.name_of(t.dtype)}",
            rule="dtype",
        )
    return t


def _scale_tile(x: Any, api: str, name: str, data: Tensor) -> Tensor:
    t = _x.tile(x, api, name, psum=False)
    if _dt.name_of(t.dtype) not in ("uint8", "float8_e8m0fnu"):
        raise DtypeError(
            f"{api}: {name} must be uint8 or float8_e8m0fnu, got {_dt.name_of(t.dtype)}", rule="dtype"
        )
    rows = int(_mx.scale_rows(data.partitions).max()) + 1 if data.partitions >= 8 else 1
    if t.partitions < rows or t.free_size != data.free_size:
        raise TileShapeError(
            f"{api}: {name} {list(t.shape)} must cover {rows} partitions and {data.free_size} elements per "
            f"partition for data {list(data.shape)}",
            rule="tile-shape",
        )
    return t


def _scale_rows_mask(t: Tensor, data_partitions: int) -> np.ndarray:
    """Boolean mask (``t``'s view shape) of the partitions holding the scales of a data tile of
    ``data_partitions`` partitions: the only rows the instruction reads or writes (``reference/nki_beta2.md``
    §5.4: the first 4 partitions of each 32-partition quadrant when P > 32; nki-library @d2ad3a5
    ``test/integration/nkilib/experimental/mxfp_subkernels/test_mxfp_load.py:46``: "quantize_mx writes 4 rows
    of scales at each of these partition offsets")."""
    mask = np.zeros(t.shape, dtype=bool)
    at: list[Any] = [slice(None)] * len(t.shape)
    at[t.pax if t.pax is not None else 0] = _mx.scale_rows(data_partitions)
    mask[tuple(at)] = True
    return mask


def _scale_values(t: Tensor, data_partitions: int) -> np.ndarray:
    """The scale tile's values; only the scale rows are read (a never-written gap row is not observed)."""
    v = t.read(_scale_rows_mask(t, data_partitions))
    if _dt.name_of(t.dtype) == "float8_e8m0fnu":  # stored as the value 2**(s-127)
        return (np.log2(v.astype(np.float64)) + 127).astype(np.int64).reshape(t.partitions, -1)
    return v.astype(np.int64).reshape(t.partitions, -1)


# ---- plans (parameters after the step: the NKI 0.x signature) and numerics -------------------------------


def _nc_matmul_mx(
    s: _layer.Step,
    dst: Any,
    stationary: Any,
    moving: Any,
    stationary_scale: Any,
    moving_scale: Any,
    tile_position: Any = None,
    tile_size: Any = None,
    accumulate: Any = None,
    name: Any = None,
) -> Callable[[Tensor], None]:
    """MX matmul: dequantise each 8x4 group by ``2**(scale-127)``, contract over partitions and the 4 packed
    values: ``dst[M, N] (+)= sum_k sum_q st[k, M, q] * mv[k, N, q]`` (v4)."""
    api = s.api
    _machine_at_least(api, 4)
    d = _dst(dst, api, buffers=("psum",))
    st = _packed_tile(stationary, api, "stationary")
    mv = _packed_tile(moving, api, "moving")
    ss = _scale_tile(stationary_scale, api, "stationary_scale", st)
    ms = _scale_tile(moving_scale, api, "moving_scale", mv)
    k = st.partitions
    if k != mv.partitions:
        raise TileShapeError(
            f"{api}: stationary {list(st.shape)} and moving {list(mv.shape)} differ in partitions",
            rule="matmul-contraction",
        )
    if k % 32 or k > 128:
        raise TileShapeError(
            f"{api}: the partition count must be a multiple of 32 up to 128, got {k}", rule="tile-shape"
        )
    mm, n = st.free_size, mv.free_size
    if mm > 128 or mm % 2:
        raise TileShapeError(
            f"{api}: stationary free size must be even and at most 128, got {mm}",
            rule="matmul-stationary-size",
        )
    nmax = 4096 if _dt.name_of(d.dtype) == "float32" else 8192
    if n > nmax:
        raise TileShapeError(f"{api}: moving free size {n} exceeds {nmax}", rule="matmul-moving-size")
    if _dt.name_of(d.dtype) not in ("float32", "bfloat16"):
        raise DtypeError(
            f"{api}: dst must be float32 or bfloat16, got {_dt.name_of(d.dtype)}", rule="matmul-dst-dtype"
        )
    s.shape, s.dtype, s.buffer = (mm, n), _dt.float32, "psum"
    s.reads = [st, mv, ss, ms]
    s.flops = 2 * 4 * k * mm * n
    s.attrs = {
        "stationary_free": mm,
        "moving_free": n,
        "contract": 4 * k,
        "accumulate": False,
        "dtype": _dt.name_of(mv.dtype),
        "mx": True,
    }
    return lambda res: _accumulate_into(api, d, res, accumulate)


def _matmul_mx_values(s: _layer.Step) -> np.ndarray:
    st, mv, ss, ms = s.reads
    k = st.partitions
    mm, n = s.shape
    a = _mx.dequantize(st.read().reshape(k, mm), st.dtype, _scale_values(ss, k))
    b = _mx.dequantize(mv.read().reshape(k, n), mv.dtype, _scale_values(ms, k))
    return np.einsum("kiq,kjq->ij", a, b).astype(np.float32)


def _quantize_mx(s: _layer.Step, dst: Any, src: Any, dst_scale: Any, name: Any = None) -> None:
    """bf16/fp16 ``src[P, 4F]`` -> MX x4 ``dst[P, F]`` and 8-bit scales (one per 8x4 group) (v4, VectorE)."""
    api = s.api
    _machine_at_least(api, 4)
    d = _dst(dst, api, buffers=("sbuf",))
    if not _dt.is_packed(d.dtype) or _dt.name_of(d.dtype) == "float4_e2m1fn_x4":
        raise DtypeError(
            f"{api}: dst must be float8_e5m2_x4 or float8_e4m3fn_x4, got {_dt.name_of(d.dtype)}",
            rule="dtype",
        )
    src_t = _x.tile(src, api, "src", psum=False)
    if _dt.name_of(src_t.dtype) not in ("bfloat16", "float16"):
        raise DtypeError(
            f"{api}: src must be bfloat16 or float16, got {_dt.name_of(src_t.dtype)}", rule="dtype"
        )
    p = src_t.partitions
    if p % 8 or src_t.free_size % 4:
        raise TileShapeError(
            f"{api}: src {list(src_t.shape)} must have a multiple of 8 partitions and of 4 elements per partition",
            rule="tile-shape",
        )
    _check_fit(api, d, (p, src_t.free_size // 4))
    sc = _dst(dst_scale, api, buffers=("sbuf",))
    if _dt.name_of(sc.dtype) not in ("uint8", "float8_e8m0fnu"):
        raise DtypeError(
            f"{api}: dst_scale must be uint8 or float8_e8m0fnu, got {_dt.name_of(sc.dtype)}", rule="dtype"
        )
    rows = _mx.scale_rows(p)
    if sc.partitions <= int(rows.max()) or sc.free_size != src_t.free_size // 4:
        raise TileShapeError(
            f"{api}: dst_scale {list(sc.shape)} must cover {int(rows.max()) + 1} partitions and "
            f"{src_t.free_size // 4} elements per partition",
            rule="tile-shape",
        )
    s.reads = [src_t]
    s.dst = d
    s.also = [sc]  # the scales: a second destination
    s.also_checked = True
    s.flops = src_t.size
    s.args = rows


def _quantize_mx_values(s: _layer.Step) -> Any:
    (src,) = s.reads
    d, sc, rows = s.dst, s.also[0], s.args
    assert d is not None
    bits, scales = _mx.quantize(src.read().reshape(src.partitions, -1), d.dtype)
    d.write(bits.reshape(d.shape))
    cur = sc.read(check_init=False).reshape(sc.partitions, -1).copy()
    if _dt.name_of(sc.dtype) == "float8_e8m0fnu":
        cur[rows] = np.exp2(scales.astype(np.float64) - 127)
    else:
        cur[rows] = scales
    # Only the scale rows are written: the partitions between them keep their contents and, if never written,
    # stay never-written (a masked write would count its whole region as written).
    rows_mask = _scale_rows_mask(sc, src.partitions)
    gaps = sc.unwritten(~rows_mask)
    sc.write(_dt.round_to(cur.reshape(sc.shape), sc.dtype), rows_mask)
    if gaps is not None:
        sc.mark_unwritten(gaps)
    return _layer.WRITTEN


# ---- the declarations and their nki.isa functions -------------------------------------------------------

NC_MATMUL_MX = Instruction(
    "nc_matmul_mx", TENSOR, "nc_matmul", _nc_matmul_mx, _matmul_mx_values, dataflow=_flow.matmul_mx
)
QUANTIZE_MX = Instruction(
    "quantize_mx", VECTOR, "quantize_mx", _quantize_mx, _quantize_mx_values, dataflow=_flow.quantize_mx
)
#: the family's instructions (each public function below is generated from its declaration)
INSTRUCTIONS = (NC_MATMUL_MX, QUANTIZE_MX)

nc_matmul_mx = declared(NC_MATMUL_MX)
quantize_mx = declared(QUANTIZE_MX)
