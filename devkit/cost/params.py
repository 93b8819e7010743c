"""The calibrated parameters of the cost model (``params.toml``): load, select per target, save.

A :class:`ParamSet` is the whole file: one :class:`ParamSpec` per parameter (default value plus
provenance), per-target :class:`Override` values, and the :class:`Anchor` measurements the values
were fitted from.  :meth:`ParamSet.for_target` flattens it into the small frozen :class:`Params`
record that the cost model reads on its hot path.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from devkit import atomic
from devkit.targets import TARGETS, toml_io

PARAMS_PATH = Path(__file__).with_name("params.toml")

#: Comment block at the top of the bundled file, kept when :func:`save_params` rewrites a file.
_HEADER = PARAMS_PATH.read_text(encoding="utf-8").split("\nschema", 1)[0] + "\n"


class ParamsError(ValueError):
    """``params.toml`` is malformed or a parameter name is unknown."""


@dataclass(frozen=True)
class Params:
    """Parameter values for one target (units in the names)."""

    dma_descriptor_ns: float
    dma_fixed_latency_ns: float
    dma_queue_busy_ns: float
    dma_transfer_engine_ns: float
    dma_transpose_efficiency: float
    dependency_latency_cycles: float
    kernel_fixed_ns: float

    @classmethod
    def names(cls) -> tuple[str, ...]:
        """Parameter names in declaration order."""
        return tuple(f.name for f in dataclasses.fields(cls))

    def replace(self, **values: float) -> Params:
        """A copy with some values changed (unknown names raise :class:`ParamsError`)."""
        unknown = set(values) - set(self.names())
        if unknown:
            raise ParamsError(f"unknown parameters {sorted(unknown)}; valid: {', '.join(self.names())}")
        return dataclasses.replace(self, **{k: float(v) for k, v in values.items()})

    def as_dict(self) -> dict[str, float]:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class ParamSpec:
    """Default value of one parameter with its provenance and calibration bounds."""

    name: str
    value: float
    unit: str
    description: str
    source: str
    fitted_from: tuple[str, ...]
    fit_date: str
    method: str
    bounds: tuple[float, float]


@dataclass(frozen=True)
class Override:
    """A per-target value of one parameter with its provenance."""

    value: float
    source: str
    fitted_from: tuple[str, ...]
    fit_date: str
    method: str


@dataclass(frozen=True)
class Anchor:
    """A published measurement the parameters were fitted from.

    ``metric`` says what was measured: ``latency_us`` (kernel latency), ``dma_engine_us`` (busy
    time of one DMA engine), ``initiation_interval_us`` (time between dependent instructions).
    """

    id: str
    kernel: str
    target: str
    measured_us: float
    metric: str
    shape: str
    dtype: str
    source: str


_SPEC_KEYS = {"value", "unit", "description", "source", "fitted_from", "fit_date", "method", "bounds"}
_OVERRIDE_KEYS = {"value", "source", "fitted_from", "fit_date", "method"}
_ANCHOR_KEYS = {f.name for f in dataclasses.fields(Anchor)}


def _keys(where: str, table: Any, expected: set[str]) -> None:
    if not isinstance(table, dict) or set(table) != expected:
        got = set(table) if isinstance(table, dict) else set()
        raise ParamsError(
            f"{where}: keys must be {sorted(expected)} (missing {sorted(expected - got)}, "
            f"unknown {sorted(got - expected)})"
        )


def _number(where: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ParamsError(f"{where}: value must be a number, got {value!r}")
    return float(value)


@dataclass(frozen=True)
class ParamSet:
    """Everything in ``params.toml``."""

    specs: Mapping[str, ParamSpec]
    overrides: Mapping[str, Mapping[str, Override]] = field(default_factory=dict)
    anchors: tuple[Anchor, ...] = ()

    def for_target(self, target: str) -> Params:
        """Values for ``target``: the defaults with that target's overrides applied."""
        values = {name: spec.value for name, spec in self.specs.items()}
        for name, ov in self.overrides.get(target, {}).items():
            values[name] = ov.value
        return Params(**values)

    def with_values(
        self,
        target: str | None,
        values: Mapping[str, float],
        *,
        fitted_from: tuple[str, ...],
        fit_date: str,
        method: str,
        source: str,
    ) -> ParamSet:
        """A copy with new values: per-target overrides, or the defaults when ``target`` is None."""
        unknown = set(values) - set(self.specs)
        if unknown:
            raise ParamsError(f"unknown parameters {sorted(unknown)}")
        specs = dict(self.specs)
        overrides = {t: dict(o) for t, o in self.overrides.items()}
        for name, value in values.items():
            if target is None:
                specs[name] = dataclasses.replace(
                    specs[name],
                    value=float(value),
                    fitted_from=tuple(fitted_from),
                    fit_date=fit_date,
                    method=method,
                )
            else:
                overrides.setdefault(target, {})[name] = Override(
                    float(value), source, tuple(fitted_from), fit_date, method
                )
        return ParamSet(specs=specs, overrides=overrides, anchors=self.anchors)

    def to_toml(self) -> str:
        """The file text (header comment, then parameters, overrides and anchors)."""
        parts = [_HEADER + "schema = 1\n"]
        for name, spec in self.specs.items():
            table = {
                k: getattr(spec, k)
                for k in (
                    "value",
                    "unit",
                    "description",
                    "source",
                    "fitted_from",
                    "fit_date",
                    "method",
                    "bounds",
                )
            }
            table["fitted_from"], table["bounds"] = list(spec.fitted_from), list(spec.bounds)
            parts.append(toml_io.dump_table(f"params.{name}", table))
        for target, ovs in self.overrides.items():
            for name, ov in ovs.items():
                table = dataclasses.asdict(ov)
                table["fitted_from"] = list(ov.fitted_from)
                parts.append(toml_io.dump_table(f"targets.{target}.{name}", table))
        for anchor in self.anchors:
            parts.append(toml_io.dump_table("anchors", dataclasses.asdict(anchor), array=True))
        return "\n".join(parts)


def parse_params(data: Mapping[str, Any], origin: str = "<params>") -> ParamSet:
    """Validate parsed TOML and build a :class:`ParamSet`."""
    extra = set(data) - {"schema", "params", "targets", "anchors"}
    if extra or data.get("schema") != 1:
        raise ParamsError(
            f"{origin}: expected schema = 1 and tables params/targets/anchors, got extra {sorted(extra)}"
        )
    names = Params.names()
    raw = data.get("params", {})
    if set(raw) != set(names):
        missing, unknown = sorted(set(names) - set(raw)), sorted(set(raw) - set(names))
        raise ParamsError(
            f"{origin}: parameters must be exactly {list(names)} (missing {missing}, unknown {unknown})"
        )
    specs: dict[str, ParamSpec] = {}
    for name in names:
        where = f"{origin}: params.{name}"
        table = raw[name]
        _keys(where, table, _SPEC_KEYS)
        lo, hi = (_number(where, b) for b in table["bounds"])
        value = _number(where, table["value"])
        if not lo <= value <= hi:
            raise ParamsError(f"{where}: value {value} outside bounds [{lo}, {hi}]")
        specs[name] = ParamSpec(
            name,
            value,
            table["unit"],
            table["description"],
            table["source"],
            tuple(table["fitted_from"]),
            table["fit_date"],
            table["method"],
            (lo, hi),
        )
    overrides: dict[str, dict[str, Override]] = {}
    for target, tables in data.get("targets", {}).items():
        if target not in TARGETS:
            raise ParamsError(
                f"{origin}: override for unknown target {target!r}; valid: {', '.join(TARGETS)}"
            )
        for name, table in tables.items():
            where = f"{origin}: targets.{target}.{name}"
            if name not in specs:
                raise ParamsError(f"{where}: unknown parameter; valid: {', '.join(names)}")
            _keys(where, table, _OVERRIDE_KEYS)
            value = _number(where, table["value"])
            lo, hi = specs[name].bounds
            if not lo <= value <= hi:
                raise ParamsError(f"{where}: value {value} outside bounds [{lo}, {hi}]")
            overrides.setdefault(target, {})[name] = Override(
                value, table["source"], tuple(table["fitted_from"]), table["fit_date"], table["method"]
            )
    anchors = []
    for i, table in enumerate(data.get("anchors", [])):
        where = f"{origin}: anchors[{i}]"
        _keys(where, table, _ANCHOR_KEYS)
        anchors.append(Anchor(**{**table, "measured_us": _number(where, table["measured_us"])}))
    return ParamSet(specs=specs, overrides=overrides, anchors=tuple(anchors))


def load_params_file(path: str | Path) -> ParamSet:
    """Load and validate a params file."""
    path = Path(path)
    return parse_params(toml_io.load_file(path, ParamsError), origin=str(path))


@functools.lru_cache(maxsize=1)
def load_params() -> ParamSet:
    """The bundled ``params.toml``."""
    return load_params_file(PARAMS_PATH)


def default_params(target: str) -> Params:
    """Bundled parameter values for a target name."""
    return load_params().for_target(target)


def save_params(param_set: ParamSet, path: str | Path) -> None:
    """Write ``param_set`` as TOML to ``path`` (round-trips through :func:`load_params_file`).

    The file is replaced crash-safely (:func:`devkit.atomic.write_text`): an interrupted calibration
    leaves the previous parameters, never half a file.
    """
    text = param_set.to_toml()
    parse_params(toml_io.loads(text), origin=str(path))
    atomic.write_text(path, text)
