"""The ``nki.isa`` (NKI 0.x) instructions that are pure adapters over the simulator's instruction layer, as data.

Each :class:`Adapter` row states what differs between the two generations of one instruction and nothing else:
its NKI 0.x parameter list (``reference/nki_beta2.md`` §5.4, defaults included), where ``dst`` may live, which
arguments are enums passed by member, the operand rules NKI 0.x adds, and how the result reaches ``dst``.  The
instruction itself -- shape and dtype rules, engine selection, trace event (its cost class) and numerics -- is
its declaration in the instruction layer (:mod:`devkit.nki._isa_layer`; by default the one the Beta-1 function of
that name is generated from), executed with ``dtype=dst.dtype``; :func:`build` turns a row into the public
function.  Instructions whose NKI 0.x form computes something Beta 1 has no instruction for (or computes it
differently) are written out in :mod:`devkit.nki.beta2.isa`, ``isa_more``, ``isa_mx`` and ``isa_rng``.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from devkit import dtypes as _dt
from devkit.dtype_names import itemsize
from devkit.errors import DtypeError, KernelArgumentError, TileShapeError
from devkit.nki import _isa_reduce as _b1_reduce
from devkit.nki import isa as _b1
from devkit.nki._isa_layer import Instruction, execute
from devkit.nki.beta2 import views as _views
from devkit.nki.beta2._convention import _dst, _into, _member, instruction
from devkit.nki.beta2.constants import dge_mode, engine, oob_mode, reduce_cmd
from devkit.sim.tensor import Tensor

#: An operand rule: ``rule(api, dst, args)`` raises on a violation and may normalise ``args`` in place.
Rule = Callable[[str, Tensor, dict[str, Any]], None]


def params(*required: str, **optional: Any) -> tuple[inspect.Parameter, ...]:
    """An NKI 0.x parameter list: required names in order, then ``name=default`` pairs in order."""
    kind = inspect.Parameter.POSITIONAL_OR_KEYWORD
    return tuple(inspect.Parameter(n, kind) for n in required) + tuple(
        inspect.Parameter(n, kind, default=d) for n, d in optional.items()
    )


@dataclass(frozen=True)
class Adapter:
    """How one NKI 0.x instruction maps onto its declaration in the instruction layer."""

    name: str
    doc: str
    params: tuple[inspect.Parameter, ...]
    dst: tuple[str, ...] = ("sbuf", "psum")  # buffers dst may live in
    enums: tuple[tuple[str, type], ...] = ()  # (parameter, enum class): passed by member
    rules: tuple[Rule, ...] = ()  # NKI 0.x operand rules, checked in order before the instruction runs
    when_none: tuple[tuple[str, Any], ...] = ()  # (parameter, value the Beta-1 instruction takes for None)
    ignored: tuple[str, ...] = ()  # accepted and not passed on (documented per row)
    writes_dst: bool = False  # the Beta-1 instruction takes ``dst=`` itself (read-modify-write instructions)
    from_dst: tuple[str, ...] = ()  # Beta-1 arguments that are attributes of dst (``memset``'s ``shape``)
    casts: bool = True  # the Beta-1 instruction takes ``dtype=`` (the result is cast to dst's dtype)
    instruction: Instruction | None = (
        None  # the instruction-layer declaration, when not the Beta-1 one of that name
    )


def binder(name: str, parameters: tuple[inspect.Parameter, ...]) -> Callable[[tuple, dict], dict[str, Any]]:
    """``bind(args, kwargs)``: the arguments of a call by parameter name, defaults filled in, as Python binds
    them (a ``TypeError`` with Python's wording otherwise; faster than ``inspect.Signature.bind``)."""
    names = tuple(p.name for p in parameters)
    defaults = {p.name: p.default for p in parameters if p.default is not inspect.Parameter.empty}
    required = tuple(n for n in names if n not in defaults)
    known = frozenset(names)

    def bind(args: tuple, kwargs: dict) -> dict[str, Any]:
        if len(args) > len(names):
            raise TypeError(f"{name}() takes {len(names)} positional arguments but {len(args)} were given")
        a = dict(defaults)
        a.update(zip(names, args))
        for k, v in kwargs.items():
            if k not in known:
                raise TypeError(f"{name}() got an unexpected keyword argument '{k}'")
            if k in names[: len(args)]:
                raise TypeError(f"{name}() got multiple values for argument '{k}'")
            a[k] = v
        missing = [n for n in required if n not in a]
        if missing:
            raise TypeError(
                f"{name}() missing {len(missing)} required argument(s): {', '.join(map(repr, missing))}"
            )
        return a

    return bind


def build(spec: Adapter) -> Callable[..., None]:
    """The public NKI 0.x function of ``spec``: binds the arguments to the documented signature (an unknown or
    missing argument is a ``bad-arguments`` error naming the kernel line), checks ``dst`` and the enums, applies
    the row's rules and runs the Beta-1 instruction into ``dst``."""
    api = f"nisa.{spec.name}"
    sig = inspect.Signature(list(spec.params), return_annotation=None)
    bind = binder(spec.name, spec.params)
    ins = spec.instruction or getattr(_b1, spec.name).instruction

    def run(**a: Any) -> Any:
        return execute(ins, api, (), a)

    def run_one(*args: Any, **kwargs: Any) -> None:
        try:
            a = bind(args, kwargs)
        except TypeError as e:
            raise KernelArgumentError(f"{api}: {e}", rule="bad-arguments") from None
        del a["name"]
        d = _dst(a.pop("dst"), api, buffers=spec.dst)
        for p, cls in spec.enums:
            a[p] = _member(a[p], cls, api, p)
        for rule in spec.rules:
            rule(api, d, a)
        for p in spec.ignored:
            del a[p]
        for p, v in spec.when_none:
            if a[p] is None:
                a[p] = v
        for p in spec.from_dst:
            a[p] = getattr(d, p)
        if spec.writes_dst:
            run(dst=d, **a)
        elif spec.casts:
            _into(api, d, run(**a, dtype=d.dtype))
        else:
            _into(api, d, run(**a))

    run_one.__name__ = run_one.__qualname__ = spec.name
    run_one.__doc__ = spec.doc
    run_one.__signature__ = sig  # type: ignore[attr-defined]
    return instruction(run_one)


# ---- operand rules NKI 0.x adds to the Beta-1 instructions ---------------------------------------------------


def same_dtype_as_dst(operand: str) -> Rule:
    """``operand`` has dst's dtype (the instruction does not cast)."""

    def rule(api: str, dst: Tensor, a: dict[str, Any]) -> None:
        x = a[operand]
        if isinstance(x, Tensor) and _dt.name_of(x.dtype) != _dt.name_of(dst.dtype):
            raise DtypeError(f"{api}: {operand} and dst must have the same dtype", rule="dtype")

    return rule


def dtype_in(operand: str, names: tuple[str, ...]) -> Rule:
    """A tile ``operand`` has one of the dtypes ``names``."""

    def rule(api: str, dst: Tensor, a: dict[str, Any]) -> None:
        x = a[operand]
        if isinstance(x, Tensor) and _dt.name_of(x.dtype) not in names:
            raise DtypeError(
                f"{api}: {operand} must be {', '.join(names[:-1])} or {names[-1]}, got {_dt.name_of(x.dtype)}",
                rule="dtype",
            )

    return rule


def hwdge_transpose(api: str, dst: Tensor, a: dict[str, Any]) -> None:
    """``dma_transpose`` with ``dge_mode=hwdge``: a 2-byte dtype, ``src.shape[-1] <= 128``; a 2-D source has 16
    rows, a 3-/4-D one 1, 2, 4, 8 or 16 with ``src.shape[0] * src.shape[-2]`` a multiple of 16."""
    src = a["src"]
    if a["dge_mode"] != dge_mode.hwdge or not isinstance(src, Tensor):
        return
    shape = list(src.shape)
    if itemsize(src.dtype) != 2:
        raise DtypeError(
            f"{api}: a hardware-DGE transpose moves 2-byte elements, got {_dt.name_of(src.dtype)}",
            rule="hwdge-transpose",
        )
    ok = shape[-1] <= 128 and (
        shape[0] == 16 if len(shape) == 2 else shape[0] in (1, 2, 4, 8, 16) and shape[0] * shape[-2] % 16 == 0
    )
    if not ok:
        raise TileShapeError(
            f"{api}: a hardware-DGE transpose needs src.shape[-1] <= 128 and, for a 2-D source, 16 rows (3-/4-D: "
            f"src.shape[0] in 1, 2, 4, 8, 16 and src.shape[0] * src.shape[-2] a multiple of 16), got {shape}",
            rule="hwdge-transpose",
        )


def memset_value(api: str, dst: Tensor, a: dict[str, Any]) -> None:
    """The fill value suits dst: an MX x4 tensor takes only 0, an integer tensor an integral value (0.3.0)."""
    value = a["value"]
    if _dt.is_packed(dst.dtype) and value != 0:
        raise KernelArgumentError(
            f"{api}: an MX x4 tensor can only be set to 0, got {value!r}", rule="bad-argument"
        )
    if not _dt.is_float(dst.dtype) and isinstance(value, float) and not float(value).is_integer():
        raise KernelArgumentError(
            f"{api}: value {value!r} does not match the integer dtype {_dt.name_of(dst.dtype)}",
            rule="bad-argument",
        )


def engine_by_dst(api: str, dst: Tensor, a: dict[str, Any]) -> None:
    """``nc_transpose`` with ``engine=unknown``: TensorE into PSUM, VectorE otherwise."""
    if a["engine"] == engine.unknown:
        a["engine"] = engine.tensor if dst.st.buffer == "psum" else engine.vector


def _whole(t: Tensor) -> bool:
    """The view covers its whole storage in storage order."""
    return t.dims is not None and all(
        not isinstance(e, int) and e[0] == 0 and e[1] == 1 and e[2] == n for e, n in zip(t.dims, t.st.shape)
    )


def no_broadcast(api: str, dst: Tensor, a: dict[str, Any]) -> None:
    """``data1`` and ``data2`` agree in partitions and elements per partition (NKI 0.x has no broadcasting);
    operands of different free shapes are read element for element in row-major order (a whole-storage one is
    reshaped to the other's shape, otherwise both are read flat) -- nki-library's attention_tkg subtracts a
    ``[P, n, s]`` stride-0 view from a ``[P, n * s]`` tile (docs/errors.md, ``shape-mismatch``)."""
    x, y = a["data1"], a["data2"]
    if not (isinstance(x, Tensor) and isinstance(y, Tensor)):
        return
    px, py = (x.shape[0] if x.shape else 1), (y.shape[0] if y.shape else 1)
    if px != py or x.size // max(px, 1) != y.size // max(py, 1):
        raise TileShapeError(
            f"{api}: data1 {list(x.shape)} and data2 {list(y.shape)} must have the same partitions "
            "and elements per partition (no broadcasting in nki.isa)",
            rule="shape-mismatch",
        )
    if x.shape == y.shape:
        return
    if _whole(y):
        a["data2"] = y.reshape(x.shape)
    elif _whole(x):
        a["data1"] = x.reshape(y.shape)
    else:  # two views of different free shapes (e.g. one a stride-0 broadcast): both read flat
        a["data1"], a["data2"] = _views.free_flat(x), _views.free_flat(y)


# ---- the table -------------------------------------------------------------------------------------------------

_ENGINE = (("engine", engine),)
_RCMD = (("reduce_cmd", reduce_cmd),)

ADAPTERS: tuple[Adapter, ...] = (
    Adapter(
        "dma_transpose",
        "Transpose ``src`` through the DMA into an SBUF ``dst`` of the same dtype.",
        params(
            "dst",
            "src",
            axes=None,
            priority=None,
            dge_mode=dge_mode.unknown,
            oob_mode=oob_mode.error,
            name=None,
        ),
        dst=("sbuf",),
        enums=(("dge_mode", dge_mode), ("oob_mode", oob_mode)),
        rules=(same_dtype_as_dst("src"), hwdge_transpose),
        ignored=("priority", "dge_mode", "oob_mode"),  # queue choice and OOB policy: no effect on values
    ),
    Adapter(
        "nc_transpose",
        "2-D partition/free transpose (TensorE: SBUF -> PSUM, <= 128x128; VectorE: <= 32x32).",
        params("dst", "data", engine=engine.unknown, name=None),
        enums=_ENGINE,
        rules=(engine_by_dst,),
    ),
    Adapter(
        "tensor_copy",
        "Copy ``src`` into ``dst`` (bit-exact for equal dtypes, else via fp32; the result dtype is dst's).\n\n"
        "``dtype=`` is not part of NKI 0.x but AWS's own tutorials pass it; it is accepted and ignored (dst's "
        "dtype decides, as the reference states for every ISA op).",
        params("dst", "src", engine=engine.unknown, name=None, dtype=None),
        enums=_ENGINE,
        ignored=("dtype",),
    ),
    Adapter(
        "memset",
        "Fill ``dst`` with ``value`` (VectorE / GpSimd).",
        params("dst", "value", engine=engine.unknown, name=None),
        enums=_ENGINE,
        rules=(memset_value,),
        from_dst=("shape",),
    ),
    Adapter(
        "tensor_tensor",
        "``dst = data1 op data2`` element-wise (no broadcasting).",
        params("dst", "data1", "data2", "op", engine=engine.unknown, name=None),
        enums=_ENGINE,
        rules=(no_broadcast,),
    ),
    Adapter(
        "tensor_scalar",
        "``dst = (data op0 operand0) op1 operand1`` with scalar or ``(P, 1)`` operands.",
        params(
            "dst",
            "data",
            "op0",
            "operand0",
            reverse0=False,
            op1=None,
            operand1=None,
            reverse1=False,
            engine=engine.unknown,
            name=None,
        ),
        enums=_ENGINE,
    ),
    Adapter(
        "scalar_tensor_tensor",
        "``dst = (data op0 operand0) op1 operand1`` with operand0 scalar/``(P, 1)`` and operand1 a tile.",
        params(
            "dst", "data", "op0", "operand0", "op1", "operand1", reverse0=False, reverse1=False, name=None
        ),
    ),
    Adapter(
        "activation",
        "``dst = op(data * scale + bias)`` on the ScalarE (fp32), optionally reducing into its registers.",
        params(
            "dst",
            "op",
            "data",
            bias=None,
            scale=1.0,
            reduce_op=None,
            reduce_res=None,
            reduce_cmd=reduce_cmd.idle,
            name=None,
        ),
        enums=_RCMD,
    ),
    Adapter(
        "activation_reduce",
        "``activation`` that also writes the free-axis sum of its result into ``reduce_res``.",
        params("dst", "op", "data", "reduce_op", "reduce_res", bias=None, scale=1.0, name=None),
    ),
    Adapter(
        "tensor_reduce",
        "Reduce trailing free axes of ``data`` into ``dst``.",
        params("dst", "op", "data", "axis", negate=False, keepdims=False, name=None),
    ),
    Adapter("reciprocal", "``dst = 1 / data`` (fp32, VectorE).", params("dst", "data", name=None)),
    Adapter(
        "tensor_copy_predicated",
        "``dst = src`` where ``predicate != 0`` (inverted by ``reverse_pred``), else ``dst`` is kept (VectorE).",
        params("dst", "src", "predicate", reverse_pred=False, name=None),
        rules=(dtype_in("predicate", ("uint8", "uint16", "uint32")),),
        writes_dst=True,
    ),
    Adapter(
        "tensor_tensor_scan",
        "Per partition: ``r[i] = op1(op0(data0[i], r[i-1]), data1[i])`` with ``r[-1] = initial`` (VectorE).",
        params("dst", "data0", "data1", "initial", "op0", "op1", reverse0=False, reverse1=False, name=None),
    ),
    Adapter(
        "bn_stats",
        "Batch-norm statistics of up to 512 elements per partition: 6 values (VectorE).",
        params("dst", "data", name=None),
    ),
    Adapter(
        "bn_aggr",
        "Aggregate ``bn_stats`` results into (mean, population variance) per partition (VectorE).",
        params("dst", "data", name=None),
    ),
    Adapter(
        "max8",
        "The 8 largest values per partition, in descending order (VectorE).",
        params("dst", "src", name=None),
    ),
    Adapter(
        "nc_stream_shuffle",
        "Within each 32-partition quadrant ``dst[i] = src[mask[i]]``; 255 keeps ``dst[i]`` (VectorE).",
        params("dst", "src", "shuffle_mask", name=None),
        writes_dst=True,
    ),
    Adapter(
        "select_reduce",
        "``dst = predicate ? on_true : on_false`` with an optional max-reduce into ``reduce_res`` (VectorE).",
        params(
            "dst",
            "predicate",
            "on_true",
            "on_false",
            reduce_res=None,
            reduce_cmd=reduce_cmd.idle,
            reduce_op=None,
            reverse_pred=False,
            name=None,
        ),
        enums=_RCMD,
        when_none=(("reduce_op", np.maximum),),
        writes_dst=True,
    ),
    Adapter(
        "tensor_scalar_reduce",
        "``dst = data op0 operand0``, its free-dim reduction folded into the VectorE accumulator as ``reduce_cmd`` "
        "says (``load_reduce`` starts from ``reduce_init``) and the accumulator written to ``reduce_res`` "
        "(negated with ``reduce_res_negate``).",
        params(
            "dst",
            "data",
            "op0",
            "operand0",
            "reduce_op",
            reduce_res=None,
            reverse0=False,
            reduce_cmd=reduce_cmd.reset_reduce,
            reduce_init=None,
            reduce_res_negate=False,
            name=None,
        ),
        enums=_RCMD,
        instruction=_b1_reduce.ACCUMULATING_SCALAR_REDUCE,
    ),
    Adapter(
        "range_select",
        "Keep element ``j`` where both comparisons of ``range_start + j`` with the ``(P, 1)`` bounds hold, else "
        "``on_false_value``; optional max-reduce into ``reduce_res`` (VectorE, NeuronCore-v3+).",
        params(
            "dst",
            "on_true_tile",
            "comp_op0",
            "comp_op1",
            "bound0",
            "bound1",
            reduce_cmd=reduce_cmd.reset_reduce,
            reduce_res=None,
            reduce_op=None,
            range_start=0,
            on_false_value=float(np.finfo(np.float32).min),
            name=None,
        ),
        enums=_RCMD,
        when_none=(("reduce_op", np.maximum),),
    ),
    Adapter(
        "local_gather",
        "Per 16-partition GpSimd core, gather runs of ``num_elem_per_idx`` elements at the core's uint16 indices.",
        params("dst", "src_buffer", "index", num_elem_per_idx=1, num_valid_indices=None, name=None),
        dst=("sbuf",),
        casts=False,
    ),
    Adapter(
        "tensor_scalar_cumulative",
        "Per-partition running scan ``reg = op1(op0(src[i], imm0), reg); dst[i] = reg`` (VectorE).",
        params("dst", "src", "op0", "op1", "imm0", imm1=None, reduce_cmd=reduce_cmd.reset_reduce, name=None),
        enums=_RCMD,
        writes_dst=True,
    ),
    Adapter(
        "dropout",
        "``dst = data`` with each element zeroed with probability ``prob`` (a scalar or ``(P, 1)`` tile), no "
        "rescaling (VectorE).",
        params("dst", "data", "prob", name=None),
    ),
    Adapter(
        "sequence_bounds",
        "``[start, end)`` of every element's segment, ``(1, 2, n)``; segment id 0 gives ``(n, -1)`` (GpSimd).",
        params("dst", "segment_ids", name=None),
        dst=("sbuf",),
    ),
)

INSTRUCTIONS: dict[str, Callable[..., None]] = {spec.name: build(spec) for spec in ADAPTERS}
