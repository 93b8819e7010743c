"""Closed-form FLOPs, HBM bytes and latency lower bounds for fast block-size sweeps.

Formulas follow reference/neuronmm.md section 2.10 (derived from the kernels' loop nests) and are
cross-checked against trace-based figures in tests.  Shapes use the tutorial/NeuronMM names:

* dense matmul ``lhsT[K, M]`` x ``rhs[K, N]`` -> ``out[M, N]`` (the AWS tutorial kernels);
* NeuronMM ``X[S, H]`` x ``U[H, r]`` x ``V[r, N]`` (S tokens, H hidden, r rank, N outputs).

Units: bytes, FLOPs, us for latencies.  SBUF capacity is the target's usable bytes per partition x
partitions; ``spill_bytes`` is a documented estimate of the HBM traffic caused by overflowing it
(the overflow written and read back once per pass over the contraction), not a compiler's figure.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import ceil
from typing import Literal

from devkit.cost.params import Params, default_params
from devkit.dtype_names import itemsize
from devkit.targets import Target, resolve_target

Reuse = Literal["none", "lhsT", "rhs"]


@dataclass(frozen=True)
class Movement:
    """FLOPs and bytes of one kernel call (bytes for the whole call, SBUF for the whole core)."""

    flops: int
    hbm_read_bytes: int
    hbm_write_bytes: int
    sbuf_bytes: int
    spill_bytes: int = 0

    @property
    def hbm_bytes(self) -> int:
        """HBM traffic including spills."""
        return self.hbm_read_bytes + self.hbm_write_bytes + self.spill_bytes

    @property
    def arithmetic_intensity(self) -> float:
        """FLOPs per HBM byte."""
        return self.flops / self.hbm_bytes if self.hbm_bytes else float("inf")

    def __add__(self, other: Movement) -> Movement:
        return Movement(
            self.flops + other.flops,
            self.hbm_read_bytes + other.hbm_read_bytes,
            self.hbm_write_bytes + other.hbm_write_bytes,
            max(self.sbuf_bytes, other.sbuf_bytes),
            self.spill_bytes + other.spill_bytes,
        )


def _overflow(sbuf_bytes: int, target: str | Target | None) -> int:
    """Bytes of ``sbuf_bytes`` beyond the target's usable SBUF (0 without a target)."""
    if target is None:
        return 0
    tgt = resolve_target(target)
    return max(0, sbuf_bytes - tgt.sbuf.usable_bytes_per_partition * tgt.sbuf.partitions)


def blocked_matmul(
    k: int,
    m: int,
    n: int,
    *,
    dtype: str = "bfloat16",
    out_dtype: str | None = None,
    block_m: int = 128,
    block_n: int = 512,
    block_k: int = 128,
    reuse: Reuse = "rhs",
    target: str | Target | None = None,
) -> Movement:
    """Tutorial-style blocked ``lhsT[K, M].T @ rhs[K, N]``.

    ``reuse`` says which operand stays in SBUF while the other streams:

    * ``"none"`` (tutorial *tiled*): lhsT is read ``ceil(N/block_n)`` times, rhs ``ceil(M/block_m)`` times;
    * ``"lhsT"`` (M-outer, *hoisted loads* / *block free dimension*): lhsT once, rhs
      ``ceil(M/block_m)`` times;
    * ``"rhs"`` (N-outer, *fully optimized*): rhs once, lhsT ``ceil(N/block_n)`` times; the
      ``M x block_n`` result strip stays in SBUF (it spills when larger than SBUF).
    """
    s = itemsize(dtype)
    so = itemsize(out_dtype or dtype)
    n_blocks_m, n_blocks_n, n_blocks_k = ceil(m / block_m), ceil(n / block_n), ceil(k / block_k)
    lhs, rhs = k * m * s, k * n * s
    if reuse == "none":
        reads = n_blocks_n * lhs + n_blocks_m * rhs
        sbuf = (block_k * block_m + block_k * block_n) * s + block_m * block_n * so
    elif reuse == "lhsT":
        reads = lhs + n_blocks_m * rhs
        sbuf = (k * block_m + k * block_n) * s + block_m * block_n * so
    elif reuse == "rhs":
        reads = n_blocks_n * lhs + rhs
        sbuf = (block_k * block_m + block_k * block_n) * s + m * block_n * so
    else:
        raise ValueError(f"reuse must be 'none', 'lhsT' or 'rhs', got {reuse!r}")
    spill = 2 * _overflow(sbuf, target) * n_blocks_k * n_blocks_n if reuse == "rhs" else 0
    return Movement(
        flops=2 * m * n * k,
        hbm_read_bytes=reads,
        hbm_write_bytes=m * n * so,
        sbuf_bytes=sbuf,
        spill_bytes=spill,
    )


def fused_xuv(
    s_tokens: int,
    h: int,
    r: int,
    n: int,
    *,
    block_tokens: int,
    dtype: str = "bfloat16",
    block_h: int = 512,
    block_r: int = 1024,
    block_n: int = 512,
    target: str | Target | None = None,
) -> Movement:
    """NeuronMM fused ``X[S,H] U[H,r] V[r,N]`` with token block ``block_tokens`` (B_K).

    HBM: X once, U and V once per token block, the output once; the ``(XU)^T`` strip for all ``r``
    lives in SBUF (``r * B_K`` elements) next to the X, U, V and output blocks (neuronmm.md s8).
    """
    s = itemsize(dtype)
    token_blocks = ceil(s_tokens / block_tokens)
    reads = s_tokens * h * s + token_blocks * (h * r + r * n) * s
    bk = min(block_tokens, s_tokens)
    sbuf = (r * bk + block_h * bk + block_h * block_r + block_r * block_n + bk * block_n) * s
    spill = 2 * _overflow(sbuf, target) * token_blocks
    return Movement(
        flops=2 * s_tokens * r * (h + n),
        hbm_read_bytes=reads,
        hbm_write_bytes=s_tokens * n * s,
        sbuf_bytes=sbuf,
        spill_bytes=spill,
    )


def sequential_xuv(
    s_tokens: int,
    h: int,
    r: int,
    n: int,
    *,
    dtype: str = "bfloat16",
    block_m: int = 2048,
    block_n: int = 1024,
    block_k: int = 1024,
    transpose_in_hbm: bool = True,
    target: str | Target | None = None,
) -> Movement:
    """Baseline "NKI XUV": two fully-optimized tutorial matmuls with ``XU`` through HBM.

    ``X.U`` runs as ``lhsT = X^T [H, S]``, ``rhs = U [H, r]``; then ``(XU).V`` as ``lhsT = (XU)^T [r, S]``,
    ``rhs = V [r, N]``.  With ``transpose_in_hbm`` the framework's ``.t()`` of ``XU`` between the calls
    reads and writes ``S * r`` elements once more (neuronmm.md s2.10).
    """
    passes = {"dtype": dtype, "block_m": block_m, "block_n": block_n, "block_k": block_k, "target": target}
    xu = blocked_matmul(h, s_tokens, r, reuse="rhs", **passes)  # lhsT = X^T [H, S], rhs = U [H, r]
    total = xu + blocked_matmul(r, s_tokens, n, reuse="rhs", **passes)  # lhsT = (XU)^T [r, S], rhs = V
    if transpose_in_hbm:
        sr = s_tokens * r * itemsize(dtype)
        total = total + Movement(0, sr, sr, 0)
    return total


@dataclass(frozen=True)
class Bound:
    """A latency lower bound split into its parts (us)."""

    compute_us: float
    memory_us: float
    fixed_us: float

    @property
    def latency_us(self) -> float:
        return max(self.compute_us, self.memory_us) + self.fixed_us

    @property
    def bound_by(self) -> str:
        return "tensor" if self.compute_us >= self.memory_us else "dma/hbm"


def latency_bound(
    target: str | Target,
    flops: float,
    hbm_bytes: float,
    dtype: str = "bfloat16",
    params: Params | None = None,
    serial_transfers: int = 2,
) -> Bound:
    """``max(compute, memory) + fixed``: FLOPs at TensorE peak for ``dtype``; HBM bytes at the lower of
    the per-core HBM bandwidth and the DMA engines' aggregate bandwidth; plus ``serial_transfers``
    DMA fixed latencies that no pipelining hides (the first load and the last store).
    """
    tgt = resolve_target(target)
    prm = params if params is not None else default_params(tgt.name)
    dma_bw = tgt.dma.engines * tgt.dma.engine_bw_bytes_per_ns
    bw = min(tgt.hbm.bw_bytes_per_ns, dma_bw)
    return Bound(
        compute_us=flops / tgt.peak_flops_per_ns(dtype) * 1e-3,
        memory_us=hbm_bytes / bw * 1e-3,
        fixed_us=serial_transfers * prm.dma_fixed_latency_ns * 1e-3,
    )
