"""Shared pieces of the Beta-2 numerics suites (``test_numerics_differential_beta2*.py``,
``test_numerics_regressions_beta2.py``): drawn shapes and dtypes, the example budget, the one-op
``@nki.jit`` kernels run with ``nki.simulate``, and the tolerance helpers their docstrings justify."""

from __future__ import annotations

import _numerics_ref as ref
import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np
from _beta2_support import to_hbm, to_sbuf
from _numerics_draw import EXAMPLES
from _numerics_ref import F32
from hypothesis import settings
from hypothesis import strategies as st

EX = settings(max_examples=EXAMPLES, deadline=None)

engines = st.sampled_from(["unknown", "vector", "gpsimd"])


# ---- one-op kernels ---------------------------------------------------------------------------------------


@nki.jit
def isa_kernel(inputs, fn, outs):
    """DMA each input to SBUF, allocate SBUF ``dst`` tensors of ``outs`` ((shape, dtype) pairs), run
    ``fn(*dsts, *tiles)`` (the one instruction under test) and DMA the dsts out (same dtype: bit moves)."""
    tiles = [to_sbuf(x) for x in inputs]
    dsts = [nl.ndarray(s, dtype=d, buffer=nl.sbuf) for s, d in outs]
    fn(*dsts, *tiles)
    res = [to_hbm(d) for d in dsts]
    return res[0] if len(res) == 1 else tuple(res)


@nki.jit
def nl_kernel(inputs, fn):
    """DMA each input to SBUF, call the ``nl`` wrapper ``fn(*tiles)`` (it returns a new tile) and DMA the
    result out (copied to SBUF first when the wrapper returns a PSUM tile)."""
    tiles = [to_sbuf(x) for x in inputs]
    r = fn(*tiles)
    if nl.is_psum(r):
        s = nl.ndarray(r.shape, dtype=r.dtype, buffer=nl.sbuf)
        nisa.tensor_copy(s, r)
        r = s
    return to_hbm(r)


@nki.jit
def dma_hbm_kernel(x, dtype):
    """One HBM -> HBM ``dma_copy`` of ``x`` into a tensor of ``dtype`` (a DMA cast when the dtypes differ)."""
    out = nl.ndarray(x.shape, dtype=dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=x)
    return out


def run_isa(fn, inputs, *outs):
    return nki.simulate(isa_kernel)(list(inputs), fn, list(outs))


def run_nl(fn, *inputs):
    return nki.simulate(nl_kernel)(list(inputs), fn)


def eng(name: str):
    return getattr(nisa.engine, name)


def fp32_ulps(w: np.ndarray, n: int) -> np.ndarray:
    """``n`` fp32 ulps of ``w``: an approximated fp32 result written into an integer dtype is that far off
    before the cast rounds it."""
    with np.errstate(all="ignore"):
        return n * ref.ulp(np.nan_to_num(np.asarray(w, np.float64), posinf=0, neginf=0), F32)
