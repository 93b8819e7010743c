"""The public face of the hardware stage for the generated tests in ``hw_tests/`` (and their conftest).

``hw_tests/test_<kernel>.py`` (rendered from ``devkit/templates/hw_test.py.j2`` by ``devkit promote``)
and ``hw_tests/conftest.py`` import only this module, so its names are a stable interface even when the
implementation under :mod:`devkit.workflow.hw` moves.  Everything else in the kit imports those modules
directly.  The record schema of the results store is documented in :mod:`devkit.workflow.hw.store`.
"""

from __future__ import annotations

from devkit.errors import HardwareUnavailableError
from devkit.workflow.hw.fake import FakeNki, fake_nki
from devkit.workflow.hw.harness import (
    Case,
    check_numerics,
    judge_latency,
    latency_percentiles,
    latency_record,
    numerics_record,
    prepare,
)
from devkit.workflow.hw.host import HostContext, check_requirements, load_sdk, sdk_version
from devkit.workflow.hw.store import ResultsStore

__all__ = [
    "Case",
    "FakeNki",
    "HardwareUnavailableError",
    "HostContext",
    "ResultsStore",
    "check_numerics",
    "check_requirements",
    "fake_nki",
    "judge_latency",
    "latency_percentiles",
    "latency_record",
    "load_sdk",
    "numerics_record",
    "prepare",
    "sdk_version",
]
