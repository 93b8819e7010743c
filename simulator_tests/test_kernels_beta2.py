"""Property tests of the NKI Beta-2 kernels (``<name>_b2``, :mod:`devkit.kernels.beta2`) against the shared
references, agreement with their Beta-1 twins on the same inputs, LNC-2 launches and the trn2 plan.

Shapes are small and ragged on purpose (S = 1 decode, non-multiples of 128/512, blocks small enough that
every loop runs several times plus a remainder); bf16, fp16 and fp32.  Heavier sweeps are ``slow``.
"""

from __future__ import annotations

import numpy as np
import pytest
from _kernel_checks import (
    BASELINE_SHAPES,
    DENSE_MLP_SHAPES,
    OPTIMIZED_BLOCKS,
    OPTIMIZED_SHAPES,
    SEQUENTIAL_SHAPES,
    SVD_MLP_SHAPES,
    XUV_BLOCKS,
    XUV_OR_DEFAULT_BLOCKS,
    check,
    dim,
    fused_shapes,
    optional_blocks,
    reference_property,
)
from hypothesis import given, settings
from hypothesis import strategies as st

import devkit
from devkit.kernels import registry
from devkit.launch import estimate_launch

DTYPES = ["bfloat16", "float16", "float32"]
FUSED = ["xuv_fused_b2", "xuv_fused_t_b2", "xtuv_fused_b2"]


# ---- every Beta-2 kernel against the reference ----------------------------------------------------------


test_fused_b2_matches_reference = reference_property(
    FUSED, fused_shapes(600), max_examples=15, dtypes=DTYPES, blocks=XUV_OR_DEFAULT_BLOCKS
)
BASELINES = ["matmul_tiled_b2", "matmul_hoisted_b2", "matmul_blocked_b2"]
test_dense_baselines_b2_match_reference = reference_property(
    BASELINES, BASELINE_SHAPES, max_examples=10, dtypes=DTYPES
)
test_matmul_optimized_b2_matches_reference = reference_property(
    ["matmul_optimized_b2"], OPTIMIZED_SHAPES, max_examples=12, dtypes=DTYPES, blocks=OPTIMIZED_BLOCKS
)
test_xuv_sequential_b2_matches_reference = reference_property(
    ["xuv_sequential_b2"], SEQUENTIAL_SHAPES, max_examples=6, dtypes=DTYPES
)
test_svd_mlp_b2_matches_reference = reference_property(
    ["svd_mlp_b2"], SVD_MLP_SHAPES, max_examples=8, dtypes=DTYPES, blocks=XUV_OR_DEFAULT_BLOCKS, seed_dim="S"
)
test_dense_mlp_b2_matches_reference = reference_property(
    ["dense_mlp_b2"],
    DENSE_MLP_SHAPES,
    max_examples=6,
    dtypes=DTYPES,
    blocks=optional_blocks(block_tokens=[128, 256], k_chunk_tiles=[1, 3], psum_banks=[2, 8]),
    seed_dim="I",
)


@pytest.mark.parametrize("name", [*FUSED, "xuv_sequential_b2"])
@pytest.mark.parametrize("dtype", ["bfloat16", "float16", "float32"])
def test_decode_single_token_b2(name: str, dtype: str) -> None:
    check(name, {"S": 1, "H": 384, "r": 200, "N": 4500}, dtype)  # > 8 banks of columns


# ---- Beta 1 and Beta 2 agree ------------------------------------------------------------------------------


def _agree(family: str, shape: dict[str, int], dtype: str, seed: int, blocks: dict[str, int]) -> float:
    b1, b2 = registry.get(family), registry.twin(family, "beta2")
    inputs = b1.make_inputs(shape, dtype, seed)
    o1 = devkit.simulate(b1.kernel_object(), *inputs, **blocks)
    o2 = devkit.simulate(b2.kernel_object(), *inputs, **blocks)
    assert o1.shape == o2.shape and o1.dtype == o2.dtype
    err = registry.max_error(o2, o1)
    assert err <= b1.tolerance(dtype), f"{family} {shape} {dtype} {blocks}: Beta 2 vs Beta 1 {err:.3e}"
    return err


@settings(max_examples=10)
@given(
    s=dim(400, (1, 129, 300)),
    h=dim(260),
    r=dim(200),
    n=dim(600, (1, 513)),
    dtype=st.sampled_from(DTYPES),
    family=st.sampled_from(["xuv_fused", "xuv_fused_t", "xtuv_fused", "xuv_sequential"]),
    blocks=XUV_BLOCKS,
)
def test_beta1_and_beta2_agree_on_the_fused_kernels(
    s: int, h: int, r: int, n: int, dtype: str, family: str, blocks: dict[str, int]
) -> None:
    _agree(
        family, {"S": s, "H": h, "r": r, "N": n}, dtype, s + n, {} if family == "xuv_sequential" else blocks
    )


@pytest.mark.parametrize(
    "family,shape",
    [
        ("matmul_tiled", {"K": 200, "M": 130, "N": 600}),
        ("matmul_hoisted", {"K": 200, "M": 130, "N": 600}),
        ("matmul_blocked", {"K": 200, "M": 300, "N": 1100}),
        ("matmul_optimized", {"K": 300, "M": 260, "N": 1100}),
        ("svd_mlp", {"S": 200, "H": 260, "I": 640, "r": 130}),
        ("svd_mlp", {"S": 1, "H": 130, "I": 300, "r": 70}),
        ("dense_mlp", {"S": 200, "H": 260, "I": 640}),
    ],
)
@pytest.mark.parametrize("dtype", ["bfloat16", "float32"])
def test_beta1_and_beta2_agree(family: str, shape: dict[str, int], dtype: str) -> None:
    _agree(family, shape, dtype, 7, {})


def test_beta2_costs_what_beta1_costs_for_the_same_plan() -> None:
    """One plan, two emitters: the same instructions, bytes and modelled latency (cost-only, small shape)."""
    shape = {"S": 512, "H": 2048, "r": 1024, "N": 4096}
    b1, b2 = registry.get("xuv_fused"), registry.get("xuv_fused_b2")
    r1, r2 = b1.estimate(shape), b2.estimate(shape)
    assert r2.instructions == r1.instructions
    assert (r2.hbm_read_bytes, r2.hbm_write_bytes) == (r1.hbm_read_bytes, r1.hbm_write_bytes)
    assert r2.engine_busy_us == pytest.approx(r1.engine_busy_us)
    assert r2.latency_us == pytest.approx(r1.latency_us, rel=0.01)


# ---- LNC 2 and the trn2 plan -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name,shape,blocks",
    [
        ("xuv_fused_b2", {"S": 300, "H": 200, "r": 150, "N": 600}, {"block_tokens": 128}),
        ("xuv_fused_t_b2", {"S": 700, "H": 130, "r": 100, "N": 300}, {"block_tokens": 256}),
        ("xtuv_fused_b2", {"S": 1, "H": 130, "r": 100, "N": 300}, {}),
        ("svd_mlp_b2", {"S": 300, "H": 130, "I": 300, "r": 70}, {"block_tokens": 128}),
    ],
)
def test_lnc2_launch_splits_tokens_and_matches_lnc1(
    name: str, shape: dict[str, int], blocks: dict[str, int]
) -> None:
    spec = registry.get(name)
    inputs = spec.make_inputs(shape, "bfloat16", 5)
    k = spec.kernel_object()
    one = devkit.simulate(k, *inputs, target="trn2", **blocks)
    two = devkit.simulate(k[2], *inputs, target="trn2", **blocks)
    np.testing.assert_array_equal(two, one)
    assert registry.max_error(two, spec.reference(*inputs)) <= spec.tolerance("bfloat16")


def test_lnc2_estimate_runs_each_program_on_its_own_core() -> None:
    spec = registry.get("xuv_fused_b2")
    shape = {"S": 2048, "H": 1024, "r": 512, "N": 2048}
    args = spec.arg_specs(shape, "bfloat16")
    one = estimate_launch(spec.kernel_object(), *args, lnc=1, target="trn2")
    two = estimate_launch(spec.kernel_object(), *args, lnc=2, target="trn2")
    assert len(one.programs) == 1 and len(two.programs) == 2
    assert one.latency_us == pytest.approx(spec.estimate(shape, target="trn2").latency_us)
    # two token blocks each: the work is split evenly and nothing is duplicated
    assert two.programs[0].instructions == two.programs[1].instructions
    assert sum(p.instructions for p in two.programs) == one.programs[0].instructions
    assert sum(p.flops for p in two.programs) == one.programs[0].flops
    assert one.latency_us / 2 <= two.latency_us < 0.6 * one.latency_us


def test_estimate_launch_rejects_beta1_kernels() -> None:
    b1 = registry.get("xuv_fused")
    with pytest.raises(TypeError, match=r"NKI 0\.x"):
        estimate_launch(b1.kernel_object(), *b1.arg_specs(None, "bfloat16"))


def test_trn2_plan_uses_trn2_sbuf() -> None:
    spec = registry.get("xuv_fused_b2")
    paper = {"S": 4096, "H": 8192, "r": 4096, "N": 16384}
    on1 = spec.default_blocks(paper, "bfloat16", "trn1")
    on2 = spec.default_blocks(paper, "bfloat16", "trn2")
    assert on2["stage1_tokens"] > on1["stage1_tokens"]  # the X^T panel of a whole block fits trn2's SBUF
    f1 = spec.feasible(paper, on2, "bfloat16", "trn1")
    f2 = spec.feasible(paper, on2, "bfloat16", "trn2")
    assert f2.ok and not f1.ok and "SBUF" in f1.reason


# ---- slow sweeps ------------------------------------------------------------------------------------------


@pytest.mark.slow
@settings(max_examples=40)
@given(
    s=dim(1200, (1, 127, 128, 129, 1024, 1025)),
    h=dim(700),
    r=dim(500),
    n=dim(1300, (1, 511, 512, 513, 1024)),
    dtype=st.sampled_from(DTYPES),
    name=st.sampled_from(FUSED),
    blocks=XUV_BLOCKS,
)
def test_fused_b2_sweep(
    s: int, h: int, r: int, n: int, dtype: str, name: str, blocks: dict[str, int]
) -> None:
    check(name, {"S": s, "H": h, "r": r, "N": n}, dtype, **blocks)


@pytest.mark.slow
@pytest.mark.parametrize("name", registry.names("beta2"))
def test_default_validation_shape_b2(name: str) -> None:
    spec = registry.get(name)
    for dtype in ("bfloat16", "float32"):
        res = spec.check(None, dtype)
        assert res.ok, res.message


def test_tuning_a_beta2_kernel_writes_the_family_entry(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import json

    from devkit.kernels import tuning
    from devkit.workflow import tune as tuner

    shape = {"S": 256, "H": 256, "r": 128, "N": 512}
    res = tuner.tune("xuv_fused_b2", shape, rerank=1, jobs=1)
    path = tuner.write_tuning(res, tmp_path / "tuning.json")
    assert list(json.loads(path.read_text())["kernels"]) == ["xuv_fused"]  # shared by both generations
    assert tuning.blocks_for("xuv_fused", shape, "bfloat16", "trn1", path=str(path)) == dict(res.best.blocks)
