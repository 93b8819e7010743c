"""Done-when test of issue 16: a fresh project outside the repository, the kit installed from its wheel
(not editable) into a fresh venv, declares a small kernel and runs devkit validate, tune, sweep, promote
and run on it; every file the kit writes lands inside that project; the project's pytest runs its
numerics tests and skips its hardware tests with one reason.  The steps are docs/your-kernel.md's.

The wheel is built once per session (``pip wheel`` with build isolation: setuptools comes from the
package index or pip's cache; without either the test is skipped saying so).  The fresh venv gets the
kit with ``pip install --no-deps`` and borrows the running interpreter's site-packages (numpy, ml_dtypes,
jinja2, rich, matplotlib, hypothesis, pytest) through a ``.pth`` line, so nothing is downloaded for it.
About 15 s on 2 cores with pip's cache warm (not marked slow).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

import pytest
from _workflow_support import EXAMPLE, EXAMPLE_WRITES

REPO = Path(__file__).resolve().parents[1]


def _run(cmd: list[str], cwd: Path, env: dict[str, str], timeout: int = 600) -> subprocess.CompletedProcess:
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, f"{' '.join(cmd)} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}"
    return proc


@pytest.fixture(scope="session")
def wheel(tmp_path_factory) -> Path:
    """The kit's wheel, built once from a copy of the sources (the build leaves nothing in the repo)."""
    work = tmp_path_factory.mktemp("wheel")
    src = work / "src"
    src.mkdir()
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(REPO / "devkit", src / "devkit", ignore=ignore)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, src / name)
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(work / "dist"), str(src)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    if proc.returncode != 0:
        pytest.skip(
            f"cannot build the wheel here (setuptools comes from the index or pip's cache): {proc.stderr}"
        )
    (whl,) = (work / "dist").glob("neuronmm_devkit-*.whl")
    return whl


@pytest.fixture(scope="session")
def fresh_venv(wheel, tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("venv") / "env"
    venv.EnvBuilder(with_pip=True, clear=True).create(root)
    py = root / "bin" / "python"
    _run(
        [str(py), "-m", "pip", "install", "--no-deps", "--no-index", "-q", str(wheel)], root, _clean_env(root)
    )
    site = Path(
        subprocess.run(
            [str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    )
    (site / "zz_shared_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return root


def _clean_env(venv_root: Path, home: Path | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "DEVKIT_", "VIRTUAL_ENV"))}
    env["PATH"] = f"{venv_root / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env["OPENBLAS_NUM_THREADS"] = "1"
    if home is not None:
        env["HOME"] = str(home)
        env["MPLCONFIGDIR"] = str(home / "mpl")  # matplotlib's own font cache, not the kit's
    return env


def _snapshot(*roots: Path) -> dict[str, float]:
    out: dict[str, float] = {}
    for root in roots:
        for p in root.rglob("*"):
            if p.is_file() and "__pycache__" not in p.parts:
                out[str(p)] = p.stat().st_mtime
    return out


def test_fresh_project_runs_the_whole_workflow(fresh_venv, tmp_path):
    proj = tmp_path / "proj"
    proj.mkdir()
    home = tmp_path / "home"
    home.mkdir()
    for name in ("pyproject.toml", "my_kernels.py"):
        shutil.copy(EXAMPLE / name, proj / name)
    shutil.copytree(EXAMPLE / "tests", proj / "tests", ignore=shutil.ignore_patterns("__pycache__"))
    env = _clean_env(fresh_venv, home)
    devkit = str(fresh_venv / "bin" / "devkit")
    py = str(fresh_venv / "bin" / "python")

    where = _run([py, "-c", "import devkit; print(devkit.__file__)"], proj, env).stdout.strip()
    assert where.startswith(str(fresh_venv)) and "site-packages" in where  # the installed wheel, not the repo
    site_pkgs = Path(where).parent.parent
    assert not (site_pkgs / "kernels").exists()  # the kit's kernels live in devkit.kernels: no collision
    installed = _snapshot(site_pkgs)  # the package is read-only to the kit
    outside = _snapshot(tmp_path)

    _run([devkit, "validate", "scaled_add", "--examples", "4"], proj, env)
    tune = _run(
        [devkit, "tune", "my_kernels.py:scaled_add", "--shape", "R=1024,N=4096", "--jobs", "1"], proj, env
    )
    assert "devkit-tuning.json" in tune.stdout
    _run([devkit, "sweep", "scaled_add", "--values", "512,4096", "--jobs", "1"], proj, env)
    _run([devkit, "promote", "scaled_add", "--jobs", "1"], proj, env)
    run = _run([devkit, "run", "--quick", "--jobs", "1"], proj, env)
    assert "OK: 4 validations passed" in run.stdout

    tests = _run([py, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider"], proj, env)
    assert "6 passed, 2 skipped" in tests.stdout
    skips = [line for line in tests.stdout.splitlines() if line.startswith("SKIPPED")]
    assert len(skips) == 1 and "hardware tests need a Neuron device and the real neuronx-cc" in skips[0]

    after = _snapshot(tmp_path)
    new_or_changed = {p for p, t in after.items() if outside.get(p) != t}
    kit_writes = {p for p in new_or_changed if not p.startswith(str(home / "mpl"))}
    assert kit_writes, "the commands wrote nothing?"
    stray = sorted(p for p in kit_writes if not p.startswith(str(proj) + os.sep))
    assert stray == [], f"files written outside the project: {stray}"
    rel = {str(Path(p).relative_to(proj)) for p in kit_writes}
    assert EXAMPLE_WRITES <= rel
    assert _snapshot(site_pkgs) == installed
