"""Benchmark: pure scheduling throughput of devkit.cost.scheduler.Scheduler (instructions per second).

Builds two synthetic traces in memory first (not timed), shaped like the AWS tutorial matmuls:

* ``memory-bound``: per k-step two loads and one matmul (tiled kernel), a PSUM->SBUF copy and a store
  per output tile: 2/3 of the instructions are DMA transfers;
* ``compute-bound``: blocks of 8 accumulating matmuls, a vector add of the PSUM tile into SBUF, and a
  load every 32 matmuls (fully optimized kernel).

Then times ``emit`` + ``finish`` + ``report`` over each trace, best of ``--repeat`` runs, in CPU
seconds of this process (``time.process_time``: other load on a shared machine does not count;
wall-clock figures are printed too).  Usage::

    python benchmarks/bench_scheduler.py [--instructions 600000] [--target trn1]

The target is >= 500k instructions/s (issue 4); the script prints the figures and exits 1 below it.
"""

from __future__ import annotations

import argparse
import sys
import time

from devkit.cost.scheduler import Scheduler
from devkit.cost.trace_builder import TraceBuilder
from devkit.trace import MemoryStats

GOAL_PER_S = 500_000


def memory_bound(n: int) -> TraceBuilder:
    b = TraceBuilder("tiled.py")
    while len(b) < n:
        prev = None
        for _ in range(64):
            lhs = b.dma(bytes_per_partition=256, line=10)
            rhs = b.dma(bytes_per_partition=1024, line=11)
            prev = b.matmul(deps=[lhs, rhs] if prev is None else [lhs, rhs, prev], line=12)
        cp = b.vector("tensor_copy", in_buffer="psum", deps=[prev], line=13)
        b.dma(src="sbuf", dst="hbm", deps=[cp], line=14)
    return b


def compute_bound(n: int) -> TraceBuilder:
    b = TraceBuilder("optimized.py")
    acc = None
    while len(b) < n:
        ld = b.dma(bytes_per_partition=4096, line=20)
        for _ in range(4):
            prev = None
            for _ in range(8):
                prev = b.matmul(deps=[ld] if prev is None else [ld, prev], line=21)
            deps = [prev] if acc is None else [prev, acc]
            acc = b.vector("tensor_tensor", inputs=2, in_buffer="psum", deps=deps, line=22, op="add")
    return b


def run(trace: TraceBuilder, target: str, repeat: int) -> tuple[float, float, float]:
    """Best (instructions per CPU second, per wall second) over ``repeat`` runs, and the latency."""
    best_cpu = best_wall = float("inf")
    latency_us = 0.0
    for _ in range(repeat):
        sched = Scheduler(target, kernel_name=trace.filename)
        cpu0, wall0 = time.process_time(), time.perf_counter()
        emit = sched.emit
        for instr in trace.instrs:
            emit(instr)
        sched.finish(MemoryStats())
        latency_us = sched.report().latency_us
        best_cpu = min(best_cpu, time.process_time() - cpu0)
        best_wall = min(best_wall, time.perf_counter() - wall0)
    return len(trace) / best_cpu, len(trace) / best_wall, latency_us


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--instructions", type=int, default=300_000)
    ap.add_argument("--target", default="trn1")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
    ok = True
    for name, build in (("memory-bound", memory_bound), ("compute-bound", compute_bound)):
        trace = build(args.instructions)
        rate, wall_rate, latency_us = run(trace, args.target, args.repeat)
        ok &= rate >= GOAL_PER_S
        print(
            f"{name:14s} {len(trace):>9,} instructions  {rate / 1e3:6.0f} k instr/CPU-s  "
            f"({wall_rate / 1e3:.0f} k/s wall)  modelled latency {latency_us / 1e3:,.2f} ms"
        )
    print(f"goal: {GOAL_PER_S / 1e3:.0f} k instr/s -> {'OK' if ok else 'BELOW GOAL'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
