"""The NKI 0.x calling convention shared by the ``nki.isa`` adapters: ``dst`` checks, enum arguments, argument
binding errors, writing a Beta-1 result into ``dst``, and implicit PSUM accumulation per element."""

from __future__ import annotations

import enum
import functools
import inspect
import math
import weakref
from collections.abc import Callable
from typing import Any

import numpy as np

from devkit import dtypes as _dt
from devkit.errors import (
    KernelArgumentError,
    MemoryPlacementError,
    PartitionMismatchError,
    TileShapeError,
    UnsupportedError,
    user_location,
)
from devkit.nki import _isa_layer as _layer
from devkit.nki import _isa_nl
from devkit.nki._isa_layer import Instruction
from devkit.nki.beta2 import views as _views
from devkit.nki.beta2.targets import machine_at_least as _machine_at_least  # noqa: F401  (used by the adapters)
from devkit.sim import instr as _x
from devkit.sim import unwritten as _unwritten
from devkit.sim.deferred import Deferred
from devkit.sim.storage import HBM_BUFFERS, Storage
from devkit.sim.tensor import Tensor

_FP32_MIN = float(np.finfo(np.float32).min)


class NkiValidationError(KernelArgumentError):
    """``nki.isa.NkiValidationError``: an instruction's arguments break its rules."""


# ---- calling convention ---------------------------------------------------------------------------------


def _strict(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Reject unknown or missing arguments with a KernelArgumentError naming the kernel line (NKI 0.2+).

    A TypeError raised by the call itself (its traceback has no frame inside ``fn``) is a binding error;
    TypeErrors from inside the instruction are devkit bugs and propagate unchanged."""
    api = f"nisa.{fn.__name__}"

    def bound(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except TypeError as e:
            tb = e.__traceback__
            if tb is not None and tb.tb_next is None:
                raise KernelArgumentError(f"{api}: {e}", rule="bad-arguments") from None
            raise

    return instruction(functools.wraps(fn)(bound))


def refusing(name: str, doc: str, message: str, rule: str) -> Callable[..., Any]:
    """A function ``name`` of the NKI 0.x API that the simulator refuses: any call raises
    :class:`~devkit.errors.UnsupportedError` with ``message`` and ``rule``, naming the kernel line."""

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise UnsupportedError(message, rule=rule)

    refuse.__name__ = refuse.__qualname__ = name
    refuse.__doc__ = doc
    return refuse


def declared(ins: Instruction) -> Callable[..., Any]:
    """The ``nki.isa`` function of an NKI 0.x-only instruction declared in the instruction layer
    (:mod:`devkit.nki._isa_layer`) with a plan taking the NKI 0.x signature (``dst`` first).

    The plan may return a function of the result tile that completes the instruction (``nc_matmul_mx``
    accumulates it into ``dst``).  Unknown or missing arguments are ``bad-arguments`` errors worded as Python
    words them for the public signature, as with :func:`_strict`."""
    api = f"nisa.{ins.name}"
    plan, numerics, engine, opcode = ins.plan, ins.numerics, ins.engine, ins.opcode
    sig = inspect.signature(plan)
    public = sig.replace(parameters=list(sig.parameters.values())[1:], return_annotation=None)

    def run(*args: Any, **kwargs: Any) -> Any:
        s = _layer.step(api, engine, opcode)
        s.flow = ins.dataflow
        try:
            finish = plan(s, *args, **kwargs)
        except TypeError as e:
            tb = e.__traceback__
            if tb is not None and tb.tb_next is None:
                raise KernelArgumentError(
                    f"{api}: {_binding_error(ins.name, public, args, kwargs)}", rule="bad-arguments"
                ) from None
            raise
        res = _layer.issue(s, numerics)
        if finish is not None:
            finish(res)

    run.__name__ = run.__qualname__ = ins.name
    run.__doc__ = plan.__doc__
    run.__signature__ = public  # type: ignore[attr-defined]
    run.instruction = ins  # type: ignore[attr-defined]
    return instruction(run)


def _binding_error(name: str, sig: inspect.Signature, args: tuple, kwargs: dict) -> str:
    """Python's own message for calling ``name{sig}`` with ``args``/``kwargs`` (a function of that signature
    is made and called; only on the error path)."""
    parts, star = [], False
    for p in sig.parameters.values():
        if p.kind is p.VAR_KEYWORD:
            parts.append(f"**{p.name}")
            continue
        if p.kind is p.KEYWORD_ONLY and not star:
            parts.append("*")
            star = True
        parts.append(p.name if p.default is p.empty else f"{p.name}=None")
    ns: dict[str, Any] = {}
    exec(f"def {name}({', '.join(parts)}): pass", ns)  # a function with the signature only
    try:
        ns[name](*args, **kwargs)
    except TypeError as e:
        return str(e)
    return "bad arguments"


#: nesting depth of ``nisa.*`` calls (an instruction may call another); hooks run after the outermost one
_depth = [0]
#: called after every outermost ``nisa.*`` instruction (:mod:`devkit.nki.beta2.lnc`: LNC-2 programs alternate)
after_instruction: list[Callable[[], None]] = []


class NkiInstruction:
    """``nki.isa.NkiInstruction``: the handle an instruction returns (NKI 0.6.0).

    ``c.depends_on(*producers)`` asks that ``c`` run after each producer.  The simulator executes a kernel in
    program order, so a producer issued before ``c`` is already complete when ``c`` runs and the edge is
    accepted (it adds nothing to the cost model's schedule, which orders instructions by their data).  A
    producer issued after ``c`` would reorder the kernel, which eager execution cannot do: that is refused."""

    def __init__(self, name: str, seq: int) -> None:
        self.name = name
        self.seq = seq  # position in program order
        self.producers: list[NkiInstruction] = []

    def depends_on(self, *producers: NkiInstruction) -> NkiInstruction:
        api = f"{self.name}.depends_on"
        for p in producers:
            if not isinstance(p, NkiInstruction):
                raise KernelArgumentError(
                    f"{api}: producers must be instructions returned by nki.isa, got {type(p).__name__}",
                    rule="bad-argument",
                )
            if p.seq > self.seq:
                raise UnsupportedError(
                    f"{api}: the producer {p.name} was issued after this instruction; the simulator executes "
                    "instructions in program order and cannot move one before an earlier one",
                    rule="not-simulated",
                )
        self.producers.extend(producers)
        return self

    def __repr__(self) -> str:
        return f"<NkiInstruction {self.name} #{self.seq}>"


_issued = [0]  # instructions issued so far (program order of NkiInstruction handles)


def instruction(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` as one ``nki.isa`` instruction: it returns an :class:`NkiInstruction` (unless it returns a value of
    its own), and when the outermost instruction returns, the :data:`after_instruction` hooks run."""
    api = f"nisa.{fn.__name__}"
    name = fn.__name__
    indirect_views_made = _views.indirect_views_made
    oob_views_made = _views.oob_views_made

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if indirect_views_made[0] and not _depth[0]:  # tensor.indirect operands: read their offsets now
            args, kwargs = _views.resolve_indirect(name, args, kwargs)
        if oob_views_made[0] and not _depth[0]:  # an out-of-bounds .ap view is an error once used
            _views.refuse_out_of_bounds(api, (*args, *kwargs.values()))
        _depth[0] += 1
        try:
            out = fn(*args, **kwargs)
        finally:
            _depth[0] -= 1
        if out is None:
            _issued[0] += 1
            out = NkiInstruction(api, _issued[0])
        if after_instruction and not _depth[0]:
            after_instruction[0]()
        return out

    return wrapper


def _member(value: Any, cls: type, api: str, name: str) -> Any:
    """An enum argument as a member of ``cls``.

    NKI 0.3.0 documents that enums are passed by member, but nki-library (hardware-tested, @d2ad3a5) passes
    ``dge_mode=3`` and ``perf_mode='double_row'`` (mlp_cte/mlp_cte_projection.py:426); real code is the
    arbiter, so a plain integer or string equal to a member's *value* is accepted and converted.  Anything else
    (other values, a member's name where its value differs, another enum's members) is an error."""
    if value is None or isinstance(value, cls):
        return value
    if isinstance(value, (int, np.integer)) and not isinstance(value, (bool, enum.Enum)):
        try:
            return cls(int(value))
        except ValueError:
            pass
    if isinstance(value, str) and not isinstance(value, enum.Enum):
        for member in cls:
            if isinstance(member.value, str) and member.value == value:
                return member
    raise KernelArgumentError(
        f"{api}: {name} must be a member of nki.isa.{cls.__name__} "
        f"({', '.join(f'{k}={v.value!r}' for k, v in cls.__members__.items())}), got {value!r}",
        rule="enum-by-member",
    )


def _dst(x: Any, api: str, *, buffers: tuple[str, ...] = ("sbuf", "psum")) -> Tensor:
    if not isinstance(x, Tensor):
        raise KernelArgumentError(
            f"{api}: dst must be a tensor (nl.ndarray), got {type(x).__name__}", rule="bad-argument"
        )
    x.check_alive()
    if x.st in _views.SNAPSHOTS:
        _views.refuse_snapshot_write(x, api)
    if x.st.buffer not in buffers and not (x.st.buffer in HBM_BUFFERS and "hbm" in buffers):
        where = " or ".join(b.upper() for b in buffers)
        raise MemoryPlacementError(
            f"{api}: dst must be in {where}, got {x.st.describe()}", rule="dst-placement"
        )
    return x


def _check_fit(api: str, dst: Tensor, shape: tuple[int, ...]) -> None:
    """dst and the result agree in partitions and in elements per partition (free shapes may differ)."""
    rp = shape[0] if shape else 1
    rf = math.prod(shape[1:]) if len(shape) > 1 else 1
    if dst.partitions != rp:
        raise PartitionMismatchError(
            f"{api}: dst {list(dst.shape)} has {dst.partitions} partitions but the result {list(shape)} has {rp}",
            rule="partition-mismatch",
        )
    if dst.free_size != rf:
        raise TileShapeError(
            f"{api}: dst {list(dst.shape)} holds {dst.free_size} elements per partition but the result "
            f"{list(shape)} has {rf}",
            rule="dst-shape",
        )


def _into(api: str, dst: Tensor, result: Tensor) -> None:
    """Write the fresh result of a Beta-1 instruction into ``dst`` (the instruction is retargeted)."""
    _check_fit(api, dst, tuple(result.shape))
    _x.assign(dst, result)


# ---- TensorE --------------------------------------------------------------------------------------------------

# per PSUM storage: which elements a matmul has written (implicit accumulation, accumulate=None); ``True``
# when every element has been (the common case, kept without a flag array)
_MATMUL_WRITTEN: weakref.WeakKeyDictionary[Storage, np.ndarray | bool] = weakref.WeakKeyDictionary()


def _is_whole(t: Tensor) -> bool:
    """Whether plain view ``t`` is its whole storage, element for element (``Tensor.whole``'s dims)."""
    dims = t.dims
    if dims is None or t.shape != t.st.shape:
        return False
    for i, e in enumerate(dims):
        if isinstance(e, int) or e[0] != 0 or e[1] != 1 or e[3] != i:
            return False
    return True


def _written_flags(t: Tensor) -> tuple[np.ndarray, Any, Any]:
    """(matmul-written flags of t's storage, the key selecting t's elements, t's view of the flags)."""
    flags = _MATMUL_WRITTEN.get(t.st)
    if flags is None or flags is True:
        init = np.ones if flags is True else np.zeros
        flags = _MATMUL_WRITTEN[t.st] = init(t.st.shape, dtype=bool)
    if t.dims is not None and not t._oob and t._bcast is None:
        key = t._key
        view = flags[key]
        if t._perm is not None:
            view = view.transpose(t._perm)
        return flags, key, view.reshape(t.shape)
    key = t._fancy_key(t._index_arrays(), None)
    return flags, key, flags[key]


def _accumulate_into(api: str, dst: Tensor, result: Tensor, accumulate: Any) -> None:
    """Write a fresh TensorE result into PSUM ``dst``: overwrite, add, or per element (accumulate=None)."""
    _check_fit(api, dst, tuple(result.shape))
    if accumulate is None and _is_whole(dst):
        # the whole tile: every element was matmul-written (add) or none was (overwrite); no flag array
        state = _MATMUL_WRITTEN.get(dst.st)
        if state is None:
            _x.assign(dst, result)
            _MATMUL_WRITTEN[dst.st] = True
            return
        if state is True:
            _isa_nl.augmented(dst, result, "add")
            dst._fresh = None
            return
    flags, key, before = _written_flags(dst)
    if accumulate is None:
        add = before.copy()
    elif accumulate:
        if not before.all() and dst.st.uninit is not None:
            # hardware: undefined; AWS's simulator warns.  The kit reads uninitialised memory as an error.
            dst.read()  # raises UninitializedReadError when an element was never written
        add = np.ones(before.shape, dtype=bool)
    else:
        add = np.zeros(before.shape, dtype=bool)
    if not add.any():
        _x.assign(dst, result)
    elif add.all():
        _isa_nl.augmented(dst, result, "add")
        dst._fresh = None
    else:
        _add_where(dst, result, add)
    flags[key] = True


def _add_where(dst: Tensor, result: Tensor, add: np.ndarray) -> None:
    """One matmul write that adds to some elements of ``dst`` and overwrites the others."""
    m = _x.machine("nisa.nc_matmul")
    loc = user_location()
    p = m.pending
    m.check_write(dst, loc, accumulate=True)
    m.retarget(p, result, dst)  # type: ignore[arg-type]
    p.attrs = {**(p.attrs or {}), "accumulate": True}  # type: ignore[union-attr]
    result._fresh = None
    if not m.numerics:
        dst.mark_written()
        return
    gv = _unwritten.result_of(result)  # adding never-written results computes on them: they stay so
    raw = p.raw  # type: ignore[union-attr]
    if isinstance(raw, Deferred):
        raw = raw.result()
    if raw is None:
        raw = result.read(check_init=False)
    new = np.asarray(raw, dtype=np.float32).reshape(dst.shape)
    old = dst.read(check_init=False).astype(np.float32)
    g_old = dst.unwritten() if dst.st.uninit is not None else None
    taint = dst.st.taint
    dst.write(_dt.round_to(np.where(add, old + new, new), dst.dtype))
    # never-written elements of dst the matmul adds to (rather than overwrites) stay never-written
    g = None if gv is None else gv.reshape(dst.shape)
    if g_old is not None:
        g_old = g_old & add
        g = g_old if g is None else (g | g_old)
    if g is not None and g.any():
        if (
            g_old is None or not g_old.any() or taint is None
        ):  # else: the earlier computation stays the origin
            taint = _unwritten.taint_of(result.st, loc)
        _unwritten.computed(dst, g, taint)
