"""Methods and Python operators of NKI tensors (``nki.tensor``), installed on the simulator's Tensor.

Operators map onto ``nl`` functions (``a + b`` is ``nl.add(a, b)``); augmented assignments update the
tensor in place (``psum += nc_matmul(...)`` accumulates in PSUM).  ``reshape``/``broadcast_to``/
``expand_dims`` return views; ``astype`` copies.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from devkit import dtypes as dt
from devkit.errors import IndexingError, KernelArgumentError, TileShapeError
from devkit.nki import _isa_nl
from devkit.nki import language as nl
from devkit.sim import instr as _x
from devkit.sim.index import IndexExpr
from devkit.sim.storage import make_alias
from devkit.sim.tensor import Tensor


class _Ops:
    """The operations :class:`Tensor` delegates to (kept here to keep devkit.sim free of nki imports)."""

    assign = staticmethod(_x.assign)

    @staticmethod
    def index_values(t: Tensor) -> np.ndarray:
        """Values of an index tile used for indirect (gather/scatter) access."""
        m = _x.machine("indirect indexing")
        t.check_alive()
        if t.st.buffer != "sbuf":
            raise IndexingError("indirect indices must be an SBUF tile", rule="indirect-indices-sbuf")
        if dt.is_float(t.dtype):
            raise IndexingError(
                f"indirect indices must be integers, got {dt.name_of(t.dtype)}", rule="indirect-indices-dtype"
            )
        m.check_read(t)
        if not m.numerics:
            return np.zeros(t.shape, dtype=np.int64)
        return np.asarray(t.read(), dtype=np.int64)


Tensor._ops = _Ops


def _dynamic_scalar(t: Tensor) -> int:
    """The runtime value of a one-element index tile (a dynamic offset such as ``offs[0, i] + iy``)."""
    if t.size != 1:
        raise IndexingError(
            f"a dynamic index offset must be a single element, got a tile of shape {list(t.shape)}",
            rule="dynamic-offset",
        )
    vals = _Ops.index_values(t)
    return int(vals.reshape(-1)[0])


def _binop(fn: Any, reverse: bool = False):  # type: ignore[no-untyped-def]
    def op(self: Tensor, other: Any) -> Any:
        if isinstance(other, IndexExpr) and fn in (nl.add, nl.subtract, nl.multiply):
            v = _dynamic_scalar(self)
            return {
                nl.add: lambda: other + v,
                nl.multiply: lambda: other * v,
                nl.subtract: lambda: (v - other) if not reverse else (other - v),
            }[fn]()
        if not isinstance(other, (Tensor, *_x.Scalar)):
            return NotImplemented
        return fn(other, self) if reverse else fn(self, other)

    return op


def _inplace(name: str):  # type: ignore[no-untyped-def]
    def op(self: Tensor, other: Any) -> Tensor:
        return _isa_nl.augmented(self, other, name)

    return op


def _all_integer(*xs: Any) -> bool:
    """Whether every operand is an integer tile or a Python/NumPy integer."""
    for x in xs:
        if isinstance(x, Tensor):
            if dt.is_float(x.dtype):
                return False
        elif isinstance(x, (bool, np.bool_)) or not isinstance(x, (int, np.integer)):
            return False
    return True


def _true_divide(x: Any, y: Any) -> Tensor:
    """``x / y``: Python's true division.  Of two integer operands it gives the fp32 quotient (no
    integer rounding), which real code floors itself: nki-samples 0898a77 ``reference/vision.py``
    (resize_nearest) computes ``nl.floor(position_tile / width, dtype=nl.int32)``."""
    if _all_integer(x, y):
        return nl.divide(x, y, dtype=nl.float32)
    return nl.divide(x, y)


for _name, _fn in (
    ("add", nl.add),
    ("sub", nl.subtract),
    ("mul", nl.multiply),
    ("truediv", _true_divide),
    ("pow", nl.power),
    ("mod", nl.mod),
    ("and", nl.bitwise_and),
    ("or", nl.bitwise_or),
    ("xor", nl.bitwise_xor),
    ("lshift", nl.left_shift),
    ("rshift", nl.right_shift),
):
    setattr(Tensor, f"__{_name}__", _binop(_fn))
    setattr(Tensor, f"__r{_name}__", _binop(_fn, reverse=True))

for _name, _fn in (
    ("lt", nl.less),
    ("le", nl.less_equal),
    ("gt", nl.greater),
    ("ge", nl.greater_equal),
    ("eq", nl.equal),
    ("ne", nl.not_equal),
):
    setattr(Tensor, f"__{_name}__", _binop(_fn))

for _name, _op in (
    ("iadd", "add"),
    ("isub", "sub"),
    ("imul", "mul"),
    ("itruediv", "div"),
    ("iand", "and"),
    ("ior", "or"),
    ("ixor", "xor"),
):
    setattr(Tensor, f"__{_name}__", _inplace(_op))


def _floordiv(self: Tensor, other: Any) -> Tensor:
    if _all_integer(self, other):
        odt = self.dtype if not isinstance(other, Tensor) else dt.promote(self.dtype, other.dtype)
        return nl.floor(nl.divide(self, other, dtype=nl.float32), dtype=odt)
    return nl.floor(nl.divide(self, other))


Tensor.__floordiv__ = _floordiv  # type: ignore[method-assign]
Tensor.__neg__ = lambda self: nl.negative(self)  # type: ignore[method-assign]
Tensor.__pos__ = lambda self: self  # type: ignore[method-assign]
Tensor.__abs__ = lambda self: nl.abs(self)  # type: ignore[method-assign]
Tensor.__invert__ = lambda self: nl.invert(self) if not dt.is_float(self.dtype) else nl.logical_not(self)  # type: ignore[method-assign]


# ---- tensor methods ------------------------------------------------------------------------------------


def _reshape(self: Tensor, shape: Any) -> Tensor:
    """A view with a new shape (the view must cover whole, contiguous storage)."""
    self.check_alive()
    self.st.materialize()
    shp = tuple(int(s) for s in (shape if isinstance(shape, (tuple, list)) else (shape,)))
    if -1 in shp:
        known = int(np.prod([s for s in shp if s != -1]))
        shp = tuple(self.size // known if s == -1 else s for s in shp)
    if int(np.prod(shp)) != self.size:
        raise TileShapeError(
            f"cannot reshape a tensor of shape {list(self.shape)} ({self.size} elements) to {list(shp)}",
            rule="reshape",
        )
    st = self.st
    whole = self.dims is not None and all(
        not isinstance(e, int) and e[0] == 0 and e[1] == 1 and e[2] == n for e, n in zip(self.dims, st.shape)
    )
    if not whole:
        raise KernelArgumentError(
            "reshape is only supported on a whole tensor (reshape before indexing)", rule="reshape"
        )
    pax = st.par_axis
    if st.on_chip and shp[0] != st.shape[0] and pax == 0:
        raise TileShapeError(
            f"reshape of an on-chip tile must keep the partition dim ({st.shape[0]})", rule="reshape"
        )
    data = st.data.reshape(shp) if st.data is not None else None  # (materialized above)
    alias = make_alias(st, shp, st.dtype, 0 if st.on_chip else None, data)
    alias.uninit = st.uninit.reshape(shp) if st.uninit is not None else None
    alias.n_uninit = st.n_uninit
    alias.spilled = st.spilled
    alias.alive = st.alive
    return Tensor.whole(alias)


def _broadcast_to(self: Tensor, shape: Any) -> Tensor:
    """A broadcast view (NumPy rules; a (P,) tile behaves as (P, 1))."""
    self.check_alive()
    shp = tuple(int(s) for s in shape)
    src = _x.aligned_shape(self)
    if len(src) != len(shp) or any(a not in (1, b) for a, b in zip(src, shp)):
        raise TileShapeError(f"cannot broadcast shape {list(self.shape)} to {list(shp)}", rule="broadcast")
    if self.dims is None:
        raise KernelArgumentError("broadcast_to is not supported on indirectly indexed views")
    if len(self.shape) != len(shp):
        self = _expand(self, 1)
    dims = list(self.dims)
    for d, e in enumerate(dims):
        if isinstance(e, int):
            continue
        start, _step, count, ax = e
        if count == 1 and shp[ax] != 1:
            dims[d] = (start, 0, shp[ax], ax)
    # a size-1 axis with no storage dim behind it (e.g. from t[g, i_p, 0]) broadcasts through a storage
    # dim held at a fixed coordinate: step 0 repeats that coordinate
    covered = {e[3] for e in dims if not isinstance(e, int)}
    for a, n in enumerate(shp):
        if a in covered or n == 1:
            continue
        d = next((d for d, e in enumerate(dims) if isinstance(e, int)), None)
        if d is None:
            raise TileShapeError(f"cannot broadcast shape {list(self.shape)} to {list(shp)} along axis {a}")
        dims[d] = (dims[d], 0, n, a)
        covered.add(a)
    return Tensor(self.st, tuple(dims), shp, self.pax)


def _expand(self: Tensor, axis: Any) -> Tensor:
    self.check_alive()
    axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    shape = list(self.shape)
    for a in sorted(int(a) if a >= 0 else len(shape) + len(axes) + int(a) for a in axes):
        shape.insert(a, 1)
    if self.dims is None:
        # index arrays may be compact (broadcastable, see devkit.sim.tensor._compact): insert their new axes
        ins = sorted(int(a) if a >= 0 else len(shape) + len(axes) + int(a) for a in axes)
        return Tensor(
            self.st, None, tuple(shape), self.pax, tuple(np.expand_dims(a, ins) for a in self._garr)
        )
    # map old axes to new positions
    old_to_new = []
    j = 0
    for i, n in enumerate(shape):
        if j < len(self.shape) and (n == self.shape[j]) and (i not in {int(a) for a in axes}):
            old_to_new.append(i)
            j += 1
    dims = tuple(e if isinstance(e, int) else (e[0], e[1], e[2], old_to_new[e[3]]) for e in self.dims)
    pax = old_to_new[self.pax] if self.pax is not None else None
    return Tensor(self.st, dims, tuple(shape), pax)


def _astype(self: Tensor, dtype: Any) -> Tensor:
    return nl.copy(self, dtype=dtype)


def _view(self: Tensor, dtype: Any) -> Tensor:
    """Reinterpret the bytes as another dtype.  Of the same size: any view of a whole tensor's storage.
    Of another size (``fp32_tile.view(nl.float8_e4m3)``, as nki-samples 0898a77 ``rmsnorm_quant`` stores its
    dequantisation scales): whole tensors only, the last dimension scaled by the size ratio."""
    self.check_alive()
    self.st.materialize()
    d = dt.as_dtype(dtype)
    st = self.st
    shape = st.shape
    if dt.itemsize(d) != self.itemsize:
        old, new = self.itemsize, dt.itemsize(d)
        whole = self.dims is not None and self.shape == st.shape and self.dims == Tensor.whole(st).dims
        if not whole or not shape or (shape[-1] * old) % new:
            raise KernelArgumentError(
                f"view({dt.name_of(d)}): a view that changes the element size ({old} -> {new} bytes) is "
                f"supported on a whole tensor whose last dimension holds a whole number of elements, got "
                f"{list(self.shape)} of {list(st.shape)}"
            )
        shape = (*shape[:-1], shape[-1] * old // new)
    data = None
    if st.data is not None:
        raw = np.ascontiguousarray(dt.to_external(st.data, st.dtype))
        data = dt.to_storage(raw.view(np.dtype(d) if not isinstance(d, dt._TF32) else np.float32), d)
    alias = make_alias(st, shape, d, st.par_axis, data)
    if shape != st.shape:
        return Tensor.whole(alias)
    return Tensor(alias, self.dims, self.shape, self.pax, self._garr)


def _assert_shape(self: Tensor, shape: Any) -> Tensor:
    if tuple(self.shape) != tuple(int(s) for s in shape):
        raise TileShapeError(
            f"tensor shape {list(self.shape)} does not match the expected {list(shape)}",
            rule="annotation-shape",
        )
    return self


Tensor.reshape = _reshape  # type: ignore[attr-defined]
Tensor.broadcast_to = _broadcast_to  # type: ignore[attr-defined]
Tensor.expand_dims = _expand  # type: ignore[attr-defined]
Tensor.astype = _astype  # type: ignore[attr-defined]
Tensor.view = _view  # type: ignore[attr-defined]
Tensor.assert_shape = _assert_shape  # type: ignore[attr-defined]
Tensor.T = property(lambda self: nl.transpose(self))  # type: ignore[attr-defined]
