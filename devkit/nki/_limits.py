"""``nl.fp32`` and ``nl.bfp16``: the finite limits of float32 and bfloat16 under the names NKI gives them
(``nl.fp32.min`` is also ``nisa.range_select``'s default fill value)."""

from __future__ import annotations

import numpy as np

from devkit import dtypes as _dt


class fp32:
    """``nl.fp32.min``: the most negative finite float32 (bit pattern 0xff7fffff)."""

    min = float(np.finfo(np.float32).min)
    max = float(np.finfo(np.float32).max)


class bfp16:
    min = float(np.finfo(_dt.bfloat16).min)
