"""Strategies, comparisons and budgets shared by the differential numerics suites
(``test_numerics_differential.py``: element-wise, reductions, selection; ``test_numerics_movement.py``:
data movement, creation, TensorE, fused helpers).  The tolerances are explained in the docstring of
``test_numerics_differential.py``."""

from __future__ import annotations

import os

import _numerics_ref as ref
import neuronxcc.nki as nki
import numpy as np
from _nki_support import apply_kernel
from _numerics_draw import (  # noqa: F401  (re-exported: the value strategy and comparisons live there)
    EPS32,
    arrays,
    assert_bits,
    assert_close,
    assert_same,
)
from _numerics_draw import act_tolerance as _act_tolerance  # noqa: F401
from _numerics_ref import (
    ALL,
    FLOATS,
    INTS,
)
from hypothesis import settings
from hypothesis import strategies as st

ACT, ALU32, VUNARY = ref.ACTIVATION_DEFS, ref.FP32_ALU, ref.VECTOR_UNARY
INT32_OPS, PRED_OPS, int32_ref = ref.INT32_NATIVE, ref.PREDICATES, ref.int32_native
EXAMPLES = int(os.environ.get("DEVKIT_NUMERICS_EXAMPLES", "8"))
EX = settings(max_examples=EXAMPLES)
APPLY_TRN2 = nki.jit(platform_target="trn2")(apply_kernel.func)

# ---- strategies -----------------------------------------------------------------------------------------

dtypes_any = st.sampled_from(ALL)
dtypes_float = st.sampled_from(FLOATS)
dtypes_int = st.sampled_from(INTS)
parts = st.one_of(st.integers(1, 6), st.just(128))
frees = st.integers(1, 12)


def run2(fn, *xs):
    """``apply`` on trn2 (NeuronCore-v3 APIs)."""
    return APPLY_TRN2(list(xs), fn)


def _np_dtype(d):
    return None if d is None else np.dtype(d)
