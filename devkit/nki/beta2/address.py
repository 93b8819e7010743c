"""``nl.ndarray(..., address=(partition_offset, free_offset))``: an SBUF/PSUM tensor placed by the kernel.

NKI 0.3.0 lets a kernel place a tensor itself (``reference/nki_beta2.md`` §3.3): ``partition_offset`` is its
first partition, ``free_offset`` its first byte within each partition -- for PSUM the byte address across the
banks (``bank * 2048``), a tensor larger than a bank starting on a bank boundary.  The tensor becomes a direct
allocation like a Beta-1 ``nki.compiler`` one: it is not counted by the kit's lifetime allocator, its address
range is checked against the target (partitions, the SBUF partition size -- past the usable size a
``SpillWarning``, an error with ``strict_capacity`` -- and the PSUM banks) and its placement is recorded
(:attr:`Machine.direct`, the peak per-partition usage).

Aliasing between placed tensors is not modelled, as in AWS's simulator (reference §6.9): each tensor keeps its
own storage, and two placements that overlap are not reported.  (Checking them like ``nki.compiler``
allocations flagged hardware-tested nki-library kernels -- ``qkv_cte``'s PSUM banks, ``conv1d``'s stack
allocator -- whose overlapping uses the kit cannot yet tell apart from real conflicts.)  Each placed tensor
therefore gets a region of its own in the machine's physical address space: the partitions of placement
``k`` are numbered from ``k * P``.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np

from devkit import dtypes as _dt
from devkit.errors import CapacityError, DtypeError, KernelArgumentError, user_location
from devkit.nki._buffers import DirectPlacement, _check_sbuf_range, parse_shape
from devkit.sim import instr as _x
from devkit.sim.tensor import Tensor

API = "nl.ndarray"
_REGION = itertools.count(1)  # physical regions of placed tensors (0 is the nki.compiler allocations')


def parse_address(address: Any) -> tuple[int, int]:
    """``(partition_offset, free_offset)`` as two non-negative ints."""
    try:
        p, f = (int(a) for a in address)
    except (TypeError, ValueError):
        raise KernelArgumentError(
            f"{API}: address must be (partition_offset, free_offset), got {address!r}", rule="bad-argument"
        ) from None
    if p < 0 or f < 0:
        raise KernelArgumentError(f"{API}: address {address!r} must be non-negative", rule="bad-argument")
    return p, f


def _range_error(msg: str, loc: tuple[str, int]) -> CapacityError:
    return CapacityError(f"{API}: {msg}", rule="direct-alloc-range", filename=loc[0], lineno=loc[1])


def placed_ndarray(shape: Any, dtype: Any, buffer: str, name: str, address: Any) -> Tensor:
    """An uninitialised on-chip tensor at ``address`` (``buffer`` is ``"sbuf"`` or ``"psum"``)."""
    m = _x.machine(API)
    loc = user_location()
    p_off, f_off = parse_address(address)
    shp, pax = parse_shape(shape, API)
    if pax != 0:
        raise KernelArgumentError(f"{API}: address= needs the partition dim first", rule="bad-argument")
    try:
        d = _dt.as_dtype(dtype)
    except _dt.DtypeNotSupported as e:
        raise DtypeError(f"{API}: {e}") from None
    p = shp[0]
    fbytes = int(np.prod(shp[1:], dtype=np.int64)) * _dt.itemsize(d)
    g = m.geometry
    if p_off + p > g.partitions:
        raise _range_error(f"partitions [{p_off}, {p_off + p}) run past the {g.partitions} partitions", loc)
    if buffer == "psum":
        bank = g.psum_bank_bytes
        if f_off + fbytes > g.psum_banks * bank:
            raise _range_error(
                f"PSUM bytes [{f_off}, {f_off + fbytes}) per partition run past the {g.psum_banks} banks of "
                f"{bank} bytes",
                loc,
            )
        if f_off // bank != (f_off + fbytes - 1) // bank and f_off % bank:
            raise _range_error(
                f"a PSUM tensor spanning banks starts on a bank boundary (a multiple of {bank} bytes), got "
                f"free_offset {f_off}",
                loc,
            )
    else:
        _check_sbuf_range(m, name, (), f_off, fbytes, loc)
    st = m.new_storage(shp, d, buffer, par_axis=0, name=name, kind="direct", loc=loc)
    first = next(_REGION) * g.partitions + p_off  # a region of its own: aliasing is not modelled
    m.register_direct(st, DirectPlacement(buffer, {(): (first, f_off)}, fbytes, p))
    return Tensor.whole(st)
