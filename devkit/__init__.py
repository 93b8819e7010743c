"""NeuronMM devkit: write, test and tune AWS Trainium NKI kernels without Trainium.

Public API:

- :func:`simulate` -- run a kernel on NumPy inputs in the strict NKI simulator, get NumPy outputs.
- :func:`estimate` -- cost-model a kernel (arrays or ``nt.tensor[[shape], dtype]`` placeholders) and get a
  :class:`~devkit.cost.report.CostReport`.
- :func:`declare_kernel` / :class:`KernelSpec` / :func:`register` -- declare a kernel (reference,
  tolerances, shape space, config space, baselines) for ``devkit validate``/``tune``/``sweep``/``promote``/
  ``run`` (:mod:`devkit.declare`).
- :class:`KernelError` -- every fault the simulator finds in a kernel (``.filename``/``.lineno`` blame the
  kernel line).
"""

from __future__ import annotations

from typing import Any

from devkit.api import estimate, simulate
from devkit.errors import KernelError, PlacementNote, SpillWarning, UnwrittenOutputWarning
from devkit.sim.options import VALUE_CHECKS as VALUE_CHECKS  # re-exported (devkit tune reads it)

__version__ = "0.1.0"
__all__ = [
    "Baseline",
    "Feasibility",
    "KernelError",
    "KernelSpec",
    "PlacementNote",
    "SimOptions",
    "SpillWarning",
    "Sweep",
    "UnwrittenOutputWarning",
    "__version__",
    "declare_kernel",
    "estimate",
    "register",
    "simulate",
]

_DECLARE_NAMES = ("Baseline", "Feasibility", "KernelSpec", "Sweep", "declare_kernel", "register")


def __getattr__(name: str) -> Any:
    if name in _DECLARE_NAMES:
        from devkit import declare

        return getattr(declare, name)
    if name == "SimOptions":
        from devkit.sim.options import SimOptions

        return SimOptions
    raise AttributeError(name)
