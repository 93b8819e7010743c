"""A fake ``neuronxcc.nki`` for testing the hardware glue without a device or the compiler.

:class:`FakeNki` mimics the SDK's ``baremetal`` / ``benchmark`` interfaces (including
``benchmark_result.nc_latency.get_latency_percentile(p)``, microseconds); :func:`fake_nki` wires one to the
kernel registry.  Records made with it say ``"backend": "fake"``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from devkit.workflow.hw.store import PERCENTILES


class _FakeLatency:
    def __init__(self, samples_us: Sequence[float]) -> None:
        self._samples = sorted(samples_us)

    def get_latency_percentile(self, p: int) -> float:
        if p not in PERCENTILES:
            raise ValueError(f"latency percentile must be one of {', '.join(map(str, PERCENTILES))}; got {p}")
        xs = self._samples
        rank = (len(xs) - 1) * p / 100.0
        lo, hi = math.floor(rank), math.ceil(rank)
        return xs[lo] + (xs[hi] - xs[lo]) * (rank - lo)


class _FakeBenchmarkResult:
    def __init__(self, samples_us: Sequence[float]) -> None:
        self.nc_latency = _FakeLatency(samples_us)


class _FakeKernel:
    def __init__(self, fake: FakeNki, kernel: Any, mode: str, options: dict[str, Any]) -> None:
        self._fake, self._kernel, self._mode, self.options = fake, kernel, mode, options
        self.benchmark_result: _FakeBenchmarkResult | None = None

    def __getitem__(self, grid: Any) -> _FakeKernel:
        return self

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        self._fake.calls.append((self._mode, getattr(self._kernel, "__name__", "kernel"), self.options))
        if self._mode == "benchmark":
            iters = int(self.options.get("iters", 100))
            if iters < 1:
                raise ValueError("benchmark iters must be >= 1")
            base = float(self._fake.latency_us(self._kernel, args, kwargs))
            # deterministic spread around the base latency (iteration i of n)
            spread = self._fake.spread
            samples = [base * (1.0 + spread * (2.0 * i / max(iters - 1, 1) - 1.0)) for i in range(iters)]
            self.benchmark_result = _FakeBenchmarkResult(samples)
            return None  # the SDK's benchmark outputs are undefined
        return self._fake.outputs(self._kernel, args, kwargs)


class FakeNki:
    """A test double of ``neuronxcc.nki``'s ``baremetal`` and ``benchmark`` (no device, no compiler).

    ``outputs(kernel, args, kwargs)`` produces what ``baremetal(kernel)(*args, **kwargs)`` returns;
    ``latency_us(kernel, args, kwargs)`` is the centre of the latencies ``benchmark`` reports (spread
    evenly by ``±spread`` over the iterations, so P50 is the centre).  ``calls`` logs every launch.
    """

    __devkit_fake__ = True

    def __init__(
        self,
        outputs: Callable[[Any, tuple, dict], Any],
        latency_us: Callable[[Any, tuple, dict], float],
        *,
        spread: float = 0.02,
    ) -> None:
        self.outputs = outputs
        self.latency_us = latency_us
        self.spread = spread
        self.calls: list[tuple[str, str, dict[str, Any]]] = []

    def baremetal(self, kernel: Any = None, **options: Any) -> Any:
        if kernel is None:
            return lambda k: _FakeKernel(self, k, "baremetal", options)
        return _FakeKernel(self, kernel, "baremetal", options)

    def benchmark(self, kernel: Any = None, **options: Any) -> Any:
        options.setdefault("warmup", 10)
        options.setdefault("iters", 100)
        if kernel is None:
            return lambda k: _FakeKernel(self, k, "benchmark", options)
        return _FakeKernel(self, kernel, "benchmark", options)


def fake_nki(registry: Any, mode: str = "ok", target: str = "trn1") -> FakeNki:
    """A :class:`FakeNki` wired to the registry: ``ok`` returns the reference outputs and the modelled
    latency; ``wrong`` corrupts the outputs; ``slow`` reports 3x the modelled latency."""
    if mode not in ("ok", "wrong", "slow"):
        raise ValueError(f"fake mode must be 'ok', 'wrong' or 'slow', got {mode!r}")

    def spec_of(kernel: Any) -> Any:
        return registry.get(getattr(kernel, "__name__", str(kernel)))

    def outputs(kernel: Any, args: tuple, kwargs: dict) -> Any:
        ref = spec_of(kernel).reference(*args)
        if mode == "wrong":
            return (ref.astype("float32") + 1.0).astype(ref.dtype)
        return ref

    def latency_us(kernel: Any, args: tuple, kwargs: dict) -> float:
        import devkit
        from devkit.nki.runner import TensorSpec

        specs = [TensorSpec(a.shape, a.dtype) for a in args]
        us = float(devkit.estimate(kernel, *specs, target=target, **kwargs).latency_us)
        return us * 3.0 if mode == "slow" else us

    return FakeNki(outputs, latency_us)
