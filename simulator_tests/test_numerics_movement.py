"""Differential property tests, continued from ``test_numerics_differential.py`` (whose docstring gives
the references and tolerances): data movement and conversion, tensor creation, TensorE matmul and the
fused helpers of ``nl``, each against ``_numerics_ref`` on drawn shapes, dtypes and special values."""

from __future__ import annotations

import _numerics_ref as ref
import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import numpy as np
import pytest
from _nki_support import apply, dma_kernel, load_kernel, stream_shuffle_kernel
from _numerics_checks import check_matmul, check_rms_norm, check_softmax
from _numerics_draw import (
    EXAMPLES,
    MATMUL,
    MOVE_TILE,
    TILE,
    dtypes_any,
    dtypes_float,
    frees,
    matmul_operands,
    parts,
)
from _numerics_props import (
    EX,
    arrays,
    assert_bits,
    assert_same,
)
from _numerics_ref import (
    BF16,
    F16,
    F32,
    FP8,
    FP8_E5,
    INTS,
    cast,
    convert,
    to_f32,
)
from hypothesis import given, settings
from hypothesis import strategies as st

# inputs deliberately include inf, NaN and extremes: the reference's NumPy warnings are expected
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")


# ---- data movement and conversion ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "path",
    [
        "load",
        "load_transpose2d",
        "copy",
        "tensor_copy",
        "dma_copy",
        "dma_transpose",
        "nc_transpose",
        "transpose",
    ],
)
@EX
@given(
    **MOVE_TILE,
    dtype=dtypes_any,
    out=st.one_of(st.none(), dtypes_any),
)
def test_data_movement(path, data, p, f, dtype, out):
    """Copies and transposes move values: bit for bit without a dtype change (NaN payloads
    included), src -> fp32 -> dst with one (DMAOV) [B1-ISA tensor_copy, dma_copy; B1-NL load/copy].
    Transposes permute the same values [B1-ISA nc_transpose, dma_transpose; B1-NL transpose].
    Reading: the NeuronCore-v2 TensorE transpose is documented as not bit-exact for NaN/inf [ARCH3];
    the simulator keeps it exact, and this test checks that."""
    x = data.draw(arrays(dtype, (p, f)))
    if path in ("nc_transpose", "transpose", "dma_transpose") and dtype in INTS and path != "dma_transpose":
        dtype = F32
        x = data.draw(arrays(dtype, (p, f)))
    want = x
    if path == "load":
        got = load_kernel(x, out)
    elif path == "load_transpose2d":
        got = load_kernel(x, out, transpose=True)
        want = x.T
    elif path == "copy":
        got = apply(lambda t: nl.copy(t, dtype=out), x)
    elif path == "tensor_copy":
        got = apply(lambda t: nisa.tensor_copy(t, dtype=out), x)
    elif path == "dma_copy":
        got = dma_kernel(x, out)
    elif path == "dma_transpose":
        got = apply(lambda t: nisa.dma_transpose(t, dtype=out), x)
        want = x.T
    elif path == "nc_transpose":
        got = apply(lambda t: nisa.nc_transpose(t, engine=nisa.vector_engine, dtype=out), x[:8, :8])
        want = x[:8, :8].T
    else:
        got = apply(lambda t: nl.transpose(t, dtype=out), x)
        want = x.T
    od = np.dtype(out or dtype)
    check = assert_bits if od == dtype else assert_same  # a converted NaN's payload is undocumented
    check(got, convert(np.ascontiguousarray(want), od), path)


@EX
@given(data=st.data(), p=st.integers(1, 16), f=frees, d1=dtypes_any, d2=dtypes_any)
def test_nl_store_converts_through_fp32(data, p, f, d1, d2):
    """nl.store into a tensor of another dtype converts src -> fp32 -> dst [DMAOV]; of the same dtype
    it moves bits [B1-NL store]."""
    x = data.draw(arrays(d1, (p, f)))

    @nki.jit
    def k(a):
        out = nl.ndarray((p, f), dtype=d2, buffer=nl.shared_hbm)
        nl.store(out, value=nl.load(a))
        return out

    check = assert_bits if d1 == d2 else assert_same  # a converted NaN's payload is undocumented
    check(k(x), convert(x, d2), "store")


@EX
@given(data=st.data(), p=st.integers(1, 16), f=frees, dtype=dtypes_any)
def test_nl_broadcast_to_and_expand_dims(data, p, f, dtype):
    """nl.broadcast_to(src, shape=) repeats the (P, 1) column along the free dim; nl.expand_dims adds
    a size-1 axis; both move values unchanged [B1-NL]."""
    x = data.draw(arrays(dtype, (p, 1)))
    assert_bits(
        apply(lambda t: nl.broadcast_to(t, shape=(p, f)), x),
        np.broadcast_to(x, (p, f)).copy(),
        "broadcast_to",
    )
    y = data.draw(arrays(dtype, (p, f)))
    assert_bits(apply(lambda t: nl.copy(nl.expand_dims(t, 2)), y), y[:, :, None], "expand_dims")


@EX
@given(data=st.data(), p=st.integers(1, 16), f=st.integers(2, 16), m=st.integers(1, 12), dtype=dtypes_any)
def test_nl_gather_flattened(data, p, f, m, dtype):
    """nl.gather_flattened(data, indices) is np.take_along_axis on the flattened free dims [B1-NL]:
    moved values, bit for bit."""
    x = data.draw(arrays(dtype, (p, f)))
    idx = np.asarray(data.draw(st.lists(st.integers(0, f - 1), min_size=p * m, max_size=p * m)), np.uint32)
    idx = idx.reshape(p, m)
    got = apply(lambda d, i: nl.gather_flattened(d, i), x, idx)
    assert_bits(got, np.take_along_axis(x, idx.astype(np.int64), axis=1), "gather_flattened")


@EX
@given(data=st.data(), cores=st.integers(1, 2), f=st.integers(4, 12), dtype=dtypes_any)
def test_nisa_local_gather(data, cores, f, dtype):
    """nisa.local_gather: each 16-partition GpSimd core gathers src elements at its indices, taken in
    column-major order of its 16 index rows [B1-ISA]; moved values, bit for bit."""
    p = 16 * cores
    x = data.draw(arrays(dtype, (p, f)))
    index = np.asarray(data.draw(st.lists(st.integers(0, f - 1), min_size=p, max_size=p)), np.uint16).reshape(
        p, 1
    )
    got = apply(lambda s, i: nisa.local_gather(s, i), x, index)
    assert_bits(got, ref.local_gather(x, index), "local_gather")


@EX
@given(data=st.data(), f=frees, dtype=dtypes_any)
def test_nisa_nc_stream_shuffle(data, f, dtype):
    """nisa.nc_stream_shuffle: dst[q*32+i] = src[q*32+mask[i]], mask 255 keeps dst [B1-ISA]; moved
    values, bit for bit."""
    p = 32
    src = data.draw(arrays(dtype, (p, f)))
    old = data.draw(arrays(dtype, (p, f)))
    mask = data.draw(st.lists(st.one_of(st.integers(0, 31), st.just(255)), min_size=32, max_size=32))

    want = old.copy()
    for i, m in enumerate(mask):
        if m != 255:
            want[i] = src[m]
    assert_bits(stream_shuffle_kernel(src, old, mask), want, "nc_stream_shuffle")


@EX
@given(data=st.data(), p=parts, f=st.integers(1, 8), dtype=dtypes_any)
def test_nisa_tensor_copy_dynamic(data, p, f, dtype):
    """nisa.tensor_copy_dynamic_src/_dst: copies with a runtime offset read from an SBUF tile; values
    move bit for bit [B1-ISA]."""
    x = data.draw(arrays(dtype, (p, f)))
    off = np.array([[data.draw(st.integers(0, f - 1))]], np.int32)

    @nki.jit
    def k(a, o):
        out = nl.ndarray((p, 2), dtype=a.dtype, buffer=nl.shared_hbm)
        src = nl.load(a)
        offs = nl.load(o)
        res = nl.ndarray((p, 2), dtype=a.dtype, buffer=nl.sbuf)
        ix, iy = nl.mgrid[0:p, 0:1]
        res[ix, iy] = nisa.tensor_copy_dynamic_src(src[ix, offs[0, 0] + iy])
        nisa.tensor_copy_dynamic_dst(dst=res[ix, 1 + iy], src=src[ix, offs[0, 0] + iy])
        nl.store(out, value=res)
        return out

    col = x[:, off[0, 0] : off[0, 0] + 1]
    assert_bits(k(x, off), np.concatenate([col, col], axis=1), "tensor_copy_dynamic")


@EX
@given(data=st.data(), p=st.integers(1, 8), f=frees, dtype=dtypes_float)
def test_nl_atomic_rmw(data, p, f, dtype):
    """nl.atomic_rmw(dst, value, np.add): dst = dst + value in fp32, one cast, on HBM [B1-NL]."""
    x = data.draw(arrays(dtype, (p, f)))
    v = data.draw(arrays(dtype, (p, f)))

    @nki.jit
    def k(a, b):
        out = nl.ndarray((p, f), dtype=a.dtype, buffer=nl.shared_hbm)
        nl.store(out, value=nl.load(a))
        nl.atomic_rmw(out, value=nl.load(b), op=np.add)
        return out

    with np.errstate(all="ignore"):
        assert_same(k(x, v), cast(to_f32(x) + to_f32(v), dtype), "atomic_rmw")


# ---- creation -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("v", ref.SPECIAL_FILLS, ids=repr)
@pytest.mark.parametrize("api", ["full", "zeros", "ones", "zeros_like", "memset", "assign"])
@settings(max_examples=max(2, EXAMPLES // 4))
@given(p=st.integers(1, 8), f=frees, dtype=dtypes_any)
def test_fills(api, v, p, f, dtype):
    """nl.full/zeros/ones/zeros_like, nisa.memset and ``t[...] = v`` write the value in the declared
    dtype: RNE for floats (signs of zero and NaN kept), RNE + saturation for integers [B1-NL, B1-ISA].
    Reading: an int fill value converts like any int (exact into int dtypes, int -> fp32 -> float)."""
    if api in ("zeros", "zeros_like"):
        v = 0.0
    elif api == "ones":
        v = 1.0
    val = v

    @nki.jit
    def k(a):
        if api == "full":
            t = nl.full((p, f), val, dtype=dtype)
        elif api == "zeros":
            t = nl.zeros((p, f), dtype=dtype)
        elif api == "ones":
            t = nl.ones((p, f), dtype=dtype)
        elif api == "zeros_like":
            t = nl.zeros_like(nl.load(a), dtype=dtype)
        elif api == "memset":
            t = nisa.memset((p, f), val, dtype)
        else:
            t = nl.ndarray((p, f), dtype=dtype, buffer=nl.sbuf)
            t[...] = val
        out = nl.ndarray((p, f), dtype=dtype, buffer=nl.shared_hbm)
        nl.store(out, value=t)
        return out

    got = k(np.zeros((p, f), np.float32))
    want = cast(np.full((p, f), np.float32(val)), dtype)
    if dtype in INTS and float(val).is_integer():
        info = np.iinfo(dtype)
        want = np.full((p, f), min(max(int(val), int(info.min)), int(info.max)), dtype)
    assert_bits(got, want, api) if not np.isnan(val) else assert_same(got, want, api)


@EX
@given(p=st.integers(1, 8), f=frees, start=st.integers(-(2**30), 2**30), dtype=dtypes_any)
def test_nisa_iota(p, f, start, dtype):
    """nisa.iota(expr, dtype): the affine expression of nl.arange evaluated in int32, then cast
    (int -> fp32 -> float types) [B1-ISA]."""

    @nki.jit
    def k(a):
        out = nl.ndarray((p, f), dtype=dtype, buffer=nl.shared_hbm)
        e = start + 3 * nl.arange(f)[None, :] + nl.arange(p)[:, None]
        nl.store(out, value=nisa.iota(e, dtype=dtype))
        return out

    v = (start + 3 * np.arange(f)[None, :] + np.arange(p)[:, None]).astype(np.int32)
    assert_bits(k(np.zeros((1, 1), np.float32)), convert(v, dtype), "iota")


@EX
@given(data=st.data(), n=st.integers(1, 12), dtype=dtypes_any)
def test_nl_shared_constant_and_identity(data, n, dtype):
    """nl.shared_constant(c, dtype): an HBM constant holding c converted to dtype (RNE via fp32);
    nl.shared_identity_matrix(n, dtype): the identity [B1-NL]."""
    c = data.draw(arrays(F32, (n, 3)))

    @nki.jit
    def k(a):
        out = nl.ndarray((n, 3), dtype=dtype, buffer=nl.shared_hbm)
        eye = nl.ndarray((n, n), dtype=dtype, buffer=nl.shared_hbm)
        nl.store(out, value=nl.load(nl.shared_constant(c, dtype=dtype)))
        nl.store(eye, value=nl.load(nl.shared_identity_matrix(n, dtype=dtype)))
        return out, eye

    o, eye = k(np.zeros((1, 1), np.float32))
    assert_same(o, cast(c, dtype), "shared_constant")
    assert_same(eye, np.identity(n).astype(dtype), "shared_identity_matrix")


@EX
@given(data=st.data(), dtype=dtypes_any, n=st.integers(1, 12))
def test_nl_static_cast(data, dtype, n):
    """nl.static_cast(array, dtype): host-side cast to an NKI dtype, round to nearest even, via fp32
    for floats [B1-NL]."""
    x = data.draw(arrays(F32, (n,)))
    assert_bits(nl.static_cast(x, dtype), cast(x, dtype), "static_cast")


@pytest.mark.parametrize("api", ["nl.rand", "nl.dropout", "nisa.dropout"])
@EX
@given(p=st.integers(1, 16), f=frees, rate=st.sampled_from([0.0, 0.3, 1.0]), dtype=dtypes_float)
def test_random_ops(api, p, f, rate, dtype):
    """nl.rand: uniform values in [0, 1) in the requested dtype; nl.dropout / nisa.dropout: each
    element is either kept unchanged (no 1/(1-rate) scaling) or zero; rate 0 keeps all, 1 drops all
    [B1-NL, B1-ISA].  The generator differs from the hardware's: only these properties are checked."""
    x = np.linspace(1, 2, p * f, dtype=np.float32).reshape(p, f).astype(dtype)
    if api == "nl.rand":

        @nki.jit
        def k(a):
            out = nl.ndarray((p, f), dtype=dtype, buffer=nl.shared_hbm)
            nl.store(out, value=nl.rand((p, f), dtype=dtype))
            return out

        got = k(x)
        assert got.dtype == dtype and ((got >= 0) & (got <= 1)).all()
        return
    fn = nl.dropout if api == "nl.dropout" else nisa.dropout
    got = apply(lambda t: fn(t, rate), x)
    assert got.dtype == dtype
    kept = got != 0
    np.testing.assert_array_equal(got[kept], x[kept])
    if rate == 0.0:
        assert kept.all()
    if rate == 1.0:
        assert not kept.any()


# ---- TensorE --------------------------------------------------------------------------------------------------

MM_DTYPES = st.sampled_from([FP8, FP8_E5, BF16, F16])


@pytest.mark.parametrize("api", ["nc_matmul", "nl.matmul_T", "nl.matmul"])
@EX
@given(**MATMUL, d1=MM_DTYPES, d2=MM_DTYPES)
def test_matmul(api, data, k, m, n, d1, d2):
    """TensorE: stationary.T @ moving with fp32 products of the stored values and fp32 accumulation
    into PSUM [B1-ISA nc_matmul]; the accumulation order is not documented: n-term bound
    (``check_matmul``).  Finite inputs of magnitude <= 2**20 (``matmul_operands``)."""
    a, b = matmul_operands(data, d1, d2, k, m, n)
    if api == "nc_matmul":
        got = apply(lambda s, mv: nl.copy(nisa.nc_matmul(s, mv), dtype=nl.float32), a, b)
    elif api == "nl.matmul_T":
        got = apply(lambda s, mv: nl.copy(nl.matmul(s, mv, transpose_x=True), dtype=nl.float32), a, b)
    else:
        at = np.ascontiguousarray(a.T)
        got = apply(lambda s, mv: nl.copy(nl.matmul(s, mv), dtype=nl.float32), at, b)
    check_matmul(got, a, b, api)


# ---- fused helpers ------------------------------------------------------------------------------------------


@EX
@given(**TILE, dtype=dtypes_float)
def test_nl_softmax(data, p, f, dtype):
    """nl.softmax(x, axis): exp(x - max) / sum exp(x - max) in fp32, cast once [B1-NL]; finite
    inputs; tolerance: the fp32 evaluation of exp and of an f-term sum, relative to the result."""
    x = data.draw(arrays(dtype, (p, f), finite=True))
    check_softmax(apply(lambda t: nl.softmax(t, axis=1), x), x, dtype)


@EX
@given(**TILE, dtype=dtypes_float)
def test_nl_rms_norm(data, p, f, dtype):
    """nl.rms_norm(x, w, axis, n, epsilon): x * rsqrt(sum(x^2)/n + epsilon) * w [B1-NL]; moderate
    finite inputs (squares must not overflow fp32)."""
    x = data.draw(arrays(dtype, (p, f), finite=True, lo=0.0, hi=2.0**30))
    w = data.draw(arrays(dtype, (1, f), finite=True, lo=0.0, hi=2.0**30))
    got = apply(lambda t, ww: nl.rms_norm(t, nl.broadcast_to(ww, shape=(p, f)), axis=1, n=f), x, w)
    check_rms_norm(got, x, w, dtype)
