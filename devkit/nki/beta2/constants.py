"""``nki.isa.constants``: the enums of NKI 0.x (``reference/nki_beta2.md`` §5.1).

The same objects are exported by ``nki.isa``.  ``engine``, ``reduce_cmd``, ``oob_mode`` and ``nc_version``
share their numbering with Beta 1 and are the Beta-1 classes; ``dge_mode`` was renumbered in NKI 0.x and is
its own class here.  All are ``IntEnum``s, so ``nc_version.gen3 >= 3`` and ``get_nc_version() >= gen3``
work as kernels expect.
"""

from __future__ import annotations

import enum

from devkit.nki.isa import engine, nc_version, oob_mode, reduce_cmd

__all__ = [
    "dge_mode",
    "dma_engine",
    "engine",
    "matmul_perf_mode",
    "nc_version",
    "oob_mode",
    "reduce_cmd",
]


class dge_mode(enum.IntEnum):
    """Descriptor generation of a DMA (NKI 0.x numbering)."""

    unknown = 0
    swdge = 1
    hwdge = 2
    none = 3


class matmul_perf_mode(enum.Enum):
    """TensorE performance mode of ``nc_matmul``."""

    none = "none"
    double_row = "double_row"


class dma_engine(enum.IntEnum):
    """Queue of ``sendrecv`` (0.3.0)."""

    dma = 1
    gpsimd_dma = 2
