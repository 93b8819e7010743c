"""Map the NKI module names of both API generations onto the simulator (explicit opt-in only).

Beta 1: ``neuronxcc``, ``neuronxcc.nki`` and its submodules.  Beta 2 (NKI 0.x): ``nki``, ``nki.language``,
``nki.isa``, ``nki.isa.constants``, ``nki.typing``, ``nki.compiler``, ``nki.tensor``, ``nki.language.dtypes``,
``nki.collectives``, and the same modules under ``nki_cpu_simulator.nki`` (AWS's CPU-simulator package, which
nki-library's harness imports).  Both generations can be used in one process.

``install()`` puts the simulator in :data:`sys.modules` under those names and returns a handle whose
``uninstall()`` (or leaving the ``with`` block) restores exactly what was there before.  Nothing in the
devkit calls it implicitly except ``devkit simulate``, the project's pytest plugin (for
``simulator_tests/``) and importing the project's ``kernels`` package on a machine without the real SDK.
Without one of those opt-ins, ``import nki`` keeps binding a real ``nki`` package where one is installed.
"""

from __future__ import annotations

import importlib.util
import sys
import types
from collections.abc import Callable
from typing import Any

_NAMES = (
    "neuronxcc",
    "neuronxcc.nki",
    "neuronxcc.nki.language",
    "neuronxcc.nki.isa",
    "neuronxcc.nki.typing",
    "neuronxcc.nki.compiler",
    "neuronxcc.nki.isa.constants",
    "neuronxcc.nki.language.constants",
)
#: Beta-2 (NKI 0.x) module names below a root (``nki`` or ``nki_cpu_simulator.nki``).
_BETA2_SUFFIXES = (
    "",
    ".language",
    ".language.dtypes",
    ".isa",
    ".isa.constants",
    ".typing",
    ".compiler",
    ".tensor",
    ".collectives",
    ".builtin",
)
_BETA2_ROOTS = ("nki", "nki_cpu_simulator.nki")
_BETA2_NAMES = ("nki_cpu_simulator", *tuple(r + s for r in _BETA2_ROOTS for s in _BETA2_SUFFIXES))


def real_sdk_available() -> bool:
    """Whether the real Neuron compiler (``neuronxcc`` with ``nki``) is importable here."""
    if is_installed():
        return False
    try:
        spec = importlib.util.find_spec("neuronxcc")
    except (ImportError, ValueError):
        return False
    if spec is None:
        return False
    try:
        return importlib.util.find_spec("neuronxcc.nki") is not None
    except (ImportError, ValueError):
        return False


def is_installed() -> bool:
    """Whether ``neuronxcc.nki`` (Beta 1) is bound to the simulator right now."""
    mod = sys.modules.get("neuronxcc.nki")
    return getattr(mod, "__devkit_simulator__", False)


def beta2_installed() -> bool:
    """Whether ``nki`` (Beta 2) is bound to the simulator right now."""
    return getattr(sys.modules.get("nki"), "__devkit_simulator__", False)


def real_nki_available() -> bool:
    """Whether a real ``nki`` package (NKI 0.x, SDK 2.27+) is importable here."""
    if beta2_installed():
        return False
    try:
        return importlib.util.find_spec("nki") is not None
    except (ImportError, ValueError):
        return False


def _beta2_modules() -> dict[str, Any]:
    import devkit.nki.beta2 as nki2
    from devkit.nki.beta2 import (
        builtin,
        collectives,
        compiler,
        constants,
        dtypes,
        isa,
        language,
        tensor,
        typing,
    )

    language.dtypes = dtypes  # type: ignore[attr-defined]
    isa.constants = constants  # type: ignore[attr-defined]
    per_root = {
        "": nki2,
        ".language": language,
        ".language.dtypes": dtypes,
        ".isa": isa,
        ".isa.constants": constants,
        ".typing": typing,
        ".compiler": compiler,
        ".tensor": tensor,
        ".collectives": collectives,
        ".builtin": builtin,
    }
    pkg = types.ModuleType("nki_cpu_simulator")
    pkg.__doc__ = "The NeuronMM devkit simulator standing in for AWS's nki_cpu_simulator package."
    pkg.__path__ = []  # type: ignore[attr-defined]
    pkg.nki = nki2  # type: ignore[attr-defined]
    pkg.__devkit_simulator__ = True  # type: ignore[attr-defined]
    out: dict[str, Any] = {"nki_cpu_simulator": pkg}
    for root in _BETA2_ROOTS:
        for suffix, mod in per_root.items():
            out[root + suffix] = mod
    return out


def _modules() -> dict[str, Any]:
    import devkit.nki as nki
    from devkit.nki import (
        _tensor_ops,  # noqa: F401  (installs tensor operators)
        compiler,
        isa,
        language,
        language_constants,
        typing,
    )

    root = types.ModuleType("neuronxcc")
    root.__doc__ = "The NeuronMM devkit simulator standing in for the Neuron compiler package."
    root.__path__ = []  # type: ignore[attr-defined]
    root.nki = nki  # type: ignore[attr-defined]
    root.__devkit_simulator__ = True  # type: ignore[attr-defined]
    nki.__devkit_simulator__ = True  # type: ignore[attr-defined]
    return {
        "neuronxcc": root,
        "neuronxcc.nki": nki,
        "neuronxcc.nki.language": language,
        "neuronxcc.nki.isa": isa,
        "neuronxcc.nki.typing": typing,
        "neuronxcc.nki.compiler": compiler,
        "neuronxcc.nki.isa.constants": isa.constants,
        "neuronxcc.nki.language.constants": language_constants,
    }


class Installation:
    """Handle returned by :func:`install`; also a context manager."""

    def __init__(self, saved: dict[str, Any]) -> None:
        self._saved = saved
        self.active = True

    def uninstall(self) -> None:
        if not self.active:
            return
        for name, old in self._saved.items():
            if old is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = old
        self.active = False

    def __enter__(self) -> Installation:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.uninstall()


def install(*, beta1: bool = True, beta2: bool = True) -> Installation:
    """Bind the SDK module names of the chosen generations to the simulator (explicit opt-in; restores on
    uninstall)."""
    mods = {**(_modules() if beta1 else {}), **(_beta2_modules() if beta2 else {})}
    saved = {name: sys.modules.get(name) for name in mods}
    sys.modules.update(mods)
    return Installation(saved)


def bind_missing() -> Installation | None:
    """Bind to the simulator each generation that is neither bound already nor installed for real.

    What the kit's kernel packages call on import: a generation whose real package is present (``neuronxcc.nki``
    up to SDK 2.29, ``nki`` from SDK 2.27) keeps binding it, so on an SDK 2.34 host (``nki`` only) the Beta-2
    kernels run on the device while the Beta-1 ones, which that SDK cannot compile, bind to the simulator.
    Returns the handle, or ``None`` when nothing was missing.
    """
    beta1 = backend() == "none"
    beta2 = backend_beta2() == "none"
    if not (beta1 or beta2):
        return None
    return install(beta1=beta1, beta2=beta2)


def _binding(simulated: Callable[[], bool], real: Callable[[], bool], real_name: str) -> str:
    """'simulator' when the simulator is installed under the names, else ``real_name`` when the real
    package is importable, else 'none'."""
    if simulated():
        return "simulator"
    return real_name if real() else "none"


def backend_beta2() -> str:
    """Which implementation ``import nki`` binds to right now: 'simulator', 'nki' (the real package) or 'none'."""
    return _binding(beta2_installed, real_nki_available, "nki")


def backend() -> str:
    """Which implementation ``import neuronxcc.nki`` binds to right now: 'simulator', 'neuron-sdk' or 'none'."""
    return _binding(is_installed, real_sdk_available, "neuron-sdk")
