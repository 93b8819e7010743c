"""NeuronMM devkit: write, test and tune AWS Trainium NKI kernels without Trainium.

Public API:

- :func:`simulate` -- run a kernel on NumPy inputs in the strict NKI simulator, get NumPy outputs.
- :func:`estimate` -- cost-model a kernel (arrays or ``nt.tensor[[shape], dtype]`` placeholders) and get a
  :class:`~devkit.cost.report.CostReport`.
- :class:`KernelError` -- every fault the simulator finds in a kernel (``.filename``/``.lineno`` blame the
  kernel line).
"""

from __future__ import annotations

from typing import Any

from devkit.errors import KernelError, SpillWarning

__version__ = "0.1.0"
__all__ = ["KernelError", "SimOptions", "SpillWarning", "__version__", "estimate", "simulate"]


def __getattr__(name: str) -> Any:
    if name == "SimOptions":
        from devkit.sim.options import SimOptions

        return SimOptions
    raise AttributeError(name)


def _unwrap(kernel: Any, grid: Any) -> tuple[Any, Any]:
    from devkit.nki import Kernel

    if isinstance(kernel, Kernel):
        return kernel.func, (grid if grid is not None else kernel.grid)
    if not callable(kernel):
        raise TypeError(f"expected a kernel function, got {type(kernel).__name__}")
    return kernel, grid


def simulate(
    kernel: Any, *args: Any, grid: Any = None, target: str = "trn1", options: Any = None, **kwargs: Any
) -> Any:
    """Run ``kernel(*args, **kwargs)`` in the simulator and return its outputs as NumPy arrays."""
    from devkit.nki import _tensor_ops  # noqa: F401
    from devkit.nki.runner import run_kernel

    func, grid = _unwrap(kernel, grid)
    return run_kernel(func, args, kwargs, grid=grid, target=target, options=options).outputs


def estimate(
    kernel: Any,
    *args_or_specs: Any,
    grid: Any = None,
    target: str = "trn1",
    numerics: bool | None = None,
    options: Any = None,
    trace: Any = None,
    **kwargs: Any,
) -> Any:
    """Cost-model ``kernel`` on ``target`` and return a CostReport (``.to_dict()`` gives the JSON object).

    Arguments may be arrays or ``nt.tensor[[shape], dtype]`` placeholders; placeholders (or
    ``numerics=False``) mean cost-only: the same control flow and bookkeeping without arithmetic.
    ``trace`` (a path) also writes the scheduled instruction trace as Chrome/Perfetto trace-event
    JSON (:mod:`devkit.cost.chrome_trace`; open it in ui.perfetto.dev or chrome://tracing).
    """
    from devkit.cost.scheduler import Scheduler
    from devkit.nki import _tensor_ops  # noqa: F401
    from devkit.nki.runner import run_kernel
    from devkit.sim.options import SimOptions

    func, grid = _unwrap(kernel, grid)
    opts = options or SimOptions()
    if numerics is False and opts.numerics:
        opts = SimOptions(**{**opts.__dict__, "numerics": False})
    name = getattr(func, "__name__", "kernel")
    if trace is not None:
        from devkit.cost.chrome_trace import tracing_scheduler

        sink = tracing_scheduler(target, kernel_name=name)
    else:
        sink = Scheduler(target)
    run_kernel(func, args_or_specs, kwargs, grid=grid, target=target, options=opts, sink=sink)
    report = sink.report(kernel_name=name)
    if trace is not None:
        from devkit.cost.chrome_trace import write_trace

        write_trace(trace, sink.recorder, report, sink.target)
    return report
