"""The host side of the hardware stage: what a run needs, the real SDK, and the facts stamped on records.

* :func:`check_requirements` says whether this machine can run ``hw_tests/``: a Neuron device
  (``/dev/neuron*``) and the real Neuron compiler (``neuronxcc.nki`` importable and *not* the devkit
  simulator).  :meth:`Requirements.reason` is the one sentence every skipped test shows.
* :func:`load_sdk` returns the real ``neuronxcc.nki`` module and refuses the simulator: hardware
  tests never fall back to simulation (:class:`devkit.errors.HardwareUnavailableError` instead).
* :class:`HostContext` holds the instance type, target, SDK version and git commit of one run.
"""

from __future__ import annotations

import glob
import importlib
import os
import socket
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from devkit.errors import HardwareUnavailableError

DEVICE_GLOB = "/dev/neuron*"
#: The results store of the checkout this devkit was installed from (editable installs).
RESULTS_DIR = Path(__file__).resolve().parents[3] / "results"


def project_dir(name: str) -> Path:
    """A state directory of the current project (``"results"``, ``"hw_tests"``, ...; see
    :mod:`devkit.project`), never inside the installed package."""
    from devkit import project

    proj = project.find()
    return proj.path(name) if name in project.DEFAULTS else proj.root / name


#: Instance-family prefixes -> cost-model target.
_FAMILIES = (("trn1", "trn1"), ("trn2", "trn2"), ("inf2", "inf2"))
_INSTALL_HINT = (
    "install it from AWS's Neuron repository: pip install --extra-index-url "
    'https://pip.repos.neuron.amazonaws.com "neuronx-cc==2.*"'
)


# --- requirements --------------------------------------------------------------------------------


def find_devices(pattern: str = DEVICE_GLOB) -> tuple[str, ...]:
    """Neuron device nodes present on this machine."""
    return tuple(sorted(glob.glob(pattern)))


def _sdk_probe() -> tuple[bool, str]:
    """(real SDK importable, explanation).  Never imports the SDK: only looks for it on ``sys.path``."""
    from importlib.machinery import PathFinder

    from devkit import compat

    try:  # PathFinder looks at the installed packages, not at what sys.modules maps the name to
        root = PathFinder.find_spec("neuronxcc")
    except (ImportError, ValueError):
        root = None
    if root is None:
        return (
            False,
            f"the real Neuron compiler neuronx-cc is not installed (no module neuronxcc; {_INSTALL_HINT})",
        )
    locations = list(root.submodule_search_locations or [])
    if PathFinder.find_spec("nki", locations) is None:
        return False, (
            "the installed neuronxcc has no nki package (the public index only holds an empty "
            f"placeholder named neuronx-cc; {_INSTALL_HINT})"
        )
    if compat.is_installed():
        return False, (
            "neuronx-cc is installed but neuronxcc.nki is mapped onto the devkit simulator in this "
            "process (run hw_tests on their own, e.g. `pytest hw_tests`, never together with "
            "simulator_tests)"
        )
    return True, "neuronxcc.nki (real Neuron SDK)"


def sdk_version() -> str | None:
    """Version of the installed ``neuronx-cc`` distribution, if any."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("neuronx-cc")
    except PackageNotFoundError:
        return None


@dataclass(frozen=True)
class Requirements:
    """What the hardware stage needs and what this machine has."""

    devices: tuple[str, ...]
    sdk_ok: bool
    sdk_detail: str

    @property
    def ok(self) -> bool:
        return bool(self.devices) and self.sdk_ok

    @property
    def missing(self) -> list[str]:
        """One phrase per missing piece (empty when everything is there)."""
        out = []
        if not self.devices:
            out.append(f"no Neuron device ({DEVICE_GLOB} not found: this is not a Trainium/Inferentia host)")
        if not self.sdk_ok:
            out.append(self.sdk_detail)
        return out

    def reason(self) -> str:
        """The single sentence shown for every skipped hardware test."""
        if self.ok:
            return "Neuron device and real neuronx-cc present"
        return "hardware tests need a Neuron device and the real neuronx-cc: " + "; ".join(self.missing)


def check_requirements() -> Requirements:
    """Look for a Neuron device and the real compiler (cheap; imports nothing from the SDK)."""
    ok, detail = _sdk_probe()
    return Requirements(devices=find_devices(), sdk_ok=ok, sdk_detail=detail)


def load_sdk() -> Any:
    """The real ``neuronxcc.nki`` module.

    Raises :class:`~devkit.errors.HardwareUnavailableError` if it is absent or is the simulator.
    """
    req = check_requirements()
    if not req.sdk_ok:
        raise HardwareUnavailableError(req.sdk_detail)
    nki = importlib.import_module("neuronxcc.nki")
    if getattr(nki, "__devkit_simulator__", False):  # belt and braces: never time the simulator
        raise HardwareUnavailableError(
            "neuronxcc.nki resolved to the devkit simulator; refusing to run hardware tests on it"
        )
    return nki


# --- host context ---------------------------------------------------------------------------------


def instance_type() -> str:
    """EC2 instance type (``DEVKIT_INSTANCE_TYPE`` overrides; else the DMI product name; else 'unknown')."""
    env = os.environ.get("DEVKIT_INSTANCE_TYPE", "").strip()
    if env:
        return env
    try:
        name = Path("/sys/devices/virtual/dmi/id/product_name").read_text(encoding="utf-8").strip()
    except OSError:
        name = ""
    return name or "unknown"


def target_for_instance(instance: str) -> str | None:
    """Cost-model target of an instance type (``trn1.32xlarge`` -> ``trn1``), None when unknown."""
    lowered = instance.lower()
    for prefix, target in _FAMILIES:
        if lowered.startswith(prefix):
            return target
    return None


def git_commit(repo: str | Path | None = None) -> str:
    """``HEAD`` of the repository holding ``repo`` (default: this checkout), ``+dirty`` when modified."""
    cwd = str(repo or Path(__file__).resolve().parents[3])
    try:
        head = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True, text=True, timeout=10, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return head + ("+dirty" if dirty else "")


@dataclass(frozen=True)
class HostContext:
    """Facts stamped on every record of one hardware run."""

    backend: str
    target: str | None
    instance_type: str
    sdk_version: str | None
    git_commit: str
    host: str
    devkit_version: str

    @classmethod
    def detect(cls, backend: str, target: str | None = None) -> HostContext:
        """Read the host; ``target`` overrides the one implied by the instance type."""
        from devkit import __version__

        inst = instance_type()
        return cls(
            backend=backend,
            target=target or target_for_instance(inst),
            instance_type=inst,
            sdk_version=sdk_version(),
            git_commit=git_commit(),
            host=socket.gethostname(),
            devkit_version=__version__,
        )
