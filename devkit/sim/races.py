"""Detection of dependencies between iterations of ``nl.affine_range`` loops.

NKI lets the compiler run ``affine_range`` iterations in any order and overlap them, so two iterations
must not write the same location (except accumulating matmul results into PSUM with ``+=``), and one
iteration must not read what another writes.  Every access inside a loop is recorded with its *loop
context* -- the (loop instance, iteration) of each enclosing loop -- and compared with earlier accesses
of the same tensor: two accesses conflict when their contexts first differ at an ``affine_range`` loop
(same loop instance, different iterations) and their regions overlap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from devkit.errors import RaceError
from devkit.sim.deps import _Space

if TYPE_CHECKING:
    from devkit.sim.machine import LoopFrame, Machine
    from devkit.sim.tensor import Tensor

# record: [box, ctx, is_write, accumulate, loc]


def _diverge(a: tuple, b: tuple) -> tuple[int, str] | None:
    """First loop level where two contexts are in the same loop instance but different iterations."""
    for i, (fa, fb) in enumerate(zip(a, b)):
        if fa[0] != fb[0]:
            return None  # different loop instances at this level: ordered by the program
        if fa[1] != fb[1]:
            return (i, fa[2])
    return None


class RaceChecker:
    """Per-tensor access records of the loops currently running."""

    def __init__(self, machine: Machine) -> None:
        self.machine = machine
        self._spaces: dict[int, _Space] = {}
        self._records_by_instance: dict[int, list[tuple[int, list]]] = {}

    def access(self, t: Tensor, is_write: bool, accumulate: bool, loc: tuple[str, int]) -> None:
        ctx = self.machine.loop_context()
        if not any(f[2] == "affine" for f in ctx):
            return
        st = t.st
        if st.is_input or st.kind == "constant":
            return  # never written, so never part of a race
        box = t.box()
        sp = self._spaces.get(st.id)
        if sp is None:
            sp = _Space(0, 64)
            self._spaces[st.id] = sp
        found = sp.overlapping(box)
        for rec in found:
            rctx = rec[1]
            if rctx == ctx:
                continue
            dv = _diverge(rctx, ctx)
            if dv is None or dv[1] != "affine":
                continue
            if not (is_write or rec[2]):
                continue  # two reads never conflict
            if is_write and rec[2] and accumulate and rec[3] and st.buffer == "psum":
                continue  # matmul accumulation into PSUM is associative
            self._raise(t, rec, ctx, is_write, loc, dv[0])
        rec = [box, ctx, is_write, accumulate, loc]
        # avoid unbounded growth: an identical record (same box, context, kind) is kept once
        for other in found:
            if other[0] == box and other[1] == ctx and other[2] == is_write and other[3] == accumulate:
                return
        sp.add(rec)
        inst = ctx[-1][0]
        self._records_by_instance.setdefault(inst, []).append((st.id, rec))

    def _raise(
        self, t: Tensor, rec: list, ctx: tuple, is_write: bool, loc: tuple[str, int], level: int
    ) -> None:
        other_kind = "writes" if rec[2] else "reads"
        this_kind = "writes" if is_write else "reads"
        it_a, it_b = rec[1][level][1], ctx[level][1]
        ofn, oln = rec[4]
        what = "write the same location" if (is_write and rec[2]) else "depend on each other through memory"
        raise RaceError(
            f"iterations {it_a} and {it_b} of an nl.affine_range loop {what}: {t.st.describe()} region "
            f"{list(rec[0])} {other_kind} at {ofn}:{oln} (iteration {it_a}) and {this_kind} here "
            f"(iteration {it_b}); use nl.sequential_range for a loop-carried dependency, or give each "
            "iteration its own region",
            filename=loc[0],
            lineno=loc[1],
        )

    def loop_ended(self, frame: LoopFrame) -> None:
        """A loop instance finished: its records collapse onto the enclosing context."""
        recs = self._records_by_instance.pop(frame.instance, None)
        if not recs:
            return
        for sid, rec in recs:
            sp = self._spaces.get(sid)
            if sp is None:
                continue
            ctx = rec[1]
            keep = tuple(f for f in ctx if f[0] != frame.instance)
            sp.remove(rec)
            if not any(f[2] == "affine" for f in keep):
                continue
            rec[1] = keep
            dup = False
            for other in sp.overlapping(rec[0]):
                if other[0] == rec[0] and other[1] == keep and other[2] == rec[2] and other[3] == rec[3]:
                    dup = True
                    break
            if dup:
                continue
            sp.add(rec)
            self._records_by_instance.setdefault(keep[-1][0], []).append((sid, rec))
        for sid in [s for s, sp in self._spaces.items() if not sp.buckets]:
            del self._spaces[sid]

    def forget(self, sid: int) -> None:
        self._spaces.pop(sid, None)


_ = Any
