"""NKI 0.x tensor views: ``strides``/``offset`` of a view and access patterns ``t.ap(...)``.

A view addresses its storage as ``offset + sum(stride * index)`` in elements of the flattened storage
(``reference/nki_beta2.md`` §4).  ``.ap(pattern, offset)`` builds a view from ``[step, count]`` pairs
over the flattened storage, ignoring the current view's shape and strides; on SBUF/PSUM the first pair is
the partition axis and its step must be the storage's per-partition element count.  ``dtype=``
reinterprets the bytes first (steps and offset then count elements of the new dtype).

A pattern whose steps are the storage's own strides becomes an affine (sliced) view; any other pattern
becomes an explicitly indexed view (exact, slower).
"""

from __future__ import annotations

import itertools
import weakref
from typing import Any

import numpy as np

from devkit import dtypes as dt
from devkit.errors import (
    BoundsError,
    DtypeError,
    KernelArgumentError,
    TileShapeError,
    UnsupportedError,
    user_location,
)
from devkit.nki.beta2.targets import machine_at_least
from devkit.sim.storage import Storage, make_alias
from devkit.sim.tensor import OffsetView, Tensor


def storage_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    """Row-major element strides of a storage shape."""
    out = [1] * len(shape)
    for d in range(len(shape) - 2, -1, -1):
        out[d] = out[d + 1] * shape[d + 1]
    return tuple(out)


def _flat_offsets(t: Tensor) -> np.ndarray:
    """Element offsets (in the flattened storage) of every element of an explicitly indexed view."""
    sst = storage_strides(t.st.shape)
    flat = np.zeros(t.shape, dtype=np.int64)
    for a, s in zip(t._garr, sst):  # type: ignore[arg-type]
        flat = flat + np.broadcast_to(a, t.shape) * s
    return flat


def view_strides(t: Tensor) -> tuple[int, ...]:
    """Element strides of each axis of view ``t`` (0 for broadcast axes).  An explicitly indexed view (an
    access pattern that is not a slice of the storage) has strides when its offsets are affine."""
    _refuse_view_of_indirect(t, "tensor.strides")
    if t.dims is None:
        flat = _flat_offsets(t)
        origin = (0,) * t.ndim
        out = []
        for ax, n in enumerate(t.shape):
            if n <= 1:
                out.append(0)
                continue
            step = [0] * t.ndim
            step[ax] = 1
            out.append(int(flat[tuple(step)] - flat[origin]))
        idx = np.indices(t.shape, dtype=np.int64) if t.size else None
        if idx is not None and not np.array_equal(flat, flat[origin] + np.tensordot(out, idx, axes=1)):
            raise UnsupportedError(
                "strides of a gathered (non-affine) view are not defined", rule="unsupported"
            )
        return tuple(out)
    sst = storage_strides(t.st.shape)
    out = [0] * len(t.shape)
    for d, e in enumerate(t.dims):
        if not isinstance(e, int):
            out[e[3]] += e[1] * sst[d]
    return tuple(out)


def view_offset(t: Tensor) -> int:
    """Element offset of view ``t``'s first element in its flattened storage."""
    _refuse_view_of_indirect(t, "tensor.offset")
    if t.dims is None:
        return int(_flat_offsets(t)[(0,) * t.ndim]) if t.size else 0
    sst = storage_strides(t.st.shape)
    off = 0
    for d, e in enumerate(t.dims):
        off += (e if isinstance(e, int) else e[0]) * sst[d]
    return off


_RAW = ("int8", "int16", "int32", "uint8", "uint16", "uint32", "float32", "bool")
#: float formats the simulator holds as float32 values whose own bits a raw view can read
_NARROW_FLOATS = ("bfloat16", "float16", "float8_e4m3", "float8_e5m2", "float8_e4m3fn")


def _raw_bits(st: Storage) -> bool:
    """Whether the storage array holds the declared dtype's raw bits (so a NumPy view reinterprets it)."""
    return dt.is_packed(st.dtype) or dt.name_of(st.dtype) in _RAW


#: aliases that hold a converted copy of their storage (read-only: writing through them is refused)
SNAPSHOTS: weakref.WeakSet[Storage] = weakref.WeakSet()


def refuse_snapshot_write(t: Any, api: str) -> None:
    """Raise when ``t`` is a read-only reinterpreting view (see :func:`reinterpret`)."""
    if isinstance(t, Tensor) and t.st in SNAPSHOTS:
        raise UnsupportedError(
            f"{api}: writing through a {dt.name_of(t.dtype)} view of storage of another element type is not "
            "simulated yet (such views can be read)",
            rule="unsupported",
        )


def reinterpret(t: Tensor, dtype: Any, api: str) -> Storage:
    """A storage aliasing ``t``'s storage with ``dtype`` (last dimension scaled by the itemsize ratio)."""
    try:
        d = dt.as_dtype(dtype)
    except dt.DtypeNotSupported as e:
        raise DtypeError(f"{api}: {e}") from None
    st = t.st
    if d == st.dtype or dt.name_of(d) == dt.name_of(st.dtype):
        return st
    old, new = st.itemsize, dt.itemsize(d)
    last_bytes = st.shape[-1] * old
    if last_bytes % new:
        raise KernelArgumentError(
            f"{api}: cannot view {st.describe()} as {dt.name_of(d)}: the last dimension holds {last_bytes} bytes, "
            f"not a multiple of {new}",
            rule="bad-argument",
        )
    shape = (*st.shape[:-1], last_bytes // new)
    data = None
    snapshot = False
    if st.data is not None:  # (None: a cost-only run; an alias of an alias has no machine of its own)
        if _raw_bits(st) and (dt.is_packed(d) or dt.name_of(d) in _RAW):
            data = np.ascontiguousarray(st.data).view(dt.storage_dtype(d)).reshape(shape)
        elif _raw_bits(st) and dt.is_float(d) and not dt.is_packed(d) and dt.name_of(d) != "tfloat32":
            # raw bits read as a narrower float format (nki-library rmsnorm_quant stores fp32 scales through an
            # fp8 view): the simulator keeps such formats as float32 values, so this alias is a read-only copy
            raw = np.ascontiguousarray(st.data).view(np.uint8).view(np.dtype(d)).reshape(shape)
            data = dt.to_storage(raw, d)
            snapshot = True
        elif dt.is_float(st.dtype) and dt.name_of(st.dtype) in _NARROW_FLOATS and dt.name_of(d) in _RAW:
            # a narrow float format (held as float32 values) read as raw bits (nki-library topk_reduce packs
            # int32 token indices into two bf16 columns and reads them through an int32 view): the format's own
            # bits, NaN payloads kept, in a read-only copy
            bits = dt.to_external(np.ascontiguousarray(st.data), st.dtype).view(np.uint8)
            data = bits.view(dt.storage_dtype(d)).reshape(shape)
            snapshot = True
        else:
            raise UnsupportedError(
                f"{api}: reinterpreting {dt.name_of(st.dtype)} storage as {dt.name_of(d)} is not simulated yet "
                "(integer, float32 and packed x4 storage can be viewed as those types, or read as a float type; "
                "bfloat16, float16 and fp8 storage can be read as integer types)",
                rule="unsupported",
            )
    alias = make_alias(st, shape, d, st.par_axis, data)
    if st.uninit is not None:
        if old == new:
            alias.uninit = st.uninit.reshape(shape)
            alias.n_uninit = st.n_uninit
        elif st.uninit.any():
            if not snapshot:
                raise UnsupportedError(
                    f"{api}: reinterpreting a partly written {st.describe()} as {dt.name_of(d)} is not simulated yet",
                    rule="unsupported",
                )
            if new < old:  # an element of the narrower view is unwritten where the wider one holding it is
                alias.uninit = np.repeat(st.uninit, old // new, axis=-1).reshape(shape)
            else:  # an element of the wider view is unwritten where any narrower element of its bytes is
                alias.uninit = st.uninit.reshape(*shape, new // old).any(axis=-1)
            alias.n_uninit = int(alias.uninit.sum())
    if snapshot:
        SNAPSHOTS.add(alias)
    alias.written = st.written
    return alias


def _pairs(pattern: Any, api: str) -> list[tuple[int, int]]:
    try:
        out = [(int(step), int(count)) for step, count in pattern]
    except (TypeError, ValueError):
        raise KernelArgumentError(
            f"{api}: pattern must be a list of [step, count] pairs, got {pattern!r}", rule="bad-argument"
        ) from None
    if not out or len(out) > 5:
        raise KernelArgumentError(
            f"{api}: pattern must have 1 to 5 [step, count] pairs, got {len(out)}", rule="bad-argument"
        )
    for _step, count in out:
        if count < 1:
            raise KernelArgumentError(
                f"{api}: pattern counts must be positive, got {pattern!r}", rule="bad-argument"
            )
    return out


def _dynamic_offset(x: Any, api: str, name: str) -> np.ndarray:
    """Run-time values of an offset tensor (an integer SBUF tile); zeros in a cost-only run."""
    from devkit.nki.beta2.registers import VirtualRegister

    if isinstance(x, VirtualRegister):
        return np.array([x.value], dtype=np.int64)
    if not isinstance(x, Tensor):
        raise KernelArgumentError(
            f"{api}: {name} must be an SBUF tensor or a virtual register, got {type(x).__name__}",
            rule="bad-argument",
        )
    return np.asarray(Tensor._ops.index_values(x), dtype=np.int64).reshape(-1)


def access_pattern(
    t: Tensor,
    pattern: Any,
    offset: Any = None,
    scalar_offset: Any = None,
    vector_offset: Any = None,
    indirect_dim: int = 0,
    dtype: Any = None,
) -> Tensor:
    """``t.ap(pattern, offset=None, scalar_offset=None, vector_offset=None, indirect_dim=0, dtype=None)``.

    ``scalar_offset`` (a 1x1 SBUF tile) adds ``value * prod(base.shape[indirect_dim + 1:])`` to the start;
    ``vector_offset`` (an SBUF ``(P, 1)`` tile, ``indirect_dim=0`` only) starts output partition ``w`` at row
    ``value[w]`` of the base tensor (the first pair's step is then ignored).  Dynamic accesses are bounds-checked
    when the instruction runs, so ``oob_mode=skip`` can drop them."""
    api = "tensor.ap"
    _refuse_view_of_indirect(t, api)
    t.check_alive()
    if scalar_offset is not None and vector_offset is not None:
        raise KernelArgumentError(
            f"{api}: scalar_offset and vector_offset are mutually exclusive", rule="bad-argument"
        )
    pairs = _pairs(pattern, api)
    base = t.st if dtype is None else reinterpret(t, dtype, api)
    if offset is None:
        off = view_offset(t) * t.st.itemsize // base.itemsize
    else:
        try:
            off = int(offset)
        except (TypeError, ValueError):
            raise KernelArgumentError(
                f"{api}: offset must be an integer, got {offset!r}", rule="bad-argument"
            ) from None
    shape = tuple(c for _, c in pairs)
    sst = storage_strides(base.shape)
    if not 0 <= int(indirect_dim) < max(base.ndim, 1):
        raise KernelArgumentError(
            f"{api}: indirect_dim {indirect_dim} is not a dimension of {base.describe()}", rule="bad-argument"
        )
    if base.on_chip:
        if base.par_axis != 0:
            raise UnsupportedError(
                f"{api}: access patterns on tensors with block dimensions are not supported"
            )
        per_partition = sst[0] if base.ndim > 1 else 1
        if pairs[0][0] != per_partition and vector_offset is None:
            raise KernelArgumentError(
                f"{api}: on {base.buffer} the first [step, count] pair is the partition axis and its step must be the "
                f"per-partition element count {per_partition} of {base.describe()}, got {pairs[0][0]}",
                rule="ap-partition-step",
            )
    dynamic = scalar_offset is not None or vector_offset is not None
    if scalar_offset is not None:
        off += int(_dynamic_offset(scalar_offset, api, "scalar_offset")[0]) * sst[int(indirect_dim)]
    elif vector_offset is None:
        fast = _affine(base, pairs, off, sst, shape)
        if fast is not None:
            return fast
    # element (partition, free) offsets: on chip the first pair walks partitions, the others one partition's
    # elements, which never continue into the next partition (each partition is its own memory row)
    split = base.on_chip and base.ndim > 1 and vector_offset is None
    per_partition = sst[0] if base.ndim > 1 else 1
    lead, free = (off // per_partition, off % per_partition) if split else (0, off)
    part = np.full(shape, lead, dtype=np.int64)
    flat = np.full(shape, free, dtype=np.int64)
    for ax, (step, count) in enumerate(pairs):
        sh = [1] * len(shape)
        sh[ax] = count
        if ax == 0 and vector_offset is not None:
            if int(indirect_dim) != 0:
                raise KernelArgumentError(f"{api}: vector_offset needs indirect_dim=0", rule="bad-argument")
            rows = _dynamic_offset(vector_offset, api, "vector_offset")
            if rows.size != count:
                raise KernelArgumentError(
                    f"{api}: vector_offset holds {rows.size} row indices but the pattern has {count} partitions",
                    rule="bad-argument",
                )
            flat = flat + (rows * sst[0]).reshape(sh)
        elif ax == 0 and split:
            part = part + np.arange(count, dtype=np.int64).reshape(sh)
        else:
            flat = flat + step * np.arange(count, dtype=np.int64).reshape(sh)
    if split:
        coords = [part]
        rem = flat
        for d, s in enumerate(sst[1:]):
            coords.append(np.floor_divide(rem, s) if d == 0 else rem // s)
            rem = rem - np.floor_divide(rem, s) * s
    else:
        coords = []
        rem = flat
        for d, s in enumerate(sst):
            coords.append(rem // s if d else np.floor_divide(rem, s))
            rem = rem - (rem // s) * s
    pax = 0 if base.on_chip else None
    arrays = tuple(np.ascontiguousarray(c) for c in coords)
    why = None if dynamic else _ap_bounds(api, base, pairs, off, part, flat, split, per_partition)
    if why is None:
        view = Tensor(base, None, shape, pax, arrays)
        tiles = tuple(x for x in (scalar_offset, vector_offset) if isinstance(x, Tensor))
        return OffsetView.of(view, tiles) if tiles else view
    return OutOfBoundsView(base, shape, pax, arrays, why)


def _ap_bounds(
    api: str,
    base: Storage,
    pairs: list[tuple[int, int]],
    off: int,
    part: np.ndarray,
    free: np.ndarray,
    split: bool,
    per_partition: int,
) -> str | None:
    """Why a static access pattern reaches outside ``base`` (None when it stays inside).

    HBM: an element of the flattened storage outside ``[0, size)``.  SBUF/PSUM: a partition outside
    ``[0, P)`` or an element of one partition outside ``[0, per_partition)``."""
    pat = [list(p) for p in pairs]
    if not free.size:
        return None
    if not split:
        size = int(np.prod(base.shape))
        if free.min() >= 0 and free.max() < size:
            return None
        bad = int(free.max()) if free.max() >= size else int(free.min())
        return (
            f"{api}: the access pattern {pat} with offset {off} reaches element {bad} of {base.describe()}, "
            f"which has {size} elements"
        )
    n_part = base.shape[0]
    if part.min() < 0 or part.max() >= n_part:
        bad = int(part.max()) if part.max() >= n_part else int(part.min())
        return (
            f"{api}: the access pattern {pat} with offset {off} reaches partition {bad} of {base.describe()}, "
            f"which has {n_part} partitions"
        )
    if free.min() >= 0 and free.max() < per_partition:
        return None
    bad = int(free.max()) if free.max() >= per_partition else int(free.min())
    return (
        f"{api}: the access pattern {pat} with offset {off} reaches element {bad} of a partition of "
        f"{base.describe()}, which holds {per_partition} elements per partition (an access never continues "
        "into the next partition)"
    )


class OutOfBoundsView(Tensor):
    """A static access pattern (``t.ap(...)``) that reaches outside its tensor.

    Making one is legal -- nki-library @d2ad3a5 (hardware-tested) builds such views and then skips the
    instruction that would use them (``output_projection_tkg``, the last, incomplete PSUM tile); using one is
    an error: every ``nki.isa`` instruction and ``nl.*`` wrapper given one (or a view of one) raises
    :class:`~devkit.errors.BoundsError` naming the using line and the line that made the view.  Storage
    coordinates are kept unclipped, so reads and writes outside the tensor also raise in a numerics run."""

    def __init__(
        self, base: Storage, shape: tuple[int, ...], pax: int | None, arrays: tuple[np.ndarray, ...], why: str
    ) -> None:
        super().__init__(base, None, shape, pax, arrays)
        fn, ln = user_location()
        self._oob = True
        self._oob_why = f"{why} (the view was made at {fn}:{ln})"
        oob_views_made[0] = True

    def _keep(self, view: Tensor) -> Tensor:
        """``view`` (derived from this one) still marked out of bounds when it reaches outside the tensor."""
        if view.dims is not None or isinstance(view, OutOfBoundsView) or view.oob_positions() is None:
            return view
        out = Tensor.__new__(OutOfBoundsView)
        Tensor.__init__(out, view.st, None, view.shape, view.pax, view._garr)
        out._oob = True
        out._oob_why = self._oob_why
        return out

    def __getitem__(self, key: Any) -> Tensor:
        return self._keep(super().__getitem__(key))

    def expand_dims(self, axis: Any) -> Tensor:
        return self._keep(Tensor.expand_dims(self, axis))  # type: ignore[attr-defined]

    def broadcast_to(self, shape: Any) -> Tensor:
        return self._keep(Tensor.broadcast_to(self, shape))  # type: ignore[attr-defined]

    def view(self, dtype: Any) -> Tensor:
        return self._keep(Tensor.view(self, dtype))  # type: ignore[attr-defined]

    def __repr__(self) -> str:
        return f"<nki out-of-bounds view {list(self.shape)} of {self.st.describe()}>"


#: whether any out-of-bounds view was made in this process (instructions look for one only then)
oob_views_made = [False]


def refuse_out_of_bounds(api: str, operands: Any) -> None:
    """Raise :class:`BoundsError` when one of ``operands`` is an out-of-bounds access pattern
    (:class:`OutOfBoundsView`): an instruction (``api``) accesses every element of its operands."""
    for x in operands:
        if isinstance(x, (list, tuple)):
            refuse_out_of_bounds(api, x)
        elif isinstance(x, OutOfBoundsView):
            raise BoundsError(
                f"{api} uses a view that reaches outside its tensor: {x._oob_why}", rule="out-of-bounds"
            )


def _affine(
    base: Storage, pairs: list[tuple[int, int]], off: int, sst: tuple[int, ...], shape: tuple[int, ...]
) -> Tensor | None:
    """The pattern as an affine view when every moving step is one storage dimension's stride (each dim
    used once, in range), else None."""
    if off < 0 or off >= max(int(np.prod(base.shape)), 1):
        return None
    starts = []
    rem = off
    for s in sst:
        starts.append(rem // s)
        rem %= s
    dims: list[Any] = list(starts)
    used: set[int] = set()
    for ax, (step, count) in enumerate(pairs):
        partition = ax == 0 and base.on_chip
        if count == 1 and not partition:
            continue
        if partition:
            d: int | None = 0
        else:
            d = next(
                (d for d, s in enumerate(sst) if s == step and d not in used and base.shape[d] > 1), None
            )
        if d is None:
            return None
        if starts[d] + count > base.shape[d]:
            return None
        used.add(d)
        dims[d] = (starts[d], 1, count, ax)
    return Tensor(base, tuple(dims), shape, 0 if base.on_chip else None)


# ---- view methods of NKI 0.5 (built on access patterns) ---------------------------------------------------------


def _layout(t: Tensor, api: str) -> tuple[list[list[int]], int]:
    """The view as ``[[stride, count], ...]`` pairs and an element offset."""
    _refuse_view_of_indirect(t, api)
    try:
        strides = view_strides(t)
    except UnsupportedError:
        raise UnsupportedError(
            f"{api}: not defined for an explicitly indexed (gathered) view", rule="unsupported"
        ) from None
    return [[s, n] for s, n in zip(strides, t.shape)], view_offset(t)


def _dim(t: Tensor, dim: Any, api: str, *, extra: int = 0) -> int:
    nd = t.ndim + extra
    try:
        d = int(dim)
    except (TypeError, ValueError):
        raise KernelArgumentError(
            f"{api}: dim must be an integer, got {dim!r}", rule="bad-argument"
        ) from None
    d = d + nd if d < 0 else d
    if not 0 <= d < nd:
        raise KernelArgumentError(f"{api}: dim {dim} is outside a {t.ndim}-D tensor", rule="bad-argument")
    return d


def _not_partition(t: Tensor, d: int, api: str) -> None:
    if t.st.on_chip and d == 0:
        raise KernelArgumentError(
            f"{api}: dim 0 of an on-chip tensor is the partition dimension", rule="bad-argument"
        )


def _from_layout(t: Tensor, pairs: list[list[int]], offset: int) -> Tensor:
    if not pairs:
        pairs = [[1, 1]]
    return access_pattern(t, pairs, offset=offset)


def slice_view(t: Tensor, dim: Any, start: int, end: int, step: int = 1) -> Tensor:
    """``t.slice(dim, start, end, step=1)``: elements ``start:end:step`` of one dimension."""
    api = "tensor.slice"
    d = _dim(t, dim, api)
    n = t.shape[d]
    if not (0 <= int(start) < int(end) <= n) or int(step) < 1:
        raise BoundsError(
            f"{api}: [{start}:{end}:{step}] is not inside dim {d} of size {n}", rule="out-of-bounds"
        )
    pairs, off = _layout(t, api)
    stride = pairs[d][0]
    pairs[d] = [stride * int(step), -(-(int(end) - int(start)) // int(step))]
    return _from_layout(t, pairs, off + int(start) * stride)


def select_view(t: Tensor, dim: Any, index: int) -> Tensor:
    """``t.select(dim, index)``: one index of a dimension, which disappears."""
    api = "tensor.select"
    d = _dim(t, dim, api)
    _not_partition(t, d, api)
    if isinstance(index, Tensor):
        raise UnsupportedError(f"{api}: run-time select by a tensor is not simulated yet", rule="unsupported")
    if not 0 <= int(index) < t.shape[d]:
        raise BoundsError(
            f"{api}: index {index} is outside dim {d} of size {t.shape[d]}", rule="out-of-bounds"
        )
    pairs, off = _layout(t, api)
    stride = pairs.pop(d)[0]
    return _from_layout(t, pairs, off + int(index) * stride)


def permute_view(t: Tensor, dims: Any) -> Tensor:
    """``t.permute(dims)``: reorder the dimensions (on-chip: ``dims[0] == 0``)."""
    api = "tensor.permute"
    order = [_dim(t, x, api) for x in dims]
    if sorted(order) != list(range(t.ndim)):
        raise KernelArgumentError(
            f"{api}: {list(dims)} is not a permutation of {t.ndim} dims", rule="bad-argument"
        )
    if t.st.on_chip and order[0] != 0:
        raise KernelArgumentError(
            f"{api}: an on-chip tensor keeps its partition dim first", rule="bad-argument"
        )
    pairs, off = _layout(t, api)
    return _from_layout(t, [pairs[i] for i in order], off)


def broadcast_view(t: Tensor, dim: Any, size: int) -> Tensor:
    """``t.broadcast(dim, size)``: a size-1 dimension repeated ``size`` times (a step of 0)."""
    api = "tensor.broadcast"
    d = _dim(t, dim, api)
    _not_partition(t, d, api)
    if t.shape[d] != 1:
        raise TileShapeError(f"{api}: dim {d} has size {t.shape[d]}, not 1", rule="broadcast")
    pairs, off = _layout(t, api)
    pairs[d] = [0, int(size)]
    return _from_layout(t, pairs, off)


def expand_dim_view(t: Tensor, dim: Any) -> Tensor:
    """``t.expand_dim(dim)``: a new size-1 dimension at ``dim``."""
    api = "tensor.expand_dim"
    d = _dim(t, dim, api, extra=1)
    _not_partition(t, d, api)
    pairs, off = _layout(t, api)
    pairs.insert(d, [1, 1])
    return _from_layout(t, pairs, off)


def squeeze_dim_view(t: Tensor, dim: Any) -> Tensor:
    """``t.squeeze_dim(dim)``: remove a size-1 dimension."""
    api = "tensor.squeeze_dim"
    d = _dim(t, dim, api)
    _not_partition(t, d, api)
    if t.shape[d] != 1:
        raise TileShapeError(f"{api}: dim {d} has size {t.shape[d]}, not 1", rule="reshape")
    pairs, off = _layout(t, api)
    pairs.pop(d)
    return _from_layout(t, pairs, off)


def reshape_dim_view(t: Tensor, dim: Any, shape: Any) -> Tensor:
    """``t.reshape_dim(dim, shape)``: split one dimension into ``shape`` (row-major)."""
    api = "tensor.reshape_dim"
    d = _dim(t, dim, api)
    _not_partition(t, d, api)
    sizes = [int(x) for x in shape]
    if int(np.prod(sizes)) != t.shape[d]:
        raise TileShapeError(
            f"{api}: {sizes} does not hold the {t.shape[d]} elements of dim {d}", rule="reshape"
        )
    pairs, off = _layout(t, api)
    stride = pairs[d][0]
    inner = [[stride * int(np.prod(sizes[i + 1 :])), n] for i, n in enumerate(sizes)]
    return _from_layout(t, pairs[:d] + inner + pairs[d + 1 :], off)


def flatten_dims_view(t: Tensor, start: Any, end: Any) -> Tensor:
    """``t.flatten_dims(start, end)``: merge dims ``start..end`` (inclusive; they must be contiguous)."""
    api = "tensor.flatten_dims"
    a, b = _dim(t, start, api), _dim(t, end, api)
    if a > b:
        raise KernelArgumentError(f"{api}: start {start} is after end {end}", rule="bad-argument")
    _not_partition(t, a, api)
    pairs, off = _layout(t, api)
    for i in range(a, b):
        if pairs[i][0] != pairs[i + 1][0] * pairs[i + 1][1]:
            raise KernelArgumentError(f"{api}: dims {a}..{b} are not contiguous in memory", rule="reshape")
    merged = [pairs[b][0], int(np.prod([p[1] for p in pairs[a : b + 1]]))]
    return _from_layout(t, [*pairs[:a], merged, *pairs[b + 1 :]], off)


def get_pattern(t: Tensor) -> list[list[int]]:
    """``t.get_pattern()``: the view's ``[[step, count], ...]`` access pattern."""
    return _layout(t, "tensor.get_pattern")[0]


def is_contiguous(t: Tensor) -> bool:
    """``t.is_contiguous()``: whether the view's elements are consecutive in row-major order."""
    pairs, _ = _layout(t, "tensor.is_contiguous")
    expect = 1
    for stride, count in reversed(pairs):
        if count != 1 and stride != expect:
            return False
        expect *= count
    return True


def reinterpret_cast(t: Tensor, dtype: Any) -> Tensor:
    """``t.reinterpret_cast(dtype)``: the same bytes as ``dtype``; the last dimension scales by the itemsize
    ratio and must be contiguous."""
    api = "tensor.reinterpret_cast"
    pairs, off = _layout(t, api)
    d = dt.as_dtype(dtype)
    old, new = t.itemsize, dt.itemsize(d)
    if pairs and pairs[-1][0] != 1 and pairs[-1][1] != 1:
        raise KernelArgumentError(f"{api}: the last dimension must be contiguous", rule="reshape")
    scaled = [[s * old // new, c] for s, c in pairs[:-1]] + [[1, pairs[-1][1] * old // new]]
    if (pairs[-1][1] * old) % new or (off * old) % new:
        raise KernelArgumentError(
            f"{api}: the view's bytes do not split into {dt.name_of(d)} elements", rule="bad-argument"
        )
    return access_pattern(t, scaled, offset=off * old // new, dtype=d)


def vector_select_view(t: Tensor, dim: Any, offsets: Any) -> Tensor:
    """``t.vector_select(0, offsets)``: rows of an HBM tensor picked at run time -- row ``w`` of the result is
    row ``offsets[w]`` of ``t`` (``offsets`` an integer SBUF ``(P, 1)`` tile); the result has ``P`` rows.
    Rows outside ``t`` are caught when the instruction reading the view runs (``oob_mode``)."""
    api = "tensor.vector_select"
    if _dim(t, dim, api) != 0:
        raise KernelArgumentError(
            f"{api}: only dim 0 can be selected by a vector, got {dim!r}", rule="bad-argument"
        )
    if t.st.on_chip:
        raise KernelArgumentError(
            f"{api}: applies to HBM tensors only, got {t.st.describe()}", rule="bad-argument"
        )
    if not isinstance(offsets, Tensor) or offsets.free_size != 1:
        got = list(offsets.shape) if isinstance(offsets, Tensor) else type(offsets).__name__
        raise KernelArgumentError(
            f"{api}: offsets must be a (P, 1) SBUF tile, got {got}", rule="bad-argument"
        )
    pairs, off = _layout(t, api)
    if pairs[0][0] != storage_strides(t.st.shape)[0]:
        raise UnsupportedError(
            f"{api}: a view whose rows are not the storage's rows is not simulated", rule="unsupported"
        )
    return access_pattern(
        t, [[pairs[0][0], offsets.partitions], *pairs[1:]], offset=off, vector_offset=offsets
    )


def _groups(pattern: Any, api: str, what: str) -> list[list[str]]:
    """An einops-style pattern as dims of axis names: ``"p (a b) c"`` or ``["p", ("a", "b"), "c"]``."""
    if isinstance(pattern, str):
        out: list[list[str]] = []
        group: list[str] | None = None
        for tok in pattern.replace("(", " ( ").replace(")", " ) ").split():
            if tok == "(":
                if group is not None:
                    raise KernelArgumentError(
                        f"{api}: nested parentheses in {what} {pattern!r}", rule="bad-argument"
                    )
                group = []
            elif tok == ")":
                if not group:
                    raise KernelArgumentError(
                        f"{api}: unbalanced or empty group in {what} {pattern!r}", rule="bad-argument"
                    )
                out.append(group)
                group = None
            elif group is not None:
                group.append(tok)
            else:
                out.append([tok])
        if group is not None:
            raise KernelArgumentError(
                f"{api}: unbalanced parentheses in {what} {pattern!r}", rule="bad-argument"
            )
        return out
    try:
        return [[x] if isinstance(x, str) else [str(n) for n in x] for x in pattern]
    except TypeError:
        raise KernelArgumentError(
            f"{api}: {what} must be a pattern string or a list of names, got {pattern!r}", rule="bad-argument"
        ) from None


def rearrange_view(t: Tensor, src_pattern: Any, dst_pattern: Any, fixed_sizes: Any = None) -> Tensor:
    """``t.rearrange(src_pattern, dst_pattern, fixed_sizes=None)``: einops-style split, reorder and merge of
    dims as a view.  ``src_pattern`` names every dim (a group ``(a b)`` splits one, row-major; ``fixed_sizes``
    gives all but one size of a group), ``dst_pattern`` orders the names (a group merges dims that must be
    contiguous).  On-chip tensors keep their partition dim first and whole."""
    api = "tensor.rearrange"
    src, dst = _groups(src_pattern, api, "src_pattern"), _groups(dst_pattern, api, "dst_pattern")
    sizes = {str(k): int(v) for k, v in dict(fixed_sizes or {}).items()}
    if len(src) != t.ndim:
        raise KernelArgumentError(
            f"{api}: src_pattern names {len(src)} dims but the tensor has {t.ndim}", rule="bad-argument"
        )
    names = [n for g in src for n in g]
    if len(set(names)) != len(names) or sorted(names) != sorted(n for g in dst for n in g):
        raise KernelArgumentError(
            f"{api}: dst_pattern must use each name of src_pattern exactly once ({src_pattern!r} -> {dst_pattern!r})",
            rule="bad-argument",
        )
    if t.st.on_chip and (len(src[0]) != 1 or dst[0] != src[0]):
        raise KernelArgumentError(
            f"{api}: an on-chip tensor keeps its partition dim ({src[0]}) first and unsplit",
            rule="bad-argument",
        )
    pairs, off = _layout(t, api)
    atoms: dict[str, list[int]] = {}
    for (stride, count), group in zip(pairs, src):
        unknown = [n for n in group if n not in sizes]
        known = int(np.prod([sizes[n] for n in group if n in sizes]))
        if len(unknown) > 1 or (not unknown and known != count) or (unknown and count % known):
            raise TileShapeError(
                f"{api}: group {group} cannot split a dim of size {count} with fixed_sizes {sizes}",
                rule="reshape",
            )
        dims = [sizes.get(n, count // known) for n in group]
        for i, n in enumerate(group):
            atoms[n] = [stride * int(np.prod(dims[i + 1 :])), dims[i]]
    out = []
    for group in dst:
        run = [atoms[n] for n in group]
        for a, b in itertools.pairwise(run):
            if a[1] != 1 and b[1] != 1 and a[0] != b[0] * b[1]:
                raise KernelArgumentError(
                    f"{api}: {group} are not contiguous in memory and cannot be merged", rule="reshape"
                )
        out.append([run[-1][0], int(np.prod([c for _, c in run]))])
    return _from_layout(t, out, off)


# ---- tensor indirection (NKI 0.5, NeuronCore-v4) ------------------------------------------------------------------

#: ``nki.isa`` instructions that take an indirect operand (``reference/nki_beta2.md`` §4 ``.indirect``)
INDIRECT_OPS = frozenset(
    (
        "nc_matmul",
        "nc_matmul_mx",
        "tensor_tensor",
        "tensor_scalar",
        "tensor_reduce",
        "tensor_copy",
        "tensor_copy_predicated",
        "tensor_scalar_reduce",
        "tensor_scalar_cumulative",
        "activation",
        "activation_reduce",
        "activate2",
        "exponential",
    )
)
#: partitions per partition group, by engine: the TensorE reads offsets for groups of 32, the other engines 16
TENSOR_ENGINE_OPS = frozenset(("nc_matmul", "nc_matmul_mx"))
GROUP_TENSOR_ENGINE = 32
GROUP_OTHER_ENGINES = 16
#: whether any indirect view was made in this process (instructions look for one only then)
indirect_views_made = [False]


class IndirectView(Tensor):
    """``data.indirect(index, num_elem)``: ``(P, num_elem)`` elements of on-chip tensor ``data`` picked along its
    free dimension by run-time offsets (a gather when an instruction reads it, a scatter when it writes it).

    Element ``(p, i)`` is ``data[p, offset]`` with the free elements of ``data`` numbered in row-major order;
    partition ``p`` belongs to partition group ``g = p // G`` and ``offset = index[g * G + i % G, i // G]``,
    ``G`` being 16 partitions on the Vector/Scalar/GpSimd engines and 32 on the TensorE.  The offsets are read,
    and bounds-checked, when the instruction using the view runs (:func:`resolve_indirect`)."""

    def __init__(self, data: Tensor, index: Tensor, num_elem: int) -> None:
        shape = (data.shape[0], num_elem)
        # placeholder coordinates (each partition's first free element): instructions use resolve()'s result
        coords = tuple(
            np.ascontiguousarray(
                np.broadcast_to(np.broadcast_to(a, data.shape).reshape(data.shape[0], -1)[:, :1], shape)
            )
            for a in data._index_arrays()
        )
        super().__init__(data.st, None, shape, 0, coords)
        self.data = data
        self.index = index
        self.num_elem = num_elem

    def __getitem__(self, key: Any) -> Tensor:
        raise KernelArgumentError(
            "an indirect view (tensor.indirect) cannot be indexed or sliced; slice the data tensor first",
            rule="indirect-view",
        )

    def reshape(self, *shape: Any) -> Tensor:
        raise KernelArgumentError(
            "an indirect view (tensor.indirect) cannot be reshaped; reshape the data tensor first",
            rule="indirect-view",
        )

    # Only the nki.isa instructions of INDIRECT_OPS use an indirect view, through resolve(); anything else
    # that would read or write it (Beta-1 style operators, nl.* wrappers) is refused rather than given the
    # placeholder coordinates.
    def read(self, *args: Any, **kwargs: Any) -> np.ndarray:
        raise _not_an_operand()

    def write(self, *args: Any, **kwargs: Any) -> None:
        raise _not_an_operand()

    def mark_written(self, *args: Any, **kwargs: Any) -> None:
        raise _not_an_operand()

    def __repr__(self) -> str:
        return f"<nki indirect view {list(self.shape)} of {self.st.describe()}>"

    def resolve(self, group: int, api: str) -> Tensor:
        """The view as an explicitly indexed tensor, offsets read for partition groups of ``group``."""
        data, p, n = self.data, self.shape[0], self.num_elem
        data.check_alive()
        free = data.size // max(p, 1)
        idx = np.asarray(Tensor._ops.index_values(self.index), dtype=np.int64).reshape(
            self.index.shape[0], -1
        )
        groups = -(-p // group)
        if idx.shape[0] < groups * group or n > group * idx.shape[1]:
            raise KernelArgumentError(
                f"{api}: the indirect view needs {n} offsets for each of {groups} partition group(s) of {group} "
                f"partitions, read from index[g * {group} + i % {group}, i // {group}]: an index of at least "
                f"[{groups * group}, {-(-n // group)}], got {list(self.index.shape)}",
                rule="indirect-index",
            )
        rows = (np.arange(p)[:, None] // group) * group + np.arange(n)[None, :] % group
        cols = np.broadcast_to(np.arange(n)[None, :] // group, rows.shape)
        offsets = idx[rows, cols]
        bad = (offsets < 0) | (offsets >= free)
        if bad.any():
            w, i = (int(x[0]) for x in np.nonzero(bad))
            raise BoundsError(
                f"{api}: indirect offset {int(offsets[w, i])} (index[{int(rows[w, i])}, {int(cols[w, i])}], "
                f"element {i} of partition {w}) is outside the {free} free elements of {data.st.describe()} "
                f"viewed as {list(data.shape)}; compute instructions have no oob_mode, so every offset must be "
                "in range",
                rule="out-of-bounds",
            )
        pr = np.arange(p)[:, None]
        coords = tuple(
            np.ascontiguousarray(np.broadcast_to(a, data.shape).reshape(p, free)[pr, offsets])
            for a in data._index_arrays()
        )
        return OffsetView.of(Tensor(data.st, None, (p, n), 0, coords), (self.index,))


def _not_an_operand() -> KernelArgumentError:
    return KernelArgumentError(
        "an indirect view (tensor.indirect) is an operand of these nki.isa instructions only: "
        f"{', '.join(sorted(INDIRECT_OPS))}",
        rule="indirect-operand",
    )


def _refuse_view_of_indirect(t: Tensor, api: str) -> None:
    if isinstance(t, IndirectView):
        raise KernelArgumentError(
            f"{api}: an indirect view (tensor.indirect) has no access pattern of its own; apply {api} to the data "
            "tensor before making it indirect",
            rule="indirect-view",
        )


def indirect_view(t: Tensor, index: Any, num_elem: Any = None) -> IndirectView:
    """``t.indirect(index, num_elem=None)`` (NKI 0.5, NeuronCore-v4 only): an indirect view of on-chip ``t``
    (see :class:`IndirectView`).  ``index``: a ``uint16`` SBUF tensor ``(P, K)`` starting on a quadrant
    boundary (partition 0, 32, 64 or 96); ``num_elem``: elements per partition of the view (default ``16 * K``,
    every offset the index holds for the Vector/Scalar/GpSimd engines)."""
    api = "tensor.indirect"
    machine_at_least(api, 4)
    t.check_alive()
    if isinstance(t, IndirectView):
        raise KernelArgumentError(f"{api}: an indirect view cannot be indirected again", rule="indirect-view")
    refuse_out_of_bounds(api, (t,))
    if not t.st.on_chip or t.ndim < 2:
        raise KernelArgumentError(
            f"{api}: the data tensor must be an SBUF or PSUM tensor with a free dimension, got "
            f"{list(t.shape)} of {t.st.describe()}",
            rule="indirect-view",
        )
    if not isinstance(index, Tensor) or isinstance(index, IndirectView):
        raise KernelArgumentError(
            f"{api}: index must be an SBUF tensor of uint16 offsets, got {type(index).__name__}",
            rule="indirect-index",
        )
    index.check_alive()
    if index.st.buffer != "sbuf" or dt.name_of(index.dtype) != "uint16" or index.ndim < 2:
        raise KernelArgumentError(
            f"{api}: index must be a 2-D SBUF tensor of uint16 offsets, got {list(index.shape)} of "
            f"{index.st.describe()}",
            rule="indirect-index",
        )
    first = int(np.min(index._index_arrays()[0])) if index.size else 0
    if first % 32:
        raise KernelArgumentError(
            f"{api}: the index tensor must start on a quadrant boundary (partition 0, 32, 64 or 96), it starts "
            f"at partition {first}",
            rule="indirect-index",
        )
    k = index.size // index.shape[0]
    if num_elem is None:
        n = GROUP_OTHER_ENGINES * k
    else:
        try:
            n = int(num_elem)
        except (TypeError, ValueError):
            raise KernelArgumentError(
                f"{api}: num_elem must be an integer, got {num_elem!r}", rule="bad-argument"
            ) from None
        if n < 1:
            raise KernelArgumentError(f"{api}: num_elem must be positive, got {n}", rule="bad-argument")
    indirect_views_made[0] = True
    return IndirectView(t, index, n)


def is_indirect(t: Tensor) -> bool:
    """``t.is_indirect()``: whether ``t`` is an indirect view (``t.indirect(...)``)."""
    return isinstance(t, IndirectView)


def resolve_indirect(name: str, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    """The arguments of instruction ``nisa.<name>`` with each indirect view replaced by the tensor it stands for
    now (offsets read for the instruction's engine); an instruction that takes no indirect operand refuses one."""

    def one(x: Any) -> Any:
        if not isinstance(x, IndirectView):
            return x
        api = f"nisa.{name}"
        if name not in INDIRECT_OPS:
            raise KernelArgumentError(
                f"{api} does not take an indirect operand (tensor.indirect); the instructions that do are "
                f"{', '.join(sorted(INDIRECT_OPS))}",
                rule="indirect-operand",
            )
        group = GROUP_TENSOR_ENGINE if name in TENSOR_ENGINE_OPS else GROUP_OTHER_ENGINES
        return x.resolve(group, api)

    return tuple(one(a) for a in args), {k: one(v) for k, v in kwargs.items()}


def refuse_indirect(api: str, *operands: Any) -> None:
    """Raise when an operand of an ``nl.*`` convenience wrapper is an indirect view (only the ``nki.isa``
    instructions of :data:`INDIRECT_OPS` take one), or an out-of-bounds access pattern."""
    if oob_views_made[0]:
        refuse_out_of_bounds(api, operands)
    if indirect_views_made[0] and any(isinstance(x, IndirectView) for x in operands):
        raise KernelArgumentError(
            f"{api} does not take an indirect operand (tensor.indirect); use one of the nki.isa instructions "
            f"{', '.join(sorted(INDIRECT_OPS))}",
            rule="indirect-operand",
        )


VIEW_METHODS = {
    "slice": slice_view,
    "select": select_view,
    "permute": permute_view,
    "broadcast": broadcast_view,
    "expand_dim": expand_dim_view,
    "squeeze_dim": squeeze_dim_view,
    "reshape_dim": reshape_dim_view,
    "flatten_dims": flatten_dims_view,
    "get_pattern": get_pattern,
    "is_contiguous": is_contiguous,
    "reinterpret_cast": reinterpret_cast,
    "vector_select": vector_select_view,
    "rearrange": rearrange_view,
    "indirect": indirect_view,
    "is_indirect": is_indirect,
}


# ---- free dimensions read flat (operands of another free shape) ------------------------------------------------


def free_flat(t: Tensor) -> Tensor:
    """``t`` read as ``(P, F)``: its free dimensions flattened in row-major order, ``F`` elements per partition.

    Works for any view -- strided, stride-0 (``broadcast``) and explicitly indexed ones -- by gathering the
    view's own coordinates, so the elements and their order are exactly the view's.  NKI 0.x operands need only
    agree in partitions and elements per partition (``reference/nki_beta2.md`` §5.2)."""
    p = t.shape[0] if t.shape else 1
    f = t.size // max(p, 1)
    if t.shape == (p, f):
        return t
    coords = tuple(np.ascontiguousarray(np.broadcast_to(a, t.shape).reshape(p, f)) for a in t._index_arrays())
    return Tensor(t.st, None, (p, f), 0, coords)
