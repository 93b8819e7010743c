"""``nisa.quantize_mx`` scales follow the OCP MX rule: biased exponent = group's largest fp32 exponent - Emax.

The ISA docstring defines the outputs "as in the OCP Microscaling standard"; the hardware goldens of
nki-samples @6905a68 (``tutorials/mxfp-matmul/mx_cpu_utils.py``) and nki-library @d2ad3a5
(``core/utils/mx_torch_common.py:193-213``, ``test/utils/mx_utils.py:49-78``, compared with zero tolerance by
``experimental/mxfp_subkernels/test_mxfp_load.py``) use Emax 8 (e4m3fn) / 15 (e5m2).  So a group whose
maximum has mantissa 1.75 or more saturates to the element type's largest value.
"""

from __future__ import annotations

import ml_dtypes
import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np
import pytest

EMAX = {"float8_e4m3fn_x4": 8, "float8_e5m2_x4": 15}
FMAX = {"float8_e4m3fn_x4": 448.0, "float8_e5m2_x4": 57344.0}
ELEMENT = {"float8_e4m3fn_x4": ml_dtypes.float8_e4m3fn, "float8_e5m2_x4": ml_dtypes.float8_e5m2}


@nki.jit(platform_target="trn3")
def quantize(x, x4):
    p, f = x.shape
    src = nl.ndarray((p, f), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=src, src=x)
    data = nl.ndarray((p, f // 4), dtype=x4, buffer=nl.sbuf)
    scale = nl.ndarray((p, f // 4), dtype=nl.uint8, buffer=nl.sbuf)
    nisa.memset(dst=scale, value=0)
    nisa.quantize_mx(dst=data, src=src, dst_scale=scale)
    out_d = nl.ndarray((p, f // 4), dtype=nl.uint32, buffer=nl.shared_hbm)
    out_s = nl.ndarray((p, f // 4), dtype=nl.uint8, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out_d, src=data.ap(pattern=[[f // 4, p], [1, f // 4]], dtype=nl.uint32))
    nisa.dma_copy(dst=out_s, src=scale)
    return out_d, out_s


def _group_input(top: float) -> np.ndarray:
    """``[32, 8]`` bf16: group (rows 0-7, packed element 0) has maximum ``top`` and a 0.25; group (rows 0-7,
    element 1) is all zero; the other groups hold ones."""
    x = np.ones((32, 8), dtype=np.float32)
    x[0:8, 0:4] = 0.25
    x[3, 2] = top
    x[0:8, 4:8] = 0.0
    return x.astype(ml_dtypes.bfloat16)


def _values(bits: np.ndarray, x4: str) -> np.ndarray:
    """uint32 containers -> the four element values of each (``[P, F, 4]`` float32)."""
    return bits.view(np.uint8).view(ELEMENT[x4]).astype(np.float32).reshape(*bits.shape, 4)


@pytest.mark.parametrize("x4", sorted(EMAX))
def test_scale_is_largest_exponent_minus_emax(x4):
    bits, scale = nki.simulate(quantize)(_group_input(1.5), getattr(nl, x4))
    assert scale[0, 0] == 127 - EMAX[x4]  # 1.5 = 1.5 * 2**0
    assert scale[0, 1] == 0  # all-zero group
    assert scale[1, 0] == 127 - EMAX[x4]  # the ones
    v = _values(bits, x4)
    assert v[3, 0, 2] == 1.5 * 2.0 ** EMAX[x4]  # exactly representable, not saturated
    assert v[0, 0, 0] == 0.25 * 2.0 ** EMAX[x4]
    assert (v[0:8, 1] == 0).all()


@pytest.mark.parametrize("x4", sorted(EMAX))
def test_a_group_maximum_at_mantissa_1_9_saturates(x4):
    bits, scale = nki.simulate(quantize)(_group_input(1.9), getattr(nl, x4))
    assert scale[0, 0] == 127 - EMAX[x4]
    v = _values(bits, x4)
    assert v[3, 0, 2] == FMAX[x4]  # 1.9 * 2**Emax is past the largest finite value
    assert v[0, 0, 0] == 0.25 * 2.0 ** EMAX[x4]
