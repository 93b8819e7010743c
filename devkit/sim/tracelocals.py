"""Beta 1 "trace the loop body once" semantics for plain Python values in kernel loops.

The NKI Beta 1 front end traces the body of an ``affine_range`` / ``sequential_range`` loop once,
symbolically (``reference/nki_api.md`` §2.3: ``val += 1`` over ``range(8)`` gives 1, not 8).  The
simulator executes every iteration (it must, to compute values), so Python-side bookkeeping in a loop
body -- typically a running byte offset such as ``cur_addr += size`` used for direct allocation --
would advance once per iteration instead of once.  :class:`LocalsGuard` restores, at the start of every
iteration, the plain Python values (numbers, strings, tuples of them, None) of the kernel's local
variables that existed when the loop started, so each iteration sees what the single traced pass saw.
Tensors, lists and other objects are left alone.
"""

from __future__ import annotations

import ctypes
import sys
from types import FrameType
from typing import Any

_SCALARS = (int, float, bool, str, bytes, complex, type(None))


def _plain(v: Any) -> bool:
    if isinstance(v, _SCALARS):
        return True
    if isinstance(v, tuple):
        return all(_plain(x) for x in v)
    try:
        import numpy as np

        return isinstance(v, np.generic)
    except ImportError:  # pragma: no cover
        return False


def _differs(now: Any, saved: Any) -> bool:
    """Whether a local no longer holds its saved plain value.  Only plain values are compared: a local the
    kernel re-bound to an index expression or a tile is never evaluated as a boolean (``expr != v`` of an
    ``nl.arange`` expression is a mask, not a truth value) -- it simply differs."""
    if now is saved:
        return False
    if not _plain(now):
        return True
    try:
        return bool(now != saved)
    except Exception:  # an exotic plain value without a truth value: restore it
        return True


if sys.version_info >= (3, 13):  # PEP 667: frame.f_locals is a write-through proxy

    def _write_back(frame: FrameType, values: dict[str, Any]) -> None:
        for k, v in values.items():
            frame.f_locals[k] = v

else:
    _locals_to_fast = ctypes.pythonapi.PyFrame_LocalsToFast
    _locals_to_fast.argtypes = [ctypes.py_object, ctypes.c_int]
    _locals_to_fast.restype = None

    def _write_back(frame: FrameType, values: dict[str, Any]) -> None:
        loc = frame.f_locals
        loc.update(values)
        _locals_to_fast(frame, 0)


class LocalsGuard:
    """Snapshot of a frame's plain-valued locals, restored before each loop iteration."""

    __slots__ = ("frame", "saved")

    def __init__(self, frame: FrameType | None) -> None:
        self.frame = frame
        self.saved: dict[str, Any] = {}
        if frame is None:
            return
        for k, v in frame.f_locals.items():
            if _plain(v):
                self.saved[k] = v

    def restore(self, loop_var_names: tuple[str, ...] = ()) -> None:
        frame = self.frame
        if frame is None or not self.saved:
            return
        cur = frame.f_locals
        changed = {
            k: v
            for k, v in self.saved.items()
            if k in cur and k not in loop_var_names and _differs(cur[k], v)
        }
        if changed:
            _write_back(frame, changed)

    def release(self) -> None:
        self.frame = None
        self.saved = {}
