"""Regenerate ``docs/_gen/validation.json``: the cost model's predictions for the published anchors.

The four AWS NKI matrix-multiplication tutorial kernels were timed by AWS on trn1 (``[[anchors]]`` of
``devkit/cost/params.toml``).  This script estimates them with ``devkit cost`` from an unmodified copy
of the tutorial file (which is AWS code and is not part of this repository: point the script at your
copy of ``general/nki/examples/matrix_multiplication/matrix_multiplication_nki_kernels.py`` from the
aws-neuron-sdk docs repository, SDK 2.20-2.26) and records the predictions; the docs hook joins them
with the measurements (``docs/cost-model.md``, "Validation").

    python docs/_gen/validation.py PATH/TO/matrix_multiplication_nki_kernels.py

Each estimate is cost-only and takes a few seconds on one core.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
KERNELS = (
    "nki_matmul_tiled_",
    "nki_matmul_hoist_load_",
    "nki_matmul_block_free_dimension_",
    "nki_matmul_fully_optimized_",
)
ARGS = ("bfloat16[8192,4096]", "bfloat16[8192,8192]")


def _git_commit() -> str:
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--", "devkit"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        return commit + ("+dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def estimate(path: str, kernel: str, target: str) -> dict:
    cmd = [
        sys.executable,
        "-m",
        "devkit",
        "cost",
        f"{path}:{kernel}",
        *[a for x in ARGS for a in ("--arg", x)],
        "--target",
        target,
        "--json",
    ]
    t0 = time.time()
    out = subprocess.run(
        cmd, capture_output=True, text=True, check=True, env={**os.environ, "OMP_NUM_THREADS": "1"}
    )
    rep = json.loads(out.stdout)
    return {
        "kernel": kernel,
        "predicted_us": rep["latency_us"],
        "bound_by": rep["bound_by"],
        "tensor_utilization": rep["tensor_utilization"],
        "hbm_read_bytes": rep["hbm_read_bytes"],
        "instructions": rep["instructions"],
        "engine_busy_us": rep["engine_busy_us"],
        "wall_s": round(time.time() - t0, 1),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("tutorial_file", help="the AWS tutorial's matrix_multiplication_nki_kernels.py")
    ap.add_argument("--target", default="trn1")
    ap.add_argument("--out", default=str(HERE / "validation.json"))
    args = ap.parse_args(argv)
    from devkit import __version__

    rows = []
    for k in KERNELS:
        print(f"estimating {k} ...", file=sys.stderr, flush=True)
        rows.append(estimate(args.tutorial_file, k, args.target))
        print(f"  {rows[-1]['predicted_us'] / 1000:.2f} ms ({rows[-1]['wall_s']} s)", file=sys.stderr)
    data = {
        "target": args.target,
        "args": list(ARGS),
        "source": "AWS NKI tutorial matrix_multiplication_nki_kernels.py (SDK 2.20-2.26), unmodified",
        "devkit_version": __version__,
        "git_commit": _git_commit(),
        "date": datetime.date.today().isoformat(),
        "rows": rows,
    }
    Path(args.out).write_text(json.dumps(data, indent=2) + "\n")
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
