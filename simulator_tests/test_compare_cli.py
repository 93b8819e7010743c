"""``devkit compare`` (issue 18): A/B of two cost reports through the real command line."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from _workflow_support import ROOT, run_module

from devkit.cost.compare import CompareError, compare
from devkit.kernels import tutorial

TUTORIAL = os.path.abspath(tutorial.__file__)
ARGS = ["--arg", "bfloat16[256,256]", "--arg", "bfloat16[256,1024]"]


def _devkit(*argv: str) -> subprocess.CompletedProcess:
    return run_module("devkit", *argv)


@pytest.fixture(scope="module")
def baseline(tmp_path_factory: pytest.TempPathFactory) -> Path:
    proc = _devkit("cost", f"{TUTORIAL}:tiled_matmul", *ARGS, "--json")
    assert proc.returncode == 0, proc.stderr
    path = tmp_path_factory.mktemp("ab") / "a.json"
    path.write_text(proc.stdout)
    return path


def _slower(baseline: Path, factor: float, name: str) -> Path:
    data = json.loads(baseline.read_text())
    data["latency_us"] *= factor
    data["engine_busy_us"]["dma"] *= factor
    out = baseline.parent / name
    out.write_text(json.dumps(data))
    return out


def test_ten_percent_regression_fails_the_threshold(baseline: Path) -> None:
    b = _slower(baseline, 1.10, "b10.json")
    proc = _devkit("compare", str(baseline), str(b), "--fail-above", "5")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "regression" in proc.stderr and "10.00 %" in proc.stderr


def test_within_threshold_passes(baseline: Path) -> None:
    b = _slower(baseline, 1.10, "b10.json")
    proc = _devkit("compare", str(baseline), str(b), "--fail-above", "15")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "+10.00 %" in proc.stdout
    assert "1.100x" in proc.stdout  # the latency ratio B / A


def test_json_output_has_ratios(baseline: Path) -> None:
    b = _slower(baseline, 1.10, "b10.json")
    proc = _devkit("compare", str(baseline), str(b), "--json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["latency_change_pct"] == pytest.approx(10.0)
    rows = {r["name"]: r for r in data["rows"]}
    assert rows["latency_us"]["ratio"] == pytest.approx(1.10)
    assert rows["dma"]["ratio"] == pytest.approx(1.10)
    assert rows["tensor"]["ratio"] == pytest.approx(1.0)
    assert {"hbm_read", "hbm_write", "sbuf_to_psum"} <= rows.keys()
    assert data["hotspots"]["a"] and data["hotspots"]["a"][0]["file"] == TUTORIAL


def test_two_kernels_with_the_same_args(baseline: Path) -> None:
    matmul = ROOT / "devkit" / "kernels" / "matmul.py"
    proc = _devkit("compare", f"{TUTORIAL}:tiled_matmul", f"{matmul}:matmul_blocked", *ARGS, "--json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    a_latency = json.loads(baseline.read_text())["latency_us"]
    rows = {r["name"]: r for r in data["rows"]}
    assert rows["latency_us"]["a"] == pytest.approx(a_latency)
    assert rows["latency_us"]["b"] > 0


def test_bad_inputs_exit_2_with_a_message(baseline: Path, tmp_path: Path) -> None:
    junk = tmp_path / "junk.json"
    junk.write_text('{"hello": 1}')
    proc = _devkit("compare", str(baseline), str(junk))
    assert proc.returncode == 2 and "missing target" in proc.stderr and "Traceback" not in proc.stderr
    proc = _devkit("compare", str(baseline), str(tmp_path / "absent.json"))
    assert proc.returncode == 2 and "no such file" in proc.stderr
    proc = _devkit("compare", str(baseline), f"{TUTORIAL}:tiled_matmul")
    assert proc.returncode == 2 and "--arg" in proc.stderr


def test_compare_flags_different_targets() -> None:
    a = {
        "target": "trn1",
        "latency_us": 2.0,
        "hbm_read_bytes": 1,
        "hbm_write_bytes": 1,
        "instructions": 3,
        "engine_busy_us": {"tensor": 1.0},
        "tensor_utilization": 0.5,
        "sbuf_peak_bytes": 0,
        "psum_peak_bytes": 0,
    }
    b = {**a, "target": "trn2", "latency_us": 1.0}
    c = compare(a, b)
    assert c.regression_pct == pytest.approx(-50.0)
    assert any("different targets" in n for n in c.notes)
    with pytest.raises(CompareError, match="baseline latency is 0"):
        _ = compare({**a, "latency_us": 0.0}, b).regression_pct
