"""Roofline (issue 18): roofs from the target files, a kernel's point, the chart and `devkit cost --plot`."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from devkit.cli import main
from devkit.cost.roofline import RooflinePoint, point_of, report_roofs, roofs
from devkit.kernels import tutorial
from devkit.targets import load_target
from devkit.workflow import report

TUTORIAL = os.path.abspath(tutorial.__file__)
ARGS = ["--arg", "bfloat16[256,256]", "--arg", "bfloat16[256,1024]"]


@pytest.mark.parametrize("name", ["trn1", "inf2", "trn2", "trn3"])
def test_roofs_come_from_the_target_file(name: str) -> None:
    t = load_target(name)
    r = roofs(name)
    assert r.peak_tflops == pytest.approx(t.tensor.peak_tflops_bf16)
    assert r.hbm_gbps == t.hbm.bw_bytes_per_ns
    assert r.dma_gbps == pytest.approx(t.dma.engines * t.dma.engine_bw_bytes_per_ns)
    assert r.memory_gbps == min(r.hbm_gbps, r.dma_gbps)
    ridge = r.ridge_flop_per_byte
    assert r.attainable_tflops(ridge) == pytest.approx(r.peak_tflops)
    assert r.attainable_tflops(ridge / 2) == pytest.approx(r.peak_tflops / 2)
    assert r.attainable_tflops(ridge * 10) == r.peak_tflops


def test_point_of_a_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["cost", f"{TUTORIAL}:tiled_matmul", *ARGS, "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    p = point_of(d)
    assert p.flops == 2 * 256 * 256 * 1024
    assert p.intensity == pytest.approx(d["flops"] / (d["hbm_read_bytes"] + d["hbm_write_bytes"]))
    assert p.achieved_tflops == pytest.approx(d["flops"] / d["latency_us"] / 1e6)
    r = report_roofs(d)
    # bf16 only: the recovered dtype-mix peak is the bf16 peak
    assert r.peak_tflops == pytest.approx(load_target("trn1").tensor.peak_tflops_bf16, rel=1e-9)
    assert 0 < p.fraction_of_roof(r) <= 1.0
    assert p.to_dict(r)["arithmetic_intensity"] == p.intensity


def test_cost_plot_writes_png_and_svg(tmp_path: Path) -> None:
    png, svg = tmp_path / "r.png", tmp_path / "r.svg"
    assert main(["cost", f"{TUTORIAL}:tiled_matmul", *ARGS, "--plot", str(png)]) == 0
    assert png.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    assert main(["cost", f"{TUTORIAL}:tiled_matmul", *ARGS, "--plot", str(svg)]) == 0
    text = svg.read_text()
    assert text.lstrip().startswith("<?xml") and "<svg" in text and "tiled_matmul" in text


def test_cost_plot_refuses_other_formats(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["cost", f"{TUTORIAL}:tiled_matmul", *ARGS, "--plot", str(tmp_path / "r.jpg")]) == 2
    assert ".png or .svg" in capsys.readouterr().err
    assert not (tmp_path / "r.jpg").exists()


def test_roofline_chart_with_bands_is_a_png() -> None:
    pts = [
        RooflinePoint("a", 1e12, 1e9, 5000.0, band=0.12),
        RooflinePoint("b", 1e12, 1e10, 40000.0, band=0.12),
    ]
    png = report.plot_roofline(pts, roofs("trn1"), title="t")
    import base64

    assert base64.b64decode(png).startswith(b"\x89PNG")
