"""Cost of never-written-data tracking per instruction (numerics runs), Beta 2.

Run: ``python -m devkit simulate benchmarks/bench_dataflow.py [--repeat 5]``.  A benchmark, not a test.

Three versions of one loop of 1600 small instructions (``tensor_scalar``, ``tensor_tensor``, ``activation``,
``tensor_reduce`` on ``[128, 64]`` fp32 tiles) are timed in CPU time (``time.process_time``, best of
``--repeat``; on a shared machine compare runs interleaved, and A/B against another checkout by putting it first
on ``PYTHONPATH``):

* ``clean``: every tile fully written (the fast path: no mask is computed);
* ``written part``: the tiles have never-written partitions 120:128 and the instructions read partitions 0:120
  only (a slice test per operand, :func:`devkit.sim.dataflow.dirty` / ``_clean``);
* ``computing on garbage``: the instructions read all 128 partitions, 8 of them never written (the dataflow
  rules build their masks and the results carry the never-written state, :mod:`devkit.sim.dataflow`).
"""

from __future__ import annotations

import argparse
import time

import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np

from devkit.errors import KernelError

N_ITER = 400  # 4 instructions each


@nki.jit
def loop(a, rows, written):
    x = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(x[0:written, :], a[0:written, :])
    y = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
    r = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
    for _ in range(N_ITER):
        nisa.tensor_scalar(y[0:rows, :], x[0:rows, :], nl.multiply, 1.0001)
        nisa.tensor_tensor(y[0:rows, :], y[0:rows, :], x[0:rows, :], nl.add)
        nisa.activation(y[0:rows, :], nl.exp, y[0:rows, :], scale=-1.0)
        nisa.tensor_reduce(r[0:rows, :], nl.add, y[0:rows, :], axis=1)
    out = nl.ndarray((written, 1), dtype=nl.float32, buffer=nl.shared_hbm)
    nisa.dma_copy(out, r[0:written, :])
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    a = np.random.default_rng(0).standard_normal((128, 64)).astype(np.float32)
    cases = {"clean": (128, 128), "written part": (120, 120), "computing on garbage": (128, 120)}
    best = dict.fromkeys(cases, float("inf"))
    rejected: dict[str, str] = {}
    for _ in range(args.repeat):  # interleaved
        for name, (rows, written) in cases.items():
            if name in rejected:
                continue
            t = time.process_time()
            try:
                nki.simulate(loop)(a, rows, written)
            except KernelError as e:  # a checkout from before dataflow rules (A/B runs)
                rejected[name] = f"{type(e).__name__} [{e.rule}]"
                continue
            best[name] = min(best[name], time.process_time() - t)
    for name, why in rejected.items():
        print(f"{name:22s} rejected: {why}")
    for name, s in best.items():
        if name in rejected:
            continue
        print(
            f"{name:22s} {s * 1e3:7.1f} ms CPU  {s / (4 * N_ITER) * 1e6:6.1f} us/instruction (best of {args.repeat})"
        )


if __name__ == "__main__":
    main()
