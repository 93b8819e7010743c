"""``devkit run`` on a project's own kernels (issues 16 and 20): every table the kit's kernels get (estimates,
baselines, sweeps, tuning, the roofline) and Beta 1 next to Beta 2 per kernel family, in the console, in
results.json and in the HTML report.  The project is a throwaway directory with one small kernel file."""

from __future__ import annotations

import json
import textwrap

import pytest

from devkit import cli
from devkit.workflow import run as main_job
from devkit.workflow.run import Task, TaskResult

KERNELS = """
import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import nki as nki_b2
import nki.isa as nisa
import nki.language as nl_b2
import numpy as np

import devkit


def reference(x):
    return (2.0 * x.astype(np.float32)).astype(x.dtype)


COMMON = {"arg_shapes": lambda s: [(s["R"], s["N"])], "default_shape": {"R": 128, "N": 1024},
          "reference": reference, "dtypes": ("float32",)}


def _twice(x, out, tile):
    for j in nl.affine_range(x.shape[1] // tile):
        t = nl.load(x[:, j * tile:(j + 1) * tile])
        nl.store(out[:, j * tile:(j + 1) * tile], value=nl.multiply(t, 2.0))


@devkit.declare_kernel(block_params={"tile": (128, 256, 512)}, baselines=("twice_narrow",),
                       sweep=devkit.Sweep("N", (512, 1024, 2048), dtype="float32"), **COMMON)
@nki.jit
def twice(x, tile=128):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    _twice(x, out, tile)
    return out


@devkit.declare_kernel(**COMMON)
@nki.jit
def twice_narrow(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    _twice(x, out, 64)
    return out


@devkit.declare_kernel(generation="beta2", family="twice", **COMMON)
@nki_b2.jit
def twice_b2(x):
    out = nl_b2.ndarray(x.shape, dtype=x.dtype, buffer=nl_b2.shared_hbm)
    for j in nl_b2.affine_range(x.shape[1] // 512):
        t = nl_b2.ndarray((x.shape[0], 512), dtype=x.dtype, buffer=nl_b2.sbuf)
        nisa.dma_copy(t, x[:, j * 512:(j + 1) * 512])
        nisa.tensor_scalar(t, t, nl_b2.multiply, 2.0)
        nisa.dma_copy(out[:, j * 512:(j + 1) * 512], t)
    return out
"""


@pytest.fixture
def proj(tmp_path, monkeypatch):
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "twice"\nversion = "0"\n\n[tool.devkit]\nkernels = ["twice.py"]\ninclude_kit = false\n'
    )
    (tmp_path / "twice.py").write_text(textwrap.dedent(KERNELS))
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_run_reports_project_kernels_everywhere_the_kit_kernels_appear(proj, capsys):
    assert cli.main(["tune", "twice", "--shape", "R=128,N=1024", "--dtype", "float32", "--jobs", "1"]) == 0
    tuned = json.loads((proj / "devkit-tuning.json").read_text())["kernels"]["twice"]["trn1"]["float32"][0]
    capsys.readouterr()
    assert cli.main(["run", "--jobs", "1"]) == 0
    out = capsys.readouterr().out
    data = json.loads((proj / "devkit-report" / "results.json").read_text())
    lat = {(e["group"], e["label"], e["shape"]): e["latency_us"] for e in data["estimates"]}

    row = next(r for r in data["kernel_rows"] if r["kernel"] == "twice")
    (base,) = row["baselines"]
    assert base["label"] == "twice_narrow" and row["shape"] == "R=128,N=1024"
    assert base["speedup"] == pytest.approx(base["latency_us"] / row["latency_us"])
    assert row["latency_us"] == lat[("kernel:twice", "twice", "R=128,N=1024")]

    (sweep,) = data["sweeps"]
    assert (sweep["kernel"], sweep["x"], sweep["labels"]) == ("twice", "N", ["twice", "twice_narrow"])
    assert [r["x"] for r in sweep["rows"]] == [512, 1024, 2048]
    narrow = [r["latency_us"]["twice_narrow"] for r in sweep["rows"]]
    assert narrow == sorted(narrow) and None not in narrow  # more columns, more time

    (tuning,) = data["tuning_rows"]
    assert tuning["tuned_blocks"] == tuned["blocks"] and tuning["default_blocks"] == {"tile": 128}
    assert tuning["speedup"] == pytest.approx(tuning["default_us"] / tuning["tuned_us"])

    (pair,) = data["generation_rows"]
    assert (pair["family"], pair["beta1"]["kernel"], pair["beta2"]["kernel"]) == (
        "twice",
        "twice",
        "twice_b2",
    )
    assert pair["beta1"]["passed"] and pair["beta2"]["passed"] and pair["beta2"]["max_error"] is not None
    b1, b2 = pair["beta1"]["latency_us"], pair["beta2"]["latency_us"]
    assert pair["latency_diff_pct"] == pytest.approx((b2 - b1) / b1 * 100)

    html = (proj / "devkit-report" / "index.html").read_text()
    for heading in ("Kernels against their declared baselines", "Sweep: twice over N", "Tuned configurations",
                    "Beta 1 and Beta 2 side by side"):  # fmt: skip
        assert heading in html
    for title in ("Kernels against their declared", "Sweep of twice over N", "Tuned configurations",
                  "Beta 1 and Beta 2 side by side"):  # fmt: skip
        assert title in out
    assert f"{pair['latency_diff_pct']:+.1f} %" in html and "twice_b2" in html


def _result(kind, kernel, shape, generation, latency=None, ok=True, error=None):
    group = f"kernel:{kernel}" if kind == "estimate" else ""
    task = Task(kind, kernel, shape, "bfloat16", "trn1", group, kernel if group else "", family="f",
                generation=generation)  # fmt: skip
    figures = {"latency_us": latency} if latency is not None else {}
    return TaskResult(task, 0.0, ok, error, max_error=0.001 if kind == "validate" else None, figures=figures)


def test_generation_rows_pair_only_both_generations_and_compare_only_equal_shapes():
    same, other = (("S", 128),), (("S", 256),)
    v1, v2 = _result("validate", "f", same, "beta1"), _result("validate", "f_b2", same, "beta2")
    e1, e2 = _result("estimate", "f", same, "beta1", 10.0), _result("estimate", "f_b2", same, "beta2", 9.0)
    (row,) = main_job.generation_rows([v1, v2], [e1, e2])
    assert row["latency_diff_pct"] == pytest.approx(-10.0)
    assert main_job.generation_rows([v1], [e1, e2]) == []  # no Beta-2 validation: no pair
    v2_other = _result("validate", "f_b2", other, "beta2")
    (row,) = main_job.generation_rows([v1, v2_other], [e1, e2])
    assert row["latency_diff_pct"] is None  # different shapes are not compared
    failed = _result("estimate", "f_b2", same, "beta2", ok=False, error="boom")
    (row,) = main_job.generation_rows([v1, v2], [e1, failed])
    assert row["beta2"]["latency_us"] is None and row["latency_diff_pct"] is None


def test_kit_kernels_get_per_kernel_estimates_only_when_paired_by_generation():
    from devkit.workflow import catalog

    kit = catalog.kit_specs()
    tasks = main_job.plan(quick=True, specs=kit)
    gens: dict[str, set[str]] = {}
    for s in kit:
        gens.setdefault(s.family, set()).add(s.generation)
    per_kernel = [t for t in tasks if t.group.split(":")[0] in ("kernel", "sweep", "tuning")]
    assert all(len(gens[t.family]) == 2 and t.group.startswith("kernel:") for t in per_kernel)
    paired = {s.name for s in kit if len(gens[s.family]) == 2}
    assert {t.kernel for t in per_kernel} == paired


def test_run_of_a_file_kernel_finds_the_baselines_declared_beside_it(tmp_path, monkeypatch, capsys):
    (tmp_path / "twice.py").write_text(textwrap.dedent(KERNELS))  # no pyproject: named by FILE.py:KERNEL
    monkeypatch.chdir(tmp_path)
    assert cli.main(["run", "twice.py:twice", "--jobs", "1"]) == 0, capsys.readouterr().out
    data = json.loads((tmp_path / "devkit-report" / "results.json").read_text())
    (row,) = data["kernel_rows"]
    assert row["baselines"][0]["label"] == "twice_narrow" and row["baselines"][0]["latency_us"] > 0
    assert data["sweeps"][0]["labels"] == ["twice", "twice_narrow"] and data["generation_rows"] == []
