"""Calibration: the measurements format, the minimiser, and recovery of known parameters."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from devkit.cost.calibrate import (
    Measurement,
    MeasurementError,
    anchor_measurements,
    calibrate_file,
    fit,
    load_measurements,
    log_error,
)
from devkit.cost.nelder_mead import minimize
from devkit.cost.params import PARAMS_PATH, Params, default_params, load_params, load_params_file
from devkit.cost.scheduler import schedule
from devkit.cost.trace_builder import TraceBuilder

# --- measurements file ---------------------------------------------------------------------------


def _write_lines(tmp_path: Path, lines: list[str]) -> Path:
    path = tmp_path / "measured.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_load_measurements(tmp_path: Path) -> None:
    path = _write_lines(
        tmp_path,
        [
            "# tutorial matmuls",
            json.dumps(
                {
                    "kernel": "nki_matmul_tiled_",
                    "target": "trn1",
                    "measured_us": 51800.0,
                    "shape": "lhsT[8192,4096] @ rhs[8192,8192]",
                    "dtype": "bfloat16",
                }
            ),
            "",
            json.dumps(
                {
                    "kernel": "k2",
                    "target": "trn2",
                    "p50_us": 12.5,
                    "args": {"x": "bfloat16[128,512]"},
                    "id": "k2-small",
                }
            ),
        ],
    )
    first, second = load_measurements(path)
    assert first.id == "nki_matmul_tiled_[lhsT[8192,4096] @ rhs[8192,8192]]@trn1"
    assert (first.measured_us, first.metric, first.dtype) == (51800.0, "latency_us", "bfloat16")
    assert (second.id, second.measured_us, second.args) == ("k2-small", 12.5, {"x": "bfloat16[128,512]"})


@pytest.mark.parametrize(
    ("record", "message"),
    [
        ('{"kernel": "k", "target": "trn1"}', "'measured_us' or 'p50_us' is required"),
        ('{"kernel": "k", "target": "trn1", "measured_us": -3}', "must be a positive number"),
        ('{"kernel": "k", "measured_us": 3}', "'target' (string) is required"),
        ('{"kernel": "k", "target": "trn1", "measured_us": 3, "latency": 1}', "unknown keys ['latency']"),
        ('{"kernel": "k", "target": "trn1", "measured_us": 3, "metric": "energy"}', "metric must be one of"),
        ('{"kernel": "k", "target": ', "invalid JSON"),
    ],
)
def test_bad_records_name_the_line(tmp_path: Path, record: str, message: str) -> None:
    path = _write_lines(tmp_path, ["# header", record])
    with pytest.raises(MeasurementError, match=r"measured\.jsonl:2: .*") as info:
        load_measurements(path)
    assert message in str(info.value)


def test_duplicate_ids_rejected(tmp_path: Path) -> None:
    rec = json.dumps({"kernel": "k", "target": "trn1", "measured_us": 1.0})
    with pytest.raises(MeasurementError, match="duplicate measurement ids"):
        load_measurements(_write_lines(tmp_path, [rec, rec]))


def test_anchor_measurements() -> None:
    ms = {m.id: m for m in anchor_measurements(load_params())}
    assert ms["mmt_fully_optimized_trn1"].measured_us == 6970.0
    assert ms["dmaov_example1_trn2"].target == "trn2"


def test_log_error() -> None:
    ms = [Measurement("a", "trn1", 100.0), Measurement("b", "trn1", 10.0)]
    assert log_error(ms, {"a@trn1": 100.0, "b@trn1": 10.0}) == 0.0
    assert log_error(ms, {"a@trn1": 100.0 * 2.718281828459045, "b@trn1": 10.0}) == pytest.approx(0.5)
    with pytest.raises(MeasurementError, match="prediction missing"):
        log_error(ms, {"a@trn1": 1.0})


# --- minimiser -----------------------------------------------------------------------------------


def test_nelder_mead_finds_a_box_minimum_deterministically() -> None:
    def f(x: list[float]) -> float:
        return (x[0] - 0.3) ** 2 + 3 * (x[1] - 0.8) ** 2 + (x[2] - 0.55) ** 2

    a = minimize(f, [0.5, 0.5, 0.5])
    b = minimize(f, [0.5, 0.5, 0.5])
    assert a == b
    assert a.x == pytest.approx((0.3, 0.8, 0.55), abs=1e-3)


def test_nelder_mead_respects_the_box() -> None:
    best = minimize(lambda x: (x[0] + 1.0) ** 2 + (x[1] - 2.0) ** 2, [0.5, 0.5])
    assert best.x == pytest.approx((0.0, 1.0), abs=1e-6)


# --- recovering known parameters -----------------------------------------------------------------


def _programs() -> dict[str, TraceBuilder]:
    """Small DMA programs, each sensitive to a different mix of the DMA parameters."""
    queue_bound = TraceBuilder("queue_bound")
    for _ in range(40):
        queue_bound.dma(partitions=128, bytes_per_partition=256, line=1)
    descriptor_bound = TraceBuilder("descriptor_bound")
    for q in range(16):
        descriptor_bound.dma(partitions=128, bytes_per_partition=4096, run_bytes=64, queue=f"q{q}")
    single = TraceBuilder("single")
    single.dma(partitions=128, bytes_per_partition=8192)
    chain = TraceBuilder("chain")
    prev = None
    for _ in range(10):
        prev = chain.dma(partitions=8, bytes_per_partition=512, deps=[] if prev is None else [prev], line=2)
    return {
        "queue_bound": queue_bound,
        "descriptor_bound": descriptor_bound,
        "single": single,
        "chain": chain,
    }


def _predict(params: Params) -> dict[str, float]:
    return {
        f"{name}@trn1": schedule(b.instrs, "trn1", params=params).latency_us
        for name, b in _programs().items()
    }


TRUE = default_params("trn1").replace(
    dma_descriptor_ns=35.0, dma_fixed_latency_ns=700.0, dma_queue_busy_ns=900.0
)
NAMES = ("dma_descriptor_ns", "dma_fixed_latency_ns", "dma_queue_busy_ns")


def test_fit_recovers_known_parameters() -> None:
    measurements = [
        Measurement(kernel=k.split("@")[0], target="trn1", measured_us=v) for k, v in _predict(TRUE).items()
    ]
    start = default_params("trn1")
    bounds = {n: spec.bounds for n, spec in load_params().specs.items()}
    result = fit(_predict, measurements, start, names=NAMES, bounds=bounds, max_evaluations=600)
    assert result.loss_before > 1e-2
    assert result.loss_after < 1e-8
    for name in NAMES:
        assert result.fitted[name] == pytest.approx(getattr(TRUE, name), rel=0.01), name
    assert all(r == pytest.approx(1.0, rel=1e-3) for r in result.ratios().values())


def test_fit_rejects_too_many_parameters() -> None:
    bounds = {n: spec.bounds for n, spec in load_params().specs.items()}
    with pytest.raises(ValueError, match="fit 1 to 8 parameters"):
        fit(_predict, [Measurement("single", "trn1", 1.0)], TRUE, names=("nope",), bounds=bounds)


def test_calibrate_file_writes_params_with_provenance(tmp_path: Path) -> None:
    params_path = tmp_path / "params.toml"
    shutil.copy(PARAMS_PATH, params_path)
    lines = [
        json.dumps({"kernel": k.split("@")[0], "target": "trn1", "measured_us": v, "id": k})
        for k, v in _predict(TRUE).items()
    ]
    lines.append(json.dumps({"kernel": "other", "target": "trn2", "measured_us": 5.0}))
    meas_path = _write_lines(tmp_path, lines)
    result, updated = calibrate_file(
        meas_path,
        _predict,
        "trn1",
        names=NAMES,
        params_path=params_path,
        write=True,
        fit_date="2027-03-04",
        max_evaluations=600,
    )
    assert result.loss_after < 1e-8
    written = load_params_file(params_path)
    assert written == updated
    for name in NAMES:
        ov = written.overrides["trn1"][name]
        assert ov.value == pytest.approx(getattr(TRUE, name), rel=0.01)
        assert ov.fit_date == "2027-03-04" and ov.method == "least-squares"
        assert set(ov.fitted_from) == {f"{p}@trn1" for p in _programs()}
        assert "least-squares fit" in ov.source
    # untouched entries keep their provenance; other targets keep their values
    assert written.specs == load_params().specs
    assert written.overrides["trn2"] == load_params().overrides["trn2"]
    assert written.for_target("trn2") == default_params("trn2")


def test_calibrate_file_needs_measurements_for_the_target(tmp_path: Path) -> None:
    meas = _write_lines(tmp_path, [json.dumps({"kernel": "k", "target": "trn2", "measured_us": 5.0})])
    with pytest.raises(MeasurementError, match="no measurements for target 'trn1'"):
        calibrate_file(meas, _predict, "trn1")
