"""Property tests of the SVD and dense SwiGLU MLP kernels against their NumPy references (simulator)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import devkit
from devkit.kernels import plans, registry
from devkit.kernels.mlp import dense_mlp, svd_mlp
from devkit.nki.runner import run_kernel
from devkit.sim.options import SimOptions
from devkit.trace import Trace

DTYPES = st.sampled_from(["bfloat16", "float32"])


def dim(hi: int, edges: tuple[int, ...] = (1, 127, 128, 129)) -> st.SearchStrategy[int]:
    return st.one_of(st.sampled_from([e for e in edges if e <= hi]), st.integers(1, hi))


BLOCKS = st.fixed_dictionaries(
    {
        "block_tokens": st.sampled_from([128, 256, 384]),
        "stage1_tokens": st.sampled_from([128, 256]),
        "u_chunk_tiles": st.sampled_from([1, 2, 3]),
        "v_chunk_tiles": st.sampled_from([1, 2, 3]),
        "psum_banks": st.sampled_from([2, 4, 8]),
    }
)


def _check(name: str, inputs: tuple[np.ndarray, ...], dtype: str, **blocks: int) -> None:
    spec = registry.get(name)
    out = devkit.simulate(spec.kernel_object(), *inputs, **blocks)
    assert out.dtype == inputs[0].dtype
    err = registry.max_error(out, spec.reference(*inputs))
    assert err <= spec.tolerance(dtype), (
        f"{name} {[a.shape for a in inputs]} {dtype} {blocks}: error {err:.3e}"
    )


@settings(max_examples=15)
@given(
    s=dim(600, (1, 2, 128, 129, 513)),
    h=dim(300),
    i=dim(600, (1, 511, 512, 513)),
    r=dim(200),
    dtype=DTYPES,
    blocks=BLOCKS,
    default_blocks=st.booleans(),
)
def test_svd_mlp_matches_reference(
    s: int, h: int, i: int, r: int, dtype: str, blocks: dict[str, int], default_blocks: bool
) -> None:
    spec = registry.get("svd_mlp")
    inputs = spec.make_inputs({"S": s, "H": h, "I": i, "r": r}, dtype, seed=s)
    _check("svd_mlp", inputs, dtype, **({} if default_blocks else blocks))


@settings(max_examples=8)
@given(
    s=dim(400, (1, 3, 129, 300)), h=dim(200), i=dim(400), rg=dim(150), ru=dim(150), rd=dim(150), dtype=DTYPES
)
def test_svd_mlp_with_unequal_ranks(s: int, h: int, i: int, rg: int, ru: int, rd: int, dtype: str) -> None:
    rng = np.random.default_rng(s + rg)
    dt = registry.DTYPES[dtype]
    shapes = [(s, h), (h, rg), (rg, i), (h, ru), (ru, i), (i, rd), (rd, h)]
    inputs = tuple((rng.standard_normal(sh) / np.sqrt(sh[0])).astype(np.float32).astype(dt) for sh in shapes)
    _check("svd_mlp", inputs, dtype, block_tokens=256, stage1_tokens=128)


@settings(max_examples=12)
@given(
    s=dim(600, (1, 2, 128, 129, 513)),
    h=dim(300),
    i=dim(700, (1, 511, 512, 513)),
    dtype=DTYPES,
    block_tokens=st.sampled_from([None, 128, 256, 384]),
    k_chunk_tiles=st.sampled_from([None, 1, 2, 3]),
    psum_banks=st.sampled_from([None, 2, 4, 8]),
)
def test_dense_mlp_matches_reference(
    s: int,
    h: int,
    i: int,
    dtype: str,
    block_tokens: int | None,
    k_chunk_tiles: int | None,
    psum_banks: int | None,
) -> None:
    spec = registry.get("dense_mlp")
    inputs = spec.make_inputs({"S": s, "H": h, "I": i}, dtype, seed=i)
    blocks = {
        k: v
        for k, v in dict(
            block_tokens=block_tokens, k_chunk_tiles=k_chunk_tiles, psum_banks=psum_banks
        ).items()
        if v is not None
    }
    _check("dense_mlp", inputs, dtype, **blocks)


@pytest.mark.parametrize("dtype", ["bfloat16", "float32"])
def test_mlps_decode_single_token(dtype: str) -> None:
    spec = registry.get("svd_mlp")
    _check("svd_mlp", spec.make_inputs({"S": 1, "H": 256, "I": 4500, "r": 128}, dtype), dtype)
    spec = registry.get("dense_mlp")
    _check("dense_mlp", spec.make_inputs({"S": 1, "H": 256, "I": 4500}, dtype), dtype)


def test_svd_mlp_activation_crosses_hbm_transposed_once() -> None:
    """The gate/up pass writes act^T [I, S] once and the down pass reads it once (no transpose pass)."""
    import ml_dtypes

    from devkit.nki import typing as nt

    s, h, i, r = 512, 256, 1024, 128
    spec = registry.get("svd_mlp")
    specs = [
        nt.tensor[list(sh), ml_dtypes.bfloat16] for sh in spec.arg_shapes({"S": s, "H": h, "I": i, "r": r})
    ]
    rep = devkit.estimate(svd_mlp, *specs, block_tokens=512, stage1_tokens=512)
    item = 2
    weights = (2 * (h * r + r * i) + i * r + r * h) * item
    assert rep.hbm_write_bytes == (s * h + i * s) * item  # the output and act^T, nothing else
    assert rep.hbm_read_bytes == s * h * item + weights + i * s * item
    sink = Trace()
    run_kernel(
        svd_mlp.func, tuple(specs), {"block_tokens": 512}, options=SimOptions(numerics=False), sink=sink
    )
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
    import ml_dtypes

    from devkit.nki import typing as nt

    name = "svd_mlp" if kernel is svd_mlp else "dense_mlp"
    spec = registry.get(name)
    shape = (
        {"S": 8192, "H": 4096, "I": 14336, "r": 2048}
        if name == "svd_mlp"
        else {"S": 8192, "H": 4096, "I": 14336}
    )
    specs = tuple(nt.tensor[list(sh), ml_dtypes.bfloat16] for sh in spec.arg_shapes(shape))
    sink = Trace()
    with pytest.raises(plans.BlockError, match=limit):
        run_kernel(kernel.func, specs, blocks, options=SimOptions(numerics=False), sink=sink)
    assert not sink.instrs
    assert not spec.feasible(shape, blocks).ok


@pytest.mark.slow
@pytest.mark.parametrize("name", ["svd_mlp", "dense_mlp"])
def test_mlp_default_validation_shape(name: str) -> None:
    res = registry.validate(name)
    assert res.ok, res
