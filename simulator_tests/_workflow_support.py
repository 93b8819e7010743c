"""Helpers shared by the workflow tests: a synthetic Trainium host and ``python -m`` in a subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
#: The example project of docs/your-kernel.md, and what its steps (tune, sweep, promote, run) write there.
EXAMPLE = ROOT / "docs" / "examples" / "your-kernel"
EXAMPLE_WRITES = frozenset(
    {
        "devkit-tuning.json",
        "devkit-sweeps/scaled_add.csv",
        "devkit-sweeps/scaled_add.json",
        "devkit-sweeps/scaled_add.png",
        "hw_tests/conftest.py",
        "hw_tests/cases/scaled_add.json",
        "hw_tests/test_scaled_add.py",
        "devkit-report/index.html",
        "devkit-report/results.json",
        "devkit-report/validations.csv",
        "devkit-report/estimates.csv",
    }
)


def host_context(backend: str = "fake", **over: Any) -> Any:
    """A :class:`devkit.workflow.hw.host.HostContext` of a made-up trn1.2xlarge (SDK 2.21.0, commit
    ``abc``, devkit 0.1.0); ``over`` replaces any field."""
    from devkit.workflow.hw.host import HostContext

    fields = {
        "backend": backend,
        "target": "trn1",
        "instance_type": "trn1.2xlarge",
        "sdk_version": "2.21.0",
        "git_commit": "abc",
        "host": "h",
        "devkit_version": "0.1.0",
    }
    return HostContext(**{**fields, **over})


def run_module(
    module: str, *args: str, cwd: Path = ROOT, env: dict[str, str] | None = None, timeout: float = 300
) -> subprocess.CompletedProcess:
    """``python -m MODULE ARGS`` with this checkout first on ``PYTHONPATH`` (one BLAS thread, no stdin);
    ``env`` adds or replaces variables.  Output is captured as text."""
    full = {**os.environ, "PYTHONPATH": str(ROOT), "OPENBLAS_NUM_THREADS": "1", **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", module, *args],
        cwd=cwd,
        env=full,
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )
