"""Deferred TensorE products and PSUM accumulation chains (numerics runs only).

A matmul's product is computed only when its values are needed.  ``acc += nc_matmul(a, b)`` appends
the product to the *accumulation chain* of ``acc``'s storage instead of adding it at once; the chain is
settled -- its products added into PSUM in program order -- as soon as anything reads the PSUM tile,
writes it another way, or lets it die, and before anything writes memory that a pending product reads.

Settling is where the speed comes from: consecutive products into one PSUM region whose operands are
consecutive row blocks of one array (the K loop of a tiled matmul over loaded tiles) are added as one
matrix product with the contraction dimensions stacked, which BLAS runs far faster than many 128-row
products.  Both orders accumulate in fp32, as PSUM does; results agree to fp32 rounding.
"""

from __future__ import annotations

import functools
import os
from contextlib import AbstractContextManager, nullcontext
from typing import Any

import numpy as np
from numpy.lib.stride_tricks import as_strided

# A stacked product of at least this many FLOPs runs on every core the process may use (or on
# DEVKIT_BLAS_THREADS threads when that is set); smaller ones stay on the run's single BLAS thread, where
# thread hand-offs would cost more than they save.
WIDE_PRODUCT_FLOPS = 1 << 26


class Product:
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
    base = first.base
    if base is None or first.ndim != 2:
        return None
    strides = first.strides
    cols = first.shape[1]
    row_bytes = strides[0]
    ptr = first.__array_interface__["data"][0]
    rows = 0
    for x in parts:
        if (
            x.base is not base
            or x.ndim != 2
            or x.shape[1] != cols
            or x.strides != strides
            or x.dtype != first.dtype
            or x.__array_interface__["data"][0] != ptr + rows * row_bytes
        ):
            return None
        rows += x.shape[0]
    return as_strided(first, shape=(rows, cols), strides=strides, writeable=False)


class Chains:
    """The pending accumulation chains of one kernel run, by PSUM storage id."""

    def __init__(self) -> None:
        # storage id -> [(target array, index key, axis permutation or None, Product), ...] in program order
        self.pending: dict[int, list[tuple[np.ndarray, tuple, tuple | None, Product]]] = {}
        self.sources: dict[int, int] = {}  # storage id -> pending products reading its writable memory

    def add(self, sid: int, target: np.ndarray, key: tuple, perm: tuple | None, product: Product) -> None:
        """Defer ``target[key] (transposed by perm) += product``."""
        self.pending.setdefault(sid, []).append((target, key, perm, product))
        for s in product.sources:
            self.sources[s] = self.sources.get(s, 0) + 1

    def involves(self, sid: int) -> bool:
        """Whether storage ``sid`` is a chain's target or memory a pending product reads."""
        return sid in self.pending or sid in self.sources

    def settle(self, sid: int) -> None:
        """Add the pending products of storage ``sid``'s chain into its memory, in order."""
        entries = self.pending.pop(sid, None)
        if not entries:
            return
        i = 0
        while i < len(entries):
            target, key, perm, _ = entries[i]
            j = i + 1
            while (
                j < len(entries)
                and entries[j][0] is target
                and entries[j][1] == key
                and entries[j][2] == perm
            ):
                j += 1
            tgt = target[key]
            if perm is not None:
                tgt = tgt.transpose(perm)
            _accumulate(tgt, [e[3] for e in entries[i:j]])
            i = j
        for e in entries:
            for s in e[3].sources:
                n = self.sources[s] - 1
                if n:
                    self.sources[s] = n
                else:
                    del self.sources[s]

    def settle_all(self) -> None:
        for sid in list(self.pending):
            self.settle(sid)


def _accumulate(tgt: np.ndarray, products: list[Product]) -> None:
    """``tgt +=`` each product, as one stacked matrix product when their operands allow it."""
    if len(products) > 1 and all(p._value is None for p in products):
        a = stack_rows([p.a for p in products])
        b = stack_rows([p.b for p in products]) if a is not None else None
        if b is not None:
            with _blas_threads_for(2 * a.shape[0] * a.shape[1] * b.shape[1]):
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
