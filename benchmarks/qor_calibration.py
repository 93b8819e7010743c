"""Calibration report: the cost model against published hardware latencies of unmodified kernels.

Run (about two minutes)::

    tar xzf /work/shared/corpora/nki-samples-0898a77.tar.gz -C /tmp/qor
    python benchmarks/qor_calibration.py --samples /tmp/qor/nki-samples-0898a77 --out docs/calibration.md

Points: the four AWS matmul-tutorial latencies (``[[anchors]]`` of ``devkit/cost/params.toml``) and the QoR
thresholds of the nki-samples 0898a77 unit tests (``test/unit/*_perf``: a measured percentile, sometimes
times a margin; the margin baked into a threshold is divided out, and the result is read as an upper bound
near the measurement).  The nki-samples perf tests run unmodified through ``devkit simulate -m pytest``;
``benchmarks/_qor_plugin.py`` records each modelled latency.  Not run: flash attention forward/backward
(their thresholds are not latencies of the configuration the tests build) and the trn2-only double-row
matmul.

Leave-one-family-out: a parameter derived from a family's points (``fitted_from`` in ``params.toml``) is
replaced, for that family's points, by the value the remaining families give.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "simulator_tests"))

#: Test file -> (family, margin baked into the threshold parameter).
FAMILIES = {
    "test_SD_attention_small_head.py": ("sd_attention", 1.0),
    "test_allocated_SD_attention_small_head.py": ("sd_attention_allocated", 1.0),
    "test_adaptive_avg_pool2d.py": ("adaptive_avg_pool2d", 1.05),
    "test_rmsnorm_qkv.py": ("rmsnorm_qkv", 1.0),
    "test_resize_nearest.py": ("resize_nearest", 1.0),
    "test_select_and_scatter.py": ("select_and_scatter", 1.0),
}
#: Per family left out: the parameter values the other families give (see params.toml sources).
LOFO = {
    "mmt": {"dma_transfer_engine_ns": 0.0},  # derived from the tiled tutorial alone
    "rmsnorm_qkv": {"kernel_fixed_ns": 4900.0},  # adaptive_avg_pool2d's point alone
    "adaptive_avg_pool2d": {"kernel_fixed_ns": 5500.0},  # median of the rmsnorm_qkv points
}
WITHIN = 0.35


def run_samples(samples: Path, overrides: dict[str, float], select: str) -> list[dict]:
    with tempfile.TemporaryDirectory() as tmp:
        stub = Path(tmp) / "scipy"
        stub.mkdir()
        (stub / "__init__.py").write_text("")
        # environment shim: the SD attention tests import scipy.special.softmax for their numerics checks
        (stub / "special.py").write_text("def softmax(*a, **k):\n    raise NotImplementedError\n")
        out = Path(tmp) / "qor.jsonl"
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(samples / "src"), str(ROOT / "benchmarks"), tmp])
        env["QOR_OUT"], env["QOR_PARAMS"] = str(out), json.dumps(overrides)
        env.setdefault("OPENBLAS_NUM_THREADS", "1")
        for var in ("DEVKIT_TARGET", "NEURON_PLATFORM_TARGET_OVERRIDE", "NKI_NC_VERSION"):
            env.pop(var, None)
        cmd = [sys.executable, "-m", "devkit", "simulate", "-m", "pytest", "-q", "test/unit", "-k", select]
        cmd += ["-p", "_qor_plugin", "-p", "no:cacheprovider"]
        subprocess.run(cmd, cwd=samples, env=env, capture_output=True, text=True, check=False)
        return [json.loads(line) for line in out.read_text().splitlines()] if out.exists() else []


def sample_points(records: list[dict]) -> dict[str, dict]:
    points = {}
    for r in records:
        fname = r["test"].split("::")[0].split("/")[-1]
        if fname not in FAMILIES or r["threshold_us"] is None:
            continue
        family, margin = FAMILIES[fname]
        pid = family + r["test"][r["test"].index("[") :]
        points[pid] = {
            "family": family,
            "measured_us": r["threshold_us"] / margin,
            "modelled_us": r["modelled_us"],
        }
    return points


def mmt_points(overrides: dict[str, float]) -> dict[str, dict]:
    from devkit import compat

    compat.install()
    from test_cost_anchors import KERNELS, _estimate

    import devkit.cost.instr_cost as instr_cost
    from devkit.cost.params import default_params, load_params

    instr_cost.default_params = lambda target: default_params(target).replace(**overrides)
    try:
        measured = {a.id: a.measured_us for a in load_params().anchors}
        return {
            a: {
                "family": "mmt",
                "measured_us": measured[a],
                "modelled_us": _estimate(k, 8192, 4096, 8192).latency_us,
            }
            for a, (k, _) in KERNELS.items()
        }
    finally:
        instr_cost.default_params = default_params


def params_table() -> list[str]:
    from devkit.cost.params import load_params

    ps = load_params()
    lines = [
        "| parameter | value (default; per-target overrides) | unit | method | source |",
        "|---|---|---|---|---|",
    ]
    for name, spec in ps.specs.items():
        overrides = "; ".join(f"{t} {ovs[name].value:g}" for t, ovs in ps.overrides.items() if name in ovs)
        value = f"{spec.value:g}" + (f" ({overrides})" if overrides else "")
        fitted = f" from {', '.join(spec.fitted_from)}" if spec.fitted_from else ""
        lines.append(f"| `{name}` | {value} | {spec.unit} | {spec.method}{fitted} | {spec.source} |")
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--samples", type=Path, required=True, help="extracted nki-samples-0898a77 directory")
    ap.add_argument("--out", type=Path, default=None, help="write the markdown report here")
    args = ap.parse_args()
    select = "perf and not flash and not double_row"
    points = {**mmt_points({}), **sample_points(run_samples(args.samples, {}, select))}
    lofo: dict[str, float] = {}
    for family, overrides in LOFO.items():
        if family == "mmt":
            got = mmt_points(overrides)
        else:
            test = next(f for f, (fam, _) in FAMILIES.items() if fam == family)
            got = sample_points(run_samples(args.samples, overrides, f"{select} and {test[:-3]}"))
        lofo.update({pid: p["modelled_us"] for pid, p in got.items() if p["family"] == family})
    rows, ok, ok_lofo = [], 0, 0
    for pid, p in points.items():
        ratio = p["modelled_us"] / p["measured_us"]
        lo = lofo.get(pid, p["modelled_us"]) / p["measured_us"]
        ok += abs(ratio - 1) <= WITHIN
        ok_lofo += abs(lo - 1) <= WITHIN
        rows.append(
            f"| {p['family']} | `{pid}` | {p['measured_us']:,.1f} | {p['modelled_us']:,.1f} | {ratio:.2f} | {lo:.2f} |"
        )
    n = len(points)
    mmt = [
        points[a]["modelled_us"]
        for a in ("mmt_tiled_trn1", "mmt_hoist_trn1", "mmt_block_free_trn1", "mmt_fully_optimized_trn1")
    ]
    checks = [("tutorial v1 > v2 > v3 > v4 (modelled)", mmt == sorted(mmt, reverse=True))]

    def config(pid: str) -> str:  # the point's parameters without its threshold
        return pid[pid.index("[") + 1 :].rsplit("-", 1)[0]

    plain = {config(k): p for k, p in points.items() if k.startswith("sd_attention[")}
    for key, alloc in ((config(k), p) for k, p in points.items() if k.startswith("sd_attention_allocated[")):
        if key in plain:
            faster = alloc["modelled_us"] < plain[key]["modelled_us"]
            checks.append((f"SD attention [{key}]: allocated faster than not (measured: yes)", faster))
    geo = statistics.geometric_mean([p["modelled_us"] / p["measured_us"] for p in points.values()])
    text = [
        "# Cost model calibration report",
        "",
        "Generated by `python benchmarks/qor_calibration.py --samples <nki-samples-0898a77> --out docs/calibration.md`",
        "(see the script's docstring). Measured = published latency (nki-samples QoR thresholds with their",
        "baked-in margin divided out: upper bounds near the measurement). Ratio = modelled / measured. LOFO =",
        "leave-one-family-out: the point modelled with the parameters derived without its family.",
        "",
        "## Parameters",
        "",
        *params_table(),
        "",
        "Hardware numbers (clocks, bandwidths, DMA engines, descriptor overhead, transpose unit) are in",
        "`devkit/targets/<name>.toml`, each with its source and kind (documented, derived or assumed).",
        "",
        "## Points",
        "",
        "| family | point | measured us | modelled us | ratio | LOFO ratio |",
        "|---|---|---|---|---|---|",
        *rows,
        "",
        "## Summary",
        "",
        f"- points within {WITHIN:.0%}: {ok} of {n} ({ok / n:.0%}); "
        f"leave-one-family-out: {ok_lofo} of {n} ({ok_lofo / n:.0%})",
        f"- geometric mean of modelled / measured: {geo:.2f}",
        *(f"- {name}: {'yes' if good else 'NO'}" for name, good in checks),
    ]
    report = "\n".join(text) + "\n"
    if args.out:
        args.out.write_text(report, encoding="utf-8")
    print(report)


if __name__ == "__main__":
    main()
