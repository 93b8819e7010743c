"""Whether the body of an NKI 0.x loop may be replayed (:mod:`devkit.sim.replay2`) in a cost-only run.

Replay executes iterations 0, 1, 2 and the last, and synthesises the others from the instruction trace.
That is only exact when the skipped iterations would have done nothing but issue those instructions, so
the body of a ``for i in nl.affine_range(n):`` loop (likewise ``sequential_range``, ``static_range``,
``nl.range``) is checked twice:

- statically, from its bytecode (once per loop site): straight-line code -- no conditional jumps, no
  ``break``/``return``/``raise``/``try``/``with``, no nested function or comprehension; no stores but to
  local names and subscripts (no attribute, global or closure stores, no deletes); arithmetic only
  ``+``, ``-``, ``*`` (so operand regions are affine in the loop index, which the replay comparison then
  checks on three iterations); and no local carried from one iteration to the next (a name read before
  the body assigns it, and assigned in the body);
- on the values, after iteration 2: every name the body reads, and every attribute it reads from one,
  is a number, string, tuple or slice of such, a tensor, a module, a dtype, or a function of the devkit
  (the ``nki`` API) -- so no list, dict or user object can be mutated and no user function can run.

A body that fails either check executes every iteration (exact, only slower); the run counts it in
``Machine.replay_fallbacks``.  Plain Python ``range`` loops are not seen by the simulator and always
execute.

The bytecode read is CPython 3.10's to 3.13's: superinstructions (3.13) are split into the plain loads and
stores they do, operators are told by ``BINARY_OP``'s ``argrepr`` (3.11+) or the ``BINARY_*`` / ``INPLACE_*``
opcode (3.10), jumps by ``dis.hasjrel`` / ``dis.hasjabs`` / ``dis.hasjump``.  An opcode not listed here (a
newer Python's) makes a body unsafe: it executes every iteration.
"""

from __future__ import annotations

import dis
import functools
import sys
import types
from dataclasses import dataclass
from typing import Any

import numpy as np

#: stack shuffles (3.11+, and before 3.11): an operand computed across one cannot be told by walking back over
#: stack effects, so an operand walk that meets one gives up
_SHUFFLES = frozenset({"COPY", "SWAP", "DUP_TOP", "DUP_TOP_TWO", "ROT_TWO", "ROT_THREE", "ROT_FOUR", "ROT_N"})
#: opcodes a replayable body may contain, across the supported Pythons (3.10-3.13); jumps, binary
#: operators and intrinsics are checked separately.  Anything not named here (a new or unknown opcode
#: included) makes the body unsafe.
_ALLOWED_OPS = (
    frozenset(
        """LOAD_FAST LOAD_FAST_CHECK STORE_FAST LOAD_CONST LOAD_GLOBAL LOAD_DEREF LOAD_ATTR LOAD_METHOD
    CALL CALL_KW PRECALL KW_NAMES PUSH_NULL CALL_FUNCTION CALL_METHOD CALL_FUNCTION_KW CALL_FUNCTION_EX
    UNARY_NEGATIVE UNARY_POSITIVE CALL_INTRINSIC_1 BINARY_SUBSCR STORE_SUBSCR BINARY_SLICE STORE_SLICE
    BUILD_SLICE BUILD_TUPLE BUILD_LIST BUILD_MAP BUILD_CONST_KEY_MAP LIST_EXTEND LIST_TO_TUPLE DICT_MERGE
    DICT_UPDATE UNPACK_SEQUENCE POP_TOP NOP GET_ITER FOR_ITER END_FOR COMPARE_OP IS_OP CONTAINS_OP
    FORMAT_VALUE FORMAT_SIMPLE FORMAT_WITH_SPEC CONVERT_VALUE BUILD_STRING""".split()
    )
    | _SHUFFLES
)
#: the operator of a binary-operator instruction before Python 3.11 (from 3.11 on: ``BINARY_OP``, whose
#: ``argrepr`` is the operator)
_LEGACY_BINOPS = {
    f"{prefix}_{name}": symbol + suffix
    for prefix, suffix in (("BINARY", ""), ("INPLACE", "="))
    for name, symbol in {
        "ADD": "+",
        "SUBTRACT": "-",
        "MULTIPLY": "*",
        "FLOOR_DIVIDE": "//",
        "TRUE_DIVIDE": "/",
        "MODULO": "%",
        "POWER": "**",
        "MATRIX_MULTIPLY": "@",
        "LSHIFT": "<<",
        "RSHIFT": ">>",
        "AND": "&",
        "OR": "|",
        "XOR": "^",
    }.items()
}
#: BINARY_OP operators that keep index arithmetic affine
_AFFINE_BINOPS = frozenset({"+", "-", "*", "+=", "-=", "*="})
#: CALL_INTRINSIC_1 functions (3.12+) a body may use: the 3.11 opcodes they replace were allowed
_INTRINSICS = frozenset({"INTRINSIC_UNARY_POSITIVE", "INTRINSIC_LIST_TO_TUPLE"})
#: instructions that call (the loop's range is the result of one)
_CALLS = frozenset(
    {"CALL", "CALL_KW", "CALL_FUNCTION_EX", "CALL_FUNCTION", "CALL_METHOD", "CALL_FUNCTION_KW"}
)
#: every jump instruction of this Python (3.13 lists them in ``dis.hasjump``)
_JUMPS = frozenset(dis.hasjrel) | frozenset(dis.hasjabs) | frozenset(getattr(dis, "hasjump", ()))
#: unconditional backward jumps: a body may contain them only as the back edge of a loop
_BACK_EDGES = frozenset({"JUMP_ABSOLUTE", "JUMP_BACKWARD", "JUMP_BACKWARD_NO_INTERRUPT"})
#: 3.13 superinstructions, as the plain instructions each one does in turn
_SUPER = {
    "LOAD_FAST_LOAD_FAST": ("LOAD_FAST", "LOAD_FAST"),
    "STORE_FAST_LOAD_FAST": ("STORE_FAST", "LOAD_FAST"),
    "STORE_FAST_STORE_FAST": ("STORE_FAST", "STORE_FAST"),
}
_LOCAL_LOADS = frozenset({"LOAD_FAST", "LOAD_FAST_CHECK", "LOAD_DEREF"})
_LOADS = _LOCAL_LOADS | {"LOAD_GLOBAL"}
#: builtins a body may call (pure, and affine in their integer arguments)
_BUILTINS = frozenset({"len", "range", "int", "bool", "slice", "tuple", "isinstance", "float", "str"})
#: devkit API functions with Python-side effects the trace does not show
_IMPURE = frozenset({"device_print", "rand", "random_seed", "dropout", "fori_loop", "while_loop"})
_PLAIN = (
    int,
    float,
    complex,
    str,
    bytes,
    bool,
    type(None),
    slice,
    range,
    np.generic,
    np.dtype,
    type(Ellipsis),
)


@dataclass(frozen=True)
class Body:
    """The body of a ``for`` loop over an NKI range: whether it passed the static check, and the value chains
    to check once it has run."""

    safe: bool
    chains: tuple[tuple[str, str, tuple[str, ...]], ...] = ()  # (load opcode, name, attribute names)
    tensors: tuple[tuple[str, str, tuple[str, ...]], ...] = ()  # chains indexed by the loop: must be tensors


UNSAFE = Body(False)


def loop_site(frame: types.FrameType) -> Body | None:
    """The body of the ``for`` loop about to iterate the range that ``frame``'s current call returns
    (:data:`UNSAFE` if it fails the static check); None if the call is not a ``for`` statement's iterable."""
    return _static(frame.f_code, frame.f_lasti)


def _instructions(code: types.CodeType) -> list[dis.Instruction]:
    """The instructions of ``code`` without inline caches and ``EXTENDED_ARG`` prefixes, each superinstruction
    (3.13) replaced by the plain instructions it does in turn (at its own offset)."""
    out = []
    for i in dis.get_instructions(code):
        if i.opname in ("CACHE", "EXTENDED_ARG"):
            continue
        parts = _SUPER.get(i.opname)
        if parts is None:
            out.append(i)
            continue
        for opname, arg, name in zip(parts, (i.arg >> 4, i.arg & 15), i.argval):
            out.append(
                i._replace(opname=opname, opcode=dis.opmap[opname], arg=arg, argval=name, argrepr=name)
            )
    return out


def _binop(i: dis.Instruction) -> str | None:
    """The operator of a binary-operator instruction (``"+"``, ``"*="``...), None for other instructions."""
    if i.opname == "BINARY_OP":
        return i.argrepr
    return _LEGACY_BINOPS.get(i.opname)


@functools.lru_cache(maxsize=4096)
def _static(code: types.CodeType, lasti: int) -> Body | None:
    ins = _instructions(code)
    # the frame's last instruction is the call (or one of its inline cache entries)
    at = next((k for k, i in enumerate(ins) if i.offset > lasti), None)
    if at is None or at == 0 or at + 1 >= len(ins) or ins[at - 1].opname not in _CALLS:
        return None
    if ins[at].opname != "GET_ITER" or ins[at + 1].opname != "FOR_ITER":
        return None
    head = ins[at + 1]
    end = head.argval  # offset the loop exits to
    body = [i for i in ins if head.offset < i.offset < end]
    # a loop's back edge jumps to its FOR_ITER, or to the EXTENDED_ARG prefixes before it
    for_heads = {
        o - d
        for o in [head.offset] + [i.offset for i in body if i.opname == "FOR_ITER"]
        for d in (0, 2, 4, 6)
    }
    for entry in getattr(dis.Bytecode(code), "exception_entries", ()):
        if head.offset <= entry.start < end:
            return UNSAFE  # a try or with block inside the body
    stored = {i.argval for i in body if i.opname == "STORE_FAST"}
    seen: set[str] = set()
    chains: list[tuple[str, str, tuple[str, ...]]] = []
    tensors: list[tuple[str, str, tuple[str, ...]]] = []
    for k, i in enumerate(body):
        op = i.opname
        binop = _binop(i)
        if op == "FOR_ITER":
            if not (head.offset < i.argval <= end):
                return UNSAFE
        elif i.opcode in _JUMPS or op in _BACK_EDGES:
            # straight-line code: the only jumps are the back edges of this loop and the loops nested in it
            if op not in _BACK_EDGES or i.argval not in for_heads or i.argval > i.offset:
                return UNSAFE
        elif binop is not None:
            if binop not in _AFFINE_BINOPS:
                w = _operand_windows(body, k, 2)
                if w is None or not all(_invariant(x, stored) for x in w):
                    return UNSAFE
            elif binop in ("*", "*="):
                # a product of two loop-varying values is not affine (t * (t - 1) * (t - 2) is 0 on the
                # three recorded iterations)
                w = _operand_windows(body, k, 2)
                if w is None or not any(_invariant(x, stored) for x in w):
                    return UNSAFE
        elif op not in _ALLOWED_OPS:
            return UNSAFE
        elif op == "CALL_INTRINSIC_1" and i.argrepr not in _INTRINSICS:
            return UNSAFE
        if op in ("BINARY_SUBSCR", "BINARY_SLICE"):
            # indexing with a loop-varying index is affine only into a tensor (a region); a tuple looked up
            # by the loop index is arbitrary
            w = _operand_windows(body, k, 2 if op == "BINARY_SUBSCR" else 3)
            if w is None or not all(_invariant(x, stored) for x in w[1:]):
                root = _root_chain(w[0]) if w is not None else None
                if root is None:
                    return UNSAFE
                tensors.append(root)
        if op == "STORE_FAST":
            seen.add(i.argval)
        elif op in _LOADS:
            if op != "LOAD_GLOBAL" and i.argval in stored and i.argval not in seen:
                return UNSAFE  # carried from the previous iteration
            attrs: list[str] = []
            j = k + 1
            while j < len(body) and body[j].opname in ("LOAD_ATTR", "LOAD_METHOD"):
                attrs.append(body[j].argval)
                j += 1
            chains.append((op, i.argval, tuple(attrs)))
    return Body(True, tuple(dict.fromkeys(chains)), tuple(dict.fromkeys(tensors)))


#: instructions that end a statement or a loop: an operand's computation never spans them
_BOUNDARY = frozenset(
    {
        "STORE_FAST",
        "STORE_SUBSCR",
        "STORE_SLICE",
        "POP_TOP",
        "FOR_ITER",
        "GET_ITER",
        "END_FOR",
        "JUMP_BACKWARD",
        "JUMP_ABSOLUTE",
        "UNPACK_SEQUENCE",
    }
)


def _operand_windows(body: list[dis.Instruction], k: int, n: int) -> list[list[dis.Instruction]] | None:
    """The instructions computing each of the ``n`` operands of the instruction ``body[k]``, first operand
    first (walking back over the straight-line code by stack effect); None when that cannot be told."""
    out = []
    j = k - 1
    for _ in range(n):
        need = 1
        window = []
        while need > 0:
            if j < 0 or body[j].opname in _BOUNDARY or body[j].opname in _SHUFFLES:
                return None
            i = body[j]
            window.append(i)
            try:
                need -= dis.stack_effect(
                    i.opcode, i.arg if i.opcode >= dis.HAVE_ARGUMENT else None, jump=False
                )
            except ValueError:
                return None
            j -= 1
        if need != 0:
            return None
        out.append(window[::-1])
    return out[::-1]


def _invariant(window: list[dis.Instruction], stored: set[str]) -> bool:
    """Whether an operand window reads no local the body assigns (so it is the same every iteration)."""
    return not any(i.opname in _LOCAL_LOADS and i.argval in stored for i in window)


def _root_chain(window: list[dis.Instruction]) -> tuple[str, str, tuple[str, ...]] | None:
    """``name.attr...`` as a value chain, when the window is just that (no method load, which also pushes
    a NULL or ``self``)."""
    if not window or window[0].opname not in _LOADS or "NULL" in window[0].argrepr:
        return None
    if any(i.opname != "LOAD_ATTR" or "NULL" in i.argrepr for i in window[1:]):
        return None
    return (window[0].opname, window[0].argval, tuple(i.argval for i in window[1:]))


def values_ok(body: Body, frame: types.FrameType) -> bool:
    """Whether every name and attribute chain the body reads holds a value replay may skip over."""
    f_locals = frame.f_locals
    try:
        return _values_ok(body, frame, f_locals)
    finally:
        # before Python 3.13 ``frame.f_locals`` is a dict cached on the frame: left filled, it would keep this
        # iteration's tiles alive after the kernel rebinds their names (and so move their frees); from 3.13
        # it is a write-through proxy holding nothing, which must not be cleared
        if type(f_locals) is dict:
            f_locals.clear()
        del f_locals


def _values_ok(body: Body, frame: types.FrameType, f_locals: dict) -> bool:
    from devkit.sim.tensor import Tensor

    for op, name, attrs in body.tensors:
        v = f_globals_get(frame, name) if op == "LOAD_GLOBAL" else f_locals.get(name, _MISSING)
        try:
            for a in attrs:
                v = getattr(v, a)
        except Exception:
            return False
        if not isinstance(v, Tensor):
            return False
    f_globals = frame.f_globals
    builtins_ = f_globals.get("__builtins__", {})
    if isinstance(builtins_, types.ModuleType):
        builtins_ = vars(builtins_)
    for op, name, attrs in body.chains:
        if op == "LOAD_GLOBAL":
            if name in f_globals:
                v = f_globals[name]
            elif name in builtins_:
                v = builtins_[name]
                if name not in _BUILTINS:
                    return False
                if not attrs:
                    continue
            else:
                return False
        elif name in f_locals:
            v = f_locals[name]
        else:
            return False
        if not _allowed(v):
            return False
        for a in attrs:
            try:
                v = getattr(v, a)
            except Exception:  # an attribute that raises: let execution report it
                return False
            if not _allowed(v):
                return False
    return True


_MISSING = object()


def f_globals_get(frame: types.FrameType, name: str) -> Any:
    return frame.f_globals.get(name, _MISSING)


def _allowed(v: Any, depth: int = 0) -> bool:
    if isinstance(v, _PLAIN):
        return True
    if isinstance(v, (tuple, frozenset)):
        return depth < 3 and all(_allowed(x, depth + 1) for x in v)
    if isinstance(v, types.ModuleType):
        return True
    if isinstance(v, type):
        return v.__module__.split(".")[0] in ("devkit", "numpy", "ml_dtypes", "builtins")
    if isinstance(v, types.MethodType):
        return _devkit_function(v.__func__) and _allowed(v.__self__, depth + 1)
    if isinstance(v, types.BuiltinMethodType):
        owner = getattr(v, "__self__", None)
        if isinstance(owner, types.ModuleType):
            return False  # a builtin function of some module (numpy.random...): not known pure
        return isinstance(owner, (*_PLAIN, tuple))
    if isinstance(v, (types.FunctionType, functools.partial)):
        return _devkit_function(v)
    mod = type(v).__module__ or ""
    if not mod.startswith("devkit."):
        return False
    name = type(v).__name__
    # a jitted sub-kernel runs user code; registers hold state the trace does not show
    if name in ("Kernel", "VirtualRegister"):
        return False
    return not callable(v) or name in ("_Loop", "_TileSize2")


def _devkit_function(f: Any) -> bool:
    f = getattr(f, "func", f)  # functools.partial
    mod = getattr(f, "__module__", "") or ""
    return mod.startswith("devkit.") and getattr(f, "__name__", "") not in _IMPURE


def caller(depth: int = 2) -> types.FrameType | None:
    try:
        return sys._getframe(depth)
    except ValueError:  # pragma: no cover
        return None
