"""Map ``neuronxcc``, ``neuronxcc.nki`` and its submodules onto the simulator (explicit opt-in only).

``install()`` puts the simulator in :data:`sys.modules` under the SDK's names and returns a handle whose
``uninstall()`` (or leaving the ``with`` block) restores exactly what was there before.  Nothing in the
devkit calls it implicitly except ``devkit simulate``, the project's pytest plugin (for
``simulator_tests/``) and importing the project's ``kernels`` package on a machine without the real SDK.
"""

from __future__ import annotations

import importlib.util
import sys
import types
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
    mod = sys.modules.get("neuronxcc.nki")
    return getattr(mod, "__devkit_simulator__", False)


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


def install() -> Installation:
    """Bind the SDK module names to the simulator (explicit opt-in; restores on uninstall)."""
    mods = _modules()
    saved = {name: sys.modules.get(name) for name in _NAMES}
    sys.modules.update(mods)
    return Installation(saved)


def backend() -> str:
    """Which implementation ``import neuronxcc.nki`` binds to right now: 'simulator', 'neuron-sdk' or 'none'."""
    if is_installed():
        return "simulator"
    if real_sdk_available():
        return "neuron-sdk"
    return "none"
