"""``nl.tile_size``: hardware tile limits (programming model TC#1-TC#3; KLR per-architecture values).

Every value is read from the target file (:mod:`devkit.targets`) of the kernel being simulated, or
of the default target (trn1) when read outside a kernel.
"""

from __future__ import annotations

from devkit.sim.machine import current
from devkit.targets import DEFAULT_TARGET, Target, load_target


def _target() -> Target:
    m = current()
    return load_target(m.geometry.name if m is not None else DEFAULT_TARGET)


class _TileSize:
    @property
    def pmax(self) -> int:
        """Largest partition dimension of an SBUF/PSUM tile (partitions)."""
        return _target().tile.pmax

    @property
    def psum_fmax(self) -> int:
        """Largest free size of a PSUM tile (fp32 elements: one bank)."""
        return _target().tile.psum_fmax

    @property
    def gemm_stationary_fmax(self) -> int:
        """Largest free size of the stationary matmul operand (elements)."""
        return _target().tile.gemm_stationary_fmax

    @property
    def gemm_moving_fmax(self) -> int:
        """Largest free size of the moving matmul operand (elements)."""
        return _target().tile.gemm_moving_fmax

    @property
    def bn_stats_fmax(self) -> int:
        """Largest free size of a ``bn_stats`` input (elements)."""
        return _target().tile.bn_stats_fmax

    @property
    def psum_min_align(self) -> int:
        """Free-dim address alignment in PSUM (bytes)."""
        return _target().tile.psum_min_align

    @property
    def sbuf_min_align(self) -> int:
        """Free-dim address alignment in SBUF (bytes)."""
        return _target().tile.sbuf_min_align

    @property
    def psum_num_banks(self) -> int:
        """PSUM banks per partition."""
        return _target().psum.banks

    @property
    def total_available_sbuf_size(self) -> int:
        """Usable SBUF bytes per partition on the current target."""
        return _target().sbuf.usable_bytes_per_partition

    def __repr__(self) -> str:
        return "nl.tile_size"


tile_size = _TileSize()
