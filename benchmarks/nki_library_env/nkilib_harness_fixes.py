"""pytest plugin (``-p nkilib_harness_fixes``): a fix to nki-library @d2ad3a5's public harness, and an opt-in
collection of the reference cycles it leaves between tests (see ``pytest_runtest_teardown``).

``test/utils/test_orchestrator.py`` sets ``Orchestrator._compiled_kernel`` only when it compiles, and simulation
mode skips compilation, so every simulated test then fails in ``_rename_neff_outputs_to_python_names`` with
``AttributeError: 'Orchestrator' object has no attribute '_compiled_kernel'`` -- after the kernel ran, before
the outputs are compared.  A class-level default of ``None`` (what the method already tests for) lets the run
reach the comparison.  This patches the harness, not the simulator.
"""

from __future__ import annotations

import gc
import os
import sys

import pytest


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(session, config, items) -> None:
    from test.utils.test_orchestrator import Orchestrator

    if not hasattr(Orchestrator, "_compiled_kernel"):
        Orchestrator._compiled_kernel = None


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item, nextitem) -> None:
    """With ``NKILIB_COLLECT_BETWEEN_TESTS=1`` (the runner's ``--gc-between-tests``): free what a finished test
    left in reference cycles before the next one generates its inputs.

    The harness leaves each test's arrays in cycles that only the cyclic collector frees, and the collector's
    oldest generation waits for a quarter more long-lived objects than the ~260,000 a harness process holds, so
    between tests it hardly ever runs.  The validator classes made per test inside ``golden_output_validator``
    (e.g. ``test_rmsnorm_quant.py:100-107``) close over the kernel inputs (a class is always in a cycle).  A
    failed test's exception (``InferenceException``/``ValidationException`` raised ``from`` the original error,
    ``test_orchestrator.py:468,563``) is kept in a local of pluggy's ``_multicall`` frame (``exception = exc``,
    ``pluggy/_execution.py:155``, then re-raised at ``:195``), which is on the
    exception's own traceback: every frame of the test stays with its locals (inputs, outputs, golden arrays),
    and pytest also keeps the last failure in ``sys.last_traceback`` until the next test's call starts.  Under
    a memory cap the next tests' own allocations are then refused.  Clearing pytest's post-mortem references
    and collecting after each test removes that coupling; nothing else changes.
    """
    if os.environ.get("NKILIB_COLLECT_BETWEEN_TESTS") != "1":
        return
    for name in ("last_type", "last_value", "last_traceback", "last_exc"):
        if hasattr(sys, name):
            delattr(sys, name)
    gc.collect()
