"""Beta-2 emitters of the NeuronMM building blocks (``nki.isa`` with ``dst``; called inside ``@nki.jit`` kernels).

The Beta-1 twin is :mod:`devkit.kernels._blocks`; both follow the schedule of :mod:`devkit.kernels.layout` and
the block plans of :mod:`devkit.kernels.plans`, so a block choice means the same loads, matmuls and stores in
either generation.  What the NKI 0.x idiom changes:

* loops are Python loops over static ``(index, offset, size)`` spans (:func:`spans`): offsets are ints and a
  ragged last tile is a smaller slice, never a mask;
* every instruction writes the ``dst`` view it is given; a PSUM bank accumulates implicitly (the first
  ``nc_matmul`` write to an element overwrites it, later writes add), so no call opens or closes a group;
* several 128-row tiles move in one DMA through an access pattern over the HBM tensor (:func:`tiles_ap`),
  whether or not the row count is a multiple of 128;
* every weight chunk is a fresh SBUF tensor, as in the Beta-1 loop bodies, so the allocator rotates
  the stream buffers (loads overlap matmuls) exactly as it does for Beta 1.

Sizes in elements; ``P`` = 128 partitions, ``FMAX`` = 512 columns of one fp32 PSUM bank.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

import nki.isa as nisa
import nki.language as nl

from devkit.dtype_names import itemsize
from devkit.kernels.layout import (
    TRANSPOSES_PER_BANK,
    Tiles,
    col_tiles_of,
    moving_layout,
    row_tiles_of,
    stationary_layout,
    tile_sizes,
    transpose_groups,
)
from devkit.kernels.plans import FMAX, X_COLS, BlockError, P, cdiv, usable_sbuf

__all__ = ["FMAX", "X_COLS", "BlockError", "HbmPanel", "P", "cdiv", "itemsize", "spans"]

_TARGETS = {2: "trn1", 3: "trn2", 4: "trn3"}


def target_name() -> str:
    """The target the kernel runs on, from ``nisa.get_nc_version()`` (gen2 trn1, gen3 trn2, gen4 trn3)."""
    try:
        return _TARGETS.get(int(nisa.get_nc_version()), "trn1")
    except Exception:  # outside a kernel
        return "trn1"


def usable_sbuf_bytes() -> int:
    """Usable SBUF bytes per partition on the current target (``nl.tile_size.total_available_sbuf_size``,
    deprecated in NKI 0.4 but still present; without it, the target file's figure)."""
    size = getattr(nl.tile_size, "total_available_sbuf_size", None)
    return int(size) if size is not None else usable_sbuf(target_name())


def spans(total: int, span: int) -> Iterator[tuple[int, int, int]]:
    """``(index, offset, size)`` of the consecutive spans of ``total`` elements (the last one may be short)."""
    for i in range(cdiv(total, span)):
        yield i, i * span, min(span, total - i * span)


def tiles_ap(t: Any, t0: int, n_full: int, col0: int, ncols: int) -> Any:
    """HBM ``t`` [R, C] rows ``t0*128 ... (t0+n_full)*128`` x cols ``[col0, col0+ncols)`` as a
    ``[128, n_full, ncols]`` access pattern (row tile j on free index j): one DMA for many tiles."""
    rows, cols = t.shape
    pattern = [[cols, P], [P * cols, n_full], [1, ncols]]
    if rows % P == 0:  # over the [R/128, 128, C] view every step is one dimension's stride (a strided view)
        return t.reshape((rows // P, P, cols)).ap(pattern, offset=t0 * P * cols + col0)
    return t.ap(pattern, offset=t0 * P * cols + col0)


def load_tiles(dst: Any, src: Any, t0: int, n_full: int, rem: int, col0: int, ncols: int) -> None:
    """DMA rows ``[t0*128, t0*128 + n_full*128 + rem)`` x cols ``[col0, col0+ncols)`` of HBM ``src``
    into ``dst[:, 0:n_full(+1), 0:ncols]`` (one DMA for the full tiles, one for the partial tile)."""
    if n_full:
        nisa.dma_copy(dst=dst[:, 0:n_full, 0:ncols], src=tiles_ap(src, t0, n_full, col0, ncols))
    if rem:
        r0 = (t0 + n_full) * P
        nisa.dma_copy(dst=dst[0:rem, n_full, 0:ncols], src=src[r0 : r0 + rem, col0 : col0 + ncols])


def store_row_tiles(dst: Any, sb: Any, t0: int, n_full: int, rem: int, col0: int, ncols: int) -> None:
    """Store SBUF ``sb[:, 0:n_full(+1), 0:ncols]`` to HBM rows ``t0*128 ...`` (tile j -> rows of tile
    ``t0 + j``), cols ``[col0, col0 + ncols)``."""
    if n_full:
        nisa.dma_copy(dst=tiles_ap(dst, t0, n_full, col0, ncols), src=sb[:, 0:n_full, 0:ncols])
    if rem:
        r0 = (t0 + n_full) * P
        nisa.dma_copy(dst=dst[r0 : r0 + rem, col0 : col0 + ncols], src=sb[0:rem, n_full, 0:ncols])


def evacuate(dst: Any, ps: Any, engine: int) -> None:
    """Copy a PSUM view into an SBUF view (cast to ``dst.dtype``): ``engine`` 0 = VectorE, 1 = ScalarE."""
    if engine % 2 == 0:
        nisa.tensor_copy(dst=dst, src=ps, engine=nisa.engine.vector)
    else:
        nisa.activation(dst=dst, op=nl.copy, data=ps)


class HbmPanel:
    """A panel operand streamed from HBM chunk by chunk instead of held in SBUF.

    ``src``: HBM ``[K, cols]`` (contraction on rows); ``col0``: the column of token 0 of the panel.
    """

    def __init__(self, src: Any, col0: int, n_cols: int) -> None:
        self.src = src
        self.col0 = col0
        self.n_cols = n_cols


Pairs = Sequence[tuple[Any, Any]]  # (panel, weight): panel = SBUF [128, KT, tokens] or HbmPanel


def _chunks(k_total: int, chunk_tiles: int) -> list[tuple[int, int, int]]:
    """``(t0, n_full, rem)`` of each contraction chunk: ``chunk_tiles`` 128-row tiles, the last one ragged."""
    kt, k_rem = divmod(k_total, P)
    out = [(c * chunk_tiles, chunk_tiles, 0) for c in range(kt // chunk_tiles)]
    t_rem = kt % chunk_tiles
    if t_rem or k_rem:
        out.append((kt - t_rem, t_rem, k_rem))
    return out


def contract(
    pairs: Pairs,
    col0: int,
    ncols: int,
    k_total: int,
    chunk_tiles: int,
    mm: Callable[[int, Any, Any, list[tuple[int, int, int]]], None],
) -> None:
    """Stream the contraction of every pair in chunks of ``chunk_tiles`` row tiles (weight columns
    ``[col0, col0 + ncols)``); ``mm(pair, wbuf, pbuf, tiles)`` issues the matmuls of one chunk, ``tiles`` =
    ``[(t, j, rows)]``: contraction tile ``t`` is tile ``j`` of ``wbuf`` (``pbuf``: the streamed panel chunk,
    or None) with ``rows`` <= 128 valid rows.  Each bank takes all the tiles of a chunk before the next bank
    (the Beta-1 kernels' order, so both generations schedule alike).

    Each chunk gets a fresh SBUF buffer: the allocator places it next to the previous one while that is
    still read, so the loads of chunk ``c + 1`` overlap the matmuls of chunk ``c`` (the plans budget two
    buffers per stream; more rotate when SBUF has room)."""
    for t0, n_full, rem in _chunks(k_total, chunk_tiles):
        nt = n_full + (1 if rem else 0)
        bufs = []
        for panel, w in pairs:
            wb = nl.ndarray((P, nt, ncols), dtype=w.dtype, buffer=nl.sbuf)
            load_tiles(wb, w, t0, n_full, rem, col0, ncols)
            pb = None
            if isinstance(panel, HbmPanel):
                pb = nl.ndarray((P, nt, panel.n_cols), dtype=panel.src.dtype, buffer=nl.sbuf)
                load_tiles(pb, panel.src, t0, n_full, rem, panel.col0, panel.n_cols)
            bufs.append((wb, pb))
        tiles = [(t0 + j, j, P if j < n_full else rem) for j in range(nt)]
        for pi, (wb, pb) in enumerate(bufs):
            mm(pi, wb, pb, tiles)


def _panel_tile(panel: Any, pbuf: Any, t: int, j: int, rows: int, a: int, size: int) -> Any:
    """Contraction tile ``t`` (tile ``j`` of its chunk) of a panel, columns ``[a, a + size)``."""
    if pbuf is not None:
        return pbuf[0:rows, j, a : a + size]
    return panel[0:rows, t, a : a + size]


def _banks(n_outer: int, n_inner: int, npairs: int) -> list:
    return [
        [
            [nl.ndarray((P, FMAX), dtype=nl.float32, buffer=nl.psum) for _ in range(n_inner)]
            for _ in range(n_outer)
        ]
        for _ in range(npairs)
    ]


def moving_group(
    pairs: Pairs, tok_tiles: Tiles, tok0_panel: int, c0: int, wsz: int, k_total: int, chunk_tiles: int
) -> list:
    """One PSUM group of natural products: ``ps[pair][m][n]`` = bank ``[tokens, cols]`` of token tile
    ``tok_tiles[m]`` and 512-column tile ``n`` of weight columns ``[c0, c0 + wsz)``, the whole ``k_total``
    contraction accumulated in PSUM (implicitly: the first matmul write overwrites)."""
    col_tiles = col_tiles_of(wsz)
    ps = _banks(len(tok_tiles), len(col_tiles), len(pairs))

    def mm(pi: int, wbuf: Any, pbuf: Any, tiles: list[tuple[int, int, int]]) -> None:
        panel = pairs[pi][0]
        for m, (mo, ms) in enumerate(tok_tiles):
            for n, (no, ns) in enumerate(col_tiles):
                for t, j, rows in tiles:
                    nisa.nc_matmul(
                        dst=ps[pi][m][n][0:ms, 0:ns],
                        stationary=_panel_tile(panel, pbuf, t, j, rows, tok0_panel + mo, ms),
                        moving=wbuf[0:rows, j, no : no + ns],
                    )

    contract(pairs, c0, wsz, k_total, chunk_tiles, mm)
    return ps


Epilogue = Callable[[list, int, int, Tiles, Tiles], None]


def weights_moving(
    pairs: Pairs,
    n_tok: int,
    tok0_panel: int,
    n_cols: int,
    k_total: int,
    chunk_tiles: int,
    banks: int,
    epilogue: Epilogue,
    col_group_tiles: int = 0,
) -> None:
    """Natural-layout products ``panel^T @ W`` for each ``(panel, W)`` pair, group by group (the schedule of
    :func:`devkit.kernels.layout.moving_layout`; see :func:`devkit.kernels._blocks.weights_moving`).

    ``epilogue(ps, ct0, col0, tok_tiles, col_tiles)`` evacuates one group (``ct0`` = ``col0 // 128``)."""
    groups, width = moving_layout(n_tok, banks, len(pairs), col_group_tiles)
    for tok_tiles in groups:
        for ci, c0, wsz in spans(n_cols, width):
            ps = moving_group(pairs, tok_tiles, tok0_panel, c0, wsz, k_total, chunk_tiles)
            epilogue(ps, ci * (width // P), c0, tok_tiles, col_tiles_of(wsz))


def stationary_group(
    pairs: Pairs, tok_tiles: Tiles, tok0_panel: int, r0: int, wsz: int, k_total: int, chunk_tiles: int
) -> list:
    """One PSUM group of transposed products: ``ps[pair][g][t]`` = bank ``[rows, tokens]`` of output row
    tile ``g`` of rows ``[r0, r0 + wsz)`` (weight columns) and token tile ``tok_tiles[t]``."""
    row_tiles = row_tiles_of(wsz)
    ps = _banks(len(row_tiles), len(tok_tiles), len(pairs))

    def mm(pi: int, wbuf: Any, pbuf: Any, tiles: list[tuple[int, int, int]]) -> None:
        panel = pairs[pi][0]
        for g, (go, gs) in enumerate(row_tiles):
            for k, (to, ts) in enumerate(tok_tiles):
                for t, j, rows in tiles:
                    nisa.nc_matmul(
                        dst=ps[pi][g][k][0:gs, 0:ts],
                        stationary=wbuf[0:rows, j, go : go + gs],
                        moving=_panel_tile(panel, pbuf, t, j, rows, tok0_panel + to, ts),
                    )

    contract(pairs, r0, wsz, k_total, chunk_tiles, mm)
    return ps


def weights_stationary(
    pairs: Pairs,
    n_tok: int,
    tok0_panel: int,
    n_rows: int,
    k_total: int,
    chunk_tiles: int,
    banks: int,
    epilogue: Epilogue,
    row_group_tiles: int = 0,
) -> None:
    """Transposed products ``W^T @ panel`` (``[n_rows, tokens]``) for each pair (the schedule of
    :func:`devkit.kernels.layout.stationary_layout`); ``epilogue(ps, rt0, r0, row_tiles, tok_tiles)``."""
    groups, height = stationary_layout(n_tok, banks, len(pairs), row_group_tiles)
    for tok_tiles in groups:
        for ri, r0, wsz in spans(n_rows, height):
            ps = stationary_group(pairs, tok_tiles, tok0_panel, r0, wsz, k_total, chunk_tiles)
            epilogue(ps, ri * (height // P), r0, row_tiles_of(wsz), tok_tiles)


def panel_from_rows(x: Any, tok0: int, n_tok: int, panel: Any, tok0_panel: int = 0) -> None:
    """Fill ``panel[:, :, tok0_panel : tok0_panel+n_tok]`` with ``x[tok0 : tok0+n_tok, :]^T``: natural row
    DMAs of ``X_COLS`` columns, TensorE 128x128 transposes (``TRANSPOSES_PER_BANK`` per PSUM bank), evacuated
    alternately by VectorE and ScalarE."""
    for t, rows in enumerate(tile_sizes(n_tok, P)):
        r0 = tok0 + t * P
        a = tok0_panel + t * P
        for ci, c0, ccols in spans(x.shape[1], X_COLS):
            xn = nl.ndarray((P, ccols), dtype=x.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=xn[0:rows, 0:ccols], src=x[r0 : r0 + rows, c0 : c0 + ccols])
            hts = tile_sizes(ccols, P)
            kt0 = ci * (X_COLS // P)
            for q0 in range(0, len(hts), TRANSPOSES_PER_BANK):
                grp = hts[q0 : q0 + TRANSPOSES_PER_BANK]
                ps = nl.ndarray((P, TRANSPOSES_PER_BANK, P), dtype=nl.float32, buffer=nl.psum)
                for q, hs in enumerate(grp):
                    h0 = (q0 + q) * P
                    nisa.nc_transpose(
                        dst=ps[0:hs, q, 0:rows], data=xn[0:rows, h0 : h0 + hs], engine=nisa.engine.tensor
                    )
                n_full = sum(1 for hs in grp if hs == P)
                if n_full:
                    evacuate(
                        panel[:, kt0 + q0 : kt0 + q0 + n_full, a : a + rows],
                        ps[:, 0:n_full, 0:rows],
                        q0 // TRANSPOSES_PER_BANK + t,
                    )
                if n_full < len(grp):
                    hs = grp[-1]
                    evacuate(panel[0:hs, kt0 + q0 + n_full, a : a + rows], ps[0:hs, n_full, 0:rows], t + 1)


def panel_from_cols(
    xt: Any, tok0: int, n_tok: int, panel: Any, tok0_panel: int = 0, chunk_tiles: int = 8
) -> None:
    """Fill ``panel[:, :, tok0_panel : tok0_panel+n_tok]`` with ``xt[:, tok0 : tok0+n_tok]`` (no transpose;
    ``xt`` HBM [H, S] is already contraction-major), ``chunk_tiles`` row tiles per DMA."""
    a = tok0_panel
    for t0, n_full, rem in _chunks(xt.shape[0], chunk_tiles):
        if n_full:
            nisa.dma_copy(
                dst=panel[:, t0 : t0 + n_full, a : a + n_tok], src=tiles_ap(xt, t0, n_full, tok0, n_tok)
            )
        if rem:
            r0 = (t0 + n_full) * P
            nisa.dma_copy(
                dst=panel[0:rem, t0 + n_full, a : a + n_tok], src=xt[r0 : r0 + rem, tok0 : tok0 + n_tok]
            )


def _transposes(
    nat: Any, n_tok: int, n_cols: int, max_per_bank: int, emit: Callable[[Any, int, list[int]], None]
) -> None:
    """TensorE-transpose SBUF ``nat[0:n_tok, 0:n_cols]`` (``n_tok <= 128``) in 128-column blocks, ``q`` blocks
    per PSUM bank; ``emit(ps, first_block, block_sizes)`` evacuates each bank."""
    q, span = transpose_groups(n_cols, n_tok, max_per_bank)
    for gi, c0, gcols in spans(n_cols, span):
        blocks = tile_sizes(gcols, P)
        ps = nl.ndarray((P, q, n_tok), dtype=nl.float32, buffer=nl.psum)
        for b, bs in enumerate(blocks):
            nisa.nc_transpose(
                dst=ps[0:bs, b, 0:n_tok],
                data=nat[0:n_tok, c0 + b * P : c0 + b * P + bs],
                engine=nisa.engine.tensor,
            )
        emit(ps, gi * q, blocks)


def _evacuate_blocks(dst: Any, ps: Any, blk0: int, blocks: list[int], n_tok: int) -> None:
    n_full = sum(1 for bs in blocks if bs == P)
    if n_full:
        evacuate(dst[:, blk0 : blk0 + n_full, 0:n_tok], ps[:, 0:n_full, 0:n_tok], 0)
    if blocks[-1] != P:
        rem = blocks[-1]
        evacuate(dst[0:rem, blk0 + n_full, 0:n_tok], ps[0:rem, n_full, 0:n_tok], 1)


def transpose_into_panel(nat: Any, n_tok: int, n_cols: int, panel: Any, max_per_bank: int = 32) -> None:
    """``panel[:, t, 0:n_tok]`` = columns ``t*128 ...`` of ``nat[0:n_tok, 0:n_cols]``, transposed on chip."""

    def emit(ps: Any, blk0: int, blocks: list[int]) -> None:
        _evacuate_blocks(panel, ps, blk0, blocks, n_tok)

    _transposes(nat, n_tok, n_cols, max_per_bank, emit)


def transpose_store(
    nat: Any, n_tok: int, n_cols: int, dst: Any, tile0: int, col0: int, max_per_bank: int = 32
) -> None:
    """Store ``nat[0:n_tok, 0:n_cols]^T`` to HBM ``dst[tile0*128 + c, col0 + t]``, transposing on the TensorE."""

    def emit(ps: Any, blk0: int, blocks: list[int]) -> None:
        sb = nl.ndarray((P, len(blocks), n_tok), dtype=dst.dtype, buffer=nl.sbuf)
        _evacuate_blocks(sb, ps, 0, blocks, n_tok)
        n_full = sum(1 for bs in blocks if bs == P)
        rem = 0 if blocks[-1] == P else blocks[-1]
        store_row_tiles(dst, sb, tile0 + blk0, n_full, rem, col0, n_tok)

    _transposes(nat, n_tok, n_cols, max_per_bank, emit)
