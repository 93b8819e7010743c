"""The pytest side of a hardware-test directory (``hw_tests/``): the generated tests' body and their conftest.

Every module ``devkit promote`` writes (``devkit/templates/hw_test.py.j2``) is a docstring and one call of
:func:`promoted_tests_from`, which reads the module's case file (``cases/<kernel>.json``, the kernel, its NKI
generation, the cases with their predictions and slack: :mod:`devkit.workflow.hw.cases`) and returns its
``test_numerics`` and ``test_latency`` (:func:`promoted_tests`): each case runs through
:func:`~devkit.workflow.hw.harness.run_numerics` / :func:`~devkit.workflow.hw.harness.run_latency`, which record
the run in the results store before anything is asserted.

The directory's ``conftest.py`` (``devkit/templates/hw_conftest.py``) installs :func:`conftest_hooks`, bound to
the project the directory belongs to:

* without a Neuron device and the real ``neuronx-cc`` every test is skipped with one reason (``pytest hw_tests
  -rs`` shows it once); ``--require-hardware`` turns that into an immediate failure naming what is missing;
* each test is marked with the NKI API generation of its kernel (``nki_generation("beta1")``: ``neuronxcc.nki``,
  SDK <= 2.29; ``"beta2"``: ``import nki``, SDK >= 2.27); a test the host's SDK cannot compile is skipped with
  that one reason, never run into a compiler error;
* the tests never fall back to the simulator: the ``device`` fixture runs kernels through the real SDK module of
  the test's generation (checked not to be the devkit simulator), and kernel files are imported bound to the
  real SDK;
* ``--fake-neuron MODE`` swaps in :class:`~devkit.workflow.hw.fake.FakeNki` to test this glue without a device
  (``ok``: reference outputs and the modelled latency; ``wrong``: corrupted outputs; ``slow``: 3x the modelled
  latency) on a fake SDK of release ``--fake-sdk-version`` (default 2.29, which runs both generations;
  ``none``: no SDK).  It needs an explicit ``--results-dir`` and refuses the project's ``results/``: fake
  numbers never enter the real store.

The fixtures: ``kernel_registry`` (the project's declared kernels and the kit's), ``device`` (the runner of the
test's generation), ``hw_context`` (facts stamped on every record), ``results_store``, ``latency_slack``,
``regression_threshold`` and ``latency_options`` (the last two as keywords of ``run_latency``).
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from devkit.errors import HardwareUnavailableError
from devkit.project import Project
from devkit.workflow.catalog import ProjectKernels
from devkit.workflow.hw import cases as hw_cases
from devkit.workflow.hw.fake import fake_requirements, fake_runner
from devkit.workflow.hw.harness import Case, run_latency, run_numerics
from devkit.workflow.hw.host import HostContext, check_requirements
from devkit.workflow.hw.runners import sdk_runner
from devkit.workflow.hw.store import ResultsStore
from devkit.workflow.kernel_ref import KernelRefError

__all__ = ["conftest_hooks", "promoted_tests", "promoted_tests_from"]

_FAKE_MODES = ("ok", "wrong", "slow")

#: The pytest options of a hardware-test directory (``{results}``: the project's results store).
_OPTIONS: tuple[tuple[str, dict[str, Any]], ...] = (
    (
        "--require-hardware",
        {
            "action": "store_true",
            "default": False,
            "help": "fail at once (instead of skipping) when the Neuron device or real neuronx-cc is missing",
        },
    ),
    (
        "--results-dir",
        {"default": None, "metavar": "DIR", "help": "results store to append to (default: {results})"},
    ),
    (
        "--latency-slack",
        {
            "type": float,
            "default": None,
            "metavar": "FRACTION",
            "help": "override the slack written into the tests: |P50 - predicted| <= slack * predicted",
        },
    ),
    (
        "--regression-threshold",
        {
            "type": float,
            "default": 0.10,
            "metavar": "FRACTION",
            "help": "fail a latency test when P50 exceeds the previous measurement of the same case by more "
            "than this fraction (default 0.10)",
        },
    ),
    (
        "--hw-target",
        {
            "default": None,
            "metavar": "TARGET",
            "help": "cost-model target of this host (default: from the instance type)",
        },
    ),
    (
        "--fake-neuron",
        {
            "default": None,
            "choices": _FAKE_MODES,
            "help": "TESTING THE GLUE ONLY: a fake SDK instead of the device (needs --results-dir)",
        },
    ),
    (
        "--fake-sdk-version",
        {
            "default": "2.29",
            "metavar": "VERSION",
            "help": "with --fake-neuron: the fake Neuron SDK release, e.g. 2.26 (Beta 1), 2.32 (Beta 2), 2.29 "
            "(both, the default) or none",
        },
    ),
)


# ---- the generated tests' body ---------------------------------------------------------------------------


def promoted_tests_from(module_file: str | Path, case_file: str | Path) -> tuple[Callable[..., None], ...]:
    """``test_numerics`` and ``test_latency`` of a generated module, from its case file (``case_file``
    relative to the directory of ``module_file``, e.g. ``"cases/xuv_fused.json"``): :func:`promoted_tests`
    over the cases, with the generation, timing and seed the file holds.

    A missing or garbled file raises :class:`~devkit.workflow.hw.cases.CaseFileError` naming the file and
    the field (a collection error of that one module); a kernel the project does not declare, or one of
    another NKI generation than the file says, fails each of its tests naming the file.
    """
    __tracebackhide__ = True  # a collection error shows the module's line and the message, not the loader
    path = Path(module_file).resolve().parent / case_file
    try:
        data = hw_cases.load(path)
    except hw_cases.CaseFileError as exc:
        raise hw_cases.CaseFileError(str(exc)) from None
    return promoted_tests(
        data.cases,
        generation=data.generation,
        warmup=data.warmup,
        iters=data.iters,
        seed=data.seed,
        origin=str(path),
    )


def promoted_tests(
    cases: Sequence[Case],
    *,
    generation: str,
    warmup: int,
    iters: int,
    seed: int,
    origin: str | None = None,
) -> tuple[Callable[..., None], Callable[..., None]]:
    """``test_numerics`` and ``test_latency`` of a generated module, each parametrized over ``cases`` (ids
    :meth:`Case.test_id`) and marked ``nki_generation(generation)``; ``warmup`` and ``iters`` are the timed
    calls of ``run_latency``, ``seed`` that of the inputs; ``origin`` (the case file) is named when a case's
    kernel is not declared or not of ``generation``."""
    over_cases = pytest.mark.parametrize("case", list(cases), ids=Case.test_id)
    of_generation = pytest.mark.nki_generation(generation)

    @of_generation
    @over_cases
    def test_numerics(
        case: Case, device: Any, kernel_registry: Any, hw_context: Any, results_store: Any
    ) -> None:
        _check_kernel(kernel_registry, case, generation, origin)
        check = run_numerics(device, kernel_registry, hw_context, results_store, case, seed=seed)
        if not check.passed:
            pytest.fail(check.message)

    @of_generation
    @over_cases
    def test_latency(
        case: Case,
        device: Any,
        kernel_registry: Any,
        hw_context: Any,
        results_store: Any,
        latency_options: Any,
    ) -> None:
        _check_kernel(kernel_registry, case, generation, origin)
        timing = {"seed": seed, "warmup": warmup, "iters": iters, **latency_options}
        verdict = run_latency(device, kernel_registry, hw_context, results_store, case, **timing)
        if verdict.model_note:
            warnings.warn(f"{case.test_id()}: {verdict.model_note}", stacklevel=1)
        if verdict.regression:
            pytest.fail(f"{case.test_id()}: latency regression: {verdict.message}")

    return test_numerics, test_latency


def _check_kernel(registry: Any, case: Case, generation: str, origin: str | None) -> None:
    """With a case file (``origin``): its kernel must be declared and of its generation, else a
    :class:`~devkit.workflow.hw.cases.CaseFileError` naming the file (before the device is touched)."""
    __tracebackhide__ = True
    if origin is None:
        return
    try:
        spec = registry.get(case.kernel)
    except (KeyError, KernelRefError) as exc:
        raise hw_cases.CaseFileError(f"{origin}: kernel: {exc.args[0] if exc.args else exc}") from None
    declared = getattr(spec, "generation", "beta1")
    if declared != generation:
        raise hw_cases.CaseFileError(
            f"{origin}: generation: {case.kernel} is a {declared} kernel, the file says {generation}: "
            f"re-promote it (`devkit promote {case.kernel}`)"
        )


# ---- the conftest ------------------------------------------------------------------------------------------


def _state(config: Any) -> dict[str, Any]:
    """This session's hardware state (set up by the directory's ``pytest_configure``)."""
    return config._devkit_hw


def _new_state(config: Any, project: Project) -> dict[str, Any]:
    fake = config.getoption("--fake-neuron")
    results = config.getoption("--results-dir")
    if fake:
        try:
            requirements = fake_requirements(config.getoption("--fake-sdk-version"))
        except ValueError as exc:
            raise pytest.UsageError(f"--fake-sdk-version: {exc}") from None
    else:
        requirements = check_requirements()
    return {
        "project": project,
        "fake": fake,
        "requirements": requirements,
        "results_dir": Path(results) if results else project.path("results"),
        "runners": {},
    }


def _generation(item: Any) -> str:
    """The NKI API generation of a test's kernel (modules promoted before generations existed: Beta 1)."""
    marker = item.get_closest_marker("nki_generation")
    return marker.args[0] if marker and marker.args else "beta1"


def conftest_hooks(project: Project) -> dict[str, Any]:
    """The hooks and fixtures a hardware-test directory's ``conftest.py`` installs (``globals().update``),
    bound to ``project`` (the one the directory belongs to: its results store and declared kernels)."""
    store = project.path("results")

    def pytest_addoption(parser: Any) -> None:
        group = parser.getgroup("devkit-hardware")
        for flag, options in _OPTIONS:
            group.addoption(flag, **{**options, "help": options["help"].format(results=store)})

    def pytest_configure(config: Any) -> None:
        config.addinivalue_line("markers", "hardware: needs a Neuron device and the real neuronx-cc")
        config.addinivalue_line(
            "markers", "nki_generation(name): the NKI API of the test's kernel, 'beta1' or 'beta2'"
        )
        if getattr(config, "_devkit_hw", None) is None:
            config._devkit_hw = _new_state(config, project)
        state = _state(config)
        if state["fake"]:
            if (
                config.getoption("--results-dir") is None
                or Path(state["results_dir"]).resolve() == store.resolve()
            ):
                raise pytest.UsageError(
                    "--fake-neuron needs --results-dir DIR other than the project's results/ "
                    "(fake measurements never enter the real store)"
                )
            return
        req = state["requirements"]
        if config.getoption("--require-hardware") and not req.ok:
            raise pytest.UsageError(
                "--require-hardware: cannot run the hardware tests on this machine: " + "; ".join(req.missing)
            )

    return {
        "pytest_addoption": pytest_addoption,
        "pytest_configure": pytest_configure,
        "pytest_report_header": pytest_report_header,
        "pytest_collection_modifyitems": pytest_collection_modifyitems,
        "pytest_runtest_setup": pytest_runtest_setup,
        "kernel_registry": kernel_registry,
        "device": device,
        "hw_context": hw_context,
        "results_store": results_store,
        "latency_slack": latency_slack,
        "regression_threshold": regression_threshold,
        "latency_options": latency_options,
    }


def pytest_report_header(config: Any) -> str:
    state = _state(config)
    req = state["requirements"]
    if state["fake"]:
        return (
            f"hardware: FAKE device (mode {state['fake']}), fake {req.summary()}; "
            f"results -> {state['results_dir']}"
        )
    if req.ok:
        devices = ", ".join(req.devices)
        return f"hardware: {devices}; {req.summary()}; results -> {state['results_dir']}"
    return f"hardware: unavailable, every test will be skipped ({req.reason()})"


def pytest_collection_modifyitems(config: Any, items: list[Any]) -> None:
    for item in items:
        item.add_marker(pytest.mark.hardware)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: Any) -> None:
    """Skip a test, with one reason, unless the hardware stage can run it: no device or SDK, or an SDK that
    does not compile the test's NKI generation (before any fixture is set up; raised here rather than in
    a fixture so that ``pytest -rs`` reports each reason as one line)."""
    reason = _state(item.config)["requirements"].reason_for(_generation(item))
    if reason:
        pytest.skip(reason)


@pytest.fixture(scope="session")
def kernel_registry(request: Any) -> Any:
    """The project's declared kernels (and the kit's); on a device their files bind to the real SDK."""
    state = _state(request.config)
    if not state["fake"]:
        req = check_requirements()  # refuses an SDK mapped onto the simulator in this process
        if not req.sdk_ok:
            raise HardwareUnavailableError(req.sdk_detail)
    return ProjectKernels(state["project"].root, real_sdk=not state["fake"])


@pytest.fixture
def device(request: Any, kernel_registry: Any) -> Any:
    """Runs and times kernels of the test's NKI generation: the real SDK's (``neuronxcc.nki`` baremetal and
    benchmark, or standalone ``nki.jit`` calls) or the fake's (:class:`~devkit.workflow.hw.fake.FakeNki`)."""
    state = _state(request.config)
    generation = _generation(request.node)
    runners = state["runners"]
    if generation not in runners:
        if state["fake"]:
            target = request.config.getoption("--hw-target") or "trn1"
            runners[generation] = fake_runner(kernel_registry, state["fake"], generation, target)
        else:
            runners[generation] = sdk_runner(generation)
    return runners[generation]


@pytest.fixture(scope="session")
def hw_context(request: Any) -> HostContext:
    """Facts stamped on every record (backend, target, instance type, SDK version, git commit)."""
    state = _state(request.config)
    fake = state["fake"]
    target = request.config.getoption("--hw-target") or ("trn1" if fake else None)
    ctx = HostContext.detect("fake" if fake else "neuron-sdk", target)
    if fake:  # the fake SDK's release, not whatever neuronx-cc this machine has
        ctx = dataclasses.replace(ctx, sdk_version=state["requirements"].sdk.version)
    return ctx


@pytest.fixture(scope="session")
def results_store(request: Any) -> ResultsStore:
    return ResultsStore(_state(request.config)["results_dir"])


@pytest.fixture(scope="session")
def latency_slack(request: Any) -> float | None:
    return request.config.getoption("--latency-slack")


@pytest.fixture(scope="session")
def regression_threshold(request: Any) -> float:
    return request.config.getoption("--regression-threshold")


@pytest.fixture(scope="session")
def latency_options(latency_slack: float | None, regression_threshold: float) -> dict[str, Any]:
    """``slack`` and ``threshold`` of ``run_latency`` from the command line."""
    return {"slack": latency_slack, "threshold": regression_threshold}
