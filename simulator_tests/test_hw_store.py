"""The hardware stage without hardware: requirements, the fake SDK, the results store, measured vs
predicted."""

from __future__ import annotations

import json
import multiprocessing
import os
from pathlib import Path

import numpy as np
import pytest
from _workflow_support import host_context

from devkit import atomic
from devkit.errors import HardwareUnavailableError
from devkit.workflow.hw import compare as hw_compare
from devkit.workflow.hw import fake as hw_fake
from devkit.workflow.hw import harness as hw_harness
from devkit.workflow.hw import host as hw_host
from devkit.workflow.hw import predict as hw_predict
from devkit.workflow.hw import store as hw_store

CTX = host_context()


def _latency(
    kernel: str = "xuv_fused",
    p50: float = 100.0,
    predicted: float | None = 90.0,
    s: int = 128,
    dtype: str = "bfloat16",
    backend: str = "neuron-sdk",
) -> dict:
    ctx = host_context(backend)
    return hw_store.make_record(
        ctx,
        kind="latency",
        kernel=kernel,
        shape={"S": s, "H": 256, "r": 128, "N": 512},
        dtype=dtype,
        measured_us={"p50": p50, "p99": p50 * 1.1},
        predicted_us=predicted,
    )


# --- requirements -----------------------------------------------------------------------------------


def test_requirements_name_every_missing_piece(monkeypatch):
    monkeypatch.setattr(hw_host, "find_devices", lambda pattern=hw_host.DEVICE_GLOB: ())
    req = hw_host.check_requirements()
    assert not req.ok
    assert len(req.missing) == 2
    assert "/dev/neuron" in req.reason()
    assert "neuronx-cc" in req.reason()


def test_requirements_ok_only_with_device_and_sdk(monkeypatch):
    monkeypatch.setattr(hw_host, "find_devices", lambda pattern=hw_host.DEVICE_GLOB: ("/dev/neuron0",))
    monkeypatch.setattr(hw_host, "_sdk_probe", lambda: (True, "neuronxcc.nki (real Neuron SDK)"))
    assert hw_host.check_requirements().ok
    monkeypatch.setattr(hw_host, "_sdk_probe", lambda: (False, "no module neuronxcc"))
    req = hw_host.check_requirements()
    assert not req.ok and req.missing == ["no module neuronxcc"]


def test_a_mapped_simulator_is_never_taken_for_the_sdk(tmp_path, monkeypatch):
    # a stand-in neuronxcc with an nki package on sys.path, while this process maps the simulator
    (tmp_path / "neuronxcc" / "nki").mkdir(parents=True)
    (tmp_path / "neuronxcc" / "__init__.py").write_text("")
    (tmp_path / "neuronxcc" / "nki" / "__init__.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))
    ok, detail = hw_host._sdk_probe()
    assert not ok and "mapped onto the devkit simulator" in detail
    with pytest.raises(HardwareUnavailableError, match="simulator"):
        hw_host.load_sdk()


def test_load_sdk_fails_loudly_without_the_sdk():
    with pytest.raises(HardwareUnavailableError, match="neuronx-cc is not installed"):
        hw_host.load_sdk()


@pytest.mark.parametrize(
    ("instance", "target"),
    [
        ("trn1.32xlarge", "trn1"),
        ("trn1n.32xlarge", "trn1"),
        ("inf2.xlarge", "inf2"),
        ("trn2.48xlarge", "trn2"),
        ("m5.large", None),
    ],
)
def test_target_for_instance(instance, target):
    assert hw_host.target_for_instance(instance) == target


# --- the store --------------------------------------------------------------------------------------


def test_store_appends_and_reads_back_in_order(tmp_path):
    store = hw_store.ResultsStore(tmp_path)
    recs = [_latency(p50=float(i + 1)) for i in range(3)]
    for r in recs:
        store.append(r)
    path = tmp_path / "xuv_fused.jsonl"
    assert len(path.read_text().splitlines()) == 3
    read = store.read()
    assert [r["id"] for r in read.records] == [r["id"] for r in recs]
    assert list(read.records[0]["shape"]) == ["S", "H", "r", "N"]  # the shape keeps its order
    assert read.damaged == []


def test_an_interrupted_write_loses_nothing_already_recorded(tmp_path):
    store = hw_store.ResultsStore(tmp_path)
    store.append(_latency(p50=1.0))
    path = tmp_path / "xuv_fused.jsonl"
    with path.open("a") as f:  # a writer killed mid-record leaves half a line without a newline
        f.write('{"schema": 1, "kind": "lat')
    store.append(_latency(p50=2.0))
    read = store.read()
    assert [r["measured_us"]["p50"] for r in read.records] == [1.0, 2.0]
    assert len(read.damaged) == 1 and "xuv_fused.jsonl:2" in read.damaged[0]


def _append_many(root: str, n: int, tag: int) -> None:
    store = hw_store.ResultsStore(root)
    for i in range(n):
        store.append(_latency(p50=float(tag * 1000 + i)))


def test_concurrent_appends_interleave_whole_lines(tmp_path):
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_append_many, args=(str(tmp_path), 40, t)) for t in range(3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    read = hw_store.ResultsStore(tmp_path).read()
    assert read.damaged == []
    assert len(read.records) == 120
    assert sorted(r["measured_us"]["p50"] for r in read.records) == sorted(
        float(t * 1000 + i) for t in range(3) for i in range(40)
    )


def test_store_rejects_bad_records(tmp_path):
    store = hw_store.ResultsStore(tmp_path)
    bad = _latency()
    del bad["measured_us"]
    with pytest.raises(hw_store.StoreError, match="measured_us"):
        store.append(bad)
    with pytest.raises(hw_store.StoreError, match="kernel name"):
        store.path_for("../evil")
    assert not list(tmp_path.iterdir())


def test_atomic_write_text_replaces_whole_file(tmp_path):
    path = tmp_path / "sub" / "f.txt"
    atomic.write_text(path, "one\n")
    atomic.write_text(path, "two\n")
    assert path.read_text() == "two\n"
    assert [p.name for p in path.parent.iterdir()] == ["f.txt"]  # no temp files left behind
    with pytest.raises(ValueError, match="newline"):
        atomic.append_line(tmp_path / "x.jsonl", "a\nb")


def test_atomic_write_with_keeps_the_old_file_when_the_writer_fails(tmp_path):
    path = tmp_path / "w.bin"
    atomic.write_with(path, lambda tmp: tmp.write_bytes(b"old"))

    def broken(tmp):
        tmp.write_bytes(b"half")
        raise RuntimeError("writer died")

    with pytest.raises(RuntimeError, match="writer died"):
        atomic.write_with(path, broken)
    assert path.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["w.bin"]  # the temporary file is gone
    atomic.write_with(path, lambda tmp: tmp.write_bytes(b"new"))
    assert path.read_bytes() == b"new"


# --- the fake SDK -----------------------------------------------------------------------------------


def test_fake_benchmark_reports_percentiles_like_the_sdk():
    fake = hw_fake.FakeNki(lambda k, a, kw: None, lambda k, a, kw: 100.0, spread=0.1)

    def kernel(x):
        return x

    bench = fake.benchmark(warmup=2, iters=11)(kernel)
    assert bench(np.zeros(3)) is None
    lat = bench.benchmark_result.nc_latency
    assert lat.get_latency_percentile(50) == pytest.approx(100.0)
    assert lat.get_latency_percentile(0) == pytest.approx(90.0)
    assert lat.get_latency_percentile(100) == pytest.approx(110.0)
    assert lat.get_latency_percentile(99) < 110.0
    with pytest.raises(ValueError, match="percentile"):
        lat.get_latency_percentile(75)
    assert hw_harness.latency_percentiles(bench.benchmark_result)["p50"] == pytest.approx(100.0)
    assert fake.calls == [("benchmark", "kernel", {"warmup": 2, "iters": 11})]


def test_fake_baremetal_returns_registry_reference_or_corrupts_it():
    from devkit.kernels import registry

    spec = registry.get("matmul_tiled")
    inputs = spec.make_inputs({"K": 256, "M": 128, "N": 512}, "float32", seed=1)
    case = hw_harness.Case("matmul_tiled", {"K": 256, "M": 128, "N": 512}, "float32")
    good = hw_fake.fake_nki(registry, "ok").baremetal(spec.kernel_object())(*inputs)
    assert hw_harness.check_numerics(registry, case, inputs, good).passed
    bad = hw_fake.fake_nki(registry, "wrong").baremetal(spec.kernel_object())(*inputs)
    check = hw_harness.check_numerics(registry, case, inputs, bad)
    assert not check.passed and "EXCEEDS" in check.message


def test_check_numerics_rejects_wrong_shape_and_dtype():
    from devkit.kernels import registry

    case = hw_harness.Case("matmul_tiled", {"K": 128, "M": 128, "N": 512}, "float32")
    inputs = registry.get("matmul_tiled").make_inputs(dict(case.shape), "float32")
    ref = registry.get("matmul_tiled").reference(*inputs)
    assert "shape" in hw_harness.check_numerics(registry, case, inputs, ref[:, :10]).message
    assert "dtype" in hw_harness.check_numerics(registry, case, inputs, ref.astype(np.float64)).message


# --- measured vs predicted --------------------------------------------------------------------------


def test_compare_groups_runs_and_takes_medians():
    recs = [_latency(p50=p) for p in (100.0, 110.0, 300.0)] + [_latency(s=256, p50=50.0, predicted=None)]
    num = hw_harness.numerics_record(
        CTX,
        hw_harness.Case("xuv_fused", {"S": 128, "H": 256, "r": 128, "N": 512}, "bfloat16"),
        hw_harness.NumericsCheck(True, 0.001, 0.03, "ok"),
    )
    num["backend"] = "neuron-sdk"
    rows = hw_compare.compare([*recs, num])
    assert [r.shape for r in rows] == ["S=128,H=256,r=128,N=512", "S=256,H=256,r=128,N=512"]
    first = rows[0]
    assert first.runs == 3 and first.measured_p50_us == 110.0
    assert first.ratio == pytest.approx(110.0 / 90.0)
    assert (first.numerics_passed, first.numerics_failed) == (1, 0)
    assert rows[1].ratio is None


def test_store_measurements_exclude_fake_and_aggregate():
    recs = [_latency(p50=100.0), _latency(p50=120.0), _latency(p50=1.0, backend="fake")]
    ms = hw_predict.store_measurements(recs)
    assert len(ms) == 1 and ms[0].measured_us == 110.0 and ms[0].target == "trn1"
    assert ms[0].args["shape"] == {"S": 128, "H": 256, "r": 128, "N": 512}
    assert len(hw_predict.store_measurements(recs, include_fake=True)) == 1  # same group, fake run included
    assert hw_predict.store_measurements(recs, include_fake=True)[0].measured_us == 100.0


def test_store_file_is_plain_json_lines(tmp_path):
    hw_store.ResultsStore(tmp_path).append(_latency())
    line = (tmp_path / "xuv_fused.jsonl").read_text().splitlines()[0]
    rec = json.loads(line)
    for key in (
        "kernel",
        "shape",
        "dtype",
        "target",
        "instance_type",
        "sdk_version",
        "git_commit",
        "measured_us",
        "predicted_us",
        "timestamp",
        "backend",
    ):
        assert key in rec
    assert os.path.getsize(tmp_path / "xuv_fused.jsonl") == len(line) + 1
    assert Path(tmp_path / "xuv_fused.jsonl").read_bytes().endswith(b"\n")


def test_compare_shows_the_latest_run_against_the_previous_one():
    rows = hw_compare.compare([_latency(p50=p) for p in (100.0, 110.0, 300.0)] + [_latency(s=256, p50=50.0)])
    assert rows[0].last_p50_us == 300.0 and rows[0].previous_p50_us == 110.0
    assert rows[0].change == pytest.approx(300.0 / 110.0 - 1)
    assert rows[1].change is None  # a single run: nothing to compare with
    import io

    from rich.console import Console

    out = io.StringIO()
    Console(file=out, width=220).print(hw_compare.comparison_table(rows, 0.25, threshold=0.10))
    assert "+172.7% regression" in out.getvalue()
    section = hw_compare.hardware_section(rows, 0.25, "c")
    assert [r["change_class"] for r in section["rows"]] == ["bad", ""]
    assert section["rows"][0]["change_text"] == "+172.7%"


def _case() -> hw_harness.Case:
    return hw_harness.Case("xuv_fused", {"S": 128, "H": 256, "r": 128, "N": 512}, "bfloat16", slack=0.25)


def test_judge_latency_compares_with_the_previous_measurement_of_the_same_case(tmp_path):
    store = hw_store.ResultsStore(tmp_path)
    first = hw_harness.judge_latency(store, CTX, _case(), {"p50": 100.0}, 90.0, 0.25, 0.10)
    assert first.previous_p50_us is None and not first.regression and "baseline" in first.message
    store.append(_latency(p50=100.0, backend="fake"))
    store.append(_latency(s=256, p50=10.0, backend="fake"))  # another shape: not the same case
    within = hw_harness.judge_latency(store, CTX, _case(), {"p50": 109.0}, 90.0, 0.25, 0.10)
    assert within.previous_p50_us == 100.0 and not within.regression
    slower = hw_harness.judge_latency(store, CTX, _case(), {"p50": 111.0}, 90.0, 0.25, 0.10)
    assert slower.regression and "+11.0%" in slower.message


def test_model_disagreement_is_a_note_not_a_regression(tmp_path):
    store = hw_store.ResultsStore(tmp_path)
    j = hw_harness.judge_latency(store, CTX, _case(), {"p50": 300.0}, 100.0, 0.25, 0.10)
    assert not j.regression
    assert j.model_ratio == pytest.approx(3.0) and "model error: measured/predicted = 3.00" in j.model_note
    assert hw_harness.judge_latency(store, CTX, _case(), {"p50": 110.0}, 100.0, 0.25, 0.10).model_note == ""
    rec = hw_harness.latency_record(CTX, _case(), {"p50": 300.0}, 100.0, 0.25, 1, 5, j)
    assert rec["model_ratio"] == pytest.approx(3.0) and rec["regression"] is False
