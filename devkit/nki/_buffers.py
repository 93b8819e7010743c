"""Buffers (``nl.sbuf``, ``nl.psum``, ``nl.hbm``...), ``nl.par_dim`` and direct allocation.

A buffer object says where a tensor lives.  Compiler-managed buffers (``nl.sbuf``, ``nl.psum``) let
the simulator's allocator place tiles; direct allocation (``nki.compiler.sbuf.mod_alloc`` and friends)
places every logical tile (one block index) at the address the kernel's allocator function returns.
Logical tiles that share physical memory are legal as long as a tile is never read after another
tile overwrote its bytes; the simulator checks exactly that (see :class:`DirectPlacement`).
"""

from __future__ import annotations

import itertools
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from devkit import dtypes as dt
from devkit.errors import CapacityError, KernelArgumentError, SpillWarning, TileShapeError
from devkit.sim.storage import Storage
from devkit.sim.tensor import Tensor


class par_dim:
    """``nl.par_dim(n)``: marks the partition dimension inside a shape with block dimensions."""

    def __init__(self, size: int) -> None:
        if isinstance(size, par_dim):
            size = size.size
        self.size = int(size)

    def __int__(self) -> int:
        return self.size

    __index__ = __int__

    def __repr__(self) -> str:
        return f"par_dim({self.size})"


@dataclass(frozen=True)
class Buffer:
    """Where a tensor lives: ``kind`` is sbuf, psum, private_hbm or shared_hbm."""

    kind: str
    direct: Any = None

    def __repr__(self) -> str:
        return f"nl.{self.kind}" if self.direct is None else f"<direct {self.kind} allocation>"

    def __eq__(self, other: object) -> bool:
        # ``t.buffer`` is the kind string; NKI 0.x kernels compare it with ``nl.sbuf`` (nki-library router_topk)
        if isinstance(other, str):
            return self.direct is None and other == self.kind
        if isinstance(other, Buffer):
            return (self.kind, self.direct) == (other.kind, other.direct)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self.kind)


sbuf = Buffer("sbuf")
psum = Buffer("psum")
private_hbm = Buffer("private_hbm")
hbm = private_hbm
shared_hbm = Buffer("shared_hbm")


def resolve(buffer: Any) -> Buffer:
    if buffer is None:
        return sbuf
    if isinstance(buffer, Buffer):
        return buffer
    raise KernelArgumentError(
        f"buffer must be nl.sbuf, nl.psum, nl.hbm, nl.private_hbm, nl.shared_hbm or a "
        f"nki.compiler allocation, got {buffer!r}",
        rule="bad-buffer",
    )


def parse_shape(shape: Any, api: str) -> tuple[tuple[int, ...], int]:
    """``shape`` (ints and at most one ``par_dim``) -> (dims, partition axis)."""
    if isinstance(shape, (int, np.integer, par_dim)):
        shape = (shape,)
    try:
        items = list(shape)
    except TypeError:
        raise KernelArgumentError(f"{api}: shape must be a tuple of integers, got {shape!r}") from None
    pax = 0
    dims = []
    n_par = 0
    for i, s in enumerate(items):
        if isinstance(s, par_dim):
            pax = i
            n_par += 1
            s = s.size
        if not isinstance(s, (int, np.integer)) or isinstance(s, bool):
            raise KernelArgumentError(f"{api}: shape must contain integers known at trace time, got {s!r}")
        if s <= 0:
            raise TileShapeError(f"{api}: shape {items} must contain positive sizes", rule="bad-shape")
        dims.append(int(s))
    if n_par > 1:
        raise KernelArgumentError(f"{api}: a shape can contain at most one par_dim")
    return tuple(dims), pax


def hbm_tensor(
    m: Any, shape: tuple[int, ...], dtype: Any, kind: str, name: str, loc: tuple[str, int]
) -> Tensor:
    """An HBM tensor; ``shared_hbm`` tensors are the same storage in every SPMD program instance."""
    if kind == "shared_hbm":
        i = m._shared_cursor
        m._shared_cursor += 1
        if i < len(m.shared_outputs):
            st = m.shared_outputs[i]
            if st.shape != shape or st.dtype != dtype:
                raise KernelArgumentError(
                    f"shared_hbm tensor #{i} has shape {list(shape)} in this program instance but "
                    f"{list(st.shape)} in an earlier one; SPMD instances must allocate the same outputs"
                )
            return Tensor.whole(st)
        st = m.new_storage(shape, dtype, "shared_hbm", name=name, kind="output", loc=loc)
        m.shared_outputs.append(st)
        return Tensor.whole(st)
    st = m.new_storage(shape, dtype, "private_hbm", name=name, kind="hbm", loc=loc)
    return Tensor.whole(st)


#: rows of the leading dimension one fill DMA writes (one partition-sized block, as a kernel storing a
#: memset tile would)
FILL_ROWS = 128


def fill_hbm(m: Any, t: Tensor, value: Any, loc: tuple[str, int]) -> None:
    """Initialise HBM tensor ``t`` (``nl.zeros(..., buffer=nl.shared_hbm)``) with ``value``.

    The Beta-1 API reference lists HBM among the buffers ``nl.zeros`` accepts, and the published NeuronMM
    kernels (``neuron_kernels/two_mm.py``) rely on it; the compiler fills the tensor with DMA writes, so
    the fill is traced as one DMA write per block of :data:`FILL_ROWS` leading rows (costed as HBM writes).
    """
    from devkit.trace import DMA

    if not t.shape:
        blocks = [t]
    else:
        n = t.shape[0]
        blocks = [t[r : min(r + FILL_ROWS, n)] for r in range(0, max(n, 1), FILL_ROWS)] if n else []
    for b in blocks:
        m.check_write(b, loc)
        m.emit(DMA, "dma_copy", [], [b], 0, {"fill": value}, loc)
        if m.numerics:
            b.write(dt.round_to(np.full(b.shape, value, dtype=np.float32), t.dtype))
        else:
            b.mark_written()


# ---- direct allocation (nki.compiler) ------------------------------------------------------------------


def _linearize(shape: tuple[int, ...], idx: tuple[int, ...]) -> int:
    out = 0
    for i, n in zip(idx, shape):
        out = out * n + i
    return out


def _modulo(base: int, alloc_shape: tuple[int, ...], scale: int) -> Callable[[tuple[int, ...]], int]:
    def f(idx: tuple[int, ...]) -> int:
        # Like the documented reference implementation, block indices and tile counts pair up
        # positionally; extra tile counts (e.g. num_free_tiles=(4,) on a tensor without block dims,
        # whose "buffers" are a free dim) do not move the tile.
        s = tuple(alloc_shape)[: len(idx)] if alloc_shape else (1,) * len(idx)
        s = s + (1,) * (len(idx) - len(s))
        return _linearize(s, tuple(i % max(int(n), 1) for i, n in zip(idx, s))) * scale + base

    return f


@dataclass
class DirectPlacement:
    """Physical location of every logical tile (block index) of one directly allocated tensor."""

    buffer: str
    # block index -> (start_partition, byte address within the partition's address space)
    blocks: dict[tuple[int, ...], tuple[int, int]]
    tile_bytes: int  # bytes per partition of one logical tile
    partitions: int


_WARNED: set = set()


def _out_of_range(message: str, loc: tuple[str, int]) -> CapacityError:
    """The error of a direct allocation outside the memory it names, blamed on the allocating line."""
    return CapacityError(message, rule="direct-alloc-range", filename=loc[0], lineno=loc[1])


def _check_sbuf_range(
    m: Any, name: str, idx: tuple[int, ...], addr: int, fbytes: int, loc: tuple[str, int]
) -> None:
    """A directly allocated SBUF tile must lie inside the partition.

    Past the target's usable size (``total_available_sbuf_size``) or its physical partition size the
    kernel is only valid on a larger NeuronCore: that is a :class:`SpillWarning` (an error with
    ``strict_capacity``), and an error past the largest partition of any target.
    """
    from devkit.nki.runner import largest_sbuf_bytes_per_partition

    g = m.geometry
    end = addr + fbytes
    what = f"SBUF allocation of {name or 'tensor'} block {list(idx)}: bytes [{addr}, {end}) per partition"
    if addr < 0 or end > largest_sbuf_bytes_per_partition():
        raise _out_of_range(
            f"{what} run past the end of the partition ({largest_sbuf_bytes_per_partition()} bytes on "
            "the largest target)",
            loc,
        )
    for limit, what_limit in (
        (g.sbuf_bytes_per_partition, "physical partition size"),
        (g.sbuf_usable_bytes_per_partition, "usable size (total_available_sbuf_size)"),
    ):
        if end > limit:
            msg = f"{what} run past the {limit}-byte {what_limit} of {g.name}"
            if m.options.strict_capacity:
                raise _out_of_range(msg + " (strict_capacity is on)", loc)
            if (loc, limit) not in _WARNED:
                _WARNED.add((loc, limit))
                warnings.warn_explicit(
                    msg + "; the kernel only fits a NeuronCore with more SBUF", SpillWarning, loc[0], loc[1]
                )
            break


class DirectAlloc:
    """An allocation policy from ``nki.compiler``: ``func(idx, pdim_size, fdim_size)``."""

    def __init__(self, buffer: str, func: Callable[..., Any]) -> None:
        self.buffer = buffer
        self.func = func

    def _call(self, idx: tuple[int, ...], pdim: int, fbytes: int) -> Any:
        """The SDK passes ``idx``, ``pdim_size`` and ``fdim_size`` by name (``functools.partial`` allocators
        with leading bound arguments rely on it); plain positional allocators are supported too."""
        import inspect

        try:
            params = inspect.signature(self.func).parameters
        except (TypeError, ValueError):
            params = {}
        if all(k in params for k in ("idx", "pdim_size", "fdim_size")):
            return self.func(idx=idx, pdim_size=pdim, fdim_size=fbytes)
        return self.func(idx, pdim, fbytes)

    def create(
        self, m: Any, shape: tuple[int, ...], pax: int, dtype: Any, name: str, loc: tuple[str, int]
    ) -> Tensor:
        from devkit import dtypes as dt

        nblock_dims = pax
        p = shape[pax]
        fbytes = int(np.prod(shape[pax + 1 :], dtype=np.int64)) * dt.itemsize(dtype)
        g = m.geometry
        blocks: dict[tuple[int, ...], tuple[int, int]] = {}
        for idx in itertools.product(*[range(n) for n in shape[:nblock_dims]]):
            r = self._call(tuple(idx), p, fbytes)
            if self.buffer == "psum":
                if not isinstance(r, tuple) or len(r) != 3:
                    raise KernelArgumentError(
                        "a PSUM allocator must return (bank, start_partition, byte_addr)"
                    )
                bank, sp, addr = (int(v) for v in r)
                if not 0 <= bank < g.psum_banks:
                    raise _out_of_range(
                        f"PSUM allocation of {name or 'tensor'} block {idx}: bank {bank} is outside "
                        f"0..{g.psum_banks - 1}",
                        loc,
                    )
                if addr + fbytes > g.psum_bank_bytes:
                    raise _out_of_range(
                        f"PSUM allocation of {name or 'tensor'} block {idx}: bytes [{addr}, {addr + fbytes}) run "
                        f"past the {g.psum_bank_bytes}-byte bank",
                        loc,
                    )
                phys = bank * g.psum_bank_bytes + addr
            else:
                if not isinstance(r, tuple) or len(r) != 2:
                    raise KernelArgumentError("an SBUF allocator must return (start_partition, byte_addr)")
                sp, phys = (int(v) for v in r)
                _check_sbuf_range(m, name, idx, phys, fbytes, loc)
            if sp < 0 or sp + p > g.partitions:
                raise _out_of_range(
                    f"allocation of {name or 'tensor'} block {idx}: partitions [{sp}, {sp + p}) "
                    f"run past {g.partitions}",
                    loc,
                )
            blocks[tuple(idx)] = (sp, phys)
        st = m.new_storage(shape, dtype, self.buffer, par_axis=pax, name=name, kind="direct", loc=loc)
        placement = DirectPlacement(self.buffer, blocks, fbytes, p)
        m.register_direct(st, placement)
        return Tensor.whole(st)


def _check_storage(st: Storage) -> None:  # pragma: no cover - typing helper
    pass
