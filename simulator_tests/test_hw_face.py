"""``devkit.hw`` is the small public face of the hardware stage: exactly what the generated tests use."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from devkit import hw
from devkit.workflow.hw import cases as hw_cases

ROOT = Path(__file__).resolve().parent.parent
_USE = re.compile(r"(?<![\w.])hw\.([A-Za-z_]\w*)")


def _names_used(paths: list[Path]) -> set[str]:
    return {name for p in paths for name in _USE.findall(p.read_text(encoding="utf-8"))}


def test_the_face_exports_every_name_the_template_and_the_hw_tests_use():
    sources = [ROOT / "devkit" / "templates" / "hw_test.py.j2", *sorted((ROOT / "hw_tests").glob("*.py"))]
    used = _names_used(sources)
    assert {"promoted_tests_from", "conftest_hooks", "find_project"} <= used  # the real uses
    missing = sorted(used - set(hw.__all__))
    assert not missing, f"hw_tests/ or the template use names devkit.hw does not export: {missing}"
    for name in hw.__all__:
        assert getattr(hw, name) is not None


def test_the_face_stays_small():
    assert len(hw.__all__) <= 17
    assert len((ROOT / "devkit" / "hw.py").read_text(encoding="utf-8").splitlines()) <= 60


def test_the_face_and_the_workflow_modules_are_the_same_objects():
    from devkit.errors import HardwareUnavailableError
    from devkit.workflow.hw import harness, host, store

    assert hw.Case is harness.Case and hw.ResultsStore is store.ResultsStore
    assert hw.load_sdk is host.load_sdk and hw.HardwareUnavailableError is HardwareUnavailableError


def test_promoted_tests_from_a_case_file_carry_its_cases_generation_and_timing(tmp_path):
    from devkit.workflow import promote

    cases = [
        hw.Case("k", {"N": 64}, "float32", predicted_us={"trn1": 2.5}),
        hw.Case("k", {"N": 128}, "float32"),
    ]
    data = promote.case_file("k", cases, description="", command="c", warmup=3, iters=4, generation="beta2")
    module, _ = promote.write_tests(tmp_path, "k", data)
    numerics, latency = hw.promoted_tests_from(module, "cases/k.json")
    for test in (numerics, latency):
        marks = {m.name: m for m in test.pytestmark}
        assert marks["nki_generation"].args == ("beta2",)
        assert list(marks["parametrize"].args[1]) == cases
    with pytest.raises(hw_cases.CaseFileError, match=r"cases/nope\.json: no such case file"):
        hw.promoted_tests_from(module, "cases/nope.json")


def test_promoted_tests_run_every_case_marked_with_the_generation():
    cases = [hw.Case("k", {"N": 64}, "float32"), hw.Case("k", {"N": 128}, "float32")]
    numerics, latency = hw.promoted_tests(cases, generation="beta2", warmup=1, iters=2, seed=0)
    assert (numerics.__name__, latency.__name__) == ("test_numerics", "test_latency")
    for test in (numerics, latency):
        marks = {m.name: m for m in test.pytestmark}
        assert marks["nki_generation"].args == ("beta2",)
        assert marks["parametrize"].args[0] == "case" and list(marks["parametrize"].args[1]) == cases
    other, _ = hw.promoted_tests(cases[:1], generation="beta1", warmup=0, iters=1, seed=0)  # another module
    assert other is not numerics and len(other.pytestmark) == len(numerics.pytestmark) == 2  # no shared marks
