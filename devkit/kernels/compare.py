"""Cost comparison of NeuronMM against its baselines (used by ``benchmarks/bench_kernels.py``).

Every number here is **modelled** by the devkit cost model (cost-only runs on ``nt.tensor``
placeholders), with the same model for every kernel:

* the paper's microbenchmark ``(S, 8192)·(8192, 4096)·(4096, 16384)`` for S = 1K ... 32K:
  ``xuv_fused`` (ours), ``xuv_sequential`` (ours, "NKI XUV"), ``matmul_optimized`` on the dense
  ``(S, 8192)·(8192, 16384)`` (ours, "NKI XW"), the published NeuronMM kernel
  ``fused_three_mm_XUV_transpose`` (github Jerry2423/neuron-mm, run unmodified with its default blocks)
  and the AWS tutorial ``nki_matmul_fully_optimized_`` on the dense shape (the paper's baseline);
* decode (S = 1) against the bandwidth bounds of streaming U and V once;
* the MLP projections of Llama-3.2-1B/3B and Qwen3-1.7B/4B at compression 0.1 and 0.2.

The published and tutorial kernels are imported from their checkouts at call time only (paths
from ``NEURONMM_REPO`` / ``NKI_TUTORIAL_DIR``); nothing of them is copied here.  Their module-level
imports of torch / torch_xla / scipy (unused by the kernels) are satisfied with empty stand-ins when
those packages are absent.
"""

from __future__ import annotations

import importlib
import os
import sys
import types
from collections.abc import Iterable, Sequence
from typing import Any

PAPER_SIZES = (1024, 4096, 8192, 16384, 32768)
PAPER_HNR = (8192, 4096, 16384)
NEURONMM_REPO = os.environ.get("NEURONMM_REPO", "/work/acceptance/neuron-mm")
NKI_TUTORIAL_DIR = os.environ.get(
    "NKI_TUTORIAL_DIR", "/work/acceptance/aws-neuron-sdk/general/nki/examples/matrix_multiplication"
)
MLP_MODELS = ("Llama-3.2-1B", "Llama-3.2-3B", "Qwen3-1.7B", "Qwen3-4B")
MLP_RATIOS = (0.1, 0.2)

REPORT_KEYS = (
    "latency_us",
    "tensor_utilization",
    "hbm_read_bytes",
    "hbm_write_bytes",
    "bound_by",
    "spill_bytes",
    "flops",
    "sbuf_peak_bytes_per_partition",
)


def _stub_missing(names: Iterable[str]) -> None:
    for name in names:
        if name in sys.modules:
            continue
        try:
            importlib.import_module(name)
        except ImportError:
            sys.modules[name] = types.ModuleType(name)
    special = sys.modules.get("scipy.special")
    if special is not None and not hasattr(special, "softmax"):
        special.softmax = None  # type: ignore[attr-defined]
    core = sys.modules.get("torch_xla.core")
    if core is not None and not hasattr(core, "xla_model"):
        core.xla_model = sys.modules.get("torch_xla.core.xla_model")  # type: ignore[attr-defined]


def load_published(repo: str | None = None) -> Any:
    """The published ``three_mm`` module of github Jerry2423/neuron-mm (unmodified) from a checkout."""
    import devkit.kernels  # noqa: F401  (binds neuronxcc.nki to the simulator where the SDK is absent)

    path = os.path.join(repo or NEURONMM_REPO, "neuron_kernels")
    if not os.path.isdir(path):
        raise FileNotFoundError(f"published NeuronMM kernels not found at {path} (set NEURONMM_REPO)")
    _stub_missing(
        ["torch", "torch_xla", "torch_xla.core", "torch_xla.core.xla_model", "scipy", "scipy.special"]
    )
    if path not in sys.path:
        sys.path.insert(0, path)
    return importlib.import_module("three_mm")


def load_tutorial(directory: str | None = None) -> Any:
    """The AWS NKI tutorial matmul module (``matrix_multiplication_nki_kernels``) from a checkout."""
    import devkit.kernels  # noqa: F401

    path = directory or NKI_TUTORIAL_DIR
    if not os.path.isdir(path):
        raise FileNotFoundError(f"AWS tutorial kernels not found at {path} (set NKI_TUTORIAL_DIR)")
    if path not in sys.path:
        sys.path.insert(0, path)
    return importlib.import_module("matrix_multiplication_nki_kernels")


def _specs(shapes: Sequence[Sequence[int]], dtype: str) -> list[Any]:
    from devkit.kernels.registry import DTYPES
    from devkit.nki import typing as nt

    return [nt.tensor[list(s), DTYPES[dtype]] for s in shapes]


def _estimate(
    kernel: Any, shapes: Sequence[Sequence[int]], dtype: str, target: str, **kwargs: Any
) -> dict[str, Any]:
    import warnings

    import devkit

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # SBUF spill warnings of the baselines are reported as spill_bytes
        rep = devkit.estimate(kernel, *_specs(shapes, dtype), target=target, **kwargs)
    d = rep.to_dict()
    return {k: d[k] for k in REPORT_KEYS}


def paper_case(kernel: str, s_tok: int, target: str = "trn1", dtype: str = "bfloat16") -> dict[str, Any]:
    """One cell of the microbenchmark table: ``kernel`` at sequence length ``s_tok`` (a row dict)."""
    h, r, n = PAPER_HNR
    row: dict[str, Any] = {"S": s_tok, "kernel": kernel, "note": ""}
    if kernel in ("xuv_fused", "xuv_sequential", "xuv_fused_t"):
        import devkit.kernels.neuronmm as nm

        row.update(_estimate(getattr(nm, kernel), [(s_tok, h), (h, r), (r, n)], dtype, target))
    elif kernel == "matmul_optimized":
        from devkit.kernels.matmul import matmul_optimized

        row.update(_estimate(matmul_optimized, [(h, s_tok), (h, n)], dtype, target))
    elif kernel == "published_xuv_t":
        mod = load_published()
        row.update(_estimate(mod.fused_three_mm_XUV_transpose, [(s_tok, h), (h, r), (r, n)], dtype, target))
        row["note"] = "default blocks M4 r8 K2 N4; output [N, S]"
    elif kernel == "aws_tutorial_xw":
        mod = load_tutorial()
        kw = {}
        if s_tok % 2048:  # the tutorial asserts M % (128 * TILES_IN_BLOCK_M) == 0 (default 16 tiles)
            kw["TILES_IN_BLOCK_M"] = max(1, min(16, s_tok // 128))
            row["note"] = f"TILES_IN_BLOCK_M={kw['TILES_IN_BLOCK_M']} (S not a multiple of 2048)"
        row.update(_estimate(mod.nki_matmul_fully_optimized_, [(h, s_tok), (h, n)], dtype, target, **kw))
    else:
        raise KeyError(f"unknown comparison kernel {kernel!r}")
    return row


PAPER_KERNELS = ("xuv_fused", "xuv_sequential", "matmul_optimized", "published_xuv_t", "aws_tutorial_xw")


def decode_case(target: str = "trn1", dtype: str = "bfloat16") -> dict[str, Any]:
    """``xuv_fused`` at S = 1 against the bandwidth bounds of streaming U and V once (us)."""
    from devkit.kernels.neuronmm import xuv_fused
    from devkit.targets import load_target

    h, r, n = PAPER_HNR
    row = {"S": 1, "kernel": "xuv_fused", "note": "decode"}
    row.update(_estimate(xuv_fused, [(1, h), (h, r), (r, n)], dtype, target))
    t = load_target(target)
    weight_bytes = (h * r + r * n) * (2 if dtype == "bfloat16" else 4)
    row["weight_bytes"] = weight_bytes
    row["hbm_bound_us"] = weight_bytes / t.hbm.bw_bytes_per_ns / 1e3
    row["dma_engine_bound_us"] = weight_bytes / (t.dma.engines * t.dma.engine_bw_bytes_per_ns) / 1e3
    return row


def mlp_shapes(
    models: Sequence[str] = MLP_MODELS, ratios: Sequence[float] = MLP_RATIOS
) -> list[dict[str, Any]]:
    """``{model, ratio, H, I, r_gate, r_up, r_down}`` for each model and compression ratio."""
    from devkit.workflow.llm import get_config, mlp_ranks

    out = []
    for m in models:
        cfg = get_config(m)
        for ratio in ratios:
            rk = mlp_ranks(cfg, ratio)
            out.append(
                {
                    "model": cfg.name,
                    "ratio": ratio,
                    "H": cfg.hidden,
                    "I": cfg.intermediate,
                    "r_gate": rk.gate,
                    "r_up": rk.up,
                    "r_down": rk.down,
                }
            )
    return out


MLP_KERNELS = ("svd_mlp", "dense_mlp", "svd_mlp_sequential")


def mlp_case(
    model: str, ratio: float, kernel: str, s_tok: int, target: str = "trn1", dtype: str = "bfloat16"
) -> dict[str, Any]:
    """One MLP cell: the whole SwiGLU MLP of ``model`` at ``ratio`` with ``s_tok`` tokens.

    ``svd_mlp``: our fused SVD MLP; ``dense_mlp``: the uncompressed MLP (our dense kernels);
    ``svd_mlp_sequential``: the three SVD projections as ``xuv_sequential`` calls (the SwiGLU product,
    an elementwise pass, is not included).
    """
    shp = next(x for x in mlp_shapes([model], [ratio]))
    h, i, r = shp["H"], shp["I"], shp["r_gate"]
    row: dict[str, Any] = {
        "model": shp["model"],
        "ratio": ratio,
        "S": s_tok,
        "kernel": kernel,
        "H": h,
        "I": i,
        "r": r,
        "note": "",
    }
    if kernel == "svd_mlp":
        from devkit.kernels.mlp import svd_mlp

        shapes = [(s_tok, h), (h, r), (r, i), (h, r), (r, i), (i, shp["r_down"]), (shp["r_down"], h)]
        row.update(_estimate(svd_mlp, shapes, dtype, target))
    elif kernel == "dense_mlp":
        from devkit.kernels.mlp import dense_mlp

        row.update(_estimate(dense_mlp, [(s_tok, h), (h, i), (h, i), (i, h)], dtype, target))
    elif kernel == "svd_mlp_sequential":
        from devkit.kernels.neuronmm import xuv_sequential

        parts = [_estimate(xuv_sequential, [(s_tok, h), (h, r), (r, i)], dtype, target)] * 2
        parts.append(
            _estimate(xuv_sequential, [(s_tok, i), (i, shp["r_down"]), (shp["r_down"], h)], dtype, target)
        )
        row.update(
            {
                "latency_us": sum(p["latency_us"] for p in parts),
                "hbm_read_bytes": sum(p["hbm_read_bytes"] for p in parts),
                "hbm_write_bytes": sum(p["hbm_write_bytes"] for p in parts),
                "flops": sum(p["flops"] for p in parts),
                "spill_bytes": sum(p["spill_bytes"] for p in parts),
                "tensor_utilization": sum(p["tensor_utilization"] * p["latency_us"] for p in parts)
                / max(1e-9, sum(p["latency_us"] for p in parts)),
                "bound_by": "/".join(sorted({p["bound_by"] for p in parts})),
                "sbuf_peak_bytes_per_partition": max(p["sbuf_peak_bytes_per_partition"] for p in parts),
            }
        )
        row["note"] = "3 x xuv_sequential, SwiGLU excluded"
    else:
        raise KeyError(f"unknown MLP comparison kernel {kernel!r}")
    return row


def speedups(rows: Sequence[dict[str, Any]], base: str, key: tuple[str, ...] = ("S",)) -> dict[Any, float]:
    """``latency(base) / latency(xuv_fused or svd_mlp)`` per key (rows of one table)."""
    ours = {"xuv_fused", "svd_mlp"}
    by: dict[Any, dict[str, float]] = {}
    for r in rows:
        by.setdefault(tuple(r[k] for k in key), {})[r["kernel"]] = r["latency_us"]
    out = {}
    for k, lat in by.items():
        mine = next((lat[o] for o in ours if o in lat), None)
        if mine and base in lat:
            out[k] = lat[base] / mine
    return out


def markdown_table(rows: Sequence[dict[str, Any]], columns: Sequence[tuple[str, str]]) -> str:
    """A GitHub markdown table of ``rows`` with ``columns`` = (header, key or format spec)."""
    head = "| " + " | ".join(h for h, _ in columns) + " |"
    sep = "|" + "|".join("---" for _ in columns) + "|"
    lines = [head, sep]
    for r in rows:
        cells = []
        for _, spec in columns:
            if callable(spec):
                cells.append(str(spec(r)))
            else:
                v = r.get(spec, "")
                cells.append(f"{v:.3f}" if isinstance(v, float) else str(v))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)
