"""Block plans of a kernel call from its arguments, shared by the Beta-1 and Beta-2 kernels (pure Python).

Each kernel's prologue checks its arguments and resolves its blocks here: the shared tuning table entry of
the kernel's family (:mod:`devkit.kernels.tuning`) under the explicit keyword arguments, shrunk to fit the
target's usable SBUF (:mod:`devkit.kernels.plans`).  The generation-specific part -- how a kernel learns its
target and usable SBUF bytes per partition -- is passed in (``usable``, ``target``), so both generations of a
kernel resolve the same blocks for the same call.  Arguments only need ``.shape`` and ``.dtype``.
"""

from __future__ import annotations

from typing import Any

from devkit.dtype_names import itemsize
from devkit.kernels import plans, tuning


def check_same_dtype(*tensors: Any) -> Any:
    """The common dtype of the kernel inputs (mixed dtypes are rejected: TensorE needs matching operands);
    every input must be a 2-D matrix."""
    for i, t in enumerate(tensors):
        if len(t.shape) != 2:
            raise plans.BlockError(
                f"input {i + 1} has shape {list(t.shape)}; these kernels take 2-D matrices, e.g. [rows, cols]"
            )
    dt = tensors[0].dtype
    for t in tensors[1:]:
        if t.dtype != dt:
            raise plans.BlockError(f"all inputs must share one dtype, got {dt} and {t.dtype}")
    return dt


def given(blocks: dict[str, Any]) -> dict[str, Any]:
    """The explicitly passed blocks (keyword arguments left at ``None`` take defaults)."""
    return {k: v for k, v in blocks.items() if v is not None}


def block_args(
    block_tokens: int | None,
    stage1_tokens: int | None,
    u_chunk_tiles: int | None,
    v_chunk_tiles: int | None,
    psum_banks: int | None,
) -> dict[str, Any]:
    """The block keyword arguments of the fused kernels as the dict the plan resolver takes."""
    return dict(
        block_tokens=block_tokens,
        stage1_tokens=stage1_tokens,
        u_chunk_tiles=u_chunk_tiles,
        v_chunk_tiles=v_chunk_tiles,
        psum_banks=psum_banks,
    )


def program_share(s_tok: int, programs: int, program: int) -> tuple[int, int, int]:
    """``(first token, tokens, tokens per program)`` of ``program`` when ``programs`` cores split ``s_tok``
    tokens: contiguous shares, a multiple of 128 tokens each but the last (which may be short or empty)."""
    if programs <= 1:
        return 0, s_tok, s_tok
    share = plans.cdiv(plans.cdiv(s_tok, programs), plans.P) * plans.P
    start = min(program * share, s_tok)
    return start, min(share, s_tok - start), min(share, s_tok)


def matmul_dims(lhsT: Any, rhs: Any) -> tuple[int, int, int]:
    """``(K, M, N)`` of ``lhsT`` [K, M] and ``rhs`` [K, N]."""
    for name, t in (("lhsT", lhsT), ("rhs", rhs)):
        if len(t.shape) != 2:
            raise plans.BlockError(f"{name} has shape {list(t.shape)}; expected a 2-D matrix [K, M] / [K, N]")
    k, m = lhsT.shape
    k2, n = rhs.shape
    if k != k2:
        raise plans.BlockError(
            f"lhsT {list(lhsT.shape)} and rhs {list(rhs.shape)} must share the contraction dimension (rows)"
        )
    return int(k), int(m), int(n)


def matmul_plan(
    lhsT: Any, rhs: Any, blocks: dict[str, Any], usable: int, target: str, kernel: str = "matmul_optimized"
) -> plans.Plan:
    """Resolved ``matmul_optimized`` blocks of one call (tuning defaults + overrides, shrunk to fit)."""
    k, m, n = matmul_dims(lhsT, rhs)
    defaults = tuning.blocks_for(
        "matmul_optimized", {"K": k, "M": m, "N": n}, tuning.dtype_name(lhsT.dtype), target
    )
    return plans.resolve_matmul(k, m, n, itemsize(lhsT.dtype), usable, defaults, given(blocks), kernel)


def fixed_panel_dims(
    lhsT: Any, rhs: Any, cols: int, rhs_cols: int, usable: int, kernel: str, instead: str
) -> tuple[int, int, int]:
    """``(K, M, N)`` of a fixed-block matmul holding a full-K ``cols``-wide lhsT panel
    (:func:`devkit.kernels.plans.fixed_panel_bytes`); a BlockError naming ``instead`` when it cannot fit
    ``usable`` bytes per partition."""
    k, m, n = matmul_dims(lhsT, rhs)
    need = plans.fixed_panel_bytes(k, cols, rhs_cols, itemsize(lhsT.dtype))
    if need > usable:
        raise plans.BlockError(
            f"{kernel}: SBUF limit: needs {need} bytes per partition (a full-K lhsT panel), "
            f"only {usable} usable; use {instead} for this K"
        )
    return k, m, n


def xuv_dims(name: str, x_shape: tuple[int, ...], u: Any, v: Any, x_rows: bool) -> tuple[int, int, int, int]:
    """``(S, H, r, N)`` of a fused X.U.V call (``x`` [S, H], or ``xT`` [H, S] when not ``x_rows``)."""
    s_tok, h = x_shape if x_rows else (x_shape[1], x_shape[0])
    hu, r = u.shape
    rv, n = v.shape
    if hu != h or rv != r:
        xs = "x [S, H]" if x_rows else "xT [H, S]"
        raise plans.BlockError(
            f"{name}: shape mismatch: {xs} = {list(x_shape)}, u [H, r] = {list(u.shape)}, "
            f"v [r, N] = {list(v.shape)}"
        )
    return int(s_tok), int(h), int(r), int(n)


def xuv_plan(
    family: str,
    x: Any,
    u: Any,
    v: Any,
    blocks: dict[str, Any],
    out: str,
    x_rows: bool,
    usable: int,
    target: str,
    tokens: int | None = None,
) -> plans.Plan:
    """Resolved blocks of a fused X.U.V call (``family``: the Beta-1 name, which keys the tuning table;
    ``tokens``: the tokens this core computes when a logical-core launch splits S, default all of S)."""
    check_same_dtype(x, u, v)
    s_tok, h, r, n = xuv_dims(family, tuple(x.shape), u, v, x_rows)
    s_tok = s_tok if tokens is None else max(1, tokens)
    defaults = tuning.blocks_for(
        family, {"S": s_tok, "H": h, "r": r, "N": n}, tuning.dtype_name(x.dtype), target
    )
    return plans.resolve_xuv(
        s_tok, h, r, n, itemsize(x.dtype), usable, defaults, given(blocks), family, out, x_rows
    )


def svd_mlp_plans(
    x: Any,
    ug: Any,
    vg: Any,
    uu: Any,
    vu: Any,
    ud: Any,
    vd: Any,
    blocks: dict[str, Any],
    usable: int,
    target: str,
    tokens: int | None = None,
) -> tuple[plans.Plan, plans.Plan]:
    """Resolved plans of the gate/up and down passes of the SVD MLP (one set of block values; ``tokens``:
    the tokens this core computes, default all of S)."""
    check_same_dtype(x, ug, vg, uu, vu, ud, vd)
    s_tok, h = x.shape
    rg, ru, rd = ug.shape[1], uu.shape[1], ud.shape[1]
    i_dim = vg.shape[1]
    expect = {
        "u_gate": (h, rg),
        "v_gate": (rg, i_dim),
        "u_up": (h, ru),
        "v_up": (ru, i_dim),
        "u_down": (i_dim, rd),
        "v_down": (rd, h),
    }
    for (name, want), t in zip(expect.items(), (ug, vg, uu, vu, ud, vd)):
        if tuple(t.shape) != want:
            raise plans.BlockError(
                f"svd_mlp: {name} has shape {list(t.shape)}, expected {list(want)} "
                f"(x [S, H] = {list(x.shape)}, ranks gate {rg} up {ru} down {rd}, I {i_dim})"
            )
    s_tok = s_tok if tokens is None else max(1, tokens)
    shape = {"S": s_tok, "H": h, "r": max(rg, ru, rd), "I": i_dim}
    defaults = tuning.blocks_for("svd_mlp", shape, tuning.dtype_name(x.dtype), target)
    return plans.resolve_svd_mlp(
        s_tok, h, max(rg, ru), rd, i_dim, itemsize(x.dtype), usable, defaults, given(blocks)
    )


def dense_mlp_plan(
    x: Any, wg: Any, wu: Any, wd: Any, blocks: dict[str, Any], usable: int, target: str
) -> plans.Plan:
    """Resolved blocks of the dense SwiGLU MLP's gate/up pass."""
    check_same_dtype(x, wg, wu, wd)
    s_tok, h = x.shape
    i_dim = wg.shape[1]
    for name, t, want in (("w_gate", wg, (h, i_dim)), ("w_up", wu, (h, i_dim)), ("w_down", wd, (i_dim, h))):
        if tuple(t.shape) != want:
            raise plans.BlockError(f"dense_mlp: {name} has shape {list(t.shape)}, expected {list(want)}")
    defaults = tuning.blocks_for(
        "dense_mlp", {"S": s_tok, "H": h, "I": i_dim}, tuning.dtype_name(x.dtype), target
    )
    return plans.resolve_dense_mlp(s_tok, h, i_dim, itemsize(x.dtype), usable, defaults, given(blocks))
