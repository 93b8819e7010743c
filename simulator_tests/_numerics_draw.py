"""Drawing and comparing values for the differential numerics suites (Beta 1 and Beta 2): the hypothesis
strategy for arrays of every NKI dtype with special values, and the bit-exact / ulp / bounded
comparisons the suites' docstrings justify."""

from __future__ import annotations

import inspect
import os
import subprocess
import sys
from collections.abc import Iterable

import numpy as np
from _numerics_ref import (
    ALL,
    EXACT_ACTIVATIONS,
    F32,
    FLOATS,
    INTS,
    activation,
    bits,
    cast,
    close_values,
    nan_bits,
    promote,
    same_values,
    special_floats,
    special_ints,
)
from hypothesis import strategies as st

EPS32 = float(np.finfo(np.float32).eps)

#: hypothesis examples per property test (``DEVKIT_NUMERICS_EXAMPLES``; the slow reruns use 150)
EXAMPLES = int(os.environ.get("DEVKIT_NUMERICS_EXAMPLES", "8"))

# ---- drawn dtypes and tile shapes (partitions: a few or all 128; free sizes up to 12) ---------------------

dtypes_any = st.sampled_from(ALL)
dtypes_float = st.sampled_from(FLOATS)
dtypes_int = st.sampled_from(INTS)
parts = st.one_of(st.integers(1, 6), st.just(128))
frees = st.integers(1, 12)
#: the leading ``@given`` arguments of a property test on (p, f) tiles: ``data`` draws the tiles' values
#: (:func:`arrays`), ``p`` the partitions, ``f`` the free size
TILE = {"data": st.data(), "p": parts, "f": frees}
#: ``TILE`` for the data-movement properties of both generations: up to 16 x 16, within the limits of every
#: copy and transpose path
MOVE_TILE = {"data": st.data(), "p": st.integers(1, 16), "f": st.integers(1, 16)}
#: the leading ``@given`` arguments of a TensorE property: ``data``, contraction ``k``, stationary free
#: size ``m``, moving free size ``n``
MATMUL = {"data": st.data(), "k": st.integers(1, 16), "m": st.integers(1, 8), "n": st.integers(1, 12)}


def special_bits(d: np.dtype) -> list[int]:
    vals = np.array(special_floats(d), dtype=np.float64).astype(np.float32)
    with np.errstate(over="ignore"):
        b = bits(vals.astype(d)).tolist()
    return sorted(set(b) | set(nan_bits(d)))


@st.composite
def arrays(draw, dtype, shape, *, finite: bool = False, lo: float | None = None, hi: float | None = None):
    """Values of ``dtype``: special values, raw bit patterns (floats) or the full range (ints), and
    ordinary moderate values.  Up to 16 elements are drawn by hypothesis (so failures shrink to
    them); larger tiles are filled from a drawn seed with the same mixture.  ``finite`` leaves out
    inf/NaN; ``lo``/``hi`` bound the magnitudes of finite values for ops whose result would
    otherwise depend on an undocumented order (whether a partial sum or product overflows)."""
    d = np.dtype(dtype)
    n = int(np.prod(shape))
    k = min(n, 16)
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    if d in FLOATS:
        u = np.dtype(f"u{d.itemsize}")
        specials = special_bits(d)
        moderate = st.floats(-8, 8, width=32).map(lambda v: int(bits(np.array([v], np.float32).astype(d))[0]))
        elem = st.one_of(st.sampled_from(specials), st.integers(0, 2 ** (8 * d.itemsize) - 1), moderate)
        head = draw(st.lists(elem, min_size=k, max_size=k))
        pick = rng.integers(0, 3, size=n - k)
        raw = rng.integers(0, 2 ** (8 * d.itemsize), size=n - k, dtype=np.uint64)
        spec = np.asarray(specials, np.uint64)[rng.integers(0, len(specials), size=n - k)]
        mod = bits(rng.uniform(-8, 8, size=n - k).astype(np.float32).astype(d)).astype(np.uint64)
        tail = np.where(pick == 0, spec, np.where(pick == 1, raw, mod))
        a = np.concatenate([np.asarray(head, np.uint64), tail]).astype(u)
        a = rng.permutation(a).view(d).reshape(shape)
        if finite or lo is not None:
            x = a.astype(np.float32)
            bad = ~np.isfinite(x)
            if lo is not None:  # finite values outside [lo, hi] (inf and NaN stay unless ``finite``)
                with np.errstate(invalid="ignore"):
                    out = np.isfinite(x) & ((np.abs(x) > hi) | ((np.abs(x) < lo) & (x != 0)))
                bad = (bad & finite) | out
            a = np.where(bad, np.float32(1.5), x).astype(d)
        return a
    info = np.iinfo(d)
    top, bot = int(info.max), int(info.min)
    if hi is not None:
        top, bot = min(top, int(hi)), max(bot, -int(hi))
    specials = [v for v in special_ints(d) if bot <= v <= top] or [0]
    head = draw(st.lists(st.one_of(st.sampled_from(specials), st.integers(bot, top)), min_size=k, max_size=k))
    pick = rng.integers(0, 2, size=n - k)
    tail = np.where(
        pick == 0,
        np.asarray(specials, np.int64)[rng.integers(0, len(specials), size=n - k)],
        rng.integers(bot, top, size=n - k, endpoint=True, dtype=np.int64),
    )
    a = np.concatenate([np.asarray(head, np.int64), tail])
    return rng.permutation(a).astype(d).reshape(shape)


# ---- comparisons ----------------------------------------------------------------------------------------


def tensor_scalar_operands(data, p: int, vec: bool) -> tuple:
    """The two operands of a tensor_scalar case: operand0 a (p, 1) fp32 column when ``vec``, else one of
    a few fp32 scalars (signed zero, an inexact value, one near the fp32 maximum); operand1 a scalar."""
    o0 = (
        data.draw(arrays(F32, (p, 1)))
        if vec
        else np.float32(data.draw(st.sampled_from([2.0, -0.0, 0.1, 3e38])))
    )
    return o0, np.float32(data.draw(st.sampled_from([1.0, -7.5, 0.0])))


def matmul_operands(data, d1, d2, k: int, m: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    """The (k, m) stationary of ``d1`` and the (k, n) moving operand of ``d2`` of a TensorE case, their finite
    values of magnitude <= 2**20 (whether a partial sum overflows, or inf - inf arises, depends on the
    undocumented order)."""
    stationary = data.draw(arrays(d1, (k, m), lo=0.0, hi=2.0**20))
    return stationary, data.draw(arrays(d2, (k, n), lo=0.0, hi=2.0**20))


def bitvec_operands(data, op: str, d1: np.dtype, d2: np.dtype, shape: tuple[int, int]) -> tuple:
    """``(x, y, result dtype)`` of a bitvec case: the promoted integer type, or ``d1`` for both when the
    pair has no common integer type; shift amounts in [0, bits of d1) (reading: larger amounts are
    undocumented)."""
    od = promote(d1, d2)
    if od in FLOATS:
        d2 = od = d1
    x = data.draw(arrays(d1, shape))
    if "shift" in op:
        n = int(np.prod(shape))
        amounts = data.draw(st.lists(st.integers(0, 8 * np.dtype(d1).itemsize - 1), min_size=n, max_size=n))
        return x, np.asarray(amounts).astype(d2).reshape(shape), od
    return x, data.draw(arrays(d2, shape)), od


def assert_same(got, want, what: str = "") -> None:
    """Bit-exact (any NaN matches any NaN); dtype and shape too."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype, f"{what}: dtype {got.dtype} != {want.dtype}"
    assert got.shape == want.shape, f"{what}: shape {got.shape} != {want.shape}"
    ok = same_values(got, want)
    if not ok.all():
        i = tuple(int(v[0]) for v in np.nonzero(~ok))
        raise AssertionError(
            f"{what}: {int((~ok).sum())} of {ok.size} differ, first at {i}: {got[i]!r} vs {want[i]!r}"
        )


def assert_bits(got, want, what: str = "") -> None:
    """Same bits, NaN payloads included (copies and data movement)."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape, (
        f"{what}: {got.dtype}{got.shape} vs {want.dtype}{want.shape}"
    )
    np.testing.assert_array_equal(bits(got), bits(want), err_msg=what)


def assert_close(got, want64, dtype, n_ulp: float = 2.0, slack=None, what: str = "") -> None:
    got = np.asarray(got)
    assert got.dtype == np.dtype(dtype), f"{what}: dtype {got.dtype} != {np.dtype(dtype)}"
    w = np.broadcast_to(np.asarray(want64, np.float64), got.shape)
    ok = close_values(got, w, dtype, n_ulp)
    if slack is not None:
        with np.errstate(invalid="ignore"):
            ok |= (
                np.isfinite(w)
                & np.isfinite(got.astype(np.float64))
                & (np.abs(got.astype(np.float64) - w) <= slack)
            )
    if not ok.all():
        i = tuple(int(v[0]) for v in np.nonzero(~ok))
        raise AssertionError(
            f"{what}: {int((~ok).sum())} of {ok.size} outside tolerance, first at {i}: {got[i]!r} vs {w[i]!r}"
        )


def act_tolerance(name: str, x32: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Absolute slack for an approximated activation: 64 fp32 epsilons of the size of the terms its
    definition combines (x for x*g(x) forms, 1 for bounded ones, the result itself otherwise).  The
    definitions cancel (gelu(-5) = -5 * Phi(-5) ~ -1.4e-6 comes from 1 + erf(-3.5)), so a relative
    bound alone would demand more than any fp32 evaluation, the hardware's included, can give."""
    x = np.abs(np.asarray(x32, np.float64))
    scale = {
        "gelu": x,
        "gelu_apprx_tanh": x,
        "gelu_apprx_sigmoid": x,
        "silu": x,
        "mish": x,
        "gelu_dx": 1 + x,
        "silu_dx": 1 + x,
        "sigmoid": 1.0,
        "tanh": 1.0,
        "erf": 1.0,
        "erf_dx": 1.0,
        "softplus": 1.0 + x,
        "sin": 1.0,
        "cos": 1.0,
        "arctan": 1.0,
    }.get(name, 0.0)
    with np.errstate(invalid="ignore", over="ignore"):
        return 64 * EPS32 * (np.abs(w) + scale)


def assert_activation(got, name: str, z32: np.ndarray, dtype) -> None:
    """An activation of the fp32 input ``z32`` written as ``dtype``: bit for bit for the exact activations
    (copy, abs, sign, relu, square), else within :func:`act_tolerance` of the float64 definition."""
    if name in EXACT_ACTIVATIONS:
        assert_same(got, cast(activation(name, z32).astype(np.float32), dtype), name)
    else:
        w = activation(name, z32)
        assert_close(got, w, dtype, slack=act_tolerance(name, z32, w), what=name)


def public_callables(module) -> set[str]:
    """Every public callable of an ``nl``/``nisa`` module of either generation, except classes (dtypes,
    enums, buffers) and submodules: the operations a coverage test must find a property test for."""
    return {
        name
        for name, obj in vars(module).items()
        if not (name.startswith("_") or inspect.ismodule(obj) or inspect.isclass(obj) or not callable(obj))
    }


def rerun_with_examples(paths: Iterable[object], examples: int = 150) -> subprocess.CompletedProcess:
    """Run the given suite files again in a subprocess with ``examples`` hypothesis examples per property
    (the suites' ``slow`` variant)."""
    env = {**os.environ, "DEVKIT_NUMERICS_EXAMPLES": str(examples)}
    cmd = [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", "-m", "not slow"]
    return subprocess.run([*cmd, *map(str, paths)], env=env, capture_output=True, text=True)


# ---- coverage maps shared by the Beta-1 and Beta-2 suites ---------------------------------------------------


def _by_test(table: dict[str, tuple[str, ...]]) -> dict[str, str]:
    return {op: test for test, ops in table.items() for op in ops}


#: Public ops both differential suites drive with a test of the same name (op -> test); each suite's
#: ``COVERED`` adds its element-wise name lists and the ops of its own generation.
SHARED_COVERAGE = _by_test(
    {
        "test_nl_where": ("where",),
        "test_nl_reductions": ("sum", "prod", "max", "min", "mean", "var", "all"),
        "test_data_movement": (
            *("load", "load_transpose2d", "copy", "transpose"),
            *("tensor_copy", "dma_copy", "dma_transpose", "nc_transpose"),
        ),
        "test_nl_broadcast_to_and_expand_dims": ("broadcast_to", "expand_dims"),
        "test_fills": ("full", "zeros", "ones", "zeros_like", "memset"),
        "test_nl_shared_constant_and_identity": ("shared_constant", "shared_identity_matrix"),
        "test_random_ops": ("rand", "dropout"),
        "test_matmul": ("matmul", "nc_matmul"),
        "test_nl_softmax": ("softmax",),
        "test_nl_rms_norm": ("rms_norm",),
        "test_nisa_activation": ("activation",),
        "test_nisa_activation_reduce": ("activation_reduce",),
        "test_nisa_tensor_tensor": ("tensor_tensor",),
        "test_nisa_tensor_scalar": ("tensor_scalar",),
        "test_nisa_scalar_tensor_tensor": ("scalar_tensor_tensor",),
        "test_nisa_tensor_tensor_scan": ("tensor_tensor_scan",),
        "test_nisa_tensor_scalar_cumulative": ("tensor_scalar_cumulative",),
        "test_nisa_tensor_reduce": ("tensor_reduce",),
        "test_nisa_tensor_partition_reduce": ("tensor_partition_reduce",),
        "test_nisa_tensor_scalar_reduce": ("tensor_scalar_reduce",),
        "test_nisa_bn_stats_and_bn_aggr": ("bn_stats", "bn_aggr"),
        "test_nisa_max8_find_index8_match_replace8": ("max8", "nc_find_index8", "nc_match_replace8"),
        "test_nisa_affine_select": ("affine_select",),
        "test_nisa_range_select": ("range_select",),
        "test_nisa_select_reduce": ("select_reduce",),
        "test_nisa_sequence_bounds": ("sequence_bounds",),
        "test_nisa_tensor_copy_predicated": ("tensor_copy_predicated",),
        "test_nisa_nc_stream_shuffle": ("nc_stream_shuffle",),
        "test_nisa_local_gather": ("local_gather",),
        "test_nisa_iota": ("iota",),
    }
)

#: Public callables of both generations' modules that are not operations on values, with the reason.
SHARED_NON_OPS = {
    **dict.fromkeys(("affine_range", "sequential_range", "static_range"), "loop iterator"),
    "ds": "index slice",
    "get_nc_version": "target query",
    **dict.fromkeys(("ndarray", "empty_like"), "uninitialised allocation"),
    "device_print": "debug output",
}
