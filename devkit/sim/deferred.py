"""Deferred TensorE products and PSUM accumulation chains (numerics runs only).

A matmul's product is computed only when its values are needed.  ``acc += nc_matmul(a, b)`` appends
the product to the *accumulation chain* of ``acc``'s storage instead of adding it at once; the chain is
settled -- its products added into PSUM in program order -- as soon as anything reads the PSUM tile,
writes it another way, or lets it die, and before anything writes memory that a pending product reads.

A copy out of a PSUM tile whose chain is pending (``nl.copy(acc)``, the evacuation) takes the chain
with it and is computed when its result is needed (:class:`Evacuation`); a store of that result into
HBM waits too (:meth:`Chains.defer_write`) until the stored memory is used or enough stores wait.
Every access to memory that deferred work writes or reads first carries that work out, in program
order, so a kernel sees exactly the values eager execution would give.

Deferral is where the speed comes from: consecutive products into one PSUM region whose operands are
consecutive row blocks of one array (the K loop of a tiled matmul over loaded tiles) are added as one
matrix product with the contraction dimensions stacked, and the chains of waiting stores whose
operands are adjacent blocks (the M and N loops) become one product again (:func:`_batch`).  BLAS runs
such products far faster than many 128-row ones.  Both orders accumulate in fp32, as PSUM does;
results agree to fp32 rounding.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from typing import Any

import numpy as np
from numpy.lib.stride_tricks import as_strided

# A stacked product of at least this many FLOPs runs on every core the process may use (or on
# DEVKIT_BLAS_THREADS threads when that is set); smaller ones stay on the run's single BLAS thread, where
# thread hand-offs would cost more than they save.
WIDE_PRODUCT_FLOPS = 1 << 26


class Deferred:
    """A tile value computed when needed; :meth:`result` gives it (a read-only array of :attr:`shape`)."""

    __slots__ = ()
    shape: tuple[int, ...]

    def result(self) -> np.ndarray:
        raise NotImplementedError


class Product(Deferred):
    """``a.T @ b`` for a (K, M) stationary and a (K, N) moving operand (fp32 arrays), computed on demand.

    ``sources``: ids of the storages whose writable memory ``a`` or ``b`` views (a pending product must be
    settled before those are written).
    """

    __slots__ = ("_value", "a", "b", "shape", "sources")

    def __init__(self, a: np.ndarray, b: np.ndarray, sources: tuple[int, ...]) -> None:
        self.a = a
        self.b = b
        self.sources = sources
        self.shape = (a.shape[1], b.shape[1])
        self._value: np.ndarray | None = None

    def result(self) -> np.ndarray:
        """The product as a read-only fp32 array (computed once)."""
        v = self._value
        if v is None:
            v = self.a.T @ self.b
            v.flags.writeable = False
            self._value = v
        return v


def stack_rows(parts: list[np.ndarray]) -> np.ndarray | None:
    """One read-only view of 2-D ``parts`` stacked along axis 0, if they are consecutive row blocks of the
    same array (same base, dtype, column count and strides, each starting where the previous one ends);
    ``None`` otherwise.  Never copies."""
    first = parts[0]
    if first.ndim != 2:
        return None
    owner = _owner(first)
    strides = first.strides
    cols = first.shape[1]
    row_bytes = strides[0]
    ptr = first.__array_interface__["data"][0]
    rows = 0
    for x in parts:
        if (
            _owner(x) is not owner
            or x.ndim != 2
            or x.shape[1] != cols
            or x.strides != strides
            or x.dtype != first.dtype
            or x.__array_interface__["data"][0] != ptr + rows * row_bytes
        ):
            return None
        rows += x.shape[0]
    return as_strided(first, shape=(rows, cols), strides=strides, writeable=False)


Entry = tuple  # (target array, index key, axis permutation or None, Product)


class Evacuation:
    """``fn`` of a PSUM region once its detached accumulation ``entries`` are added (``nl.copy(acc)``),
    computed when first needed: item 0 is the fp32 result, item 1 the result rounded to ``dtype``."""

    __slots__ = ("_value", "chains", "data", "dtype", "entries", "fn", "held", "key", "perm", "sids")

    def __init__(
        self, entries: list, data: np.ndarray, key: tuple, perm: Any, fn: Callable, dtype: Any
    ) -> None:
        self.entries = entries
        self.data, self.key, self.perm, self.fn, self.dtype = data, key, perm, fn, dtype
        self._value: tuple[np.ndarray, np.ndarray] | None = None
        self.chains: Chains | None = None  # where it is registered as a reader of ``sids``
        self.sids: tuple[int, ...] = ()
        self.held = sum(e[3].a.nbytes + e[3].b.nbytes for e in entries)  # operand bytes kept alive

    def value(self) -> tuple[np.ndarray, np.ndarray]:
        v = self._value
        if v is None:
            from devkit import dtypes as dt

            apply(self.entries, wide=True)
            self.entries = []
            region = self.data[self.key]
            if self.perm is not None:
                region = region.transpose(self.perm)
            with np.errstate(all="ignore"):
                raw = np.asarray(self.fn(region.astype(np.float32, copy=False)), dtype=np.float32)
            if np.may_share_memory(raw, self.data):
                raw = raw.copy()  # (the result must not alias the PSUM tile, which lives on)
            rounded = dt.round_to(raw, self.dtype)
            raw.flags.writeable = False
            rounded.flags.writeable = False
            v = self._value = (raw, rounded)
            self.data = None  # type: ignore[assignment]  # (drop the PSUM tile)
            if self.chains is not None:
                self.chains.unregister(self)
        return v


class EvacuationItem(Deferred):
    """Item ``index`` of an :class:`Evacuation`."""

    __slots__ = ("evac", "index", "shape")

    def __init__(self, evac: Evacuation, index: int, shape: tuple[int, ...]) -> None:
        self.evac, self.index, self.shape = evac, index, shape

    def result(self) -> np.ndarray:
        return self.evac.value()[self.index]


class Chains:
    """Deferred matmul work of one kernel run: pending accumulation chains by PSUM storage id, copies
    out of PSUM that wait for their chain (:class:`Evacuation`), and HBM writes that wait for a copy."""

    MAX_WRITES = 64  # pending writes per destination before they are carried out (bounds held memory)
    #: operand bytes one pending chain may hold before it is added in (a product keeps its operands' memory
    #: alive: a chain accumulating over a whole kernel, as flash-attention's dV/dK accumulators do, would
    #: otherwise keep every iteration's tiles)
    MAX_CHAIN_BYTES = 64 << 20
    #: operand bytes all pending chains together may hold before every chain is added in
    MAX_PENDING_BYTES = 256 << 20

    def __init__(self) -> None:
        # storage id -> [(target array, index key, axis permutation or None, Product), ...] in program order
        self.pending: dict[int, list[Entry]] = {}
        self.held: dict[int, int] = {}  # storage id -> operand bytes its pending chain holds
        self.held_total = 0
        self.evac_held = 0  # operand bytes the uncomputed evacuations hold
        self.sources: dict[int, int] = {}  # storage id -> pending products reading its writable memory
        self.readers: dict[int, list[Evacuation]] = {}  # storage id -> evacuations that will use its memory
        # HBM storage id -> [(data, key, perm, value, value dtype, destination dtype, shape), ...] in order
        self.writes: dict[int, list[tuple]] = {}

    def add(self, sid: int, target: np.ndarray, key: tuple, perm: tuple | None, product: Product) -> None:
        """Defer ``target[key] (transposed by perm) += product``."""
        self.pending.setdefault(sid, []).append((target, key, perm, product))
        for s in product.sources:
            self.sources[s] = self.sources.get(s, 0) + 1
        nbytes = product.a.nbytes + product.b.nbytes
        held = self.held.get(sid, 0) + nbytes
        self.held[sid] = held
        self.held_total += nbytes
        if held > self.MAX_CHAIN_BYTES:
            self.settle(sid)
        elif self.held_total > self.MAX_PENDING_BYTES:
            self.settle_all()

    def busy(self) -> bool:
        return bool(self.pending or self.readers or self.writes)

    def involves(self, sid: int) -> bool:
        """Whether storage ``sid``'s memory has deferred work on it or waiting for it."""
        return sid in self.pending or sid in self.sources or sid in self.readers or sid in self.writes

    def before_read(self, sid: int) -> None:
        """Everything that must happen before storage ``sid`` is read."""
        if sid in self.writes:
            self.carry_out_writes(sid)
        if sid in self.readers:
            self.force_readers(sid)  # (an evacuation also adds its detached chain into the memory)
        if sid in self.pending:
            self.settle(sid)

    def before_write(self, sid: int) -> None:
        """Everything that must happen before storage ``sid`` is read or written."""
        if sid in self.writes:
            self.carry_out_writes(sid)
        if sid in self.readers:
            self.force_readers(sid)
        if sid in self.pending or sid in self.sources:
            self.settle_all()

    def _detach(self, sid: int) -> list[Entry]:
        entries = self.pending.pop(sid, None) or []
        self.held_total -= self.held.pop(sid, 0)
        for e in entries:
            for s in e[3].sources:
                n = self.sources[s] - 1
                if n:
                    self.sources[s] = n
                else:
                    del self.sources[s]
        return entries

    def settle(self, sid: int) -> None:
        """Add the pending products of storage ``sid``'s chain into its memory, in order, now."""
        if sid in self.readers:
            self.force_readers(sid)  # copies of earlier contents come first
        apply(self._detach(sid), wide=True)

    def settle_all(self) -> None:
        for sid in list(self.pending):
            self.settle(sid)

    def evacuate(
        self, sid: int, data: np.ndarray, key: tuple, perm: Any, fn: Callable, dtype: Any
    ) -> Evacuation:
        """Defer ``fn(region of storage sid)`` until its chain is added (the chain leaves the pending set)."""
        if sid in self.readers:
            self.force_readers(sid)  # an earlier copy of this memory reads it before these products land
        entries = self._detach(sid)
        ev = Evacuation(entries, data, key, perm, fn, dtype)
        ev.chains, ev.sids = self, tuple({sid} | {s for e in entries for s in e[3].sources})
        for s in ev.sids:
            self.readers.setdefault(s, []).append(ev)
        self.evac_held += ev.held
        if self.evac_held > self.MAX_PENDING_BYTES:
            self.relieve()
        return ev

    def relieve(self) -> None:
        """Carry out the waiting writes and copies (batched as usual) so that the tiles their products
        read can be freed: deferral must not keep a whole kernel's operands alive."""
        for sid in list(self.writes):
            self.carry_out_writes(sid)
        for sid in list(self.readers):
            self.force_readers(sid)

    def unregister(self, ev: Evacuation) -> None:
        """A computed evacuation no longer waits on any memory."""
        self.evac_held -= ev.held
        for s in ev.sids:
            lst = self.readers.get(s)
            if lst is not None:
                lst[:] = [x for x in lst if x is not ev]
                if not lst:
                    del self.readers[s]
        ev.chains = None

    def force_readers(self, sid: int) -> None:
        for ev in self.readers.pop(sid, ()):
            ev.value()

    def defer_write(self, sid: int, write: tuple) -> None:
        """Defer an HBM write whose value is an :class:`EvacuationItem` (carried out in order)."""
        ws = self.writes.setdefault(sid, [])
        ws.append(write)
        if len(ws) >= self.MAX_WRITES:
            self.carry_out_writes(sid)

    def carry_out_writes(self, sid: int) -> None:
        """Carry out the deferred writes into storage ``sid``, batching the matmul work behind them."""
        from devkit import dtypes as dt

        writes = self.writes.pop(sid, [])
        _batch([w[3].evac for w in writes])
        for data, key, perm, value, vdt, ddt, shape in writes:
            vals = value.result().reshape(shape)
            if vdt != ddt:  # (values of the destination's own dtype are representable as they are)
                vals = dt.round_to(vals.astype(np.float32) if dt.is_float(vdt) else vals, ddt)
            tgt = data[key]
            if perm is not None:
                tgt = tgt.transpose(perm)
            tgt[...] = vals

    def finish(self) -> None:
        """Carry out everything still deferred."""
        for sid in list(self.writes):
            self.carry_out_writes(sid)
        for sid in list(self.readers):
            self.force_readers(sid)
        self.settle_all()


def _batch(evacs: list[Evacuation]) -> None:
    """Add the chains of several pending evacuations with fewer, larger products.  Chains whose stacked
    stationary operands are the same view and whose stacked moving operands are adjacent column blocks
    of one array (the N loop of a tiled matmul) become one product; such row blocks whose moving views
    are the same and whose stationary views are adjacent column blocks (the M loop) merge again.  Each
    chain's target gets its block of the result."""
    groups: dict[tuple, list[tuple[Evacuation, np.ndarray, np.ndarray, np.ndarray]]] = {}
    for ev in evacs:
        es = ev.entries
        if ev._value is not None or len(es) < 2 or any(e[3]._value is not None for e in es):
            continue
        t0, k0, p0 = es[0][0], es[0][1], es[0][2]
        if any(e[0] is not t0 or e[1] != k0 or e[2] != p0 for e in es):
            continue
        a = stack_rows([e[3].a for e in es])
        b = stack_rows([e[3].b for e in es]) if a is not None else None
        if b is None:
            continue
        tgt = t0[k0]
        if p0 is not None:
            tgt = tgt.transpose(p0)
        ident = (a.__array_interface__["data"][0], a.shape, a.strides, id(_owner(a)))
        groups.setdefault(ident, []).append((ev, a, b, tgt))
    # row blocks: per stationary view, the moving views side by side (one product per stationary)
    rows: list[tuple[np.ndarray, np.ndarray, list]] = []  # (a, b_all, members)
    for members in groups.values():
        b_all = stack_cols([m[2] for m in members]) if len(members) > 1 else members[0][2]
        if b_all is not None:
            rows.append((members[0][1], b_all, members))
    # row blocks with the same moving view and side-by-side stationary views: one product for all
    by_b: dict[tuple, list[tuple[np.ndarray, np.ndarray, list]]] = {}
    for r in rows:
        b_all = r[1]
        by_b.setdefault(
            (b_all.__array_interface__["data"][0], b_all.shape, b_all.strides, id(_owner(b_all))), []
        ).append(r)
    for block in by_b.values():
        if len(block) == 1 and len(block[0][2]) == 1:
            continue  # a single chain: its evacuation adds it as usual
        a_all = stack_cols([r[0] for r in block]) if len(block) > 1 else block[0][0]
        parts = [block] if a_all is not None else [[r] for r in block]
        for part in parts:
            a = a_all if a_all is not None else part[0][0]
            b_all = part[0][1]
            with _blas_threads_for(2 * a.shape[0] * a.shape[1] * b_all.shape[1]):
                c = a.T @ b_all
            r0 = 0
            for a_r, _, members in part:
                c0 = 0
                for ev, _, b, tgt in members:
                    tgt += c[r0 : r0 + a_r.shape[1], c0 : c0 + b.shape[1]]
                    c0 += b.shape[1]
                    ev.entries = []
                r0 += a_r.shape[1]


def _owner(x: Any) -> Any:
    """The object that owns the memory behind array view ``x`` (through views and ``as_strided``)."""
    while True:
        b = getattr(x, "base", None)
        if b is None:
            return x
        x = b


def stack_cols(parts: list[np.ndarray]) -> np.ndarray | None:
    """One read-only view of 2-D ``parts`` side by side along axis 1, if they are adjacent column blocks
    of the same array; ``None`` otherwise.  Never copies."""
    first = parts[0]
    owner = _owner(first)
    strides = first.strides
    rows = first.shape[0]
    ptr = first.__array_interface__["data"][0]
    cols = 0
    for x in parts:
        if (
            _owner(x) is not owner
            or x.shape[0] != rows
            or x.strides != strides
            or x.dtype != first.dtype
            or x.__array_interface__["data"][0] != ptr + cols * strides[1]
        ):
            return None
        cols += x.shape[1]
    return as_strided(first, shape=(rows, cols), strides=strides, writeable=False)


def apply(entries: list[Entry], *, wide: bool) -> None:
    """Add the products of ``entries`` into their targets in order (consecutive products into one region
    as one stacked product when possible)."""
    i = 0
    while i < len(entries):
        target, key, perm, _ = entries[i]
        j = i + 1
        while j < len(entries) and entries[j][0] is target and entries[j][1] == key and entries[j][2] == perm:
            j += 1
        tgt = target[key]
        if perm is not None:
            tgt = tgt.transpose(perm)
        _accumulate(tgt, [e[3] for e in entries[i:j]], wide)
        i = j


def _accumulate(tgt: np.ndarray, products: list[Product], wide: bool = True) -> None:
    """``tgt +=`` each product, as one stacked matrix product when their operands allow it."""
    if len(products) > 1 and all(p._value is None for p in products):
        a = stack_rows([p.a for p in products])
        b = stack_rows([p.b for p in products]) if a is not None else None
        if b is not None:
            with _blas_threads_for(2 * a.shape[0] * a.shape[1] * b.shape[1]) if wide else nullcontext():
                tgt += a.T @ b
            return
    for p in products:
        tgt += p._value if p._value is not None else p.a.T @ p.b


def _blas_threads_for(flops: int) -> AbstractContextManager[Any]:
    n = _wide_threads()
    if flops < WIDE_PRODUCT_FLOPS or n < 2:
        return nullcontext()
    return _controller().limit(limits=n, user_api="blas")


@functools.cache
def _controller() -> Any:
    from threadpoolctl import ThreadpoolController

    return ThreadpoolController()


def _wide_threads() -> int:
    env = os.environ.get("DEVKIT_BLAS_THREADS", "").strip()
    if env.isdigit():
        return max(1, int(env))
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1
