"""The HTML report of ``devkit run``: the main job's :class:`~devkit.workflow.run.Summary` as the template
context of ``templates/report.html.j2`` (plots as embedded PNGs, latencies in us, bytes in GiB).
"""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import Any

from devkit.workflow import run as main_job


def report_context(
    summary: main_job.Summary,
    *,
    target: str,
    quick: bool,
    wall_s: float | None,
    results_dir: str | None = None,
) -> dict[str, Any]:
    """The template context of the main report (see templates/report.html.j2)."""
    from devkit import __version__
    from devkit.cost.uncertainty import band as uncertainty_band
    from devkit.cost.uncertainty import no_band_text
    from devkit.targets import load_target
    from devkit.workflow.hw.host import git_commit
    from devkit.workflow.report import hotspot_rows, plot_sweep, plot_timeline, trace_view_data

    band = uncertainty_band(target)
    frac = band.fraction if band is not None else None
    uncertainty = {
        "pct": band.pct if band is not None else None,
        "based_on": band.based_on if band is not None else no_band_text(target),
    }
    comparison = None
    if summary.paper_rows:
        xs = [r["S"] for r in summary.paper_rows]
        names = list(main_job.COMPARISON)
        lat_series = {
            f"{n} ({main_job.COMPARISON[n]})": [r["latency_us"][n] for r in summary.paper_rows] for n in names
        }
        hbm_series = {
            f"{n} ({main_job.COMPARISON[n]})": [
                None if r["hbm_bytes"][n] is None else r["hbm_bytes"][n] / 2**30 for r in summary.paper_rows
            ]
            for n in names
        }
        rows = [
            {**r, "S_text": f"{r['S'] // 1024}K" if r["S"] % 1024 == 0 else str(r["S"])}
            for r in summary.paper_rows
        ]
        shape_text = (
            f"X[S, {main_job.PAPER_H}] · U[{main_job.PAPER_H}, {main_job.PAPER_R}] · "
            f"V[{main_job.PAPER_R}, {main_job.PAPER_N}] in bf16; dense = matmul_optimized on "
            f"X · W[{main_job.PAPER_H}, {main_job.PAPER_N}]"
        )
        comparison = {
            "shape_text": shape_text,
            "kernels": names,
            "rows": rows,
            "latency_png": plot_sweep(
                xs,
                lat_series,
                ylabel="modelled latency (us)",
                title=f"latency vs sequence length ({target})",
                band=frac,
            ),
            "hbm_png": plot_sweep(
                xs,
                hbm_series,
                ylabel="HBM traffic, read + write (GiB)",
                title="HBM traffic vs sequence length",
            ),
        }
    mlp = None
    if summary.mlp_rows:
        mlp = {
            "rows": summary.mlp_rows,
            "caption": "svd_mlp (fused gate/up with the activation written transposed, then the fused down "
            "projection) against dense_mlp at the NeuronMM block-aligned ranks; one prefill of S tokens.",
        }
    timeline = None
    if summary.timeline is not None:
        rep = summary.timeline.report
        t = summary.timeline.task
        tgt = load_target(t.target)
        label = f"{t.kernel} [{t.shape_text}] {t.dtype}"
        timeline = {
            "label": label,
            "latency_us": rep.latency_us,
            "bound_by": rep.bound_by,
            "tensor_utilization": rep.tensor_utilization,
            "instructions": rep.instructions,
            "engines": ["tensor", "vector", "scalar", "gpsimd", "dma"],
            "png": plot_timeline(
                rep.timeline, dma_engines=tgt.dma.engines, latency_us=rep.latency_us, title=t.kernel
            ),
            "hotspots": hotspot_rows(rep, code=summary.timeline.figures.get("hotspot_code")),
            "view": trace_view_data(summary.timeline.trace, title=label)
            if summary.timeline.trace is not None
            else None,
            "trace_file": TRACE_FILE if summary.timeline.trace is not None else None,
        }
    validations = [
        {
            "kernel": r.task.kernel,
            "shape": r.task.shape_text,
            "dtype": r.task.dtype,
            "passed": r.ok,
            "max_error": r.max_error,
            "tolerance": r.tolerance,
            "seconds": r.seconds,
            "detail": r.error or "",
        }
        for r in summary.validations
    ]
    hardware = hardware_context(results_dir)
    return {
        **kernel_sections(summary, target, frac),
        "uncertainty": uncertainty,
        "roofline": roofline_context(summary, target, frac),
        "results_files": list(RESULTS_FILES),
        "hardware_howto": HARDWARE_HOWTO,
        "title": "NeuronMM devkit report",
        "devkit_version": __version__,
        "target": target,
        "mode": "quick" if quick else "full",
        "git_commit": git_commit(),
        "generated": datetime.datetime.now().isoformat(timespec="seconds"),
        "wall_s": wall_s,
        "status": {
            "passed": summary.passed,
            "validations": len(summary.validations),
            "failures": len(summary.failures),
            "estimate_errors": len(summary.estimate_errors),
        },
        "validations": validations,
        "comparison": comparison,
        "mlp": mlp,
        "timeline": timeline,
        "hardware": hardware,
        "errors": [{"task": r.task.describe(), "message": r.error or ""} for r in summary.estimate_errors],
        "notes": [
            f"Latencies, bytes and utilisation are modelled by the devkit cost model for one {target} "
            "NeuronCore (trace-based: every instruction of the unmodified kernel is scheduled on the "
            "engines and DMA queues); they are not measurements.",
            "Validation runs the kernels with numerics on and compares with the registry's NumPy "
            "reference (normalised max error max|out-ref|/max|ref| against the tolerance for the dtype).",
        ],
    }


#: Files ``devkit run`` writes next to index.html (:mod:`devkit.workflow.results`).
RESULTS_FILES = ("results.json", "validations.csv", "estimates.csv")
#: The exported trace of the timeline kernel, next to index.html (open it in ui.perfetto.dev).
TRACE_FILE = "trace.json"
#: What the report says in place of the measured-vs-predicted section while there are no measurements.
HARDWARE_HOWTO = (
    "No hardware measurements yet. On a Trainium host with the Neuron SDK: `devkit promote KERNEL` writes "
    "hw_tests/test_KERNEL.py and its cases (shapes and predicted latencies) to hw_tests/cases/KERNEL.json, "
    "`devkit hw run` runs it (numerics checked strictly, latency recorded in "
    "results/), then `devkit run` or `devkit hw report` shows measured against predicted here. "
    "Latencies captured with nki.benchmark or a neuron-profile summary can be fitted with `devkit calibrate "
    "FILE` (docs: Hardware stage)."
)


def roofline_context(summary: main_job.Summary, target: str, band: float | None) -> dict[str, Any] | None:
    """The roofline chart of every successful estimate (one marker per kernel), or None without estimates."""
    from devkit.cost.roofline import RooflinePoint, roofs
    from devkit.workflow.report import plot_roofline

    points = [
        RooflinePoint(
            label=r.task.kernel.rsplit(":", 1)[-1],
            flops=float(r.figures.get("flops") or 0),
            hbm_bytes=float((r.figures.get("hbm_read_bytes") or 0) + (r.figures.get("hbm_write_bytes") or 0)),
            latency_us=float(r.figures.get("latency_us") or 0),
            band=band,
        )
        for r in summary.estimates
        if r.ok and r.figures.get("flops") and r.figures.get("latency_us")
    ]
    if not points:
        return None
    r = roofs(target, "bfloat16")
    return {
        "png": plot_roofline(points, r, title=f"roofline of the estimates ({target}, bf16)"),
        "caption": f"Each marker is one estimate of this run: TensorE FLOPs per HBM byte against FLOPs per "
        f"modelled second. Roofs from the {target} target file: TensorE {r.peak_tflops:g} TFLOP/s (bf16), "
        f"HBM {r.hbm_gbps:g} GB/s, DMA engines {r.dma_gbps:g} GB/s (the lower memory roof is drawn solid)."
        + (" Error bars: the uncertainty band." if band else ""),
    }


def hardware_context(results_dir: str | None) -> dict[str, Any] | None:
    """The report's hardware section from a results store (default: the project's ``results/``), or
    None when the store holds no real measurements."""
    from devkit.workflow.hw.compare import hardware_section, load_rows
    from devkit.workflow.hw.host import project_dir

    root = Path(results_dir) if results_dir else project_dir("results")
    rows, _ = load_rows(root)
    if not rows:
        return None
    return hardware_section(
        rows,
        0.25,
        f"Median measured P50 per kernel and shape from {root} against the "
        "prediction made at promotion (devkit hw report for details).",
    )


def kernel_sections(summary: main_job.Summary, target: str, band: float | None) -> dict[str, Any]:
    """The per-kernel sections (``kernels``, ``sweeps``, ``tuning``, ``generations``; None when empty):
    the project's kernels against their declared baselines, their declared sweeps as plots, tuned
    against declared configs, and Beta 1 next to Beta 2 per kernel family (latencies in us)."""
    from devkit.workflow.report import plot_sweep

    sweeps = [
        {
            **t,
            "png": plot_sweep(
                [r["x"] for r in t["rows"]],
                {lb: [r["latency_us"][lb] for r in t["rows"]] for lb in t["labels"]},
                ylabel="modelled latency (us)",
                xlabel=t["x"],
                title=f"{t['kernel']}: latency vs {t['x']} ({t['dtype']}, {target})",
                band=band,
            ),
        }
        for t in summary.sweeps
    ]
    return {
        "kernels": summary.kernel_rows or None,
        "sweeps": sweeps or None,
        "tuning": [
            {
                **r,
                "tuned_text": _blocks_text(r["tuned_blocks"]),
                "default_text": _blocks_text(r["default_blocks"]),
            }
            for r in summary.tuning_rows
        ]
        or None,
        "generations": summary.generation_rows or None,
    }


def _blocks_text(blocks: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in blocks.items()) or "-"
