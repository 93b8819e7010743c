"""Strategies, comparisons and budgets shared by the differential numerics suites
(``test_numerics_differential.py``: element-wise, reductions, selection; ``test_numerics_movement.py``:
data movement, creation, TensorE, fused helpers).  The tolerances are explained in the docstring of
``test_numerics_differential.py``."""

from __future__ import annotations

import _numerics_ref as ref
import neuronxcc.nki as nki
import numpy as np
from _nki_support import apply_kernel
from _numerics_draw import (  # noqa: F401  (re-exported: the value strategy and comparisons live there)
    EPS32,
    EXAMPLES,
    arrays,
    assert_bits,
    assert_close,
    assert_same,
)
from _numerics_draw import act_tolerance as _act_tolerance  # noqa: F401
from hypothesis import settings

ACT, ALU32, VUNARY = ref.ACTIVATION_DEFS, ref.FP32_ALU, ref.VECTOR_UNARY
INT32_OPS, PRED_OPS, int32_ref = ref.INT32_NATIVE, ref.PREDICATES, ref.int32_native
EX = settings(max_examples=EXAMPLES)
APPLY_TRN2 = nki.jit(platform_target="trn2")(apply_kernel.func)


def run2(fn, *xs):
    """``apply`` on trn2 (NeuronCore-v3 APIs)."""
    return APPLY_TRN2(list(xs), fn)


def _np_dtype(d):
    return None if d is None else np.dtype(d)
