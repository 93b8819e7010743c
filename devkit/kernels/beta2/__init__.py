"""The NeuronMM kernels written for NKI Beta 2 (``import nki``, NKI 0.x, Neuron SDK 2.27+).

Same algorithms, block plans (:mod:`devkit.kernels.plans`), PSUM group layouts (:mod:`devkit.kernels.layout`),
tuning table, references and tolerances as the Beta-1 kernels one package up; only the instructions differ:
every ``nisa.*`` call writes the ``dst`` it is given, PSUM accumulates implicitly (the first matmul write to
an element overwrites it, later ones add), and ragged edges are plain slices (no masks, no ``nl.arange``).

Modules: :mod:`~devkit.kernels.beta2.matmul` (dense baselines), :mod:`~devkit.kernels.beta2.neuronmm` (fused
X.U.V), :mod:`~devkit.kernels.beta2.mlp` (SVD and dense MLP), :mod:`~devkit.kernels.beta2._blocks` (the
emitters), :mod:`~devkit.kernels.beta2.tutorial` (the tutorial's tiled matmul, for tests and benchmarks).
Each kernel is named ``<beta-1 name>_b2`` and declared in :mod:`devkit.kernels.registry` with
``generation="beta2"``.

Importing this package on a machine without a real ``nki`` package binds ``nki`` to the devkit simulator
(the same explicit, project-scoped opt-in as :mod:`devkit.kernels` makes for ``neuronxcc.nki``).
"""

from __future__ import annotations


def _bind_nki() -> None:
    try:
        from devkit import compat
    except ImportError:  # a hardware host without the devkit: the real nki package must be importable
        return
    compat.bind_missing()


_bind_nki()

__all__ = ["matmul", "mlp", "neuronmm"]
