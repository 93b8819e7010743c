"""Issue 12 done-when: AWS's Beta-2 tutorial kernels (nki-samples @6905a68) run unmodified through
``nki.simulate`` and match NumPy references.

The kernels are imported from the corpus archive ``../shared/corpora/nki-samples-6905a68.tar.gz``
(relative to the repository root, or to the folder holding a git worktree)
when it exists; the tests are skipped elsewhere.  The MX references are
the tutorial's own host utilities (``mx_cpu_utils.py``), imported from the same archive.
"""

from __future__ import annotations

import importlib
import os
import sys
import tarfile
from pathlib import Path

import ml_dtypes as mld
import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
# ../shared/corpora relative to the repository root (one level further up from a git worktree under wt/)
_CANDIDATES = [
    base / "shared" / "corpora" / "nki-samples-6905a68.tar.gz" for base in (ROOT.parent, ROOT.parent.parent)
]
ARCHIVE = next((p for p in _CANDIDATES if p.exists()), _CANDIDATES[0])
TUTORIALS = "nki-samples-6905a68/src/nki_samples/tutorials"

pytestmark = pytest.mark.skipif(not ARCHIVE.exists(), reason=f"corpus archive {ARCHIVE} not present")


@pytest.fixture(scope="module")
def tutorials(tmp_path_factory) -> Path:
    dest = tmp_path_factory.mktemp("nki-samples")
    with tarfile.open(ARCHIVE) as tar:
        members = [
            m
            for m in tar.getmembers()
            if "/tutorials/matrix_multiplication/" in m.name or "/mxfp-matmul/" in m.name
        ]
        tar.extractall(dest, members=members, filter="data")
    return dest / TUTORIALS


def _import(folder: Path, name: str):
    sys.path.insert(0, str(folder))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(folder))


@pytest.fixture(scope="module")
def matmul(tutorials):
    return _import(tutorials / "matrix_multiplication", "matrix_multiplication_nki_kernels")


@pytest.fixture(scope="module")
def mx(tutorials):
    folder = tutorials / "mxfp-matmul"
    return _import(folder, "mx_kernels"), _import(folder, "mx_cpu_utils")


def _bf16(rng, shape):
    return rng.random(shape, dtype=np.float32).astype(mld.bfloat16)


def test_matmul_basic(matmul):
    import nki

    rng = np.random.default_rng(0)
    lhs, rhs = _bf16(rng, (64, 128)), _bf16(rng, (128, 512))
    got = nki.simulate(matmul.nki_matmul_basic_)(np.ascontiguousarray(lhs.T), rhs)
    want = lhs.astype(np.float32) @ rhs.astype(np.float32)
    assert got.shape == (64, 512) and got.dtype == mld.bfloat16
    np.testing.assert_allclose(got.astype(np.float32), want, rtol=1e-2, atol=1e-4)


@pytest.mark.parametrize(
    ("kernel", "shape"),
    [
        ("nki_matmul_tiled_", (256, 256, 1024)),
        ("nki_matmul_hoist_load_", (256, 256, 1024)),
        ("nki_matmul_block_free_dimension_", (512, 256, 2048)),
        ("nki_matmul_fully_optimized_", (2048, 1024, 1024)),
    ],
)
def test_matmul_tiled_kernels(matmul, kernel, shape):
    import nki

    m, k, n = shape
    rng = np.random.default_rng(1)
    lhs, rhs = _bf16(rng, (m, k)), _bf16(rng, (k, n))
    got = nki.simulate(getattr(matmul, kernel))(np.ascontiguousarray(lhs.T), rhs)
    want = lhs.astype(np.float32) @ rhs.astype(np.float32)
    np.testing.assert_allclose(got.astype(np.float32), want, rtol=1e-2, atol=1e-4 * k)


X4 = {
    "float8_e5m2": "float8_e5m2_x4",
    "float8_e4m3fn": "float8_e4m3fn_x4",
    "float4_e2m1fn": "float4_e2m1fn_x4",
}


def _x4(q):
    import nki.language as nl

    return getattr(nl, X4[q.__name__])


@pytest.mark.parametrize("q", [mld.float8_e5m2, mld.float8_e4m3fn, mld.float4_e2m1fn])
def test_mx_offline_quantized(mx, q):
    import nki

    kernels, cpu = mx
    np.random.seed(2)
    _, _, st, st_s = cpu.generate_stabilized_mx_data(q, (128, 128 * 4))
    _, _, mv, mv_s = cpu.generate_stabilized_mx_data(q, (128, 512 * 4))
    got = nki.simulate(kernels.kernel_offline_quantized_mx_matmul)(st, st_s, mv, mv_s, _x4(q))
    want = cpu.nc_matmul_mx_golden(st, mv, st_s, mv_s, q, q)
    assert got.dtype == mld.bfloat16
    np.testing.assert_allclose(got.astype(np.float32), want, rtol=5e-2, atol=5e-2)


@pytest.mark.parametrize(
    ("qs", "qm"), [(mld.float4_e2m1fn, mld.float8_e5m2), (mld.float8_e5m2, mld.float8_e5m2)]
)
def test_mx_on_device_quantize(mx, qs, qm):
    import nki

    kernels, cpu = mx
    np.random.seed(3)
    _, _, st, st_s = cpu.generate_stabilized_mx_data(qs, (128, 128 * 4))
    mv, _, _, _ = cpu.generate_stabilized_mx_data(qm, (128, 512 * 4))
    got = nki.simulate(kernels.kernel_on_device_quantize_matmul_mx)(
        st, st_s, mv.astype(mld.bfloat16), _x4(qs), _x4(qm)
    )
    md, ms = cpu.quantize_mx_golden(mv, qm)
    want = cpu.nc_matmul_mx_golden(st, md, st_s, ms, qs, qm)
    np.testing.assert_allclose(got.astype(np.float32), want, rtol=5e-2, atol=5e-2)


@pytest.mark.parametrize("use_tensor_copy", [True, False])
def test_mx_copy_strided(mx, use_tensor_copy):
    import nki

    kernels, cpu = mx
    np.random.seed(4)
    st, _, _, _ = cpu.generate_stabilized_mx_data(mld.float8_e5m2, (512, 128))
    mv, _, _, _ = cpu.generate_stabilized_mx_data(mld.float8_e5m2, (512, 512))
    got = nki.simulate(kernels.kernel_copy_strided_quantize_matmul_mx)(
        st.astype(mld.bfloat16), mv.astype(mld.bfloat16), _x4(mld.float8_e5m2), use_tensor_copy
    )
    np.testing.assert_allclose(got.astype(np.float32), st.T @ mv, rtol=5e-2, atol=5e-2)


def test_mx_kernels_need_trn3(mx, monkeypatch):
    import nki

    from devkit.errors import UnsupportedError

    kernels, cpu = mx
    monkeypatch.setenv("NKI_NC_VERSION", "gen3")
    _, _, st, st_s = cpu.generate_stabilized_mx_data(mld.float8_e5m2, (128, 512))
    _, _, mv, mv_s = cpu.generate_stabilized_mx_data(mld.float8_e5m2, (128, 2048))
    with pytest.raises(UnsupportedError) as e:
        nki.simulate(kernels.kernel_offline_quantized_mx_matmul)(st, st_s, mv, mv_s, _x4(mld.float8_e5m2))
    assert e.value.rule == "arch" and os.path.basename(e.value.filename) == "mx_kernels.py"


@pytest.mark.parametrize("use_tensor_copy", [True, False])
def test_mx_copy_strided_cost_estimate(mx, use_tensor_copy):
    """The cost model runs the MX tutorial (reshaped HBM views, .ap() views, MX instructions) on trn3."""
    import nki.language as nl
    import nki.typing as nt

    import devkit

    kernels, _ = mx
    rep = devkit.estimate(
        kernels.kernel_copy_strided_quantize_matmul_mx,
        nt.tensor[[512, 128], nl.bfloat16],
        nt.tensor[[512, 512], nl.bfloat16],
        nl.float8_e5m2_x4,
        use_tensor_copy,
        target="trn3",
    ).to_dict()
    engines = rep["instructions_by_engine"]
    assert engines["tensor"] == 1 and engines["vector"] >= 2  # nc_matmul_mx; two quantize_mx
    assert rep["hbm_read_bytes"] == (512 * 128 + 512 * 512) * 2 and rep["latency_us"] > 0
