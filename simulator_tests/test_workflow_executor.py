"""The executor interface with the local backend (no Ray needed): order, failures, resume, Ctrl-C."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from devkit.workflow import executor
from devkit.workflow.executor import Checkpoint, ExecutorError

CALLS: list[int] = []


def _square(x: int) -> int:
    CALLS.append(x)
    return x * x


def _pair(x: int) -> tuple:
    return (x, None, float(x) / 2, "ok")


def _die_on_negative(x: int) -> int:
    if x < 0:
        os._exit(3)  # the worker process dies without a Python exception
    return x * x


def _sleep_then_mark(item: tuple) -> str:
    seconds, marker = item
    time.sleep(seconds)
    Path(marker).write_text("ran")
    return marker


@pytest.mark.parametrize("jobs", [1, 2])
def test_results_come_back_in_item_order_whatever_the_submission_order(jobs):
    started, done = [], []
    out = executor.run_jobs(
        _square,
        [3, 1, 4, 1, 5],
        jobs=jobs,
        order=[4, 2, 0, 1, 3],
        on_start=started.append,
        on_done=done.append,
    )
    assert out == [9, 1, 16, 1, 25]
    assert sorted(done) == sorted(out) and sorted(started) == [1, 1, 3, 4, 5]
    if jobs == 1:
        assert started == [5, 4, 3, 1, 1]


def test_an_executor_object_and_a_worker_count_are_the_same_thing():
    ex = executor.create("local", jobs=2)
    assert ex.describe() == "2 local worker(s)"
    assert executor.run_jobs(_square, [2, 3], jobs=ex) == executor.run_jobs(_square, [2, 3], jobs=1) == [4, 9]


def test_a_lost_worker_is_reported_with_its_error_never_dropped():
    lost = []

    def on_failure(item, exc, what):
        lost.append((item, what, str(exc)))
        return -1

    out = executor.run_jobs(_die_on_negative, [2, -1], jobs=2, on_failure=on_failure)
    assert len(out) == 2 and out[1] == -1
    assert any(item == -1 and what == "worker failed" and text for item, what, text in lost)
    with pytest.raises(Exception, match=r"terminated abruptly|process"):  # no on_failure: it propagates
        executor.run_jobs(_die_on_negative, [2, -1], jobs=2)


def test_only_module_level_functions_are_shipped():
    with pytest.raises(ExecutorError, match="module-level function"):
        executor.run_jobs(lambda x: x, [1], jobs=1)
    assert executor.fn_ref(_square) == f"{__name__}:_square"
    assert executor.resolve_fn(executor.fn_ref(_square)) is _square


def test_unknown_backend_and_ray_without_address_are_clear_errors(monkeypatch):
    with pytest.raises(ExecutorError, match="unknown executor 'spark'; choose one of local, ray"):
        executor.create("spark")
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    with pytest.raises(ExecutorError, match="--ray-address HOST:PORT or set RAY_ADDRESS"):
        executor.create("ray")
    with pytest.raises(ExecutorError, match="--ray-address is for --executor ray"):
        executor.create("local", address="10.0.0.1:6379")


def test_a_missing_ray_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray raises ImportError
    with pytest.raises(ExecutorError, match=r"pip install 'neuronmm-devkit\[ray\]'"):
        executor.create("ray", address="127.0.0.1:6379")


def test_a_rerun_resumes_skipping_the_finished_jobs(tmp_path):
    items = [1, 2, 3, 4, 5]
    ckpt = Checkpoint.for_jobs("t", executor.fn_ref(_square), items, tmp_path)
    CALLS.clear()

    def driver_dies(result):
        if len(CALLS) == 3:
            raise RuntimeError("driver killed")

    with pytest.raises(RuntimeError, match="driver killed"):
        executor.run_jobs(_square, items, jobs=1, on_done=driver_dies, checkpoint=ckpt)
    assert CALLS == [1, 2, 3] and ckpt.path.is_file()  # the third result was recorded before the callback
    CALLS.clear()
    seen = []
    out = executor.run_jobs(_square, items, jobs=1, on_done=seen.append, checkpoint=ckpt)
    assert out == [1, 4, 9, 16, 25]
    assert CALLS == [4, 5]  # finished jobs are not run again ...
    assert sorted(seen) == out  # ... but still counted as done
    assert ckpt.resumed == 3 and not ckpt.path.exists()  # removed once complete: never a stale cache


def test_a_checkpoint_belongs_to_one_job_list_and_survives_a_torn_line(tmp_path):
    a = Checkpoint.for_jobs("t", "m:f", [1, 2], tmp_path)
    assert a.path != Checkpoint.for_jobs("t", "m:f", [1, 3], tmp_path).path
    assert a.path != Checkpoint.for_jobs("t", "m:g", [1, 2], tmp_path).path
    assert a.path == Checkpoint.for_jobs("t", "m:f", [1, 2], tmp_path).path
    a.record(0, _pair(3))
    with open(a.path, "a") as f:
        f.write('{"i": 1, "resu')  # the driver died mid-write
    assert a.load() == {0: (3, None, 1.5, "ok")}
    with pytest.raises(TypeError, match="JSON data"):
        a.record(1, object())


def test_ctrl_c_stops_the_workers_and_keeps_what_finished(tmp_path):
    items = [(0.0, str(tmp_path / "quick"))] + [(3.0, str(tmp_path / f"slow{i}")) for i in range(3)]
    ckpt = Checkpoint.for_jobs("c", executor.fn_ref(_sleep_then_mark), items, tmp_path / "ck")

    def interrupt(result):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        executor.run_jobs(_sleep_then_mark, items, jobs=2, on_done=interrupt, checkpoint=ckpt)
    time.sleep(4.0)  # long enough for a surviving worker to finish its job
    assert not any((tmp_path / f"slow{i}").exists() for i in range(3))  # the running job was stopped
    assert ckpt.load() == {0: str(tmp_path / "quick")}  # the finished job is kept for the rerun


_VALIDATE_IN_FRESH_PROCESS = """
import json, sys
if sys.argv[1] == "cli":  # what the devkit command has loaded when it validates in its own process
    from devkit import cli
    cli.build_parser()
from devkit.workflow import validate
r = validate.validate_job({"kernel": "matmul_tiled", "examples": 3, "dtypes": None, "target": "trn1"})
print(json.dumps([[dict(e.shape), e.dtype, e.seed] for e in r.examples]))
"""


def test_validate_draws_the_same_examples_whatever_the_process_has_loaded():
    """Hypothesis biases draws toward literals of the local modules loaded: the CLI process loads more than
    a worker does, and both must draw the same examples (devkit.workflow.validate._pinned_constants)."""
    import json
    import subprocess

    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    drawn = [
        json.loads(
            subprocess.run(
                [sys.executable, "-c", _VALIDATE_IN_FRESH_PROCESS, mode],
                capture_output=True, text=True, env=env, timeout=300, check=True,
            ).stdout
        )
        for mode in ("worker", "cli")
    ]  # fmt: skip
    assert drawn[0] == drawn[1]
    assert len(drawn[0]) >= 2


def _die_once(item: tuple) -> int:
    x, marker = item
    if not os.path.exists(marker):  # the first attempt loses its worker; the retry finds the marker
        Path(marker).write_text("died once")
        os._exit(3)
    return x * x


def test_a_job_lost_with_its_worker_is_retried_once_in_a_fresh_pool(tmp_path):
    items = [(2, str(tmp_path / "a")), (3, str(tmp_path / "b")), (4, str(tmp_path / "c"))]
    (tmp_path / "b").write_text("")  # only the first job takes its worker down (the others may go with it)
    (tmp_path / "c").write_text("")
    failures = []
    out = executor.run_jobs(
        _die_once, items, jobs=2, on_failure=lambda item, exc, what: failures.append(item) or -1
    )
    assert out == [4, 9, 16] and failures == []
    assert (tmp_path / "a").read_text() == "died once"


def _raise_on_negative(x: int) -> int:
    CALLS.append(x)
    if x < 0:
        raise ValueError(f"bad item {x}")
    return x


def test_an_error_of_the_job_itself_is_not_retried(tmp_path):
    errors = []
    out = executor.run_jobs(
        _raise_on_negative,
        [1, -2],
        jobs=2,
        on_failure=lambda item, exc, what: errors.append(str(exc)) or None,
    )
    assert out == [1, None] and errors == ["bad item -2"]  # reported once, with its error


def test_cli_names_what_executor_ray_is_missing(monkeypatch, capsys):
    from devkit import cli

    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    assert cli.main(["sweep", "matmul_tiled", "--x", "M", "--executor", "ray"]) == 2
    assert "--ray-address HOST:PORT or set RAY_ADDRESS" in capsys.readouterr().err
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray raises ImportError
    assert (
        cli.main(["tune", "matmul_tiled", "--executor", "ray", "--ray-address", "127.0.0.1:1", "--no-write"])
        == 2
    )
    assert "pip install 'neuronmm-devkit[ray]'" in capsys.readouterr().err
    tests = str(Path(__file__).resolve().parents[1] / "hw_tests")
    assert cli.main(["hw", "run", "--tests", tests, "--executor", "ray", "--tox"]) == 2
    assert "--tox runs on this host" in capsys.readouterr().err
