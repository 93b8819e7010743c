"""Dense matmul baselines in NKI Beta 2: ``result = lhsT.T @ rhs`` with ``lhsT`` [K, M], ``rhs`` [K, N] -> [M, N].

The Beta-2 versions of :mod:`devkit.kernels.matmul` (same blocks, same plan, same schedule; see
:mod:`devkit.kernels.beta2._blocks` for what the NKI 0.x idiom changes).  Any K, M, N >= 1, bf16/fp16/fp32
inputs; the result has the input dtype.
"""

from __future__ import annotations

from typing import Any

import nki
import nki.language as nl

from devkit.kernels import plans, resolve, tuning
from devkit.kernels.beta2 import _blocks as B
from devkit.kernels.resolve import matmul_dims as dims


def store_natural(out: Any, tok0: int) -> B.Epilogue:
    """weights_moving epilogue: evacuate a group and store it to ``out[tok0 + token, col]`` (rows = tokens)."""

    def epilogue(ps: list, ct0: int, c0: int, tok_tiles: B.Tiles, col_tiles: B.Tiles) -> None:
        width = col_tiles[-1][0] + col_tiles[-1][1]
        for m, (mo, ms) in enumerate(tok_tiles):
            o = nl.ndarray((B.P, width), dtype=out.dtype, buffer=nl.sbuf)
            for n, (no, ns) in enumerate(col_tiles):
                B.evacuate(o[0:ms, no : no + ns], ps[0][m][n][0:ms, 0:ns], m + n)
            r0 = tok0 + mo
            nki.isa.dma_copy(dst=out[r0 : r0 + ms, c0 : c0 + width], src=o[0:ms, 0:width])

    return epilogue


def matmul_plan_for(
    lhsT: Any, rhs: Any, blocks: dict[str, Any], kernel: str = "matmul_optimized"
) -> plans.Plan:
    """Resolve ``matmul_optimized`` blocks (the shared tuning table + overrides) and check they fit."""
    k, m, n = dims(lhsT, rhs)
    given = {key: v for key, v in blocks.items() if v is not None}
    defaults = tuning.blocks_for(
        "matmul_optimized", {"K": k, "M": m, "N": n}, tuning.dtype_name(lhsT.dtype), B.target_name()
    )
    return plans.resolve_matmul(
        k, m, n, B.itemsize(lhsT.dtype), B.usable_sbuf_bytes(), defaults, given, kernel
    )


def matmul_into(out: Any, lhsT: Any, rhs: Any, plan: plans.Plan) -> None:
    """``out[M, N] = lhsT.T @ rhs`` with the resolved ``plan`` (called inside a kernel)."""
    _, m, _ = dims(lhsT, rhs)
    for _, m0, bm in B.spans(m, plan.blocks["block_m"]):
        _matmul_block(out, lhsT, rhs, plan, m0, bm)


def _matmul_block(out: Any, lhsT: Any, rhs: Any, plan: plans.Plan, m0: int, bm: int) -> None:
    """Output rows ``[m0, m0 + bm)``: the lhsT panel (resident or streamed) against all of rhs.  The panel
    dies on return, before the next block's is allocated (as a Beta-1 loop-body tile at the end of its
    iteration), so both generations place their buffers alike."""
    k, _, n = dims(lhsT, rhs)
    bl = plan.blocks
    if plan.mode == "panel":
        src: Any = nl.ndarray((B.P, B.cdiv(k, B.P), bm), dtype=lhsT.dtype, buffer=nl.sbuf)
        B.panel_from_cols(lhsT, m0, bm, src, chunk_tiles=bl["k_chunk_tiles"])
    else:
        src = B.HbmPanel(lhsT, m0, bm)
    B.weights_moving([(src, rhs)], bm, 0, n, k, bl["k_chunk_tiles"], bl["psum_banks"], store_natural(out, m0))


@nki.jit
def matmul_optimized_b2(
    lhsT: Any,
    rhs: Any,
    block_m: int | None = None,
    k_chunk_tiles: int | None = None,
    psum_banks: int | None = None,
) -> Any:
    """``lhsT.T @ rhs`` -> [M, N] in the input dtype: a resident ``[K, block_m]`` lhsT panel (stationary),
    rhs streamed in ``k_chunk_tiles``-tile chunks (moving), ``psum_banks`` accumulators per group; the panel
    streams too when a full-K panel cannot fit SBUF.  Blocks as :func:`devkit.kernels.matmul.matmul_optimized`."""
    plan = matmul_plan_for(
        lhsT, rhs, {"block_m": block_m, "k_chunk_tiles": k_chunk_tiles, "psum_banks": psum_banks}
    )
    _, m, n = dims(lhsT, rhs)
    out = nl.ndarray((m, n), dtype=lhsT.dtype, buffer=nl.shared_hbm)
    matmul_into(out, lhsT, rhs, plan)
    return out


def _fixed_panel(lhsT: Any, rhs: Any, cols: int, rhs_cols: int, kernel: str) -> tuple[int, int, int]:
    """Shapes of a kernel holding a full-K ``cols``-wide lhsT panel next to double-buffered ``rhs_cols``-wide
    rhs tiles; raises BlockError when that cannot fit SBUF (the registry's ``_panel_limit``)."""
    usable = B.usable_sbuf_bytes()
    return resolve.fixed_panel_dims(lhsT, rhs, cols, rhs_cols, usable, kernel, "matmul_optimized_b2")


@nki.jit
def matmul_blocked_b2(lhsT: Any, rhs: Any) -> Any:
    """Blocked free dimensions: a 256-column lhsT panel against 1024-column rhs groups, 4 PSUM banks."""
    k, m, n = _fixed_panel(lhsT, rhs, 256, 2 * B.FMAX, "matmul_blocked_b2")
    out = nl.ndarray((m, n), dtype=lhsT.dtype, buffer=nl.shared_hbm)
    for _, m0, bm in B.spans(m, 256):
        panel = nl.ndarray((B.P, B.cdiv(k, B.P), bm), dtype=lhsT.dtype, buffer=nl.sbuf)
        B.panel_from_cols(lhsT, m0, bm, panel, chunk_tiles=1)
        B.weights_moving([(panel, rhs)], bm, 0, n, k, 1, 4, store_natural(out, m0), col_group_tiles=2)
    return out


@nki.jit
def matmul_hoisted_b2(lhsT: Any, rhs: Any) -> Any:
    """Hoisted loads: each 128-column lhsT strip (all of K) is loaded once and reused across every 512-column
    rhs tile."""
    k, m, n = _fixed_panel(lhsT, rhs, B.P, B.FMAX, "matmul_hoisted_b2")
    out = nl.ndarray((m, n), dtype=lhsT.dtype, buffer=nl.shared_hbm)
    for _, m0, ms in B.spans(m, B.P):
        panel = nl.ndarray((B.P, B.cdiv(k, B.P), ms), dtype=lhsT.dtype, buffer=nl.sbuf)
        B.panel_from_cols(lhsT, m0, ms, panel, chunk_tiles=1)
        B.weights_moving([(panel, rhs)], ms, 0, n, k, 1, 1, store_natural(out, m0))
    return out


@nki.jit
def matmul_tiled_b2(lhsT: Any, rhs: Any) -> Any:
    """Basic tiling: for every [128, 512] output tile, one 128-row tile of each operand per contraction step."""
    k, m, n = dims(lhsT, rhs)
    out = nl.ndarray((m, n), dtype=lhsT.dtype, buffer=nl.shared_hbm)
    for _, m0, ms in B.spans(m, B.P):
        B.weights_moving(
            [(B.HbmPanel(lhsT, m0, ms), rhs)], ms, 0, n, k, 1, 1, store_natural(out, m0), col_group_tiles=1
        )
    return out
