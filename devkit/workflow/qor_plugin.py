"""pytest plugin of ``devkit calibrate --report``: record the modelled latency of every ``nki.benchmark`` call.

Loaded into the unmodified nki-samples test run (``devkit simulate -m pytest ... -p
devkit.workflow.qor_plugin``) by :func:`devkit.workflow.calibration_report.collect`.  Writes one JSON line
per benchmark call to ``$DEVKIT_QOR_OUT`` (test id, kernel, target, the test's latency parameter in us,
modelled latency in us, what bounds it, engine busy time in us).  ``$DEVKIT_QOR_PARAMS`` (a JSON object)
overrides cost-model parameters for the run (leave-one-family-out).
"""

from __future__ import annotations

import json
import os
from typing import Any

import pytest

_current: dict[str, Any] = {}


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: Any) -> Any:
    _current["item"] = item
    yield
    _current.pop("item", None)


def pytest_configure(config: Any) -> None:
    import devkit.nki as dn
    from devkit.workflow.calibration_report import override_params

    overrides = json.loads(os.environ.get("DEVKIT_QOR_PARAMS", "{}"))
    if overrides:
        override_params(overrides).__enter__()  # for the whole (sub)process
    out_path = os.environ["DEVKIT_QOR_OUT"]
    original = dn.Kernel._benchmark

    def recorded(self: Any, args: tuple, kwargs: dict) -> Any:
        out = original(self, args, kwargs)
        item = _current.get("item")
        params = dict(getattr(getattr(item, "callspec", None), "params", {}) or {})
        threshold = params.get("latency", params.get("max_p99_latency"))
        report = self.benchmark_result.report
        record = {
            "test": item.nodeid if item is not None else "?",
            "kernel": getattr(self.func, "__name__", "?"),
            "target": self.target,
            "threshold_us": threshold if isinstance(threshold, (int, float)) else None,
            "modelled_us": report.latency_us,
            "bound_by": report.bound_by,
            "engine_busy_us": dict(report.engine_busy_us),
        }
        with open(out_path, "a", encoding="utf-8") as f:
            f.write(json.dumps(record) + "\n")
        return out

    dn.Kernel._benchmark = recorded
