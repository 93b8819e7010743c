"""Promotion end to end without hardware: write a hardware test (case file + module), run it against the fake SDK.

The generated module runs in a separate pytest process (as ``devkit hw run`` would), with the
project's ``hw_tests/conftest.py``: skipped with one reason without hardware, an immediate failure
with ``--require-hardware``, and against ``--fake-neuron`` it validates, times, records and fails
when the numbers are wrong or slow.
"""

from __future__ import annotations

import ast
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from devkit.workflow import promote
from devkit.workflow.hw import cases as hw_cases
from devkit.workflow.hw import store as hw_store

ROOT = Path(__file__).resolve().parent.parent
SHAPE = {"S": 130, "H": 256, "r": 128, "N": 512}  # a ragged token count


@pytest.fixture(scope="module")
def generated(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("hw")
    shutil.copy(ROOT / "hw_tests" / "conftest.py", out / "conftest.py")
    result = promote.promote(
        "xuv_fused",
        [SHAPE],
        ["bfloat16", "float32"],
        ["trn1", "trn2"],
        out_dir=out,
        slack=0.2,
        warmup=1,
        iters=5,
        command="devkit promote xuv_fused --shape ...",
    )
    assert result.failures == []
    return result.path


def _pytest(path: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "pytest", str(path.parent), "-p", "no:cacheprovider", "-rs", "-q", *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=path.parent,
    )


def test_generated_module_is_tiny_and_its_case_file_pins_the_prediction(generated):
    source = generated.read_text()
    ast.parse(source)
    call = 'test_numerics, test_latency = hw.promoted_tests_from(__file__, "cases/xuv_fused.json")'
    assert source.rstrip().endswith(call)  # the module is a docstring and this one call: no data
    code = [ln for ln in source.split('"""')[-1].splitlines() if ln.strip() and not ln.startswith("from ")]
    assert code == [call]
    assert max(len(line) for line in source.splitlines()) <= 110
    data = hw_cases.load(generated.parent / "cases" / "xuv_fused.json")
    assert (data.kernel, data.generation, data.warmup, data.iters, data.seed) == (
        "xuv_fused",
        "beta1",
        1,
        5,
        0,
    )
    assert data.provenance["command"] == "devkit promote xuv_fused --shape ..."
    assert set(data.provenance) == {"command", "devkit_version", "git_commit", "generated"}
    cases = data.cases
    assert [c.dtype for c in cases] == ["bfloat16", "float32"]
    for c in cases:
        assert dict(c.shape) == SHAPE
        assert set(c.predicted_us) == {"trn1", "trn2"}
        assert all(v > 0 for v in c.predicted_us.values())
        assert c.slack == 0.2
    from devkit.kernels import registry

    assert dict(cases[0].blocks) == registry.get("xuv_fused").default_blocks(SHAPE, "bfloat16", "trn1")


def test_promoting_again_changes_only_the_case_file(generated, tmp_path):
    """The module holds no data: a second promotion with other cases rewrites the case file only."""
    out = tmp_path / "again"
    again = promote.promote("xuv_fused", [SHAPE], ["float32"], ["trn1"], out_dir=out, warmup=2, iters=3)
    assert again.path.read_text() == generated.read_text()
    assert again.cases_path == out / "cases" / "xuv_fused.json"
    data = hw_cases.load(again.cases_path)
    assert [c.dtype for c in data.cases] == ["float32"] and (data.warmup, data.iters) == (2, 3)


def test_without_hardware_every_test_is_skipped_with_one_reason(generated):
    proc = _pytest(generated)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "4 skipped" in proc.stdout
    reasons = {line.split(": ", 1)[1] for line in proc.stdout.splitlines() if line.startswith("SKIPPED")}
    assert len(reasons) == 1
    (reason,) = reasons
    assert "Neuron device" in reason and "neuronx-cc" in reason


def test_require_hardware_fails_at_once_naming_what_is_missing(generated):
    proc = _pytest(generated, "--require-hardware")
    assert proc.returncode != 0
    text = proc.stdout + proc.stderr
    assert "/dev/neuron" in text and "neuronx-cc" in text
    assert "passed" not in proc.stdout and "skipped" not in proc.stdout


def test_fake_backend_passes_and_records_every_run(generated, tmp_path):
    proc = _pytest(generated, "--fake-neuron", "ok", "--results-dir", str(tmp_path))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "4 passed" in proc.stdout
    read = hw_store.ResultsStore(tmp_path).read()
    assert read.damaged == []
    kinds = sorted(r["kind"] for r in read.records)
    assert kinds == ["latency", "latency", "numerics", "numerics"]
    lat = [r for r in read.records if r["kind"] == "latency"]
    for r in lat:
        assert r["backend"] == "fake" and r["target"] == "trn1"
        assert r["shape"] == SHAPE and r["warmup"] == 1 and r["iters"] == 5
        assert set(r["measured_us"]) == {f"p{p}" for p in hw_store.PERCENTILES}
        assert r["measured_us"]["p50"] == pytest.approx(r["predicted_us"], rel=1e-3)


def test_model_disagreement_is_reported_not_failed(generated, tmp_path):
    """A device 3x slower than the model with no earlier measurement: model error, recorded and warned."""
    proc = _pytest(generated, "--fake-neuron", "slow", "--results-dir", str(tmp_path))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "4 passed" in proc.stdout
    assert "model error: measured/predicted = 3.00" in proc.stdout
    lat = [r for r in hw_store.ResultsStore(tmp_path).read().records if r["kind"] == "latency"]
    assert len(lat) == 2
    for r in lat:
        assert r["measured_us"]["p50"] > 2.9 * r["predicted_us"]
        assert r["model_ratio"] == pytest.approx(3.0, rel=1e-3)
        assert r["previous_p50_us"] is None and r["regression"] is False


def test_regression_against_the_previous_measurement_fails(generated, tmp_path):
    assert _pytest(generated, "--fake-neuron", "ok", "--results-dir", str(tmp_path)).returncode == 0
    proc = _pytest(generated, "--fake-neuron", "slow", "--results-dir", str(tmp_path))
    assert proc.returncode == 1
    assert "2 failed, 2 passed" in proc.stdout
    assert "latency regression" in proc.stdout and "+200.0%" in proc.stdout
    lat = [r for r in hw_store.ResultsStore(tmp_path).read().records if r["kind"] == "latency"]
    first, second = lat[:2], lat[2:]
    assert len(second) == 2
    for before, after in zip(first, second):
        assert after["previous_id"] == before["id"]
        assert after["previous_p50_us"] == before["measured_us"]["p50"]
        assert after["regression"] is True


def test_same_speed_again_is_within_the_threshold(generated, tmp_path):
    for _ in range(2):
        proc = _pytest(generated, "--fake-neuron", "ok", "--results-dir", str(tmp_path), "-k", "latency")
        assert proc.returncode == 0, proc.stdout + proc.stderr
    lat = [r for r in hw_store.ResultsStore(tmp_path).read().records if r["kind"] == "latency"]
    assert len(lat) == 4 and [r["regression"] for r in lat] == [False] * 4
    assert [r["previous_p50_us"] is None for r in lat] == [True, True, False, False]


def test_wrong_outputs_fail_the_numerics_test(generated, tmp_path):
    proc = _pytest(generated, "--fake-neuron", "wrong", "--results-dir", str(tmp_path), "-k", "numerics")
    assert proc.returncode == 1
    assert "2 failed" in proc.stdout and "EXCEEDS the tolerance" in proc.stdout
    recs = hw_store.ResultsStore(tmp_path).read().records
    assert [r["passed"] for r in recs] == [False, False]


def test_fake_backend_refuses_the_project_store(generated):
    proc = _pytest(generated, "--fake-neuron", "ok")
    assert proc.returncode != 0
    assert "--results-dir" in proc.stdout + proc.stderr


def test_case_file_text_round_trips_one_case_a_line():
    from devkit.workflow.hw.harness import Case

    wide = Case(
        "k", {"S": 4096}, "bfloat16", {f"block_param_{i}": i for i in range(8)}, {"trn1": 1.0561}, 0.3
    )
    short = Case("k", {"N": 64}, "float32", predicted_us={"trn1": 9.0561})
    data = promote.case_file("k", [wide, short], description="d", command="c", warmup=0, iters=1)
    text = hw_cases.dumps(data)
    lines = text.splitlines()
    assert lines[-4:] == [
        '    {"shape": {"S": 4096}, "dtype": "bfloat16", "blocks": {"block_param_0": 0, "block_param_1": 1, '
        '"block_param_2": 2, "block_param_3": 3, "block_param_4": 4, "block_param_5": 5, "block_param_6": 6, '
        '"block_param_7": 7}, "predicted_us": {"trn1": 1.056}, "slack": 0.3},',
        '    {"shape": {"N": 64}, "dtype": "float32", "blocks": {}, "predicted_us": {"trn1": 9.056}, "slack": 0.25}',
        "  ]",
        "}",
    ]
    back = hw_cases.parse(json.loads(text))
    assert back.cases == (
        Case("k", {"S": 4096}, "bfloat16", wide.blocks, {"trn1": 1.056}, 0.3),
        Case("k", {"N": 64}, "float32", predicted_us={"trn1": 9.056}),
    )
    assert back.provenance == data.provenance and back.description == "d"


def test_promote_cli_rejects_bad_input(capsys, tmp_path):
    from devkit import cli

    assert cli.main(["promote"]) == 2
    assert "name one KERNEL" in capsys.readouterr().err
    assert cli.main(["promote", "nope", "--out-dir", str(tmp_path)]) == 2
    assert "unknown kernel" in capsys.readouterr().err
    assert cli.main(["promote", "xuv_fused", "--shape", "1,2", "--out-dir", str(tmp_path)]) == 2
    assert "expected 4" in capsys.readouterr().err
    assert (
        cli.main(
            ["promote", "xuv_fused", "--shape", "1,2,3,4", "--dtype", "int8", "--out-dir", str(tmp_path)]
        )
        == 2
    )
    assert "dtypes" in capsys.readouterr().err
    with pytest.raises(promote.PromoteError, match="blocks"):
        promote.build_cases("xuv_fused", [SHAPE], ["bfloat16"], ["trn1"], registry=_Tight())
    assert list(tmp_path.iterdir()) == []


class _Tight:
    """A registry whose xuv_fused never fits: promotion must refuse before writing anything."""

    def get(self, name):
        from devkit.kernels import registry

        spec = registry.get(name)

        class Spec:
            dtypes = spec.dtypes

            def _shape(self, shape):
                return spec._shape(shape)

            def default_blocks(self, *a):
                return {"block_tokens": 1 << 20}

            def feasible(self, *a):
                from devkit.kernels.registry import Feasibility

                return Feasibility(False, "SBUF limit: too big")

        return Spec()


def test_promote_all_stamps_the_commit_read_before_it_wrote_anything(tmp_path, monkeypatch):
    """The files written first must not make the later ones ``+dirty``: the CLI reads the commit once."""
    from devkit import cli
    from devkit.workflow.hw import host

    reads = []
    monkeypatch.setattr("devkit.commands.promote.git_commit", lambda: reads.append(1) or "c0ffee")
    monkeypatch.setattr(host, "git_commit", lambda *a: pytest.fail("read the commit again after writing"))
    argv = ["promote", "matmul_tiled", "--shape", "K=512,M=256,N=1024", "--generation", "all"]
    assert cli.main([*argv, "--jobs", "1", "--out-dir", str(tmp_path)]) == 0
    written = [hw_cases.load(p) for p in sorted((tmp_path / "cases").glob("*.json"))]
    assert [d.kernel for d in written] == ["matmul_tiled", "matmul_tiled_b2"]
    assert [d.provenance["git_commit"] for d in written] == ["c0ffee", "c0ffee"] and reads == [1]
