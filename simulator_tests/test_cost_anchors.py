"""The calibration anchors end to end: the AWS NKI matmul tutorial progression through the
simulator and the cost model.

The four kernels follow the structure of the tutorial's ``nki_matmul_tiled_`` (the project's one
copy, :func:`devkit.kernels.tutorial.tiled_matmul`), ``nki_matmul_hoist_load_``,
``nki_matmul_block_free_dimension_`` and ``nki_matmul_fully_optimized_`` (the last three below;
reference/nki_api.md section 5.3: tile sizes 128/128/512, block factors 2x2 and 16x2x8, loop orders).
Measured on trn1, bf16 lhsT[8192, 4096] @ rhs[8192, 8192]: 51.80, 42.96, 22.07 and 6.97 ms (``[[anchors]]`` of
``devkit/cost/params.toml``).  The full-size check is slow (about two minutes of simulation) and
runs with ``-m slow``; the quick tests check the same kernels at a small size against the closed
form and the cost rules.
"""

from __future__ import annotations

import neuronxcc.nki.language as nl
import neuronxcc.nki.typing as nt
import pytest

import devkit
from devkit.cost.closed_form import blocked_matmul
from devkit.cost.params import load_params
from devkit.kernels.tutorial import (
    tiled_matmul,
    tutorial_block_free,
    tutorial_fully_optimized,
    tutorial_hoisted,
)

KERNELS = {
    "mmt_tiled_trn1": (tiled_matmul, dict(block_m=128, block_n=512, reuse="none")),
    "mmt_hoist_trn1": (tutorial_hoisted, dict(block_m=128, block_n=512, reuse="lhsT")),
    "mmt_block_free_trn1": (tutorial_block_free, dict(block_m=256, block_n=1024, reuse="lhsT")),
    "mmt_fully_optimized_trn1": (
        tutorial_fully_optimized,
        dict(block_m=2048, block_n=1024, block_k=1024, reuse="rhs"),
    ),
}


def _estimate(kernel, k: int, m: int, n: int):
    lhs_t, rhs = nt.tensor[[k, m], nl.bfloat16], nt.tensor[[k, n], nl.bfloat16]
    return devkit.estimate(kernel, lhs_t, rhs, target="trn1")


@pytest.mark.parametrize("anchor", list(KERNELS))
def test_small_tutorial_kernels_match_closed_form(anchor: str) -> None:
    kernel, blocks = KERNELS[anchor]
    k, m, n = 1024, 2048, 1024
    report = _estimate(kernel, k, m, n)
    closed = blocked_matmul(k, m, n, **blocks)
    assert report.unknown_opcodes == {}
    assert report.flops == closed.flops
    assert report.hbm_read_bytes == closed.hbm_read_bytes
    assert report.hbm_write_bytes == closed.hbm_write_bytes


@pytest.mark.slow
def test_tutorial_anchors_within_25_percent_and_in_order() -> None:
    measured = {a.id: a.measured_us for a in load_params().anchors}
    predicted = {a: _estimate(kernel, 8192, 4096, 8192).latency_us for a, (kernel, _) in KERNELS.items()}
    ratios = {anchor: predicted[anchor] / measured[anchor] for anchor in KERNELS}
    assert all(0.75 <= r <= 1.25 for r in ratios.values()), ratios
    in_order = [predicted[a] for a in KERNELS]  # tiled > hoisted > block free > fully optimized
    assert in_order == sorted(in_order, reverse=True), predicted
