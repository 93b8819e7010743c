"""The NeuronMM kernels and their baselines, declared through the public kernel API (:mod:`devkit.declare`).

Each declaration says where the kernel lives, its shape parameters and default validation shape, its
argument shapes, its NumPy reference, tolerances per dtype, its block parameters with candidate values,
its default blocks for a shape (the tuning table, shrunk to fit) and its feasibility rule (SBUF bytes per
partition against the target's usable capacity, PSUM banks, tile limits).  The feasibility rule is the
same function the kernel runs in its prologue (:mod:`devkit.kernels.plans`), so a block set declared feasible
is one the kernel accepts.  Every kernel is declared twice: the Beta-1 version (``neuronxcc.nki``) under
its name and the Beta-2 version (``import nki``, :mod:`devkit.kernels.beta2`) as ``<name>_b2`` with
``generation="beta2"`` and ``family=<name>``: one plan, tuning bucket, reference and tolerance per family.
A user's own kernels are declared the same way (docs/your-kernel.md).

Quick use::

    from devkit.kernels import registry
    spec = registry.get("xuv_fused")
    out = spec.run(spec.default_shape, "bfloat16", seed=0)          # simulate on random inputs
    res = registry.validate(spec)                                     # compare with the reference
    rep = spec.estimate({"S": 4096, "H": 8192, "r": 4096, "N": 16384})  # cost-only CostReport
    b2 = registry.get("xuv_fused_b2")   # the NKI Beta-2 version: generation "beta2", family "xuv_fused"
    spec.feasible(shape, {"block_tokens": 4096}, "bfloat16", "trn1")  # Feasibility(ok=False, reason=...)

Units: shapes in elements; footprints in bytes per SBUF partition; tolerances are normalised max
errors ``max|out - ref| / max|ref|``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

import ml_dtypes
import numpy as np

from devkit.declare import (
    Baseline,
    Feasibility,
    KernelSpec,
    Sweep,
    ValidationResult,
    declared,
    max_error,
    register,
)
from devkit.dtype_names import itemsize
from devkit.kernels import closed_form, plans, tuning

__all__ = [
    "DTYPES",
    "Feasibility",
    "KernelSpec",
    "ValidationResult",
    "all_specs",
    "get",
    "max_error",
    "names",
]

Shape = Mapping[str, int]

DTYPES: dict[str, Any] = {"bfloat16": ml_dtypes.bfloat16, "float32": np.float32, "float16": np.float16}


def _ro(d: Mapping[str, Any]) -> Mapping[str, Any]:
    return MappingProxyType(dict(d))


def _plan_constraint(plan: Callable[..., plans.Plan]) -> Callable[..., Feasibility]:
    """The declared constraint of a kernel with block parameters: its prologue's plan must fit."""

    def constraint(shape: Shape, blocks: Mapping[str, Any], dtype: str, target: str) -> Feasibility:
        usable = plans.usable_sbuf(target)
        try:
            p = plan(shape, blocks, itemsize(dtype), usable)
        except plans.BlockError as e:
            return Feasibility(False, str(e), 0, usable)
        if not p.fits:
            return Feasibility(False, p.sbuf_message(), p.footprint, usable)
        return Feasibility(True, "", p.footprint, usable)

    return constraint


def _fixed_constraint(name: str, need: Callable[[Shape, int], int] | None) -> Callable[..., Feasibility]:
    """The declared constraint of a kernel without block parameters: its fixed SBUF need must fit."""

    def constraint(shape: Shape, blocks: Mapping[str, Any], dtype: str, target: str) -> Feasibility:
        usable = plans.usable_sbuf(target)
        n = need(shape, itemsize(dtype)) if need else 0
        if n > usable:
            return Feasibility(
                False,
                f"{name}: SBUF limit: needs {n} bytes per partition, only {usable} usable on {target}",
                n,
                usable,
            )
        return Feasibility(True, "", n, usable)

    return constraint


def _resolved_defaults(
    family: str, resolve: Callable[..., plans.Plan] | None
) -> Callable[..., dict[str, Any]]:
    """The blocks the kernel uses when none are passed (the family's tuning table bucket, shrunk to fit)."""

    def defaults(shape: Shape, dtype: str, target: str) -> dict[str, Any]:
        if resolve is None:
            return {}
        usable = plans.usable_sbuf(target)
        found = tuning.blocks_for(family, shape, dtype, target)
        return dict(resolve(shape, itemsize(dtype), usable, found, {}).blocks)

    return defaults


#: Where the Beta-2 version of each kernel module lives (kernel ``<name>_b2`` in it).
_BETA2_MODULES = {
    "devkit.kernels.matmul": "devkit.kernels.beta2.matmul",
    "devkit.kernels.neuronmm": "devkit.kernels.beta2.neuronmm",
    "devkit.kernels.mlp": "devkit.kernels.beta2.mlp",
}
BETA2_SUFFIX = "_b2"


def _declare(
    name: str,
    module: str,
    *,
    plan: Callable[..., plans.Plan] | None = None,
    resolve: Callable[..., plans.Plan] | None = None,
    fixed_limit: Callable[[Shape, int], int] | None = None,
    **fields: Any,
) -> None:
    """Declare the Beta-1 kernel ``module:name`` now and remember it for its Beta-2 twin (:func:`_declare_beta2`)."""
    _register(name, f"{module}:{name}", "beta1", name, plan, resolve, fixed_limit, fields)
    _FAMILIES.append((name, module, plan, resolve, fixed_limit, fields))


def _register(
    name: str,
    kernel: str,
    generation: str,
    family: str,
    plan: Callable[..., plans.Plan] | None,
    resolve: Callable[..., plans.Plan] | None,
    fixed_limit: Callable[[Shape, int], int] | None,
    fields: Mapping[str, Any],
) -> None:
    register(
        KernelSpec(
            name=name,
            kernel=kernel,
            constraint=_plan_constraint(plan) if plan else _fixed_constraint(name, fixed_limit),
            defaults=_resolved_defaults(family, resolve),
            kernel_reads_defaults=True,
            movement=closed_form.movement(family),
            canonical=closed_form.canonical(family),
            generation=generation,
            family=family,
            **fields,
        )
    )
    _NAMES.append(name)


def _beta2_baseline(b: Baseline | str) -> Baseline | str:
    if isinstance(b, str):
        return b + BETA2_SUFFIX
    return Baseline(b.name + BETA2_SUFFIX, b.shape, b.label)


def _declare_beta2() -> None:
    """Declare ``<name>_b2`` for every Beta-1 kernel: the NKI Beta-2 version (``generation="beta2"``) of the
    same family, with the family's plan, tuning bucket, reference, tolerances, shape space and sweep; its
    baselines are the Beta-2 versions of the Beta-1 kernel's baselines."""
    for name, module, plan, resolve, fixed_limit, fields in list(_FAMILIES):
        f = dict(fields)
        f["description"] = f"{f.get('description', '')} (NKI Beta 2)"
        if "baselines" in f:
            f["baselines"] = tuple(_beta2_baseline(b) for b in f["baselines"])
        b2 = name + BETA2_SUFFIX
        _register(b2, f"{_BETA2_MODULES[module]}:{b2}", "beta2", name, plan, resolve, fixed_limit, f)


_NAMES: list[str] = []
_FAMILIES: list[tuple[str, str, Any, Any, Any, Mapping[str, Any]]] = []


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

#: Hypothesis ranges (``devkit validate``): small enough to simulate with numerics in about a second,
#: ragged (not multiples of 128) on purpose.
_MM_SPACE = _ro({"K": (1, 640), "M": (1, 384), "N": (1, 1100)})
_XUV_SPACE = _ro({"S": (1, 300), "H": (1, 640), "r": (1, 400), "N": (1, 1100)})
_MLP_SPACE = _ro({"S": (1, 200), "H": (1, 384), "I": (1, 640), "r": (1, 300)})
_DENSE_MLP_SPACE = _ro({"S": (1, 200), "H": (1, 384), "I": (1, 640)})

#: Sweeps (``devkit sweep``): the paper's microbenchmark over S, and one Llama-3.2-1B MLP over S.
_XUV_SWEEP = Sweep("S", (256, 1024, 4096, 16384), {"H": 8192, "r": 4096, "N": 16384})
_MLP_SWEEP = Sweep("S", (256, 1024, 4096), {"H": 2048, "I": 8192, "r": 1280})


def _as_dense(s: Shape) -> dict[str, int]:
    """X[S, H] . W[H, N] as matmul_optimized's lhsT[K, M] . rhs[K, N]."""
    return {"K": s["H"], "M": s["S"], "N": s["N"]}


_XUV_BASELINES = (Baseline("xuv_sequential"), Baseline("matmul_optimized", _as_dense, "dense"))

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


def _dims_plan(
    plan: Callable[..., plans.Plan], resolve: Callable[..., plans.Plan], dims: tuple[str, ...]
) -> tuple[Callable[..., plans.Plan], Callable[..., plans.Plan]]:
    """The plan and resolver of a kernel whose :mod:`~devkit.kernels.plans` functions take the shape's
    ``dims`` first, in that order."""

    def plan_of(s: Shape, blocks: Mapping[str, Any], itemsize: int, usable: int) -> plans.Plan:
        return plan(*(s[d] for d in dims), itemsize, blocks, usable)

    def resolve_of(
        s: Shape, itemsize: int, usable: int, defaults: Mapping[str, Any], given: Mapping[str, Any]
    ) -> plans.Plan:
        return resolve(*(s[d] for d in dims), itemsize, usable, defaults, given)

    return plan_of, resolve_of


_mm_plan, _mm_resolve = _dims_plan(plans.matmul_plan, plans.resolve_matmul, ("K", "M", "N"))


def _svd_mlp_plan(s: Shape, blocks: Mapping[str, Any], itemsize: int, usable: int) -> plans.Plan:
    p1 = plans.xuv_plan(
        s["S"], s["H"], s["r"], s["I"], itemsize, blocks, usable, "svd_mlp", "swiglu", True, 2
    )
    p2 = plans.xuv_plan(s["S"], s["I"], s["r"], s["H"], itemsize, blocks, usable, "svd_mlp", "natural", False)
    return p1 if p1.footprint >= p2.footprint else p2


def _svd_mlp_resolve(
    s: Shape, itemsize: int, usable: int, defaults: Mapping[str, Any], given: Mapping[str, Any]
) -> plans.Plan:
    """The gate/up plan of the kernel's resolution (:func:`devkit.kernels.plans.resolve_svd_mlp`)."""
    return plans.resolve_svd_mlp(s["S"], s["H"], s["r"], s["r"], s["I"], itemsize, usable, defaults, given)[0]


_dense_mlp_plan, _dense_mlp_resolve = _dims_plan(
    plans.dense_mlp_plan, plans.resolve_dense_mlp, ("S", "H", "I")
)


def _panel_limit(cols: int, rhs_cols: int) -> Callable[[Shape, int], int]:
    """SBUF bytes of a full-K lhsT panel ``cols`` wide plus double-buffered ``rhs_cols``-wide rhs tiles
    (hoisted: 128 and 512, blocked: 256 and 1024; the kernels refuse a K beyond the same limit)."""

    def need(s: Shape, itemsize: int) -> int:
        return plans.fixed_panel_bytes(s["K"], cols, rhs_cols, itemsize)

    return need


for _name, _doc in (
    ("matmul_tiled", "dense lhsT.T @ rhs, basic tiling (one tile of each operand per k step)"),
    ("matmul_hoisted", "dense lhsT.T @ rhs, lhsT strips hoisted out of the n loop"),
    ("matmul_blocked", "dense lhsT.T @ rhs, blocked free dimensions (2 x 2 tiles, 4 PSUM banks)"),
):
    _declare(
        _name,
        "devkit.kernels.matmul",
        description=_doc,
        default_shape=_MM_SHAPE,
        arg_shapes=_mm_shapes,
        reference=ref_matmul,
        tolerances=_TOL_MM,
        arg_names=("lhsT", "rhs"),
        fixed_limit={
            "matmul_hoisted": _panel_limit(128, plans.FMAX),
            "matmul_blocked": _panel_limit(256, 2 * plans.FMAX),
        }.get(_name),
        shape_space=_MM_SPACE,
    )

_declare(
    "matmul_optimized",
    "devkit.kernels.matmul",
    description="dense lhsT.T @ rhs: resident lhsT panel, streamed rhs, full-K PSUM accumulation",
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
    shape_space=_MM_SPACE,
    sweep=Sweep("M", (256, 1024, 4096), {"K": 8192, "N": 16384}),
)


def _declare_xuv(
    name: str,
    description: str,
    reference: Callable[..., np.ndarray],
    *,
    x_rows: bool = True,
    out: str | None = None,
    **fields: Any,
) -> None:
    """One of the X.U.V kernels of :mod:`devkit.kernels.neuronmm`: ``x`` [S, H] (``xT`` [H, S] unless
    ``x_rows``), ``u`` [H, r], ``v`` [r, N], chain tolerances, the XUV shape space; with ``out`` ("natural"
    [S, N] or "transposed" [N, S]) a fused kernel: the XUV block parameters, plan and resolver."""
    if out is not None:
        fields["block_params"] = _XUV_BLOCK_CANDIDATES
        fields["plan"] = _xuv_plan(name, out, x_rows)
        fields["resolve"] = _xuv_resolve(name, out, x_rows)
    _declare(
        name,
        "devkit.kernels.neuronmm",
        description=description,
        default_shape=_XUV_SHAPE if x_rows else _XTUV_SHAPE,
        arg_shapes=_xuv_shapes if x_rows else _xtuv_shapes,
        reference=reference,
        tolerances=_TOL_CHAIN,
        arg_names=("x" if x_rows else "xT", "u", "v"),
        shape_space=_XUV_SPACE,
        **fields,
    )


_declare_xuv(
    "xuv_fused",
    "fused x @ u @ v -> [S, N] with the (XU)^T strip cached in SBUF",
    ref_xuv,
    out="natural",
    sweep=_XUV_SWEEP,
    baselines=_XUV_BASELINES,
)
_declare_xuv(
    "xuv_fused_t",
    "fused (x @ u @ v)^T -> [N, S] (implicit transposition of the output)",
    ref_xuv_t,
    out="transposed",
    sweep=_XUV_SWEEP,
    baselines=_XUV_BASELINES,
)
_declare_xuv(
    "xtuv_fused",
    "fused xT.T @ u @ v -> [S, N] for an input laid out [H, S] (no transposes)",
    ref_xtuv,
    x_rows=False,
    out="natural",
)
_declare_xuv(
    "xuv_sequential",
    "NKI XUV baseline: two matmul_optimized passes, intermediates and transposes through HBM",
    ref_xuv,
)

_declare(
    "svd_mlp",
    "devkit.kernels.mlp",
    description="fused SVD SwiGLU MLP: gate/up writes act^T [I, S], down consumes it without a transpose",
    default_shape=_MLP_SHAPE,
    arg_shapes=_mlp_shapes,
    reference=ref_svd_mlp,
    tolerances=_TOL_CHAIN,
    arg_names=("x", "u_gate", "v_gate", "u_up", "v_up", "u_down", "v_down"),
    block_params=_XUV_BLOCK_CANDIDATES,
    plan=_svd_mlp_plan,
    resolve=_svd_mlp_resolve,
    shape_space=_MLP_SPACE,
    sweep=_MLP_SWEEP,
    baselines=("dense_mlp",),
)

_declare(
    "dense_mlp",
    "devkit.kernels.mlp",
    description="uncompressed SwiGLU MLP baseline (act^T through HBM, matmul_optimized down projection)",
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
    shape_space=_DENSE_MLP_SPACE,
)


_declare_beta2()


def get(name: str) -> KernelSpec:
    """The declaration of one of the kit's kernels (``KeyError`` lists the valid names)."""
    if name not in _NAMES:
        raise KeyError(f"unknown kernel {name!r}; registered: {', '.join(_NAMES)}")
    return declared()[name]


def all_specs(generation: str | None = None) -> list[KernelSpec]:
    """Every kit kernel in declaration order (the Beta-1 kernels, then their ``_b2`` twins);
    ``generation``: only ``"beta1"`` or only ``"beta2"``."""
    table = declared()
    return [table[n] for n in _NAMES if generation is None or table[n].generation == generation]


def names(generation: str | None = None) -> list[str]:
    return [s.name for s in all_specs(generation)]


def twin(spec: KernelSpec | str, generation: str) -> KernelSpec:
    """The kernel of ``spec``'s family written in ``generation`` (e.g. ``twin("xuv_fused", "beta2")`` is
    ``xuv_fused_b2``)."""
    spec = get(spec) if isinstance(spec, str) else spec
    for s in all_specs(generation):
        if s.family == spec.family:
            return s
    raise KeyError(f"no {generation} kernel in family {spec.family!r}")


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
    return spec.check(shape, dtype, seed, blocks, target)
