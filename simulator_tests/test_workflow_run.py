"""``devkit run``: the plan, the worker pool, the summary, the exit status and the report.

The full job takes minutes; these tests run the same code on a handful of tiny tasks.
"""

from __future__ import annotations

import re

import pytest
from _workflow_support import host_context

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


def _run_into(tmp_path, out_dir) -> int:
    """``devkit run --jobs 1`` writing its report into ``out_dir``, with an empty results store (no hardware
    data); the exit status."""
    (tmp_path / "none").mkdir()
    return cli.main(["run", "--out", str(out_dir), "--jobs", "1", "--results", str(tmp_path / "none")])


def test_run_passes_prints_tables_and_writes_the_report(tiny, tmp_path, capsys):
    out_dir = tmp_path / "report"
    code = _run_into(tmp_path, out_dir)
    captured = capsys.readouterr()
    assert code == 0, captured.out + captured.err
    assert "Validation against the NumPy references" in captured.out
    assert "OK: 2 validations passed" in captured.out
    html = (out_dir / "index.html").read_text()
    assert "All 2 validations passed" in html
    images = re.findall(r'src="data:image/png;base64,([A-Za-z0-9+/=]+)"', html)
    assert len(images) == 4  # latency, HBM traffic, roofline, engine timeline
    assert "Hotspots" in html and "Engine timeline: xuv_fused" in html
    assert "Roofline (modelled on trn1)" in html
    # empty store: the measured-vs-predicted section is a placeholder that says how to fill it
    assert "Hardware: measured vs predicted" in html and "No hardware measurements yet" in html
    assert "devkit hw run" in html
    # the uncertainty band is shown in the tables and explained
    assert re.search(r"&plusmn;\d+%", html) and "largest |predicted/measured - 1|" in html


def test_run_writes_every_row_as_json_and_csv(tiny, tmp_path, capsys):
    import csv
    import json

    out_dir = tmp_path / "report"
    assert _run_into(tmp_path, out_dir) == 0
    capsys.readouterr()
    data = json.loads((out_dir / "results.json").read_text())
    assert data["schema"] == "devkit-run-results/1" and data["passed"] is True
    tasks = _tiny_plan(quick=False)
    assert [(v["kernel"], v["dtype"]) for v in data["validations"]] == [
        (t.kernel, t.dtype) for t in tasks if t.kind == "validate"
    ]
    assert all(v["passed"] and v["max_error"] <= v["tolerance"] for v in data["validations"])
    est = data["estimates"]
    assert [(e["kernel"], e["label"]) for e in est] == [
        (t.kernel, t.label) for t in tasks if t.kind == "estimate"
    ]
    band = data["uncertainty"]["pct"]
    assert band and "trn1" in data["uncertainty"]["based_on"]
    for e in est:
        assert e["ok"] and e["latency_us"] > 0 and e["band_pct"] == band
        assert e["latency_low_us"] < e["latency_us"] < e["latency_high_us"]
        assert e["arithmetic_intensity"] == e["flops"] / (e["hbm_read_bytes"] + e["hbm_write_bytes"])
    # the paper table's rows are the same numbers
    paper = data["paper_rows"][0]
    fused = next(e for e in est if e["label"] == "fused")
    assert paper["latency_us"]["fused"] == fused["latency_us"]
    with open(out_dir / "estimates.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == len(est)
    assert [float(r["latency_us"]) for r in rows] == [e["latency_us"] for e in est]
    with open(out_dir / "validations.csv", newline="") as f:
        vrows = list(csv.DictReader(f))
    assert [r["kernel"] for r in vrows] == [v["kernel"] for v in data["validations"]]
    assert all(r["passed"] == "True" for r in vrows)


def test_run_fails_with_a_summary_when_a_validation_fails(tiny, tmp_path, capsys, monkeypatch):
    from devkit.declare import KernelSpec

    real = KernelSpec.check

    def broken(spec, *args, **kwargs):
        res = real(spec, *args, **kwargs)
        if spec.name == "matmul_tiled":
            return type(res)(res.kernel, res.shape, res.dtype, 0.5, res.tolerance, False)
        return res

    monkeypatch.setattr(KernelSpec, "check", broken)
    code = _run_into(tmp_path, tmp_path)
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
    from devkit.workflow.hw import store as hw_store
    from devkit.workflow.run_report import report_context

    ctx = host_context("neuron-sdk")
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


def test_run_report_embeds_the_whole_kernel_trace(tiny, tmp_path, capsys):
    import json

    out_dir = tmp_path / "report"
    assert _run_into(tmp_path, out_dir) == 0
    capsys.readouterr()
    trace = json.loads((out_dir / "trace.json").read_text())
    info = trace["otherData"]["devkit"]
    assert info["kernel"] == "xuv_fused" and info["aggregated_instructions"] == 0
    html = (out_dir / "index.html").read_text()
    assert 'id="timeline-viewer"' in html and 'href="trace.json"' in html
    view = json.loads(
        html.split('<script type="application/json" class="tv-data">', 1)[1].split("</script>", 1)[0]
    )
    # every instruction of the kernel is drawn, each DMA queue on its own row, up to the modelled latency
    drawn = sum(len(t["slices"]) for t in view["tracks"])
    assert drawn == info["instructions"] - info["elided_instructions"]
    assert sum(t["name"].startswith("dma") for t in view["tracks"]) >= 2
    assert view["end_us"] == pytest.approx(info["latency_us"])
    assert all(0 <= s[4] <= 1 for t in view["tracks"] for s in t["slices"])
