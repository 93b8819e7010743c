"""docs/calibration.md (written by benchmarks/qor_calibration.py) matches the parameters it documents."""

from __future__ import annotations

import re
from pathlib import Path

from devkit.cost.params import load_params

REPORT = Path(__file__).resolve().parents[1] / "docs" / "calibration.md"


def test_report_lists_every_parameter_with_its_current_value() -> None:
    text = REPORT.read_text(encoding="utf-8")
    for name, spec in load_params().specs.items():
        row = next((line for line in text.splitlines() if line.startswith(f"| `{name}` |")), None)
        assert row is not None, (
            f"{name} missing from docs/calibration.md: rerun benchmarks/qor_calibration.py"
        )
        assert row.split("|")[2].strip().startswith(f"{spec.value:g}"), (name, row)


def test_report_has_per_point_and_lofo_errors_for_both_families() -> None:
    text = REPORT.read_text(encoding="utf-8")
    points = [
        line for line in text.splitlines() if re.match(r"\| (mmt|sd_attention|adaptive_avg_pool2d) \|", line)
    ]
    assert {line.split("|")[1].strip() for line in points} >= {"mmt", "sd_attention", "adaptive_avg_pool2d"}
    for line in points:  # measured, modelled, ratio and LOFO ratio are numbers, ratio = modelled / measured
        measured, modelled, ratio, lofo = (float(c.strip().replace(",", "")) for c in line.split("|")[3:7])
        assert abs(modelled / measured - ratio) < 0.006 and lofo > 0
    assert "leave-one-family-out" in text
