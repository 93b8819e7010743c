"""Every workflow command on a project's own kernel, by FILE.py:KERNEL or declared name; state stays in
the project (a copy of docs/examples/your-kernel in a temporary directory)."""

from __future__ import annotations

import json
import shutil
import textwrap
from pathlib import Path

import pytest
from _workflow_support import EXAMPLE, EXAMPLE_WRITES

from devkit import cli, project
from devkit.workflow import catalog

REPO_TUNING = Path(__file__).resolve().parents[1] / "devkit" / "kernels" / "tuning.json"


@pytest.fixture
def proj(tmp_path, monkeypatch):
    root = tmp_path / "proj"
    shutil.copytree(EXAMPLE, root, ignore=shutil.ignore_patterns("__pycache__", ".hypothesis"))
    sub = root / "tests"
    monkeypatch.chdir(sub)  # the project is found from a subdirectory too
    return root


def _files(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts}


def test_project_is_found_from_a_subdirectory(proj):
    p = project.find()
    assert p.root == proj and p.configured and p.settings["include_kit"] is False
    assert p.path("tuning") == proj / "devkit-tuning.json"
    assert [s.name for s in catalog.all_specs()] == ["scaled_add", "scaled_add_narrow"]


def test_bad_tool_devkit_table_is_named(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.devkit]\nkernel = ["x.py"]\n')
    with pytest.raises(project.ProjectError, match="unknown keys \\['kernel'\\]"):
        project.find(tmp_path)


def test_validate_by_declared_name(proj, capsys):
    assert cli.main(["validate", "scaled_add", "--examples", "4"]) == 0
    out = capsys.readouterr().out
    assert "OK: 5 examples within tolerance" in out  # the default shape + 4 drawn


def test_validate_shrinks_a_failure(proj, capsys):
    bad = proj / "bad.py"
    bad.write_text(
        (proj / "my_kernels.py")
        .read_text()
        .replace("+ y.astype(np.float32))", "+ y.astype(np.float32) + (x.shape[1] > 40))")  # wrong if wide
        .replace('name="scaled_add_narrow"', 'name="bad_narrow"')
        .replace("def scaled_add(", "def bad_add(")
        .replace('baselines=("scaled_add_narrow",)', "baselines=()")
    )
    assert cli.main(["validate", f"{bad}:bad_add", "--examples", "20", "--dtype", "float32"]) == 1
    out = capsys.readouterr().out
    assert "FAILED (shrunk): bad_add [R=1,N=41] float32" in out


def test_tune_sweep_promote_run_keep_state_in_the_project(proj, capsys):
    before = _files(proj)
    repo_tuning = REPO_TUNING.read_bytes()
    ref = f"{proj / 'my_kernels.py'}:scaled_add"
    assert cli.main(["tune", ref, "--shape", "R=1024,N=4096", "--jobs", "1"]) == 0
    table = json.loads((proj / "devkit-tuning.json").read_text())
    entry = table["kernels"]["scaled_add"]["trn1"]["bfloat16"][0]
    assert entry["when"] == {"R": [1024, 1024], "N": [4096, 4096]}
    assert entry["blocks"] == {"tile_n": 2048}  # wider tiles, fewer DMAs: the modelled winner
    spec = catalog.get("scaled_add")
    assert spec.default_blocks({"R": 1024, "N": 4096}, "bfloat16") == {"tile_n": 2048}
    assert spec.default_blocks({"R": 64, "N": 4096}, "bfloat16") == {"tile_n": 512}  # declared default

    assert cli.main(["sweep", "scaled_add", "--values", "512,4096", "--jobs", "1"]) == 0
    data = json.loads((proj / "devkit-sweeps" / "scaled_add.json").read_text())
    assert data["lines"] == ["scaled_add", "scaled_add_narrow"] and len(data["rows"]) == 2
    assert all(r["scaled_add"] < r["scaled_add_narrow"] for r in data["rows"])
    csv_head = (proj / "devkit-sweeps" / "scaled_add.csv").read_text().splitlines()[0]
    assert csv_head == "N,scaled_add us,scaled_add_narrow us,scaled_add hbm_bytes,scaled_add_narrow hbm_bytes"
    assert (proj / "devkit-sweeps" / "scaled_add.png").read_bytes()[:4] == b"\x89PNG"

    assert cli.main(["promote", "scaled_add", "--jobs", "1"]) == 0
    test_src = (proj / "hw_tests" / "test_scaled_add.py").read_text()
    assert test_src.rstrip().endswith('hw.promoted_tests_from(__file__, "cases/scaled_add.json")')
    cases = json.loads((proj / "hw_tests" / "cases" / "scaled_add.json").read_text())
    assert cases["kernel"] == "scaled_add" and cases["cases"][0]["blocks"] == {"tile_n": 512}
    assert (proj / "hw_tests" / "conftest.py").read_text() == (
        Path(__file__).resolve().parents[1] / "devkit" / "templates" / "hw_conftest.py"
    ).read_text()

    assert cli.main(["run", "--quick", "--jobs", "1"]) == 0
    out = capsys.readouterr().out
    # include_kit = false: ours only; estimates: 2 kernels x 2 dtypes, the baseline of scaled_add in both
    # dtypes, the sweep's first 3 points x 2 lines (--quick), the tuned entry and its declared default
    assert "OK: 4 validations passed, 14 estimates ran" in out
    assert "xuv_fused" not in out

    written = _files(proj) - before
    assert written == EXAMPLE_WRITES
    assert REPO_TUNING.read_bytes() == repo_tuning  # the kit's defaults are read only


def test_tune_defaults_to_a_declared_dtype(proj, capsys):
    """A kernel declared for float32 only is tuned in float32 when --dtype is not given (not bfloat16)."""
    src = (proj / "my_kernels.py").read_text()
    assert src.count('dtypes=("float32", "bfloat16")') == 2
    f32 = proj / "f32_kernels.py"
    f32.write_text(
        src.replace('dtypes=("float32", "bfloat16")', 'dtypes=("float32",)').replace("scaled_add", "f32_add")
    )
    assert cli.main(["tune", f"{f32}:f32_add", "--shape", "R=128,N=1024", "--jobs", "1", "--no-write"]) == 0
    err = capsys.readouterr().err
    assert "R=128,N=1024 float32 on trn1" in err and "bfloat16" not in err


def test_sweep_without_a_declared_sweep_needs_x(proj, capsys):
    assert cli.main(["sweep", "scaled_add_narrow"]) == 2
    assert "declares no sweep: pass --x NAME (one of R, N)" in capsys.readouterr().err
    assert cli.main(["sweep", "scaled_add", "--x", "Q"]) == 2
    assert "not a shape parameter" in capsys.readouterr().err


def test_tune_of_a_kernel_without_configs_says_so(proj, capsys):
    assert cli.main(["tune", "scaled_add_narrow"]) == 2
    assert "no block parameters to tune (declare block_params" in capsys.readouterr().err


def test_broken_kernel_file_shows_the_users_traceback(tmp_path, monkeypatch, capsys):
    (tmp_path / "broken.py").write_text(
        textwrap.dedent("""
        def helper():
            raise RuntimeError("boom in user code")
        helper()
    """)
    )
    monkeypatch.chdir(tmp_path)
    assert cli.main(["validate", "broken.py:k"]) == 1
    err = capsys.readouterr().err
    assert "boom in user code" in err and "broken.py" in err


def test_cost_takes_the_same_names(proj, capsys):
    spec = catalog.get("scaled_add")
    shape = {"R": 1024, "N": 4096}
    for ref in ("scaled_add", f"{proj / 'my_kernels.py'}:scaled_add"):
        assert cli.main(["cost", ref, "--shape", "R=1024,N=4096", "--dtype", "bfloat16", "--json"]) == 0
        data = json.loads(capsys.readouterr().out)
        assert data["latency_us"] == pytest.approx(spec.estimate(shape, "bfloat16").latency_us)
    assert cli.main(["cost", "scaled_add", "--dtype", "float16"]) == 2
    assert "one of float32, bfloat16" in capsys.readouterr().err


def test_calibration_traces_find_project_kernels(proj):
    from devkit.workflow.hw import predict

    trace = predict.trace_of(
        "scaled_add", {"shape": {"R": 256, "N": 512}, "blocks": {"tile_n": 256}}, "float32", "trn1"
    )
    assert len(trace) > 0
