"""Modelled cost comparison of NeuronMM against its baselines (trn1 by default).

Runs :mod:`devkit.kernels.compare` cases in cost-only mode (``nt.tensor`` placeholders) and prints markdown
tables; ``--json`` writes every row.  Paper-scale cases take minutes each (the simulator walks every
instruction), so cases run in a process pool (``--workers``).

    python benchmarks/bench_kernels.py                      # microbenchmark + decode + MLP tables
    python benchmarks/bench_kernels.py --sizes 1024 4096    # a subset of sequence lengths
    python benchmarks/bench_kernels.py --quick              # S = 1K only, no MLP table
    python benchmarks/bench_kernels.py --json out.json
    python benchmarks/bench_kernels.py --cache rows.jsonl   # keep finished rows; rerun only missing ones

All latencies are **modelled** (devkit cost model), not measured on hardware.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from typing import Any

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from devkit.kernels import compare


def _paper(args: tuple[str, int, str]) -> dict[str, Any]:
    kernel, s_tok, target = args
    t0 = time.time()
    try:
        row = compare.paper_case(kernel, s_tok, target)
    except Exception as e:  # a baseline that cannot run at this size is reported, not fatal
        row = {"S": s_tok, "kernel": kernel, "error": f"{type(e).__name__}: {e}"}
    row["wall_s"] = round(time.time() - t0, 1)
    return row


def _mlp(args: tuple[str, float, str, int, str]) -> dict[str, Any]:
    model, ratio, kernel, s_tok, target = args
    t0 = time.time()
    try:
        row = compare.mlp_case(model, ratio, kernel, s_tok, target)
    except Exception as e:
        row = {
            "model": model,
            "ratio": ratio,
            "S": s_tok,
            "kernel": kernel,
            "error": f"{type(e).__name__}: {e}",
        }
    row["wall_s"] = round(time.time() - t0, 1)
    return row


def _decode(target: str) -> dict[str, Any]:
    return compare.decode_case(target)


def _key(kind: str, args: tuple) -> str:
    return json.dumps([kind, *args])


def _read_cache(path: str | None) -> dict[str, dict[str, Any]]:
    rows: dict[str, dict[str, Any]] = {}
    if path and os.path.exists(path):
        with open(path) as f:
            for line in f:
                if line.strip():
                    rec = json.loads(line)
                    rows[rec["key"]] = rec["row"]
    return rows


def paper_tables(rows: list[dict[str, Any]]) -> str:
    """Latency table (one row per S) and a detail table (one row per kernel and S)."""
    by: dict[int, dict[str, dict[str, Any]]] = {}
    for r in rows:
        by.setdefault(r["S"], {})[r["kernel"]] = r
    names = [k for k in compare.PAPER_KERNELS if any(k in v for v in by.values())]
    lines = [
        "| S | "
        + " | ".join(f"{k} (ms)" for k in names)
        + " | fused vs published | fused vs AWS tutorial | fused vs matmul_optimized | fused vs sequential |",
        "|---|" + "---|" * (len(names) + 4),
    ]
    ratios: dict[str, list[float]] = {
        "published_xuv_t": [],
        "aws_tutorial_xw": [],
        "matmul_optimized": [],
        "xuv_sequential": [],
    }
    for s_tok in sorted(by):
        cells = []
        for k in names:
            r = by[s_tok].get(k, {})
            cells.append(f"{r['latency_us'] / 1e3:.2f}" if "latency_us" in r else "n/a")
        fused = by[s_tok].get("xuv_fused", {}).get("latency_us")
        sp = []
        for base in ratios:
            b = by[s_tok].get(base, {}).get("latency_us")
            if fused and b:
                ratios[base].append(b / fused)
                sp.append(f"{b / fused:.2f}x")
            else:
                sp.append("n/a")
        lines.append(f"| {s_tok} | " + " | ".join(cells) + " | " + " | ".join(sp) + " |")
    means = [f"{sum(v) / len(v):.2f}x" if v else "n/a" for v in ratios.values()]
    lines.append("| mean | " + " | ".join("" for _ in names) + " | " + " | ".join(means) + " |")
    detail = compare.markdown_table(
        sorted(rows, key=lambda r: (r["S"], r["kernel"])),
        [
            ("S", "S"),
            ("kernel", "kernel"),
            (
                "latency (ms)",
                lambda r: f"{r['latency_us'] / 1e3:.3f}" if "latency_us" in r else r.get("error", ""),
            ),
            ("TensorE util", lambda r: f"{r['tensor_utilization']:.3f}" if "tensor_utilization" in r else ""),
            ("HBM read (MB)", lambda r: f"{r['hbm_read_bytes'] / 1e6:.0f}" if "hbm_read_bytes" in r else ""),
            (
                "HBM write (MB)",
                lambda r: f"{r['hbm_write_bytes'] / 1e6:.0f}" if "hbm_write_bytes" in r else "",
            ),
            ("spill (MB)", lambda r: f"{r['spill_bytes'] / 1e6:.0f}" if "spill_bytes" in r else ""),
            ("bound by", "bound_by"),
            ("note", "note"),
        ],
    )
    return "\n".join(lines) + "\n\n" + detail


def decode_table(row: dict[str, Any]) -> str:
    lat = row["latency_us"]
    return compare.markdown_table(
        [row],
        [
            ("S", "S"),
            ("latency (us)", lambda r: f"{lat:.1f}"),
            ("U+V bytes (MB)", lambda r: f"{r['weight_bytes'] / 1e6:.1f}"),
            ("HBM bound (us)", lambda r: f"{r['hbm_bound_us']:.1f}"),
            ("x HBM bound", lambda r: f"{lat / r['hbm_bound_us']:.2f}"),
            ("DMA-engine bound (us)", lambda r: f"{r['dma_engine_bound_us']:.1f}"),
            ("x DMA bound", lambda r: f"{lat / r['dma_engine_bound_us']:.2f}"),
            ("HBM read (MB)", lambda r: f"{r['hbm_read_bytes'] / 1e6:.1f}"),
            ("bound by", "bound_by"),
        ],
    )


def mlp_table(rows: list[dict[str, Any]]) -> str:
    by: dict[tuple[str, float, int], dict[str, dict[str, Any]]] = {}
    for r in rows:
        by.setdefault((r["model"], r["ratio"], r["S"]), {})[r["kernel"]] = r
    out = [
        "| model | ratio | S | H | I | r | svd_mlp (us) | sequential SVD (us) | dense_mlp (us) "
        "| fused vs seq | fused vs dense | svd_mlp util | svd_mlp HBM (MB) | dense HBM (MB) "
        "| svd_mlp bound |",
        "|" + "---|" * 15,
    ]
    for (model, ratio, s_tok), ks in sorted(by.items()):
        f, q, d = ks.get("svd_mlp", {}), ks.get("svd_mlp_sequential", {}), ks.get("dense_mlp", {})

        def lat(x: dict[str, Any]) -> str:
            return f"{x['latency_us']:.1f}" if "latency_us" in x else "n/a"

        def ratio_of(a: dict[str, Any], b: dict[str, Any]) -> str:
            return (
                f"{b['latency_us'] / a['latency_us']:.2f}x"
                if "latency_us" in a and "latency_us" in b
                else "n/a"
            )

        def hbm(x: dict[str, Any]) -> str:
            return (
                f"{(x['hbm_read_bytes'] + x['hbm_write_bytes']) / 1e6:.0f}"
                if "hbm_read_bytes" in x
                else "n/a"
            )

        out.append(
            f"| {model} | {ratio} | {s_tok} | {f.get('H', '')} | {f.get('I', '')} | {f.get('r', '')} | "
            f"{lat(f)} | {lat(q)} | {lat(d)} | {ratio_of(f, q)} | {ratio_of(f, d)} | "
            f"{f.get('tensor_utilization', 0):.3f} | {hbm(f)} | {hbm(d)} | {f.get('bound_by', '')} |"
        )
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="*", default=list(compare.PAPER_SIZES))
    ap.add_argument("--kernels", nargs="*", default=list(compare.PAPER_KERNELS))
    ap.add_argument(
        "--mlp-seq", type=int, nargs="*", default=[1, 1024], help="sequence lengths of the MLP table"
    )
    ap.add_argument("--no-mlp", action="store_true")
    ap.add_argument("--no-paper", action="store_true")
    ap.add_argument("--quick", action="store_true", help="S = 1K and decode only")
    ap.add_argument("--target", default="trn1")
    ap.add_argument("--workers", type=int, default=max(1, min(2, os.cpu_count() or 1)))
    ap.add_argument("--json", default=None, help="write all rows to this JSON file")
    ap.add_argument(
        "--cache",
        default=None,
        help="JSON-lines file of finished rows: rows found there are reused, new rows are appended "
        "as they finish (delete it after changing a kernel)",
    )
    args = ap.parse_args(argv)
    if args.quick:
        args.sizes, args.no_mlp = [1024], True

    cache = _read_cache(args.cache)
    jobs_p = (
        [] if args.no_paper else [("paper", (k, s, args.target)) for s in args.sizes for k in args.kernels]
    )
    jobs_m = []
    if not args.no_mlp:
        for m in compare.mlp_shapes():
            for s in args.mlp_seq:
                jobs_m += [("mlp", (m["model"], m["ratio"], k, s, args.target)) for k in compare.MLP_KERNELS]
    jobs = [("decode", (args.target,)), *jobs_p, *jobs_m]
    done = {_key(kind, a): cache[_key(kind, a)] for kind, a in jobs if _key(kind, a) in cache}
    todo = [(kind, a) for kind, a in jobs if _key(kind, a) not in done]
    # longest first so the pool stays busy
    todo.sort(key=lambda j: -(j[1][1] if j[0] == "paper" else j[1][3] if j[0] == "mlp" else 0))
    funcs = {"paper": _paper, "mlp": _mlp, "decode": _decode}
    with ProcessPoolExecutor(max_workers=args.workers) as pool:
        futures = {pool.submit(funcs[kind], a if kind != "decode" else a[0]): (kind, a) for kind, a in todo}
        for fut in as_completed(futures):
            kind, a = futures[fut]
            row = fut.result()
            done[_key(kind, a)] = row
            if args.cache and "error" not in row:
                with open(args.cache, "a") as f:
                    f.write(json.dumps({"key": _key(kind, a), "row": row}) + "\n")
    paper = [done[_key("paper", a)] for _, a in jobs_p]
    mlp = [done[_key("mlp", a)] for _, a in jobs_m]
    decode = done[_key("decode", (args.target,))]

    print(f"# NeuronMM cost comparison ({args.target}, modelled by the devkit cost model)\n")
    if paper:
        print("## Microbenchmark (S, 8192)·(8192, 4096)·(4096, 16384), bf16\n")
        print(paper_tables(paper) + "\n")
    print("## Decode (S = 1), xuv_fused\n")
    print(decode_table(decode) + "\n")
    if mlp:
        print("## SwiGLU MLP, SVD-compressed vs dense, bf16\n")
        print(mlp_table(mlp) + "\n")
    errors = [r for r in paper + mlp if "error" in r]
    for r in errors:
        print(f"error: {r['kernel']} S={r['S']}: {r['error']}", file=sys.stderr)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"target": args.target, "paper": paper, "decode": decode, "mlp": mlp}, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
