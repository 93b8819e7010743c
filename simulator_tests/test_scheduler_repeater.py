"""Scheduler repeaters (``Scheduler.repeater(template) -> again(id, deps)``, used by loop replay): scheduling
through them gives exactly what ``emit`` of the same instructions gives.

Each case schedules one trace twice -- every instruction through ``emit``, and every instruction after the
first of its kind through the repeater of that first one -- and compares the whole report (the timeline,
hotspots and unknown-opcode counts included), or what a recorder saw."""

from __future__ import annotations

import dataclasses

import pytest

from devkit.cost.chrome_trace import tracing_scheduler
from devkit.cost.scheduler import Scheduler
from devkit.cost.trace_builder import TraceBuilder
from devkit.trace import Instr, MemoryStats


def _tiled(rounds: int = 6) -> list[Instr]:
    """Loads, accumulating matmuls, an unknown vector opcode, a copy out and a store, per round."""
    b = TraceBuilder("tiled.py")
    for _ in range(rounds):
        prev = None
        for _ in range(8):
            lhs = b.dma(bytes_per_partition=256, line=10)
            rhs = b.dma(bytes_per_partition=1024, line=11)
            prev = b.matmul(deps=[lhs, rhs] if prev is None else [lhs, rhs, prev], line=12)
        odd = b.compute("vector", "no_such_opcode", deps=[prev], line=13)
        cp = b.compute("vector", "tensor_copy", deps=[odd], line=14)
        b.dma(src="sbuf", dst="hbm", deps=[cp], line=15)
    return b.instrs


def _kind(i: Instr) -> tuple:
    return (i.engine, i.opcode, i.lineno)


def _through_repeaters(sched: Scheduler, instrs: list[Instr]) -> None:
    """The first instruction of each kind through ``emit``'s path, the rest through its repeater."""
    repeaters = {}
    for i in instrs:
        again = repeaters.get(_kind(i))
        if again is None:
            again = repeaters[_kind(i)] = sched.repeater(i)
        again(i.id, i.deps)


def test_repeater_report_equals_emit():
    instrs = _tiled()
    plain = Scheduler("trn2")
    for i in instrs:
        plain.emit(i)
    plain.finish(MemoryStats())
    repeated = Scheduler("trn2")
    _through_repeaters(repeated, instrs)
    repeated.finish(MemoryStats())
    a, b = plain.report().to_dict(), repeated.report().to_dict()
    assert a == b
    # the opcode without a rule is counted once per instruction either way
    assert b["unknown_opcodes"] and sum(b["unknown_opcodes"].values()) == 6


class _Keeping:
    """A recorder that keeps every instruction it sees (as a recorder may)."""

    def __init__(self) -> None:
        self.seen: list[tuple] = []

    def record(self, instr: Instr, engine: int, start_ns: float, end_ns: float, busy_ns: float) -> None:
        self.seen.append((instr, engine, start_ns, end_ns, busy_ns))

    def finish(self, stats: MemoryStats) -> None:
        pass


def test_repeater_leaves_template_alone_and_gives_a_recorder_new_instructions():
    instrs = _tiled(rounds=3)
    before = [dataclasses.replace(i) for i in instrs]
    plain_rec, repeated_rec = _Keeping(), _Keeping()
    plain = Scheduler("trn2", recorder=plain_rec)
    for i in instrs:
        plain.emit(i)
    repeated = Scheduler("trn2", recorder=repeated_rec)
    _through_repeaters(repeated, instrs)
    assert instrs == before  # templates unchanged
    seen = [r[0] for r in repeated_rec.seen]
    assert len({id(i) for i in seen}) == len(seen)  # a recorder may keep them: one object each
    assert seen == instrs
    assert repeated_rec.seen == plain_rec.seen  # placed at the same times on the same engines
    # and the Chrome-trace recorder's scheduler gives the same report through repeaters
    traced = tracing_scheduler("trn2")
    _through_repeaters(traced, instrs)
    for s in (plain, repeated, traced):
        s.finish(MemoryStats())
    assert plain.report().to_dict() == repeated.report().to_dict() == traced.report().to_dict()


def test_repeater_checks_ids_like_emit():
    instrs = _tiled(rounds=1)
    sched = Scheduler("trn2")
    sched.emit(instrs[0])
    again = sched.repeater(instrs[0])
    with pytest.raises(ValueError, match="consecutive"):
        again(5, ())
