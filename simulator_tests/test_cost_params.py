"""Calibrated parameters: a small named set, with provenance, per-target overrides, round trip."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from devkit.cost.params import (
    PARAMS_PATH,
    Params,
    ParamsError,
    default_params,
    load_params,
    load_params_file,
    parse_params,
    save_params,
)
from devkit.targets import TARGETS, load_target, toml_io

ANCHOR_IDS = {
    "mmt_tiled_trn1",
    "mmt_hoist_trn1",
    "mmt_block_free_trn1",
    "mmt_fully_optimized_trn1",
    "dmaov_example1_trn2",
}


def _raw() -> dict:
    return toml_io.loads(PARAMS_PATH.read_text(encoding="utf-8"))


def test_small_named_set() -> None:
    assert len(Params.names()) <= 8
    assert set(load_params().specs) == set(Params.names())


def test_every_parameter_has_provenance() -> None:
    ps = load_params()
    anchor_ids = {a.id for a in ps.anchors}
    assert ANCHOR_IDS <= anchor_ids
    for spec in ps.specs.values():
        assert spec.unit and spec.description and spec.source, spec.name
        assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", spec.fit_date), spec.name
        assert spec.method in ("hand", "least-squares"), spec.name
        assert set(spec.fitted_from) <= anchor_ids, spec.name
        lo, hi = spec.bounds
        assert lo <= spec.value <= hi


def test_anchor_values() -> None:
    anchors = {a.id: a for a in load_params().anchors}
    assert [
        anchors[i].measured_us
        for i in ("mmt_tiled_trn1", "mmt_hoist_trn1", "mmt_block_free_trn1", "mmt_fully_optimized_trn1")
    ] == [51800.0, 42960.0, 22070.0, 6970.0]
    assert anchors["dmaov_example1_trn2"].measured_us == pytest.approx(1.416)
    assert anchors["dmaov_example1_trn2"].metric == "dma_engine_us"


def test_per_target_override() -> None:
    assert default_params("trn2").dma_descriptor_ns == 9.39
    assert default_params("trn1").dma_descriptor_ns == load_params().specs["dma_descriptor_ns"].value
    assert default_params("trn2").dma_transpose_efficiency == 0.9
    assert (
        default_params("inf2").dma_transpose_efficiency
        == load_params().specs["dma_transpose_efficiency"].value
    )


def test_descriptor_overhead_follows_each_targets_engine_bandwidth() -> None:
    """dma_descriptor_ns is the target's documented-curve overhead bytes at its engine bandwidth."""
    for name in TARGETS:
        dma = load_target(name).dma
        expected = dma.descriptor_overhead_bytes / dma.engine_bw_bytes_per_ns
        assert default_params(name).dma_descriptor_ns == pytest.approx(expected, abs=0.01), name


def test_replace_checks_names() -> None:
    p = default_params("trn1").replace(dma_descriptor_ns=5)
    assert p.dma_descriptor_ns == 5.0
    with pytest.raises(ParamsError, match="unknown parameters \\['dma_magic'\\]"):
        p.replace(dma_magic=1.0)


def test_roundtrip_preserves_sources(tmp_path: Path) -> None:
    ps = load_params()
    path = tmp_path / "params.toml"
    save_params(ps, path)
    again = load_params_file(path)
    assert again == ps
    assert path.read_text(encoding="utf-8").startswith("# Calibrated parameters")


def test_with_values_records_provenance() -> None:
    ps = load_params().with_values(
        "trn1",
        {"dma_descriptor_ns": 42.0},
        fitted_from=("a", "b"),
        fit_date="2027-01-01",
        method="least-squares",
        source="test fit",
    )
    assert ps.for_target("trn1").dma_descriptor_ns == 42.0
    assert ps.for_target("inf2").dma_descriptor_ns == load_params().specs["dma_descriptor_ns"].value
    ov = ps.overrides["trn1"]["dma_descriptor_ns"]
    assert (ov.fitted_from, ov.fit_date, ov.method) == (("a", "b"), "2027-01-01", "least-squares")
    assert ps.specs["dma_descriptor_ns"] == load_params().specs["dma_descriptor_ns"]


def test_unknown_parameter_rejected() -> None:
    data = _raw()
    data["params"]["engine_fudge"] = dict(data["params"]["dma_descriptor_ns"])
    with pytest.raises(ParamsError, match="unknown \\['engine_fudge'\\]"):
        parse_params(data)


def test_missing_parameter_rejected() -> None:
    data = _raw()
    del data["params"]["dma_fixed_latency_ns"]
    with pytest.raises(ParamsError, match="missing \\['dma_fixed_latency_ns'\\]"):
        parse_params(data)


def test_override_for_unknown_target_rejected() -> None:
    data = _raw()
    data["targets"]["trn9"] = {}
    with pytest.raises(ParamsError, match="unknown target 'trn9'"):
        parse_params(data)


def test_value_outside_bounds_rejected() -> None:
    data = _raw()
    data["params"]["dma_transpose_efficiency"]["value"] = 3.0
    with pytest.raises(ParamsError, match="outside bounds"):
        parse_params(data)


def test_parameter_without_source_rejected() -> None:
    data = _raw()
    del data["params"]["dma_descriptor_ns"]["source"]
    with pytest.raises(ParamsError, match="missing \\['source'\\]"):
        parse_params(data)
