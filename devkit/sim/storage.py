"""Storage: one allocation of the simulated machine (an HBM tensor, an SBUF or PSUM tile).

A :class:`Storage` holds the values of one allocation (or nothing, in a cost-only run) and the facts
the checks need about it: shape, dtype, buffer, partition axis, address once placed, which elements
were never written.  What kernels hold are views of a storage (:class:`devkit.sim.tensor.Tensor`).

A storage knows its owner only through the small :class:`Owner` protocol (the machine of the run):
deferred matmul work that involves its memory, and whether the run is still active so that the end of
a tile's life returns its on-chip space.
"""

from __future__ import annotations

import weakref
from typing import Any, Protocol

import numpy as np

from devkit import dtypes as dt
from devkit.sim.deferred import Chains, Deferred


class Owner(Protocol):
    """What a storage needs from the machine that created it."""

    #: deferred matmul accumulation of the run (:mod:`devkit.sim.deferred`)
    chains: Chains
    #: whether the run is executing (a storage that dies afterwards returns nothing)
    active: bool

    def release(self, st: Storage) -> None:
        """End of the storage's life: its on-chip space can be reused."""


HBM_BUFFERS = ("hbm", "shared_hbm", "private_hbm")
ON_CHIP = ("sbuf", "psum")


class Storage:
    """One allocation.

    ``data`` holds the values in the storage representation of ``dtype`` (see :mod:`devkit.dtypes`),
    or is ``None`` in cost-only runs.  ``uninit`` is a boolean array marking elements never written
    (``None`` once everything was written, or when not tracked); a data movement may carry never-written
    elements into another storage (:mod:`devkit.sim.unwritten`), which then records where in
    ``garbage_from``; an instruction that computes on never-written elements gives its results the
    never-written state too and records the computation in ``taint``.
    """

    __slots__ = (
        "__weakref__",
        "_data",
        "addr",
        "alias_written",
        "aliases",
        "alive",
        "base",
        "buffer",
        "bytes_pp",
        "depth",
        "dtype",
        "garbage_from",
        "id",
        "is_input",
        "itemsize",
        "kind",
        "lazy",
        "machine",
        "n_uninit",
        "name",
        "ndim",
        "origin",
        "par_axis",
        "shape",
        "spilled",
        "taint",
        "tile_bytes",
        "unfilled",
        "uninit",
        "written",
    )

    def __init__(
        self,
        machine: Owner | None,
        sid: int,
        shape: tuple[int, ...],
        dtype: Any,
        buffer: str,
        par_axis: int | None,
        data: np.ndarray | None,
        *,
        name: str = "",
        kind: str = "auto",
        origin: tuple[str, int] = ("", 0),
    ) -> None:
        self.machine = weakref.ref(machine) if machine is not None else None
        self.id = sid
        self.shape = shape
        self.ndim = len(shape)
        self.dtype = dtype
        self.itemsize = dt.itemsize(dtype)
        self.buffer = buffer
        self.par_axis = par_axis
        self._data = data
        self.uninit: np.ndarray | None = None
        self.n_uninit = 0
        # the never-written elements of ``data`` do not hold the poison value yet: it is filled in on the first
        # access (see _poison), unless a write of every element comes first (Machine.new_storage sets it)
        self.unfilled = False
        # where a data movement last copied never-written elements in (devkit.sim.unwritten), for messages
        # (file, line, the HBM tensor it came from as messages name it, or "")
        self.garbage_from: tuple[str, int, str] | None = None
        # where a computation first consumed never-written data on the way into this storage
        # (a devkit.sim.unwritten.Taint; the line an error about its garbage blames), or None
        self.taint: Any = None
        # values not yet copied into ``data``: an array, or a Deferred value (see materialize)
        self.lazy: np.ndarray | Deferred | None = None
        self.name = name
        self.kind = kind  # "input", "output", "auto", "temp", "direct", "hbm"
        self.is_input = kind == "input"
        self.origin = origin
        self.alive = True
        self.base: Storage | None = None  # the storage a reshape/view alias stands for (kept alive with it)
        # the live reshape/view aliases of this storage, weakly (see alias_of); and whether one that died was written
        self.aliases: list[weakref.ReferenceType[Storage]] | None = None
        self.alias_written = False
        self.addr: int | None = None
        self.spilled = False
        self.written = False
        self.depth = 0  # loops enclosing the creation (set by Machine.new_storage; races.py uses it)
        if par_axis is None:
            self.bytes_pp = 0
            self.tile_bytes = 0
        else:
            n = 1
            for i, s in enumerate(shape):
                if i != par_axis:
                    n *= s
            self.bytes_pp = n * self.itemsize
            blocks = 1
            for s in shape[:par_axis]:
                blocks *= s
            # bytes per partition of one logical tile (dims before the partition dim are separate tiles)
            self.tile_bytes = self.bytes_pp // max(blocks, 1)

    @property
    def partitions(self) -> int:
        return self.shape[self.par_axis] if self.par_axis is not None else 0

    @property
    def data(self) -> np.ndarray | None:
        """The values (storage representation) for reading or writing, with everything deferred that
        involves this memory carried out first (:mod:`devkit.sim.deferred`) and :attr:`lazy` values
        copied in; ``None`` in a cost-only run."""
        chains = self._chains()
        if chains is not None and chains.involves(self.id):
            chains.before_write(self.id)
        if self.lazy is not None:
            self.materialize()
        if self.unfilled:
            self._poison()
        return self._data

    @data.setter
    def data(self, value: np.ndarray | None) -> None:
        self.lazy = None
        self.unfilled = False
        self._data = value

    def values(self) -> np.ndarray | None:
        """The current values for reading only: the pending :attr:`lazy` array if there is one (same
        shape and dtype as the data, read-only), else the data once deferred work writing it is done.
        Never copies."""
        v = self.lazy
        if v is not None:
            if isinstance(v, Deferred):
                v = self.lazy = v.result()
            return v
        chains = self._chains()
        if chains is not None:
            chains.before_read(self.id)
        if self.unfilled:
            self._poison()
        return self._data

    def _poison(self) -> None:
        """Give the never-written elements the poison value (NaN, or the integer sentinel) that a fresh buffer
        reads as: done on the first access to the values, so that a tile whose first write covers it whole
        (a DMA or copy into a fresh tile) is never filled in vain."""
        self.unfilled = False
        u = self.uninit
        if u is not None and self._data is not None:
            m = self.machine() if self.machine is not None else None
            value = dt.poison_value(self.dtype, nki0=getattr(m, "nki_beta2", False))
            np.copyto(self._data, value, casting="unsafe", where=u)

    def release_values(self) -> None:
        """Forget the values and never-written state (the run is over and nothing reads them any more); arrays
        shared with a live alias stay allocated for it."""
        self._data = None
        self.lazy = None
        self.unfilled = False
        self.uninit = None
        self.n_uninit = 0

    def overwritten_whole(self) -> None:
        """The next write covers every element: the poison fill it would overwrite is skipped."""
        self.unfilled = False

    def _chains(self) -> Chains | None:
        """The run's deferred matmul work, when there is any."""
        m = self.machine() if self.machine is not None else None
        return m.chains if (m is not None and m.chains.busy()) else None

    def materialize(self) -> None:
        """Copy pending values into the data (an instruction's fresh result -- or a load's view of an
        immutable input -- is kept aside until the tile is written, so it is never copied needlessly)."""
        v = self.lazy
        if v is not None:
            self.lazy = None
            self.unfilled = False  # (the pending values cover every element)
            self._data[...] = v.result() if isinstance(v, Deferred) else v  # type: ignore[index]

    @property
    def on_chip(self) -> bool:
        return self.par_axis is not None

    def __del__(self) -> None:  # refcount-driven end of life for on-chip tensors
        base = getattr(self, "base", None)
        if base is not None and (self.written or self.alias_written):
            # a write through an alias stays a write of its base after the alias died
            base.alias_written = True
        if self.alive and self.machine is not None:
            m = self.machine()
            if m is not None and m.active:
                m.release(self)

    def describe(self) -> str:
        return describe_storage(self.buffer, self.name, self.shape, self.dtype)


def describe_storage(buffer: str, name: str, shape: tuple[int, ...], dtype: Any) -> str:
    """How error messages name a tensor, e.g. ``sbuf tensor 'x' [128, 512] bfloat16``."""
    nm = f" '{name}'" if name else ""
    return f"{buffer} tensor{nm} {list(shape)} {dt.name_of(dtype)}"


def alias_of(alias: Storage, base: Storage) -> None:
    """Record that ``alias`` (a reshape/reinterpret view with its own Storage) stands for ``base``.

    The alias keeps ``base`` alive; ``base`` lists its live aliases through weak references only, so the
    two never form a reference cycle: a run's storages are freed by reference counting when the last
    outside reference goes, not left for the cyclic collector (whose thresholds count objects, not bytes:
    nki-library's harness ran out of memory across tests while finished runs' arrays waited in cycles).
    A write made through an alias counts as a write of ``base`` (:func:`ever_written`) even after the
    alias went out of scope: a dying alias that was written marks its base (``Storage.__del__``).  Dead
    references are dropped whenever an alias is added, so the list stays short in loops that reshape
    every iteration.
    """
    alias.base = base
    live = [r for r in (base.aliases or ()) if r() is not None]
    live.append(weakref.ref(alias))
    base.aliases = live


def live_aliases(st: Storage) -> list[Storage]:
    """The reshape/view aliases of ``st`` that are still alive."""
    out = []
    for r in st.aliases or ():
        a = r()
        if a is not None:
            out.append(a)
    return out


def make_alias(
    base: Storage, shape: tuple[int, ...], dtype: Any, par_axis: int | None, data: np.ndarray | None
) -> Storage:
    """A storage standing for ``base``'s memory under another shape or dtype (a reshape, a reinterpreting
    view): ``base``'s id, buffer, name, kind, origin, address and input flag; it never frees ``base``'s memory
    and keeps ``base`` alive (:func:`alias_of`).  The caller sets what else the alias shares."""
    alias = Storage(
        base.machine() if base.machine else None,
        base.id,
        shape,
        dtype,
        base.buffer,
        par_axis,
        data,
        name=base.name,
        kind=base.kind,
        origin=base.origin,
    )
    alias.addr = base.addr
    alias.is_input = base.is_input
    alias.machine = None  # the alias never frees the original's memory
    alias_of(alias, base)
    return alias


def ever_written(st: Storage) -> bool:
    """Whether any instruction wrote ``st`` directly or through one of its aliases."""
    if st.written or st.alias_written:
        return True
    return any(ever_written(a) for a in live_aliases(st))
