"""Cost of an NKI 0.x logical-core launch (``kernel[2]``): each program on its own physical NeuronCore.

An API-level companion of :func:`devkit.estimate` (it runs the simulator and feeds the cost model, so it lives
above both, like :mod:`devkit.api`).

Under LNC 2 the two programs of a launch run on two physical cores at the same time, each with its own
engines, DMA queues and share of HBM bandwidth (``reference/nki_beta2.md`` §2: "two physical cores sharing
HBM").  The simulator runs the programs one after the other on one machine; here every instruction is routed
to the scheduler of the program that issued it, so each program is costed on a core of its own, and the
launch takes as long as its slowest program.  Not modelled: contention between the two cores for the
chip's HBM (each core keeps its per-core bandwidth from the target file) and the cost of synchronisation
(``sendrecv``/``core_barrier`` order the programs in the simulator but add no waiting time here).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from devkit.cost.report import CostReport
from devkit.cost.scheduler import Scheduler
from devkit.sim import machine as _machine
from devkit.trace import Instr, MemoryStats


class PerProgramSink:
    """A :class:`devkit.trace.TraceSink` with one :class:`Scheduler` per program of the launch."""

    def __init__(self, target: str, programs: int) -> None:
        self.schedulers = [Scheduler(target) for _ in range(programs)]
        self.local: dict[int, tuple[int, int]] = {}  # machine-wide id -> (program, id on its core)
        self.counts = [0] * programs

    def emit(self, instr: Instr) -> None:
        """Renumber ``instr`` on its program's core; dependencies on the other program's instructions are
        dropped (the other core runs them independently)."""
        m = _machine.current()
        pid = int(m.program_ids[0]) if m is not None and m.program_ids else 0
        own = self.local
        deps = tuple(own[d][1] for d in instr.deps if d in own and own[d][0] == pid)
        local_id = self.counts[pid]
        self.counts[pid] += 1
        own[instr.id] = (pid, local_id)
        self.schedulers[pid].emit(dataclasses.replace(instr, id=local_id, deps=deps))

    def finish(self, stats: MemoryStats) -> None:
        for s in self.schedulers:
            s.finish(stats)


@dataclass(frozen=True)
class LaunchEstimate:
    """Cost of one launch: ``latency_us`` (the slowest program, microseconds) and each program's report."""

    lnc: int
    latency_us: float
    programs: tuple[CostReport, ...]


def estimate_launch(
    kernel: Any, *args_or_specs: Any, lnc: int = 2, target: str = "trn2", **kwargs: Any
) -> LaunchEstimate:
    """Cost-model ``kernel[lnc](*args_or_specs, **kwargs)`` with every program on its own core.

    ``kernel``: an NKI 0.x ``@nki.jit`` kernel; arguments as for :func:`devkit.estimate` (arrays or
    ``nt.tensor`` placeholders).  ``lnc`` 1 gives the ordinary single-core estimate."""
    from devkit.nki import _tensor_ops  # noqa: F401
    from devkit.nki.runner import run_kernel

    if not getattr(kernel, "__nki_beta2__", False):
        raise TypeError(f"estimate_launch takes an NKI 0.x (import nki) kernel, got {type(kernel).__name__}")
    if lnc not in (1, 2):
        raise ValueError(f"lnc must be 1 or 2, got {lnc!r}")
    launch = kernel[lnc]
    sink = PerProgramSink(target, lnc)
    run_kernel(
        launch.func,
        args_or_specs,
        kwargs,
        grid=(lnc,) if lnc > 1 else None,
        target=target,
        sink=sink,
        programs=getattr(launch, "program_runner", None),
        host_outputs=False,
    )
    name = getattr(launch.func, "__name__", "kernel")
    reports = tuple(
        dataclasses.replace(s.report(kernel_name=f"{name}[program {p} of {lnc}]"))
        for p, s in enumerate(sink.schedulers)
    )
    return LaunchEstimate(lnc, max(r.latency_us for r in reports), reports)
