"""The HTML report: plots are real PNGs, the template refuses missing values, formatting helpers."""

from __future__ import annotations

import base64

import jinja2
import pytest

from devkit.cost.timeline import Timeline
from devkit.workflow import report

PNG = b"\x89PNG\r\n\x1a\n"


def _is_png(b64: str) -> bool:
    return base64.b64decode(b64).startswith(PNG)


def test_sweep_plot_is_a_png_and_skips_missing_points():
    png = report.plot_sweep(
        [1024, 2048, 4096],
        {"a": [1.0, 2.0, 4.0], "b": [None, 3.0, 5.0], "c": [None] * 3},
        ylabel="us",
        title="t",
    )
    assert _is_png(png)


def test_timeline_plot_from_a_scheduler_timeline():
    tl = Timeline(limit=100, bins=16, bin_ns=10.0)
    for i in range(40):
        tl.events.append((i % 5, i * 10.0, i * 10.0 + 8.0))
        tl.add(i % 5, i * 10.0, i * 10.0 + 8.0, 8.0)
    assert _is_png(report.plot_timeline(tl, dma_engines=16, latency_us=0.4, title="k"))
    assert _is_png(report.plot_timeline(tl.to_dict(), dma_engines=16, latency_us=0.4, title="k"))


def test_measured_vs_predicted_plot():
    assert _is_png(
        report.plot_measured_vs_predicted(
            [("k", 10.0, 11.0), ("k", 100.0, 90.0), ("j", 5.0, 9.0)], slack=0.25
        )
    )


def _context(**over):
    ctx = {
        "title": "t",
        "devkit_version": "0",
        "target": "trn1",
        "mode": "quick",
        "git_commit": "c",
        "generated": "now",
        "wall_s": 1.0,
        "status": None,
        "validations": [],
        "comparison": None,
        "mlp": None,
        "timeline": None,
        "hardware": None,
        "hardware_howto": "no measurements",
        "uncertainty": {"pct": None, "based_on": "none"},
        "roofline": None,
        **report.NO_KERNEL_SECTIONS,
        "results_files": [],
        "errors": [],
        "notes": [],
    }
    ctx.update(over)
    return ctx


def test_template_is_strict():
    html = report.render_html(_context())
    assert "<title>t</title>" in html
    ctx = _context()
    del ctx["hardware"]
    with pytest.raises(jinja2.UndefinedError):
        report.render_html(ctx)


def test_failures_are_escaped_and_shown(tmp_path):
    validations = [
        {
            "kernel": "k",
            "shape": "S=1",
            "dtype": "bfloat16",
            "passed": False,
            "max_error": None,
            "tolerance": None,
            "seconds": 0.1,
            "detail": "<b>boom</b>",
        }
    ]
    status = {"passed": False, "validations": 1, "failures": 1, "estimate_errors": 0}
    path = report.write_report(_context(validations=validations, status=status), tmp_path)
    html = path.read_text()
    assert "1 of 1 validations FAILED" in html
    assert "&lt;b&gt;boom&lt;/b&gt;" in html and "<b>boom</b>" not in html


@pytest.mark.parametrize(
    ("us", "text"), [(None, "-"), (0.5, "500 ns"), (12.34, "12.3 us"), (4567.0, "4.57 ms")]
)
def test_fmt_us(us, text):
    assert report.fmt_us(us) == text


def test_fmt_bytes():
    assert report.fmt_bytes(512) == "512 B"
    assert report.fmt_bytes(3 * 2**20) == "3.0 MiB"


def test_trace_view_keeps_the_longest_slices_past_its_limit(tmp_path):
    import json

    import devkit
    from devkit.kernels import tutorial
    from devkit.nki.runner import TensorSpec

    path = tmp_path / "t.json"
    devkit.estimate(tutorial.tiled_matmul, TensorSpec((256, 256), "bfloat16"), TensorSpec((256, 1024), "bfloat16"),
                    trace=path)  # fmt: skip
    trace = json.loads(path.read_text())
    full = report.trace_view_data(trace, title="t")
    n = sum(len(t["slices"]) for t in full["tracks"])
    assert [t["name"] for t in full["tracks"]][:2] == ["tensor", "vector"]
    assert full["counters"] and "SBUF peak" in full["counters"][0]["name"]
    cut = report.trace_view_data(trace, title="t", max_slices=n // 2)
    kept = [s for t in cut["tracks"] for s in t["slices"]]
    assert len(kept) == n // 2 and "not drawn here" in cut["note"]
    shortest_kept = min(s[1] for s in kept)
    dropped = sorted(s[1] for t in full["tracks"] for s in t["slices"])[: n - n // 2]
    assert max(dropped) <= shortest_kept
    page = report.render_trace_page(trace, title="t")
    assert page.startswith("<!DOCTYPE html>") and "tv-canvas" in page and "</script>" in page
