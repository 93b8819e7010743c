"""NKI Beta 2 (``import nki``) tiled matmul: cost-only instructions per second and numerics time vs NumPy.

Run: ``python benchmarks/bench_beta2.py [--quick]``.  A benchmark, not a test; the budgets are Beta 1's
(issue 4 / issue 12): at least 100k instructions/s cost-only, numerics within 4x of NumPy's matmul.
The kernel is the tiled matmul of AWS's NKI 0.x tutorial written with dst-passing ``nki.isa``.
"""

from __future__ import annotations

import argparse

import numpy as np
from _timing import best_cpu


def _kernel():
    from devkit import compat

    compat.install()
    import nki
    import nki.isa as nisa
    import nki.language as nl

    @nki.jit
    def tiled_matmul(lhsT, rhs):
        k_dim, m_dim = lhsT.shape
        _, n_dim = rhs.shape
        out = nl.ndarray((m_dim, n_dim), dtype=lhsT.dtype, buffer=nl.shared_hbm)
        for m in nl.affine_range(m_dim // 128):
            for n in nl.affine_range(n_dim // 512):
                acc = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum)
                for k in nl.affine_range(k_dim // 128):
                    a = nl.ndarray((128, 128), dtype=lhsT.dtype, buffer=nl.sbuf)
                    b = nl.ndarray((128, 512), dtype=rhs.dtype, buffer=nl.sbuf)
                    nisa.dma_copy(dst=a, src=lhsT[k * 128 : (k + 1) * 128, m * 128 : (m + 1) * 128])
                    nisa.dma_copy(dst=b, src=rhs[k * 128 : (k + 1) * 128, n * 512 : (n + 1) * 512])
                    nisa.nc_matmul(dst=acc, stationary=a, moving=b)
                res = nl.ndarray((128, 512), dtype=out.dtype, buffer=nl.sbuf)
                nisa.tensor_copy(dst=res, src=acc)
                nisa.dma_copy(dst=out[m * 128 : (m + 1) * 128, n * 512 : (n + 1) * 512], src=res)
        return out

    return tiled_matmul


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="smaller shapes")
    ap.add_argument("--repeat", type=int, default=3, help="best of this many runs, CPU time (default 3)")
    args = ap.parse_args()
    import ml_dtypes

    import devkit

    kernel = _kernel()
    import nki
    import nki.language as nl
    import nki.typing as nt

    k_dim, m_dim, n_dim = (1024, 1024, 2048) if args.quick else (4096, 2048, 4096)
    specs = (nt.tensor[[k_dim, m_dim], nl.bfloat16], nt.tensor[[k_dim, n_dim], nl.bfloat16])
    dt_s, rep = best_cpu(lambda: devkit.estimate(kernel, *specs, target="trn2"), args.repeat)
    print(
        f"cost-only, Beta-2 tiled matmul K={k_dim} M={m_dim} N={n_dim}: {rep.instructions:,} instructions, "
        f"best of {args.repeat}: {dt_s:.2f} s = {rep.instructions / dt_s:,.0f} instr/s (target >= 100,000)"
    )
    # loop replay (devkit/sim/replay2.py) against executing every iteration: same model, only slower
    from devkit.sim.options import SimOptions

    full_options = SimOptions(numerics=False, replay_loops=False)
    dt_full, full = best_cpu(lambda: devkit.estimate(kernel, *specs, target="trn2", options=full_options), 1)
    same = full.to_dict() == rep.to_dict()  # every JSON field of the estimate
    print(
        f"  executing every iteration (replay_loops=False): {dt_full:.2f} s = {full.instructions / dt_full:,.0f} "
        f"instr/s; modelled latency {rep.latency_us:.3f} us with replay, {full.latency_us:.3f} us without "
        f"(estimate JSON {'identical' if same else 'DIFFERENT'})"
    )

    size = 512 if args.quick else 1024
    rng = np.random.default_rng(0)
    a = rng.standard_normal((size, size)).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal((size, size)).astype(ml_dtypes.bfloat16)
    a32, b32 = a.astype(np.float32), b.astype(np.float32)
    t_sim = t_np = float("inf")
    for _ in range(args.repeat):  # interleaved, so that both see the same load
        t, out = best_cpu(lambda: nki.simulate(kernel)(a, b), 1)
        t_sim = min(t_sim, t)
        t, ref = best_cpu(lambda: a32.T @ b32, 1)
        t_np = min(t_np, t)
    err = float(np.abs(out.astype(np.float32) - ref).max())
    print(
        f"numerics: {size}^3 bf16 Beta-2 tiled matmul, best of {args.repeat}: simulated {t_sim:.3f} s; NumPy fp32 "
        f"{t_np:.4f} s: {t_sim / t_np:.1f}x (target <= 4x; max abs err {err:.3g})"
    )


if __name__ == "__main__":
    main()
