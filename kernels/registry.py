"""One declaration per kernel, read by the tests, ``devkit run``, the tuner and promotion.

A :class:`KernelSpec` holds everything needed to run, check and tune one kernel: where it lives
(``module`` + ``function``), its shape parameters and a default validation shape, how to make inputs,
its NumPy reference, tolerances per dtype, its block parameters with candidate values, the default
blocks for a shape, and the feasibility rule (SBUF bytes per partition against the target's usable
capacity, PSUM banks, tile limits).  The feasibility rule is the same function the kernel runs in its
prologue (:mod:`kernels.plans`), so a block set the registry calls feasible is one the kernel accepts.

Quick use::

    from kernels import registry
    spec = registry.get("xuv_fused")
    out = spec.run(spec.default_shape, "bfloat16", seed=0)          # simulate on random inputs
    res = registry.validate(spec)                                     # compare with the reference
    rep = spec.estimate({"S": 4096, "H": 8192, "r": 4096, "N": 16384})  # cost-only CostReport
    spec.feasible(shape, {"block_tokens": 4096}, "bfloat16", "trn1")  # Feasibility(ok=False, reason=...)

Units: shapes in elements; footprints in bytes per SBUF partition; tolerances are normalised max
errors ``max|out - ref| / max|ref|``.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import ml_dtypes
import numpy as np

from devkit.dtype_names import itemsize
from kernels import plans, tuning

Shape = Mapping[str, int]

DTYPES: dict[str, Any] = {"bfloat16": ml_dtypes.bfloat16, "float32": np.float32, "float16": np.float16}


@dataclass(frozen=True)
class Feasibility:
    """Whether a block choice can run; ``reason`` names the limit when it cannot.

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
    """Outcome of :func:`validate`: the normalised max error ``max|out-ref| / max|ref|`` vs the tolerance."""

    kernel: str
    shape: Mapping[str, int]
    dtype: str
    max_error: float
    tolerance: float
    ok: bool


def _ro(d: Mapping[str, Any]) -> Mapping[str, Any]:
    return MappingProxyType(dict(d))


@dataclass(frozen=True)
class KernelSpec:
    """Declaration of one kernel (see the module docstring)."""

    name: str
    module: str
    function: str
    description: str
    shape_params: tuple[str, ...]
    default_shape: Mapping[str, int]
    arg_shapes: Callable[[Shape], tuple[tuple[int, ...], ...]]
    reference: Callable[..., np.ndarray]
    tolerances: Mapping[str, float]
    block_params: Mapping[str, tuple[int, ...]] = field(default_factory=lambda: _ro({}))
    plan: Callable[[Shape, Mapping[str, Any], int, int], plans.Plan] | None = None
    resolve: Callable[[Shape, int, int, Mapping[str, Any], Mapping[str, Any]], plans.Plan] | None = None
    fixed_limit: Callable[[Shape, int], int] | None = None
    arg_names: tuple[str, ...] = ()
    dtypes: tuple[str, ...] = ("bfloat16", "float32")

    # ---- running -------------------------------------------------------------------------------
    def kernel(self) -> Any:
        """The ``@nki.jit`` kernel object (imported on demand)."""
        return getattr(importlib.import_module(self.module), self.function)

    def make_inputs(
        self, shape: Shape | None = None, dtype: str = "bfloat16", seed: int = 0
    ) -> tuple[np.ndarray, ...]:
        """Random inputs (normal, scaled by 1/sqrt(rows) so every product stays O(1)) in ``dtype``."""
        shape = self._shape(shape)
        rng = np.random.default_rng(seed)
        dt = DTYPES[dtype]
        return tuple(
            (rng.standard_normal(s) / np.sqrt(max(1, s[0]))).astype(np.float32).astype(dt)
            for s in self.arg_shapes(shape)
        )

    def run(
        self,
        shape: Shape | None = None,
        dtype: str = "bfloat16",
        seed: int = 0,
        blocks: Mapping[str, Any] | None = None,
        target: str = "trn1",
    ) -> np.ndarray:
        """Simulate the kernel on :meth:`make_inputs` and return its output (NumPy)."""
        import devkit

        return devkit.simulate(
            self.kernel(), *self.make_inputs(shape, dtype, seed), target=target, **dict(blocks or {})
        )

    def arg_specs(self, shape: Shape | None = None, dtype: str = "bfloat16") -> tuple[Any, ...]:
        """``nt.tensor[[...], dtype]`` placeholders of the arguments (cost-only runs)."""
        from devkit.nki import typing as nt

        return tuple(nt.tensor[list(s), DTYPES[dtype]] for s in self.arg_shapes(self._shape(shape)))

    def estimate(
        self,
        shape: Shape | None = None,
        dtype: str = "bfloat16",
        target: str = "trn1",
        blocks: Mapping[str, Any] | None = None,
    ) -> Any:
        """Cost-only :class:`devkit.cost.report.CostReport` of the kernel on ``shape``."""
        import devkit

        return devkit.estimate(
            self.kernel(), *self.arg_specs(shape, dtype), target=target, **dict(blocks or {})
        )

    # ---- blocks --------------------------------------------------------------------------------
    def default_blocks(
        self, shape: Shape | None = None, dtype: str = "bfloat16", target: str = "trn1"
    ) -> dict[str, int]:
        """The blocks the kernel uses when none are passed (tuning.json bucket, shrunk to fit)."""
        if self.resolve is None:
            return {}
        shape = self._shape(shape)
        usable = plans.usable_sbuf(target)
        defaults = tuning.blocks_for(self.name, shape, dtype, target)
        return dict(self.resolve(shape, itemsize(dtype), usable, defaults, {}).blocks)

    def feasible(
        self, shape: Shape | None, blocks: Mapping[str, Any], dtype: str = "bfloat16", target: str = "trn1"
    ) -> Feasibility:
        """Whether ``blocks`` (missing names take their defaults) can run on ``target``."""
        shape = self._shape(shape)
        usable = plans.usable_sbuf(target)
        s = itemsize(dtype)
        if self.plan is None:
            if blocks:
                return Feasibility(False, f"{self.name} takes no block arguments (got {sorted(blocks)})")
            need = self.fixed_limit(shape, s) if self.fixed_limit else 0
            if need > usable:
                return Feasibility(
                    False,
                    f"{self.name}: SBUF limit: needs {need} bytes per partition, only "
                    f"{usable} usable on {target}",
                    need,
                    usable,
                )
            return Feasibility(True, "", need, usable)
        try:
            full = {**self.default_blocks(shape, dtype, target), **dict(blocks)}
            p = self.plan(shape, full, s, usable)
        except plans.BlockError as e:
            return Feasibility(False, str(e), 0, usable)
        if not p.fits:
            return Feasibility(False, p.sbuf_message(), p.footprint, usable)
        return Feasibility(True, "", p.footprint, usable)

    def candidate_blocks(self) -> list[dict[str, int]]:
        """Cartesian product of :attr:`block_params` (unfiltered; combine with :meth:`feasible`)."""
        import itertools

        names = list(self.block_params)
        return [dict(zip(names, vals)) for vals in itertools.product(*(self.block_params[n] for n in names))]

    def tolerance(self, dtype: str) -> float:
        return float(self.tolerances.get(dtype, self.tolerances.get("*", 2e-2)))

    def _shape(self, shape: Shape | None) -> dict[str, int]:
        shape = dict(self.default_shape if shape is None else shape)
        missing = [p for p in self.shape_params if p not in shape]
        if missing:
            raise KeyError(f"{self.name}: shape is missing {missing} (parameters {self.shape_params})")
        return {p: int(shape[p]) for p in self.shape_params}


# ---- references (mirror the kernels' rounding points: intermediates are stored in the input dtype) ----


def _f32(a: np.ndarray) -> np.ndarray:
    return np.asarray(a).astype(np.float32)


def _round(a: np.ndarray, like: np.ndarray) -> np.ndarray:
    return a.astype(like.dtype).astype(np.float32)


def _silu(z: np.ndarray) -> np.ndarray:
    return z / (1.0 + np.exp(-z))


def ref_matmul(lhsT: np.ndarray, rhs: np.ndarray) -> np.ndarray:
    """``lhsT.T @ rhs`` in fp32, cast to the input dtype."""
    return (_f32(lhsT).T @ _f32(rhs)).astype(lhsT.dtype)


def ref_xuv(x: np.ndarray, u: np.ndarray, v: np.ndarray) -> np.ndarray:
    """``(x @ u)`` rounded to the input dtype, ``@ v`` in fp32, cast to the input dtype."""
    return (_round(_f32(x) @ _f32(u), x) @ _f32(v)).astype(x.dtype)


def ref_xuv_t(x: np.ndarray, u: np.ndarray, v: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(ref_xuv(x, u, v).T)


def ref_xtuv(xT: np.ndarray, u: np.ndarray, v: np.ndarray) -> np.ndarray:
    return ref_xuv(np.ascontiguousarray(xT.T), u, v)


def ref_svd_mlp(
    x: np.ndarray,
    ug: np.ndarray,
    vg: np.ndarray,
    uu: np.ndarray,
    vu: np.ndarray,
    ud: np.ndarray,
    vd: np.ndarray,
) -> np.ndarray:
    """``(silu(x Ug Vg) * (x Uu Vu)) Ud Vd`` with XU strips and the activation rounded to the input dtype."""
    g = _round(_f32(x) @ _f32(ug), x) @ _f32(vg)
    u = _round(_f32(x) @ _f32(uu), x) @ _f32(vu)
    act = _round(_silu(g) * u, x)
    return (_round(act @ _f32(ud), x) @ _f32(vd)).astype(x.dtype)


def ref_dense_mlp(x: np.ndarray, wg: np.ndarray, wu: np.ndarray, wd: np.ndarray) -> np.ndarray:
    act = _round(_silu(_f32(x) @ _f32(wg)) * (_f32(x) @ _f32(wu)), x)
    return (act @ _f32(wd)).astype(x.dtype)


# ---- declarations --------------------------------------------------------------------------------

_TOL_MM = _ro({"bfloat16": 2e-2, "float16": 5e-3, "float32": 1e-4})
_TOL_CHAIN = _ro({"bfloat16": 3e-2, "float16": 1e-2, "float32": 2e-4})

_MM_SHAPE = _ro({"K": 2048, "M": 256, "N": 2048})
_XUV_SHAPE = _ro({"S": 256, "H": 2048, "r": 1280, "N": 8192})  # Llama-3.2-1B up-projection, 0.2
_XTUV_SHAPE = _ro({"S": 256, "H": 8192, "r": 1280, "N": 2048})  # Llama-3.2-1B down-projection, 0.2
_MLP_SHAPE = _ro({"S": 256, "H": 2048, "I": 8192, "r": 1280})

_XUV_BLOCK_CANDIDATES = _ro(
    {
        "block_tokens": (128, 256, 512, 768, 1024, 2048),
        "stage1_tokens": (128, 256, 512, 1024),
        "u_chunk_tiles": (1, 2, 4, 8, 16),
        "v_chunk_tiles": (1, 2, 4, 8, 16),
        "psum_banks": (4, 8),
    }
)


def _mm_shapes(s: Shape) -> tuple[tuple[int, ...], ...]:
    return ((s["K"], s["M"]), (s["K"], s["N"]))


def _xuv_shapes(s: Shape) -> tuple[tuple[int, ...], ...]:
    return ((s["S"], s["H"]), (s["H"], s["r"]), (s["r"], s["N"]))


def _xtuv_shapes(s: Shape) -> tuple[tuple[int, ...], ...]:
    return ((s["H"], s["S"]), (s["H"], s["r"]), (s["r"], s["N"]))


def _mlp_shapes(s: Shape) -> tuple[tuple[int, ...], ...]:
    h, i, r = s["H"], s["I"], s["r"]
    return ((s["S"], h), (h, r), (r, i), (h, r), (r, i), (i, r), (r, h))


def _dense_mlp_shapes(s: Shape) -> tuple[tuple[int, ...], ...]:
    return ((s["S"], s["H"]), (s["H"], s["I"]), (s["H"], s["I"]), (s["I"], s["H"]))


def _xuv_plan(kernel: str, out: str, x_rows: bool) -> Callable[..., plans.Plan]:
    def plan(s: Shape, blocks: Mapping[str, Any], itemsize: int, usable: int) -> plans.Plan:
        return plans.xuv_plan(s["S"], s["H"], s["r"], s["N"], itemsize, blocks, usable, kernel, out, x_rows)

    return plan


def _xuv_resolve(kernel: str, out: str, x_rows: bool) -> Callable[..., plans.Plan]:
    def resolve(
        s: Shape, itemsize: int, usable: int, defaults: Mapping[str, Any], given: Mapping[str, Any]
    ) -> plans.Plan:
        return plans.resolve_xuv(
            s["S"], s["H"], s["r"], s["N"], itemsize, usable, defaults, given, kernel, out, x_rows
        )

    return resolve


def _mm_plan(s: Shape, blocks: Mapping[str, Any], itemsize: int, usable: int) -> plans.Plan:
    return plans.matmul_plan(s["K"], s["M"], s["N"], itemsize, blocks, usable)


def _mm_resolve(
    s: Shape, itemsize: int, usable: int, defaults: Mapping[str, Any], given: Mapping[str, Any]
) -> plans.Plan:
    return plans.resolve_matmul(s["K"], s["M"], s["N"], itemsize, usable, defaults, given)


def _svd_mlp_plan(s: Shape, blocks: Mapping[str, Any], itemsize: int, usable: int) -> plans.Plan:
    p1 = plans.xuv_plan(
        s["S"], s["H"], s["r"], s["I"], itemsize, blocks, usable, "svd_mlp", "swiglu", True, 2
    )
    p2 = plans.xuv_plan(s["S"], s["I"], s["r"], s["H"], itemsize, blocks, usable, "svd_mlp", "natural", False)
    return p1 if p1.footprint >= p2.footprint else p2


def _svd_mlp_resolve(
    s: Shape, itemsize: int, usable: int, defaults: Mapping[str, Any], given: Mapping[str, Any]
) -> plans.Plan:
    p1 = plans.resolve_xuv(
        s["S"], s["H"], s["r"], s["I"], itemsize, usable, defaults, given, "svd_mlp", "swiglu", True, 2
    )
    p2 = plans.resolve_xuv(
        s["S"], s["I"], s["r"], s["H"], itemsize, usable, p1.blocks, given, "svd_mlp", "natural", False
    )
    if p2.blocks != p1.blocks:
        p1 = plans.resolve_xuv(
            s["S"],
            s["H"],
            s["r"],
            s["I"],
            itemsize,
            usable,
            p2.blocks,
            given,
            "svd_mlp",
            "transposed",
            True,
            2,
        )
    return p1


def _dense_mlp_plan(s: Shape, blocks: Mapping[str, Any], itemsize: int, usable: int) -> plans.Plan:
    return plans.dense_mlp_plan(s["S"], s["H"], s["I"], itemsize, blocks, usable)


def _dense_mlp_resolve(
    s: Shape, itemsize: int, usable: int, defaults: Mapping[str, Any], given: Mapping[str, Any]
) -> plans.Plan:
    return plans.resolve_dense_mlp(s["S"], s["H"], s["I"], itemsize, usable, defaults, given)


def _panel_limit(cols: int) -> Callable[[Shape, int], int]:
    """SBUF bytes of a full-K lhsT panel ``cols`` wide plus double-buffered rhs tiles (hoisted/blocked)."""

    def need(s: Shape, itemsize: int) -> int:
        return -(-s["K"] // plans.P) * cols * itemsize + 2 * 2 * plans.FMAX * 2 * itemsize

    return need


_SPECS: dict[str, KernelSpec] = {}


def _register(spec: KernelSpec) -> None:
    _SPECS[spec.name] = spec


for _name, _doc in (
    ("matmul_tiled", "dense lhsT.T @ rhs, basic tiling (one tile of each operand per k step)"),
    ("matmul_hoisted", "dense lhsT.T @ rhs, lhsT strips hoisted out of the n loop"),
    ("matmul_blocked", "dense lhsT.T @ rhs, blocked free dimensions (2 x 2 tiles, 4 PSUM banks)"),
):
    _register(
        KernelSpec(
            name=_name,
            module="kernels.matmul",
            function=_name,
            description=_doc,
            shape_params=("K", "M", "N"),
            default_shape=_MM_SHAPE,
            arg_shapes=_mm_shapes,
            reference=ref_matmul,
            tolerances=_TOL_MM,
            arg_names=("lhsT", "rhs"),
            fixed_limit={"matmul_hoisted": _panel_limit(128), "matmul_blocked": _panel_limit(256)}.get(_name),
        )
    )

_register(
    KernelSpec(
        name="matmul_optimized",
        module="kernels.matmul",
        function="matmul_optimized",
        description="dense lhsT.T @ rhs: resident lhsT panel, streamed rhs, full-K PSUM accumulation",
        shape_params=("K", "M", "N"),
        default_shape=_ro({"K": 2048, "M": 256, "N": 8192}),
        arg_shapes=_mm_shapes,
        reference=ref_matmul,
        tolerances=_TOL_MM,
        arg_names=("lhsT", "rhs"),
        block_params=_ro(
            {"block_m": (128, 256, 512, 768, 1024), "k_chunk_tiles": (1, 2, 4, 8, 16), "psum_banks": (4, 8)}
        ),
        plan=_mm_plan,
        resolve=_mm_resolve,
    )
)

_register(
    KernelSpec(
        name="xuv_fused",
        module="kernels.neuronmm",
        function="xuv_fused",
        description="fused x @ u @ v -> [S, N] with the (XU)^T strip cached in SBUF",
        shape_params=("S", "H", "r", "N"),
        default_shape=_XUV_SHAPE,
        arg_shapes=_xuv_shapes,
        reference=ref_xuv,
        tolerances=_TOL_CHAIN,
        arg_names=("x", "u", "v"),
        block_params=_XUV_BLOCK_CANDIDATES,
        plan=_xuv_plan("xuv_fused", "natural", True),
        resolve=_xuv_resolve("xuv_fused", "natural", True),
    )
)

_register(
    KernelSpec(
        name="xuv_fused_t",
        module="kernels.neuronmm",
        function="xuv_fused_t",
        description="fused (x @ u @ v)^T -> [N, S] (implicit transposition of the output)",
        shape_params=("S", "H", "r", "N"),
        default_shape=_XUV_SHAPE,
        arg_shapes=_xuv_shapes,
        reference=ref_xuv_t,
        tolerances=_TOL_CHAIN,
        arg_names=("x", "u", "v"),
        block_params=_XUV_BLOCK_CANDIDATES,
        plan=_xuv_plan("xuv_fused_t", "transposed", True),
        resolve=_xuv_resolve("xuv_fused_t", "transposed", True),
    )
)

_register(
    KernelSpec(
        name="xtuv_fused",
        module="kernels.neuronmm",
        function="xtuv_fused",
        description="fused xT.T @ u @ v -> [S, N] for an input laid out [H, S] (no transposes)",
        shape_params=("S", "H", "r", "N"),
        default_shape=_XTUV_SHAPE,
        arg_shapes=_xtuv_shapes,
        reference=ref_xtuv,
        tolerances=_TOL_CHAIN,
        arg_names=("xT", "u", "v"),
        block_params=_XUV_BLOCK_CANDIDATES,
        plan=_xuv_plan("xtuv_fused", "natural", False),
        resolve=_xuv_resolve("xtuv_fused", "natural", False),
    )
)

_register(
    KernelSpec(
        name="xuv_sequential",
        module="kernels.neuronmm",
        function="xuv_sequential",
        description="NKI XUV baseline: two matmul_optimized passes, intermediates and transposes through HBM",
        shape_params=("S", "H", "r", "N"),
        default_shape=_XUV_SHAPE,
        arg_shapes=_xuv_shapes,
        reference=ref_xuv,
        tolerances=_TOL_CHAIN,
        arg_names=("x", "u", "v"),
    )
)

_register(
    KernelSpec(
        name="svd_mlp",
        module="kernels.mlp",
        function="svd_mlp",
        description="fused SVD SwiGLU MLP: gate/up writes act^T [I, S], down consumes it without a transpose",
        shape_params=("S", "H", "I", "r"),
        default_shape=_MLP_SHAPE,
        arg_shapes=_mlp_shapes,
        reference=ref_svd_mlp,
        tolerances=_TOL_CHAIN,
        arg_names=("x", "u_gate", "v_gate", "u_up", "v_up", "u_down", "v_down"),
        block_params=_XUV_BLOCK_CANDIDATES,
        plan=_svd_mlp_plan,
        resolve=_svd_mlp_resolve,
    )
)

_register(
    KernelSpec(
        name="dense_mlp",
        module="kernels.mlp",
        function="dense_mlp",
        description="uncompressed SwiGLU MLP baseline (act^T through HBM, matmul_optimized down projection)",
        shape_params=("S", "H", "I"),
        default_shape=_ro({"S": 256, "H": 2048, "I": 8192}),
        arg_shapes=_dense_mlp_shapes,
        reference=ref_dense_mlp,
        tolerances=_TOL_CHAIN,
        arg_names=("x", "w_gate", "w_up", "w_down"),
        block_params=_ro(
            {"block_tokens": (128, 256, 512, 1024), "k_chunk_tiles": (1, 2, 4, 8, 16), "psum_banks": (4, 8)}
        ),
        plan=_dense_mlp_plan,
        resolve=_dense_mlp_resolve,
    )
)


def get(name: str) -> KernelSpec:
    """The spec of a registered kernel (``KeyError`` lists the valid names)."""
    try:
        return _SPECS[name]
    except KeyError:
        raise KeyError(f"unknown kernel {name!r}; registered: {', '.join(_SPECS)}") from None


def all_specs() -> list[KernelSpec]:
    """Every registered kernel, in declaration order."""
    return list(_SPECS.values())


def names() -> list[str]:
    return list(_SPECS)


def max_error(out: np.ndarray, ref: np.ndarray) -> float:
    """Normalised max error ``max|out - ref| / max|ref|`` (fp32; NaN/inf in ``out`` give inf)."""
    o, r = _f32(out), _f32(ref)
    if o.shape != r.shape:
        raise ValueError(f"output shape {o.shape} differs from the reference shape {r.shape}")
    if not np.all(np.isfinite(o)):
        return float("inf")
    scale = float(np.max(np.abs(r))) if r.size else 0.0
    err = float(np.max(np.abs(o - r))) if r.size else 0.0
    return err / scale if scale > 0 else err


def validate(
    spec: KernelSpec | str,
    shape: Shape | None = None,
    dtype: str = "bfloat16",
    seed: int = 0,
    blocks: Mapping[str, Any] | None = None,
    target: str = "trn1",
) -> ValidationResult:
    """Simulate ``spec`` on random inputs and compare with its reference within its tolerance."""
    spec = get(spec) if isinstance(spec, str) else spec
    shp = spec._shape(shape)
    inputs = spec.make_inputs(shp, dtype, seed)
    import devkit

    out = devkit.simulate(spec.kernel(), *inputs, target=target, **dict(blocks or {}))
    if np.dtype(out.dtype) != np.dtype(inputs[0].dtype):
        err = float("inf")
    else:
        err = max_error(out, spec.reference(*inputs))
    tol = spec.tolerance(dtype)
    return ValidationResult(spec.name, _ro(shp), dtype, err, tol, err <= tol)
