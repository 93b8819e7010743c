"""The AWS NKI matmul tutorial's four steps, written once for the tests, benchmarks and calibration.

``tiled_matmul(lhsT, rhs)`` computes ``lhsT.T @ rhs`` (``lhsT`` [K, M], ``rhs`` [K, N] -> [M, N], in the
input dtype) the way the tutorial's first step does (reference/nki_api.md section 5.3): for every
output tile of ``gemm_stationary_fmax`` x ``gemm_moving_fmax``, one load of each operand tile per
``pmax``-row contraction step and accumulation in one PSUM bank.  Written for this project from the
tutorial's structure; K, M and N must be multiples of the tile sizes (no ragged edges), which keeps it
the simple textbook loop the cost-model anchors and the throughput benchmark measure.  The project's
general kernels are in :mod:`devkit.kernels.matmul`.

The tutorial's later steps follow the structure of ``nki_matmul_hoist_load_``,
``nki_matmul_block_free_dimension_`` and ``nki_matmul_fully_optimized_`` (reference/nki_api.md section 5.3:
tile sizes 128/128/512, block factors 2x2 and 16x2x8, loop orders): :func:`tutorial_hoisted`,
:func:`tutorial_block_free`, :func:`tutorial_fully_optimized`.  :data:`TUTORIAL_STEPS` maps the measured
latency anchors of ``devkit/cost/params.toml`` to them (measured on trn1, bf16 lhsT[8192, 4096] @
rhs[8192, 8192]).
"""

from __future__ import annotations

from typing import Any

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl


@nki.jit
def tiled_matmul(lhsT: Any, rhs: Any) -> Any:
    """Tutorial-style tiled matmul: PSUM accumulation over K tiles, one load per operand tile."""
    tk, tm, tn = nl.tile_size.pmax, nl.tile_size.gemm_stationary_fmax, nl.tile_size.gemm_moving_fmax
    k_dim, m_dim = lhsT.shape
    _, n_dim = rhs.shape
    out = nl.ndarray((m_dim, n_dim), dtype=lhsT.dtype, buffer=nl.shared_hbm)
    for m in nl.affine_range(m_dim // tm):
        for n in nl.affine_range(n_dim // tn):
            acc = nl.zeros((tm, tn), nl.float32, buffer=nl.psum)
            for k in nl.affine_range(k_dim // tk):
                a = nl.load(lhsT[k * tk : (k + 1) * tk, m * tm : (m + 1) * tm])
                b = nl.load(rhs[k * tk : (k + 1) * tk, n * tn : (n + 1) * tn])
                acc += nisa.nc_matmul(a, b)
            res = nl.copy(acc, dtype=out.dtype)
            nl.store(out[m * tm : (m + 1) * tm, n * tn : (n + 1) * tn], value=res)
    return out


@nki.jit
def tutorial_hoisted(lhsT: Any, rhs: Any) -> Any:
    """Step 2: the lhsT column block is loaded once per output row block (hoisted out of the N loop)."""
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
def tutorial_block_free(lhsT: Any, rhs: Any) -> Any:
    """Step 3: 2x2 blocks of output tiles share their operand loads (free-dimension blocking)."""
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
def tutorial_fully_optimized(lhsT: Any, rhs: Any) -> Any:
    """Step 4: 16x2x8 blocking, K blocks sequential, results accumulated in SBUF, coalesced stores."""
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


#: Anchor id of ``devkit/cost/params.toml`` -> the tutorial step it measured.
TUTORIAL_STEPS = {
    "mmt_tiled_trn1": tiled_matmul,
    "mmt_hoist_trn1": tutorial_hoisted,
    "mmt_block_free_trn1": tutorial_block_free,
    "mmt_fully_optimized_trn1": tutorial_fully_optimized,
}
