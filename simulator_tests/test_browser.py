"""The HTML report and an exported trace in a real headless browser (Debian's chromium), issue 18.

Each page is loaded twice: once as written, for a screenshot (kept in the test's temporary
directory, or in ``$DEVKIT_SCREENSHOT_DIR`` when set), and once as a copy with a small script
injected at the top of ``<head>`` that records uncaught errors and ``console.error`` calls and, after
load, counts the drawn pixels of every timeline canvas; ``--dump-dom`` returns both.

Skipped with a reason when chromium is absent.  To run these in CI, install it before the tests, e.g.
in ``.ci/run``: ``command -v chromium >/dev/null || (apt-get update && apt-get install -y chromium)``.
"""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.browser

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--hide-scrollbars"]  # fmt: skip
PROBE = """<script>
window.__devkitErrors = [];
window.addEventListener("error", function (e) { window.__devkitErrors.push("uncaught: " + e.message); });
(function () {
  var orig = console.error;
  console.error = function () {
    window.__devkitErrors.push("console.error: " + Array.prototype.join.call(arguments, " "));
    orig.apply(console, arguments);
  };
})();
window.addEventListener("load", function () {
  var drawn = [];
  document.querySelectorAll("canvas").forEach(function (c) {
    var d = c.getContext("2d").getImageData(0, 0, c.width, c.height).data, n = 0;
    for (var i = 0; i < d.length; i += 4) if (d[i + 3] > 0 && (d[i] < 200 || d[i + 1] < 200 || d[i + 2] < 200)) n++;
    drawn.push(n);
  });
  var pre = document.createElement("pre"); pre.id = "devkit-probe";
  var widths = Array.prototype.map.call(document.images, function (im) { return im.naturalWidth; });
  pre.textContent = JSON.stringify({errors: window.__devkitErrors, canvases: drawn, images: widths});
  document.body.appendChild(pre);
});
</script>"""


def _chromium(tmp: Path, *args: str) -> subprocess.CompletedProcess:
    if CHROMIUM is None:
        pytest.skip(
            "chromium is not installed (Debian: apt-get install -y chromium); to run browser tests in CI, "
            "have .ci/run install it before pytest"
        )
    profile = tmp / "chromium-profile"
    return subprocess.run(
        [CHROMIUM, *FLAGS, f"--user-data-dir={profile}", *args],
        capture_output=True, text=True, timeout=180, stdin=subprocess.DEVNULL,
    )  # fmt: skip


def _probe(page: Path, tmp: Path) -> dict:
    text = page.read_text()
    probed = tmp / f"probe-{page.name}"
    probed.write_text(text.replace("<head>", "<head>\n" + PROBE, 1))
    proc = _chromium(tmp, "--virtual-time-budget=5000", "--dump-dom", probed.as_uri())
    assert proc.returncode == 0, proc.stderr[-2000:]
    m = re.search(r'<pre id="devkit-probe">(.*?)</pre>', proc.stdout, re.S)
    assert m, f"the probe did not run; DOM tail: {proc.stdout[-500:]}"
    return json.loads(html.unescape(m.group(1)))


def _screenshot(page: Path, tmp: Path, name: str, height: int) -> Path:
    out_dir = Path(os.environ.get("DEVKIT_SCREENSHOT_DIR", tmp))
    out_dir.mkdir(parents=True, exist_ok=True)
    shot = out_dir / name
    proc = _chromium(tmp, f"--window-size=1280,{height}", f"--screenshot={shot}", page.as_uri())
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert shot.read_bytes().startswith(b"\x89PNG") and shot.stat().st_size > 20_000
    return shot


@pytest.fixture(scope="module")
def browser_tmp(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if CHROMIUM is None:
        pytest.skip(
            "chromium is not installed (Debian: apt-get install -y chromium); to run browser tests in CI, "
            "have .ci/run install it before pytest"
        )
    return tmp_path_factory.mktemp("browser")


def test_run_report_renders_without_console_errors(
    browser_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import test_workflow_run as tiny

    from devkit import cli
    from devkit.workflow import run as main_job

    monkeypatch.setattr(main_job, "plan", tiny._tiny_plan)
    out = browser_tmp / "report"
    (browser_tmp / "none").mkdir(exist_ok=True)  # an empty results store
    assert cli.main(["run", "--out", str(out), "--jobs", "1", "--results", str(browser_tmp / "none")]) == 0
    page = out / "index.html"
    probe = _probe(page, browser_tmp)
    assert probe["errors"] == []
    assert len(probe["canvases"]) == 1 and probe["canvases"][0] > 1000  # the zoomable timeline drew
    assert len(probe["images"]) == 4 and all(w > 100 for w in probe["images"])  # every PNG decoded
    _screenshot(page, browser_tmp, "report.png", 3000)


def test_exported_trace_renders_without_console_errors(browser_tmp: Path) -> None:
    import devkit
    from devkit.kernels import tutorial
    from devkit.nki.runner import TensorSpec
    from devkit.workflow import report

    trace_path = browser_tmp / "tiled.json"
    devkit.estimate(tutorial.tiled_matmul, TensorSpec((512, 256), "bfloat16"), TensorSpec((512, 1024), "bfloat16"),
                    trace=trace_path)  # fmt: skip
    page = browser_tmp / "trace.html"
    page.write_text(report.render_trace_page(json.loads(trace_path.read_text()), title="tiled_matmul trace"))
    probe = _probe(page, browser_tmp)
    assert probe["errors"] == []
    assert probe["canvases"] and probe["canvases"][0] > 1000
    _screenshot(page, browser_tmp, "trace.png", 700)


def test_the_probe_sees_errors_and_blank_canvases(browser_tmp: Path) -> None:
    """The bad twin: a page that throws and logs an error, and a canvas never drawn on."""
    page = browser_tmp / "broken.html"
    page.write_text(
        "<!DOCTYPE html><html><head><title>x</title></head><body><canvas width=50 height=50></canvas>"
        "<script>console.error('logged'); missingFunction();</script></body></html>"
    )
    probe = _probe(page, browser_tmp)
    assert any("logged" in e for e in probe["errors"])
    assert any("missingFunction" in e for e in probe["errors"])
    assert probe["canvases"] == [0]
