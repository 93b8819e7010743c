"""Hardware tests: run only where a Neuron device and the real ``neuronx-cc`` exist.

Written by ``devkit promote`` (from ``devkit/templates/hw_conftest.py``) next to the tests it generates;
edit freely, it is not overwritten.

Without them every test is skipped with one reason (``pytest hw_tests -rs`` shows it once);
``--require-hardware`` turns that into an immediate failure naming what is missing.  Each test module is
marked with the NKI API generation of its kernel (``nki_generation("beta1")``: ``neuronxcc.nki``, SDK <= 2.29;
``"beta2"``: ``import nki``, SDK >= 2.27); a test the host's SDK cannot compile is skipped with that one
reason, never run into a compiler error.  These tests never fall back to the simulator: the ``device``
fixture runs kernels through the real SDK module of the test's generation (checked not to be the devkit
simulator), and kernel files are imported bound to the real SDK.

``--fake-neuron MODE`` swaps in :class:`devkit.hw.FakeNki` to test this glue without a device
(``ok``: reference outputs and the modelled latency; ``wrong``: corrupted outputs; ``slow``: 3x the
modelled latency) on a fake SDK of release ``--fake-sdk-version`` (default 2.29, which runs both
generations; ``none``: no SDK).  It needs an explicit ``--results-dir`` and refuses the project's
``results/``: fake numbers never enter the real store.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from devkit import hw

#: The project this directory belongs to (the nearest ``[tool.devkit]`` pyproject.toml above it, else the
#: directory holding this one) and its results store.
PROJECT = hw.find_project(Path(__file__).resolve().parent.parent)
RESULTS_DIR = PROJECT.path("results")
_FAKE_MODES = ("ok", "wrong", "slow")


def pytest_addoption(parser: Any) -> None:
    group = parser.getgroup("devkit-hardware")
    group.addoption(
        "--require-hardware",
        action="store_true",
        default=False,
        help="fail at once (instead of skipping) when the Neuron device or real neuronx-cc is missing",
    )
    group.addoption(
        "--results-dir",
        default=None,
        metavar="DIR",
        help=f"results store to append to (default: {RESULTS_DIR})",
    )
    group.addoption(
        "--latency-slack",
        type=float,
        default=None,
        metavar="FRACTION",
        help="override the slack written into the tests: |P50 - predicted| <= slack * predicted",
    )
    group.addoption(
        "--regression-threshold",
        type=float,
        default=0.10,
        metavar="FRACTION",
        help="fail a latency test when P50 exceeds the previous measurement of the same case by more "
        "than this fraction (default 0.10)",
    )
    group.addoption(
        "--hw-target",
        default=None,
        metavar="TARGET",
        help="cost-model target of this host (default: from the instance type)",
    )
    group.addoption(
        "--fake-neuron",
        default=None,
        choices=_FAKE_MODES,
        help="TESTING THE GLUE ONLY: a fake SDK instead of the device (needs --results-dir)",
    )
    group.addoption(
        "--fake-sdk-version",
        default="2.29",
        metavar="VERSION",
        help="with --fake-neuron: the fake Neuron SDK release, e.g. 2.26 (Beta 1), 2.32 (Beta 2), 2.29 (both, "
        "the default) or none",
    )


def _state(config: Any) -> dict[str, Any]:
    state = getattr(config, "_devkit_hw", None)
    if state is None:
        fake = config.getoption("--fake-neuron")
        results = config.getoption("--results-dir")
        if fake:
            try:
                requirements = hw.fake_requirements(config.getoption("--fake-sdk-version"))
            except ValueError as exc:
                raise pytest.UsageError(f"--fake-sdk-version: {exc}") from None
        else:
            requirements = hw.check_requirements()
        state = {
            "fake": fake,
            "requirements": requirements,
            "results_dir": Path(results) if results else RESULTS_DIR,
            "runners": {},
        }
        config._devkit_hw = state
    return state


def pytest_configure(config: Any) -> None:
    config.addinivalue_line("markers", "hardware: needs a Neuron device and the real neuronx-cc")
    config.addinivalue_line(
        "markers", "nki_generation(name): the NKI API of the test's kernel, 'beta1' or 'beta2'"
    )
    state = _state(config)
    if state["fake"]:
        if (
            config.getoption("--results-dir") is None
            or Path(state["results_dir"]).resolve() == RESULTS_DIR.resolve()
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


def _generation(item: Any) -> str:
    """The NKI API generation of a test's kernel (modules promoted before generations existed: Beta 1)."""
    marker = item.get_closest_marker("nki_generation")
    return marker.args[0] if marker and marker.args else "beta1"


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
    fake = _state(request.config)["fake"]
    if not fake:
        req = hw.check_requirements()  # refuses an SDK mapped onto the simulator in this process
        if not req.sdk_ok:
            raise hw.HardwareUnavailableError(req.sdk_detail)
    return hw.project_kernels(PROJECT.root, real_sdk=not fake)


@pytest.fixture
def device(request: Any, kernel_registry: Any) -> Any:
    """Runs and times kernels of the test's NKI generation: the real SDK's (``neuronxcc.nki`` baremetal and
    benchmark, or standalone ``nki.jit`` calls) or the fake's (``devkit.hw.FakeNki``)."""
    state = _state(request.config)
    generation = _generation(request.node)
    runners = state["runners"]
    if generation not in runners:
        if state["fake"]:
            target = request.config.getoption("--hw-target") or "trn1"
            runners[generation] = hw.fake_runner(kernel_registry, state["fake"], generation, target)
        else:
            runners[generation] = hw.sdk_runner(generation)
    return runners[generation]


@pytest.fixture(scope="session")
def hw_context(request: Any) -> hw.HostContext:
    """Facts stamped on every record (backend, target, instance type, SDK version, git commit)."""
    state = _state(request.config)
    fake = state["fake"]
    target = request.config.getoption("--hw-target") or ("trn1" if fake else None)
    ctx = hw.HostContext.detect("fake" if fake else "neuron-sdk", target)
    if fake:  # the fake SDK's release, not whatever neuronx-cc this machine has
        ctx = dataclasses.replace(ctx, sdk_version=state["requirements"].sdk.version)
    return ctx


@pytest.fixture(scope="session")
def results_store(request: Any) -> hw.ResultsStore:
    return hw.ResultsStore(_state(request.config)["results_dir"])


@pytest.fixture(scope="session")
def latency_slack(request: Any) -> float | None:
    return request.config.getoption("--latency-slack")


@pytest.fixture(scope="session")
def regression_threshold(request: Any) -> float:
    return request.config.getoption("--regression-threshold")


@pytest.fixture(scope="session")
def latency_options(latency_slack: float | None, regression_threshold: float) -> dict[str, Any]:
    """``slack`` and ``threshold`` of ``hw.run_latency`` from the command line."""
    return {"slack": latency_slack, "threshold": regression_threshold}
