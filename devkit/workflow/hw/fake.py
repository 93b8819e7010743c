"""A fake Neuron SDK for testing the hardware glue without a device or the compiler.

:class:`FakeNki` mimics Beta 1's ``baremetal`` / ``benchmark`` interfaces (including
``benchmark_result.nc_latency.get_latency_percentile(p)``, microseconds) and Beta 2's standalone call
(:meth:`FakeNki.jit_call`, with a fake clock that advances by the modelled latency);
:func:`fake_runner` wires one to the kernel registry as the runner of a generation, and
:func:`fake_requirements` is a host with a fake device and a Neuron SDK of a chosen release (the version
knob: which generations run and which are skipped).  Records made with it say ``"backend": "fake"``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from devkit.workflow.hw.host import GENERATION_MODULES, Requirements, Sdk, generations_of, parse_release
from devkit.workflow.hw.runners import PERCENTILES, Beta1Runner, Beta2Runner, percentile

#: The fake SDK release when none is named: 2.29 compiles both generations.
DEFAULT_FAKE_SDK = "2.29"


class _FakeLatency:
    def __init__(self, samples_us: Sequence[float]) -> None:
        self._samples = sorted(samples_us)

    def get_latency_percentile(self, p: int) -> float:
        if p not in PERCENTILES:
            raise ValueError(f"latency percentile must be one of {', '.join(map(str, PERCENTILES))}; got {p}")
        return percentile(self._samples, p)


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
        self._now_ns = 0

    def clock_ns(self) -> int:
        """The fake device clock (ns): advanced only by :meth:`jit_call`, by the modelled latency."""
        return self._now_ns

    def jit_call(self, kernel: Any, *args: Any, **kwargs: Any) -> Any:
        """Beta 2's standalone launch ``kernel(*args)``: the outputs, after ``latency_us`` on the fake clock."""
        self.calls.append(("call", getattr(kernel, "__name__", "kernel"), dict(kwargs)))
        self._now_ns += round(float(self.latency_us(kernel, args, kwargs)) * 1e3)
        return self.outputs(kernel, args, kwargs)

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
        """The declaration of this very kernel object (also one declared as ``"module:function"``, like
        the kit's), else the one declared under the function's name."""
        from devkit import declare

        spec = declare.spec_of(kernel)
        if spec is None:
            by_ref = [s for s in declare.declared().values() if isinstance(s.kernel, str)]
            spec = next((s for s in by_ref if _imported(s) is kernel), None)
        return spec if spec is not None else registry.get(getattr(kernel, "__name__", str(kernel)))

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


def _imported(spec: Any) -> Any:
    """The kernel object of a spec declared as ``"module:function"`` if its module is imported already."""
    import sys

    module, _, name = spec.kernel.partition(":")
    return getattr(sys.modules.get(module), name, None)


def fake_runner(
    registry: Any, mode: str = "ok", generation: str = "beta1", target: str = "trn1"
) -> Beta1Runner | Beta2Runner:
    """The runner of ``generation`` on a :func:`fake_nki` (Beta 1: its ``baremetal``/``benchmark``; Beta 2:
    its standalone call and fake clock)."""
    if generation not in GENERATION_MODULES:
        raise ValueError(
            f"unknown NKI generation {generation!r}; choose one of {', '.join(GENERATION_MODULES)}"
        )
    fake = fake_nki(registry, mode, target)
    if generation == "beta1":
        return Beta1Runner(fake)
    return Beta2Runner(call=fake.jit_call, clock_ns=fake.clock_ns)


def fake_requirements(sdk_version: str | None = DEFAULT_FAKE_SDK) -> Requirements:
    """A host with a fake Neuron device and a Neuron SDK of release ``sdk_version`` (``None`` or ``"none"``:
    no SDK, so every test is skipped with the no-SDK reason).  Both generations' modules count as installed;
    the release decides which run."""
    if sdk_version is None or str(sdk_version).strip().lower() == "none":
        return Requirements(
            devices=("fake",),
            sdk_ok=False,
            sdk_detail="the real Neuron compiler neuronx-cc is not installed (fake host without an SDK)",
        )
    if parse_release(sdk_version) is None or not generations_of(parse_release(sdk_version)):
        raise ValueError(f"fake SDK version {sdk_version!r}: give a release like 2.26 or 2.32, or 'none'")
    sdk = Sdk(str(sdk_version), "fake", tuple(GENERATION_MODULES))
    return Requirements(devices=("fake",), sdk_ok=True, sdk_detail="fake Neuron SDK", sdk=sdk)
