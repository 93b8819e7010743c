"""``neuronxcc.nki.isa`` (``nisa``) for the simulator: one function per NeuronCore instruction.

Semantics and limits follow the NKI Beta 1 ISA reference (see ``reference/nki_api.md`` §3 and the
project's API notes); each instruction returns a new tile (SBUF, or PSUM for TensorE results) which an
assignment ``t[...] = nisa.x(...)`` writes into ``t`` directly.

This module is the public face; the instructions live by family in private modules:
:mod:`devkit.nki._isa_matmul` (TensorE), :mod:`devkit.nki._isa_activation` (ScalarE),
:mod:`devkit.nki._isa_vector` (element-wise arithmetic, scans, generated values),
:mod:`devkit.nki._isa_copy` (copies, selections, shuffles, gathers), :mod:`devkit.nki._isa_reduce`
(reductions and statistics), :mod:`devkit.nki._isa_dma` (DMA), over the enums and operand rules of
:mod:`devkit.nki._isa_common` and the ALU tables of :mod:`devkit.nki._alu`.
"""

from __future__ import annotations

import enum  # noqa: F401  (names this module has always exposed, kept for code that reached them here)
from typing import Any

import numpy as np  # noqa: F401

from devkit import dtypes as _dt  # noqa: F401
from devkit.errors import (  # noqa: F401
    DtypeError,
    IndexingError,
    KernelArgumentError,
    MemoryPlacementError,
    PartitionMismatchError,
    TileShapeError,
    UnsupportedError,
    user_location,
)
from devkit.nki import _alu as _alu_tables  # noqa: F401
from devkit.nki._alu import (  # noqa: F401
    _IDENT,
    _REDUCE_FN,
    ACTIVATIONS,
    ALU,
    BITVEC,
    REDUCE_OK,
    _alu_name,
    _require_int,
)
from devkit.nki._isa_activation import _activation, _activation_fn, activation, activation_reduce  # noqa: F401
from devkit.nki._isa_common import (  # noqa: F401
    _ENGINE_NAME,
    _alu,
    _engine,
    _reduce_values,
    _same_partitions,
    _val,
    _vector_accumulate,
    _vector_operand,
    dge_mode,
    dma_engine,
    engine,
    get_nc_version,
    gpsimd_engine,
    nc_version,
    oob_mode,
    reduce_cmd,
    scalar_engine,
    tensor_engine,
    unknown_engine,
    vector_engine,
)
from devkit.nki._isa_copy import (  # noqa: F401
    affine_select,
    local_gather,
    nc_stream_shuffle,
    range_select,
    select_reduce,
    tensor_copy,
    tensor_copy_dynamic_dst,
    tensor_copy_dynamic_src,
    tensor_copy_predicated,
)
from devkit.nki._isa_dma import dma_copy, dma_transpose  # noqa: F401
from devkit.nki._isa_matmul import _MM_DTYPES, matmul_core, nc_matmul, nc_transpose  # noqa: F401
from devkit.nki._isa_reduce import (  # noqa: F401
    bn_aggr,
    bn_stats,
    max8,
    nc_find_index8,
    nc_match_replace8,
    tensor_partition_reduce,
    tensor_reduce,
    tensor_scalar_reduce,
)
from devkit.nki._isa_vector import (  # noqa: F401
    dropout,
    iota,
    memset,
    reciprocal,
    scalar_tensor_tensor,
    sequence_bounds,
    tensor_scalar,
    tensor_scalar_cumulative,
    tensor_tensor,
    tensor_tensor_scan,
)
from devkit.nki._limits import fp32  # noqa: F401
from devkit.sim import instr as _x  # noqa: F401
from devkit.sim import placement as _placement  # noqa: F401
from devkit.sim.deferred import Product  # noqa: F401
from devkit.sim.index import IndexExpr, MaskExpr  # noqa: F401
from devkit.sim.storage import HBM_BUFFERS  # noqa: F401
from devkit.sim.tensor import Tensor  # noqa: F401
from devkit.trace import DMA, GPSIMD, SCALAR, TENSOR, VECTOR  # noqa: F401


def builtin_custom_op(*args: Any, **kwargs: Any) -> Any:
    raise UnsupportedError(
        "nisa.builtin_custom_op runs custom device code and cannot be simulated", rule="unsupported-api"
    )


class constants:
    engine = engine
    oob_mode = oob_mode
    dge_mode = dge_mode
    reduce_cmd = reduce_cmd
    nc_version = nc_version
