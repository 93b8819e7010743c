"""Logical-core launches ``kernel[2]``: two programs that exchange data and wait for each other.

Under LNC 2 the two programs of a launch run on two physical NeuronCores sharing HBM; ``nisa.sendrecv`` swaps
SBUF data between them and ``nisa.core_barrier`` makes each wait for the other (``reference/nki_beta2.md``
§2, §5.4; AWS's simulator runs them as two threads).  Here the programs run as two threads that take turns on
the one simulated machine, one ``nki.isa`` instruction at a time in numerics runs (the two cores start together
and run side by side, so e.g. both programs' initialisation of a shared output lands before either stores its
half, as nki-library's ``cascaded_max`` tests rely on); a program that has to wait for the other (a
``sendrecv`` whose message has not arrived, a barrier the other has not reached) hands over until it can go
on.  The result is deterministic, and a program waiting for one that already finished is reported as a
deadlock.  Cost-only runs keep whole turns (values do not depend on the order there).

Per-program machine state (program id, ``shared_hbm`` allocation cursor, engine accumulators, the program
whose SBUF/PSUM a new tile counts against -- each program has its own, :class:`_ProgramLiveness`) is
swapped when the turn changes; everything else (HBM, trace) is shared.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import numpy as np

from devkit import dtypes as _dt
from devkit.errors import (
    DeadlockError,
    KernelArgumentError,
    MemoryPlacementError,
    TileShapeError,
    user_location,
)
from devkit.nki.beta2 import _convention
from devkit.sim import machine as _machine
from devkit.sim import unwritten as _unwritten
from devkit.sim.liveness import Liveness, Verdict
from devkit.sim.machine import Machine
from devkit.sim.tensor import Tensor
from devkit.trace import DMA


class _ProgramLiveness:
    """The liveness recorder of an LNC launch: each program's tiles count against its own SBUF and PSUM (one
    :class:`~devkit.sim.liveness.Liveness` per program; a tile belongs to the program that first touched it).
    The verdict takes the largest peaks of any program, the sum of their spill traffic and the first overflow."""

    def __init__(self, base: Liveness, n: int) -> None:
        self.parts = [base] + [Liveness(base.geometry) for _ in range(n - 1)]
        self.program = 0
        self.owner: dict[int, int] = {}  # storage id -> program

    def touch(self, st: Any, blocks: Any, tile_bytes: int, iid: int, accumulate: bool) -> None:
        self.parts[self.owner.setdefault(st.id, self.program)].touch(st, blocks, tile_bytes, iid, accumulate)

    def intervals(self, st: Any, *args: Any) -> None:
        self.parts[self.owner.get(st.id, self.program)].intervals(st, *args)

    def close(self, sid: int) -> None:
        p = self.owner.get(sid)
        if p is not None:
            self.parts[p].close(sid)

    def verdict(self, open_groups: bool = False) -> Verdict:
        vs = [part.verdict(open_groups) for part in self.parts]
        first = lambda xs: next((x for x in xs if x is not None), None)  # noqa: E731
        return Verdict(
            max(v.sbuf_peak_bytes for v in vs),
            max(v.psum_peak_bytes for v in vs),
            sum(v.spill_bytes for v in vs),
            first(v.sbuf_over for v in vs),
            first(v.psum_over for v in vs),
            first(v.psum_acc_over for v in vs),
        )

    def occupancy(self, max_points: int = 4000) -> dict[str, list[tuple[int, int]]]:
        """Program 0's occupancy (see :meth:`Liveness.occupancy`)."""
        return self.parts[0].occupancy(max_points)


class _Aborted(BaseException):
    """Unwinds a waiting program after the other one failed (not a kernel fault)."""


class Programs:
    """The programs of one launch taking turns on machine ``m``."""

    def __init__(self, m: Machine, n: int) -> None:
        self.m = m
        self.n = n
        self.cv = threading.Condition()
        self.active = 0
        self.done = [False] * n
        self.error: BaseException | None = None
        self.aborted = False
        self.state: list[tuple[Any, ...]] = [((pid,), 0, {}) for pid in range(n)]
        # (from, to, pipe) -> (values, never-written positions or None); None in cost-only runs
        self.mail: dict[tuple[int, int, int], Any] = {}
        self.arrivals = [0] * n
        self.blocked: dict[
            int, tuple[Callable[[], bool], str, str]
        ] = {}  # waiting programs: (ready, what, where)

    # ---- per-program machine state --------------------------------------------------------------------------
    def _save(self, pid: int) -> None:
        m = self.m
        m.flush()
        self.state[pid] = (m.program_ids, m._shared_cursor, m.accumulators)

    def _restore(self, pid: int) -> None:
        m = self.m
        m.program_ids, m._shared_cursor, m.accumulators = self.state[pid]
        m.liveness.program = pid

    def step(self) -> None:
        """After an instruction: hand the turn to the next unfinished program (cores run side by side)."""
        if not self.m.numerics:
            return
        pid = self.current()
        nxt = next((q for q in ((pid + i) % self.n for i in range(1, self.n)) if not self.done[q]), None)
        if nxt is None:
            return
        self._save(pid)
        with self.cv:
            self.active = nxt
            self.cv.notify_all()
            self.cv.wait_for(lambda: self.active == pid or self.aborted)
        if self.aborted:
            raise _Aborted
        self._restore(pid)

    def current(self) -> int:
        return int(self.m.program_ids[0]) if self.m.program_ids else 0

    # ---- turns ------------------------------------------------------------------------------------------------
    def wait_until(self, ready: Callable[[], bool], what: str) -> None:
        """Let the other program run until ``ready()`` holds; a deadlock if it finished or waits itself."""
        pid = self.current()
        fn, ln = user_location()
        self.blocked[pid] = (ready, what, f"{fn}:{ln}")
        try:
            while not ready():
                others = [p for p in range(self.n) if p != pid and not self.done[p]]
                stuck = [p for p in others if p in self.blocked and not self.blocked[p][0]()]
                if not others or len(stuck) == len(others):
                    theirs = "; ".join(
                        f"program {p} waits for {self.blocked[p][1]} at {self.blocked[p][2]}" for p in stuck
                    )
                    raise DeadlockError(
                        f"program {pid} of an LNC-{self.n} launch waits for {what}, but "
                        + (theirs if stuck else "the other program finished without it"),
                        filename=fn,
                        lineno=ln,
                    )
                self._save(pid)
                with self.cv:
                    self.active = others[0]
                    self.cv.notify_all()
                    self.cv.wait_for(lambda: self.active == pid or self.aborted)
                if self.aborted:
                    raise _Aborted
                self._restore(pid)
        finally:
            self.blocked.pop(pid, None)

    def _body(self, pid: int, func: Any, args: tuple, kwargs: dict, results: list) -> None:
        with self.cv:
            self.cv.wait_for(lambda: self.active == pid or self.aborted)
        if self.aborted:
            return
        _machine._current.machine = (
            self.m
        )  # the simulated machine of this thread (see devkit.sim.machine.current)
        try:
            self._restore(pid)
            results[pid] = func(*args, **kwargs)
            self._save(pid)
        except _Aborted:
            return
        except BaseException as e:  # handed to the caller's thread
            with self.cv:
                if self.error is None:
                    self.error = e
                self.aborted = True
                self.cv.notify_all()
            return
        finally:
            _machine._current.machine = None
        with self.cv:
            self.done[pid] = True
            rest = [p for p in range(self.n) if not self.done[p]]
            if rest:
                self.active = rest[0]
            self.cv.notify_all()

    def run(self, func: Any, args: tuple, kwargs: dict) -> Any:
        results: list[Any] = [None] * self.n
        if self.n > 1 and not isinstance(self.m.liveness, _ProgramLiveness):
            self.m.liveness = _ProgramLiveness(self.m.liveness, self.n)  # type: ignore[assignment]
        threads = [
            threading.Thread(target=self._body, args=(pid, func, args, kwargs, results), daemon=True)
            for pid in range(self.n)
        ]
        outer = self.m.program_ids, self.m._shared_cursor, self.m.accumulators
        _machine._current.machine = None  # the programs' threads hold the machine while they run
        try:
            for t in threads:
                t.start()
            with self.cv:
                self.cv.wait_for(lambda: all(self.done) or self.aborted)
            for t in threads:
                t.join()
        finally:
            _machine._current.machine = self.m
            self.m.program_ids, self.m._shared_cursor, self.m.accumulators = outer
            self.m.liveness.program = 0
        if self.error is not None:
            raise self.error
        return results[-1]


_RUNNING: dict[int, Programs] = {}


def run_programs(m: Machine, func: Any, args: tuple, kwargs: dict, points: list[tuple[int, ...]]) -> Any:
    """:func:`devkit.nki.runner.run_kernel` hook: run the programs of an LNC launch as taking turns."""
    progs = Programs(m, len(points))
    _RUNNING[id(m)] = progs
    try:
        return progs.run(func, args, kwargs)
    finally:
        _RUNNING.pop(id(m), None)


def _step() -> None:
    """:data:`_convention.after_instruction` hook: LNC programs alternate one instruction at a time."""
    if not _RUNNING:
        return
    m = _machine.current()
    progs = _RUNNING.get(id(m)) if m is not None else None
    if progs is not None:
        progs.step()


_convention.after_instruction.append(_step)


def _programs(api: str) -> Programs | None:
    m = _machine.current()
    if m is None:
        from devkit.sim.instr import machine

        machine(api)  # raises outside-kernel
    return _RUNNING.get(id(m))


def _rank(v: Any, api: str, name: str, n: int) -> int:
    if not isinstance(v, (int, np.integer)) or not 0 <= int(v) < n:
        raise KernelArgumentError(
            f"{api}: {name} must be a program id in 0..{n - 1}, got {v!r}", rule="bad-argument"
        )
    return int(v)


def sendrecv(
    src: Any,
    dst: Any,
    send_to_rank: Any,
    recv_from_rank: Any,
    pipe_id: Any,
    dma_engine: Any = None,
    name: Any = None,
) -> None:
    """Send ``src`` (SBUF) to program ``send_to_rank`` and receive ``dst`` (SBUF) from ``recv_from_rank``."""
    api = "nisa.sendrecv"
    progs = _programs(api)
    m = _machine.current()
    loc = user_location()
    for t, nm in ((src, "src"), (dst, "dst")):
        if not isinstance(t, Tensor):
            raise KernelArgumentError(
                f"{api}: {nm} must be a tensor, got {type(t).__name__}", rule="bad-argument"
            )
        t.check_alive()
        if t.st.buffer != "sbuf":
            raise MemoryPlacementError(
                f"{api}: {nm} must be in SBUF, got {t.st.describe()}", rule="operand-in-hbm"
            )
    if src.size != dst.size or src.shape[0] != dst.shape[0]:
        raise TileShapeError(
            f"{api}: src {list(src.shape)} and dst {list(dst.shape)} must have the same shape",
            rule="shape-mismatch",
        )
    if progs is None:
        raise KernelArgumentError(f"{api} needs an LNC-2 launch (kernel[2])", rule="bad-argument")
    me = progs.current()
    to = _rank(send_to_rank, api, "send_to_rank", progs.n)
    frm = _rank(recv_from_rank, api, "recv_from_rank", progs.n)
    pipe = int(pipe_id)
    m.check_read(src, loc)  # type: ignore[union-attr]
    key = (me, to, pipe)
    if key in progs.mail:  # the pipe holds one message: wait until the peer has taken the previous one
        progs.wait_until(
            lambda: key not in progs.mail, f"program {to} to receive the previous message on pipe {pipe}"
        )
    # the message is the data at send time (the sender may overwrite src before the peer receives it), with
    # the positions never written: they travel along and stay never-written at the peer (devkit.sim.unwritten)
    sent = None
    if m.numerics:  # type: ignore[union-attr]
        never_written = _unwritten.moved(src)
        sent = (np.array(src.read(check_init=False), copy=True), never_written)
    progs.mail[key] = sent
    want = (frm, me, pipe)
    progs.wait_until(lambda: want in progs.mail, f"a sendrecv from program {frm} on pipe {pipe}")
    received = progs.mail.pop(want)
    m.check_write(dst, loc)  # type: ignore[union-attr]
    # one DMA per receiving program in the trace (its own src stands in for the peer's, same shape and dtype)
    m.emit(DMA, "dma_copy", [src], [dst], 0, {"indirect": False, "rmw": False}, loc)  # type: ignore[union-attr]
    if received is None:
        dst.mark_written()
    else:
        vals, never_written = received
        v = vals.reshape(dst.shape)
        dst.write(v if _dt.name_of(dst.dtype) == _dt.name_of(src.dtype) else _dt.round_to(v, dst.dtype))
        _unwritten.carry(dst, never_written)


def core_barrier(data: Any, cores: Any, engine: Any = None, name: Any = None) -> None:
    """Wait until both programs of an LNC-2 launch reach this barrier (``cores=(0, 1)``)."""
    api = "nisa.core_barrier"
    progs = _programs(api)
    if tuple(cores) != (0, 1):
        raise KernelArgumentError(f"{api}: cores must be (0, 1), got {cores!r}", rule="bad-argument")
    if not isinstance(data, Tensor):
        raise KernelArgumentError(
            f"{api}: data must be a tensor, got {type(data).__name__}", rule="bad-argument"
        )
    if progs is None:
        return  # a single program has nobody to wait for
    me = progs.current()
    progs.arrivals[me] += 1
    mine = progs.arrivals[me]
    progs.wait_until(
        lambda: all(progs.arrivals[p] >= mine for p in range(progs.n)),
        f"core_barrier #{mine} of the other program",
    )
