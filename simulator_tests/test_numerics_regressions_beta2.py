"""Regression tests for the numerics of issue 21 in Beta 2 (``import nki``, NKI 0.x): the six cases of
``test_numerics_regressions.py`` through the dst-passing ``nki.isa`` forms and the ``nki.language``
wrappers.

Rules are cited from ``reference/nki_beta2.md`` by section (§3.7 convenience wrappers, §5 ISA tables,
§6 simulator behaviour, §9 name map) and, where NKI 0.x only renames a Beta-1 instruction, from the
Beta-1 documents as in the Beta-1 file ([B1-SH] shared dtype / ALU / activation tables, [B1-ISA],
[DMAOV] the DMA overview).
"""

from __future__ import annotations

import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np
import pytest
from _nki_support import BF16, FP8, FP8_E5
from _numerics_beta2 import dma_hbm_kernel, run_isa, run_nl

F16 = np.dtype(np.float16)
F32 = np.dtype(np.float32)
I32 = np.dtype(np.int32)
U32 = np.dtype(np.uint32)


def _bits(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a).view(np.dtype(f"u{a.dtype.itemsize}"))


# ---- 1: int32/uint32 tensor_tensor is exact integer arithmetic -------------------------------------------


def _int_cases(dtype: np.dtype) -> tuple[np.ndarray, np.ndarray]:
    info = np.iinfo(dtype)
    a = [16777217, 2**30 + 1, int(info.max), int(info.min), 123456789, 2**24 + 3]
    b = [0, 3, 1, int(info.min) if dtype == I32 else 1, 987654321, 2]
    return np.array([a], dtype), np.array([b], dtype)


_INT_OPS = {
    "add": np.add,
    "subtract": np.subtract,
    "multiply": np.multiply,
    "maximum": np.maximum,
    "minimum": np.minimum,
}


@pytest.mark.parametrize("dtype", [I32, U32], ids=str)
@pytest.mark.parametrize("op", sorted(_INT_OPS))
@pytest.mark.parametrize("api", ["nisa.tensor_tensor", "nisa.tensor_tensor(gpsimd)", "nl"])
def test_int32_tensor_tensor_is_exact(dtype, op, api):
    """§5 Vector Engine, ``tensor_tensor``: "all-int32/uint32 operands -> GpSimd exact integer math
    (Vector if PSUM involved or forced)"; the ``nl`` binary wrappers (§3.7) run the same ALU operation.
    Overflow wraps modulo 2**32 (the kit's reading, as in Beta 1).  The issue's cases:
    16777217 + 0 = 16777217, (2**30 + 1) + 3 = 1073741828."""
    a, b = _int_cases(dtype)
    if api == "nl":
        out = run_nl(lambda x, y: getattr(nl, op)(x, y), a, b)
    else:
        eng = {"nisa.tensor_tensor": nisa.engine.unknown, "nisa.tensor_tensor(gpsimd)": nisa.engine.gpsimd}[
            api
        ]
        out = run_isa(
            lambda d, x, y: nisa.tensor_tensor(d, x, y, getattr(nl, op), engine=eng), [a, b], (a.shape, dtype)
        )
    want = _INT_OPS[op](a.astype(np.int64), b.astype(np.int64)).astype(dtype)
    assert out.dtype == dtype
    np.testing.assert_array_equal(out, want)


def test_int32_tensor_tensor_forced_to_vector_is_fp32():
    """§5: the integer path is GpSimd's; "Vector if ... forced": VectorE arithmetic converts its inputs to
    fp32 [B1-SH], so 16777217 + 0 rounds to 16777216 there."""
    a = np.array([[16777217, 2**30 + 1]], I32)
    b = np.array([[0, 3]], I32)
    out = run_isa(
        lambda d, x, y: nisa.tensor_tensor(d, x, y, nl.add, engine=nisa.engine.vector), [a, b], (a.shape, I32)
    )
    np.testing.assert_array_equal(out, np.array([[16777216, 2**30]], I32))


# ---- 2: same-dtype copies move bits unchanged -------------------------------------------------------------

NAN_BITS = {
    BF16: [0xFFFF, 0x7FC1, 0xFF81, 0x7F81, 0xFFC0, 0x7FC0],
    FP8: [0x79, 0x7F, 0xFF, 0xFA, 0x7C],
    FP8_E5: [0x7D, 0x7F, 0xFE, 0xFD],
    F16: [0x7C01, 0xFE01, 0x7E00, 0xFFFF],
}

_COPY_PATHS = {
    "dma_copy": lambda d, x: nisa.dma_copy(dst=d, src=x),
    "tensor_copy": lambda d, x: nisa.tensor_copy(d, x),
    "tensor_copy(vector)": lambda d, x: nisa.tensor_copy(d, x, engine=nisa.engine.vector),
    "tensor_copy(gpsimd)": lambda d, x: nisa.tensor_copy(d, x, engine=nisa.engine.gpsimd),
    "tensor_copy(scalar)": lambda d, x: nisa.tensor_copy(d, x, engine=nisa.engine.scalar),
}


@pytest.mark.parametrize("dtype", sorted(NAN_BITS, key=str), ids=str)
@pytest.mark.parametrize("path", [*_COPY_PATHS, "nl.copy", "nl.load/nl.store"])
def test_same_dtype_copies_keep_nan_payloads(dtype, path):
    """§5 ``tensor_copy``: "bit-exact for equal dtypes, else via fp32" (V/S/G); ``dma_copy`` converts only
    when the dtypes differ [DMAOV]; §3.7 ``nl.copy`` (0.6.0): "VectorE copy, bit-exact for equal dtypes".
    So NaN payloads and signs of bf16/fp8/fp16 survive every same-dtype copy.  Reading: tensor_copy on
    ScalarE is named in the same sentence ("V/S/G; bit-exact for equal dtypes"), so it is bit-exact too
    (only v2 ScalarE is "always via fp32", and the kit's default Beta-2 target is v4)."""
    x = np.array([NAN_BITS[dtype]], np.dtype(f"u{dtype.itemsize}")).view(dtype)
    if path == "nl.copy":
        out = run_nl(lambda t: nl.copy(t), x)
    elif path == "nl.load/nl.store":
        out = nki.simulate(_load_store_kernel)(x)
    else:
        out = run_isa(_COPY_PATHS[path], [x], (x.shape, dtype))
    assert out.dtype == dtype
    np.testing.assert_array_equal(_bits(out), _bits(x))


@nki.jit
def _load_store_kernel(x):
    t = nl.load(x)
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nl.store(out, t)
    return out


# ---- 3: activation functions at +-inf give their limits ---------------------------------------------------

LIMITS = {
    "silu": (0.0, np.inf),
    "silu_dx": (0.0, 1.0),
    "gelu": (0.0, np.inf),
    "gelu_dx": (0.0, 1.0),
    "gelu_apprx_tanh": (0.0, np.inf),
    "gelu_apprx_sigmoid": (0.0, np.inf),
    "mish": (0.0, np.inf),
}


@pytest.mark.parametrize("name", sorted(LIMITS))
@pytest.mark.parametrize("api", ["nl", "nisa.activation", "nisa.activation_reduce"])
def test_activation_limits_at_infinity(name, api):
    """§5 ScalarE ``activation``: ``dst = op(data*scale + bias)`` in fp32, the op from the shared activation
    table, which gives [-inf, inf] as the valid input range of these functions [B1-SH]; at +-inf the
    output is the function's limit (0, inf or 1), never NaN.  Same for the §3.7 ``nl`` activation
    wrappers.  (Zeros compare equal whatever their sign, as in Beta 1.)"""
    x = np.array([[-np.inf, np.inf, -3.0, 3.0]], np.float32)
    fn = getattr(nl, name)
    if api == "nl":
        out = run_nl(lambda t: fn(t), x)
    elif api == "nisa.activation":
        out = run_isa(lambda d, t: nisa.activation(d, fn, t), [x], (x.shape, F32))
    else:

        def act_red(d, t):
            r = nl.ndarray((1, 1), dtype=nl.float32, buffer=nl.sbuf)
            nisa.activation_reduce(d, fn, t, reduce_op=nl.add, reduce_res=r)

        out = run_isa(act_red, [x], (x.shape, F32))
    lo, hi = LIMITS[name]
    assert out[0, 0] == lo and out[0, 1] == hi, f"{name}(-inf, inf) = {out[0, :2]}"
    assert np.isfinite(out[0, 2:]).all()


# ---- 4: gathers move values exactly -----------------------------------------------------------------------


def _gather_data(dtype: np.dtype) -> np.ndarray:
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        vals = [16777217, 123456789, int(info.max), int(info.min), 2**24 + 3]
        return np.array([[v for v in vals if info.min <= v <= info.max] * 2], dtype=dtype)
    b = {BF16: [0x3FC0, 0x8000, 0x7F80, 0xFFFF, 0x7FC1, 0x0001]}.get(dtype)
    return np.array([b], np.uint16).view(dtype)


@pytest.mark.parametrize("dtype", [I32, U32, np.dtype(np.int16), BF16], ids=str)
@pytest.mark.parametrize("api", ["nisa.nc_n_gather", "nl.gather_flattened"])
def test_gathers_move_values_exactly(dtype, api):
    """§9: Beta 1's ``gather_flattened`` is ``nc_n_gather`` in NKI 0.x; §5 GpSimd ``nc_n_gather``:
    "per-partition gather by uint32 flat free index" and §3.7 keeps ``nl.gather_flattened``.  Both move
    values (``np.take_along_axis`` on the flattened free dims [B1-NL]), so int32/uint32 beyond 2**24 and
    bf16 NaN payloads come back unchanged (the issue's case: [[16777217, 123456789]] at [[1, 0]] ->
    [[123456789, 16777217]])."""
    data = _gather_data(dtype)
    idx = np.array([[1, 0, data.shape[1] - 1, 2, 3]], np.uint32)
    if api == "nl.gather_flattened":
        out = run_nl(lambda d, i: nl.gather_flattened(d, i), data, idx.astype(np.int32))
    else:
        out = run_isa(lambda dst, d, i: nisa.nc_n_gather(dst, d, i), [data, idx], (idx.shape, dtype))
    want = np.take_along_axis(data, idx.astype(np.int64), axis=1)
    assert out.dtype == dtype
    np.testing.assert_array_equal(_bits(out), _bits(want))


# ---- 5: int32 -> narrow float goes int -> fp32 -> target ---------------------------------------------------

INT_TIES = np.array(
    [[2**24 + 2**16 + 1, -(2**24 + 2**16 + 1), 2**25 + 2**17 + 3, 2**30 + 2**22 + 65, 7]], np.int32
)

_NARROW_PATHS = {
    **{k: v for k, v in _COPY_PATHS.items() if k != "tensor_copy(scalar)"},
    "tensor_copy(scalar)": lambda d, x: nisa.tensor_copy(d, x, engine=nisa.engine.scalar),
    "activation(copy)": lambda d, x: nisa.activation(d, nl.copy, x),
    "tensor_scalar(add 0)": lambda d, x: nisa.tensor_scalar(d, x, nl.add, 0.0),
}


@pytest.mark.parametrize("dtype", [BF16, F16, FP8, FP8_E5], ids=str)
@pytest.mark.parametrize("path", [*_NARROW_PATHS, "nl.copy(dtype=)", "nl.load(dtype=)", "dma_copy(hbm->hbm)"])
def test_int32_narrowing_goes_through_fp32(dtype, path):
    """§5 ``tensor_copy``: with different dtypes the copy goes "via fp32"; ``activation`` and
    ``tensor_scalar`` compute in fp32 and cast the output; DMA casting goes src -> fp32 -> dst [DMAOV].
    So every path rounds int32 -> fp32 -> target: 2**24 + 2**16 + 1 becomes 16777216 in bf16, not
    16908288."""
    x = INT_TIES
    if path == "nl.copy(dtype=)":
        out = run_nl(lambda t: nl.copy(t, dtype=dtype), x)
    elif path == "nl.load(dtype=)":
        out = nki.simulate(_load_dtype_kernel)(x, dtype)
    elif path == "dma_copy(hbm->hbm)":
        out = nki.simulate(dma_hbm_kernel)(x, dtype)
    else:
        out = run_isa(_NARROW_PATHS[path], [x], (x.shape, dtype))
    with np.errstate(over="ignore"):
        want = x.astype(np.float32).astype(dtype)
    assert out.dtype == dtype
    np.testing.assert_array_equal(_bits(out), _bits(want))


@nki.jit
def _load_dtype_kernel(x, dtype):
    t = nl.load(x, dtype=dtype)
    out = nl.ndarray(x.shape, dtype=dtype, buffer=nl.shared_hbm)
    nl.store(out, t)
    return out


# ---- 6: fills keep the sign of zero -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "api, dtype",
    [(a, d) for a in ("nisa.memset", "nl.full") for d in (F32, BF16, F16, FP8, FP8_E5)]
    + [("nl.full(psum)", F32)],
    ids=str,
)
def test_fill_with_negative_zero_keeps_the_sign(api, dtype):
    """§5 ``memset(dst, value)`` fills dst with value, and §3.3 ``full(shape, fill_value, dtype)`` is a
    "filled tensor"; -0.0 is representable in every float format, so the tile holds -0.0 (sign bit set),
    as ``numpy.full`` does."""

    @nki.jit
    def k(x):
        if api == "nisa.memset":
            t = nl.ndarray((2, 3), dtype=dtype, buffer=nl.sbuf)
            nisa.memset(t, -0.0)
        else:
            buf = nl.psum if api == "nl.full(psum)" else nl.sbuf
            t = nl.full((2, 3), -0.0, dtype=dtype, buffer=buf)
        s = nl.ndarray((2, 3), dtype=dtype, buffer=nl.sbuf)
        nisa.tensor_copy(s, t)
        out = nl.ndarray((2, 3), dtype=dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=s)
        return out

    out = nki.simulate(k)(np.zeros((1, 1), np.float32))
    assert out.dtype == dtype
    np.testing.assert_array_equal(_bits(out), _bits(np.full((2, 3), -0.0, np.float32).astype(dtype)))
