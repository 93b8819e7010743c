"""Shared NKI building blocks of the project's kernels (plain NKI code; hardware numbers come from
:mod:`devkit.targets` through :mod:`devkit.kernels.plans`).

Everything here is called from inside ``@nki.jit`` kernels and emits NKI instructions.  Sizes are
static Python ints (shapes are known at trace time); loop variables only appear in affine index
expressions, never in Python control flow, so the same code traces on the real Neuron compiler.

Vocabulary (sizes in elements unless a name says bytes; bytes are *per SBUF/PSUM partition*):

* **tile**: at most 128 rows on the partitions.  The contraction dimension of every matmul is tiled
  by 128 (``P``); the last tile of a ragged dimension is a smaller *static* tile, handled by peeling.
* **panel**: an SBUF tensor ``[128, KT, B]`` whose tile ``kt`` holds rows ``kt*128 ... kt*128+127`` of
  a contraction-major operand for ``B`` columns (tokens).  ``X^T`` for a token block and the cached
  ``(XU)^T`` strip are panels.
* **bank**: one PSUM accumulator ``[<=128, <=512]`` fp32 = 2 KiB per partition; a core has 8.
* **group**: the banks accumulated together while one weight stream passes over the contraction;
  every contraction is accumulated completely in PSUM (fp32) before it is evacuated once.

Operand roles (``nisa.nc_matmul(stationary, moving)`` = ``stationary.T @ moving``):

* :func:`weights_moving`: stationary = panel tile ``[128 k, <=128 tokens]``, moving = weight tile
  ``[128 k, <=512 cols]`` -> natural ``[tokens, cols]``.  Decode path and every natural output.
* :func:`weights_stationary`: stationary = weight tile ``[128 k, <=128 cols]``, moving = panel tile
  ``[128 k, <=512 tokens]`` -> transposed ``[cols, tokens]`` ("implicit transposition").
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl

from devkit.dtype_names import itemsize
from devkit.kernels.layout import (
    TRANSPOSES_PER_BANK,
    Tiles,
    banks_leaving_one,
    col_tiles_of,
    moving_layout,
    row_tiles_of,
    stationary_layout,
    tile_sizes,
    transpose_groups,
)
from devkit.kernels.plans import FMAX, PSUM_BANKS, X_COLS, BlockError, P, cdiv, usable_sbuf
from devkit.targets import DEFAULT_TARGET

__all__ = [
    "FMAX",
    "PSUM_BANKS",
    "TRANSPOSES_PER_BANK",
    "X_COLS",
    "BlockError",
    "HbmPanel",
    "P",
    "Tiles",
    "banks_leaving_one",
    "cdiv",
    "col_tiles_of",
    "itemsize",
    "moving_layout",
    "row_tiles_of",
    "stationary_layout",
    "tile_sizes",
]


def usable_sbuf_bytes() -> int:
    """Usable SBUF bytes per partition on the current target (``nl.tile_size``); an SDK too old to
    name it gets the default target's figure from its target file."""
    size = getattr(nl.tile_size, "total_available_sbuf_size", None)
    return int(size) if size is not None else usable_sbuf(DEFAULT_TARGET)


def scope() -> Any:
    """A one-iteration ``nl.affine_range``: tiles allocated in its body die at its end.

    Used to bound the lifetime of temporaries (SBUF/PSUM are allocated by lifetime) without relying
    on Python reference counting.
    """
    return nl.affine_range(1)


def for_spans(total: int, span: int, body: Callable[[Any, Any, int], None]) -> None:
    """Call ``body(index, offset, size)`` for consecutive spans of ``total`` elements.

    Full spans run in an ``nl.affine_range`` (``index`` is the loop variable, ``offset = index*span``);
    a ragged last span is peeled with its own static ``size`` (in its own one-iteration scope).
    """
    n_full, rem = divmod(total, span)
    if n_full:
        for i in nl.affine_range(n_full):
            body(i, i * span, span)
    if rem:
        for _ in scope():
            body(n_full, n_full * span, rem)


def rows3(t: Any) -> Any:
    """``t.reshape((R/128, 128, C))`` when its rows tile exactly (one-DMA multi-tile loads), else None."""
    r, c = t.shape
    if r % P:
        return None
    return t.reshape((r // P, P, c))


def load_tiles(dst: Any, src: Any, src3: Any, t0: Any, n_full: int, rem: int, col0: Any, ncols: int) -> None:
    """DMA rows ``[t0*128, t0*128 + n_full*128 + rem)`` x cols ``[col0, col0+ncols)`` of HBM ``src``
    into ``dst[:, 0:n_full(+1), 0:ncols]`` (tile j of the rows on ``dst[:, j]``).

    With ``src3`` (see :func:`rows3`) the full tiles move in one DMA; otherwise one DMA per tile.
    """
    if n_full:
        if src3 is not None:
            i_p = nl.arange(P)[:, None, None]
            i_t = nl.arange(n_full)[None, :, None]
            i_f = nl.arange(ncols)[None, None, :]
            dst[:, 0:n_full, 0:ncols] = nl.load(src3[t0 + i_t, i_p, col0 + i_f])
        else:
            i_p = nl.arange(P)[:, None]
            i_f = nl.arange(ncols)[None, :]
            for j in nl.affine_range(n_full):
                dst[:, j, 0:ncols] = nl.load(src[(t0 + j) * P + i_p, col0 + i_f])
    if rem:
        i_p = nl.arange(rem)[:, None]
        i_f = nl.arange(ncols)[None, :]
        dst[0:rem, n_full, 0:ncols] = nl.load(src[(t0 + n_full) * P + i_p, col0 + i_f])


def evacuate(dst: Any, ps: Any, dtype: Any, engine: int) -> None:
    """Copy a PSUM view into an SBUF view with a cast: ``engine`` 0 = VectorE, 1 = ScalarE."""
    if engine % 2 == 0:
        dst[...] = nl.copy(ps, dtype=dtype)
    else:
        dst[...] = nisa.activation(op=nl.copy, data=ps, dtype=dtype)


def accumulate(
    ps: Any, ms: int, ns: int, mm: Callable[[Any, int], Any], n_full: int, rem: int, first: bool
) -> None:
    """``ps[0:ms, 0:ns]`` (+)= ``mm(j, rows)`` for ``n_full`` 128-row tiles then one ``rem``-row tile.

    ``first``: this call opens the accumulation group, so its first matmul overwrites the bank
    (no memset, no uninitialised accumulator).
    """
    j0 = 0
    if first:
        if n_full:
            ps[0:ms, 0:ns] = mm(0, P)
            j0 = 1
        else:
            ps[0:ms, 0:ns] = mm(0, rem)
            return
    if n_full - j0 == 1:
        ps[0:ms, 0:ns] += mm(j0, P)
    elif n_full > j0:
        for j in nl.affine_range(j0, n_full):
            ps[0:ms, 0:ns] += mm(j, P)
    if rem:
        ps[0:ms, 0:ns] += mm(n_full, rem)


def contract(
    k_total: int,
    chunk_tiles: int,
    load: Callable[[Any, int, int], Any],
    compute: Callable[[Any, Any, int, int, bool], None],
) -> None:
    """Drive a contraction over ``k_total`` rows in chunks of ``chunk_tiles`` 128-row tiles.

    ``load(t0, n_full, rem)`` brings one chunk on chip and returns a handle; ``compute(handle, t0,
    n_full, rem, first)`` issues its matmuls.  Full chunks after the first run in an affine loop; the
    ragged last chunk (fewer tiles and/or a partial tile) is peeled.
    """
    kt, k_rem = divmod(k_total, P)
    n_chunks, t_rem = divmod(kt, chunk_tiles)
    if n_chunks:
        for _ in scope():
            compute(load(0, chunk_tiles, 0), 0, chunk_tiles, 0, True)
        if n_chunks > 1:
            for kc in nl.affine_range(n_chunks - 1):
                t0 = (kc + 1) * chunk_tiles
                compute(load(t0, chunk_tiles, 0), t0, chunk_tiles, 0, False)
    if t_rem or k_rem:
        t0 = n_chunks * chunk_tiles
        for _ in scope():
            compute(load(t0, t_rem, k_rem), t0, t_rem, k_rem, n_chunks == 0)


class HbmPanel:
    """A panel operand streamed from HBM chunk by chunk instead of held in SBUF.

    ``src``: HBM ``[K, cols]`` (contraction on rows); ``src3`` = :func:`rows3` of it; ``col0``: the
    column of token 0 of the panel.  Used when a resident panel would not fit SBUF.
    """

    def __init__(self, src: Any, src3: Any, col0: Any, n_cols: int) -> None:
        self.src = src
        self.src3 = src3
        self.col0 = col0
        self.n_cols = n_cols


def _chunk_loader(
    pairs: Sequence[tuple[Any, Any, Any]], col0: Any, ncols: int
) -> Callable[[Any, int, int], list[tuple[Any, Any]]]:
    """Loads one contraction chunk of every pair's weight (and of streamed panels)."""

    def load(t0: Any, n_full: int, rem: int) -> list[tuple[Any, Any]]:
        out = []
        nt = n_full + (1 if rem else 0)
        for panel, w, w3 in pairs:
            buf = nl.ndarray((P, nt, ncols), dtype=w.dtype, buffer=nl.sbuf)
            load_tiles(buf, w, w3, t0, n_full, rem, col0, ncols)
            pbuf = None
            if isinstance(panel, HbmPanel):
                pbuf = nl.ndarray((P, nt, panel.n_cols), dtype=panel.src.dtype, buffer=nl.sbuf)
                load_tiles(pbuf, panel.src, panel.src3, t0, n_full, rem, panel.col0, panel.n_cols)
            out.append((buf, pbuf))
        return out

    return load


def _panel_tile(panel: Any, pbuf: Any, rows: int, t0: Any, j: Any, a: int, size: int) -> Any:
    """Tile ``t0 + j`` of a panel, columns ``[a, a + size)`` (``pbuf``: its streamed chunk, if any)."""
    if pbuf is not None:
        return pbuf[0:rows, j, a : a + size]
    return panel[0:rows, t0 + j, a : a + size]


def moving_group(
    pairs: Sequence[tuple[Any, Any, Any]],
    tok_tiles: Tiles,
    tok0_panel: int,
    c0: Any,
    wsz: int,
    k_total: int,
    chunk_tiles: int,
) -> list:
    """One PSUM group of natural products: ``ps[pair][m][n]`` = bank of token tile ``tok_tiles[m]``
    and column tile ``n`` (512 wide) of columns ``[c0, c0 + wsz)`` of each pair's weight, with the
    whole ``k_total`` contraction accumulated.  Returns the banks (still open for the epilogue)."""
    col_tiles = [(n * FMAX, s) for n, s in enumerate(tile_sizes(wsz, FMAX))]
    ps = [
        [[nl.ndarray((P, FMAX), dtype=nl.float32, buffer=nl.psum) for _ in col_tiles] for _ in tok_tiles]
        for _ in pairs
    ]

    def compute(bufs: list[Any], t0: Any, n_full: int, rem: int, first: bool) -> None:
        for pi, (panel, _, _) in enumerate(pairs):
            buf, pbuf = bufs[pi]
            for m, (mo, ms) in enumerate(tok_tiles):
                a = tok0_panel + mo
                for n, (no, ns) in enumerate(col_tiles):

                    def mm(
                        j: Any,
                        rows: int,
                        a: int = a,
                        ms: int = ms,
                        no: int = no,
                        ns: int = ns,
                        panel: Any = panel,
                        buf: Any = buf,
                        pbuf: Any = pbuf,
                    ) -> Any:
                        return nisa.nc_matmul(
                            _panel_tile(panel, pbuf, rows, t0, j, a, ms), buf[0:rows, j, no : no + ns]
                        )

                    accumulate(ps[pi][m][n], ms, ns, mm, n_full, rem, first)

    contract(k_total, chunk_tiles, _chunk_loader(pairs, c0, wsz), compute)
    return ps


def weights_moving(
    pairs: Sequence[tuple[Any, Any, Any]],
    n_tok: int,
    tok0_panel: int,
    n_cols: int,
    k_total: int,
    chunk_tiles: int,
    banks: int,
    epilogue: Callable[[list, Any, Any, Tiles, Tiles], None],
    col_group_tiles: int = 0,
) -> None:
    """Natural-layout products ``panel^T @ W`` for each ``(panel, W, W3)`` pair, group by group.

    ``panel``: SBUF ``[128, KT, >= tok0_panel + n_tok]`` (stationary, tokens on the free dim) or an
    :class:`HbmPanel`; ``W``: HBM ``[k_total, n_cols]`` (moving, streamed once per token group in chunks
    of ``chunk_tiles`` row tiles); ``W3`` = :func:`rows3` of ``W``.  PSUM groups hold ``TM`` token
    tiles x ``TN`` 512-column tiles per pair, ``TM*TN*len(pairs) <= banks``.

    ``epilogue(ps, ct0, col0, tok_tiles, col_tiles)`` evacuates one group: ``ps[pair][m][n]`` is the
    bank of token tile ``tok_tiles[m] = (offset, size)`` (relative to ``tok0_panel``) and column tile
    ``col_tiles[n] = (offset within the group, size)``; the group starts at column ``col0``, which is
    128-column tile ``ct0``.
    """
    groups, width = moving_layout(n_tok, banks, len(pairs), col_group_tiles)
    for tok_tiles in groups:

        def group(ci: Any, c0: Any, wsz: int, tok_tiles: Tiles = tok_tiles) -> None:
            ps = moving_group(pairs, tok_tiles, tok0_panel, c0, wsz, k_total, chunk_tiles)
            epilogue(ps, ci * (width // P), c0, tok_tiles, col_tiles_of(wsz))

        for_spans(n_cols, width, group)


def stationary_group(
    pairs: Sequence[tuple[Any, Any, Any]],
    tok_tiles: Tiles,
    tok0_panel: int,
    r0: Any,
    wsz: int,
    k_total: int,
    chunk_tiles: int,
) -> list:
    """One PSUM group of transposed products: ``ps[pair][g][t]`` = bank ``[rows, tokens]`` of output
    row tile ``g`` of rows ``[r0, r0 + wsz)`` (weight columns) and token tile ``tok_tiles[t]``, with the
    whole ``k_total`` contraction accumulated.  Returns the banks (still open for the epilogue)."""
    row_tiles = row_tiles_of(wsz)
    ps = [
        [[nl.ndarray((P, FMAX), dtype=nl.float32, buffer=nl.psum) for _ in tok_tiles] for _ in row_tiles]
        for _ in pairs
    ]

    def compute(bufs: list[Any], t0: Any, n_full: int, rem: int, first: bool) -> None:
        for pi, (panel, _, _) in enumerate(pairs):
            buf, pbuf = bufs[pi]
            for g, (go, gs) in enumerate(row_tiles):
                for t, (to, ts) in enumerate(tok_tiles):
                    a = tok0_panel + to

                    def mm(
                        j: Any,
                        rows: int,
                        go: int = go,
                        gs: int = gs,
                        a: int = a,
                        ts: int = ts,
                        panel: Any = panel,
                        buf: Any = buf,
                        pbuf: Any = pbuf,
                    ) -> Any:
                        return nisa.nc_matmul(
                            buf[0:rows, j, go : go + gs], _panel_tile(panel, pbuf, rows, t0, j, a, ts)
                        )

                    accumulate(ps[pi][g][t], gs, ts, mm, n_full, rem, first)

    contract(k_total, chunk_tiles, _chunk_loader(pairs, r0, wsz), compute)
    return ps


def weights_stationary(
    pairs: Sequence[tuple[Any, Any, Any]],
    n_tok: int,
    tok0_panel: int,
    n_rows: int,
    k_total: int,
    chunk_tiles: int,
    banks: int,
    epilogue: Callable[[list, Any, Any, Tiles, Tiles], None],
    row_group_tiles: int = 0,
) -> None:
    """Transposed products ``(panel^T @ W)^T = W^T @ panel`` (``[n_rows, tokens]``) for each pair.

    ``W``: HBM ``[k_total, n_rows]`` (stationary, 128-column tiles, streamed once per token group);
    ``panel``: SBUF ``[128, KT, >= tok0_panel + n_tok]`` (moving, 512-token tiles).  PSUM groups hold
    ``G`` 128-row output tiles x ``TT`` 512-token tiles per pair.

    ``epilogue(ps, rt0, r0, row_tiles, tok_tiles)``: ``ps[pair][g][t]`` is the bank of output row
    tile ``row_tiles[g] = (offset within group, size)`` and token tile ``tok_tiles[t] = (offset
    relative to tok0_panel, size)``; the group starts at output row ``r0`` = row tile ``rt0``.
    """
    groups, height = stationary_layout(n_tok, banks, len(pairs), row_group_tiles)
    for tok_tiles in groups:

        def group(ri: Any, r0: Any, wsz: int, tok_tiles: Tiles = tok_tiles) -> None:
            ps = stationary_group(pairs, tok_tiles, tok0_panel, r0, wsz, k_total, chunk_tiles)
            epilogue(ps, ri * (height // P), r0, row_tiles_of(wsz), tok_tiles)

        for_spans(n_rows, height, group)


def panel_from_rows(x: Any, tok0: Any, n_tok: int, panel: Any, tok0_panel: int = 0) -> None:
    """Fill ``panel[:, :, tok0_panel : tok0_panel+n_tok]`` with ``x[tok0 : tok0+n_tok, :]^T``.

    ``x``: HBM ``[S, H]`` (tokens on rows).  Rows are DMA'd naturally (long contiguous runs) and
    transposed on the TensorE in 128 x 128 blocks through PSUM (``TRANSPOSES_PER_BANK`` per bank),
    then evacuated alternately by VectorE and ScalarE: no slow DMA transposes.
    """
    h_total = x.shape[1]
    dt = panel.dtype
    for t, rows in enumerate(tile_sizes(n_tok, P)):
        i_p = nl.arange(rows)[:, None]

        def chunk(ci: Any, c0: Any, ccols: int, t: int = t, rows: int = rows, i_p: Any = i_p) -> None:
            i_f = nl.arange(ccols)[None, :]
            xn = nl.ndarray((P, ccols), dtype=x.dtype, buffer=nl.sbuf)
            xn[0:rows, 0:ccols] = nl.load(x[tok0 + t * P + i_p, c0 + i_f])
            hts = tile_sizes(ccols, P)
            kt0 = ci * (X_COLS // P)
            groups = [
                (q0, hts[q0 : q0 + TRANSPOSES_PER_BANK]) for q0 in range(0, len(hts), TRANSPOSES_PER_BANK)
            ]
            for q0, grp in groups:
                ps = nl.ndarray((P, TRANSPOSES_PER_BANK, P), dtype=nl.float32, buffer=nl.psum)
                for q, hs in enumerate(grp):
                    ps[0:hs, q, 0:rows] = nisa.nc_transpose(
                        xn[0:rows, (q0 + q) * P : (q0 + q) * P + hs], engine=nisa.tensor_engine
                    )
                full = [hs for hs in grp if hs == P]
                a = tok0_panel + t * P
                if full:
                    evacuate(
                        panel[:, nl.ds(kt0 + q0, len(full)), a : a + rows],
                        ps[:, 0 : len(full), 0:rows],
                        dt,
                        q0 // TRANSPOSES_PER_BANK + t,
                    )
                if len(full) < len(grp):
                    hs = grp[-1]
                    q = len(grp) - 1
                    evacuate(panel[0:hs, kt0 + q0 + q, a : a + rows], ps[0:hs, q, 0:rows], dt, t + 1)

        for_spans(h_total, X_COLS, chunk)


def panel_from_cols(
    xt: Any, xt3: Any, tok0: Any, n_tok: int, panel: Any, tok0_panel: int = 0, chunk_tiles: int = 8
) -> None:
    """Fill ``panel[:, :, tok0_panel : tok0_panel+n_tok]`` with ``xt[:, tok0 : tok0+n_tok]`` (no transpose).

    ``xt``: HBM ``[H, S]`` already contraction-major; loaded ``chunk_tiles`` row tiles per DMA.
    """
    h_total = xt.shape[0]
    kt, k_rem = divmod(h_total, P)
    n_chunks, t_rem = divmod(kt, chunk_tiles)
    a = tok0_panel

    def one(t0: Any, n_full: int, rem: int) -> None:
        if n_full:
            if xt3 is not None:
                i_p = nl.arange(P)[:, None, None]
                i_t = nl.arange(n_full)[None, :, None]
                i_f = nl.arange(n_tok)[None, None, :]
                panel[:, nl.ds(t0, n_full), a : a + n_tok] = nl.load(xt3[t0 + i_t, i_p, tok0 + i_f])
            else:
                i_p = nl.arange(P)[:, None]
                i_f = nl.arange(n_tok)[None, :]
                for j in nl.affine_range(n_full):
                    panel[:, t0 + j, a : a + n_tok] = nl.load(xt[(t0 + j) * P + i_p, tok0 + i_f])
        if rem:
            i_p = nl.arange(rem)[:, None]
            i_f = nl.arange(n_tok)[None, :]
            panel[0:rem, t0 + n_full, a : a + n_tok] = nl.load(xt[(t0 + n_full) * P + i_p, tok0 + i_f])

    if n_chunks == 1:
        one(0, chunk_tiles, 0)
    elif n_chunks > 1:
        for c in nl.affine_range(n_chunks):
            one(c * chunk_tiles, chunk_tiles, 0)
    if t_rem or k_rem:
        one(n_chunks * chunk_tiles, t_rem, k_rem)


def _transposes(
    nat: Any, n_tok: int, n_cols: int, max_per_bank: int, emit: Callable[[Any, Any, list[int]], None]
) -> None:
    """PE-transpose SBUF ``nat[0:n_tok, 0:n_cols]`` (``n_tok <= 128``) in 128-column blocks, ``q`` blocks per
    PSUM bank (``q * n_tok <= 512``); ``emit(ps, first_block, block_sizes)`` evacuates each bank, whose
    ``ps[0:size, j, 0:n_tok]`` holds columns ``(first_block + j)*128 ...`` of ``nat`` transposed."""
    q, span = transpose_groups(n_cols, n_tok, max_per_bank)

    def grp(gi: Any, c0: Any, gcols: int) -> None:
        blocks = tile_sizes(gcols, P)
        ps = nl.ndarray((P, q, n_tok), dtype=nl.float32, buffer=nl.psum)
        for b, bs in enumerate(blocks):
            ps[0:bs, b, 0:n_tok] = nisa.nc_transpose(
                nat[0:n_tok, nl.ds(c0 + b * P, bs)], engine=nisa.tensor_engine
            )
        emit(ps, gi * q, blocks)

    for_spans(n_cols, span, grp)


def transpose_into_panel(nat: Any, n_tok: int, n_cols: int, panel: Any, max_per_bank: int = 32) -> None:
    """``panel[:, t, 0:n_tok]`` = columns ``t*128 ...`` of ``nat[0:n_tok, 0:n_cols]``, transposed on chip."""
    dt = panel.dtype

    def emit(ps: Any, blk0: Any, blocks: list[int]) -> None:
        n_full = sum(1 for bs in blocks if bs == P)
        if n_full:
            evacuate(panel[:, nl.ds(blk0, n_full), 0:n_tok], ps[:, 0:n_full, 0:n_tok], dt, 0)
        if blocks[-1] != P:
            rem = blocks[-1]
            evacuate(panel[0:rem, blk0 + n_full, 0:n_tok], ps[0:rem, n_full, 0:n_tok], dt, 1)

    _transposes(nat, n_tok, n_cols, max_per_bank, emit)


def transpose_store(
    nat: Any, n_tok: int, n_cols: int, dst: Any, dst3: Any, tile0: Any, col0: Any, max_per_bank: int = 32
) -> None:
    """Store ``nat[0:n_tok, 0:n_cols]^T`` to HBM ``dst[(tile0*128) + c, col0 + t]`` (``dst``: [rows, tokens];
    ``dst3`` = :func:`rows3` of it), transposing on the TensorE."""
    dt = dst.dtype

    def emit(ps: Any, blk0: Any, blocks: list[int]) -> None:
        sb = nl.ndarray((P, len(blocks), n_tok), dtype=dt, buffer=nl.sbuf)
        n_full = sum(1 for bs in blocks if bs == P)
        rem = 0 if blocks[-1] == P else blocks[-1]
        if n_full:
            evacuate(sb[:, 0:n_full, 0:n_tok], ps[:, 0:n_full, 0:n_tok], dt, 0)
        if rem:
            evacuate(sb[0:rem, n_full, 0:n_tok], ps[0:rem, n_full, 0:n_tok], dt, 1)
        store_row_tiles(dst, dst3, sb, tile0 + blk0, n_full, rem, col0, n_tok)

    _transposes(nat, n_tok, n_cols, max_per_bank, emit)


def store_row_tiles(
    dst: Any, dst3: Any, sb: Any, t0: Any, n_full: int, rem: int, col0: Any, ncols: int
) -> None:
    """Store SBUF ``sb[:, 0:n_full(+1), 0:ncols]`` to HBM rows ``t0*128 ...`` (tile j -> rows of tile
    ``t0 + j``), cols ``[col0, col0 + ncols)``; one DMA for the full tiles when ``dst3`` exists."""
    if n_full:
        if dst3 is not None:
            i_p = nl.arange(P)[:, None, None]
            i_t = nl.arange(n_full)[None, :, None]
            i_f = nl.arange(ncols)[None, None, :]
            nl.store(dst3[t0 + i_t, i_p, col0 + i_f], value=sb[:, 0:n_full, 0:ncols])
        else:
            i_p = nl.arange(P)[:, None]
            i_f = nl.arange(ncols)[None, :]
            for j in nl.affine_range(n_full):
                nl.store(dst[(t0 + j) * P + i_p, col0 + i_f], value=sb[:, j, 0:ncols])
    if rem:
        i_p = nl.arange(rem)[:, None]
        i_f = nl.arange(ncols)[None, :]
        nl.store(dst[(t0 + n_full) * P + i_p, col0 + i_f], value=sb[0:rem, n_full, 0:ncols])
