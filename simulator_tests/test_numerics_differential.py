"""Differential property tests: every public ``nl`` / ``nisa`` operation of Beta 1 against a reference
written from AWS's documentation (``_numerics_ref``), one op per kernel, on drawn shapes, dtypes (fp8
e4m3/e5m2, bf16, fp16, fp32, int8/16/32, uint8/16/32), special values (signed zeros, infinities, NaN
payloads, subnormals, rounding ties, integers beyond 2**24) and flags.

Tolerances, per kind of operation:

- **bit-exact** where the documents define one fp32 computation and one cast ("calculation done in
  FP32, output cast" [B1-SH]): copies and data movement (same bits, NaN payloads included), add,
  subtract, multiply, divide, max/min, comparisons, fmod/mod, abs/negative/floor/..., int32 native
  arithmetic, bitvec operators, conversions.  Any NaN matches any NaN for computed results (the
  documents say nothing about the payload an arithmetic NaN gets); copies compare bits.
- **a few ulps** where the hardware approximates ("approximated with piece-wise polynomials" [B1-SH]
  for activations, GpSimd ``power``): ``_numerics_ref.close_values`` (2 units in the last place of
  the output dtype, plus 64 fp32 epsilons of the size of the terms the definition combines; see
  ``_act_tolerance``).
- **summation-order bounds** where the order of fp32 additions is not documented (reductions, matmul,
  bn_stats, softmax, rms_norm): ``|error| <= n * eps32 * sum|terms|`` (the classical bound for any
  order of n-term fp32 summation) plus one ulp of the output dtype.

Where the documents read two ways the test names the reading it checks ("reading:"); the list is in
docs/simulator.md, section Numerics.  Budget: ``DEVKIT_NUMERICS_EXAMPLES`` examples per test (default
8; the ``slow`` test at the end reruns this module and ``test_numerics_movement.py``, the suite's data
movement, creation, TensorE and fused-helper half, with 150).
"""

from __future__ import annotations

import ast
import math
from pathlib import Path

import _numerics_ref as ref
import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import numpy as np
import pytest
from _nki_support import apply, bn_stats_kernel
from _numerics_checks import (
    REDUCTION_BOUNDS,
    assert_every_op_covered,
    check_bn_stats_and_aggr,
    check_nl_reduction,
    check_nl_unary,
    check_partition_reduce,
    check_tensor_scalar_reduce,
    sum_bound,
)
from _numerics_draw import (
    SHARED_COVERAGE,
    SHARED_NON_OPS,
    TILE,
    assert_activation,
    bitvec_operands,
    dtypes_any,
    dtypes_float,
    dtypes_int,
    frees,
    parts,
    rerun_with_examples,
    tensor_scalar_operands,
)
from _numerics_props import (
    ACT,
    ALU32,
    EPS32,
    EX,
    INT32_OPS,
    PRED_OPS,
    VUNARY,
    arrays,
    assert_bits,
    assert_close,
    assert_same,
    int32_ref,
)
from _numerics_ref import (
    BF16,
    BOOL,
    F16,
    F32,
    I32,
    INTS,
    U8,
    U32,
    activation,
    bitvec,
    cast,
    convert,
    promote,
    scalar_dtype,
    to_f32,
    ulp,
)
from hypothesis import given
from hypothesis import strategies as st

import devkit
from devkit.errors import UnsupportedError

# inputs deliberately include inf, NaN and extremes: the reference's NumPy warnings are expected
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")


# ---- element-wise unary ---------------------------------------------------------------------------------

NL_ACTIVATIONS = sorted(n for n in ACT if n not in ("copy",))
NL_UNARY = NL_ACTIVATIONS + sorted(VUNARY)


@pytest.mark.parametrize("name", NL_UNARY)
@EX
@given(**TILE, dtype=dtypes_any, out=st.one_of(st.none(), dtypes_any))
def test_nl_unary(name, data, p, f, dtype, out):
    """nl.<unary>(x, dtype=): the input read as fp32, the function, one rounding into ``dtype``
    (default: the input dtype) [B1-NL, B1-SH].  Exact for abs/sign/relu/square/negative/trunc/floor/
    ceil (one correctly rounded fp32 operation or none); activations within ``_act_tolerance``.
    Reading: out-of-range inputs (log of a negative, sin beyond pi ...) give the function's IEEE value
    (NaN, inf), not the "invalid output" the hardware may produce [B1-SH]."""
    x = data.draw(arrays(dtype, (p, f)))
    fn = getattr(nl, name)
    got = apply(lambda t: fn(t, dtype=out), x)
    check_nl_unary(got, name, x, np.dtype(out or dtype))


@EX
@given(**TILE, dtype=dtypes_any)
def test_nl_logical_not(data, p, f, dtype):
    """nl.logical_not: nonzero is true (NaN is nonzero), result bool [B1-NL]."""
    x = data.draw(arrays(dtype, (p, f)))
    assert_same(apply(nl.logical_not, x), to_f32(x) == 0, "logical_not")


@EX
@given(**TILE, dtype=dtypes_int)
def test_nl_invert(data, p, f, dtype):
    """nl.invert: bitwise NOT of the integer bit pattern [B1-SH bitvec]."""
    x = data.draw(arrays(dtype, (p, f)))
    assert_same(apply(nl.invert, x), np.invert(x), "invert")


@pytest.mark.parametrize("name", sorted(ACT))
@EX
@given(
    **TILE,
    dtype=dtypes_float,
    out=st.one_of(st.none(), dtypes_float),
    scale=st.sampled_from([1.0, -0.5, 3.0, 0.0]),
    with_bias=st.booleans(),
)
def test_nisa_activation(name, data, p, f, dtype, out, scale, with_bias):
    """nisa.activation: op(data * scale + bias) "all math in fp32, output cast to dtype" [B1-ISA].
    Reading: data*scale and +bias are two fp32 roundings (no fused multiply-add; undocumented)."""
    x = data.draw(arrays(dtype, (p, f)))
    with_bias = with_bias and name != "reciprocal"  # "no bias with reciprocal on NeuronCore-v2" [B1-SH]
    b = data.draw(arrays(F32, (p, 1), finite=True)) if with_bias else None
    fn = getattr(nl, name) if name != "copy" else nl.copy
    if with_bias:
        got = apply(lambda t, bt: nisa.activation(fn, t, bias=bt, scale=scale, dtype=out), x, b)
    else:
        got = apply(lambda t: nisa.activation(fn, t, scale=scale, dtype=out), x)
    with np.errstate(all="ignore"):
        z = to_f32(x) * np.float32(scale)
        if with_bias:
            z = z + b
    od = np.dtype(out or dtype)
    assert_activation(got, name, z, od)


@EX
@given(**TILE, dtype=dtypes_float)
def test_nisa_activation_reduce(data, p, f, dtype):
    """nisa.activation_reduce: also writes the free-axis add-reduction of the activation result
    (before the output cast) into reduce_res [B1-ISA]; summation order undocumented: n-term bound."""
    x = data.draw(arrays(dtype, (p, f), lo=2.0**-20, hi=2.0**20))

    @nki.jit
    def k(a):
        out = nl.ndarray((p, f), dtype=a.dtype, buffer=nl.shared_hbm)
        red = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.shared_hbm)
        rr = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
        r = nisa.activation_reduce(nl.exp, nl.load(a), reduce_op=np.add, reduce_res=rr)
        nl.store(out, value=r)
        nl.store(red, value=rr)
        return out, red

    o, red = k(x)
    e = activation("exp", to_f32(x))
    assert_close(o, e, dtype, what="activation_reduce out")
    with np.errstate(over="ignore", invalid="ignore"):
        s = e.sum(axis=1, keepdims=True)
    assert_close(red, s, F32, n_ulp=2 * f + 4, what="activation_reduce sum")


# ---- element-wise binary ----------------------------------------------------------------------------------

NL_BINARY = [*sorted(ALU32), "power"]
NL_BITVEC = ["bitwise_and", "bitwise_or", "bitwise_xor", "left_shift", "right_shift"]


def _binary_ref(op: str, x, y, od: np.dtype, two_tiles: bool):
    """The documented result of nl.<op>(x, y) with output dtype ``od`` (float64 for approximated)."""
    xd, yd = np.asarray(x).dtype, np.asarray(y).dtype
    if two_tiles and op in INT32_OPS and {xd, yd, od} <= {I32, U32}:
        return "exact", int32_ref(op, np.asarray(x), np.asarray(y), od)
    x32, y32 = to_f32(np.asarray(x)), to_f32(np.asarray(y))
    with np.errstate(all="ignore"):
        if op == "power":
            return "approx", np.power(x32.astype(np.float64), y32.astype(np.float64))
        return "exact", cast(ALU32[op](x32, y32), od)


@pytest.mark.parametrize("op", NL_BINARY)
@EX
@given(
    **TILE,
    d1=dtypes_any,
    d2=dtypes_any,
    form=st.sampled_from(["tile", "vector", "int", "float"]),
    out=st.one_of(st.none(), dtypes_any),
)
def test_nl_binary(op, data, p, f, d1, d2, form, out):
    """nl.<op>(x, y, dtype=): both read as fp32, one fp32 operation, one rounding into ``dtype``
    (default: the promoted type [B1-SH], bool for comparisons/logical [B1-NL]).  Two int32/uint32
    tiles with an int32/uint32 result add/subtract/multiply/max/min natively (exact, wrapping)
    [N2-ISA tensor_tensor].  Reading: a (P, 1) or scalar operand makes the op a tensor_scalar, which
    computes in fp32 even on int32 (only tensor_tensor is documented as integer)."""
    x = data.draw(arrays(d1, (p, f)))
    if form == "tile":
        y = data.draw(arrays(d2, (p, f)))
    elif form == "vector":
        y = data.draw(arrays(d2, (p, 1)))
    elif form == "int":
        y = data.draw(st.sampled_from([0, 1, -3, 2**24 + 1, 7]))
    else:
        y = data.draw(st.sampled_from([0.0, -0.0, 0.5, -2.25, math.inf, 1e30]))
    fn = getattr(nl, op)
    if isinstance(y, np.ndarray):
        got = apply(lambda a, b: fn(a, b, dtype=out), x, y)
        yd = y.dtype
    else:
        got = apply(lambda a: fn(a, y, dtype=out), x)
        yd = scalar_dtype(y)
    default = BOOL if op in PRED_OPS else promote(x.dtype, yd)
    od = np.dtype(out or default)
    yv = y if isinstance(y, np.ndarray) else np.array(y, dtype=yd if yd != I32 else np.int64)
    two_tiles = form == "tile" or (form == "vector" and f == 1)
    kind, want = _binary_ref(op, x, yv, od, two_tiles)
    if kind == "exact":
        assert_same(got, np.broadcast_to(want, got.shape).astype(od), op)
    else:
        assert_close(got, want, od, n_ulp=4, what=op)


@pytest.mark.parametrize("op", NL_BITVEC)
@EX
@given(**TILE, d1=dtypes_int, d2=dtypes_int)
def test_nl_bitvec(op, data, p, f, d1, d2):
    """Bitvec operators act on bit patterns [B1-SH]: and/or/xor on the operands widened by value to
    the promoted integer type; shifts are logical and, "without any data type casting" [B1-ISA
    tensor_tensor], shift the data operand's own bits, the result then taking the output dtype.
    Reading: shift amounts in [0, bits of the data type) (larger amounts are undocumented); pairs
    without a common integer type (int8 with uint32) are not bitvec cases."""
    x, y, od = bitvec_operands(data, op, d1, d2, (p, f))
    got = apply(getattr(nl, op), x, y)
    assert_same(got, bitvec(op, x, y, od), op)


@EX
@given(**TILE, d1=dtypes_any, d2=dtypes_any, cd=st.sampled_from([U8, I32, F32]))
def test_nl_where(data, p, f, d1, d2, cd):
    """nl.where(c, x, y): element-wise select; result dtype promoted from x and y [B1-NL].  Reading:
    select moves values like a copy (no fp32 round trip), so it is exact whenever the promoted type
    holds both operands."""
    c = data.draw(arrays(cd, (p, f)))
    x = data.draw(arrays(d1, (p, f)))
    y = data.draw(arrays(d2, (p, f)))
    got = apply(lambda a, b, cc: nl.where(cc, a, b), x, y, c)
    od = promote(d1, d2)
    want = np.where(to_f32(c) != 0, convert(x, od), convert(y, od))
    assert_same(got, want, "where")


# ---- nisa element-wise -------------------------------------------------------------------------------------

ISA_ARITH = ["add", "subtract", "multiply", "divide", "maximum", "minimum", "equal", "less", "logical_or"]


@pytest.mark.parametrize("op", ISA_ARITH)
@EX
@given(
    **TILE,
    d1=dtypes_any,
    d2=dtypes_any,
    engine=st.sampled_from(["default", "vector", "gpsimd"]),
    out=st.one_of(st.none(), dtypes_any),
)
def test_nisa_tensor_tensor(op, data, p, f, d1, d2, engine, out):
    """nisa.tensor_tensor: fp32 arithmetic, output cast; dtype default = the wider input [B1-ISA];
    int32/uint32 in and out: GpSimd native integer arithmetic unless ``engine=vector`` [N2-ISA]."""
    x = data.draw(arrays(d1, (p, f)))
    y = data.draw(arrays(d2, (p, f)))
    eng = {"default": nisa.unknown_engine, "vector": nisa.vector_engine, "gpsimd": nisa.gpsimd_engine}[engine]
    got = apply(lambda a, b: nisa.tensor_tensor(a, b, getattr(np, op), dtype=out, engine=eng), x, y)
    od = np.dtype(out or promote(d1, d2))
    _, want = _binary_ref(op, x, y, od, engine != "vector")
    assert_same(got, want, op)


@EX
@given(
    **TILE,
    dtype=dtypes_any,
    op0=st.sampled_from(["add", "multiply", "subtract", "maximum", "divide"]),
    op1=st.sampled_from([None, "add", "multiply", "minimum"]),
    rev=st.tuples(st.booleans(), st.booleans()),
    vec=st.booleans(),
    out=st.one_of(st.none(), dtypes_float),
)
def test_nisa_tensor_scalar(data, p, f, dtype, op0, op1, rev, vec, out):
    """nisa.tensor_scalar: (data op0 operand0) op1 operand1 in fp32, one cast at the end; reverseN
    swaps the operands of opN [B1-ISA].  Reading: the intermediate stays fp32 (not rounded to the
    output dtype between the two operators)."""
    x = data.draw(arrays(dtype, (p, f)))
    o0, o1 = tensor_scalar_operands(data, p, vec)
    kw = dict(reverse0=rev[0], dtype=out)
    if op1 is not None:
        kw.update(op1=getattr(np, op1), operand1=float(o1), reverse1=rev[1])
    if vec:
        got = apply(lambda a, v: nisa.tensor_scalar(a, getattr(np, op0), v, **kw), x, o0)
    else:
        got = apply(lambda a: nisa.tensor_scalar(a, getattr(np, op0), float(o0), **kw), x)
    want = ref.tensor_scalar(to_f32(x), op0, o0, op1, o1, rev)
    assert_same(got, cast(want, np.dtype(out or dtype)), "tensor_scalar")


@EX
@given(**TILE, dtype=dtypes_float, rev=st.tuples(st.booleans(), st.booleans()))
def test_nisa_scalar_tensor_tensor(data, p, f, dtype, rev):
    """nisa.scalar_tensor_tensor: (data op0 operand0) op1 operand1, fp32, one cast [B1-ISA]."""
    x = data.draw(arrays(dtype, (p, f)))
    y = data.draw(arrays(dtype, (p, f)))
    got = apply(
        lambda a, b: nisa.scalar_tensor_tensor(
            data=a,
            op0=np.subtract,
            operand0=1.5,
            op1=np.multiply,
            operand1=b,
            reverse0=rev[0],
            reverse1=rev[1],
        ),
        x,
        y,
    )
    want = ref.scalar_tensor_tensor(to_f32(x), "subtract", 1.5, "multiply", to_f32(y), rev)
    assert_same(got, cast(want, dtype), "scalar_tensor_tensor")


@EX
@given(**TILE, dtype=dtypes_float)
def test_nisa_tensor_tensor_scan(data, p, f, dtype):
    """nisa.tensor_tensor_scan: r[i] = op1(op0(d0[i], r[i-1]), d1[i]), r[-1] = initial, in fp32 [B1-ISA].
    Reading: the running value stays fp32 between steps; each output element is cast once."""
    x = data.draw(arrays(dtype, (p, f)))
    y = data.draw(arrays(dtype, (p, f)))
    got = apply(lambda a, b: nisa.tensor_tensor_scan(a, b, 0.5, np.multiply, np.add), x, y)
    want = ref.tensor_tensor_scan(to_f32(x), to_f32(y), 0.5, "multiply", "add")
    assert_same(got, cast(want, dtype), "tensor_tensor_scan")


@EX
@given(**TILE, dtype=dtypes_float)
def test_nisa_tensor_scalar_cumulative(data, p, f, dtype):
    """nisa.tensor_scalar_cumulative: reg = op1(op0(src[i], imm0), reg); dst[i] = reg, with
    reset_reduce starting from the identity of op1 [B1-ISA]; fp32 running value, one cast each."""
    x = data.draw(arrays(dtype, (p, f)))

    @nki.jit
    def k(a):
        out = nl.ndarray((p, f), dtype=a.dtype, buffer=nl.shared_hbm)
        d = nl.ndarray((p, f), dtype=a.dtype, buffer=nl.sbuf)
        nisa.tensor_scalar_cumulative(
            src=nl.load(a),
            dst=d,
            op0=np.multiply,
            op1=np.add,
            imm0=2.0,
            reduce_cmd=nisa.reduce_cmd.reset_reduce,
        )
        nl.store(out, value=d)
        return out

    got = k(x)
    x32 = to_f32(x)
    r = np.empty_like(x32)
    acc = np.zeros(p, np.float32)
    with np.errstate(all="ignore"):
        for i in range(f):
            acc = (x32[:, i] * np.float32(2)) + acc
            r[:, i] = acc
    assert_same(got, cast(r, dtype), "tensor_scalar_cumulative")


@EX
@given(**TILE, dtype=dtypes_float)
def test_nisa_reciprocal(data, p, f, dtype):
    """nisa.reciprocal: 1/x on VectorE "at a higher precision" than ScalarE [B1-SH]; the reference
    is the correctly rounded fp32 quotient (reading: VectorE's reciprocal is the IEEE division)."""
    x = data.draw(arrays(dtype, (p, f)))
    with np.errstate(all="ignore"):
        want = cast(np.float32(1) / to_f32(x), dtype)
    assert_same(apply(lambda t: nisa.reciprocal(t), x), want, "reciprocal")


# ---- reductions ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["sum", "prod", "max", "min", "mean", "var", "all"])
@EX
@given(**TILE, g=st.integers(1, 3), dtype=dtypes_any, keep=st.booleans())
def test_nl_reductions(name, data, p, f, g, dtype, keep):
    """nl.<reduction>(x, axis): fp32 arithmetic over free axes [B1-NL, B1-ISA tensor_reduce]; the
    order of the fp32 additions is not documented, so sums, means and variances are checked against
    the n-term summation bound; max/min/all exactly.  Reading: NaN propagates through max/min; prod
    is drawn from magnitudes in [2**-8, 2**8], sums and means up to 2**100, variances up to 2**20
    (whether a partial sum or product overflows depends on the order); inf and NaN stay in."""
    lo, hi = REDUCTION_BOUNDS.get(name, (None, None))
    x = data.draw(arrays(dtype, (p, f, g), lo=lo, hi=hi))
    fn = getattr(nl, name)
    kw = {} if name in ("var", "all") else {"keepdims": keep}
    got = apply(lambda t: fn(t, axis=[1, 2], **kw), x)
    check_nl_reduction(got, name, x, keep and name not in ("var", "all"), dtype)


_LOOP_IDENTITY = {"add": 0.0, "multiply": 1.0, "maximum": -np.inf, "minimum": np.inf}


def _loop_reduce_kernel(op: str):
    fn = getattr(np, op)

    @nki.jit
    def kernel(xs):
        n, p, f = xs.shape
        out = nl.ndarray((p, f), dtype=nl.float32, buffer=nl.shared_hbm)
        acc = nl.full((p, f), _LOOP_IDENTITY[op], dtype=nl.float32)
        for i in nl.affine_range(n):
            acc[...] = nl.loop_reduce(nl.load(xs[i]), op=fn, loop_indices=[i])
        nl.store(out, value=acc)
        return out

    return kernel


@pytest.mark.parametrize("op", sorted(_LOOP_IDENTITY))
@EX
@given(data=st.data(), n=st.integers(1, 4), p=parts, f=frees, dtype=dtypes_float)
def test_nl_loop_reduce(op, data, n, p, f, dtype):
    """``b[...] = nl.loop_reduce(x, op, loop_indices=[i])`` updates ``b`` in place as ``b = op(b, x)``
    every iteration [B1-NL], computed in fp32 into an fp32 ``b``.  Reading: the order in which affine
    iterations fold is undocumented (an associative reduction), so add/multiply are checked against
    the n-term bound (multiply drawn from magnitudes in [2**-8, 2**8]); maximum/minimum exactly, NaN
    propagating."""
    lo, hi = (2.0**-8, 2.0**8) if op == "multiply" else (0.0, 2.0**100)
    xs = data.draw(arrays(dtype, (n, p, f), lo=lo, hi=hi))
    got = devkit.simulate(_loop_reduce_kernel(op), xs)
    x32 = to_f32(xs).astype(np.float64)
    with np.errstate(all="ignore"):
        if op in ("maximum", "minimum"):
            want = getattr(np, op).reduce(to_f32(xs), axis=0)
            assert_same(got, cast(want, F32), op)
            return
        want = x32.sum(axis=0) if op == "add" else x32.prod(axis=0)
        slack = n * EPS32 * np.abs(x32).sum(axis=0) if op == "add" else 2 * n * EPS32 * np.abs(want)
    assert_close(got, want, F32, slack=slack, what=op)


@pytest.mark.parametrize("op", ["add", "max", "multiply", "bitwise_or"])
@EX
@given(**TILE, dtype=dtypes_any, negate=st.booleans(), keep=st.booleans())
def test_nisa_tensor_reduce(op, data, p, f, dtype, negate, keep):
    """nisa.tensor_reduce(op, data, axis, negate=, keepdims=): fp32 reduction, negated if asked,
    one cast [B1-ISA]; bitvec ops reduce the integer bit patterns (and take no negate)."""
    if op == "bitwise_or":
        dtype, negate = (dtype if dtype in INTS else I32), False
    x = data.draw(arrays(dtype, (p, f), lo=2.0**-8, hi=2.0**8) if op == "multiply" else arrays(dtype, (p, f)))
    got = apply(lambda t: nisa.tensor_reduce(getattr(np, op), t, axis=1, negate=negate, keepdims=keep), x)
    if op == "bitwise_or":
        want = np.bitwise_or.reduce(x, axis=1, keepdims=True)
        assert_same(got, want if keep else want.reshape(p, 1), op)
        return
    x32 = to_f32(x)
    with np.errstate(all="ignore"):
        if op == "max":
            w = np.max(x32, axis=1, keepdims=True).astype(np.float64)
        elif op == "add":
            w = x32.astype(np.float64).sum(axis=1, keepdims=True)
        else:
            w = x32.astype(np.float64).prod(axis=1, keepdims=True)
        w = -w if negate else w
    slack = 2 * f * EPS32 * np.abs(w) if op == "multiply" else sum_bound(x32, (1,))
    if op == "max":
        assert_same(got, cast(w.astype(np.float32), dtype).reshape(got.shape), op)
    else:
        assert_close(got, w.reshape(got.shape), dtype, slack=slack.reshape(got.shape), what=op)


@pytest.mark.parametrize("op", ["add", "max", "bitwise_and"])
@EX
@given(**TILE, dtype=dtypes_any)
def test_nisa_tensor_partition_reduce(op, data, p, f, dtype):
    """nisa.tensor_partition_reduce: reduce across partitions to (1, F) on GpSimd [B1-ISA]."""
    if op == "bitwise_and" and dtype not in INTS:
        dtype = U32
    x = data.draw(arrays(dtype, (p, f)))
    got = apply(lambda t: nisa.tensor_partition_reduce(getattr(np, op), t), x)
    check_partition_reduce(got, op, x, dtype)


@EX
@given(**TILE, dtype=dtypes_float, red=st.sampled_from(["add", "max", "min"]))
def test_nisa_tensor_scalar_reduce(data, p, f, dtype, red):
    """nisa.tensor_scalar_reduce: out = data op0 operand0 (fp32, cast) and reduce_res = reduce_op of
    the fp32 results over the free axis [B1-ISA]."""
    x = data.draw(arrays(dtype, (p, f)))

    @nki.jit
    def k(a):
        out = nl.ndarray((p, f), dtype=a.dtype, buffer=nl.shared_hbm)
        rr_h = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.shared_hbm)
        rr = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
        r = nisa.tensor_scalar_reduce(
            data=nl.load(a), op0=np.multiply, operand0=-2.0, reduce_op=getattr(np, red), reduce_res=rr
        )
        nl.store(out, value=r)
        nl.store(rr_h, value=rr)
        return out, rr_h

    o, rr = k(x)
    check_tensor_scalar_reduce(o, rr, x, red, dtype)


@EX
@given(data=st.data(), p=parts, f=st.integers(1, 24), dtype=dtypes_float)
def test_nisa_bn_stats_and_bn_aggr(data, p, f, dtype):
    """nisa.bn_stats: per partition (count, mean, count*variance) of the even and of the odd free
    elements; nisa.bn_aggr: (mean, variance) of all [B1-ISA].  Finite moderate inputs (the statistics
    of inf/NaN are undocumented); summation-order bounds."""
    x = data.draw(arrays(dtype, (p, f), finite=True, lo=0.0, hi=2.0**10))
    s, mv = bn_stats_kernel(x)
    check_bn_stats_and_aggr(s, mv, x)


@EX
@given(data=st.data(), p=parts, f=st.integers(8, 24), dtype=dtypes_float)
def test_nisa_max8_find_index8_match_replace8(data, p, f, dtype):
    """max8: the 8 largest values per partition, descending; nc_find_index8: index of the first
    occurrence of each; nc_match_replace8: replace those occurrences with imm [B1-ISA].  Reading:
    NaN inputs are left out (their order among the 8 is undocumented)."""
    x = data.draw(arrays(dtype, (p, f), finite=True))

    @nki.jit
    def k(a):
        m_h = nl.ndarray((p, 8), dtype=a.dtype, buffer=nl.shared_hbm)
        i_h = nl.ndarray((p, 8), dtype=nl.uint32, buffer=nl.shared_hbm)
        r_h = nl.ndarray((p, f), dtype=a.dtype, buffer=nl.shared_hbm)
        t = nl.load(a)
        m8 = nisa.max8(src=t)
        nl.store(m_h, value=m8)
        nl.store(i_h, value=nisa.nc_find_index8(data=t, vals=m8))
        nl.store(r_h, value=nisa.nc_match_replace8(data=t, vals=m8, imm=-1e30))
        return m_h, i_h, r_h

    m8, idx, rep = k(x)
    x32 = to_f32(x)
    want = ref.max8(x32)
    assert_same(m8, cast(want, dtype), "max8")
    first = np.array([[int(np.nonzero(x32[q] == v)[0][0]) for v in want[q]] for q in range(p)], np.uint32)
    assert_same(idx, first, "nc_find_index8")
    assert_same(rep, cast(ref.match_replace8(x32, want), dtype), "nc_match_replace8")


# ---- selection ----------------------------------------------------------------------------------------------


@EX
@given(**TILE, dtype=dtypes_float, fv=st.sampled_from([-9984.0, 0.0, -math.inf]))
def test_nisa_affine_select(data, p, f, dtype, fv):
    """nisa.affine_select(pred, on_true_tile, on_false_value): on_true where the affine predicate
    holds, else the fp32 on_false_value cast to the output dtype [B1-ISA]."""
    x = data.draw(arrays(dtype, (p, f)))

    @nki.jit
    def k(a):
        out = nl.ndarray((p, f), dtype=a.dtype, buffer=nl.shared_hbm)
        ix, iy = nl.mgrid[0:p, 0:f]
        t = nl.load(a)
        nl.store(out, value=nisa.affine_select(pred=(iy <= ix), on_true_tile=t[ix, iy], on_false_value=fv))
        return out

    ip, jf = np.arange(p)[:, None], np.arange(f)[None, :]
    assert_same(k(x), np.where(jf <= ip, x, cast(np.float32(fv), dtype)), "affine_select")


@EX
@given(**TILE, dtype=dtypes_float, start=st.integers(0, 20))
def test_nisa_range_select(data, p, f, dtype, start):
    """nisa.range_select (trn2): keep elements whose index (range_start + free index) satisfies
    comp_op0 bound0 and comp_op1 bound1, else on_false_value; max-reduce of the results [B1-ISA]."""
    x = data.draw(arrays(dtype, (p, f)))
    b0 = np.full((p, 1), start + 1, np.float32)
    b1 = np.full((p, 1), start + f - 1, np.float32)

    @nki.jit(platform_target="trn2")
    def k(a, lo, hi):
        out = nl.ndarray((p, f), dtype=a.dtype, buffer=nl.shared_hbm)
        r = nisa.range_select(
            on_true_tile=nl.load(a),
            comp_op0=np.greater_equal,
            comp_op1=np.less,
            bound0=nl.load(lo),
            bound1=nl.load(hi),
            range_start=start,
            on_false_value=-5.0,
        )
        nl.store(out, value=r)
        return out

    idx = start + np.arange(f)[None, :]
    keep = (idx >= b0) & (idx < b1)
    assert_same(k(x, b0, b1), np.where(keep, x, cast(np.float32(-5.0), dtype)), "range_select")


@EX
@given(**TILE, dtype=dtypes_float, reverse=st.booleans())
def test_nisa_select_reduce(data, p, f, dtype, reverse):
    """nisa.select_reduce: dst = predicate ? on_true : on_false (reverse_pred inverts) [B1-ISA]."""
    x = data.draw(arrays(dtype, (p, f)))
    pr = data.draw(arrays(U8, (p, f)))

    @nki.jit
    def k(a, prd):
        out = nl.ndarray((p, f), dtype=a.dtype, buffer=nl.shared_hbm)
        dst = nl.ndarray((p, f), dtype=a.dtype, buffer=nl.sbuf)
        nisa.select_reduce(
            dst=dst, predicate=nl.load(prd), on_true=nl.load(a), on_false=-3.0, reverse_pred=reverse
        )
        nl.store(out, value=dst)
        return out

    sel = (pr != 0) != reverse
    assert_same(k(x, pr), np.where(sel, x, cast(np.float32(-3.0), dtype)), "select_reduce")


@EX
@given(data=st.data(), n=st.integers(1, 24), dtype=st.sampled_from([I32, F32, BF16]))
def test_nisa_sequence_bounds(data, n, dtype):
    """nisa.sequence_bounds: per element, the start and end (exclusive) index of its segment of equal
    ids; id 0 is padding with bounds (n, -1) [B1-ISA, its documented example]."""
    ids = np.asarray(data.draw(st.lists(st.integers(0, 3), min_size=n, max_size=n)))
    s = ids.astype(dtype).reshape(1, n)
    want = convert(ref.sequence_bounds(ids)[None], dtype)
    assert_same(apply(lambda t: nisa.sequence_bounds(segment_ids=t), s), want, "sequence_bounds")


@EX
@given(**TILE, dtype=dtypes_any, rev=st.booleans())
def test_nisa_tensor_copy_predicated(data, p, f, dtype, rev):
    """nisa.tensor_copy_predicated: dst = src where predicate is nonzero (reverse_pred inverts), other
    elements of dst unchanged; a copy, so same-dtype values move bit for bit [B1-ISA]."""
    src = data.draw(arrays(dtype, (p, f)))
    old = data.draw(arrays(dtype, (p, f)))
    pr = data.draw(arrays(U8, (p, f)))

    @nki.jit
    def k(s, o, prd):
        out = nl.ndarray((p, f), dtype=s.dtype, buffer=nl.shared_hbm)
        d = nl.load(o)
        nisa.tensor_copy_predicated(src=nl.load(s), dst=d, predicate=nl.load(prd), reverse_pred=rev)
        nl.store(out, value=d)
        return out

    assert_bits(k(src, old, pr), np.where((pr != 0) != rev, src, old), "tensor_copy_predicated")


# ---- ops the simulator does not run ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "call",
    [
        lambda t: nl.all_reduce(t, np.add, program_axes=[0]),
        lambda t: nl.gemm_grid(t),
        lambda t: nl.gemm_stationary_grid(t),
        lambda t: nisa.builtin_custom_op(t),
    ],
    ids=["all_reduce", "gemm_grid", "gemm_stationary_grid", "builtin_custom_op"],
)
def test_unsimulated_ops_refuse_cleanly(call):
    """Collectives, custom ops and undocumented grids are not simulated: a clear UnsupportedError, not
    a wrong answer (house rule 2)."""
    with pytest.raises(UnsupportedError):
        apply(call, np.ones((2, 2), np.float32))


# ---- coverage: every public op has a property test ------------------------------------------------------------

#: Public callables of nl/nisa that are not operations on values, with the reason.
NON_OPS = {
    **SHARED_NON_OPS,
    # typing and helpers imported into the modules, not NKI API
    "ArrayLike": "numpy typing alias",
    "user_location": "devkit error-location helper",
    "reduce": "devkit helper behind nl.sum/max/...; covered through them",
    "matmul_core": "devkit helper behind nc_matmul / nl.matmul; covered through them",
    # loops, SPMD and index construction: no values
    "arange": "index expression",
    "program_id": "SPMD query",
    "num_programs": "SPMD query",
    "program_ndim": "SPMD query",
    # allocation without values, dtype information, debugging, RNG state
    "ndarray_like": "uninitialised allocation",
    "finfo": "dtype information",
    "random_seed": "RNG state (its effect is tested in test_isa_select)",
}

#: Public ops -> the test that drives them (coverage is checked by name, below).
COVERED = {
    **SHARED_COVERAGE,
    **{n: "test_nl_unary" for n in NL_UNARY},
    "logical_not": "test_nl_logical_not",
    "invert": "test_nl_invert",
    **{n: "test_nl_binary" for n in NL_BINARY},
    **{n: "test_nl_bitvec" for n in NL_BITVEC},
    "store": "test_nl_store_converts_through_fp32",
    "gather_flattened": "test_nl_gather_flattened",
    "atomic_rmw": "test_nl_atomic_rmw",
    "static_cast": "test_nl_static_cast",
    "all_reduce": "test_unsimulated_ops_refuse_cleanly",
    "loop_reduce": "test_nl_loop_reduce",
    "gemm_grid": "test_unsimulated_ops_refuse_cleanly",
    "gemm_stationary_grid": "test_unsimulated_ops_refuse_cleanly",
    "builtin_custom_op": "test_unsimulated_ops_refuse_cleanly",
    "reciprocal": "test_nl_unary",
    "tensor_copy_dynamic_src": "test_nisa_tensor_copy_dynamic",
    "tensor_copy_dynamic_dst": "test_nisa_tensor_copy_dynamic",
}
# nisa.reciprocal (VectorE) has its own test as well
COVERED_ISA_EXTRA = {"reciprocal": "test_nisa_reciprocal"}


#: The differential suite: this module and its continuation (data movement, creation, TensorE, fused).
SUITE = (Path(__file__), Path(__file__).with_name("test_numerics_movement.py"))


def _test_names(path: Path) -> set[str]:
    """Names of the test functions a module of the suite defines (read from its source)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {n.name for n in tree.body if isinstance(n, ast.FunctionDef) and n.name.startswith("test_")}


@pytest.mark.parametrize("module", [nl, nisa], ids=["nl", "nisa"])
def test_every_public_op_has_a_property_test(module):
    """Fails when a public nl/nisa callable has neither a property test here nor a reasoned entry in
    NON_OPS (a new op needs a test: add it to COVERED with the test that drives it)."""
    tests = {n for path in SUITE for n in _test_names(path)}
    assert_every_op_covered(module, COVERED, NON_OPS, tests, also=COVERED_ISA_EXTRA.values())


@pytest.mark.slow
def test_differential_suite_with_many_examples():
    """The whole suite again with 150 examples per property (``pytest -m slow``)."""
    r = rerun_with_examples(SUITE)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]


_ = (devkit, ulp, F16)
