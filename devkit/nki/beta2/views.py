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

import weakref
from typing import Any

import numpy as np

from devkit import dtypes as dt
from devkit.errors import BoundsError, DtypeError, KernelArgumentError, UnsupportedError
from devkit.sim.tensor import Storage, Tensor


def storage_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    """Row-major element strides of a storage shape."""
    out = [1] * len(shape)
    for d in range(len(shape) - 2, -1, -1):
        out[d] = out[d + 1] * shape[d + 1]
    return tuple(out)


def view_strides(t: Tensor) -> tuple[int, ...]:
    """Element strides of each axis of view ``t`` (0 for broadcast axes)."""
    if t.dims is None:
        raise UnsupportedError("strides of an explicitly indexed (gathered) view are not defined")
    sst = storage_strides(t.st.shape)
    out = [0] * len(t.shape)
    for d, e in enumerate(t.dims):
        if not isinstance(e, int):
            out[e[3]] += e[1] * sst[d]
    return tuple(out)


def view_offset(t: Tensor) -> int:
    """Element offset of view ``t``'s first element in its flattened storage."""
    sst = storage_strides(t.st.shape)
    if t.dims is None:
        return int(sum(int(np.asarray(a).reshape(-1)[0]) * s for a, s in zip(t._garr, sst)))  # type: ignore[arg-type]
    off = 0
    for d, e in enumerate(t.dims):
        off += (e if isinstance(e, int) else e[0]) * sst[d]
    return off


_RAW = ("int8", "int16", "int32", "uint8", "uint16", "uint32", "float32", "bool")


def _raw_bits(st: Storage) -> bool:
    """Whether the storage array holds the declared dtype's raw bits (so a NumPy view reinterprets it)."""
    return dt.is_packed(st.dtype) or dt.name_of(st.dtype) in _RAW


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
    if st.machine is not None and st.data is not None:
        if not (_raw_bits(st) and (dt.is_packed(d) or dt.name_of(d) in _RAW)):
            raise UnsupportedError(
                f"{api}: reinterpreting {dt.name_of(st.dtype)} storage as {dt.name_of(d)} is not simulated yet "
                "(only integer, float32 and packed x4 types are bit-aliased)",
                rule="unsupported",
            )
        data = np.ascontiguousarray(st.data).view(dt.storage_dtype(d)).reshape(shape)
    alias = Storage(
        st.machine() if st.machine else None,
        st.id,
        shape,
        d,
        st.buffer,
        st.par_axis,
        data,
        name=st.name,
        kind=st.kind,
        origin=st.origin,
    )
    if st.uninit is not None:
        if old == new:
            alias.uninit = st.uninit.reshape(shape)
            alias.n_uninit = st.n_uninit
        elif st.uninit.any():
            raise UnsupportedError(
                f"{api}: reinterpreting a partly written {st.describe()} as {dt.name_of(d)} is not simulated yet",
                rule="unsupported",
            )
    alias.is_input = st.is_input
    alias.addr = st.addr
    alias.written = st.written
    alias.machine = None  # the alias never frees the original's memory
    _ALIASES[alias] = st  # the original lives as long as the alias does
    return alias


_ALIASES: weakref.WeakKeyDictionary[Storage, Storage] = weakref.WeakKeyDictionary()


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
    flat = np.full(shape, off, dtype=np.int64)
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
        else:
            flat = flat + step * np.arange(count, dtype=np.int64).reshape(sh)
    size = int(np.prod(base.shape))
    if not dynamic and flat.size and (flat.min() < 0 or flat.max() >= size):
        bad = int(flat.max()) if flat.max() >= size else int(flat.min())
        raise BoundsError(
            f"{api}: the access pattern {[list(p) for p in pairs]} with offset {off} reaches element {bad} of "
            f"{base.describe()}, which has {size} elements",
            rule="out-of-bounds",
        )
    coords = []
    rem = flat
    for d, s in enumerate(sst):
        coords.append(rem // s if d else np.floor_divide(rem, s))
        rem = rem - (rem // s) * s
    pax = 0 if base.on_chip else None
    return Tensor(base, None, shape, pax, tuple(np.ascontiguousarray(c) for c in coords))


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
