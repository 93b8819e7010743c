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
"""

from __future__ import annotations

import dis
import functools
import sys
import types
from dataclasses import dataclass
from typing import Any

import numpy as np

#: opcodes a replayable body may contain (jumps and BINARY_OP are checked separately)
_ALLOWED_OPS = frozenset(
    """LOAD_FAST LOAD_FAST_CHECK STORE_FAST LOAD_CONST LOAD_GLOBAL LOAD_DEREF LOAD_ATTR LOAD_METHOD CALL PRECALL
    KW_NAMES PUSH_NULL CALL_FUNCTION_EX BINARY_OP UNARY_NEGATIVE BINARY_SUBSCR STORE_SUBSCR BUILD_SLICE
    BUILD_TUPLE BUILD_LIST BUILD_MAP BUILD_CONST_KEY_MAP LIST_EXTEND LIST_TO_TUPLE DICT_MERGE DICT_UPDATE
    UNPACK_SEQUENCE POP_TOP COPY SWAP NOP CACHE EXTENDED_ARG GET_ITER FOR_ITER END_FOR JUMP_BACKWARD
    JUMP_BACKWARD_NO_INTERRUPT COMPARE_OP IS_OP CONTAINS_OP FORMAT_VALUE BUILD_STRING""".split()
)
#: BINARY_OP operators that keep index arithmetic affine
_AFFINE_BINOPS = frozenset({"+", "-", "*", "+=", "-=", "*="})
_LOADS = frozenset({"LOAD_FAST", "LOAD_FAST_CHECK", "LOAD_GLOBAL", "LOAD_DEREF"})
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


@functools.lru_cache(maxsize=4096)
def _static(code: types.CodeType, lasti: int) -> Body | None:
    ins = [i for i in dis.get_instructions(code) if i.opname not in ("CACHE", "EXTENDED_ARG")]
    # the frame's last instruction is the call (or one of its inline cache entries)
    at = next((k for k, i in enumerate(ins) if i.offset > lasti), None)
    if at is None or at == 0 or at + 1 >= len(ins) or ins[at - 1].opname not in ("CALL", "CALL_FUNCTION_EX"):
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
    stored = {n for i in body if i.opname == "STORE_FAST" for n in _names(i)}
    seen: set[str] = set()
    chains: list[tuple[str, str, tuple[str, ...]]] = []
    tensors: list[tuple[str, str, tuple[str, ...]]] = []
    k = 0
    while k < len(body):
        i = body[k]
        op = i.opname
        if op not in _ALLOWED_OPS:
            return UNSAFE
        if op in ("JUMP_BACKWARD", "JUMP_BACKWARD_NO_INTERRUPT") and i.argval not in for_heads:
            return UNSAFE
        if op == "FOR_ITER" and not (head.offset < i.argval <= end):
            return UNSAFE
        if op == "BINARY_OP" and i.argrepr not in _AFFINE_BINOPS:
            w = _operand_windows(body, k)
            if w is None or not (_invariant(w[0], stored) and _invariant(w[1], stored)):
                return UNSAFE
        if op == "BINARY_OP" and i.argrepr in ("*", "*="):
            # a product of two loop-varying values is not affine (t * (t - 1) * (t - 2) is 0 on the
            # three recorded iterations)
            w = _operand_windows(body, k)
            if w is None or not (_invariant(w[0], stored) or _invariant(w[1], stored)):
                return UNSAFE
        if op == "BINARY_SUBSCR":
            # indexing with a loop-varying index is affine only into a tensor (a region); a tuple looked up
            # by the loop index is arbitrary
            w = _operand_windows(body, k)
            if w is None or not _invariant(w[1], stored):
                root = _root_chain(w[0]) if w is not None else None
                if root is None:
                    return UNSAFE
                tensors.append(root)
        if op == "STORE_FAST":
            seen.update(_names(i))
        elif op in _LOADS:
            if op != "LOAD_GLOBAL":
                for n in _names(i):
                    if n in stored and n not in seen:
                        return UNSAFE  # carried from the previous iteration
            attrs: list[str] = []
            j = k + 1
            while j < len(body) and body[j].opname in ("LOAD_ATTR", "LOAD_METHOD"):
                attrs.append(body[j].argval)
                j += 1
            for n in _names(i):
                chains.append((op, n, tuple(attrs)))
        k += 1
    return Body(True, tuple(dict.fromkeys(chains)), tuple(dict.fromkeys(tensors)))


#: instructions that may compute a non-affine operator's operands (checked for loop-variant names)
_OPERAND_OPS = frozenset(
    {"LOAD_CONST", "LOAD_FAST", "LOAD_DEREF", "LOAD_GLOBAL", "LOAD_ATTR", "BINARY_SUBSCR", "BINARY_OP"}
)


#: instructions that end a statement or a loop: an operand's computation never spans them
_BOUNDARY = frozenset(
    {
        "STORE_FAST",
        "STORE_SUBSCR",
        "POP_TOP",
        "FOR_ITER",
        "GET_ITER",
        "END_FOR",
        "JUMP_BACKWARD",
        "UNPACK_SEQUENCE",
    }
)


def _operand_windows(body: list[dis.Instruction], k: int) -> tuple[list, list] | None:
    """The instructions computing the left and right operands of the two-operand instruction ``body[k]``
    (walking back over the straight-line code by stack effect); None when that cannot be told."""
    out = []
    j = k - 1
    for _ in range(2):
        need = 1
        window = []
        while need > 0:
            if j < 0 or body[j].opname in _BOUNDARY:
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
    return out[1], out[0]


def _invariant(window: list[dis.Instruction], stored: set[str]) -> bool:
    """Whether an operand window reads no local the body assigns (so it is the same every iteration)."""
    return not any(
        i.opname in ("LOAD_FAST", "LOAD_DEREF") and any(n in stored for n in _names(i)) for i in window
    )


def _root_chain(window: list[dis.Instruction]) -> tuple[str, str, tuple[str, ...]] | None:
    """``name.attr...`` as a value chain, when the window is just that."""
    if (
        not window
        or window[0].opname not in _LOADS
        or (window[0].opname == "LOAD_GLOBAL" and window[0].arg & 1)
    ):
        return None
    if any(i.opname != "LOAD_ATTR" for i in window[1:]):
        return None
    return (window[0].opname, window[0].argval, tuple(i.argval for i in window[1:]))


def _names(i: dis.Instruction) -> tuple[str, ...]:
    v = i.argval
    return tuple(v) if isinstance(v, tuple) else (v,)


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
