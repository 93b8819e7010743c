"""The AWS NKI tutorial's basic tiled matmul, written once for the tests and benchmarks that need it.

``tiled_matmul(lhsT, rhs)`` computes ``lhsT.T @ rhs`` (``lhsT`` [K, M], ``rhs`` [K, N] -> [M, N], in the
input dtype) the way the tutorial's first step does (reference/nki_api.md section 5.3): for every
output tile of ``gemm_stationary_fmax`` x ``gemm_moving_fmax``, one load of each operand tile per
``pmax``-row contraction step and accumulation in one PSUM bank.  Written for this project from the
tutorial's structure; K, M and N must be multiples of the tile sizes (no ragged edges), which keeps it
the simple textbook loop the cost-model anchors and the throughput benchmark measure.  The project's
general kernels are in :mod:`devkit.kernels.matmul`.
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
