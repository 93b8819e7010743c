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

from collections.abc import Callable
from typing import Any

import numpy as np

from devkit import dtypes as _dt
from devkit.errors import (
    DtypeError,
    KernelArgumentError,
    TileShapeError,
    UnsupportedError,
    user_location,
)
from devkit.nki import isa as _b1
from devkit.nki.beta2 import lnc as _lnc
from devkit.nki.beta2 import registers as _registers
from devkit.nki.beta2.constants import (
    dge_mode,
    dma_engine,
    engine,
    matmul_perf_mode,
    nc_version,
    oob_mode,
    reduce_cmd,
)
from devkit.nki.beta2.views import refuse_snapshot_write as _refuse_snapshot_write
from devkit.sim import instr as _x
from devkit.sim.tensor import Tensor
from devkit.trace import DMA, GPSIMD

from . import constants  # noqa: F401  (nki.isa.constants)
from ._convention import (  # noqa: F401  (NkiValidationError is part of nki.isa)
    NkiValidationError,
    _accumulate_into,
    _check_fit,
    _dst,
    _into,
    _member,
    _strict,
)
from .isa_more import *  # noqa: F403
from .isa_mx import nc_matmul_mx, quantize_mx

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
    _refuse_snapshot_write(dst, api)
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
    """A copy between in-bounds affine views of one dtype, outside PSUM (the common case)."""
    if not (isinstance(dst, Tensor) and isinstance(src, Tensor)):
        return False
    m = _x.current()
    if m is None or not (dst.st.alive and src.st.alive):
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
    if not m.numerics:
        dst.mark_written()
        return
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
    kwargs = {
        "is_stationary_onezero": is_stationary_onezero,
        "is_moving_onezero": is_moving_onezero,
        "is_transpose": is_transpose,
        "tile_position": tile_position,
        "tile_size": tile_size,
        "perf_mode": None if pm in (None, matmul_perf_mode.none) else pm.value,
    }
    chunks = _wide_moving_chunks(api, d, moving)
    if chunks is None:
        _accumulate_into(api, d, _b1.nc_matmul(stationary, moving, **kwargs), accumulate)
        return
    for lo, hi in chunks:  # NeuronCore-v4: one wide matmul, simulated as 512-column passes
        _accumulate_into(api, d[:, lo:hi], _b1.nc_matmul(stationary, moving[:, lo:hi], **kwargs), accumulate)


def _wide_moving_chunks(api: str, dst: Tensor, moving: Any) -> list[tuple[int, int]] | None:
    """NeuronCore-v4 takes a moving tensor of up to 4096 columns (fp32 result) or 8192 (bf16 result); the
    kit's TensorE executes 512 at a time, so such a matmul runs as column chunks.  None: a normal matmul."""
    m = _x.machine(api)
    if (
        m.geometry.nc_version < 4
        or not isinstance(moving, Tensor)
        or moving.ndim != 2
        or moving.shape[1] <= 512
    ):
        return None
    n = moving.shape[1]
    limit = 4096 if _dt.name_of(dst.dtype) == "float32" else 8192
    if n > limit:
        raise TileShapeError(
            f"{api}: moving free size {n} exceeds {limit} for a {_dt.name_of(dst.dtype)} result on NeuronCore-v4",
            rule="matmul-moving-size",
        )
    if dst.ndim != 2 or dst.shape[1] != n:
        raise TileShapeError(
            f"{api}: dst {list(dst.shape)} must be [M, {n}] for a wide moving tensor", rule="dst-shape"
        )
    return [(lo, min(lo + 512, n)) for lo in range(0, n, 512)]


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


# ---- not simulated in this version --------------------------------------------------------------------------


def _not_simulated(op: str, why: str) -> Callable[..., Any]:
    def f(*args: Any, **kwargs: Any) -> Any:
        raise UnsupportedError(f"nisa.{op} is not simulated by the devkit yet ({why})", rule="not-simulated")

    f.__name__ = op
    f.__doc__ = f"Not simulated yet: {why}."
    return f


sendrecv = _strict(_lnc.sendrecv)
core_barrier = _strict(_lnc.core_barrier)
register_alloc = _registers.register_alloc
register_move = _strict(_registers.register_move)
register_load = _strict(_registers.register_load)
register_store = _strict(_registers.register_store)
VirtualRegister = _registers.VirtualRegister


def __getattr__(name: str) -> Any:
    known = {
        "activate2", "dropout",
        "rng", "set_rng_seed", "rand2", "rand_set_state", "rand_get_state",
        "topk",
    }  # fmt: skip
    if name in known:
        return _not_simulated(name, "its NKI 0.x form has no adapter in this version of the kit")
    raise AttributeError(f"module 'nki.isa' has no attribute {name!r}")


_ = (dma_engine,)
