"""docs/calibration.md is the output of ``devkit calibrate --report`` and matches what it documents.

Default run: the checked-in report lists every parameter and cost-relevant target number with its current
value, a row per family of ``qor_points.toml``; the renderer on synthetic points (counts, LOFO, rankings,
good/bad twins); the command's argument errors.  ``-m slow``: a fresh ``devkit calibrate --report`` on the
nki-samples 0898a77 corpus reproduces the checked-in file byte for byte.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from devkit.cost.params import load_params
from devkit.targets import load_target
from devkit.workflow import calibration_report as qor

ROOT = Path(__file__).resolve().parents[1]
REPORT = ROOT / "docs" / "calibration.md"
#: ``../shared/corpora`` next to the repository, or one level further up from a worktree under ``wt/``
#: (DEVKIT_CORPORA overrides)
CORPORA = Path(
    os.environ.get("DEVKIT_CORPORA")
    or next(
        (
            p / "shared" / "corpora"
            for p in (ROOT.parent, ROOT.parent.parent)
            if (p / "shared" / "corpora").is_dir()
        ),
        ROOT.parent / "shared" / "corpora",
    )
)
SAMPLES = CORPORA / "nki-samples-0898a77.tar.gz"
REGENERATE = "rerun: devkit calibrate --report docs/calibration.md --samples <nki-samples-0898a77.tar.gz>"


def _rows(text: str, first_cell: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith(f"| {first_cell} |")]


def test_report_lists_every_parameter_with_its_current_value() -> None:
    text = REPORT.read_text(encoding="utf-8")
    for name, spec in load_params().specs.items():
        rows = _rows(text, f"`{name}`")
        assert rows, f"{name} missing from docs/calibration.md: {REGENERATE}"
        assert rows[0].split("|")[2].strip().startswith(f"{spec.value:g}"), (name, rows[0], REGENERATE)


def test_report_lists_every_cost_number_of_the_target_with_its_source() -> None:
    text = REPORT.read_text(encoding="utf-8")
    for key, entry in load_target("trn1").entries.items():
        if key.split(".", 1)[0] not in qor.COST_SECTIONS:
            continue
        rows = _rows(text, f"`{key}`")
        assert rows, f"{key} missing from docs/calibration.md: {REGENERATE}"
        cells = [c.strip() for c in rows[0].split("|")]
        assert cells[2] == f"{entry.value:g}" and cells[5] == entry.source, (key, REGENERATE)


def test_report_has_a_point_row_per_family_with_consistent_ratios() -> None:
    text = REPORT.read_text(encoding="utf-8")
    spec = qor.load_spec()
    families = {f.name for f in spec.families} | {"mmt"}
    number = r"[0-9,.]+"
    pattern = rf"\| [a-z_0-9]+ \| `[^`]+` \| {number} \| {number} \|"
    points = [line for line in text.splitlines() if re.match(pattern, line)]
    assert {line.split("|")[1].strip() for line in points} == families
    assert len([p for p in points if p.startswith("| mmt |")]) == 4
    for line in points:  # measured, modelled, ratio and LOFO ratio are numbers, ratio = modelled / measured
        measured, modelled, ratio, lofo = (float(c.strip().replace(",", "")) for c in line.split("|")[3:7])
        assert abs(modelled / measured - ratio) < 0.006 and lofo > 0
    assert "leave-one-family-out" in text


def _point(pid: str, family: str, measured: float, modelled: float, lofo: float | None = None) -> qor.Point:
    return qor.Point(pid, family, measured, modelled, modelled if lofo is None else lofo, "dma/hbm")


def _synthetic(v3_us: float) -> list[qor.Point]:
    return [
        _point("mmt_tiled_trn1", "mmt", 100.0, 110.0, 90.0),
        _point("mmt_hoist_trn1", "mmt", 80.0, 79.0),
        _point("mmt_block_free_trn1", "mmt", 40.0, v3_us),
        _point("mmt_fully_optimized_trn1", "mmt", 10.0, 20.0),  # ratio 2.0: outside 35 %
        _point("sd_attention[1-4096-128-float32-675]", "sd_attention", 675.0, 700.0),
        _point("sd_attention_allocated[1-4096-128-float32-410]", "sd_attention_allocated", 410.0, 500.0),
    ]


def test_render_lists_every_point_and_parameter_and_counts_them() -> None:
    text = qor.render_report(_synthetic(v3_us=45.0))
    for p in _synthetic(45.0):
        assert f"`{p.id}`" in text
    for name in load_params().specs:
        assert f"| `{name}` |" in text
    assert "points within 35%: 5 of 6 (83%); leave-one-family-out: 5 of 6 (83%)" in text
    row = next(line for line in text.splitlines() if "`mmt_tiled_trn1`" in line)
    assert [c.strip() for c in row.split("|")[5:7]] == ["1.10", "0.90"]


def test_render_flags_a_wrong_ranking() -> None:  # good/bad twins: v3 modelled slower than v2 is a NO
    good = qor.render_report(_synthetic(v3_us=45.0))
    bad = qor.render_report(_synthetic(v3_us=85.0))
    assert "tutorial v1 > v2 > v3 > v4 (modelled" in good and "ms): yes" in good
    assert "ms): NO" in bad
    assert "sd_attention_allocated faster than sd_attention [1-4096-128-float32]" in good


def test_spec_rejects_an_unknown_lofo_parameter(tmp_path: Path) -> None:
    bad = qor.QOR_PATH.read_text(encoding="utf-8").replace(
        'param = "kernel_fixed_ns"', 'param = "kernel_fixed_nss"', 1
    )
    path = tmp_path / "qor.toml"
    path.write_text(bad, encoding="utf-8")
    with pytest.raises(qor.QorError, match="kernel_fixed_nss"):
        qor.load_spec(path)


def _calibrate(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "devkit", "calibrate", *args], cwd=cwd, env=env, capture_output=True, text=True
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--report", "out.md"), "--report needs --samples"),
        (("--samples", "x.tar.gz"), "--samples"),
        (("--report", "out.md", "--samples", "/nonexistent/samples.tar.gz"), "/nonexistent/samples.tar.gz"),
    ],
)
def test_report_argument_errors(tmp_path: Path, args: tuple[str, ...], message: str) -> None:
    done = _calibrate(*args, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert message in done.stderr
    assert not (tmp_path / "out.md").exists()


def test_samples_that_are_not_the_corpus_are_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    done = _calibrate(
        "--report", str(tmp_path / "out.md"), "--samples", str(tmp_path / "empty"), cwd=tmp_path
    )
    assert done.returncode == 2 and "no test/unit directory" in done.stderr, done.stderr
    assert not (tmp_path / "out.md").exists()


@pytest.mark.slow
def test_checked_in_report_is_what_the_command_writes(tmp_path: Path) -> None:
    if not SAMPLES.exists():
        pytest.skip(f"corpus not present: {SAMPLES}")
    out = tmp_path / "calibration.md"
    done = _calibrate("--report", str(out), "--samples", str(SAMPLES))
    assert done.returncode == 0, done.stderr[-3000:]
    assert out.read_text(encoding="utf-8") == REPORT.read_text(encoding="utf-8"), REGENERATE


def test_checked_in_report_meets_the_issue_14_targets() -> None:
    """At least 80 % of the points within 35 %, and every documented optimisation step ranked the
    measured way round (the slow test above keeps the file equal to a fresh run)."""
    summary = REPORT.read_text(encoding="utf-8").split("## Summary", 1)[1]
    got = re.search(r"points within 35%: (\d+) of (\d+)", summary)
    assert got is not None
    assert int(got.group(1)) >= 0.8 * int(got.group(2)), got.group(0)
    bullets = [line for line in summary.splitlines() if line.startswith("- ")]
    checks = [line for line in bullets if not line.startswith(("- points within", "- geometric mean"))]
    assert len(checks) >= 5 and all(line.rstrip().endswith(": yes") for line in checks), checks
