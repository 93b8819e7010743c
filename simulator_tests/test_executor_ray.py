"""The Ray backend on a real two-node Ray cluster on this machine (issue 19's done-when test).

A head node (2 CPUs) and a worker node (1 CPU and the custom resource ``neuron_cores`` standing in for
Trainium's NeuronCores) are started with ``ray start`` under a private temporary directory and stopped
at the end -- always, by the process ids found under that directory (never ``ray stop``, which would
stop every Ray on the machine).  Through ``--executor ray`` the CLI must give what the local pool gives:
the same tuning answer, the same sweep files; a sweep survives losing the worker node; the fake
hardware tests run on the node holding ``neuron_cores`` and each result is recorded once in the
driver's store.  Skipped when ``ray`` is not installed (the extra ``neuronmm-devkit[ray]``).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

pytest.importorskip(
    "ray", reason="ray is not installed: pip install 'neuronmm-devkit[ray]' to run the cluster test"
)

REPO = Path(__file__).resolve().parents[1]
RAY = str(Path(sys.executable).with_name("ray"))
#: Ray's token authentication (on by default for ``ray start`` since 2.5x) is off for this private cluster.
ENV = {**os.environ, "RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0", "OPENBLAS_NUM_THREADS": "1"}


def _processes() -> dict[int, tuple[int, str]]:
    """pid -> (parent pid, command line) of every process we can see."""
    out = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmd = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            ppid = int(Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        out[int(entry)] = (ppid, cmd)
    return out


def _kill_tree(match) -> int:
    """SIGKILL every process whose command line satisfies ``match``, and their descendants; returns how many."""
    procs = _processes()
    doomed = {p for p, (_, cmd) in procs.items() if match(cmd) and p != os.getpid()}
    grew = True
    while grew:
        grew = False
        for p, (parent, _) in procs.items():
            if parent in doomed and p not in doomed:
                doomed.add(p)
                grew = True
    for p in doomed:
        try:
            os.kill(p, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return len(doomed)


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Cluster:
    def __init__(self, tmp: str, address: str) -> None:
        self.tmp, self.address = tmp, address

    def kill_worker_node(self) -> int:
        """Kill the worker node (its raylet -- the one holding neuron_cores -- and everything under it)."""
        return _kill_tree(lambda cmd: "raylet/raylet" in cmd and "neuron_cores" in cmd and self.tmp in cmd)


@pytest.fixture(scope="module")
def cluster():
    tmp = tempfile.mkdtemp(prefix="dkray", dir="/tmp")  # short: Ray's socket paths are length-limited
    port = _free_port()
    try:
        subprocess.run(
            [RAY, "start", "--head", "--node-ip-address", "127.0.0.1", f"--port={port}", "--num-cpus", "2",
             "--temp-dir", tmp, "--object-store-memory", "200000000", "--include-dashboard=false",
             "--disable-usage-stats"],
            env=ENV, check=True, capture_output=True, timeout=120,
        )  # fmt: skip
        head_ip = Path(tmp, "ray_current_cluster").read_text().strip().rsplit(":", 1)[0]
        address = f"{head_ip}:{port}"
        subprocess.run(
            [RAY, "start", f"--address={address}", "--num-cpus", "1", "--resources", '{"neuron_cores": 2}',
             "--object-store-memory", "100000000", "--disable-usage-stats"],
            env=ENV, check=True, capture_output=True, timeout=120,
        )  # fmt: skip
        yield Cluster(tmp, address)
    finally:
        _kill_tree(lambda cmd: tmp in cmd)
        time.sleep(0.5)
        _kill_tree(lambda cmd: tmp in cmd)  # anything spawned while the first pass ran
        shutil.rmtree(tmp, ignore_errors=True)


def devkit(*args: str, cwd: Path, check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run(
        [sys.executable, "-m", "devkit", *args], cwd=cwd, env=ENV, capture_output=True, text=True, timeout=600
    )
    if check:
        assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


def _tuning_entries(path: Path) -> list:
    data = json.loads(path.read_text())
    entries = data["kernels"]["matmul_optimized"]["trn1"]["bfloat16"]
    return [(e["when"], e["blocks"], e["note"].rsplit(": ", 1)[1]) for e in entries]


def test_tune_and_sweep_on_ray_equal_the_local_run(cluster, tmp_path):
    ray_opts = ("--executor", "ray", "--ray-address", cluster.address)
    tune = ("tune", "matmul_optimized", "--shape", "K=1024,M=512,N=1024", "--rerank", "3", "--top", "3")
    local = devkit(*tune, "--jobs", "2", "--tuning-file", str(tmp_path / "local.json"), cwd=tmp_path)
    remote = devkit(*tune, *ray_opts, "--tuning-file", str(tmp_path / "ray.json"), cwd=tmp_path)
    assert "Ray cluster at" in remote.stderr
    assert "wrote" in local.stdout  # the table and the verdict come first; the paths written differ
    assert local.stdout.split("wrote")[0] == remote.stdout.split("wrote")[0]
    assert _tuning_entries(tmp_path / "local.json") == _tuning_entries(tmp_path / "ray.json")

    sweep = ("sweep", "matmul_optimized", "--x", "M", "--values", "128,256,384,512")
    devkit(*sweep, "--jobs", "2", "--out", str(tmp_path / "sl"), cwd=tmp_path)
    devkit(*sweep, *ray_opts, "--out", str(tmp_path / "sr"), cwd=tmp_path)
    for suffix in ("json", "csv"):
        local_text = (tmp_path / "sl" / f"matmul_optimized.{suffix}").read_text()
        assert local_text == (tmp_path / "sr" / f"matmul_optimized.{suffix}").read_text()
    rows = json.loads((tmp_path / "sr" / "matmul_optimized.json").read_text())["rows"]
    assert [r["M"] for r in rows] == [128, 256, 384, 512] and all(r["matmul_optimized"] for r in rows)


def test_validate_and_e2e_on_ray_equal_the_local_run(cluster, tmp_path):
    ray_opts = ("--executor", "ray", "--ray-address", cluster.address)
    validate = ("validate", "matmul_tiled", "matmul_hoisted", "--examples", "3")
    local = devkit(*validate, cwd=tmp_path)
    assert local.stdout == devkit(*validate, *ray_opts, cwd=tmp_path).stdout
    assert local.stdout.count("examples within tolerance") == 2
    e2e = ("e2e", "--all", "--provider", "roofline", "--json", "--no-cache")
    local = devkit(*e2e, cwd=tmp_path)
    assert json.loads(local.stdout) == json.loads(devkit(*e2e, *ray_opts, cwd=tmp_path).stdout)


def _small_hw_tests(root: Path) -> Path:
    """hw_tests/ with the kit's conftest and one small case of matmul_tiled (two tests), rendered by
    ``devkit promote``'s own template so the test stays in step with it."""
    from devkit import hw
    from devkit.workflow import promote

    tests = root / "hw_tests"
    tests.mkdir(parents=True)
    shutil.copy(REPO / "hw_tests" / "conftest.py", tests / "conftest.py")
    case = hw.Case(
        kernel="matmul_tiled", shape={"K": 256, "M": 128, "N": 256}, dtype="bfloat16",
        predicted_us={"trn1": 10.0}, slack=10.0,
    )  # fmt: skip
    data = promote.case_file(
        "matmul_tiled", [case], description="small case", command="test", warmup=2, iters=5
    )
    promote.write_tests(tests, "matmul_tiled", data)
    return tests


def _neuron_node(address: str) -> str:
    code = (
        f"import ray; ray.init(address={address!r}, log_to_driver=False); "
        "print(*[n['NodeID'] for n in ray.nodes() if n['Alive'] and n['Resources'].get('neuron_cores')])"
    )
    out = subprocess.run([sys.executable, "-c", code], env=ENV, capture_output=True, text=True, timeout=120)
    ids = out.stdout.split()
    assert len(ids) == 1, out.stdout + out.stderr
    return ids[0]


def test_hw_run_places_each_test_on_the_neuron_node_and_records_it_once(cluster, tmp_path):
    tests = _small_hw_tests(tmp_path)
    results = tmp_path / "results-store"
    proc = devkit("hw", "run", "--tests", str(tests), "--results-dir", str(results), "--executor", "ray",
                  "--ray-address", cluster.address, "--", "--fake-neuron", "ok", cwd=tmp_path)  # fmt: skip
    node = _neuron_node(cluster.address)
    ran = [ln for ln in proc.stderr.splitlines() if ": passed on node " in ln]
    assert len(ran) == 2, proc.stderr
    assert all(f"on node {node} " in ln for ln in ran), proc.stderr
    records = [json.loads(ln) for ln in (results / "matmul_tiled.jsonl").read_text().splitlines()]
    assert sorted(r["kind"] for r in records) == ["latency", "numerics"]  # one record per test, once
    assert len({r["id"] for r in records}) == 2
    assert all(r["backend"] == "fake" for r in records)
    assert not list(tmp_path.glob("hw_tests/**/*.jsonl"))  # nothing written next to the tests


def test_a_sweep_survives_losing_the_worker_node(cluster, tmp_path):
    values = ",".join(str(128 * k) for k in range(1, 13))
    sweep = ("sweep", "matmul_optimized", "--x", "M", "--values", values, "--no-baselines")
    devkit(*sweep, "--jobs", "2", "--out", str(tmp_path / "local"), cwd=tmp_path)
    work = tmp_path / "ray"
    work.mkdir()
    proc = subprocess.Popen(
        [sys.executable, "-m", "devkit", *sweep, "--executor", "ray", "--ray-address", cluster.address,
         "--out", str(tmp_path / "remote")],
        cwd=work, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 300
        journal = work / ".devkit-cache" / "jobs"
        while time.monotonic() < deadline and proc.poll() is None:  # first results recorded: kill mid-sweep
            if any(p.read_text().count("\n") >= 1 for p in journal.glob("sweep-*.jsonl")):
                break
            time.sleep(0.2)
        assert proc.poll() is None, "the sweep finished before the worker node could be killed"
        assert cluster.kill_worker_node() > 0
        out, err = proc.communicate(timeout=600)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, out + err
    local = json.loads((tmp_path / "local" / "matmul_optimized.json").read_text())
    remote = json.loads((tmp_path / "remote" / "matmul_optimized.json").read_text())
    assert remote == local
    assert len(remote["rows"]) == 12 and all(r["matmul_optimized"] is not None for r in remote["rows"])
    assert not list(journal.glob("*.jsonl"))  # the checkpoint is gone once every point has its result
