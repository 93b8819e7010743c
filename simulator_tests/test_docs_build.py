"""CI step for the documentation: ``mkdocs build --strict`` must succeed without a single warning.

Strict mode turns every warning into an error: broken links and anchors between pages, pages missing
from the nav, docstrings mkdocstrings cannot read, unknown ``<!-- gen:... -->`` markers (the docs hook
raises).  The site is built into a temporary directory, so the repository is left untouched.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from _workflow_support import ROOT, run_module

pytest.importorskip("mkdocs", reason="the docs extra is not installed (pip install -e '.[docs]')")
pytest.importorskip("material", reason="the docs extra is not installed (pip install -e '.[docs]')")
pytest.importorskip("mkdocstrings", reason="the docs extra is not installed (pip install -e '.[docs]')")


def test_mkdocs_build_strict(tmp_path: Path) -> None:
    site = tmp_path / "site"
    proc = run_module(
        "mkdocs",
        *("build", "--strict", "--config-file", str(ROOT / "mkdocs.yml"), "--site-dir", str(site)),
        env={"NO_MKDOCS_2_WARNING": "1", "OMP_NUM_THREADS": "1"},
        timeout=600,
    )
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output
    assert "WARNING" not in output, output
    # the generated parts are there, and no marker was left behind
    cli = (site / "cli" / "index.html").read_text(encoding="utf-8")
    for command in ("devkit calibrate", "devkit cost", "devkit simulate", "devkit hw report", "devkit tune"):
        assert command in cli, command
    cost = (site / "cost-model" / "index.html").read_text(encoding="utf-8")
    assert "dma_queue_busy_ns" in cost and "nki_matmul_fully_optimized_" in cost
    api = (site / "api" / "index.html").read_text(encoding="utf-8")
    assert "devkit.estimate" in api and "KernelError" in api
    for page in site.rglob("*.html"):
        assert "<!-- gen:" not in page.read_text(encoding="utf-8"), page
