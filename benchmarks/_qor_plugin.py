"""pytest plugin for benchmarks/qor_calibration.py: record the modelled latency of every nki.benchmark call.

Loaded into the nki-samples test run with ``-p _qor_plugin``; writes one JSON line per benchmark call to
``$QOR_OUT`` (test id, kernel, target, the test's latency parameter, modelled latency).  ``$QOR_PARAMS``
(JSON object) overrides cost-model parameters for the run (leave-one-family-out).
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
    import devkit.cost.instr_cost as instr_cost
    import devkit.nki as dn

    overrides = json.loads(os.environ.get("QOR_PARAMS", "{}"))
    if overrides:
        base = instr_cost.default_params
        instr_cost.default_params = lambda target: base(target).replace(**overrides)
    out_path = os.environ["QOR_OUT"]
    original = dn.Kernel._benchmark

    def recorded(self: Any, args: tuple, kwargs: dict) -> Any:
        out = original(self, args, kwargs)
        item = _current.get("item")
        params = dict(getattr(getattr(item, "callspec", None), "params", {}) or {})
        threshold = params.get("latency", params.get("max_p99_latency"))
        record = {
            "test": item.nodeid if item is not None else "?",
            "kernel": getattr(self.func, "__name__", "?"),
            "target": self.target,
            "threshold_us": threshold if isinstance(threshold, (int, float)) else None,
            "modelled_us": self.benchmark_result.report.latency_us,
            "bound_by": self.benchmark_result.report.bound_by,
        }
        with open(out_path, "a", encoding="utf-8") as f:
            f.write(json.dumps(record) + "\n")
        return out

    dn.Kernel._benchmark = recorded
