"""``nki`` (NKI 0.x / Beta 2) for the simulator: ``nki.jit``, ``nki.simulate``, ``nki.cpu_simulate``, launches.

Kernels written for the standalone ``nki`` package (Neuron SDK 2.27+) run here unmodified, as on AWS's own
CPU simulator (``reference/nki_beta2.md`` §2, §6):

- ``nki.simulate(kernel)(*numpy_args)`` runs the kernel on the simulated NeuronCore and returns NumPy
  arrays; written inputs are updated in place; ``nki.simulate(kernel[2])`` launches two logical-core
  programs sharing ``shared_hbm``.
- ``nki.cpu_simulate(kernel)[lnc](**numpy_kwargs)``: the entry point of nki-library's test harness.
- ``NKI_SIMULATOR=1``: calling a ``@nki.jit`` kernel directly simulates it.
- The target comes from ``NEURON_PLATFORM_TARGET_OVERRIDE`` / ``NKI_NC_VERSION`` / ``platform_target=``
  (:mod:`devkit.nki.beta2.targets`).

``nki.benchmark``, ``nki.profile``, ``nki.baremetal`` and ``nki.simulate_kernel`` do not exist in NKI 0.x;
they raise, naming the kit's way to get a latency (``devkit.estimate`` / ``devkit cost``).
"""

from __future__ import annotations

import functools
import os
from typing import Any

import numpy as np

from devkit.errors import HardwareUnavailableError, KernelArgumentError
from devkit.nki import _tensor_ops  # noqa: F401  (tensor operators and view methods)
from devkit.nki.beta2 import (
    builtin,
    collectives,
    compiler,
    isa,
    language,
    lnc,
    tensor,
    torch_io,
    typing,
    views,
)
from devkit.nki.beta2._convention import refusing
from devkit.nki.beta2.targets import selected_target
from devkit.sim.machine import current
from devkit.sim.tensor import Tensor

dtype = language.dtypes
__version__ = "0.6.0"
__devkit_simulator__ = True

__all__ = [
    "Kernel",
    "builtin",
    "collectives",
    "compiler",
    "cpu_simulate",
    "isa",
    "jit",
    "language",
    "simulate",
    "tensor",
    "typing",
]


# ---- tensor view methods of NKI 0.x ----------------------------------------------------------------------------

Tensor.ap = views.access_pattern  # type: ignore[attr-defined]
Tensor.strides = property(views.view_strides)  # type: ignore[attr-defined]
Tensor.offset = property(views.view_offset)  # type: ignore[attr-defined]
Tensor.name = property(lambda self: self.st.name)  # type: ignore[attr-defined]
for _method, _fn in views.VIEW_METHODS.items():
    setattr(Tensor, _method, _fn)

_beta1_bool = Tensor.__bool__


def _tensor_bool(self: Tensor) -> bool:
    """``if tile:`` in an NKI 0.x kernel tests that a tile was given: nki-library (hardware-tested) writes
    ``if params.expert_index:`` for SBUF tiles (mlp_tkg_constants.py:173).  Beta 1 keeps its error."""
    m = current()
    if m is not None and getattr(m, "nki_beta2", False):
        return True
    return _beta1_bool(self)


Tensor.__bool__ = _tensor_bool  # type: ignore[method-assign]


# ---- kernels and launches ----------------------------------------------------------------------------------------


class Kernel:
    """A ``@nki.jit`` kernel; ``kernel[lnc]`` is a launch on ``lnc`` logical cores (1 or 2)."""

    __test__ = False  # a kernel named test_* is not a pytest test
    __nki_beta2__ = True
    program_runner = staticmethod(lnc.run_programs)  # LNC-2 programs take turns (sendrecv, core_barrier)

    def __init__(self, func: Any, options: dict[str, Any], lnc: int = 1) -> None:
        if isinstance(func, Kernel):
            options = {**func.options, **options}
            func = func.func
        self.func = func
        self.options = options
        self.lnc = lnc
        self.schedule: list[Any] = []
        functools.update_wrapper(self, func)

    def __getitem__(self, lnc: Any) -> Kernel:
        if isinstance(lnc, tuple):
            if len(lnc) != 1:
                raise KernelArgumentError(
                    f"kernel[{', '.join(map(str, lnc))}]: NKI 0.x launches take one number, the logical-core count",
                    rule="bad-argument",
                )
            lnc = lnc[0]
        if not isinstance(lnc, (int, np.integer)) or int(lnc) not in (1, 2):
            raise KernelArgumentError(
                f"kernel[{lnc!r}]: the logical-core count must be 1 or 2", rule="bad-argument"
            )
        k = Kernel(self.func, self.options, int(lnc))
        k.schedule = self.schedule
        return k

    def with_schedule(self, edges: Any) -> Kernel:
        """Ordering edges between named instructions; the simulator runs in program order anyway."""
        k = Kernel(self.func, self.options, self.lnc)
        k.schedule = list(edges)
        return k

    @property
    def target(self) -> str:
        return selected_target(self.options.get("platform_target"))

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if current() is not None:
            return self.func(*args, **kwargs)  # a jitted sub-kernel runs inline
        if os.environ.get("NKI_SIMULATOR", "").strip() == "1":
            return simulate(self)(*args, **kwargs)
        raise HardwareUnavailableError(
            f"calling @nki.jit kernel {getattr(self.func, '__name__', 'kernel')!r} directly needs a Neuron device and "
            "the real SDK; in the devkit run it with nki.simulate(kernel)(*arrays), or set NKI_SIMULATOR=1"
        )


def jit(fn: Any = None, **kwargs: Any) -> Any:
    """``@nki.jit`` or ``@nki.jit(**options)``; options such as ``mode=``, ``platform_target=``,
    ``debug_kernel=``, ``show_compiler_tb=``, ``experimental_flags=`` are accepted (``platform_target``
    selects the simulated NeuronCore unless the environment overrides it)."""
    if fn is None:
        return lambda f: Kernel(f, kwargs)
    return Kernel(fn, kwargs)


def _run(kernel: Any, lnc: int, args: tuple, kwargs: dict) -> Any:
    from devkit.nki.runner import run_kernel

    k = kernel if isinstance(kernel, Kernel) else Kernel(kernel, {})
    call = torch_io.TorchCall(args, kwargs)  # torch in -> torch out (reference §2)
    outputs = run_kernel(
        k.func,
        call.args,
        call.kwargs,
        grid=(lnc,) if lnc > 1 else None,
        target=k.target,
        mutable_inputs=True,
        programs=Kernel.program_runner,
    ).outputs
    return call.finish(outputs) if call.active else outputs


class _Simulated:
    def __init__(self, kernel: Any, lnc: int) -> None:
        self.kernel = kernel
        self.lnc = lnc

    def __getitem__(self, lnc: Any) -> _Simulated:
        k = self.kernel if isinstance(self.kernel, Kernel) else Kernel(self.kernel, {})
        return _Simulated(k, k[lnc].lnc)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return _run(self.kernel, self.lnc, args, kwargs)


def simulate(kernel: Any) -> _Simulated:
    """``nki.simulate(kernel)(*arrays)``: run on the simulated NeuronCore, NumPy in and out (torch tensors in ->
    torch tensors out, when torch is installed); plain functions are wrapped; ``nki.simulate(kernel[2])`` runs
    an LNC-2 launch."""
    if not callable(kernel):
        raise KernelArgumentError(
            f"nki.simulate expects a kernel, got {type(kernel).__name__}", rule="bad-argument"
        )
    lnc = kernel.lnc if isinstance(kernel, Kernel) else 1
    return _Simulated(kernel, lnc)


def cpu_simulate(kernel: Any) -> _Simulated:
    """``nki.cpu_simulate(kernel)[lnc](**arrays)``: the entry point of nki-library's harness."""
    return simulate(kernel)


def _not_available(name: str) -> Any:
    doc = f"``nki.{name}``: not available in NKI 0.x (raises, naming devkit.estimate / devkit cost)."
    message = (
        f"nki.{name} is not available in NKI 0.x (it was removed with Beta 1); the devkit's modelled latency "
        "comes from devkit.estimate(kernel, *args) or `devkit cost FILE.py:KERNEL --arg DTYPE[...]`"
    )
    return refusing(name, doc, message, rule="not-available")


baremetal = _not_available("baremetal")
benchmark = _not_available("benchmark")
profile = _not_available("profile")
simulate_kernel = _not_available("simulate_kernel")
