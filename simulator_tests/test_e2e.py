"""The end-to-end estimator: JSON contract, internal consistency, provider plug-in and the disk cache."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from devkit.commands.e2e import main
from devkit.workflow import e2e
from devkit.workflow.llm import MODELS, MlpRanks

CONTRACT_KEYS = {
    "model",
    "compression",
    "rank",
    "dense_ms",
    "svd_ms",
    "speedup",
    "prefill",
    "decode",
    "mlp_share",
}


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    cache = tmp_path / "cache"
    monkeypatch.setenv("DEVKIT_CACHE_DIR", str(cache))
    monkeypatch.chdir(tmp_path)
    return cache


class CountingProvider:
    """A provider with known answers: dense 100 us + S, SVD 60 us + S; counts its calls."""

    name = "counting"
    version = "1"

    def __init__(self) -> None:
        self.calls: list[tuple] = []

    def dense_mlp_us(self, S: int, H: int, I: int, dtype: str, target: str) -> float:
        self.calls.append(("dense", S, H, I, dtype, target))
        return 100.0 + S

    def svd_mlp_us(self, S: int, H: int, I: int, ranks: MlpRanks, dtype: str, target: str) -> float:
        self.calls.append(("svd", S, H, I, tuple(ranks), dtype, target))
        return 60.0 + S


def _json(capsys: pytest.CaptureFixture[str], *argv: str) -> object:
    assert main(list(argv)) == 0
    return json.loads(capsys.readouterr().out)


def test_json_contract_and_consistency(capsys: pytest.CaptureFixture[str]) -> None:
    out = _json(capsys, "--model", "Llama-3.2-1B", "--compression", "0.2", "--json")
    assert isinstance(out, dict) and CONTRACT_KEYS <= set(out)
    assert out["model"] == "Llama-3.2-1B" and out["compression"] == 0.2
    assert out["rank"] == {"gate_proj": 1280, "up_proj": 1280, "down_proj": 1280}
    assert (out["batch"], out["context"], out["generate"], out["target"]) == (1, 32, 32, "trn1")
    assert out["speedup"] == pytest.approx(out["dense_ms"] / out["svd_ms"], rel=1e-12)
    pre, dec = out["prefill"], out["decode"]
    assert out["dense_ms"] == pytest.approx(pre["dense_ms"] + dec["dense_ms"], rel=1e-12)
    assert out["svd_ms"] == pytest.approx(pre["svd_ms"] + dec["svd_ms"], rel=1e-12)
    assert dec["steps"] == 31
    assert dec["dense_ms_per_token"] > 0 and dec["svd_ms_per_token"] > 0
    assert dec["dense_ms"] == pytest.approx(dec["dense_ms_per_token"] * 31, rel=1e-12)
    assert 0.0 < out["mlp_share"] < 1.0
    assert out["svd_ms"] < out["dense_ms"]  # 22% fewer MLP parameters and FLOPs
    assert sum(out["breakdown_ms"]["dense"].values()) == pytest.approx(out["dense_ms"], rel=1e-12)
    assert out["breakdown_ms"]["dense"]["lm_head"] == out["breakdown_ms"]["svd"]["lm_head"]


def test_all_models_table_and_json(capsys: pytest.CaptureFixture[str]) -> None:
    rows = _json(capsys, "--all", "--json")
    assert isinstance(rows, list) and len(rows) == 2 * len(MODELS)
    assert {(r["model"], r["compression"]) for r in rows} == {(m, c) for m in MODELS for c in (0.1, 0.2)}
    by = {(r["model"], r["compression"]): r for r in rows}
    for m in MODELS:  # more compression, less time; the dense baseline does not depend on the ratio
        assert by[(m, 0.2)]["svd_ms"] < by[(m, 0.1)]["svd_ms"]
        assert by[(m, 0.2)]["svd_ms"] < by[(m, 0.2)]["dense_ms"]
        assert by[(m, 0.2)]["dense_ms"] == by[(m, 0.1)]["dense_ms"]
        # at 0.1 the block-aligned rank can keep over 90 % of the MLP bytes (Llama-3.2-1B: r = 1536 keeps
        # 94 %); the two-factor kernel's extra DMA transfers (each ~1.3 us of fixed cost, DMABW) may then
        # outweigh the bytes saved, so only a real byte saving must show up as a saving in time
        cfg = MODELS[m]
        kept = (
            by[(m, 0.1)]["rank"]["up_proj"]
            * (cfg.hidden + cfg.intermediate)
            / (cfg.hidden * cfg.intermediate)
        )
        if kept < 0.9:
            assert by[(m, 0.1)]["svd_ms"] < by[(m, 0.1)]["dense_ms"], m
    assert main(["--all"]) == 0
    table = capsys.readouterr().out
    assert all(m in table for m in MODELS) and "speedup" in table


def test_unknown_model_lists_the_valid_ones(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--model", "Llama-9000"]) == 2
    err = capsys.readouterr().err
    assert "unknown model 'Llama-9000'" in err and all(m in err for m in MODELS)


@pytest.mark.parametrize(
    ("argv", "match"),
    [
        (["--model", "Qwen3-4B", "--compression", "1.0"], "compression ratio"),
        (["--model", "Qwen3-4B", "--batch", "0"], "batch"),
        (["--model", "Qwen3-4B", "--generate", "0"], "generate"),
        (["--model", "Qwen3-4B", "--provider", "magic"], "roofline"),
        (["--model", "Qwen3-4B", "--dtype", "int33"], "dtype"),
        ([], "--model"),
    ],
)
def test_bad_input_exits_2(capsys: pytest.CaptureFixture[str], argv: list[str], match: str) -> None:
    assert main(argv) == 2
    assert match in capsys.readouterr().err


def test_provider_plugs_in_and_is_called_per_distinct_shape(tmp_path: Path) -> None:
    provider = CountingProvider()
    res = e2e.estimate("Qwen3-1.7B", 0.1, provider=provider, cache=e2e.DiskCache(tmp_path / "c1"))
    c = MODELS["Qwen3-1.7B"]
    # prefill at S = 32 tokens once; every decode step at S = 1, 31 steps
    assert res.mlp_dense_ms == pytest.approx(c.layers * ((100 + 32) + 31 * (100 + 1)) / 1000)
    assert res.mlp_svd_ms == pytest.approx(c.layers * ((60 + 32) + 31 * (60 + 1)) / 1000)
    assert res.provider == "counting"
    # one call per distinct (method, S): decode steps share the S = 1 shape
    assert sorted(call[:2] for call in provider.calls) == [
        ("dense", 1),
        ("dense", 32),
        ("svd", 1),
        ("svd", 32),
    ]
    assert ("svd", 32, 2048, 6144, (1408, 1408, 1408), "bfloat16", "trn1") in provider.calls


def test_disk_cache_hit_returns_identical_results(tmp_path: Path) -> None:
    cache = e2e.DiskCache(tmp_path / "cache")
    first = CountingProvider()
    a = e2e.estimate("Llama-3.1-8B", 0.2, provider=first, cache=cache)
    assert len(first.calls) == 4
    second = CountingProvider()  # a fresh process would start like this
    b = e2e.estimate("Llama-3.1-8B", 0.2, provider=second, cache=e2e.DiskCache(tmp_path / "cache"))
    assert second.calls == []
    assert a.to_dict() == b.to_dict()
    files = list((tmp_path / "cache" / "e2e").iterdir())
    assert len(files) == 4 and all(f.suffix == ".json" and not f.name.startswith(".tmp") for f in files)
    # another target is another key
    e2e.estimate("Llama-3.1-8B", 0.2, provider=second, cache=cache, target="trn2")
    assert len(second.calls) == 4


def test_corrupt_cache_entry_is_a_miss(tmp_path: Path) -> None:
    cache = e2e.DiskCache(tmp_path / "cache")
    e2e.estimate("Llama-3.2-1B", 0.1, provider=CountingProvider(), cache=cache)
    for f in (tmp_path / "cache" / "e2e").iterdir():
        f.write_text("{truncated")
    again = CountingProvider()
    e2e.estimate("Llama-3.2-1B", 0.1, provider=again, cache=cache)
    assert len(again.calls) == 4


def test_cli_uses_the_cache_dir_from_the_environment(_isolated_cache: Path, capsys) -> None:
    first = _json(capsys, "--model", "Qwen3-8B", "--json")
    assert len(list((_isolated_cache / "e2e").glob("*.json"))) == 4
    assert _json(capsys, "--model", "Qwen3-8B", "--json") == first
    assert main(["--model", "Qwen3-8B", "--no-cache", "--generate", "3"]) == 0


def test_roofline_provider_matches_the_protocol_and_compression_only_ratio() -> None:
    roof = e2e.RooflineMlpCost()
    assert isinstance(roof, e2e.MlpCostProvider)
    c = MODELS["Llama-3.2-1B"]
    dense = roof.dense_mlp_us(1, c.hidden, c.intermediate, "bfloat16", "trn1")
    svd = roof.svd_mlp_us(1, c.hidden, c.intermediate, MlpRanks(1280, 1280, 1280), "bfloat16", "trn1")
    # decode is weight streaming: time follows the parameter count (minus the fixed launch cost)
    overhead = 2 * e2e.Efficiencies().op_overhead_us
    ratio = 1280 * (c.hidden + c.intermediate) / (c.hidden * c.intermediate)
    assert (svd - overhead) / (dense - overhead) == pytest.approx(ratio, rel=0.01)
    # trn2 has less HBM bandwidth per core than trn1 (362 vs 410 GB/s): weight streaming is slower
    assert roof.dense_mlp_us(1, c.hidden, c.intermediate, "bfloat16", "trn2") > dense


def test_generate_one_means_prefill_only() -> None:
    res = e2e.estimate("Qwen3-4B", 0.2, generate=1, cache=False)
    assert res.decode_steps == 0 and res.decode_dense_ms == 0.0
    assert res.dense_ms == res.prefill_dense_ms
    assert res.decode_dense_ms_per_token > 0 and res.decode_svd_ms_per_token > 0


# --- --baseline: the measured NeuronMM stack -------------------------------------------------------


def test_baseline_reproduces_the_published_measurements_at_its_calibration_point() -> None:
    m = e2e.measured_stack()
    assert (m["model"], m["compression"], m["target"]) == ("Llama-3.2-1B", 0.2, "trn1")
    for provider in (e2e.RooflineMlpCost(), None):
        r = e2e.estimate(m["model"], m["compression"], provider=provider, cache=False, baseline=True)
        b = r.baseline
        assert b["prefill"]["dense_ms"] == pytest.approx(m["dense"]["cte_ms"], rel=1e-9)
        assert b["prefill"]["svd_ms"] == pytest.approx(m["svd"]["cte_ms"], rel=1e-9)
        assert b["decode"]["dense_ms_per_token"] == pytest.approx(m["dense"]["tkg_ms_per_step"], rel=1e-9)
        assert b["decode"]["svd_ms_per_token"] == pytest.approx(m["svd"]["tkg_ms_per_step"], rel=1e-9)
        # what the bytes allow is far below what the measured stack shows
        assert r.decode_dense_ms_per_token / r.decode_svd_ms_per_token < 1.2 < b["speedup"]
        assert all(0 < v < 1 for v in b["efficiency"].values())


def test_baseline_applies_the_same_efficiencies_to_another_model() -> None:
    roof = e2e.RooflineMlpCost()
    a = e2e.estimate("Llama-3.2-1B", 0.2, provider=roof, cache=False, baseline=True)
    b = e2e.estimate("Qwen3-4B", 0.1, provider=roof, cache=False, baseline=True)
    assert a.baseline["efficiency"] == b.baseline["efficiency"]
    eff = b.baseline["efficiency"]
    rest = b.decode_svd_ms_per_token - (b.mlp_svd_ms - b.prefill_mlp_svd_ms) / b.decode_steps
    mlp_dense = (b.mlp_dense_ms - b.prefill_mlp_dense_ms) / b.decode_steps
    expected = rest / eff["decode_rest"] + mlp_dense / eff["decode_dense_mlp"]
    assert b.baseline["decode"]["dense_ms_per_token"] == pytest.approx(expected, rel=1e-9)
    assert "baseline" not in e2e.estimate("Qwen3-4B", 0.1, provider=roof, cache=False).to_dict()


def test_cli_baseline_json_and_table(capsys: pytest.CaptureFixture[str]) -> None:
    out = _json(capsys, "--model", "Llama-3.2-1B", "--provider", "roofline", "--baseline", "--json")
    assert out["baseline"]["decode"]["svd_ms_per_token"] == pytest.approx(26.10)
    assert main(["--model", "Llama-3.2-1B", "--provider", "roofline", "--baseline"]) == 0
    assert "stack: decode per token" in capsys.readouterr().out
