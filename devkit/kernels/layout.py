"""PSUM group layouts and tile splits of the NeuronMM kernels, shared by both NKI generations (pure Python).

The Beta-1 building blocks (:mod:`devkit.kernels._blocks`) and the Beta-2 ones
(:mod:`devkit.kernels.beta2._blocks`) emit different instructions for the same schedule: which token
tiles and weight columns share a PSUM group, how tall or wide a group is, how many 128x128 transposes go
into one bank.  That schedule lives here, next to the block plans (:mod:`devkit.kernels.plans`), so the two
emitters cannot drift apart.  Sizes in elements; a "tile list" is ``[(offset, size), ...]``.
"""

from __future__ import annotations

from devkit.kernels.plans import FMAX, PSUM_BANKS, P

TRANSPOSES_PER_BANK = 4  # [128 x 128] fp32 transposes collected in one PSUM bank before evacuation

Tiles = list[tuple[int, int]]


def tile_sizes(total: int, size: int) -> list[int]:
    """Static sizes of the consecutive tiles of ``total`` elements (all ``size`` but the last)."""
    n, rem = divmod(total, size)
    return [size] * n + ([rem] if rem else [])


def banks_leaving_one(banks: int) -> int:
    """Group banks when the epilogue needs a PSUM bank of its own (TensorE transposes)."""
    return max(1, min(banks, PSUM_BANKS - 1))


def _token_groups(
    n_tok: int, banks: int, npairs: int, tok_tile: int, other_tile: int, other_tiles: int
) -> tuple[list[Tiles], int]:
    """Token groups of ``tok_tile``-token tiles (as many per group as a pair's banks allow) and the group's
    extent in the other dimension, ``other_tiles`` (default: the banks left per token tile) x ``other_tile``."""
    per_pair = max(1, banks // npairs)
    toks = tile_sizes(n_tok, tok_tile)
    per_group = min(len(toks), per_pair)
    groups = [
        [(i * tok_tile, toks[i]) for i in range(g0, min(g0 + per_group, len(toks)))]
        for g0 in range(0, len(toks), per_group)
    ]
    return groups, (other_tiles or max(1, per_pair // per_group)) * other_tile


def moving_layout(
    n_tok: int, banks: int, npairs: int = 1, col_group_tiles: int = 0
) -> tuple[list[Tiles], int]:
    """PSUM group layout of a weights-moving product: token groups (each a list of ``(offset, size)``
    128-token tiles) and the group width in columns (``TN`` 512-column tiles)."""
    return _token_groups(n_tok, banks, npairs, P, FMAX, col_group_tiles)


def stationary_layout(
    n_tok: int, banks: int, npairs: int = 1, row_group_tiles: int = 0
) -> tuple[list[Tiles], int]:
    """PSUM group layout of a weights-stationary product: token groups (lists of ``(offset, size)``
    512-token tiles) and the group height in output rows (``G`` 128-row tiles)."""
    return _token_groups(n_tok, banks, npairs, FMAX, P, row_group_tiles)


def col_tiles_of(wsz: int) -> Tiles:
    """``(offset, size)`` 512-column tiles of a group ``wsz`` columns wide."""
    return [(n * FMAX, s) for n, s in enumerate(tile_sizes(wsz, FMAX))]


def row_tiles_of(wsz: int) -> Tiles:
    """``(offset, size)`` 128-row tiles of a group ``wsz`` rows high."""
    return [(g * P, s) for g, s in enumerate(tile_sizes(wsz, P))]


def transpose_groups(n_cols: int, n_tok: int, max_per_bank: int) -> tuple[int, int]:
    """128-column blocks per PSUM bank when transposing ``[n_tok, n_cols]`` (``q * n_tok <= 512``) and the
    columns one bank covers: ``(q, q * 128)``."""
    q = max(1, min(max_per_bank, FMAX // n_tok, -(-n_cols // P)))
    return q, q * P
