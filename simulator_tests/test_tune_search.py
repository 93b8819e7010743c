"""The block-size tuner: parsing, pruning, ranking, determinism and the tuning table the kernels read."""

from __future__ import annotations

import json

import pytest

from devkit import cli
from devkit.workflow import tune as tuner

SHAPE = {"S": 256, "H": 512, "r": 256, "N": 1024}


def test_parse_shape_positional_and_named():
    params = ("S", "H", "r", "N")
    assert tuner.parse_shape("4096,8192,4096,16384", params) == {"S": 4096, "H": 8192, "r": 4096, "N": 16384}
    assert tuner.parse_shape("N=5,r=3,H=2,S=1", params) == {"S": 1, "H": 2, "r": 3, "N": 5}
    for bad, msg in (
        ("1,2,3", "expected 4"),
        ("S=1,2,3,4", "either"),
        ("S=1,H=2,r=3", "missing"),
        ("1,2,x,4", "integers"),
        ("0,2,3,4", ">= 1"),
        ("S=1,H=2,r=3,N=4,Q=5", "unknown"),
    ):
        with pytest.raises(tuner.TuneError, match=msg):
            tuner.parse_shape(bad, params)


def test_effective_blocks_merge_clamped_choices():
    a = tuner.effective_blocks(
        "xuv_fused", SHAPE, {"block_tokens": 1024, "stage1_tokens": 512, "u_chunk_tiles": 16}
    )
    b = tuner.effective_blocks(
        "xuv_fused", SHAPE, {"block_tokens": 2048, "stage1_tokens": 256, "u_chunk_tiles": 4}
    )
    assert a == b == {"block_tokens": 256, "stage1_tokens": 256, "u_chunk_tiles": 4}


def test_parse_when():
    when = tuner.parse_when(["S=128:"], SHAPE)
    assert when == {"S": [128, None], "H": [512, 512], "r": [256, 256], "N": [1024, 1024]}
    for bad in ("S=1", "Q=1:2", "S=a:b", "S=4:2"):
        with pytest.raises(tuner.TuneError):
            tuner.parse_when([bad], SHAPE)


@pytest.fixture(scope="module")
def result():
    return tuner.tune("xuv_fused", SHAPE, rerank=3, jobs=1)


def test_tune_prunes_ranks_and_never_loses_to_the_default(result):
    from devkit.kernels import registry

    spec = registry.get("xuv_fused")
    assert result.enumerated == len(spec.candidate_blocks())
    assert 0 < result.distinct <= result.feasible <= result.enumerated
    traced = [c for c in result.ranked if c.trace_us is not None]
    assert [c.trace_us for c in traced] == sorted(c.trace_us for c in traced)
    assert any(c.is_default for c in result.ranked)
    assert result.best.trace_us <= result.default_us
    for c in result.ranked:
        assert spec.feasible(SHAPE, c.blocks, "bfloat16", "trn1").ok
    # the modelled latency of the winner is what the trace model says for those blocks
    assert spec.estimate(SHAPE, "bfloat16", "trn1", result.best.blocks).latency_us == pytest.approx(
        result.best.trace_us, rel=1e-12
    )


def test_tune_is_deterministic(result):
    again = tuner.tune("xuv_fused", SHAPE, rerank=3, jobs=1)
    assert [(c.blocks, c.trace_us) for c in again.ranked] == [(c.blocks, c.trace_us) for c in result.ranked]


def test_tuning_table_is_merged_and_read_by_the_kernels(result, tmp_path, monkeypatch):
    from devkit.kernels import tuning

    path = tmp_path / "tuning.json"
    path.write_text(
        json.dumps(
            {
                "schema": 1,
                "generated_by": "hand",
                "kernels": {
                    "xuv_fused": {"*": {"*": [{"when": {}, "blocks": {"block_tokens": 512}, "note": "hand"}]}}
                },
            }
        )
    )
    tuner.write_tuning(result, path)
    tuner.write_tuning(result, path)  # idempotent: the same entry is replaced, not duplicated
    data = json.loads(path.read_text())
    entries = data["kernels"]["xuv_fused"]["trn1"]["bfloat16"]
    assert len(entries) == 1 and entries[0]["blocks"] == result.best.blocks
    assert data["kernels"]["xuv_fused"]["*"]["*"][0]["note"] == "hand"  # other entries survive
    assert tuning.blocks_for("xuv_fused", SHAPE, "bfloat16", "trn1", path=str(path)) == result.best.blocks
    assert tuning.blocks_for("xuv_fused", {**SHAPE, "S": 999}, "bfloat16", "trn1", path=str(path)) == {
        "block_tokens": 512
    }
    from devkit import tuning_table
    from devkit.kernels import registry

    monkeypatch.setattr(tuning_table, "project_table", lambda: str(path))  # the project's table wins

    assert registry.get("xuv_fused").default_blocks(SHAPE, "bfloat16", "trn1") == result.best.blocks


def test_tune_errors_are_values():
    with pytest.raises(tuner.TuneError, match="no block parameters"):
        tuner.tune("xuv_sequential", SHAPE)
    with pytest.raises(tuner.TuneError, match="unknown kernel"):
        tuner.tune("nope", SHAPE)
    with pytest.raises(tuner.TuneError, match="dtypes"):
        tuner.tune("xuv_fused", SHAPE, dtype="float8_e4m3")


def test_cli_no_write_prints_the_top(capsys, tmp_path):
    path = tmp_path / "t.json"
    code = cli.main(
        [
            "tune",
            "xuv_fused",
            "--shape",
            "S=256,H=512,r=256,N=1024",
            "--top",
            "2",
            "--rerank",
            "2",
            "--jobs",
            "1",
            "--tuning-file",
            str(path),
            "--no-write",
        ]
    )
    assert code == 0
    out = capsys.readouterr().out
    assert "re-ranked" in out and "default blocks" in out
    assert not path.exists()
    assert cli.main(["tune", "xuv_fused", "--shape", "1,2,3"]) == 2
    assert "expected 4" in capsys.readouterr().err


# --- kernels without a closed-form model (no ``movement`` hook) ------------------------------------------

WIDE = """
import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import numpy as np

import devkit


@devkit.declare_kernel(
    reference=lambda x: (2.0 * x.astype(np.float32)).astype(x.dtype),
    arg_shapes=lambda s: [(s["R"], s["N"])],
    default_shape={"R": 128, "N": 4096},
    dtypes=("float32",),
    block_params={"cols": (64, 128, 256, 512), "copies": (1, 2, 4, 8)},
    constraint=lambda s, c, d, t: s["N"] % (c["cols"] * c["copies"]) == 0 or "tile does not divide N",
)
@nki.jit
def wide(x, cols=64, copies=1):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    tile = cols * copies
    for j in nl.affine_range(x.shape[1] // tile):
        t = nl.load(x[:, j * tile:(j + 1) * tile])
        nl.store(out[:, j * tile:(j + 1) * tile], value=nl.multiply(t, 2.0))
    return out
"""
WIDE_SHAPE = {"R": 128, "N": 4096}


@pytest.fixture
def wide(tmp_path):
    path = tmp_path / "wide.py"
    path.write_text(WIDE)
    return f"{path}:wide"


def test_tune_without_a_closed_form_traces_a_small_space_whole(wide):
    from devkit.workflow import catalog

    spec = catalog.get(wide)
    phases = set()
    result = tuner.tune(wide, WIDE_SHAPE, dtype="float32", jobs=1, progress=lambda p, d, t: phases.add(p))
    every = {tuple(b.values()): spec.estimate(WIDE_SHAPE, "float32", "trn1", b).latency_us
             for b in spec.candidate_blocks()}  # fmt: skip
    optimum = min(every, key=every.get)
    assert tuple(result.best.blocks.values()) == optimum and result.best.trace_us == pytest.approx(
        every[optimum]
    )
    assert len(result.ranked) == result.distinct == len(every) == 16
    # outside the default's neighbourhood: two parameters away from (64, 1), past the first 8 re-ranked
    # configs of a closed-form tie broken toward the default
    assert tuner.distance(result.best.blocks, result.default_blocks) == 2
    by_nearness = sorted(spec.candidate_blocks(), key=lambda b: tuner.distance(b, result.default_blocks))
    assert by_nearness.index(result.best.blocks) >= 8
    assert phases == {"prune + closed form", "trace model: all 16 configs"}


def test_tune_without_a_closed_form_samples_then_climbs_a_larger_space(wide):
    phases = []
    result = tuner.tune(wide, WIDE_SHAPE, dtype="float32", jobs=1, exhaustive=3, sample=2,
                        progress=lambda p, d, t: phases.append(p))  # fmt: skip
    assert 3 < len(result.ranked) <= tuner.BUDGET_FACTOR * 3 < result.distinct  # a budget, not the space
    assert any(c.is_default for c in result.ranked) and result.best.trace_us < result.default_us
    assert [c.trace_us for c in result.ranked] == sorted(c.trace_us for c in result.ranked)
    assert "trace model: sample of 2 of 16" in phases
    assert "trace model: neighbours of the best 3, round 1" in phases


def test_cli_reports_each_search_round(wide, capsys):
    assert cli.main(["tune", wide, "--dtype", "float32", "--jobs", "1", "--no-write"]) == 0
    captured = capsys.readouterr()
    assert "tune: trace model: all 16 configs: 16 traced" in captured.err
    assert "'cols': 512, 'copies': 8" in captured.out  # the whole space's best is printed as the winner
