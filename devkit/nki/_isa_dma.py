"""DMA instructions of ``nki.isa``: ``dma_copy`` (with read-modify-write and out-of-bounds modes) and
``dma_transpose``."""

from __future__ import annotations

from typing import Any

import numpy as np

from devkit import dtypes as _dt
from devkit.errors import (
    KernelArgumentError,
    MemoryPlacementError,
    TileShapeError,
    UnsupportedError,
)
from devkit.nki._isa_common import (
    _alu,
    dge_mode,
    oob_mode,
)
from devkit.nki._isa_layer import WRITTEN, Instruction, Step
from devkit.sim import instr as _x
from devkit.sim import unwritten as _unwritten
from devkit.sim.tensor import Tensor
from devkit.trace import DMA


def _dma_copy(
    s: Step,
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
    api = s.api
    for t, nm in ((dst, "dst"), (src, "src")):
        if not isinstance(t, Tensor):
            raise KernelArgumentError(f"{api}: {nm} must be a tensor, got {type(t).__name__}")
        t.check_alive()
        if t.st.buffer == "psum":
            raise MemoryPlacementError(f"{api}: DMA cannot access PSUM ({nm})", rule="dma-psum")
    if int(dge_mode) == 2 and s.m.geometry.nc_version < 3:
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
    s.reads = [src]
    s.dst = dst
    s.accumulate = rmw is not None
    s.attrs = {"indirect": src.dims is None or dst.dims is None, "rmw": rmw is not None}
    s.args = (marr, skip)


def _dma_copy_values(s: Step) -> Any:
    (src,) = s.reads
    dst = s.dst
    assert dst is not None
    marr, skip = s.args
    sel = np.ones(dst.shape, bool) if marr is None else marr.copy()
    if skip:
        sb = src.oob_positions()
        db = dst.oob_positions()
        if sb is not None:
            sel &= ~sb.reshape(dst.shape) if sb.size == sel.size else True
        if db is not None:
            sel &= ~db
    rsel = None if marr is None and not skip else sel.reshape(src.shape)
    # a plain copy between on-chip buffers moves never-written elements along (devkit.sim.unwritten)
    g = _unwritten.moved(src, rsel, to_chip=dst.st.on_chip) if not s.accumulate else None
    v = src.read(rsel, check_init=s.accumulate)
    v = v.reshape(dst.shape)
    v = v.astype(np.float32) if _dt.is_float(src.dtype) else v
    if s.accumulate:  # read-modify-write: dst += src
        key = dst._fancy_key(dst._index_arrays(), sel)
        data = dst.st.data
        acc = data.astype(np.float32) if _dt.is_float(dst.dtype) else data.astype(np.int64)
        np.add.at(acc, key, v[sel])
        data[...] = _dt.round_to(acc, dst.dtype)
        dst.st.written = True
        return WRITTEN
    dst.write(_dt.round_to(v, dst.dtype), sel)
    if g is not None:
        _unwritten.carry(dst, g.reshape(dst.shape) & sel, src)
    return WRITTEN


_TRANSPOSE_AXES = {2: (1, 0), 3: (2, 1, 0), 4: (3, 1, 2, 0)}


def _dma_transpose(
    s: Step, src: Tensor, *, axes: Any = None, mask: Any = None, dtype: Any = None, **kwargs: Any
) -> None:
    """Transpose through the DMA (2-D [1,0], 3-D [2,1,0], 4-D [3,1,2,0]) into a new SBUF tile."""
    api = s.api
    if not isinstance(src, Tensor):
        raise KernelArgumentError(f"{api}: src must be a tensor")
    src.check_alive()
    nd = src.ndim
    if nd not in _TRANSPOSE_AXES:
        raise TileShapeError(f"{api}: src must be 2-D, 3-D or 4-D, got {list(src.shape)}")
    ax = tuple(axes) if axes is not None else _TRANSPOSE_AXES[nd]
    if ax != _TRANSPOSE_AXES[nd]:
        raise KernelArgumentError(f"{api}: axes must be {_TRANSPOSE_AXES[nd]} for a {nd}-D source, got {ax}")
    out_shape = tuple(src.shape[a] for a in ax)
    if out_shape[0] > 128:
        raise TileShapeError(
            f"{api}: the result would have {out_shape[0]} partitions", rule="partition-limit"
        )
    s.dtype = _x.out_dtype(dtype, src.dtype, api)
    s.mask = marr = _x.mask_array(mask, out_shape, api)
    src.check_bounds(None if marr is None else marr.transpose(np.argsort(ax)), "dma_transpose source")
    s.shape = out_shape
    s.reads = [src]
    s.attrs = {"transpose": True}
    s.args = ax


def _dma_transpose_values(s: Step) -> np.ndarray:
    (src,) = s.reads
    ax, marr = s.args, s.mask
    rmask = None if marr is None else marr.transpose(np.argsort(ax))
    g = _unwritten.moved(src, rmask)  # from SBUF: never-written elements flow (devkit.sim.unwritten)
    v = src.read(rmask, check_init=False).transpose(ax)
    s.garbage = None if g is None else g.transpose(ax)
    return v.astype(np.float32) if _dt.is_float(s.dtype) else v


# ---- the declarations ---------------------------------------------------------------------------------------

DMA_COPY = Instruction("dma_copy", DMA, "dma_copy", _dma_copy, _dma_copy_values, writes_dst=True)
DMA_TRANSPOSE = Instruction("dma_transpose", DMA, "dma_transpose", _dma_transpose, _dma_transpose_values)

#: the family's public Beta-1 instructions (:mod:`devkit.nki.isa` generates their functions)
INSTRUCTIONS = (
    DMA_COPY,
    DMA_TRANSPOSE,
)
