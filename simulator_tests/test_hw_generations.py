"""Issue 20's hardware stage for both NKI API generations, and issue 16's hardware stage on a user kernel.

A throwaway project (outside the repository) declares its own kernel twice: ``triple`` in Beta 1
(``neuronxcc.nki``) and ``triple_b2`` in Beta 2 (``import nki``, same family).  ``devkit promote`` renders one
generation-marked test per version; the generated tests run in a separate pytest process (as ``devkit hw
run`` would) against the fake SDK at several releases - the generation/SDK matrix - and on this machine's
real (absent) SDK.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from devkit.errors import HardwareUnavailableError
from devkit.workflow import promote
from devkit.workflow.hw import cases as hw_cases
from devkit.workflow.hw import fake as hw_fake
from devkit.workflow.hw import host as hw_host
from devkit.workflow.hw import runners as hw_runners
from devkit.workflow.hw import store as hw_store

REPO = Path(__file__).resolve().parents[1]

KERNELS = textwrap.dedent(
    '''
    """A user's kernel in both NKI generations: out = 3 * a."""
    import neuronxcc.nki as nki1
    import neuronxcc.nki.language as nl1
    import nki
    import nki.isa as nisa
    import nki.language as nl
    import numpy as np

    import devkit


    def reference(a):
        return (3.0 * a.astype(np.float32)).astype(a.dtype)


    COMMON = dict(
        reference=reference,
        arg_shapes=lambda s: [(128, s["N"])],
        default_shape={"N": 96},
        tolerances={"float32": 1e-6, "bfloat16": 1e-2},
        dtypes=("float32", "bfloat16"),
    )


    @devkit.declare_kernel(name="triple", **COMMON)
    @nki1.jit
    def triple(a):
        out = nl1.ndarray(a.shape, dtype=a.dtype, buffer=nl1.shared_hbm)
        nl1.store(out, nl1.multiply(nl1.load(a), 3.0))
        return out


    @devkit.declare_kernel(name="triple_b2", generation="beta2", family="triple", **COMMON)
    @nki.jit
    def triple_b2(a):
        tile = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=tile, src=a)
        twice = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
        nisa.tensor_tensor(twice, tile, tile, nl.add)
        thrice = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
        nisa.tensor_tensor(thrice, twice, tile, nl.add)  # 3a as a + a + a
        result = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=result, src=thrice)
        return result
    '''
)
PYPROJECT = '[project]\nname = "mine"\nversion = "0"\n\n[tool.devkit]\nkernels = ["my_kernels.py"]\n'
PYPROJECT += "include_kit = false\n"


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DEVKIT_", "PYTEST_"))}
    env["PYTHONPATH"] = str(REPO)
    env["OPENBLAS_NUM_THREADS"] = "1"
    return env


def _devkit(proj: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "devkit", *args],
        cwd=proj,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )


def _pytest(proj: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "pytest", "hw_tests", "-p", "no:cacheprovider", "-rs", "-q", *args],
        cwd=proj,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )


def _skip_reasons(stdout: str) -> set[str]:
    return {line.split(": ", 1)[1] for line in stdout.splitlines() if line.startswith("SKIPPED")}


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    """The throwaway project with both versions promoted by the CLI (no SDK here: every generation)."""
    proj = tmp_path_factory.mktemp("user-project")
    (proj / "pyproject.toml").write_text(PYPROJECT)
    (proj / "my_kernels.py").write_text(KERNELS)
    proc = _devkit(proj, "promote", "triple", "--dtype", "float32", "--jobs", "1")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proj


# ---- the SDK table and the skip reason ---------------------------------------------------------------


RELEASES = [
    ("2.21.18209.0+043b1bf7", ("beta1",)),
    ("2.26", ("beta1",)),
    ("2.27.0", ("beta1", "beta2")),
    ("2.29.1", ("beta1", "beta2")),
    ("2.30", ("beta2",)),
    ("2.32.0", ("beta2",)),
]


@pytest.mark.parametrize(("version", "want"), RELEASES)
def test_generations_each_release_compiles(version, want):
    assert hw_host.generations_of(hw_host.parse_release(version)) == want
    assert hw_host.Sdk(version, "test", ("beta1", "beta2")).generations == want


def test_a_mismatch_is_one_sentence_naming_both_sides():
    sdk = hw_host.Sdk("2.32.0", "neuronx-cc", ("beta1", "beta2"))
    assert sdk.mismatch("beta2") is None
    reason = sdk.mismatch("beta1")
    assert "Beta 1 (neuronxcc.nki)" in reason and "<= 2.29" in reason and "2.32.0" in reason
    assert "\n" not in reason
    old = hw_host.Sdk("2.26", "neuronx-cc", ("beta1",))
    assert ">= 2.27" in old.mismatch("beta2") and old.mismatch("beta1") is None
    no_module = hw_host.Sdk("2.28", "neuronx-cc", ("beta1",))  # 2.28 accepts Beta 2, but no nki package
    assert "without the nki module" in no_module.mismatch("beta2")
    with pytest.raises(ValueError, match="unknown NKI generation"):
        sdk.mismatch("beta3")


def test_no_sdk_keeps_the_existing_reason_for_both_generations():
    req = hw_host.check_requirements()  # this machine: no device, no SDK
    for gen in ("beta1", "beta2"):
        assert req.reason_for(gen) == req.reason()
        assert req.reason().startswith("hardware tests need a Neuron device and the real neuronx-cc")


def test_the_release_can_be_named_by_the_environment(monkeypatch):
    monkeypatch.setenv(hw_host.SDK_VERSION_ENV, "2.31")
    sdk = hw_host.probe_sdk()
    assert sdk.version == "2.31" and sdk.source == hw_host.SDK_VERSION_ENV
    assert sdk.generations == ()  # neither module is installed here, whatever the release


def test_load_sdk_refuses_a_generation_without_the_sdk():
    for gen in ("beta1", "beta2"):
        with pytest.raises(HardwareUnavailableError, match="neuronx-cc"):
            hw_host.load_sdk(gen)


def test_fake_requirements_follow_the_version_knob():
    assert hw_fake.fake_requirements("2.26").reason_for("beta1") is None
    assert "<= 2.29" in hw_fake.fake_requirements("2.32").reason_for("beta1")
    assert hw_fake.fake_requirements("2.29").sdk.generations == ("beta1", "beta2")
    assert "hardware tests need" in hw_fake.fake_requirements("none").reason_for("beta2")
    with pytest.raises(ValueError, match="fake SDK version"):
        hw_fake.fake_requirements("banana")


# ---- runners ---------------------------------------------------------------------------------------


def test_beta2_runner_times_the_calls_after_the_warmup():
    clock = [0]
    durations = iter([999.0, 999.0, 10.0, 20.0, 30.0, 40.0, 50.0])  # us: two warm-up calls, then five

    def call(kernel, *args):
        clock[0] += int(next(durations) * 1e3)
        return kernel(*args)

    runner = hw_runners.Beta2Runner(call=call, clock_ns=lambda: clock[0])
    got = runner.benchmark(lambda a: a, [1], {}, warmup=2, iters=5)
    assert got["p0"] == 10.0 and got["p50"] == 30.0 and got["p100"] == 50.0 and got["p25"] == 20.0
    assert set(got) == {f"p{p}" for p in hw_runners.PERCENTILES}
    with pytest.raises(ValueError, match="iters >= 1"):
        runner.benchmark(lambda a: a, [1], {}, warmup=0, iters=0)


def test_a_kernel_of_the_other_generation_is_refused_before_it_runs(project, monkeypatch):
    from devkit import hw
    from devkit.workflow.hw import harness

    monkeypatch.chdir(project)
    registry = hw.project_kernels(project)
    case = harness.Case("triple", {"N": 96}, "float32")
    runner = hw_runners.Beta2Runner(call=lambda *a, **k: pytest.fail("must not run"))
    with pytest.raises(ValueError, match="is a beta1 kernel but the test runs it as beta2"):
        harness.run_numerics(runner, registry, None, None, case, seed=0)


# ---- promotion --------------------------------------------------------------------------------------


def test_promote_writes_one_marked_test_per_generation(project):
    b1 = (project / "hw_tests" / "test_triple.py").read_text()
    b2 = (project / "hw_tests" / "test_triple_b2.py").read_text()
    assert "Beta 1 (neuronxcc.nki) kernel" in b1 and "Beta 2 (nki) kernel" in b2
    assert b2.rstrip().endswith('hw.promoted_tests_from(__file__, "cases/triple_b2.json")')
    c1 = hw_cases.load(project / "hw_tests" / "cases" / "triple.json")
    c2 = hw_cases.load(project / "hw_tests" / "cases" / "triple_b2.json")
    assert (c1.generation, c2.generation) == ("beta1", "beta2")  # hw.promoted_tests_from marks the tests
    assert (c2.warmup, c2.iters) == (5, 20)
    (case,) = c2.cases
    assert (case.kernel, dict(case.shape), case.dtype, set(case.predicted_us)) == (
        "triple_b2",
        {"N": 96},
        "float32",
        {"trn1"},
    )
    assert (project / "hw_tests" / "conftest.py").is_file()


def test_promote_selects_the_generations_of_the_host_sdk(project, monkeypatch):
    from devkit.workflow import catalog

    monkeypatch.chdir(project)
    specs = catalog.all_specs()
    family = promote.family_of(specs[0], specs)
    assert [s.name for s in family] == ["triple", "triple_b2"]
    new = hw_host.Sdk("2.32", "neuronx-cc", ("beta1", "beta2"))
    kept, notes = promote.select_generations(family, "host", new)
    assert [s.name for s in kept] == ["triple_b2"]
    assert len(notes) == 1 and notes[0].startswith(
        "triple (Beta 1 (neuronxcc.nki)) left out: Neuron SDK 2.32"
    )
    kept, _ = promote.select_generations(family, "host", hw_host.Sdk("2.26", "neuronx-cc", ("beta1",)))
    assert [s.name for s in kept] == ["triple"]
    kept, _ = promote.select_generations(
        family, "host", hw_host.Sdk("2.28", "neuronx-cc", ("beta1", "beta2"))
    )
    assert [s.name for s in kept] == ["triple", "triple_b2"]
    kept, notes = promote.select_generations(family, "host")  # no SDK here: every generation
    assert len(kept) == 2 and notes == []
    kept, notes = promote.select_generations(family, "beta2")
    assert [s.name for s in kept] == ["triple_b2"] and "--generation beta2" in notes[0]
    with pytest.raises(promote.PromoteError, match="--generation"):
        promote.select_generations(family, "beta3")


def test_promote_cli_says_what_it_left_out(project, tmp_path):
    """Naming the Beta-2 version with --generation beta1 promotes its Beta-1 sibling, saying so; a kernel with
    no version of the chosen generation is an error that writes nothing."""
    proc = _devkit(project, "promote", "triple_b2", "--generation", "beta1", "--out-dir", str(tmp_path / "a"))
    assert proc.returncode == 0, proc.stderr
    assert "triple_b2 (Beta 2 (nki)) left out: --generation beta1" in proc.stderr
    written = sorted(str(p.relative_to(tmp_path / "a")) for p in (tmp_path / "a").rglob("*") if p.is_file())
    assert written == ["cases/triple.json", "conftest.py", "test_triple.py"]
    beta2_only = KERNELS.replace('name="triple", ', 'name="solo", generation="beta2", ')
    beta2_only = beta2_only.replace('name="triple_b2"', 'name="solo_b2"').replace(
        'family="triple"', 'family="solo"'
    )
    (tmp_path / "solo.py").write_text(beta2_only)
    out = tmp_path / "b"
    proc = _devkit(
        project, "promote", f"{tmp_path / 'solo.py'}:solo_b2", "--generation", "beta1", "--out-dir", str(out)
    )
    assert proc.returncode == 2
    text = " ".join(proc.stderr.split())
    assert "nothing to promote: solo_b2 (Beta 2 (nki)) left out: --generation beta1" in text
    assert not out.exists()


# ---- the generation/SDK matrix on the fake SDK, and no SDK -------------------------------------------


@pytest.mark.parametrize(
    ("version", "runs", "skipped"),
    [("2.26", "triple.py", "triple_b2.py"), ("2.32", "triple_b2.py", "triple.py"), ("2.29", "both", None)],
)
def test_fake_sdk_matrix(project, tmp_path, version, runs, skipped):
    proc = _pytest(
        project, "--fake-neuron", "ok", "--results-dir", str(tmp_path), "--fake-sdk-version", version
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    records = hw_store.ResultsStore(tmp_path).read().records
    assert {r["sdk_version"] for r in records} == {version} and {r["backend"] for r in records} == {"fake"}
    if skipped is None:
        assert "4 passed" in proc.stdout and "skipped" not in proc.stdout
        assert sorted(r["generation"] for r in records) == ["beta1", "beta1", "beta2", "beta2"]
        return
    assert "2 passed, 2 skipped" in proc.stdout
    (reason,) = _skip_reasons(proc.stdout)  # one reason, never a compiler error
    gen_skipped = "beta2" if skipped == "triple_b2.py" else "beta1"
    assert reason == hw_host.Sdk(version, "fake", ("beta1", "beta2")).mismatch(gen_skipped)
    ran = "beta1" if gen_skipped == "beta2" else "beta2"
    assert {r["generation"] for r in records} == {ran}
    (lat,) = [r for r in records if r["kind"] == "latency"]
    assert lat["latency_clock"] == ("host" if ran == "beta2" else "neuron-bench")
    assert lat["measured_us"]["p50"] == pytest.approx(lat["predicted_us"], rel=1e-3)
    (num,) = [r for r in records if r["kind"] == "numerics"]
    assert num["passed"] is True and num["max_error"] <= 1e-6


def test_fake_beta2_wrong_outputs_fail_with_the_error(project, tmp_path):
    proc = _pytest(
        project,
        "--fake-neuron",
        "wrong",
        "--results-dir",
        str(tmp_path),
        "--fake-sdk-version",
        "2.32",
        "-k",
        "numerics",
    )
    assert proc.returncode == 1 and "1 failed, 1 skipped" in proc.stdout
    assert "EXCEEDS the tolerance" in proc.stdout


@pytest.mark.parametrize("how", ["real", "fake"])
def test_no_sdk_skips_every_generation_with_the_existing_reason(project, tmp_path, how):
    args = (
        ()
        if how == "real"
        else ("--fake-neuron", "ok", "--results-dir", str(tmp_path), "--fake-sdk-version", "none")
    )
    proc = _pytest(project, *args)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "4 skipped" in proc.stdout
    (reason,) = _skip_reasons(proc.stdout)
    assert reason.startswith("hardware tests need a Neuron device and the real neuronx-cc: ")
    assert "neuronx-cc is not installed" in reason


# ---- issue 16: the hardware stage end to end on the user's kernel ------------------------------------


def test_user_kernel_through_hw_run_to_the_report(project, tmp_path):
    results = tmp_path / "fake-results"
    run = _devkit(project, "hw", "run", "--results-dir", str(results), "--", "--fake-neuron", "ok")
    assert run.returncode == 0, run.stdout + run.stderr
    assert "4 passed" in run.stdout
    assert sorted(p.name for p in results.iterdir()) == ["triple.jsonl", "triple_b2.jsonl"]
    assert not (project / "results").exists()  # fake numbers never enter the project's store
    report = _devkit(project, "hw", "report", "--results", str(results), "--include-fake", "--json")
    assert report.returncode == 0, report.stderr
    rows = {r["kernel"]: r for r in json.loads(report.stdout)}
    assert set(rows) == {"triple", "triple_b2"}  # project kernels go by their declared names
    for row in rows.values():
        assert row["runs"] == 1 and row["backend"] == "fake" and row["ratio"] == pytest.approx(1.0, rel=1e-3)
    real = _devkit(project, "hw", "run")
    assert real.returncode == 0 and "hardware stage: no real Neuron SDK" in real.stderr
    assert "4 skipped" in real.stdout


def test_info_names_the_sdk_release_and_its_generations(capsys, monkeypatch):
    from devkit import cli

    assert cli.main(["info", "--json"]) == 0
    sdk = json.loads(capsys.readouterr().out)["neuron_sdk"]
    assert sdk == {
        "version": None,
        "version_source": None,
        "generations": [],
        "summary": "no real Neuron SDK",
    }
    monkeypatch.setattr(hw_host, "_find_real", lambda name: True)  # a host with both modules installed
    monkeypatch.setattr("devkit.compat.is_installed", lambda: False)  # as in a process of its own
    monkeypatch.setenv(hw_host.SDK_VERSION_ENV, "2.28.1")
    assert cli.main(["info", "--json"]) == 0
    sdk = json.loads(capsys.readouterr().out)["neuron_sdk"]
    assert sdk["version"] == "2.28.1" and sdk["generations"] == ["beta1", "beta2"]
    assert (
        sdk["summary"]
        == f"Neuron SDK 2.28.1 ({hw_host.SDK_VERSION_ENV}): runs Beta 1 (neuronxcc.nki) and Beta 2 (nki)"
    )
    assert cli.main(["info"]) == 0
    assert "Neuron SDK (hardware stage)" in capsys.readouterr().out


def test_promote_warns_about_a_conftest_from_before_generations(tmp_path):
    from devkit.workflow.promote import CONFTEST_TEMPLATE, stale_conftest

    (tmp_path / "conftest.py").write_text("import pytest\n\n\n@pytest.fixture\ndef nki():\n    return None\n")
    why = stale_conftest(tmp_path)
    assert "predates the generated tests (no device, latency_options, nki_generation)" in why
    (tmp_path / "conftest.py").write_text(CONFTEST_TEMPLATE.read_text())
    assert stale_conftest(tmp_path) is None


def test_device_runners_refuse_a_kernel_bound_to_the_simulator(project, monkeypatch):
    """If a kernel module bound the NKI names to the simulator (e.g. an SDK without neuronxcc.nki, where
    importing the kit's kernels maps the simulator), the real runners refuse it instead of simulating it."""
    from devkit.workflow import catalog

    monkeypatch.chdir(project)
    simulated = catalog.get("triple_b2").kernel_object()
    called = []
    real = hw_runners.Beta2Runner(call=lambda *a, **k: called.append(a), real=True)
    for attempt in (
        lambda: real.run(simulated, [], {}),
        lambda: real.benchmark(simulated, [], {}, warmup=0, iters=1),
    ):
        with pytest.raises(HardwareUnavailableError, match="bound to the devkit simulator"):
            attempt()
    assert called == []
    b1 = hw_runners.Beta1Runner(hw_fake.fake_nki(None), real=True)
    with pytest.raises(HardwareUnavailableError, match="triple is bound to the devkit simulator"):
        b1.run(catalog.get("triple").kernel_object(), [], {})
    assert hw_runners.Beta2Runner(call=lambda k, *a: "ran").run(simulated, [], {}) == "ran"  # the fake's way
