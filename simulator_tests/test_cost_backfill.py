"""The compiler's instruction scheduler fills an engine's idle gaps (issue 14).

Iterations of an ``affine_range`` are independent and "may be pipelined across engines"
(reference/nki_api.md section 2, B1-PM): the Neuron compiler does not leave an engine idle while a
later, independent instruction of the same engine is ready.  The scheduler models this by
remembering the gaps an engine idled through (waiting for another engine's data) and placing a later
instruction whose dependencies are ready into the first gap it fits.  Exact-time programs in the
style of test_cost_scheduler.py (every clock 1 GHz, no dependency latency), good/bad twins.
"""

from __future__ import annotations

import pytest
from test_cost_scheduler import run

from devkit.cost.trace_builder import TraceBuilder


def _waiting_add(b: TraceBuilder) -> int:
    """ScalarE works 1000 ns; VectorE's add waits for it (VectorE idles 0..1000)."""
    s = b.scalar("activation", 1000)
    return b.vector("tensor_copy", 100, deps=[s])


def test_independent_instruction_fills_the_gap() -> None:
    b = TraceBuilder()
    _waiting_add(b)
    b.vector("tensor_copy", 300)  # reads another, ready tile
    sched = run(b)
    assert sched.timeline.events[2][1:] == (pytest.approx(0.0), pytest.approx(300.0))
    report = sched.report()
    assert report.latency_us * 1000 == pytest.approx(1100.0)
    assert report.engine_busy_us["vector"] * 1000 == pytest.approx(400.0)
    assert report.backfilled_instructions == 1 and report.to_dict()["backfilled_instructions"] == 1


def test_dependent_instruction_does_not_fill_the_gap() -> None:  # bad twin: reads the add's result
    b = TraceBuilder()
    add = _waiting_add(b)
    b.vector("tensor_copy", 300, deps=[add])
    sched = run(b)
    assert sched.timeline.events[2][1:] == (pytest.approx(1100.0), pytest.approx(1400.0))
    assert sched.report().latency_us * 1000 == pytest.approx(1400.0)
    assert sched.report().backfilled_instructions == 0


def test_instruction_longer_than_the_gap_stays_in_program_order() -> None:
    b = TraceBuilder()
    _waiting_add(b)
    b.vector("tensor_copy", 1200)
    assert run(b).timeline.events[2][1:] == (pytest.approx(1100.0), pytest.approx(2300.0))


def test_gap_is_split_and_its_rest_reused() -> None:
    b = TraceBuilder()
    _waiting_add(b)
    late = b.scalar("activation", 400)  # ScalarE: 1000..1400, so ready after the gap: no fill
    b.vector("tensor_copy", 300)  # fills 0..300
    b.vector("tensor_copy", 300)  # fills 300..600
    b.vector("tensor_copy", 100, deps=[late])  # at 1400, after the add
    ev = run(b).timeline.events
    assert ev[3][1:] == (pytest.approx(0.0), pytest.approx(300.0))
    assert ev[4][1:] == (pytest.approx(300.0), pytest.approx(600.0))
    assert ev[5][1:] == (pytest.approx(1400.0), pytest.approx(1500.0))


def test_fill_starts_no_earlier_than_its_dependencies() -> None:
    b = TraceBuilder()
    _waiting_add(b)
    g = b.gpsimd("iota", 50)  # GpSimd 150 + 50 cycles: 0..200 (its own slot on the simple target)
    b.vector("tensor_copy", 300, deps=[g])
    assert run(b).timeline.events[3][1:] == (pytest.approx(200.0), pytest.approx(500.0))


def test_tensor_consumer_never_starts_before_its_tensor_producer_ends() -> None:
    """A matmul accumulating into the PSUM group of an earlier matmul may fill a TensorE gap only
    after that matmul; an independent matmul fills the gap at once."""
    b = TraceBuilder()
    s = b.scalar("activation", 2000)
    first = b.matmul(n=512)  # 512 ns at 1 GHz
    b.matmul(n=512, deps=[s])  # waits for ScalarE: TensorE idles 512..2000
    b.matmul(n=512, deps=[first])  # same accumulation group as `first`: fills 512..1024
    b.matmul(n=512)  # independent: fills 1024..1536
    ev = run(b).timeline.events
    assert ev[3][1:] == (pytest.approx(512.0), pytest.approx(1024.0))
    assert ev[4][1:] == (pytest.approx(1024.0), pytest.approx(1536.0))
