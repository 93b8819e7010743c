"""Hardware tests: run only where a Neuron device and the real ``neuronx-cc`` exist.

Written by ``devkit promote`` (from ``devkit/templates/hw_conftest.py``) next to the tests it generates;
edit freely, it is not overwritten.

Without them every test is skipped with one reason (``pytest hw_tests -rs`` shows it once);
``--require-hardware`` turns that into an immediate failure naming what is missing.  These tests never
fall back to the simulator: the ``nki`` fixture is the real ``neuronxcc.nki`` (checked not to be the
devkit simulator), and kernels are imported only after that check.

``--fake-neuron MODE`` swaps in :class:`devkit.hw.FakeNki` to test this glue without a device
(``ok``: reference outputs and the modelled latency; ``wrong``: corrupted outputs; ``slow``: 3x the
modelled latency).  It needs an explicit ``--results-dir`` and refuses the project's ``results/``:
fake numbers never enter the real store.
"""

from __future__ import annotations

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


def _state(config: Any) -> dict[str, Any]:
    state = getattr(config, "_devkit_hw", None)
    if state is None:
        fake = config.getoption("--fake-neuron")
        results = config.getoption("--results-dir")
        state = {
            "fake": fake,
            "requirements": None if fake else hw.check_requirements(),
            "results_dir": Path(results) if results else RESULTS_DIR,
        }
        config._devkit_hw = state
    return state


def pytest_configure(config: Any) -> None:
    config.addinivalue_line("markers", "hardware: needs a Neuron device and the real neuronx-cc")
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
    if state["fake"]:
        return f"hardware: FAKE Neuron SDK (mode {state['fake']}); results -> {state['results_dir']}"
    req = state["requirements"]
    if req.ok:
        devices = ", ".join(req.devices)
        return f"hardware: {devices}; neuronx-cc {hw.sdk_version()}; results -> {state['results_dir']}"
    return f"hardware: unavailable, every test will be skipped ({req.reason()})"


def pytest_collection_modifyitems(config: Any, items: list[Any]) -> None:
    for item in items:
        item.add_marker(pytest.mark.hardware)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: Any) -> None:
    """Skip every test, with one reason, unless the hardware stage can run (before any fixture is set up;
    raised here rather than in a fixture so that ``pytest -rs`` reports it as one line)."""
    state = _state(item.config)
    if state["fake"]:
        return
    req = state["requirements"]
    if not req.ok:
        pytest.skip(req.reason())


@pytest.fixture(scope="session")
def kernel_registry(request: Any) -> Any:
    """The project's declared kernels (and the kit's), imported only after the hardware check (the real
    SDK binds the kernels)."""
    if not _state(request.config)["fake"]:
        hw.load_sdk()  # refuses the simulator before any kernel module can bind anything
    return hw.project_kernels(PROJECT.root)


@pytest.fixture(scope="session")
def nki(request: Any, kernel_registry: Any) -> Any:
    """The SDK module whose ``baremetal``/``benchmark`` the tests call: real ``neuronxcc.nki`` or the fake."""
    mode = _state(request.config)["fake"]
    if mode:
        return hw.fake_nki(kernel_registry, mode, target=request.config.getoption("--hw-target") or "trn1")
    return hw.load_sdk()


@pytest.fixture(scope="session")
def hw_context(request: Any, nki: Any) -> hw.HostContext:
    """Facts stamped on every record (backend, target, instance type, SDK version, git commit)."""
    fake = _state(request.config)["fake"]
    target = request.config.getoption("--hw-target") or ("trn1" if fake else None)
    return hw.HostContext.detect("fake" if fake else "neuron-sdk", target)


@pytest.fixture(scope="session")
def results_store(request: Any) -> hw.ResultsStore:
    return hw.ResultsStore(_state(request.config)["results_dir"])


@pytest.fixture(scope="session")
def latency_slack(request: Any) -> float | None:
    return request.config.getoption("--latency-slack")


@pytest.fixture(scope="session")
def regression_threshold(request: Any) -> float:
    return request.config.getoption("--regression-threshold")
