"""ScalarE instructions of ``nki.isa``: ``activation`` and ``activation_reduce``, with the ScalarE
accumulator registers (``reduce_cmd``)."""

from __future__ import annotations

from typing import Any

import numpy as np

from devkit import dtypes as _dt
from devkit.errors import (
    DtypeError,
    KernelArgumentError,
    TileShapeError,
)
from devkit.nki._alu import (
    _IDENT,
    ACTIVATIONS,
    ALU,
)
from devkit.nki._isa_common import (
    _alu,
    _reduce_values,
    _val,
    _vector_operand,
    reduce_cmd,
)
from devkit.nki._isa_layer import Instruction, Step, execute
from devkit.sim import dataflow as _flow
from devkit.sim import instr as _x
from devkit.sim.tensor import Tensor
from devkit.trace import SCALAR


def _activation_fn(op: Any, api: str, relu_param: Any = None) -> tuple[str, Any]:
    """``(name, fp32 function)`` of an activation token; ``prelu`` exists where the instruction takes a
    ``relu_param`` (its slope for negative inputs: ``activate2``)."""
    name = getattr(op, "_nki_activation", None)
    if name is None:
        name = getattr(op, "__name__", None) if not isinstance(op, str) else op
        name = {"expit": "sigmoid", "absolute": "abs", "copy": "copy", "identity": "copy"}.get(name, name)
    if name == "prelu" and relu_param is not None:
        alpha = np.float32(relu_param)
        return name, lambda x: np.where(x >= 0, x, alpha * x)
    if name not in ACTIVATIONS:
        raise KernelArgumentError(
            f"{api}: {op!r} is not a ScalarE activation function "
            f"(supported: {', '.join(sorted(ACTIVATIONS))})",
            rule="bad-activation",
        )
    return name, ACTIVATIONS[name]


def _activation_plan(
    s: Step,
    op: Any,
    data: Tensor,
    *,
    bias: Any = None,
    scale: Any = 1.0,
    reduce_op: Any = None,
    reduce_res: Any = None,
    reduce_cmd: Any = reduce_cmd.idle,
    mask: Any = None,
    dtype: Any = None,
    **kwargs: Any,
) -> None:
    """``op(data * scale + bias)`` on the ScalarE, with optional accumulation into its registers."""
    _scalar_engine(s, op, data, bias, scale, reduce_op, reduce_res, reduce_cmd, mask, dtype)


def _activation_reduce(
    s: Step,
    op: Any,
    data: Tensor,
    *,
    reduce_op: Any,
    reduce_res: Tensor,
    bias: Any = None,
    scale: Any = 1.0,
    mask: Any = None,
    dtype: Any = None,
    **kwargs: Any,
) -> None:
    """``activation`` that also writes the free-axis reduction of its result into ``reduce_res``."""
    if reduce_res is None:
        raise KernelArgumentError(f"{s.api}: reduce_res is required")
    _scalar_engine(s, op, data, bias, scale, reduce_op, reduce_res, reduce_cmd.reset_reduce, mask, dtype)


def _scalar_engine(
    s: Step,
    op: Any,
    data: Any,
    bias: Any,
    scale: Any,
    reduce_op: Any,
    reduce_res: Any,
    rcmd: Any,
    mask: Any,
    dtype: Any,
    *,
    pre: tuple[tuple[str, Any, bool], ...] = (),
    relu_param: Any = None,
) -> None:
    """The ScalarE instruction: ``op(z)`` with ``z = data * scale + bias``, or, given ``pre`` (``activate2``),
    ``z`` = ``data`` through the ``(alu op, scalar or (P, 1) operand, reverse)`` steps in order."""
    api, m = s.api, s.m
    name, fn = _activation_fn(op, api, relu_param)
    t = _x.tile(data, api, "data")
    shape = _x.aligned_shape(t)
    p = shape[0]
    pre = tuple((o, _vector_operand(v, p, api, f"imm{i}"), r) for i, (o, v, r) in enumerate(pre))
    if bias is not None:
        bias = _vector_operand(bias, p, api, "bias")
        if isinstance(bias, Tensor) and _dt.name_of(bias.dtype) not in ("float32", "float16", "bfloat16"):
            raise DtypeError(
                f"{api}: bias must be a float32/float16/bfloat16 (P, 1) tile, got {_dt.name_of(bias.dtype)}",
                rule="activation-bias-dtype",
            )
        if name == "reciprocal" and m.geometry.nc_version < 3:
            raise KernelArgumentError(
                f"{api}: reciprocal must have bias=None on trn1/inf2", rule="activation-bias"
            )
    if isinstance(scale, Tensor):
        scale = _vector_operand(scale, p, api, "scale")
        if _dt.name_of(scale.dtype) != "float32":
            raise DtypeError(
                f"{api}: a scale tile must be float32, got {_dt.name_of(scale.dtype)}",
                rule="activation-scale-dtype",
            )
    elif not isinstance(scale, _x.Scalar):
        raise KernelArgumentError(f"{api}: scale must be a scalar or a (P, 1) float32 tile")
    rname = None
    rc = reduce_cmd(int(rcmd)) if rcmd is not None else reduce_cmd.idle
    if rc == reduce_cmd.load_reduce:
        raise KernelArgumentError(f"{api}: reduce_cmd=load_reduce is not supported by activation")
    if reduce_op is not None or reduce_res is not None or rc in (reduce_cmd.reduce, reduce_cmd.reset_reduce):
        rname = _alu(reduce_op if reduce_op is not None else "add", api)
        if m.geometry.nc_version < 3 and rname != "add":
            raise KernelArgumentError(
                f"{api}: only add is a legal reduce_op on trn1/inf2", rule="activation-reduce-op"
            )
    if reduce_res is not None:
        rr = _x.tile(reduce_res, api, "reduce_res")
        if rr.shape[0] != p or rr.free_size != 1:
            raise TileShapeError(f"{api}: reduce_res must be ({p}, 1), got {list(rr.shape)}")
        s.also = [reduce_res]
        s.also_checked = True
    s.dtype = _x.out_dtype(dtype, t.dtype, api)
    s.mask = _x.mask_array(mask, shape, api)
    s.shape = shape
    s.reads = [t, bias, scale, *(v for _, v, _ in pre)]
    s.flops = 2 * t.size
    s.attrs = {"func": name, "reduce": rname is not None}
    s.fn = fn
    s.args = (bias, scale, pre, rname, rc, reduce_res)


def _activation_values(s: Step) -> np.ndarray:
    t = s.reads[0]
    bias, scale, pre, rname, rc, reduce_res = s.args
    shape, marr = s.shape, s.mask
    p = shape[0]
    x = _x.value_of(t, shape, marr)
    with np.errstate(all="ignore"):  # inf/NaN inputs give IEEE results, not NumPy warnings
        z = x * _val(scale, shape)
        if bias is not None:
            z = z + _val(bias, shape)
        for o, v, rev in pre:
            if o != "bypass":
                z = ALU[o](_val(v, shape), z) if rev else ALU[o](z, _val(v, shape))
        vals = np.asarray(s.fn(z.astype(np.float32)), dtype=np.float32)
    acc = s.m.accumulators.setdefault("scalar", np.zeros(128, np.float32))
    if rc in (reduce_cmd.reset, reduce_cmd.reset_reduce):
        acc[:] = _IDENT.get(rname or "add", 0.0)
    if rname is not None and rc in (reduce_cmd.reduce, reduce_cmd.reset_reduce):
        v = vals if marr is None else np.where(marr, vals, _IDENT.get(rname, 0.0))
        red = _reduce_values(rname, v.reshape(p, -1), (1,), False)
        acc[:p] = ALU[rname](acc[:p], red)
    if reduce_res is not None:
        reduce_res.write(
            _dt.round_to(acc[:p].reshape(reduce_res.shape) if reduce_res.ndim else acc[:p], reduce_res.dtype)
        )
    return vals


# ---- the declarations ---------------------------------------------------------------------------------------

ACTIVATION = Instruction(
    "activation", SCALAR, "activation", _activation_plan, _activation_values, dataflow=_flow.activation
)
ACTIVATION_REDUCE = Instruction(
    "activation_reduce",
    SCALAR,
    "activation",
    _activation_reduce,
    _activation_values,
    dataflow=_flow.activation,
)
#: the ScalarE instruction with every control (``activate2``'s ALU pre-steps and ``relu_param`` included)
SCALAR_ENGINE = Instruction(
    "activation", SCALAR, "activation", _scalar_engine, _activation_values, dataflow=_flow.activation
)


def _activation(api: str, *args: Any, **kwargs: Any) -> Tensor:
    """The ScalarE instruction named ``api`` in errors (``nki.isa.activate2``); arguments as ``_scalar_engine``."""
    return execute(SCALAR_ENGINE, api, args, kwargs)  # type: ignore[return-value]


#: the family's public Beta-1 instructions (:mod:`devkit.nki.isa` generates their functions)
INSTRUCTIONS = (
    ACTIVATION,
    ACTIVATION_REDUCE,
)
