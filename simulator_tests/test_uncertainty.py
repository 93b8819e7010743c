"""The uncertainty band (issue 18): derived from the model's residuals against the measured anchors."""

from __future__ import annotations

import pytest

from benchmarks import anchor_residuals
from devkit.cost.params import load_params
from devkit.cost.uncertainty import ResidualsError, band, load_residuals, no_band_text


def test_residuals_file_is_current_with_the_model_and_the_anchors() -> None:
    points, _ = load_residuals()
    predicted = anchor_residuals.predictions()
    # the band rests on the latency anchors the repository can re-predict by itself (the tutorial
    # matmuls); the nki-samples QoR anchors need the corpus and are validated in docs/calibration.md
    anchors = {a.id: a for a in load_params().anchors if a.metric == "latency_us" and a.id in predicted}
    assert len(anchors) >= 4, "the tutorial latency anchors are in params.toml"
    assert {p.id for p in points} == set(anchors), (
        "every reproducible latency anchor has exactly one residual"
    )
    for p in points:
        assert p.measured_us == anchors[p.id].measured_us
        assert p.predicted_us == pytest.approx(predicted[p.id], rel=1e-3), (
            f"{p.id}: residuals.toml is stale (model now predicts {predicted[p.id]:.1f} us); "
            "rerun `PYTHONPATH=. python benchmarks/anchor_residuals.py`"
        )


def test_band_is_the_largest_relative_error_of_the_target() -> None:
    b = band("trn1")
    assert b is not None
    points, _ = load_residuals()
    errors = [abs(p.predicted_us / p.measured_us - 1) for p in points if p.target == "trn1"]
    assert b.pct == pytest.approx(100 * max(errors))
    assert 0 < b.pct < 50
    assert "4 measured trn1 latencies" in b.based_on and "nki_matmul_tiled_" in b.based_on
    assert b.to_dict()["points"][0]["measured_us"] > 0


def test_targets_without_measurements_have_no_band() -> None:
    assert band("trn2") is None and band("inf2") is None
    assert "no measured kernel latency" in no_band_text("trn2")


def test_malformed_residuals_are_refused(tmp_path) -> None:
    bad = tmp_path / "r.toml"
    point = 'id = "x"\nkernel = "k"\ntarget = "trn1"\nmeasured_us = 0.0\npredicted_us = 1.0\n'
    bad.write_text("schema = 1\n[[points]]\n" + point)
    with pytest.raises(ResidualsError, match="must be > 0"):
        load_residuals(str(bad))
    bad.write_text("schema = 2\n")
    with pytest.raises(ResidualsError, match="schema = 1"):
        load_residuals(str(bad))


def test_cost_table_shows_the_band_or_says_there_is_none() -> None:
    import io

    from rich.console import Console

    from devkit.cost.render import render_table
    from devkit.cost.trace_builder import TraceBuilder

    b = TraceBuilder("k.py")
    b.matmul(deps=[b.dma(bytes_per_partition=1024)])
    for target, expected in (
        ("trn1", f"±{band('trn1').pct:.0f} %"),
        ("trn2", "no uncertainty band for trn2"),
    ):
        out = io.StringIO()
        Console(file=out, width=200).print(render_table(b.schedule(target)))
        assert expected in out.getvalue()


def test_run_tables_carry_the_band_caption():
    """The `devkit run` terminal tables state the band (or its absence) in their caption."""
    from devkit.commands.run import band_caption
    from devkit.cost.uncertainty import band

    b = band("trn1")
    assert b is not None
    assert f"±{b.pct:.0f} %" in band_caption("trn1")
    assert str(len(b.residuals)) in band_caption("trn1")
    without = next(t for t in ("inf2", "trn2", "trn3") if band(t) is None)
    assert "no uncertainty band" in band_caption(without)
