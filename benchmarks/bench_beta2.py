"""NKI Beta 2 (``import nki``) tiled matmul: cost-only instructions per second and numerics time vs NumPy.

Run: ``python benchmarks/bench_beta2.py [--quick] [--numerics-only]``.  A benchmark, not a test; the budgets
are Beta 1's (issue 4 / issue 12): at least 100k instructions/s cost-only, numerics within 4x of NumPy's matmul.
The kernel is the tiled matmul of AWS's NKI 0.x tutorial written with dst-passing ``nki.isa``, the
project's one copy in :mod:`devkit.kernels.beta2.tutorial`.

The numerics comparison is CPU time (``time.process_time``: another process's load on a shared machine does
not count) of the same job on both sides, interleaved, best of ``--numerics-repeat``:

* simulated: ``nki.simulate(kernel)(a, b)`` with bf16 ``a``, ``b``; the kernel multiplies bf16 tiles with fp32
  accumulation in PSUM and returns a bf16 array;
* NumPy: the same dtype path, ``(a.astype(float32).T @ b.astype(float32)).astype(bfloat16)`` -- bf16 inputs
  widened to fp32, one fp32 matmul (fp32 accumulation), the result rounded to bf16.

Both run on one BLAS thread.  The simulator uses one for tile-sized products (``devkit.nki.runner``), and
``process_time`` adds up every thread's CPU time, so a multi-threaded NumPy would be charged for its threads'
synchronisation too (the figure then swung between about 3x and 5x from run to run).  The plain fp32
``a32.T @ b32`` figure (inputs widened beforehand, result left in fp32) is printed for reference.
"""

from __future__ import annotations

import argparse

import numpy as np
from _timing import best_cpu, bf16_matmul_operands
from threadpoolctl import threadpool_limits


def _kernel():
    from devkit import compat

    compat.install()  # binds ``nki`` to the simulator for the kernel module's imports
    from devkit.kernels.beta2.tutorial import tiled_matmul

    return tiled_matmul


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="smaller shapes")
    ap.add_argument(
        "--repeat", type=int, default=3, help="cost-only: best of this many runs, CPU time (default 3)"
    )
    ap.add_argument(
        "--numerics-repeat",
        type=int,
        default=9,
        help="numerics: best of this many interleaved runs (default 9)",
    )
    ap.add_argument("--numerics-only", action="store_true", help="skip the cost-only figures")
    ap.add_argument(
        "--profile",
        type=int,
        default=0,
        metavar="N",
        help="also print the N functions of one numerics run with "
        "the most CPU time of their own (cProfile, process_time)",
    )
    args = ap.parse_args()
    if args.repeat < 1 or args.numerics_repeat < 1:
        ap.error("--repeat and --numerics-repeat must be at least 1")
    kernel = _kernel()
    if not args.numerics_only:
        _cost_only(kernel, args)
    _numerics(kernel, args)


def _cost_only(kernel: object, args: argparse.Namespace) -> None:
    import nki.language as nl
    import nki.typing as nt

    import devkit

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


def _numerics(kernel: object, args: argparse.Namespace) -> None:
    import ml_dtypes
    import nki

    bf16 = ml_dtypes.bfloat16
    size = 512 if args.quick else 1024
    a, b, a32, b32 = bf16_matmul_operands(size)

    def reference() -> np.ndarray:  # the kernel's dtype path: bf16 in, fp32 accumulate, bf16 out
        return (a.astype(np.float32).T @ b.astype(np.float32)).astype(bf16)

    t_sim = t_np = t_fp32 = float("inf")
    out = ref = None
    with threadpool_limits(limits=1, user_api="blas"):
        for _ in range(args.numerics_repeat):  # interleaved, so that both see the same load
            t, out = best_cpu(lambda: nki.simulate(kernel)(a, b), 1)
            t_sim = min(t_sim, t)
            t, ref = best_cpu(reference, 1)
            t_np = min(t_np, t)
            t_fp32 = min(t_fp32, best_cpu(lambda: a32.T @ b32, 1)[0])
        if args.profile:
            _profile(lambda: nki.simulate(kernel)(a, b), args.profile)
    err = float(np.abs(out.astype(np.float32) - ref.astype(np.float32)).max())
    print(
        f"numerics: {size}^3 bf16 Beta-2 tiled matmul, CPU time, one BLAS thread, best of {args.numerics_repeat}: "
        f"simulated {t_sim:.4f} s; NumPy bf16->fp32 matmul->bf16 {t_np:.4f} s: {t_sim / t_np:.2f}x (target <= 4x); "
        f"NumPy fp32 matmul alone {t_fp32:.4f} s: {t_sim / t_fp32:.2f}x (max abs err {err:.3g})"
    )


def _profile(run: object, top: int) -> None:
    import cProfile
    import pstats
    import time

    prof = cProfile.Profile(time.process_time)
    prof.runcall(run)
    pstats.Stats(prof).sort_stats("tottime").print_stats(top)


if __name__ == "__main__":
    main()
