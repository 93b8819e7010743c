"""Test helpers for a project's own kernels (also exposed as pytest fixtures by the devkit plugin).

* :func:`check_kernel` simulates a declared kernel on seeded random inputs and asserts it matches its
  NumPy reference within the declared tolerance for the dtype (the fixture ``devkit_check`` is this
  function with the target of the test's ``@pytest.mark.target(...)``);
* :func:`estimate_us` is the modelled latency (microseconds, cost-only) of one call, for assertions in
  *benchmarks* (``benchmarks/`` scripts, pytest-benchmark), never in timed tests;
* ``@pytest.mark.target("trn2")`` sets the target of ``devkit_check`` / ``devkit_estimate`` /
  ``devkit_target`` for one test (default ``trn1``).

Kernels are named as everywhere else: ``FILE.py:KERNEL``, a declared name, or a :class:`devkit.KernelSpec`.
Naming one maps ``neuronxcc.nki`` onto the simulator (when the real SDK is absent) before its file is
imported.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from devkit.declare import KernelSpec, ValidationResult


def spec_for(kernel: str | KernelSpec) -> KernelSpec:
    """The declaration of ``kernel`` (a spec, ``FILE.py:KERNEL`` or a declared name)."""
    if isinstance(kernel, KernelSpec):
        return kernel
    from devkit.workflow import catalog

    return catalog.get(kernel)


def check_kernel(
    kernel: str | KernelSpec,
    shape: Mapping[str, int] | None = None,
    dtype: str | None = None,
    *,
    seed: int = 0,
    blocks: Mapping[str, Any] | None = None,
    target: str = "trn1",
) -> ValidationResult:
    """Simulate and compare with the reference; ``AssertionError`` (naming shape, dtype, error and
    tolerance) when the error exceeds the declared tolerance.  ``dtype`` defaults to the first declared."""
    spec = spec_for(kernel)
    res = spec.check(shape, dtype or spec.dtypes[0], seed, blocks, target)
    if not res.ok:
        raise AssertionError(res.message)
    return res


def estimate_us(
    kernel: str | KernelSpec,
    shape: Mapping[str, int] | None = None,
    dtype: str | None = None,
    *,
    blocks: Mapping[str, Any] | None = None,
    target: str = "trn1",
) -> float:
    """Modelled latency of one call on ``target``, microseconds (cost-only: no arithmetic)."""
    spec = spec_for(kernel)
    return float(spec.estimate(shape, dtype or spec.dtypes[0], target, blocks).latency_us)
