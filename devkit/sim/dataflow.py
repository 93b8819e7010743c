"""Definedness propagation: which results of an instruction are computed from never-written data.

An instruction of the instruction layer (:mod:`devkit.nki._isa_layer`) may declare a *dataflow rule*: given
the step of one execution (its operands, shape, mask, arguments), the rule says which positions of each
output (the result or ``dst``, then ``step.also`` in order) are computed from a never-written input element.
When an instruction with a rule reads never-written elements, it computes (on whatever the memory holds) and
those output positions become never-written too, remembering where the garbage was first computed on
(:class:`devkit.sim.unwritten.Taint`); the error comes only when such data is *observed* -- stored to HBM,
used as an index or register, moved when nothing else is, or read by an instruction without a rule
(:mod:`devkit.sim.unwritten`).  Valgrind's memcheck does the same for CPU code.

Only instructions that read a never-written element pay for this: :func:`dirty` is the fast check.  A rule
returns :data:`NO_RULE` for a configuration it does not cover; the instruction then reads checked, as an
instruction without a rule does (an error at that line -- conservative, never a wrong answer).

The rules here are the dataflow *classes*; each instruction names its class in its declaration.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from devkit.dtypes import is_float, round_to
from devkit.sim.storage import Storage
from devkit.sim.tensor import TOLERATING, Tensor
from devkit.sim.unwritten import Taint, taint_of

#: returned by a rule for a configuration it does not model: the instruction reads checked (an error)
NO_RULE = object()

#: key of the machine's accumulator registers (``m.accumulators``, per LNC program) under which the rows that
#: hold never-written results are kept, ``{engine: bool[128]}``, only while some do
ACC_GARBAGE = "garbage"

Masks = list[np.ndarray | None]


class Flow:
    """The never-written inputs one execution reads: collected while its rule runs.  ``source`` is the first
    operand storage found holding never-written data in the region read (the taint's source)."""

    __slots__ = ("_taint", "held", "loc", "source")

    def __init__(self, loc: tuple[str, int]) -> None:
        self.loc = loc  # the instruction's kernel line
        self.source: Storage | None = None
        self.held: Taint | None = None  # the taint of garbage an accumulator register holds
        self._taint: Taint | None = None

    def taint(self) -> Taint | None:
        """Where the garbage this execution produces was first computed on: the source operand's own taint,
        or this instruction; the accumulator register's when no operand holds any; None when clean."""
        if self._taint is None:
            if self.source is not None:
                self._taint = taint_of(self.source, self.loc)
            else:
                self._taint = self.held
        return self._taint

    def operand(self, x: Any, shape: tuple[int, ...], mask: np.ndarray | None = None) -> np.ndarray | None:
        """Never-written positions of operand ``x`` as they reach an element-wise result of ``shape``: a tile
        of that (aligned) shape read under ``mask``, a ``(P, 1)`` tile or a smaller tile broadcast; None for a
        scalar or a tile with nothing never-written in the region read."""
        if not isinstance(x, Tensor) or x.st.uninit is None or _clean(x):
            return None
        ash = _aligned(x)
        g = x.unwritten(mask if (mask is not None and ash == shape) else None)
        if g is None:
            return None
        self.note(x)
        g = g.reshape(ash)
        if ash == shape:
            return g
        if len(ash) >= 2 and ash[1:] == (1,) * (len(ash) - 1):
            g = g.reshape((ash[0],) + (1,) * (len(shape) - 1))
        try:
            return np.broadcast_to(g, shape)
        except ValueError:  # shapes the numerics combine otherwise: every result position may depend on it
            return np.ones(shape, dtype=bool)

    def tile(self, x: Any) -> np.ndarray | None:
        """Never-written positions of tile ``x`` (its view shape), or None."""
        if not isinstance(x, Tensor) or x.st.uninit is None or _clean(x):
            return None
        g = x.unwritten()
        if g is not None:
            self.note(x)
        return g

    def note(self, x: Tensor) -> None:
        if self.source is None:
            self.source = x.st


def _clean(x: Tensor) -> bool:
    """Whether plain view ``x`` selects no never-written element (one slice of the flags, no copy; other views
    are not looked at here)."""
    if x.dims is not None and not x._oob:
        return not x.st.uninit[x._key].any()  # type: ignore[index]
    return False


def _aligned(t: Tensor) -> tuple[int, ...]:
    return (t.shape[0], 1) if (t.ndim == 1 and t.st.on_chip) else t.shape


def dirty(tiles: list[Tensor]) -> bool:
    """Whether some operand holds never-written elements (the fast check: no mask is computed)."""
    for t in tiles:
        if t.st.uninit is not None:
            return True
    return False


def any_of(masks: list[np.ndarray | None], shape: tuple[int, ...]) -> np.ndarray | None:
    """The union of ``masks`` (None entries are clean), None when nothing is set."""
    out = None
    for g in masks:
        if g is not None:
            out = g.copy() if out is None else (out | g)
    return out


#: ``rule(step, flow)``: the never-written positions of each output (``[result or dst, *step.also]``; None =
#: clean), or :data:`NO_RULE`
Rule = Callable[[Any, Flow], Any]


# ---- the dataflow classes ------------------------------------------------------------------------------------


def elementwise(s: Any, f: Flow) -> Masks:
    """Each result element is computed from the operand elements at its position (tiles of the result's shape,
    ``(P, 1)`` per-partition operands and broadcast tiles; scalars are clean)."""
    return [any_of([f.operand(x, s.shape, s.mask) for x in s.reads], s.shape)]


def affine_select(s: Any, f: Flow) -> Masks:
    """``pred ? on_true_tile : value`` with a compile-time predicate (``s.args``): only chosen elements count."""
    g = f.operand(s.reads[0], s.shape, s.mask)
    return [None if g is None else g & s.args]


def _values(x: Any, shape: tuple[int, ...]) -> np.ndarray:
    """The stored values of operand ``x`` (a tile, read without the never-written check, or a scalar) as they
    reach an element-wise result of ``shape``."""
    if not isinstance(x, Tensor):
        return np.full(shape, x)
    TOLERATING[0] += 1
    try:
        v = x.read()
    finally:
        TOLERATING[0] -= 1
    ash = _aligned(x)
    v = v.reshape(ash)
    if ash != shape and len(ash) >= 2 and ash[1:] == (1,) * (len(ash) - 1):
        v = v.reshape((ash[0],) + (1,) * (len(shape) - 1))
    return np.broadcast_to(v, shape)


def _same(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Where two candidate results are the same value (integers of one dtype exactly; otherwise equal as
    float64 with the same sign, so ``-0.0`` differs from ``0.0`` and a NaN from everything)."""
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype == b.dtype and a.dtype.kind in "iub":
        return a == b
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    return (a64 == b64) & (np.signbit(a64) == np.signbit(b64))


def _choose(
    g_c: np.ndarray | None,
    cv: np.ndarray,
    g_x: np.ndarray | None,
    g_y: np.ndarray | None,
    same: Callable[[], np.ndarray],
) -> np.ndarray | None:
    """Never-written results of ``c ? x : y`` element-wise: where the condition is written, those of the
    chosen operand; where it is never-written (``g_c``), the element is unknown only when the two candidates
    differ (``same()``: where they are the same value, computed only then) or either is never-written -- a
    never-written predicate that cannot change the result is not observed."""
    out = None
    for g, where in ((g_x, cv), (g_y, ~cv)):
        if g is not None:
            out = (g & where) if out is None else (out | (g & where))
    if g_c is None:
        return out
    undecided = g_c & ~same()
    for g in (g_x, g_y):
        if g is not None:
            undecided |= g_c & g
    if out is None:
        return undecided if undecided.any() else None
    return np.where(g_c, undecided, out)


def select(
    f: Flow, operands: list[Any], shape: tuple[int, ...], mask: np.ndarray | None
) -> np.ndarray | None:
    """``nl.where(c, x, y)``: only the chosen operand counts; where the condition is never-written, the
    element is never-written unless ``x`` and ``y`` hold the same value there (:func:`_choose`)."""
    c, x, y = operands
    g_c, g_x, g_y = (f.operand(v, shape, mask) for v in (c, x, y))
    if g_x is None and g_y is None and g_c is None:
        return None
    cv = np.full(shape, bool(c)) if not isinstance(c, Tensor) else _values(c, shape) != 0
    return _choose(g_c, cv, g_x, g_y, lambda: _same(_values(x, shape), _values(y, shape)))


def where(s: Any, f: Flow) -> Masks:
    """``nl.where`` as a step of the instruction layer (``s.reads = [condition, x, y]``): :func:`select`."""
    return [select(f, s.reads, s.shape, s.mask)]


def predicated_copy(s: Any, f: Flow) -> Masks:
    """``dst = src`` where the predicate holds, else ``dst`` unchanged: the chosen source counts; where the
    predicate is never-written (and the mask lets the copy happen), the element is never-written unless the
    source value, converted to ``dst``'s dtype, equals what ``dst`` holds (:func:`_choose`)."""
    sv, pr, d = s.reads
    marr, reverse = s.args
    pv = _values(pr, s.shape) != 0
    if reverse:
        pv = ~pv
    if marr is not None:
        pv = pv & marr
    g_src, g_pred, g_dst = f.operand(sv, s.shape), f.operand(pr, s.shape), f.operand(d, s.shape)
    if g_pred is not None and marr is not None:
        g_pred = g_pred & marr  # masked off: dst keeps its value whatever the predicate
        g_pred = g_pred if g_pred.any() else None

    def same() -> np.ndarray:
        new = _values(sv, s.shape)
        new = round_to(new.astype(np.float32) if is_float(d.dtype) else new, d.dtype)
        return _same(new, _values(d, s.shape))

    return [_choose(g_pred, pv, g_src, g_dst, same)]


def free_reduce(s: Any, f: Flow) -> Masks:
    """A reduction along free axes (``s.args = (mask, input shape, axes, keepdims)``): a result element is
    never-written when any element it reduces is."""
    marr, shape_in, axes, keepdims = s.args
    g = f.operand(s.reads[0], shape_in, marr)
    if g is None:
        return [None]
    return [np.asarray(g.any(axis=axes, keepdims=keepdims)).reshape(s.shape)]


def scan(s: Any, f: Flow) -> Masks:
    """A running scan along the free axes per partition (``tensor_tensor_scan``): element ``i`` depends on
    elements ``0..i`` of both data operands and on the initial value."""
    p = s.shape[0]
    g = any_of([f.operand(x, s.shape) for x in s.reads], s.shape)
    if g is None:
        return [None]
    return [np.logical_or.accumulate(g.reshape(p, -1), axis=1).reshape(s.shape)]


def matmul(s: Any, f: Flow) -> Any:
    """``out[i, j] = sum_k stationary[k, i] * moving[k, j]``: never-written when any contraction element of
    stationary column ``i`` or moving column ``j`` is (operand masks respected).  A transposing matmul moves
    data (:mod:`devkit.sim.unwritten`) and has no rule here."""
    if (s.attrs or {}).get("transpose"):
        return NO_RULE
    st, mv = s.reads
    mm, n = s.shape
    gs, gm = f.tile(st), f.tile(mv)
    rows = cols = None
    if gs is not None:
        gs = gs.reshape(-1, mm)
        if st.omask is not None:
            gs = gs & st.omask.reshape(-1, mm)
        rows = gs.any(0)
    if gm is not None:
        gm = gm.reshape(-1, n)
        if mv.omask is not None:
            gm = gm & mv.omask.reshape(-1, n)
        cols = gm.any(0)
    if rows is None and cols is None:
        return [None]
    out = np.zeros((mm, n), dtype=bool)
    if rows is not None:
        out |= rows[:, None]
    if cols is not None:
        out |= cols[None, :]
    return [out]


def partition_reduce(s: Any, f: Flow) -> Masks:
    """A reduction across partitions into one row: column ``j`` is never-written when any partition of the
    input's column ``j`` is."""
    g = f.tile(s.reads[0])
    if g is None:
        return [None]
    return [g.reshape(g.shape[0], -1).any(0).reshape(s.shape)]


#: ``reduce_cmd`` values (nki.isa.reduce_cmd): idle, reset, reduce, reset_reduce, load_reduce
IDLE, RESET, REDUCE, RESET_REDUCE, LOAD_REDUCE = range(5)


def _accumulate(
    s: Any, engine: str, rows: np.ndarray | None, f: Flow, reset: bool, fold: bool
) -> np.ndarray | None:
    """Update the never-written rows of ``engine``'s accumulator register for one instruction (``reset``: set
    to the identity first; ``fold``: the instruction's row reductions ``rows`` are folded in); the rows the
    register now holds, None when clean.  The register's entry is ``(rows, source storage or taint)``."""
    regs = s.m.accumulators.get(ACC_GARBAGE)
    entry = None if regs is None else regs.get(engine)
    acc = None if (entry is None or reset) else entry[0]
    held = None if acc is None else entry[1]  # type: ignore[index]
    if held is not None and f.held is None:
        f.held = held  # the register's garbage is what this instruction's outputs may carry on
    if fold and rows is not None and rows.any():
        acc = np.zeros(128, dtype=bool) if acc is None else acc.copy()
        acc[: rows.shape[0]] |= rows
        held = held or f.taint()
    if acc is not None and acc.any():
        s.m.accumulators.setdefault(ACC_GARBAGE, {})[engine] = (acc, held)
    elif regs is not None:
        regs.pop(engine, None)
        if not regs:
            del s.m.accumulators[ACC_GARBAGE]
        acc = None
    return acc


def activation(s: Any, f: Flow) -> Any:
    """The ScalarE ``func(data * scale + bias)`` (``activate2``'s ALU pre-steps included) is element-wise in
    its operands; with a reduction, the rows of the accumulator register that fold in a never-written result
    are never-written, and so is ``reduce_res`` in those rows."""
    out = any_of([f.operand(x, s.shape, s.mask) for x in s.reads], s.shape)
    _bias, _scale, _pre, rname, rc, reduce_res = s.args
    p = s.shape[0]
    rows = None
    if out is not None:
        g = out if s.mask is None else out & s.mask
        rows = g.reshape(p, -1).any(1)
    reset = rc in (RESET, RESET_REDUCE)
    fold = rname is not None and rc in (REDUCE, RESET_REDUCE)
    acc = _accumulate(s, "scalar", rows, f, reset, fold)
    masks: list[np.ndarray | None] = [out]
    if reduce_res is not None:
        masks.append(None if acc is None else acc[:p].copy())
    return masks


def scalar_reduce(s: Any, f: Flow) -> Any:
    """``tensor_scalar_reduce``: an element-wise result, and its row reductions folded into the VectorE
    accumulator register by ``reduce_cmd`` (``reduce_res`` receives the register)."""
    t, o0, init = s.reads
    _reverse0, rc, rr, _negate = s.args
    p = s.shape[0]
    out = any_of([f.operand(x, s.shape, s.mask) for x in (t, o0)], s.shape)
    rows = None if out is None else (out if s.mask is None else out & s.mask).reshape(p, -1).any(1)
    g_init = f.operand(init, (p, 1))
    if rc == LOAD_REDUCE and g_init is not None:
        rows = g_init.reshape(p) if rows is None else rows | g_init.reshape(p)
    reset = rc in (RESET, RESET_REDUCE, LOAD_REDUCE)
    fold = rc in (REDUCE, RESET_REDUCE, LOAD_REDUCE)
    acc = _accumulate(s, "vector", rows, f, reset, fold)
    masks: list[np.ndarray | None] = [out]
    if rr is not None:
        masks.append(None if acc is None else acc[:p].copy())
    return masks


#: trace opcodes of instructions that may read an accumulator register -> the registers (by engine) they may
#: read; an instruction of these without a rule may not read one holding never-written rows (``activation`` is
#: also the opcode of NKI 0.x ``exponential``, which accumulates on the VectorE)
ACC_OPCODES: dict[str, tuple[str, ...]] = {
    "activation": ("scalar", "vector"),
    "tensor_scalar_reduce": ("vector",),
    "tensor_scalar_cumulative": ("vector",),
    "select_reduce": ("vector",),
    "range_select": ("vector",),
}


def check_registers(m: Any, opcode: str) -> None:
    """An instruction (trace ``opcode``) without a dataflow rule that may read an accumulator register: an error
    when such a register holds never-written rows (blamed on the computation that put them there)."""
    regs = m.accumulators.get(ACC_GARBAGE)
    if regs:
        for engine, (rows, taint) in regs.items():
            if engine not in ACC_OPCODES[opcode]:
                continue
            raise taint.observed(
                f"{int(np.count_nonzero(rows))} row(s) of the {engine} engine's accumulator register",
                f"first at row {int(np.argmax(rows))}",
                "is read by an instruction that cannot carry never-written data",
            )


# ---- per-partition, gathering and register-carrying classes ----------------------------------------------------


def _row_flags(f: Flow, tiles: list[Any], masks: list[np.ndarray | None] | None = None) -> np.ndarray | None:
    """Per partition, whether any element of ``tiles`` read there (under ``masks``, one per tile of its view
    shape, None = all) is never-written: a bool array over the largest partition count, None when none is."""
    out: np.ndarray | None = None
    for i, x in enumerate(tiles):
        if not isinstance(x, Tensor) or x.st.uninit is None or _clean(x):
            continue
        g = x.unwritten(None if masks is None else masks[i])
        if g is None:
            continue
        f.note(x)
        r = g.reshape(g.shape[0], -1).any(1)
        if out is None:
            out = r
        elif out.shape[0] >= r.shape[0]:
            out = out.copy()
            out[: r.shape[0]] |= r
        else:
            r = r.copy()
            r[: out.shape[0]] |= out
            out = r
    return out


def _on_rows(rows: np.ndarray | None, shape: tuple[int, ...]) -> np.ndarray | None:
    """``rows`` (per partition) spread over an output of ``shape``: every element of a flagged partition; when
    the partition counts differ, every element once any partition is flagged (conservative)."""
    if rows is None or not rows.any():
        return None
    if rows.shape[0] != shape[0]:
        return np.ones(shape, dtype=bool)
    return np.broadcast_to(rows.reshape((shape[0],) + (1,) * (len(shape) - 1)), shape).copy()


def rows(s: Any, f: Flow) -> Masks:
    """A per-partition computation whose every result in partition ``p`` may depend on every element read in
    partition ``p`` (sorts, searches, statistics: ``max8``, ``nc_find_index8``, ``nc_match_replace8`` and its
    ``dst_idx``, ``bn_aggr``, ``sequence_bounds``): conservatively, all of an output's row is never-written when
    any element of that partition of any tile operand is.  ``bn_stats`` counts only the elements its mask
    selects (``s.args``, when it is an array of the input's shape)."""
    masks = None
    if isinstance(s.args, np.ndarray) and s.reads and isinstance(s.reads[0], Tensor):
        if s.args.shape == s.reads[0].shape:
            masks = [s.args] + [None] * (len(s.reads) - 1)
    r = _row_flags(f, s.reads, masks)
    shapes = [s.shape if s.dst is None else _aligned(s.dst)] + [_aligned(t) for t in s.also]
    return [_on_rows(r, sh) for sh in shapes]


def topk(s: Any, f: Flow) -> Masks:
    """``topk``: every partition of a 16-partition group receives the group's ``K`` largest of its ``n`` active
    values (the first ``ceil(n / 16)`` columns): all of a group's output rows are never-written when any
    active element of the group is."""
    (t,) = s.reads
    n = s.attrs["n"]
    g = f.tile(t)
    if g is None:
        return [None, None]
    p = t.shape[0]
    cols = -(-n // 16)
    grp = g.reshape(p, -1)[:, :cols].reshape(p // 16, -1).any(1)
    r = np.repeat(grp, 16)
    return [_on_rows(r, _aligned(s.dst)), _on_rows(r, _aligned(s.also[0]))]


def flat_sum(s: Any, f: Flow) -> Masks:
    """``dma_compute``: ``dst`` is the element-wise sum of its sources, matched by flat position."""
    shape = s.dst.shape
    out = None
    for x in s.reads:
        g = f.tile(x)
        if g is not None:
            g = g.reshape(shape)
            out = g if out is None else (out | g)
    return [out]


def _index_observed(ix: Any) -> None:
    """An index operand is observed: never-written elements in it are an error here (blamed on their
    computation when they hold computed garbage)."""
    if isinstance(ix, Tensor) and ix.st.uninit is not None:
        ix.check_written()


def _index_values(ix: Tensor) -> np.ndarray:
    return ix.read().astype(np.int64).reshape(ix.shape[0], -1)


def n_gather(s: Any, f: Flow) -> Masks:
    """``nc_n_gather``: ``dst[p, j] = data[p].flat[indices[p, j]]`` -- the gathered element's state; the
    indices are observed (a never-written index is an error)."""
    t, ix = s.reads
    _index_observed(ix)
    g = f.tile(t)
    if g is None:
        return [None]
    idx = _index_values(ix)
    gf = g.reshape(g.shape[0], -1)
    if idx.size and (idx.min() < 0 or idx.max() >= gf.shape[1]):
        return NO_RULE  # the numerics reports the bad index
    return [np.take_along_axis(gf, idx, axis=1).reshape(s.shape)]


def matmul_mx(s: Any, f: Flow) -> Masks:
    """``nc_matmul_mx``: ``out[i, j]`` is never-written when any element (or scale) of stationary column ``i``
    or moving column ``j`` is (the scales' columns follow the data's; of a scale tile only the scale partitions
    are read, :func:`devkit.sim.mx.scale_rows`; conservative over the partitions read)."""
    from devkit.sim.mx import scale_rows

    st, mv, ss, ms = s.reads
    mm, n = s.shape
    rows_i = cols_j = None
    for x, width, which, data in (
        (st, mm, "i", None),
        (ss, mm, "i", st),
        (mv, n, "j", None),
        (ms, n, "j", mv),
    ):
        g = f.tile(x)
        if g is None:
            continue
        if data is not None:  # a scale tile: only its scale partitions are read
            g = g.reshape(g.shape[0], -1)[scale_rows(data.shape[0])]
        a = g.reshape(-1, width).any(0)
        if which == "i":
            rows_i = a if rows_i is None else (rows_i | a)
        else:
            cols_j = a if cols_j is None else (cols_j | a)
    if rows_i is None and cols_j is None:
        return [None]
    out = np.zeros((mm, n), dtype=bool)
    if rows_i is not None:
        out |= rows_i[:, None]
    if cols_j is not None:
        out |= cols_j[None, :]
    return [out]


def quantize_mx(s: Any, f: Flow) -> Masks:
    """``quantize_mx``: each 8-partition x 4-value group of ``src`` gives one scale and, with it, the packed
    elements of its column: both are never-written when any element of the group is (``s.args``: the SBUF row
    of each group's scale)."""
    (src,) = s.reads
    g = f.tile(src)
    if g is None:
        return [None, None]
    p = src.shape[0]
    grp = g.reshape(p // 8, 8, -1, 4).any(axis=(1, 3))  # [P // 8, F]
    dst_g = np.repeat(grp, 8, axis=0)
    sc = s.also[0]
    sc_g = np.zeros((sc.shape[0], grp.shape[1]), dtype=bool)
    sc_g[s.args] = grp
    return [dst_g if dst_g.any() else None, sc_g if sc_g.any() else None]


def _register_rows(s: Any, f: Flow, engine: str) -> np.ndarray:
    """The never-written rows of ``engine``'s accumulator register (a copy, 128 rows); notes its taint."""
    regs = s.m.accumulators.get(ACC_GARBAGE)
    entry = None if regs is None else regs.get(engine)
    if entry is None:
        return np.zeros(128, dtype=bool)
    if f.held is None:
        f.held = entry[1]
    return entry[0].copy()


def _set_register(s: Any, f: Flow, engine: str, acc: np.ndarray) -> None:
    """Record ``acc`` (128 rows) as the never-written rows of ``engine``'s accumulator register."""
    regs = s.m.accumulators.get(ACC_GARBAGE)
    if acc.any():
        old = None if regs is None else regs.get(engine)
        held = f.taint() or (None if old is None else old[1])
        s.m.accumulators.setdefault(ACC_GARBAGE, {})[engine] = (acc, held)
    elif regs is not None:
        regs.pop(engine, None)
        if not regs:
            del s.m.accumulators[ACC_GARBAGE]


def _vector_fold(s: Any, f: Flow, rc: Any, res: np.ndarray | None, p: int) -> np.ndarray:
    """The VectorE register after a select/range-select reduction (``_vector_accumulate``'s commands: reset
    clears all rows, reduce folds in the row reductions of ``res``); its rows, 128."""
    rc = 0 if rc is None else int(rc)
    acc = _register_rows(s, f, "vector")
    if rc in (RESET, RESET_REDUCE):
        acc[:] = False
    if rc in (REDUCE, RESET_REDUCE) and res is not None:
        g = res if s.mask is None else res & s.mask
        acc[:p] |= g.reshape(p, -1).any(1)
    _set_register(s, f, "vector", acc)
    return acc


def select_reduce(s: Any, f: Flow) -> Masks:
    """``select_reduce``: ``dst = predicate ? on_true : on_false`` (:func:`_choose`), its rows reduced into the
    VectorE register by ``reduce_cmd``; ``reduce_res`` receives the register."""
    pr, ot, of = s.reads
    _rname, reverse, rcmd, reduce_res = s.args
    shape, p = s.shape, s.shape[0]
    g_c, g_t, g_f = f.operand(pr, shape, s.mask), f.operand(ot, shape, s.mask), f.operand(of, shape)
    pv = _values(pr, shape) != 0
    if reverse:
        pv = ~pv

    def same() -> np.ndarray:
        return _same(_values(ot, shape).astype(np.float32), _values(of, shape).astype(np.float32))

    out = _choose(g_c, pv, g_t, g_f, same)
    acc = _vector_fold(s, f, rcmd, out, p)
    masks: list[np.ndarray | None] = [out]
    if reduce_res is not None:
        masks.append(_on_rows(acc[:p], _aligned(reduce_res)))
    return masks


def range_select(s: Any, f: Flow) -> Masks:
    """``range_select``: ``on_true_tile`` where the free index lies in the per-partition range, else a scalar;
    a never-written bound makes its partition's results never-written unless the kept value equals the
    scalar (:func:`_choose`); rows reduced into the VectorE register by ``reduce_cmd``."""
    t, b0, b1 = s.reads
    c0, c1, _rname, range_start, on_false_value, rcmd, reduce_res = s.args
    shape, p = s.shape, s.shape[0]
    g_t = f.operand(t, shape, s.mask)
    g_b = any_of([f.operand(b, (p, 1)) for b in (b0, b1)], (p, 1))
    from devkit.nki._alu import ALU  # (the ALU table lives with the instructions)

    idx = (int(range_start) + np.arange(int(np.prod(shape[1:])), dtype=np.float32))[None, :]
    bv0 = _values(b0, (p, 1)).astype(np.float32)
    bv1 = _values(b1, (p, 1)).astype(np.float32)
    with np.errstate(all="ignore"):
        keep = ((ALU[c0](idx, bv0) != 0) & (ALU[c1](idx, bv1) != 0)).reshape(shape)
    g_c = None if g_b is None else np.broadcast_to(g_b, (p, keep.reshape(p, -1).shape[1])).reshape(shape)
    fv = np.float32(on_false_value)
    out = _choose(
        g_c, keep, g_t, None, lambda: _same(_values(t, shape).astype(np.float32), np.full(shape, fv))
    )
    acc = _vector_fold(s, f, rcmd, out, p)
    masks: list[np.ndarray | None] = [out]
    if reduce_res is not None:
        masks.append(_on_rows(acc[:p], _aligned(reduce_res)))
    return masks


def cumulative(s: Any, f: Flow) -> Masks:
    """``tensor_scalar_cumulative``: ``reg = op1(op0(src[i], imm0), reg); dst[i] = reg`` along the free axis per
    partition -- element ``i`` depends on elements ``0..i``, ``imm0`` and the register's start (kept, reset to
    the identity, or loaded from ``imm1``); the register ends holding the last column."""
    (t,) = s.reads
    _n0, _n1, i0, imm1, rcmd = s.args
    shape, p = s.shape, s.shape[0]
    rc = int(rcmd)
    acc = _register_rows(s, f, "vector")
    if rc == RESET_REDUCE:
        start = None
    elif rc == LOAD_REDUCE:
        gi = f.operand(imm1, (p, 1))
        start = None if gi is None else gi.reshape(p)
    else:
        start = acc[:p] if acc[:p].any() else None
    g = any_of([f.operand(t, shape), f.operand(i0, shape)], shape)
    if g is None and start is None:
        if acc[:p].any():
            acc[:p] = False
            _set_register(s, f, "vector", acc)
        return [None]
    g2 = np.zeros((p, int(np.prod(shape[1:]))), dtype=bool) if g is None else g.reshape(p, -1).copy()
    if start is not None:
        g2[:, 0] |= start
    out = np.logical_or.accumulate(g2, axis=1)
    acc[:p] = out[:, -1]
    _set_register(s, f, "vector", acc)
    return [out.reshape(s.dst.shape) if s.dst is not None else out.reshape(shape)]


def exponential(s: Any, f: Flow) -> Masks:
    """NKI 0.x ``exponential``: ``exp(src - max_value)`` element-wise; the row sums update the VectorE
    register by ``reduce_cmd`` (``load_reduce`` adds ``reduce_init``); ``reduce_res`` receives it."""
    t, mx = s.reads
    rc, reduce_init, rr = s.args
    rc = int(rc)
    shape, p = s.shape, s.shape[0]
    out = any_of([f.operand(x, shape) for x in (t, mx)], shape)
    r = None if out is None else out.reshape(p, -1).any(1)
    acc = _register_rows(s, f, "vector")
    if rc == RESET:
        acc[:p] = False
    elif rc == REDUCE and r is not None:
        acc[:p] |= r
    elif rc == RESET_REDUCE:
        acc[:p] = False if r is None else r
    elif rc == LOAD_REDUCE:
        gi = f.operand(reduce_init, (p, 1))
        acc[:p] = False if r is None else r
        if gi is not None:
            acc[:p] |= gi.reshape(p)
    _set_register(s, f, "vector", acc)
    masks: list[np.ndarray | None] = [out]
    if rr is not None:
        masks.append(_on_rows(acc[:p], _aligned(rr)))
    return masks


#: rules that read or write an accumulator register: they also run while a register holds never-written rows
ACCUMULATING: tuple[Rule, ...] = (
    activation,
    scalar_reduce,
    select_reduce,
    range_select,
    cumulative,
    exponential,
)
