"""Simulation options and the on-chip geometry of a target."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Literal

#: The value-based correctness checks (rule codes) and the option that enables each in a numerics run.
VALUE_CHECKS = {"uninitialized-read": "check_uninit", "affine-race": "check_races"}


def _env_flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on")


@dataclass(frozen=True, kw_only=True)
class SimOptions:
    """How strictly and how completely a kernel is simulated.

    Attributes:
        numerics: compute values (``False``: cost-only, shapes and bookkeeping only).
        check_uninit: raise on reads of never-written SBUF/PSUM/output memory (numerics runs).
        check_races: raise on dependencies between ``affine_range`` iterations (numerics runs).
        strict_capacity: turn SBUF spill warnings into errors (default from ``DEVKIT_STRICT_CAPACITY``).
        affine_order: execute ``affine_range`` iterations in order or shuffled (a second line of
            defence against hidden loop-carried dependencies).
        seed: seed of the shuffle and of ``nl.rand``/``dropout``.
        baremetal_notice: print the one-time "running on the CPU" notice for ``baremetal``.
        replay_loops: in cost-only runs, synthesise the repeats of a loop body from two executed
            iterations instead of executing them (:mod:`devkit.sim.replay`); no effect on numerics runs.
    """

    numerics: bool = True
    check_uninit: bool = True
    check_races: bool = True
    strict_capacity: bool = field(default_factory=lambda: _env_flag("DEVKIT_STRICT_CAPACITY"))
    affine_order: Literal["sequential", "shuffled"] = "sequential"
    seed: int = 0
    baremetal_notice: bool = True
    replay_loops: bool = True

    def __post_init__(self) -> None:
        if self.affine_order not in ("sequential", "shuffled"):
            raise ValueError(f"affine_order must be 'sequential' or 'shuffled', got {self.affine_order!r}")


@dataclass(frozen=True)
class Geometry:
    """On-chip geometry of one NeuronCore, as the simulator's checks need it (bytes per partition)."""

    name: str
    partitions: int
    sbuf_bytes_per_partition: int
    sbuf_usable_bytes_per_partition: int
    psum_banks: int
    psum_bank_bytes: int
    nc_version: int

    @property
    def psum_bytes_per_partition(self) -> int:
        return self.psum_banks * self.psum_bank_bytes
