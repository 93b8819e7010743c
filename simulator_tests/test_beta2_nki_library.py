"""Issue 12 (first steps toward the nki-library run): kernels of aws-neuron/nki-library @d2ad3a5 run unmodified
through ``nki.cpu_simulate(kernel)[lnc](**arrays)``, the call nki-library's harness makes, with
``NKI_NC_VERSION`` set as the harness sets it.

The references are NumPy ports of the library's own torch references (``cumsum_torch.py``, ``rmsnorm_torch.py``,
``layernorm_torch.py``: same formulas, same output layouts); inputs, tolerances and the comparison
("maxAllClose") are those of the library's integration tests.  The archive is
``../shared/corpora/nki-library-d2ad3a5.tar.gz`` (relative to the repository root, or to the folder holding a
git worktree); the tests are skipped where it is absent.  This is not the harness run itself (that needs the
suite's test extras, torch among them).
"""

from __future__ import annotations

import importlib
import sys
import tarfile
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
_CANDIDATES = [
    base / "shared" / "corpora" / "nki-library-d2ad3a5.tar.gz" for base in (ROOT.parent, ROOT.parent.parent)
]
ARCHIVE = next((p for p in _CANDIDATES if p.exists()), _CANDIDATES[0])

pytestmark = pytest.mark.skipif(not ARCHIVE.exists(), reason=f"corpus archive {ARCHIVE} not present")


def assert_max_allclose(got: np.ndarray, want: np.ndarray, rtol: float, atol: float) -> None:
    """nki-library's comparison ("maxAllClose", test/utils/tensor_histogram.py): every element within
    ``atol + rtol * max|want|``."""
    bound = atol + rtol * float(np.abs(want).max())
    worst = float(np.abs(got.astype(np.float64) - want).max())
    assert got.shape == want.shape and worst <= bound, f"max |got - want| = {worst:.3g} > {bound:.3g}"


@pytest.fixture(scope="module")
def nkilib(tmp_path_factory):
    dest = tmp_path_factory.mktemp("nki-library")
    with tarfile.open(ARCHIVE) as tar:
        members = [m for m in tar.getmembers() if "/src/nkilib_src/" in m.name]
        tar.extractall(dest, members=members, filter="data")
    src = next(dest.glob("*/src"))
    sys.path.insert(0, str(src))
    try:
        yield lambda name: importlib.import_module(name)
    finally:
        sys.path.remove(str(src))


@pytest.mark.parametrize(
    ("shape", "dtype", "lnc"),
    [((1, 256), np.float32, 1), ((64, 4, 1024), ml_dtypes.bfloat16, 2), ((128, 2048), np.float32, 2)],
)
def test_cumsum(nkilib, monkeypatch, shape, dtype, lnc):
    import nki

    monkeypatch.setenv("NKI_NC_VERSION", "gen3")
    kernel = nkilib("nkilib_src.nkilib.core.cumsum").cumsum
    np.random.seed(42)
    x = np.random.randn(*shape).astype(dtype)
    got = np.asarray(nki.cpu_simulate(kernel)[lnc](x=x), dtype=np.float32)
    want = np.cumsum(x.astype(np.float32), axis=-1)
    is_bf16 = dtype == ml_dtypes.bfloat16  # the library test's tolerances
    np.testing.assert_allclose(
        got, want, rtol=1e-2 if is_bf16 else 1e-3, atol=1e-2 if shape[-1] > 5000 else 1e-3
    )


def _rmsnorm_ref(x, gamma, hidden_actual, lnc):
    b, s, h = x.shape
    xf = x.astype(np.float32).reshape(b * s, h)
    n = hidden_actual or h
    norm = xf / np.sqrt((xf**2).sum(-1, keepdims=True) / n + 1e-6) * gamma.astype(np.float32)
    h0, h1 = 128, h // 128
    if lnc == 2:  # the LNC-2 layout interleaves the two halves of the hidden dimension
        halves = [
            half.reshape(b * s, h0, h1 // 2).transpose(1, 0, 2)
            for half in (norm[:, : h // 2], norm[:, h // 2 :])
        ]
        out = np.concatenate(halves, axis=2)
    else:
        out = norm.reshape(b * s, h0, h1).transpose(1, 0, 2)
    return out.astype(x.dtype)


@pytest.mark.parametrize(
    ("lnc", "b", "s", "h", "hidden_actual"),
    [(1, 1, 1, 8192, None), (1, 1, 4, 2048, 1920), (2, 1, 1, 5120, None), (2, 2, 8, 8192, None)],
)
def test_rmsnorm_tkg(nkilib, monkeypatch, lnc, b, s, h, hidden_actual):
    import nki

    monkeypatch.setenv("NKI_NC_VERSION", "gen3")
    kernel = nkilib("nkilib_src.nkilib.core.subkernels.rmsnorm_tkg").rmsnorm_tkg
    np.random.seed(42)
    x = np.random.randn(b, s, h).astype(np.float16)
    gamma = np.random.randn(1, h).astype(np.float16)
    out = np.zeros((128, b * s, h // 128), np.float16)
    res = nki.cpu_simulate(kernel)[lnc](
        input=x, gamma=gamma, output=out, hidden_actual=hidden_actual, hidden_dim_tp=False, shard_on_h=False
    )
    got = np.asarray(res if res is not None else out, dtype=np.float32)
    want = _rmsnorm_ref(x, gamma, hidden_actual, lnc).astype(np.float32)
    assert_max_allclose(got, want, rtol=2e-2, atol=1e-5)


@pytest.mark.parametrize(
    ("lnc", "b", "s", "h"), [(1, 1, 1, 8192), (1, 1, 8, 8192), (2, 1, 1, 5120), (2, 4, 8, 8192)]
)
def test_layernorm_tkg(nkilib, monkeypatch, lnc, b, s, h):
    import nki

    monkeypatch.setenv("NKI_NC_VERSION", "gen3")
    kernel = nkilib("nkilib_src.nkilib.core.subkernels.layernorm_tkg").layernorm_tkg
    np.random.seed(42)
    x = np.random.randn(b, s, h).astype(np.float16)
    gamma = np.random.randn(1, h).astype(np.float16)
    beta = np.random.randn(1, h).astype(np.float16)
    out = np.zeros((128, b * s, h // 128), np.float16)
    res = nki.cpu_simulate(kernel)[lnc](input=x, gamma=gamma, output=out, beta=beta, shard_on_h=False)
    got = np.asarray(res if res is not None else out, dtype=np.float32)
    xf = x.astype(np.float32).reshape(b * s, h)
    norm = (xf - xf.mean(-1, keepdims=True)) / np.sqrt(xf.var(-1, keepdims=True) + 1e-6)
    norm = norm * gamma.astype(np.float32) + beta.astype(np.float32)
    h0, h1 = 128, h // 128
    if lnc == 2:
        halves = [
            p.reshape(b * s, h0, h1 // 2).transpose(1, 0, 2) for p in (norm[:, : h // 2], norm[:, h // 2 :])
        ]
        want = np.concatenate(halves, axis=2)
    else:
        want = norm.reshape(b * s, h0, h1).transpose(1, 0, 2)
    assert_max_allclose(got, want.astype(np.float16).astype(np.float32), rtol=2e-2, atol=1e-5)
