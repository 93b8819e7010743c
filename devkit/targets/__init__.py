"""Hardware as data: one TOML file per NeuronCore (``trn1``, ``inf2``, ``trn2``, ``trn3``) and the
strict loader that turns it into a frozen :class:`Target`.

The simulator (geometry, ``nl.tile_size``), the cost model (clocks, bandwidths, peaks) and the kernels
(usable SBUF, PSUM banks) all read their hardware numbers here.  This package imports nothing from
the rest of ``devkit`` (it sits below everything that reads it)::

    from devkit.targets import load_target
    trn2 = load_target("trn2")
    trn2.sbuf.usable_bytes_per_partition   # 212984 bytes
"""

from devkit.targets.environment import SDK_TARGET_NAMES, from_environment
from devkit.targets.loader import (
    KINDS,
    RATE_CLASSES,
    SOURCE_KEYS,
    TARGET_DIR,
    TARGETS,
    ClockSpec,
    CoreSpec,
    DmaSpec,
    Entry,
    GpsimdSpec,
    HbmSpec,
    PipelineSpec,
    PsumSpec,
    SbufSpec,
    ScalarSpec,
    Target,
    TargetError,
    TensorSpec,
    TileSpec,
    VectorSpec,
    load_target,
    load_target_file,
    parse_target,
    rate_class,
    resolve_target,
)

#: The target a kernel is simulated or costed for when none is named.
DEFAULT_TARGET = "trn1"

__all__ = [
    "DEFAULT_TARGET",
    "KINDS",
    "RATE_CLASSES",
    "SDK_TARGET_NAMES",
    "SOURCE_KEYS",
    "TARGETS",
    "TARGET_DIR",
    "ClockSpec",
    "CoreSpec",
    "DmaSpec",
    "Entry",
    "GpsimdSpec",
    "HbmSpec",
    "PipelineSpec",
    "PsumSpec",
    "SbufSpec",
    "ScalarSpec",
    "Target",
    "TargetError",
    "TensorSpec",
    "TileSpec",
    "VectorSpec",
    "from_environment",
    "load_target",
    "load_target_file",
    "parse_target",
    "rate_class",
    "resolve_target",
]
