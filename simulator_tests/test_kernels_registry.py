"""The kernel registry, the block plans and the tuning table (no long simulations)."""

from __future__ import annotations

import inspect
import json

import numpy as np
import pytest

from devkit.kernels import plans, registry, tuning

EXPECTED = {
    "matmul_tiled",
    "matmul_hoisted",
    "matmul_blocked",
    "matmul_optimized",
    "xuv_fused",
    "xuv_fused_t",
    "xtuv_fused",
    "xuv_sequential",
    "svd_mlp",
    "dense_mlp",
}


def test_every_contract_kernel_is_registered_once() -> None:
    assert set(registry.names("beta1")) == EXPECTED
    assert set(registry.names("beta2")) == {n + "_b2" for n in EXPECTED}
    assert len(registry.all_specs()) == 2 * len(EXPECTED)
    with pytest.raises(KeyError, match="registered"):
        registry.get("nope")


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_beta2_twin_shares_the_family_declaration(name: str) -> None:
    b1, b2 = registry.get(name), registry.get(name + "_b2")
    assert (b1.generation, b2.generation) == ("beta1", "beta2")
    assert b1.family == b2.family == name
    assert registry.twin(b1, "beta2") is b2 and registry.twin(b2, "beta1") is b1
    assert getattr(b2.kernel_object(), "__nki_beta2__", False), "the _b2 kernel must be an NKI 0.x kernel"
    assert not getattr(b1.kernel_object(), "__nki_beta2__", False)
    for field in (
        "default_shape",
        "tolerances",
        "shape_space",
        "block_params",
        "reference",
        "sweep",
        "dtypes",
    ):
        assert getattr(b1, field) == getattr(b2, field), field
    assert [b.name + "_b2" for b in b1.baselines] == [b.name for b in b2.baselines]
    shape = dict(b1.default_shape)
    for target in ("trn1", "trn2"):
        assert b1.default_blocks(shape, "bfloat16", target) == b2.default_blocks(shape, "bfloat16", target)
    if b1.block_params:
        blocks = {k: v[-1] for k, v in b1.block_params.items()}
        f1, f2 = (
            b1.feasible(shape, blocks, "bfloat16", "trn1"),
            b2.feasible(shape, blocks, "bfloat16", "trn1"),
        )
        assert (f1.ok, f1.footprint) == (f2.ok, f2.footprint)


@pytest.mark.parametrize("spec", registry.all_specs(), ids=lambda s: s.name)
def test_spec_is_self_consistent(spec: registry.KernelSpec) -> None:
    func = spec.kernel_object().func
    params = list(inspect.signature(func).parameters)
    shapes = spec.arg_shapes(spec.default_shape)
    assert params[: len(shapes)] == list(spec.arg_names)
    assert set(params[len(shapes) :]) == set(spec.block_params), (
        "block parameters must match the kernel kwargs"
    )
    assert set(spec.default_shape) == set(spec.shape_params)
    inputs = spec.make_inputs(spec.default_shape, "float32", seed=0)
    assert [a.shape for a in inputs] == [tuple(s) for s in shapes]
    assert all(np.isfinite(a).all() for a in inputs)
    assert [a.shape for a in spec.make_inputs(None, "bfloat16", 1)] == [tuple(s) for s in shapes]
    specs = spec.arg_specs(spec.default_shape, "bfloat16")
    assert [tuple(s.shape) for s in specs] == [tuple(s) for s in shapes]
    for dt in spec.dtypes:
        assert 0 < spec.tolerance(dt) < 0.1
    blocks = spec.default_blocks(spec.default_shape, "bfloat16", "trn1")
    assert spec.feasible(spec.default_shape, blocks, "bfloat16", "trn1").ok
    assert spec.feasible(spec.default_shape, {}, "float32", "trn2").ok


@pytest.mark.parametrize("spec", [s for s in registry.all_specs() if s.block_params], ids=lambda s: s.name)
def test_feasibility_names_the_limit(spec: registry.KernelSpec) -> None:
    big = {k: v * 16 for k, v in spec.default_shape.items()}
    name = next(iter(spec.block_params))
    huge = {n: 1 << 20 for n in spec.block_params if n != "psum_banks"}
    f = spec.feasible(big, huge, "bfloat16", "trn1")
    assert not f.ok and "SBUF" in f.reason
    f = spec.feasible(spec.default_shape, {"psum_banks": 9}, "bfloat16", "trn1")
    assert not f.ok and "PSUM" in f.reason
    f = spec.feasible(spec.default_shape, {name: 0}, "bfloat16", "trn1")
    assert not f.ok and "positive int" in f.reason
    assert not spec.feasible(spec.default_shape, {"no_such_block": 1}).ok
    # the candidate grid contains both feasible and infeasible points for a paper-scale shape
    cands = spec.candidate_blocks()
    assert cands and all(set(c) == set(spec.block_params) for c in cands)


def test_feasibility_depends_on_the_target_capacity() -> None:
    spec = registry.get("xuv_fused")
    shape = {"S": 4096, "H": 8192, "r": 4096, "N": 16384}
    blocks = {
        "block_tokens": 1024,
        "stage1_tokens": 512,
        "u_chunk_tiles": 16,
        "v_chunk_tiles": 8,
        "psum_banks": 8,
    }
    on_trn1 = spec.feasible(shape, blocks, "bfloat16", "trn1")
    on_trn2 = spec.feasible(shape, blocks, "bfloat16", "trn2")
    assert on_trn1.footprint == on_trn2.footprint > 180224
    assert not on_trn1.ok and on_trn2.ok
    assert on_trn1.usable == 180224 and on_trn2.usable == 212984


def test_blockless_kernels_reject_blocks_and_check_their_panels() -> None:
    assert not registry.get("xuv_sequential").feasible(None, {"block_tokens": 128}).ok
    hoisted = registry.get("matmul_hoisted")
    assert hoisted.feasible(None, {}).ok
    f = hoisted.feasible({"K": 1 << 20, "M": 128, "N": 128}, {})
    assert not f.ok and "SBUF" in f.reason


def test_default_blocks_follow_the_tuning_table_and_shrink_to_fit() -> None:
    spec = registry.get("xuv_fused")
    small = spec.default_blocks({"S": 1, "H": 8192, "r": 4096, "N": 16384}, "bfloat16")
    assert spec.feasible({"S": 1, "H": 8192, "r": 4096, "N": 16384}, small).ok
    wide = spec.default_blocks({"S": 4096, "H": 65536, "r": 4096, "N": 4096}, "bfloat16")
    assert wide["stage1_tokens"] < 512  # a 512-token X^T panel of H = 64K would not fit
    assert spec.feasible({"S": 4096, "H": 65536, "r": 4096, "N": 4096}, wide).ok


def test_tuning_lookup_buckets_and_fallbacks(tmp_path) -> None:  # type: ignore[no-untyped-def]
    table = {
        "schema": 1,
        "kernels": {
            "xuv_fused": {
                "trn1": {
                    "bfloat16": [
                        {"when": {"S": [1, 128]}, "blocks": {"u_chunk_tiles": 2}},
                        {"when": {"S": [129, None], "H": [None, 4096]}, "blocks": {"block_tokens": 512}},
                    ]
                },
                "*": {"*": [{"blocks": {"psum_banks": 4}}]},
            }
        },
    }
    path = tmp_path / "tuning.json"
    path.write_text(json.dumps(table))
    p = str(path)
    assert tuning.blocks_for("xuv_fused", {"S": 1, "H": 8192}, "bfloat16", "trn1", p) == {"u_chunk_tiles": 2}
    assert tuning.blocks_for("xuv_fused", {"S": 999, "H": 4096}, "bfloat16", "trn1", p) == {
        "block_tokens": 512
    }
    assert tuning.blocks_for("xuv_fused", {"S": 999, "H": 8192}, "bfloat16", "trn1", p) == {"psum_banks": 4}
    assert tuning.blocks_for("xuv_fused", {"S": 1}, "float32", "trn2", p) == {"psum_banks": 4}
    assert tuning.blocks_for("matmul_optimized", {"K": 1}, "bfloat16", "trn1", p) == {}
    path.write_text(json.dumps({"schema": 99, "kernels": {}}))
    with pytest.raises(ValueError, match="schema"):
        tuning.load(p)


def test_shipped_tuning_table_is_valid() -> None:
    data = tuning.load()
    assert data["schema"] == tuning.SCHEMA
    for kernel, by_target in data["kernels"].items():
        spec = registry.get(kernel)
        for by_dtype in by_target.values():
            for entries in by_dtype.values():
                for entry in entries:
                    assert set(entry["blocks"]) <= set(spec.block_params), (kernel, entry)
                    assert set(entry.get("when", {})) <= set(spec.shape_params), (kernel, entry)


def test_max_error_detects_wrong_outputs() -> None:
    ref = np.linspace(-1, 1, 64, dtype=np.float32).reshape(8, 8)
    assert registry.max_error(ref, ref) == 0.0
    bad = ref.copy()
    bad[3, 4] += 0.5
    assert registry.max_error(bad, ref) == pytest.approx(0.5)
    bad[0, 0] = np.nan
    assert registry.max_error(bad, ref) == float("inf")
    with pytest.raises(ValueError, match="shape"):
        registry.max_error(ref.T[:4], ref)


def test_references_agree_with_float64_math() -> None:
    spec = registry.get("svd_mlp")
    x, ug, vg, uu, vu, ud, vd = spec.make_inputs({"S": 5, "H": 16, "I": 24, "r": 8}, "float32", seed=2)
    d = [a.astype(np.float64) for a in (x, ug, vg, uu, vu, ud, vd)]
    g = d[0] @ d[1] @ d[2]
    up = d[0] @ d[3] @ d[4]
    want = (g / (1 + np.exp(-g)) * up) @ d[5] @ d[6]
    np.testing.assert_allclose(registry.ref_svd_mlp(x, ug, vg, uu, vu, ud, vd), want, rtol=1e-4, atol=1e-5)
    x, u, v = registry.get("xuv_fused").make_inputs({"S": 3, "H": 5, "r": 2, "N": 7}, "float32")
    np.testing.assert_allclose(registry.ref_xuv_t(x, u, v), (x @ u @ v).T, rtol=1e-5)


def test_plan_messages_name_the_numbers() -> None:
    with pytest.raises(plans.BlockError) as info:
        plans.resolve_xuv(
            8192, 8192, 4096, 16384, 2, 180224, {}, {"block_tokens": 4096, "stage1_tokens": 4096}
        )
    msg = str(info.value)
    assert "SBUF limit" in msg and "180224" in msg and "x_panel" in msg


def test_the_kit_kernels_are_blamed_like_any_kernel() -> None:
    """devkit/kernels/ is inside the package but is kernel code: hotspots (and faults) name its lines."""
    import os

    import devkit.kernels

    kernels_dir = os.path.dirname(devkit.kernels.__file__) + os.sep
    hot = registry.get("matmul_tiled").estimate().to_dict()["hotspots"]
    assert hot and all(h["file"].startswith(kernels_dir) for h in hot)


@pytest.mark.parametrize(
    "name", ["matmul_hoisted", "matmul_blocked", "matmul_hoisted_b2", "matmul_blocked_b2"]
)
def test_fixed_panel_limit_is_the_kernels_own(name: str) -> None:
    """The registry admits exactly the K the kernel itself accepts (largest feasible K runs, one tile
    more is refused by both), on trn2 in bf16."""
    import devkit
    from devkit.nki import typing as nt

    spec = registry.get(name)
    m, n = (128, 512) if "hoisted" in name else (256, 1024)

    def feasible(k: int) -> bool:
        return bool(spec.feasible({"K": k, "M": m, "N": n}, {}, "bfloat16", "trn2").ok)

    lo, hi = 1, 4096  # K tiles: feasible(128 * lo), not feasible(128 * hi)
    assert feasible(128 * lo) and not feasible(128 * hi)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if feasible(128 * mid) else (lo, mid)
    kernel = spec.kernel_object()

    def run(k: int) -> object:
        args = [nt.tensor[[k, m], "bfloat16"], nt.tensor[[k, n], "bfloat16"]]
        return devkit.estimate(kernel, *args, target="trn2")

    assert run(128 * lo).latency_us > 0
    with pytest.raises(Exception, match="SBUF limit") as refused:
        run(128 * hi)
    assert name in str(refused.value)
