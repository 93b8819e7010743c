"""Importing the kit's kernels binds only the NKI generations a host lacks (``devkit.compat.bind_missing``).

Each case runs in a fresh interpreter with a stand-in "real" SDK package on ``sys.path``: SDK 2.34 ships
``nki`` but no ``neuronxcc.nki``; SDK 2.26 ships ``neuronxcc.nki`` but no ``nki``.  A generation that is
installed for real must keep binding the real package (no silent fallback to the simulator on a hardware
host); the missing one binds to the simulator so its kernels still import.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

PROBE = """
import json, sys
import devkit.kernels, devkit.kernels.beta2
import nki, neuronxcc.nki
print(json.dumps({
    "nki": getattr(nki, "__devkit_simulator__", False),
    "neuronxcc.nki": getattr(neuronxcc.nki, "__devkit_simulator__", False),
}))
"""


def _fake_package(root: Path, dotted: str) -> None:
    """An importable stand-in for a real SDK package ``dotted`` (empty modules, marked as real)."""
    path = root
    for part in dotted.split("."):
        path = path / part
        path.mkdir(exist_ok=True)
        (path / "__init__.py").write_text("REAL_STAND_IN = True\n")


def _probe(tmp_path: Path, real: list[str]) -> dict[str, bool]:
    for dotted in real:
        _fake_package(tmp_path, dotted)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(REPO)])}
    out = subprocess.run(
        [sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize(
    ("real", "expected"),
    [
        pytest.param([], {"nki": True, "neuronxcc.nki": True}, id="laptop-no-sdk"),
        pytest.param(["nki"], {"nki": False, "neuronxcc.nki": True}, id="sdk-2.34-nki-only"),
        pytest.param(["neuronxcc.nki"], {"nki": True, "neuronxcc.nki": False}, id="sdk-2.26-beta1-only"),
        pytest.param(["nki", "neuronxcc.nki"], {"nki": False, "neuronxcc.nki": False}, id="sdk-2.28-both"),
    ],
)
def test_kernel_packages_bind_only_the_missing_generation(tmp_path, real, expected):
    assert _probe(tmp_path, real) == expected
