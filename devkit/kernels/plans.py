"""Block plans of the kernels: resolved block sizes, SBUF footprint and feasibility (pure Python).

The kernels call these in their Python prologue (before any instruction is issued) and raise
:class:`BlockError` when a block choice breaks a hardware limit; the registry calls the same
functions for ``feasible()`` and ``default_blocks()``, so the rule lives in one place.

Footprints are in **bytes per SBUF partition** (the unit of ``nl.tile_size.total_available_sbuf_size``,
which :func:`usable_sbuf` reads from the target file).  Streamed buffers (weight chunks, staging tiles)
are counted twice: the kernels need at least double buffering to overlap DMA with compute.

Tile geometry (``P``, ``FMAX``, ``PSUM_BANKS``) comes from the target files (:mod:`devkit.targets`);
it is the same on every bundled target, so the default target's values serve every kernel.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from devkit.targets import DEFAULT_TARGET, load_target

_TILE_TARGET = load_target(DEFAULT_TARGET)
P = _TILE_TARGET.tile.pmax  # partitions per tile (rows of a contraction tile)
FMAX = _TILE_TARGET.tile.gemm_moving_fmax  # columns of a moving tile = fp32 columns of one PSUM bank
PSUM_BANKS = _TILE_TARGET.psum.banks
X_COLS = 2048  # columns of X staged per transpose chunk (a kernel choice, not a hardware limit)
DECODE_MAX_TOKENS = 128  # token blocks this small take the weights-moving (decode) path


def usable_sbuf(target: str) -> int:
    """Usable SBUF bytes per partition on ``target`` (``nl.tile_size.total_available_sbuf_size``);
    an unknown target name raises :class:`devkit.targets.TargetError` naming the valid ones."""
    return load_target(target).sbuf.usable_bytes_per_partition


class BlockError(ValueError):
    """A block size or shape the kernel cannot run with; the message names the limit."""


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def fixed_panel_bytes(k: int, cols: int, rhs_cols: int, itemsize: int) -> int:
    """SBUF bytes per partition of the fixed-block tutorial matmuls (hoisted, blocked): a full-K lhsT panel
    ``cols`` wide plus double-buffered rhs staging (``2 x 2 x rhs_cols`` elements)."""
    return cdiv(k, P) * cols * itemsize + 2 * 2 * rhs_cols * itemsize


@dataclass(frozen=True)
class Plan:
    """Resolved blocks of one kernel call and the SBUF bytes per partition they need."""

    kernel: str
    blocks: dict[str, int]
    footprint: int
    usable: int
    parts: dict[str, int] = field(default_factory=dict)
    mode: str = ""

    @property
    def fits(self) -> bool:
        return self.footprint <= self.usable

    def sbuf_message(self) -> str:
        detail = ", ".join(f"{k} {v}" for k, v in self.parts.items())
        return (
            f"{self.kernel}: SBUF limit: blocks {self.blocks} need {self.footprint} bytes per partition "
            f"({detail}) but only {self.usable} are usable per partition "
            "(nl.tile_size.total_available_sbuf_size); use smaller blocks"
        )


def _ints(kernel: str, blocks: Mapping[str, Any], names: tuple[str, ...]) -> dict[str, int]:
    out = {}
    for n in names:
        v = blocks[n]
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise BlockError(f"{kernel}: block '{n}' must be a positive int, got {v!r}")
        out[n] = int(v)
    unknown = set(blocks) - set(names)
    if unknown:
        raise BlockError(f"{kernel}: unknown block argument(s) {sorted(unknown)}; valid: {list(names)}")
    return out


def _check_banks(kernel: str, banks: int, pairs: int = 1) -> None:
    if banks > PSUM_BANKS:
        raise BlockError(
            f"{kernel}: PSUM limit: psum_banks={banks} but a NeuronCore has {PSUM_BANKS} PSUM banks "
            "(2 KiB per partition each)"
        )
    if banks < pairs:
        raise BlockError(
            f"{kernel}: PSUM limit: psum_banks={banks} is fewer than the {pairs} accumulators "
            "that must be live together"
        )


def _halve_until_fits(
    blocks: dict[str, Any],
    overrides: Mapping[str, Any],
    floors: Mapping[str, int],
    plan_of: Callable[[dict[str, Any]], Plan],
) -> Plan:
    """``plan_of(blocks)``, shrunk to fit: each block of ``floors`` in turn that the caller did not set
    (not in ``overrides``) is halved, not below its floor, until the plan fits (``blocks`` is updated)."""
    plan = plan_of(blocks)
    for name, floor in floors.items():
        while not plan.fits and name not in overrides and blocks[name] > floor:
            blocks[name] = max(floor, blocks[name] // 2)
            plan = plan_of(blocks)
    return plan


# --------------------------------------------------------------------------------------------------
# dense matmul

MATMUL_BLOCKS = ("block_m", "k_chunk_tiles", "psum_banks")
MATMUL_FALLBACK = {"block_m": 1024, "k_chunk_tiles": 8, "psum_banks": 8}


def matmul_plan(
    k: int,
    m: int,
    n: int,
    itemsize: int,
    blocks: Mapping[str, Any],
    usable: int,
    kernel: str = "matmul_optimized",
) -> Plan:
    """Plan of :func:`devkit.kernels.matmul.matmul_optimized` (lhsT [k, m], rhs [k, n])."""
    b = _ints(kernel, blocks, MATMUL_BLOCKS)
    _check_banks(kernel, b["psum_banks"])
    s = itemsize
    bm = min(b["block_m"], m)
    tm = min(cdiv(bm, P), b["psum_banks"])
    tn = max(1, b["psum_banks"] // tm)
    w = min(tn * FMAX, n)
    kt = cdiv(k, P)
    c = min(b["k_chunk_tiles"], kt)
    chunk = c * w * s
    staging = w * s
    resident = {"panel": kt * bm * s, "rhs_chunks": 2 * chunk, "staging": 2 * staging}
    fp = sum(resident.values())
    if fp <= usable:
        return Plan(kernel, b, fp, usable, resident, "panel")
    stream = {"lhsT_chunks": 2 * c * bm * s, "rhs_chunks": 2 * chunk, "staging": 2 * staging}
    return Plan(kernel, b, sum(stream.values()), usable, stream, "stream")


def resolve_matmul(
    k: int,
    m: int,
    n: int,
    itemsize: int,
    usable: int,
    defaults: Mapping[str, Any],
    overrides: Mapping[str, Any],
    kernel: str = "matmul_optimized",
) -> Plan:
    """Merge fallback < tuning defaults < explicit overrides; shrink defaulted sizes that do not fit."""
    blocks = {**MATMUL_FALLBACK, **defaults, **overrides}
    plan = _halve_until_fits(
        blocks,
        overrides,
        {"k_chunk_tiles": 1, "block_m": P},
        lambda b: matmul_plan(k, m, n, itemsize, b, usable, kernel),
    )
    if plan.mode == "panel" and "block_m" not in overrides:
        # prefer the widest resident panel that fits (fewer rhs re-streams)
        while blocks["block_m"] < min(m, P * plan.blocks["psum_banks"]):
            trial = {**blocks, "block_m": blocks["block_m"] + P}
            tp = matmul_plan(k, m, n, itemsize, trial, usable, kernel)
            if not (tp.fits and tp.mode == "panel"):
                break
            blocks, plan = trial, tp
    if not plan.fits:
        raise BlockError(plan.sbuf_message())
    return plan


# --------------------------------------------------------------------------------------------------
# fused X.U.V

XUV_BLOCKS = ("block_tokens", "stage1_tokens", "u_chunk_tiles", "v_chunk_tiles", "psum_banks")
XUV_FALLBACK = {
    "block_tokens": 1024,
    "stage1_tokens": 1024,
    "u_chunk_tiles": 8,
    "v_chunk_tiles": 8,
    "psum_banks": 8,
}


def _xuv_block_parts(
    b: int, h: int, r: int, n: int, s: int, bl: Mapping[str, int], out: str, x_rows: bool, pairs: int
) -> tuple[dict[str, int], dict[str, int]]:
    """(stage 1 parts, stage 2 parts) for one token block of ``b`` tokens.

    ``pairs`` strips share one X^T panel (2 for the SVD MLP's gate and up); weight streams run one
    at a time with every PSUM bank.  ``out``: "natural", "transposed" or "swiglu" (the MLP's gate/up
    epilogue: silu(gate) parked in fp32 SBUF, the activation stored transposed).
    """
    banks = bl["psum_banks"]
    ht, rt = cdiv(h, P), cdiv(r, P)
    c1, c2 = min(bl["u_chunk_tiles"], ht), min(bl["v_chunk_tiles"], rt)
    xstage = min(h, X_COLS) * s if x_rows else 0
    strips = pairs * rt * b * s
    if b <= DECODE_MAX_TOKENS:
        w1 = min(banks * FMAX, r)
        w2 = min(banks * FMAX, n)
        s1 = {"strips": strips, "x_panel": ht * b * s, "stream": max(2 * xstage, r * s + 2 * c1 * w1 * s)}
        s2 = {"strips": strips, "v_chunks": 2 * c2 * w2 * s, "staging": 2 * w2 * s}
        if out != "natural":
            s2["transpose_staging"] = 2 * min(32, cdiv(n, P)) * b * s
        if out == "swiglu":
            s2["gate"] = w2 * 4
        return s1, s2
    b1 = min(bl["stage1_tokens"], b)
    tt1 = min(cdiv(b1, FMAX), banks)
    w1 = min(max(1, banks // tt1) * P, r)
    s1 = {"strips": strips, "x_panel": ht * b1 * s, "stream": max(2 * xstage, 2 * c1 * w1 * s)}
    if out == "natural":
        tm = min(cdiv(b, P), banks)
        w2 = min(max(1, banks // tm) * FMAX, n)
        s2 = {"strips": strips, "v_chunks": 2 * c2 * w2 * s, "staging": 2 * w2 * s}
    else:
        tt = min(cdiv(b, FMAX), banks)
        w2 = min(max(1, banks // tt) * P, n)
        tok_width = min(b, tt * FMAX)
        s2 = {"strips": strips, "v_chunks": 2 * c2 * w2 * s, "staging": 2 * tok_width * s}
        if out == "swiglu":
            s2["gate"] = cdiv(w2, P) * tok_width * 4
    return s1, s2


def xuv_plan(
    s_tok: int,
    h: int,
    r: int,
    n: int,
    itemsize: int,
    blocks: Mapping[str, Any],
    usable: int,
    kernel: str = "xuv_fused",
    out: str = "natural",
    x_rows: bool = True,
    pairs: int = 1,
) -> Plan:
    """Plan of the fused X.U.V kernels (``out``: "natural" [S, N] or "transposed" [N, S]; ``x_rows``:
    x given as [S, H] (transposed on chip) rather than [H, S]; ``pairs``: U/V pairs sharing X)."""
    bl = _ints(kernel, blocks, XUV_BLOCKS)
    _check_banks(kernel, bl["psum_banks"])
    s = itemsize
    b2 = min(bl["block_tokens"], s_tok)
    sizes = {b2}
    if s_tok % b2:
        sizes.add(s_tok % b2)
    worst: dict[str, int] = {}
    fp = 0
    for b in sorted(sizes):
        s1, s2 = _xuv_block_parts(b, h, r, n, s, bl, out, x_rows, pairs)
        for parts in (s1, s2):
            tot = sum(parts.values())
            if tot > fp:
                fp, worst = tot, dict(parts)
    mode = "decode" if b2 <= DECODE_MAX_TOKENS else "prefill"
    return Plan(kernel, bl, fp, usable, worst, mode)


def resolve_xuv(
    s_tok: int,
    h: int,
    r: int,
    n: int,
    itemsize: int,
    usable: int,
    defaults: Mapping[str, Any],
    overrides: Mapping[str, Any],
    kernel: str = "xuv_fused",
    out: str = "natural",
    x_rows: bool = True,
    pairs: int = 1,
) -> Plan:
    """Merge fallback < tuning defaults < explicit overrides; shrink defaulted sizes that do not fit."""
    blocks = {**XUV_FALLBACK, **defaults, **overrides}
    if "stage1_tokens" not in overrides:
        blocks["stage1_tokens"] = min(blocks["stage1_tokens"], blocks["block_tokens"])

    def plan_of(bl: Mapping[str, Any]) -> Plan:
        return xuv_plan(s_tok, h, r, n, itemsize, bl, usable, kernel, out, x_rows, pairs)

    plan = plan_of(blocks)
    # shrink the defaulted blocks (never an explicit one) until the plan fits: the stage-1 X^T panel
    # first (down to 512 tokens: U then re-streams per sub-block, cheaper than losing V reuse), then
    # the weight chunks, then the token blocks (decode-sized blocks of a few tokens still run), then
    # the PSUM group width
    order = (
        "stage1_tokens@512",
        "u_chunk_tiles",
        "v_chunk_tiles",
        "stage1_tokens",
        "block_tokens",
        "psum_banks",
    )
    shrink = [key for key in order if key.partition("@")[0] not in overrides]
    for key in shrink:
        name, _, at = key.partition("@")
        floor = int(at) if at else {"stage1_tokens": P, "block_tokens": 1, "psum_banks": 1}.get(name, 1)
        while not plan.fits and blocks[name] > floor:
            blocks[name] = max(floor, blocks[name] // 2)
            if name == "block_tokens" and "stage1_tokens" not in overrides:
                blocks["stage1_tokens"] = min(blocks["stage1_tokens"], blocks["block_tokens"])
            plan = plan_of(blocks)
    if not plan.fits:
        raise BlockError(plan.sbuf_message())
    return plan


def resolve_svd_mlp(
    s_tok: int,
    h: int,
    r_gate_up: int,
    r_down: int,
    i_dim: int,
    itemsize: int,
    usable: int,
    defaults: Mapping[str, Any],
    overrides: Mapping[str, Any],
) -> tuple[Plan, Plan]:
    """(gate/up, down) plans of the SVD MLP with one set of block values for both passes: the gate/up pass
    (``r_gate_up`` the larger of the two ranks, the SwiGLU epilogue, two U/V pairs sharing X) resolved
    first, the down pass from its blocks, and the gate/up pass again from the down pass's when those had
    to shrink further."""

    def gate_up(start: Mapping[str, Any]) -> Plan:
        return resolve_xuv(
            s_tok, h, r_gate_up, i_dim, itemsize, usable, start, overrides, "svd_mlp", "swiglu", True, pairs=2
        )

    p1 = gate_up(defaults)
    p2 = resolve_xuv(
        s_tok, i_dim, r_down, h, itemsize, usable, p1.blocks, overrides, "svd_mlp", "natural", False
    )
    if p2.blocks != p1.blocks:
        p1 = gate_up(p2.blocks)
    return p1, p2


# --------------------------------------------------------------------------------------------------
# dense MLP

DENSE_MLP_BLOCKS = ("block_tokens", "k_chunk_tiles", "psum_banks")
DENSE_MLP_FALLBACK = {"block_tokens": 512, "k_chunk_tiles": 8, "psum_banks": 8}


def dense_mlp_plan(
    s_tok: int,
    h: int,
    i: int,
    itemsize: int,
    blocks: Mapping[str, Any],
    usable: int,
    kernel: str = "dense_mlp",
) -> Plan:
    """Plan of :func:`devkit.kernels.mlp.dense_mlp`: gate/up pass (act^T to HBM) then a dense down pass.

    The down pass (``lhsT = act^T``) resolves its own panel width and falls back to streaming the
    panel, so it always fits; only the gate/up pass constrains these blocks.
    """
    bl = _ints(kernel, blocks, DENSE_MLP_BLOCKS)
    _check_banks(kernel, bl["psum_banks"])
    s = itemsize
    banks = bl["psum_banks"]
    b = min(bl["block_tokens"], s_tok)
    ht = cdiv(h, P)
    c = min(bl["k_chunk_tiles"], ht)
    parts = {"x_panel": ht * b * s}
    if b <= DECODE_MAX_TOKENS:
        w = min(banks * FMAX, i)
        parts.update(
            {
                "stream": max(2 * min(h, X_COLS) * s, 2 * c * w * s + w * 4 + w * s),
                "transpose_staging": 2 * min(32, cdiv(i, P)) * b * s,
            }
        )
    else:
        tt = min(cdiv(b, FMAX), banks)
        w = min(max(1, banks // tt) * P, i)
        tok_width = min(b, tt * FMAX)
        parts.update(
            {
                "stream": max(2 * min(h, X_COLS) * s, 2 * c * w * s + cdiv(w, P) * tok_width * 4),
                "staging": 2 * tok_width * s,
            }
        )
    mode = "decode" if b <= DECODE_MAX_TOKENS else "prefill"
    return Plan(kernel, bl, sum(parts.values()), usable, parts, mode)


def resolve_dense_mlp(
    s_tok: int,
    h: int,
    i: int,
    itemsize: int,
    usable: int,
    defaults: Mapping[str, Any],
    overrides: Mapping[str, Any],
    kernel: str = "dense_mlp",
) -> Plan:
    blocks = {**DENSE_MLP_FALLBACK, **defaults, **overrides}
    plan = _halve_until_fits(
        blocks,
        overrides,
        {"k_chunk_tiles": 1, "block_tokens": P},
        lambda b: dense_mlp_plan(s_tok, h, i, itemsize, b, usable, kernel),
    )
    if not plan.fits:
        raise BlockError(plan.sbuf_message())
    return plan
