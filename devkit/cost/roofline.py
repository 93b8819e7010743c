"""Roofline figures: a kernel's arithmetic intensity and achieved throughput against the target's roofs.

The roofs come from the target files (:mod:`devkit.targets`), nothing here is a hardware number:

* **compute roof**: TensorE peak FLOP rate for the kernel's dtype (``tensor.peak_tflops_<class>``);
  for a cost report the dtype mix is recovered from the report itself (FLOPs over TensorE time at
  peak, i.e. ``flops / (tensor_utilization x latency)``);
* **HBM roof**: per-core HBM bandwidth (``hbm.bw_bytes_per_ns``);
* **DMA roof**: all DMA engines of the core at full rate (``dma.engines x dma.engine_bw_bytes_per_ns``);
  where it is below the HBM roof (trn1, inf2) it is the memory roof a kernel actually meets.

A kernel's point: intensity = TensorE FLOPs / HBM bytes (read + write, spills included as the report
counts them), achieved = FLOPs / modelled latency.  Units: FLOP/byte, TFLOP/s, GB/s (= bytes/ns).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from devkit.jsondict import pick
from devkit.targets import Target, resolve_target


@dataclass(frozen=True)
class Roofs:
    """The ceilings of one target core (TFLOP/s and GB/s)."""

    target: str
    dtype: str
    peak_tflops: float
    hbm_gbps: float
    dma_gbps: float

    @property
    def memory_gbps(self) -> float:
        """The lower of the HBM and DMA roofs: the bandwidth a kernel can reach."""
        return min(self.hbm_gbps, self.dma_gbps)

    @property
    def ridge_flop_per_byte(self) -> float:
        """Intensity where the memory roof meets the compute roof."""
        return self.peak_tflops * 1000.0 / self.memory_gbps

    def attainable_tflops(self, intensity: float) -> float:
        """``min(compute roof, memory roof x intensity)`` in TFLOP/s."""
        return min(self.peak_tflops, self.memory_gbps * intensity / 1000.0)

    def to_dict(self) -> dict[str, Any]:
        return pick(self, "target dtype peak_tflops hbm_gbps dma_gbps ridge_flop_per_byte")


def roofs(target: str | Target, dtype: str = "bfloat16") -> Roofs:
    """The roofs of ``target`` for TensorE work in ``dtype``."""
    t = resolve_target(target)
    return Roofs(
        target=t.name,
        dtype=dtype,
        peak_tflops=t.peak_flops_per_ns(dtype) / 1000.0,
        hbm_gbps=t.hbm.bw_bytes_per_ns,
        dma_gbps=t.dma.engines * t.dma.engine_bw_bytes_per_ns,
    )


@dataclass(frozen=True)
class RooflinePoint:
    """One kernel run on the roofline (FLOPs, bytes, us -> FLOP/byte and TFLOP/s)."""

    label: str
    flops: float
    hbm_bytes: float
    latency_us: float
    #: Share of the modelled latency (0..1) this figure may be off by (the uncertainty band), if known.
    band: float | None = None

    @property
    def intensity(self) -> float:
        return self.flops / self.hbm_bytes if self.hbm_bytes else float("inf")

    @property
    def achieved_tflops(self) -> float:
        return self.flops / (self.latency_us * 1e6) if self.latency_us > 0 else 0.0

    def fraction_of_roof(self, r: Roofs) -> float:
        """Achieved throughput over what the roofline allows at this intensity (0..1)."""
        roof = r.attainable_tflops(self.intensity)
        return self.achieved_tflops / roof if roof > 0 else 0.0

    def to_dict(self, r: Roofs | None = None) -> dict[str, Any]:
        out = {
            **pick(self, "label flops hbm_bytes latency_us"),
            "arithmetic_intensity": self.intensity,
            "achieved_tflops": self.achieved_tflops,
        }
        if r is not None:
            out["fraction_of_roof"] = self.fraction_of_roof(r)
        return out


def point_of(report: Any, label: str | None = None) -> RooflinePoint:
    """The roofline point of a :class:`~devkit.cost.report.CostReport` or its ``to_dict()``."""
    d = report.to_dict() if hasattr(report, "to_dict") else dict(report)
    return RooflinePoint(
        label=label or d.get("kernel") or "kernel",
        flops=float(d.get("flops", 0)),
        hbm_bytes=float(d["hbm_read_bytes"] + d["hbm_write_bytes"]),
        latency_us=float(d["latency_us"]),
    )


def report_roofs(report: Any, target: str | Target | None = None) -> Roofs:
    """Roofs for a cost report, with the compute roof of the dtype mix its TensorE work ran in."""
    d = report.to_dict() if hasattr(report, "to_dict") else dict(report)
    base = roofs(target or d["target"])
    util, flops, lat = d.get("tensor_utilization", 0.0), d.get("flops", 0), d["latency_us"]
    if util and flops and lat:
        peak = flops / (util * lat * 1e6)  # FLOPs over TensorE time at peak, in TFLOP/s
        return Roofs(base.target, "mix", peak, base.hbm_gbps, base.dma_gbps)
    return base
