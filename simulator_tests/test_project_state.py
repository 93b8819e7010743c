"""Project-local state: every location the kit writes to is under the project root, never the package."""

from __future__ import annotations

from pathlib import Path

import pytest

from devkit import project

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def proj(tmp_path, monkeypatch):
    (tmp_path / "pyproject.toml").write_text(
        '[tool.devkit]\ncache = "state/cache"\nresults = "state/results"\n'
    )
    (tmp_path / "src").mkdir()
    monkeypatch.chdir(tmp_path / "src")
    monkeypatch.delenv("DEVKIT_CACHE_DIR", raising=False)
    monkeypatch.delenv("DEVKIT_PROJECT", raising=False)
    return tmp_path


def test_every_state_location_is_in_the_project(proj):
    from devkit.workflow import e2e, promote, tune
    from devkit.workflow.hw import host

    assert e2e.DiskCache().dir == proj / "state" / "cache" / "e2e"
    assert host.project_dir("results") == proj / "state" / "results"
    assert host.project_dir("hw_tests") == proj / "hw_tests"
    assert promote.default_out_dir() == proj / "hw_tests"
    assert tune.default_tuning_path() == proj / "devkit-tuning.json"
    assert project.state_path("reports") == proj / "devkit-report"


def test_without_a_table_the_current_directory_is_the_project(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("DEVKIT_PROJECT", raising=False)
    p = project.find()
    assert p.root == tmp_path and not p.configured and p.path("cache") == tmp_path / ".devkit-cache"


def test_devkit_project_names_the_root(tmp_path, monkeypatch):
    monkeypatch.setenv("DEVKIT_PROJECT", str(tmp_path))
    monkeypatch.chdir(REPO)
    assert project.find().root == tmp_path


def test_the_kit_checkout_keeps_its_table_in_the_package(monkeypatch):
    monkeypatch.chdir(REPO / "simulator_tests")
    monkeypatch.delenv("DEVKIT_PROJECT", raising=False)
    from devkit.kernels import tuning

    assert project.state_path("tuning") == Path(tuning.TUNING_FILE).resolve()


def test_malformed_settings_are_named(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[tool.devkit]\nkernels = 'one.py'\n")
    with pytest.raises(project.ProjectError, match="kernels must be a list"):
        project.find(tmp_path)
    (tmp_path / "pyproject.toml").write_text("[tool.devkit\n")
    with pytest.raises(project.ProjectError, match=r"not a readable pyproject\.toml"):
        project.find(tmp_path)


def test_the_repo_hw_tests_conftest_is_the_promoted_template():
    template = REPO / "devkit" / "templates" / "hw_conftest.py"
    assert (REPO / "hw_tests" / "conftest.py").read_text() == template.read_text()


def test_promoted_conftest_finds_the_project_above_it(tmp_path, monkeypatch):
    from devkit import hw

    monkeypatch.delenv("DEVKIT_PROJECT", raising=False)
    (tmp_path / "hw_tests").mkdir()
    assert hw.find_project(tmp_path / "hw_tests" / "..").root == tmp_path  # no table: the parent
    (tmp_path / "pyproject.toml").write_text('[tool.devkit]\nresults = "out/results"\n')
    assert hw.find_project(tmp_path).path("results") == tmp_path / "out" / "results"
