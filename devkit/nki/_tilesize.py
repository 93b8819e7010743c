"""``nl.tile_size``: hardware tile limits (programming model TC#1-TC#3; KLR per-architecture values).

``total_available_sbuf_size`` depends on the target of the kernel being simulated (trn1 when read
outside a kernel).
"""

from __future__ import annotations

from devkit.sim.machine import current

_USABLE_SBUF_DEFAULT = 180224  # trn1/inf2, bytes per partition (KLR Trace.lean; reference/nki_api.md §2.7)


class _TileSize:
    pmax = 128
    psum_fmax = 512
    gemm_stationary_fmax = 128
    gemm_moving_fmax = 512
    bn_stats_fmax = 512
    psum_min_align = 4
    sbuf_min_align = 1
    psum_num_banks = 8

    @property
    def total_available_sbuf_size(self) -> int:
        """Usable SBUF bytes per partition on the current target."""
        m = current()
        return m.geometry.sbuf_usable_bytes_per_partition if m is not None else _USABLE_SBUF_DEFAULT

    def __repr__(self) -> str:
        return "nl.tile_size"


tile_size = _TileSize()
