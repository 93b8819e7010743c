"""``neuronxcc.nki.compiler`` (``ncc``): direct allocation of SBUF/PSUM and kernel decorators.

``ncc.sbuf.mod_alloc(base_addr=..., num_free_tiles=(k,))`` places logical tile ``i`` of a tensor at
``base_addr + (i % k) * tile_bytes`` (bytes per partition); ``ncc.psum.mod_alloc(base_bank=...,
num_bank_tiles=(k,))`` places it in bank ``base_bank + i % k``.  ``alloc(func)`` takes the kernel's own
allocator ``func(block_index, partition_size, bytes_per_partition)``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from devkit.errors import KernelArgumentError
from devkit.nki._buffers import Buffer, DirectAlloc, _modulo
from devkit.nki._buffers import psum as _auto_psum
from devkit.nki._buffers import sbuf as _auto_sbuf


class _Allocators:
    """``ncc.<buffer>``: the allocation policies of one on-chip buffer."""

    def __init__(self, buffer: str, returns: str, auto: Buffer) -> None:
        self._buffer = buffer
        self._returns = returns  # what an allocator function returns, for the error message
        self._auto = auto

    def alloc(self, func: Callable[..., Any]) -> Buffer:
        if not callable(func):
            raise KernelArgumentError(
                f"ncc.{self._buffer}.alloc expects a function (idx, pdim_size, fdim_size) -> ({self._returns})"
            )
        return Buffer(self._buffer, DirectAlloc(self._buffer, func))

    def auto_alloc(self) -> Buffer:
        return self._auto


class _SbufAllocators(_Allocators):
    def __init__(self) -> None:
        super().__init__("sbuf", "start_partition, byte_addr", _auto_sbuf)

    def mod_alloc(
        self,
        *,
        base_addr: int,
        base_partition: int = 0,
        num_par_tiles: tuple = (),
        num_free_tiles: tuple = (),
    ) -> Buffer:
        def func(idx: tuple[int, ...], pdim_size: int, fdim_size: int) -> tuple[int, int]:
            return (
                _modulo(base_partition, num_par_tiles, pdim_size)(idx),
                _modulo(base_addr, num_free_tiles, fdim_size)(idx),
            )

        return self.alloc(func)


class _PsumAllocators(_Allocators):
    def __init__(self) -> None:
        super().__init__("psum", "bank, start_partition, byte_addr", _auto_psum)

    def mod_alloc(
        self,
        *,
        base_bank: int,
        base_addr: int = 0,
        base_partition: int = 0,
        num_bank_tiles: tuple = (),
        num_par_tiles: tuple = (),
        num_free_tiles: tuple = (),
    ) -> Buffer:
        def func(idx: tuple[int, ...], pdim_size: int, fdim_size: int) -> tuple[int, int, int]:
            return (
                _modulo(base_bank, num_bank_tiles, 1)(idx),
                _modulo(base_partition, num_par_tiles, pdim_size)(idx),
                _modulo(base_addr, num_free_tiles, fdim_size)(idx),
            )

        return self.alloc(func)


sbuf = _SbufAllocators()
psum = _PsumAllocators()


def _passthrough(func: Any = None, **kwargs: Any) -> Any:
    if func is None:
        return lambda f: f
    return func


#: Compiler-pipeline decorators: no effect on simulated semantics.
skip_middle_end_transformations = _passthrough
enable_stack_allocator = _passthrough
force_auto_alloc = _passthrough


class _NullContext:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: Any) -> None:
        return None


def allocation_scope() -> _NullContext:
    return _NullContext()


def multi_buffer(factor: int = 2) -> _NullContext:
    return _NullContext()


def no_reorder() -> _NullContext:
    return _NullContext()
