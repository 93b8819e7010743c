"""``devkit validate``: property-based numerics of a declared kernel against its reference, in the simulator.

Hypothesis draws shapes from the declaration's ``shape_space`` (``(lo, hi)`` inclusive ranges, lists of
choices, or hypothesis strategies), a dtype from ``dtypes`` and an input seed; each example is simulated
with numerics on and compared with the NumPy reference within the dtype's tolerance.  A failure is shrunk
to the smallest failing shape hypothesis finds.  When every drawn example passes, the declared default
shape is checked last (first dtype, seed 0).  The search
is derandomised (same inputs, same examples) and keeps no example database; what hypothesis still caches
goes under the project's ``.devkit-cache/hypothesis`` (never the current directory).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from devkit.declare import KernelSpec, ValidationResult


class ValidateError(ValueError):
    """Bad validation input (a dtype the kernel does not declare, a malformed shape space)."""


@dataclass
class ValidateReport:
    """Every example run (in order) and the shrunk failure, if any."""

    kernel: str
    examples: list[ValidationResult] = field(default_factory=list)
    failure: ValidationResult | None = None
    error: str | None = None  # the kernel or the kit raised on the (shrunk) failing example

    @property
    def passed(self) -> bool:
        return self.failure is None and self.error is None


def shape_strategy(spec: KernelSpec) -> Any:
    """A hypothesis strategy of shape dicts: declared ranges, default values for undeclared parameters."""
    from hypothesis import strategies as st
    from hypothesis.strategies import SearchStrategy

    parts: dict[str, Any] = {}
    for p in spec.shape_params:
        space = spec.shape_space.get(p)
        if space is None:
            parts[p] = st.just(int(spec.default_shape[p]))
        elif isinstance(space, SearchStrategy):
            parts[p] = space
        elif isinstance(space, tuple) and len(space) == 2 and all(isinstance(v, int) for v in space):
            lo, hi = space
            if not 1 <= lo <= hi:
                raise ValidateError(f"{spec.name}: shape_space[{p!r}] = {space}: need 1 <= lo <= hi")
            parts[p] = st.integers(lo, hi)
        elif isinstance(space, (list, tuple)) and space and all(isinstance(v, int) and v >= 1 for v in space):
            parts[p] = st.sampled_from(list(space))
        else:
            raise ValidateError(
                f"{spec.name}: shape_space[{p!r}] = {space!r}: expected (lo, hi), a list of sizes or a "
                "hypothesis strategy"
            )
    return st.fixed_dictionaries(parts)


def validate(
    spec: KernelSpec,
    *,
    examples: int = 10,
    dtypes: Sequence[str] | None = None,
    target: str = "trn1",
    on_example: Callable[[ValidationResult], None] | None = None,
) -> ValidateReport:
    """Run up to ``examples`` hypothesis examples of ``spec`` (see the module docstring)."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    dtypes = list(dtypes or spec.dtypes)
    bad = [d for d in dtypes if d not in spec.dtypes]
    if bad:
        raise ValidateError(f"{spec.name} declares dtypes {', '.join(spec.dtypes)}, not {', '.join(bad)}")
    if examples < 1:
        raise ValidateError("examples must be >= 1")
    report = ValidateReport(spec.name)
    last: list[ValidationResult | None] = [None]
    current = [""]

    @settings(
        max_examples=examples,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=list(HealthCheck),
        print_blob=False,
    )
    @given(shape=shape_strategy(spec), dtype=st.sampled_from(dtypes), seed=st.integers(0, 2**16))
    def check(shape: dict[str, int], dtype: str, seed: int) -> None:
        last[0] = None
        current[0] = f"[{','.join(f'{k}={v}' for k, v in shape.items())}] {dtype} seed {seed}"
        res = spec.check(shape, dtype, seed, target=target)
        last[0] = res
        report.examples.append(res)
        if on_example:
            on_example(res)
        assert res.ok, res.message

    from hypothesis import configuration

    from devkit import project

    previous = vars(configuration).get("__hypothesis_home_directory")
    configuration.set_hypothesis_home_dir(project.state_path("cache") / "hypothesis")
    try:
        with _pinned_constants(spec):
            check()
    except AssertionError:
        report.failure = last[0]
    except Exception as exc:  # the kernel faulted on an example: reported with the shrunk example
        from devkit.errors import failure_text

        report.error = f"{spec.name} {current[0]}: {failure_text(exc)}"
    finally:
        configuration.set_hypothesis_home_dir(previous)
    if report.passed:
        try:
            res = spec.check(dict(spec.default_shape), dtypes[0], 0, target=target)
        except Exception as exc:
            from devkit.errors import failure_text

            report.error = f"{spec.name} default shape: {failure_text(exc)}"
            return report
        report.examples.append(res)
        if on_example:
            on_example(res)
        if not res.ok:
            report.failure = res
    return report


@contextmanager
def _pinned_constants(spec: KernelSpec) -> Iterator[None]:
    """Draw the same examples in any process: recent Hypothesis biases its draws toward the literals of
    every *local* (not site-packages) module loaded in the process, so a CLI run, a pool worker and a
    Ray worker -- which load different modules -- would draw different shapes from one derandomised
    search.  Inside this block only the kernel's own module counts.  (Hypothesis internals: on a
    version without them, the search runs as Hypothesis made it.)"""
    try:
        from hypothesis.internal.conjecture import providers
        from hypothesis.internal.constants_ast import Constants, constants_from_module

        original = providers._get_local_constants
        cache = providers.CONSTANTS_CACHE
    except (ImportError, AttributeError):
        yield
        return
    module = sys.modules.get(getattr(spec.kernel_object(), "__module__", "") or "")
    pinned = constants_from_module(module) if module is not None else Constants()
    providers._get_local_constants = lambda: pinned
    cache.cache.clear()
    try:
        yield
    finally:
        providers._get_local_constants = original
        cache.cache.clear()


def validate_job(item: dict[str, Any]) -> ValidateReport:
    """One kernel's search from plain data (an executor job, :mod:`devkit.workflow.executor`):
    ``{"kernel": declared name or FILE.py:KERNEL, "examples", "dtypes" (None: the declared), "target"}``."""
    import dataclasses

    from devkit.workflow import catalog

    report = validate(
        catalog.get(item["kernel"]), examples=item["examples"], dtypes=item["dtypes"], target=item["target"]
    )

    def plain(
        res: ValidationResult | None,
    ) -> ValidationResult | None:  # shapes as dicts: they are pickled back
        return None if res is None else dataclasses.replace(res, shape=dict(res.shape))

    return ValidateReport(
        report.kernel, [plain(r) for r in report.examples], plain(report.failure), report.error
    )
