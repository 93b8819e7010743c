"""The public face of the hardware stage for the generated tests in ``hw_tests/`` (and their conftest).

``hw_tests/test_<kernel>.py`` (rendered from ``devkit/templates/hw_test.py.j2`` by ``devkit promote``: one call
of :func:`promoted_tests_from` on its case file ``hw_tests/cases/<kernel>.json``) and ``hw_tests/conftest.py``
(:func:`conftest_hooks`) import only this module, so its names are a stable interface even when the
implementation under :mod:`devkit.workflow.hw` moves; tests and conftests promoted by earlier versions carry
their cases (``Case``) into :func:`promoted_tests` or call the pieces (``run_numerics``, ``run_latency``,
``check_requirements``, ``sdk_runner``, ...) themselves.  Everything else in the kit imports those modules
directly.  The record schema of the results store is documented in :mod:`devkit.workflow.hw.store`.
"""

from __future__ import annotations

from devkit.errors import HardwareUnavailableError
from devkit.project import find as find_project
from devkit.workflow.catalog import ProjectKernels
from devkit.workflow.hw.fake import FakeNki, fake_requirements, fake_runner
from devkit.workflow.hw.harness import Case, run_latency, run_numerics
from devkit.workflow.hw.host import HostContext, check_requirements, load_sdk
from devkit.workflow.hw.runners import sdk_runner
from devkit.workflow.hw.store import ResultsStore
from devkit.workflow.hw.suite import conftest_hooks, promoted_tests, promoted_tests_from

#: The kernels the project at a root declares, plus the kit's (``get(ref)``, ``max_error``).
project_kernels = ProjectKernels

__all__ = ["Case", "FakeNki", "HardwareUnavailableError", "HostContext", "ResultsStore", "check_requirements"]
__all__ += ["fake_requirements", "fake_runner", "find_project", "load_sdk", "project_kernels", "run_latency"]
__all__ += ["conftest_hooks", "promoted_tests", "promoted_tests_from", "run_numerics", "sdk_runner"]
