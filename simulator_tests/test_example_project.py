"""The runnable example project under docs/examples/your-kernel: its own pytest run uses the devkit plugin's
fixtures (devkit_check, devkit_estimate, devkit_target + the target marker) and skips the promoted hardware
tests with one reason."""

from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from devkit import cli

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "docs" / "examples" / "your-kernel"


def test_example_project_tests_pass_and_hardware_tests_skip_with_one_reason(tmp_path, monkeypatch):
    root = tmp_path / "proj"
    shutil.copytree(EXAMPLE, root, ignore=shutil.ignore_patterns("__pycache__", ".hypothesis"))
    monkeypatch.chdir(root)
    assert cli.main(["promote", "scaled_add", "--jobs", "1"]) == 0
    env = {**os.environ, "PYTHONPATH": str(REPO), "OPENBLAS_NUM_THREADS": "1"}
    env.pop("DEVKIT_PROJECT", None)
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider"],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    out = proc.stdout
    assert proc.returncode == 0, out + proc.stderr
    assert "6 passed, 2 skipped" in out
    skips = [line for line in out.splitlines() if line.startswith("SKIPPED")]
    assert len(skips) == 1 and "hardware tests need a Neuron device and the real neuronx-cc" in skips[0]


def test_check_helper_fails_with_the_numbers(tmp_path, monkeypatch):
    from devkit import testing

    monkeypatch.chdir(EXAMPLE)
    res = testing.check_kernel("scaled_add", {"R": 3, "N": 5}, "float32")
    assert res.ok
    spec = testing.spec_for("scaled_add")
    wrong = dataclasses.replace(
        spec,
        name="scaled_add_wrong_ref",
        reference=lambda x, y: (3.0 * x.astype("float32") + y).astype(x.dtype),
    )
    with pytest.raises(
        AssertionError, match=r"scaled_add_wrong_ref \[R=3,N=5\] float32 seed 0: max error .* EXCEEDS"
    ):
        testing.check_kernel(wrong, {"R": 3, "N": 5}, "float32")
    assert testing.estimate_us("scaled_add", {"R": 1024, "N": 4096}, "bfloat16", target="trn2") > 0
