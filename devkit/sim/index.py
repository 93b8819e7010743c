"""Index expressions (``nl.arange``, ``nl.mgrid``, affine arithmetic) and masks.

An :class:`IndexExpr` is an integer index array of a broadcastable shape, e.g. ``nl.arange(128)[:, None]``
has shape ``(128, 1)``.  Affine expressions that vary along a single axis are kept symbolically
(``start + step * i`` along ``axis``) so the simulator can turn them into slices (fast views, no
copies); anything else is kept as a materialised NumPy array.  Comparisons produce a :class:`MaskExpr`
(a boolean array of a broadcastable shape) which can be combined with ``&``, ``|`` and ``~`` but never
with Python's ``and``/``or``/``not`` (NKI rejects that; so do we).
"""

from __future__ import annotations

import numpy as np

from devkit.errors import IndexingError


class IndexExpr:
    """An integer index array of shape ``shape``.

    Affine form (``axis`` is not None): value at position ``idx`` is ``start + step * idx[axis]``.
    General form: ``arr`` holds the values.
    """

    __slots__ = ("_arr", "axis", "shape", "start", "step")
    __hash__ = None  # type: ignore[assignment]

    def __init__(
        self,
        shape: tuple[int, ...],
        axis: int | None,
        start: int = 0,
        step: int = 1,
        arr: np.ndarray | None = None,
    ) -> None:
        self.shape = shape
        self.axis = axis
        self.start = start
        self.step = step
        self._arr = arr

    # ---- construction ------------------------------------------------------------------------
    @staticmethod
    def from_array(arr: np.ndarray) -> IndexExpr:
        arr = np.asarray(arr)
        if arr.dtype.kind not in "iu":
            arr = arr.astype(np.int64)
        return IndexExpr(tuple(arr.shape), None, arr=arr.astype(np.int64, copy=False))

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return self.shape[self.axis] if self.axis is not None else int(np.prod(self.shape))

    def values(self) -> np.ndarray:
        """The index values as an int64 array of shape :attr:`shape`."""
        if self._arr is None:
            n = self.shape[self.axis]
            v = self.start + self.step * np.arange(n, dtype=np.int64)
            sh = [1] * len(self.shape)
            sh[self.axis] = n
            self._arr = v.reshape(sh)
        return self._arr

    def bounds(self) -> tuple[int, int]:
        """Smallest and largest value."""
        if self.axis is not None:
            n = self.shape[self.axis]
            last = self.start + self.step * (n - 1)
            return (min(self.start, last), max(self.start, last))
        v = self.values()
        return (int(v.min()), int(v.max())) if v.size else (0, -1)

    # ---- numpy-like shape manipulation: e[:, None], e[None, :], e[0:64] ----------------------
    def __getitem__(self, key: object) -> IndexExpr:
        if not isinstance(key, tuple):
            key = (key,)
        if self.axis is not None and all(
            k is None or (isinstance(k, slice) and k == slice(None)) for k in key
        ):
            # Only new axes and full slices: stays affine, the varying axis moves.
            shape: list[int] = []
            axis = None
            src = 0
            for k in key:
                if k is None:
                    shape.append(1)
                else:
                    if src == self.axis:
                        axis = len(shape)
                    shape.append(self.shape[src])
                    src += 1
            while src < len(self.shape):
                if src == self.axis:
                    axis = len(shape)
                shape.append(self.shape[src])
                src += 1
            if axis is None:
                raise IndexingError("cannot index an arange expression this way")
            return IndexExpr(tuple(shape), axis, self.start, self.step)
        return IndexExpr.from_array(self.values()[key])

    # ---- affine arithmetic ---------------------------------------------------------------------
    def _binary(self, other: object, op: str) -> IndexExpr:
        if isinstance(other, (int, np.integer)):
            o = int(other)
            if self.axis is not None:
                if op == "+":
                    return IndexExpr(self.shape, self.axis, self.start + o, self.step)
                if op == "-":
                    return IndexExpr(self.shape, self.axis, self.start - o, self.step)
                if op == "r-":
                    return IndexExpr(self.shape, self.axis, o - self.start, -self.step)
                if op == "*":
                    return IndexExpr(self.shape, self.axis, self.start * o, self.step * o)
            return IndexExpr.from_array(_APPLY[op](self.values(), o))
        if isinstance(other, IndexExpr):
            if (
                op in ("+", "-")
                and self.axis is not None
                and other.axis is not None
                and self.shape == other.shape
                and self.axis == other.axis
            ):
                sign = 1 if op == "+" else -1
                return IndexExpr(
                    self.shape, self.axis, self.start + sign * other.start, self.step + sign * other.step
                )
            return IndexExpr.from_array(_APPLY[op](self.values(), other.values()))
        if isinstance(other, np.ndarray) and other.dtype.kind in "iu":
            return IndexExpr.from_array(_APPLY[op](self.values(), other))
        return NotImplemented

    def __add__(self, o: object) -> IndexExpr:
        return self._binary(o, "+")

    __radd__ = __add__

    def __sub__(self, o: object) -> IndexExpr:
        return self._binary(o, "-")

    def __rsub__(self, o: object) -> IndexExpr:
        return self._binary(o, "r-")

    def __mul__(self, o: object) -> IndexExpr:
        return self._binary(o, "*")

    __rmul__ = __mul__

    def __floordiv__(self, o: object) -> IndexExpr:
        return self._binary(o, "//")

    def __mod__(self, o: object) -> IndexExpr:
        return self._binary(o, "%")

    def __neg__(self) -> IndexExpr:
        return self._binary(-1, "*")

    def __pos__(self) -> IndexExpr:
        return self

    # ---- comparisons -> masks ------------------------------------------------------------------
    def _cmp(self, other: object, op: str) -> MaskExpr:
        o = other.values() if isinstance(other, IndexExpr) else other
        if not isinstance(o, (int, np.integer, np.ndarray)):
            return NotImplemented  # type: ignore[return-value]
        return MaskExpr(_CMP[op](self.values(), o))

    def __lt__(self, o: object) -> MaskExpr:
        return self._cmp(o, "<")

    def __le__(self, o: object) -> MaskExpr:
        return self._cmp(o, "<=")

    def __gt__(self, o: object) -> MaskExpr:
        return self._cmp(o, ">")

    def __ge__(self, o: object) -> MaskExpr:
        return self._cmp(o, ">=")

    def __eq__(self, o: object) -> MaskExpr:  # type: ignore[override]
        return self._cmp(o, "==")

    def __ne__(self, o: object) -> MaskExpr:  # type: ignore[override]
        return self._cmp(o, "!=")

    def __bool__(self) -> bool:
        raise IndexingError("an index expression has no truth value; kernels cannot branch on it")

    def __repr__(self) -> str:
        if self.axis is not None:
            return f"IndexExpr(shape={self.shape}, {self.start}+{self.step}*i[axis {self.axis}])"
        return f"IndexExpr(shape={self.shape}, general)"


_APPLY = {
    "+": lambda a, b: a + b,
    "-": lambda a, b: a - b,
    "r-": lambda a, b: b - a,
    "*": lambda a, b: a * b,
    "//": lambda a, b: a // b,
    "%": lambda a, b: a % b,
}
_CMP = {
    "<": np.less,
    "<=": np.less_equal,
    ">": np.greater,
    ">=": np.greater_equal,
    "==": np.equal,
    "!=": np.not_equal,
}


class MaskExpr:
    """A compile-time predicate over the index grid of an instruction (a boolean array)."""

    __slots__ = ("arr",)
    __hash__ = None  # type: ignore[assignment]

    def __init__(self, arr: np.ndarray) -> None:
        self.arr = np.asarray(arr, dtype=bool)

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.arr.shape)

    def _combine(self, other: object, fn) -> MaskExpr:  # type: ignore[no-untyped-def]
        if isinstance(other, MaskExpr):
            return MaskExpr(fn(self.arr, other.arr))
        if isinstance(other, (bool, np.bool_)):
            return MaskExpr(fn(self.arr, bool(other)))
        return NotImplemented  # type: ignore[return-value]

    def __and__(self, o: object) -> MaskExpr:
        return self._combine(o, np.logical_and)

    __rand__ = __and__

    def __or__(self, o: object) -> MaskExpr:
        return self._combine(o, np.logical_or)

    __ror__ = __or__

    def __xor__(self, o: object) -> MaskExpr:
        return self._combine(o, np.logical_xor)

    def __invert__(self) -> MaskExpr:
        return MaskExpr(~self.arr)

    def __bool__(self) -> bool:
        raise IndexingError(
            "masks must be combined with '&' (and '|'), not Python 'and'/'or'/'not' or an 'if': "
            "write mask=((i_p < a) & (i_f < b))",
            rule="mask-python-logic",
        )

    def __repr__(self) -> str:
        return f"MaskExpr(shape={self.shape}, true={int(self.arr.sum())})"


def arange(*args: int) -> IndexExpr:
    """``nl.arange([start,] stop)``: a 1-D index expression (add ``[:, None]``/``[None, :]`` to use it)."""
    if len(args) == 1:
        start, stop, step = 0, args[0], 1
    elif len(args) == 2:
        (start, stop), step = args, 1
    elif len(args) == 3:
        start, stop, step = args
    else:
        raise IndexingError(f"arange takes 1 to 3 integers, got {len(args)}")
    for a in (start, stop, step):
        if not isinstance(a, (int, np.integer)):
            raise IndexingError(f"arange bounds must be Python ints known at trace time, got {a!r}")
    n = max(0, -(-(int(stop) - int(start)) // int(step)))
    return IndexExpr((n,), 0, int(start), int(step))


class GridIndex(tuple):
    """The result of ``nl.mgrid[...]``: a tuple of index expressions with ``.p``, ``.x``, ``.y``, ``.z``."""

    @property
    def p(self) -> IndexExpr:
        return self[0]

    @property
    def x(self) -> IndexExpr:
        return self[1]

    @property
    def y(self) -> IndexExpr:
        return self[2]

    @property
    def z(self) -> IndexExpr:
        return self[3]


class _MGrid:
    """``nl.mgrid[0:128, 0:512]``: one broadcastable index expression per dimension."""

    def __getitem__(self, key: object) -> GridIndex:
        if not isinstance(key, tuple):
            key = (key,)
        nd = len(key)
        out = []
        for ax, k in enumerate(key):
            if not isinstance(k, slice):
                raise IndexingError("mgrid takes slices, e.g. nl.mgrid[0:128, 0:512]")
            start = 0 if k.start is None else int(k.start)
            step = 1 if k.step is None else int(k.step)
            if k.stop is None:
                raise IndexingError("mgrid slices need an explicit stop")
            n = max(0, -(-(int(k.stop) - start) // step))
            shape = [1] * nd
            shape[ax] = n
            out.append(IndexExpr(tuple(shape), ax, start, step))
        return GridIndex(out)


mgrid = _MGrid()


def ds(start: int, size: int) -> slice:
    """``nl.ds(start, size)``: the slice ``start:start+size``."""
    return slice(start, start + size)
