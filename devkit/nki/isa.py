"""``neuronxcc.nki.isa`` (``nisa``) for the simulator: one function per NeuronCore instruction.

Semantics and limits follow the NKI Beta 1 ISA reference (see ``reference/nki_api.md`` §3 and the
project's API notes); each instruction returns a new tile (SBUF, or PSUM for TensorE results) which an
assignment ``t[...] = nisa.x(...)`` writes into ``t`` directly.

This module is the public face: its instruction functions are generated from the declarations of the
instruction layer (:mod:`devkit.nki._isa_layer`), which live by family in private modules:
:mod:`devkit.nki._isa_matmul` (TensorE), :mod:`devkit.nki._isa_activation` (ScalarE),
:mod:`devkit.nki._isa_vector` (element-wise arithmetic, scans, generated values),
:mod:`devkit.nki._isa_copy` (copies, selections, shuffles, gathers), :mod:`devkit.nki._isa_reduce`
(reductions and statistics), :mod:`devkit.nki._isa_dma` (DMA), over the enums and operand rules of
:mod:`devkit.nki._isa_common` and the ALU tables of :mod:`devkit.nki._alu`.
"""

from __future__ import annotations

from typing import Any

from devkit.errors import UnsupportedError
from devkit.nki import _isa_activation, _isa_copy, _isa_dma, _isa_matmul, _isa_reduce, _isa_vector
from devkit.nki._alu import ACTIVATIONS, ALU, BITVEC, REDUCE_OK  # noqa: F401  (the shared tables)
from devkit.nki._isa_common import (  # noqa: F401  (the enums and nc_version of neuronxcc.nki.isa)
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
from devkit.nki._isa_copy import tensor_copy_dynamic_dst  # noqa: F401
from devkit.nki._isa_layer import beta1_functions as _beta1_functions
from devkit.nki._isa_matmul import matmul_core  # noqa: F401
from devkit.nki._limits import fp32  # noqa: F401

#: every instruction of the layer that Beta 1 exposes, by family
DECLARED = (
    *_isa_matmul.INSTRUCTIONS,
    *_isa_activation.INSTRUCTIONS,
    *_isa_vector.INSTRUCTIONS,
    *_isa_copy.INSTRUCTIONS,
    *_isa_reduce.INSTRUCTIONS,
    *_isa_dma.INSTRUCTIONS,
)
# the public functions, generated from the declarations (devkit.nki._isa_layer.beta1)
globals().update(_beta1_functions(DECLARED))


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
