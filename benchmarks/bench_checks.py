"""Benchmark: cost of the simulator's hazard checks on matmul kernels (issue 3; target <= 30 %).

Simulates tutorial-style matmul kernels twice per repetition -- with every check on (the default
``SimOptions()``: uninitialised-read tracking, ``affine_range`` race checking, bounds, capacity,
scope) and with the two optional checks off (``SimOptions(check_uninit=False, check_races=False)``)
-- and reports the best CPU time of each and the overhead ``checked / unchecked - 1``.

The kernels follow the AWS NKI matmul tutorial (tiled, the project's one copy in
:mod:`devkit.kernels.tutorial`; hoisted loads, blocked free dimensions and fully optimized with SBUF
accumulation, written here), so the figure does not move when the project's kernels change.
``--project`` also times ``devkit.kernels.matmul`` when it is importable.

Usage::

    python benchmarks/bench_checks.py [--size 2048] [--repeat 5] [--project]

Prints one row per kernel and the total; exits 1 if the total overhead is above the 30 % target.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from devkit import compat

if not compat.is_installed():
    compat.install()

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl

import devkit
from devkit.kernels.tutorial import tiled_matmul as mm_tiled
from devkit.sim.options import SimOptions

GOAL = 0.30
TILE_K, TILE_M, TILE_N = 128, 128, 512


@nki.jit
def mm_hoisted(lhsT: Any, rhs: Any) -> Any:
    """A column of lhsT tiles stays in SBUF (block dimension) while rhs streams past it."""
    K, M = lhsT.shape
    _, N = rhs.shape
    out = nl.ndarray((M, N), dtype=lhsT.dtype, buffer=nl.shared_hbm)
    i_l = nl.mgrid[0:TILE_K, 0:TILE_M]
    i_r = nl.mgrid[0:TILE_K, 0:TILE_N]
    i_o = nl.mgrid[0:TILE_M, 0:TILE_N]
    for m in nl.affine_range(M // TILE_M):
        lt = nl.ndarray((K // TILE_K, nl.par_dim(TILE_K), TILE_M), dtype=lhsT.dtype, buffer=nl.sbuf)
        for k in nl.affine_range(K // TILE_K):
            lt[k, i_l.p, i_l.x] = nl.load(lhsT[k * TILE_K + i_l.p, m * TILE_M + i_l.x])
        for n in nl.affine_range(N // TILE_N):
            rt = nl.ndarray((K // TILE_K, nl.par_dim(TILE_K), TILE_N), dtype=rhs.dtype, buffer=nl.sbuf)
            for k in nl.affine_range(K // TILE_K):
                rt[k, i_r.p, i_r.x] = nl.load(rhs[k * TILE_K + i_r.p, n * TILE_N + i_r.x])
            acc = nl.zeros((TILE_M, TILE_N), nl.float32, buffer=nl.psum)
            for k in nl.affine_range(K // TILE_K):
                acc[...] += nisa.nc_matmul(lt[k, i_l.p, i_l.x], rt[k, i_r.p, i_r.x])
            nl.store(out[m * TILE_M + i_o.p, n * TILE_N + i_o.x], value=nl.copy(acc, dtype=out.dtype))
    return out


@nki.jit
def mm_optimized(lhsT: Any, rhs: Any, bm: int = 2, bn: int = 2, bk: int = 4) -> Any:
    """Blocked on M, N and K; partial products accumulate in an SBUF result block across K blocks."""
    K, M = lhsT.shape
    _, N = rhs.shape
    out = nl.ndarray((M, N), dtype=lhsT.dtype, buffer=nl.shared_hbm)
    BM, BN, BK = TILE_M * bm, TILE_N * bn, TILE_K * bk
    i_mm_l = nl.mgrid[0:TILE_K, 0:TILE_M]
    i_mm_r = nl.mgrid[0:TILE_K, 0:TILE_N]
    i_o = nl.mgrid[0:TILE_M, 0:TILE_N]
    for n in nl.affine_range(N // BN):
        res = nl.zeros((M // BM, bm, bn, nl.par_dim(TILE_M), TILE_N), dtype=lhsT.dtype, buffer=nl.sbuf)
        for k in nl.sequential_range(K // BK):
            i_r = nl.mgrid[0:TILE_K, 0:BN]
            rt = nl.ndarray((bk, nl.par_dim(TILE_K), BN), dtype=rhs.dtype, buffer=nl.sbuf)
            for kk in nl.affine_range(bk):
                rt[kk, i_r.p, i_r.x] = nl.load(rhs[(bk * k + kk) * TILE_K + i_r.p, BN * n + i_r.x])
            for m in nl.affine_range(M // BM):
                i_l = nl.mgrid[0:TILE_K, 0:BM]
                lt = nl.ndarray((bk, nl.par_dim(TILE_K), BM), dtype=lhsT.dtype, buffer=nl.sbuf)
                for kk in nl.affine_range(bk):
                    lt[kk, i_l.p, i_l.x] = nl.load(lhsT[(bk * k + kk) * TILE_K + i_l.p, BM * m + i_l.x])
                for jn in nl.affine_range(bn):
                    for jm in nl.affine_range(bm):
                        acc = nl.zeros((TILE_M, TILE_N), dtype=nl.float32, buffer=nl.psum)
                        for kk in nl.affine_range(bk):
                            acc[...] += nisa.nc_matmul(
                                lt[kk, i_mm_l.p, jm * TILE_M + i_mm_l.x],
                                rt[kk, i_mm_r.p, jn * TILE_N + i_mm_r.x],
                            )
                        res[m, jm, jn, i_o.p, i_o.x] += acc[i_o.p, i_o.x]
        for m in nl.affine_range(M // BM):
            for jm in nl.affine_range(bm):
                packed = nl.ndarray((TILE_M, BN), dtype=lhsT.dtype, buffer=nl.sbuf)
                for jn in nl.affine_range(bn):
                    packed[i_o.p, jn * TILE_N + i_o.x] = nl.copy(res[m, jm, jn, i_o.p, i_o.x])
                i_p = nl.mgrid[0:TILE_M, 0:BN]
                nl.store(out[(bm * m + jm) * TILE_M + i_p.p, BN * n + i_p.x], value=packed[i_p.p, i_p.x])
    return out


CHECKED = SimOptions()
UNCHECKED = SimOptions(check_uninit=False, check_races=False)


def best_cpu_times(fns: list[Callable[[], Any]], repeat: int) -> list[float]:
    """Best CPU time (this process) of each function over ``repeat`` rounds; the functions alternate
    within a round so that a change of machine load affects all of them alike."""
    best = [float("inf")] * len(fns)
    for _ in range(repeat):
        for i, fn in enumerate(fns):
            t0 = time.process_time()
            fn()
            best[i] = min(best[i], time.process_time() - t0)
    return best


def cases(size: int, project: bool) -> list[tuple[str, Any, tuple]]:
    rng = np.random.default_rng(0)
    lhsT = rng.standard_normal((size, size)).astype(np.float32)
    rhs = rng.standard_normal((size, size)).astype(np.float32)
    out = [
        ("tiled", mm_tiled, (lhsT, rhs)),
        ("hoisted", mm_hoisted, (lhsT, rhs)),
        ("optimized", mm_optimized, (lhsT, rhs)),
    ]
    if project:
        try:
            from devkit.kernels import matmul as km
        except Exception as e:
            print(f"(kernels.matmul not importable: {e})")
        else:
            for name in ("matmul_tiled", "matmul_hoisted", "matmul_blocked", "matmul_optimized"):
                if hasattr(km, name):
                    out.append((f"kernels.{name}", getattr(km, name), (lhsT, rhs)))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--size", type=int, default=2048, help="M = N = K (multiple of 1024)")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--project", action="store_true", help="also time kernels.matmul")
    args = ap.parse_args(argv)

    rows = []
    for name, k, arrs in cases(args.size, args.project):
        ref = arrs[0].T @ arrs[1]
        res = devkit.simulate(k, *arrs, options=CHECKED)  # warm-up and correctness
        if not np.allclose(res, ref, rtol=1e-3, atol=1e-2):
            print(f"{name}: wrong result", file=sys.stderr)
            return 2
        on, off = best_cpu_times(
            [lambda k=k, arrs=arrs, o=o: devkit.simulate(k, *arrs, options=o) for o in (CHECKED, UNCHECKED)],
            args.repeat,
        )
        rows.append((name, on, off))

    print(f"{'kernel':<26}{'checks on (s)':>15}{'checks off (s)':>16}{'overhead':>10}")
    for name, on, off in rows:
        print(f"{name:<26}{on:>15.3f}{off:>16.3f}{on / off - 1:>10.1%}")
    ton = sum(r[1] for r in rows)
    toff = sum(r[2] for r in rows)
    total = ton / toff - 1
    print(f"{'total':<26}{ton:>15.3f}{toff:>16.3f}{total:>10.1%}   (target <= {GOAL:.0%})")
    return 0 if total <= GOAL else 1


if __name__ == "__main__":
    sys.exit(main())
