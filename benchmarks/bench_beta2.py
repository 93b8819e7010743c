"""NKI Beta 2 (``import nki``) tiled matmul: cost-only instructions per second and numerics time vs NumPy.

Run: ``python benchmarks/bench_beta2.py [--quick]``.  A benchmark, not a test; the budgets are Beta 1's
(issue 4 / issue 12): at least 100k instructions/s cost-only, numerics within 4x of NumPy's matmul.
The kernel is the tiled matmul of AWS's NKI 0.x tutorial written with dst-passing ``nki.isa``, the
project's one copy in :mod:`devkit.kernels.beta2.tutorial`.
"""

from __future__ import annotations

import argparse

import numpy as np
from _timing import best_cpu, best_interleaved, bf16_matmul_operands


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="smaller shapes")
    ap.add_argument("--repeat", type=int, default=3, help="best of this many runs, CPU time (default 3)")
    args = ap.parse_args()

    import devkit
    from devkit import compat

    compat.install()  # binds ``nki`` to the simulator for the imports below
    import nki
    import nki.language as nl
    import nki.typing as nt

    from devkit.kernels.beta2.tutorial import tiled_matmul as kernel

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
    same = (full.instructions, full.latency_us) == (rep.instructions, rep.latency_us)
    print(
        f"  executing every iteration (replay_loops=False): {dt_full:.2f} s = {full.instructions / dt_full:,.0f} "
        f"instr/s; modelled latency {rep.latency_us:.3f} us with replay, {full.latency_us:.3f} us without "
        f"({'identical' if same else 'DIFFERENT'})"
    )

    size = 512 if args.quick else 1024
    a, b, a32, b32 = bf16_matmul_operands(size)
    best = best_interleaved(
        {
            "sim": lambda: best_cpu(lambda: nki.simulate(kernel)(a, b), 1),
            "numpy": lambda: best_cpu(lambda: a32.T @ b32, 1),
        },
        args.repeat,
    )
    (t_sim, out), (t_np, ref) = best["sim"], best["numpy"]
    err = float(np.abs(out.astype(np.float32) - ref).max())
    print(
        f"numerics: {size}^3 bf16 Beta-2 tiled matmul, best of {args.repeat}: simulated {t_sim:.3f} s; NumPy fp32 "
        f"{t_np:.4f} s: {t_sim / t_np:.1f}x (target <= 4x; max abs err {err:.3g})"
    )


if __name__ == "__main__":
    main()
