"""Instruction execution: the shared machinery behind every ``nki.language`` / ``nki.isa`` call.

Each public API function validates its own arguments, then calls one of the executors here, which
(1) checks the operands against the engine's rules, (2) allocates the result, (3) issues the
instruction record, and (4) in numerics runs computes the values (fp32 arithmetic on the stored
values, rounded to the output dtype on write).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from devkit import dtypes as dt
from devkit.errors import (
    DtypeError,
    IndexingError,
    KernelArgumentError,
    MemoryPlacementError,
    TileShapeError,
    UnsupportedError,
    user_location,
)
from devkit.sim import unwritten
from devkit.sim.deferred import Deferred, EvacuationItem, Product
from devkit.sim.index import IndexExpr, MaskExpr
from devkit.sim.machine import Machine, Pending, current
from devkit.sim.storage import HBM_BUFFERS
from devkit.sim.tensor import Tensor, mark_initialised
from devkit.trace import DMA, GPSIMD, SCALAR, TENSOR, VECTOR

PMAX = 128
ASSIGNED = object()  # marks a view already updated in place by an augmented assignment

Scalar = (int, float, bool, np.integer, np.floating, np.bool_)


def machine(api: str = "this NKI API") -> Machine:
    m = current()
    if m is None:
        raise UnsupportedError(
            f"{api} was called outside a running kernel; call the kernel through nki.simulate_kernel, a "
            "@nki.jit function, devkit.simulate or devkit.estimate",
            rule="outside-kernel",
        )
    return m


# ---- operand checks ------------------------------------------------------------------------------


def tile(x: Any, api: str, name: str, *, psum: bool = True, sbuf: bool = True) -> Tensor:
    """Check that ``x`` is a live on-chip tile (partition dim first) an engine may read."""
    if not isinstance(x, Tensor):
        raise KernelArgumentError(f"{api}: operand '{name}' must be a tile, got {type(x).__name__}")
    x.check_alive()
    buf = x.st.buffer
    if buf in HBM_BUFFERS:
        raise MemoryPlacementError(
            f"{api}: operand '{name}' is in HBM ({buf}); compute engines read SBUF or PSUM only -- "
            "nl.load it into SBUF first",
            rule="operand-in-hbm",
        )
    if buf == "psum" and not psum:
        raise MemoryPlacementError(
            f"{api}: operand '{name}' must be in SBUF, not PSUM", rule="operand-in-psum"
        )
    if buf == "sbuf" and not sbuf:
        raise MemoryPlacementError(
            f"{api}: operand '{name}' must be in PSUM, not SBUF", rule="operand-in-sbuf"
        )
    if x.pax not in (0, None) and x.ndim > 0:
        raise IndexingError(
            f"{api}: operand '{name}' of shape {list(x.shape)} is not a tile: its partition dimension is at "
            f"position {x.pax}; index the block dimensions first (e.g. t[i])",
            rule="not-a-tile",
        )
    if x.ndim and x.shape[0] > PMAX:
        raise TileShapeError(
            f"{api}: operand '{name}' has {x.shape[0]} partitions; the limit is {PMAX}",
            rule="partition-limit",
        )
    return x


def aligned_shape(t: Tensor) -> tuple[int, ...]:
    """A rank-1 on-chip tile ``(P,)`` behaves as ``(P, 1)`` (one value per partition)."""
    if t.ndim == 1 and t.st.on_chip:
        return (t.shape[0], 1)
    return t.shape


def broadcast(api: str, shapes: Sequence[tuple[int, ...]]) -> tuple[int, ...]:
    """The shape ``shapes`` broadcast to (NumPy rules), or a ``shape-mismatch`` error."""
    first = tuple(shapes[0])
    if all(tuple(sh) == first for sh in shapes[1:]):  # the common case, without NumPy's machinery
        return first
    try:
        return tuple(np.broadcast_shapes(*shapes))
    except ValueError:
        raise TileShapeError(
            f"{api}: operand shapes {[list(s) for s in shapes]} do not broadcast together",
            rule="shape-mismatch",
        ) from None


def mask_array(mask: Any, shape: tuple[int, ...], api: str) -> np.ndarray | None:
    """A ``mask=`` argument as a boolean array of ``shape`` (None when there is no mask)."""
    if mask is None:
        return None
    if isinstance(mask, (bool, np.bool_)):
        return None if mask else np.zeros(shape, dtype=bool)
    if not isinstance(mask, MaskExpr):
        if isinstance(mask, IndexExpr):
            raise IndexingError(
                f"{api}: mask must be a comparison such as (i_p < n), not an index expression"
            )
        raise IndexingError(
            f"{api}: mask must be built from comparisons of nl.arange expressions, got {type(mask).__name__}",
            rule="bad-mask",
        )
    arr = mask.arr
    if arr.ndim > len(shape):
        # masks built from components of a higher-rank nl.mgrid: drop the size-1 axes the tile lacks
        extra = [a for a in range(arr.ndim) if arr.shape[a] == 1][::-1][: arr.ndim - len(shape)]
        if len(extra) == arr.ndim - len(shape):
            arr = arr.reshape([n for a, n in enumerate(arr.shape) if a not in extra])
    try:
        return np.broadcast_to(arr, shape)
    except ValueError:
        pass
    # the tile dropped trailing size-1 grid axes the mask still has (t[i_p, i_f] with a (F, 1) index
    # component lands i_f on axis 1 of a (P, F, 1) grid): broadcast on the padded grid, then drop them
    for pad in (1, 2, 3):
        padded = tuple(shape) + (1,) * pad
        try:
            return np.broadcast_to(arr, padded).reshape(shape)
        except ValueError:
            continue
    # masks built from aranges of a larger grid than the tile: take the leading corner
    if arr.ndim == len(shape) and all(a >= s or a == 1 for a, s in zip(arr.shape, shape)):
        sl = tuple(slice(0, s) if a != 1 else slice(None) for a, s in zip(arr.shape, shape))
        return np.broadcast_to(arr[sl], shape)
    raise IndexingError(
        f"{api}: mask of shape {list(arr.shape)} does not fit the tile shape {list(shape)}",
        rule="bad-mask",
    )


def out_dtype(dtype: Any, default: Any, api: str) -> Any:
    if dtype is None:
        return default
    try:
        return dt.as_dtype(dtype)
    except dt.DtypeNotSupported as e:
        raise DtypeError(f"{api}: {e}") from None


def value_of(
    x: Any,
    shape: tuple[int, ...] | None,
    mask: np.ndarray | None,
    *,
    to_float: bool = True,
    check_init: bool = True,
) -> Any:
    """Numerics of an operand: a tile's values (aligned), or a scalar.  ``check_init=False``: never-written
    elements are not an error here (a data movement, checked by :func:`devkit.sim.unwritten.moved`)."""
    if isinstance(x, Tensor):
        sub = mask if (mask is not None and shape is not None and aligned_shape(x) == shape) else None
        v = x.read(sub, check_init=check_init)
        if x.ndim == 1 and x.st.on_chip:
            v = v.reshape(x.shape[0], 1)
        if to_float and v.dtype != np.float32:
            v = v.astype(np.float32)
        return v
    if isinstance(x, (bool, np.bool_)):
        return np.float32(x) if to_float else x
    return np.float32(x) if to_float else x


def new_tile(m: Machine, shape: tuple[int, ...], dtype: Any, buffer: str, loc: tuple[str, int]) -> Tensor:
    # unfilled: commit() writes every element, or poisons the tile first when a mask leaves some out
    st = m.new_storage(shape, dtype, buffer, par_axis=0, fill=None, temp=True, kind="temp", loc=loc)
    return Tensor.whole(st)


def commit(
    m: Machine,
    p: Pending,
    out: Tensor,
    values: np.ndarray | None,
    mask: np.ndarray | None,
    *,
    exact: bool = False,
    immutable: bool = False,
    garbage: np.ndarray | None = None,
    taint: Any = None,
) -> Tensor:
    """Write an instruction's fp32 results into its (temporary) output and remember them for retargeting.

    ``exact``: the values are already representable in the output dtype (a same-dtype copy), so no
    rounding pass is needed.  ``immutable``: ``values`` is a view of memory no instruction can write (a
    kernel input), so the tile may keep the view instead of a copy until the tile itself is written.
    ``garbage``: the result positions (output shape) a data movement filled with never-written data
    (:func:`devkit.sim.unwritten.moved`), or computed from never-written data (:mod:`devkit.sim.dataflow`);
    they stay never-written in the output.  ``taint``: where such data was first computed on
    (:class:`devkit.sim.unwritten.Taint`), when it was.
    """
    p.exact = out.dtype if exact else None  # type: ignore[attr-defined]
    st = out.st
    if isinstance(values, Deferred):
        if mask is None and st.kind == "temp" and values.shape == out.shape == st.shape and m.numerics:
            st.written = True
            st.lazy = values  # computed if the tile is read; `acc += ...` defers it into acc's chain
            p.raw = values  # type: ignore[attr-defined]
            p.mask = None  # type: ignore[attr-defined]
            out._fresh = p
            if garbage is not None:
                _garbage_into(out, garbage, taint)
            return out
        values = values.result()
    data = st.data
    if data is not None and (mask is not None or values is None) and st.kind == "temp":
        data.fill(
            dt.poison_value(out.dtype, nki0=m.nki_beta2)
        )  # positions an instruction leaves out read as poison
    if m.numerics and values is not None:
        values = np.asarray(values)
        if values.shape != out.shape and values.size == out.size:
            values = values.reshape(out.shape)
        v = values if values.shape == out.shape else np.broadcast_to(values, out.shape)
        vals = v if exact else dt.round_to(v, out.dtype)
        if mask is None and st.kind == "temp" and out.shape == data.shape:
            st.written = True
            if vals.dtype == data.dtype and (vals.base is None or immutable):
                # a fresh result (or a view of a kernel input): kept aside, read-only, and copied into
                # the tile only if the tile itself is written
                if vals.base is not None:
                    vals = vals.view()
                vals.flags.writeable = False
                st.lazy = vals
            else:
                data[...] = vals
        else:
            out.write(vals, mask)
        if garbage is not None:
            _garbage_into(out, garbage if mask is None else garbage & mask, taint)
        p.raw = v  # type: ignore[attr-defined]
    else:
        out.mark_written()
        p.raw = None  # type: ignore[attr-defined]
    p.mask = mask  # type: ignore[attr-defined]
    out._fresh = p
    return out


def _garbage_into(out: Tensor, g: np.ndarray, taint: Any) -> None:
    """``out``'s positions ``g`` received never-written data: computed from it (``taint``) or moved."""
    if taint is not None:
        unwritten.computed(out, g, taint)
    else:
        unwritten.carry(out, g)


# ---- generic elementwise -----------------------------------------------------------------------------


def operand_tiles(api: str, operands: Sequence[Any]) -> list[Tensor]:
    """The tiles among the operands of an element-wise instruction, checked (the rest must be scalars)."""
    tiles = []
    for i, x in enumerate(operands):
        if isinstance(x, Tensor):
            tiles.append(tile(x, api, f"#{i}"))
        elif isinstance(x, Scalar):
            pass
        elif isinstance(x, (IndexExpr, MaskExpr)):
            raise IndexingError(
                f"{api}: index expressions cannot be used as data; materialise them with nisa.iota first",
                rule="index-as-data",
            )
        elif isinstance(x, LoopReduction):
            raise KernelArgumentError(
                f"{api}: the value of nl.loop_reduce can only be assigned into the tensor it reduces into "
                "(b[...] = nl.loop_reduce(a, op, loop_indices=[i]), b allocated before the loop)"
            )
        else:
            raise KernelArgumentError(
                f"{api}: operand #{i} must be a tile or a scalar, got {type(x).__name__}"
            )
    if not tiles:
        raise KernelArgumentError(f"{api}: at least one operand must be a tile")
    return tiles


def broadcast_values(
    fn: Callable[..., Any],
    operands: Sequence[Any],
    shape: tuple[int, ...],
    marr: np.ndarray | None,
    bitwise: bool,
    moves: bool,
) -> tuple[np.ndarray, np.ndarray | None]:
    """``(fn(*operand values), garbage)`` of an element-wise instruction with NumPy broadcasting: fp32
    arithmetic (the stored values with ``bitwise``); ``garbage`` (``moves``: a copy of its one tile) the
    result positions that received never-written elements (:mod:`devkit.sim.unwritten`), or None."""
    garbage = None
    if moves:
        src = operands[0]
        garbage = unwritten.moved(src, marr if aligned_shape(src) == shape else None)
        if garbage is not None:
            garbage = np.broadcast_to(garbage.reshape(aligned_shape(src)), shape)
    args = [value_of(x, shape, marr, to_float=not bitwise, check_init=not moves) for x in operands]
    with np.errstate(all="ignore"):
        vals = fn(*args)
    return (np.asarray(vals) if bitwise else np.asarray(vals, dtype=np.float32)), garbage


def _waits_for_chain(m: Machine, t: Tensor, shape: tuple[int, ...]) -> bool:
    """Whether a one-operand float instruction reads plain view ``t`` of a PSUM tile whose accumulation
    chain is still pending (typically ``nl.copy(acc)``): then it can wait with the chain."""
    st = t.st
    return (
        st.id in m.chains.pending
        and st.lazy is None
        and st.uninit is None
        and t.dims is not None
        and not t._oob
        and t._bshape is None
        and t.shape == shape
    )


def _commit_evacuation(m: Machine, p: Pending, out: Tensor, src: Tensor, fn: Callable, odt: Any) -> Tensor:
    """``out = fn(src)``, computed together with ``src``'s pending chain when ``out`` is needed."""
    st = src.st
    ev = m.chains.evacuate(st.id, st._data, src._key, src._perm, fn, odt)  # type: ignore[arg-type]
    p.exact = None  # type: ignore[attr-defined]
    out.st.written = True
    out.st.lazy = EvacuationItem(ev, 1, out.shape)
    p.raw = EvacuationItem(ev, 0, out.shape)  # type: ignore[attr-defined]
    p.mask = None  # type: ignore[attr-defined]
    out._fresh = p
    return out


def defer_store(m: Machine, v: Tensor, dst: Tensor) -> bool:
    """``dst[...] = v`` when ``v``'s values wait for a PSUM chain (``nl.store`` of ``nl.copy(acc)``): the
    write waits too, so that several chains can be added at once.  False, doing nothing, otherwise."""
    value = v.st.lazy
    ds = dst.st
    if not (
        isinstance(value, EvacuationItem)
        and value.evac._value is None
        and v.shape == v.st.shape
        and ds._data is not None
        and dst.dims is not None
        and not dst._oob
        and dst._bshape is None
        and dst.size == v.size
    ):
        return False
    ds.written = True
    mark_initialised(dst)
    m.chains.defer_write(ds.id, (ds._data, dst._key, dst._perm, value, v.dtype, dst.dtype, dst.shape))
    return True


# ---- assignment: dst[...] = value, dst[...] += value ----------------------------------------------------


class LoopReduction:
    """The value of ``nl.loop_reduce(x, op, loop_indices)``: assigned into ``b[...]``, it updates ``b`` in
    place, ``b = op(b, x)`` (the documented equivalent [B1-NL]), one associative reduction per iteration
    (legal in ``affine_range`` like ``b[...] += x``).  ``issue(b, r)`` issues that element-wise instruction and
    returns its result tile (the front end's, :func:`devkit.nki._isa_nl.loop_reduce_step`)."""

    __slots__ = ("dtype", "fn", "issue", "mask", "op", "value")

    def __init__(
        self,
        value: Tensor,
        op: str,
        fn: Callable,
        mask: Any,
        dtype: Any,
        issue: Callable[[Tensor, LoopReduction], Tensor],
    ) -> None:
        self.value = value
        self.op = op
        self.fn = fn
        self.mask = mask
        self.dtype = dtype
        self.issue = issue


#: loop_reduce operators -> the race checker's class of commutative updates
_LOOP_REDUCE_CLASS = {
    "add": "add",
    "multiply": "mul",
    "max": "max",
    "min": "min",
    "bitwise_and": "and",
    "bitwise_or": "or",
    "bitwise_xor": "xor",
}


def _reduce_into(m: Machine, dst: Tensor, r: LoopReduction, loc: tuple[str, int]) -> None:
    prev = m.reducing
    m.reducing = (dst.st, dst.box(), _LOOP_REDUCE_CLASS[r.op])
    try:
        res = r.issue(dst, r)
        retarget(m, m.pending, res, dst, loc)  # type: ignore[arg-type]
    finally:
        m.reducing = prev


def assign(dst: Tensor, value: Any) -> None:
    """``dst[idx] = value`` inside a kernel."""
    m = machine("tensor assignment")
    loc = user_location()
    if isinstance(value, LoopReduction):
        _reduce_into(m, dst, value, loc)
        return
    if isinstance(value, Tensor):
        if value._fresh is ASSIGNED:
            value._fresh = None
            if value.st is dst.st and value.box() == dst.box():
                return  # dst[idx] op= x: already applied in place
        p = value._fresh
        if (
            p is not None
            and p is m.pending
            and value.st.kind == "temp"
            and value.st.addr is None
            and value.st.alive
        ):
            if p.engine == TENSOR and dst.st.buffer != "psum":
                # The TensorE writes PSUM only; assigning its result elsewhere (as AWS's SD-attention
                # tutorial does with nc_transpose) lowers to the PSUM write plus a copy out.
                copy_into(m, dst, value, loc)
                return
            retarget(m, p, value, dst, loc)
            return
        copy_into(m, dst, value, loc)
        return
    if isinstance(value, Scalar):
        fill(m, dst, value, loc)
        return
    if isinstance(value, IndexExpr):
        raise IndexingError(
            "cannot assign an index expression to a tensor; materialise it with nisa.iota",
            rule="index-as-data",
        )
    if isinstance(value, np.ndarray):
        raise KernelArgumentError(
            "cannot assign a host NumPy array inside a kernel; pass it as a kernel argument or use "
            "nl.shared_constant"
        )
    raise KernelArgumentError(f"cannot assign a {type(value).__name__} to a tensor")


def _dst_shape_check(dst: Tensor, src_shape: tuple[int, ...], api: str) -> None:
    if src_shape == dst.shape:
        return
    try:
        np.broadcast_shapes(dst.shape, src_shape)
        ok = np.broadcast_shapes(dst.shape, src_shape) == tuple(dst.shape)
    except ValueError:
        ok = False
    if not ok:
        if int(np.prod(src_shape)) == dst.size:
            return  # same element count: (P,) -> (P,1) style leniency
        raise TileShapeError(
            f"{api}: cannot write a value of shape {list(src_shape)} into a destination of shape "
            f"{list(dst.shape)} (the destination must be at least as large; only the source broadcasts)",
            rule="dst-shape",
        )


def _fit(vals: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    try:
        return np.broadcast_to(vals, shape)
    except ValueError:
        return vals.reshape(shape)


def retarget(m: Machine, p: Pending, value: Tensor, dst: Tensor, loc: tuple[str, int]) -> None:
    """Make the pending instruction that produced ``value`` write ``dst`` directly."""
    dst.check_alive()
    _dst_shape_check(dst, value.shape, "assignment")
    m.check_write(dst, loc, accumulate=False)
    m.retarget(p, value, dst)
    value._fresh = None  # a second assignment of the same value is a copy
    raw = getattr(p, "raw", None)
    pmask = getattr(p, "mask", None)
    if m.numerics:
        exact = getattr(p, "exact", None) is not None and p.exact == dst.dtype  # type: ignore[attr-defined]
        if (
            isinstance(raw, EvacuationItem)
            and raw.index == 0
            and dt.name_of(raw.evac.dtype) == dt.name_of(dst.dtype)
        ):
            raw, exact = EvacuationItem(raw.evac, 1, raw.shape), True  # (already rounded to dst's dtype)
        if isinstance(raw, Deferred):
            raw = raw.result()
        if raw is None:
            raw = value.read(check_init=False)
        vals = _fit(raw, dst.shape)
        pm = None if pmask is None else _fit(pmask, dst.shape)
        _write_checked(dst, vals if exact else dt.round_to(vals, dst.dtype), pm, loc)
        if value.st.uninit is not None:  # a data movement's result carrying never-written elements
            g = unwritten.result_of(value)
            if g is not None:
                g = _fit(g, dst.shape)
                unwritten.carry(dst, g if pm is None else g & pm, value)
    else:
        dst.mark_written()


def _write_checked(dst: Tensor, vals: np.ndarray, mask: np.ndarray | None, loc: tuple[str, int]) -> None:
    if dst.st.on_chip or dst.st.buffer in HBM_BUFFERS:
        dst.check_bounds(mask, "write")
    dst.write(vals, mask)


def copy_into(m: Machine, dst: Tensor, src: Tensor, loc: tuple[str, int]) -> None:
    src.check_alive()
    dst.check_alive()
    _dst_shape_check(dst, aligned_shape(src), "assignment")
    m.check_read(src, loc)
    m.check_write(dst, loc)
    hbm = dst.st.buffer in HBM_BUFFERS or src.st.buffer in HBM_BUFFERS
    if hbm:  # an unmasked DMA: every element of both views is accessed
        src.check_bounds(None, "copy source")
        dst.check_bounds(None, "copy destination")
    engine, opcode = (DMA, "dma_copy") if hbm else (VECTOR, "tensor_copy")
    m.emit(engine, opcode, [src], [dst], 0, None, loc)
    if m.numerics:
        garbage = unwritten.moved(src, to_chip=dst.st.on_chip)  # a copy: never-written data may flow
        v = src.read(check_init=False)
        if src.ndim == 1 and src.st.on_chip:
            v = v.reshape(src.shape[0], 1)
        vals = (
            v
            if src.dtype == dst.dtype
            else dt.round_to(v.astype(np.float32) if dt.is_float(src.dtype) else v, dst.dtype)
        )
        _write_checked(dst, _fit(vals, dst.shape), None, loc)
        if garbage is not None:
            unwritten.carry(dst, _fit(garbage.reshape(v.shape), dst.shape), src)
    else:
        dst.mark_written()


def fill(m: Machine, dst: Tensor, value: Any, loc: tuple[str, int]) -> None:
    dst.check_alive()
    m.check_write(dst, loc)
    engine = DMA if dst.st.buffer in HBM_BUFFERS else VECTOR
    m.emit(engine, "memset", [], [dst], 0, {"value": value}, loc)
    if m.numerics:
        _write_checked(
            dst,
            dt.round_to(
                np.float32(value) if not isinstance(value, (int, np.integer)) else np.int64(value), dst.dtype
            ),
            None,
            loc,
        )
    else:
        dst.mark_written()


def accumulate_fresh_matmul(dst: Tensor, value: Any, op: str, loc: tuple[str, int]) -> bool:
    """``dst += value`` (at kernel line ``loc``) where ``value`` is the fresh result of the last TensorE
    instruction and ``dst`` is in PSUM: the matmul accumulates into ``dst`` (True); False, doing nothing, for any
    other augmented assignment (an element-wise instruction, :func:`devkit.nki._isa_nl.augmented`)."""
    m = machine("augmented assignment")
    dst.check_alive()
    if not isinstance(value, Tensor) or op != "add" or dst.st.buffer != "psum":
        return False
    p = value._fresh
    if not (
        p is not None
        and p is m.pending
        and p.opcode in ("nc_matmul", "matmul", "nc_transpose")
        and value.st.kind == "temp"
        and value.st.addr is None
        and value.st.alive
    ):
        return False
    _accumulate_matmul(m, p, value, dst, loc)
    dst._fresh = ASSIGNED
    return True


def _accumulate_matmul(m: Machine, p: Pending, value: Tensor, dst: Tensor, loc: tuple[str, int]) -> None:
    _dst_shape_check(dst, value.shape, "'+='")
    m.check_write(dst, loc, accumulate=True)
    m.retarget(p, value, dst)
    attrs = dict(p.attrs or {})
    attrs["accumulate"] = True
    p.attrs = attrs
    if m.numerics:
        gv = unwritten.result_of(value)  # adding never-written results computes on them: they stay so
        raw = getattr(p, "raw", None)
        if raw is None:
            raw = value.read(check_init=False)
        pmask = getattr(p, "mask", None)
        st = dst.st
        if (
            gv is None
            and pmask is None
            and st.uninit is None
            and st.lazy is None
            and st._data is not None
            and dt.name_of(st.dtype) == "float32"
            and dst.dims is not None
            and not dst._oob
            and dst._bshape is None
            and raw.shape == dst.shape
        ):
            st.written = True
            if type(raw) is Product:
                m.chains.add(st.id, st._data, dst._key, dst._perm, raw)  # devkit.sim.deferred
                return
            tgt = st.data[dst._key]
            if dst._perm is not None:
                tgt = tgt.transpose(dst._perm)
            tgt += raw  # fp32 PSUM accumulation in place
            return
        if isinstance(raw, Deferred):
            raw = raw.result()
        old = dst.read(check_init=False)
        u = None
        if dst.st.uninit is not None:
            # the first matmul of an accumulation group overwrites (hardware zeroes the group)
            u = _uninit_of(dst)
            u = None if u is None else np.array(u)  # (a view of the flags the write below clears)
            if u is not None and u.any():
                old = np.where(u, 0.0, old)
        vals = old + _fit(raw, dst.shape)
        pm = None if pmask is None else _fit(pmask, dst.shape)
        taint = dst.st.taint
        dst.write(dt.round_to(vals, dst.dtype), pm)
        if gv is not None or (taint is not None and u is not None):
            _accumulated_garbage(dst, value, gv, u, taint, pm, loc)
    else:
        dst.mark_written()


def _accumulated_garbage(
    dst: Tensor,
    value: Tensor,
    gv: np.ndarray | None,
    u: np.ndarray | None,
    dst_taint: Any,
    pm: np.ndarray | None,
    loc: tuple[str, int],
) -> None:
    """After ``dst += value`` in PSUM: the sums of never-written results ``gv`` stay never-written, and so do
    never-written elements ``u`` ``dst`` held when they are results computed from never-written data (their
    storage has a taint; elements never written at all were overwritten by the group's first matmul).  A
    per-storage taint cannot tell the two kinds apart: such a ``dst`` keeps ``u`` never-written."""
    g = None if gv is None else _fit(gv, dst.shape)
    if dst_taint is not None and u is not None:
        g = u if g is None else (g | u)
    if g is None:
        return
    if dst_taint is not None and u is not None and u.any():
        taint = dst_taint  # the accumulation group already held computed garbage: the earlier computation
    else:
        taint = unwritten.taint_of(value.st, loc)
    unwritten.computed(dst, g if pm is None else g & pm, taint)


def _uninit_of(t: Tensor) -> np.ndarray | None:
    st = t.st
    if st.uninit is None:
        return None
    if t.dims is not None and not t._oob:
        u = st.uninit[t._key]
        if t._perm is not None:
            u = u.transpose(t._perm)
        if t._bshape is not None:
            u = t._expand(u)
        return u
    return None


# ---- engines other than elementwise ------------------------------------------------------------------

ENGINE_NAMES = {TENSOR: "tensor", VECTOR: "vector", SCALAR: "scalar", GPSIMD: "gpsimd", DMA: "dma"}
