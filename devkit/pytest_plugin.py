"""pytest plugin of the devkit (entry point ``devkit_nki``).

For tests under ``simulator_tests/`` it maps ``neuronxcc.nki`` (Beta 1) and ``nki`` / ``nki_cpu_simulator.nki``
(Beta 2) onto the simulator (an explicit, project-scoped opt-in; see :mod:`devkit.compat`).
``devkit simulate -m pytest`` does the same for any test suite.  Nothing is mapped for other projects' tests
unless they ask with ``--devkit-simulator``.
"""

from __future__ import annotations

import os
from typing import Any

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
    if wants or ours:
        from devkit import compat

        if not compat.is_installed():
            _installation = compat.install()


def pytest_unconfigure(config: Any) -> None:
    global _installation
    if _installation is not None:
        _installation.uninstall()
        _installation = None
