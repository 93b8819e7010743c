"""The project's NKI kernels (written exactly like real NKI code) and their registry.

Modules: :mod:`devkit.kernels.matmul` (dense baselines), :mod:`devkit.kernels.neuronmm` (fused X.U.V),
:mod:`devkit.kernels.mlp` (SVD and dense MLP), :mod:`devkit.kernels.registry` (one declaration per kernel),
:mod:`devkit.kernels.plans` (block plans and feasibility), :mod:`devkit.kernels.tuning` (default blocks),
:mod:`devkit.kernels.tutorial` (the tutorial's tiled matmul, for tests and benchmarks).

Importing this package on a machine without the real Neuron SDK binds ``neuronxcc.nki`` to the devkit
simulator (DESIGN.md section 1: an explicit, project-scoped opt-in); with the real SDK present the
kernels bind to it.
"""

from __future__ import annotations


def _bind_nki() -> None:
    try:
        from devkit import compat
    except ImportError:  # a hardware host without the devkit: the real SDK must be importable
        return
    compat.bind_missing()


_bind_nki()

__all__ = ["matmul", "mlp", "neuronmm", "plans", "registry", "tuning"]
