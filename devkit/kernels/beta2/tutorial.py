"""The AWS NKI matmul tutorial's tiled step in NKI Beta 2, written once for the tests and benchmarks.

``tiled_matmul(lhsT, rhs)`` computes ``lhsT.T @ rhs`` (``lhsT`` [K, M], ``rhs`` [K, N] -> [M, N], in the
input dtype) with the loops of :func:`devkit.kernels.tutorial.tiled_matmul` (the Beta-1 copy): for every
output tile of ``gemm_stationary_fmax`` x ``gemm_moving_fmax``, one DMA of each operand tile per
``pmax``-row contraction step into a fresh SBUF tile, accumulation in one PSUM tile, one copy out and
one store.  The NKI 0.x idiom (reference/nki_beta2.md): every ``nisa.*`` call writes the ``dst`` it is
given and PSUM accumulates implicitly.  K, M and N must be multiples of the tile sizes (no ragged edges).
The project's general Beta-2 kernels are in :mod:`devkit.kernels.beta2.matmul`.
"""

from __future__ import annotations

from typing import Any

import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def tiled_matmul(lhsT: Any, rhs: Any) -> Any:
    """Tutorial-style tiled matmul, Beta 2: PSUM accumulation over K tiles, one DMA per operand tile."""
    tk, tm, tn = nl.tile_size.pmax, nl.tile_size.gemm_stationary_fmax, nl.tile_size.gemm_moving_fmax
    k_dim, m_dim = lhsT.shape
    _, n_dim = rhs.shape
    out = nl.ndarray((m_dim, n_dim), dtype=lhsT.dtype, buffer=nl.shared_hbm)
    for m in nl.affine_range(m_dim // tm):
        for n in nl.affine_range(n_dim // tn):
            acc = nl.ndarray((tm, tn), dtype=nl.float32, buffer=nl.psum)
            for k in nl.affine_range(k_dim // tk):
                a = nl.ndarray((tk, tm), dtype=lhsT.dtype, buffer=nl.sbuf)
                b = nl.ndarray((tk, tn), dtype=rhs.dtype, buffer=nl.sbuf)
                nisa.dma_copy(dst=a, src=lhsT[k * tk : (k + 1) * tk, m * tm : (m + 1) * tm])
                nisa.dma_copy(dst=b, src=rhs[k * tk : (k + 1) * tk, n * tn : (n + 1) * tn])
                nisa.nc_matmul(dst=acc, stationary=a, moving=b)
            res = nl.ndarray((tm, tn), dtype=out.dtype, buffer=nl.sbuf)
            nisa.tensor_copy(dst=res, src=acc)
            nisa.dma_copy(dst=out[m * tm : (m + 1) * tm, n * tn : (n + 1) * tn], src=res)
    return out
