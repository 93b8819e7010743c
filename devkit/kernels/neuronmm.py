"""NeuronMM fused ``X·U·V`` kernels for SVD-compressed weights (our implementation, arXiv 2510.25977).

Shapes: ``x`` [S, H] (or ``xT`` [H, S]), ``u`` [H, r], ``v`` [r, N]; any S, H, r, N >= 1; bf16, fp16 or
fp32 inputs (all the same dtype); outputs in the input dtype.

Per token block of ``block_tokens`` tokens (the last one ragged):

* **Stage 1** builds the ``(XU)^T`` strip ``[r, tokens]`` in SBUF (input dtype), the layout stage 2
  contracts over without any transpose ("implicit transposition"):

  - prefill (block > 128 tokens): for every ``stage1_tokens`` sub-block, ``X^T`` is formed on chip
    (natural row DMAs + TensorE 128x128 transposes; ``xtuv_fused`` loads ``xT`` directly), then
    ``nc_matmul(stationary=U tile [128 h, 128 r], moving=X^T tile [128 h, 512 tok])`` accumulates the
    whole H contraction of each ``[128 r, 512 tok]`` bank in PSUM (fp32) before one evacuation.
  - decode (block <= 128 tokens): weights are the *moving* operand: ``nc_matmul(stationary=X^T tile
    [128 h, S], moving=U tile [128 h, 512 r])`` gives ``XU`` [S, 512 r] per bank (TensorE streams 512
    weight columns per instruction instead of a 1-column moving tile); ``XU`` is then transposed
    into the strip on the TensorE (a few 128 x S blocks).

* **Stage 2** streams V once per token block against the cached strip:

  - natural output (``xuv_fused``, ``xtuv_fused``): ``stationary=strip tile [128 r, <=128 tok]``,
    ``moving=V tile [128 r, 512 n]`` -> ``[tok, n]`` banks, r accumulated in PSUM, stored row-major.
  - transposed output (``xuv_fused_t``): ``stationary=V tile [128 r, 128 n]``, ``moving=strip tile
    [128 r, 512 tok]`` -> ``[n, tok]`` banks stored to ``out[N, S]``; decode blocks compute the natural
    tile (weights moving) and transpose it on the TensorE before the store.

V is read from HBM once per token block (``ceil(S / block_tokens)`` times in total) and U once per
stage-1 sub-block (``stage1_tokens``, as large as the X^T panel allows next to the strip); the
intermediate never touches HBM.  ``xuv_sequential`` is the unfused "NKI XUV" baseline.

Block keyword arguments (``None`` = tuned default from ``devkit/kernels/tuning.json``, shrunk to fit SBUF):
``block_tokens`` (tokens per cached strip), ``stage1_tokens`` (tokens per X^T panel in stage 1),
``u_chunk_tiles`` / ``v_chunk_tiles`` (128-row weight tiles per DMA), ``psum_banks`` (accumulators per
group, <= 8).  Explicit blocks that break a limit raise :class:`devkit.kernels.plans.BlockError` before any
instruction is issued.
"""

from __future__ import annotations

from typing import Any

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl

from devkit.kernels import _blocks as B
from devkit.kernels import plans, resolve, tuning
from devkit.kernels.matmul import matmul_into, matmul_plan_for, store_natural
from devkit.kernels.resolve import block_args


def build_panel(x: Any, x3: Any, x_rows: bool, tok0: Any, n_tok: int, h: int) -> Any:
    """SBUF ``X^T`` panel [128, ceil(H/128), n_tok] of tokens ``tok0 ...`` (from x [S, H] or xT [H, S])."""
    panel = nl.ndarray((B.P, B.cdiv(h, B.P), n_tok), dtype=x.dtype, buffer=nl.sbuf)
    if x_rows:
        B.panel_from_rows(x, tok0, n_tok, panel)
    else:
        B.panel_from_cols(x, x3, tok0, n_tok, panel)
    return panel


def strip_epilogue(strip: Any, tok_off: Any) -> Any:
    """weights_stationary epilogue writing ``[r, tok]`` banks into the strip (input dtype)."""
    dt = strip.dtype

    def epilogue(ps: list, rt0: Any, r0: Any, row_tiles: list, tok_tiles: list) -> None:
        for g, (_, gs) in enumerate(row_tiles):
            for t, (to, ts) in enumerate(tok_tiles):
                B.evacuate(strip[0:gs, rt0 + g, nl.ds(tok_off + to, ts)], ps[0][g][t][0:gs, 0:ts], dt, g + t)

    return epilogue


def natural_sbuf_epilogue(dst: Any) -> Any:
    """weights_moving epilogue writing ``[tok, col]`` banks into an SBUF tile ``dst`` [tokens, cols]."""
    dt = dst.dtype

    def epilogue(ps: list, ct0: Any, c0: Any, tok_tiles: list, col_tiles: list) -> None:
        for m, (mo, ms) in enumerate(tok_tiles):
            for n, (no, ns) in enumerate(col_tiles):
                B.evacuate(dst[mo : mo + ms, nl.ds(c0 + no, ns)], ps[0][m][n][0:ms, 0:ns], dt, m + n)

    return epilogue


def stage1_strip(
    x: Any, x3: Any, x_rows: bool, u: Any, u3: Any, tok0: Any, b: int, bl: dict[str, int]
) -> Any:
    """The ``(XU)^T`` strip [128, ceil(r/128), b] of tokens ``tok0 ... tok0+b`` (SBUF, input dtype)."""
    h, r = u.shape
    dt = x.dtype
    rt = B.cdiv(r, B.P)
    strip = nl.ndarray((B.P, rt, b), dtype=dt, buffer=nl.sbuf)
    if b <= plans.DECODE_MAX_TOKENS:
        for _ in B.scope():  # the X^T panel and XU die before stage 2
            panel = build_panel(x, x3, x_rows, tok0, b, h)
            xu = nl.ndarray((B.P, r), dtype=dt, buffer=nl.sbuf)
            B.weights_moving(
                [(panel, u, u3)], b, 0, r, h, bl["u_chunk_tiles"], bl["psum_banks"], natural_sbuf_epilogue(xu)
            )
            B.transpose_into_panel(xu, b, r, strip)
        return strip

    def sub_block(si: Any, off: Any, size: int) -> None:
        panel = build_panel(x, x3, x_rows, tok0 + off, size, h)
        B.weights_stationary(
            [(panel, u, u3)], size, 0, r, h, bl["u_chunk_tiles"], bl["psum_banks"], strip_epilogue(strip, off)
        )

    B.for_spans(b, min(bl["stage1_tokens"], b), sub_block)
    return strip


def store_transposed_epilogue(out_t: Any, tok0: Any) -> Any:
    """weights_stationary epilogue storing ``[n, tok]`` banks to ``out_t[n, tok0 + tok]``."""
    dt = out_t.dtype

    def epilogue(ps: list, rt0: Any, r0: Any, row_tiles: list, tok_tiles: list) -> None:
        width = tok_tiles[-1][0] + tok_tiles[-1][1] - tok_tiles[0][0]
        base = tok_tiles[0][0]
        for g, (go, gs) in enumerate(row_tiles):
            for _ in B.scope():
                o = nl.ndarray((B.P, width), dtype=dt, buffer=nl.sbuf)
                for t, (to, ts) in enumerate(tok_tiles):
                    B.evacuate(o[0:gs, to - base : to - base + ts], ps[0][g][t][0:gs, 0:ts], dt, g + t)
                i_p = nl.arange(gs)[:, None]
                i_f = nl.arange(width)[None, :]
                nl.store(out_t[r0 + go + i_p, tok0 + base + i_f], value=o[0:gs, 0:width])

    return epilogue


def transpose_store_epilogue(out_t: Any, out_t3: Any, tok0: Any, n_tok: int) -> Any:
    """weights_moving epilogue for decode blocks of a transposed output: natural [tok, n] group ->
    TensorE transposes -> ``out_t[n, tok0 + tok]``."""
    dt = out_t.dtype

    def epilogue(ps: list, ct0: Any, c0: Any, tok_tiles: list, col_tiles: list) -> None:
        gw = col_tiles[-1][0] + col_tiles[-1][1]
        nat = nl.ndarray((B.P, gw), dtype=dt, buffer=nl.sbuf)
        for m, (mo, ms) in enumerate(tok_tiles):
            for n, (no, ns) in enumerate(col_tiles):
                B.evacuate(nat[mo : mo + ms, no : no + ns], ps[0][m][n][0:ms, 0:ns], dt, m + n)
        B.transpose_store(nat, n_tok, gw, out_t, out_t3, ct0, tok0)

    return epilogue


def stage2(
    strip: Any, v: Any, v3: Any, tok0: Any, b: int, bl: dict[str, int], out: Any, out3: Any, transposed: bool
) -> None:
    """Stream V against the cached strip and store the block's output (natural or transposed)."""
    r, n = v.shape
    c2, banks = bl["v_chunk_tiles"], bl["psum_banks"]
    if not transposed:
        B.weights_moving([(strip, v, v3)], b, 0, n, r, c2, banks, store_natural(out, tok0, out.dtype))
    elif b <= plans.DECODE_MAX_TOKENS:
        # one PSUM bank stays free for the epilogue's TensorE transposes
        B.weights_moving(
            [(strip, v, v3)],
            b,
            0,
            n,
            r,
            c2,
            B.banks_leaving_one(banks),
            transpose_store_epilogue(out, out3, tok0, b),
        )
    else:
        B.weights_stationary([(strip, v, v3)], b, 0, n, r, c2, banks, store_transposed_epilogue(out, tok0))


def xuv_into(out: Any, x: Any, u: Any, v: Any, plan: plans.Plan, x_rows: bool, transposed: bool) -> None:
    """Run the fused X.U.V computation into ``out`` (called inside a kernel)."""
    bl = plan.blocks
    s_tok = x.shape[0] if x_rows else x.shape[1]
    x3 = None if x_rows else B.rows3(x)
    u3, v3 = B.rows3(u), B.rows3(v)
    out3 = B.rows3(out) if transposed else None

    def block(bi: Any, tok0: Any, b: int) -> None:
        strip = stage1_strip(x, x3, x_rows, u, u3, tok0, b, bl)
        stage2(strip, v, v3, tok0, b, bl, out, out3, transposed)

    B.for_spans(s_tok, bl["block_tokens"], block)


def fused_xuv(
    name: str, x: Any, u: Any, v: Any, blocks: dict[str, Any], x_rows: bool, transposed: bool
) -> Any:
    """Body of the fused kernels: resolve ``name``'s plan, allocate the [S, N] (or [N, S]) output, run it."""
    out_layout = "transposed" if transposed else "natural"
    usable, target = B.usable_sbuf_bytes(), tuning.target_name()
    plan = resolve.xuv_plan(name, x, u, v, blocks, out_layout, x_rows, usable, target)
    s_tok = x.shape[0] if x_rows else x.shape[1]
    shape = (v.shape[1], s_tok) if transposed else (s_tok, v.shape[1])
    out = nl.ndarray(shape, dtype=x.dtype, buffer=nl.shared_hbm)
    xuv_into(out, x, u, v, plan, x_rows=x_rows, transposed=transposed)
    return out


@nki.jit
def xuv_fused(
    x: Any,
    u: Any,
    v: Any,
    block_tokens: int | None = None,
    stage1_tokens: int | None = None,
    u_chunk_tiles: int | None = None,
    v_chunk_tiles: int | None = None,
    psum_banks: int | None = None,
) -> Any:
    """``x @ u @ v`` -> [S, N] (input dtype) with the ``(XU)^T`` strip cached in SBUF."""
    blocks = block_args(block_tokens, stage1_tokens, u_chunk_tiles, v_chunk_tiles, psum_banks)
    return fused_xuv("xuv_fused", x, u, v, blocks, x_rows=True, transposed=False)


@nki.jit
def xuv_fused_t(
    x: Any,
    u: Any,
    v: Any,
    block_tokens: int | None = None,
    stage1_tokens: int | None = None,
    u_chunk_tiles: int | None = None,
    v_chunk_tiles: int | None = None,
    psum_banks: int | None = None,
) -> Any:
    """``(x @ u @ v)^T`` -> [N, S] (input dtype): the layout a following kernel contracts over N with."""
    blocks = block_args(block_tokens, stage1_tokens, u_chunk_tiles, v_chunk_tiles, psum_banks)
    return fused_xuv("xuv_fused_t", x, u, v, blocks, x_rows=True, transposed=True)


@nki.jit
def xtuv_fused(
    xT: Any,
    u: Any,
    v: Any,
    block_tokens: int | None = None,
    stage1_tokens: int | None = None,
    u_chunk_tiles: int | None = None,
    v_chunk_tiles: int | None = None,
    psum_banks: int | None = None,
) -> Any:
    """``xT.T @ u @ v`` -> [S, N] (input dtype) for an input already laid out [H, S] (no transposes)."""
    blocks = block_args(block_tokens, stage1_tokens, u_chunk_tiles, v_chunk_tiles, psum_banks)
    return fused_xuv("xtuv_fused", xT, u, v, blocks, x_rows=False, transposed=False)


def transpose_hbm(dst: Any, src: Any) -> None:
    """``dst[C, R] = src[R, C]^T`` through SBUF with TensorE transposes (a separate pass over HBM)."""
    rows, cols = src.shape
    dst3 = B.rows3(dst)

    def rtile(ri: Any, r0: Any, rs: int) -> None:
        def cchunk(ci: Any, c0: Any, cs: int) -> None:
            nat = nl.ndarray((B.P, cs), dtype=src.dtype, buffer=nl.sbuf)
            i_p = nl.arange(rs)[:, None]
            i_f = nl.arange(cs)[None, :]
            nat[0:rs, 0:cs] = nl.load(src[r0 + i_p, c0 + i_f])
            B.transpose_store(nat, rs, cs, dst, dst3, ci * (B.X_COLS // B.P), r0)

        B.for_spans(cols, B.X_COLS, cchunk)

    B.for_spans(rows, B.P, rtile)


@nki.jit
def xuv_sequential(x: Any, u: Any, v: Any) -> Any:
    """The "NKI XUV" baseline: ``x @ u`` then ``@ v`` as two :func:`~kernels.matmul.matmul_optimized`
    passes with every intermediate through HBM, plus the transposes they need (x -> x^T before the
    first pass, XU -> (XU)^T before the second).  -> [S, N] in the input dtype."""
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
