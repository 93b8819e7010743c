"""``neuronxcc.nki`` for the simulator: ``jit``, ``simulate_kernel``, ``baremetal``, ``benchmark``...

Kernels written for the real Neuron SDK run here unmodified.  ``baremetal`` runs on the CPU (and
says so once); ``benchmark`` reports the cost model's *modelled* latency through the SDK's
``benchmark_result.nc_latency.get_latency_percentile(p)`` interface (microseconds).
"""

from __future__ import annotations

import functools
import json
import os
import sys
from typing import Any

from devkit.errors import KernelArgumentError, UnsupportedError
from devkit.nki import _tensor_ops, compiler, isa, language, typing  # noqa: F401
from devkit.nki.runner import TensorSpec, run_kernel
from devkit.sim.machine import current
from devkit.sim.options import VALUE_CHECKS, SimOptions
from devkit.sim.tensor import Tensor
from devkit.targets import DEFAULT_TARGET, from_environment

tensor = Tensor

_MODES = ("auto", "simulation", "baremetal", "benchmark", "jax", "torchxla", "trace", "profile")
_notice_shown: set[str] = set()


def _notice(key: str, text: str) -> None:
    if key not in _notice_shown:
        _notice_shown.add(key)
        print(text, file=sys.stderr)


class _Latency:
    """``benchmark_result.nc_latency``: percentiles of the modelled latency (all equal: the model is exact)."""

    def __init__(self, latency_us: float) -> None:
        self.latency_us = latency_us

    def get_latency_percentile(self, p: int) -> float:
        if p not in (0, 1, 10, 25, 50, 90, 99, 100):
            raise KernelArgumentError(
                f"latency percentile must be one of 0, 1, 10, 25, 50, 90, 99, 100; got {p}"
            )
        return self.latency_us


class BenchmarkResult:
    def __init__(self, report: Any) -> None:
        self.report = report
        self.nc_latency = _Latency(report.latency_us)
        self.modelled = True


class Kernel:
    """A kernel function with a launch mode and optional SPMD grid (``kernel[g0, g1](...)``)."""

    __test__ = False  # a kernel named test_* is not a pytest test

    def __init__(
        self, func: Any, mode: str = "auto", grid: tuple[int, ...] | None = None, **options: Any
    ) -> None:
        if isinstance(func, Kernel):
            grid = grid if grid is not None else func.grid
            options = {**func.options, **options}
            func = func.func
        if mode not in _MODES:
            raise KernelArgumentError(f"nki.jit mode must be one of {', '.join(_MODES)}, got {mode!r}")
        self.func = func
        self.mode = mode
        self.grid = grid
        self.options = options
        self.benchmark_result: BenchmarkResult | None = None
        functools.update_wrapper(self, func)

    def __getitem__(self, grid: Any) -> Kernel:
        g = grid if isinstance(grid, tuple) else (grid,)
        return Kernel(self.func, self.mode, tuple(int(x) for x in g), **self.options)

    @property
    def target(self) -> str:
        return str(
            self.options.get("platform_target")
            or self.options.get("target")
            or from_environment(default=DEFAULT_TARGET)
        )

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if current() is not None:
            if self.grid:
                raise UnsupportedError(
                    "calling a kernel with an SPMD grid from inside another kernel is not "
                    "supported (err_nested_kernel_with_spmd_grid)"
                )
            return self.func(*args, **kwargs)
        if self.mode in ("jax", "torchxla"):
            _notice(
                f"mode-{self.mode}",
                f"devkit: nki.jit(mode={self.mode!r}) runs in the simulator on NumPy "
                "arrays (no framework device here)",
            )
        if self.mode == "baremetal":
            _notice(
                "baremetal",
                "devkit: nki.baremetal runs in the devkit simulator on the CPU (no Neuron device is used)",
            )
        if self.mode == "benchmark":
            return self._benchmark(args, kwargs)
        if self.mode == "profile":
            return self._profile(args, kwargs)
        return simulate_call(self.func, args, kwargs, grid=self.grid, target=self.target)

    def _benchmark(self, args: tuple, kwargs: dict) -> Any:
        from devkit.cost.scheduler import Scheduler

        sink = Scheduler(self.target)
        specs = tuple(
            TensorSpec(a.shape, a.dtype) if hasattr(a, "shape") and hasattr(a, "dtype") else a for a in args
        )
        res = run_kernel(
            self.func,
            specs,
            kwargs,
            grid=self.grid,
            target=self.target,
            options=SimOptions(numerics=False),
            sink=sink,
        )
        import dataclasses

        report = sink.report(kernel_name=getattr(self.func, "__name__", "kernel"))
        report = dataclasses.replace(
            report, checks_skipped=tuple(VALUE_CHECKS), outputs_unwritten=res.unwritten
        )
        self.benchmark_result = BenchmarkResult(report)
        _notice(
            "benchmark",
            f"devkit: nki.benchmark reports latency MODELLED by the devkit cost model for "
            f"{self.target} (not measured); warmup/iters are ignored; cost-only, so the "
            f"{' and '.join(VALUE_CHECKS)} checks are not run (nki.simulate_kernel runs them)",
        )
        for what in res.unwritten:
            print(f"devkit: nki.benchmark: warning: {what} was never written by the kernel", file=sys.stderr)
        return res.outputs

    def _profile(self, args: tuple, kwargs: dict) -> Any:
        wd = self.options.get("working_directory")
        if not wd or not os.path.isabs(str(wd)):
            raise KernelArgumentError("nki.profile needs an absolute working_directory")
        out = self._benchmark(args, kwargs)
        os.makedirs(wd, exist_ok=True)
        assert self.benchmark_result is not None
        with open(os.path.join(wd, "profile_summary.json"), "w") as f:
            json.dump(self.benchmark_result.report.to_dict(), f, indent=2)
        _notice("profile", f"devkit: nki.profile wrote a modelled profile summary to {wd} (no NEFF/NTFF)")
        return out


def simulate_call(
    func: Any,
    args: tuple,
    kwargs: dict,
    *,
    grid: Any = None,
    target: str = "trn1",
    options: SimOptions | None = None,
) -> Any:
    return run_kernel(func, args, kwargs, grid=grid, target=target, options=options).outputs


def jit(func: Any = None, mode: str = "auto", **kwargs: Any) -> Any:
    """Decorate a kernel (bare ``@nki.jit`` or ``@nki.jit(mode=..., platform_target=...)``)."""
    if func is None:
        return lambda f: Kernel(f, mode, **kwargs)
    return Kernel(func, mode, **kwargs)


def trace(func: Any = None, **kwargs: Any) -> Any:
    """A (sub-)kernel traced without its own launch; callable from other kernels or simulate_kernel."""
    return (
        jit(func, mode="trace", **kwargs) if func is not None else (lambda f: jit(f, mode="trace", **kwargs))
    )


def baremetal(kernel: Any = None, **kwargs: Any) -> Any:
    """In the simulator: run on the CPU (the real SDK compiles and runs on a Neuron device)."""
    if kernel is None:
        return lambda k: Kernel(k, "baremetal", **kwargs)
    return Kernel(kernel, "baremetal", **kwargs)


def benchmark(kernel: Any = None, **kwargs: Any) -> Any:
    """In the simulator: report the cost model's latency via ``benchmark_result.nc_latency``."""
    if kernel is None:
        return lambda k: Kernel(k, "benchmark", **kwargs)
    return Kernel(kernel, "benchmark", **kwargs)


def profile(func: Any = None, **kwargs: Any) -> Any:
    """In the simulator: write the cost model's report as a profile summary."""
    if func is None:
        return lambda f: Kernel(f, "profile", **kwargs)
    return Kernel(func, "profile", **kwargs)


def simulate_kernel(kernel: Any, *args: Any, **kwargs: Any) -> Any:
    """Run a kernel (plain, ``jit``/``baremetal``-wrapped, or grid-indexed) on NumPy inputs."""
    if isinstance(kernel, Kernel):
        return simulate_call(kernel.func, args, kwargs, grid=kernel.grid, target=kernel.target)
    if callable(kernel):
        return simulate_call(kernel, args, kwargs)
    raise KernelArgumentError(f"simulate_kernel expects a kernel function, got {type(kernel).__name__}")


class FrameworkKernel:
    """Framework integration base class of the SDK; framework tensors are not available in the simulator."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise UnsupportedError(
            "nki.FrameworkKernel integrates with JAX/PyTorch on a Neuron device and is not "
            "available in the simulator"
        )
