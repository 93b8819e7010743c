"""The hardware stage on a cluster: each promoted test a job on a node with a free ``neuron_cores``.

``devkit hw run --executor ray`` collects the test ids of ``hw_tests/`` here (``pytest --collect-only``),
then runs each id as one job (:func:`run_test`) that asks the cluster for one ``neuron_cores`` -- the
resource Ray detects on Trainium/Inferentia hosts (a custom resource of that name stands in elsewhere,
e.g. with ``--fake-neuron``).  What a job carries: the test id, the test directory and project root
(paths on a shared file system), the pytest arguments, and the driver's earlier records of the test's
kernel (so the regression check compares with the same history as a local run).

On the worker the test runs with pytest against a private temporary results store seeded with that
history; the job returns only the records the test appended.  The driver appends them to *its* store
(:class:`~devkit.workflow.hw.store.ResultsStore`) as each job finishes, so every result is recorded once,
in the driver's project, even when a lost job is retried on another node.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

#: What each hardware job asks the cluster for: one NeuronCore (Ray's resource name for them).
NEURON_RESOURCE = "neuron_cores"
#: Lines of pytest output kept with a failed job (the rest stays on the worker).
OUTPUT_TAIL_LINES = 40


class HwClusterError(RuntimeError):
    """Collecting the hardware tests failed (pytest could not import them or rejected the options)."""


def collect(tests_dir: Path, pytest_args: Sequence[str]) -> list[str]:
    """Test ids of ``tests_dir`` (relative to its parent, the rootdir the jobs run pytest in)."""
    root = tests_dir.resolve().parent
    with tempfile.TemporaryDirectory(prefix="devkit-hw-collect-") as tmp:
        cmd = [sys.executable, "-m", "pytest", str(tests_dir.resolve()), "--collect-only", "-q",
               f"--rootdir={root}", "-p", "no:cacheprovider", "--results-dir", tmp, *pytest_args]  # fmt: skip
        proc = subprocess.run(cmd, cwd=str(root), capture_output=True, text=True)
    ids = [line.strip() for line in proc.stdout.splitlines() if "::" in line and not line.startswith(" ")]
    if proc.returncode not in (0, 5) or (proc.returncode == 0 and not ids):
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-15:])
        raise HwClusterError(f"collecting {tests_dir} failed (pytest exit {proc.returncode}):\n{tail}")
    return ids


def _history(results_dir: Path, test_id: str) -> dict[str, str]:
    """The driver's store file of the test's kernel (``test_<kernel>.py`` -> ``<kernel>.jsonl``), by name."""
    module = Path(test_id.split("::", 1)[0]).stem
    kernel = module[len("test_") :] if module.startswith("test_") else module
    path = results_dir / f"{kernel}.jsonl"
    return {path.name: path.read_text(encoding="utf-8")} if path.is_file() else {}


def jobs_for(
    test_ids: Sequence[str], tests_dir: Path, results_dir: Path, pytest_args: Sequence[str]
) -> list[dict[str, Any]]:
    """One job (plain data) per test id."""
    root = str(tests_dir.resolve().parent)
    return [
        {"test": t, "root": root, "pytest_args": list(pytest_args), "history": _history(results_dir, t)}
        for t in test_ids
    ]


def _outcome(junit: Path) -> str:
    """passed / failed / skipped / error of the single test in a junit XML report."""
    try:
        case = ET.parse(junit).getroot().find(".//testcase")
    except (OSError, ET.ParseError):
        return "error"
    if case is None:
        return "error"
    for tag in ("failure", "error", "skipped"):
        if case.find(tag) is not None:
            return "failed" if tag == "failure" else tag
    return "passed"


def run_test(job: dict[str, Any]) -> dict[str, Any]:
    """Run one hardware test on this machine (the worker side; see the module docstring).

    Returns ``{"test", "outcome", "exit_code", "records", "node", "host", "output"}``: the records the
    test appended, the Ray node id it ran on (None outside Ray) and the tail of pytest's output.
    """
    import socket

    with tempfile.TemporaryDirectory(prefix="devkit-hw-job-") as tmp:
        store = Path(tmp) / "results"
        store.mkdir()
        seeded = {}
        for name, text in job["history"].items():
            (store / name).write_text(text, encoding="utf-8")
            seeded[name] = len(text.splitlines())
        junit = Path(tmp) / "junit.xml"
        cmd = [sys.executable, "-m", "pytest", job["test"], f"--rootdir={job['root']}", "-p", "no:cacheprovider", "-rs",
               "--results-dir", str(store), f"--junitxml={junit}", *job["pytest_args"]]  # fmt: skip
        proc = subprocess.run(cmd, cwd=job["root"], capture_output=True, text=True, env=dict(os.environ))
        records = []
        for path in sorted(store.glob("*.jsonl")):
            lines = path.read_text(encoding="utf-8").splitlines()[seeded.get(path.name, 0) :]
            records += [json.loads(line) for line in lines if line.strip()]
        outcome = _outcome(junit) if proc.returncode in (0, 1) else "error"
    output = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-OUTPUT_TAIL_LINES:])
    return {
        "test": job["test"],
        "outcome": outcome,
        "exit_code": proc.returncode,
        "records": records,
        "node": _ray_node(),
        "host": socket.gethostname(),
        "output": output,
    }


def _ray_node() -> str | None:
    try:
        import ray

        return ray.get_runtime_context().get_node_id() if ray.is_initialized() else None
    except Exception:  # not on Ray
        return None


def run_on_cluster(
    executor: Any,
    tests_dir: Path,
    results_dir: Path,
    pytest_args: Sequence[str],
    *,
    on_result: Callable[[dict[str, Any]], None] | None = None,
) -> list[dict[str, Any]]:
    """Every test of ``tests_dir`` as a job needing one ``neuron_cores``; records go to ``results_dir``
    as each job finishes (then ``on_result(outcome)``).  A job lost after the retries is an ``error``
    outcome naming the cluster's error."""
    from devkit.workflow import executor as executors
    from devkit.workflow.hw.store import ResultsStore

    store = ResultsStore(results_dir)
    jobs = jobs_for(collect(tests_dir, pytest_args), tests_dir, results_dir, pytest_args)

    def lost(job: dict[str, Any], exc: BaseException, what: str) -> dict[str, Any]:
        return {"test": job["test"], "outcome": "error", "exit_code": None, "records": [], "node": None,
                "host": None, "output": f"{what}: {exc}"}  # fmt: skip

    def arrived(result: dict[str, Any]) -> None:
        for record in result["records"]:
            store.append(record)
        if on_result:
            on_result(result)

    return executors.run_jobs(
        run_test, jobs, jobs=executor, on_done=arrived, on_failure=lost, resources={NEURON_RESOURCE: 1}
    )
