"""``nl.tile_size``: hardware tile limits (programming model TC#1-TC#3; KLR per-architecture values).

Every value is read from the target file (:mod:`devkit.targets`) of the kernel being simulated, or
of the default target (trn1) when read outside a kernel.
"""

from __future__ import annotations

from typing import Any

from devkit.sim.machine import current
from devkit.targets import DEFAULT_TARGET, Target, load_target


def _target() -> Target:
    m = current()
    return load_target(m.geometry.name if m is not None else DEFAULT_TARGET)


def _entry(section: str, key: str, doc: str) -> Any:
    """A read-only property holding ``<section>.<key>`` of the current target."""

    def get(self: _TileSize) -> int:
        return getattr(getattr(_target(), section), key)

    return property(get, doc=doc)


class _TileSize:
    pmax = _entry("tile", "pmax", "Largest partition dimension of an SBUF/PSUM tile (partitions).")
    psum_fmax = _entry("tile", "psum_fmax", "Largest free size of a PSUM tile (fp32 elements: one bank).")
    gemm_stationary_fmax = _entry(
        "tile", "gemm_stationary_fmax", "Largest free size of the stationary matmul operand (elements)."
    )
    gemm_moving_fmax = _entry(
        "tile", "gemm_moving_fmax", "Largest free size of the moving matmul operand (elements)."
    )
    bn_stats_fmax = _entry("tile", "bn_stats_fmax", "Largest free size of a ``bn_stats`` input (elements).")
    psum_min_align = _entry("tile", "psum_min_align", "Free-dim address alignment in PSUM (bytes).")
    sbuf_min_align = _entry("tile", "sbuf_min_align", "Free-dim address alignment in SBUF (bytes).")
    psum_num_banks = _entry("psum", "banks", "PSUM banks per partition.")
    total_available_sbuf_size = _entry(
        "sbuf", "usable_bytes_per_partition", "Usable SBUF bytes per partition on the current target."
    )

    def __repr__(self) -> str:
        return "nl.tile_size"


tile_size = _TileSize()
