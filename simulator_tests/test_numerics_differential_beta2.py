"""Differential property tests for Beta 2 (``import nki``, NKI 0.x): every public ``nki.language`` and
``nki.isa`` operation, one op per ``@nki.jit`` kernel run with ``nki.simulate``, against the reference
written from the documentation (``_numerics_ref``), on drawn shapes, dtypes (fp8 e4m3/e5m2, bf16, fp16,
fp32, int8/16/32, uint8/16/32), special values (signed zeros, infinities, NaN payloads, subnormals,
rounding ties, integers beyond 2**24) and flags.

Sources: ``reference/nki_beta2.md`` by section ([B2 §3.7] convenience wrappers, [B2 §5] ISA tables, [B2
§9] name map); NKI 0.x renames most Beta-1 instructions (§9), so their arithmetic is the Beta-1
documents' ([B1-SH] shared dtype / ALU / activation tables, [B1-ISA], [DMAOV]).

Tolerances are those of the Beta-1 suite (``test_numerics_differential``): bit-exact where the documents
define one fp32 computation and one cast (copies compare bits, NaN payloads included; computed NaNs
match any NaN), a few ulps plus ``act_tolerance`` for approximated activations, the n-term fp32
summation bound where the order of additions is undocumented.  Where the documents read two ways the
test names the reading ("Reading:"); docs/simulator.md lists them.  Budget: ``DEVKIT_NUMERICS_EXAMPLES``
examples per test (default 8; the ``slow`` test reruns both modules with 150).  The selection, data
movement, creation, TensorE, MX, LNC-2 and register tests are in ``test_numerics_differential_beta2_data.py``;
the coverage test here counts both.
"""

from __future__ import annotations

import _numerics_ref as ref
import nki.isa as nisa
import nki.language as nl
import numpy as np
import pytest
from _numerics_beta2 import (
    EX,
    eng,
    engines,
    fp32_ulps,
    run_isa,
    run_nl,
)
from _numerics_checks import (
    REDUCTION_BOUNDS,
    assert_every_op_covered,
    check_bn_stats_and_aggr,
    check_nl_reduction,
    check_nl_unary,
    check_partition_reduce,
    check_rms_norm,
    check_softmax,
    check_tensor_scalar_reduce,
    sum_bound,
)
from _numerics_draw import (
    EPS32,
    SHARED_COVERAGE,
    SHARED_NON_OPS,
    TILE,
    act_tolerance,
    arrays,
    assert_activation,
    assert_close,
    assert_same,
    bitvec_operands,
    dtypes_any,
    dtypes_float,
    dtypes_int,
    parts,
    rerun_with_examples,
    tensor_scalar_operands,
)
from _numerics_ref import (
    F32,
    FLOATS,
    I32,
    INTS,
    U8,
    U32,
    activation,
    bitvec,
    cast,
    convert,
    promote,
    to_f32,
)
from hypothesis import given
from hypothesis import strategies as st

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

ACT, ALU32, VUNARY = ref.ACTIVATION_DEFS, ref.FP32_ALU, ref.VECTOR_UNARY
BOOL = ref.BOOL

import test_numerics_differential_beta2_data as data_tests  # noqa: E402

# ---- nl element-wise unary ------------------------------------------------------------------------------------

NL_ACTIVATIONS = sorted(n for n in ACT if n != "copy")
NL_UNARY = NL_ACTIVATIONS + sorted(VUNARY)


@pytest.mark.parametrize("name", NL_UNARY)
@EX
@given(**TILE, dtype=dtypes_any, out=st.one_of(st.none(), dtypes_any))
def test_nl_unary(name, data, p, f, dtype, out):
    """nl.<unary>(x, dtype=None) [B2 §3.7]: x read as fp32, the function, one rounding into ``dtype``
    (default the input dtype) [B1-SH]; exact for abs/sign/relu/square and the VectorE roundings,
    activations within ``act_tolerance``."""
    x = data.draw(arrays(dtype, (p, f)))
    fn = getattr(nl, name)
    got = run_nl(lambda t: fn(t, out), x)
    check_nl_unary(got, name, x, np.dtype(out or dtype))


@EX
@given(**TILE, dtype=dtypes_any)
def test_nl_logical_not_and_invert(data, p, f, dtype):
    """nl.logical_not: nonzero (NaN included) is true; nl.invert: bitwise NOT of an integer [B2 §3.7;
    B1-SH bitvec].  Reading: logical_not keeps Beta 1's bool result ("comparisons yield 1/0 in the input
    dtype" names comparisons only)."""
    x = data.draw(arrays(dtype, (p, f)))
    assert_same(run_nl(nl.logical_not, x), to_f32(x) == 0, "logical_not")
    if dtype in INTS:
        assert_same(run_nl(nl.invert, x), np.invert(x), "invert")


# ---- nl element-wise binary -------------------------------------------------------------------------------------

NL_COMPARE = ["equal", "not_equal", "less", "less_equal", "greater", "greater_equal"]
NL_LOGICAL = ["logical_and", "logical_or", "logical_xor"]
NL_ARITH = [
    "add",
    "subtract",
    "multiply",
    "divide",
    "maximum",
    "minimum",
    "fmod",
    "mod",
    "power",
    "abs_max",
    "abs_min",
]
NL_BITVEC = ["bitwise_and", "bitwise_or", "bitwise_xor", "left_shift", "right_shift"]


def binary_ref(op: str, x: np.ndarray, y: np.ndarray, od: np.dtype, integer_path: bool):
    """("exact", values) or ("approx", float64) for ``x op y`` written in ``od``: int32/uint32 native when
    every operand and the result are 32-bit integers on the integer path [B2 §5 tensor_tensor], else fp32
    math and one cast [B1-SH]."""
    if integer_path and op in ref.INT32_NATIVE and {x.dtype, y.dtype, od} <= {I32, U32}:
        return "exact", ref.int32_native(op, x, y, od)
    x32, y32 = to_f32(x), to_f32(y)
    with np.errstate(all="ignore"):
        if op == "power":
            return "approx", np.power(x32.astype(np.float64), y32.astype(np.float64))
        return "exact", cast({**ALU32, **ref.ABS_SELECT}[op](x32, y32), od)


@pytest.mark.parametrize("op", NL_ARITH + NL_COMPARE + NL_LOGICAL)
@EX
@given(**TILE, d1=dtypes_any, d2=dtypes_any, out=st.one_of(st.none(), dtypes_any))
def test_nl_binary(op, data, p, f, d1, d2, out):
    """nl.<op>(x, y, dtype=None) on equal shapes ("no broadcasting") [B2 §3.7]: fp32 operation, one cast;
    default dtype: the promoted type [B1-SH], and for comparisons "1/0 in the input dtype" (x's).
    Reading: logical_and/or/xor keep Beta 1's bool default (the note names comparisons).  Two 32-bit
    integer tiles add/subtract/multiply/max/min natively (the wrappers issue tensor_tensor).  abs_max /
    abs_min (0.4.0): the signed operand of larger / smaller magnitude, ties -> y, computed like the other
    fp32 ALU operators (reading: not an integer-exact select)."""
    x = data.draw(arrays(d1, (p, f)))
    y = data.draw(arrays(d2, (p, f)))
    got = run_nl(lambda a, b: getattr(nl, op)(a, b, out), x, y)
    default = d1 if op in NL_COMPARE else (BOOL if op in NL_LOGICAL else promote(d1, d2))
    od = np.dtype(out or default)
    kind, want = binary_ref(op, x, y, od, True)
    if kind == "exact":
        assert_same(got, want.astype(od), op)
    else:
        assert_close(got, want, od, n_ulp=4, slack=fp32_ulps(want, 4), what=op)


@pytest.mark.parametrize("op", NL_BITVEC)
@EX
@given(**TILE, d1=dtypes_int, d2=dtypes_int)
def test_nl_bitvec(op, data, p, f, d1, d2):
    """Bitvec wrappers act on bit patterns [B1-SH]; shifts are logical on the data operand's own bits
    (reading and shift range as in the Beta-1 suite)."""
    x, y, od = bitvec_operands(data, op, d1, d2, (p, f))
    assert_same(run_nl(getattr(nl, op), x, y), bitvec(op, x, y, od), op)


@EX
@given(**TILE, d1=dtypes_any, d2=dtypes_any, cd=st.sampled_from([U8, I32, F32]))
def test_nl_where(data, p, f, d1, d2, cd):
    """nl.where(cond, x, y, dtype=None): x where cond is nonzero ("cond holds 1.0/0.0") else y [B2
    §3.7]; a select moves values (reading as in Beta 1), result dtype promoted from x and y."""
    c = data.draw(arrays(cd, (p, f)))
    x = data.draw(arrays(d1, (p, f)))
    y = data.draw(arrays(d2, (p, f)))
    got = run_nl(lambda a, b, cc: nl.where(cc, a, b), x, y, c)
    od = promote(d1, d2)
    assert_same(got, np.where(to_f32(c) != 0, convert(x, od), convert(y, od)), "where")


# ---- nisa element-wise --------------------------------------------------------------------------------------------

ISA_TT = [
    *("add", "subtract", "multiply", "divide", "maximum", "minimum", "equal", "less", "logical_or", "power"),
    *("abs_max", "abs_min"),
]


@pytest.mark.parametrize("op", ISA_TT)
@EX
@given(**TILE, d1=dtypes_any, d2=dtypes_any, od=dtypes_any, engine=engines)
def test_nisa_tensor_tensor(op, data, p, f, d1, d2, od, engine):
    """nisa.tensor_tensor(dst, data1, data2, op, engine) [B2 §5]: fp32 arithmetic written in dst's dtype;
    "all-int32/uint32 operands -> GpSimd exact integer math (Vector if ... forced)"."""
    x = data.draw(arrays(d1, (p, f)))
    y = data.draw(arrays(d2, (p, f)))
    got = run_isa(
        lambda d, a, b: nisa.tensor_tensor(d, a, b, getattr(nl, op), engine=eng(engine)),
        [x, y],
        ((p, f), od),
    )
    kind, want = binary_ref(op, x, y, np.dtype(od), engine != "vector")
    if kind == "exact":
        assert_same(got, want, op)
    else:
        assert_close(got, want, od, n_ulp=4, slack=fp32_ulps(want, 4), what=op)


@EX
@given(
    **TILE,
    dtype=dtypes_any,
    od=dtypes_float,
    op0=st.sampled_from(["add", "multiply", "subtract", "maximum", "divide"]),
    op1=st.sampled_from([None, "add", "multiply", "minimum"]),
    rev=st.tuples(st.booleans(), st.booleans()),
    vec=st.booleans(),
)
def test_nisa_tensor_scalar(data, p, f, dtype, od, op0, op1, rev, vec):
    """nisa.tensor_scalar(dst, data, op0, operand0, reverse0, op1, operand1, reverse1) [B2 §5]:
    ``(data op0 a) op1 b`` in fp32 ("operands fp32 scalars or (P,1)"), one cast into dst.  Reading: the
    intermediate stays fp32."""
    x = data.draw(arrays(dtype, (p, f)))
    o0, o1 = tensor_scalar_operands(data, p, vec)
    kw = {"reverse0": rev[0]}
    if op1 is not None:
        kw.update(op1=getattr(nl, op1), operand1=float(o1), reverse1=rev[1])
    if vec:
        got = run_isa(
            lambda d, a, v: nisa.tensor_scalar(d, a, getattr(nl, op0), v, **kw), [x, o0], ((p, f), od)
        )
    else:
        got = run_isa(
            lambda d, a: nisa.tensor_scalar(d, a, getattr(nl, op0), float(o0), **kw), [x], ((p, f), od)
        )
    assert_same(got, cast(ref.tensor_scalar(to_f32(x), op0, o0, op1, o1, rev), od), "tensor_scalar")


@EX
@given(**TILE, dtype=dtypes_float, rev=st.tuples(st.booleans(), st.booleans()))
def test_nisa_scalar_tensor_tensor(data, p, f, dtype, rev):
    """nisa.scalar_tensor_tensor(dst, data, op0, operand0, op1, operand1): ``(data op0 scalar) op1 tile``
    in fp32, one cast [B2 §5]."""
    x = data.draw(arrays(dtype, (p, f)))
    y = data.draw(arrays(dtype, (p, f)))
    got = run_isa(
        lambda d, a, b: nisa.scalar_tensor_tensor(
            d, a, nl.subtract, 1.5, nl.multiply, b, reverse0=rev[0], reverse1=rev[1]
        ),
        [x, y],
        ((p, f), dtype),
    )
    want = ref.scalar_tensor_tensor(to_f32(x), "subtract", 1.5, "multiply", to_f32(y), rev)
    assert_same(got, cast(want, dtype), "scalar_tensor_tensor")


@EX
@given(**TILE, dtype=dtypes_float)
def test_nisa_tensor_tensor_scan(data, p, f, dtype):
    """nisa.tensor_tensor_scan: ``r[i] = op1(op0(d0[i], r[i-1]), d1[i])``, ``r[-1] = initial`` [B2 §5];
    fp32 running value, one cast per element."""
    x = data.draw(arrays(dtype, (p, f)))
    y = data.draw(arrays(dtype, (p, f)))
    got = run_isa(
        lambda d, a, b: nisa.tensor_tensor_scan(d, a, b, 0.5, nl.multiply, nl.add), [x, y], ((p, f), dtype)
    )
    want = ref.tensor_tensor_scan(to_f32(x), to_f32(y), 0.5, "multiply", "add")
    assert_same(got, cast(want, dtype), "tensor_tensor_scan")


@EX
@given(**TILE, dtype=dtypes_float, op1=st.sampled_from(["add", "maximum", "minimum"]))
def test_nisa_tensor_scalar_cumulative(data, p, f, dtype, op1):
    """nisa.tensor_scalar_cumulative(dst, src, op0, op1, imm0): ``reg = op1(op0(x, imm0), reg)`` per
    partition, starting from op1's identity with reset_reduce [B2 §5]; fp32 register, one cast each."""
    x = data.draw(arrays(dtype, (p, f)))
    got = run_isa(
        lambda d, a: nisa.tensor_scalar_cumulative(d, a, nl.multiply, getattr(nl, op1), 2.0),
        [x],
        ((p, f), dtype),
    )
    x32 = to_f32(x)
    acc = np.full(p, {"add": 0.0, "maximum": -np.inf, "minimum": np.inf}[op1], np.float32)
    r = np.empty_like(x32)
    with np.errstate(all="ignore"):
        for i in range(f):
            acc = ALU32[op1](x32[:, i] * np.float32(2), acc)
            r[:, i] = acc
    assert_same(got, cast(r, dtype), "tensor_scalar_cumulative")


@EX
@given(**TILE, dtype=dtypes_float, od=dtypes_float)
def test_nisa_reciprocal(data, p, f, dtype, od):
    """nisa.reciprocal(dst, data): 1/x in fp32 [B2 §5] (reading as in Beta 1: the IEEE quotient)."""
    x = data.draw(arrays(dtype, (p, f)))
    with np.errstate(all="ignore"):
        want = cast(np.float32(1) / to_f32(x), od)
    assert_same(run_isa(lambda d, a: nisa.reciprocal(d, a), [x], ((p, f), od)), want, "reciprocal")


# ---- ScalarE -------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(ACT))
@EX
@given(
    **TILE,
    dtype=dtypes_float,
    od=dtypes_float,
    scale=st.sampled_from([1.0, -0.5, 3.0, 0.0, "vector"]),
    with_bias=st.booleans(),
)
def test_nisa_activation(name, data, p, f, dtype, od, scale, with_bias):
    """nisa.activation(dst, op, data, bias, scale): ``op(data*scale + bias)`` in fp32, scale an fp32
    scalar or (P,1), bias (P,1) [B2 §5].  Reading: two fp32 roundings (no fused multiply-add)."""
    x = data.draw(arrays(dtype, (p, f)))
    ins = [x]
    sc = scale
    if scale == "vector":
        sc_arr = data.draw(arrays(F32, (p, 1), finite=True))
        ins.append(sc_arr)
    if with_bias:
        b = data.draw(arrays(F32, (p, 1), finite=True))
        ins.append(b)
    fn = getattr(nl, name)

    def op(d, a, *rest):
        rest = list(rest)
        s = rest.pop(0) if scale == "vector" else sc
        bias = rest.pop(0) if with_bias else None
        nisa.activation(d, fn, a, bias=bias, scale=s)

    got = run_isa(op, ins, ((p, f), od))
    with np.errstate(all="ignore"):
        z = to_f32(x) * (sc_arr if scale == "vector" else np.float32(scale))
        if with_bias:
            z = z + b
    assert_activation(got, name, z, od)


@EX
@given(**TILE, dtype=dtypes_float, name=st.sampled_from(["exp", "copy", "square"]))
def test_nisa_activation_reduce(data, p, f, dtype, name):
    """nisa.activation_reduce(dst, op, data, reduce_op=add, reduce_res): activation plus the free-axis sum
    of the fp32 activation results into reduce_res (P,1) [B2 §5]; summation order undocumented: n-term
    bound."""
    x = data.draw(arrays(dtype, (p, f), lo=2.0**-20, hi=2.0**20))
    o, red = run_isa(
        lambda d, r, a: nisa.activation_reduce(d, getattr(nl, name), a, reduce_op=nl.add, reduce_res=r),
        [x],
        ((p, f), dtype),
        ((p, 1), F32),
    )
    e = activation(name, to_f32(x))
    assert_activation(o, name, to_f32(x), dtype)
    with np.errstate(over="ignore", invalid="ignore"):
        s = e.sum(axis=1, keepdims=True)
    assert_close(red, s, F32, slack=sum_bound(e.astype(np.float32), (1,)), what="activation_reduce sum")


@EX
@given(**TILE, dtype=dtypes_float, with_sum=st.booleans())
def test_nisa_exponential(data, p, f, dtype, with_sum):
    """nisa.exponential(dst, src, max_value, reduce_res, reduce_cmd) (v4): ``exp(src - max)`` with an
    optional running sum [B2 §5].  Reading: the subtraction is one fp32 rounding and the sum the n-term
    bound; max_value is a (P,1) tile."""
    x = data.draw(arrays(dtype, (p, f), lo=2.0**-10, hi=2.0**6))
    mx = data.draw(arrays(F32, (p, 1), finite=True, lo=2.0**-10, hi=2.0**6))
    if with_sum:
        o, s = run_isa(
            lambda d, r, a, m: nisa.exponential(
                d, a, max_value=m, reduce_res=r, reduce_cmd=nisa.reduce_cmd.reset_reduce
            ),
            [x, mx],
            ((p, f), dtype),
            ((p, 1), F32),
        )
    else:
        o = run_isa(lambda d, a, m: nisa.exponential(d, a, max_value=m), [x, mx], ((p, f), dtype))
    with np.errstate(all="ignore"):
        z = to_f32(x) - mx
    w = activation("exp", z)
    assert_close(o, w, dtype, slack=act_tolerance("exp", z, w), what="exponential")
    if with_sum:
        with np.errstate(all="ignore"):
            assert_close(s, w.sum(axis=1, keepdims=True), F32, n_ulp=2 * f + 4, what="exponential sum")


# ---- reductions -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["sum", "prod", "max", "min", "mean", "var", "all"])
@EX
@given(**TILE, g=st.integers(1, 3), dtype=dtypes_any, keep=st.booleans())
def test_nl_reductions(name, data, p, f, g, dtype, keep):
    """nl.<reduction>(x, axis, dtype=None, keepdims=False), ``all(x, axis, dtype=None)`` [B2 §3.7]: fp32
    over trailing free axes; "mean via fp32"; "var always keeps dims".  Sums/means/variances within the
    n-term bound, max/min/all exact; value ranges as in the Beta-1 suite.  Reading: "var always keeps
    dims" gives (P, 1) when several free axes are reduced (they fold into one kept axis, as Beta 1's
    nl.var), not NumPy's (P, 1, 1)."""
    lo, hi = REDUCTION_BOUNDS.get(name, (None, None))
    x = data.draw(arrays(dtype, (p, f, g), lo=lo, hi=hi))
    fn = getattr(nl, name)
    if name in ("var", "all"):
        got = run_nl(lambda t: fn(t, [1, 2]), x)
    else:
        got = run_nl(lambda t: fn(t, [1, 2], None, keep), x)
    check_nl_reduction(got, name, x, keep and name not in ("var", "all"), dtype)


@pytest.mark.parametrize("op", ["add", "maximum", "multiply", "bitwise_or"])
@EX
@given(**TILE, dtype=dtypes_any, negate=st.booleans(), keep=st.booleans())
def test_nisa_tensor_reduce(op, data, p, f, dtype, negate, keep):
    """nisa.tensor_reduce(dst, op, data, axis, negate, keepdims): reduce trailing free axes, fp32, negated
    if asked ("negate arithmetic only"), one cast into dst [B2 §5]; bitvec ops reduce bit patterns."""
    if op == "bitwise_or":
        dtype, negate = (dtype if dtype in INTS else I32), False
    # magnitudes bounded where a partial result could overflow depending on the undocumented order
    lo, hi = {"multiply": (2.0**-8, 2.0**8), "add": (0.0, 2.0**100)}.get(op, (None, None))
    x = data.draw(arrays(dtype, (p, f), lo=lo, hi=hi))
    got = run_isa(
        lambda d, a: nisa.tensor_reduce(d, getattr(nl, op), a, axis=1, negate=negate, keepdims=keep),
        [x],
        ((p, 1), dtype),
    )
    if op == "bitwise_or":
        assert_same(got, np.bitwise_or.reduce(x, axis=1, keepdims=True), op)
        return
    x32 = to_f32(x)
    with np.errstate(all="ignore"):
        w = {
            "maximum": lambda: np.max(x32, axis=1, keepdims=True).astype(np.float64),
            "add": lambda: x32.astype(np.float64).sum(axis=1, keepdims=True),
            "multiply": lambda: x32.astype(np.float64).prod(axis=1, keepdims=True),
        }[op]()
        w = -w if negate else w
    if op == "maximum":
        assert_same(got, cast(w.astype(np.float32), dtype), op)
    else:
        slack = 2 * f * EPS32 * np.abs(w) if op == "multiply" else sum_bound(x32, (1,))
        assert_close(got, w, dtype, slack=slack, what=op)


@pytest.mark.parametrize("op", ["add", "maximum", "bitwise_and", "average"])
@EX
@given(**TILE, dtype=dtypes_any)
def test_nisa_tensor_partition_reduce(op, data, p, f, dtype):
    """nisa.tensor_partition_reduce(dst, op, data): reduce across partitions to (1, F): add, average, max,
    bitwise_or, bitwise_and [B2 §5]; sums and averages within the n-term bound."""
    if op == "bitwise_and" and dtype not in INTS:
        dtype = U32
    if op == "average" and dtype not in FLOATS:
        dtype = F32
    big = op in ("add", "average")  # a partial sum could overflow depending on the undocumented order
    x = data.draw(arrays(dtype, (p, f), lo=0.0 if big else None, hi=2.0**100 if big else None))
    got = run_isa(lambda d, a: nisa.tensor_partition_reduce(d, getattr(nl, op), a), [x], ((1, f), dtype))
    check_partition_reduce(got, op, x, dtype)


@EX
@given(**TILE, dtype=dtypes_float, red=st.sampled_from(["add", "maximum", "minimum"]))
def test_nisa_tensor_scalar_reduce(data, p, f, dtype, red):
    """nisa.tensor_scalar_reduce(dst, data, op0, operand0, reduce_op, reduce_res): ``dst = data op0 a``
    (fp32, cast) and reduce_res = the reduction of the fp32 results over all free dims [B2 §5]."""
    x = data.draw(arrays(dtype, (p, f)))
    o, rr = run_isa(
        lambda d, r, a: nisa.tensor_scalar_reduce(d, a, nl.multiply, -2.0, getattr(nl, red), reduce_res=r),
        [x],
        ((p, f), dtype),
        ((p, 1), F32),
    )
    check_tensor_scalar_reduce(o, rr, x, red, dtype)


@EX
@given(data=st.data(), p=parts, f=st.integers(1, 24), dtype=dtypes_float)
def test_nisa_bn_stats_and_bn_aggr(data, p, f, dtype):
    """nisa.bn_stats(dst, data): 6 values per partition (count, mean, var*count of the even- then the
    odd-index elements); bn_aggr(dst, data): (mean, population variance) [B2 §5]; finite moderate
    inputs, summation-order bounds."""
    x = data.draw(arrays(dtype, (p, f), finite=True, lo=0.0, hi=2.0**10))

    def op(s, mv, a):
        nisa.bn_stats(s, a)
        nisa.bn_aggr(mv, s)

    s, mv = run_isa(op, [x], ((p, 6), F32), ((p, 2), F32))
    check_bn_stats_and_aggr(s, mv, x)


@EX
@given(data=st.data(), p=parts, f=st.integers(8, 24), dtype=dtypes_float)
def test_nisa_max8_find_index8_match_replace8(data, p, f, dtype):
    """max8: 8 largest per partition, descending; nc_find_index8: first index of each (uint32);
    nc_match_replace8: first matches replaced with imm [B2 §5].  Reading: NaN left out (order undocumented)."""
    x = data.draw(arrays(dtype, (p, f), finite=True))

    def op(m8, idx, rep, a):
        nisa.max8(m8, a)
        nisa.nc_find_index8(idx, a, m8)
        nisa.nc_match_replace8(rep, a, m8, -1e30)

    m8, idx, rep = run_isa(op, [x], ((p, 8), dtype), ((p, 8), U32), ((p, f), dtype))
    x32 = to_f32(x)
    want = ref.max8(x32)
    assert_same(m8, cast(want, dtype), "max8")
    # "duplicates take successive matches ascending": the k-th equal value finds the k-th occurrence
    first = np.zeros((p, 8), np.uint32)
    for q in range(p):
        for j, v in enumerate(want[q]):
            first[q, j] = np.nonzero(x32[q] == v)[0][int((want[q][:j] == v).sum())]
    assert_same(idx, first, "nc_find_index8")
    assert_same(rep, cast(ref.match_replace8(x32, want), dtype), "nc_match_replace8")


# ---- fused helpers ----------------------------------------------------------------------------------------------


@EX
@given(**TILE, dtype=dtypes_float)
def test_nl_softmax(data, p, f, dtype):
    """nl.softmax(x, axis=-1, dtype=None) [B2 §3.7]: exp(x - max) / sum in fp32, cast once; finite inputs."""
    x = data.draw(arrays(dtype, (p, f), finite=True))
    check_softmax(run_nl(lambda t: nl.softmax(t, axis=1), x), x, dtype)


@EX
@given(**TILE, dtype=dtypes_float)
def test_nl_rms_norm(data, p, f, dtype):
    """nl.rms_norm(x, w, axis, n, epsilon=1e-6) [B2 §3.7]: x * rsqrt(sum(x^2)/n + eps) * w; moderate
    finite inputs."""
    x = data.draw(arrays(dtype, (p, f), finite=True, lo=0.0, hi=2.0**30))
    w = data.draw(arrays(dtype, (p, f), finite=True, lo=0.0, hi=2.0**30))
    check_rms_norm(run_nl(lambda t, ww: nl.rms_norm(t, ww, 1, f), x, w), x, w, dtype)


# ---- coverage: every public Beta-2 op has a property test ---------------------------------------------------------

#: Public callables of nki.language / nki.isa that are not operations on values, with the reason.
NON_OPS = {
    **SHARED_NON_OPS,
    # loops, control flow, programs and index construction: no values
    "range": "loop iterator",
    "dynamic_range": "loop iterator",
    "fori_loop": "loop driver (calls the body)",
    "no_reorder": "scheduling context manager",
    "program_id": "LNC query",
    "num_programs": "LNC query",
    "program_ndim": "LNC query",
    "get_nc_sub_version": "target query",
    "is_sbuf": "buffer query",
    "is_psum": "buffer query",
    "is_hbm": "buffer query",
    "is_on_chip": "buffer query",
    # allocation without values, debugging, RNG state, LNC synchronisation, helpers
    "random_seed": "RNG state",
    "register_alloc": "register allocation (values: test_nisa_register_load_and_store)",
    "core_barrier": "LNC-2 synchronisation (no values; test_beta2_api)",
    "user_location": "devkit error-location helper imported into nki.isa",
}

#: Public ops -> the test that drives them.
COVERED = {
    **SHARED_COVERAGE,
    **{n: "test_nl_unary" for n in NL_UNARY},
    "logical_not": "test_nl_logical_not_and_invert",
    "invert": "test_nl_logical_not_and_invert",
    **{n: "test_nl_binary" for n in NL_ARITH + NL_COMPARE + NL_LOGICAL},
    **{n: "test_nl_bitvec" for n in NL_BITVEC},
    "store": "test_data_movement",
    "gather_flattened": "test_gathers",
    "while_loop": "test_unsimulated_ops_refuse_cleanly",
    # nki.isa
    "exponential": "test_nisa_exponential",
    "reciprocal": "test_nisa_reciprocal",
    "dma_compute": "test_nisa_dma_compute",
    "nc_n_gather": "test_gathers",
    "nonzero_with_count": "test_nisa_nonzero_with_count",
    "quantize_mx": "test_nisa_quantize_mx_and_nc_matmul_mx",
    "nc_matmul_mx": "test_nisa_quantize_mx_and_nc_matmul_mx",
    "sendrecv": "test_nisa_sendrecv",
    "register_load": "test_nisa_register_load_and_store",
    "register_store": "test_nisa_register_load_and_store",
    "register_move": "test_nisa_register_load_and_store",
    "topk": "test_nisa_topk",
    "activate2": "test_nisa_activate2",
    "rng": "test_nisa_rng_family",
    "rand2": "test_nisa_rng_family",
    "set_rng_seed": "test_nisa_rng_family",
    "rand_set_state": "test_nisa_rng_family",
    "rand_get_state": "test_nisa_rng_family",
}


@pytest.mark.parametrize("module", [nl, nisa], ids=["nki.language", "nki.isa"])
def test_every_public_op_has_a_property_test(module):
    """Fails when a public Beta-2 nki.language / nki.isa callable has neither a property test here nor a
    reasoned NON_OPS entry (a new op needs a test: add it to COVERED with the test that drives it)."""
    tests = {n for n in (*globals(), *vars(data_tests)) if n.startswith("test_")}
    assert_every_op_covered(module, COVERED, NON_OPS, tests)


@pytest.mark.slow
def test_differential_suite_with_many_examples():
    """Both Beta-2 differential modules again with 150 examples per property (``pytest -m slow``)."""
    r = rerun_with_examples((__file__, data_tests.__file__))
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]
