"""Shape-sweep throughput (jobs per second): the local process pool vs the Ray backend, on this machine.

Run: ``python benchmarks/bench_executor.py [--points 16] [--repeat 3] [--ray-address local|HOST:PORT]``
(needs ``ray``: ``pip install 'neuronmm-devkit[ray]'``).  Each round runs the same sweep of
``matmul_optimized`` over ``M`` (``--points`` cost-only estimates) once per backend, interleaved;
reported is the best round per backend (wall time, since the work happens in other processes) and
jobs/s = points / that time.  The Ray figure excludes connecting to the cluster (done once before the
first round) but includes scheduling and shipping every job.  With ``--ray-address local`` a
one-machine Ray with ``--jobs`` CPUs is started in this process.  This is a benchmark, not a test.
"""

from __future__ import annotations

import argparse
import os
import time


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--points", type=int, default=16, help="sweep points = jobs per run (default 16)")
    ap.add_argument("--repeat", type=int, default=3, help="interleaved rounds; best of each (default 3)")
    ap.add_argument("--jobs", type=int, default=2, help="local worker processes / local Ray CPUs (default 2)")
    ap.add_argument(
        "--ray-address", default=os.environ.get("RAY_ADDRESS") or "local", help="Ray cluster (default local)"
    )
    args = ap.parse_args()
    if args.points < 1 or args.repeat < 1 or args.jobs < 1:
        ap.error("--points, --repeat and --jobs must be at least 1")
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    from devkit.workflow import catalog, executor
    from devkit.workflow import sweep as sweeper

    spec = catalog.get("matmul_optimized")
    sweep = sweeper.resolve_sweep(spec, "M", [128 * k for k in range(1, args.points + 1)])
    lines = sweeper.lines_of(spec, catalog.ref_of(spec), with_baselines=False)
    local = executor.create("local", jobs=args.jobs)
    ray = executor.create("ray", jobs=args.jobs, address=args.ray_address)
    print(
        f"{args.points}-point sweep of matmul_optimized over M; local: {local.describe()}; ray: {ray.describe()}"
    )
    best: dict[str, float] = {}
    rows: dict[str, list] = {}
    for _ in range(args.repeat):
        for name, ex in (("local", local), ("ray", ray)):
            t0 = time.perf_counter()
            result = sweeper.run_sweep(spec, sweep, lines, jobs=ex)
            wall = time.perf_counter() - t0
            best[name] = min(best.get(name, float("inf")), wall)
            rows[name] = result.rows
    ray.close()
    assert rows["local"] == rows["ray"], "the backends disagree"
    for name in ("local", "ray"):
        print(
            f"{name:>5}: best {best[name]:.2f} s for {args.points} jobs = {args.points / best[name]:.2f} jobs/s"
        )
    print("same results from both backends; the machine may be shared (wall times)")


if __name__ == "__main__":
    main()
