"""Which target the environment asks for: the one place that reads the SDK's target variables.

``NEURON_PLATFORM_TARGET_OVERRIDE`` is the Neuron SDK's variable (NKI 0.3.0 replaced
``jit(platform_target=...)`` by it [RN]); it takes ``trn1``/``inf2``/``gen2``, ``trn2``/``gen3``,
``trn3``/``gen4``.  ``NKI_NC_VERSION`` (``gen2``/``gen3``/``gen4``) is set by the nki-library test
harness before each simulated run.  ``DEVKIT_TARGET`` (any bundled target name) is the kit's own
variable and wins over both.  Values are case-insensitive; an unknown value is a
:class:`~devkit.targets.loader.TargetError` naming the variable (never a silent fallback).
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from devkit.targets.loader import TARGETS, TargetError

#: Spellings the SDK variables accept, mapped to bundled target names.
SDK_TARGET_NAMES: dict[str, str] = {
    "trn1": "trn1",
    "inf2": "inf2",
    "gen2": "trn1",
    "trn2": "trn2",
    "gen3": "trn2",
    "trn3": "trn3",
    "gen4": "trn3",
}

#: Variables consulted, highest priority first.
VARIABLES = ("DEVKIT_TARGET", "NEURON_PLATFORM_TARGET_OVERRIDE", "NKI_NC_VERSION")


def from_environment(environ: Mapping[str, str] | None = None, default: str | None = None) -> str | None:
    """The bundled target name the environment selects, or ``default`` when no variable is set.

    ``environ`` defaults to ``os.environ``.  Empty values count as unset.
    """
    env = os.environ if environ is None else environ
    for var in VARIABLES:
        raw = env.get(var, "").strip()
        if not raw:
            continue
        value = raw.lower()
        if var == "DEVKIT_TARGET":
            if value in TARGETS:
                return value
            valid = ", ".join(TARGETS)
        else:
            if value in SDK_TARGET_NAMES:
                return SDK_TARGET_NAMES[value]
            valid = ", ".join(SDK_TARGET_NAMES)
        raise TargetError(f"{var}={raw!r} is not a known target; valid values: {valid}")
    return default
