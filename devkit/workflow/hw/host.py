"""The host side of the hardware stage: what a run needs, the real SDK, and the facts stamped on records.

* :func:`check_requirements` says whether this machine can run ``hw_tests/``: a Neuron device
  (``/dev/neuron*``) and the real Neuron SDK (``neuronx-cc`` with ``neuronxcc.nki`` or the ``nki`` package
  importable and *not* the devkit simulator).  :meth:`Requirements.reason` is the one sentence every skipped
  test shows; :meth:`Requirements.reason_for` adds the one sentence of a generation mismatch.
* :func:`probe_sdk` reads the SDK release and which NKI API generations it compiles
  (:data:`GENERATION_RELEASES`): Beta 1 (``neuronxcc.nki``) up to 2.29, Beta 2 (``import nki``) from 2.27.
* :func:`load_sdk` returns the real SDK module of a generation and refuses the simulator: hardware
  tests never fall back to simulation (:class:`devkit.errors.HardwareUnavailableError` instead).
* :class:`HostContext` holds the instance type, target, SDK version and git commit of one run.
"""

from __future__ import annotations

import glob
import importlib
import os
import re
import socket
import subprocess
from dataclasses import dataclass, field
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
#: NKI API generation -> (first, last) Neuron SDK release (major, minor) whose compiler accepts its kernels
#: (None: open-ended).  reference/nki_api.md section 1.2 [RN]: Beta 2 (``import nki``, NKI 0.1.0) ships with
#: SDK 2.27; from 2.30 ``neuronxcc.nki`` inside a kernel is a compile error.  So 2.27-2.29 accept both.
GENERATION_RELEASES: dict[str, tuple[tuple[int, int] | None, tuple[int, int] | None]] = {
    "beta1": (None, (2, 29)),
    "beta2": ((2, 27), None),
}
#: How each generation is imported (for messages).
GENERATION_MODULES = {"beta1": "neuronxcc.nki", "beta2": "nki"}
#: NKI 0.x (the ``nki`` package) minor version -> SDK release (reference/nki_beta2.md section 1 [RN]).
_NKI_RELEASES = {1: (2, 27), 2: (2, 28), 3: (2, 29), 4: (2, 30), 5: (2, 31), 6: (2, 32)}
#: Environment variable naming the SDK release when the neuronx-cc version does not (``2.32``).
SDK_VERSION_ENV = "DEVKIT_NEURON_SDK_VERSION"
_INSTALL_HINT = (
    "install it from AWS's Neuron repository: pip install --extra-index-url "
    'https://pip.repos.neuron.amazonaws.com "neuronx-cc==2.*"'
)


# --- requirements --------------------------------------------------------------------------------


def find_devices(pattern: str = DEVICE_GLOB) -> tuple[str, ...]:
    """Neuron device nodes present on this machine."""
    return tuple(sorted(glob.glob(pattern)))


def _find_real(name: str) -> bool:
    """Whether the installed packages hold module ``name`` (``a`` or ``a.b``); never imports it and ignores
    what :data:`sys.modules` maps the name to (the simulator)."""
    from importlib.machinery import PathFinder

    head, _, sub = name.partition(".")
    try:  # PathFinder looks at the installed packages, not at what sys.modules maps the name to
        root = PathFinder.find_spec(head)
        if root is None or not sub:
            return root is not None
        return PathFinder.find_spec(sub, list(root.submodule_search_locations or [])) is not None
    except (ImportError, ValueError):
        return False


def _sdk_probe() -> tuple[bool, str]:
    """(real SDK importable, explanation).  Never imports the SDK: only looks for it on ``sys.path``."""
    from devkit import compat

    beta1, beta2 = _find_real("neuronxcc.nki"), _find_real("nki")
    if not _find_real("neuronxcc") and not beta2:
        return (
            False,
            f"the real Neuron compiler neuronx-cc is not installed (no module neuronxcc; {_INSTALL_HINT})",
        )
    if not beta1 and not beta2:
        return False, (
            "the installed neuronxcc has no nki package (the public index only holds an empty "
            f"placeholder named neuronx-cc; {_INSTALL_HINT})"
        )
    if (beta1 and compat.is_installed()) or (beta2 and not beta1 and compat.beta2_installed()):
        return False, (
            "neuronx-cc is installed but neuronxcc.nki is mapped onto the devkit simulator in this "
            "process (run hw_tests on their own, e.g. `pytest hw_tests`, never together with "
            "simulator_tests)"
        )
    return True, "real Neuron SDK (" + ", ".join(
        m for m, ok in (("neuronxcc.nki", beta1), ("nki", beta2)) if ok
    ) + ")"


def parse_release(version: str | None) -> tuple[int, int] | None:
    """``"2.21.18209.0+043b1bf7"`` -> ``(2, 21)``; None for None or an unreadable version."""
    m = re.match(r"\s*(\d+)\.(\d+)", version or "")
    return (int(m.group(1)), int(m.group(2))) if m else None


def generations_of(release: tuple[int, int] | None) -> tuple[str, ...]:
    """The NKI API generations an SDK release compiles (:data:`GENERATION_RELEASES`); () when unknown."""
    if release is None:
        return ()
    return tuple(
        g
        for g, (first, last) in GENERATION_RELEASES.items()
        if (first is None or release >= first) and (last is None or release <= last)
    )


def release_text(gen: str) -> str:
    """The SDK releases that compile ``gen`` kernels: ``"Neuron SDK <= 2.29"``."""
    first, last = GENERATION_RELEASES[gen]
    if first and last:
        return f"Neuron SDK {first[0]}.{first[1]}-{last[0]}.{last[1]}"
    if last:
        return f"Neuron SDK <= {last[0]}.{last[1]}"
    return f"Neuron SDK >= {first[0]}.{first[1]}" if first else "any Neuron SDK"


def generation_label(gen: str) -> str:
    """``"Beta 1 (neuronxcc.nki)"``."""
    return f"Beta {gen[-1]} ({GENERATION_MODULES[gen]})"


@dataclass(frozen=True)
class Sdk:
    """The Neuron SDK of a host: its release version and the NKI API generations it can compile and run.

    ``version`` is the release as read (``neuronx-cc`` version, ``DEVKIT_NEURON_SDK_VERSION`` or the ``nki``
    package's 0.x mapped to its release; ``source`` says which); ``importable`` the generations whose module
    (``neuronxcc.nki`` / ``nki``) is installed.
    """

    version: str | None
    source: str = ""
    importable: tuple[str, ...] = ()

    @property
    def release(self) -> tuple[int, int] | None:
        return parse_release(self.version)

    @property
    def generations(self) -> tuple[str, ...]:
        """Generations this SDK runs: accepted by its release (all importable ones when it is unknown)."""
        if self.release is None:
            return tuple(self.importable)
        return tuple(g for g in generations_of(self.release) if g in self.importable)

    def mismatch(self, gen: str) -> str | None:
        """The one sentence why a ``gen`` kernel cannot run on this SDK (None when it can)."""
        if gen not in GENERATION_RELEASES:
            raise ValueError(
                f"unknown NKI generation {gen!r}; choose one of {', '.join(GENERATION_RELEASES)}"
            )
        if gen in self.generations:
            return None
        have = f"Neuron SDK {self.version}" if self.version else "this Neuron SDK (release unknown)"
        if self.release is not None and gen not in generations_of(self.release):
            accepts = " and ".join(generation_label(g) for g in generations_of(self.release)) or "neither"
            why = f"this host has {have}, whose compiler accepts {accepts}"
        else:
            why = f"this host has {have} without the {GENERATION_MODULES[gen]} module"
        return f"NKI {generation_label(gen)} kernels need {release_text(gen)}; {why}"


def _dist_version(name: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(name)
    except PackageNotFoundError:
        return None


def probe_sdk() -> Sdk:
    """Read the host's SDK release (``DEVKIT_NEURON_SDK_VERSION``, else the ``neuronx-cc`` version, else the
    ``nki`` package's) and which generations' modules are installed (nothing is imported)."""
    importable = tuple(g for g, m in GENERATION_MODULES.items() if _find_real(m))
    env = os.environ.get(SDK_VERSION_ENV, "").strip()
    if env:
        return Sdk(env, SDK_VERSION_ENV, importable)
    cc = sdk_version()
    if cc:
        return Sdk(cc, "neuronx-cc", importable)
    nki_version = _dist_version("nki")
    m = re.match(r"0\.(\d+)", nki_version or "")
    if m and int(m.group(1)) in _NKI_RELEASES:
        major, minor = _NKI_RELEASES[int(m.group(1))]
        return Sdk(f"{major}.{minor}", f"nki {nki_version}", importable)
    return Sdk(None, "", importable)


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
    sdk: Sdk = field(default_factory=lambda: Sdk(None))

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

    def reason_for(self, generation: str) -> str | None:
        """Why a test of a ``generation`` kernel is skipped here: :meth:`reason` without the device or SDK,
        else the SDK's generation mismatch (:meth:`Sdk.mismatch`); None when it can run."""
        if not self.ok:
            return self.reason()
        return self.sdk.mismatch(generation)

    def summary(self) -> str:
        """``Neuron SDK 2.32 (neuronx-cc): runs Beta 2 (nki)`` (for ``devkit info`` and ``hw run``)."""
        if not self.sdk_ok:
            return "no real Neuron SDK"
        return sdk_summary(self.sdk)

    def to_dict(self) -> dict[str, Any]:
        """The SDK facts as plain data (``devkit info --json``)."""
        return {
            "version": self.sdk.version if self.sdk_ok else None,
            "version_source": self.sdk.source if self.sdk_ok else None,
            "generations": list(self.sdk.generations) if self.sdk_ok else [],
            "summary": self.summary(),
        }


def sdk_summary(sdk: Sdk) -> str:
    """One line: the SDK release, where it was read, and the generations it runs."""
    version = f"Neuron SDK {sdk.version} ({sdk.source})" if sdk.version else "Neuron SDK of unknown release"
    gens = " and ".join(generation_label(g) for g in sdk.generations) or "no NKI generation"
    return f"{version}: runs {gens}"


def check_requirements() -> Requirements:
    """Look for a Neuron device and the real compiler (cheap; imports nothing from the SDK)."""
    ok, detail = _sdk_probe()
    return Requirements(devices=find_devices(), sdk_ok=ok, sdk_detail=detail, sdk=probe_sdk())


def load_sdk(generation: str = "beta1") -> Any:
    """The real SDK module of ``generation``: ``neuronxcc.nki`` (Beta 1) or ``nki`` (Beta 2).

    Raises :class:`~devkit.errors.HardwareUnavailableError` if it is absent, is the simulator, or the SDK
    release does not compile that generation.
    """
    req = check_requirements()
    if not req.sdk_ok:
        raise HardwareUnavailableError(req.sdk_detail)
    mismatch = req.sdk.mismatch(generation)
    if mismatch:
        raise HardwareUnavailableError(mismatch)
    name = GENERATION_MODULES[generation]
    nki = importlib.import_module(name)
    if getattr(nki, "__devkit_simulator__", False):  # belt and braces: never time the simulator
        raise HardwareUnavailableError(
            f"{name} resolved to the devkit simulator; refusing to run hardware tests on it"
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
            sdk_version=probe_sdk().version,
            git_commit=git_commit(),
            host=socket.gethostname(),
            devkit_version=__version__,
        )
