"""Duration of one instruction on its engine, from the target's documented cost rules.

Compute engines (reference/nki_api.md sections 3 and 4.5; ``N`` = elements per partition streamed,
``MIN_II`` = ``<engine>.min_ii_cycles``):

========  ============================================================================================
TensorE   ``nc_matmul``: ``max(min(64, M_stationary), N_moving, M / LS_speedup)`` cycles, x4 for fp32
          operands (x2 with ``is_*_onezero``); ``nc_transpose``: ``max(P, min(64, F))``
VectorE   one streamed input ``max(MIN_II, N)``; two inputs ``max(MIN_II, 2N)`` unless one is in PSUM
          or the op is a bf16/fp16 SBUF add/subtract/multiply (``N``); ``tensor_reduce`` ``N/2`` for
          bf16 add/max; ``reciprocal`` ``8N``; ``bn_aggr`` ``13N/3``; ``memset`` ``N/2`` for a bf16/fp16
          zero (a memset of a PSUM tile is elided: the compiler folds the zero-initialisation of a
          matmul accumulator into the first matmul); ``tensor_scalar_reduce`` ``+ MIN_II``; dynamic
          copies ``max(600, N)``; trn2 performance mode divides by ``vector.perf_mode_factor_*``
ScalarE   ``max(MIN_II, N)``, ``+ MIN_II`` when the activation also writes its reduction out
GpSimd    ``150 + N`` (``150 + 2N`` for two inputs); ``topk`` ``4n + K``
DMA       per-engine busy time from :mod:`devkit.cost.dma_cost`
========  ============================================================================================

Opcodes without a specific rule get their engine's default (one streamed input) and are counted in
:attr:`CostModel.unknown_opcodes`, so tests can check that every opcode the simulator emits is
covered (:func:`covered_opcodes`).

Units: rules return engine cycles; :meth:`CostModel.duration_ns` returns ns.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

from devkit.cost.dma_cost import DMA_OPCODES, DmaCostModel
from devkit.cost.params import Params, default_params
from devkit.dtype_names import itemsize
from devkit.targets import Target, resolve_target
from devkit.trace import DMA, GPSIMD, PSUM, SBUF, SCALAR, TENSOR, VECTOR, Access, Instr

COMPUTE_ENGINES = (TENSOR, VECTOR, SCALAR, GPSIMD)

#: Two-byte float dtypes that get the VectorE fast paths (``tensor_reduce``, ``memset``, perf mode).
HALF_FLOATS = frozenset({"bfloat16", "float16"})


class _Consts:
    """Target numbers the rules read, flattened once per :class:`CostModel`."""

    __slots__ = (
        "bn_aggr",
        "dyn_copy_min",
        "fp32_factor",
        "fp32_onezero_factor",
        "g_start",
        "ls_speedup",
        "memset_div",
        "mm_min",
        "perf_contig",
        "perf_other",
        "recip",
        "reduce_div",
        "s_min_ii",
        "two_input",
        "v_min_ii",
    )

    def __init__(self, t: Target) -> None:
        self.mm_min = t.tensor.moving_min_cycles
        self.fp32_factor = t.tensor.fp32_cycle_factor
        self.fp32_onezero_factor = t.tensor.fp32_onezero_cycle_factor
        self.ls_speedup = t.tensor.load_stationary_speedup
        v = t.vector
        self.v_min_ii = v.min_ii_cycles
        self.two_input = v.two_input_factor
        self.recip = v.reciprocal_factor
        self.bn_aggr = v.bn_aggr_factor
        self.reduce_div = v.reduce_fast_divisor
        self.memset_div = v.memset_fast_divisor
        self.dyn_copy_min = v.dynamic_copy_min_cycles
        self.perf_contig = v.perf_mode_factor_contiguous
        self.perf_other = v.perf_mode_factor_other
        self.s_min_ii = t.scalar.min_ii_cycles
        self.g_start = t.gpsimd.start_cycles


Rule = Callable[[Instr, _Consts], float]

#: Returned by a rule for an instruction the compiler folds away: it takes no engine time and no
#: place in its engine's program order; dependants wait only for its own dependencies.
ELIDED = -1.0
_RULES: dict[str, dict[str, Rule]] = {TENSOR: {}, VECTOR: {}, SCALAR: {}, GPSIMD: {}}


def _rule(engine: str, *opcodes: str) -> Callable[[Rule], Rule]:
    def register(fn: Rule) -> Rule:
        for op in opcodes:
            _RULES[engine][op] = fn
        return fn

    return register


def _streamed(instr: Instr) -> int:
    """Elements per partition streamed: the largest input (outputs when there are no inputs)."""
    n = 0
    for acc in instr.ins or instr.outs:
        if acc.elems > n:
            n = acc.elems
    return n


def _attr(instr: Instr, key: str, default: object = None) -> object:
    return instr.attrs.get(key, default) if instr.attrs else default


def _all_half_float(accs: tuple[Access, ...]) -> bool:
    for a in accs:
        if a.dtype not in HALF_FLOATS:
            return False
    return True


def _any_psum(accs: tuple[Access, ...]) -> bool:
    for a in accs:
        if a.buffer == PSUM:
            return True
    return False


def _contiguous(accs: tuple[Access, ...]) -> bool:
    for a in accs:
        if a.run_bytes <= itemsize(a.dtype) and a.elems > 1:
            return False
    return True


def _perf_divisor(instr: Instr, k: _Consts, *, copy_like: bool) -> float:
    """trn2 VectorE performance mode [ARCH3]: 4x copy-like contiguous SBUF bf16/fp16, else 2x."""
    if k.perf_contig == 1 and k.perf_other == 1:
        return 1.0
    accs = instr.ins + instr.outs
    if not _all_half_float(accs):
        return 1.0
    in_psum = _any_psum(accs)
    if copy_like:
        if not in_psum and _contiguous(accs):
            return k.perf_contig
        return k.perf_other
    return 1.0 if in_psum else k.perf_other


# --- TensorE -------------------------------------------------------------------------------------


@_rule(TENSOR, "nc_matmul", "matmul")
def _matmul(instr: Instr, k: _Consts) -> float:
    attrs = instr.attrs
    ins = instr.ins
    m = n = None
    if attrs:
        m = attrs.get("stationary_free")
        n = attrs.get("moving_free")
    if m is None:
        m = ins[0].elems if ins else 128
    if n is None:
        n = ins[1].elems if len(ins) > 1 else (ins[0].elems if ins else 1)
    cycles = k.mm_min if m > k.mm_min else m
    if n > cycles:
        cycles = n
    if m / k.ls_speedup > cycles:
        cycles = m / k.ls_speedup
    if ins and (ins[0].dtype == "float32" or (len(ins) > 1 and ins[1].dtype == "float32")):
        onezero = attrs and (attrs.get("is_stationary_onezero") or attrs.get("is_moving_onezero"))
        cycles *= k.fp32_onezero_factor if onezero else k.fp32_factor
    return cycles


@_rule(TENSOR, "nc_transpose", "transpose")
def _pe_transpose(instr: Instr, k: _Consts) -> float:
    src = instr.ins[0] if instr.ins else instr.outs[0]
    return max(src.partitions, min(k.mm_min, src.elems))


# --- VectorE -------------------------------------------------------------------------------------


@_rule(VECTOR, "tensor_scalar", "tensor_copy", "copy")
def _v_copy_like(instr: Instr, k: _Consts) -> float:
    cycles = _streamed(instr) / _perf_divisor(instr, k, copy_like=True)
    return cycles if cycles > k.v_min_ii else k.v_min_ii


@_rule(
    VECTOR,
    "nc_transpose",
    "transpose",
    "tensor_copy_predicated",
    "dropout",
    "max8",
    "nc_find_index8",
    "nc_match_replace8",
    "nc_stream_shuffle",
    "bn_stats",
    "range_select",
    "select_reduce",
    "select",
    "tensor_scalar_cumulative",
    "rand",  # nisa.rng / rand2 on the VectorE: one element per partition per cycle (no published figure)
    "rand_state",
    "quantize_mx",  # NC-v4 streams 4 elements/partition/cycle [ARCH4]; not modelled yet (1 per cycle)
)
def _v_one_input(instr: Instr, k: _Consts) -> float:
    n = _streamed(instr)
    return n if n > k.v_min_ii else k.v_min_ii


@_rule(VECTOR, "tensor_tensor")
def _v_tensor_tensor(instr: Instr, k: _Consts) -> float:
    n = _streamed(instr)
    ins = instr.ins
    single_pass = _any_psum(ins) or (
        _attr(instr, "op") in ("add", "subtract", "multiply")
        and _all_half_float(ins)
        and all(a.buffer == SBUF for a in ins)
        and _contiguous(ins)
    )
    cycles = n if single_pass else k.two_input * n
    return max(k.v_min_ii, cycles / _perf_divisor(instr, k, copy_like=False))


@_rule(VECTOR, "scalar_tensor_tensor")
def _v_scalar_tensor_tensor(instr: Instr, k: _Consts) -> float:
    n = _streamed(instr)
    ops = {_attr(instr, "op0"), _attr(instr, "op1")}
    fast = ops == {"subtract", "multiply"} and _all_half_float(instr.ins) and n % 2 == 0
    return max(k.v_min_ii, n if fast else k.two_input * n)


@_rule(VECTOR, "tensor_reduce")
def _v_reduce(instr: Instr, k: _Consts) -> float:
    n = _streamed(instr)
    fast = _attr(instr, "op") in ("add", "max", "maximum") and _all_half_float(instr.ins + instr.outs)
    return max(k.v_min_ii, n / k.reduce_div if fast else n)


@_rule(VECTOR, "tensor_scalar_reduce")
def _v_scalar_reduce(instr: Instr, k: _Consts) -> float:
    return max(k.v_min_ii, _streamed(instr)) + k.v_min_ii


@_rule(VECTOR, "tensor_tensor_scan")
def _v_scan(instr: Instr, k: _Consts) -> float:
    return max(k.v_min_ii, k.two_input * _streamed(instr))


@_rule(VECTOR, "reciprocal")
def _v_reciprocal(instr: Instr, k: _Consts) -> float:
    return max(k.v_min_ii, k.recip * _streamed(instr))


@_rule(VECTOR, "bn_aggr")
def _v_bn_aggr(instr: Instr, k: _Consts) -> float:
    return max(k.v_min_ii, k.bn_aggr * _streamed(instr))


@_rule(VECTOR, "memset")
def _v_memset(instr: Instr, k: _Consts) -> float:
    if instr.outs and instr.outs[0].buffer == PSUM:
        # nl.zeros(buffer=psum) before `psum += matmul`: the compiler starts the accumulation group
        # with the matmul's accumulate flag cleared instead of issuing a memset [ARCH2, B1-ISA]
        return ELIDED
    n = _streamed(instr)
    fast = _attr(instr, "value", None) == 0 and _all_half_float(instr.outs)
    return max(k.v_min_ii, n / k.memset_div if fast else n)


@_rule(VECTOR, "tensor_copy_dynamic_src", "tensor_copy_dynamic_dst", "tensor_copy_dynamic")
def _v_dynamic_copy(instr: Instr, k: _Consts) -> float:
    return max(k.dyn_copy_min, _streamed(instr))


# --- ScalarE -------------------------------------------------------------------------------------


@_rule(SCALAR, "activation", "tensor_scalar", "tensor_copy", "copy")
def _s_activation(instr: Instr, k: _Consts) -> float:
    """The free-dimension reduction into the engine's accumulation registers costs nothing extra
    [B1-ISA activation: "without extra performance penalty"]; writing the reduced result out to a
    tile (a second output, as ``activation_reduce`` does) adds one accumulator read [B1-ISA
    activation_reduce: "a small additional performance cost"; ARCH2 ActReadAccumulator about 64
    ScalarE cycles = MIN_II]."""
    reads_accumulator = len(instr.outs) > 1
    return max(k.s_min_ii, _streamed(instr)) + (k.s_min_ii if reads_accumulator else 0)


@_rule(SCALAR, "activation_reduce")
def _s_activation_reduce(instr: Instr, k: _Consts) -> float:
    return max(k.s_min_ii, _streamed(instr)) + k.s_min_ii


# --- GpSimd --------------------------------------------------------------------------------------


@_rule(
    GPSIMD,
    "iota",
    "affine_select",
    "local_gather",
    "nonzero_with_count",
    "memset",
    "tensor_copy",
    "copy",
    "tensor_scalar",
    "tensor_partition_reduce",
    "tensor_copy_dynamic_src",
    "tensor_copy_dynamic_dst",
    "gather_flattened",
    "rand",
    "rand_state",
    "sequence_bounds",
)
def _g_one_input(instr: Instr, k: _Consts) -> float:
    """``150 + N`` [B1-ISA iota/affine_select/local_gather]; the general GpSimd rule of
    reference/nki_api.md s4.5 for the ops without a documented figure (partition reduce,
    gather_flattened, rand, sequence_bounds)."""
    return k.g_start + _streamed(instr)


@_rule(GPSIMD, "topk")
def _g_topk(instr: Instr, k: _Consts) -> float:
    """``4 n + K`` cycles per partition [N2-ISA topk: n active elements of the snake, K results]."""
    return 4 * float(_attr(instr, "n", _streamed(instr))) + float(_attr(instr, "k", 0))


@_rule(GPSIMD, "tensor_tensor")
def _g_two_inputs(instr: Instr, k: _Consts) -> float:
    return k.g_start + k.two_input * _streamed(instr)


_DEFAULTS: dict[str, Rule] = {
    TENSOR: lambda instr, k: max(k.mm_min, _streamed(instr)),
    VECTOR: _v_one_input,
    SCALAR: lambda instr, k: max(k.s_min_ii, _streamed(instr)),
    GPSIMD: _g_one_input,
}


def covered_opcodes() -> dict[str, frozenset[str]]:
    """Opcodes with a specific cost rule, per engine (DMA: every DMA opcode shares one mechanism)."""
    out = {engine: frozenset(rules) for engine, rules in _RULES.items()}
    out[DMA] = DMA_OPCODES
    return out


class CostModel:
    """Per-instruction durations for one target and parameter set.

    ``unknown_opcodes`` counts ``(engine, opcode)`` pairs that fell back to an engine default.
    """

    def __init__(self, target: str | Target, params: Params | None = None) -> None:
        self.target = resolve_target(target)
        self.params = params if params is not None else default_params(self.target.name)
        self.consts = _Consts(self.target)
        self.dma = DmaCostModel(self.target, self.params)
        self.unknown_opcodes: Counter[tuple[str, str]] = Counter()
        self._ns_per_cycle = {e: 1.0 / self.target.clock_ghz(e) for e in COMPUTE_ENGINES}

    def rule(self, engine: str, opcode: str) -> Rule:
        """The cycle rule for ``(engine, opcode)``; records and returns the default when unknown."""
        rules = _RULES.get(engine)
        if rules is None:
            valid = ", ".join((*COMPUTE_ENGINES, DMA))
            raise ValueError(f"unknown engine {engine!r}; valid engines: {valid}")
        fn = rules.get(opcode)
        if fn is None:
            self.unknown_opcodes[(engine, opcode)] += 1
            fn = _DEFAULTS[engine]
        return fn

    def cycles(self, instr: Instr) -> float:
        """Engine cycles of a compute instruction (0 for an elided one)."""
        cycles = self.rule(instr.engine, instr.opcode)(instr, self.consts)
        return 0.0 if cycles == ELIDED else cycles

    def duration_ns(self, instr: Instr) -> float:
        """Busy time of the instruction on its engine, in ns (for DMA: on each engine it uses)."""
        if instr.engine == DMA:
            if instr.opcode not in DMA_OPCODES:
                self.unknown_opcodes[(DMA, instr.opcode)] += 1
            return self.dma.timing(instr).engine_ns
        return self.cycles(instr) * self._ns_per_cycle[instr.engine]

    def ns_per_cycle(self, engine: str) -> float:
        """Length of one cycle of a compute engine, in ns."""
        return self._ns_per_cycle[engine]


def instr_duration_ns(instr: Instr, target: str | Target, params: Params | None = None) -> float:
    """Convenience: :meth:`CostModel.duration_ns` for one instruction."""
    return CostModel(target, params).duration_ns(instr)
