"""SwiGLU MLP kernels: the fused SVD MLP (NeuronMLP) and the uncompressed dense baseline.

``svd_mlp(x, u_gate, v_gate, u_up, v_up, u_down, v_down)`` -> [S, H]
    ``= (silu(x·Ug·Vg) * (x·Uu·Vu)) · Ud · Vd`` with ``x`` [S, H], ``Ug``/``Uu`` [H, r], ``Vg``/``Vu``
    [r, I], ``Ud`` [I, r_d], ``Vd`` [r_d, H].  Two passes inside one ``@nki.jit``:

    1. gate/up: per token block, the ``(X·Ug)^T`` and ``(X·Uu)^T`` strips are cached in SBUF (one
       shared ``X^T`` panel); then, per PSUM group of output rows, V_gate streams as the *stationary*
       operand against the gate strip (``[128 i, 512 tok]`` banks, whole contraction in PSUM),
       ``silu(gate)`` is parked in SBUF (fp32), V_up streams against the up strip and the VectorE
       multiplies; the activation is written **transposed**, ``act^T`` [I, S], to an HBM scratch
       tensor (:func:`swiglu_T`).  Decode blocks (<= 128 tokens) use weights as the moving operand
       and transpose the activation tile on the TensorE before the store.
    2. down: ``act^T`` is already contraction-major, so it is the ``xT`` input of the fused
       ``xtuv`` path (:func:`devkit.kernels.neuronmm.xuv_into` with ``x_rows=False``): no transpose at all.

    Gate and up ranks may differ.

``dense_mlp(x, w_gate, w_up, w_down)`` -> [S, H]: the same two passes with dense weights
    (``W_gate``/``W_up`` [H, I] stationary against the ``X^T`` panel, SwiGLU into ``act^T``; then
    :func:`devkit.kernels.matmul.matmul_into` with ``lhsT = act^T``).

Blocks: see :mod:`devkit.kernels.neuronmm` (svd_mlp) and :mod:`devkit.kernels.plans` (``DENSE_MLP_BLOCKS``).
"""

from __future__ import annotations

from typing import Any

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl

from devkit.kernels import _blocks as B
from devkit.kernels import plans, resolve, tuning
from devkit.kernels.matmul import matmul_into, matmul_plan_for
from devkit.kernels.neuronmm import block_args, build_panel, natural_sbuf_epilogue, strip_epilogue, xuv_into


def swiglu_T(
    act_t: Any,
    act_t3: Any,
    gate_pairs: list,
    up_pairs: list,
    k_gate: int,
    k_up: int,
    tok0: Any,
    b: int,
    chunk_tiles: int,
    banks: int,
) -> None:
    """``act_t[:, tok0 : tok0+b] = (silu(gate) * up)^T`` for one token block, group by group.

    ``gate_pairs`` / ``up_pairs``: ``[(panel, W, W3)]`` whose products are the gate and up
    pre-activations (contractions ``k_gate`` / ``k_up``).  For each PSUM group the gate contraction runs
    first and ``silu(gate)`` (ScalarE, straight from PSUM) is parked in SBUF in fp32; then the up
    contraction runs with all banks and the VectorE multiplies ``silu(gate)`` by the up banks.  Each
    weight stream therefore gets every PSUM bank (wide weight DMAs) and the ranks of gate and up may
    differ.  Prefill blocks (> 128 tokens) use weights-stationary groups ([i, tok] banks, stored straight
    into ``act_t``); decode blocks use weights-moving groups ([tok, i] banks) and transpose the
    activation on the TensorE before the store.
    """
    dt = act_t.dtype
    if b > plans.DECODE_MAX_TOKENS:
        groups, height = B.stationary_layout(b, banks)
        for tok_tiles in groups:
            base = tok_tiles[0][0]
            width = tok_tiles[-1][0] + tok_tiles[-1][1] - base

            def row_group(
                ri: Any,
                r0: Any,
                wsz: int,
                tok_tiles: B.Tiles = tok_tiles,
                base: int = base,
                width: int = width,
            ) -> None:
                rows = B.row_tiles_of(wsz)
                gate = nl.ndarray((B.P, len(rows), width), dtype=nl.float32, buffer=nl.sbuf)
                for _ in B.scope():
                    ps = B.stationary_group(gate_pairs, tok_tiles, 0, r0, wsz, k_gate, chunk_tiles)
                    for g, (_, gs) in enumerate(rows):
                        for t, (to, ts) in enumerate(tok_tiles):
                            gate[0:gs, g, to - base : to - base + ts] = nisa.activation(
                                op=nl.silu, data=ps[0][g][t][0:gs, 0:ts], dtype=nl.float32
                            )
                for _ in B.scope():
                    ps = B.stationary_group(up_pairs, tok_tiles, 0, r0, wsz, k_up, chunk_tiles)
                    for g, (go, gs) in enumerate(rows):
                        for _ in B.scope():
                            o = nl.ndarray((B.P, width), dtype=dt, buffer=nl.sbuf)
                            for t, (to, ts) in enumerate(tok_tiles):
                                o[0:gs, to - base : to - base + ts] = nl.multiply(
                                    gate[0:gs, g, to - base : to - base + ts],
                                    ps[0][g][t][0:gs, 0:ts],
                                    dtype=dt,
                                )
                            i_p = nl.arange(gs)[:, None]
                            i_f = nl.arange(width)[None, :]
                            nl.store(act_t[r0 + go + i_p, tok0 + base + i_f], value=o[0:gs, 0:width])

            B.for_spans(act_t.shape[0], height, row_group)
        return

    groups, width = B.moving_layout(b, banks)
    for tok_tiles in groups:

        def col_group(ci: Any, c0: Any, wsz: int, tok_tiles: B.Tiles = tok_tiles) -> None:
            cols = B.col_tiles_of(wsz)
            gate = nl.ndarray((B.P, wsz), dtype=nl.float32, buffer=nl.sbuf)
            for _ in B.scope():
                ps = B.moving_group(gate_pairs, tok_tiles, 0, c0, wsz, k_gate, chunk_tiles)
                for m, (mo, ms) in enumerate(tok_tiles):
                    for n, (no, ns) in enumerate(cols):
                        gate[mo : mo + ms, no : no + ns] = nisa.activation(
                            op=nl.silu, data=ps[0][m][n][0:ms, 0:ns], dtype=nl.float32
                        )
            nat = nl.ndarray((B.P, wsz), dtype=dt, buffer=nl.sbuf)
            for _ in B.scope():
                ps = B.moving_group(up_pairs, tok_tiles, 0, c0, wsz, k_up, chunk_tiles)
                for m, (mo, ms) in enumerate(tok_tiles):
                    for n, (no, ns) in enumerate(cols):
                        nat[mo : mo + ms, no : no + ns] = nl.multiply(
                            gate[mo : mo + ms, no : no + ns], ps[0][m][n][0:ms, 0:ns], dtype=dt
                        )
            B.transpose_store(nat, b, wsz, act_t, act_t3, ci * (width // B.P), tok0)

        B.for_spans(act_t.shape[0], width, col_group)


def _strips(x: Any, us: list[Any], tok0: Any, b: int, bl: dict[str, int]) -> list[Any]:
    """``(X·U)^T`` strips [128, ceil(r/128), b] for each U (one shared X^T panel per sub-block)."""
    h = x.shape[1]
    dt = x.dtype
    strips = [nl.ndarray((B.P, B.cdiv(u.shape[1], B.P), b), dtype=dt, buffer=nl.sbuf) for u in us]
    if b <= plans.DECODE_MAX_TOKENS:
        for _ in B.scope():
            panel = build_panel(x, None, True, tok0, b, h)
            for u, strip in zip(us, strips):
                for _ in B.scope():
                    xu = nl.ndarray((B.P, u.shape[1]), dtype=dt, buffer=nl.sbuf)
                    B.weights_moving(
                        [(panel, u, B.rows3(u))],
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

    def sub_block(si: Any, off: Any, size: int) -> None:
        panel = build_panel(x, None, True, tok0 + off, size, h)
        for u, strip in zip(us, strips):
            B.weights_stationary(
                [(panel, u, B.rows3(u))],
                size,
                0,
                u.shape[1],
                h,
                bl["u_chunk_tiles"],
                bl["psum_banks"],
                strip_epilogue(strip, off),
            )

    B.for_spans(b, min(bl["stage1_tokens"], b), sub_block)
    return strips


def gate_up_into(act_t: Any, x: Any, ug: Any, vg: Any, uu: Any, vu: Any, bl: dict[str, int]) -> None:
    """Pass 1 of :func:`svd_mlp`: ``act_t[I, S] = (silu(x·Ug·Vg) * (x·Uu·Vu))^T``."""
    act_t3 = B.rows3(act_t)
    vg3, vu3 = B.rows3(vg), B.rows3(vu)

    def block(bi: Any, tok0: Any, b: int) -> None:
        sg, su = _strips(x, [ug, uu], tok0, b, bl)
        swiglu_T(
            act_t,
            act_t3,
            [(sg, vg, vg3)],
            [(su, vu, vu3)],
            ug.shape[1],
            uu.shape[1],
            tok0,
            b,
            bl["v_chunk_tiles"],
            bl["psum_banks"],
        )

    B.for_spans(x.shape[0], bl["block_tokens"], block)


def svd_mlp_plans(
    x: Any, ug: Any, vg: Any, uu: Any, vu: Any, ud: Any, vd: Any, blocks: dict[str, Any]
) -> tuple[plans.Plan, plans.Plan]:
    """Resolved plans of the gate/up and down passes of :func:`svd_mlp` (same block values)."""
    return resolve.svd_mlp_plans(
        x, ug, vg, uu, vu, ud, vd, blocks, B.usable_sbuf_bytes(), tuning.target_name()
    )


@nki.jit
def svd_mlp(
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
    """SVD-compressed SwiGLU MLP -> [S, H] in the input dtype (see the module docstring)."""
    p1, p2 = svd_mlp_plans(
        x,
        u_gate,
        v_gate,
        u_up,
        v_up,
        u_down,
        v_down,
        block_args(block_tokens, stage1_tokens, u_chunk_tiles, v_chunk_tiles, psum_banks),
    )
    s_tok, h = x.shape
    i_dim = v_gate.shape[1]
    out = nl.ndarray((s_tok, h), dtype=x.dtype, buffer=nl.shared_hbm)
    act_t = nl.ndarray((i_dim, s_tok), dtype=x.dtype, buffer=nl.hbm)
    gate_up_into(act_t, x, u_gate, v_gate, u_up, v_up, p1.blocks)
    xuv_into(out, act_t, u_down, v_down, p2, x_rows=False, transposed=False)
    return out


def dense_mlp_plan_for(x: Any, wg: Any, wu: Any, wd: Any, blocks: dict[str, Any]) -> plans.Plan:
    return resolve.dense_mlp_plan(x, wg, wu, wd, blocks, B.usable_sbuf_bytes(), tuning.target_name())


@nki.jit
def dense_mlp(
    x: Any,
    w_gate: Any,
    w_up: Any,
    w_down: Any,
    block_tokens: int | None = None,
    k_chunk_tiles: int | None = None,
    psum_banks: int | None = None,
) -> Any:
    """Uncompressed SwiGLU MLP ``(silu(x·Wg) * (x·Wu)) · Wd`` -> [S, H] in the input dtype."""
    plan = dense_mlp_plan_for(
        x,
        w_gate,
        w_up,
        w_down,
        dict(block_tokens=block_tokens, k_chunk_tiles=k_chunk_tiles, psum_banks=psum_banks),
    )
    bl = plan.blocks
    s_tok, h = x.shape
    i_dim = w_gate.shape[1]
    dt = x.dtype
    out = nl.ndarray((s_tok, h), dtype=dt, buffer=nl.shared_hbm)
    act_t = nl.ndarray((i_dim, s_tok), dtype=dt, buffer=nl.hbm)
    act_t3 = B.rows3(act_t)
    wg3, wu3 = B.rows3(w_gate), B.rows3(w_up)
    c, banks = bl["k_chunk_tiles"], bl["psum_banks"]

    def block(bi: Any, tok0: Any, b: int) -> None:
        panel = build_panel(x, None, True, tok0, b, h)
        swiglu_T(act_t, act_t3, [(panel, w_gate, wg3)], [(panel, w_up, wu3)], h, h, tok0, b, c, banks)

    B.for_spans(s_tok, bl["block_tokens"], block)
    down = matmul_plan_for(act_t, w_down, {"k_chunk_tiles": c, "psum_banks": banks}, "dense_mlp")
    matmul_into(out, act_t, w_down, down)
    return out
