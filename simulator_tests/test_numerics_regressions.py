"""Regression tests for the numerics of issue 21, one documented rule per test.

Each test states the rule it checks and where it is written down (source keys as in docs/simulator.md:
[B1-ISA] the Beta-1 ``nki.isa`` reference, [B1-NL] ``nki.language``, [B1-SH] the shared dtype / ALU /
activation tables, [DMAOV] the DMA overview, [N2-ISA] the NKI 0.x ``nki.isa`` reference).  The cases
are the ones the issue reports, plus their neighbours.
"""

from __future__ import annotations

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import numpy as np
import pytest
from _nki_support import BF16, FP8, FP8_E5, apply, dma_kernel, load_kernel

# ---- 2: same-dtype copies move bits unchanged -----------------------------------------------------------

#: NaN bit patterns with non-canonical payloads or signs, per format (the issue's cases first).
NAN_BITS = {
    BF16: [0xFFFF, 0x7FC1, 0xFF81, 0x7F81, 0xFFC0, 0x7FC0],
    FP8: [0x79, 0x7F, 0xFF, 0xFA, 0x7C],
    FP8_E5: [0x7D, 0x7F, 0xFE, 0xFD],
    np.dtype(np.float16): [0x7C01, 0xFE01, 0x7E00, 0xFFFF],
}


def _nan_array(dtype: np.dtype) -> np.ndarray:
    bits = np.array(NAN_BITS[dtype], dtype=np.dtype(f"u{dtype.itemsize}"))
    return bits.reshape(1, -1).view(dtype)


def _bits(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a).view(np.dtype(f"u{a.dtype.itemsize}"))


@nki.jit
def _dma_copy_kernel(x):
    t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=t)
    return out


@pytest.mark.parametrize("dtype", sorted(NAN_BITS, key=str), ids=str)
@pytest.mark.parametrize(
    "path",
    ["load_store", "dma_copy", "tensor_copy_vector", "tensor_copy_gpsimd", "nl_copy"],
)
def test_same_dtype_copies_keep_nan_payloads(dtype, path):
    """A copy without a dtype change moves bits unchanged: "Vector/GpSimd tensor_copy is bit-exact when
    the dtypes are equal" [B1-ISA tensor_copy]; DMA converts only "when the dtypes differ" [B1-ISA
    dma_copy, DMAOV].  So NaN payloads and signs of bf16/fp8/fp16 survive nl.load/nl.store, dma_copy,
    tensor_copy and nl.copy."""
    x = _nan_array(dtype)
    if path == "dma_copy":
        out = _dma_copy_kernel(x)
    else:
        fn = {
            "load_store": lambda t: t,
            "tensor_copy_vector": lambda t: nisa.tensor_copy(t, engine=nisa.vector_engine),
            "tensor_copy_gpsimd": lambda t: nisa.tensor_copy(t, engine=nisa.gpsimd_engine),
            "nl_copy": lambda t: nl.copy(t),
        }[path]
        out = apply(fn, x)
    assert out.dtype == dtype
    np.testing.assert_array_equal(_bits(out), _bits(x))


# ---- 5: int32 -> narrow float goes int -> fp32 -> target on every path -----------------------------------

#: int32 values whose direct rounding to bf16 differs from rounding through fp32 (double-rounding ties).
INT_TIES = np.array(
    [[2**24 + 2**16 + 1, -(2**24 + 2**16 + 1), 2**25 + 2**17 + 3, 2**30 + 2**22 + 65, 7]], np.int32
)


def _via_fp32(a: np.ndarray, dtype: np.dtype) -> np.ndarray:
    with np.errstate(over="ignore"):
        return a.astype(np.float32).astype(dtype)


@nki.jit
def _store_narrow_kernel(x, dtype):
    t = nl.load(x)
    out = nl.ndarray(x.shape, dtype=dtype, buffer=nl.shared_hbm)
    nl.store(out, value=t)
    return out


@pytest.mark.parametrize("dtype", [BF16, np.dtype(np.float16), FP8, FP8_E5], ids=str)
@pytest.mark.parametrize(
    "path",
    [
        "nl_store",
        "dma_copy",
        "nl_copy",
        "tensor_copy_vector",
        "tensor_copy_gpsimd",
        "tensor_copy_scalar",
        "nl_load",
        "activation_copy",
        "tensor_scalar_add0",
    ],
)
def test_int32_narrowing_goes_through_fp32(dtype, path):
    """A conversion from int32 to a narrow float is int -> fp32 -> target: engines "compute in fp32 and
    cast the output" [B1-SH, B1-ISA activation/tensor_scalar], DMA casting "goes src -> fp32 -> dst"
    [DMAOV, B1-ISA dma_copy], and tensor_copy with a dtype change converts "via fp32" [B1-ISA].  Every
    path therefore rounds twice: 2**24 + 2**16 + 1 becomes 16777216 in bf16, not 16908288."""
    x = INT_TIES
    if path == "nl_store":
        out = _store_narrow_kernel(x, dtype)
    elif path == "dma_copy":
        out = dma_kernel(x, dtype)
    else:
        fn = {
            "nl_copy": lambda t: nl.copy(t, dtype=dtype),
            "tensor_copy_vector": lambda t: nisa.tensor_copy(t, dtype=dtype, engine=nisa.vector_engine),
            "tensor_copy_gpsimd": lambda t: nisa.tensor_copy(t, dtype=dtype, engine=nisa.gpsimd_engine),
            "tensor_copy_scalar": lambda t: nisa.tensor_copy(t, dtype=dtype, engine=nisa.scalar_engine),
            "nl_load": None,  # nl.load(dtype=) is a kernel of its own (below)
            "activation_copy": lambda t: nisa.activation(nl.copy, t, dtype=dtype),
            "tensor_scalar_add0": lambda t: nisa.tensor_scalar(t, np.add, 0, dtype=dtype),
        }[path]
        out = load_kernel(x, dtype) if fn is None else apply(fn, x)
    want = _via_fp32(x, dtype)
    assert out.dtype == dtype
    np.testing.assert_array_equal(_bits(out), _bits(want))


def test_int32_to_bf16_tie_value():
    """The issue's number, stated outright: 2**24 + 2**16 + 1 -> fp32 16842752 -> bf16 16777216."""
    out = dma_kernel(np.array([[2**24 + 2**16 + 1]], np.int32), BF16)
    assert float(out[0, 0]) == 16777216.0


# ---- 4: nl.gather_flattened moves values exactly ---------------------------------------------------------


@pytest.mark.parametrize(
    "dtype", [np.dtype(np.int32), np.dtype(np.uint32), np.dtype(np.int16), BF16], ids=str
)
def test_gather_flattened_is_take_along_axis(dtype):
    """nl.gather_flattened is documented as equivalent to ``np.take_along_axis`` on the flattened free
    dims [B1-NL gather_flattened]: it moves values, so int32/uint32 values beyond 2**24 come back
    exactly (the issue's case: [[16777217, 123456789]] at [[1, 0]] -> [[123456789, 16777217]])."""
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        vals = [16777217, 123456789, int(info.max), int(info.min), 2**24 + 3]
        data = np.array([[v for v in vals if info.min <= v <= info.max] * 2], dtype=dtype)
    else:
        data = np.array([[1.5, -0.0, np.inf, 3.0, -7.25, 0.1]], np.float32).astype(dtype)
    idx = np.array([[1, 0, data.shape[1] - 1, 2]], np.int32)
    out = apply(lambda d, i: nl.gather_flattened(d, i), data, idx)
    want = np.take_along_axis(data, idx.astype(np.int64), axis=1)
    assert out.dtype == dtype
    np.testing.assert_array_equal(_bits(out), _bits(want))


# ---- 6: nl.full keeps the sign of zero -------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [np.dtype(np.float32), BF16, np.dtype(np.float16), FP8], ids=str)
@pytest.mark.parametrize("api", ["nl.full", "nisa.memset", "assign"])
def test_fill_with_negative_zero_keeps_the_sign(dtype, api):
    """``nl.full(shape, fill_value, dtype)`` fills with ``fill_value`` written in ``dtype`` [B1-NL]; -0.0
    is representable in every float format, so the tile holds -0.0 (sign bit set), as ``numpy.full``
    and ``nisa.memset`` [B1-ISA] do."""

    @nki.jit
    def k(x):
        if api == "nl.full":
            t = nl.full((2, 3), -0.0, dtype=dtype)
        elif api == "nisa.memset":
            t = nisa.memset((2, 3), -0.0, dtype)
        else:
            t = nl.ndarray((2, 3), dtype=dtype, buffer=nl.sbuf)
            t[...] = -0.0
        out = nl.ndarray((2, 3), dtype=dtype, buffer=nl.shared_hbm)
        nl.store(out, value=t)
        return out

    out = k(np.zeros((1, 1), np.float32))
    assert out.dtype == dtype
    np.testing.assert_array_equal(_bits(out), _bits(np.full((2, 3), -0.0, np.float32).astype(dtype)))


# ---- 3: activation functions at +-inf give their limits ---------------------------------------------------

#: (at -inf, at +inf) of each activation, from its definition.
LIMITS = {
    "silu": (0.0, np.inf),  # x * sigmoid(x)
    "silu_dx": (0.0, 1.0),  # sigmoid(x) * (1 + x * (1 - sigmoid(x)))
    "gelu": (0.0, np.inf),  # x * Phi(x)
    "gelu_dx": (0.0, 1.0),  # Phi(x) + x * phi(x)
    "gelu_apprx_tanh": (0.0, np.inf),
    "gelu_apprx_sigmoid": (0.0, np.inf),  # x * sigmoid(1.702 x)
    "mish": (0.0, np.inf),  # x * tanh(softplus(x))
}


@pytest.mark.parametrize("name", sorted(LIMITS))
@pytest.mark.parametrize("api", ["nl", "nisa.activation"])
def test_activation_limits_at_infinity(name, api):
    """The activation table gives [-inf, inf] as the valid input range of silu, silu_dx, gelu, gelu_dx,
    gelu_apprx_tanh, gelu_apprx_sigmoid and mish [B1-SH]; inside the valid range the output is the
    function's value, which at +-inf is its limit (0, inf or 1), never NaN (zeros compare equal
    whatever their sign: the table approximates these functions, so the sign of a zero limit is not
    a documented bit).  Finite inputs next to them stay finite."""
    x = np.array([[-np.inf, np.inf, -3.0, 3.0]], np.float32)
    fn = getattr(nl, name)
    op = (lambda t: fn(t)) if api == "nl" else (lambda t: nisa.activation(fn, t))
    out = apply(op, x)
    lo, hi = LIMITS[name]
    assert out[0, 0] == lo and out[0, 1] == hi, f"{name}(-inf, inf) = {out[0, :2]}"
    assert np.isfinite(out[0, 2:]).all()


# ---- 1: int32/uint32 add, subtract, multiply are exact (GpSimd native integer arithmetic) ----------------

I32 = np.dtype(np.int32)
U32 = np.dtype(np.uint32)


def _int_ref(op: str, a: np.ndarray, b: np.ndarray, out: np.dtype) -> np.ndarray:
    f = {
        "add": np.add,
        "subtract": np.subtract,
        "multiply": np.multiply,
        "max": np.maximum,
        "min": np.minimum,
    }[op]
    return f(a.astype(np.int64), b.astype(np.int64)).astype(out)  # exact, low 32 bits kept


def _int_cases(dtype: np.dtype) -> tuple[np.ndarray, np.ndarray]:
    info = np.iinfo(dtype)
    a = [
        16777217,
        2**30 + 1,
        int(info.max),
        int(info.min),
        123456789,
        2**31 - 1 if dtype == I32 else 2**32 - 1,
    ]
    b = [0, 3, 1, int(info.min) if dtype == I32 else 1, 987654321, 2]
    return np.array([a], dtype), np.array([b], dtype)


@pytest.mark.parametrize("dtype", [I32, U32], ids=str)
@pytest.mark.parametrize("op", ["add", "subtract", "multiply", "max", "min"])
@pytest.mark.parametrize("api", ["nisa.tensor_tensor", "nisa.tensor_tensor(gpsimd)", "nl"])
def test_int32_tensor_tensor_is_native_integer_arithmetic(dtype, op, api):
    """ "When all input/output tiles are int32 or uint32, the operation defaults to GpSimd Engine, which
    uses native integer arithmetic.  This ensures exact results for all 32-bit integer values"
    [N2-ISA tensor_tensor]; Beta 1: 32-bit integer add/multiply run on GpSimd [B1-SH].  The same ALU
    path serves nl.add/subtract/multiply/maximum/minimum on two int32 tiles.  Overflow is not
    documented for tiles; the kit's reading is two's-complement wrap-around (modulo 2**32), the
    documented behaviour of NKI's 32-bit scalars [N2-ISA NkiScalar].  The issue's cases:
    16777217 + 0 = 16777217 and (2**30 + 1) + 3 = 1073741828."""
    a, b = _int_cases(dtype)
    npop = {"max": np.maximum, "min": np.minimum}.get(op, getattr(np, op))
    if api == "nl":
        fn = getattr(nl, {"max": "maximum", "min": "minimum"}.get(op, op))
        out = apply(lambda x, y: fn(x, y), a, b)
    elif api == "nisa.tensor_tensor":
        out = apply(lambda x, y: nisa.tensor_tensor(x, y, npop), a, b)
    else:
        out = apply(lambda x, y: nisa.tensor_tensor(x, y, npop, engine=nisa.gpsimd_engine), a, b)
    assert out.dtype == dtype
    np.testing.assert_array_equal(out, _int_ref(op, a, b, dtype))


def test_int32_tensor_tensor_on_vector_engine_is_fp32():
    """``engine=nki.isa.engine.vector`` overrides the GpSimd default [N2-ISA tensor_tensor]: VectorE
    arithmetic operators "convert input elements into float32" [B1-SH], so 16777217 + 0 rounds to
    16777216 there.  (The integer path is the default, not the only path.)"""
    a = np.array([[16777217, 2**30 + 1]], I32)
    b = np.array([[0, 3]], I32)
    out = apply(lambda x, y: nisa.tensor_tensor(x, y, np.add, engine=nisa.vector_engine), a, b)
    np.testing.assert_array_equal(out, np.array([[16777216, 2**30]], I32))


def test_int32_augmented_add_is_exact():
    """``acc += x`` on int32 tiles is the same tensor_tensor add [B1-NL add]: exact, wrapping."""

    @nki.jit
    def k(a, b):
        acc = nl.load(a)
        acc += nl.load(b)
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        nl.store(out, value=acc)
        return out

    a, b = _int_cases(I32)
    np.testing.assert_array_equal(k(a, b), _int_ref("add", a, b, I32))


def test_tables_live_below_nl_and_nisa():
    """The ALU and activation tables have one home, devkit.nki._alu, which imports neither nl nor nisa
    (issue 15: no isa <-> language cycle for the shared tables); both modules expose the same objects."""
    import ast
    import inspect

    from devkit.nki import _alu, isa, language

    tree = ast.parse(inspect.getsource(_alu))
    imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)} | {
        a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names
    }
    assert not {"devkit.nki.isa", "devkit.nki.language", "devkit.nki"} & imported
    assert isa.ALU is _alu.ALU and isa.ACTIVATIONS is _alu.ACTIVATIONS is language.ACTIVATIONS
    top = [n for n in ast.parse(inspect.getsource(language)).body if isinstance(n, ast.ImportFrom)]
    assert all(n.module != "devkit.nki.isa" for n in top)


# ---- found by the differential suite ---------------------------------------------------------------------


def test_where_moves_values_exactly():
    """nl.where(c, x, y) selects: it moves values like a copy, so int32 beyond 2**24 and NaN payloads
    survive (reading, see docs/simulator.md: a select is not an fp32 arithmetic operator)."""
    x = np.array([[16777217, -(2**31), 123456789]], I32)
    y = np.array([[5, 6, 7]], I32)
    c = np.array([[1, 1, 0]], np.uint8)
    np.testing.assert_array_equal(
        apply(lambda a, b, cc: nl.where(cc, a, b), x, y, c), [[16777217, -(2**31), 7]]
    )


def test_left_shift_shifts_the_data_operands_own_bits():
    """Bitvec operators treat inputs "as bit patterns without any data type casting" [B1-ISA
    tensor_tensor]: like right_shift, left_shift shifts the data operand's own bits (int8 0x40 << 1 is
    int8 -128), whatever the shift operand's dtype."""
    x = np.array([[0x40, 1]], np.int8)
    s = np.array([[1, 7]], np.int16)
    np.testing.assert_array_equal(apply(lambda a, b: nl.left_shift(a, b), x, s), [[-128, -128]])


def test_uint32_with_small_signed_int_promotes_to_float32():
    """(int32, uint32) -> float32 [B1-SH]; uint32 with int8/int16 has no common NKI integer type either
    (NKI has no int64), so it promotes the same way instead of failing on an int64 result."""
    a = np.array([[3, -2]], np.int8)
    b = np.array([[4000000000, 1]], U32)
    out = apply(lambda x, y: nl.add(x, y), a, b)
    assert out.dtype == np.float32
    np.testing.assert_array_equal(out, np.array([[4000000003, -1]], np.float32))
