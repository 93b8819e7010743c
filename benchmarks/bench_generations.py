"""Modelled latency of the NeuronMM kernels in both NKI generations at the paper's shapes (cost-only).

For S in 1K ... 32K (H = 8192, r = 4096, N = 16384, bf16): ``xuv_fused`` (Beta 1) vs ``xuv_fused_b2`` (Beta 2)
and ``matmul_optimized`` vs ``matmul_optimized_b2`` (dense X[S, H] . W[H, N]) on trn1; on trn2 the Beta-2 fused
kernel with its trn2 plan at LNC 1 and LNC 2 (:func:`devkit.launch.estimate_launch`).  Prints one JSON line
per row as it goes, then a Markdown table.  Beta-2 cost-only runs execute every instruction, so the 32K rows
take a few minutes of CPU each::

    PYTHONPATH=. python benchmarks/bench_generations.py            # S = 1K ... 32K
    PYTHONPATH=. python benchmarks/bench_generations.py --s 1024 4096
"""

from __future__ import annotations

import argparse
import json
import time

from devkit.kernels import registry
from devkit.launch import estimate_launch

H, R, N = 8192, 4096, 16384
PAPER_S = (1024, 2048, 4096, 8192, 16384, 32768)


def _lat(name: str, shape: dict[str, int], target: str) -> tuple[float, float]:
    spec = registry.get(name)
    t = time.process_time()
    rep = spec.estimate(shape, "bfloat16", target)
    return rep.latency_us, time.process_time() - t


def row(s: int, parts: tuple[str, ...] = ("trn1", "trn2")) -> dict[str, float]:
    """One S: the trn1 generation comparison and/or the trn2 LNC 1 / LNC 2 estimates (``parts``)."""
    xuv = {"S": s, "H": H, "r": R, "N": N}
    dense = {"K": H, "M": s, "N": N}
    out: dict[str, float] = {"S": s}
    runs = []
    if "trn1" in parts:
        runs += [
            ("fused_b1_trn1", "xuv_fused", xuv, "trn1"),
            ("fused_b2_trn1", "xuv_fused_b2", xuv, "trn1"),
            ("dense_b1_trn1", "matmul_optimized", dense, "trn1"),
            ("dense_b2_trn1", "matmul_optimized_b2", dense, "trn1"),
        ]
    if "trn2" in parts:
        runs += [("fused_b1_trn2", "xuv_fused", xuv, "trn2")]
    for key, name, shape, target in runs:
        out[key], out[key + "_cpu_s"] = _lat(name, shape, target)
    if "trn2" in parts:
        spec = registry.get("xuv_fused_b2")
        for lnc in (1, 2):
            t = time.process_time()
            est = estimate_launch(
                spec.kernel_object(), *spec.arg_specs(xuv, "bfloat16"), lnc=lnc, target="trn2"
            )
            out[f"fused_b2_trn2_lnc{lnc}"] = est.latency_us
            out[f"fused_b2_trn2_lnc{lnc}_cpu_s"] = time.process_time() - t
    return out


def _ratio(r: dict[str, float], a: str, b: str, fmt: str = "{:.4f}") -> str:
    return fmt.format(r[a] / r[b]) if a in r and b in r else "-"


def _us(r: dict[str, float], key: str) -> str:
    return f"{r[key]:.1f}" if key in r else "-"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--s", type=int, nargs="*", default=list(PAPER_S), help="token counts S")
    ap.add_argument("--parts", nargs="*", default=["trn1", "trn2"], choices=["trn1", "trn2"])
    args = ap.parse_args()
    rows = []
    for s in args.s:
        r = row(s, tuple(args.parts))
        rows.append(r)
        print(json.dumps(r), flush=True)
    print()
    print(
        "| S | fused B1 trn1 (us) | fused B2 trn1 (us) | B2/B1 | dense B1 trn1 | dense B2 trn1 | B2/B1 | "
        "fused B2 trn2 LNC1 | LNC2 | LNC2 speedup |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['S']} | {_us(r, 'fused_b1_trn1')} | {_us(r, 'fused_b2_trn1')} | "
            f"{_ratio(r, 'fused_b2_trn1', 'fused_b1_trn1')} | {_us(r, 'dense_b1_trn1')} | "
            f"{_us(r, 'dense_b2_trn1')} | {_ratio(r, 'dense_b2_trn1', 'dense_b1_trn1')} | "
            f"{_us(r, 'fused_b2_trn2_lnc1')} | {_us(r, 'fused_b2_trn2_lnc2')} | "
            f"{_ratio(r, 'fused_b2_trn2_lnc1', 'fused_b2_trn2_lnc2', '{:.2f}x')} |"
        )


if __name__ == "__main__":
    main()
