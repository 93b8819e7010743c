"""Trace export (issue 18): Chrome/Perfetto trace-event JSON of the scheduled trace.

The exported file is checked against a JSON schema (simulator_tests/data/chrome_trace.schema.json),
its event counts and per-track busy totals against the CostReport, and every event's source line
against the kernel file it names.
"""

from __future__ import annotations

import itertools
import json
import linecache
import os
from collections import defaultdict
from pathlib import Path

import _json_schema
import pytest

import devkit
from devkit.cost.chrome_trace import build_trace, tracing_scheduler
from devkit.cost.scheduler import Scheduler
from devkit.cost.trace_builder import TraceBuilder
from devkit.kernels import tutorial
from devkit.nki.runner import TensorSpec, run_kernel
from devkit.targets import load_target
from devkit.trace import ENGINES, MemoryStats

SCHEMA = json.loads((Path(__file__).parent / "data" / "chrome_trace.schema.json").read_text())
K, M, N = 256, 256, 1024  # 2 x 2 output tiles, 2 contraction steps: 36 instructions
TUTORIAL_FILE = os.path.abspath(tutorial.__file__)


def _specs() -> tuple[TensorSpec, TensorSpec]:
    return TensorSpec((K, M), "bfloat16"), TensorSpec((K, N), "bfloat16")


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, devkit.cost.CostReport]:
    path = tmp_path_factory.mktemp("trace") / "tiled.json"
    report = devkit.estimate(tutorial.tiled_matmul, *_specs(), trace=path)
    return json.loads(path.read_text()), report


def _slices(data: dict) -> list[dict]:
    return [e for e in data["traceEvents"] if e["ph"] in ("X", "i")]


def _track_names(data: dict) -> dict[int, str]:
    return {e["tid"]: e["args"]["name"] for e in data["traceEvents"] if e.get("name") == "thread_name"}


def test_export_matches_the_schema(exported: tuple[dict, object]) -> None:
    data, _ = exported
    assert _json_schema.errors(data, SCHEMA) == []


def test_schema_check_rejects_broken_events(exported: tuple[dict, object]) -> None:
    data, _ = exported
    bad = json.loads(json.dumps(data))
    x = next(e for e in bad["traceEvents"] if e["ph"] == "X")
    del x["args"]["source"]
    x["dur"] = -1
    problems = _json_schema.errors(bad, SCHEMA)
    assert problems and any("traceEvents" in p for p in problems)


def test_tracing_leaves_the_report_unchanged(exported: tuple[dict, object]) -> None:
    _, traced = exported
    plain = devkit.estimate(tutorial.tiled_matmul, *_specs())
    assert plain.to_dict() == traced.to_dict()


def test_one_event_per_instruction_on_its_engine(exported: tuple[dict, devkit.cost.CostReport]) -> None:
    data, report = exported
    slices = _slices(data)
    assert len(slices) == report.instructions == data["otherData"]["devkit"]["verbatim_instructions"]
    assert sorted(e["args"]["id"] for e in slices) == list(range(report.instructions))
    by_engine = defaultdict(int)
    for e in slices:
        by_engine[e["args"]["engine"]] += 1
    assert {k: by_engine[k] for k in ENGINES} == report.instructions_by_engine
    assert data["otherData"]["devkit"]["aggregated_instructions"] == 0


def test_track_totals_equal_the_report_busy_times(exported: tuple[dict, devkit.cost.CostReport]) -> None:
    data, report = exported
    names = _track_names(data)
    busy = defaultdict(float)
    dma_engine_ns = 0.0
    for e in _slices(data):
        track = names[e["tid"]]
        if track.startswith("dma"):
            assert e["args"]["engine"] == "dma"
            dma_engine_ns += e["args"]["engine_ns"]
        else:
            assert track.split(" ")[0] == e["args"]["engine"]
            busy[e["args"]["engine"]] += e["args"]["busy_ns"]
            if e["ph"] == "X":  # a compute slice lasts exactly its busy time
                assert e["dur"] == pytest.approx(e["args"]["busy_ns"] * 1e-3, abs=2e-6)
    for engine in ("tensor", "vector", "scalar", "gpsimd"):
        assert busy[engine] * 1e-3 == pytest.approx(report.engine_busy_us[engine], rel=1e-9, abs=1e-9)
    dma_engines = load_target("trn1").dma.engines
    assert data["otherData"]["devkit"]["dma_engines"] == dma_engines
    assert dma_engine_ns * 1e-3 / dma_engines == pytest.approx(report.engine_busy_us["dma"], rel=1e-9)
    assert report.engine_busy_us["tensor"] > 0 and report.engine_busy_us["dma"] > 0


def test_every_event_names_a_real_kernel_line(exported: tuple[dict, object]) -> None:
    data, _ = exported
    lines = set()
    for e in _slices(data):
        filename, _, lineno = e["args"]["source"].rpartition(":")
        assert filename == TUTORIAL_FILE
        text = linecache.getline(filename, int(lineno)).strip()
        assert text and not text.startswith(("#", "def ", '"""')), e["args"]["source"]
        lines.add(int(lineno))
    source = Path(TUTORIAL_FILE).read_text().splitlines()
    assert any("nc_matmul" in source[n - 1] for n in lines)
    assert any("nl.load" in source[n - 1] for n in lines)
    assert any("nl.store" in source[n - 1] for n in lines)


def test_operands_and_bytes_are_described(exported: tuple[dict, object]) -> None:
    data, _ = exported
    mm = [e for e in _slices(data) if e["name"] == "nc_matmul"]
    assert len(mm) == (M // 128) * (N // 512) * (K // 128)
    assert mm[0]["args"]["ins"] == ["sbuf bfloat16[128x128]", "sbuf bfloat16[128x512]"]
    assert mm[0]["args"]["outs"] == ["psum float32[128x512]"]
    assert mm[0]["args"]["flops"] == 2 * 128 * 128 * 512
    loads = [e for e in _slices(data) if e["name"] == "load" and e["args"]["bytes_in"] == 128 * 512 * 2]
    assert loads and all(e["args"]["bytes_out"] == 128 * 512 * 2 for e in loads)
    assert all(e["args"]["dma_engines"] >= 1 for e in _slices(data) if e["args"]["engine"] == "dma")


def test_dma_queues_are_separate_tracks_that_never_half_overlap(exported: tuple[dict, object]) -> None:
    data, _ = exported
    names = _track_names(data)
    dma_tracks = {n for n in names.values() if n.startswith("dma")}
    lines = Path(tutorial.__file__).read_text(encoding="utf-8").splitlines()
    calls = ("a = nl.load(lhsT", "b = nl.load(rhs", "nl.store(out[")  # the tiled matmul's DMA call sites
    sites = {next(i for i, text in enumerate(lines, 1) if text.strip().startswith(c)) for c in calls}
    assert {f"dma tutorial.py:{line}" for line in sites} <= dma_tracks
    by_tid = defaultdict(list)
    for e in data["traceEvents"]:
        if e["ph"] == "X":
            by_tid[e["tid"]].append((e["ts"], e["ts"] + e["dur"]))
    for spans in by_tid.values():
        spans.sort()
        for (_, end), (start, _) in itertools.pairwise(spans):
            assert start >= end - 1e-6


def test_flow_arrows_join_producers_and_consumers(exported: tuple[dict, object]) -> None:
    data, _ = exported
    starts = {e["id"]: e for e in data["traceEvents"] if e["ph"] == "s"}
    ends = {e["id"]: e for e in data["traceEvents"] if e["ph"] == "f"}
    assert starts and starts.keys() == ends.keys()
    assert data["otherData"]["devkit"]["flows"] == len(starts)
    for fid, s in starts.items():
        f = ends[fid]
        assert s["tid"] != f["tid"] and f["ts"] >= s["ts"]


def test_occupancy_counters_reach_the_reported_peaks(exported: tuple[dict, devkit.cost.CostReport]) -> None:
    data, report = exported
    sbuf = [e for e in data["traceEvents"] if e["ph"] == "C" and e["name"] == "SBUF occupancy"]
    psum = [e for e in data["traceEvents"] if e["ph"] == "C" and e["name"] == "PSUM occupancy"]
    assert sbuf and psum
    assert max(e["args"]["bytes_per_partition"] for e in sbuf) == report.sbuf_peak_bytes_per_partition
    assert max(e["args"]["bytes_per_partition"] for e in psum) == report.psum_peak_bytes_per_partition
    ts = [e["ts"] for e in sbuf]
    assert ts == sorted(ts) and ts[-1] <= report.latency_us + 1e-6


def test_past_the_limit_the_rest_is_aggregated_and_totals_hold() -> None:
    sched = tracing_scheduler("trn1", kernel_name="tiled_matmul", limit=100)
    run_kernel(
        tutorial.tiled_matmul,
        (TensorSpec((1024, 256), "bfloat16"), TensorSpec((1024, 2048), "bfloat16")),
        {},
        sink=sched,
    )
    report = sched.report()
    data = build_trace(sched.recorder, report, sched.target)
    assert _json_schema.errors(data, SCHEMA) == []
    info = data["otherData"]["devkit"]
    assert info["verbatim_instructions"] == 100
    assert info["aggregated_instructions"] == report.instructions - 100 > 0
    assert "aggregated" in info["aggregation"] and info["aggregation_bin_us"] > 0
    aggs = [e for e in data["traceEvents"] if e["ph"] == "X" and e["args"].get("aggregated")]
    verbatim = [e for e in _slices(data) if not e["args"].get("aggregated")]
    assert len(verbatim) == 100
    assert sum(e["args"]["count"] for e in aggs) == report.instructions - 100
    names = _track_names(data)
    tensor_ns = sum(e["args"]["busy_ns"] for e in _slices(data) if names[e["tid"]].startswith("tensor"))
    assert tensor_ns * 1e-3 == pytest.approx(report.engine_busy_us["tensor"], rel=1e-9)
    dma_ns = sum(e["args"]["engine_ns"] for e in _slices(data) if names[e["tid"]].startswith("dma"))
    assert dma_ns * 1e-3 / sched.target.dma.engines == pytest.approx(report.engine_busy_us["dma"], rel=1e-9)
    # the aggregates cover the end of the kernel's schedule, not only its start (the latency adds the
    # fixed launch/drain cost, kernel_fixed_ns, which no engine track carries)
    last = max(e["ts"] + e["dur"] for e in aggs)
    fixed_us = sched.params.kernel_fixed_ns * 1e-3
    assert last == pytest.approx(report.latency_us - fixed_us, rel=1e-6)
    for e in aggs:
        for src in e["args"]["lines"]:
            filename, _, lineno = src.rpartition(":")
            assert linecache.getline(filename, int(lineno)).strip()


def test_recorder_off_costs_no_state_and_bad_limits_are_refused() -> None:
    b = TraceBuilder("kern.py")
    ld = b.dma(partitions=128, bytes_per_partition=1024, line=3)
    b.matmul(deps=[ld], line=4)
    sched = Scheduler("trn1")
    assert sched.recorder is None and not sched.wants_occupancy
    for i in b.instrs:
        sched.emit(i)
    sched.finish(MemoryStats())
    assert sched.report().instructions == 2
    from devkit.cost.trace_recorder import TraceRecorder

    with pytest.raises(ValueError, match="limit must be >= 0"):
        TraceRecorder(limit=-1)


def test_cli_cost_trace_writes_the_file(tmp_path: Path) -> None:
    from devkit.cli import main

    out = tmp_path / "t.json"
    rc = main(
        [
            "cost",
            f"{TUTORIAL_FILE}:tiled_matmul",
            "--arg",
            f"bfloat16[{K},{M}]",
            "--arg",
            f"bfloat16[{K},{N}]",
            "--json",
            "--trace",
            str(out),
        ]
    )
    assert rc == 0
    data = json.loads(out.read_text())
    assert data["otherData"]["devkit"]["kernel"] == "tiled_matmul"
    assert len(_slices(data)) == data["otherData"]["devkit"]["instructions"]
