"""The ``nl`` element-wise instructions (``nl.add``, ``nl.exp``, ``nl.copy``, ...), declared in the instruction layer.

Each ``nl`` element-wise function is one NeuronCore instruction -- ``tensor_tensor``/``tensor_scalar`` on the
VectorE (GpSimd for ``power`` and for native int32 arithmetic), ``activation`` on the ScalarE, ``tensor_copy``,
``select`` -- with the ``nl`` operand rules of NKI Beta 1 (``reference/nki_api.md`` §2): tiles and scalars
combine with NumPy broadcasting, the result dtype is ``dtype=`` or the promotion of the operands' dtypes, and
``mask=`` limits the positions written.  The declarations below state each function's engine and trace opcode,
its plan (these rules, in :func:`_plan`) and its numerics (:func:`broadcasting`); :func:`language` makes the
public function and :mod:`devkit.nki.language` (Beta 1, and through it :mod:`devkit.nki.beta2.language`) exposes
it.  The ALU and activation functions come from the shared tables of :mod:`devkit.nki._alu`.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from devkit import dtypes as _dt
from devkit.errors import user_location
from devkit.nki import _alu
from devkit.nki._alu import _ALU_ALIASES, ACTIVATIONS, ALU, _require_int
from devkit.nki._isa_layer import Instruction, Step, execute
from devkit.sim import dataflow
from devkit.sim import instr as _x
from devkit.sim.races import REDUCE_CLASS
from devkit.sim.tensor import Tensor
from devkit.trace import GPSIMD, SCALAR, VECTOR


def _plan(
    s: Step,
    fn: Callable[..., Any],
    operands: list[Any],
    dtype: Any,
    default_dtype: Any,
    mask: Any,
    bitwise: bool = False,
    attrs: dict | None = None,
    moves: bool = False,
) -> None:
    """The ``nl`` element-wise rules: tile operands checked (the rest scalars), shapes broadcast, the result
    dtype ``dtype`` or ``default_dtype`` (None: the promotion of the operands' dtypes), ``mask`` of the result's
    shape.  ``bitwise``: integer operands are read as stored, not through fp32; ``moves``: a copy (never-written
    elements flow to the result, :mod:`devkit.sim.unwritten`)."""
    api = s.api
    tiles = _x.operand_tiles(api, operands)
    shape = _x.broadcast(api, [_x.aligned_shape(t) for t in tiles])
    if default_dtype is None:
        default_dtype = _dt.promote(
            *[x.dtype if isinstance(x, Tensor) else _dt.scalar_dtype(x) for x in operands]
        )
    s.dtype = _x.out_dtype(dtype, default_dtype, api)
    s.mask = _x.mask_array(mask, shape, api)
    s.shape = shape
    s.reads = operands
    s.flops = math.prod(shape)
    s.attrs = attrs
    s.bit = bitwise
    s.fn = fn
    s.moves = moves
    s.evacuate = len(operands) == 1  # nl.copy(acc) and friends may run with acc's pending PSUM chain


def broadcasting(s: Step) -> np.ndarray:
    """``s.fn(*operand values)`` with NumPy broadcasting (fp32, or as stored with ``s.bit``)."""
    vals, s.garbage = _x.broadcast_values(s.fn, s.reads, s.shape, s.mask, s.bit, s.moves)
    return vals


# ---- plans of the nl functions (parameters after the step: the Beta-1 signature) --------------------------


def _copy(s: Step, src: Tensor, *, mask: Any = None, dtype: Any = None, **kwargs: Any) -> None:
    """Copy a tile (e.g. PSUM -> SBUF), optionally casting."""
    tile = isinstance(src, Tensor)
    bitwise = tile and not _dt.is_float(src.dtype)
    _plan(s, identity, [src], dtype, src.dtype if tile else None, mask, bitwise, moves=True)


def identity(a: Any) -> Any:
    """The element-wise function of a copy."""
    return a


def unary(name: str, fn: Callable[..., Any], engine: str, opcode: str) -> Instruction:
    """``nl.<name>(x)``: ``fn`` element-wise (a ScalarE activation or a VectorE ``tensor_scalar``)."""

    def plan(s: Step, x: Tensor, *, dtype: Any = None, mask: Any = None, **kwargs: Any) -> None:
        _plan(s, fn, [x], dtype, x.dtype if isinstance(x, Tensor) else None, mask, attrs={"func": name})

    plan.__doc__ = (
        f"Element-wise {name} of a tile ({'ScalarE activation' if engine == SCALAR else 'VectorE'})."
    )
    return Instruction(name, engine, opcode, plan, broadcasting, dataflow=dataflow.elementwise)


def _invert(s: Step, x: Tensor, *, dtype: Any = None, mask: Any = None, **kwargs: Any) -> None:
    """Bitwise NOT of an integer tile."""
    _require_int("nl.invert", x)
    _plan(s, np.invert, [x], dtype, x.dtype, mask, bitwise=True)


def _logical_not(s: Step, x: Tensor, *, dtype: Any = _dt.bool_, mask: Any = None, **kwargs: Any) -> None:
    _plan(s, _is_zero, [x], dtype, _dt.bool_, mask)


def _is_zero(a: np.ndarray) -> np.ndarray:
    return (a == 0).astype(np.float32)


def _binary_opcode(x: Any, y: Any) -> str:
    """``tensor_tensor`` for two tiles of which neither is a ``(P, 1)`` column broadcast against the other,
    ``tensor_scalar`` otherwise."""
    tiles = [t for t in (x, y) if isinstance(t, Tensor)]
    if len(tiles) == 2 and all(
        _x.aligned_shape(t)[1:] != (1,) * (len(_x.aligned_shape(t)) - 1)
        or _x.aligned_shape(t) == _x.aligned_shape(tiles[0])
        for t in tiles
    ):
        return "tensor_tensor"
    return "tensor_scalar"


def binary(
    name: str, fn: Callable[..., Any], *, compare: bool = False, bitwise: bool = False, engine: str = VECTOR
) -> Instruction:
    """``nl.<name>(x, y)``: ``fn`` element-wise over two tiles or a tile and a scalar; ``compare``: the result
    is bool by default; ``bitwise``: integer operands only, read as stored."""
    api = f"nl.{name}"
    alu = _ALU_ALIASES.get(name, "")
    default = _dt.bool_ if compare else None
    attrs = {"op": name}

    def plan(s: Step, x: Any, y: Any, *, dtype: Any = None, mask: Any = None, **kwargs: Any) -> None:
        if bitwise:
            _require_int(api, x, y)
        kind = _binary_opcode(x, y)
        s.opcode = kind
        if kind == "tensor_tensor" and isinstance(x, Tensor) and isinstance(y, Tensor):
            odt = _x.out_dtype(dtype, _dt.promote(x.dtype, y.dtype), api)
            if _alu.int32_native(alu, (x.dtype, y.dtype), odt) and "psum" not in (x.st.buffer, y.st.buffer):
                # lowers to nisa.tensor_tensor on int32/uint32 tiles: GpSimd native integer arithmetic
                s.engine = GPSIMD
                _plan(s, _alu.int32_op(alu, odt), [x, y], odt, None, mask, True, attrs)
                return
        _plan(s, fn, [x, y], dtype, default, mask, bitwise, attrs)

    plan.__doc__ = f"Element-wise {name} of two tiles, or a tile and a scalar (NumPy broadcasting)."
    return Instruction(name, engine, "tensor_tensor", plan, broadcasting, dataflow=dataflow.elementwise)


def _where(
    s: Step, condition: Tensor, x: Any, y: Any, *, dtype: Any = None, mask: Any = None, **kwargs: Any
) -> None:
    """``condition ? x : y`` element-wise."""
    dts = [v.dtype if isinstance(v, Tensor) else _dt.scalar_dtype(v) for v in (x, y)]
    # a select moves values: operands are read as stored, not through fp32
    _plan(s, _select, [condition, x, y], dtype, _dt.promote(*dts), mask, bitwise=True)


def _select(c: np.ndarray, a: Any, b: Any) -> np.ndarray:
    return np.where(c != 0, a, b)


# ---- element-wise functions of the binary ALU operations ---------------------------------------------------


def _cmp(f: Any) -> Callable[..., np.ndarray]:
    return lambda a, b: f(a, b).astype(np.float32)


def _mod(a: np.ndarray, b: Any) -> np.ndarray:
    return np.mod(a, b)


def _logical(f: Any) -> Callable[..., np.ndarray]:
    return lambda a, b: f(a != 0, b != 0).astype(np.float32)


def _shift_left(a: np.ndarray, b: Any) -> np.ndarray:
    """Shift the data operand's own bits, like right_shift ("bit patterns without casting" [B1-ISA])."""
    a = np.asarray(a)
    return np.left_shift(a, np.asarray(b).astype(a.dtype))


def _shift_right(a: np.ndarray, b: Any) -> np.ndarray:
    ua = a.view(np.dtype(f"u{a.dtype.itemsize}")) if a.dtype.kind == "i" else a
    return (ua >> np.asarray(b).astype(ua.dtype)).view(a.dtype) if a.dtype.kind == "i" else ua >> b


# ---- the declarations ---------------------------------------------------------------------------------------

#: ScalarE activations: ``nl.<name>`` is ``activation`` with the table's function
_ACTIVATION_UNARY = {
    "exp": np.exp,
    "log": np.log,
    "sqrt": np.sqrt,
    "rsqrt": ACTIVATIONS["rsqrt"],
    "reciprocal": ACTIVATIONS["reciprocal"],
    "square": np.square,
    "sin": np.sin,
    "cos": np.cos,
    "tan": np.tan,
    "tanh": np.tanh,
    "arctan": np.arctan,
    **{
        n: ACTIVATIONS[n]
        for n in (
            "sigmoid relu gelu gelu_dx gelu_apprx_tanh gelu_apprx_sigmoid silu silu_dx erf erf_dx softplus mish"
        ).split()
    },
    "abs": np.abs,
    "sign": np.sign,
}
#: VectorE ``tensor_scalar`` unary operations
_VECTOR_UNARY = {"negative": np.negative, "trunc": np.trunc, "floor": np.floor, "ceil": np.ceil}

COPY = Instruction("copy", VECTOR, "tensor_copy", _copy, broadcasting)
INVERT = Instruction("invert", VECTOR, "tensor_scalar", _invert, broadcasting, dataflow=dataflow.elementwise)
LOGICAL_NOT = Instruction(
    "logical_not", VECTOR, "tensor_scalar", _logical_not, broadcasting, dataflow=dataflow.elementwise
)
WHERE = Instruction("where", VECTOR, "select", _where, broadcasting, dataflow=dataflow.where)

UNARY = (
    *(unary(n, f, SCALAR, "activation") for n, f in _ACTIVATION_UNARY.items()),
    *(unary(n, f, VECTOR, "tensor_scalar") for n, f in _VECTOR_UNARY.items()),
)
BINARY = (
    binary("add", np.add),
    binary("subtract", np.subtract),
    binary("multiply", np.multiply),
    binary("divide", np.divide),
    binary("power", np.power, engine=GPSIMD),
    binary("maximum", np.maximum),
    binary("minimum", np.minimum),
    binary("mod", _mod),
    binary("fmod", np.fmod),
    binary("equal", _cmp(np.equal), compare=True),
    binary("not_equal", _cmp(np.not_equal), compare=True),
    binary("greater", _cmp(np.greater), compare=True),
    binary("greater_equal", _cmp(np.greater_equal), compare=True),
    binary("less", _cmp(np.less), compare=True),
    binary("less_equal", _cmp(np.less_equal), compare=True),
    binary("logical_and", _logical(np.logical_and), compare=True),
    binary("logical_or", _logical(np.logical_or), compare=True),
    binary("logical_xor", _logical(np.logical_xor), compare=True),
    binary("bitwise_and", np.bitwise_and, bitwise=True),
    binary("bitwise_or", np.bitwise_or, bitwise=True),
    binary("bitwise_xor", np.bitwise_xor, bitwise=True),
    binary("left_shift", _shift_left, bitwise=True),
    binary("right_shift", _shift_right, bitwise=True),
)
#: every ``nl`` element-wise instruction of Beta 1 (:mod:`devkit.nki.language` exposes their functions)
INSTRUCTIONS = (COPY, *UNARY, INVERT, LOGICAL_NOT, *BINARY, WHERE)
# NKI 0.4.0 (trn3, Beta 2 only): the signed operand with the larger / smaller magnitude, ties -> y; the functions
# are also ALU operator tokens (``op=nl.abs_max``)
ABS_MAX = binary("abs_max", ALU["abs_max"])
ABS_MIN = binary("abs_min", ALU["abs_min"])


def language(ins: Instruction) -> Callable[..., Any]:
    """The ``neuronxcc.nki.language`` function of ``ins`` (``nl.<name>`` in errors): its signature is the plan's
    without the step.  A unary function is also an activation token (``_nki_activation``), a binary one an ALU
    token (``_nki_alu``), as ``op=nl.exp``/``op=nl.add`` arguments of ``nki.isa`` instructions."""
    api = f"nl.{ins.name}"

    def run(*args: Any, **kwargs: Any) -> Any:
        return execute(ins, api, args, kwargs)

    sig = inspect.signature(ins.plan)
    run.__signature__ = sig.replace(  # type: ignore[attr-defined]
        parameters=list(sig.parameters.values())[1:], return_annotation="Tensor"
    )
    run.__name__ = run.__qualname__ = ins.name
    run.__doc__ = ins.plan.__doc__
    run.__module__ = "devkit.nki.language"
    run.instruction = ins  # type: ignore[attr-defined]
    if ins in UNARY:
        run._nki_activation = ins.name  # type: ignore[attr-defined]
    elif ins in BINARY or ins in (ABS_MAX, ABS_MIN):
        run._nki_alu = ins.name  # type: ignore[attr-defined]
    return run


def functions() -> dict[str, Callable[..., Any]]:
    """``{name: the nl function}`` of every ``nl`` element-wise instruction."""
    return {ins.name: language(ins) for ins in INSTRUCTIONS}


# ---- element-wise instructions issued on the kernel's behalf -----------------------------------------------


def _on_behalf(
    s: Step,
    fn: Callable[..., Any],
    operands: list[Any],
    *,
    engine: str,
    opcode: str,
    dtype: Any = None,
    default_dtype: Any = None,
    mask: Any = None,
    attrs: dict | None = None,
    bitwise: bool = False,
) -> None:
    """``fn`` element-wise over ``operands`` with the ``nl`` rules, as ``opcode`` on ``engine``."""
    s.engine, s.opcode = engine, opcode
    _plan(s, fn, operands, dtype, default_dtype, mask, bitwise, attrs)


#: an element-wise instruction the kernel did not call by name: an augmented assignment, one ``nl.loop_reduce``
#: iteration, a copy the compiler inserts (the caller gives the engine and opcode)
ON_BEHALF = Instruction(
    "elementwise", VECTOR, "tensor_tensor", _on_behalf, broadcasting, dataflow=dataflow.elementwise
)


def elementwise(
    api: str, engine: str, opcode: str, fn: Callable[..., Any], operands: list[Any], **kw: Any
) -> Tensor:
    """Run :data:`ON_BEHALF` (named ``api`` in errors; ``kw`` as :func:`_on_behalf`): the new result tile."""
    return execute(ON_BEHALF, api, (fn, operands), {"engine": engine, "opcode": opcode, **kw})  # type: ignore[return-value]


#: augmented assignments ``dst op= value``: operator -> (symbol, fp32 function)
_INPLACE = {
    "add": ("+", np.add),
    "sub": ("-", np.subtract),
    "mul": ("*", np.multiply),
    "div": ("/", np.divide),
    "and": ("&", np.bitwise_and),
    "or": ("|", np.bitwise_or),
    "xor": ("^", np.bitwise_xor),
}
#: the ones int32/uint32 tiles run natively on the GpSimd (devkit.nki._alu.INT32_NATIVE)
_INPLACE_INT32 = {"add": np.add, "sub": np.subtract, "mul": np.multiply}


def _int32_inplace(f: Callable[..., Any], out: Any) -> Callable[..., np.ndarray]:
    """``f`` exact on 32-bit integer tiles, wrapped modulo 2**32 into ``out`` (int32 or uint32)."""
    od = np.dtype(out)
    return lambda a, b: np.asarray(f(a.astype(np.int64), b.astype(np.int64))).astype(od)


def augmented(dst: Tensor, value: Any, op: str) -> Tensor:
    """``dst op= value``: a fresh matmul accumulates into PSUM ``dst``; otherwise one in-place element-wise
    instruction (VectorE ``tensor_tensor``/``tensor_scalar``; GpSimd for native int32 arithmetic)."""
    loc = user_location()
    if _x.accumulate_fresh_matmul(dst, value, op, loc):
        return dst
    m = _x.machine("augmented assignment")
    sym, fn = _INPLACE[op]
    engine = VECTOR
    ints = (dst.dtype, value.dtype) if isinstance(value, Tensor) else ()
    native = (
        op in _INPLACE_INT32
        and all(_dt.name_of(d) in ("int32", "uint32") for d in ints)
        and bool(ints)
        and "psum" not in (dst.st.buffer, value.st.buffer)
    )
    if native:
        engine, fn = GPSIMD, _int32_inplace(_INPLACE_INT32[op], dst.dtype)
    prev = m.reducing  # the read and write of dst form one commutative update (race checker)
    m.reducing = (dst.st, dst.box(), REDUCE_CLASS.get(op, False))
    try:
        opcode = "tensor_tensor" if isinstance(value, Tensor) else "tensor_scalar"
        res = elementwise(f"'{sym}='", engine, opcode, fn, [dst, value], dtype=dst.dtype, bitwise=native)
        _x.retarget(m, m.pending, res, dst, loc)  # type: ignore[arg-type]
    finally:
        m.reducing = prev
    dst._fresh = _x.ASSIGNED
    return dst


def loop_reduce_step(dst: Tensor, r: _x.LoopReduction) -> Tensor:
    """One iteration of ``dst[...] = nl.loop_reduce(x, op, ...)``: ``op(dst, x)`` as a new tile (VectorE)."""
    return elementwise(
        "nl.loop_reduce",
        VECTOR,
        "tensor_tensor",
        r.fn,
        [dst, r.value],
        dtype=dst.dtype if r.dtype is None else r.dtype,
        mask=r.mask,
        attrs={"op": r.op},
        bitwise=r.op.startswith("bitwise"),
    )
