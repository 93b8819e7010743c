"""SwiGLU MLP kernels in NKI Beta 2: the fused SVD MLP (NeuronMLP) and the uncompressed dense baseline.

The Beta-2 versions of :mod:`devkit.kernels.mlp` (same passes, blocks and plans; read that module's docstring):
gate/up writes ``act^T`` [I, S] to an HBM scratch tensor with ``silu(gate)`` parked in fp32 SBUF between the
gate and up contractions, and the down projection consumes ``act^T`` without a transpose.  Under LNC 2,
``svd_mlp_b2``'s programs split the tokens of both passes the same way (each reads back only the
``act^T`` columns it wrote); ``dense_mlp_b2`` is a baseline for one core.
"""

from __future__ import annotations

from typing import Any

import nki
import nki.isa as nisa
import nki.language as nl

from devkit.kernels import plans, resolve
from devkit.kernels.beta2 import _blocks as B
from devkit.kernels.beta2.matmul import matmul_into, matmul_plan_for
from devkit.kernels.beta2.neuronmm import (
    build_panel,
    my_tokens,
    natural_sbuf_epilogue,
    strip_epilogue,
    xuv_into,
)
from devkit.kernels.layout import col_tiles_of, moving_layout, row_tiles_of, stationary_layout


def _store_act_rows(act_t: Any, o: Any, r0: int, gs: int, c0: int, width: int) -> None:
    nisa.dma_copy(dst=act_t[r0 : r0 + gs, c0 : c0 + width], src=o[0:gs, 0:width])


def swiglu_T(
    act_t: Any,
    gate_pairs: B.Pairs,
    up_pairs: B.Pairs,
    k_gate: int,
    k_up: int,
    tok0: int,
    b: int,
    chunk_tiles: int,
    banks: int,
) -> None:
    """``act_t[:, tok0 : tok0+b] = (silu(gate) * up)^T`` for one token block, group by group (see
    :func:`devkit.kernels.mlp.swiglu_T`): prefill blocks use weights-stationary groups stored straight
    into ``act_t``; decode blocks use weights-moving groups transposed on the TensorE before the store."""
    dt = act_t.dtype
    if b > plans.DECODE_MAX_TOKENS:
        groups, height = stationary_layout(b, banks)
        for tok_tiles in groups:
            base = tok_tiles[0][0]
            width = tok_tiles[-1][0] + tok_tiles[-1][1] - base
            for _, r0, wsz in B.spans(act_t.shape[0], height):
                rows = row_tiles_of(wsz)
                gate = nl.ndarray((B.P, len(rows), width), dtype=nl.float32, buffer=nl.sbuf)
                ps = B.stationary_group(gate_pairs, tok_tiles, 0, r0, wsz, k_gate, chunk_tiles)
                for g, (_, gs) in enumerate(rows):
                    for t, (to, ts) in enumerate(tok_tiles):
                        a = to - base
                        nisa.activation(
                            dst=gate[0:gs, g, a : a + ts], op=nl.silu, data=ps[0][g][t][0:gs, 0:ts]
                        )
                del ps
                ps = B.stationary_group(up_pairs, tok_tiles, 0, r0, wsz, k_up, chunk_tiles)
                for g, (go, gs) in enumerate(rows):
                    o = nl.ndarray((B.P, width), dtype=dt, buffer=nl.sbuf)
                    for t, (to, ts) in enumerate(tok_tiles):
                        a = to - base
                        nisa.tensor_tensor(
                            dst=o[0:gs, a : a + ts],
                            data1=gate[0:gs, g, a : a + ts],
                            data2=ps[0][g][t][0:gs, 0:ts],
                            op=nl.multiply,
                        )
                    _store_act_rows(act_t, o, r0 + go, gs, tok0 + base, width)
                del ps
        return

    groups, width = moving_layout(b, banks)
    for tok_tiles in groups:
        for ci, c0, wsz in B.spans(act_t.shape[0], width):
            cols = col_tiles_of(wsz)
            gate = nl.ndarray((B.P, wsz), dtype=nl.float32, buffer=nl.sbuf)
            ps = B.moving_group(gate_pairs, tok_tiles, 0, c0, wsz, k_gate, chunk_tiles)
            for m, (mo, ms) in enumerate(tok_tiles):
                for n, (no, ns) in enumerate(cols):
                    nisa.activation(
                        dst=gate[mo : mo + ms, no : no + ns], op=nl.silu, data=ps[0][m][n][0:ms, 0:ns]
                    )
            del ps
            nat = nl.ndarray((B.P, wsz), dtype=dt, buffer=nl.sbuf)
            ps = B.moving_group(up_pairs, tok_tiles, 0, c0, wsz, k_up, chunk_tiles)
            for m, (mo, ms) in enumerate(tok_tiles):
                for n, (no, ns) in enumerate(cols):
                    nisa.tensor_tensor(
                        dst=nat[mo : mo + ms, no : no + ns],
                        data1=gate[mo : mo + ms, no : no + ns],
                        data2=ps[0][m][n][0:ms, 0:ns],
                        op=nl.multiply,
                    )
            del ps
            B.transpose_store(nat, b, wsz, act_t, ci * (width // B.P), tok0)


def _strips(x: Any, us: list[Any], tok0: int, b: int, bl: dict[str, int]) -> list[Any]:
    """``(X·U)^T`` strips [128, ceil(r/128), b] for each U (one shared X^T panel per sub-block)."""
    h = x.shape[1]
    strips = [nl.ndarray((B.P, B.cdiv(u.shape[1], B.P), b), dtype=x.dtype, buffer=nl.sbuf) for u in us]
    if b <= plans.DECODE_MAX_TOKENS:
        panel = build_panel(x, True, tok0, b, h)
        for u, strip in zip(us, strips):
            xu = nl.ndarray((B.P, u.shape[1]), dtype=x.dtype, buffer=nl.sbuf)
            B.weights_moving(
                [(panel, u)],
                b,
                0,
                u.shape[1],
                h,
                bl["u_chunk_tiles"],
                bl["psum_banks"],
                natural_sbuf_epilogue(xu),
            )
            B.transpose_into_panel(xu, b, u.shape[1], strip)
        return strips
    for _, off, size in B.spans(b, min(bl["stage1_tokens"], b)):
        _strips_sub_block(x, us, strips, tok0, off, size, bl)
    return strips


def _strips_sub_block(
    x: Any, us: list[Any], strips: list[Any], tok0: int, off: int, size: int, bl: dict[str, int]
) -> None:
    """One stage-1 sub-block of every strip from one shared X^T panel (which dies on return)."""
    h = x.shape[1]
    panel = build_panel(x, True, tok0 + off, size, h)
    for u, strip in zip(us, strips):
        B.weights_stationary(
            [(panel, u)],
            size,
            0,
            u.shape[1],
            h,
            bl["u_chunk_tiles"],
            bl["psum_banks"],
            strip_epilogue(strip, off),
        )


def gate_up_into(
    act_t: Any, x: Any, ug: Any, vg: Any, uu: Any, vu: Any, bl: dict[str, int], first: int, tokens: int
) -> None:
    """Pass 1 of :func:`svd_mlp_b2` for tokens ``[first, first + tokens)``:
    ``act_t[I, S] = (silu(x·Ug·Vg) * (x·Uu·Vu))^T``."""
    for _, off, b in B.spans(tokens, bl["block_tokens"]):
        _gate_up_block(act_t, x, ug, vg, uu, vu, bl, first + off, b)


def _gate_up_block(
    act_t: Any, x: Any, ug: Any, vg: Any, uu: Any, vu: Any, bl: dict[str, int], tok0: int, b: int
) -> None:
    """One token block of pass 1 (its strips die on return, before the next block's are allocated)."""
    sg, su = _strips(x, [ug, uu], tok0, b, bl)
    swiglu_T(
        act_t,
        [(sg, vg)],
        [(su, vu)],
        ug.shape[1],
        uu.shape[1],
        tok0,
        b,
        bl["v_chunk_tiles"],
        bl["psum_banks"],
    )


@nki.jit
def svd_mlp_b2(
    x: Any,
    u_gate: Any,
    v_gate: Any,
    u_up: Any,
    v_up: Any,
    u_down: Any,
    v_down: Any,
    block_tokens: int | None = None,
    stage1_tokens: int | None = None,
    u_chunk_tiles: int | None = None,
    v_chunk_tiles: int | None = None,
    psum_banks: int | None = None,
) -> Any:
    """SVD-compressed SwiGLU MLP -> [S, H] in the input dtype (LNC 1 or 2)."""
    s_tok, h = x.shape
    first, tokens, share = my_tokens(s_tok)
    p1, p2 = resolve.svd_mlp_plans(
        x,
        u_gate,
        v_gate,
        u_up,
        v_up,
        u_down,
        v_down,
        resolve.block_args(block_tokens, stage1_tokens, u_chunk_tiles, v_chunk_tiles, psum_banks),
        B.usable_sbuf_bytes(),
        B.target_name(),
        share,
    )
    out = nl.ndarray((s_tok, h), dtype=x.dtype, buffer=nl.shared_hbm)
    act_t = nl.ndarray((v_gate.shape[1], s_tok), dtype=x.dtype, buffer=nl.hbm)
    gate_up_into(act_t, x, u_gate, v_gate, u_up, v_up, p1.blocks, first, tokens)
    xuv_into(out, act_t, u_down, v_down, p2, False, False, first, tokens)
    return out


def _dense_gate_up_block(
    act_t: Any, x: Any, w_gate: Any, w_up: Any, tok0: int, b: int, chunk_tiles: int, banks: int
) -> None:
    """One token block of the dense gate/up pass (its X^T panel dies on return)."""
    h = x.shape[1]
    panel = build_panel(x, True, tok0, b, h)
    swiglu_T(act_t, [(panel, w_gate)], [(panel, w_up)], h, h, tok0, b, chunk_tiles, banks)


@nki.jit
def dense_mlp_b2(
    x: Any,
    w_gate: Any,
    w_up: Any,
    w_down: Any,
    block_tokens: int | None = None,
    k_chunk_tiles: int | None = None,
    psum_banks: int | None = None,
) -> Any:
    """Uncompressed SwiGLU MLP ``(silu(x·Wg) * (x·Wu)) · Wd`` -> [S, H] in the input dtype (one core)."""
    plan = resolve.dense_mlp_plan(
        x,
        w_gate,
        w_up,
        w_down,
        dict(block_tokens=block_tokens, k_chunk_tiles=k_chunk_tiles, psum_banks=psum_banks),
        B.usable_sbuf_bytes(),
        B.target_name(),
    )
    bl = plan.blocks
    s_tok, h = x.shape
    out = nl.ndarray((s_tok, h), dtype=x.dtype, buffer=nl.shared_hbm)
    act_t = nl.ndarray((w_gate.shape[1], s_tok), dtype=x.dtype, buffer=nl.hbm)
    c, banks = bl["k_chunk_tiles"], bl["psum_banks"]
    for _, tok0, b in B.spans(s_tok, bl["block_tokens"]):
        _dense_gate_up_block(act_t, x, w_gate, w_up, tok0, b, c, banks)
    down = matmul_plan_for(act_t, w_down, {"k_chunk_tiles": c, "psum_banks": banks}, "dense_mlp")
    matmul_into(out, act_t, w_down, down)
    return out
