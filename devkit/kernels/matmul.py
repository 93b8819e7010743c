"""Dense matmul baselines: ``result = lhsT.T @ rhs`` with ``lhsT`` [K, M], ``rhs`` [K, N] -> [M, N].

Written from scratch in the style of the AWS NKI tutorial progression (tiled, hoisted loads,
blocked free dimensions, fully optimized), for any K, M, N >= 1 (ragged edges are peeled into
static smaller tiles) and any input dtype the TensorE accepts (bf16, fp16, fp32, fp8); the result
has the input dtype.  Every contraction accumulates in PSUM (fp32); each PSUM bank is opened by an
overwriting matmul (no memset) and evacuated once.

``matmul_optimized`` is the project's best dense kernel ("NKI XW"): a ``[K, block_m]`` panel of lhsT
stays resident in SBUF (stationary operand, tokens on the free dim) while rhs streams past it in
``k_chunk_tiles`` x 128-row chunks as the moving operand, ``psum_banks`` accumulators at a time.
When a full-K panel cannot fit SBUF the panel streams chunk by chunk alongside rhs.
"""

from __future__ import annotations

from typing import Any

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl

from devkit.kernels import _blocks as B
from devkit.kernels import plans, resolve, tuning


def dims(lhsT: Any, rhs: Any) -> tuple[int, int, int]:
    """``(K, M, N)`` of ``lhsT`` [K, M] and ``rhs`` [K, N] (:func:`devkit.kernels.resolve.matmul_dims`)."""
    return resolve.matmul_dims(lhsT, rhs)


def store_natural(out: Any, tok0: Any, dtype: Any) -> Any:
    """Epilogue for :func:`devkit.kernels._blocks.weights_moving`: evacuate a group and store it to
    ``out[tok0 + token, col]`` (rows = tokens)."""

    def epilogue(ps: list, ct0: Any, c0: Any, tok_tiles: list, col_tiles: list) -> None:
        width = col_tiles[-1][0] + col_tiles[-1][1]
        for m, (mo, ms) in enumerate(tok_tiles):
            for _ in B.scope():
                o = nl.ndarray((B.P, width), dtype=dtype, buffer=nl.sbuf)
                for n, (no, ns) in enumerate(col_tiles):
                    B.evacuate(o[0:ms, no : no + ns], ps[0][m][n][0:ms, 0:ns], dtype, m + n)
                i_p = nl.arange(ms)[:, None]
                i_f = nl.arange(width)[None, :]
                nl.store(out[tok0 + mo + i_p, c0 + i_f], value=o[0:ms, 0:width])

    return epilogue


def matmul_plan_for(
    lhsT: Any, rhs: Any, blocks: dict[str, Any], kernel: str = "matmul_optimized"
) -> plans.Plan:
    """Resolve ``matmul_optimized`` blocks (tuning defaults + overrides) and check they fit."""
    return resolve.matmul_plan(lhsT, rhs, blocks, B.usable_sbuf_bytes(), tuning.target_name(), kernel)


def matmul_into(out: Any, lhsT: Any, rhs: Any, plan: plans.Plan) -> None:
    """``out[M, N] = lhsT.T @ rhs`` with the resolved ``plan`` (called inside a kernel)."""
    k, m, n = dims(lhsT, rhs)
    dt = lhsT.dtype
    bl = plan.blocks
    lhs3 = B.rows3(lhsT)
    rhs3 = B.rows3(rhs)
    kt = B.cdiv(k, B.P)

    def mblock(bi: Any, m0: Any, bm: int) -> None:
        if plan.mode == "panel":
            panel = nl.ndarray((B.P, kt, bm), dtype=dt, buffer=nl.sbuf)
            B.panel_from_cols(lhsT, lhs3, m0, bm, panel, chunk_tiles=bl["k_chunk_tiles"])
            src: Any = panel
        else:
            src = B.HbmPanel(lhsT, lhs3, m0, bm)
        B.weights_moving(
            [(src, rhs, rhs3)], bm, 0, n, k, bl["k_chunk_tiles"], bl["psum_banks"], store_natural(out, m0, dt)
        )

    B.for_spans(m, bl["block_m"], mblock)


@nki.jit
def matmul_optimized(
    lhsT: Any,
    rhs: Any,
    block_m: int | None = None,
    k_chunk_tiles: int | None = None,
    psum_banks: int | None = None,
) -> Any:
    """``lhsT.T @ rhs`` -> [M, N] in the input dtype; the project's best dense kernel.

    Blocks (``None`` = tuned default from ``devkit/kernels/tuning.json``, shrunk to fit SBUF):
    ``block_m`` tokens (lhsT columns) per resident panel; ``k_chunk_tiles`` 128-row tiles of rhs per
    DMA; ``psum_banks`` accumulators per group (<= 8).  Raises :class:`devkit.kernels.plans.BlockError`
    before issuing anything if explicit blocks break a limit (SBUF bytes per partition, PSUM banks).
    """
    plan = matmul_plan_for(
        lhsT, rhs, {"block_m": block_m, "k_chunk_tiles": k_chunk_tiles, "psum_banks": psum_banks}
    )
    _, m, n = dims(lhsT, rhs)
    out = nl.ndarray((m, n), dtype=lhsT.dtype, buffer=nl.shared_hbm)
    matmul_into(out, lhsT, rhs, plan)
    return out


@nki.jit
def matmul_blocked(lhsT: Any, rhs: Any) -> Any:
    """Blocked free dimensions: a 256-column lhsT panel (2 stationary tiles) against 1024-column rhs
    groups (2 moving tiles), 4 PSUM banks; rhs is loaded one 128-row tile per DMA."""
    k, m, n = _fixed_panel(lhsT, rhs, 256, 2 * B.FMAX, "matmul_blocked")
    dt = lhsT.dtype
    out = nl.ndarray((m, n), dtype=dt, buffer=nl.shared_hbm)
    kt = B.cdiv(k, B.P)
    lhs3 = B.rows3(lhsT)
    rhs3 = B.rows3(rhs)

    def mblock(bi: Any, m0: Any, bm: int) -> None:
        panel = nl.ndarray((B.P, kt, bm), dtype=dt, buffer=nl.sbuf)
        B.panel_from_cols(lhsT, lhs3, m0, bm, panel, chunk_tiles=1)
        B.weights_moving(
            [(panel, rhs, rhs3)], bm, 0, n, k, 1, 4, store_natural(out, m0, dt), col_group_tiles=2
        )

    B.for_spans(m, 256, mblock)
    return out


@nki.jit
def matmul_hoisted(lhsT: Any, rhs: Any) -> Any:
    """Hoisted loads: each 128-column lhsT strip (all of K) is loaded once and reused across every
    512-column rhs tile; rhs tiles are loaded one 128 x 512 tile per DMA."""
    k, m, n = _fixed_panel(lhsT, rhs, B.P, B.FMAX, "matmul_hoisted")
    dt = lhsT.dtype
    out = nl.ndarray((m, n), dtype=dt, buffer=nl.shared_hbm)
    kt = B.cdiv(k, B.P)
    lhs3 = B.rows3(lhsT)
    rhs3 = B.rows3(rhs)

    def mtile(mi: Any, m0: Any, ms: int) -> None:
        panel = nl.ndarray((B.P, kt, ms), dtype=dt, buffer=nl.sbuf)
        B.panel_from_cols(lhsT, lhs3, m0, ms, panel, chunk_tiles=1)
        B.weights_moving([(panel, rhs, rhs3)], ms, 0, n, k, 1, 1, store_natural(out, m0, dt))

    B.for_spans(m, B.P, mtile)
    return out


@nki.jit
def matmul_tiled(lhsT: Any, rhs: Any) -> Any:
    """Basic tiling: for every [128, 512] output tile, load one 128-row tile of each operand per
    contraction step and accumulate in one PSUM bank."""
    k, m, n = dims(lhsT, rhs)
    dt = lhsT.dtype
    out = nl.ndarray((m, n), dtype=dt, buffer=nl.shared_hbm)

    def mtile(mi: Any, m0: Any, ms: int) -> None:
        B.weights_moving(
            [(B.HbmPanel(lhsT, None, m0, ms), rhs, None)],
            ms,
            0,
            n,
            k,
            1,
            1,
            store_natural(out, m0, dt),
            col_group_tiles=1,
        )

    B.for_spans(m, B.P, mtile)
    return out


def _fixed_panel(lhsT: Any, rhs: Any, cols: int, rhs_cols: int, kernel: str) -> tuple[int, int, int]:
    """Shapes of a kernel holding a full-K ``cols``-wide lhsT panel next to ``rhs_cols``-wide rhs tiles;
    raises BlockError when that cannot fit SBUF."""
    usable = B.usable_sbuf_bytes()
    return resolve.fixed_panel_dims(lhsT, rhs, cols, rhs_cols, usable, kernel, "matmul_optimized")
