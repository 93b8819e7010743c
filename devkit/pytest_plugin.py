"""pytest plugin of the devkit (entry point ``devkit_nki``).

For tests under ``simulator_tests/`` it maps ``neuronxcc.nki`` (Beta 1) and ``nki`` / ``nki_cpu_simulator.nki``
(Beta 2) onto the simulator (an explicit, project-scoped opt-in; see :mod:`devkit.compat`).
``devkit simulate -m pytest`` does the same for any test suite.  Nothing is mapped for other projects' tests
unless they ask with ``--devkit-simulator`` (or
name a declared kernel through the fixtures below, which map it when its file is imported).

Fixtures and markers for a project's own kernels (see :mod:`devkit.testing`): ``devkit_check(kernel,
shape=None, dtype=None, seed=0, blocks=None)`` simulates and asserts against the declared reference and
tolerance; ``devkit_estimate(kernel, shape=None, dtype=None)`` is the modelled latency in microseconds (for
benchmarks); ``devkit_target`` is the test's target, set with ``@pytest.mark.target("trn2")``.
"""

from __future__ import annotations

import os
from typing import Any

import pytest

_installation: Any = None


def pytest_addoption(parser: Any) -> None:
    group = parser.getgroup("devkit")
    group.addoption(
        "--devkit-simulator",
        action="store_true",
        default=False,
        help="map neuronxcc.nki and nki onto the devkit simulator for this test run",
    )


def pytest_configure(config: Any) -> None:
    global _installation
    root = str(config.rootpath)
    wants = config.getoption("--devkit-simulator", default=False)
    args = [str(a) for a in config.args]
    ours = os.path.isfile(os.path.join(root, "devkit", "pytest_plugin.py")) and (
        not args or any("simulator_tests" in a for a in args) or args == [root]
    )
    config.addinivalue_line("markers", "target(name): cost-model/simulator target of the devkit fixtures")
    if wants or ours:
        from devkit import compat

        if not compat.is_installed():
            _installation = compat.install()


def pytest_unconfigure(config: Any) -> None:
    global _installation
    if _installation is not None:
        _installation.uninstall()
        _installation = None


@pytest.fixture
def devkit_target(request: Any) -> str:
    """The target of this test: ``@pytest.mark.target("trn2")``, else ``trn1``."""
    marker = request.node.get_closest_marker("target")
    if marker is None:
        return "trn1"
    if len(marker.args) != 1 or not isinstance(marker.args[0], str):
        raise pytest.UsageError(f"{request.node.nodeid}: use @pytest.mark.target('trn1'|'inf2'|'trn2')")
    return marker.args[0]


@pytest.fixture
def devkit_check(devkit_target: str) -> Any:
    """:func:`devkit.testing.check_kernel` on the test's target."""
    import functools

    from devkit.testing import check_kernel

    return functools.partial(check_kernel, target=devkit_target)


@pytest.fixture
def devkit_estimate(devkit_target: str) -> Any:
    """:func:`devkit.testing.estimate_us` on the test's target (modelled microseconds; for benchmarks)."""
    import functools

    from devkit.testing import estimate_us

    return functools.partial(estimate_us, target=devkit_target)
