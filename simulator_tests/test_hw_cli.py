"""``devkit hw run`` / ``hw report`` / ``calibrate`` / ``info`` on a machine without Neuron hardware."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from _workflow_support import host_context

from devkit import cli
from devkit.cost.params import PARAMS_PATH, load_params_file
from devkit.workflow.hw import store as hw_store

ROOT = Path(__file__).resolve().parent.parent
SHAPE = {"S": 128, "H": 256, "r": 128, "N": 512}


def _predicted(shape=SHAPE, dtype="bfloat16") -> float:
    from devkit.kernels import registry

    return registry.get("xuv_fused").estimate(shape, dtype, "trn1").latency_us


def _store(tmp_path: Path, factor: float, backend: str = "neuron-sdk") -> Path:
    """A synthetic store whose 'measurements' are ``factor`` x the current model on two shapes."""
    store = hw_store.ResultsStore(tmp_path / "results")
    ctx = host_context(backend)
    for shape in (SHAPE, {**SHAPE, "S": 512}):
        pred = _predicted(shape)
        for jitter in (0.98, 1.0, 1.02):
            store.append(
                hw_store.make_record(
                    ctx,
                    kind="latency",
                    kernel="xuv_fused",
                    shape=shape,
                    dtype="bfloat16",
                    measured_us={"p50": pred * factor * jitter, "p99": pred * factor * 1.1},
                    predicted_us=pred,
                )
            )
    return store.root


def test_hw_run_require_hardware_fails_at_once(capsys):
    assert cli.main(["hw", "run", "--require-hardware"]) == 2
    err = capsys.readouterr().err
    assert "cannot run the hardware tests" in err
    assert "/dev/neuron" in err and "neuronx-cc" in err


def test_hw_run_skips_the_project_hw_tests(capfd, tmp_path):
    tests = tmp_path / "hw_tests"
    shutil.copytree(ROOT / "hw_tests", tests, ignore=shutil.ignore_patterns("__pycache__"))
    code = cli.main(["hw", "run", "--tests", str(tests), "--", "-p", "no:cacheprovider", "-q"])
    out = capfd.readouterr()
    assert code == 0, out.out + out.err
    assert "skipped" in out.out and "failed" not in out.out and "passed" not in out.out


def test_hw_report_compares_and_writes_a_page(capsys, tmp_path):
    results = _store(tmp_path, 1.1)
    out_dir = tmp_path / "report"
    assert cli.main(["hw", "report", "--results", str(results), "--out", str(out_dir)]) == 0
    text = capsys.readouterr().out
    assert "xuv_fused" in text and "1.10x" in text
    page = (out_dir / "hw.html").read_text()
    assert "data:image/png;base64," in page and "S=512,H=256,r=128,N=512" in page
    assert cli.main(["hw", "report", "--results", str(results), "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["runs"] for r in rows] == [3, 3]
    assert rows[0]["ratio"] == pytest.approx(1.1, rel=1e-6)


def test_hw_report_leaves_fake_records_out(capsys, tmp_path):
    results = _store(tmp_path, 1.0, backend="fake")
    assert cli.main(["hw", "report", "--results", str(results)]) == 0
    assert "no hardware measurements" in capsys.readouterr().out
    assert cli.main(["hw", "report", "--results", str(results), "--include-fake", "--json"]) == 0
    assert len(json.loads(capsys.readouterr().out)) == 2


def test_calibrate_from_a_store_fits_and_writes_overrides(capsys, tmp_path):
    results = _store(tmp_path, 1.6)
    params = tmp_path / "params.toml"
    shutil.copy(PARAMS_PATH, params)
    argv = [
        "calibrate",
        "--from",
        str(results),
        "--params-file",
        str(params),
        "--json",
        "--params",
        "dma_fixed_latency_ns,dependency_latency_cycles",
        "--max-evaluations",
        "40",
    ]
    assert cli.main(argv) == 0
    (fit,) = json.loads(capsys.readouterr().out)
    assert fit["target"] == "trn1" and len(fit["measurements"]) == 2
    assert fit["loss_after"] < fit["loss_before"]
    assert params.read_text() == PARAMS_PATH.read_text()  # a dry run writes nothing
    assert cli.main([*argv, "--write"]) == 0
    capsys.readouterr()
    updated = load_params_file(params)
    assert set(updated.overrides["trn1"]) == {"dma_fixed_latency_ns", "dependency_latency_cycles"}
    fitted = updated.overrides["trn1"]["dma_fixed_latency_ns"]
    assert fitted.method == "least-squares" and len(fitted.fitted_from) == 2


def test_calibrate_reports_bad_input(capsys, tmp_path):
    (tmp_path / "empty").mkdir()
    assert cli.main(["calibrate", "--from", str(tmp_path / "empty")]) == 2
    assert "no latency measurements" in capsys.readouterr().err
    assert cli.main(["calibrate", "--from", str(tmp_path), "--params", "nope"]) == 2
    assert "--params" in capsys.readouterr().err
    assert cli.main(["calibrate"]) == 2


def test_calibrate_accepts_measurement_files(capsys, tmp_path):
    pred = _predicted()
    path = tmp_path / "m.jsonl"
    path.write_text(
        json.dumps(
            {
                "kernel": "xuv_fused",
                "target": "trn1",
                "measured_us": pred * 1.3,
                "dtype": "bfloat16",
                "id": "a",
                "args": {"x": "bfloat16[128,256]", "u": "bfloat16[256,128]", "v": "bfloat16[128,512]"},
            }
        )
        + "\n"
    )
    assert (
        cli.main(
            ["calibrate", str(path), "--json", "--params", "dma_fixed_latency_ns", "--max-evaluations", "20"]
        )
        == 0
    )
    (fit,) = json.loads(capsys.readouterr().out)
    assert fit["measurements"][0]["predicted_before_us"] == pytest.approx(pred, rel=1e-9)


def test_info_json(capsys):
    assert cli.main(["info", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["backend"]["neuronxcc.nki"] == "simulator"  # mapped by the project's pytest plugin
    assert data["neuron_devices"] == [] and data["hardware_ready"] is False
    assert set(data["targets"]) >= {"trn1", "inf2", "trn2"}
    assert "numpy" in data["packages"]
