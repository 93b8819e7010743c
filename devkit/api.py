"""The Python API's two calls, ``devkit.simulate`` and ``devkit.estimate`` (re-exported by :mod:`devkit`).

They live here, below the package's ``__init__``, so that modules the package loads lazily (e.g.
:mod:`devkit.declare`) can call them without importing the package module itself.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from devkit.sim.options import VALUE_CHECKS


def _unwrap(kernel: Any, grid: Any) -> tuple[Any, Any]:
    from devkit.nki import Kernel

    if isinstance(kernel, Kernel):
        return kernel.func, (grid if grid is not None else kernel.grid)
    if getattr(kernel, "__nki_beta2__", False) and hasattr(kernel, "func"):  # an NKI 0.x kernel[lnc]
        return kernel.func, (grid if grid is not None else ((kernel.lnc,) if kernel.lnc > 1 else None))
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
    _check_grid(grid, "devkit.simulate")
    _check_options(options, "devkit.simulate")
    _check_call(func, args, kwargs, "devkit.simulate")
    programs = getattr(kernel, "program_runner", None)
    return run_kernel(
        func, args, kwargs, grid=grid, target=target, options=options, programs=programs
    ).outputs


def estimate(
    kernel: Any,
    *args_or_specs: Any,
    grid: Any = None,
    target: str | None = None,
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
    Without ``target``, :func:`devkit.targets.from_environment` chooses (``DEVKIT_TARGET``,
    ``NEURON_PLATFORM_TARGET_OVERRIDE``, ``NKI_NC_VERSION``), else ``trn1``.
    """
    from devkit.cost.scheduler import Scheduler
    from devkit.nki import _tensor_ops  # noqa: F401
    from devkit.nki.runner import run_kernel
    from devkit.sim.options import SimOptions

    func, grid = _unwrap(kernel, grid)
    _check_grid(grid, "devkit.estimate")
    _check_options(options, "devkit.estimate")
    opts = options or SimOptions()
    if numerics is False and opts.numerics:
        opts = SimOptions(**{**opts.__dict__, "numerics": False})
    _check_call(func, args_or_specs, kwargs, "devkit.estimate")
    if target is None:
        from devkit.targets import DEFAULT_TARGET, from_environment

        target = from_environment(default=DEFAULT_TARGET)
    name = getattr(func, "__name__", "kernel")
    if trace is not None:
        from devkit.cost.chrome_trace import tracing_scheduler

        sink = tracing_scheduler(target, kernel_name=name)
    else:
        sink = Scheduler(target)
    programs = getattr(kernel, "program_runner", None)
    run = run_kernel(
        func,
        args_or_specs,
        kwargs,
        grid=grid,
        target=target,
        options=opts,
        sink=sink,
        programs=programs,
        host_outputs=False,
    )
    report = dataclasses.replace(
        sink.report(kernel_name=name),
        checks_skipped=skipped_checks(opts, run.numerics),
        outputs_unwritten=run.unwritten,
    )
    if trace is not None:
        from devkit.cost.chrome_trace import write_trace

        write_trace(trace, sink.recorder, report, sink.target)
    return report


def skipped_checks(options: Any, numerics: bool) -> tuple[str, ...]:
    """Rule codes of the value-based checks a run did not make (all of them when it was cost-only)."""
    return tuple(code for code, flag in VALUE_CHECKS.items() if not (numerics and getattr(options, flag)))


def _check_grid(grid: Any, api: str) -> None:
    """A launch grid is a positive int or a tuple/list of them (None: one program instance)."""
    if grid is None:
        return
    sizes = grid if isinstance(grid, (tuple, list)) else (grid,)
    if not sizes or not all(isinstance(g, int) and not isinstance(g, bool) for g in sizes):
        raise TypeError(f"{api}: grid must be a positive int or a tuple of positive ints, got {grid!r}")


def _check_options(options: Any, api: str) -> None:
    from devkit.sim.options import SimOptions

    if options is not None and not isinstance(options, SimOptions):
        raise TypeError(f"{api}: options must be a devkit.SimOptions, got {type(options).__name__}")


def _check_call(func: Any, args: tuple, kwargs: dict, api: str) -> None:
    """Reject a call the kernel's signature cannot take, before any simulation, naming the signature;
    object arrays (no NKI dtype) are rejected here, naming the argument."""
    import inspect

    import numpy as np

    from devkit.errors import DtypeError

    try:
        sig: inspect.Signature | None = inspect.signature(func)
    except (TypeError, ValueError):  # a builtin or C callable: let the call itself decide
        sig = None
    params = list(sig.parameters) if sig is not None else []
    for i, a in enumerate(args):
        if isinstance(a, np.ndarray) and a.dtype == object:
            name = params[i] if i < len(params) else f"#{i}"
            raise DtypeError(
                f"{api}: kernel argument '{name}' is a NumPy array of dtype object; NKI kernels take "
                "numeric arrays (e.g. float32, bfloat16)"
            )
    for k, a in kwargs.items():
        if isinstance(a, np.ndarray) and a.dtype == object:
            raise DtypeError(f"{api}: kernel argument '{k}' is a NumPy array of dtype object")

    if sig is None:
        return
    try:
        sig.bind(*args, **kwargs)
    except TypeError as e:
        name = getattr(func, "__name__", "kernel")
        raise TypeError(f"{api}: kernel {name}{sig} cannot take these arguments: {e}") from None
