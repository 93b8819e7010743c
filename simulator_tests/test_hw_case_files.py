"""Case files (``hw_tests/cases/<kernel>.json``): the strict loader, the errors a hardware run gives for a
missing, garbled or wrong case file, and the check that the repository's ``hw_tests/`` are current.

Good/bad twins: the good document loads field for field; each bad one differs from it in one field and
is refused with a :class:`CaseFileError` naming the file and that field.
"""

from __future__ import annotations

import copy
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from devkit.workflow import promote
from devkit.workflow.hw import cases as hw_cases
from devkit.workflow.hw import store as hw_store
from devkit.workflow.hw.harness import Case

ROOT = Path(__file__).resolve().parent.parent
SHAPE = {"K": 256, "M": 128, "N": 256}
FAKE = ("--fake-neuron", "ok", "--results-dir")

GOOD = {
    "format": "devkit-hw-cases/1",
    "kernel": "matmul_tiled",
    "generation": "beta1",
    "description": "dense lhsT.T @ rhs",
    "provenance": {
        "command": "devkit promote matmul_tiled",
        "devkit_version": "0.1.0",
        "git_commit": "abc",
        "generated": "2026-12-03 15:00 UTC",
    },
    "timing": {"warmup": 2, "iters": 5, "seed": 7},
    "cases": [
        {
            "shape": dict(SHAPE),
            "dtype": "bfloat16",
            "blocks": {},
            "predicted_us": {"trn1": 10.5},
            "slack": 10.0,
        },
        {"shape": dict(SHAPE), "dtype": "float32", "blocks": {"t": 0}, "predicted_us": {}, "slack": 0.25},
    ],
}


def _write(directory: Path, name: str, data: object) -> Path:
    path = hw_cases.case_path(directory, name)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(data if isinstance(data, str) else json.dumps(data), encoding="utf-8")
    return path


def test_the_good_case_file_loads_field_for_field(tmp_path):
    data = hw_cases.load(_write(tmp_path, "matmul_tiled", GOOD))
    assert (data.kernel, data.generation, data.description) == ("matmul_tiled", "beta1", "dense lhsT.T @ rhs")
    assert (data.warmup, data.iters, data.seed) == (2, 5, 7)
    assert data.provenance == GOOD["provenance"]
    assert data.cases == (
        Case("matmul_tiled", SHAPE, "bfloat16", {}, {"trn1": 10.5}, 10.0),
        Case("matmul_tiled", SHAPE, "float32", {"t": 0}, {}, 0.25),
    )
    again = hw_cases.parse(json.loads(hw_cases.dumps(data)))  # the writer's text reads back the same
    assert again == data


def _set(path: str, value: object):
    def change(doc: dict) -> None:
        *parents, last = path.split(".")
        node = doc
        for key in parents:
            node = node[int(key)] if isinstance(node, list) else node[key]
        key = int(last) if isinstance(node, list) else last
        if value is _DELETE:
            del node[key]
        else:
            node[key] = value

    return change


_DELETE = object()

#: (id, change of the good document, what the error names after the file)
BAD = [
    ("format", _set("format", "devkit-hw-cases/0"), "format: expected 'devkit-hw-cases/1'"),
    ("kernel-missing", _set("kernel", _DELETE), "kernel: missing"),
    ("kernel-not-text", _set("kernel", 3), "kernel: expected a non-empty string, got 3 (int)"),
    ("kernel-not-a-name", _set("kernel", "matmul tiled"), "kernel: 'matmul tiled' is neither a kernel name"),
    ("kernel-bad-ref", _set("kernel", "k.txt:matmul"), "kernel: 'k.txt:matmul' is neither"),
    ("generation", _set("generation", "beta3"), "generation: expected one of 'beta1', 'beta2', got 'beta3'"),
    ("provenance-field", _set("provenance.git_commit", _DELETE), "provenance.git_commit: missing"),
    ("provenance-type", _set("provenance", "today"), "provenance: expected an object with command"),
    (
        "timing-iters-text",
        _set("timing.iters", "20"),
        'timing.iters: expected a positive integer, got "20" (str)',
    ),
    ("timing-iters-zero", _set("timing.iters", 0), "timing.iters: expected a positive integer, got 0 (int)"),
    ("timing-warmup-bool", _set("timing.warmup", True), "timing.warmup: expected an integer >= 0, got true"),
    ("unknown-top", _set("case", []), "case: unknown field"),
    ("cases-empty", _set("cases", []), "cases: expected a non-empty list of cases, got a list"),
    ("cases-object", _set("cases", {}), "cases: expected a non-empty list of cases, got an object"),
    ("case-not-object", _set("cases.1", [1]), "cases[1]: expected an object with shape"),
    (
        "shape-text",
        _set("cases.1.shape.K", "256"),
        'cases[1].shape.K: expected a positive integer, got "256"',
    ),
    ("shape-zero", _set("cases.0.shape.M", 0), "cases[0].shape.M: expected a positive integer, got 0"),
    (
        "shape-float",
        _set("cases.0.shape.N", 256.0),
        "cases[0].shape.N: expected a positive integer, got 256.0",
    ),
    ("shape-empty", _set("cases.0.shape", {}), "cases[0].shape: expected at least one named dimension"),
    ("dtype", _set("cases.0.dtype", "bf16"), "cases[0].dtype: unknown dtype 'bf16'"),
    ("blocks-list", _set("cases.1.blocks", [4]), "cases[1].blocks: expected an object, got a list"),
    ("blocks-float", _set("cases.1.blocks.t", 1.5), "cases[1].blocks.t: expected an integer >= 0, got 1.5"),
    (
        "prediction-negative",
        _set("cases.0.predicted_us.trn1", -1),
        "cases[0].predicted_us.trn1: expected a positive latency in us, got -1 (int)",
    ),
    ("prediction-null", _set("cases.0.predicted_us.trn1", None), "cases[0].predicted_us.trn1: expected a "),
    ("slack-text", _set("cases.0.slack", "0.25"), 'cases[0].slack: expected a positive fraction, got "0.25"'),
    ("slack-zero", _set("cases.0.slack", 0), "cases[0].slack: expected a positive fraction, got 0 (int)"),
    (
        "slack-infinite",
        _set("cases.0.slack", math.inf),
        "cases[0].slack: expected a positive fraction, got Infinity",
    ),
    ("case-field-missing", _set("cases.1.slack", _DELETE), "cases[1].slack: missing"),
    ("case-field-unknown", _set("cases.1.slak", 0.2), "cases[1].slak: unknown field"),
]


@pytest.mark.parametrize(("change", "says"), [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_a_garbled_case_file_names_the_file_and_the_field(tmp_path, change, says):
    doc = copy.deepcopy(GOOD)
    change(doc)
    path = _write(tmp_path, "matmul_tiled", doc)
    with pytest.raises(hw_cases.CaseFileError) as caught:
        hw_cases.load(path)
    assert str(caught.value).startswith(f"{path}: {says}")


@pytest.mark.parametrize(
    ("text", "says"),
    [
        (None, "no such case file (written by `devkit promote matmul_tiled`"),
        ('{"format": "devkit-hw-cases/1",', "not valid JSON: "),
        ("[1, 2]", "expected an object with format, kernel"),
        (b"\xff\xfe", "cannot read the case file"),
    ],
    ids=["missing", "truncated", "not-an-object", "not-utf8"],
)
def test_a_missing_or_unreadable_case_file_names_the_file(tmp_path, text, says):
    path = hw_cases.case_path(tmp_path, "matmul_tiled")
    if text is not None:
        path.parent.mkdir()
        path.write_bytes(text if isinstance(text, bytes) else text.encode())
    with pytest.raises(hw_cases.CaseFileError) as caught:
        hw_cases.load(path)
    assert str(caught.value).startswith(f"{path}: {says}")


# ---- what a hardware run says about a bad case file (the fake SDK) -----------------------------------


def _directory(tmp_path: Path) -> Path:
    """A test directory with the kit's conftest and three generated modules: a good one, one whose case file
    is garbled, one whose case file names a kernel nobody declares, and one of the wrong generation."""
    tests = tmp_path / "hw_tests"
    tests.mkdir()
    (tests / "conftest.py").write_text((ROOT / "hw_tests" / "conftest.py").read_text())
    case = Case("matmul_tiled", SHAPE, "bfloat16", predicted_us={"trn1": 10.0}, slack=10.0)
    good = promote.case_file("matmul_tiled", [case], description="", command="test", warmup=1, iters=2)
    promote.write_tests(tests, "matmul_tiled", good)
    promote.write_tests(tests, "garbled", good)
    doc = hw_cases.to_data(good)
    doc["cases"][0]["shape"]["K"] = "256"
    _write(tests, "garbled", doc)
    nobody = Case("no_such_kernel", SHAPE, "bfloat16", predicted_us={"trn1": 10.0})
    promote.write_tests(
        tests, "no_such_kernel", promote.case_file("no_such_kernel", [nobody], description="", command="t")
    )
    wrong = promote.case_file("matmul_tiled", [case], description="", command="t", generation="beta2")
    promote.write_tests(tests, "wrong_generation", wrong)
    return tests


def _fake_run(tests: Path, results: Path, *args: str) -> str:
    argv = [sys.executable, "-m", "pytest", str(tests), "-p", "no:cacheprovider", "-q", "-rA", *FAKE]
    proc = subprocess.run(
        [*argv, str(results), *args], capture_output=True, text=True, timeout=300, cwd=tests.parent
    )
    return f"rc={proc.returncode}\n{proc.stdout}{proc.stderr}"


def test_a_garbled_case_file_stops_the_run_at_collection_naming_file_and_field(tmp_path):
    tests = _directory(tmp_path)
    out = _fake_run(tests, tmp_path / "fake-results")
    assert out.startswith("rc=2\n") and "Interrupted: 1 error during collection" in out, out
    garbled = tests / "cases" / "garbled.json"
    assert f'CaseFileError: {garbled}: cases[0].shape.K: expected a positive integer, got "256" (str)' in out
    assert "cases.py" not in out  # the module's line and the message, not the loader's insides
    assert not (tmp_path / "fake-results").exists()


def test_unknown_kernel_and_wrong_generation_fail_their_tests_naming_the_case_file(tmp_path):
    tests = _directory(tmp_path)
    results = tmp_path / "fake-results"
    out = _fake_run(tests, results, "--continue-on-collection-errors")
    assert out.startswith("rc=1\n") and "4 failed, 2 passed, 1 error" in out, out
    nobody = tests / "cases" / "no_such_kernel.json"
    assert f"CaseFileError: {nobody}: kernel: unknown kernel 'no_such_kernel'" in out
    wrong = tests / "cases" / "wrong_generation.json"
    assert f"CaseFileError: {wrong}: generation: matmul_tiled is a beta1 kernel, the file says beta2" in out
    records = hw_store.ResultsStore(results).read().records
    assert sorted(r["kind"] for r in records) == ["latency", "numerics"]  # only the good module ran
    assert {(r["kernel"], r["generation"]) for r in records} == {("matmul_tiled", "beta1")}


# ---- the repository's generated tests are current ---------------------------------------------------


def test_the_repo_hw_tests_are_what_promote_all_writes():
    """Every kit kernel has its module and case file in ``hw_tests/``; each module is exactly the one
    :func:`promote.render_module` writes for its case file; each case file names its kernel, generation and
    description as declared now, the default shapes in bfloat16, and the blocks the kernel defaults to now.
    Predictions are not compared (they move with the cost model): re-promote with
    ``python -m devkit promote --all`` when this fails."""
    from devkit.kernels import registry

    tests = ROOT / "hw_tests"
    modules = sorted(p.name.removeprefix("test_").removesuffix(".py") for p in tests.glob("test_*.py"))
    data_files = sorted(p.stem for p in (tests / "cases").glob("*.json"))
    assert modules == data_files == sorted(registry.names())
    for name in data_files:
        data = hw_cases.load(hw_cases.case_path(tests, name))
        spec = registry.get(name)
        assert (data.kernel, data.generation, data.description) == (name, spec.generation, spec.description)
        assert (tests / f"test_{name}.py").read_text() == promote.render_module(name, data.generation), name
        assert [dict(c.shape) for c in data.cases] == promote.default_shapes(spec), name
        for c in data.cases:
            assert c.dtype == "bfloat16" and set(c.predicted_us) == {"trn1"}, name
            assert dict(c.blocks) == spec.default_blocks(dict(c.shape), c.dtype, "trn1"), (name, c.shape)
        assert data.provenance["command"].startswith("devkit promote"), name
