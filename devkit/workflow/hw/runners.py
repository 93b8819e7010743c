"""How each NKI API generation runs and times a kernel on the device: one runner per generation.

* :class:`Beta1Runner` wraps ``neuronxcc.nki`` (SDK <= 2.29): ``nki.baremetal(kernel)(*inputs)`` runs it,
  ``nki.benchmark(warmup=, iters=)`` times it with ``neuron-bench`` and reports the percentiles through
  ``benchmark_result.nc_latency.get_latency_percentile(p)`` (us) [reference/nki_api.md 1.1].
* :class:`Beta2Runner` is for ``import nki`` kernels (SDK >= 2.27): a ``@nki.jit`` kernel called with NumPy
  arrays compiles and runs standalone on the device (``baremetal(k)(*a)`` -> ``k(*a)``), and Beta 2 has no
  ``benchmark`` (reference/nki_beta2.md sections 2 and 9), so the runner times ``iters`` calls after
  ``warmup`` with the host clock.  Those latencies include the launch and the host<->device copies: they
  are comparable with each other (the regression check), and an upper bound of the device time the cost
  model predicts (``latency_clock`` = ``"host"`` in the store says so).

Both take the SDK's entry points as arguments, so :mod:`devkit.workflow.hw.fake` drives the same code
without a device.  Units: microseconds.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

#: Percentiles every runner reports (``get_latency_percentile`` accepts exactly these).
PERCENTILES = (0, 1, 10, 25, 50, 90, 99, 100)


def percentile(samples_us: Sequence[float], p: float) -> float:
    """Linear-interpolated percentile ``p`` (0-100) of ``samples_us`` (us)."""
    xs = sorted(samples_us)
    if not xs:
        raise ValueError("no latency samples")
    rank = (len(xs) - 1) * p / 100.0
    lo, hi = math.floor(rank), math.ceil(rank)
    return xs[lo] + (xs[hi] - xs[lo]) * (rank - lo)


def latency_percentiles(benchmark_result: Any) -> dict[str, float]:
    """``{"p0": .., "p50": .., "p99": ..}`` in us from a Beta-1 SDK ``benchmark_result``."""
    lat = benchmark_result.nc_latency
    return {f"p{p}": float(lat.get_latency_percentile(p)) for p in PERCENTILES}


def refuse_simulated(kernel: Any) -> None:
    """Raise :class:`~devkit.errors.HardwareUnavailableError` when ``kernel`` was bound to the devkit simulator
    (its ``@nki.jit`` object is the simulator's): a device runner never runs, nor times, a simulation."""
    from devkit.errors import HardwareUnavailableError

    if (type(kernel).__module__ or "").split(".")[0] == "devkit":
        name = getattr(kernel, "__name__", type(kernel).__name__)
        raise HardwareUnavailableError(
            f"{name} is bound to the devkit simulator, not the real Neuron SDK (its module imported the NKI "
            "names after the simulator was mapped in this process); refusing to run it as a hardware test"
        )


class Beta1Runner:
    """``neuronxcc.nki``'s ``baremetal`` and ``benchmark`` (``nki``: the real module or a fake of it);
    ``real=True`` refuses kernels bound to the simulator (:func:`refuse_simulated`)."""

    generation = "beta1"
    #: What the latencies measure: ``neuron-bench`` loops of the compiled NEFF on the device.
    latency_clock = "neuron-bench"

    def __init__(self, nki: Any, real: bool = False) -> None:
        self.nki = nki
        self.real = real

    def run(self, kernel: Any, inputs: Sequence[Any], blocks: Mapping[str, Any]) -> Any:
        if self.real:
            refuse_simulated(kernel)
        return self.nki.baremetal(kernel)(*inputs, **blocks)

    def benchmark(
        self, kernel: Any, inputs: Sequence[Any], blocks: Mapping[str, Any], *, warmup: int, iters: int
    ) -> dict[str, float]:
        if self.real:
            refuse_simulated(kernel)
        bench = self.nki.benchmark(warmup=warmup, iters=iters)(kernel)
        bench(*inputs, **blocks)
        return latency_percentiles(bench.benchmark_result)


def _call(kernel: Any, *args: Any, **kwargs: Any) -> Any:
    return kernel(*args, **kwargs)


class Beta2Runner:
    """Standalone ``@nki.jit`` calls with NumPy arrays, timed with ``clock_ns`` (see the module docstring).

    ``call(kernel, *inputs, **blocks)`` runs one launch (default: calling the kernel), ``clock_ns()`` reads
    the clock in nanoseconds (default :func:`time.perf_counter_ns`); ``real=True`` refuses kernels bound to
    the simulator (:func:`refuse_simulated`).
    """

    generation = "beta2"
    #: What the latencies measure: host wall clock of standalone calls (launch and copies included).
    latency_clock = "host"

    def __init__(
        self,
        call: Callable[..., Any] = _call,
        clock_ns: Callable[[], int] = time.perf_counter_ns,
        real: bool = False,
    ) -> None:
        self.call = call
        self.clock_ns = clock_ns
        self.real = real

    def run(self, kernel: Any, inputs: Sequence[Any], blocks: Mapping[str, Any]) -> Any:
        if self.real:
            refuse_simulated(kernel)
        return self.call(kernel, *inputs, **blocks)

    def benchmark(
        self, kernel: Any, inputs: Sequence[Any], blocks: Mapping[str, Any], *, warmup: int, iters: int
    ) -> dict[str, float]:
        if self.real:
            refuse_simulated(kernel)
        if warmup < 0 or iters < 1:
            raise ValueError(
                f"benchmark needs warmup >= 0 and iters >= 1, got warmup={warmup}, iters={iters}"
            )
        for _ in range(warmup):
            self.call(kernel, *inputs, **blocks)
        samples = []
        for _ in range(iters):
            t0 = self.clock_ns()
            self.call(kernel, *inputs, **blocks)
            samples.append((self.clock_ns() - t0) / 1e3)
        return {f"p{p}": percentile(samples, p) for p in PERCENTILES}


def sdk_runner(generation: str) -> Beta1Runner | Beta2Runner:
    """The runner of ``generation`` on this host's real SDK (refuses the simulator and a mismatched SDK:
    :class:`~devkit.errors.HardwareUnavailableError`)."""
    from devkit.workflow.hw.host import load_sdk

    module = load_sdk(generation)
    return Beta1Runner(module, real=True) if generation == "beta1" else Beta2Runner(real=True)
