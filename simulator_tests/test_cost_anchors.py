"""The calibration anchors end to end: the AWS NKI matmul tutorial progression through the
simulator and the cost model.

The four kernels follow the structure of the tutorial's ``nki_matmul_tiled_`` (the project's one
copy, :func:`devkit.kernels.tutorial.tiled_matmul`), ``nki_matmul_hoist_load_``,
``nki_matmul_block_free_dimension_`` and ``nki_matmul_fully_optimized_`` (the last three below;
reference/nki_api.md section 5.3: tile sizes 128/128/512, block factors 2x2 and 16x2x8, loop orders).
Measured on trn1, bf16 lhsT[8192, 4096] @ rhs[8192, 8192]: 51.80, 42.96, 22.07 and 6.97 ms (``[[anchors]]`` of
``devkit/cost/params.toml``).  The full-size check is slow (about two minutes of simulation) and
runs with ``-m slow``; the quick tests check the same kernels at a small size against the closed
form and the cost rules.
"""

from __future__ import annotations

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import neuronxcc.nki.typing as nt
import pytest

import devkit
from devkit.cost.closed_form import blocked_matmul
from devkit.cost.params import load_params
from devkit.kernels.tutorial import tiled_matmul


@nki.jit
def tutorial_hoisted(lhsT, rhs):
    K, M = lhsT.shape
    _, N = rhs.shape
    result = nl.ndarray((M, N), dtype=lhsT.dtype, buffer=nl.shared_hbm)
    for m in nl.affine_range(M // 128):
        a_tiles = nl.ndarray((K // 128, nl.par_dim(128), 128), dtype=lhsT.dtype, buffer=nl.sbuf)
        for k in nl.affine_range(K // 128):
            a_tiles[k] = nl.load(lhsT[k * 128 : (k + 1) * 128, m * 128 : (m + 1) * 128])
        for n in nl.affine_range(N // 512):
            b_tiles = nl.ndarray((K // 128, nl.par_dim(128), 512), dtype=rhs.dtype, buffer=nl.sbuf)
            for k in nl.affine_range(K // 128):
                b_tiles[k] = nl.load(rhs[k * 128 : (k + 1) * 128, n * 512 : (n + 1) * 512])
            acc = nl.zeros((128, 512), nl.float32, buffer=nl.psum)
            for k in nl.affine_range(K // 128):
                acc += nl.matmul(a_tiles[k], b_tiles[k], transpose_x=True)
            out = nl.copy(acc, dtype=result.dtype)
            nl.store(result[m * 128 : (m + 1) * 128, n * 512 : (n + 1) * 512], value=out)
    return result


@nki.jit
def tutorial_block_free(lhsT, rhs):
    K, M = lhsT.shape
    _, N = rhs.shape
    TM, TN = 2, 2
    result = nl.ndarray((M, N), dtype=lhsT.dtype, buffer=nl.shared_hbm)
    for m in nl.affine_range(M // (128 * TM)):
        a_tiles = nl.ndarray((TM, K // 128, nl.par_dim(128), 128), dtype=lhsT.dtype, buffer=nl.sbuf)
        for bm in nl.affine_range(TM):
            col = (m * TM + bm) * 128
            for k in nl.affine_range(K // 128):
                a_tiles[bm, k] = nl.load(lhsT[k * 128 : (k + 1) * 128, col : col + 128])
        for n in nl.affine_range(N // (512 * TN)):
            b_tiles = nl.ndarray((TN, K // 128, nl.par_dim(128), 512), dtype=rhs.dtype, buffer=nl.sbuf)
            for bn in nl.affine_range(TN):
                col = (n * TN + bn) * 512
                for k in nl.affine_range(K // 128):
                    b_tiles[bn, k] = nl.load(rhs[k * 128 : (k + 1) * 128, col : col + 512])
            for bm in nl.affine_range(TM):
                for bn in nl.affine_range(TN):
                    acc = nl.zeros((128, 512), nl.float32, buffer=nl.psum)
                    for k in nl.affine_range(K // 128):
                        acc += nl.matmul(a_tiles[bm, k], b_tiles[bn, k], transpose_x=True)
                    out = nl.copy(acc, dtype=result.dtype)
                    row, col = (m * TM + bm) * 128, (n * TN + bn) * 512
                    nl.store(result[row : row + 128, col : col + 512], value=out)
    return result


@nki.jit
def tutorial_fully_optimized(lhsT, rhs):
    K, M = lhsT.shape
    _, N = rhs.shape
    TM, TN, TK = 16, 2, 8
    BM, BN, BK = 128 * TM, 512 * TN, 128 * TK
    result = nl.ndarray((M, N), dtype=lhsT.dtype, buffer=nl.shared_hbm)
    for n2 in nl.affine_range(N // BN):
        res = nl.zeros((M // BM, TM, TN, nl.par_dim(128), 512), dtype=lhsT.dtype, buffer=nl.sbuf)
        for k2 in nl.sequential_range(K // BK):
            b_tiles = nl.ndarray((TK, nl.par_dim(128), BN), dtype=rhs.dtype, buffer=nl.sbuf)
            for bk in nl.affine_range(TK):
                row = (TK * k2 + bk) * 128
                b_tiles[bk] = nl.load(rhs[row : row + 128, BN * n2 : BN * (n2 + 1)])
            for m2 in nl.affine_range(M // BM):
                a_tiles = nl.ndarray((TK, nl.par_dim(128), BM), dtype=lhsT.dtype, buffer=nl.sbuf)
                for bk in nl.affine_range(TK):
                    row = (TK * k2 + bk) * 128
                    a_tiles[bk] = nl.load(lhsT[row : row + 128, BM * m2 : BM * (m2 + 1)])
                for bn in nl.affine_range(TN):
                    for bm in nl.affine_range(TM):
                        acc = nl.zeros((128, 512), dtype=nl.float32, buffer=nl.psum)
                        for bk in nl.affine_range(TK):
                            a = a_tiles[bk, :, bm * 128 : (bm + 1) * 128]
                            acc += nisa.nc_matmul(a, b_tiles[bk, :, bn * 512 : (bn + 1) * 512])
                        res[m2, bm, bn] += acc
        for m2 in nl.affine_range(M // BM):
            for bm in nl.affine_range(TM):
                packed = nl.ndarray((128, BN), dtype=res.dtype, buffer=nl.sbuf)
                for bn in nl.affine_range(TN):
                    packed[:, bn * 512 : (bn + 1) * 512] = nl.copy(res[m2, bm, bn])
                row = (TM * m2 + bm) * 128
                nl.store(result[row : row + 128, BN * n2 : BN * (n2 + 1)], value=packed)
    return result


KERNELS = {
    "mmt_tiled_trn1": (tiled_matmul, dict(block_m=128, block_n=512, reuse="none")),
    "mmt_hoist_trn1": (tutorial_hoisted, dict(block_m=128, block_n=512, reuse="lhsT")),
    "mmt_block_free_trn1": (tutorial_block_free, dict(block_m=256, block_n=1024, reuse="lhsT")),
    "mmt_fully_optimized_trn1": (
        tutorial_fully_optimized,
        dict(block_m=2048, block_n=1024, block_k=1024, reuse="rhs"),
    ),
}


def _estimate(kernel, k: int, m: int, n: int):
    lhs_t, rhs = nt.tensor[[k, m], nl.bfloat16], nt.tensor[[k, n], nl.bfloat16]
    return devkit.estimate(kernel, lhs_t, rhs, target="trn1")


@pytest.mark.parametrize("anchor", list(KERNELS))
def test_small_tutorial_kernels_match_closed_form(anchor: str) -> None:
    kernel, blocks = KERNELS[anchor]
    k, m, n = 1024, 2048, 1024
    report = _estimate(kernel, k, m, n)
    closed = blocked_matmul(k, m, n, **blocks)
    assert report.unknown_opcodes == {}
    assert report.flops == closed.flops
    assert report.hbm_read_bytes == closed.hbm_read_bytes
    assert report.hbm_write_bytes == closed.hbm_write_bytes


@pytest.mark.slow
def test_tutorial_anchors_within_25_percent_and_in_order() -> None:
    measured = {a.id: a.measured_us for a in load_params().anchors}
    predicted = {a: _estimate(kernel, 8192, 4096, 8192).latency_us for a, (kernel, _) in KERNELS.items()}
    ratios = {anchor: predicted[anchor] / measured[anchor] for anchor in KERNELS}
    assert all(0.75 <= r <= 1.25 for r in ratios.values()), ratios
    in_order = [predicted[a] for a in KERNELS]  # tiled > hoisted > block free > fully optimized
    assert in_order == sorted(in_order, reverse=True), predicted
