"""Differential property tests for Beta 2, part 2: selection, data movement and conversion, creation,
TensorE (nc_matmul, MX), LNC-2 transfer, registers and the operations the simulator refuses.  Conventions,
sources, tolerances and the example budget: ``test_numerics_differential_beta2.py`` (which also holds the
coverage test over both files)."""

from __future__ import annotations

import math

import _numerics_ref as ref
import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np
import pytest
from _numerics_beta2 import (
    EX,
    dma_hbm_kernel,
    eng,
    engines,
    run_isa,
    run_nl,
    to_hbm,
    to_sbuf,
)
from _numerics_checks import check_matmul
from _numerics_draw import (
    EPS32,
    EXAMPLES,
    MATMUL,
    MOVE_TILE,
    TILE,
    arrays,
    assert_bits,
    assert_close,
    assert_same,
    dtypes_any,
    dtypes_float,
    frees,
    matmul_operands,
)
from _numerics_ref import (
    BF16,
    F16,
    F32,
    FP8,
    FP8_E5,
    I32,
    INTS,
    U8,
    U32,
    cast,
    convert,
    to_f32,
)
from hypothesis import given, settings
from hypothesis import strategies as st

from devkit.errors import UnsupportedError

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

ACT, ALU32, VUNARY = ref.ACTIVATION_DEFS, ref.FP32_ALU, ref.VECTOR_UNARY
BOOL = ref.BOOL


# ---- selection ------------------------------------------------------------------------------------------------------


@EX
@given(
    **TILE,
    dtype=dtypes_float,
    fv=st.sampled_from([-9984.0, 0.0, -math.inf]),
    cm=st.integers(-2, 2),
    off=st.integers(-4, 4),
    cmp=st.sampled_from(["greater_equal", "equal", "less"]),
)
def test_nisa_affine_select(data, p, f, dtype, fv, cm, off, cmp):
    """nisa.affine_select(dst, pattern, channel_multiplier, on_true_tile, on_false_value, cmp_op, offset):
    ``v = offset + p*channel_multiplier + sum step*i``; dst = on_true where ``cmp_op(v, 0)`` else the fp32
    scalar [B2 §5]; selected values move unchanged."""
    x = data.draw(arrays(dtype, (p, f)))
    got = run_isa(
        lambda d, a: nisa.affine_select(d, [[-1, f]], cm, a, fv, cmp_op=getattr(nl, cmp), offset=off),
        [x],
        ((p, f), dtype),
    )
    v = off + cm * np.arange(p)[:, None] - np.arange(f)[None, :]
    keep = ALU32[cmp](v.astype(np.float32), np.float32(0)) != 0
    assert_same(got, np.where(keep, x, cast(np.float32(fv), dtype)), "affine_select")


@EX
@given(**TILE, dtype=dtypes_float, start=st.integers(0, 20))
def test_nisa_range_select(data, p, f, dtype, start):
    """nisa.range_select (v3+): keep element j when both comparisons of ``range_start + j`` (fp32) with
    the (P,1) bounds hold, else on_false_value; max-reduce into reduce_res [B2 §5]."""
    x = data.draw(arrays(dtype, (p, f)))
    b0 = np.full((p, 1), start + 1, np.float32)
    b1 = np.full((p, 1), start + f - 1, np.float32)
    got, red = run_isa(
        lambda d, r, a, lo, hi: nisa.range_select(
            d, a, nl.greater_equal, nl.less, lo, hi, reduce_res=r, reduce_op=nl.maximum,
            range_start=start, on_false_value=-5.0,
        ),
        [x, b0, b1],
        ((p, f), dtype),
        ((p, 1), F32),
    )  # fmt: skip
    idx = start + np.arange(f)[None, :]
    keep = (idx >= b0) & (idx < b1)
    want = np.where(keep, to_f32(x), np.float32(-5.0))
    assert_same(got, cast(want, dtype), "range_select")
    assert_same(red, np.max(want, axis=1, keepdims=True), "range_select max")


@EX
@given(**TILE, dtype=dtypes_float, reverse=st.booleans())
def test_nisa_select_reduce(data, p, f, dtype, reverse):
    """nisa.select_reduce(dst, predicate, on_true, on_false, reduce_res, reduce_cmd, reduce_op=maximum,
    reverse_pred): where(pred, on_true, on_false) plus an optional max into (P,1) [B2 §5]."""
    x = data.draw(arrays(dtype, (p, f)))
    pr = data.draw(arrays(U8, (p, f)))
    got, red = run_isa(
        lambda d, r, a, prd: nisa.select_reduce(
            d, prd, a, -3.0, reduce_res=r, reduce_cmd=nisa.reduce_cmd.reset_reduce, reverse_pred=reverse
        ),
        [x, pr],
        ((p, f), dtype),
        ((p, 1), F32),
    )
    sel = (pr != 0) != reverse
    assert_same(got, np.where(sel, x, cast(np.float32(-3.0), dtype)), "select_reduce")
    assert_same(red, np.max(np.where(sel, to_f32(x), np.float32(-3.0)), axis=1, keepdims=True), "select max")


@EX
@given(data=st.data(), n=st.integers(1, 24), dtype=st.sampled_from([I32, F32, BF16]))
def test_nisa_sequence_bounds(data, n, dtype):
    """nisa.sequence_bounds(dst, segment_ids): P = 1, (1, 2, n) [start, end) of each element's run of equal
    ids; id 0 -> (n, -1) [B2 §5]."""
    ids = np.asarray(data.draw(st.lists(st.integers(0, 3), min_size=n, max_size=n)))
    s = ids.astype(dtype).reshape(1, n)
    want = convert(ref.sequence_bounds(ids)[None], dtype)
    assert_same(
        run_isa(lambda d, t: nisa.sequence_bounds(d, t), [s], ((1, 2, n), dtype)), want, "sequence_bounds"
    )


@EX
@given(
    **TILE,
    dtype=dtypes_any,
    rev=st.booleans(),
    pd=st.sampled_from([U8, np.dtype(np.uint16), U32]),
)
def test_nisa_tensor_copy_predicated(data, p, f, dtype, rev, pd):
    """nisa.tensor_copy_predicated(dst, src, predicate, reverse_pred): copy where predicate != 0
    (inverted by the flag), else keep dst; predicate uint8/16/32; same dtype: bits move [B2 §5]."""
    src = data.draw(arrays(dtype, (p, f)))
    old = data.draw(arrays(dtype, (p, f)))
    pr = data.draw(arrays(pd, (p, f)))

    @nki.jit
    def k(s, o, prd):
        d = to_sbuf(o)
        nisa.tensor_copy_predicated(d, to_sbuf(s), to_sbuf(prd), reverse_pred=rev)
        return to_hbm(d)

    got = nki.simulate(k)(src, old, pr)
    assert_bits(got, np.where((pr != 0) != rev, src, old), "tensor_copy_predicated")


# ---- data movement and conversion ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "path", ["dma_copy", "dma_copy_hbm", "tensor_copy", "dma_transpose", "nc_transpose", "nl.load", "nl.copy",
             "nl.transpose", "nl.load_transpose2d", "nl.store"]
)  # fmt: skip
@EX
@given(
    **MOVE_TILE,
    dtype=dtypes_any,
    od=dtypes_any,
    engine=engines,
)
def test_data_movement(path, data, p, f, dtype, od, engine):
    """Copies and transposes move values: bit for bit for equal dtypes (NaN payloads included), src ->
    fp32 -> dst otherwise [B2 §5 tensor_copy "bit-exact for equal dtypes, else via fp32"; DMAOV; B2 §3.7
    load/copy/transpose/store].  nc_transpose and nl.transpose are "same dtype" 2-D transposes (Vector:
    <= 32x32), dma_transpose a DMA 2-D transpose.  Reading: int -> int conversions keep the value and
    saturate (as in Beta 1)."""
    x = data.draw(arrays(dtype, (p, f)))
    want, out_dtype = x, od
    if path == "dma_copy":
        got = run_isa(lambda d, a: nisa.dma_copy(d, a), [x], ((p, f), od))
    elif path == "dma_copy_hbm":
        got = nki.simulate(dma_hbm_kernel)(x, od)
    elif path == "tensor_copy":
        got = run_isa(lambda d, a: nisa.tensor_copy(d, a, engine=eng(engine)), [x], ((p, f), od))
    elif path == "dma_transpose":
        got, want, out_dtype = (
            run_isa(lambda d, a: nisa.dma_transpose(d, a), [x], ((f, p), dtype)),
            x.T,
            dtype,
        )
    elif path == "nc_transpose":
        x = x[: min(p, 32), : min(f, 32)]
        q, g = x.shape
        veng = nisa.engine.vector
        got, want, out_dtype = (
            run_isa(lambda d, a: nisa.nc_transpose(d, a, engine=veng), [x], ((g, q), dtype)),
            x.T,
            dtype,
        )
    elif path == "nl.load":
        got = nki.simulate(_nl_load)(x, od)
    elif path == "nl.copy":
        got = run_nl(lambda t: nl.copy(t, od), x)
    elif path == "nl.transpose":
        x = x[: min(p, 32), : min(f, 32)]
        got, want, out_dtype = run_nl(lambda t: nl.transpose(t), x), x.T, dtype
    elif path == "nl.load_transpose2d":
        got, want = nki.simulate(_nl_load_t)(x, od), x.T
    else:
        got = nki.simulate(_nl_store)(x, od)
    out_dtype = np.dtype(out_dtype)
    check = assert_bits if out_dtype == dtype else assert_same  # a converted NaN's payload is undocumented
    check(got, convert(np.ascontiguousarray(want), out_dtype), path)


@nki.jit
def _nl_load(x, dtype):
    return to_hbm(nl.load(x, dtype))


@nki.jit
def _nl_load_t(x, dtype):
    return to_hbm(nl.load_transpose2d(x, dtype))


@nki.jit
def _nl_store(x, dtype):
    out = nl.ndarray(x.shape, dtype=dtype, buffer=nl.shared_hbm)
    nl.store(out, to_sbuf(x))
    return out


@EX
@given(data=st.data(), p=st.integers(1, 16), f=frees, dtype=dtypes_any)
def test_nl_broadcast_to_and_expand_dims(data, p, f, dtype):
    """nl.broadcast_to(x, shape, dtype=None) repeats a size-1 dim ("same rank"); nl.expand_dims(x, axis)
    adds a size-1 axis; both move values unchanged [B2 §3.7]."""
    x = data.draw(arrays(dtype, (p, 1)))
    assert_bits(
        run_nl(lambda t: nl.broadcast_to(t, (p, f)), x), np.broadcast_to(x, (p, f)).copy(), "broadcast_to"
    )
    y = data.draw(arrays(dtype, (p, f)))
    assert_bits(run_nl(lambda t: nl.copy(nl.expand_dims(t, 2)), y), y[:, :, None], "expand_dims")


@pytest.mark.parametrize("api", ["nl.gather_flattened", "nisa.nc_n_gather"])
@EX
@given(data=st.data(), p=st.integers(1, 16), f=st.integers(2, 16), m=st.integers(1, 12), dtype=dtypes_any)
def test_gathers(api, data, p, f, m, dtype):
    """nl.gather_flattened(data, indices) [B2 §3.7] and nisa.nc_n_gather(dst, data, indices) ("per-partition
    gather by uint32 flat free index", Beta 1's gather_flattened [B2 §5, §9]): np.take_along_axis on the
    flattened free dims, values moved bit for bit."""
    x = data.draw(arrays(dtype, (p, f)))
    idx = np.asarray(data.draw(st.lists(st.integers(0, f - 1), min_size=p * m, max_size=p * m)), np.uint32)
    idx = idx.reshape(p, m)
    if api == "nl.gather_flattened":
        got = run_nl(lambda d, i: nl.gather_flattened(d, i), x, idx)
    else:
        got = run_isa(lambda o, d, i: nisa.nc_n_gather(o, d, i), [x, idx], ((p, m), dtype))
    assert_bits(got, np.take_along_axis(x, idx.astype(np.int64), axis=1), api)


@EX
@given(data=st.data(), cores=st.integers(1, 2), f=st.integers(4, 12), n=st.integers(1, 3), dtype=dtypes_any)
def test_nisa_local_gather(data, cores, f, n, dtype):
    """nisa.local_gather(dst, src_buffer, index): per 16-partition group its uint16 indices, flattened
    partition-first, each partition gathering at those free offsets of its own row [B2 §5]; bits move."""
    p = 16 * cores
    x = data.draw(arrays(dtype, (p, f)))
    index = np.asarray(data.draw(st.lists(st.integers(0, f - 1), min_size=p * n, max_size=p * n)), np.uint16)
    index = index.reshape(p, n)
    got = run_isa(lambda d, s, i: nisa.local_gather(d, s, i), [x, index], ((p, 16 * n), dtype))
    assert_bits(got, ref.local_gather(x, index), "local_gather")


@EX
@given(data=st.data(), f=frees, dtype=dtypes_any)
def test_nisa_nc_stream_shuffle(data, f, dtype):
    """nisa.nc_stream_shuffle(dst, src, shuffle_mask): per 32-partition quadrant ``dst[i] = src[mask[i]]``,
    255 keeps dst [B2 §5]; bits move."""
    p = 32
    src = data.draw(arrays(dtype, (p, f)))
    old = data.draw(arrays(dtype, (p, f)))
    mask = data.draw(st.lists(st.one_of(st.integers(0, 31), st.just(255)), min_size=32, max_size=32))

    @nki.jit
    def k(s, o):
        d = to_sbuf(o)
        nisa.nc_stream_shuffle(d, to_sbuf(s), mask)
        return to_hbm(d)

    want = old.copy()
    for i, m in enumerate(mask):
        if m != 255:
            want[i] = src[m]
    assert_bits(nki.simulate(k)(src, old), want, "nc_stream_shuffle")


@EX
@given(data=st.data(), p=st.integers(1, 8), f=frees, n=st.integers(1, 3), dtype=dtypes_float)
def test_nisa_dma_compute(data, p, f, n, dtype):
    """nisa.dma_compute(dst, srcs, reduce_op=add): ``dst = sum of srcs`` [B2 §5, §9].  Reading: the DMA
    adds in fp32 in list order, one cast (the DMA engine's cast goes through fp32 [DMAOV])."""
    xs = [data.draw(arrays(dtype, (p, f))) for _ in range(n)]

    @nki.jit
    def k(srcs):
        out = nl.ndarray((p, f), dtype=dtype, buffer=nl.shared_hbm)
        nisa.dma_compute(out, list(srcs), nl.add)
        return out

    acc = to_f32(xs[0])
    with np.errstate(all="ignore"):
        for x in xs[1:]:
            acc = acc + to_f32(x)
    assert_same(nki.simulate(k)(xs), cast(acc, dtype), "dma_compute")


@EX
@given(data=st.data(), q=st.integers(0, 7), f=st.integers(1, 12), dtype=st.sampled_from([F32, BF16, I32]))
def test_nisa_nonzero_with_count(data, q, f, dtype):
    """nisa.nonzero_with_count(dst, src, index_offset, padding_val) (v3+): on partitions 0, 16, ..., 112 the
    indices (+ offset) of nonzero elements, padding, then the count in the extra last element [B2 §5]."""
    x = data.draw(arrays(dtype, (128, f)))
    x = np.where(data.draw(arrays(U8, (128, f))) % 2 == 0, np.zeros_like(x), x)

    @nki.jit
    def k(a):
        d = nl.ndarray((128, f + 1), dtype=nl.int32, buffer=nl.sbuf)
        nisa.memset(d, 7)
        nisa.nonzero_with_count(d, to_sbuf(a), index_offset=q, padding_val=-1)
        return to_hbm(d)

    got = nki.simulate(k)(x)
    want = np.full((128, f + 1), 7, np.int32)
    for r in range(0, 128, 16):
        nz = np.nonzero(to_f32(x[r]) != 0)[0]
        want[r, :f] = -1
        want[r, : nz.size] = nz + q
        want[r, f] = nz.size
    assert_same(got, want, "nonzero_with_count")


# ---- creation -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("v", ref.SPECIAL_FILLS, ids=repr)
@pytest.mark.parametrize("api", ["full", "zeros", "ones", "zeros_like", "memset"])
@settings(max_examples=max(2, EXAMPLES // 4), deadline=None)
@given(p=st.integers(1, 8), f=frees, dtype=dtypes_any, engine=engines)
def test_fills(api, v, p, f, dtype, engine):
    """nl.full/zeros/ones/zeros_like [B2 §3.3] and nisa.memset(dst, value, engine) [B2 §5] write the value
    in the declared dtype: RNE for floats (signs of zero and NaN kept), RNE + saturation for integers.
    memset's "value type must match dtype" (0.3.0): a non-integral float into an integer dtype raises."""
    v = {"zeros": 0.0, "zeros_like": 0.0, "ones": 1.0}.get(api, v)
    if api == "memset" and dtype in INTS and not float(v).is_integer():
        with pytest.raises(Exception, match="does not match the integer dtype"):
            run_isa(lambda d: nisa.memset(d, v, engine=eng(engine)), [], ((p, f), dtype))
        return

    @nki.jit
    def k(a):
        if api == "full":
            t = nl.full((p, f), v, dtype)
        elif api == "zeros":
            t = nl.zeros((p, f), dtype)
        elif api == "ones":
            t = nl.ones((p, f), dtype)
        elif api == "zeros_like":
            t = nl.zeros_like(to_sbuf(a), dtype)
        else:
            t = nl.ndarray((p, f), dtype=dtype, buffer=nl.sbuf)
            nisa.memset(t, v, engine=eng(engine))
        return to_hbm(t)

    got = nki.simulate(k)(np.zeros((p, f), np.float32))
    want = cast(np.full((p, f), np.float32(v)), dtype)
    if dtype in INTS and float(v).is_integer():
        info = np.iinfo(dtype)
        want = np.full((p, f), min(max(int(v), int(info.min)), int(info.max)), dtype)
    (assert_same if math.isnan(v) else assert_bits)(got, want, api)


@EX
@given(
    p=st.integers(1, 8),
    f=st.integers(1, 6),
    g=st.integers(1, 3),
    steps=st.tuples(st.integers(-3, 3), st.integers(-3, 3)),
    offset=st.integers(-(2**30), 2**30),
    cm=st.integers(-5, 5),
    dtype=dtypes_any,
)
def test_nisa_iota(p, f, g, steps, offset, cm, dtype):
    """nisa.iota(dst, pattern, offset, channel_multiplier): ``offset + p*channel_multiplier + sum step*i``
    over the [step, count] pattern, int32 math then cast (int -> fp32 -> float) [B2 §5].  Reading: the
    int32 math wraps (NKI's 32-bit integers)."""
    pat = [[steps[0], f], [steps[1], g]]
    got = run_isa(lambda d: nisa.iota(d, pat, offset=offset, channel_multiplier=cm), [], ((p, f, g), dtype))
    i, j = np.arange(f)[:, None], np.arange(g)[None, :]
    v = offset + cm * np.arange(p)[:, None, None] + (steps[0] * i + steps[1] * j)[None]
    assert_bits(got, convert(v.astype(np.int64).astype(np.int32), dtype), "iota")


@EX
@given(data=st.data(), n=st.integers(1, 12), dtype=dtypes_any)
def test_nl_shared_constant_and_identity(data, n, dtype):
    """nl.shared_constant(array): a shared_hbm tensor holding the array; nl.shared_identity_matrix(n,
    dtype): the n x n identity in dtype, also written into ``dst=`` [B2 §3.3]."""
    c = data.draw(arrays(dtype, (n, 3)))

    @nki.jit
    def k(a):
        eye = nl.ndarray((n, n), dtype=dtype, buffer=nl.sbuf)
        nl.shared_identity_matrix(n, dtype, dst=eye)
        const = nl.shared_constant(c)
        return to_hbm(to_sbuf(const)), to_hbm(eye), to_hbm(nl.shared_identity_matrix(n, dtype))

    o, eye, eye2 = nki.simulate(k)(np.zeros((1, 1), np.float32))
    assert_bits(o, c, "shared_constant")
    assert_same(eye, np.identity(n).astype(dtype), "shared_identity_matrix(dst=)")
    assert_same(eye2, np.identity(n).astype(dtype), "shared_identity_matrix")


@pytest.mark.parametrize("api", ["nl.rand", "nl.dropout"])
@EX
@given(p=st.integers(1, 16), f=frees, rate=st.sampled_from([0.0, 0.3, 1.0]), dtype=dtypes_float)
def test_random_ops(api, p, f, rate, dtype):
    """nl.rand(shape, dtype): uniform in [0, 1) [B2 §3.3]; nl.dropout(x, rate): each element kept unchanged
    or zero; rate 0 keeps all, 1 drops all [B2 §3.7].  The generator is not the hardware's: only these
    properties are checked."""
    x = np.linspace(1, 2, p * f, dtype=np.float32).reshape(p, f).astype(dtype)
    if api == "nl.rand":
        got = run_nl(lambda t: nl.rand((p, f), dtype), x)
        assert got.dtype == dtype and ((got >= 0) & (got <= 1)).all()
        return
    got = run_nl(lambda t: nl.dropout(t, rate), x)
    kept = got != 0
    assert got.dtype == dtype
    np.testing.assert_array_equal(got[kept], x[kept])
    if rate == 0.0:
        assert kept.all()
    if rate == 1.0:
        assert not kept.any()


@EX
@given(data=st.data(), groups=st.integers(1, 2), f=frees, kf=st.floats(0.0, 1.0))
def test_nisa_topk(data, groups, f, kf):
    """nisa.topk(val_dst, idx_dst, src, n) (v3+): per 16-partition group, the K = val_dst-free-size largest of
    the group's n snake elements (element i at partition i % 16, column i // 16), ascending, with their uint32
    snake indices [B2 §5.4].  Values are compared (ties make the index choice free: an index must point at an
    equal value)."""
    p = 16 * groups
    n = data.draw(st.integers(max(8, 16 * f - 15), 16 * f))  # the snake fills the last column partly
    k = max(1, int(kf * min(n, 24)))
    x = data.draw(arrays(BF16, (p, f), finite=True))
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("NKI_NC_VERSION", "gen3")
        v, i = run_isa(lambda vd, ix, a: nisa.topk(vd, ix, a, n), [x], ((p, k), BF16), ((p, k), U32))
    snakes = to_f32(x).reshape(groups, 16, f).transpose(0, 2, 1).reshape(groups, 16 * f)[:, :n]
    for g in range(groups):
        want = np.sort(snakes[g])[n - k :]
        rows = slice(16 * g, 16 * g + 16)
        assert_same(to_f32(v[rows]), np.broadcast_to(want, (16, k)), "topk values")
        assert (i[rows] < n).all() and len(set(i[16 * g].tolist())) == k
        assert_same(snakes[g][i[rows]], to_f32(v[rows]), "topk indices")


ACT2_PAIRS = [("multiply", "add"), ("multiply", "subtract"), ("multiply", "bypass"), ("add", "bypass"),
              ("subtract", "bypass"), ("bypass", "bypass")]  # fmt: skip


@EX
@given(
    **TILE,
    pair=st.sampled_from(ACT2_PAIRS),
    func=st.sampled_from(["copy", "relu", "prelu"]),
    rev=st.booleans(),
)
def test_nisa_activate2(data, p, f, pair, func, rev):
    """nisa.activate2(dst, op, data, imm0, imm1, op0, op1, relu_param, reverse0, ...) (v4):
    ``op((data op0 imm0) op1 imm1)`` in fp32 then cast; ``bypass`` skips a step; ``prelu`` scales negatives by
    relu_param; register reduction (max here) into ``reduce_res`` [B2 §5.4].  Exact functions only, so the
    fp32 steps are the only roundings."""
    x = data.draw(arrays(F32, (p, f), finite=True, lo=2.0**-8, hi=2.0**8))
    imm0, imm1, alpha = (data.draw(st.sampled_from([0.5, -1.5, 3.0, 0.0])) for _ in range(3))
    o0, o1 = pair
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("NKI_NC_VERSION", "gen4")
        o, r = run_isa(
            lambda d, red, a: nisa.activate2(
                d, getattr(nl, func), a, imm0, imm1, getattr(nl, o0), getattr(nl, o1), relu_param=alpha,
                reverse0=rev, reduce_op=nl.maximum, reduce_res=red, reduce_cmd=nisa.reduce_cmd.reset_reduce,
            ),
            [x],
            ((p, f), F32),
            ((p, 1), F32),
        )  # fmt: skip
    fns = {"multiply": np.multiply, "add": np.add, "subtract": np.subtract}
    z = x.astype(np.float32)
    if o0 != "bypass":
        z = fns[o0](np.float32(imm0), z) if rev else fns[o0](z, np.float32(imm0))
    if o1 != "bypass":
        z = fns[o1](z, np.float32(imm1))
    w = {"copy": z, "relu": np.maximum(z, 0), "prelu": np.where(z >= 0, z, np.float32(alpha) * z)}[func]
    assert_same(o, w.astype(np.float32), "activate2")
    assert_same(r, w.max(axis=1, keepdims=True).astype(np.float32), "activate2 max register")


@pytest.mark.parametrize("api", ["rng", "rand2", "rand_set_state/rand_get_state"])
@EX
@given(p=st.integers(1, 16), f=frees, seed=st.integers(0, 2**32 - 1), dtype=st.sampled_from([U8, U32, I32]))
def test_nisa_rng_family(api, p, f, seed, dtype):
    """The PRNG family [B2 §5.4]: after ``set_rng_seed`` the same seed gives the same numbers; ``rng`` writes
    32 random bits truncated to dst's integer dtype; ``rand2`` is uniform in ``[min, max)``; a state written by
    ``rand_set_state`` reads back through ``rand_get_state`` and replays the stream.  The sequence is the
    kit's XORWOW (the hardware's is unpublished): only these properties are checked."""
    s = np.array([[seed]], np.uint32)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("NKI_NC_VERSION", "gen4")
        if api == "rng":
            a = run_isa(lambda d, t: (nisa.set_rng_seed(t), nisa.rng(d)), [s], ((p, f), dtype))
            b = run_isa(lambda d, t: (nisa.set_rng_seed(t), nisa.rng(d)), [s], ((p, f), U32))
            assert a.dtype == dtype
            assert_same(a, b.astype(dtype), "rng keeps the low bits")  # NumPy's integer cast keeps them too
        elif api == "rand2":
            a = run_isa(lambda d, t: (nisa.set_rng_seed(t), nisa.rand2(d, -1.0, 3.0)), [s], ((p, f), F32))
            b = run_isa(lambda d, t: (nisa.set_rng_seed(t), nisa.rand2(d, -1.0, 3.0)), [s], ((p, f), F32))
            assert ((a >= -1.0) & (a < 3.0)).all()
            assert_same(a, b, "rand2 reproducible")
        else:
            st6 = np.random.default_rng(seed).integers(1, 2**32, size=(p, 6), dtype=np.uint32)
            back, x, y = run_isa(
                lambda g, d1, d2, t: (
                    nisa.rand_set_state(t), nisa.rand_get_state(g), nisa.rng(d1, engine=nisa.engine.gpsimd),
                    nisa.rand_set_state(t), nisa.rng(d2, engine=nisa.engine.gpsimd),
                ),
                [st6],
                ((p, 6), U32),
                ((p, f), U32),
                ((p, f), U32),
            )  # fmt: skip
            assert_same(back, st6, "rand_get_state after rand_set_state")
            assert_same(x, y, "replayed stream")


# ---- TensorE --------------------------------------------------------------------------------------------------

MM_DTYPES = st.sampled_from([FP8, FP8_E5, BF16, F16, F32])


@pytest.mark.parametrize("api", ["nisa.nc_matmul", "nisa.nc_matmul(accumulate)", "nl.matmul"])
@EX
@given(**MATMUL, d1=MM_DTYPES, d2=MM_DTYPES)
def test_matmul(api, data, k, m, n, d1, d2):
    """TensorE: ``stationary.T @ moving`` with fp32 products and fp32 accumulation into PSUM [B2 §5
    nc_matmul; B2 §3.7 ``matmul(x, y, transpose_x=True)``]; a second matmul into the same PSUM elements
    adds (implicit accumulation).  Accumulation order undocumented: n-term bound; inputs <= 2**20.
    Reading: an fp32 operand is multiplied in fp32 (no documented fp32 truncation in the simulator)."""
    a, b = matmul_operands(data, d1, d2, k, m, n)
    if d1 == F32 or d2 == F32:  # fp32 matmul takes fp32 on both sides
        a, b = a.astype(np.float32), b.astype(np.float32)
    twice = api == "nisa.nc_matmul(accumulate)"
    if api == "nl.matmul":
        got = run_nl(lambda s, mv: nl.matmul(s, mv, transpose_x=True), a, b)
    else:

        @nki.jit
        def kern(s, mv):
            ps = nl.ndarray((m, n), dtype=nl.float32, buffer=nl.psum)
            st_, mv_ = to_sbuf(s), to_sbuf(mv)
            nisa.nc_matmul(ps, st_, mv_)
            if twice:
                nisa.nc_matmul(ps, st_, mv_)
            sb = nl.ndarray((m, n), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_copy(sb, ps)
            return to_hbm(sb)

        got = nki.simulate(kern)(a, b)
    check_matmul(got.astype(np.float32), a, b, api, terms=k + 1, times=2 if twice else 1)


#: MX x4 formats quantize_mx writes -> mantissa bits, largest exponent (Emax) and largest finite value of the
#: element format [B2 §3.1, §5; OCP MX: e4m3fn 1.75 * 2**8, e5m2 1.75 * 2**15].
MX_MANTISSA = {"float8_e4m3fn_x4": 3, "float8_e5m2_x4": 2}
MX_EMAX = {"float8_e4m3fn_x4": 8, "float8_e5m2_x4": 15}
MX_FMAX = {"float8_e4m3fn_x4": 448.0, "float8_e5m2_x4": 57344.0}


def _mx_error(x: np.ndarray, x4: str) -> np.ndarray:
    """Largest quantization error per element under the OCP scale ``2**(floor(log2 amax) - Emax)`` of each 8x4
    group (8 partitions x the 4 values of one packed element): half an ulp of the group's top binade,
    ``2**(floor(log2 amax) - mbits - 1)``, plus how far the element lies past the largest finite value times
    the scale (the group maximum lands in ``[2**Emax, 2**(Emax+1))`` and saturates above ``FMAX``)."""
    k, f4 = x.shape
    ax = np.abs(x.astype(np.float64))
    a = ax.reshape(k // 8, 8, f4 // 4, 4).max(axis=(1, 3))
    with np.errstate(divide="ignore"):
        e = np.floor(np.log2(np.where(a > 0, a, 1)))
    half_ulp = np.where(a > 0, np.exp2(e - MX_MANTISSA[x4] - 1), 0.0)
    ceiling = np.where(a > 0, MX_FMAX[x4] * np.exp2(e - MX_EMAX[x4]), np.inf)
    per_group = np.repeat(np.repeat(half_ulp, 8, axis=0), 4, axis=1)
    past = np.maximum(ax - np.repeat(np.repeat(ceiling, 8, axis=0), 4, axis=1), 0.0)
    return per_group + past


@pytest.mark.parametrize("x4", sorted(MX_MANTISSA))
@EX
@given(
    data=st.data(),
    k=st.sampled_from([32, 64, 128]),
    m=st.integers(1, 8).map(lambda v: 2 * v),
    n=st.integers(1, 8),
    sd=st.sampled_from([BF16, F16]),
)
def test_nisa_quantize_mx_and_nc_matmul_mx(x4, data, k, m, n, sd):
    """nisa.quantize_mx(dst, src, dst_scale): bf16/fp16 [P, 4F] -> x4 [P, F] with one scale
    ``2**(floor(log2 amax) - Emax)`` per 8x4 group (Emax 8 e4m3fn, 15 e5m2; OCP MX, saturating); nisa.nc_matmul_mx:
    dequantize each group by its scale and contract over partitions and the 4 packed values (v4) [B2 §5].
    The product of two quantized operands is checked against the exact product of the sources within the
    quantization error of each element (half an ulp of its group's top binade, plus any saturation) plus the
    fp32 sum bound (the exact scales and saturation are checked by test_beta2_quantize_mx_scale.py).
    Reading: packed element i of a row holds source values 4i..4i+3 (inference from "[P, F] -> [P, F/4]")."""
    a = data.draw(arrays(sd, (k, 4 * m), finite=True, lo=2.0**-6, hi=2.0**6))
    b = data.draw(arrays(sd, (k, 4 * n), finite=True, lo=2.0**-6, hi=2.0**6))

    @nki.jit(platform_target="trn3")
    def kern(sa, sb):
        qa = nl.ndarray((k, m), dtype=getattr(nl, x4), buffer=nl.sbuf)
        qb = nl.ndarray((k, n), dtype=getattr(nl, x4), buffer=nl.sbuf)
        qa_s = nl.ndarray((k, m), dtype=nl.uint8, buffer=nl.sbuf)
        qb_s = nl.ndarray((k, n), dtype=nl.uint8, buffer=nl.sbuf)
        nisa.quantize_mx(qa, to_sbuf(sa), qa_s)
        nisa.quantize_mx(qb, to_sbuf(sb), qb_s)
        ps = nl.ndarray((m, n), dtype=nl.float32, buffer=nl.psum)
        nisa.nc_matmul_mx(ps, qa, qb, qa_s, qb_s)
        out = nl.ndarray((m, n), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(out, ps)
        return to_hbm(out)

    got = nki.simulate(kern)(a, b)
    a3 = to_f32(a).astype(np.float64).reshape(k, m, 4)
    b3 = to_f32(b).astype(np.float64).reshape(k, n, 4)
    ea = _mx_error(a, x4).reshape(k, m, 4)
    eb = _mx_error(b, x4).reshape(k, n, 4)
    prod = "kiq,kjq->ij"
    want = np.einsum(prod, a3, b3)
    bound = np.einsum(prod, ea, np.abs(b3)) + np.einsum(prod, np.abs(a3), eb) + np.einsum(prod, ea, eb)
    bound += 4 * k * 4 * EPS32 * np.einsum(prod, np.abs(a3) + ea, np.abs(b3) + eb)
    assert_close(got, want, F32, slack=bound, what=f"quantize_mx + nc_matmul_mx ({x4})")


# ---- LNC-2 transfer -------------------------------------------------------------------------------------------


@EX
@given(data=st.data(), p=st.integers(1, 8), f=frees, dtype=dtypes_any)
def test_nisa_sendrecv(data, p, f, dtype):
    """nisa.sendrecv(src, dst, send_to_rank, recv_from_rank, pipe_id) under ``kernel[2]``: each program's
    dst receives the peer's src tile [B2 §2, §5]; a transfer without a dtype change moves bits."""
    x = data.draw(arrays(dtype, (2 * p, f)))

    @nki.jit
    def k(a):
        pid = nl.program_id(0)
        mine = nl.ndarray((p, f), dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(mine, a[pid * p : (pid + 1) * p, :])
        theirs = nl.ndarray((p, f), dtype=a.dtype, buffer=nl.sbuf)
        nisa.sendrecv(mine, theirs, send_to_rank=1 - pid, recv_from_rank=1 - pid, pipe_id=0)
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(out[pid * p : (pid + 1) * p, :], theirs)
        return out

    assert_bits(nki.simulate(k[2])(x), np.concatenate([x[p:], x[:p]]), "sendrecv")


# ---- registers and ops the simulator does not run ----------------------------------------------------------------


@EX
@given(v=st.integers(-(2**31), 2**31 - 1))
def test_nisa_register_load_and_store(v):
    """nisa.register_load(reg, one_element_tensor) / register_store(one_element_tensor, reg) and
    register_move(reg, int): 32-bit registers move integers unchanged [B2 §5 Registers]."""
    x = np.array([[v]], np.int32)

    @nki.jit
    def k(a):
        r = nisa.register_alloc()
        nisa.register_load(r, to_sbuf(a))
        d = nl.ndarray((1, 2), dtype=nl.int32, buffer=nl.sbuf)
        nisa.register_store(d[:, 0:1], r)
        nisa.register_move(r, 5)
        nisa.register_store(d[:, 1:2], r)
        return to_hbm(d)

    assert_same(nki.simulate(k)(x), np.array([[v, 5]], np.int32), "registers")


def _while_loop(t):
    nl.while_loop(None, lambda r: r)


@pytest.mark.parametrize("call", [_while_loop], ids=["nl.while_loop"])
def test_unsimulated_ops_refuse_cleanly(call):
    """Operations without a Beta-2 simulation raise a clear UnsupportedError naming the op, never a wrong
    answer (house rule 2)."""

    @nki.jit
    def k(a):
        call(to_sbuf(a))
        return a

    with pytest.raises(UnsupportedError, match=r"not simulated|virtual registers"):
        nki.simulate(k)(np.ones((2, 2), np.float32))
