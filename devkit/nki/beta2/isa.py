"""``nki.isa`` (NKI 0.x / Beta 2): every instruction writes its destination ``dst``.

The instructions that only change the calling convention are rows of :mod:`devkit.nki.beta2.isa_table`, built
into adapters over the simulator's instruction layer (:mod:`devkit.nki._isa_layer`): each checks the NKI 0.x
convention (``dst`` first, enums by member, no unknown keyword arguments), executes the instruction's declaration
with ``dtype=dst.dtype`` and retargets its result into ``dst`` -- one instruction in the trace, as on hardware.
The rest are written out here and in ``isa_more``, ``isa_mx`` and ``isa_rng`` (here and in ``isa_more`` as a
plan and a numerics function run by the layer's executor).  Every instruction
returns an :class:`NkiInstruction`.  Semantics: ``reference/nki_beta2.md`` §5.

``nc_matmul`` accumulates implicitly: with ``accumulate=None`` the first matmul write to a PSUM element
overwrites it and later ones add (tracked per element), ``accumulate=True``/``False`` force add/overwrite.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from devkit import dtypes as _dt
from devkit.errors import (
    DtypeError,
    KernelArgumentError,
    TileShapeError,
)
from devkit.nki import _isa_layer as _layer
from devkit.nki import isa as _b1
from devkit.nki._isa_vector import _iota_values
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
from devkit.sim import unwritten as _unwritten
from devkit.sim.storage import live_aliases as _live_aliases
from devkit.sim.tensor import Tensor
from devkit.trace import DMA, GPSIMD

from . import constants  # noqa: F401  (nki.isa.constants)
from ._convention import (  # noqa: F401  (NkiInstruction, NkiValidationError are part of nki.isa)
    NkiInstruction,
    NkiValidationError,
    _accumulate_into,
    _check_fit,
    _dst,
    _into,
    _is_whole,
    _member,
    _strict,
)
from .isa_more import *  # noqa: F403
from .isa_more import _affine_values
from .isa_mx import nc_matmul_mx, quantize_mx
from .isa_rng import rand2, rand_get_state, rand_set_state, rng, set_rng_seed  # noqa: F401  (public nki.isa names)
from .isa_table import INSTRUCTIONS as _INSTRUCTIONS

# the instructions that are pure adapters, generated from their rows in isa_table
globals().update(_INSTRUCTIONS)

# deprecated aliases kept by NKI 0.x
tensor_engine = engine.tensor
vector_engine = engine.vector
scalar_engine = engine.scalar
gpsimd_engine = engine.gpsimd
unknown_engine = engine.unknown

__all__ = [
    *(
        n
        for n in _INSTRUCTIONS
        if n in ("activation", "memset", "nc_transpose", "tensor_copy", "tensor_scalar", "tensor_tensor")
    ),
    "dge_mode",
    "dma_copy",
    "dma_engine",
    "engine",
    "get_nc_version",
    "matmul_perf_mode",
    "nc_matmul",
    "nc_matmul_mx",
    "nc_version",
    "oob_mode",
    "quantize_mx",
    "reduce_cmd",
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
    s = _layer.step("nisa.dma_copy", DMA, "dma_copy")
    s.reads = [src]
    s.dst = dst
    s.exact = True
    s.attrs = {"indirect": False, "rmw": False}
    _layer.issue(s, _moved_values)


def _moved_values(s: _layer.Step) -> Any:
    (src,) = s.reads
    dst = s.dst
    assert dst is not None
    g = _unwritten.moved(src, to_chip=dst.st.on_chip)  # SBUF to SBUF: never-written elements flow
    v = src.read(check_init=False)
    st = dst.st
    if (
        g is None
        and st.uninit is not None
        and st.n_uninit == st.uninit.size
        and _is_whole(dst)
        and st.lazy is None
        and st.base is None
        and not _live_aliases(st)
    ):
        # the first write of a fresh tile, all of it: no per-element initialisation bookkeeping (not through
        # a reshape alias or into a tensor that has one: their initialisation state is shared)
        st.overwritten_whole()
        np.copyto(st.data, v if v.shape == dst.shape else v.reshape(dst.shape))
        st.written = True
        st.uninit, st.n_uninit = None, 0
        return _layer.WRITTEN
    dst.write(v if v.shape == dst.shape else v.reshape(dst.shape))
    _unwritten.carry(dst, g, src)
    return _layer.WRITTEN


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


# ---- VectorE / ScalarE / GpSimd ---------------------------------------------------------------------------------


@_strict
def iota(dst: Any, pattern: Any, offset: int = 0, channel_multiplier: int = 0, name: Any = None) -> None:
    """``dst[p, i...] = offset + p * channel_multiplier + sum(step * i)`` over a <=4-D ``[step, count]``
    pattern, computed in int32 and cast to dst's dtype (GpSimd, SBUF)."""
    api = "nisa.iota"
    s = _layer.step(api, GPSIMD, "iota")
    d = _dst(dst, api, buffers=("sbuf",))
    s.shape, s.args = _affine_values(pattern, offset, channel_multiplier, d.partitions, api)
    _check_fit(api, d, s.shape)
    s.dtype = d.dtype
    _into(api, d, _layer.issue(s, _iota_values))  # type: ignore[arg-type]


# ---- LNC-2 exchange and registers ----------------------------------------------------------------------------


sendrecv = _strict(_lnc.sendrecv)
core_barrier = _strict(_lnc.core_barrier)
register_alloc = _registers.register_alloc
register_move = _strict(_registers.register_move)
register_load = _strict(_registers.register_load)
register_store = _strict(_registers.register_store)
VirtualRegister = _registers.VirtualRegister


_ = (dma_engine,)
