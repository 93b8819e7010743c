"""Shared helpers for the NKI API tests (test_nl_*, test_isa_*, test_indexing, test_rules).

Kernels in the tests are written like real NKI code; these helpers only build inputs and NumPy
references, compare results bit-exactly or with a tolerance, run one-op kernels for sweeps (also shared by
the Beta-1 numerics suites), and find the source line a negative test expects the simulator to blame.
"""

from __future__ import annotations

import inspect
import os

import ml_dtypes
import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
import numpy as np
import pytest
from hypothesis import settings
from hypothesis import strategies as st

BF16 = np.dtype(ml_dtypes.bfloat16)
FP8 = np.dtype(ml_dtypes.float8_e4m3)
FP8_E5 = np.dtype(ml_dtypes.float8_e5m2)
F16 = np.dtype(np.float16)
F32 = np.dtype(np.float32)
FLOATS = (F32, BF16, F16)
INTS = (
    np.dtype(np.int8),
    np.dtype(np.int16),
    np.dtype(np.int32),
    np.dtype(np.uint8),
    np.dtype(np.uint16),
    np.dtype(np.uint32),
)

#: default hypothesis budget (the whole suite must stay fast on 2 cores); heavy sweeps use SLOW.
#: DEVKIT_NKI_EXAMPLES=300 raises the default budget for a one-off stress run.
FAST = settings(max_examples=int(os.environ.get("DEVKIT_NKI_EXAMPLES", "15")))
SLOW = settings(max_examples=max(150, int(os.environ.get("DEVKIT_NKI_EXAMPLES", "0"))))
slow = pytest.mark.slow

partitions = st.integers(1, 128)
frees = st.one_of(st.integers(1, 9), st.integers(10, 520))
small_frees = st.integers(1, 64)
seeds = st.integers(0, 2**31 - 1)
float_dtypes = st.sampled_from(FLOATS)
int_dtypes = st.sampled_from(INTS)
#: the ``@given`` arguments every random-tile property starts from: ``p`` partitions, ``f`` free size and the
#: ``seed`` of its values (:func:`rng_of`)
TILE = {"p": partitions, "f": frees, "seed": seeds}


def rng_of(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


def rand(rng: np.random.Generator, shape, dtype, lo: float = -4.0, hi: float = 4.0) -> np.ndarray:
    """Random values of ``dtype`` (floats uniform in [lo, hi), ints over a range that fits)."""
    d = np.dtype(dtype)
    if d.kind in "iu":
        info = np.iinfo(d)
        a, b = max(int(lo), int(info.min)), min(int(hi), int(info.max))
        return rng.integers(a, b + 1, size=shape).astype(d)
    if d == np.bool_:
        return rng.random(shape) < 0.5
    return rng.uniform(lo, hi, size=shape).astype(np.float32).astype(d)


def bit_patterns(rng: np.random.Generator, shape, dtype) -> np.ndarray:
    """Random values over the whole range of the integer ``dtype`` (operands of bitwise ops and shifts)."""
    info = np.iinfo(dtype)
    return rand(rng, shape, dtype, info.min, info.max)


def cast(x, dtype) -> np.ndarray:
    """Round an fp32 computation to ``dtype`` the way the engines write it (RNE; ints RNE + saturate)."""
    d = np.dtype(dtype)
    x = np.asarray(x)
    if d == np.bool_:
        return x != 0
    if d.kind in "iu":
        info = np.iinfo(d)
        r = np.nan_to_num(np.rint(x.astype(np.float64)), nan=0.0, posinf=info.max, neginf=info.min)
        return np.clip(r, info.min, info.max).astype(d)
    with np.errstate(over="ignore", invalid="ignore"):
        return x.astype(np.float32).astype(d)


def as_tile(a) -> np.ndarray:
    """On-chip tiles stay at least 2-D: a NumPy result of shape (P,) is the (P, 1) tile."""
    a = np.asarray(a)
    return a.reshape(a.shape[0], 1) if a.ndim == 1 else a


def f32(x) -> np.ndarray:
    return np.asarray(x).astype(np.float32)


def assert_exact(actual, expected) -> None:
    """Same dtype, same shape, same values bit for bit (NaN matches NaN)."""
    actual, expected = np.asarray(actual), np.asarray(expected)
    assert actual.dtype == expected.dtype, f"dtype {actual.dtype} != expected {expected.dtype}"
    assert actual.shape == expected.shape, f"shape {actual.shape} != expected {expected.shape}"
    if actual.dtype.kind in "iub":
        np.testing.assert_array_equal(actual, expected)
        return
    a, e = actual.astype(np.float32), expected.astype(np.float32)
    same = (a == e) | (np.isnan(a) & np.isnan(e))
    if not same.all():
        i = tuple(int(v[0]) for v in np.nonzero(~same))
        raise AssertionError(
            f"{int((~same).sum())} of {a.size} values differ, first at {i}: actual {a[i]!r} expected {e[i]!r}"
        )


def assert_close(actual, expected, dtype=None, rtol=None, atol=None) -> None:
    """Close within the precision of ``dtype`` (default: the actual dtype)."""
    actual, expected = np.asarray(actual), np.asarray(expected)
    d = np.dtype(dtype or actual.dtype)
    assert actual.shape == expected.shape, f"shape {actual.shape} != expected {expected.shape}"
    if rtol is None:
        rtol = {F32: 1e-5, BF16: 1.6e-2, F16: 2e-3}.get(d, 1e-5)
    if atol is None:
        atol = {F32: 1e-5, BF16: 1e-2, F16: 1e-3}.get(d, 1e-5)
    np.testing.assert_allclose(
        actual.astype(np.float64), expected.astype(np.float64), rtol=rtol, atol=atol, equal_nan=True
    )


# ---- a one-op kernel for sweeps ------------------------------------------------------------------------


@nki.jit
def apply_kernel(inputs, fn):
    """Load every input (HBM -> SBUF), call ``fn(*tiles)`` and store the returned tile."""
    tiles = [nl.load(x) for x in inputs]
    res = fn(*tiles)
    out = nl.ndarray(res.shape, dtype=res.dtype, buffer=nl.shared_hbm)
    nl.store(out, value=res)
    return out


def apply(fn, *arrays):
    """Run ``fn`` on SBUF tiles of ``arrays`` in the simulator; return the stored result."""
    return apply_kernel(list(arrays), fn)


@nki.jit
def load_kernel(x, dtype, transpose=False):
    """``nl.load(x, dtype=dtype)`` (``dtype`` None: x's own), or ``nl.load_transpose2d`` when ``transpose``,
    stored unchanged into a tensor of the tile's shape and dtype."""
    t = nl.load_transpose2d(x, dtype=dtype) if transpose else nl.load(x, dtype=dtype)
    out = nl.ndarray(t.shape, dtype=t.dtype, buffer=nl.shared_hbm)
    nl.store(out, value=t)
    return out


@nki.jit
def dma_kernel(x, dtype):
    """One HBM -> HBM ``nisa.dma_copy`` of ``x`` into a tensor of ``dtype`` (None: x's own; a DMA cast when
    the dtypes differ)."""
    out = nl.ndarray(x.shape, dtype=dtype or x.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=x)
    return out


@nki.jit
def bn_stats_kernel(a):
    """``nisa.bn_stats`` of the loaded ``a`` [P, F] (fp32, [P, 6]) and ``nisa.bn_aggr`` of those ([P, 2])."""
    s_h = nl.ndarray((a.shape[0], 6), dtype=nl.float32, buffer=nl.shared_hbm)
    m_h = nl.ndarray((a.shape[0], 2), dtype=nl.float32, buffer=nl.shared_hbm)
    s = nisa.bn_stats(nl.load(a), dtype=nl.float32)
    nl.store(s_h, value=s)
    nl.store(m_h, value=nisa.bn_aggr(s))
    return s_h, m_h


@nki.jit
def stream_shuffle_kernel(src, old, mask):
    """``nisa.nc_stream_shuffle`` of ``src`` into a tile loaded from ``old`` (row ``q*32+i`` takes ``src``'s
    row ``q*32+mask[i]``; mask 255 keeps ``old``'s row); returns the shuffled tile."""
    out = nl.ndarray(src.shape, dtype=src.dtype, buffer=nl.shared_hbm)
    dst = nl.load(old)
    nisa.nc_stream_shuffle(src=nl.load(src), dst=dst, shuffle_mask=mask)
    nl.store(out, value=dst)
    return out


# ---- blame checks for negative tests -------------------------------------------------------------------


def line_of(func, marker: str) -> int:
    """Line number (in its file) of the one source line of ``func`` that contains ``marker``."""
    func = getattr(func, "func", func)  # a nki.jit Kernel wraps the function
    lines, start = inspect.getsourcelines(func)
    hits = [start + i for i, text in enumerate(lines) if marker in text]
    assert len(hits) == 1, f"marker {marker!r} found {len(hits)} times in {func.__name__}"
    return hits[0]


def assert_blames(excinfo, func, marker: str = "# <- blame") -> None:
    """The KernelError points at the marked line of ``func`` (file and line)."""
    err = excinfo.value
    f = getattr(func, "func", func)
    want_file = inspect.getsourcefile(f)
    assert err.filename is not None and os.path.samefile(err.filename, want_file), (
        f"blamed file {err.filename}, expected {want_file}"
    )
    want = line_of(func, marker)
    assert err.lineno == want, f"blamed line {err.lineno}, expected {want}: {err}"


def simulate_raises(cls, kernel, *args, rule: str | None = None, **kw):
    """Simulate ``kernel`` expecting exactly ``cls`` (and, given, its ``rule``), blamed on the function's
    ``# <- blame`` line; returns the error for further checks."""
    import devkit

    with pytest.raises(cls) as e:
        devkit.simulate(kernel, *args, **kw)
    assert type(e.value) is cls, f"expected {cls.__name__}, got {type(e.value).__name__}: {e.value}"
    assert rule is None or e.value.rule == rule, f"{type(e.value).__name__} [{e.value.rule}]: {e.value}"
    assert_blames(e, kernel)
    return e.value


def uninit_raises(kernel, *args, marker: str = "# <- blame", observed: str | None = None, lnc: int = 1):
    """Run ``kernel`` expecting exactly an ``uninitialized-read`` UninitializedReadError blamed on its ``marker``
    line (and naming the ``observed`` line, given); a Beta-2 ``nki.jit`` kernel through ``nki.simulate`` (as
    ``kernel[lnc]`` when ``lnc > 1``), a Beta-1 one through ``devkit.simulate``.  Returns the error."""
    import devkit
    from devkit.errors import UninitializedReadError
    from devkit.nki.beta2 import Kernel as Beta2Kernel

    with pytest.raises(UninitializedReadError) as e:
        if isinstance(kernel, Beta2Kernel):
            import nki as nki2

            nki2.simulate(kernel[lnc] if lnc > 1 else kernel)(*args)
        else:
            devkit.simulate(kernel, *args)
    err = e.value
    assert type(err) is UninitializedReadError and err.rule == "uninitialized-read", err
    assert_blames(e, kernel, marker)
    if observed is not None:
        names_observer(err, kernel, observed)
    return err


def names_observer(err, kernel, marker: str) -> None:
    """The message names the observing line (``marker`` of ``kernel``) besides the blamed origin."""
    assert f"at {err.filename}:{line_of(kernel, marker)}" in str(err), err
