"""Property tests of the dense and fused X.U.V kernels against their NumPy references (simulator).

Shapes are drawn small (the simulator executes every instruction) but always include the edges the
contract names: S = 1 (decode), non-multiples of 128 / 512, one-element dimensions, and block sizes
small enough that every loop runs several iterations plus a ragged remainder.  Heavier sweeps are
marked ``slow``.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from _kernel_checks import (
    BASELINE_SHAPES,
    OPTIMIZED_BLOCKS,
    OPTIMIZED_SHAPES,
    SEQUENTIAL_SHAPES,
    XUV_BLOCKS,
    XUV_OR_DEFAULT_BLOCKS,
    arg_specs,
    assert_rejected_before_running,
    check,
    dense_shapes,
    dim,
    fused_shapes,
    reference_property,
    trace_cost_only,
)
from hypothesis import given, settings
from hypothesis import strategies as st

import devkit
from devkit.kernels import plans, registry
from devkit.kernels.neuronmm import xtuv_fused, xuv_fused, xuv_fused_t, xuv_sequential
from devkit.sim.options import SimOptions

DTYPES = ["bfloat16", "float32"]


# ---- dense matmuls --------------------------------------------------------------------------------


BASELINES = ["matmul_tiled", "matmul_hoisted", "matmul_blocked"]
test_dense_baselines_match_reference = reference_property(
    BASELINES, BASELINE_SHAPES, max_examples=15, dtypes=DTYPES
)
test_matmul_optimized_matches_reference = reference_property(
    ["matmul_optimized"], OPTIMIZED_SHAPES, max_examples=25, dtypes=DTYPES, blocks=OPTIMIZED_BLOCKS
)


@pytest.mark.parametrize("generation", ["beta1", "beta2"])
def test_matmul_optimized_streams_the_panel_when_it_cannot_fit(generation: str) -> None:
    # K = 96K rows: a 128-column bf16 panel alone needs 192 KiB per partition > 176 KiB usable
    plan = plans.resolve_matmul(96 * 1024, 128, 64, 2, 180224, {}, {})
    assert plan.mode == "stream" and plan.fits
    # the streaming path itself, on a small shape forced into it through a tiny usable size
    rng = np.random.default_rng(3)
    a = rng.standard_normal((300, 200)).astype(np.float32)
    b = rng.standard_normal((300, 70)).astype(np.float32)
    small = plans.resolve_matmul(300, 200, 70, 4, 3000, {}, {})
    assert small.mode == "stream"
    if generation == "beta1":
        import neuronxcc.nki as nki
        import neuronxcc.nki.language as nl

        from devkit.kernels.matmul import matmul_into
    else:
        import nki
        import nki.language as nl

        from devkit.kernels.beta2.matmul import matmul_into

    @nki.jit
    def streamed(lhsT, rhs):  # type: ignore[no-untyped-def]
        out = nl.ndarray((lhsT.shape[1], rhs.shape[1]), dtype=lhsT.dtype, buffer=nl.shared_hbm)
        matmul_into(out, lhsT, rhs, small)
        return out

    out = devkit.simulate(streamed, a, b)
    np.testing.assert_allclose(out, a.T @ b, rtol=1e-4, atol=1e-4)


# ---- fused X.U.V ----------------------------------------------------------------------------------


test_fused_xuv_matches_reference = reference_property(
    ["xuv_fused", "xuv_fused_t", "xtuv_fused"],
    fused_shapes(700),
    max_examples=40,
    dtypes=DTYPES,
    blocks=XUV_OR_DEFAULT_BLOCKS,
)


@pytest.mark.parametrize("name", ["xuv_fused", "xuv_fused_t", "xtuv_fused", "xuv_sequential"])
@pytest.mark.parametrize("dtype", ["bfloat16", "float32"])
def test_decode_single_token(name: str, dtype: str) -> None:
    check(name, {"S": 1, "H": 384, "r": 200, "N": 4500}, dtype)  # > 8 banks of columns


test_xuv_sequential_matches_reference = reference_property(
    ["xuv_sequential"], SEQUENTIAL_SHAPES, max_examples=10, dtypes=DTYPES
)


def test_float16_inputs_give_float16_outputs() -> None:
    check("xuv_fused", {"S": 200, "H": 130, "r": 70, "N": 300}, "float16")
    check("matmul_optimized", {"K": 130, "M": 70, "N": 300}, "float16")


def test_fused_kernels_agree_with_each_other() -> None:
    spec = registry.get("xuv_fused")
    x, u, v = spec.make_inputs({"S": 300, "H": 200, "r": 150, "N": 400}, "float32", seed=7)
    a = devkit.simulate(xuv_fused, x, u, v, block_tokens=256, stage1_tokens=128)
    b = devkit.simulate(xuv_fused_t, x, u, v, block_tokens=256, stage1_tokens=128)
    c = devkit.simulate(xtuv_fused, np.ascontiguousarray(x.T), u, v, block_tokens=256)
    d = devkit.simulate(xuv_sequential, x, u, v)
    np.testing.assert_allclose(a, b.T, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(a, c, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(a, d, rtol=1e-4, atol=1e-4)


def test_shuffled_affine_order_gives_the_same_result() -> None:
    spec = registry.get("xuv_fused_t")
    x, u, v = spec.make_inputs({"S": 300, "H": 260, "r": 140, "N": 520}, "float32", seed=1)
    ref = devkit.simulate(xuv_fused_t, x, u, v, block_tokens=128)
    shuffled = devkit.simulate(
        xuv_fused_t, x, u, v, block_tokens=128, options=SimOptions(affine_order="shuffled", seed=5)
    )
    np.testing.assert_array_equal(ref, shuffled)


# ---- structure: what the kernels move and how they use the TensorE ----------------------------------


@pytest.mark.parametrize("s_tok,block", [(1, 1024), (300, 128), (1000, 512)])
def test_weights_stream_once_per_token_block_and_xu_never_touches_hbm(s_tok: int, block: int) -> None:
    h, r, n, item = 512, 256, 1024, 2
    rep = devkit.estimate(
        xuv_fused, *arg_specs([(s_tok, h), (h, r), (r, n)]), block_tokens=block, stage1_tokens=min(block, 512)
    )
    blocks = -(-s_tok // block)
    assert rep.hbm_read_bytes == (s_tok * h + blocks * (h * r + r * n)) * item
    assert rep.hbm_write_bytes == s_tok * n * item


def test_sequential_baseline_round_trips_through_hbm() -> None:
    s_tok, h, r, n, item = 256, 512, 256, 1024, 2
    rep = devkit.estimate(xuv_sequential, *arg_specs([(s_tok, h), (h, r), (r, n)]))
    fused = devkit.estimate(xuv_fused, *arg_specs([(s_tok, h), (h, r), (r, n)]))
    # x^T, XU and (XU)^T are written and read back: strictly more traffic than the fused kernel
    assert rep.hbm_write_bytes == (s_tok * n + h * s_tok + 2 * s_tok * r) * item
    assert rep.hbm_read_bytes > fused.hbm_read_bytes


def test_decode_path_streams_weights_as_the_moving_operand() -> None:
    h, r, n = 1024, 512, 2048
    tr = trace_cost_only(xuv_fused, arg_specs([(1, h), (h, r), (r, n)]))
    mms = [i for i in tr.instrs if i.opcode == "nc_matmul"]
    assert mms
    # every weight matmul moves 512 weight columns past a 1-token stationary tile
    assert all(i.attrs["moving_free"] == 512 and i.attrs["stationary_free"] == 1 for i in mms)


def test_prefill_accumulates_whole_contractions_in_psum() -> None:
    h, r, n = 640, 384, 1024
    tr = trace_cost_only(xuv_fused, arg_specs([(512, h), (h, r), (r, n)]), {"block_tokens": 512})
    mms = [i for i in tr.instrs if i.opcode == "nc_matmul"]
    opened = sum(1 for i in mms if not i.attrs["accumulate"])
    evac = [
        i for i in tr.instrs if i.engine in ("vector", "scalar") and any(a.buffer == "psum" for a in i.ins)
    ]
    # one overwriting matmul per PSUM accumulator, one evacuation per accumulator (+ transposes of X)
    stage1_banks = (r // 128) * 1
    stage2_banks = (512 // 128) * (n // 512)
    x_transpose_banks = (512 // 128) * (h // 512 + (1 if h % 512 else 0))
    assert opened == stage1_banks + stage2_banks
    assert len(evac) == stage1_banks + stage2_banks + x_transpose_banks
    # no vector adds into SBUF accumulators, no memsets
    assert not [i for i in tr.instrs if i.opcode in ("tensor_tensor", "memset")]


# ---- infeasible blocks are rejected before anything runs ----------------------------------------------


@pytest.mark.parametrize(
    "name,shapes,blocks,limit",
    [
        (
            name,
            [(4096, 8192), (8192, 4096), (4096, 1024)],
            {"block_tokens": 4096, "stage1_tokens": 4096},
            "SBUF",
        )
        for name in ("xuv_fused", "xuv_fused_b2")
    ]
    + [
        (name, [(256, 256), (256, 128), (128, 256)], {"psum_banks": 9}, "PSUM")
        for name in ("xuv_fused_t", "xuv_fused_t_b2")
    ]
    + [
        (name, [(256, 256), (256, 128), (128, 256)], {"u_chunk_tiles": 0}, "positive int")
        for name in ("xtuv_fused", "xtuv_fused_b2")
    ]
    + [
        ("matmul_optimized", [(65536, 1024), (65536, 512)], {"block_m": 1024, "k_chunk_tiles": 64}, "SBUF"),
    ]
    + [
        (name, [(256, 256), (256, 512)], {"psum_banks": 16}, "PSUM")
        for name in ("matmul_optimized", "matmul_optimized_b2")
    ],
)
def test_infeasible_blocks_raise_before_running(name, shapes, blocks, limit) -> None:  # type: ignore[no-untyped-def]
    kernel = registry.get(name).kernel_object()
    info = assert_rejected_before_running(kernel, arg_specs(shapes), blocks, limit)
    assert not isinstance(info.value, devkit.KernelError)


@pytest.mark.parametrize("suffix", ["", "_b2"], ids=["beta1", "beta2"])
def test_bad_inputs_are_rejected_with_a_clear_error(suffix: str) -> None:
    def kernel(name: str):  # type: ignore[no-untyped-def]
        return registry.get(name + suffix).kernel_object()

    x = np.zeros((4, 8), np.float32)
    with pytest.raises(plans.BlockError, match="dtype"):
        devkit.simulate(
            kernel("xuv_fused"), x, np.zeros((8, 4), ml_dtypes.bfloat16), np.zeros((4, 3), np.float32)
        )
    with pytest.raises(plans.BlockError, match="shape mismatch"):
        devkit.simulate(kernel("xuv_fused"), x, np.zeros((9, 4), np.float32), np.zeros((4, 3), np.float32))
    with pytest.raises(plans.BlockError, match="contraction"):
        devkit.simulate(kernel("matmul_tiled"), x, np.zeros((5, 3), np.float32))
    with pytest.raises(plans.BlockError, match="SBUF"):
        big = [np.zeros(s, np.float32) for s in ((100_000, 2), (100_000, 2))]
        devkit.simulate(kernel("matmul_hoisted"), *big)


# ---- slow sweeps ---------------------------------------------------------------------------------------


@pytest.mark.slow
@settings(max_examples=40)
@given(
    s=dim(1500, (1, 2, 127, 128, 129, 512, 513, 1024, 1025)),
    h=dim(700),
    r=dim(600),
    n=dim(1600, (1, 511, 512, 513, 1025)),
    dtype=st.sampled_from(DTYPES),
    name=st.sampled_from(["xuv_fused", "xuv_fused_t", "xtuv_fused", "xuv_sequential"]),
    blocks=XUV_BLOCKS,
    default_blocks=st.booleans(),
)
def test_fused_xuv_sweep(
    s: int, h: int, r: int, n: int, dtype: str, name: str, blocks: dict[str, int], default_blocks: bool
) -> None:
    use = {} if (default_blocks or name == "xuv_sequential") else blocks
    check(name, {"S": s, "H": h, "r": r, "N": n}, dtype, **use)


@pytest.mark.slow
@settings(max_examples=30)
@given(
    shape=dense_shapes(1200, 1200, 1600),
    dtype=st.sampled_from(DTYPES),
    name=st.sampled_from(["matmul_tiled", "matmul_hoisted", "matmul_blocked", "matmul_optimized"]),
)
def test_dense_sweep(shape: dict[str, int], dtype: str, name: str) -> None:
    check(name, shape, dtype)


@pytest.mark.slow
@pytest.mark.parametrize(
    "name", ["matmul_optimized", "xuv_fused", "xuv_fused_t", "xtuv_fused", "xuv_sequential"]
)
def test_default_validation_shape(name: str) -> None:
    res = registry.validate(name)
    assert res.ok, res
