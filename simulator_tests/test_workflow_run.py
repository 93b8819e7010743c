"""``devkit run``: the plan, the worker pool, the summary, the exit status and the report.

The full job takes minutes; these tests run the same code on a handful of tiny tasks.
"""

from __future__ import annotations

import re

import pytest

from devkit import cli
from devkit.workflow import run as main_job
from devkit.workflow.run import Task

TINY_XUV = (("S", 128), ("H", 256), ("r", 128), ("N", 512))


def _tiny_plan(*, quick: bool, target: str = "trn1", **_: object) -> list[Task]:
    return [
        Task("validate", "xuv_fused", (("S", 130), ("H", 200), ("r", 72), ("N", 300)), "bfloat16", target),
        Task("validate", "matmul_tiled", (("K", 128), ("M", 128), ("N", 512)), "float32", target),
        Task(
            "estimate", "xuv_fused", TINY_XUV, "bfloat16", target, group="paper", label="fused", timeline=True
        ),
        Task("estimate", "xuv_sequential", TINY_XUV, "bfloat16", target, group="paper", label="sequential"),
        Task(
            "estimate",
            "matmul_optimized",
            (("K", 256), ("M", 128), ("N", 512)),
            "bfloat16",
            target,
            group="paper",
            label="dense",
        ),
    ]


def test_plan_covers_every_kernel_and_dtype_and_the_paper_sweep():
    from devkit.kernels import registry

    for quick in (True, False):
        tasks = main_job.plan(quick=quick)
        validated = {(t.kernel, t.dtype) for t in tasks if t.kind == "validate"}
        assert validated == {(s.name, d) for s in registry.all_specs() for d in s.dtypes}
        paper = [t for t in tasks if t.group == "paper"]
        sizes = main_job.PAPER_S_QUICK if quick else main_job.PAPER_S_FULL
        assert len(paper) == 3 * len(sizes)
        assert sum(t.timeline for t in tasks) == 1
        assert {t.label for t in paper} == {"fused", "sequential", "dense"}
        dense = next(t for t in paper if t.label == "dense")
        assert dense.shape_dict["K"] == main_job.PAPER_H and dense.shape_dict["N"] == main_job.PAPER_N
        assert any(t.kernel == "svd_mlp" for t in tasks) and any(t.kernel == "dense_mlp" for t in tasks)
    full = main_job.plan(quick=False)
    assert {t.shape_dict["S"] for t in full if t.group == "paper" and "S" in t.shape_dict} == set(
        main_job.PAPER_S_FULL
    )
    spec = registry.get("xuv_fused")
    assert next(t for t in full if t.kind == "validate" and t.kernel == "xuv_fused").shape_dict == dict(
        spec.default_shape
    )


def test_quick_shape_keeps_ragged_edges():
    assert main_job.quick_shape({"S": 256, "H": 2048, "r": 1280, "N": 8192}) == {
        "S": 64,
        "H": 512,
        "r": 320,
        "N": 2048,
    }
    assert main_job.quick_shape({"S": 1}) == {"S": 1}


def test_execute_in_worker_processes_matches_in_process():
    tasks = _tiny_plan(quick=True)[2:4]
    started, done = [], []
    pooled = main_job.execute(tasks, jobs=2, on_start=started.append, on_done=done.append)
    local = main_job.execute(tasks, jobs=1)
    assert [r.task for r in pooled] == tasks and len(started) == len(done) == 2
    assert [r.figures["latency_us"] for r in pooled] == [r.figures["latency_us"] for r in local]
    assert (
        pooled[0].report is not None and pooled[0].report.timeline is not None
    )  # crossed the process boundary


def test_task_errors_are_reported_not_raised():
    res = main_job.run_task(Task("validate", "no_such_kernel", (("S", 1),), "bfloat16", "trn1"))
    assert not res.ok and "no_such_kernel" in res.error
    bad = main_job.run_task(Task("estimate", "xuv_fused", (("S", 1),), "bfloat16", "trn1"))
    assert not bad.ok and bad.error


@pytest.fixture
def tiny(monkeypatch):
    monkeypatch.setattr(main_job, "plan", _tiny_plan)


def test_run_passes_prints_tables_and_writes_the_report(tiny, tmp_path, capsys):
    out_dir = tmp_path / "report"
    (tmp_path / "none").mkdir()  # an empty results store: no hardware data
    code = cli.main(["run", "--out", str(out_dir), "--jobs", "1", "--results", str(tmp_path / "none")])
    captured = capsys.readouterr()
    assert code == 0, captured.out + captured.err
    assert "Validation against the NumPy references" in captured.out
    assert "OK: 2 validations passed" in captured.out
    html = (out_dir / "index.html").read_text()
    assert "All 2 validations passed" in html
    images = re.findall(r'src="data:image/png;base64,([A-Za-z0-9+/=]+)"', html)
    assert len(images) == 3  # latency, HBM traffic, engine timeline
    assert "Hotspots" in html and "Engine timeline: xuv_fused" in html
    assert "Hardware: measured vs predicted" not in html  # empty store: no section


def test_run_fails_with_a_summary_when_a_validation_fails(tiny, tmp_path, capsys, monkeypatch):
    from devkit.declare import KernelSpec

    real = KernelSpec.check

    def broken(spec, *args, **kwargs):
        res = real(spec, *args, **kwargs)
        if spec.name == "matmul_tiled":
            return type(res)(res.kernel, res.shape, res.dtype, 0.5, res.tolerance, False)
        return res

    monkeypatch.setattr(KernelSpec, "check", broken)
    (tmp_path / "none").mkdir()  # an empty results store: no hardware data
    code = cli.main(["run", "--out", str(tmp_path), "--jobs", "1", "--results", str(tmp_path / "none")])
    out = capsys.readouterr().out
    assert code == 1
    assert "FAILED" in out and "validation matmul_tiled" in out and "exceeds the tolerance" in out
    assert "1 of 2 validations FAILED" in (tmp_path / "index.html").read_text()


def test_run_rejects_bad_options(capsys):
    assert cli.main(["run", "--target", "tpu"]) == 2
    assert "unknown target" in capsys.readouterr().err
    assert cli.main(["run", "--jobs", "0"]) == 2


def test_report_includes_the_hardware_section_when_the_store_has_data(tmp_path):
    from devkit.workflow import report
    from devkit.workflow.hw import host as hw_host
    from devkit.workflow.hw import store as hw_store
    from devkit.workflow.run_report import report_context

    ctx = hw_host.HostContext(
        backend="neuron-sdk",
        target="trn1",
        instance_type="trn1.2xlarge",
        sdk_version="2.21",
        git_commit="abc",
        host="h",
        devkit_version="0",
    )
    store = hw_store.ResultsStore(tmp_path / "results")
    store.append(
        hw_store.make_record(
            ctx,
            kind="latency",
            kernel="xuv_fused",
            shape={"S": 1024},
            dtype="bfloat16",
            measured_us={"p50": 130.0, "p99": 140.0},
            predicted_us=100.0,
        )
    )
    summary = main_job.summarise([])
    context = report_context(summary, target="trn1", quick=True, wall_s=None, results_dir=str(store.root))
    html = report.render_html(context)
    assert "Hardware: measured vs predicted" in html
    assert html.count("data:image/png;base64,") == 1
    assert 'class="bad">1.30x' in html  # outside the ±25 % band
