"""Issue 13: real AWS code runs clean.  When the corpora are present (``../shared/corpora/`` next to the
repository, as CI lays it out), run

- the nki-samples 0898a77 unit suite, ``devkit simulate -m pytest test/unit/FILE --simulation-only``, one
  fresh process per file, with the one documented environment shim (``builtins.warnings``);
- the Beta-1 tutorial scripts of that snapshot (``devkit simulate SCRIPT``, each checks its own result);
- the published NeuronMM ``two_mm.py`` kernels against NumPy (``torch`` is stubbed: the file imports it
  at module level for its own drivers only).

Slow (minutes; the largest flash-attention cases build NumPy references of several GiB), so kept out of
the default run: ``pytest -m slow simulator_tests/test_corpus_suite.py``.  Peak memory and time per file
are measured by ``benchmarks/bench_corpus_rss.py``.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import tarfile
import types
from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
#: ``../shared/corpora`` next to the repository (DEVKIT_CORPORA overrides, e.g. on a machine that keeps them
#: elsewhere)
CORPORA = Path(os.environ.get("DEVKIT_CORPORA") or ROOT.parent / "shared" / "corpora")
SAMPLES = CORPORA / "nki-samples-0898a77.tar.gz"
NEURON_MM = CORPORA / "neuron-mm.tar.gz"
#: tutorial scripts of the 0898a77 snapshot that are Beta 1 and check their own results
TUTORIALS = (
    "average_pool2d/average_pool2d_nki_kernels.py",
    "fused_mamba/mamba_nki_kernels.py",
    "layernorm/layernorm_nki_kernel.py",
    "matrix_multiplication/matrix_multiplication_nki_kernels.py",
    "rmsnorm/rmsnorm_nki_kernels.py",
    "rotary/rotary_nki_kernels.py",
    "sd_attention/sd_attention_nki_kernels.py",
    "tensor_addition/spmd_multiple_nc_tensor_addition_nki_kernels.py",
    "tensor_addition/spmd_tensor_addition_nki_kernels.py",
    "tensor_addition/tensor_addition_nki_kernels.py",
    "transpose2d/transpose2d_nki_kernels.py",
    "attention_fwd_performance/attention_kernels.py",
)


def _unit_test_files() -> list[str]:
    if not SAMPLES.exists():
        return []
    with tarfile.open(SAMPLES) as tf:
        names = tf.getnames()
    return sorted(
        "test/unit/" + n.rsplit("/", 1)[1] for n in names if "/test/unit/test_" in n and n.endswith(".py")
    )


def _extract(tarball: Path, into: Path) -> Path:
    with tarfile.open(tarball) as tf:
        tf.extractall(into, filter="data")
    for cand in [into, *sorted(p for p in into.iterdir() if p.is_dir())]:
        inner = [p for p in cand.iterdir() if p.is_dir()] if cand.is_dir() else []
        for c in [cand, *inner]:
            if (c / "src").is_dir() or (c / "neuron_kernels").is_dir():
                return c
    raise AssertionError(f"{tarball}: unexpected layout")


@pytest.fixture(scope="module")
def samples(tmp_path_factory) -> tuple[Path, Path]:
    """The extracted nki-samples checkout and a directory with the ``builtins.warnings`` shim."""
    if not SAMPLES.exists():
        pytest.skip(f"corpus not present: {SAMPLES}")
    tmp = tmp_path_factory.mktemp("corpus")
    root = _extract(SAMPLES, tmp / "samples")
    shim = tmp / "shim"
    shim.mkdir()
    (shim / "sitecustomize.py").write_text(
        "import builtins\nimport warnings\n\nbuiltins.warnings = warnings\n"
    )
    return root, shim


def _missing_imports(source: str) -> list[str]:
    """Third-party modules the file imports (for its own references or drivers) that are not installed."""
    return [
        m
        for m in ("scipy", "torch")
        if (f"import {m}" in source or f"from {m}" in source) and importlib.util.find_spec(m) is None
    ]


def _simulate(
    args: list[str], cwd: Path, root: Path, shim: Path, timeout: float
) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    inherited = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    env["PYTHONPATH"] = os.pathsep.join([str(root / "src"), str(shim), str(ROOT), *inherited])
    env.setdefault("OPENBLAS_NUM_THREADS", "1")
    return subprocess.run(
        [sys.executable, "-m", "devkit", "simulate", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.mark.parametrize("test_file", _unit_test_files() or ["(corpus not present)"])
def test_nki_samples_unit_suite_file_passes(samples, test_file):
    root, shim = samples
    missing = _missing_imports((root / test_file).read_text())
    if missing:
        pytest.skip(f"{test_file} imports {', '.join(missing)} for its reference, not installed here")
    proc = _simulate(
        ["-m", "pytest", test_file, "--simulation-only", "-q", "-p", "no:cacheprovider"],
        root,
        root,
        shim,
        3600,
    )
    tail = "\n".join((proc.stdout + proc.stderr).splitlines()[-40:])
    assert proc.returncode in (0, 5), f"{test_file} under the simulator:\n{tail}"  # 5: nothing to run
    assert " failed" not in tail and " error" not in tail, tail


@pytest.mark.parametrize("script", TUTORIALS)
def test_nki_samples_tutorial_runs(samples, script):
    root, shim = samples
    path = root / "src" / "nki_samples" / "tutorials" / script
    missing = _missing_imports(path.read_text())
    if missing:
        pytest.skip(f"{script} imports {', '.join(missing)}, not installed here")
    proc = _simulate([path.name], path.parent, root, shim, 1800)
    tail = "\n".join((proc.stdout + proc.stderr).splitlines()[-30:])
    assert proc.returncode == 0, f"{script} under the simulator:\n{tail}"
    assert "mismatch" not in proc.stdout.lower() and "False" not in proc.stdout, proc.stdout[-2000:]


TWO_MM_KERNELS = (
    "nki_matmul_tiled_basic",
    "nki_matmul_tiled_basic_natural_lhs",
    "nki_matmul_fully_optimized_",
    "nki_matmul_fixed_loop_order_",
    "nki_matmul_tiled_basic_masked",
    "nki_matmul_tiled_basic_natural_lhs_masked",
)


@pytest.fixture(scope="module")
def two_mm(tmp_path_factory):
    if not NEURON_MM.exists():
        pytest.skip(f"corpus not present: {NEURON_MM}")
    root = _extract(NEURON_MM, tmp_path_factory.mktemp("neuron_mm"))
    saved = {
        n: sys.modules.get(n) for n in ("torch", "torch_xla", "torch_xla.core", "torch_xla.core.xla_model")
    }
    for n in saved:
        if saved[n] is None:
            sys.modules[n] = types.ModuleType(n)
    sys.modules["torch_xla.core"].xla_model = sys.modules["torch_xla.core.xla_model"]  # type: ignore[attr-defined]
    try:
        spec = importlib.util.spec_from_file_location(
            "neuron_mm_two_mm", root / "neuron_kernels" / "two_mm.py"
        )
        mod = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
        spec.loader.exec_module(mod)  # type: ignore[union-attr]
        yield mod
    finally:
        for n, old in saved.items():
            if old is None:
                sys.modules.pop(n, None)


@pytest.mark.parametrize("name", TWO_MM_KERNELS)
def test_published_neuron_mm_two_mm_kernel_runs(two_mm, name):
    import devkit

    rng = np.random.default_rng(3)
    k, m, n = 1024, 2048, 1024  # fixed_loop_order_ needs M a multiple of its 2048-row block
    lhs_t = rng.standard_normal((k, m)).astype(np.float32)
    rhs = rng.standard_normal((k, n)).astype(np.float32)
    first = lhs_t.T.copy() if "natural_lhs" in name else lhs_t
    got = devkit.simulate(getattr(two_mm, name), first, rhs)
    np.testing.assert_allclose(got, lhs_t.T @ rhs, rtol=1e-4, atol=1e-2)
