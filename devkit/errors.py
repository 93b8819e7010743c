"""Errors raised for faults in kernels, and how they find the kernel line to blame.

Every fault the simulator detects in a kernel raises an instance of :class:`KernelError` (a subclass
per kind).  The message names the rule broken, the values involved and ``file:line``; the
``.filename`` / ``.lineno`` attributes point at the kernel statement that performed the illegal
operation (the innermost stack frame outside the ``devkit`` package; the kit's own kernels in
``devkit/kernels/`` are kernel code, not devkit code).  Errors in the devkit itself
are ordinary Python exceptions and are never dressed up as kernel errors.
"""

from __future__ import annotations

import os
import sys
from types import FrameType

_DEVKIT_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep
#: The kit's NKI kernels: inside the package, but blamed like any kernel.
_KERNELS_DIR = os.path.join(_DEVKIT_DIR, "kernels") + os.sep
_internal_code: dict[object, bool] = {}


def _is_internal(frame: FrameType) -> bool:
    code = frame.f_code
    hit = _internal_code.get(code)
    if hit is None:
        hit = code.co_filename.startswith(_DEVKIT_DIR) and not code.co_filename.startswith(_KERNELS_DIR)
        _internal_code[code] = hit
    return hit


def user_frame(depth: int = 1) -> FrameType | None:
    """The innermost frame of the caller's stack that is not devkit code (the kernel's line)."""
    f = sys._getframe(depth)
    known = _internal_code
    while f is not None:  # (_is_internal inlined: this runs for every instruction)
        hit = known.get(f.f_code)
        if hit is None:
            hit = _is_internal(f)
        if not hit:
            return f
        f = f.f_back
    return f


def user_location() -> tuple[str, int]:
    """``(filename, lineno)`` of the kernel statement currently executing."""
    f = user_frame(2)
    if f is None:
        return ("<unknown>", 0)
    return (f.f_code.co_filename, f.f_lineno)


def failure_text(exc: BaseException) -> str:
    """One line for a failed job: a kernel error's own message (it names the kernel line), any other
    exception's type and message with the line that raised it."""
    if isinstance(exc, KernelError):
        return f"{type(exc).__name__}: {exc}"
    import traceback

    tb = traceback.extract_tb(exc.__traceback__)
    where = f" (at {tb[-1].filename}:{tb[-1].lineno})" if tb else ""
    return f"{type(exc).__name__}: {exc}{where}"


class KernelError(Exception):
    """A fault in a kernel detected by the simulator.

    Attributes:
        rule: a short stable code for the rule broken (e.g. ``"partition-limit"``).
        filename, lineno: the kernel source line to blame.
        detail: the message without the location prefix.
    """

    rule: str = "kernel-error"

    def __init__(
        self,
        message: str,
        *,
        rule: str | None = None,
        filename: str | None = None,
        lineno: int | None = None,
    ) -> None:
        if rule is not None:
            self.rule = rule
        if filename is None or lineno is None:
            filename, lineno = user_location()
        self.filename = filename
        self.lineno = lineno
        self.detail = message
        super().__init__(f"{filename}:{lineno}: [{self.rule}] {message}")


class TileShapeError(KernelError):
    """A tile breaks a hardware size limit (partition count, free size, matmul tile limits)."""

    rule = "tile-shape"


class PartitionMismatchError(KernelError):
    """Operands of one instruction disagree on the number of partitions."""

    rule = "partition-mismatch"


class MemoryPlacementError(KernelError):
    """An operand lives in a memory the instruction cannot access (e.g. compute on HBM)."""

    rule = "memory-placement"


class DtypeError(KernelError):
    """A dtype the instruction or NKI does not support."""

    rule = "dtype"


class IndexingError(KernelError):
    """An index expression NKI rejects (1-D arange, basic/advanced mix, bad mask use...)."""

    rule = "indexing"


class BoundsError(KernelError):
    """A static or indirect index outside the tensor, not legalised by a mask."""

    rule = "out-of-bounds"


class CapacityError(KernelError):
    """SBUF or PSUM capacity exceeded, or a direct allocation overlaps or runs past the buffer."""

    rule = "capacity"


class UninitializedReadError(KernelError):
    """A read of SBUF/PSUM/output memory that was never written."""

    rule = "uninitialized-read"


class RaceError(KernelError):
    """Iterations of an ``affine_range`` loop depend on each other through memory."""

    rule = "affine-race"


class ScopeError(KernelError):
    """A tensor used outside the loop body that created it."""

    rule = "out-of-scope"


class ImmutableInputError(KernelError):
    """A kernel wrote into one of its input tensors (inputs are immutable)."""

    rule = "immutable-input"


class UnsupportedError(KernelError):
    """A construct NKI does not support (control flow on tensor values, unknown argument...)."""

    rule = "unsupported"


class KernelArgumentError(KernelError):
    """An API call received an argument of the wrong kind or value."""

    rule = "bad-argument"


class UnwrittenOutputWarning(UserWarning):
    """A tensor the kernel returns was never written (it holds NaN; cost estimates count no store for it)."""


class DeadlockError(KernelError):
    """A program of a logical-core launch waits for a ``sendrecv``/``core_barrier`` the other never reaches."""

    rule = "lnc-deadlock"


class SpillWarning(UserWarning):
    """The live set of compiler-managed SBUF tensors exceeds capacity: the compiler would spill."""


class PlacementNote(UserWarning):
    """A performance note, not an error: the compiler legalises a placement (e.g. copies a Tensor-Engine
    result from PSUM to SBUF before a matmul reads it) and the simulator models the implied copy."""


class HardwareUnavailableError(RuntimeError):
    """A hardware run was requested but the Neuron device or the real SDK is missing."""
