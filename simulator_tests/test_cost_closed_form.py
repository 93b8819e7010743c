"""Closed-form FLOPs / HBM bytes / bounds against hand numbers and against trace-based figures."""

from __future__ import annotations

import pytest

from devkit.cost.closed_form import blocked_matmul, fused_xuv, latency_bound, sequential_xuv
from devkit.cost.trace_builder import TraceBuilder
from devkit.trace import HBM, SBUF

GiB, MiB = 1 << 30, 1 << 20


def test_tutorial_matmul_bytes() -> None:
    """bf16 lhsT[8192, 4096] @ rhs[8192, 8192], the AWS tutorial variants."""
    k, m, n = 8192, 4096, 8192
    tiled = blocked_matmul(k, m, n, block_m=128, block_n=512, reuse="none")
    hoisted = blocked_matmul(k, m, n, block_m=128, block_n=512, reuse="lhsT")
    block_free = blocked_matmul(k, m, n, block_m=256, block_n=1024, reuse="lhsT")
    optimized = blocked_matmul(k, m, n, block_m=2048, block_n=1024, block_k=1024, reuse="rhs")
    assert tiled.hbm_read_bytes == 16 * 64 * MiB + 32 * 128 * MiB == 5 * GiB
    assert hoisted.hbm_read_bytes == 64 * MiB + 32 * 128 * MiB
    assert block_free.hbm_read_bytes == 64 * MiB + 16 * 128 * MiB
    assert optimized.hbm_read_bytes == 8 * 64 * MiB + 128 * MiB
    for mv in (tiled, hoisted, block_free, optimized):
        assert mv.hbm_write_bytes == 64 * MiB
        assert mv.flops == 2 * k * m * n == 549_755_813_888
        assert mv.spill_bytes == 0
    assert tiled.arithmetic_intensity == pytest.approx(tiled.flops / (5 * GiB + 64 * MiB))


def test_fused_xuv_hand_numbers() -> None:
    mv = fused_xuv(1024, 2048, 512, 4096, block_tokens=512)
    assert mv.hbm_read_bytes == 1024 * 2048 * 2 + 2 * (2048 * 512 + 512 * 4096) * 2 == 16_777_216
    assert mv.hbm_write_bytes == 1024 * 4096 * 2
    assert mv.flops == 2 * 1024 * 512 * (2048 + 4096)
    assert mv.sbuf_bytes == (512 * 512 + 512 * 512 + 512 * 1024 + 1024 * 512 + 512 * 512) * 2


def test_fused_weights_stream_once_per_token_block() -> None:
    small = fused_xuv(4096, 2048, 1280, 8192, block_tokens=512)
    large = fused_xuv(4096, 2048, 1280, 8192, block_tokens=2048)
    weights = (2048 * 1280 + 1280 * 8192) * 2
    assert small.hbm_read_bytes - large.hbm_read_bytes == (8 - 2) * weights


def test_sequential_xuv_hand_numbers() -> None:
    s, h, r, n = 1024, 2048, 512, 4096
    mv = sequential_xuv(s, h, r, n)
    first_reads = 1 * h * s * 2 + h * r * 2
    second_reads = 4 * r * s * 2 + r * n * 2
    transpose = s * r * 2
    assert mv.hbm_read_bytes == first_reads + second_reads + transpose
    assert mv.hbm_write_bytes == s * r * 2 + s * n * 2 + transpose
    assert mv.flops == 2 * s * h * r + 2 * s * r * n
    # the fused kernel moves less (the intermediate never reaches HBM)
    assert fused_xuv(s, h, r, n, block_tokens=1024).hbm_bytes < mv.hbm_bytes


def test_result_strip_spills_beyond_sbuf() -> None:
    """The fully optimized kernel keeps an M x 1024 result strip in SBUF: fits at M = 8192 on trn1."""
    fits = blocked_matmul(
        8192, 8192, 16384, block_m=2048, block_n=1024, block_k=1024, reuse="rhs", target="trn1"
    )
    spills = blocked_matmul(
        8192, 16384, 16384, block_m=2048, block_n=1024, block_k=1024, reuse="rhs", target="trn1"
    )
    assert fits.spill_bytes == 0
    overflow = (1024 * 2048 + 1024 * 1024 + 16384 * 1024) * 2 - 180224 * 128
    assert spills.spill_bytes == 2 * overflow * 8 * 16


def test_latency_bound() -> None:
    mv = blocked_matmul(8192, 4096, 8192, block_m=2048, block_n=1024, block_k=1024, reuse="rhs")
    bound = latency_bound("trn1", mv.flops, mv.hbm_bytes)
    assert bound.compute_us == pytest.approx(549_755_813_888 / 92_000 / 1000)
    assert bound.memory_us == pytest.approx(
        mv.hbm_bytes / 272 / 1000
    )  # 16 DMA engines x 17 B/ns < 410 B/ns HBM
    assert bound.fixed_us == pytest.approx(2 * 1.3)
    assert bound.bound_by == "tensor"
    assert bound.latency_us == pytest.approx(bound.compute_us + 2.6)
    tiled = blocked_matmul(8192, 4096, 8192, reuse="none")
    assert latency_bound("trn1", tiled.flops, tiled.hbm_bytes).bound_by == "dma/hbm"
    assert latency_bound("trn2", mv.flops, mv.hbm_bytes).compute_us == pytest.approx(mv.flops / 79_000 / 1000)


# --- cross-check against traces that follow the same loop nests ----------------------------------


def _trace_blocked(k: int, m: int, n: int, reuse: str) -> TraceBuilder:
    """Tutorial-style tile loops (128 x 128 lhsT tiles, 128 x 512 rhs tiles, bf16) emitting loads."""
    b = TraceBuilder()
    tk, tm, tn = k // 128, m // 128, n // 512
    if reuse == "none":
        for _ in range(tm):
            for _ in range(tn):
                for _ in range(tk):
                    b.dma(partitions=128, bytes_per_partition=256)
                    b.dma(partitions=128, bytes_per_partition=1024)
                    b.matmul()
                b.dma(src=SBUF, dst=HBM, partitions=128, bytes_per_partition=1024)
    elif reuse == "lhsT":
        for _ in range(tm):
            for _ in range(tk):
                b.dma(partitions=128, bytes_per_partition=256)
            for _ in range(tn):
                for _ in range(tk):
                    b.dma(partitions=128, bytes_per_partition=1024)
                    b.matmul()
                b.dma(src=SBUF, dst=HBM, partitions=128, bytes_per_partition=1024)
    return b


@pytest.mark.parametrize("reuse", ["none", "lhsT"])
def test_closed_form_matches_trace(reuse: str) -> None:
    k, m, n = 512, 256, 1024
    report = _trace_blocked(k, m, n, reuse).schedule("trn1")
    mv = blocked_matmul(k, m, n, block_m=128, block_n=512, reuse=reuse)  # type: ignore[arg-type]
    assert report.hbm_read_bytes == mv.hbm_read_bytes
    assert report.hbm_write_bytes == mv.hbm_write_bytes
    assert report.flops == mv.flops
    bound = latency_bound("trn1", mv.flops, mv.hbm_bytes)
    assert report.latency_us >= bound.latency_us
