"""Property tests of the SVD and dense SwiGLU MLP kernels against their NumPy references (simulator)."""

from __future__ import annotations

import numpy as np
import pytest
from _kernel_checks import (
    DENSE_MLP_SHAPES,
    SVD_MLP_SHAPES,
    XUV_OR_DEFAULT_BLOCKS,
    arg_specs,
    assert_rejected_before_running,
    check,
    check_inputs,
    dim,
    optional_blocks,
    reference_property,
    trace_cost_only,
)
from hypothesis import given, settings
from hypothesis import strategies as st

import devkit
from devkit.kernels import registry
from devkit.kernels.mlp import dense_mlp, svd_mlp

DTYPES = ["bfloat16", "float32"]


test_svd_mlp_matches_reference = reference_property(
    ["svd_mlp"], SVD_MLP_SHAPES, max_examples=15, dtypes=DTYPES, blocks=XUV_OR_DEFAULT_BLOCKS, seed_dim="S"
)


@settings(max_examples=8)
@given(
    s=dim(400, (1, 3, 129, 300)),
    h=dim(200),
    i=dim(400),
    rg=dim(150),
    ru=dim(150),
    rd=dim(150),
    dtype=st.sampled_from(DTYPES),
)
def test_svd_mlp_with_unequal_ranks(s: int, h: int, i: int, rg: int, ru: int, rd: int, dtype: str) -> None:
    rng = np.random.default_rng(s + rg)
    dt = registry.DTYPES[dtype]
    shapes = [(s, h), (h, rg), (rg, i), (h, ru), (ru, i), (i, rd), (rd, h)]
    inputs = tuple((rng.standard_normal(sh) / np.sqrt(sh[0])).astype(np.float32).astype(dt) for sh in shapes)
    check_inputs("svd_mlp", inputs, dtype, block_tokens=256, stage1_tokens=128)


test_dense_mlp_matches_reference = reference_property(
    ["dense_mlp"],
    DENSE_MLP_SHAPES,
    max_examples=12,
    dtypes=DTYPES,
    blocks=optional_blocks(block_tokens=[128, 256, 384], k_chunk_tiles=[1, 2, 3], psum_banks=[2, 4, 8]),
    seed_dim="I",
)


@pytest.mark.parametrize("dtype", ["bfloat16", "float32"])
@pytest.mark.parametrize("suffix", ["", "_b2"], ids=["beta1", "beta2"])
def test_mlps_decode_single_token(suffix: str, dtype: str) -> None:
    check("svd_mlp" + suffix, {"S": 1, "H": 256, "I": 4500, "r": 128}, dtype)
    check("dense_mlp" + suffix, {"S": 1, "H": 256, "I": 1100 if suffix else 4500}, dtype)


def test_svd_mlp_activation_crosses_hbm_transposed_once() -> None:
    """The gate/up pass writes act^T [I, S] once and the down pass reads it once (no transpose pass)."""
    s, h, i, r = 512, 256, 1024, 128
    specs = arg_specs(registry.get("svd_mlp").arg_shapes({"S": s, "H": h, "I": i, "r": r}))
    rep = devkit.estimate(svd_mlp, *specs, block_tokens=512, stage1_tokens=512)
    item = 2
    weights = (2 * (h * r + r * i) + i * r + r * h) * item
    assert rep.hbm_write_bytes == (s * h + i * s) * item  # the output and act^T, nothing else
    assert rep.hbm_read_bytes == s * h * item + weights + i * s * item
    sink = trace_cost_only(svd_mlp, specs, {"block_tokens": 512})
    assert not [x for x in sink.instrs if x.opcode in ("load_transpose2d", "dma_transpose")]


@pytest.mark.parametrize(
    "kernel,blocks,limit",
    [
        (svd_mlp, {"psum_banks": 9}, "PSUM"),
        (svd_mlp, {"block_tokens": 8192, "stage1_tokens": 8192}, "SBUF"),
        (dense_mlp, {"psum_banks": 12}, "PSUM"),
        (dense_mlp, {"block_tokens": 8192}, "SBUF"),
    ],
)
def test_infeasible_mlp_blocks_raise_before_running(kernel, blocks, limit) -> None:  # type: ignore[no-untyped-def]
    name = "svd_mlp" if kernel is svd_mlp else "dense_mlp"
    spec = registry.get(name)
    shape = (
        {"S": 8192, "H": 4096, "I": 14336, "r": 2048}
        if name == "svd_mlp"
        else {"S": 8192, "H": 4096, "I": 14336}
    )
    assert_rejected_before_running(kernel, arg_specs(spec.arg_shapes(shape)), blocks, limit)
    assert not spec.feasible(shape, blocks).ok


@pytest.mark.slow
@pytest.mark.parametrize("name", ["svd_mlp", "dense_mlp"])
def test_mlp_default_validation_shape(name: str) -> None:
    res = registry.validate(name)
    assert res.ok, res
