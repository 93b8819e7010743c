"""Hardware targets as data: ``devkit/targets/<name>.toml`` loaded into a frozen :class:`Target`.

Every number the simulator, the cost model and the kernels use about a NeuronCore lives in those
files, one table per entry::

    [dma]
    engine_bw_bytes_per_ns = { value = 17.0, unit = "B/ns", kind = "documented", source = "DMABW ..." }

The loader is strict: an unknown or missing section or key, a wrong unit, a wrong value type, a
``documented`` entry whose source does not start with a key of ``reference/nki_api.md`` section 0,
or a ``derived`` entry whose formula (``source = "derived: <expr>[; comment]"``, names are other
entries of the same file) does not reproduce its value within 1 % is a :class:`TargetError`.

Units: clocks in GHz (cycles per ns), bandwidths in bytes per ns (= GB/s), sizes in bytes, peak
rates in TFLOP/s.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from devkit.targets import toml_io

#: The directory holding the bundled ``<name>.toml`` target files.
TARGET_DIR = Path(__file__).parent

#: TensorE rate classes with a peak entry in the target files (``tensor.peak_tflops_<class>``).
RATE_CLASSES = ("bf16", "fp16", "tf32", "fp8", "fp32")

_RATE_CLASS = {
    "bfloat16": "bf16",
    "float16": "fp16",
    "tfloat32": "tf32",
    "float32r": "tf32",
    "float32": "fp32",
    "float8_e4m3": "fp8",
    "float8_e4m3fn": "fp8",
    "float8_e5m2": "fp8",
    "float8_e4m3fn_x4": "fp8",
    "float8_e5m2_x4": "fp8",
}


def rate_class(dtype: str) -> str:
    """TensorE rate class of a dtype name; integer and unknown names count as ``bf16``."""
    return _RATE_CLASS.get(dtype, "bf16")


#: Source keys of reference/nki_api.md section 0 that a ``documented`` entry may cite.
SOURCE_KEYS = (
    "B1-NKI",
    "B1-NL",
    "B1-ISA",
    "B1-SH",
    "B1-ERR",
    "B1-PM",
    "B1-KI",
    "B1-T",
    "B1-BLK",
    "ARCH2",
    "ARCH3",
    "ARCH4",
    "PERF",
    "DMAOV",
    "DMABW",
    "DGE",
    "HW",
    "MMT",
    "RN",
    "MIG",
    "BETA",
    "N2-NKI",
    "N2-NL",
    "N2-ISA",
    "N2-LG",
    "N2-SIM",
    "KLR",
    "SMP",
    "SMP-H",
)
KINDS = ("documented", "derived", "assumed")
_ENTRY_KEYS = frozenset({"value", "unit", "source", "kind"})


class TargetError(ValueError):
    """A target file is malformed, or a target name is unknown."""


def _u(unit: str) -> Any:
    return field(metadata={"unit": unit})


@dataclass(frozen=True)
class CoreSpec:
    """Which NeuronCore generation this is (``nki.isa.nc_version``: 2 = NC-v2 ... 4 = NC-v4)."""

    nc_version: int = _u("generation")


@dataclass(frozen=True)
class TileSpec:
    """The ``nl.tile_size`` limits: free sizes in elements, alignments in bytes."""

    pmax: int = _u("partitions")
    psum_fmax: int = _u("elements")
    gemm_stationary_fmax: int = _u("elements")
    gemm_moving_fmax: int = _u("elements")
    bn_stats_fmax: int = _u("elements")
    psum_min_align: int = _u("bytes")
    sbuf_min_align: int = _u("bytes")


@dataclass(frozen=True)
class SbufSpec:
    partitions: int = _u("partitions")
    bytes_per_partition: int = _u("bytes")
    usable_bytes_per_partition: int = _u("bytes")


@dataclass(frozen=True)
class PsumSpec:
    partitions: int = _u("partitions")
    banks: int = _u("banks")
    bank_bytes_per_partition: int = _u("bytes")
    bytes_per_partition: int = _u("bytes")


@dataclass(frozen=True)
class ClockSpec:
    """Engine clocks in GHz, i.e. cycles per ns."""

    tensor_ghz: float = _u("GHz")
    vector_ghz: float = _u("GHz")
    scalar_ghz: float = _u("GHz")
    gpsimd_ghz: float = _u("GHz")


@dataclass(frozen=True)
class TensorSpec:
    pe_rows: int = _u("PEs")
    pe_cols: int = _u("PEs")
    moving_min_cycles: int = _u("cycles")
    fp32_cycle_factor: float = _u("x")
    fp32_onezero_cycle_factor: float = _u("x")
    load_stationary_speedup: float = _u("x")
    peak_tflops_bf16: float = _u("TFLOP/s")
    peak_tflops_fp16: float = _u("TFLOP/s")
    peak_tflops_tf32: float = _u("TFLOP/s")
    peak_tflops_fp8: float = _u("TFLOP/s")
    peak_tflops_fp32: float = _u("TFLOP/s")


@dataclass(frozen=True)
class VectorSpec:
    min_ii_cycles: int = _u("cycles")
    two_input_factor: float = _u("x")
    reciprocal_factor: float = _u("x")
    bn_aggr_factor: float = _u("x")
    reduce_fast_divisor: float = _u("x")
    memset_fast_divisor: float = _u("x")
    dynamic_copy_min_cycles: int = _u("cycles")
    perf_mode_factor_contiguous: float = _u("x")
    perf_mode_factor_other: float = _u("x")


@dataclass(frozen=True)
class ScalarSpec:
    min_ii_cycles: int = _u("cycles")


@dataclass(frozen=True)
class GpsimdSpec:
    start_cycles: int = _u("cycles")


@dataclass(frozen=True)
class PipelineSpec:
    dependent_overhead_cycles: int = _u("cycles")
    vector_gpsimd_share_sbuf_port: bool = _u("bool")


@dataclass(frozen=True)
class DmaSpec:
    engines: int = _u("engines")
    queues_per_engine: int = _u("queues")
    partitions_per_engine: int = _u("partitions")
    engine_bw_bytes_per_ns: float = _u("B/ns")
    transfer_fixed_ns: float = _u("ns")
    descriptor_overhead_bytes: float = _u("bytes")
    """Engine time of one descriptor beyond its own bytes, as bytes at the engine bandwidth."""
    transpose_unit_itemsize: int = _u("bytes")
    """Element size the DMA transpose unit handles (0: no unit, transposes are element-granular)."""
    transpose_sbuf_percent: float = _u("percent")
    """Percent of copy throughput an SBUF->SBUF transpose on the DMA transpose path reaches."""


@dataclass(frozen=True)
class HbmSpec:
    chip_bw_bytes_per_ns: float = _u("B/ns")
    cores_per_chip: int = _u("cores")
    bw_bytes_per_ns: float = _u("B/ns")


@dataclass(frozen=True)
class Entry:
    """Provenance of one target number."""

    value: int | float | bool
    unit: str
    source: str
    kind: str


_SECTIONS: dict[str, type] = {
    "core": CoreSpec,
    "tile": TileSpec,
    "sbuf": SbufSpec,
    "psum": PsumSpec,
    "clock": ClockSpec,
    "tensor": TensorSpec,
    "vector": VectorSpec,
    "scalar": ScalarSpec,
    "gpsimd": GpsimdSpec,
    "pipeline": PipelineSpec,
    "dma": DmaSpec,
    "hbm": HbmSpec,
}


@dataclass(frozen=True)
class Target:
    """One NeuronCore as data.  Build with :func:`load_target`; edit with ``dataclasses.replace``."""

    name: str
    description: str
    core: CoreSpec
    tile: TileSpec
    sbuf: SbufSpec
    psum: PsumSpec
    clock: ClockSpec
    tensor: TensorSpec
    vector: VectorSpec
    scalar: ScalarSpec
    gpsimd: GpsimdSpec
    pipeline: PipelineSpec
    dma: DmaSpec
    hbm: HbmSpec
    #: ``"section.key"`` -> provenance, for reports and tests.
    entries: Mapping[str, Entry] = field(default_factory=dict, compare=False, hash=False, repr=False)

    def peak_flops_per_ns(self, dtype: str) -> float:
        """TensorE peak for a dtype name, in FLOP per ns (1 TFLOP/s = 1000 FLOP/ns)."""
        return getattr(self.tensor, f"peak_tflops_{rate_class(dtype)}") * 1000.0

    def clock_ghz(self, engine: str) -> float:
        """Clock of a compute engine (``tensor``, ``vector``, ``scalar``, ``gpsimd``) in GHz."""
        return getattr(self.clock, f"{engine}_ghz")


def _check_value(where: str, value: Any, annotation: Any) -> Any:
    kind = annotation if isinstance(annotation, str) else getattr(annotation, "__name__", "")
    if kind == "bool":
        if not isinstance(value, bool):
            raise TargetError(f"{where}: value must be true/false, got {value!r}")
    elif kind == "int":
        if isinstance(value, bool) or not isinstance(value, int):
            raise TargetError(f"{where}: value must be an integer, got {value!r}")
    elif isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TargetError(f"{where}: value must be a number, got {value!r}")
    else:
        value = float(value)
    return value


def _eval_formula(expr: str, raw: Mapping[str, Any], where: str) -> float:
    """Evaluate ``a.b * c.d / 2`` style formulas over other entries of the same file."""
    try:
        tree = ast.parse(expr.strip(), mode="eval")
    except SyntaxError as exc:
        raise TargetError(f"{where}: cannot parse derived formula {expr!r}") from exc

    def dotted(node: ast.AST) -> str:
        if isinstance(node, ast.Name):
            return node.id
        if isinstance(node, ast.Attribute):
            return f"{dotted(node.value)}.{node.attr}"
        raise TargetError(f"{where}: unsupported name in formula {expr!r}")

    ops = {
        ast.Add: float.__add__,
        ast.Sub: float.__sub__,
        ast.Mult: float.__mul__,
        ast.Div: float.__truediv__,
    }

    def ev(node: ast.AST) -> float:
        if isinstance(node, ast.Expression):
            return ev(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
            return float(node.value)
        if isinstance(node, ast.BinOp) and type(node.op) in ops:
            return ops[type(node.op)](ev(node.left), ev(node.right))
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -ev(node.operand)
        if isinstance(node, (ast.Name, ast.Attribute)):
            name = dotted(node)
            if name not in raw:
                raise TargetError(f"{where}: formula {expr!r} names unknown entry {name!r}")
            return float(raw[name])
        raise TargetError(f"{where}: unsupported syntax in derived formula {expr!r}")

    return ev(tree)


def _check_entry(where: str, table: Any, unit: str) -> Entry:
    if not isinstance(table, dict):
        raise TargetError(f"{where}: must be a table {{value, unit, source, kind}}, got {table!r}")
    keys = set(table)
    if keys != _ENTRY_KEYS:
        missing, extra = sorted(_ENTRY_KEYS - keys), sorted(keys - _ENTRY_KEYS)
        raise TargetError(
            f"{where}: entry keys must be value, unit, source, kind (missing {missing}, unknown {extra})"
        )
    if table["unit"] != unit:
        raise TargetError(f"{where}: unit must be {unit!r}, got {table['unit']!r}")
    kind, source = table["kind"], table["source"]
    if kind not in KINDS:
        raise TargetError(f"{where}: kind must be one of {', '.join(KINDS)}, got {kind!r}")
    if not isinstance(source, str) or not source.strip():
        raise TargetError(f"{where}: source must be a non-empty string")
    if kind == "documented" and not source.startswith(SOURCE_KEYS):
        raise TargetError(
            f"{where}: a documented source must start with a reference key ({', '.join(SOURCE_KEYS)})"
        )
    if kind == "derived" and not source.startswith("derived:"):
        raise TargetError(f"{where}: a derived source must read 'derived: <formula>'")
    return Entry(value=table["value"], unit=unit, source=source, kind=kind)


def parse_target(data: Mapping[str, Any], origin: str = "<target>") -> Target:
    """Validate parsed TOML and build a :class:`Target`; raises :class:`TargetError`."""
    top = set(data)
    expected = {"name", "description", *_SECTIONS}
    if top != expected:
        raise TargetError(
            f"{origin}: unknown top-level keys {sorted(top - expected)}, missing {sorted(expected - top)}"
        )
    for key in ("name", "description"):
        if not isinstance(data[key], str):
            raise TargetError(f"{origin}: {key} must be a string")
    entries: dict[str, Entry] = {}
    values: dict[str, dict[str, Any]] = {}
    for section, cls in _SECTIONS.items():
        table = data[section]
        if not isinstance(table, dict):
            raise TargetError(f"{origin}: [{section}] must be a table")
        fields = {f.name: f for f in dataclasses.fields(cls)}
        unknown, missing = sorted(set(table) - set(fields)), sorted(set(fields) - set(table))
        if unknown or missing:
            raise TargetError(
                f"{origin}: [{section}] unknown keys {unknown}, missing keys {missing}; "
                f"valid keys are {', '.join(fields)}"
            )
        values[section] = {}
        for key, fld in fields.items():
            where = f"{origin}: {section}.{key}"
            entry = _check_entry(where, table[key], fld.metadata["unit"])
            value = _check_value(where, entry.value, fld.type)
            entries[f"{section}.{key}"] = dataclasses.replace(entry, value=value)
            values[section][key] = value
    raw = {k: e.value for k, e in entries.items()}
    for key, entry in entries.items():
        if entry.kind == "derived":
            expr = entry.source[len("derived:") :].split(";", 1)[0]
            got = _eval_formula(expr, raw, f"{origin}: {key}")
            if abs(got - float(entry.value)) > 0.01 * max(abs(got), 1e-12):
                raise TargetError(
                    f"{origin}: {key} = {entry.value} but its formula {expr.strip()!r} gives {got:g}"
                )
    sections = {name: cls(**values[name]) for name, cls in _SECTIONS.items()}
    return Target(
        name=data["name"], description=data["description"], entries=MappingProxyType(entries), **sections
    )


def load_target_file(path: str | Path) -> Target:
    """Load and validate one target file."""
    path = Path(path)
    target = parse_target(toml_io.load_file(path, TargetError), origin=str(path))
    if target.name != path.stem:
        raise TargetError(f"{path}: name {target.name!r} does not match the file name")
    return target


#: Names of the bundled targets.
TARGETS: tuple[str, ...] = tuple(sorted(p.stem for p in TARGET_DIR.glob("*.toml")))


@functools.cache
def load_target(name: str) -> Target:
    """The bundled target ``name`` (one of :data:`TARGETS`); unknown names raise :class:`TargetError`."""
    if name not in TARGETS:
        raise TargetError(f"unknown target {name!r}; valid targets: {', '.join(TARGETS)}")
    return load_target_file(TARGET_DIR / f"{name}.toml")


def resolve_target(target: str | Target) -> Target:
    """Accept a target name or a :class:`Target`."""
    return target if isinstance(target, Target) else load_target(target)
