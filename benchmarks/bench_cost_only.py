"""Cost-only simulation throughput (instructions per second) and numerics-mode speed vs NumPy.

Run: ``python benchmarks/bench_cost_only.py [--quick]``.  Prints both figures; this is a benchmark,
not a test (issue 4 targets: >= 100k instructions/s cost-only; numerics within 4x of NumPy's matmul).
"""

from __future__ import annotations

import argparse
import time

import numpy as np


def _kernels():
    from devkit import compat

    compat.install()
    import neuronxcc.nki as nki
    import neuronxcc.nki.isa as nisa
    import neuronxcc.nki.language as nl

    @nki.jit
    def tiled_matmul(lhsT, rhs):
        """Tutorial-style tiled matmul: PSUM accumulation over K tiles, one load per operand tile."""
        k_dim, m_dim = lhsT.shape
        _, n_dim = rhs.shape
        out = nl.ndarray((m_dim, n_dim), dtype=lhsT.dtype, buffer=nl.shared_hbm)
        for m in nl.affine_range(m_dim // 128):
            for n in nl.affine_range(n_dim // 512):
                acc = nl.zeros((128, 512), nl.float32, buffer=nl.psum)
                for k in nl.affine_range(k_dim // 128):
                    a = nl.load(lhsT[k * 128 : (k + 1) * 128, m * 128 : (m + 1) * 128])
                    b = nl.load(rhs[k * 128 : (k + 1) * 128, n * 512 : (n + 1) * 512])
                    acc += nisa.nc_matmul(a, b)
                res = nl.copy(acc, dtype=out.dtype)
                nl.store(out[m * 128 : (m + 1) * 128, n * 512 : (n + 1) * 512], value=res)
        return out

    return tiled_matmul


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    import ml_dtypes

    import devkit

    kernel = _kernels()
    import neuronxcc.nki.language as nl
    import neuronxcc.nki.typing as nt

    k_dim, m_dim, n_dim = (2048, 2048, 4096) if args.quick else (8192, 4096, 8192)
    t0 = time.perf_counter()
    rep = devkit.estimate(
        kernel, nt.tensor[[k_dim, m_dim], nl.bfloat16], nt.tensor[[k_dim, n_dim], nl.bfloat16]
    )
    dt_s = time.perf_counter() - t0
    print(
        f"cost-only: {rep.instructions} instructions in {dt_s:.2f} s = {rep.instructions / dt_s:,.0f} instr/s "
        f"(modelled latency {rep.latency_us:,.0f} us on trn1)"
    )

    size = 1024 if args.quick else 2048
    rng = np.random.default_rng(0)
    a = rng.standard_normal((size, size)).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal((size, size)).astype(ml_dtypes.bfloat16)
    a32, b32 = a.astype(np.float32), b.astype(np.float32)
    t0 = time.perf_counter()
    ref = a32.T @ b32
    t_np = time.perf_counter() - t0
    t0 = time.perf_counter()
    out = devkit.simulate(kernel, a, b)
    t_sim = time.perf_counter() - t0
    err = float(np.abs(out.astype(np.float32) - ref).max())
    print(
        f"numerics: {size}^3 bf16 tiled matmul simulated in {t_sim:.2f} s vs NumPy fp32 {t_np:.2f} s "
        f"= {t_sim / t_np:.1f}x (max abs err {err:.3g})"
    )


if __name__ == "__main__":
    main()
