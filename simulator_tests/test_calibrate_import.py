"""``devkit calibrate`` importing SDK captures (issue 18): nki.benchmark percentile records and
neuron-profile summaries (formats in devkit/workflow/hw/imports.py), written here by the tests."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from devkit.cli import main
from devkit.kernels import tutorial
from devkit.workflow.hw import imports

TUTORIAL = os.path.abspath(tutorial.__file__)
ARGS = {"lhsT": "bfloat16[256,256]", "rhs": "bfloat16[256,1024]"}
PCTS = {"p0": 18.0, "p1": 18.2, "p10": 18.5, "p25": 18.9, "p50": 19.5, "p90": 20.5, "p99": 22.0, "p100": 25.0}


def _bench(tmp_path: Path) -> Path:
    path = tmp_path / "bench.jsonl"
    rec = {"kernel": f"{TUTORIAL}:tiled_matmul", "target": "trn1", "args": ARGS, "percentiles_us": PCTS,
           "warmup": 5, "iters": 10}  # fmt: skip
    path.write_text(json.dumps(rec) + "\n" + json.dumps({**rec, "id": "second"}) + "\n")
    return path


def _profile(tmp_path: Path, nested: bool = True) -> Path:
    path = tmp_path / "profile_summary.json"
    body = {"total_time": 2.1e-05, "dma_active_time": 1.7e-05}
    path.write_text(json.dumps({"file.neff": body} if nested else body))
    return path


def test_benchmark_records_become_measurements(tmp_path: Path) -> None:
    path = _bench(tmp_path)
    assert imports.detect(path) == "benchmark"
    ms = imports.read_benchmark(path)
    assert [m.measured_us for m in ms] == [19.5, 19.5]
    assert ms[0].target == "trn1" and ms[0].args == ARGS and ms[1].id == "second"
    assert [m.measured_us for m in imports.read_benchmark(path, 99)] == [22.0, 22.0]
    with pytest.raises(imports.ImportFormatError, match="percentile must be one of"):
        imports.read_benchmark(path, 75)


def test_benchmark_records_missing_fields_are_named(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps({"kernel": "k", "target": "trn1", "percentiles_us": {"p99": 3.0}}) + "\n")
    with pytest.raises(imports.ImportFormatError, match="missing args"):
        imports.read_benchmark(path)
    path.write_text(json.dumps({"kernel": "k", "target": "trn1", "args": {}, "percentiles_us": {"p99": 3.0}}))
    with pytest.raises(imports.ImportFormatError, match="no positive p50"):
        imports.read_benchmark(path)


@pytest.mark.parametrize("nested", [True, False])
def test_profile_summary_total_time_is_seconds(tmp_path: Path, nested: bool) -> None:
    path = _profile(tmp_path, nested)
    assert imports.detect(path) == "profile"
    (m,) = imports.read_profile(path, kernel="k.py:f", target="trn1", args=ARGS)
    assert m.measured_us == pytest.approx(21.0)
    assert m.kernel == "k.py:f" and "total_time" in m.source


def test_other_files_are_not_mistaken_for_captures(tmp_path: Path) -> None:
    path = tmp_path / "m.jsonl"
    path.write_text(json.dumps({"kernel": "k", "target": "trn1", "measured_us": 3.0}) + "\n")
    assert imports.detect(path) == "other"


def test_cli_fits_to_benchmark_records(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    params = tmp_path / "params.toml"
    params.write_text((Path(__file__).parent.parent / "devkit" / "cost" / "params.toml").read_text())
    rc = main(["calibrate", str(_bench(tmp_path)), "--params", "dma_fixed_latency_ns", "--json",
               "--max-evaluations", "30", "--params-file", str(params), "--percentile", "99"])  # fmt: skip
    out = capsys.readouterr()
    assert rc == 0, out.err
    (entry,) = json.loads(out.out)
    assert entry["target"] == "trn1"
    assert [m["measured_us"] for m in entry["measurements"]] == [22.0, 22.0]
    assert all(m["predicted_before_us"] > 0 for m in entry["measurements"])


def test_cli_profile_summary_needs_the_call(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _profile(tmp_path)
    assert main(["calibrate", str(path), "--params", "dma_fixed_latency_ns"]) == 2
    assert "does not name the call" in capsys.readouterr().err
    params = tmp_path / "params.toml"
    params.write_text((Path(__file__).parent.parent / "devkit" / "cost" / "params.toml").read_text())
    rc = main(["calibrate", str(path), "--kernel", f"{TUTORIAL}:tiled_matmul", "--arg", ARGS["lhsT"], "--arg",
               ARGS["rhs"], "--target", "trn1", "--params", "dma_fixed_latency_ns", "--json",
               "--max-evaluations", "30", "--params-file", str(params)])  # fmt: skip
    out = capsys.readouterr()
    assert rc == 0, out.err
    (entry,) = json.loads(out.out)
    assert entry["measurements"][0]["measured_us"] == pytest.approx(21.0)
