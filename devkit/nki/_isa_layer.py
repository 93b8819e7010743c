"""The simulator's instruction layer: every NeuronCore instruction declared once, run by one executor.

An :class:`Instruction` declares an instruction's default engine and trace opcode (together its cost class,
see :mod:`devkit.cost.instr_cost`), its *plan* -- the operand roles, allowed buffers, shape and dtype rules,
written as a function whose parameters after the first are the NKI Beta-1 signature -- and its *numerics*, a
function from the operands' NumPy values to the result.  A plan fills in a :class:`Step`; :func:`execute`
does what every instruction does (machine and kernel line, reads and writes checked, one trace event, the
values computed or, cost-only, the outputs marked written, the result rounded to its dtype).

The front ends are adapters over these declarations: :func:`beta1` makes the ``neuronxcc.nki.isa`` function
(returns a new tile, takes ``mask=``/``dtype=``), and :mod:`devkit.nki.beta2.isa_table` the ``nki.isa`` one
(writes ``dst``).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from devkit import dtypes as _dt
from devkit.errors import user_location
from devkit.sim import dataflow, unwritten
from devkit.sim import instr as _x
from devkit.sim.machine import Machine
from devkit.sim.tensor import Tensor

#: returned by a numerics function that wrote its destination itself (a read-modify-write)
WRITTEN = object()


class Step:
    """One execution of an instruction, as its plan fills it in.

    Set by :func:`execute`: ``api`` (the name errors use), ``m`` (the machine), ``loc`` (the kernel line),
    ``engine``/``opcode`` (the declared ones; a plan may pick another engine or opcode).  Set by the plan:
    ``reads`` (operands in trace order; the tiles among them are checked as read), either ``shape``/``dtype``/
    ``buffer`` of the new result tile or ``dst`` (an in-place destination, checked as written, ``accumulate``
    for a read-modify-write), ``also`` (further outputs, e.g. ``reduce_res``; checked as written with
    ``also_checked``), ``flops`` and ``attrs`` of the trace event, ``mask`` (a boolean array of the result's
    shape or None), ``bit`` (integer operands are read as integers, not through fp32), ``exact`` (the values
    need no rounding), ``fn`` (the element-wise function of :func:`elementwise` numerics), ``evacuate`` (a
    one-operand ``fn`` may wait for a pending PSUM accumulation chain and run with it), ``moves`` (the
    instruction only moves its first operand: never-written elements flow to the result instead of being an
    error, :mod:`devkit.sim.unwritten`), and ``args``: what the numerics needs beyond the operands.  Set by the
    numerics: ``garbage`` (the result positions that received never-written data, kept never-written).
    A plan that sets ``buffer=None`` declares no tile result (the instruction changes engine state only).
    ``flow``: the instruction's dataflow rule (:mod:`devkit.sim.dataflow`; from its declaration, or set by a
    front end that writes an instruction out), or None: then reading a never-written element is an error.
    """

    __slots__ = (
        "accumulate",
        "also",
        "also_checked",
        "api",
        "args",
        "attrs",
        "bit",
        "buffer",
        "dst",
        "dtype",
        "engine",
        "evacuate",
        "exact",
        "flops",
        "flow",
        "fn",
        "garbage",
        "loc",
        "m",
        "mask",
        "moves",
        "opcode",
        "reads",
        "shape",
    )

    def __init__(self, api: str, m: Machine, loc: tuple[str, int], engine: str, opcode: str) -> None:
        self.api = api
        self.m = m
        self.loc = loc
        self.engine = engine
        self.opcode = opcode
        self.reads: list[Any] = []
        self.shape: tuple[int, ...] = ()
        self.dtype: Any = None
        self.buffer = "sbuf"
        self.dst: Tensor | None = None
        self.accumulate = False
        self.also: list[Tensor] = []
        self.also_checked = False
        self.flops = 0
        self.attrs: dict | None = None
        self.mask: np.ndarray | None = None
        self.bit = False
        self.exact = False
        self.evacuate = False
        self.args: Any = None
        self.fn: Any = None
        self.moves = False
        self.garbage: np.ndarray | None = None
        self.flow: dataflow.Rule | None = None


#: ``plan(step, *public arguments)``: checks the operands and fills in ``step``
Plan = Callable[..., None]
#: ``numerics(step)``: the result values (fp32, or integers for bit-exact instructions), or :data:`WRITTEN`
Numerics = Callable[[Step], Any]


@dataclass(frozen=True)
class Instruction:
    """One NeuronCore instruction: name, default engine and trace opcode (its cost class), plan, numerics, and
    its dataflow rule (:mod:`devkit.sim.dataflow`: which results are computed from never-written inputs; None:
    reading a never-written element is an error at the instruction)."""

    name: str
    engine: str
    opcode: str
    plan: Plan
    numerics: Numerics
    writes_dst: bool = False  # the Beta-1 instruction updates a destination in place and returns None
    dataflow: dataflow.Rule | None = None


def execute(ins: Instruction, api: str, args: tuple, kwargs: dict) -> Tensor | None:
    """Run ``ins`` on the Beta-1 arguments ``args``/``kwargs``: the new result tile, or None in place."""
    m = _x.machine(api)
    s = Step(api, m, user_location(), ins.engine, ins.opcode)
    s.flow = ins.dataflow
    ins.plan(s, *args, **kwargs)
    return issue(s, ins.numerics)


def run(ins: Instruction, *args: Any, **kwargs: Any) -> Tensor | None:
    """Run ``ins`` under its own name (``nisa.<name>`` in errors) on Beta-1 arguments."""
    return execute(ins, f"nisa.{ins.name}", args, kwargs)


def step(api: str, engine: str, opcode: str) -> Step:
    """A fresh step for an instruction written out in a front end (an NKI 0.x-only instruction, whose public
    function is its plan): the caller fills it in and passes it to :func:`issue` with its numerics."""
    return Step(api, _x.machine(api), user_location(), engine, opcode)


def issue(s: Step, numerics: Numerics) -> Tensor | None:
    """The steps every instruction shares, once its plan has filled in ``s``."""
    m, loc, dst = s.m, s.loc, s.dst
    if dst is None:
        if s.buffer is None:
            return _effect(s, numerics)
        out = _x.new_tile(m, s.shape, s.dtype, s.buffer, loc)
    else:
        out = dst
    tiles = [v for v in s.reads if isinstance(v, Tensor)]
    for t in tiles:
        m.check_read(t, loc)
    if dst is not None:
        m.check_write(dst, loc, accumulate=s.accumulate)
    if s.also_checked:
        for t in s.also:
            m.check_write(t, loc)
    outs = [out, *s.also] if s.also else [out]
    pend = m.emit(s.engine, s.opcode, tiles, outs, s.flops, s.attrs, loc)
    if not m.numerics:
        for t in s.also:
            t.mark_written()
        if dst is None:
            return _x.commit(m, pend, out, None, s.mask)
        dst.mark_written()
        return None
    if s.evacuate and s.mask is None and not s.bit and _x._waits_for_chain(m, tiles[0], s.shape):
        return _x._commit_evacuation(m, pend, out, tiles[0], s.fn, s.dtype)
    masks = _flow(s, m, tiles)
    if masks is None:
        vals = numerics(s)
        taint = None  # a movement carries its source's taint (never-written data computed on upstream)
        if s.garbage is not None:
            taint = next((t.st.taint for t in tiles if t.st.taint is not None), None)
        garbage = s.garbage
    else:  # computing on never-written data: legal, the results the rule names become never-written
        with unwritten.tolerating():  # (the rule saw every read: the numerics need not check them again)
            vals = numerics(s)
        taint = masks.pop()
        garbage = masks[0] if taint is not None else None
    if dst is None:
        res = _x.commit(m, pend, out, vals, s.mask, exact=s.exact, garbage=garbage, taint=taint)
    else:
        if vals is not WRITTEN:
            dst.write(vals if s.exact else _dt.round_to(vals, dst.dtype), s.mask)
        if garbage is not None:
            unwritten.computed(dst, garbage if s.mask is None else garbage & s.mask, taint)
        res = None
    if masks is not None and taint is not None:
        for t, g in zip(s.also, masks[1:]):
            unwritten.computed(t, g, taint)
    return res


def _flow(s: Step, m: Machine, tiles: list[Tensor]) -> list | None:
    """When ``s`` reads a storage holding never-written elements and has a dataflow rule: the rule's masks (one
    per output) followed by the taint their garbage carries (None when the regions read hold none); None
    otherwise (the fast path: a never-written read, if any, is then an error).  An accumulator register holding
    never-written rows may not be read by an instruction without a rule."""
    rule = s.flow
    if rule is None:
        if s.opcode in dataflow.ACC_OPCODES:
            dataflow.check_registers(m, s.opcode)
        return None
    if s.moves or not (
        dataflow.dirty(tiles) or (rule in dataflow.ACCUMULATING and dataflow.ACC_GARBAGE in m.accumulators)
    ):
        return None
    f = dataflow.Flow(s.loc)
    masks = rule(s, f)
    if masks is dataflow.NO_RULE:
        return None
    return [*masks, f.taint()]  # (taint None: nothing never-written in the regions read)


def _effect(s: Step, numerics: Numerics) -> None:
    """An instruction with no tile result (``buffer=None``: it changes engine state, e.g. a PRNG seed): the
    operands checked as read, one trace event, the numerics run for their effect."""
    m, loc = s.m, s.loc
    tiles = [v for v in s.reads if isinstance(v, Tensor)]
    for t in tiles:
        m.check_read(t, loc)
    m.emit(s.engine, s.opcode, tiles, [], s.flops, s.attrs, loc)
    if m.numerics:
        numerics(s)


def beta1_functions(instructions: tuple[Instruction, ...]) -> dict[str, Callable[..., Any]]:
    """``{name: the neuronxcc.nki.isa function}`` of each of ``instructions``."""
    return {ins.name: beta1(ins) for ins in instructions}


def beta1(ins: Instruction) -> Callable[..., Any]:
    """The ``neuronxcc.nki.isa`` function of ``ins``: its signature is the plan's without the step."""
    api = f"nisa.{ins.name}"

    def run(*args: Any, **kwargs: Any) -> Any:
        return execute(ins, api, args, kwargs)

    sig = inspect.signature(ins.plan)
    run.__signature__ = sig.replace(  # type: ignore[attr-defined]
        parameters=list(sig.parameters.values())[1:], return_annotation="None" if ins.writes_dst else "Tensor"
    )
    run.__name__ = run.__qualname__ = ins.name
    run.__doc__ = ins.plan.__doc__
    run.__module__ = "devkit.nki.isa"
    run.instruction = ins  # type: ignore[attr-defined]
    return run


# ---- numerics shared by many instructions ----------------------------------------------------------------------


def operand_value(
    x: Any, shape: tuple[int, ...], mask: np.ndarray | None, to_float: bool, check_init: bool = True
) -> Any:
    """An operand's values for the numerics: a tile of the result's shape read under the mask, a ``(P, 1)``
    tile shaped to broadcast along the free dims, a scalar as fp32 (or as given with ``to_float=False``)."""
    if isinstance(x, Tensor):
        if _x.aligned_shape(x) == shape:
            return _x.value_of(x, shape, mask, to_float=to_float, check_init=check_init)
        v = _x.value_of(x, None, None, to_float=to_float, check_init=check_init)
        if x.ndim >= 2 and _x.aligned_shape(x)[1:] == (1,) * (x.ndim - 1):
            v = v.reshape((v.shape[0],) + (1,) * (len(shape) - 1))
        return v
    return np.float32(x) if to_float else x


def elementwise(s: Step) -> np.ndarray:
    """``s.fn(*operand values)``: fp32 arithmetic (integers as they are with ``s.bit``)."""
    bit = s.bit
    if s.moves:  # a copy: never-written elements flow to the result (devkit.sim.unwritten)
        src = s.reads[0]
        src_shape = _x.aligned_shape(src)
        g = unwritten.moved(src, s.mask if src_shape == s.shape else None)
        if g is not None:
            s.garbage = np.broadcast_to(g.reshape(src_shape), s.shape)
    vals = [operand_value(x, s.shape, s.mask, not bit, not s.moves) for x in s.reads]
    with np.errstate(all="ignore"):  # inf/NaN inputs give IEEE results, not NumPy warnings
        v = np.asarray(s.fn(*vals))
    return v if bit else v.astype(np.float32, copy=False)
