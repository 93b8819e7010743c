"""``nki.isa`` (NKI 0.x / Beta 2): every instruction writes its destination ``dst``.

Each function here is a thin adapter over the simulator's instruction layer as the Beta-1 front end
exposes it (:mod:`devkit.nki.isa`, :mod:`devkit.sim.instr`): it checks the NKI 0.x calling convention
(``dst`` first, enums by member, no unknown keyword arguments), runs the Beta-1 instruction with
``dtype=dst.dtype`` and retargets its result into ``dst`` -- one instruction in the trace, as on hardware.
Semantics: ``reference/nki_beta2.md`` §5.

``nc_matmul`` accumulates implicitly: with ``accumulate=None`` the first matmul write to a PSUM element
overwrites it and later ones add (tracked per element), ``accumulate=True``/``False`` force add/overwrite.
"""

from __future__ import annotations

import enum
import functools
import weakref
from collections.abc import Callable
from typing import Any

import numpy as np

from devkit import dtypes as _dt
from devkit.errors import (
    DtypeError,
    KernelArgumentError,
    MemoryPlacementError,
    PartitionMismatchError,
    TileShapeError,
    UnsupportedError,
    user_location,
)
from devkit.nki import isa as _b1
from devkit.nki.beta2 import lnc as _lnc
from devkit.nki.beta2.constants import (
    dge_mode,
    dma_engine,
    engine,
    matmul_perf_mode,
    nc_version,
    oob_mode,
    reduce_cmd,
)
from devkit.sim import instr as _x
from devkit.sim import mx as _mx
from devkit.sim.deferred import Deferred
from devkit.sim.tensor import HBM_BUFFERS, Storage, Tensor
from devkit.trace import DMA, GPSIMD, TENSOR, VECTOR

from . import constants  # noqa: F401  (nki.isa.constants)

# deprecated aliases kept by NKI 0.x
tensor_engine = engine.tensor
vector_engine = engine.vector
scalar_engine = engine.scalar
gpsimd_engine = engine.gpsimd
unknown_engine = engine.unknown

__all__ = [
    "activation",
    "dge_mode",
    "dma_copy",
    "dma_engine",
    "engine",
    "get_nc_version",
    "matmul_perf_mode",
    "memset",
    "nc_matmul",
    "nc_matmul_mx",
    "nc_transpose",
    "nc_version",
    "oob_mode",
    "quantize_mx",
    "reduce_cmd",
    "tensor_copy",
    "tensor_scalar",
    "tensor_tensor",
]


class NkiValidationError(KernelArgumentError):
    """``nki.isa.NkiValidationError``: an instruction's arguments break its rules."""


# ---- calling convention ---------------------------------------------------------------------------------


def _strict(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Reject unknown or missing arguments with a KernelArgumentError naming the kernel line (NKI 0.2+).

    A TypeError raised by the call itself (its traceback has no frame inside ``fn``) is a binding error;
    TypeErrors from inside the instruction are devkit bugs and propagate unchanged."""
    api = f"nisa.{fn.__name__}"

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except TypeError as e:
            tb = e.__traceback__
            if tb is not None and tb.tb_next is None:
                raise KernelArgumentError(f"{api}: {e}", rule="bad-arguments") from None
            raise

    return wrapper


def _member(value: Any, cls: type, api: str, name: str) -> Any:
    """An enum argument as a member of ``cls``.

    NKI 0.3.0 documents that enums are passed by member, but nki-library (hardware-tested, @d2ad3a5) passes
    ``dge_mode=3``; real code is the arbiter, so a plain integer equal to a member's value is accepted and
    converted.  Anything else (other values, strings, another enum's members) is an error."""
    if value is None or isinstance(value, cls):
        return value
    if isinstance(value, (int, np.integer)) and not isinstance(value, (bool, enum.Enum)):
        try:
            return cls(int(value))
        except ValueError:
            pass
    raise KernelArgumentError(
        f"{api}: {name} must be a member of nki.isa.{cls.__name__} "
        f"({', '.join(f'{k}={v.value!r}' for k, v in cls.__members__.items())}), got {value!r}",
        rule="enum-by-member",
    )


def _dst(x: Any, api: str, *, buffers: tuple[str, ...] = ("sbuf", "psum")) -> Tensor:
    if not isinstance(x, Tensor):
        raise KernelArgumentError(
            f"{api}: dst must be a tensor (nl.ndarray), got {type(x).__name__}", rule="bad-argument"
        )
    x.check_alive()
    if x.st.buffer not in buffers and not (x.st.buffer in HBM_BUFFERS and "hbm" in buffers):
        where = " or ".join(b.upper() for b in buffers)
        raise MemoryPlacementError(
            f"{api}: dst must be in {where}, got {x.st.describe()}", rule="dst-placement"
        )
    return x


def _check_fit(api: str, dst: Tensor, shape: tuple[int, ...]) -> None:
    """dst and the result agree in partitions and in elements per partition (free shapes may differ)."""
    rp = shape[0] if shape else 1
    rf = int(np.prod(shape[1:])) if len(shape) > 1 else 1
    if dst.partitions != rp:
        raise PartitionMismatchError(
            f"{api}: dst {list(dst.shape)} has {dst.partitions} partitions but the result {list(shape)} has {rp}",
            rule="partition-mismatch",
        )
    if dst.free_size != rf:
        raise TileShapeError(
            f"{api}: dst {list(dst.shape)} holds {dst.free_size} elements per partition but the result "
            f"{list(shape)} has {rf}",
            rule="dst-shape",
        )


def _into(api: str, dst: Tensor, result: Tensor) -> None:
    """Write the fresh result of a Beta-1 instruction into ``dst`` (the instruction is retargeted)."""
    _check_fit(api, dst, tuple(result.shape))
    _x.assign(dst, result)


def get_nc_version() -> nc_version:
    """NeuronCore generation of the simulated target (gen2: trn1/inf2, gen3: trn2, gen4: trn3)."""
    m = _x.current()
    if m is not None:
        return nc_version(m.geometry.nc_version)
    from devkit.nki.beta2.targets import selected_target, target_nc_version

    return nc_version(target_nc_version(selected_target(None)))


def get_nc_sub_version() -> int:
    """Silicon revision (always 0 in the simulator)."""
    return 0


# ---- DMA ------------------------------------------------------------------------------------------------------

_DGE_B1 = {
    dge_mode.unknown: _b1.dge_mode.unknown,
    dge_mode.swdge: _b1.dge_mode.swdge,
    dge_mode.hwdge: _b1.dge_mode.hwdge,
    dge_mode.none: _b1.dge_mode.none,
}


@_strict
def dma_copy(
    dst: Any,
    src: Any,
    priority: Any = None,
    oob_mode: Any = oob_mode.error,
    dge_mode: Any = dge_mode.unknown,
    engine: Any = engine.unknown,
    name: Any = None,
) -> None:
    """Copy ``src`` to ``dst`` (HBM/SBUF either side, equal element counts; casts via fp32 except hwdge)."""
    api = "nisa.dma_copy"
    om = _member(oob_mode, _b1.oob_mode, api, "oob_mode")
    dg = _member(dge_mode, globals()["dge_mode"], api, "dge_mode")
    _member(engine, _b1.engine, api, "engine")
    if dg == globals()["dge_mode"].hwdge and isinstance(dst, Tensor) and isinstance(src, Tensor):
        if _dt.name_of(dst.dtype) != _dt.name_of(src.dtype):
            raise DtypeError(
                f"{api}: with dge_mode=hwdge the DMA cannot cast: src is {_dt.name_of(src.dtype)}, "
                f"dst is {_dt.name_of(dst.dtype)}",
                rule="hwdge-cast",
            )
    if dg == globals()["dge_mode"].unknown and om == _b1.oob_mode.error and _plain_copy(dst, src):
        _copy_same_dtype(dst, src)
        return
    _b1.dma_copy(dst=dst, src=src, oob_mode=om, dge_mode=_DGE_B1[dg])


def _plain_copy(dst: Any, src: Any) -> bool:
    """A numerics-run copy between in-bounds affine views of one dtype, outside PSUM (the common case)."""
    if not (isinstance(dst, Tensor) and isinstance(src, Tensor)):
        return False
    m = _x.current()
    if m is None or not m.numerics or not (dst.st.alive and src.st.alive):
        return False
    if "psum" in (dst.st.buffer, src.st.buffer) or _dt.name_of(dst.dtype) != _dt.name_of(src.dtype):
        return False
    if dst.dims is None or src.dims is None or dst.size != src.size:
        return False
    return not (
        dst._oob or src._oob or dst._bcast is not None or dst.st.kind == "direct" or src.st.kind == "direct"
    )


def _copy_same_dtype(dst: Tensor, src: Tensor) -> None:
    """``dma_copy`` without a cast: the stored values move bit for bit."""
    m = _x.machine("nisa.dma_copy")
    loc = user_location()
    m.check_read(src, loc)
    m.check_write(dst, loc)
    m.emit(DMA, "dma_copy", [src], [dst], 0, {"indirect": False, "rmw": False}, loc)
    v = src.read()
    dst.write(v if v.shape == dst.shape else v.reshape(dst.shape))


@_strict
def dma_transpose(
    dst: Any,
    src: Any,
    axes: Any = None,
    priority: Any = None,
    dge_mode: Any = dge_mode.unknown,
    oob_mode: Any = oob_mode.error,
    name: Any = None,
) -> None:
    """Transpose through the DMA into an SBUF ``dst`` (same dtype)."""
    api = "nisa.dma_transpose"
    d = _dst(dst, api, buffers=("sbuf",))
    if isinstance(src, Tensor) and _dt.name_of(src.dtype) != _dt.name_of(d.dtype):
        raise DtypeError(f"{api}: src and dst must have the same dtype", rule="dtype")
    res = _b1.dma_transpose(src, axes=axes, dtype=d.dtype)
    _into(api, d, res)


# ---- TensorE --------------------------------------------------------------------------------------------------

# per PSUM storage: which elements a matmul has written (implicit accumulation, accumulate=None)
_MATMUL_WRITTEN: weakref.WeakKeyDictionary[Storage, np.ndarray] = weakref.WeakKeyDictionary()


def _written_flags(t: Tensor) -> tuple[np.ndarray, Any, Any]:
    """(matmul-written flags of t's storage, the key selecting t's elements, t's view of the flags)."""
    flags = _MATMUL_WRITTEN.get(t.st)
    if flags is None:
        flags = _MATMUL_WRITTEN[t.st] = np.zeros(t.st.shape, dtype=bool)
    if t.dims is not None and not t._oob and t._bcast is None:
        key = t._key
        view = flags[key]
        if t._perm is not None:
            view = view.transpose(t._perm)
        return flags, key, view.reshape(t.shape)
    key = t._fancy_key(t._index_arrays(), None)
    return flags, key, flags[key]


def _accumulate_into(api: str, dst: Tensor, result: Tensor, accumulate: Any) -> None:
    """Write a fresh TensorE result into PSUM ``dst``: overwrite, add, or per element (accumulate=None)."""
    _check_fit(api, dst, tuple(result.shape))
    flags, key, before = _written_flags(dst)
    if accumulate is None:
        add = before.copy()
    elif accumulate:
        if not before.all() and dst.st.uninit is not None:
            # hardware: undefined; AWS's simulator warns.  The kit reads uninitialised memory as an error.
            dst.read()  # raises UninitializedReadError when an element was never written
        add = np.ones(before.shape, dtype=bool)
    else:
        add = np.zeros(before.shape, dtype=bool)
    if not add.any():
        _x.assign(dst, result)
    elif add.all():
        _x.augmented(dst, result, "add")
        dst._fresh = None
    else:
        _add_where(dst, result, add)
    flags[key] = True


def _add_where(dst: Tensor, result: Tensor, add: np.ndarray) -> None:
    """One matmul write that adds to some elements of ``dst`` and overwrites the others."""
    m = _x.machine("nisa.nc_matmul")
    loc = user_location()
    p = m.pending
    m.check_write(dst, loc, accumulate=True)
    m.retarget(p, result, dst)  # type: ignore[arg-type]
    p.attrs = {**(p.attrs or {}), "accumulate": True}  # type: ignore[union-attr]
    result._fresh = None
    if not m.numerics:
        dst.mark_written()
        return
    raw = p.raw  # type: ignore[union-attr]
    if isinstance(raw, Deferred):
        raw = raw.result()
    if raw is None:
        raw = result.read(check_init=False)
    new = np.asarray(raw, dtype=np.float32).reshape(dst.shape)
    old = dst.read(check_init=False).astype(np.float32)
    dst.write(_dt.round_to(np.where(add, old + new, new), dst.dtype))


@_strict
def nc_matmul(
    dst: Any,
    stationary: Any,
    moving: Any,
    is_stationary_onezero: bool = False,
    is_moving_onezero: bool = False,
    is_transpose: bool = False,
    accumulate: Any = None,
    tile_position: Any = (),
    tile_size: Any = (),
    perf_mode: Any = matmul_perf_mode.none,
    name: Any = None,
) -> None:
    """``dst[M, N] (+)= stationary[K, M].T @ moving[K, N]`` on the TensorE (fp32 accumulation in PSUM)."""
    api = "nisa.nc_matmul"
    d = _dst(dst, api, buffers=("psum",))
    pm = _member(perf_mode, matmul_perf_mode, api, "perf_mode")
    if accumulate not in (None, True, False):
        raise KernelArgumentError(
            f"{api}: accumulate must be None, True or False, got {accumulate!r}", rule="bad-argument"
        )
    odt = _dt.name_of(d.dtype)
    if is_transpose:
        if isinstance(stationary, Tensor) and odt != _dt.name_of(stationary.dtype):
            raise DtypeError(
                f"{api}: with is_transpose=True dst must have the input dtype "
                f"{_dt.name_of(stationary.dtype)}, got {odt}",
                rule="matmul-dst-dtype",
            )
    else:
        m = _x.machine(api)
        allowed = ("float32", "bfloat16") if m.geometry.nc_version >= 4 else ("float32",)
        if odt not in allowed:
            raise DtypeError(
                f"{api}: the matmul result in PSUM is {' or '.join(allowed)} on NeuronCore-v{m.geometry.nc_version}, "
                f"got a {odt} dst",
                rule="matmul-dst-dtype",
            )
    res = _b1.nc_matmul(
        stationary,
        moving,
        is_stationary_onezero=is_stationary_onezero,
        is_moving_onezero=is_moving_onezero,
        is_transpose=is_transpose,
        tile_position=tile_position,
        tile_size=tile_size,
        perf_mode=None if pm in (None, matmul_perf_mode.none) else pm.value,
    )
    _accumulate_into(api, d, res, accumulate)


@_strict
def nc_transpose(dst: Any, data: Any, engine: Any = engine.unknown, name: Any = None) -> None:
    """2-D partition/free transpose (TensorE: SBUF -> PSUM, <= 128x128; VectorE: <= 32x32)."""
    api = "nisa.nc_transpose"
    d = _dst(dst, api)
    _member(engine, _b1.engine, api, "engine")
    eng = engine
    if eng == _b1.engine.unknown:
        eng = _b1.engine.tensor if d.st.buffer == "psum" else _b1.engine.vector
    res = _b1.nc_transpose(data, dtype=d.dtype, engine=eng)
    _into(api, d, res)


# ---- MX (NeuronCore-v4) --------------------------------------------------------------------------------------


def _require_v4(api: str) -> Any:
    m = _x.machine(api)
    if m.geometry.nc_version < 4:
        raise UnsupportedError(
            f"{api} needs NeuronCore-v4 (trn3); the simulated target is {m.geometry.name} "
            "(select trn3 with NEURON_PLATFORM_TARGET_OVERRIDE=trn3 or nki.jit(platform_target='trn3'))",
            rule="arch",
        )
    return m


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


def _scale_values(t: Tensor) -> np.ndarray:
    v = t.read()
    if _dt.name_of(t.dtype) == "float8_e8m0fnu":  # stored as the value 2**(s-127)
        return (np.log2(v.astype(np.float64)) + 127).astype(np.int64).reshape(t.partitions, -1)
    return v.astype(np.int64).reshape(t.partitions, -1)


@_strict
def nc_matmul_mx(
    dst: Any,
    stationary: Any,
    moving: Any,
    stationary_scale: Any,
    moving_scale: Any,
    tile_position: Any = None,
    tile_size: Any = None,
    accumulate: Any = None,
    name: Any = None,
) -> None:
    """MX matmul: dequantise each 8x4 group by ``2**(scale-127)``, contract over partitions and the 4 packed
    values: ``dst[M, N] (+)= sum_k sum_q st[k, M, q] * mv[k, N, q]`` (v4)."""
    api = "nisa.nc_matmul_mx"
    m = _require_v4(api)
    loc = user_location()
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
    out = _x.new_tile(m, (mm, n), _dt.float32, "psum", loc)
    for t in (st, mv, ss, ms):
        m.check_read(t, loc)
    attrs = {
        "stationary_free": mm,
        "moving_free": n,
        "contract": 4 * k,
        "accumulate": False,
        "dtype": _dt.name_of(mv.dtype),
        "mx": True,
    }
    p = m.emit(TENSOR, "nc_matmul", [st, mv, ss, ms], [out], 2 * 4 * k * mm * n, attrs, loc)
    vals = None
    if m.numerics:
        a = _mx.dequantize(st.read().reshape(k, mm), st.dtype, _scale_values(ss))
        b = _mx.dequantize(mv.read().reshape(k, n), mv.dtype, _scale_values(ms))
        vals = np.einsum("kiq,kjq->ij", a, b).astype(np.float32)
    res = _x.commit(m, p, out, vals, None)
    _accumulate_into(api, d, res, accumulate)


@_strict
def quantize_mx(dst: Any, src: Any, dst_scale: Any, name: Any = None) -> None:
    """bf16/fp16 ``src[P, 4F]`` -> MX x4 ``dst[P, F]`` and 8-bit scales (one per 8x4 group) (v4, VectorE)."""
    api = "nisa.quantize_mx"
    m = _require_v4(api)
    loc = user_location()
    d = _dst(dst, api, buffers=("sbuf",))
    if not _dt.is_packed(d.dtype) or _dt.name_of(d.dtype) == "float4_e2m1fn_x4":
        raise DtypeError(
            f"{api}: dst must be float8_e5m2_x4 or float8_e4m3fn_x4, got {_dt.name_of(d.dtype)}",
            rule="dtype",
        )
    s = _x.tile(src, api, "src", psum=False)
    if _dt.name_of(s.dtype) not in ("bfloat16", "float16"):
        raise DtypeError(f"{api}: src must be bfloat16 or float16, got {_dt.name_of(s.dtype)}", rule="dtype")
    p = s.partitions
    if p % 8 or s.free_size % 4:
        raise TileShapeError(
            f"{api}: src {list(s.shape)} must have a multiple of 8 partitions and of 4 elements per partition",
            rule="tile-shape",
        )
    _check_fit(api, d, (p, s.free_size // 4))
    sc = _dst(dst_scale, api, buffers=("sbuf",))
    if _dt.name_of(sc.dtype) not in ("uint8", "float8_e8m0fnu"):
        raise DtypeError(
            f"{api}: dst_scale must be uint8 or float8_e8m0fnu, got {_dt.name_of(sc.dtype)}", rule="dtype"
        )
    rows = _mx.scale_rows(p)
    if sc.partitions <= int(rows.max()) or sc.free_size != s.free_size // 4:
        raise TileShapeError(
            f"{api}: dst_scale {list(sc.shape)} must cover {int(rows.max()) + 1} partitions and {s.free_size // 4} "
            "elements per partition",
            rule="tile-shape",
        )
    m.check_read(s, loc)
    m.check_write(d, loc)
    m.check_write(sc, loc)
    m.emit(VECTOR, "quantize_mx", [s], [d, sc], s.size, None, loc)
    if not m.numerics:
        d.mark_written()
        sc.mark_written()
        return
    bits, scales = _mx.quantize(s.read().reshape(p, -1), d.dtype)
    d.write(bits.reshape(d.shape))
    cur = sc.read(check_init=False).reshape(sc.partitions, -1).copy()
    if _dt.name_of(sc.dtype) == "float8_e8m0fnu":
        cur[rows] = np.exp2(scales.astype(np.float64) - 127)
    else:
        cur[rows] = scales
    sc.write(_dt.round_to(cur.reshape(sc.shape), sc.dtype))


# ---- VectorE / ScalarE / GpSimd ---------------------------------------------------------------------------------


@_strict
def tensor_copy(
    dst: Any, src: Any, engine: Any = engine.unknown, name: Any = None, dtype: Any = None
) -> None:
    """Copy ``src`` into ``dst`` (bit-exact for equal dtypes, else via fp32; the result dtype is dst's).

    ``dtype=`` is not part of NKI 0.x but AWS's own tutorials pass it; it is accepted and ignored (dst's
    dtype decides, as the reference states for every ISA op)."""
    api = "nisa.tensor_copy"
    d = _dst(dst, api)
    _member(engine, _b1.engine, api, "engine")
    res = _b1.tensor_copy(src, dtype=d.dtype, engine=engine)
    _into(api, d, res)


@_strict
def memset(dst: Any, value: Any, engine: Any = engine.unknown, name: Any = None) -> None:
    """Fill ``dst`` with ``value`` (VectorE / GpSimd)."""
    api = "nisa.memset"
    d = _dst(dst, api)
    _member(engine, _b1.engine, api, "engine")
    if _dt.is_packed(d.dtype) and value != 0:
        raise KernelArgumentError(
            f"{api}: an MX x4 tensor can only be set to 0, got {value!r}", rule="bad-argument"
        )
    if not _dt.is_float(d.dtype) and isinstance(value, float) and not float(value).is_integer():
        raise KernelArgumentError(
            f"{api}: value {value!r} does not match the integer dtype {_dt.name_of(d.dtype)}",
            rule="bad-argument",
        )
    res = _b1.memset(d.shape, value, d.dtype, engine=engine)
    _into(api, d, res)


@_strict
def tensor_tensor(
    dst: Any, data1: Any, data2: Any, op: Any, engine: Any = engine.unknown, name: Any = None
) -> None:
    """``dst = data1 op data2`` element-wise (no broadcasting)."""
    api = "nisa.tensor_tensor"
    d = _dst(dst, api)
    _member(engine, _b1.engine, api, "engine")
    if isinstance(data1, Tensor) and isinstance(data2, Tensor):
        p1, p2 = (data1.shape[0] if data1.shape else 1), (data2.shape[0] if data2.shape else 1)
        if p1 != p2 or data1.size // max(p1, 1) != data2.size // max(p2, 1):
            raise TileShapeError(
                f"{api}: data1 {list(data1.shape)} and data2 {list(data2.shape)} must have the same partitions "
                "and elements per partition (no broadcasting in nki.isa)",
                rule="shape-mismatch",
            )
        if data1.shape != data2.shape:
            data2 = data2.reshape(data1.shape) if data2.dims is not None and _whole(data2) else data2
    res = _b1.tensor_tensor(data1, data2, op, dtype=d.dtype, engine=engine)
    _into(api, d, res)


def _whole(t: Tensor) -> bool:
    return all(
        not isinstance(e, int) and e[0] == 0 and e[1] == 1 and e[2] == n for e, n in zip(t.dims, t.st.shape)
    )  # type: ignore[union-attr]


@_strict
def tensor_scalar(
    dst: Any,
    data: Any,
    op0: Any,
    operand0: Any,
    reverse0: bool = False,
    op1: Any = None,
    operand1: Any = None,
    reverse1: bool = False,
    engine: Any = engine.unknown,
    name: Any = None,
) -> None:
    """``dst = (data op0 operand0) op1 operand1`` with scalar or ``(P, 1)`` operands."""
    api = "nisa.tensor_scalar"
    d = _dst(dst, api)
    _member(engine, _b1.engine, api, "engine")
    res = _b1.tensor_scalar(
        data, op0, operand0, reverse0, op1, operand1, reverse1, dtype=d.dtype, engine=engine
    )
    _into(api, d, res)


@_strict
def scalar_tensor_tensor(
    dst: Any,
    data: Any,
    op0: Any,
    operand0: Any,
    op1: Any,
    operand1: Any,
    reverse0: bool = False,
    reverse1: bool = False,
    name: Any = None,
) -> None:
    """``dst = (data op0 operand0) op1 operand1`` with operand0 scalar/``(P, 1)`` and operand1 a tile."""
    api = "nisa.scalar_tensor_tensor"
    d = _dst(dst, api)
    res = _b1.scalar_tensor_tensor(
        data=data,
        op0=op0,
        operand0=operand0,
        op1=op1,
        operand1=operand1,
        reverse0=reverse0,
        reverse1=reverse1,
        dtype=d.dtype,
    )
    _into(api, d, res)


@_strict
def activation(
    dst: Any,
    op: Any,
    data: Any,
    bias: Any = None,
    scale: Any = 1.0,
    reduce_op: Any = None,
    reduce_res: Any = None,
    reduce_cmd: Any = reduce_cmd.idle,
    name: Any = None,
) -> None:
    """``dst = op(data * scale + bias)`` on the ScalarE (fp32), optionally reducing into its registers."""
    api = "nisa.activation"
    d = _dst(dst, api)
    _member(reduce_cmd, _b1.reduce_cmd, api, "reduce_cmd")
    res = _b1.activation(
        op,
        data,
        bias=bias,
        scale=scale,
        reduce_op=reduce_op,
        reduce_res=reduce_res,
        reduce_cmd=reduce_cmd,
        dtype=d.dtype,
    )
    _into(api, d, res)


@_strict
def activation_reduce(
    dst: Any,
    op: Any,
    data: Any,
    reduce_op: Any,
    reduce_res: Any,
    bias: Any = None,
    scale: Any = 1.0,
    name: Any = None,
) -> None:
    """``activation`` that also writes the free-axis sum of its result into ``reduce_res``."""
    api = "nisa.activation_reduce"
    d = _dst(dst, api)
    res = _b1.activation_reduce(
        op, data, reduce_op=reduce_op, reduce_res=reduce_res, bias=bias, scale=scale, dtype=d.dtype
    )
    _into(api, d, res)


@_strict
def tensor_reduce(
    dst: Any, op: Any, data: Any, axis: Any, negate: bool = False, keepdims: bool = False, name: Any = None
) -> None:
    """Reduce trailing free axes of ``data`` into ``dst``."""
    api = "nisa.tensor_reduce"
    d = _dst(dst, api)
    res = _b1.tensor_reduce(op, data, axis, dtype=d.dtype, negate=negate, keepdims=keepdims)
    _into(api, d, res)


@_strict
def reciprocal(dst: Any, data: Any, name: Any = None) -> None:
    """``dst = 1 / data`` (fp32, VectorE)."""
    api = "nisa.reciprocal"
    d = _dst(dst, api)
    _into(api, d, _b1.reciprocal(data, dtype=d.dtype))


@_strict
def iota(dst: Any, pattern: Any, offset: int = 0, channel_multiplier: int = 0, name: Any = None) -> None:
    """``dst[p, i...] = offset + p * channel_multiplier + sum(step * i)`` over a <=4-D ``[step, count]``
    pattern, computed in int32 and cast to dst's dtype (GpSimd, SBUF)."""
    api = "nisa.iota"
    m = _x.machine(api)
    loc = user_location()
    d = _dst(dst, api, buffers=("sbuf",))
    try:
        pairs = [(int(s), int(c)) for s, c in pattern]
    except (TypeError, ValueError):
        raise KernelArgumentError(
            f"{api}: pattern must be a list of [step, count] pairs, got {pattern!r}", rule="bad-argument"
        ) from None
    if not 1 <= len(pairs) <= 4:
        raise KernelArgumentError(f"{api}: pattern must have 1 to 4 [step, count] pairs", rule="bad-argument")
    free = int(np.prod([c for _, c in pairs]))
    p = d.partitions
    shape = (p, *tuple(c for _, c in pairs))
    _check_fit(api, d, shape)
    out = _x.new_tile(m, shape, d.dtype, "sbuf", loc)
    pend = m.emit(GPSIMD, "iota", [], [out], 0, None, loc)
    vals = None
    if m.numerics:
        v = np.full(shape, int(offset), dtype=np.int64)
        v = v + int(channel_multiplier) * np.arange(p, dtype=np.int64).reshape((p,) + (1,) * len(pairs))
        for ax, (step, count) in enumerate(pairs):
            sh = [1] * len(shape)
            sh[ax + 1] = count
            v = v + step * np.arange(count, dtype=np.int64).reshape(sh)
        v32 = v.astype(np.int32)
        vals = v32.astype(np.float32) if _dt.is_float(d.dtype) else v32
    del free
    _into(api, d, _x.commit(m, pend, out, vals, None))


# ---- less used VectorE / GpSimd instructions ---------------------------------------------------------------


@_strict
def tensor_copy_predicated(
    dst: Any, src: Any, predicate: Any, reverse_pred: bool = False, name: Any = None
) -> None:
    """``dst = src`` where ``predicate != 0`` (inverted by ``reverse_pred``), else ``dst`` is kept (VectorE)."""
    api = "nisa.tensor_copy_predicated"
    d = _dst(dst, api)
    if isinstance(predicate, Tensor) and _dt.name_of(predicate.dtype) not in ("uint8", "uint16", "uint32"):
        raise DtypeError(
            f"{api}: predicate must be uint8, uint16 or uint32, got {_dt.name_of(predicate.dtype)}",
            rule="dtype",
        )
    _b1.tensor_copy_predicated(src=src, dst=d, predicate=predicate, reverse_pred=reverse_pred)


@_strict
def tensor_tensor_scan(
    dst: Any,
    data0: Any,
    data1: Any,
    initial: Any,
    op0: Any,
    op1: Any,
    reverse0: bool = False,
    reverse1: bool = False,
    name: Any = None,
) -> None:
    """Per partition: ``r[i] = op1(op0(data0[i], r[i-1]), data1[i])`` with ``r[-1] = initial`` (VectorE)."""
    api = "nisa.tensor_tensor_scan"
    d = _dst(dst, api)
    _into(api, d, _b1.tensor_tensor_scan(data0, data1, initial, op0, op1, reverse0, reverse1, dtype=d.dtype))


@_strict
def bn_stats(dst: Any, data: Any, name: Any = None) -> None:
    """Batch-norm statistics of up to 512 elements per partition: 6 values (VectorE)."""
    api = "nisa.bn_stats"
    d = _dst(dst, api)
    _into(api, d, _b1.bn_stats(data, dtype=d.dtype))


@_strict
def bn_aggr(dst: Any, data: Any, name: Any = None) -> None:
    """Aggregate ``bn_stats`` results into (mean, population variance) per partition (VectorE)."""
    api = "nisa.bn_aggr"
    d = _dst(dst, api)
    _into(api, d, _b1.bn_aggr(data, dtype=d.dtype))


@_strict
def max8(dst: Any, src: Any, name: Any = None) -> None:
    """The 8 largest values per partition, in descending order (VectorE)."""
    api = "nisa.max8"
    d = _dst(dst, api)
    _into(api, d, _b1.max8(src=src, dtype=d.dtype))


@_strict
def nc_stream_shuffle(dst: Any, src: Any, shuffle_mask: Any, name: Any = None) -> None:
    """Within each 32-partition quadrant ``dst[i] = src[mask[i]]``; 255 keeps ``dst[i]`` (VectorE)."""
    api = "nisa.nc_stream_shuffle"
    d = _dst(dst, api)
    _b1.nc_stream_shuffle(src, d, shuffle_mask)


@_strict
def tensor_partition_reduce(dst: Any, op: Any, data: Any, name: Any = None) -> None:
    """Reduce across partitions (add, average, max, bitwise_or, bitwise_and) into ``dst[1, F]`` (GpSimd)."""
    api = "nisa.tensor_partition_reduce"
    d = _dst(dst, api)
    _into(api, d, _b1.tensor_partition_reduce(op, data, dtype=d.dtype))


@_strict
def select_reduce(
    dst: Any,
    predicate: Any,
    on_true: Any,
    on_false: Any,
    reduce_res: Any = None,
    reduce_cmd: Any = reduce_cmd.idle,
    reduce_op: Any = None,
    reverse_pred: bool = False,
    name: Any = None,
) -> None:
    """``dst = predicate ? on_true : on_false`` with an optional max-reduce into ``reduce_res`` (VectorE)."""
    api = "nisa.select_reduce"
    d = _dst(dst, api)
    _member(reduce_cmd, _b1.reduce_cmd, api, "reduce_cmd")
    _b1.select_reduce(
        dst=d,
        predicate=predicate,
        on_true=on_true,
        on_false=on_false,
        reduce_res=reduce_res,
        reduce_cmd=reduce_cmd,
        reduce_op=reduce_op if reduce_op is not None else np.maximum,
        reverse_pred=reverse_pred,
    )


@_strict
def tensor_scalar_reduce(
    dst: Any,
    data: Any,
    op0: Any,
    operand0: Any,
    reduce_op: Any,
    reduce_res: Any = None,
    reverse0: bool = False,
    reduce_cmd: Any = reduce_cmd.reset_reduce,
    reduce_init: Any = None,
    reduce_res_negate: bool = False,
    name: Any = None,
) -> None:
    """``dst = data op0 operand0`` and ``reduce_res = reduce(dst)`` over the free dims (VectorE).

    Only the default accumulator handling (``reduce_cmd=reset_reduce``, no ``reduce_init``, no negation) is
    simulated so far; the other forms raise ``not-simulated``."""
    api = "nisa.tensor_scalar_reduce"
    d = _dst(dst, api)
    if (
        reduce_cmd != _b1.reduce_cmd.reset_reduce
        or reduce_init is not None
        or reduce_res_negate
        or reduce_res is None
    ):
        raise UnsupportedError(
            f"{api}: only reduce_cmd=reset_reduce with a reduce_res, no reduce_init and no reduce_res_negate is "
            "simulated yet",
            rule="not-simulated",
        )
    res = _b1.tensor_scalar_reduce(
        data=data, op0=op0, operand0=operand0, reduce_op=reduce_op, reduce_res=reduce_res, reverse0=reverse0,
        dtype=d.dtype,
    )  # fmt: skip
    _into(api, d, res)


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
    m = _x.machine(api)
    loc = user_location()
    _member(oob_mode, _b1.oob_mode, api, "oob_mode")
    d = _dst(dst, api, buffers=("sbuf", "hbm"))
    try:
        op = _b1._alu(reduce_op, api)
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
    for t in items:
        m.check_read(t, loc)
    m.check_write(d, loc)
    m.emit(DMA, "dma_copy", items, [d], d.size * (len(items) - 1), {"indirect": False, "rmw": False}, loc)
    if not m.numerics:
        d.mark_written()
        return
    acc = np.zeros(d.shape, dtype=np.float32)
    for t in items:
        acc += t.read().reshape(d.shape).astype(np.float32)
    d.write(_dt.round_to(acc, d.dtype))


# ---- not simulated in this version --------------------------------------------------------------------------


def _not_simulated(op: str, why: str) -> Callable[..., Any]:
    def f(*args: Any, **kwargs: Any) -> Any:
        raise UnsupportedError(f"nisa.{op} is not simulated by the devkit yet ({why})", rule="not-simulated")

    f.__name__ = op
    f.__doc__ = f"Not simulated yet: {why}."
    return f


sendrecv = _strict(_lnc.sendrecv)
core_barrier = _strict(_lnc.core_barrier)
register_alloc = _not_simulated("register_alloc", "no virtual registers / dynamic loops yet")
register_move = _not_simulated("register_move", "no virtual registers / dynamic loops yet")
register_load = _not_simulated("register_load", "no virtual registers / dynamic loops yet")
register_store = _not_simulated("register_store", "no virtual registers / dynamic loops yet")


def __getattr__(name: str) -> Any:
    known = {
        "tensor_scalar_cumulative",
        "exponential", "nc_find_index8",
        "nc_match_replace8", "range_select", "activate2", "dropout",
        "rng", "set_rng_seed", "rand2", "rand_set_state", "rand_get_state", "affine_select", "local_gather",
        "nc_n_gather", "sequence_bounds", "nonzero_with_count", "topk",
    }  # fmt: skip
    if name in known:
        return _not_simulated(name, "its NKI 0.x form has no adapter in this version of the kit")
    raise AttributeError(f"module 'nki.isa' has no attribute {name!r}")


_ = (dma_engine,)
