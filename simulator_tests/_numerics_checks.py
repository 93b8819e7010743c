"""The expected result of an operation and its comparison, written once for both generations' differential
suites (``test_numerics_differential.py`` for Beta 1, ``test_numerics_differential_beta2*.py`` for Beta 2).

The two NKI generations name and call their instructions differently, so each suite keeps its own tests
(drawing the inputs and running the op its generation's way); where the documented arithmetic is the same,
the test hands the simulator's output to a ``check_*`` function here.  The tolerances are those the
suites' docstrings justify: bit-exact where one fp32 computation and one cast are documented, the n-term
fp32 summation bound where the order of additions is not.
"""

from __future__ import annotations

from collections.abc import Iterable

import _numerics_ref as ref
import numpy as np
from _numerics_draw import EPS32, assert_activation, assert_close, assert_same, public_callables
from _numerics_ref import BOOL, F32, INTS, cast, to_f32

#: value ranges drawn for nl reductions whose result could overflow depending on the undocumented order
#: of the fp32 partial results (sums and means up to 2**100, products in [2**-8, 2**8], variances up to
#: 2**20); the others draw every value
REDUCTION_BOUNDS = {
    "sum": (0.0, 2.0**100),
    "mean": (0.0, 2.0**100),
    "prod": (2.0**-8, 2.0**8),
    "var": (0.0, 2.0**20),
}

#: nisa reduction names: Beta 1 passes NumPy functions (``np.max``), Beta 2 ``nl`` ones (``nl.maximum``)
_REDUCE_NAMES = {"max": "maximum", "min": "minimum"}


def sum_bound(x32: np.ndarray, axis) -> np.ndarray:
    """The classical bound on the error of an n-term fp32 sum in any order: ``n * eps32 * sum |x|``."""
    n = np.prod([x32.shape[a] for a in axis])
    with np.errstate(over="ignore", invalid="ignore"):
        return n * EPS32 * np.abs(x32.astype(np.float64)).sum(axis=axis, keepdims=True)


def check_nl_unary(got, name: str, x: np.ndarray, od) -> None:
    """nl.<unary>: x read as fp32, the function, one rounding into ``od``; exact for the VectorE unary
    ops, activations within the activation tolerance."""
    x32 = to_f32(x)
    if name in ref.VECTOR_UNARY:
        assert_same(got, cast(ref.VECTOR_UNARY[name](x32), od), name)
    else:
        assert_activation(got, name, x32, od)


def check_nl_reduction(got, name: str, x: np.ndarray, keep: bool, dtype) -> None:
    """nl.<reduction> of ``x`` [P, F, G] over the free axes (1, 2): max/min/all exact, the others within
    the n-term summation bound; ``keep``: the result kept its reduced axes (else it is (P, 1))."""
    p, f, g = x.shape
    axis = (1, 2)
    x32 = to_f32(x).astype(np.float64)
    with np.errstate(all="ignore"):
        want = {
            "all": lambda: np.all(to_f32(x) != 0, axis=axis, keepdims=True),
            "max": lambda: np.max(to_f32(x), axis=axis, keepdims=True),
            "min": lambda: np.min(to_f32(x), axis=axis, keepdims=True),
            "sum": lambda: x32.sum(axis=axis, keepdims=True),
            "prod": lambda: x32.prod(axis=axis, keepdims=True),
            "mean": lambda: x32.mean(axis=axis, keepdims=True),
            "var": lambda: x32.var(axis=axis, keepdims=True),
        }[name]()
    want = want if keep else want.reshape(p, 1)
    od = BOOL if name == "all" else (F32 if name in ("mean", "var") and dtype in INTS else dtype)
    if name in ("all", "max", "min"):
        assert_same(got, cast(want, od) if od != BOOL else want, name)
        return
    if name == "prod":
        slack = 2 * f * g * EPS32 * np.abs(want)
    elif name == "var":
        with np.errstate(over="ignore"):
            slack = 4 * f * g * EPS32 * (x32**2).mean(axis=axis, keepdims=True)
    else:
        slack = sum_bound(to_f32(x), axis) / (f * g if name == "mean" else 1)
    slack = slack if keep else slack.reshape(p, 1)
    assert_close(got, want, od, slack=slack, what=name)


def check_partition_reduce(got, op: str, x: np.ndarray, dtype) -> None:
    """nisa.tensor_partition_reduce of ``x`` [P, F] to (1, F): bitwise_and and max exact, add and average
    within the n-term summation bound."""
    op = _REDUCE_NAMES.get(op, op)
    if op == "bitwise_and":
        assert_same(got, np.bitwise_and.reduce(x, axis=0, keepdims=True), op)
    elif op == "maximum":
        assert_same(got, cast(np.max(to_f32(x), axis=0, keepdims=True), dtype), op)
    else:
        with np.errstate(all="ignore"):
            w = to_f32(x).astype(np.float64).sum(axis=0, keepdims=True) / (
                x.shape[0] if op == "average" else 1
            )
        assert_close(got, w, dtype, slack=sum_bound(to_f32(x), (0,)), what=op)


def check_tensor_scalar_reduce(out, reduced, x: np.ndarray, red: str, dtype) -> None:
    """nisa.tensor_scalar_reduce with ``op0=multiply, operand0=-2``: ``out = x * -2`` (fp32, cast, exact)
    and ``reduced`` the fp32 results reduced over the free axis (add within the n-term bound)."""
    with np.errstate(all="ignore"):
        v = to_f32(x) * np.float32(-2)
    assert_same(out, cast(v, dtype), "tensor_scalar_reduce out")
    red = _REDUCE_NAMES.get(red, red)
    if red == "add":
        with np.errstate(all="ignore"):
            assert_close(
                reduced, v.astype(np.float64).sum(1, keepdims=True), F32, slack=sum_bound(v, (1,)), what="sum"
            )
    else:
        assert_same(reduced, {"maximum": np.max, "minimum": np.min}[red](v, axis=1, keepdims=True), red)


def check_bn_stats_and_aggr(stats, mean_var, x: np.ndarray) -> None:
    """bn_stats (count, mean, count*variance of the even- and the odd-index elements) and bn_aggr (mean,
    population variance) of ``x`` [P, F] in fp32, within a summation-order bound."""
    f = x.shape[1]
    x64 = to_f32(x).astype(np.float64)
    scale = 8 * f * EPS32 * (1 + (x64**2).sum(axis=1, keepdims=True))
    assert_close(stats, ref.bn_stats(x64), F32, slack=scale, what="bn_stats")
    wmv = np.stack([x64.mean(axis=1), x64.var(axis=1)], axis=1)
    assert_close(mean_var, wmv, F32, slack=scale, what="bn_aggr")


def check_softmax(got, x: np.ndarray, dtype) -> None:
    """nl.softmax over the free axis: exp(x - max) / sum in fp32, cast once; within the fp32 evaluation of
    exp and an f-term sum, relative to the result."""
    f = x.shape[1]
    want = ref.softmax(to_f32(x))
    assert_close(got, want, dtype, slack=(4 * f + 16) * EPS32 * (want + 1e-30), what="softmax")


def check_rms_norm(got, x: np.ndarray, w: np.ndarray, dtype) -> None:
    """nl.rms_norm over the free axis with n = F and epsilon 1e-6: ``x * rsqrt(sum(x^2)/n + eps) * w``
    (``w`` [P, F] or [1, F]), within the fp32 evaluation of an f-term sum, relative to the result."""
    f = x.shape[1]
    x64, w64 = to_f32(x).astype(np.float64), to_f32(w).astype(np.float64)
    r = 1 / np.sqrt((x64**2).sum(axis=1, keepdims=True) / f + 1e-6)
    want = x64 * r * w64
    assert_close(got, want, dtype, slack=(4 * f + 32) * EPS32 * np.abs(want) + 1e-30, what="rms_norm")


def check_matmul(
    got, a: np.ndarray, b: np.ndarray, what: str, terms: int | None = None, times: int = 1
) -> None:
    """TensorE ``times`` x ``a.T @ b`` (``a`` the (k, m) stationary, ``b`` the (k, n) moving operand): fp32
    products of the stored values accumulated in fp32 PSUM, an fp32 ``got``; the order of the additions is
    not documented, so within ``times`` x the n-term bound for ``terms`` (default k) additions."""
    a64, b64 = to_f32(a).astype(np.float64), to_f32(b).astype(np.float64)
    slack = times * (a.shape[0] if terms is None else terms) * EPS32 * (np.abs(a64).T @ np.abs(b64))
    assert_close(got, times * (a64.T @ b64), F32, slack=slack, what=what)


def assert_every_op_covered(
    module, covered: dict[str, str], non_ops: dict[str, str], tests: Iterable[str], also: Iterable[str] = ()
) -> None:
    """Every public callable of ``module`` is in ``covered`` (op -> the test that drives it) or in
    ``non_ops`` (with the reason), and every test ``covered`` (or ``also``) names is among ``tests``."""
    names = public_callables(module)
    missing = sorted(n for n in names if n not in covered and n not in non_ops)
    assert not missing, f"public {module.__name__} ops without a differential test: {missing}"
    defined = set(tests)
    dangling = sorted({t for t in (*covered.values(), *also) if t not in defined})
    assert not dangling, f"COVERED names tests that do not exist: {dangling}"
