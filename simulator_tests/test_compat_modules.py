"""Beta-1 submodules real kernels import exist under the simulator (nki-samples 0898a77
``contributed/neuron-team-kernels/conv.py`` and ``reference/rmsnorm_quant`` import
``neuronxcc.nki.language.constants.sizeinbytes``)."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest


def test_language_constants_sizeinbytes():
    import neuronxcc.nki.language as nl
    from neuronxcc.nki.language.constants import sizeinbytes

    assert sizeinbytes(np.float32) == 4
    assert sizeinbytes(nl.bfloat16) == 2
    assert sizeinbytes(ml_dtypes.float8_e4m3) == 1
    assert sizeinbytes(nl.int32) == 4
    with pytest.raises(ValueError, match="dtype"):
        sizeinbytes("not-a-dtype")


#: The instructions, enums and tables ``neuronxcc.nki.isa`` offers under the simulator.  The module is a
#: face over private modules by instruction family (issue 15); none of these may go missing.
NISA_API = {
    "activation", "activation_reduce", "affine_select", "bn_aggr", "bn_stats", "builtin_custom_op",
    "dma_copy", "dma_transpose", "dropout", "get_nc_version", "iota", "local_gather", "matmul_core",
    "max8", "memset", "nc_find_index8", "nc_match_replace8", "nc_matmul", "nc_stream_shuffle",
    "nc_transpose", "range_select", "reciprocal", "scalar_tensor_tensor", "select_reduce",
    "sequence_bounds", "tensor_copy", "tensor_copy_dynamic_dst", "tensor_copy_dynamic_src",
    "tensor_copy_predicated", "tensor_partition_reduce", "tensor_reduce", "tensor_scalar",
    "tensor_scalar_cumulative", "tensor_scalar_reduce", "tensor_tensor", "tensor_tensor_scan",
    "constants", "dge_mode", "engine", "nc_version", "oob_mode", "reduce_cmd", "dma_engine",
    "gpsimd_engine", "scalar_engine", "tensor_engine", "unknown_engine", "vector_engine",
    "ACTIVATIONS", "ALU", "BITVEC", "REDUCE_OK",
}  # fmt: skip


def test_isa_face_keeps_the_instruction_set():
    """Every name of the Beta-1 ISA is reachable as ``nisa.<name>``, and the enums the instructions use
    as defaults are the ones the module exposes (one enum class each, not per-family copies)."""
    import inspect

    import neuronxcc.nki.isa as nisa

    assert NISA_API <= set(dir(nisa))
    assert nisa.constants.engine is nisa.engine and nisa.constants.reduce_cmd is nisa.reduce_cmd
    for name in ("nc_transpose", "tensor_tensor", "tensor_copy", "memset"):
        assert inspect.signature(getattr(nisa, name)).parameters["engine"].default is nisa.engine.unknown
    assert inspect.signature(nisa.activation).parameters["reduce_cmd"].default is nisa.reduce_cmd.idle
    assert inspect.signature(nisa.dma_copy).parameters["oob_mode"].default is nisa.oob_mode.error
