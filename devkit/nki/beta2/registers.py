"""Virtual registers of NKI 0.x: run-time integers for dynamic loops and dynamic access patterns.

A :class:`VirtualRegister` holds a 32-bit integer the kernel loads from a one-element SBUF tensor
(``register_load``), sets (``register_move``) or stores back (``register_store``).  ``nl.dynamic_range`` takes a
register as a bound, ``while reg:`` loops while it is non-zero, and ``t.ap(scalar_offset=reg)`` offsets an
access pattern by it (``reference/nki_beta2.md`` §3.5, §5.4).  The simulator executes kernels eagerly, so a
register simply holds its current value; in a cost-only run (no values) a loaded register reads 0, so dynamic
loops run no iterations there.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from devkit.errors import KernelArgumentError, TileShapeError
from devkit.sim import instr as _x
from devkit.sim.tensor import Tensor

_INT32 = (-(2**31), 2**31 - 1)


class VirtualRegister:
    """``nki.isa.VirtualRegister``: a 32-bit integer register of an engine sequencer."""

    __slots__ = ("value",)

    def __init__(self, value: int = 0) -> None:
        self.value = _wrap32(value)

    def __bool__(self) -> bool:
        return self.value != 0

    def __index__(self) -> int:
        return self.value

    __int__ = __index__

    def __repr__(self) -> str:
        return f"VirtualRegister({self.value})"


def _wrap32(v: int) -> int:
    v = int(v) & 0xFFFFFFFF
    return v - (1 << 32) if v >= 1 << 31 else v


def _one_element(t: Any, api: str, name: str) -> Tensor:
    if not isinstance(t, Tensor):
        raise KernelArgumentError(
            f"{api}: {name} must be a one-element SBUF tensor, got {type(t).__name__}", rule="bad-argument"
        )
    if t.size != 1:
        raise TileShapeError(
            f"{api}: {name} must hold one element, got shape {list(t.shape)}", rule="shape-mismatch"
        )
    return t


def _read(t: Tensor) -> int:
    return int(np.asarray(Tensor._ops.index_values(t)).reshape(-1)[0])


def register_alloc(x: Any = None) -> VirtualRegister:
    """A new register holding ``x`` (an int, a one-element SBUF tensor's value, or 0)."""
    _x.machine("nisa.register_alloc")
    if x is None:
        return VirtualRegister(0)
    if isinstance(x, Tensor):
        return VirtualRegister(_read(_one_element(x, "nisa.register_alloc", "x")))
    if isinstance(x, (int, np.integer, VirtualRegister)) and not isinstance(x, bool):
        return VirtualRegister(int(x))
    raise KernelArgumentError(
        f"nisa.register_alloc: x must be an int or a one-element tensor, got {x!r}", rule="bad-argument"
    )


def _register(r: Any, api: str, name: str) -> VirtualRegister:
    if not isinstance(r, VirtualRegister):
        raise KernelArgumentError(
            f"{api}: {name} must be a VirtualRegister (nisa.register_alloc), got {r!r}", rule="bad-argument"
        )
    return r


def register_move(dst: Any, src: Any) -> None:
    """``dst = src`` (an int or another register)."""
    api = "nisa.register_move"
    _x.machine(api)
    d = _register(dst, api, "dst")
    if isinstance(src, bool) or not isinstance(src, (int, np.integer, VirtualRegister)):
        raise KernelArgumentError(
            f"{api}: src must be an int or a register, got {src!r}", rule="bad-argument"
        )
    d.value = _wrap32(int(src))


def register_load(dst: Any, src: Any) -> None:
    """``dst = src[0]`` from a one-element SBUF tensor."""
    api = "nisa.register_load"
    _x.machine(api)
    _register(dst, api, "dst").value = _wrap32(_read(_one_element(src, api, "src")))


def register_store(dst: Any, src: Any) -> None:
    """Store register ``src`` into the one-element tensor ``dst``."""
    api = "nisa.register_store"
    m = _x.machine(api)
    d = _one_element(dst, api, "dst")
    r = _register(src, api, "src")
    from devkit.nki import isa as _b1

    tile = _b1.memset((1, 1), r.value if m.numerics else 0, d.dtype)  # the value reaches memory like a memset
    _x.assign(d, tile)
