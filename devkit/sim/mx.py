"""Numerics of the microscaling (MX) formats: packing, unpacking, quantisation and MX scales.

An MX tensor is a tile of packed x4 elements (:data:`devkit.dtypes.PACKED_X4`) plus a tile of 8-bit
scales.  One scale covers a group of 8 partitions x 4 packed values (32 values); its value ``s`` (a
``float8_e8m0fnu`` / ``uint8`` exponent) multiplies the group by ``2 ** (s - 127)``.  Sources:
``reference/nki_beta2.md`` §5.4 (``quantize_mx``, ``nc_matmul_mx``) and [MX] there.

Scale layout in SBUF: for a data tile of at most 32 partitions the scales sit in ``P // 8`` rows; for
more, the scales of quadrant ``q`` (32 partitions) sit in rows ``32*q .. 32*q + 3``.
"""

from __future__ import annotations

import numpy as np

from devkit import dtypes as dt

#: Largest exponent (unbiased) of a normal value of each MX element type.
EMAX = {"float8_e5m2": 15, "float8_e4m3fn": 8, "float4_e2m1fn": 2}
#: Largest finite magnitude of each MX element type.
FMAX = {"float8_e5m2": 57344.0, "float8_e4m3fn": 448.0, "float4_e2m1fn": 6.0}
GROUP_PARTITIONS = 8
GROUP_VALUES = 4


def unpack(bits: np.ndarray, packed: object) -> np.ndarray:
    """Container bits ``[P, F]`` of an x4 type -> float32 values ``[P, F, 4]``."""
    b = np.ascontiguousarray(bits).view(np.uint8).reshape((*bits.shape, -1))
    el = packed.element  # type: ignore[attr-defined]
    if dt.name_of(packed) == "float4_e2m1fn_x4":
        nib = np.stack([b & 0xF, b >> 4], axis=-1).reshape((*bits.shape, 4))
        return nib.astype(np.uint8).view(el).astype(np.float32)
    return b.view(el).astype(np.float32)


def pack(values: np.ndarray, packed: object) -> np.ndarray:
    """float32 values ``[P, F, 4]`` (already representable) -> container bits ``[P, F]``."""
    el = packed.element  # type: ignore[attr-defined]
    q = np.ascontiguousarray(values.astype(el)).view(np.uint8)
    if dt.name_of(packed) == "float4_e2m1fn_x4":
        n = q.reshape((*values.shape[:-1], 2, 2)) & 0xF
        by = (n[..., 0] | (n[..., 1] << 4)).astype(np.uint8)
        return np.ascontiguousarray(by).view(np.uint16).reshape(values.shape[:-1])
    return q.view(np.uint32).reshape(values.shape[:-1])


def scale_rows(partitions: int) -> np.ndarray:
    """SBUF row of the scale of each 8-partition group of a data tile with ``partitions`` partitions."""
    groups = np.arange(partitions // GROUP_PARTITIONS)
    if partitions <= 32:
        return groups
    return (groups // 4) * 32 + groups % 4


def scale_factors(scales: np.ndarray, partitions: int) -> np.ndarray:
    """Per data partition, per packed element: ``2 ** (s - 127)`` (shape ``[P, F]``)."""
    rows = scale_rows(partitions)
    s = scales[rows].astype(np.float64)  # [P // 8, F]
    return np.repeat(np.exp2(s - 127.0), GROUP_PARTITIONS, axis=0)


def dequantize(bits: np.ndarray, packed: object, scales: np.ndarray) -> np.ndarray:
    """MX tile -> float64 values ``[P, F, 4]``."""
    v = unpack(bits, packed).astype(np.float64)
    return v * scale_factors(scales, bits.shape[0])[:, :, None]


def quantize(values: np.ndarray, packed: object) -> tuple[np.ndarray, np.ndarray]:
    """float32 ``[P, 4F]`` -> (container bits ``[P, F]``, scales ``[P // 8, F]`` as uint8).

    The OCP MX rule the ISA docstring names: a group's biased scale exponent is the largest fp32 exponent
    field in the group minus ``EMAX`` (clamped to ``[0, 255]``), i.e. ``2 ** (floor(log2(amax)) - EMAX)``
    for normal values, so the group maximum lands in ``[2**EMAX, 2**(EMAX+1))`` and values above the
    element type's largest finite magnitude saturate to it; an all-zero group gets exponent 0 (factor
    2**-127).  Values are rounded to nearest even.  Sources: aws-neuron-sdk ``nki.isa.quantize_mx``
    ("as defined in the OCP Microscaling standard"); the hardware goldens of nki-samples @6905a68
    ``tutorials/mxfp-matmul/mx_cpu_utils.py`` (``get_mx_max_exp``, ``quantize_mx_golden``) and nki-library
    @d2ad3a5 ``src/nkilib_src/nkilib/core/utils/mx_torch_common.py:193-213`` and ``test/utils/mx_utils.py:49-78``,
    which ``experimental/mxfp_subkernels/test_mxfp_load.py`` compares with zero tolerance.
    """
    p, f4 = values.shape
    f = f4 // GROUP_VALUES
    elname = dt.name_of(packed.element)  # type: ignore[attr-defined]
    v = np.ascontiguousarray(values, dtype=np.float32).reshape(
        p // GROUP_PARTITIONS, GROUP_PARTITIONS, f, GROUP_VALUES
    )
    exp_field = (v.view(np.uint32) >> np.uint32(23)) & np.uint32(0xFF)
    top = exp_field.max(axis=(1, 3)).astype(np.int64)  # [P // 8, F]
    biased = np.clip(top - EMAX[elname], 0, 255).astype(np.uint8)
    factor = np.exp2(biased.astype(np.float64) - 127.0)[:, None, :, None]
    q = np.clip(v / factor, -FMAX[elname], FMAX[elname])
    q = q.reshape(p, f, GROUP_VALUES)
    return pack(q, packed), biased
