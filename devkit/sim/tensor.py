"""Views: the simulator's tensors.

A :class:`Tensor` is what kernels hold: a view of a :class:`~devkit.sim.storage.Storage` (one
allocation: an HBM tensor, an SBUF or PSUM tile, possibly with block dimensions) selected by an index
(ints, slices, ``nl.arange`` expressions, masks, or index tiles for indirect DMA).

Views keep, for every storage dimension, either a fixed coordinate (``int``) or an affine run
``(start, step, count, out_axis)`` that maps onto one axis of the view.  Such views translate to
NumPy basic slicing (no copies).  Views that cannot be expressed that way (non-affine indices,
indirect indices, out-of-bounds runs that a mask must legalise) keep explicit index arrays instead.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from devkit import dtypes as dt
from devkit.errors import BoundsError, IndexingError, ScopeError, UninitializedReadError
from devkit.sim.index import IndexExpr, MaskExpr
from devkit.sim.storage import HBM_BUFFERS, Storage

# A view dimension: int (fixed coordinate) or (start, step, count, out_axis)
Dim = Any

# (dims, storage shape, view shape) -> (key, oob, perm, bshape, bcast) of Tensor._compile
_COMPILED: dict[tuple, tuple] = {}
_COMPILED_MAX = 1 << 16
# (view dims, view shape, partition axis, on chip, index) -> (dims, shape, partition axis) of _basic
_BASIC: dict[tuple, tuple] = {}
# storage shape -> dims of the whole-tensor view
_WHOLE_DIMS: dict[tuple[int, ...], tuple] = {}


class Tensor:
    """A tensor (or tile) as a kernel sees it: a view of a :class:`Storage`.

    Public attributes follow ``nki.tensor``: ``shape``, ``dtype``, ``ndim``, ``itemsize``, ``buffer``.
    """

    __slots__ = (
        "_bcast",
        "_bshape",
        "_fresh",
        "_garr",
        "_key",
        "_oob",
        "_oob_why",
        "_perm",
        "dims",
        "omask",
        "pax",
        "shape",
        "st",
    )
    __hash__ = object.__hash__

    # Set by devkit.nki.language at import: implements Python operators on tensors.
    _ops: Any = None

    def __init__(
        self,
        st: Storage,
        dims: tuple[Dim, ...] | None,
        shape: tuple[int, ...],
        pax: int | None,
        garr: tuple[np.ndarray, ...] | None = None,
    ) -> None:
        self.st = st
        self.dims = dims
        self.shape = shape
        self.pax = pax
        self._garr = garr
        self.omask: np.ndarray | None = None
        self._fresh: Any = None
        # why a static slice of an HBM tensor runs past its end (the access, not the slice, is checked:
        # the access's mask may legalise it)
        self._oob_why: str | None = None
        if dims is None:
            self._key = self._perm = self._bshape = self._bcast = None
            self._oob = False
        # otherwise the NumPy key is compiled on first use (see __getattr__): cost-only runs never need it

    _LAZY = frozenset(("_key", "_perm", "_bshape", "_oob", "_bcast"))

    def __getattr__(self, name: str) -> Any:
        if name in Tensor._LAZY:
            self._compile()
            return object.__getattribute__(self, name)
        raise AttributeError(name)

    # ---- construction helpers ------------------------------------------------------------------
    @staticmethod
    def whole(st: Storage) -> Tensor:
        dims = _WHOLE_DIMS.get(st.shape)
        if dims is None:
            if len(_WHOLE_DIMS) >= _COMPILED_MAX:
                _WHOLE_DIMS.clear()
            dims = _WHOLE_DIMS[st.shape] = tuple((0, 1, n, i) for i, n in enumerate(st.shape))
        return Tensor(st, dims, st.shape, st.par_axis)

    def _compile(self) -> None:
        """Precompute the NumPy basic key, the axis permutation and the bounds status (memoised: loops
        index the same regions again and again)."""
        memo_key = (self.dims, self.st.shape, self.shape)
        try:
            hit = _COMPILED.get(memo_key)
        except TypeError:  # an unhashable coordinate: compile without the memo
            self._compile_now()
            return
        if hit is None:
            self._compile_now()
            hit = (self._key, self._oob, self._perm, self._bshape, self._bcast)
            if len(_COMPILED) >= _COMPILED_MAX:
                _COMPILED.clear()
            _COMPILED[memo_key] = hit
            return
        self._key, self._oob, self._perm, self._bshape, self._bcast = hit

    def _compile_now(self) -> None:
        key = []
        axes = []
        oob = False
        for d, e in enumerate(self.dims):  # type: ignore[arg-type]
            n = self.st.shape[d]
            if isinstance(e, int):
                if e < 0 or e >= n:
                    oob = True
                key.append(e)
            else:
                start, step, count, ax = e
                last = start + step * (count - 1)
                if count > 0 and (min(start, last) < 0 or max(start, last) >= n):
                    oob = True
                if step > 0:
                    key.append(slice(start, start + step * count if count else start, step))
                elif step < 0:
                    stop = last + step
                    key.append(slice(start, None if stop < 0 else stop, step))
                else:
                    key.append(slice(start, start + 1))
                axes.append(ax)
        self._oob = oob
        self._key = tuple(key)
        self._perm = None
        self._bshape = None
        self._bcast = None
        if axes != sorted(axes):
            order = sorted(range(len(axes)), key=lambda i: axes[i])
            self._perm = tuple(order)
        bcast_axes = {e[3] for e in self.dims if not isinstance(e, int) and e[1] == 0 and e[2] > 1}
        compact = tuple(1 if a in bcast_axes else self.shape[a] for a in sorted(axes))
        if bcast_axes:
            self._bcast = tuple(1 if a in bcast_axes else n for a, n in enumerate(self.shape))
        if len(compact) != len(self.shape) or bcast_axes:
            self._bshape = compact

    @property
    def dtype(self) -> Any:
        return self.st.dtype

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def itemsize(self) -> int:
        return self.st.itemsize

    @property
    def buffer(self) -> str:
        return self.st.buffer

    @property
    def size(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n

    @property
    def partitions(self) -> int:
        """Number of partitions this view spans (1 for a view without a partition axis)."""
        return self.shape[self.pax] if self.pax is not None and self.shape else 1

    @property
    def free_size(self) -> int:
        p = self.partitions
        return self.size // p if p else 0

    def __repr__(self) -> str:
        return f"<nki tensor {list(self.shape)} {dt.name_of(self.dtype)} in {self.st.buffer}>"

    def __len__(self) -> int:
        return self.shape[0]

    def __iter__(self):  # type: ignore[no-untyped-def]
        raise IndexingError("tensors are not iterable in a kernel; index them with nl.arange or slices")

    def __bool__(self) -> bool:
        from devkit.errors import UnsupportedError

        if self.st.buffer in HBM_BUFFERS:
            return True  # `if hbm_tensor:` tests that an argument was given, not a value
        raise UnsupportedError(
            "control flow on tensor values is not supported in NKI (the value is not known at "
            "compile time); use nl.where / masks instead"
        )

    # ---- liveness --------------------------------------------------------------------------------
    def check_alive(self) -> None:
        st = self.st
        if not st.alive:
            fn, ln = st.origin
            raise ScopeError(
                f"{st.describe()} created at {fn}:{ln} is used outside the loop body that created it; "
                "allocate it before the loop (and update it with t[...] = ...) to carry it across iterations"
            )

    # ---- region info ---------------------------------------------------------------------------
    def box(self) -> tuple[tuple[int, int], ...]:
        """Per storage dimension ``(lo, hi)`` hull of the elements this view touches."""
        if self.dims is not None:
            out = []
            for e in self.dims:
                if isinstance(e, int):
                    out.append((e, e + 1))
                else:
                    start, step, count, _ = e
                    last = start + step * (count - 1)
                    out.append((min(start, last), max(start, last) + 1) if count else (start, start))
            return tuple(out)
        out = []
        for a in self._garr:  # type: ignore[union-attr]
            if a.size == 0:
                out.append((0, 0))
            else:
                out.append((int(a.min()), int(a.max()) + 1))
        return tuple(out)

    def run_elems(self, free_only: bool = False) -> int:
        """Elements in one contiguous memory run when this view is traversed in view order."""
        if self.dims is None:
            return self._general_run_elems(free_only)
        st = self.st
        axes_order = sorted({e[3] for e in self.dims if not isinstance(e, int) and e[2] > 1})
        run = 1
        pos = len(axes_order) - 1
        for d in range(st.ndim - 1, -1, -1):
            if free_only and d == st.par_axis:
                break
            e = self.dims[d]
            if isinstance(e, int):
                if st.shape[d] == 1:
                    continue
                break
            _start, step, count, ax = e
            if count <= 1:
                continue
            if pos < 0 or ax != axes_order[pos] or step != 1:
                break
            run *= count
            pos -= 1
            if count != st.shape[d]:
                break
        return run

    def _general_run_elems(self, free_only: bool) -> int:
        """Average contiguous run of an explicitly indexed view: flatten its storage offsets in view order
        and count where consecutive elements stop being adjacent in memory."""
        size = self.size
        if size <= 1:
            return max(size, 1)
        st = self.st
        strides = [1] * st.ndim
        for d in range(st.ndim - 2, -1, -1):
            strides[d] = strides[d + 1] * st.shape[d + 1]
        # 32-bit offsets when every offset fits (half the memory traffic of the full-size pass); the compact
        # index arrays are small, so the bound is cheap (masked-off coordinates may lie outside the storage)
        bound = sum(int(np.abs(a).max(initial=0)) * s for a, s in zip(self._garr, strides))  # type: ignore[arg-type]
        odt = np.int32 if bound < 2**31 else np.int64
        offs = np.zeros(self.shape, dtype=odt)
        for a, stride in zip(self._garr, strides):  # type: ignore[arg-type]
            # the (compact) index array broadcasts into the offsets
            np.add(offs, (np.asarray(a) * stride).astype(odt, copy=False), out=offs)
        flat = offs.reshape(-1)
        step = np.subtract(flat[1:], flat[:-1], out=flat[:-1])  # offs is scratch: difference in place
        breaks = int(np.count_nonzero(step != 1)) + 1
        run = max(1, size // breaks)
        if free_only and self.pax is not None and self.shape:
            run = min(run, max(1, size // max(self.shape[self.pax], 1)))
        return run

    # ---- indexing --------------------------------------------------------------------------------
    def __getitem__(self, key: Any) -> Tensor:
        self.check_alive()
        return index(self, key)

    def __setitem__(self, key: Any, value: Any) -> None:
        self.check_alive()
        Tensor._ops.assign(index(self, key), value)

    # ---- data access (numerics) ------------------------------------------------------------------
    def oob_positions(self) -> np.ndarray | None:
        """Boolean array (view shape) of out-of-bounds positions, or None when all in bounds."""
        if self.dims is not None:
            if not self._oob:
                return None
            arrs = self._index_arrays()
        else:
            arrs = self._garr
        bad = None
        for a, n in zip(arrs, self.st.shape):  # type: ignore[arg-type]
            b = (a < 0) | (a >= n)
            bad = b if bad is None else (bad | b)
        if bad is None or not bad.any():
            return None
        return np.broadcast_to(bad, self.shape)

    def _index_arrays(self) -> tuple[np.ndarray, ...]:
        """Per storage dimension, the coordinate array broadcastable to the view shape."""
        if self.dims is None:
            return self._garr  # type: ignore[return-value]
        nd = len(self.shape)
        out = []
        for e in self.dims:
            if isinstance(e, int):
                out.append(np.asarray(e, dtype=np.int64).reshape((1,) * nd))
            else:
                start, step, count, ax = e
                sh = [1] * nd
                sh[ax] = count
                out.append((start + step * np.arange(count, dtype=np.int64)).reshape(sh))
        return tuple(out)

    def _fancy_key(self, arrs: tuple[np.ndarray, ...], sel: np.ndarray | None) -> tuple[np.ndarray, ...]:
        full = [np.broadcast_to(a, self.shape) for a in arrs]
        if sel is not None:
            return tuple(a[sel] for a in full)
        return tuple(full)

    def check_bounds(self, mask: np.ndarray | None, what: str) -> None:
        """Raise BoundsError if an element selected by ``mask`` (view shape) is out of bounds."""
        bad = self.oob_positions()
        if bad is None:
            return
        if mask is not None:
            bad = bad & np.broadcast_to(mask, self.shape)
        if bad.any():
            if self._oob_why is not None:
                raise BoundsError(self._oob_why)
            pos = tuple(int(i[0]) for i in np.nonzero(bad))
            coords = tuple(int(np.broadcast_to(a, self.shape)[pos]) for a in self._index_arrays())
            raise BoundsError(
                f"{what} index {list(coords)} is outside {self.st.describe()} (shape {list(self.st.shape)}); "
                "clip the index range or legalise the access with a mask="
            )

    def read(self, mask: np.ndarray | None = None, *, check_init: bool = True) -> np.ndarray:
        """Values of this view (storage representation), shape :attr:`shape`.

        Positions outside ``mask`` (or out of bounds but masked off) read as 0.
        """
        st = self.st
        data = st.values()
        if data is None:
            raise RuntimeError("read() in a cost-only run")  # devkit bug, not a kernel fault
        if self.dims is not None and not self._oob:
            v = data[self._key]
            if self._perm is not None:
                v = v.transpose(self._perm)
            if self._bshape is not None:
                v = self._expand(v)
            if check_init and st.uninit is not None:
                u = st.uninit[self._key]
                if self._perm is not None:
                    u = u.transpose(self._perm)
                if self._bshape is not None:
                    u = self._expand(u)
                _check_uninit(self, u, mask)
            return v
        # general path
        sel = None
        if self._oob or mask is not None:
            bad = self.oob_positions()
            sel = (
                np.ones(self.shape, dtype=bool) if mask is None else np.broadcast_to(mask, self.shape).copy()
            )
            if bad is not None:
                if (bad & sel).any():
                    self.check_bounds(sel, "read")
                sel &= ~bad
        arrs = self._index_arrays()
        if sel is None:
            key = self._fancy_key(arrs, None)
            out = data[key]
            if check_init and st.uninit is not None:
                _check_uninit(self, st.uninit[key], None)
            return out
        out = np.zeros(self.shape, dtype=data.dtype)
        key = self._fancy_key(arrs, sel)
        out[sel] = data[key]
        if check_init and st.uninit is not None:
            u = np.zeros(self.shape, dtype=bool)
            u[sel] = st.uninit[key]
            _check_uninit(self, u, None)
        return out

    def _expand(self, v: np.ndarray) -> np.ndarray:
        """Compact NumPy view (storage-dim order after perm) -> view shape (size-1 and broadcast axes)."""
        if self._bcast is not None:
            return np.broadcast_to(v.reshape(self._bcast), self.shape)
        return v.reshape(self.shape)

    def _covers_all(self) -> bool:
        """Whether this plain view selects every element of its storage (distinct elements, as many)."""
        return self.dims is not None and not self._oob and self.size == math.prod(self.st.shape)

    def write(self, values: Any, mask: np.ndarray | None = None) -> None:
        """Store ``values`` (already rounded to the storage representation, view-shaped or
        broadcastable) into the positions of this view selected by ``mask``."""
        st = self.st
        if st.unfilled and mask is None and self._bcast is None and self._covers_all():
            st.overwritten_whole()
        data = st.data
        st.written = True
        if self._bcast is not None:
            raise IndexingError("cannot write through a broadcast view (broadcast_to); write the source tile")
        if data is None:
            return
        if self.dims is not None and not self._oob:
            tgt = data[self._key]
            if not isinstance(tgt, np.ndarray):  # one element addressed by integers (a 0-d view)
                if mask is None or bool(np.asarray(mask).reshape(-1)[0]):
                    data[self._key] = np.asarray(values).reshape(-1)[0]
                if st.uninit is not None:
                    _mark_init(st, self._key, None, None, None)
                return
            if self._perm is not None:
                tgt = tgt.transpose(self._perm)
            vals = np.broadcast_to(values, self.shape)
            if self._bshape is not None:
                vals = vals.reshape(self._bshape)
            if mask is None:
                tgt[...] = vals
                if st.uninit is not None:
                    _mark_init(st, self._key, self._perm, None, self._bshape)
            else:
                m = np.broadcast_to(mask, self.shape)
                if self._bshape is not None:
                    m = m.reshape(self._bshape)
                tgt[m] = vals[m]
                if st.uninit is not None:
                    # a masked write initialises the whole region it addresses (masked-off elements keep
                    # unspecified contents, which is legal to read)
                    _mark_init(st, self._key, self._perm, None, self._bshape)
            return
        sel = np.ones(self.shape, dtype=bool) if mask is None else np.broadcast_to(mask, self.shape).copy()
        bad = self.oob_positions()
        if bad is not None:
            if (bad & sel).any():
                self.check_bounds(sel, "write")
            sel &= ~bad
        key = self._fancy_key(self._index_arrays(), sel)
        data[key] = np.broadcast_to(values, self.shape)[sel]
        if st.uninit is not None:
            inb = np.ones(self.shape, dtype=bool) if bad is None else ~bad
            st.uninit[self._fancy_key(self._index_arrays(), inb)] = False
            st.n_uninit = int(np.count_nonzero(st.uninit))
            if st.n_uninit == 0:
                st.uninit = None

    def mark_written(self, mask: np.ndarray | None = None) -> None:
        """Record a write without values (cost-only runs keep no data)."""
        self.st.written = True

    # ---- written-state of elements (numerics runs; see devkit.sim.unwritten) ---------------------------
    def unwritten(self, mask: np.ndarray | None = None) -> np.ndarray | None:
        """The never-written positions of this view (a new boolean array of the view's shape) among those
        ``mask`` selects and that lie in bounds; ``None`` when there are none or written-state is not
        tracked (cost-only runs, ``check_uninit=False``)."""
        st = self.st
        if st.uninit is None:
            return None
        if self.dims is not None and not self._oob:
            u = np.asarray(st.uninit[self._key])
            if self._perm is not None:
                u = u.transpose(self._perm)
            u = self._expand(u) if self._bshape is not None else u.reshape(self.shape)
            u = u & np.broadcast_to(mask, self.shape) if mask is not None else u.copy()
        else:
            sel = (
                np.ones(self.shape, dtype=bool) if mask is None else np.broadcast_to(mask, self.shape).copy()
            )
            bad = self.oob_positions()
            if bad is not None:
                sel &= ~bad
            u = np.zeros(self.shape, dtype=bool)
            u[sel] = st.uninit[self._fancy_key(self._index_arrays(), sel)]
        return u if u.any() else None

    def check_written(self, mask: np.ndarray | None = None) -> None:
        """Raise :class:`UninitializedReadError` when an element of this view selected by ``mask`` was
        never written (an instruction computes on it)."""
        u = self.unwritten(mask)
        if u is not None:
            _check_uninit(self, u, None)

    def selected(self, mask: np.ndarray | None = None) -> int:
        """How many in-bounds positions of this view ``mask`` selects."""
        bad = self.oob_positions()
        if mask is None and bad is None:
            return self.size
        sel = np.ones(self.shape, dtype=bool) if mask is None else np.broadcast_to(mask, self.shape)
        if bad is not None:
            sel = sel & ~bad
        return int(np.count_nonzero(sel))

    def storage_positions(self, g: np.ndarray) -> np.ndarray:
        """A boolean array of the storage's shape, true at the storage elements this view's positions where
        ``g`` (broadcastable to the view's shape) is true stand for (in-bounds positions only)."""
        out = np.zeros(self.st.shape, dtype=bool)
        g = np.broadcast_to(g, self.shape)
        if self.dims is not None and not self._oob and self._bcast is None:
            tgt = out[self._key]
            if not isinstance(tgt, np.ndarray):  # one element addressed by integers
                out[self._key] = bool(g.reshape(-1)[0])
                return out
            if self._perm is not None:
                tgt = tgt.transpose(self._perm)
            tgt |= g.reshape(self._bshape) if self._bshape is not None else g
            return out
        sel = g.copy()
        bad = self.oob_positions()
        if bad is not None:
            sel &= ~bad
        out[self._fancy_key(self._index_arrays(), sel)] = True
        return out

    def mark_unwritten(self, g: np.ndarray) -> None:
        """Record that the positions of this view where ``g`` (broadcastable to the view's shape) is true
        hold never-written data again: a data movement just copied such data there.  In-bounds positions
        only; the storage must be tracked (numerics run)."""
        st = self.st
        if st.uninit is None:
            st.uninit = np.zeros(st.shape, dtype=bool)
            st.n_uninit = 0
        g = np.broadcast_to(g, self.shape)
        if self.dims is not None and not self._oob and self._bcast is None:
            tgt = st.uninit[self._key]
            if not isinstance(tgt, np.ndarray):  # one element addressed by integers
                if bool(g.reshape(-1)[0]) and not tgt:
                    st.uninit[self._key] = True
                    st.n_uninit += 1
                return
            if self._perm is not None:
                tgt = tgt.transpose(self._perm)
            gv = g.reshape(self._bshape) if self._bshape is not None else g
            before = int(np.count_nonzero(tgt))
            tgt |= gv
            st.n_uninit += int(np.count_nonzero(tgt)) - before
            return
        sel = g.copy()
        bad = self.oob_positions()
        if bad is not None:
            sel &= ~bad
        st.uninit[self._fancy_key(self._index_arrays(), sel)] = True
        st.n_uninit = int(np.count_nonzero(st.uninit))


def mark_initialised(t: Tensor) -> None:
    """Record that every element of plain view ``t`` was written (the uninitialised-read bookkeeping of
    :meth:`Tensor.write`, for a write whose values arrive later)."""
    if t.st.uninit is not None:
        _mark_init(t.st, t._key, t._perm, None, t._bshape)


def _mark_init(st: Storage, key: tuple, perm: Any, m: np.ndarray | None, bshape: Any) -> None:
    u = st.uninit[key]  # type: ignore[index]
    if not isinstance(u, np.ndarray):  # one element addressed by integers
        if u:
            st.uninit[key] = False  # type: ignore[index]
            st.n_uninit -= 1
            if st.n_uninit <= 0:
                st.uninit = None
        return
    if perm is not None:
        u = u.transpose(perm)
    if m is None:
        n = int(np.count_nonzero(u))
        u[...] = False
    else:
        n = int(np.count_nonzero(u[m]))
        u[m] = False
    st.n_uninit -= n
    if st.n_uninit <= 0:
        st.uninit = None


#: > 0 while an instruction with a dataflow rule computes (devkit.sim.dataflow): its reads of never-written
#: elements are legal, the rule gives the results the never-written state instead
TOLERATING = [0]


def _check_uninit(t: Tensor, u: np.ndarray, mask: np.ndarray | None) -> None:
    if TOLERATING[0]:
        return
    if mask is not None:
        u = u & np.broadcast_to(mask, u.shape)
    if u.any():
        pos = tuple(int(i[0]) for i in np.nonzero(u))
        n = int(u.sum())
        st = t.st
        if st.taint is not None:
            raise st.taint.observed(
                f"{n} element(s) of {st.describe()}", f"first at view position {list(pos)}"
            )
        raise UninitializedReadError(
            f"reading {n} element(s) of {unwritten_source(st)}, first at view position "
            f"{list(pos)}; initialise it (nl.zeros / memset) or write it before reading"
        )


def unwritten_source(st: Storage) -> str:
    """How messages name never-written data of ``st``: the tensor, its allocation line and, when a data
    movement carried the data in, that movement."""
    fn, ln = st.origin
    moved = ""
    if st.garbage_from is not None:
        mfn, mln, via = st.garbage_from
        moved = f" (a data movement at {mfn}:{mln} copied never-written data in{via})"
    return f"{st.describe()} (allocated at {fn}:{ln}) that were never written{moved}"


# ---- the indexing algebra ----------------------------------------------------------------------


def broadcast_shapes(shapes: list[tuple[int, ...]]) -> tuple[int, ...] | None:
    """NumPy broadcasting of small shape tuples (None when they do not broadcast)."""
    nd = max(len(s) for s in shapes)
    out = [1] * nd
    for s in shapes:
        off = nd - len(s)
        for i, n in enumerate(s):
            cur = out[off + i]
            if n != cur:
                if cur == 1:
                    out[off + i] = n
                elif n != 1:
                    return None
    return tuple(out)


def _norm_key(t: Tensor, key: Any) -> list[Any]:
    if not isinstance(key, tuple):
        key = (key,)
    nd = len(t.shape)
    n_ell = sum(1 for k in key if k is Ellipsis)
    if n_ell > 1:
        raise IndexingError("an index can contain at most one '...'")
    if n_ell:
        i = next(j for j, k in enumerate(key) if k is Ellipsis)
        fill = nd - (len(key) - 1)
        key = key[:i] + (slice(None),) * max(fill, 0) + key[i + 1 :]
    if len(key) > nd:
        raise IndexingError(
            f"too many indices ({len(key)}) for a tensor of rank {nd} (shape {list(t.shape)})"
        )
    return list(key) + [slice(None)] * (nd - len(key))


def _as_int(k: Any) -> int | None:
    if isinstance(k, (bool, np.bool_)):
        return None
    if isinstance(k, (int, np.integer)):
        return int(k)
    return None


class OffsetView(Tensor):
    """A view whose element positions were read from on-chip offset tiles at run time (an index tile in a
    Beta-1 subscript, ``t.ap(scalar_offset=/vector_offset=)``, ``tensor.indirect``).

    The instruction that uses it reads those tiles too: it waits for their last writers (a dependency in the
    trace, no operand bytes) and keeps them live until it runs.  Views of such a view made by subscripting
    carry the tiles along."""

    __slots__ = ("offset_tiles",)

    @staticmethod
    def of(view: Tensor, tiles: tuple[Tensor, ...]) -> Tensor:
        """``view`` marked as reading ``tiles`` (plus any it already reads)."""
        if view.__class__ is OffsetView:
            have = view.offset_tiles
            more = tuple(
                x for x in tiles if all(x is not y for y in have)
            )  # (identity: == is an instruction)
            if not more:
                return view
            tiles = have + more
        elif view.__class__ is not Tensor or not tiles:
            return view  # (an out-of-bounds view keeps its own class: using it is an error anyway)
        out = Tensor.__new__(OffsetView)
        for name in Tensor.__slots__:  # every field as set so far (lazily compiled ones stay lazy)
            try:
                setattr(out, name, object.__getattribute__(view, name))
            except AttributeError:
                pass
        out.offset_tiles = tiles
        offset_views_made[0] = True
        return out


#: whether any OffsetView was made in this process (the machine's issue path looks for them only then)
offset_views_made = [False]


def index(t: Tensor, key: Any) -> Tensor:
    """``t[key]`` under NKI semantics."""
    view = _index(t, key)
    if offset_views_made[0] and t.__class__ is OffsetView:
        return OffsetView.of(view, t.offset_tiles)
    return view


def _index(t: Tensor, key: Any) -> Tensor:
    if isinstance(key, MaskExpr):
        return _operand_mask(t, key)
    keys = _norm_key(t, key)
    n_given = len(key) if isinstance(key, tuple) else 1
    if isinstance(key, tuple) and any(k is Ellipsis for k in key):
        n_given = len(keys)
    adv = False
    has_slice = False
    for j, k in enumerate(keys):
        if isinstance(k, (IndexExpr, Tensor, np.ndarray)):
            adv = True
        elif isinstance(k, slice):
            if j < n_given:
                has_slice = True
        elif k is None:
            raise IndexingError("None / np.newaxis is not supported when indexing NKI tensors")
        elif isinstance(k, MaskExpr):
            raise IndexingError("a mask can only be used as the whole index (operand masking: t[mask])")
        elif _as_int(k) is None:
            raise IndexingError(f"unsupported index {k!r} of type {type(k).__name__}")
    if not adv:
        return _basic(t, keys)
    if has_slice:
        raise IndexingError(
            "mixing basic indexing (slices) and advanced indexing (nl.arange / mgrid expressions) in one "
            "index is not supported; use only arange expressions or only slices",
            rule="mixed-indexing",
        )
    for k in keys:
        if isinstance(k, IndexExpr) and k.ndim == 1 and len(t.shape) > 1:
            raise IndexingError(
                "1-D arange index: use nl.arange(n)[:, None] for the partition dim and nl.arange(n)[None, :] "
                "for free dims",
                rule="1d-arange",
            )
    if n_given < len(keys):
        tiles = tuple(k for k in keys[:n_given] if isinstance(k, Tensor))
        keys = _expand_implicit_dims(t, keys, n_given)
    else:
        tiles = tuple(k for k in keys if isinstance(k, Tensor))
    view = _advanced(t, keys)
    return OffsetView.of(view, tiles) if tiles else view


def _expand_implicit_dims(t: Tensor, keys: list[Any], n_given: int) -> list[Any]:
    """``d[idx]`` on a 2-D tensor: dims the index leaves out are taken whole, as new trailing grid axes."""
    extra = len(keys) - n_given
    rank = 0
    for k in keys[:n_given]:
        if isinstance(k, (IndexExpr, Tensor, np.ndarray)):
            rank = max(rank, len(k.shape))
    nd = rank + extra
    out: list[Any] = []
    for k in keys[:n_given]:
        if isinstance(k, IndexExpr):
            full = (1,) * (rank - len(k.shape)) + tuple(k.shape)
            shape = full + (1,) * extra
            if k.axis is not None:
                out.append(IndexExpr(shape, k.axis + rank - len(k.shape), k.start, k.step))
            else:
                out.append(IndexExpr.from_array(k.values().reshape(shape)))
        elif isinstance(k, Tensor):
            vals = np.asarray(Tensor._ops.index_values(k))
            out.append(vals.reshape((1,) * (rank - vals.ndim) + vals.shape + (1,) * extra))
        elif isinstance(k, np.ndarray):
            out.append(k.reshape((1,) * (rank - k.ndim) + k.shape + (1,) * extra))
        else:
            out.append(k)
    for j in range(extra):
        ax = n_given + j
        shape = [1] * nd
        shape[rank + j] = t.shape[ax]
        out.append(IndexExpr(tuple(shape), rank + j, 0, 1))
    return out


def _operand_mask(t: Tensor, m: MaskExpr) -> Tensor:
    v = Tensor(t.st, t.dims, t.shape, t.pax, t._garr)
    v._oob_why = t._oob_why
    try:
        arr = np.broadcast_to(m.arr, t.shape)
    except ValueError as e:
        raise IndexingError(
            f"operand mask of shape {list(m.shape)} does not fit the tensor shape {list(t.shape)}"
        ) from e
    v.omask = arr if t.omask is None else (arr & t.omask)
    return v


def _basic(t: Tensor, keys: list[Any]) -> Tensor:
    """Ints and slices (NumPy basic indexing; an int on the partition dim keeps it as size 1).

    Memoised on the view and the index (loops index the same regions again and again)."""
    memo = _basic_memo_key(t, keys)
    if memo is not None:
        try:
            hit = _BASIC.get(memo)
        except TypeError:  # an unhashable coordinate in the view
            hit = memo = None
        if hit is not None:
            return Tensor(t.st, hit[0], hit[1], hit[2])
    out = _basic_now(t, keys)
    if memo is not None and out._oob_why is None:
        if len(_BASIC) >= _COMPILED_MAX:
            _BASIC.clear()
        _BASIC[memo] = (out.dims, out.shape, out.pax)
    return out


def _basic_memo_key(t: Tensor, keys: list[Any]) -> tuple | None:
    """A hashable key for :data:`_BASIC`, or None when the index holds anything but plain ints/slices."""
    if t.dims is None:
        return None
    parts: list[Any] = []
    for k in keys:
        if type(k) is int:
            parts.append(k)
        elif type(k) is slice:
            a, b, c = k.start, k.stop, k.step
            if (a is not None and type(a) is not int) or (b is not None and type(b) is not int):
                return None
            if c is not None and type(c) is not int:
                return None
            parts.append((a, b, c))
        else:
            return None
    return (t.dims, t.shape, t.pax, t.st.on_chip, tuple(parts))


def _basic_now(t: Tensor, keys: list[Any]) -> Tensor:
    shape = []
    new_axis_of: list[int | None] = []  # old view axis -> new axis (None if dropped)
    sel: list[Any] = []
    keep: set[int] = set()
    # A slice of an HBM tensor past its end is not an access yet: the DMA that uses the view checks the
    # elements its mask selects (on-chip tiles are checked here, where the slice is taken).
    defer_why = None
    if t.st.on_chip and t.pax is not None:
        # on-chip tiles stay at least 2-D: t[:, i] of a (P, F) tile is (P, 1), as NKI's tiles are
        ints = [ax for ax, k in enumerate(keys) if _as_int(k) is not None and ax > t.pax]
        kept = sum(1 for ax, k in enumerate(keys) if _as_int(k) is None or ax == t.pax)
        while kept < 2 and ints:
            keep.add(ints.pop())
            kept += 1
    for ax, k in enumerate(keys):
        n = t.shape[ax]
        i = _as_int(k)
        if i is not None:
            if (ax == t.pax and t.st.on_chip) or ax in keep:
                if i < 0 or i >= n:
                    raise BoundsError(f"index {i} is outside partition dim of size {n} of {t.st.describe()}")
                sel.append((i, 1, 1))
                new_axis_of.append(len(shape))
                shape.append(1)
            else:
                if i < 0 or i >= n:
                    raise BoundsError(f"index {i} is outside dim {ax} of size {n} of {t.st.describe()}")
                sel.append(i)
                new_axis_of.append(None)
            continue
        start, stop, step = k.start, k.stop, k.step
        step = 1 if step is None else int(step)
        if step == 0:
            raise IndexingError("slice step cannot be zero")
        if start is None:
            start = 0 if step > 0 else n - 1
        if stop is None:
            stop = n if step > 0 else -1
            count = max(0, -(-(stop - start) // step))
        else:
            start, stop = _slice_int(start), _slice_int(stop)
            count = max(0, -(-(stop - start) // step))
        start = int(start)
        if count > 0:
            last = start + step * (count - 1)
            if min(start, last) < 0 or max(start, last) >= n:
                why = f"slice {start}:{stop}:{step} is outside dim {ax} of size {n} of {t.st.describe()}"
                if t.st.on_chip or t.dims is None:
                    raise BoundsError(why)
                defer_why = defer_why or why
        sel.append((start, step, count))
        new_axis_of.append(len(shape))
        shape.append(count)
    pax = new_axis_of[t.pax] if t.pax is not None else None
    if defer_why is not None:
        view = _compose_adv(t, sel, new_axis_of, tuple(shape), pax)
        view._oob_why = defer_why
        return view
    return _compose(t, sel, new_axis_of, tuple(shape), pax)


def _slice_int(v: Any) -> int:
    i = _as_int(v)
    if i is None:
        raise IndexingError(f"slice bounds must be integers known at trace time, got {v!r}")
    return i


def _compose(
    t: Tensor, sel: list[Any], new_axis_of: list[int | None], shape: tuple[int, ...], pax: int | None
) -> Tensor:
    """Apply per-view-axis selections (int or (start, step, count)) to view ``t``."""
    if t.dims is None:
        arrs = []
        idx: list[Any] = []
        for s in sel:
            if isinstance(s, int):
                idx.append(s)
            else:
                start, step, count = s
                idx.append(
                    slice(
                        start,
                        start + step * count
                        if step > 0
                        else (None if start + step * count < 0 else start + step * count),
                        step,
                    )
                )
        for a in t._garr:  # type: ignore[union-attr]
            arrs.append(np.broadcast_to(a, t.shape)[tuple(idx)])
        return Tensor(t.st, None, shape, pax, tuple(arrs))
    # axis of t -> storage dim
    dims = list(t.dims)
    owner: dict[int, int] = {}
    for d, e in enumerate(dims):
        if not isinstance(e, int):
            owner[e[3]] = d
    for ax, s in enumerate(sel):
        d = owner.get(ax)
        if d is None:  # a size-1 axis with no storage dim behind it
            continue
        start0, step0, _count0, _ = dims[d]
        if isinstance(s, int):
            dims[d] = start0 + step0 * s
        else:
            start, step, count = s
            dims[d] = (start0 + step0 * start, step0 * step, count, new_axis_of[ax])
    return Tensor(t.st, tuple(dims), shape, pax)


def _advanced(t: Tensor, keys: list[Any]) -> Tensor:
    shapes = []
    for k in keys:
        if isinstance(k, IndexExpr):
            shapes.append(k.shape)
        elif isinstance(k, Tensor):
            shapes.append(k.shape)
        elif isinstance(k, np.ndarray):
            shapes.append(k.shape)
    bshape = broadcast_shapes(shapes)
    if bshape is None:
        raise IndexingError(f"index expressions of shapes {shapes} do not broadcast together")
    if len(bshape) > 2:
        keys, bshape = _drop_unreferenced_axes(keys, bshape)
    nd = len(bshape)
    # fast path: affine exprs on distinct axes of the grid, view is affine
    if t.dims is not None and all(not isinstance(k, (Tensor, np.ndarray)) for k in keys):
        used: set[int] = set()
        ok = True
        for k in keys:
            if isinstance(k, IndexExpr):
                if k.axis is None or len(k.shape) != nd:
                    ok = False
                    break
                ax = k.axis
                if ax in used:
                    ok = False
                    break
                used.add(ax)
        if ok and all(bshape[a] == 1 for a in range(nd) if a not in used):
            sel: list[Any] = []
            new_axis_of: list[int | None] = []
            for k in keys:
                if isinstance(k, IndexExpr):
                    sel.append((k.start, k.step, k.shape[k.axis]))
                    new_axis_of.append(k.axis)
                else:
                    sel.append(int(k))
                    new_axis_of.append(None)
            pax = new_axis_of[t.pax] if t.pax is not None else None
            if pax is None and t.st.on_chip:
                pax = 0
            v = _compose_adv(t, sel, new_axis_of, bshape, pax)
            return v
    # general path: explicit coordinate arrays
    vals = []
    for k in keys:
        if isinstance(k, IndexExpr):
            vals.append(np.broadcast_to(k.values(), bshape))
        elif isinstance(k, Tensor):
            vals.append(np.broadcast_to(Tensor._ops.index_values(k), bshape))
        elif isinstance(k, np.ndarray):
            vals.append(np.broadcast_to(k.astype(np.int64), bshape))
        else:
            vals.append(np.broadcast_to(np.int64(int(k)), bshape))
    pax = 0 if t.st.on_chip else None
    return _from_view_coords(t, vals, bshape, pax)


def _drop_unreferenced_axes(keys: list[Any], bshape: tuple[int, ...]) -> tuple[list[Any], tuple[int, ...]]:
    """Grid axes no index refers to do not appear in the access pattern: ``t[i_p, i_f]`` with the first two
    components of ``nl.mgrid[0:P, 0:F, 0:1]`` is a (P, F) tile.  Rank stays at least 2."""
    nd = len(bshape)
    if nd > len(keys):
        # more grid axes than subscripts (components of a higher-rank nl.mgrid): a one-element index
        # expression then only selects, it does not contribute a dimension
        keys = [
            int(k.values().reshape(-1)[0]) if isinstance(k, IndexExpr) and k.size == 1 else k for k in keys
        ]
    ref: set[int] = set()
    for k in keys:
        if isinstance(k, IndexExpr) and k.axis is not None and len(k.shape) == nd:
            ref.add(k.axis)
        elif isinstance(k, (IndexExpr, Tensor, np.ndarray)):
            sh = k.shape
            off = nd - len(sh)
            ref.update(off + i for i, n in enumerate(sh) if n > 1)
    drop = [a for a in range(nd) if a not in ref and bshape[a] == 1]
    if len(drop) > nd - 2:
        drop = drop[len(drop) - (nd - 2) :] if nd > 2 else []
    if not drop:
        return keys, bshape
    keep = [a for a in range(nd) if a not in drop]
    new_keys: list[Any] = []
    for k in keys:
        if isinstance(k, IndexExpr):
            full = k.shape if len(k.shape) == nd else (1,) * (nd - len(k.shape)) + tuple(k.shape)
            shape = tuple(full[a] for a in keep)
            if k.axis is not None and len(k.shape) == nd:
                new_keys.append(IndexExpr(shape, keep.index(k.axis), k.start, k.step))
            else:
                new_keys.append(IndexExpr.from_array(k.values().reshape(full).reshape(shape)))
        elif isinstance(k, np.ndarray):
            full = (1,) * (nd - k.ndim) + tuple(k.shape)
            new_keys.append(k.reshape(full).reshape(tuple(full[a] for a in keep)))
        else:
            new_keys.append(k)  # ints; indirect index tiles keep their own (P, 1) shape
    return new_keys, tuple(bshape[a] for a in keep)


def _compose_adv(
    t: Tensor, sel: list[Any], new_axis_of: list[int | None], bshape: tuple[int, ...], pax: int | None
) -> Tensor:
    """Like _compose, but selections may run out of bounds (a mask may legalise them later)."""
    dims = list(t.dims)  # type: ignore[arg-type]
    owner: dict[int, int] = {}
    for d, e in enumerate(dims):
        if not isinstance(e, int):
            owner[e[3]] = d
    for ax, s in enumerate(sel):
        d = owner.get(ax)
        if d is None:
            if isinstance(s, int):
                if s != 0:
                    raise BoundsError(f"index {s} is outside a dim of size 1")
                continue
            start, step, count = s
            if count > 1 or start != 0:
                # out-of-range on a size-1 view axis: fall back to the general path via arrays
                return _advanced_general_from(t, sel, new_axis_of, bshape, pax)
            continue
        start0, step0, count0, _ = dims[d]
        if isinstance(s, int):
            if s < 0 or s >= count0:
                return _advanced_general_from(t, sel, new_axis_of, bshape, pax)
            dims[d] = start0 + step0 * s
        else:
            start, step, count = s
            last = start + step * (count - 1)
            if count and (min(start, last) < 0 or max(start, last) >= count0) and count0 != t.st.shape[d]:
                # out of range of a sub-view (not of the storage): keep exact semantics via arrays
                return _advanced_general_from(t, sel, new_axis_of, bshape, pax)
            dims[d] = (start0 + step0 * start, step0 * step, count, new_axis_of[ax])
    return Tensor(t.st, tuple(dims), bshape, pax)


def _advanced_general_from(
    t: Tensor, sel: list[Any], new_axis_of: list[int | None], bshape: tuple[int, ...], pax: int | None
) -> Tensor:
    """Exact fallback of :func:`_compose_adv` through coordinate arrays."""
    nd = len(bshape)
    vals = []
    for s, ax in zip(sel, new_axis_of):
        if isinstance(s, int):
            vals.append(np.broadcast_to(np.int64(s), bshape))
        else:
            start, step, count = s
            shape = [1] * nd
            shape[ax] = count  # type: ignore[index]
            vals.append(np.broadcast_to(IndexExpr(tuple(shape), ax, start, step).values(), bshape))
    return _from_view_coords(t, vals, bshape, pax)


def _compact(a: np.ndarray) -> np.ndarray:
    """The smallest array that broadcasts back to ``a``: axes ``a`` only repeats (stride 0) become length 1.
    Index arrays of a gathered view are kept this way: a 7-D ``nl.mgrid`` expression varies along two or
    three axes, so materialising it at the full view shape would cost memory and time per element."""
    if a.ndim == 0:
        return a
    key = tuple(slice(0, 1) if (s == 0 and n > 1) else slice(None) for s, n in zip(a.strides, a.shape))
    return a[key]


def _from_view_coords(t: Tensor, vals: list[np.ndarray], bshape: tuple[int, ...], pax: int | None) -> Tensor:
    """A general view selecting view coordinates ``vals`` (one array per axis of ``t``, each broadcastable
    to ``bshape``) of ``t``.  The view's storage coordinate arrays are kept compact (broadcastable to
    ``bshape``, not materialised at it; every reader broadcasts them)."""
    nd = len(bshape)
    if 0 in bshape:
        vals = [np.ascontiguousarray(np.broadcast_to(v, bshape)) for v in vals]
    else:
        vals = [_compact(np.broadcast_to(v, bshape)) for v in vals]
    oob = None
    for v, n in zip(vals, t.shape):
        b = (v < 0) | (v >= n)
        oob = b if oob is None else (oob | b)
    any_oob = oob is not None and bool(oob.any())
    clipped = tuple(np.clip(v, 0, max(n - 1, 0)) for v, n in zip(vals, t.shape)) if any_oob else tuple(vals)
    ext = None
    if any_oob and t.dims is not None:
        # out-of-range positions of an affine view keep their (out-of-bounds) storage coordinate, so that
        # a BoundsError can report the real index; positions outside the view but inside the storage stay -1
        ext = [np.asarray(e) if isinstance(e, int) else e[0] + e[1] * vals[e[3]] for e in t.dims]
        ext_oob = np.zeros(oob.shape, dtype=bool)  # type: ignore[union-attr]
        for e, n in zip(ext, t.st.shape):
            ext_oob = ext_oob | (e < 0) | (e >= n)
        ext_oob &= oob
    one = (1,) * nd
    arrs = []
    if t.dims is not None:
        # an affine view: storage coordinate = start + step * view coordinate (no gather needed)
        base: list[np.ndarray] = []
        for e in t.dims:
            if isinstance(e, int):
                base.append(np.full(one, e, dtype=np.int64))
            else:
                start, step, _count, ax = e
                base.append(start + step * clipped[ax].astype(np.int64, copy=False))
    else:
        base = [np.broadcast_to(a, t.shape)[clipped] for a in t._garr]  # type: ignore[union-attr]
    for d, arr in enumerate(base):
        if any_oob:
            arr = np.where(oob, -1, arr)
            if ext is not None:
                arr = np.where(ext_oob, ext[d], arr)
        if arr.ndim < nd:
            arr = arr.reshape((1,) * (nd - arr.ndim) + arr.shape)
        if 0 in bshape:
            arr = np.ascontiguousarray(np.broadcast_to(arr, bshape))
        arrs.append(arr)
    return Tensor(t.st, None, bshape, pax, tuple(arrs))
