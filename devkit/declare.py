"""Declare a kernel: one object with everything the workflow needs to run, check, tune and sweep it.

This is the public way to bring a kernel into ``devkit validate``, ``tune``, ``sweep``, ``promote`` and
``run``; the kit's own NeuronMM kernels are declared with it too (``devkit/kernels/registry.py``).  Two spellings,
same result:

* the decorator, on the kernel itself::

      @devkit.declare_kernel(
          reference=lambda a, b: a + b,                       # NumPy reference, same arguments
          args=lambda s: [(128, s["N"]), (128, s["N"])],      # argument shapes from the shape parameters
          default_shape={"N": 2048},
          shape_space={"N": (1, 4096)},                       # hypothesis draws N in [1, 4096]
          tolerances={"float32": 1e-6, "bfloat16": 1e-2},     # normalised max error per dtype
          configs={"tile": (128, 256, 512)},                  # block/config space for ``devkit tune``
          constraint=lambda shape, cfg, dtype, target: cfg["tile"] <= shape["N"] or "tile > N",
          baselines=("add_naive",),                           # compared with it by ``devkit sweep``
      )
      @nki.jit
      def add(a, b, tile=512): ...

* a spec object, registered explicitly: ``devkit.register(devkit.KernelSpec(name="add", kernel=add, ...))``.

Units: shapes are in elements; tolerances are normalised max errors ``max|out - ref| / max|ref|`` (fp32);
``Feasibility.footprint`` / ``usable`` are SBUF bytes per partition.  A kernel is named on the command line
as ``FILE.py:KERNEL`` (the function or spec variable in that file) or by its declared ``name`` (the kit's
kernels, and those listed under ``[tool.devkit] kernels`` in the project's ``pyproject.toml``).
"""

from __future__ import annotations

import importlib
import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import numpy as np

Shape = Mapping[str, int]
#: A shape-space entry: ``(lo, hi)`` inclusive integer range, a list of choices, or a hypothesis strategy.
ShapeRange = Any
#: ``constraint(shape, config, dtype, target)``: True/None = feasible; False or a reason string = not;
#: or a :class:`Feasibility`.
Constraint = Callable[[Shape, Mapping[str, Any], str, str], Any]

#: NKI API generations a kernel can be written in: Beta 1 (``neuronxcc.nki``, SDK <= 2.26) and
#: Beta 2 (``import nki``, SDK 2.27+).
GENERATIONS = ("beta1", "beta2")

#: Default tolerance (normalised max error) for a dtype with no entry and no ``"*"`` entry.
DEFAULT_TOLERANCE = 2e-2


class SpecError(ValueError):
    """A kernel declaration that cannot work (the message names the kernel and the field)."""


@dataclass(frozen=True)
class Feasibility:
    """Whether a config can run; ``reason`` names the limit when it cannot.

    ``footprint`` / ``usable``: SBUF bytes per partition needed / available (0 when not computed).
    """

    ok: bool
    reason: str = ""
    footprint: int = 0
    usable: int = 0

    def __bool__(self) -> bool:
        return self.ok


@dataclass(frozen=True)
class ValidationResult:
    """One simulated run against the reference: normalised max error vs the tolerance."""

    kernel: str
    shape: Mapping[str, int]
    dtype: str
    max_error: float
    tolerance: float
    ok: bool
    seed: int = 0

    @property
    def message(self) -> str:
        shape = ",".join(f"{k}={v}" for k, v in self.shape.items())
        verdict = "within" if self.ok else "EXCEEDS"
        return (
            f"{self.kernel} [{shape}] {self.dtype} seed {self.seed}: max error {self.max_error:.3g} "
            f"{verdict} the tolerance {self.tolerance:.3g}"
        )


@dataclass(frozen=True)
class Baseline:
    """A kernel to compare with in sweeps: its declared name and how to map the shape onto its parameters
    (``shape=None``: the same shape parameters)."""

    name: str
    shape: Callable[[Shape], Shape] | None = None
    label: str = ""


@dataclass(frozen=True)
class Sweep:
    """A ``perf_report``-style sweep: ``x`` takes each of ``values``, the other parameters keep ``fixed``
    (default: the kernel's ``default_shape``).  Latencies are cost-model estimates on the target."""

    x: str
    values: tuple[int, ...]
    fixed: Mapping[str, int] | None = None
    dtype: str = "bfloat16"


def _ro(d: Mapping[str, Any] | None) -> Mapping[str, Any]:
    return MappingProxyType(dict(d or {}))


def _dtypes() -> dict[str, Any]:
    import ml_dtypes

    return {
        "bfloat16": ml_dtypes.bfloat16,
        "float32": np.float32,
        "float16": np.float16,
        "float8_e4m3": ml_dtypes.float8_e4m3fn,
        "float8_e5m2": ml_dtypes.float8_e5m2,
    }


def _f32(a: Any) -> np.ndarray:
    return np.asarray(a).astype(np.float32)


def max_error(out: Any, ref: Any) -> float:
    """Normalised max error ``max|out - ref| / max|ref|`` (fp32; NaN/inf in ``out`` give inf)."""
    o, r = _f32(out), _f32(ref)
    if o.shape != r.shape:
        raise ValueError(f"output shape {o.shape} differs from the reference shape {r.shape}")
    if not np.all(np.isfinite(o)):
        return float("inf")
    scale = float(np.max(np.abs(r))) if r.size else 0.0
    err = float(np.max(np.abs(o - r))) if r.size else 0.0
    return err / scale if scale > 0 else err


@dataclass(frozen=True)
class KernelSpec:
    """Declaration of one kernel (see the module docstring for the two ways to make one).

    Fields: ``name`` (how commands name it); ``kernel`` (the ``@nki.jit`` object or ``"module:function"``,
    imported on demand); ``reference`` (NumPy function of the same inputs); ``arg_shapes`` (shape
    parameters -> the shape of each array argument); ``default_shape`` (validation shape, also fixes the
    order of ``shape_params``); ``tolerances`` (dtype -> normalised max error, ``"*"`` = any dtype);
    ``dtypes`` (validated by ``devkit run``); ``shape_space`` (hypothesis ranges per parameter);
    ``sweep``; ``block_params`` (config name -> candidate values); ``constraint``; ``defaults`` (default
    config: a mapping, or ``defaults(shape, dtype, target) -> dict``; default: the first candidate of
    each parameter); ``baselines``; ``kernel_reads_defaults`` (True when the kernel looks its defaults up
    itself, so runs without explicit blocks pass none); ``generation`` (``"beta1"`` or ``"beta2"``, the NKI
    API the kernel is written in) and ``family`` (the generation-independent name that pairs a Beta-1 kernel
    with its Beta-2 version in reports; default ``name``); ``movement`` / ``canonical`` (optional tuner
    hooks: closed-form FLOPs/bytes of a config, and the config as clamped to a shape); ``inputs``
    (optional ``inputs(shape, dtype, seed) -> arrays``).
    """

    name: str
    kernel: Any
    reference: Callable[..., Any]
    arg_shapes: Callable[[Shape], Sequence[Sequence[int]]]
    default_shape: Mapping[str, int]
    tolerances: Mapping[str, float] = field(default_factory=lambda: _ro({"*": DEFAULT_TOLERANCE}))
    dtypes: tuple[str, ...] = ("bfloat16", "float32")
    description: str = ""
    arg_names: tuple[str, ...] = ()
    shape_space: Mapping[str, ShapeRange] = field(default_factory=lambda: _ro({}))
    sweep: Sweep | None = None
    block_params: Mapping[str, tuple[Any, ...]] = field(default_factory=lambda: _ro({}))
    constraint: Constraint | None = None
    defaults: Mapping[str, Any] | Callable[[Shape, str, str], Mapping[str, Any]] | None = None
    baselines: tuple[Baseline | str, ...] = ()
    kernel_reads_defaults: bool = False
    movement: Callable[[Shape, Mapping[str, Any], str, str], Any] | None = None
    canonical: Callable[[Shape, Mapping[str, Any]], Mapping[str, Any]] | None = None
    inputs: Callable[[Shape, str, int], Sequence[Any]] | None = None
    source: str = ""  # the file that declared it (set by the loader; used in messages)
    generation: str = "beta1"  # NKI API generation the kernel is written in: "beta1" or "beta2"
    family: str = ""  # generation-independent name pairing Beta-1/Beta-2 versions (default: ``name``)

    def __post_init__(self) -> None:
        if not self.name or not str(self.name).replace("_", "a").replace("-", "a").isalnum():
            raise SpecError(f"kernel name {self.name!r}: use letters, digits, '_' or '-'")
        for attr in ("reference", "arg_shapes"):
            if not callable(getattr(self, attr)):
                raise SpecError(f"{self.name}: {attr} must be callable")
        if not self.default_shape:
            raise SpecError(f"{self.name}: default_shape must name every shape parameter")
        if self.generation not in GENERATIONS:
            raise SpecError(
                f"{self.name}: generation {self.generation!r}; choose one of {', '.join(GENERATIONS)}"
            )
        if not self.family:
            object.__setattr__(self, "family", self.name)
        unknown = set(self.shape_space) - set(self.default_shape)
        if unknown:
            raise SpecError(f"{self.name}: shape_space names {sorted(unknown)}, not in default_shape")
        for key in ("default_shape", "tolerances", "shape_space", "block_params"):
            object.__setattr__(self, key, _ro(getattr(self, key)))
        object.__setattr__(self, "dtypes", tuple(self.dtypes))
        object.__setattr__(
            self, "baselines", tuple(Baseline(b) if isinstance(b, str) else b for b in self.baselines)
        )
        object.__setattr__(self, "block_params", _ro({k: tuple(v) for k, v in self.block_params.items()}))

    # ---- shapes ---------------------------------------------------------------------------------
    @property
    def shape_params(self) -> tuple[str, ...]:
        return tuple(self.default_shape)

    def _shape(self, shape: Shape | None) -> dict[str, int]:
        shape = dict(self.default_shape if shape is None else shape)
        missing = [p for p in self.shape_params if p not in shape]
        if missing:
            raise KeyError(f"{self.name}: shape is missing {missing} (parameters {self.shape_params})")
        return {p: int(shape[p]) for p in self.shape_params}

    # ---- running ---------------------------------------------------------------------------------
    def kernel_object(self) -> Any:
        """The kernel (``"module:function"`` strings are imported now)."""
        if isinstance(self.kernel, str):
            mod, _, fn = self.kernel.partition(":")
            return getattr(importlib.import_module(mod), fn)
        return self.kernel

    def make_inputs(
        self, shape: Shape | None = None, dtype: str = "bfloat16", seed: int = 0
    ) -> tuple[np.ndarray, ...]:
        """Random inputs in ``dtype``: normal, scaled by 1/sqrt(rows) so every product stays O(1)."""
        shape = self._shape(shape)
        if self.inputs is not None:
            return tuple(self.inputs(shape, dtype, seed))
        rng = np.random.default_rng(seed)
        dt = self.np_dtype(dtype)
        return tuple(
            (rng.standard_normal(tuple(s)) / np.sqrt(max(1, s[0]))).astype(np.float32).astype(dt)
            for s in self.arg_shapes(shape)
        )

    def np_dtype(self, dtype: str) -> Any:
        table = _dtypes()
        if dtype not in table:
            raise SpecError(f"{self.name}: unknown dtype {dtype!r}; choose one of {', '.join(table)}")
        return table[dtype]

    def call_blocks(
        self, shape: Shape, dtype: str, target: str, blocks: Mapping[str, Any] | None
    ) -> dict[str, Any]:
        """Keyword arguments of one call: ``blocks``, else the defaults (unless the kernel reads its own)."""
        if blocks is not None:
            return dict(blocks)
        return {} if self.kernel_reads_defaults else self.default_blocks(shape, dtype, target)

    def run(
        self,
        shape: Shape | None = None,
        dtype: str = "bfloat16",
        seed: int = 0,
        blocks: Mapping[str, Any] | None = None,
        target: str = "trn1",
    ) -> Any:
        """Simulate the kernel on :meth:`make_inputs` and return its output (NumPy)."""
        return self._simulate(shape, dtype, seed, blocks, target)[1]

    def _simulate(
        self, shape: Shape | None, dtype: str, seed: int, blocks: Mapping[str, Any] | None, target: str
    ) -> tuple[tuple[np.ndarray, ...], Any]:
        """(the seeded inputs, the simulated output) of one run."""
        from devkit import api as devkit

        shp = self._shape(shape)
        inputs = self.make_inputs(shp, dtype, seed)
        out = devkit.simulate(
            self.kernel_object(), *inputs, target=target, **self.call_blocks(shp, dtype, target, blocks)
        )
        return inputs, out

    def check(
        self,
        shape: Shape | None = None,
        dtype: str = "bfloat16",
        seed: int = 0,
        blocks: Mapping[str, Any] | None = None,
        target: str = "trn1",
    ) -> ValidationResult:
        """Simulate on seeded random inputs and compare with the reference within the dtype's tolerance."""
        shp = self._shape(shape)
        inputs, out = self._simulate(shp, dtype, seed, blocks, target)
        ref = self.reference(*inputs)
        if np.dtype(np.asarray(out).dtype) != np.dtype(np.asarray(ref).dtype):
            err = float("inf")
        else:
            err = max_error(out, ref)
        tol = self.tolerance(dtype)
        return ValidationResult(self.name, _ro(shp), dtype, err, tol, err <= tol, seed)

    def arg_specs(self, shape: Shape | None = None, dtype: str = "bfloat16") -> tuple[Any, ...]:
        """``nt.tensor[[...], dtype]`` placeholders of the arguments (cost-only runs)."""
        from devkit.nki import typing as nt

        dt = self.np_dtype(dtype)
        return tuple(nt.tensor[list(s), dt] for s in self.arg_shapes(self._shape(shape)))

    def estimate(
        self,
        shape: Shape | None = None,
        dtype: str = "bfloat16",
        target: str = "trn1",
        blocks: Mapping[str, Any] | None = None,
    ) -> Any:
        """Cost-only :class:`devkit.cost.report.CostReport` of the kernel on ``shape``."""
        from devkit import api as devkit

        shp = self._shape(shape)
        return devkit.estimate(
            self.kernel_object(),
            *self.arg_specs(shp, dtype),
            target=target,
            **self.call_blocks(shp, dtype, target, blocks),
        )

    # ---- configs ---------------------------------------------------------------------------------
    def default_blocks(
        self, shape: Shape | None = None, dtype: str = "bfloat16", target: str = "trn1"
    ) -> dict[str, Any]:
        """The config a run uses when none is given: the project's tuning table entry of the kernel's family
        if any (restricted to this kernel's ``block_params`` when the family has another name), else the
        declared ``defaults``, else the first candidate of each block parameter."""
        shape = self._shape(shape)
        base = self.declared_blocks(shape, dtype, target)
        if callable(self.defaults):
            return base
        from devkit import tuning_table

        found = tuning_table.blocks_for(self.family, shape, dtype, target)
        if self.family != self.name:  # a family member's entry: only the parameters this version takes
            found = {k: v for k, v in found.items() if k in self.block_params}
        base.update(found)
        return base

    def declared_blocks(
        self, shape: Shape | None = None, dtype: str = "bfloat16", target: str = "trn1"
    ) -> dict[str, Any]:
        """The config the declaration gives, before any tuning table: the ``defaults`` rule or mapping over
        the first candidate of each block parameter."""
        shape = self._shape(shape)
        if callable(self.defaults):
            return dict(self.defaults(shape, dtype, target))
        base = {k: v[0] for k, v in self.block_params.items() if v}
        base.update(dict(self.defaults or {}))
        return base

    def feasible(
        self, shape: Shape | None, blocks: Mapping[str, Any], dtype: str = "bfloat16", target: str = "trn1"
    ) -> Feasibility:
        """Whether ``blocks`` (missing names take their defaults) can run on ``target``."""
        shape = self._shape(shape)
        unknown = sorted(set(blocks) - set(self.block_params))
        if unknown and not self.block_params:
            return Feasibility(False, f"{self.name} takes no block arguments (got {sorted(blocks)})")
        if unknown:
            return Feasibility(
                False, f"{self.name}: unknown block parameters {unknown} (declared {list(self.block_params)})"
            )
        if self.constraint is None:
            return Feasibility(True)
        try:  # a constraint (or a defaults rule) may reject a shape by raising ValueError: infeasible
            full = {**self.default_blocks(shape, dtype, target), **dict(blocks)}
            verdict = self.constraint(shape, full, dtype, target)
        except ValueError as exc:
            return Feasibility(False, str(exc))
        if isinstance(verdict, Feasibility):
            return verdict
        if verdict is None or verdict is True:
            return Feasibility(True)
        if verdict is False:
            return Feasibility(False, f"{self.name}: config {full} violates the declared constraint")
        return Feasibility(False, f"{self.name}: {verdict}")

    def candidate_blocks(self) -> list[dict[str, Any]]:
        """Cartesian product of :attr:`block_params` (unfiltered; combine with :meth:`feasible`)."""
        names = list(self.block_params)
        return [dict(zip(names, vals)) for vals in itertools.product(*(self.block_params[n] for n in names))]

    def tolerance(self, dtype: str) -> float:
        return float(self.tolerances.get(dtype, self.tolerances.get("*", DEFAULT_TOLERANCE)))


# ---- the declarations of this process -----------------------------------------------------------

_DECLARED: dict[str, KernelSpec] = {}


def register(spec: KernelSpec) -> KernelSpec:
    """Declare ``spec`` under ``spec.name`` (re-declaring the same name from the same place replaces it;
    a second kernel under a taken name is a :class:`SpecError`)."""
    if not isinstance(spec, KernelSpec):
        raise SpecError(f"register() takes a devkit.KernelSpec, got {type(spec).__name__}")
    old = _DECLARED.get(spec.name)
    if old is not None and _origin(old) != _origin(spec):
        raise SpecError(
            f"kernel name {spec.name!r} is declared twice ({_origin(old)} and {_origin(spec)}); rename one"
        )
    _DECLARED[spec.name] = spec
    return spec


def _origin(spec: KernelSpec) -> str:
    k = spec.kernel
    if isinstance(k, str):
        return k
    func = getattr(k, "func", k)
    return f"{getattr(func, '__module__', '?')}:{getattr(func, '__qualname__', spec.name)}"


def declared() -> dict[str, KernelSpec]:
    """Every kernel declared in this process so far, by name (declaration order)."""
    return dict(_DECLARED)


def declare_kernel(*, name: str | None = None, **fields: Any) -> Callable[[Any], Any]:
    """Decorator form of :class:`KernelSpec`: declares the decorated kernel and returns it unchanged
    (the spec is also reachable as ``kernel.__devkit_spec__`` when the object accepts attributes).
    ``name`` defaults to the function's name."""

    def wrap(kernel: Any) -> Any:
        func = getattr(kernel, "func", kernel)
        spec = KernelSpec(
            name=name or getattr(func, "__name__", ""),
            kernel=kernel,
            description=fields.pop("description", (func.__doc__ or "").strip().split("\n")[0]),
            **fields,
        )
        register(spec)
        try:
            kernel.__devkit_spec__ = spec
        except (AttributeError, TypeError):
            pass
        return kernel

    return wrap


def spec_of(obj: Any) -> KernelSpec | None:
    """The declaration of ``obj``: itself if a spec, the decorator's spec, or one declared for it."""
    if isinstance(obj, KernelSpec):
        return obj
    spec = getattr(obj, "__devkit_spec__", None)
    if isinstance(spec, KernelSpec):
        return spec
    for s in _DECLARED.values():
        if s.kernel is obj:
            return s
    return None
