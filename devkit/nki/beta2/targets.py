"""Which NeuronCore a Beta-2 (NKI 0.x) simulation runs on.

Order of precedence (``reference/nki_beta2.md`` §2): ``NEURON_PLATFORM_TARGET_OVERRIDE`` (AWS's simulator),
then ``NKI_NC_VERSION`` (set by nki-library's harness before each simulated run), then the kernel's
``nki.jit(platform_target=...)``, then ``DEVKIT_TARGET``, then trn3 -- AWS's simulator default when no chip
is detected.
"""

from __future__ import annotations

import os
from typing import Any

from devkit.errors import KernelArgumentError, UnsupportedError
from devkit.sim import instr as _x
from devkit.targets import load_target
from devkit.targets.environment import SDK_TARGET_NAMES as ALIASES

DEFAULT = "trn3"


def resolve(name: str, source: str) -> str:
    """A target spelling (``trn2``, ``gen3``...) -> the kit's target name; unknown names raise."""
    key = str(name).strip().lower()
    if key not in ALIASES:
        raise KernelArgumentError(
            f"{source}={name!r} is not a NeuronCore target; use one of {', '.join(sorted(ALIASES))}",
            rule="bad-target",
        )
    return ALIASES[key]


def selected_target(kernel_target: str | None) -> str:
    """The target of a Beta-2 run given the kernel's own ``platform_target`` (or None)."""
    for var in ("NEURON_PLATFORM_TARGET_OVERRIDE", "NKI_NC_VERSION"):
        v = os.environ.get(var, "").strip()
        if v:
            return resolve(v, var)
    if kernel_target:
        return resolve(kernel_target, "platform_target")
    v = os.environ.get("DEVKIT_TARGET", "").strip()
    if v:
        return resolve(v, "DEVKIT_TARGET")
    return DEFAULT


def target_nc_version(target: str) -> int:
    """NeuronCore generation (2, 3, 4) of a kit target name (from its target file)."""
    return load_target(target).core.nc_version


_CHIP = {3: "trn2", 4: "trn3"}


def machine_at_least(api: str, version: int) -> Any:
    """The simulated machine, when its NeuronCore generation is ``version`` or newer (an ``arch`` error
    naming the target and how to select a newer one otherwise)."""
    m = _x.machine(api)
    if m.geometry.nc_version < version:
        raise UnsupportedError(
            f"{api} needs NeuronCore-v{version} ({_CHIP[version]}) or newer; the simulated target is "
            f"{m.geometry.name} (select one with NEURON_PLATFORM_TARGET_OVERRIDE or NKI_NC_VERSION)",
            rule="arch",
        )
    return m
