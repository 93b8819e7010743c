"""Issue 17: every bad input gets a clear error, early; long work shows progress; nothing is lost on Ctrl-C.

The CLI table runs each case through the real entry point (``devkit.cli.main``, in process) and checks
the exit status, that the message is ONE line naming the culprit, and that no traceback is shown.  The
cases where the user's own code raises check the opposite: a traceback of the user's frames only.  The
Python API table holds ``devkit.simulate``/``devkit.estimate`` to the same standard.  Ctrl-C is a real
SIGINT sent to a ``python -m devkit`` subprocess.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pytest

import devkit
from devkit import cli
from devkit.commands import _outputs
from devkit.errors import DtypeError, KernelArgumentError, UnwrittenOutputWarning

ROOT = Path(__file__).resolve().parent.parent
KIT = str(ROOT / "devkit") + os.sep

KERNELS = """
import neuronxcc.nki as nki
import neuronxcc.nki.language as nl


@nki.jit
def copy(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    nl.store(out, nl.load(a))
    return out


@nki.jit
def forgets_output(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    t = nl.load(a)
    return out


@nki.jit
def racy(a):
    out = nl.ndarray((128, 512), dtype=a.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(4):
        x = nl.load(a)
        nl.store(out, value=nl.multiply(x, i))
    return out


def helper(n):
    raise ValueError(f"my kernel cannot tile {n} columns")


@nki.jit
def user_bug(a):
    helper(a.shape[1])
    return a


@nki.jit
def long_loop(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    for i in nl.sequential_range(10_000_000):
        nl.store(out, nl.load(a))
    return out
"""


@pytest.fixture(scope="module")
def ws(tmp_path_factory) -> Path:
    """A workspace: kernel files, scripts, tables and a file where directories are expected."""
    d = tmp_path_factory.mktemp("cli_errors")
    (d / "k.py").write_text(KERNELS)
    (d / "bad_import.py").write_text("import a_module_that_is_not_installed\n\n\ndef k(a):\n    return a\n")
    (d / "syntax.py").write_text("def k(a)\n    return a\n")
    (d / "raises.py").write_text(
        "def inner():\n    raise RuntimeError('boom from the user script')\n\n\ninner()\n"
    )
    (d / "exits.py").write_text("import sys\nsys.exit(3)\n")
    (d / "a_file").write_text("not a directory\n")
    (d / "corrupt_tuning.json").write_text("{ this is not json")
    (d / "old_schema_tuning.json").write_text('{"schema": 7, "kernels": {}}')
    (d / "empty_dir").mkdir()
    (d / "out.safetensors").mkdir()
    (d / "m.jsonl").write_text(
        json.dumps(
            {
                "kernel": f"{ROOT}/devkit/kernels/matmul.py:matmul_optimized",
                "target": "trn1",
                "measured_us": 10.0,
                "args": {"lhsT": "bfloat16[512,256]", "rhs": "bfloat16[512,512]"},
            }
        )
        + "\n"
    )
    return d


@pytest.fixture
def readonly_dir(tmp_path, monkeypatch) -> Path:
    """A directory no file can be created in.  The superuser writes through permission bits, so for
    root the writability probe is told this directory is on a read-only file system (the probe itself
    is checked against a really unwritable location in test_probe_detects_an_unwritable_location)."""
    d = tmp_path / "ro"
    d.mkdir()
    (d / "tuning.json").write_text('{"schema": 1, "kernels": {}}')
    from devkit.cost.params import PARAMS_PATH

    (d / "params.toml").write_text(Path(PARAMS_PATH).read_text())
    d.chmod(0o555)
    if os.geteuid() == 0:
        real = _outputs._probe
        read_only = "cannot create files there: read-only file system"
        monkeypatch.setattr(_outputs, "_probe", lambda p: read_only if Path(p).absolute() == d else real(p))
    yield d
    d.chmod(0o755)


def _argv(template: str, ws: Path, ro: Path | None) -> list[str]:
    """The command line ``template`` (words split on spaces) with ``{ws}``, ``{root}`` and ``{ro}`` filled in."""
    out = []
    for a in template.split():
        a = a.replace("{ws}", str(ws)).replace("{root}", str(ROOT))
        if ro is not None:
            a = a.replace("{ro}", str(ro))
        out.append(a)
    return out


#: ``devkit cost`` of the workspace's ``copy`` kernel on a valid argument, and ``devkit tune`` of xuv_fused on
#: a small shape: the cases below add the one bad option to these.
COST_COPY = "cost {ws}/k.py:copy --arg bfloat16[128,512]"
TUNE_SMALL = "tune xuv_fused --shape 1,256,128,512"

# (case id, command line (words split on spaces), substrings the one-line message must contain)
USAGE_CASES = [
    # ---- the cases of the issue ----
    ("cost-too-many-args", COST_COPY + " --arg float32[128,512]", ["copy(a)", "2 --arg"]),
    ("cost-no-args", "cost {ws}/k.py:copy", ["copy(a)", "'a'"]),
    ("cost-unknown-kwarg", COST_COPY + " --kwarg tile=4", ["--kwarg tile", "'tile'"]),
    ("cost-grid-abc", COST_COPY + " --grid abc", ["--grid", "abc"]),
    (
        "cost-kit-kernel-shape-mismatch",
        "cost {root}/devkit/kernels/matmul.py:matmul_optimized --arg bfloat16[1024,512] --arg bfloat16[2048,512]",
        ["[1024, 512]", "[2048, 512]", "contraction"],
    ),
    ("simulate-missing-module", "simulate -m no_such_module_xyz", ["-m", "no_such_module_xyz"]),
    ("simulate-directory", "simulate {ws}/empty_dir", ["empty_dir", "__main__.py"]),
    ("run-out-readonly", "run --out {ro}/report", ["--out", "/ro/report"]),
    ("run-out-is-a-file", "run --out {ws}/a_file", ["--out", "a_file", "file"]),
    (
        "tune-tuning-file-readonly",
        TUNE_SMALL + " --tuning-file {ro}/tuning.json",
        ["--tuning-file", "tuning.json"],
    ),
    (
        "tune-tuning-file-corrupt",
        TUNE_SMALL + " --tuning-file {ws}/corrupt_tuning.json",
        ["--tuning-file", "corrupt_tuning.json", "tuning table"],
    ),
    ("promote-out-dir-readonly", "promote xuv_fused --out-dir {ro}/hw", ["--out-dir", "/ro/hw"]),
    (
        "calibrate-write-readonly-params",
        "calibrate {ws}/m.jsonl --write --params-file {ro}/params.toml --max-evaluations 3",
        ["--params-file", "params.toml"],
    ),
    ("hw-run-results-dir-readonly", "hw run --results-dir {ro}/results", ["--results-dir", "/ro/results"]),
    (
        "hw-report-nonexistent",
        "hw report --results /nonexistent/results",
        ["--results", "/nonexistent/results"],
    ),
    ("cost-timeline-without-json", COST_COPY + " --timeline", ["--timeline", "--json"]),
    (
        "e2e-context-beyond-model",
        "e2e --model Llama-3.2-1B --context 10000000",
        ["--context", "10000000", "131,072"],
    ),
    # ---- 30+ more ----
    ("cost-unknown-target", COST_COPY + " --target tpu", ["--target", "tpu", "trn1"]),
    (
        "cost-zero-dimension",
        "cost {ws}/k.py:copy --arg bfloat16[0,512]",
        ["--arg", "bfloat16[0,512]", "positive"],
    ),
    ("cost-unknown-dtype", "cost {ws}/k.py:copy --arg bfloat17[128,512]", ["--arg", "bfloat17"]),
    (
        "cost-malformed-arg",
        "cost {ws}/k.py:copy --arg bfloat16(128,512)",
        ["--arg", "bfloat16(128,512)", "DTYPE[D0"],
    ),
    ("cost-kwarg-without-value", COST_COPY + " --kwarg tile", ["--kwarg", "tile", "NAME=VALUE"]),
    ("cost-kwarg-bad-name", COST_COPY + " --kwarg 1x=3", ["--kwarg", "1x"]),
    ("cost-no-colon", "cost {ws}/k.py --arg bfloat16[128,512]", ["k.py", "FILE.py:KERNEL"]),
    ("cost-missing-file", "cost {ws}/nope.py:copy --arg bfloat16[128,512]", ["nope.py"]),
    ("cost-missing-kernel", "cost {ws}/k.py:cpy --arg bfloat16[128,512]", ["'cpy'", "copy"]),
    ("cost-grid-zero", COST_COPY + " --grid 0", ["--grid", "'0'"]),
    ("cost-grid-negative", COST_COPY + " --grid 2,-1", ["--grid", "2,-1"]),
    (
        "cost-kit-kernel-dtype-mismatch",
        "cost {root}/devkit/kernels/mlp.py:dense_mlp --arg bfloat16[128,256] --arg float32[256,512]"
        " --arg bfloat16[256,512] --arg bfloat16[512,256]",
        ["bfloat16", "float32", "dtype"],
    ),
    ("cost-no-kernel", "cost", ["FILE.py:KERNEL"]),
    ("simulate-no-such-script", "simulate {ws}/nope.py", ["SCRIPT", "nope.py"]),
    ("simulate-m-without-module", "simulate -m", ["-m", "MODULE"]),
    ("tune-unknown-kernel", "tune nope_kernel --shape 1,2,3,4", ["nope_kernel"]),
    ("tune-bad-shape", "tune xuv_fused --shape 1,2,3", ["1,2,3"]),
    ("tune-top-zero", TUNE_SMALL + " --top 0", ["--top"]),
    ("tune-top-not-a-number", TUNE_SMALL + " --top x", ["--top", "'x'"]),
    ("tune-unknown-target", TUNE_SMALL + " --target tpu", ["tpu"]),
    ("tune-jobs-zero", TUNE_SMALL + " --jobs 0", ["--jobs"]),
    (
        "tune-tuning-file-old-schema",
        TUNE_SMALL + " --tuning-file {ws}/old_schema_tuning.json",
        ["--tuning-file", "schema 7"],
    ),
    (
        "tune-tuning-file-is-a-dir",
        TUNE_SMALL + " --tuning-file {ws}/empty_dir",
        ["--tuning-file", "empty_dir", "directory"],
    ),
    ("run-unknown-target", "run --target tpu", ["--target", "tpu", "unknown target"]),
    ("run-jobs-zero", "run --jobs 0", ["--jobs", "'0'"]),
    ("run-results-nonexistent", "run --results /nonexistent/results", ["--results", "/nonexistent/results"]),
    ("run-out-under-a-file", "run --out {ws}/a_file/report", ["--out", "a_file"]),
    ("promote-nothing-named", "promote", ["KERNEL", "--all"]),
    ("promote-unknown-kernel", "promote nope_kernel", ["nope_kernel"]),
    ("promote-out-dir-is-a-file", "promote xuv_fused --out-dir {ws}/a_file", ["--out-dir", "a_file"]),
    ("promote-negative-slack", "promote xuv_fused --slack -1 --out-dir {ws}/promoted", ["slack", "-1"]),
    ("e2e-no-model", "e2e", ["--model", "--all"]),
    ("e2e-unknown-model", "e2e --model Llama-9000", ["Llama-9000", "Llama-3.2-1B"]),
    ("e2e-batch-zero", "e2e --model Qwen3-4B --batch 0", ["batch", "0"]),
    ("e2e-compression-one", "e2e --model Qwen3-4B --compression 1.5", ["compression", "1.5"]),
    ("e2e-context-plus-generate", "e2e --model Qwen3-4B --context 40950", ["--context", "40950", "40,960"]),
    ("e2e-unknown-target", "e2e --model Qwen3-4B --target tpu", ["--target", "'tpu'"]),
    (
        "svd-missing-input",
        "svd compress {ws}/nope.safetensors {ws}/o.safetensors --ratio 0.2",
        ["nope.safetensors"],
    ),
    (
        "svd-whiten-without-calib",
        "svd compress {ws}/nope.safetensors {ws}/o.safetensors --ratio 0.2 --whiten",
        ["--whiten", "--calib"],
    ),
    (
        "svd-output-is-a-dir",
        "svd compress {ws}/a_file {ws}/out.safetensors --ratio 0.2",
        ["OUTPUT", "out.safetensors", "directory"],
    ),
    ("calibrate-no-source", "calibrate", ["MEASUREMENTS", "--from"]),
    ("calibrate-unknown-param", "calibrate {ws}/m.jsonl --params nope", ["--params", "nope"]),
    (
        "calibrate-params-file-missing",
        "calibrate {ws}/m.jsonl --params-file {ws}/nope.toml",
        ["--params-file", "nope.toml"],
    ),
    ("hw-report-out-is-a-file", "hw report --results {ws}/empty_dir --out {ws}/a_file", ["--out", "a_file"]),
    (
        "hw-run-tests-nonexistent",
        "hw run --tests /nonexistent/hw_tests",
        ["--tests", "/nonexistent/hw_tests"],
    ),
    ("hw-run-results-dir-is-a-file", "hw run --results-dir {ws}/a_file", ["--results-dir", "a_file"]),
    ("svd-no-subcommand", "svd", ["subcommand", "compress"]),
    ("hw-no-subcommand", "hw", ["subcommand", "run", "report"]),
    ("simulate-nothing-named", "simulate", ["SCRIPT", "-m MODULE"]),
    ("hw-report-slack-zero", "hw report --results {ws}/empty_dir --slack 0", ["devkit hw report", "--slack"]),
    ("calibrate-no-budget", "calibrate {ws}/m.jsonl --max-evaluations 0", ["--max-evaluations", "'0'"]),
    (
        "cost-kit-kernel-wrong-rank",
        "cost {root}/devkit/kernels/matmul.py:matmul_optimized --arg bfloat16[1024] --arg bfloat16[1024]",
        ["lhsT", "[1024]", "2-D"],
    ),
    (
        "cost-kit-kernel-3d-input",
        "cost {root}/devkit/kernels/neuronmm.py:xuv_fused --arg bfloat16[1,128,256]"
        " --arg bfloat16[256,128] --arg bfloat16[128,512]",
        ["[1, 128, 256]", "2-D"],
    ),
    ("unknown-command", "frobnicate", ["frobnicate"]),
    ("unknown-option", "info --bogus", ["--bogus"]),
]


def _one_line_error(err: str) -> str:
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1, f"expected one line, got:\n{err}"
    return lines[0]


@pytest.mark.parametrize(("argv", "needles"), [c[1:] for c in USAGE_CASES], ids=[c[0] for c in USAGE_CASES])
def test_cli_usage_error_is_one_line_naming_the_culprit(argv, needles, ws, readonly_dir, capsys):
    code = cli.main(_argv(argv, ws, readonly_dir))
    captured = capsys.readouterr()
    assert code == 2, captured.out + captured.err
    line = _one_line_error(captured.err)
    assert line.startswith("devkit"), line
    needles = [n.replace("{ws}", str(ws)) for n in needles]
    for needle in needles:
        assert needle in line, f"{needle!r} not in {line!r}"
    assert "Traceback" not in captured.out + captured.err


def test_usage_errors_leave_nothing_behind(ws, readonly_dir, capsys):
    """Checked before any work: no report directory, tuning table or test file appears."""
    assert cli.main(["run", "--out", str(ws / "a_file")]) == 2
    assert cli.main(["promote", "xuv_fused", "--slack", "-1", "--out-dir", str(ws / "promoted")]) == 2
    assert not (ws / "promoted").exists()
    assert (ws / "corrupt_tuning.json").read_text() == "{ this is not json"
    assert sorted(p.name for p in readonly_dir.iterdir()) == ["params.toml", "tuning.json"]


# ---- the user's own exceptions: the user's traceback, not the kit's --------------------------------

USER_CODE_CASES = [
    (
        "cost-user-import-fails",
        "cost {ws}/bad_import.py:k --arg bfloat16[128,512]",
        "bad_import.py",
        "ModuleNotFoundError: No module named 'a_module_that_is_not_installed'",
    ),
    ("cost-user-syntax-error", "cost {ws}/syntax.py:k --arg bfloat16[128,512]", "syntax.py", "SyntaxError: "),
    (
        "cost-user-kernel-raises",
        "cost {ws}/k.py:user_bug --arg bfloat16[128,512]",
        "k.py",
        "ValueError: my kernel cannot tile 512 columns",
    ),
    (
        "simulate-user-script-raises",
        "simulate {ws}/raises.py",
        "raises.py",
        "RuntimeError: boom from the user script",
    ),
]


@pytest.mark.parametrize(
    ("argv", "user_file", "last_line"), [c[1:] for c in USER_CODE_CASES], ids=[c[0] for c in USER_CODE_CASES]
)
def test_user_exception_shows_the_users_frames_only(argv, user_file, last_line, ws, capsys):
    code = cli.main(_argv(argv, ws, None))
    err = capsys.readouterr().err
    assert code == 1, err
    assert err.strip().splitlines()[-1].startswith(last_line), err
    assert user_file in err
    assert KIT not in err and "<frozen" not in err and "runpy" not in err, err


def test_user_traceback_lists_the_helper_frame(ws, capsys):
    assert cli.main(["cost", f"{ws}/k.py:user_bug", "--arg", "bfloat16[128,512]"]) == 1
    err = capsys.readouterr().err
    assert "in user_bug" in err and "in helper" in err and err.index("in user_bug") < err.index("in helper")


def test_kernel_fault_is_one_line_with_the_kernel_location(ws, capsys):
    # copy's load of 256 partitions is the fault
    assert cli.main(["cost", f"{ws}/k.py:copy", "--arg", "bfloat16[256,512]"]) == 1
    line = _one_line_error(capsys.readouterr().err)
    assert line.startswith("devkit cost: kernel fault: ") and f"{ws}/k.py:" in line and "partition" in line


def test_simulate_passes_the_scripts_exit_status(ws):
    assert cli.main(["simulate", str(ws / "exits.py")]) == 3


# ---- what cost-only runs did not check, and outputs never written ---------------------------------


def test_cost_only_estimate_names_the_skipped_checks(ws, capsys):
    assert cli.main(["cost", f"{ws}/k.py:racy", "--arg", "float32[128,512]"]) == 0
    captured = capsys.readouterr()
    notes = [ln for ln in captured.err.splitlines() if "checks not run" in ln]
    assert len(notes) == 1 and "affine-race" in notes[0] and "uninitialized-read" in notes[0]
    assert cli.main(["cost", f"{ws}/k.py:racy", "--arg", "float32[128,512]", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["checks_skipped"] == ["uninitialized-read", "affine-race"]
    assert data["outputs_unwritten"] == []


def test_cost_flags_an_output_the_kernel_never_wrote(ws, capsys):
    assert cli.main(["cost", f"{ws}/k.py:forgets_output", "--arg", "float32[128,512]", "--json"]) == 0
    captured = capsys.readouterr()
    data = json.loads(captured.out)
    assert len(data["outputs_unwritten"]) == 1 and "k.py:" in data["outputs_unwritten"][0]
    assert "never written" in captured.err and "[128, 512]" in captured.err


# ---- the Python API ---------------------------------------------------------------------------------


def _load_ws_kernels(ws: Path):
    from devkit.workflow.kernel_ref import load_kernel

    return {n: load_kernel(f"{ws}/k.py:{n}") for n in ("copy", "forgets_output", "racy")}


X = np.ones((128, 512), dtype=np.float32)

API_CASES = [
    ("simulate-not-a-kernel", lambda k: devkit.simulate(3, X), TypeError, ["kernel function", "int"]),
    (
        "simulate-too-many-args",
        lambda k: devkit.simulate(k["copy"], X, X),
        TypeError,
        ["copy(a)", "too many"],
    ),
    ("simulate-missing-arg", lambda k: devkit.simulate(k["copy"]), TypeError, ["copy(a)", "'a'"]),
    (
        "simulate-unknown-kwarg",
        lambda k: devkit.simulate(k["copy"], X, tile=4),
        TypeError,
        ["copy(a)", "'tile'"],
    ),
    (
        "simulate-unknown-target",
        lambda k: devkit.simulate(k["copy"], X, target="tpu"),
        ValueError,
        ["tpu", "trn1"],
    ),
    (
        "simulate-grid-zero",
        lambda k: devkit.simulate(k["copy"], X, grid=0),
        KernelArgumentError,
        ["grid", "[0]"],
    ),
    ("simulate-grid-text", lambda k: devkit.simulate(k["copy"], X, grid="abc"), TypeError, ["grid", "'abc'"]),
    (
        "simulate-options-text",
        lambda k: devkit.simulate(k["copy"], X, options="strict"),
        TypeError,
        ["options", "SimOptions"],
    ),
    (
        "simulate-object-array",
        lambda k: devkit.simulate(k["copy"], np.array([[1, "a"]], dtype=object)),
        DtypeError,
        ["'a'", "object"],
    ),
    (
        "simulate-complex-array",
        lambda k: devkit.simulate(k["copy"], X.astype(np.complex64)),
        DtypeError,
        ["'a'", "complex64"],
    ),
    (
        "estimate-too-many-args",
        lambda k: devkit.estimate(k["copy"], X, X),
        TypeError,
        ["devkit.estimate", "copy(a)"],
    ),
    ("estimate-unknown-target", lambda k: devkit.estimate(k["copy"], X, target="tpu"), ValueError, ["tpu"]),
    (
        "estimate-unknown-dtype",
        lambda k: devkit.estimate(k["copy"], _spec((128, 512), "complex64")),
        DtypeError,
        ["complex64"],
    ),
    ("estimate-grid-float", lambda k: devkit.estimate(k["copy"], X, grid=(2.5,)), TypeError, ["grid", "2.5"]),
]


def _spec(shape, dtype):
    from devkit.nki.runner import TensorSpec

    return TensorSpec(shape, dtype)


@pytest.mark.parametrize(
    ("call", "exc", "needles"), [c[1:] for c in API_CASES], ids=[c[0] for c in API_CASES]
)
def test_python_api_error_names_the_culprit(call, exc, needles, ws):
    kernels = _load_ws_kernels(ws)
    with pytest.raises(exc) as info:
        call(kernels)
    message = str(info.value)
    assert "\n" not in message.strip()
    for needle in needles:
        assert needle in message, f"{needle!r} not in {message!r}"
    # raised where the call is checked, not deep inside NumPy or the simulator's machinery
    frames = [f.filename for f in __import__("traceback").extract_tb(info.tb)]
    assert not any(os.sep + "numpy" + os.sep in f for f in frames)
    assert len(frames) <= 8, frames


def test_simulate_warns_naming_an_output_never_written(ws):
    k = _load_ws_kernels(ws)
    with pytest.warns(
        UnwrittenOutputWarning, match=r"forgets_output: the returned tensor .*\[128, 512\].*k\.py:\d+"
    ):
        out = devkit.simulate(k["forgets_output"], X)
    assert np.isnan(out).all()
    with warnings.catch_warnings():
        warnings.simplefilter("error", UnwrittenOutputWarning)
        devkit.simulate(k["copy"], X)  # a kernel that stores its output: no warning


def test_estimate_reports_skipped_checks_and_unwritten_outputs(ws):
    k = _load_ws_kernels(ws)
    cost_only = devkit.estimate(k["forgets_output"], _spec((128, 512), "float32"))
    assert cost_only.checks_skipped == ("uninitialized-read", "affine-race")
    assert len(cost_only.outputs_unwritten) == 1
    with_values = devkit.estimate(k["copy"], X)
    assert with_values.checks_skipped == () and with_values.outputs_unwritten == ()
    no_races = devkit.estimate(k["copy"], X, options=devkit.SimOptions(check_races=False))
    assert no_races.checks_skipped == ("affine-race",)
    assert no_races.to_dict()["checks_skipped"] == ["affine-race"]


# ---- output locations, files, help, README ----------------------------------------------------------


def test_probe_detects_an_unwritable_location():
    assert _outputs._probe(Path("/proc")) is not None  # writable by nobody, not even the superuser
    with pytest.raises(Exception, match="--out '/proc/devkit-report'"):
        _outputs.check_dir("/proc/devkit-report", "--out")


def test_files_are_created_with_the_umask(tmp_path):
    from devkit import atomic

    old = os.umask(0o022)
    try:
        new = atomic.write_text(tmp_path / "report.html", "x")
        assert new.stat().st_mode & 0o777 == 0o644
        os.umask(0o077)
        private = atomic.write_text(tmp_path / "private.json", "x")
        assert private.stat().st_mode & 0o777 == 0o600
        os.chmod(new, 0o664)
        atomic.write_text(new, "y")  # a rewrite keeps the file's mode
        assert new.stat().st_mode & 0o777 == 0o664
    finally:
        os.umask(old)


def test_hotspot_locations_keep_the_line_number():
    from devkit.cost.render import source_location

    deep = "/very/long/path/to/a/project/with/many/directories/kernels/my_kernel.py"
    text = source_location(deep, 1234)
    assert text.endswith("my_kernel.py:1234") and text.startswith("…") and len(text) <= 36
    here = os.path.join(os.getcwd(), "k.py")
    assert source_location(here, 7) == "k.py:7"


def _walk(parser, prefix="devkit"):
    import argparse

    yield prefix, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _walk(sub, f"{prefix} {name}")


def test_help_texts_are_plain_text():
    for name, parser in _walk(cli.build_parser()):
        text = parser.format_help()
        assert "``" not in text and ":mod:" not in text and ":func:" not in text and ":class:" not in text, (
            name
        )


def test_readme_quotes_shell_sensitive_arguments():
    readme = (ROOT / "README.md").read_text()
    assert "--arg bfloat16[" not in readme
    assert "--arg 'bfloat16[8192,4096]'" in readme


def test_hw_run_with_the_fake_backend_does_not_promise_skips(monkeypatch, tmp_path, capsys):
    import devkit.commands.hw as hw_cmd

    calls = []
    monkeypatch.setattr(hw_cmd.subprocess, "call", lambda cmd, **kw: calls.append(cmd) or 0)
    tests = tmp_path / "hw_tests"
    tests.mkdir()
    code = cli.main(
        [
            "hw",
            "run",
            "--tests",
            str(tests),
            "--results-dir",
            str(tmp_path / "r"),
            "--",
            "--fake-neuron",
            "ok",
        ]
    )
    err = capsys.readouterr().err
    assert code == 0 and calls and "--fake-neuron" in calls[0]
    assert "will be skipped" not in err and "fake backend" in err


# ---- progress and Ctrl-C (real subprocesses) ----------------------------------------------------------


def _devkit(args: list[str], cwd: Path, **kw) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=str(ROOT), OPENBLAS_NUM_THREADS="1")
    return subprocess.Popen(
        [sys.executable, "-m", "devkit", *args],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        **kw,
    )


def _wait_for(proc: subprocess.Popen, stream_text: list[str], needle: str, timeout: float = 60) -> None:
    """Read stderr lines until ``needle`` appears (the process is then known to be working)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line:
            break
        stream_text.append(line)
        if needle in line:
            return
    raise AssertionError(f"{needle!r} never appeared: {''.join(stream_text)}")


def test_long_kernel_shows_progress_and_ctrl_c_stops_it_with_one_line(ws):
    """A 10^7-iteration sequential_range kernel: progress lines when piped; SIGINT -> one line, 130."""
    proc = _devkit(["cost", "k.py:long_loop", "--arg", "bfloat16[128,512]"], ws)
    seen: list[str] = []
    try:
        # the first heartbeat may come before the first instruction (a slow start on a loaded machine);
        # wait for one that counts instructions, then check it names the kernel line
        _wait_for(proc, seen, "instructions")
        assert "still running" in seen[-1] and "k.py:" in seen[-1]
        os.killpg(proc.pid, signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130
    assert err.strip() == "devkit cost: interrupted", err
    assert out == ""


def test_ctrl_c_in_tune_leaves_the_tuning_table_alone(ws, tmp_path):
    table = tmp_path / "tuning.json"
    table.write_text('{"schema": 1, "kernels": {}}\n')
    before = table.read_text()
    proc = _devkit(
        ["tune", "xuv_fused", "--shape", "4096,8192,4096,16384", "--tuning-file", str(table), "--jobs", "2"],
        ws,
    )
    seen: list[str] = []
    try:
        _wait_for(proc, seen, "searching the blocks")
        time.sleep(1.5)  # into the search
        os.killpg(proc.pid, signal.SIGINT)
        _out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert "Traceback" not in err and "interrupted" in err.strip().splitlines()[-1]
    assert table.read_text() == before
    assert [p.name for p in tmp_path.iterdir()] == ["tuning.json"]  # no temporary file left behind


def test_ctrl_c_in_e2e_is_one_line(ws):
    proc = _devkit(["e2e", "--model", "Llama-3.2-1B", "--context", "60000", "--no-cache"], ws)
    seen: list[str] = []
    try:
        _wait_for(proc, seen, "large problem")
        os.killpg(proc.pid, signal.SIGINT)
        _out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130
    assert "Traceback" not in err and err.strip().splitlines()[-1] == "devkit e2e: interrupted"


def test_run_prints_its_plan_at_once_and_ctrl_c_stops_the_workers(tmp_path):
    """Piped `devkit run` says what it will do before the first task ends; Ctrl-C: no report, no workers."""
    out_dir = tmp_path / "report"
    proc = _devkit(["run", "--quick", "--jobs", "2", "--out", str(out_dir)], tmp_path)
    seen: list[str] = []
    try:
        _wait_for(proc, seen, "validations and")
        assert seen[0].startswith("devkit run: ") and str(out_dir) in seen[0]
        time.sleep(2)
        os.killpg(proc.pid, signal.SIGINT)
        _out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert "Traceback" not in err and "interrupted" in err.strip().splitlines()[-1]
    assert not out_dir.exists()
    # the spawned workers went with the parent: soon nothing of its process group is left (an exited
    # worker may stay a zombie until init reaps it)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            os.killpg(proc.pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.2)
    else:
        raise AssertionError("worker processes of the interrupted run are still alive")


def test_heartbeat_announces_large_work_and_reports_while_it_runs():
    import io

    from devkit.commands._progress import Heartbeat

    stream = io.StringIO()
    with Heartbeat(
        "devkit cost", work_bytes=2 * 2**40, first_after_s=0.01, every_s=0.01, stream=stream
    ) as hb:
        deadline = time.monotonic() + 30
        while hb.reports < 2 and time.monotonic() < deadline:  # work in this thread until it was seen
            sum(range(1000))
    lines = stream.getvalue().splitlines()
    assert lines[0].startswith("devkit cost: large problem: the arguments hold 2.0 TiB")
    progress = [ln for ln in lines[1:] if ln.startswith("devkit cost: still running: ")]
    assert len(progress) >= 2 and "test_cli_errors.py:" in progress[0]  # the line this thread is on
    quiet = io.StringIO()
    with Heartbeat("devkit cost", work_bytes=1024, first_after_s=30, stream=quiet):
        pass  # small and quick: nothing to say
    assert quiet.getvalue() == ""


def test_plain_text_strips_docstring_markup():
    from devkit.cli import plain_text

    assert plain_text("see :mod:`devkit.cost` and ``--json``") == "see devkit.cost and --json"
    assert plain_text(":func:`~devkit.estimate` or :class:`the report <devkit.cost.report.CostReport>`") == (
        "devkit.estimate or the report"
    )


def test_a_bug_in_the_kit_is_called_one_with_the_full_traceback(monkeypatch, capsys):
    """An exception with no user frame on its stack is the kit's: said to be a bug, traceback kept."""
    import functools

    import devkit.commands.info as info_cmd

    monkeypatch.setattr(info_cmd, "collect", functools.partial(int, "not a number"))  # raises in C
    assert cli.main(["info"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("devkit info: internal error (a bug in devkit")
    assert "Traceback" in err and "devkit/commands/info.py" in err
    assert err.strip().splitlines()[-1].startswith("ValueError: invalid literal for int()")


@pytest.mark.slow
def test_ctrl_c_in_svd_compress_leaves_no_output(tmp_path):
    """A checkpoint big enough to take a while; SIGINT once progress shows: one line, 130, no output file."""
    from safetensors.numpy import save_file

    rng = np.random.default_rng(0)
    hidden, inter = 1024, 4096
    tensors = {}
    for i in range(3):
        p = f"model.layers.{i}.mlp"
        tensors[f"{p}.gate_proj.weight"] = rng.standard_normal((inter, hidden), dtype=np.float32)
        tensors[f"{p}.up_proj.weight"] = rng.standard_normal((inter, hidden), dtype=np.float32)
        tensors[f"{p}.down_proj.weight"] = rng.standard_normal((hidden, inter), dtype=np.float32)
    save_file(tensors, str(tmp_path / "model.safetensors"))
    out = tmp_path / "out"
    proc = _devkit(
        ["svd", "compress", "model.safetensors", "out/model-svd.safetensors", "--ratio", "0.2"], tmp_path
    )
    seen: list[str] = []
    try:
        _wait_for(proc, seen, "still running", timeout=120)
        os.killpg(proc.pid, signal.SIGINT)
        _out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert "Traceback" not in err and err.strip().splitlines()[-1] == "devkit svd compress: interrupted"
    assert not out.exists() or not any(out.iterdir())
