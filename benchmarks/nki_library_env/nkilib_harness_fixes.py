"""pytest plugin (``-p nkilib_harness_fixes``): one fix to nki-library @d2ad3a5's public harness.

``test/utils/test_orchestrator.py`` sets ``Orchestrator._compiled_kernel`` only when it compiles, and simulation
mode skips compilation, so every simulated test then fails in ``_rename_neff_outputs_to_python_names`` with
``AttributeError: 'Orchestrator' object has no attribute '_compiled_kernel'`` -- after the kernel ran, before
the outputs are compared.  A class-level default of ``None`` (what the method already tests for) lets the run
reach the comparison.  This patches the harness, not the simulator.
"""

from __future__ import annotations

import pytest


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(session, config, items) -> None:
    from test.utils.test_orchestrator import Orchestrator

    if not hasattr(Orchestrator, "_compiled_kernel"):
        Orchestrator._compiled_kernel = None
