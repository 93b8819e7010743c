"""NeuronMM fused ``X·U·V`` kernels in NKI Beta 2 (our implementation, arXiv 2510.25977).

The Beta-2 versions of :mod:`devkit.kernels.neuronmm` -- same shapes, blocks, plans and schedule (read that
module's docstring for the algorithm: per token block, stage 1 caches the ``(XU)^T`` strip in SBUF, stage 2
streams V once against it; decode blocks of <= 128 tokens stream the weights as the moving operand).

**LNC 2** (trn2 and later): launched as ``kernel[2]``, the two programs split the token dimension -- program
``p`` of ``n = nl.num_programs()`` takes a contiguous share of ``ceil(S / n)`` tokens rounded up to 128,
plans its blocks for that share and streams U and V on its own physical core; no data is exchanged (the
outputs are disjoint row or column ranges of one ``shared_hbm`` tensor).  Launched normally (LNC 1) the
kernels run all of S on one core.
"""

from __future__ import annotations

from typing import Any

import nki
import nki.language as nl

from devkit.kernels import plans, resolve
from devkit.kernels.beta2 import _blocks as B
from devkit.kernels.beta2.matmul import matmul_into, matmul_plan_for, store_natural
from devkit.kernels.layout import banks_leaving_one


def my_tokens(s_tok: int) -> tuple[int, int, int]:
    """``(first token, tokens, tokens per program)`` of this program: under LNC 2 the two programs take
    contiguous halves of S (multiples of 128 tokens; :func:`devkit.kernels.resolve.program_share`)."""
    n = int(nl.num_programs())
    return resolve.program_share(s_tok, n, int(nl.program_id(0)) if n > 1 else 0)


def build_panel(x: Any, x_rows: bool, tok0: int, n_tok: int, h: int) -> Any:
    """SBUF ``X^T`` panel [128, ceil(H/128), n_tok] of tokens ``tok0 ...`` (from x [S, H] or xT [H, S])."""
    panel = nl.ndarray((B.P, B.cdiv(h, B.P), n_tok), dtype=x.dtype, buffer=nl.sbuf)
    if x_rows:
        B.panel_from_rows(x, tok0, n_tok, panel)
    else:
        B.panel_from_cols(x, tok0, n_tok, panel)
    return panel


def strip_epilogue(strip: Any, tok_off: int) -> B.Epilogue:
    """weights_stationary epilogue writing ``[r, tok]`` banks into the strip (input dtype)."""

    def epilogue(ps: list, rt0: int, r0: int, row_tiles: B.Tiles, tok_tiles: B.Tiles) -> None:
        for g, (_, gs) in enumerate(row_tiles):
            for t, (to, ts) in enumerate(tok_tiles):
                a = tok_off + to
                B.evacuate(strip[0:gs, rt0 + g, a : a + ts], ps[0][g][t][0:gs, 0:ts], g + t)

    return epilogue


def natural_sbuf_epilogue(dst: Any) -> B.Epilogue:
    """weights_moving epilogue writing ``[tok, col]`` banks into an SBUF tile ``dst`` [tokens, cols]."""

    def epilogue(ps: list, ct0: int, c0: int, tok_tiles: B.Tiles, col_tiles: B.Tiles) -> None:
        for m, (mo, ms) in enumerate(tok_tiles):
            for n, (no, ns) in enumerate(col_tiles):
                B.evacuate(dst[mo : mo + ms, c0 + no : c0 + no + ns], ps[0][m][n][0:ms, 0:ns], m + n)

    return epilogue


def stage1_strip(x: Any, x_rows: bool, u: Any, tok0: int, b: int, bl: dict[str, int]) -> Any:
    """The ``(XU)^T`` strip [128, ceil(r/128), b] of tokens ``tok0 ... tok0+b`` (SBUF, input dtype)."""
    h, r = u.shape
    strip = nl.ndarray((B.P, B.cdiv(r, B.P), b), dtype=x.dtype, buffer=nl.sbuf)
    if b <= plans.DECODE_MAX_TOKENS:
        panel = build_panel(x, x_rows, tok0, b, h)
        xu = nl.ndarray((B.P, r), dtype=x.dtype, buffer=nl.sbuf)
        B.weights_moving(
            [(panel, u)], b, 0, r, h, bl["u_chunk_tiles"], bl["psum_banks"], natural_sbuf_epilogue(xu)
        )
        B.transpose_into_panel(xu, b, r, strip)
        return strip
    for _, off, size in B.spans(b, min(bl["stage1_tokens"], b)):
        _stage1_sub_block(x, x_rows, u, strip, tok0, off, size, bl)
    return strip


def _stage1_sub_block(
    x: Any, x_rows: bool, u: Any, strip: Any, tok0: int, off: int, size: int, bl: dict[str, int]
) -> None:
    """One stage-1 sub-block: its X^T panel (which dies on return, as a Beta-1 loop-body tile does at the
    end of its iteration) against U, into strip columns ``[off, off + size)``."""
    h, r = u.shape
    panel = build_panel(x, x_rows, tok0 + off, size, h)
    B.weights_stationary(
        [(panel, u)], size, 0, r, h, bl["u_chunk_tiles"], bl["psum_banks"], strip_epilogue(strip, off)
    )


def store_transposed_epilogue(out_t: Any, tok0: int) -> B.Epilogue:
    """weights_stationary epilogue storing ``[n, tok]`` banks to ``out_t[n, tok0 + tok]``."""

    def epilogue(ps: list, rt0: int, r0: int, row_tiles: B.Tiles, tok_tiles: B.Tiles) -> None:
        base = tok_tiles[0][0]
        width = tok_tiles[-1][0] + tok_tiles[-1][1] - base
        for g, (go, gs) in enumerate(row_tiles):
            o = nl.ndarray((B.P, width), dtype=out_t.dtype, buffer=nl.sbuf)
            for t, (to, ts) in enumerate(tok_tiles):
                B.evacuate(o[0:gs, to - base : to - base + ts], ps[0][g][t][0:gs, 0:ts], g + t)
            c0 = tok0 + base
            nki.isa.dma_copy(dst=out_t[r0 + go : r0 + go + gs, c0 : c0 + width], src=o[0:gs, 0:width])

    return epilogue


def transpose_store_epilogue(out_t: Any, tok0: int, n_tok: int) -> B.Epilogue:
    """weights_moving epilogue for decode blocks of a transposed output: natural [tok, n] group -> TensorE
    transposes -> ``out_t[n, tok0 + tok]``."""

    def epilogue(ps: list, ct0: int, c0: int, tok_tiles: B.Tiles, col_tiles: B.Tiles) -> None:
        gw = col_tiles[-1][0] + col_tiles[-1][1]
        nat = nl.ndarray((B.P, gw), dtype=out_t.dtype, buffer=nl.sbuf)
        for m, (mo, ms) in enumerate(tok_tiles):
            for n, (no, ns) in enumerate(col_tiles):
                B.evacuate(nat[mo : mo + ms, no : no + ns], ps[0][m][n][0:ms, 0:ns], m + n)
        B.transpose_store(nat, n_tok, gw, out_t, ct0, tok0)

    return epilogue


def stage2(strip: Any, v: Any, tok0: int, b: int, bl: dict[str, int], out: Any, transposed: bool) -> None:
    """Stream V against the cached strip and store the block's output (natural or transposed)."""
    r, n = v.shape
    c2, banks = bl["v_chunk_tiles"], bl["psum_banks"]
    if not transposed:
        B.weights_moving([(strip, v)], b, 0, n, r, c2, banks, store_natural(out, tok0))
    elif b <= plans.DECODE_MAX_TOKENS:  # one PSUM bank stays free for the epilogue's transposes
        B.weights_moving(
            [(strip, v)], b, 0, n, r, c2, banks_leaving_one(banks), transpose_store_epilogue(out, tok0, b)
        )
    else:
        B.weights_stationary([(strip, v)], b, 0, n, r, c2, banks, store_transposed_epilogue(out, tok0))


def xuv_into(
    out: Any,
    x: Any,
    u: Any,
    v: Any,
    plan: plans.Plan,
    x_rows: bool,
    transposed: bool,
    first: int,
    tokens: int,
) -> None:
    """Run the fused X.U.V computation of tokens ``[first, first + tokens)`` into ``out``."""
    bl = plan.blocks
    for _, off, b in B.spans(tokens, bl["block_tokens"]):
        # the strip is a temporary of the call: it dies before the next block's strip is allocated
        stage2(stage1_strip(x, x_rows, u, first + off, b, bl), v, first + off, b, bl, out, transposed)


def fused_xuv(
    family: str, x: Any, u: Any, v: Any, blocks: dict[str, Any], x_rows: bool, transposed: bool
) -> Any:
    """Body of the fused kernels: resolve the family's plan, allocate the [S, N] (or [N, S]) output, run it."""
    s_tok = x.shape[0] if x_rows else x.shape[1]
    first, tokens, share = my_tokens(s_tok)
    out_layout = "transposed" if transposed else "natural"
    usable, target = B.usable_sbuf_bytes(), B.target_name()
    plan = resolve.xuv_plan(family, x, u, v, blocks, out_layout, x_rows, usable, target, share)
    shape = (v.shape[1], s_tok) if transposed else (s_tok, v.shape[1])
    out = nl.ndarray(shape, dtype=x.dtype, buffer=nl.shared_hbm)
    xuv_into(out, x, u, v, plan, x_rows, transposed, first, tokens)
    return out


@nki.jit
def xuv_fused_b2(
    x: Any,
    u: Any,
    v: Any,
    block_tokens: int | None = None,
    stage1_tokens: int | None = None,
    u_chunk_tiles: int | None = None,
    v_chunk_tiles: int | None = None,
    psum_banks: int | None = None,
) -> Any:
    """``x @ u @ v`` -> [S, N] (input dtype) with the ``(XU)^T`` strip cached in SBUF (LNC 1 or 2)."""
    blocks = resolve.block_args(block_tokens, stage1_tokens, u_chunk_tiles, v_chunk_tiles, psum_banks)
    return fused_xuv("xuv_fused", x, u, v, blocks, x_rows=True, transposed=False)


@nki.jit
def xuv_fused_t_b2(
    x: Any,
    u: Any,
    v: Any,
    block_tokens: int | None = None,
    stage1_tokens: int | None = None,
    u_chunk_tiles: int | None = None,
    v_chunk_tiles: int | None = None,
    psum_banks: int | None = None,
) -> Any:
    """``(x @ u @ v)^T`` -> [N, S] (input dtype) (LNC 1 or 2)."""
    blocks = resolve.block_args(block_tokens, stage1_tokens, u_chunk_tiles, v_chunk_tiles, psum_banks)
    return fused_xuv("xuv_fused_t", x, u, v, blocks, x_rows=True, transposed=True)


@nki.jit
def xtuv_fused_b2(
    xT: Any,
    u: Any,
    v: Any,
    block_tokens: int | None = None,
    stage1_tokens: int | None = None,
    u_chunk_tiles: int | None = None,
    v_chunk_tiles: int | None = None,
    psum_banks: int | None = None,
) -> Any:
    """``xT.T @ u @ v`` -> [S, N] (input dtype) for an input laid out [H, S] (LNC 1 or 2)."""
    blocks = resolve.block_args(block_tokens, stage1_tokens, u_chunk_tiles, v_chunk_tiles, psum_banks)
    return fused_xuv("xtuv_fused", xT, u, v, blocks, x_rows=False, transposed=False)


def transpose_hbm(dst: Any, src: Any) -> None:
    """``dst[C, R] = src[R, C]^T`` through SBUF with TensorE transposes (a separate pass over HBM)."""
    rows, cols = src.shape
    for _, r0, rs in B.spans(rows, B.P):
        for ci, c0, cs in B.spans(cols, B.X_COLS):
            nat = nl.ndarray((B.P, cs), dtype=src.dtype, buffer=nl.sbuf)
            nki.isa.dma_copy(dst=nat[0:rs, 0:cs], src=src[r0 : r0 + rs, c0 : c0 + cs])
            B.transpose_store(nat, rs, cs, dst, ci * (B.X_COLS // B.P), r0)


@nki.jit
def xuv_sequential_b2(x: Any, u: Any, v: Any) -> Any:
    """The "NKI XUV" baseline: ``x @ u`` then ``@ v`` as two :func:`matmul_optimized_b2` passes with every
    intermediate through HBM, plus the transposes they need.  -> [S, N] in the input dtype."""
    resolve.check_same_dtype(x, u, v)
    s_tok, h, r, n = resolve.xuv_dims("xuv_sequential", tuple(x.shape), u, v, True)
    dt = x.dtype
    out = nl.ndarray((s_tok, n), dtype=dt, buffer=nl.shared_hbm)
    xt = nl.ndarray((h, s_tok), dtype=dt, buffer=nl.hbm)
    xu = nl.ndarray((s_tok, r), dtype=dt, buffer=nl.hbm)
    xut = nl.ndarray((r, s_tok), dtype=dt, buffer=nl.hbm)
    plan1 = matmul_plan_for(xt, u, {}, "xuv_sequential")
    plan2 = matmul_plan_for(xut, v, {}, "xuv_sequential")
    transpose_hbm(xt, x)
    matmul_into(xu, xt, u, plan1)
    transpose_hbm(xut, xu)
    matmul_into(out, xut, v, plan2)
    return out
